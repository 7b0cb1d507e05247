"""Un-swapping and the reconciliation rule: the full truth table, thresholds, invalid cases, policy."""

from __future__ import annotations

import pytest

from pairjudge.agents.builders import Outcome, primary_outcome
from pairjudge.agents.judge import judge_info
from pairjudge.agents.orderings import build_ordering, map_winner
from pairjudge.agents.policy import Policy
from pairjudge.agents.policy_overlay import apply_policy
from pairjudge.agents.sampling import audit_copy, audit_fraction
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.agents.truth_table import Reconciliation, reconcile
from pairjudge.agents.validation import parse_reply
from pairjudge.schemas import TIE, CandidatePair, OrderingResult, PairVerdict, ReviewRequest, TieBreakRequest
from pairjudge.schemas.events import ErrorKind, Order
from pairjudge.schemas.replies import HeadToHeadReply, PairwiseReply, ToneStyleReply
from tests.unit.factories import (
    FIRST_ID,
    SECOND_ID,
    h2h_reply,
    h2h_rubric,
    make_pair,
    pairwise_reply,
    tone_reply,
    tone_rubric,
)

X, Y = FIRST_ID, SECOND_ID
INFO = judge_info(ScriptedJudge([]), "0123456789abcdef")


def _ordering(
    order: Order, winner: str | None, confidence: float = 0.9, kind: ErrorKind = "invalid_reply"
) -> OrderingResult:
    """An OrderingResult with an already-mapped winner (None = invalid)."""
    a, b = (X, Y) if order == "AB" else (Y, X)
    if winner is None:
        return OrderingResult(
            order_shown=order,
            swapped=order == "BA",
            shown_as_a=a,
            shown_as_b=b,
            valid=False,
            error=f"{kind} detail",
            error_kind=kind,
        )
    raw = "TIE" if winner == TIE else ("A" if winner == a else "B")
    return OrderingResult(
        order_shown=order,
        swapped=order == "BA",
        shown_as_a=a,
        shown_as_b=b,
        valid=True,
        raw_winner=raw,
        mapped_winner=winner,
        confidence=confidence,
        justification=f"{order} says {raw}",
    )


# --- the 3x3 truth table ----------------------------------------------------------------------

TABLE = [
    # (AB winner, BA winner) -> (outcome, reason, winner, consistent, flip)
    ((X, X), ("verdict", None, X, True, False)),
    ((X, Y), ("tiebreak", "position_inconsistent", None, False, True)),
    ((X, TIE), ("tiebreak", "tie", None, False, False)),
    ((Y, X), ("tiebreak", "position_inconsistent", None, False, True)),
    ((Y, Y), ("verdict", None, Y, True, False)),
    ((Y, TIE), ("tiebreak", "tie", None, False, False)),
    ((TIE, X), ("tiebreak", "tie", None, False, False)),
    ((TIE, Y), ("tiebreak", "tie", None, False, False)),
    ((TIE, TIE), ("tiebreak", "tie", None, True, False)),
]


@pytest.mark.parametrize(("winners", "expected"), TABLE)
def test_truth_table(winners: tuple[str, str], expected: tuple[object, ...]) -> None:
    rec = reconcile(_ordering("AB", winners[0]), _ordering("BA", winners[1]), 0.7)
    assert (rec.outcome, rec.reason, rec.winner, rec.consistent, rec.flip) == expected
    assert rec.mean_confidence == pytest.approx(0.9)


@pytest.mark.parametrize(
    ("ab", "ba", "outcome"),
    [
        (0.7, 0.7, "verdict"),
        (0.65, 0.75, "verdict"),  # mean exactly 0.7 despite float addition
        (0.6, 0.8, "verdict"),
        (1.0, 0.4, "verdict"),
        (0.69, 0.7, "tiebreak"),
        (0.6999999, 0.7, "tiebreak"),
        (0.0, 0.0, "tiebreak"),
    ],
)
def test_confidence_threshold_boundary(ab: float, ba: float, outcome: str) -> None:
    rec = reconcile(_ordering("AB", X, ab), _ordering("BA", X, ba), 0.7)
    assert rec.outcome == outcome
    if outcome == "tiebreak":
        assert rec.reason == "low_confidence"
        assert rec.consistent


def test_threshold_is_the_policys() -> None:
    assert reconcile(_ordering("AB", X, 0.8), _ordering("BA", X, 0.8), 0.85).reason == "low_confidence"
    assert reconcile(_ordering("AB", X, 0.5), _ordering("BA", X, 0.5), 0.5).outcome == "verdict"


def test_flip_outranks_low_confidence_and_tie_outranks_low_confidence() -> None:
    assert reconcile(_ordering("AB", X, 0.1), _ordering("BA", Y, 0.1), 0.7).reason == "position_inconsistent"
    assert reconcile(_ordering("AB", X, 0.1), _ordering("BA", TIE, 0.1), 0.7).reason == "tie"


