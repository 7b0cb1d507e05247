"""The seed 002 resolver: our own weighted arithmetic, the single forced-choice re-ask, the decision."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pairjudge.agents.core import resolve_tiebreak
from pairjudge.agents.errors import JudgeUnavailable
from pairjudge.agents.judge import judge_info
from pairjudge.agents.policy import Policy
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.agents.tiebreak import JUDGE_KEY, RECOMPUTED_KEY, assess, weighted_scores
from pairjudge.agents.validation import parse_reply
from pairjudge.schemas import DEFAULT_TIEBREAK_WEIGHTS, OrderingResult, PairVerdict, ReviewRequest, TieBreakRequest
from pairjudge.schemas.pair import CandidatePair
from pairjudge.schemas.replies import TieBreakReply
from pairjudge.schemas.rubric import TieBreakWeights, WeightedCriterion
from tests.unit.factories import FIRST_ID, SECOND_ID, make_pair, per_order, tiebreak_reply

X, Y = FIRST_ID, SECOND_ID
TRACE = "0af7651916cd43dd8448eb211c80319c"
ALL_A = {"safety": "A", "instruction_adherence": "A", "conciseness": "A", "readability": "A"}
ALL_B = {"safety": "B", "instruction_adherence": "B", "conciseness": "B", "readability": "B"}
# safety + readability (0.4 + 0.1) against instruction_adherence + conciseness (0.3 + 0.2): equal.
SPLIT = {"safety": "A", "instruction_adherence": "B", "conciseness": "B", "readability": "A"}
SPLIT_SWAPPED = {"safety": "B", "instruction_adherence": "A", "conciseness": "A", "readability": "B"}


def _reply(**kwargs: Any) -> TieBreakReply:
    return parse_reply(tiebreak_reply(**kwargs), TieBreakReply)


# --- arithmetic -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("winners", "expected"),
    [
        (ALL_A, (1.0, 0.0)),
        ({"safety": "A"} | {k: "B" for k in ("instruction_adherence", "conciseness", "readability")}, (0.4, 0.6)),
        ({"safety": "B", "instruction_adherence": "A", "conciseness": "A", "readability": "A"}, (0.6, 0.4)),
        ({"safety": "A", "instruction_adherence": "A", "conciseness": "B", "readability": "B"}, (0.7, 0.3)),
        (SPLIT, (0.5, 0.5)),
    ],
)
def test_weighted_scores_use_the_configured_weights(winners: dict[str, str], expected: tuple[float, float]) -> None:
    a, b = weighted_scores(_reply(criteria_winners=winners), DEFAULT_TIEBREAK_WEIGHTS)
    assert (a, b) == pytest.approx(expected)


def test_judge_weights_in_the_reply_are_ignored() -> None:
    data = json.loads(tiebreak_reply(ALL_A))
    for row in data["criteria_analysis"]:
        row["weight"] = 99  # the judge restating the weights wrongly changes nothing
    reply = parse_reply(json.dumps(data), TieBreakReply)
    assert weighted_scores(reply, DEFAULT_TIEBREAK_WEIGHTS) == pytest.approx((1.0, 0.0))


def test_assess_settled_reply() -> None:
    found = assess(_reply(criteria_winners=ALL_A, confidence=0.6), DEFAULT_TIEBREAK_WEIGHTS, 0.6)
    assert found.problems == ()
    assert found.preferred == "A"
    assert not found.equal
    assert not found.arithmetic_mismatch


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"confidence": 0.59}, "confidence 0.59 is below the required 0.6"),
        ({"escalation": True}, "escalation_triggered is true"),
        ({"criteria_winners": SPLIT}, "the weighted scores are equal (A 0.5, B 0.5)"),
        ({"criteria_winners": ALL_B, "winner": "A"}, 'winner "A" contradicts the weighted scores (A 0, B 1)'),
    ],
)
def test_assess_finds_each_reason_to_force_a_choice(kwargs: dict[str, object], fragment: str) -> None:
    found = assess(_reply(**kwargs), DEFAULT_TIEBREAK_WEIGHTS, 0.6)
    assert any(fragment in p for p in found.problems), found.problems


def test_equal_scores_are_detected_despite_float_noise() -> None:
    # 0.1 + 0.2 is 0.30000000000000004 in floats; against 0.3 that is still "exactly equal" weights.
    weights = TieBreakWeights(
        criteria=(
            WeightedCriterion(name="tone", weight=0.1),
            WeightedCriterion(name="accuracy", weight=0.2),
            WeightedCriterion(name="safety", weight=0.3),
        )
    )
    reply = _reply(criteria_winners={"tone": "A", "accuracy": "A", "safety": "B"}, weights=weights)
    a, b = weighted_scores(reply, weights)
    assert a != b  # the raw float sums differ...
    found = assess(reply, weights, 0.6)
    assert found.equal  # ...but the resolver treats them as the tie they are
    assert any("the weighted scores are equal" in p for p in found.problems)


def test_assess_records_wrong_judge_arithmetic() -> None:
    found = assess(_reply(criteria_winners=ALL_A, score_a=0.7, score_b=0.3), DEFAULT_TIEBREAK_WEIGHTS, 0.6)
    assert found.arithmetic_mismatch
    assert found.problems == ()


# --- resolve_tiebreak -------------------------------------------------------------------------


def _primary(order: str, winner: str) -> OrderingResult:
    a, b = (X, Y) if order == "AB" else (Y, X)
    raw = "A" if winner == a else "B"
    return OrderingResult(
        order_shown=order,
        swapped=order == "BA",
        shown_as_a=a,
        shown_as_b=b,
        valid=True,
        raw_winner=raw,
        mapped_winner=winner,
        confidence=0.8,
        justification=f"primary {order}",
    )


def _request(pair: CandidatePair | None = None, reason: str = "position_inconsistent") -> TieBreakRequest:
    pair = pair or make_pair()
    return TieBreakRequest(
        pair_id=pair.pair_id,
        reason=reason,
        pair=pair,
        primary=(_primary("AB", X), _primary("BA", Y)),
        primary_judge=judge_info(ScriptedJudge([], model="primary-model"), "0123456789abcdef"),
        trace_id=TRACE,
    )


async def test_orders_agree_gives_a_tiebreak_verdict() -> None:
    request = _request(reason="low_confidence")
    # AB: A (= X) wins everything; BA: B (= X) wins everything. Both mean X.
    judge = ScriptedJudge(
        per_order(request.pair, tiebreak_reply(ALL_A, confidence=0.8), tiebreak_reply(ALL_B, confidence=0.9)),
        model="tb-model",
    )
    decision = await resolve_tiebreak(request, judge, Policy())
    out = decision.outcome
    assert isinstance(out, PairVerdict)
    assert (out.winner, out.loser, out.decided_by, out.consistent) == (X, Y, "tiebreak", True)
    assert out.tiebreak_reason == "low_confidence"
    assert out.confidence == pytest.approx(0.85)
    assert out.weighted_scores == pytest.approx({X: 1.0, Y: 0.0})
    assert out.trace_id == TRACE
    assert out.judge.model == "tb-model"
    assert out.judge.prompt_template_hash == decision.facts.prompt_hash
    # Primary orderings first, then the two tie-break orderings.
    assert [o.justification for o in out.orderings[:2]] == ["primary AB", "primary BA"]
    tb_ab, tb_ba = out.orderings[2:]
    assert (tb_ab.order_shown, tb_ba.order_shown) == ("AB", "BA")
    assert tb_ba.dimension_scores[RECOMPUTED_KEY] == pytest.approx({Y: 0.0, X: 1.0})
    assert tb_ba.dimension_scores["safety"] == {Y: 0.0, X: 1.0}
    assert tb_ab.key_differentiators[0] == "safety (weight 0.4)"
    assert len(decision.calls) == 2
    assert all(c.stage == "tiebreak" for c in decision.calls)
    assert decision.stage == "tiebreak"
    assert decision.facts.outcome == "verdict"
    assert decision.facts.decided_by == "tiebreak"


async def test_low_confidence_forces_exactly_one_choice_and_can_then_resolve() -> None:
    request = _request()
    judge = ScriptedJudge(
        per_order(
            request.pair,
            [tiebreak_reply(ALL_A, confidence=0.4), tiebreak_reply(ALL_A, confidence=0.7)],
            tiebreak_reply(ALL_B, confidence=0.9),
        )
    )
    decision = await resolve_tiebreak(request, judge, Policy())
    assert isinstance(decision.outcome, PairVerdict)
    assert decision.outcome.winner == X
    forced = [r for r in judge.requests if r.forced_choice]
    assert len(forced) == 1
    assert "You must choose A or B" in forced[0].messages[-1].content
    assert "confidence 0.4 is below the required 0.6" in forced[0].messages[-1].content
    assert forced[0].attempt == 1
    tb_ab = decision.outcome.orderings[2]
    assert tb_ab.forced_choice
    assert tb_ab.retries == 1
    assert tb_ab.confidence == 0.7
    assert decision.facts.forced_choice is True


async def test_still_unsettled_after_the_forced_choice_goes_to_review() -> None:
    request = _request()
    low = tiebreak_reply(ALL_A, confidence=0.3, justification="Honestly unsure.")
    judge = ScriptedJudge(per_order(request.pair, low, low))
    decision = await resolve_tiebreak(request, judge, Policy())
    out = decision.outcome
    assert isinstance(out, ReviewRequest)
    # Valid replies that never reached the threshold: the judge had nothing to go on, not a bad reply.
    assert (out.reason, out.stage, out.trace_id) == ("tiebreak_no_signal", "tiebreak", TRACE)
    assert out.last_justification == "Honestly unsure."
    # One first ask and exactly one forced re-ask per ordering.
    assert judge.calls == 4
    assert sum(r.forced_choice for r in judge.requests) == 2
    assert len(out.orderings) == 4
    assert out.orderings[2].error_kind == "unresolved"
    assert out.orderings[2].error is not None
    assert "below the required" in out.orderings[2].error


async def test_equal_weighted_scores_go_to_review_without_a_forced_choice() -> None:
    # Seed 002: exactly equal weighted scores are a true tie for a human. Forcing a pick would be the
    # arbitrary choice the seed rules out, so neither ordering is re-asked.
    request = _request()
    judge = ScriptedJudge(
        per_order(
            request.pair,
            tiebreak_reply(SPLIT, escalation=True),
            tiebreak_reply(SPLIT_SWAPPED, escalation=False, winner="B"),
        )
    )
    decision = await resolve_tiebreak(request, judge, Policy())
    assert isinstance(decision.outcome, ReviewRequest)
    assert decision.outcome.reason == "tiebreak_equal_scores"
    assert judge.calls == 2
    assert not any(r.forced_choice for r in judge.requests)
    assert [o.error_kind for o in decision.outcome.orderings[2:]] == ["unresolved", "unresolved"]


async def test_a_judge_that_escalates_sends_the_pair_to_review_at_once() -> None:
    # The judge escalates although its criteria are not equal (it cannot break the tie on anything it
    # trusts): no signal for a human to settle, not a malformed reply, and not something to force.
    request = _request()
    escalating = tiebreak_reply(ALL_A, escalation=True)
    judge = ScriptedJudge(per_order(request.pair, escalating, escalating))
    decision = await resolve_tiebreak(request, judge, Policy())
    assert isinstance(decision.outcome, ReviewRequest)
    assert decision.outcome.reason == "tiebreak_no_signal"
    assert judge.calls == 2
    assert not any(r.forced_choice for r in judge.requests)


async def test_a_forced_choice_that_ends_in_equal_scores_goes_to_review() -> None:
    # Low confidence is forced once; if the forced reply finds the scores equal, a human decides.
    request = _request()
    judge = ScriptedJudge(
        per_order(
            request.pair,
            [tiebreak_reply(ALL_A, confidence=0.3), tiebreak_reply(SPLIT)],
            tiebreak_reply(ALL_B),
        )
    )
    decision = await resolve_tiebreak(request, judge, Policy())
    assert isinstance(decision.outcome, ReviewRequest)
    assert decision.outcome.reason == "tiebreak_equal_scores"
    assert sum(r.forced_choice for r in judge.requests) == 1


async def test_disagreeing_orders_go_to_review() -> None:
    request = _request()
    # AB picks A (= X); BA also picks A (= Y): the orders chose different candidates.
    judge = ScriptedJudge(per_order(request.pair, tiebreak_reply(ALL_A), tiebreak_reply(ALL_A)))
    decision = await resolve_tiebreak(request, judge, Policy())
    assert isinstance(decision.outcome, ReviewRequest)
    assert decision.outcome.reason == "tiebreak_disagreement"
    assert judge.calls == 2  # both settled; nothing to force
    assert decision.facts.flip is True


async def test_winner_contradicting_the_scores_is_forced_once() -> None:
    request = _request()
    judge = ScriptedJudge(
        per_order(
            request.pair,
            [tiebreak_reply(ALL_B, winner="A"), tiebreak_reply(ALL_A)],
            tiebreak_reply(ALL_B),
        )
    )
    decision = await resolve_tiebreak(request, judge, Policy())
    assert isinstance(decision.outcome, PairVerdict)
    assert decision.outcome.winner == X
    forced = [r for r in judge.requests if r.forced_choice]
    assert len(forced) == 1
    assert "contradicts the weighted scores" in forced[0].messages[-1].content


async def test_a_winner_that_keeps_contradicting_its_scores_is_an_invalid_tiebreak() -> None:
    # Unlike low confidence, a reply against its own criteria is a failed reply, not "no signal".
    request = _request()
    contradicting = tiebreak_reply(ALL_B, winner="A")
    judge = ScriptedJudge(per_order(request.pair, contradicting, contradicting))
    decision = await resolve_tiebreak(request, judge, Policy())
    assert isinstance(decision.outcome, ReviewRequest)
    assert decision.outcome.reason == "tiebreak_invalid"
    assert sum(r.forced_choice for r in judge.requests) == 2


async def test_invalid_tiebreak_replies_use_the_reask_path_then_review() -> None:
    request = _request()
    judge = ScriptedJudge(per_order(request.pair, "not json", tiebreak_reply(ALL_B)))
    decision = await resolve_tiebreak(request, judge, Policy(max_reasks=2))
    assert isinstance(decision.outcome, ReviewRequest)
    assert decision.outcome.reason == "tiebreak_invalid"
    ab_calls = [c for c in decision.calls if c.order == "AB"]
    assert len(ab_calls) == 3
    assert not any(c.forced_choice for c in ab_calls)
    assert decision.outcome.last_justification == "A wins on the heavier criteria."  # BA's, the last valid one


async def test_forced_choice_reply_gets_validation_reasks_too() -> None:
    request = _request()
    judge = ScriptedJudge(
        per_order(
            request.pair,
            [tiebreak_reply(ALL_A, confidence=0.2), "{broken", tiebreak_reply(ALL_A)],
            tiebreak_reply(ALL_B),
        )
    )
    decision = await resolve_tiebreak(request, judge, Policy())
    assert isinstance(decision.outcome, PairVerdict)
    ab = [r for r in judge.requests if r.order == "AB"]
    assert [(r.attempt, r.forced_choice) for r in ab] == [(0, False), (1, True), (2, True)]
    assert "the reply is not valid JSON" in ab[2].messages[-1].content
    assert decision.outcome.orderings[2].retries == 2


async def test_judge_down_during_tiebreak_goes_to_review_judge_unavailable() -> None:
    request = _request()
    judge = ScriptedJudge(per_order(request.pair, JudgeUnavailable("circuit open"), tiebreak_reply(ALL_B)))
    decision = await resolve_tiebreak(request, judge, Policy())
    assert isinstance(decision.outcome, ReviewRequest)
    assert decision.outcome.reason == "judge_unavailable"


async def test_disabled_tiebreak_goes_to_review_without_calling_the_judge() -> None:
    request = _request()
    judge = ScriptedJudge([])
    decision = await resolve_tiebreak(request, judge, Policy(tiebreak_enabled=False))
    out = decision.outcome
    assert isinstance(out, ReviewRequest)
    assert out.reason == "tiebreak_disabled"
    assert judge.calls == 0
    assert decision.calls == ()
    assert decision.evaluation is None
    assert out.orderings == request.primary
    assert out.judge == request.primary_judge
    assert out.last_justification == "primary BA"


async def test_kappa_guard_turns_the_tiebreak_verdict_into_review() -> None:
    request = _request()
    judge = ScriptedJudge(per_order(request.pair, tiebreak_reply(ALL_A), tiebreak_reply(ALL_B)))
    decision = await resolve_tiebreak(request, judge, Policy(kappa_guard_tripped=True))
    assert isinstance(decision.outcome, ReviewRequest)
    assert decision.outcome.reason == "kappa_guard"
    assert judge.calls == 2  # the judge's answers are kept so agreement can still be measured
    assert decision.outcome.orderings[2].mapped_winner == X


async def test_wrong_judge_arithmetic_is_overruled_and_noted() -> None:
    request = _request()
    judge = ScriptedJudge(
        per_order(request.pair, tiebreak_reply(ALL_A, score_a=0.2, score_b=0.8), tiebreak_reply(ALL_B))
    )
    decision = await resolve_tiebreak(request, judge, Policy())
    out = decision.outcome
    assert isinstance(out, PairVerdict)
    assert out.winner == X
    assert out.weighted_scores == pytest.approx({X: 1.0, Y: 0.0})
    assert "differ from the recomputed scores (A 1, B 0); the recomputed scores were used" in out.justification
    assert out.orderings[2].dimension_scores[JUDGE_KEY] == {X: 0.2, Y: 0.8}
    assert decision.facts.arithmetic_mismatch == 1


async def test_pair_weights_override_the_default() -> None:
    weights = TieBreakWeights(
        criteria=(WeightedCriterion(name="brevity", weight=2), WeightedCriterion(name="warmth", weight=1))
    )
    pair = make_pair(tiebreak=weights)
    request = _request(pair)
    judge = ScriptedJudge(
        per_order(
            pair,
            tiebreak_reply({"brevity": "B", "warmth": "A"}, weights=weights),
            tiebreak_reply({"brevity": "A", "warmth": "B"}, weights=weights),
        )
    )
    decision = await resolve_tiebreak(request, judge, Policy())
    assert isinstance(decision.outcome, PairVerdict)
    assert decision.outcome.winner == Y
    assert decision.outcome.weighted_scores == pytest.approx({X: 1.0, Y: 2.0})
    assert "1. brevity (weight: 2)" in judge.requests[0].messages[-1].content


async def test_tiebreak_threshold_is_the_policys() -> None:
    request = _request()
    judge = ScriptedJudge(per_order(request.pair, tiebreak_reply(ALL_A, confidence=0.75), tiebreak_reply(ALL_B)))
    await resolve_tiebreak(request, judge, Policy(tiebreak_confidence_threshold=0.8))
    assert sum(r.forced_choice for r in judge.requests) == 1
