"""Juries (agents.jury): several judges per rubric, each judging both orders, deciding by majority."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from pydantic import ValidationError

from pairjudge.agents import validation as agent_validation
from pairjudge.agents.core import Decision, judge_pair, resolve_tiebreak
from pairjudge.agents.errors import InputRejected, JudgeRejected, JudgeUnavailable
from pairjudge.agents.judge import Judge, JudgeRequest
from pairjudge.agents.jury import JUROR_PROVIDER, jury_info, position_lean, required_votes, tally
from pairjudge.agents.policy import Policy
from pairjudge.agents.prompts import template_hash
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.schemas import (
    CandidatePair,
    JudgeInfo,
    JuryVote,
    OrderingResult,
    PairVerdict,
    ReviewRequest,
    TieBreakRequest,
)
from tests.unit.factories import (
    FIRST_ID,
    SECOND_ID,
    Answer,
    h2h_reply,
    h2h_rubric,
    make_pair,
    per_order,
    tiebreak_reply,
)

X, Y = FIRST_ID, SECOND_ID
BAD = '{"winner": "A"'  # never validates: the ordering stays invalid after its re-asks
ALL_B = {"safety": "B", "instruction_adherence": "B", "conciseness": "B", "readability": "B"}


def _pair() -> CandidatePair:
    # Head-to-head allows TIE, so every juror behaviour (vote, flip, tie, invalid) can be scripted.
    return make_pair(rubric=h2h_rubric())


def _juror(pair: CandidatePair, ab: Answer, ba: Answer, model: str, **kwargs: Any) -> ScriptedJudge:
    # A fixed reported latency keeps latency figures deterministic, so decisions can be compared whole.
    return ScriptedJudge(per_order(pair, ab, ba), model=model, latency_s=0.01, **kwargs)


def votes_for(pair: CandidatePair, who: str, model: str, conf: tuple[float, float] = (0.9, 0.8)) -> ScriptedJudge:
    """A consistent juror: the candidate ``who`` wins in both orders (A in AB, B in BA for X)."""
    ab, ba = ("A", "B") if who == X else ("B", "A")
    return _juror(pair, h2h_reply(ab, conf[0]), h2h_reply(ba, conf[1]), model)


def flips(pair: CandidatePair, model: str, letter: str = "A") -> ScriptedJudge:
    """A position-biased juror: whatever sits in ``letter`` wins in both orders."""
    return _juror(pair, h2h_reply(letter, 0.9), h2h_reply(letter, 0.9), model)


def ties(pair: CandidatePair, model: str) -> ScriptedJudge:
    return _juror(pair, h2h_reply("TIE", 0.6), h2h_reply("A", 0.8), model)


def invalid(pair: CandidatePair, model: str) -> ScriptedJudge:
    return _juror(pair, BAD, h2h_reply("A", 0.9), model)


def _vote_summary(votes: tuple[JuryVote, ...]) -> list[tuple[str, str | None, bool, str | None, bool | None]]:
    return [(v.judge.model, v.vote, v.abstained, v.abstain_reason, v.agreed_with_majority) for v in votes]


# --- deciding ---------------------------------------------------------------------------------


async def test_unanimous_jury_gives_a_primary_verdict() -> None:
    pair = _pair()
    judges = [votes_for(pair, X, "m1"), votes_for(pair, X, "m2", (0.7, 0.7)), votes_for(pair, X, "m3", (1.0, 1.0))]
    decision = await judge_pair(pair, judges, Policy())
    out = decision.outcome
    assert isinstance(out, PairVerdict)
    assert (out.winner, out.loser, out.decided_by, out.consistent) == (X, Y, "primary", True)
    assert out.confidence == pytest.approx((0.85 + 0.7 + 1.0) / 3)
    assert out.judge == JudgeInfo(
        provider=JUROR_PROVIDER, model="m1+m2+m3", prompt_template_hash=template_hash("head_to_head", datamark=True)
    )
    assert [(o.answered_by_model, o.order_shown) for o in out.orderings] == [
        ("m1", "AB"),
        ("m1", "BA"),
        ("m2", "AB"),
        ("m2", "BA"),
        ("m3", "AB"),
        ("m3", "BA"),
    ]
    assert _vote_summary(out.jury) == [
        ("m1", X, False, None, True),
        ("m2", X, False, None, True),
        ("m3", X, False, None, True),
    ]
    assert [v.lean for v in out.jury] == [None, None, None]
    assert [v.confidence for v in out.jury] == pytest.approx([0.85, 0.7, 1.0])
    assert out.jury[1].orderings == out.orderings[2:4]
    assert out.justification.count("[AB: A=") == 3
    assert len(decision.calls) == 6
    assert [c.requested_model for c in decision.calls] == ["m1", "m1", "m2", "m2", "m3", "m3"]
    assert decision.facts.jury_size == 3
    assert decision.facts.jury_abstentions == 0
    assert decision.facts.consistent is True
    assert decision.facts.flip is False
    assert decision.facts.decided_by == "primary"
    assert decision.evaluation is not None
    assert decision.evaluation.score_value == pytest.approx(out.confidence)
    assert all(j.calls == 2 for j in judges)


async def test_two_of_three_majority_records_the_flipping_jurors_abstention() -> None:
    pair = _pair()
    judges = [votes_for(pair, Y, "m1"), flips(pair, "m2"), votes_for(pair, Y, "m3", (0.7, 0.6))]
    decision = await judge_pair(pair, judges, Policy())
    out = decision.outcome
    assert isinstance(out, PairVerdict)
    assert out.winner == Y
    assert out.consistent is False  # a juror abstained
    # Only the majority voters' confidence counts: (0.85 + 0.65) / 2, not diluted by the flipper's 0.9.
    assert out.confidence == pytest.approx(0.75)
    assert _vote_summary(out.jury) == [
        ("m1", Y, False, None, True),
        ("m2", None, True, "position_inconsistent", None),
        ("m3", Y, False, None, True),
    ]
    assert out.jury[1].lean == "A"
    assert out.jury[1].confidence == pytest.approx(0.9)
    assert len(out.orderings) == 6
    # The verdict is explained by the majority, not by the juror that flipped.
    assert out.justification.count("[AB: A=") == 2
    assert decision.facts.jury_abstentions == 1
    assert decision.facts.flip is True
    assert decision.facts.consistent is False


async def test_a_dissenting_juror_disagrees_with_the_majority_without_abstaining() -> None:
    pair = _pair()
    judges = [votes_for(pair, X, "m1"), votes_for(pair, X, "m2"), votes_for(pair, Y, "m3")]
    out = (await judge_pair(pair, judges, Policy())).outcome
    assert isinstance(out, PairVerdict)
    assert (out.winner, out.consistent) == (X, True)
    assert [v.agreed_with_majority for v in out.jury] == [True, True, False]
    assert not any(v.abstained for v in out.jury)


async def test_no_quorum_goes_to_tiebreak_carrying_the_votes() -> None:
    pair = _pair()
    judges = [votes_for(pair, X, "m1"), flips(pair, "m2", "A"), flips(pair, "m3", "B")]
    decision = await judge_pair(pair, judges, Policy())
    out = decision.outcome
    assert isinstance(out, TieBreakRequest)
    assert out.reason == "position_inconsistent"
    assert out.primary_judge.model == "m1+m2+m3"
    assert len(out.primary) == 6
    assert _vote_summary(out.jury) == [
        ("m1", X, False, None, None),  # no majority, so no agreement to record
        ("m2", None, True, "position_inconsistent", None),
        ("m3", None, True, "position_inconsistent", None),
    ]
    assert [v.lean for v in out.jury] == [None, "A", "B"]
    assert decision.facts.reason == "position_inconsistent"
    assert decision.facts.jury_abstentions == 2
    assert decision.evaluation is not None
    assert decision.evaluation.score_value == pytest.approx((0.85 + 0.9 + 0.9) / 3)


@pytest.mark.parametrize(
    ("behaviours", "reason"),
    [
        (("x", "tie", "tie"), "tie"),  # most abstentions were ties
        (("x", "tie", "flip"), "position_inconsistent"),  # a flip outranks a tie, as for one judge
        (("x", "tie", "invalid"), "tie"),
        (("x", "invalid", "invalid"), "invalid_verdict"),  # nobody flipped or tied: invalid replies
        (("x", "y"), "tie"),  # nobody abstained: the jurors split between the candidates
        (("x", "y", "x", "y"), "tie"),
    ],
)
async def test_no_quorum_reason_names_what_kept_the_jury_from_deciding(
    behaviours: tuple[str, ...], reason: str
) -> None:
    pair = _pair()
    make = {
        "x": lambda m: votes_for(pair, X, m),
        "y": lambda m: votes_for(pair, Y, m),
        "tie": lambda m: ties(pair, m),
        "flip": lambda m: flips(pair, m),
        "invalid": lambda m: invalid(pair, m),
    }
    judges = [make[b](f"m{i}") for i, b in enumerate(behaviours)]
    out = (await judge_pair(pair, judges, Policy())).outcome
    assert isinstance(out, TieBreakRequest)
    assert out.reason == reason
    assert len(out.jury) == len(behaviours)


async def test_each_abstention_reason_is_recorded_with_its_vote_and_confidence() -> None:
    pair = _pair()
    judges = [
        votes_for(pair, X, "voter"),
        flips(pair, "flipper", "B"),
        ties(pair, "tier"),
        invalid(pair, "broken"),
        _juror(pair, JudgeUnavailable("down"), h2h_reply("B", 0.9), "down"),
    ]
    out = (await judge_pair(pair, judges, Policy())).outcome
    assert isinstance(out, TieBreakRequest)  # 1 vote of 5: no quorum
    by_model = {v.judge.model: v for v in out.jury}
    assert [(m, v.vote, v.abstain_reason, v.lean) for m, v in by_model.items()] == [
        ("voter", X, None, None),
        ("flipper", None, "position_inconsistent", "B"),
        ("tier", "TIE", "tie", None),  # recorded as a TIE, but it is not a vote
        ("broken", None, "invalid", None),
        ("down", None, "invalid", None),
    ]
    assert by_model["tier"].confidence == pytest.approx(0.7)
    assert by_model["broken"].confidence is None
    assert by_model["broken"].orderings[0].retries == 2  # re-asked like a single judge first
    assert len(judges[3].requests) == 4  # 3 asks for the bad ordering + 1 for the good one


async def test_a_tie_is_not_a_vote_towards_the_majority() -> None:
    pair = _pair()
    # Two of three would be a majority if the ties counted as anything; one vote of three is not.
    out = (await judge_pair(pair, [votes_for(pair, X, "m1"), ties(pair, "m2"), ties(pair, "m3")], Policy())).outcome
    assert isinstance(out, TieBreakRequest)
    assert out.reason == "tie"


async def test_low_confidence_majority_goes_to_tiebreak_with_agreement_recorded() -> None:
    pair = _pair()
    judges = [votes_for(pair, X, "m1", (0.6, 0.7)), votes_for(pair, X, "m2", (0.7, 0.6)), votes_for(pair, Y, "m3")]
    decision = await judge_pair(pair, judges, Policy())
    out = decision.outcome
    assert isinstance(out, TieBreakRequest)
    assert out.reason == "low_confidence"
    assert [v.agreed_with_majority for v in out.jury] == [True, True, False]
    assert decision.evaluation is not None
    assert decision.evaluation.score_value == pytest.approx(0.65)


async def test_majority_confidence_exactly_at_the_threshold_is_a_verdict() -> None:
    pair = _pair()
    judges = [votes_for(pair, X, "m1", (0.65, 0.75)), votes_for(pair, X, "m2", (0.7, 0.7)), flips(pair, "m3")]
    out = (await judge_pair(pair, judges, Policy())).outcome
    assert isinstance(out, PairVerdict)
    assert out.confidence == pytest.approx(0.7)


async def test_all_jurors_invalid_goes_to_review() -> None:
    pair = _pair()
    decision = await judge_pair(pair, [invalid(pair, "m1"), invalid(pair, "m2")], Policy())
    out = decision.outcome
    assert isinstance(out, ReviewRequest)
    assert (out.reason, out.stage) == ("ordering_invalid", "primary")
    assert len(out.orderings) == 4
    assert out.judge is not None
    assert out.judge.model == "m1+m2"
    assert decision.facts.jury_abstentions == 2
    assert decision.facts.invalid_replies == 6


@pytest.mark.parametrize(
    ("exc", "reason"),
    [(JudgeUnavailable("connect timeout"), "judge_unavailable"), (JudgeRejected("401 unauthorized"), "judge_rejected")],
)
async def test_all_invalid_with_a_juror_down_or_refused_says_which(exc: Exception, reason: str) -> None:
    pair = _pair()
    judges = [invalid(pair, "m1"), _juror(pair, exc, h2h_reply("A"), "m2")]
    out = (await judge_pair(pair, judges, Policy())).outcome
    assert isinstance(out, ReviewRequest)
    assert out.reason == reason


async def test_a_majority_survives_a_broken_juror() -> None:
    pair = _pair()
    judges = [votes_for(pair, X, "m1"), votes_for(pair, X, "m2"), _juror(pair, JudgeUnavailable("x"), BAD, "m3")]
    out = (await judge_pair(pair, judges, Policy())).outcome
    assert isinstance(out, PairVerdict)
    assert (out.winner, out.consistent) == (X, False)
    assert out.jury[2].abstain_reason == "invalid"


# --- quorum -----------------------------------------------------------------------------------


def test_required_votes_is_a_strict_majority_of_all_jurors_by_default() -> None:
    assert [required_votes(n, None) for n in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]
    assert required_votes(5, 2) == 2
    with pytest.raises(ValueError, match="cannot be reached"):
        required_votes(3, 4)
    with pytest.raises(ValueError, match="at least one judge"):
        required_votes(0, None)
    with pytest.raises(ValueError, match="jury_quorum"):
        Policy(jury_quorum=0)


def _vote(model: str, vote: str | None, reason: Any = None) -> JuryVote:
    info = JudgeInfo(provider="p", model=model, prompt_template_hash="h")
    return JuryVote(judge=info, vote=vote, abstained=reason is not None, abstain_reason=reason, orderings=())


def test_tally_needs_the_quorum_and_an_outright_lead() -> None:
    votes = [_vote("a", X), _vote("b", X), _vote("c", Y), _vote("d", "TIE", "tie"), _vote("e", None, "invalid")]
    assert tally(votes, 2) == X
    assert tally(votes, 3) is None  # abstentions are not votes
    assert tally([_vote("a", X), _vote("b", Y)], 1) is None  # a low quorum cannot elect both
    assert tally([], 1) is None


async def test_configured_quorum_lets_a_plurality_of_a_large_jury_decide() -> None:
    pair = _pair()
    judges = [votes_for(pair, X, "m1"), votes_for(pair, X, "m2"), flips(pair, "m3"), flips(pair, "m4")]
    default = (await judge_pair(pair, judges, Policy())).outcome
    assert isinstance(default, TieBreakRequest)  # 2 of 4 is not a strict majority
    lowered = (await judge_pair(pair, judges, Policy(jury_quorum=2))).outcome
    assert isinstance(lowered, PairVerdict)
    assert lowered.winner == X


async def test_unreachable_quorum_or_empty_jury_fails_before_any_call() -> None:
    pair = _pair()
    judge = votes_for(pair, X, "m1")
    with pytest.raises(ValueError, match="cannot be reached"):
        await judge_pair(pair, [judge], Policy(jury_quorum=2))
    with pytest.raises(ValueError, match="at least one judge"):
        await judge_pair(pair, [], Policy())
    assert judge.calls == 0


async def test_rejected_pair_never_reaches_any_juror() -> None:
    pair = make_pair(outputs=("x" * 50, "y"), rubric=h2h_rubric())
    judges = [votes_for(pair, X, "m1"), votes_for(pair, X, "m2")]
    with pytest.raises(InputRejected):
        await judge_pair(pair, judges, Policy(max_output_chars=10))
    assert [j.calls for j in judges] == [0, 0]


# --- lean and jury identity -------------------------------------------------------------------


def _ordering(order: str, raw: str | None) -> OrderingResult:
    a, b = (X, Y) if order == "AB" else (Y, X)
    mapped = None if raw is None else {"A": a, "B": b}.get(raw, "TIE")
    return OrderingResult(
        order_shown=order,
        swapped=order == "BA",
        shown_as_a=a,
        shown_as_b=b,
        valid=raw is not None,
        raw_winner=raw,
        mapped_winner=mapped,
        confidence=None if raw is None else 0.9,
    )


@pytest.mark.parametrize(
    ("ab", "ba", "lean"),
    [("A", "A", "A"), ("B", "B", "B"), ("A", "B", None), ("B", "A", None), ("TIE", "TIE", None), ("A", None, None)],
)
def test_position_lean(ab: str, ba: str | None, lean: str | None) -> None:
    assert position_lean(_ordering("AB", ab), _ordering("BA", ba)) == lean


def test_jury_info_names_every_juror_and_a_jury_of_one_is_its_judge() -> None:
    m1 = ScriptedJudge([], model="m1", version="v1")
    m2 = ScriptedJudge([], model="m2", heuristic=True)
    info = jury_info([m1, m2], "hash")
    assert (info.provider, info.model, info.version, info.heuristic) == ("jury", "m1+m2", "v1+", True)
    assert jury_info([m2, ScriptedJudge([], model="m3")], "hash").version == ""
    single = jury_info([m1], "hash")
    assert (single.provider, single.model, single.version) == ("scripted", "m1", "v1")


def test_a_jury_vote_must_give_its_abstention_a_reason() -> None:
    info = JudgeInfo(provider="p", model="m", prompt_template_hash="h")
    with pytest.raises(ValidationError, match="abstain_reason"):
        JuryVote(judge=info, abstained=True, orderings=())
    with pytest.raises(ValidationError, match="abstain_reason"):
        JuryVote(judge=info, vote=X, abstained=False, abstain_reason="tie", orderings=())


async def test_jury_votes_survive_the_wire() -> None:
    pair = _pair()
    out = (
        await judge_pair(pair, [votes_for(pair, X, "m1"), flips(pair, "m2"), votes_for(pair, X, "m3")], Policy())
    ).outcome
    assert isinstance(out, PairVerdict)
    assert PairVerdict.model_validate_json(out.model_dump_json()) == out


# --- concurrency ------------------------------------------------------------------------------


async def test_every_juror_and_order_is_in_flight_at_once() -> None:
    pair = _pair()
    size = 3
    arrived: set[tuple[str, str]] = set()
    everyone = anyio.Event()

    def barrier(model: str) -> Any:
        async def wait(request: JudgeRequest) -> None:
            # Nobody answers until all 2*N calls have reached their judge: any sequencing deadlocks
            # here and fails the timeout.
            arrived.add((model, request.order))
            if len(arrived) == 2 * size:
                everyone.set()
            with anyio.fail_after(5):
                await everyone.wait()

        return wait

    judges = [_juror(pair, h2h_reply("A"), h2h_reply("B"), f"m{i}", on_request=barrier(f"m{i}")) for i in range(size)]
    decision = await judge_pair(pair, judges, Policy())
    assert isinstance(decision.outcome, PairVerdict)
    assert len(arrived) == 2 * size
    # Results come back in jury order whatever order the calls finished in.
    assert [o.answered_by_model for o in decision.outcome.orderings] == ["m0", "m0", "m1", "m1", "m2", "m2"]


async def test_a_bug_in_one_juror_cancels_the_rest_and_is_reraised_unwrapped() -> None:
    pair = _pair()
    cancelled = anyio.Event()

    async def hang(request: JudgeRequest) -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    class Broken(ScriptedJudge):
        # Fails in AB only: one bug, while the other five calls hang until cancelled.
        async def complete(self, request: JudgeRequest) -> Any:
            if request.order == "BA":
                await hang(request)
            await anyio.sleep(0.01)
            raise RuntimeError("bug in a judge adapter")

    hanging = [_juror(pair, h2h_reply("A"), h2h_reply("B"), f"m{i}", on_request=hang) for i in range(2)]
    judges: list[Judge] = [*hanging, Broken([])]
    with anyio.fail_after(5), pytest.raises(RuntimeError, match="bug in a judge adapter"):
        await judge_pair(pair, judges, Policy())
    assert cancelled.is_set()


# --- policy, audit and the tie-break stage ----------------------------------------------------


async def test_kappa_guard_and_disabled_tiebreak_apply_to_juries_as_to_one_judge() -> None:
    pair = _pair()
    unanimous = [votes_for(pair, X, "m1"), votes_for(pair, X, "m2")]
    guarded = await judge_pair(pair, unanimous, Policy(kappa_guard_tripped=True))
    assert isinstance(guarded.outcome, ReviewRequest)
    assert guarded.outcome.reason == "kappa_guard"
    assert len(guarded.outcome.orderings) == 4
    assert guarded.facts.policy_overrode == "verdict"
    split = [votes_for(pair, X, "m1"), votes_for(pair, Y, "m2")]
    disabled = await judge_pair(pair, split, Policy(tiebreak_enabled=False))
    assert isinstance(disabled.outcome, ReviewRequest)
    assert disabled.outcome.reason == "tiebreak_disabled"
    assert disabled.facts.policy_overrode == "tiebreak"


async def test_audit_sampling_copies_a_jury_verdict() -> None:
    pair = _pair()
    decision = await judge_pair(pair, [votes_for(pair, X, "m1"), votes_for(pair, X, "m2")], Policy(audit_share=1.0))
    assert decision.audit_copy is not None
    assert decision.audit_copy.reason == "audit_sample"
    assert len(decision.audit_copy.orderings) == 4


async def test_the_resolver_settles_a_jury_tiebreak_request() -> None:
    pair = _pair()
    primary = await judge_pair(pair, [votes_for(pair, X, "m1"), votes_for(pair, Y, "m2")], Policy())
    request = primary.outcome
    assert isinstance(request, TieBreakRequest)
    resolver = ScriptedJudge(per_order(pair, tiebreak_reply(ALL_B), tiebreak_reply()))
    final = await resolve_tiebreak(request, resolver, Policy())
    out = final.outcome
    assert isinstance(out, PairVerdict)
    assert (out.winner, out.decided_by, out.tiebreak_reason) == (Y, "tiebreak", "tie")
    assert len(out.orderings) == 6  # the jury's four primary orderings, then the tie-break's two


# --- a jury of one is the single judge --------------------------------------------------------

LETTERS = ("A", "B", "TIE")
_STAMPS = {"decided_at", "requested_at"}


def _comparable(decision: Decision) -> dict[str, Any]:
    outcome = decision.outcome
    return {
        "outcome": (type(outcome).__name__, outcome.model_dump(exclude=_STAMPS | {"jury"})),
        "audit": None if decision.audit_copy is None else decision.audit_copy.model_dump(exclude=_STAMPS),
        "calls": decision.calls,
        "facts": dataclasses.replace(decision.facts, jury_size=None, jury_abstentions=None),
        "evaluation": decision.evaluation,
        "stage": decision.stage,
    }


async def _both_ways(pair: CandidatePair, ab: Answer, ba: Answer, policy: Policy) -> tuple[Decision, Decision]:
    single = await judge_pair(pair, _juror(pair, ab, ba, "solo"), policy)
    jury = await judge_pair(pair, [_juror(pair, ab, ba, "solo")], policy)
    return single, jury


@pytest.mark.parametrize("ab", LETTERS)
@pytest.mark.parametrize("ba", LETTERS)
@pytest.mark.parametrize("confidence", [0.9, 0.5])
async def test_a_jury_of_one_decides_exactly_like_judge_pair(ab: str, ba: str, confidence: float) -> None:
    pair = _pair()
    single, jury = await _both_ways(pair, h2h_reply(ab, confidence), h2h_reply(ba, confidence), Policy())
    assert _comparable(jury) == _comparable(single)
    assert jury.facts.jury_size == 1
    vote = jury.outcome.jury[0] if isinstance(jury.outcome, PairVerdict | TieBreakRequest) else None
    assert vote is not None  # the 3x3 table never produces a review
    assert vote.abstained == (jury.facts.jury_abstentions == 1)


@pytest.mark.parametrize(
    ("ab", "ba", "policy"),
    [
        (BAD, h2h_reply("A"), Policy()),
        (JudgeUnavailable("down"), h2h_reply("A"), Policy()),
        (h2h_reply("A"), h2h_reply("B"), Policy(kappa_guard_tripped=True)),
        (h2h_reply("A"), h2h_reply("A"), Policy(tiebreak_enabled=False)),
        (h2h_reply("A"), h2h_reply("B"), Policy(audit_share=1.0)),
        (h2h_reply("A", 0.65), h2h_reply("B", 0.75), Policy()),
    ],
    ids=["invalid", "unavailable", "kappa_guard", "tiebreak_disabled", "audit", "threshold"],
)
async def test_a_jury_of_one_matches_judge_pair_under_failures_and_policies(
    ab: Answer, ba: Answer, policy: Policy, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A failed call has no reported latency and falls back to wall time; freeze it so decisions compare whole.
    monkeypatch.setattr(agent_validation, "time", SimpleNamespace(perf_counter=lambda: 0.0))
    single, jury = await _both_ways(_pair(), ab, ba, policy)
    assert _comparable(jury) == _comparable(single)