@pytest.mark.parametrize(
    ("ab", "ba", "reason"),
    [
        (_ordering("AB", None), _ordering("BA", X), "ordering_invalid"),
        (_ordering("AB", X), _ordering("BA", None), "ordering_invalid"),
        (_ordering("AB", None), _ordering("BA", None), "ordering_invalid"),
        (_ordering("AB", None, kind="judge_unavailable"), _ordering("BA", X), "judge_unavailable"),
        (_ordering("AB", X), _ordering("BA", None, kind="judge_rejected"), "judge_rejected"),
        (
            _ordering("AB", None, kind="judge_unavailable"),
            _ordering("BA", None, kind="judge_rejected"),
            "judge_rejected",
        ),
        (
            _ordering("AB", None, kind="invalid_reply"),
            _ordering("BA", None, kind="judge_rejected"),
            "judge_rejected",
        ),
        (_ordering("AB", None), _ordering("BA", None, kind="judge_unavailable"), "judge_unavailable"),
    ],
)
def test_invalid_orderings_go_to_review(ab: OrderingResult, ba: OrderingResult, reason: str) -> None:
    rec = reconcile(ab, ba, 0.7)
    assert (rec.outcome, rec.reason, rec.winner, rec.mean_confidence) == ("review", reason, None, None)


def test_invalid_outranks_everything() -> None:
    # Even when the valid ordering would have been a flip partner or a confident verdict.
    assert reconcile(_ordering("AB", None), _ordering("BA", Y, 1.0), 0.0).reason == "ordering_invalid"


# --- policy -----------------------------------------------------------------------------------

VERDICT = Reconciliation("verdict", None, X, 0.9, True, False)
TIEBREAK = Reconciliation("tiebreak", "tie", None, 0.9, False, False)
REVIEW = Reconciliation("review", "ordering_invalid", None, None, False, False)


def test_tiebreak_disabled_turns_tiebreak_into_review() -> None:
    policy = Policy(tiebreak_enabled=False)
    assert apply_policy(TIEBREAK, policy).reason == "tiebreak_disabled"
    assert apply_policy(TIEBREAK, policy).outcome == "review"
    assert apply_policy(VERDICT, policy) == VERDICT
    assert apply_policy(REVIEW, policy) == REVIEW


def test_kappa_guard_routes_verdicts_and_tiebreaks_to_review() -> None:
    policy = Policy(kappa_guard_tripped=True, tiebreak_enabled=False)
    for rec in (VERDICT, TIEBREAK):
        out = apply_policy(rec, policy)
        assert (out.outcome, out.reason, out.winner) == ("review", "kappa_guard", None)
        assert out.mean_confidence == rec.mean_confidence
    assert apply_policy(REVIEW, policy) == REVIEW  # the specific reason is kept


def test_default_policy_changes_nothing() -> None:
    for rec in (VERDICT, TIEBREAK, REVIEW):
        assert apply_policy(rec, Policy()) is rec


# --- un-swapping ------------------------------------------------------------------------------


def test_map_winner() -> None:
    assert map_winner("A", "a-id", "b-id") == "a-id"
    assert map_winner("B", "a-id", "b-id") == "b-id"
    assert map_winner("TIE", "a-id", "b-id") == TIE


def test_tone_reply_is_mapped_back_in_the_swapped_order() -> None:
    pair = make_pair()
    reply = parse_reply(tone_reply("A", 0.8), ToneStyleReply)
    result = build_ordering(
        pair, "BA", reply=reply, calls=(), retries=1, answered_model="m", error=None, error_kind=None
    )
    assert (result.shown_as_a, result.shown_as_b, result.swapped) == (Y, X, True)
    assert (result.raw_winner, result.mapped_winner, result.confidence) == ("A", Y, 0.8)
    assert result.dimension_scores["tone_match"] == {Y: 4.0, X: 3.0}
    assert result.dimension_scores["stylistic_consistency"] == {Y: 5.0, X: 2.0}
    assert result.key_differentiators == ("warmer register in A",)
    assert result.retries == 1
    assert result.answered_by_model == "m"
    assert result.valid


def test_head_to_head_criteria_become_win_scores() -> None:
    pair = make_pair(rubric=h2h_rubric())
    reply = parse_reply(
        h2h_reply("B", criteria_winners={"accuracy": "A", "clarity": "B", "safety": "TIE"}), HeadToHeadReply
    )
    result = build_ordering(
        pair, "AB", reply=reply, calls=(), retries=0, answered_model=None, error=None, error_kind=None
    )
    assert result.mapped_winner == Y
    assert result.dimension_scores == {
        "accuracy": {X: 1.0, Y: 0.0},
        "clarity": {X: 0.0, Y: 1.0},
        "safety": {X: 0.5, Y: 0.5},
    }


