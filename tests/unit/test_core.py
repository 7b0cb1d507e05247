"""judge_pair / resolve_tiebreak end to end with a scripted judge: input checks, concurrency, outcomes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from pairjudge.agents import validation as agent_validation
from pairjudge.agents.core import both_orders, gather_in_order, judge_pair, resolve_tiebreak
from pairjudge.agents.errors import InputRejected, JudgeRejected, JudgeUnavailable
from pairjudge.agents.facts import DecisionFacts
from pairjudge.agents.judge import JudgeRequest
from pairjudge.agents.pair_checks import check_pair, resolve_rubric
from pairjudge.agents.policy import Policy
from pairjudge.agents.prompts import template_hash
from pairjudge.agents.sampling import audit_fraction
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.schemas import CandidatePair, ControlUpdate, PairVerdict, ReviewRequest, RubricRef, Task, TieBreakRequest
from tests.unit.factories import (
    FIRST_ID,
    FIRST_OUTPUT,
    MODEL_METADATA,
    SECOND_ID,
    h2h_reply,
    h2h_rubric,
    make_pair,
    pairwise_reply,
    pairwise_rubric,
    per_order,
    tiebreak_reply,
    tone_reply,
    tone_rubric,
)

X, Y = FIRST_ID, SECOND_ID
ALL_A = {"safety": "A", "instruction_adherence": "A", "conciseness": "A", "readability": "A"}
ALL_B = {"safety": "B", "instruction_adherence": "B", "conciseness": "B", "readability": "B"}


# --- input checks -----------------------------------------------------------------------------


def test_check_pair_returns_the_inline_rubric() -> None:
    pair = make_pair()
    assert check_pair(pair, Policy(), {}) == pair.rubric


def test_named_rubric_resolves_from_the_catalog() -> None:
    rubric = h2h_rubric()
    pair = make_pair(rubric=RubricRef(name="support-h2h"))
    assert resolve_rubric(pair, {"support-h2h": rubric}) is rubric
    with pytest.raises(InputRejected) as caught:
        resolve_rubric(pair, {"other": rubric})
    assert caught.value.reason == "unknown_rubric"
    assert "support-h2h" in caught.value.detail


def test_output_size_limit_is_inclusive() -> None:
    limit = len(FIRST_OUTPUT)
    check_pair(make_pair(outputs=(FIRST_OUTPUT, "x")), Policy(max_output_chars=limit), {})
    with pytest.raises(InputRejected) as caught:
        check_pair(make_pair(outputs=(FIRST_OUTPUT, "x")), Policy(max_output_chars=limit - 1), {})
    assert caught.value.reason == "oversized_output"
    assert X in caught.value.detail
    assert FIRST_OUTPUT not in caught.value.detail


@pytest.mark.parametrize(
    ("overrides", "policy", "reason"),
    [
        ({"task": Task(prompt="   ")}, Policy(), "empty_prompt"),
        ({"task": Task(prompt="p" * 101)}, Policy(max_prompt_chars=100), "oversized_prompt"),
        ({"task": Task(prompt="p", context="c" * 101)}, Policy(max_prompt_chars=100), "oversized_context"),
    ],
)
def test_unjudgeable_pairs_are_rejected(overrides: dict[str, Any], policy: Policy, reason: str) -> None:
    with pytest.raises(InputRejected) as caught:
        check_pair(make_pair(**overrides), policy, {})
    assert caught.value.reason == reason


def test_lone_surrogates_are_rejected() -> None:
    # pydantic already refuses them when decoding; this guards pairs built in code (model_construct/copy).
    pair = make_pair()
    first, second = pair.candidates
    broken = pair.model_copy(update={"candidates": (first.model_copy(update={"output": "bad \ud800 text"}), second)})
    with pytest.raises(InputRejected) as caught:
        check_pair(broken, Policy(), {})
    assert caught.value.reason == "malformed_text"


async def test_rejected_pair_never_reaches_the_judge() -> None:
    judge = ScriptedJudge([])
    with pytest.raises(InputRejected):
        await judge_pair(make_pair(outputs=("x" * 50, "y")), judge, Policy(max_output_chars=10))
    assert judge.calls == 0


# --- primary stage ----------------------------------------------------------------------------


def _consistent(pair: CandidatePair | None = None, ab_conf: float = 0.9, ba_conf: float = 0.8) -> ScriptedJudge:
    pair = pair or make_pair()
    # AB: A (= X) wins; BA: B (= X) wins. Both orders prefer X.
    return ScriptedJudge(per_order(pair, tone_reply("A", ab_conf), tone_reply("B", ba_conf)), model="judge-m")


async def test_consistent_confident_orders_give_a_primary_verdict() -> None:
    pair = make_pair()
    judge = _consistent(pair)
    decision = await judge_pair(pair, judge, Policy())
    out = decision.outcome
    assert isinstance(out, PairVerdict)
    assert (out.winner, out.loser, out.winner_role, out.decided_by, out.consistent) == (
        X,
        Y,
        "champion",
        "primary",
        True,
    )
    assert out.confidence == pytest.approx(0.85)
    assert out.judge.model == "judge-m"
    assert out.judge.prompt_template_hash == template_hash("tone_style", datamark=True)
    ab, ba = out.orderings
    assert (ab.order_shown, ab.shown_as_a, ab.mapped_winner) == ("AB", X, X)
    assert (ba.order_shown, ba.shown_as_a, ba.raw_winner, ba.mapped_winner) == ("BA", Y, "B", X)
    assert decision.stage == "primary"
    assert decision.audit_copy is None
    assert len(decision.calls) == 2
    assert {c.order for c in decision.calls} == {"AB", "BA"}
    assert decision.facts == DecisionFacts(
        pair_id=pair.pair_id,
        stage="primary",
        outcome="verdict",
        decided_by="primary",
        consistent=True,
        flip=False,
        prompt_hash=template_hash("tone_style", datamark=True),
        rubric_kind="tone_style",
        audit_sample=False,
        calls=2,
        invalid_replies=0,
        winner=X,
        confidence=decision.facts.confidence,
        judged_winner=X,
        judged_confidence=decision.facts.confidence,
        primary_threshold=0.7,
        # 0.85 is at least the margin (0.1) above the threshold: a confident verdict, at the base share.
        inclusion_probability=0.05,
        sampling_class="confident",
    )
    assert decision.facts.confidence == pytest.approx(0.85)
    assert decision.evaluation is not None
    assert (decision.evaluation.name, decision.evaluation.score_label) == ("pairwise_tone_style", "champion")
    assert decision.evaluation.score_value == pytest.approx(0.85)
    assert decision.evaluation.explanation == out.justification


async def test_position_bias_flip_becomes_a_tiebreak_request() -> None:
    pair = make_pair()
    judge = ScriptedJudge(per_order(pair, tone_reply("A"), tone_reply("A")))  # always the first position
    decision = await judge_pair(pair, judge, Policy())
    out = decision.outcome
    assert isinstance(out, TieBreakRequest)
    assert out.reason == "position_inconsistent"
    assert out.pair == pair
    assert [o.mapped_winner for o in out.primary] == [X, Y]
    assert decision.facts.flip is True
    assert decision.facts.outcome == "tiebreak"
    assert decision.facts.reason == "position_inconsistent"
    assert decision.evaluation is not None
    assert decision.evaluation.score_label == "tiebreak"


async def test_low_confidence_becomes_a_tiebreak_request() -> None:
    pair = make_pair()
    decision = await judge_pair(pair, _consistent(pair, 0.7, 0.69), Policy())
    assert isinstance(decision.outcome, TieBreakRequest)
    assert decision.outcome.reason == "low_confidence"


async def test_disabled_tiebreak_sends_to_review() -> None:
    pair = make_pair()
    decision = await judge_pair(pair, _consistent(pair, 0.5, 0.5), Policy(tiebreak_enabled=False))
    assert isinstance(decision.outcome, ReviewRequest)
    assert decision.outcome.reason == "tiebreak_disabled"
    assert decision.facts.policy_overrode == "tiebreak"


async def test_invalid_ordering_after_two_reasks_goes_to_review() -> None:
    pair = make_pair()
    judge = ScriptedJudge(per_order(pair, '```json\n{"winner": "A"', tone_reply("B")))
    decision = await judge_pair(pair, judge, Policy())
    out = decision.outcome
    assert isinstance(out, ReviewRequest)
    assert out.reason == "ordering_invalid"
    assert out.stage == "primary"
    assert [c.order for c in decision.calls].count("AB") == 3  # 1 ask + 2 re-asks
    assert decision.facts.invalid_replies == 3
    ab = out.orderings[0]
    assert not ab.valid
    assert ab.retries == 2
    assert ab.error_kind == "invalid_reply"
    assert ab.error is not None
    assert out.last_justification == "Output B follows the style guide more closely."


async def test_reask_can_rescue_an_ordering() -> None:
    pair = make_pair()
    judge = ScriptedJudge(per_order(pair, ["Sure! here it is", tone_reply("A")], tone_reply("B")))
    decision = await judge_pair(pair, judge, Policy())
    assert isinstance(decision.outcome, PairVerdict)
    assert decision.outcome.orderings[0].retries == 1
    reasked = [r for r in judge.requests if r.attempt == 1]
    assert len(reasked) == 1
    assert "not valid JSON" in reasked[0].messages[-1].content


@pytest.mark.parametrize(
    ("exc", "reason"),
    [(JudgeUnavailable("connect timeout"), "judge_unavailable"), (JudgeRejected("401 unauthorized"), "judge_rejected")],
)
async def test_judge_failure_goes_to_review_with_its_kind(exc: Exception, reason: str) -> None:
    pair = make_pair()
    judge = ScriptedJudge(per_order(pair, exc, tone_reply("B")))
    decision = await judge_pair(pair, judge, Policy())
    assert isinstance(decision.outcome, ReviewRequest)
    assert decision.outcome.reason == reason
    assert judge.calls == 2  # the failing ordering was not re-asked


async def test_kappa_guard_reviews_but_still_records_the_judges_answer() -> None:
    pair = make_pair()
    decision = await judge_pair(pair, _consistent(pair), Policy(kappa_guard_tripped=True))
    out = decision.outcome
    assert isinstance(out, ReviewRequest)
    assert out.reason == "kappa_guard"
    assert [o.mapped_winner for o in out.orderings] == [X, X]
    assert decision.facts.decided_by == "human"
    assert decision.facts.policy_overrode == "verdict"


async def test_audit_share_one_samples_every_verdict_and_zero_none() -> None:
    pair = make_pair()
    sampled = await judge_pair(pair, _consistent(pair), Policy(audit_share=1.0))
    assert isinstance(sampled.outcome, PairVerdict)
    copy = sampled.audit_copy
    assert copy is not None
    assert copy.audit
    assert copy.reason == "audit_sample"
    assert copy.orderings == sampled.outcome.orderings
    assert sampled.facts.audit_sample is True
    none = await judge_pair(pair, _consistent(pair), Policy(audit_share=0.0))
    assert none.audit_copy is None


async def test_audit_sampling_is_deterministic_per_pair() -> None:
    pair = make_pair()
    share = audit_fraction(pair.pair_id)
    below = await judge_pair(pair, _consistent(pair), Policy(audit_share=share))
    above = await judge_pair(pair, _consistent(pair), Policy(audit_share=min(1.0, share + 1e-9)))
    assert below.audit_copy is None
    assert above.audit_copy is not None


async def test_head_to_head_pair_end_to_end() -> None:
    rubric = h2h_rubric()
    pair = make_pair(rubric=rubric)
    judge = ScriptedJudge(per_order(pair, h2h_reply("B", 0.9), h2h_reply("A", 0.9)))
    decision = await judge_pair(pair, judge, Policy())
    out = decision.outcome
    assert isinstance(out, PairVerdict)
    assert out.winner == Y
    assert out.rubric_kind == "head_to_head"
    assert out.orderings[0].dimension_scores["accuracy"] == {X: 0.0, Y: 1.0}
    assert judge.requests[0].response_schema["properties"]["criteria_breakdown"]["required"] == [
        c.name for c in rubric.criteria
    ]


async def test_head_to_head_tie_goes_to_tiebreak() -> None:
    pair = make_pair(rubric=h2h_rubric())
    judge = ScriptedJudge(per_order(pair, h2h_reply("TIE", 0.9), h2h_reply("A", 0.9)))
    decision = await judge_pair(pair, judge, Policy())
    assert isinstance(decision.outcome, TieBreakRequest)
    assert decision.outcome.reason == "tie"


async def test_pairwise_with_wrong_criteria_is_reasked_then_reviewed() -> None:
    rubric = pairwise_rubric()
    pair = make_pair(rubric=rubric)
    judge = ScriptedJudge(per_order(pair, pairwise_reply("A", criteria=("accuracy",)), pairwise_reply("B")))
    decision = await judge_pair(pair, judge, Policy())
    assert isinstance(decision.outcome, ReviewRequest)
    assert decision.outcome.reason == "ordering_invalid"
    last_ab = [r for r in judge.requests if r.order == "AB"][-1]
    assert last_ab.attempt == 2
    assert 'missing: ["specificity", "actionability"]' in last_ab.messages[-1].content


async def test_named_rubric_is_snapshotted_into_forwarded_events() -> None:
    rubric = tone_rubric()
    pair = make_pair(rubric=RubricRef(name="brand-voice"))
    judge = ScriptedJudge(per_order(pair, tone_reply("A"), tone_reply("A")))
    decision = await judge_pair(pair, judge, Policy(), {"brand-voice": rubric})
    out = decision.outcome
    assert isinstance(out, TieBreakRequest)
    assert out.pair.rubric == rubric
    assert out.pair.pair_id == pair.pair_id
    assert decision.facts.rubric_kind == "tone_style"


async def test_no_model_metadata_reaches_any_judge_request() -> None:
    seen: list[JudgeRequest] = []
    for rubric, replies in (
        (tone_rubric(), (tone_reply("A"), tone_reply("A"))),
        (h2h_rubric(), (h2h_reply("A"), h2h_reply("A"))),
        (pairwise_rubric(), (pairwise_reply("A"), pairwise_reply("A"))),
    ):
        pair = make_pair(rubric=rubric)
        judge = ScriptedJudge(per_order(pair, *replies))
        decision = await judge_pair(pair, judge, Policy())
        assert isinstance(decision.outcome, TieBreakRequest)
        tiebreak_judge = ScriptedJudge(per_order(pair, tiebreak_reply(ALL_A), tiebreak_reply(ALL_B)))
        await resolve_tiebreak(decision.outcome, tiebreak_judge, Policy())
        seen += judge.requests + tiebreak_judge.requests
    assert {r.template for r in seen} == {"tone_style", "head_to_head", "pairwise", "tiebreak"}
    for request in seen:
        text = "\n".join(m.content for m in request.messages)
        for secret in MODEL_METADATA:
            assert secret not in text, (request.template, secret)


async def test_orderings_run_concurrently() -> None:
    pair = make_pair()
    arrived = {"AB": anyio.Event(), "BA": anyio.Event()}

    async def rendezvous(request: JudgeRequest) -> None:
        # Each ordering waits until the other has also reached the judge; run one after the other,
        # the first would wait forever and fail the timeout.
        mine = request.order
        arrived[mine].set()
        with anyio.fail_after(5):
            await arrived["BA" if mine == "AB" else "AB"].wait()

    judge = ScriptedJudge(per_order(pair, tone_reply("A"), tone_reply("B")), on_request=rendezvous)
    decision = await judge_pair(pair, judge, Policy())
    assert isinstance(decision.outcome, PairVerdict)
    assert arrived["AB"].is_set()
    assert arrived["BA"].is_set()


async def test_gather_in_order_returns_results_in_job_order_not_finishing_order() -> None:
    # Jurors' orderings are paired up by position: a result out of place would pair AB of one judge
    # with BA of another.
    finished: list[int] = []

    def job(index: int, delay: float) -> Callable[[], Awaitable[int]]:
        async def run() -> int:
            await anyio.sleep(delay)
            finished.append(index)
            return index

        return run

    results = await gather_in_order([job(0, 0.06), job(1, 0.0), job(2, 0.03)])
    assert finished == [1, 2, 0]
    assert results == [0, 1, 2]


async def test_both_orders_reraises_a_bug_unwrapped() -> None:
    async def run(order: str) -> str:
        if order == "BA":
            raise RuntimeError("bug in a judge adapter")
        await anyio.lowlevel.checkpoint()
        return order

    with pytest.raises(RuntimeError, match="bug in a judge adapter"):
        await both_orders(run)


async def test_primary_then_tiebreak_end_to_end() -> None:
    pair = make_pair()
    primary = await judge_pair(pair, ScriptedJudge(per_order(pair, tone_reply("A"), tone_reply("A"))), Policy())
    assert isinstance(primary.outcome, TieBreakRequest)
    judge = ScriptedJudge(per_order(pair, tiebreak_reply(ALL_B), tiebreak_reply(ALL_A)))
    final = await resolve_tiebreak(primary.outcome, judge, Policy(audit_share=1.0))
    out = final.outcome
    assert isinstance(out, PairVerdict)
    assert (out.winner, out.decided_by, out.tiebreak_reason) == (Y, "tiebreak", "position_inconsistent")
    assert len(out.orderings) == 4
    assert final.audit_copy is not None
    assert final.audit_copy.stage == "tiebreak"
    assert final.evaluation is not None
    assert final.evaluation.name == "pairwise_tiebreak"


async def test_a_redelivered_pair_gets_the_same_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    # The edge relies on this: a pair judged again after a rebalance (before its outcome was recorded)
    # must not come out another way from the core itself, audit sampling included. The scripted judge
    # reports no latency, so the measured wall time is frozen: it is a measurement, not the decision.
    monkeypatch.setattr(agent_validation, "time", SimpleNamespace(perf_counter=lambda: 0.0))
    pair = make_pair()
    policy = Policy(audit_share=0.5)
    first = await judge_pair(pair, _consistent(pair), policy)
    again = await judge_pair(pair, _consistent(pair), policy)
    stamps = {"decided_at", "requested_at"}
    assert again.outcome.model_dump(exclude=stamps) == first.outcome.model_dump(exclude=stamps)
    assert (again.audit_copy is None) == (first.audit_copy is None)
    assert again.facts == first.facts


# --- policy -----------------------------------------------------------------------------------


def test_policy_defaults_follow_the_design() -> None:
    policy = Policy()
    assert (policy.primary_confidence_threshold, policy.tiebreak_confidence_threshold, policy.max_reasks) == (
        0.7,
        0.6,
        2,
    )
    assert policy.tiebreak_enabled
    assert not policy.kappa_guard_tripped


def test_policy_applies_live_control_updates() -> None:
    policy = Policy()
    assert not policy.apply(ControlUpdate(key="tiebreak_enabled", value=False)).tiebreak_enabled
    assert (
        policy.apply(ControlUpdate(key="tiebreak_confidence_threshold", value=0.65)).tiebreak_confidence_threshold
        == 0.65
    )
    assert (
        policy.apply(ControlUpdate(key="primary_confidence_threshold", value=0.8)).primary_confidence_threshold == 0.8
    )
    assert policy.apply(ControlUpdate(key="audit_share", value=0.05)).audit_share == 0.05
    with pytest.raises(ValueError, match="within"):
        policy.apply(ControlUpdate(key="audit_share", value=1.5))
    with pytest.raises(ValueError, match="needs a number"):
        policy.apply(ControlUpdate(key="audit_share", value=True))
    with pytest.raises(ValueError, match="needs a boolean"):
        policy.apply(ControlUpdate(key="tiebreak_enabled", value=0.0))


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="max_reasks"):
        Policy(max_reasks=-1)
    with pytest.raises(ValueError, match="primary_confidence_threshold"):
        Policy(primary_confidence_threshold=1.2)