def test_pairwise_reply_is_mapped() -> None:
    pair = make_pair()
    reply = parse_reply(pairwise_reply("TIE", 0.5, criteria_winners={"accuracy": "A"}), PairwiseReply)
    result = build_ordering(
        pair, "BA", reply=reply, calls=(), retries=0, answered_model=None, error=None, error_kind=None
    )
    assert (result.raw_winner, result.mapped_winner) == ("TIE", TIE)
    assert result.dimension_scores["accuracy"] == {Y: 1.0, X: 0.0}  # A is the second candidate in BA
    assert result.dimension_scores["specificity"] == {Y: 0.5, X: 0.5}
    assert result.justification == "overall"


def test_invalid_ordering_keeps_who_sat_where_and_the_error() -> None:
    result = build_ordering(
        make_pair(), "BA", reply=None, calls=(), retries=2, answered_model=None, error="x", error_kind="invalid_reply"
    )
    assert not result.valid
    assert result.mapped_winner is None
    assert (result.error_kind, result.error) == ("invalid_reply", "x")
    assert (result.shown_as_a, result.retries) == (Y, 2)


# --- events -----------------------------------------------------------------------------------


def _primary(pair: CandidatePair, ab: OrderingResult, ba: OrderingResult) -> Outcome:
    return primary_outcome(pair, tone_rubric(), reconcile(ab, ba, 0.7), INFO, orderings=(ab, ba), judged=(ab, ba))


def test_verdict_event() -> None:
    pair = make_pair()
    ab, ba = _ordering("AB", Y, 0.8), _ordering("BA", Y, 0.6)
    out = _primary(pair, ab, ba)
    assert isinstance(out, PairVerdict)
    assert (out.winner, out.loser, out.winner_role) == (Y, X, "challenger")
    assert out.confidence == pytest.approx(0.7)
    assert (out.decided_by, out.consistent, out.rubric_kind) == ("primary", True, "tone_style")
    assert out.orderings == (ab, ba)
    assert out.judge == INFO
    assert out.justification == f"[AB: A={X}, B={Y}] AB says B\n[BA: A={Y}, B={X}] BA says A"
    assert (out.experiment_id, out.traffic) == ("exp-tone-42", "shadow")


def test_tiebreak_and_review_events() -> None:
    pair = make_pair()
    ab, ba = _ordering("AB", X), _ordering("BA", Y)
    out = _primary(pair, ab, ba)
    assert isinstance(out, TieBreakRequest)
    assert (out.reason, out.primary, out.primary_judge, out.pair) == ("position_inconsistent", (ab, ba), INFO, pair)
    bad = _ordering("BA", None)
    review = _primary(pair, ab, bad)
    assert isinstance(review, ReviewRequest)
    assert (review.reason, review.stage, review.audit) == ("ordering_invalid", "primary", False)
    assert review.last_justification == "AB says A"


# --- audit sampling ---------------------------------------------------------------------------


def test_audit_fraction_is_deterministic_and_uniformish() -> None:
    assert audit_fraction("pair-1") == audit_fraction("pair-1")
    values = [audit_fraction(f"pair-{i}") for i in range(2000)]
    assert all(0.0 <= v < 1.0 for v in values)
    share = sum(v < 0.1 for v in values) / len(values)
    assert 0.07 < share < 0.13


def test_audit_copy_follows_the_share() -> None:
    pair = make_pair()
    ab, ba = _ordering("AB", X), _ordering("BA", X)
    verdict = _primary(pair, ab, ba)
    assert isinstance(verdict, PairVerdict)
    fraction = audit_fraction(pair.pair_id)
    assert audit_copy(verdict, pair, "primary", 0.0) is None
    assert audit_copy(verdict, pair, "primary", fraction) is None  # strictly below the share
    copy = audit_copy(verdict, pair, "primary", min(1.0, fraction + 1e-6))
    assert isinstance(copy, ReviewRequest)
    assert (copy.reason, copy.audit, copy.stage, copy.orderings) == ("audit_sample", True, "primary", (ab, ba))
    assert copy.last_justification == verdict.justification
    tiebreak = _primary(pair, ab, _ordering("BA", Y))
    assert audit_copy(tiebreak, pair, "primary", 1.0) is None  # only verdicts are audited


def test_the_audit_seed_draws_another_sample_the_same_way_everywhere() -> None:
    ids = [f"pair-{i}" for i in range(4000)]
    default = {i for i in ids if audit_fraction(i) < 0.05}
    seeded = {i for i in ids if audit_fraction(i, "campaign-7") < 0.05}
    assert seeded == {i for i in ids if audit_fraction(i, "campaign-7") < 0.05}  # every worker, every redelivery
    assert 0.04 < len(seeded) / len(ids) < 0.06
    # A new seed is a new sample, not the old one shifted: the two overlap about as chance would have it.
    assert len(default & seeded) < 0.25 * len(seeded)


def test_policy_audits_five_percent_by_default_as_seed_001_asks() -> None:
    assert 0.05 <= Policy().audit_share <= 0.10
