"""Active audit sampling (agents.sampling): classes, probabilities, the floor, the draw, the budget scale,
and what the decisions and their records carry."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from pairjudge.agents.audit import record_for
from pairjudge.agents.core import Decision, judge_pair, resolve_tiebreak
from pairjudge.agents.policy import Policy
from pairjudge.agents.sampling import (
    VerdictClass,
    audit_fraction,
    budget_scale,
    draw,
    drawn,
    expected_labels,
    inclusion_probability,
    reviews_wanted,
    verdict_class,
)
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.schemas import CandidatePair, ControlUpdate, PairVerdict, ReviewRequest, TieBreakRequest
from pairjudge.schemas.audit import DecisionRecord
from pairjudge.schemas.events import JudgeInfo, JuryVote
from pairjudge.streams.control.live import PolicyHolder, apply_record
from pairjudge.streams.review.views import CONTROLS
from tests.unit.factories import (
    FIRST_ID,
    SECOND_ID,
    h2h_reply,
    h2h_rubric,
    make_pair,
    per_order,
    tiebreak_reply,
    tone_reply,
)


def _policy(**overrides: Any) -> Policy:
    """A policy with the uncertain share these tests' arithmetic was written for (25%), whatever the default."""
    return Policy(**{"audit_uncertain_share": 0.25, **overrides})


X, Y = FIRST_ID, SECOND_ID
ALL_A = {"safety": "A", "instruction_adherence": "A", "conciseness": "A", "readability": "A"}
ALL_B = {"safety": "B", "instruction_adherence": "B", "conciseness": "B", "readability": "B"}
IDS = [f"pair-{i:06d}" for i in range(100_000)]
#: Verdicts per period by class, for the budget.
VERDICTS: dict[VerdictClass, float] = {"confident": 10_000.0, "uncertain": 2_000.0}


def _within_4_sigma(hits: int, n: int, p: float) -> bool:
    return abs(hits - n * p) <= 4 * math.sqrt(n * p * (1 - p))


def _vote(vote: str | None, *, abstained: bool = False) -> JuryVote:
    info = JudgeInfo(provider="scripted", model="m", prompt_template_hash="h")
    return JuryVote(
        judge=info,
        vote=vote,
        abstained=abstained,
        abstain_reason="position_inconsistent" if abstained else None,
        orderings=(),
    )


# --- the class --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mean", "threshold", "expected"),
    [
        (0.95, 0.7, "confident"),
        (0.8, 0.7, "confident"),  # exactly the margin above the threshold (float noise tolerated)
        (0.79, 0.7, "uncertain"),
        (0.7, 0.7, "uncertain"),
        (0.85, 0.8, "uncertain"),  # a series' raised threshold moves the margin with it
    ],
)
def test_a_primary_verdict_near_its_threshold_is_uncertain(mean: float, threshold: float, expected: str) -> None:
    assert verdict_class(stage="primary", mean_confidence=mean, threshold=threshold, margin=0.1) == expected


def test_a_tiebreak_verdict_is_uncertain_however_confident() -> None:
    assert verdict_class(stage="tiebreak", mean_confidence=1.0, threshold=0.0, margin=0.0) == "uncertain"


def test_a_jury_is_confident_only_when_unanimous() -> None:
    def of(*votes: JuryVote) -> str:
        return verdict_class(stage="primary", mean_confidence=0.95, threshold=0.7, margin=0.1, votes=votes, winner=X)

    assert of(_vote(X), _vote(X), _vote(X)) == "confident"
    assert of(_vote(X), _vote(X), _vote(Y)) == "uncertain"
    assert of(_vote(X), _vote(X), _vote(None, abstained=True)) == "uncertain"


# --- the probability --------------------------------------------------------------------------


def test_each_class_gets_its_share_and_the_defaults_follow_the_brief() -> None:
    defaults = Policy()
    # 2x the seed's share for uncertain verdicts: about the Neyman allocation for typical judges.
    assert (defaults.audit_share, defaults.audit_uncertain_share, defaults.audit_floor) == (0.05, 0.10, 0.01)
    assert inclusion_probability(defaults, "uncertain") == 0.10
    policy = _policy()
    assert (policy.audit_uncertain_margin, policy.audit_double_share, policy.audit_scale) == (0.1, 0.1, 1.0)
    assert inclusion_probability(policy, "confident") == 0.05
    assert inclusion_probability(policy, "uncertain") == 0.25
    # An uncertain verdict is never audited less often than a confident one.
    assert inclusion_probability(_policy(audit_share=1.0), "uncertain") == 1.0


def test_the_floor_bounds_the_probability_from_below() -> None:
    assert inclusion_probability(_policy(audit_share=0.002), "confident") == 0.01
    assert inclusion_probability(_policy(audit_scale=0.1), "confident") == 0.01  # 0.005 scaled, floored
    assert inclusion_probability(_policy(audit_scale=0.1), "uncertain") == pytest.approx(0.025)
    assert inclusion_probability(_policy(audit_scale=0.1, audit_floor=0.001), "confident") == pytest.approx(0.005)


def test_audit_off_records_no_probability_and_draws_nothing() -> None:
    policy = _policy(audit_share=0.0)
    assert inclusion_probability(policy, "uncertain") is None
    assert not any(draw(i, policy, "uncertain").drawn for i in IDS[:2000])
    assert not drawn("p", None)
    assert not drawn("p", 0.0)


# --- the draw ---------------------------------------------------------------------------------


@pytest.mark.parametrize("probability", [0.01, 0.05, 0.25])
def test_the_draws_frequency_matches_the_probability(probability: float) -> None:
    hits = sum(drawn(i, probability, "campaign-3") for i in IDS)
    assert _within_4_sigma(hits, len(IDS), probability), hits


def test_the_uncertain_class_is_drawn_at_its_own_rate_and_the_second_reviewer_at_its_share() -> None:
    policy = _policy(audit_seed="s")
    draws = [draw(i, policy, "uncertain") for i in IDS]
    taken = [d for d in draws if d.drawn]
    assert all(d.inclusion_probability == 0.25 for d in draws)
    assert _within_4_sigma(len(taken), len(IDS), 0.25)
    doubles = sum(d.reviews_wanted == 2 for d in taken)
    assert _within_4_sigma(doubles, len(taken), 0.1), doubles
    assert all(d.reviews_wanted == 1 for d in draws if not d.drawn)


def test_the_second_reviewer_hash_is_independent_of_the_draw() -> None:
    # If both came from one hash, the first tenth of the drawn pairs (by fraction) would be the doubles.
    low = [i for i in IDS if audit_fraction(i) < 0.05]
    doubles_low = sum(reviews_wanted(i, "", 0.1) == 2 for i in low)
    assert _within_4_sigma(doubles_low, len(low), 0.1), doubles_low
    assert reviews_wanted(IDS[0], "", 0.0) == 1
    assert reviews_wanted(IDS[0], "", 1.0) == 2


def test_a_redelivered_pair_is_drawn_the_same_way_and_samples_nest() -> None:
    policy = _policy(audit_share=0.3, audit_seed="k")
    assert [draw(i, policy, "confident") for i in IDS[:500]] == [draw(i, policy, "confident") for i in IDS[:500]]
    # One hash for both classes: a pair drawn at a lower probability is drawn at any higher one.
    for pair_id in IDS[:2000]:
        assert not drawn(pair_id, 0.05, "k") or drawn(pair_id, 0.25, "k")


# --- the budget -------------------------------------------------------------------------------


def test_no_budget_or_a_budget_that_fits_leaves_the_scale_at_one() -> None:
    verdicts = VERDICTS
    # (10000 x 0.05 + 2000 x 0.25) x 1.1 (second reviewers) = 1100 labels per period.
    assert expected_labels(_policy(), verdicts) == pytest.approx(1100)
    assert budget_scale(_policy(), verdicts, 0) == 1.0
    assert budget_scale(_policy(), verdicts, 1100) == 1.0
    assert budget_scale(_policy(audit_share=0.0), verdicts, 10) == 1.0


def test_the_scale_meets_the_budget_exactly() -> None:
    policy = _policy()
    verdicts = VERDICTS
    scale = budget_scale(policy, verdicts, 550)
    assert scale == pytest.approx(0.5)  # nothing at the floor yet: plain proportion
    assert expected_labels(policy, verdicts, scale) == pytest.approx(550)


def test_the_scale_accounts_for_classes_held_up_by_the_floor() -> None:
    # Below scale 0.2 the confident class sits at the floor (0.05 x 0.2 = 0.01): labels are then
    # 1.1 x (10000 x 0.01 + 2000 x 0.25 x s). 165 labels need s = 0.1, not the naive 165/1100 = 0.15
    # (which would ask for 192.5).
    policy = _policy()
    verdicts = VERDICTS
    scale = budget_scale(policy, verdicts, 165)
    assert scale == pytest.approx(0.1)
    assert expected_labels(policy, verdicts, scale) == pytest.approx(165)
    assert inclusion_probability(_policy(audit_scale=scale), "confident") == 0.01


def test_when_the_floor_alone_exceeds_the_budget_the_floor_wins() -> None:
    policy = _policy()
    verdicts = VERDICTS
    scale = budget_scale(policy, verdicts, 50)
    assert scale == pytest.approx(0.01 / 0.25)  # every class at the floor; smaller would change nothing
    assert 0 < scale <= 1
    assert expected_labels(policy, verdicts, scale) == pytest.approx(1.1 * 12_000 * 0.01)
    _policy(audit_scale=scale)  # a valid scale


# --- the policy and its live keys -------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "build"),
    [
        ("audit_floor", lambda: _policy(audit_floor=0.0)),
        ("audit_floor", lambda: _policy(audit_floor=1.5)),
        ("audit_scale", lambda: _policy(audit_scale=0.0)),
        ("audit_scale", lambda: _policy(audit_scale=1.01)),
        ("audit_uncertain_share", lambda: _policy(audit_uncertain_share=-0.1)),
        ("audit_uncertain_margin", lambda: _policy(audit_uncertain_margin=2.0)),
        ("audit_double_share", lambda: _policy(audit_double_share=1.5)),
    ],
)
def test_the_policy_refuses_sampling_settings_out_of_range(name: str, build: Callable[[], Policy]) -> None:
    with pytest.raises(ValueError, match=name):
        build()


def test_the_uncertain_share_and_the_floor_are_live_control_keys() -> None:
    policy = _policy()
    assert policy.apply(ControlUpdate(key="audit_uncertain_share", value=0.4)).audit_uncertain_share == 0.4
    assert policy.apply(ControlUpdate(key="audit_floor", value=0.02)).audit_floor == 0.02
    with pytest.raises(ValueError, match="audit_uncertain_share"):
        policy.apply(ControlUpdate(key="audit_uncertain_share", value=1.5))
    with pytest.raises(ValueError, match="audit_floor"):
        policy.apply(ControlUpdate(key="audit_floor", value=0.0))
    with pytest.raises(ValueError, match="needs a number"):
        policy.apply(ControlUpdate(key="audit_floor", value=True))
    assert CONTROLS["audit_uncertain_share"] == CONTROLS["audit_floor"] == "number"


def test_a_tombstone_restores_the_setting_but_keeps_the_budgets_scale() -> None:
    holder = PolicyHolder(_policy())
    holder.set_audit_scale(0.3)
    apply_record(holder, b"audit_floor", ControlUpdate(key="audit_floor", value=0.02).model_dump_json().encode())
    apply_record(holder, b"audit_floor", b'{"key": "audit_floor", "value": 0}')  # invalid: ignored
    assert (holder.current.audit_floor, holder.current.audit_scale) == (0.02, 0.3)
    apply_record(holder, b"audit_floor", None)
    assert (holder.current.audit_floor, holder.current.audit_scale) == (0.01, 0.3)


# --- decisions and their records --------------------------------------------------------------


def _judge(ab_conf: float = 0.9, ba_conf: float = 0.8) -> ScriptedJudge:
    pair = make_pair()
    return ScriptedJudge(per_order(pair, tone_reply("A", ab_conf), tone_reply("B", ba_conf)))


def _record(decision: Decision, judged: CandidatePair | TieBreakRequest) -> DecisionRecord:
    rec = record_for(decision, judged)
    assert rec is not None
    return rec


async def test_a_confident_verdicts_record_carries_its_probability_and_class() -> None:
    pair = make_pair()
    decision = await judge_pair(pair, _judge(), _policy())
    assert isinstance(decision.outcome, PairVerdict)
    rec = _record(decision, pair)
    assert (rec.inclusion_probability, rec.sampling_class) == (0.05, "confident")
    assert rec.audit_sample is (decision.audit_copy is not None) is (audit_fraction(pair.pair_id) < 0.05)


async def test_a_verdict_just_over_its_threshold_is_sampled_as_uncertain() -> None:
    pair = make_pair()
    decision = await judge_pair(pair, _judge(0.75, 0.75), _policy())
    assert isinstance(decision.outcome, PairVerdict)
    assert (decision.facts.inclusion_probability, decision.facts.sampling_class) == (0.25, "uncertain")


async def test_a_drawn_verdict_is_marked_in_its_record_and_copy() -> None:
    pair = make_pair()
    decision = await judge_pair(pair, _judge(), _policy(audit_share=1.0, audit_double_share=1.0))
    copy = decision.audit_copy
    assert isinstance(copy, ReviewRequest)
    assert (copy.reason, copy.audit, copy.reviews_wanted) == ("audit_sample", True, 2)
    rec = _record(decision, pair)
    assert (rec.audit_sample, rec.inclusion_probability, rec.sampling_class) == (True, 1.0, "confident")
    single = await judge_pair(pair, _judge(), _policy(audit_share=1.0, audit_double_share=0.0))
    assert single.audit_copy is not None
    assert single.audit_copy.reviews_wanted == 1


async def test_a_split_jurys_verdict_is_uncertain() -> None:
    pair = make_pair(rubric=h2h_rubric())

    def juror(who: str, model: str) -> ScriptedJudge:
        ab, ba = ("A", "B") if who == X else ("B", "A")
        return ScriptedJudge(per_order(pair, h2h_reply(ab, 0.95), h2h_reply(ba, 0.95)), model=model)

    split = await judge_pair(pair, [juror(X, "m1"), juror(X, "m2"), juror(Y, "m3")], _policy())
    assert isinstance(split.outcome, PairVerdict)
    assert split.facts.sampling_class == "uncertain"
    unanimous = await judge_pair(pair, [juror(X, "m1"), juror(X, "m2")], _policy())
    assert isinstance(unanimous.outcome, PairVerdict)
    assert unanimous.facts.sampling_class == "confident"


async def test_tiebreak_request_none_tiebreak_verdict_uncertain_review_certain() -> None:
    pair = make_pair()
    first = await judge_pair(pair, ScriptedJudge(per_order(pair, tone_reply("A"), tone_reply("A"))), _policy())
    assert isinstance(first.outcome, TieBreakRequest)
    way_station = _record(first, pair)
    assert (way_station.inclusion_probability, way_station.sampling_class, way_station.audit_sample) == (
        None,
        None,
        False,
    )
    resolver = ScriptedJudge(per_order(pair, tiebreak_reply(ALL_B), tiebreak_reply(ALL_A)))
    final = await resolve_tiebreak(first.outcome, resolver, _policy())
    assert isinstance(final.outcome, PairVerdict)
    rec = _record(final, first.outcome)
    assert (rec.stage, rec.inclusion_probability, rec.sampling_class) == ("tiebreak", 0.25, "uncertain")
    guarded = await judge_pair(pair, _judge(), _policy(kappa_guard_tripped=True))
    assert isinstance(guarded.outcome, ReviewRequest)
    review = _record(guarded, pair)
    assert (review.inclusion_probability, review.sampling_class, review.audit_sample) == (1.0, "review", False)


async def test_audit_off_and_rule_settled_verdicts_record_no_probability() -> None:
    pair = make_pair()
    off = await judge_pair(pair, _judge(), _policy(audit_share=0.0))
    assert isinstance(off.outcome, PairVerdict)
    assert off.audit_copy is None
    assert (_record(off, pair).inclusion_probability, _record(off, pair).sampling_class) == (None, None)
    identical = make_pair(outputs=("same text", "same text"))
    settled = await judge_pair(identical, _judge(), _policy(audit_share=1.0))
    assert isinstance(settled.outcome, PairVerdict)
    assert settled.outcome.decided_by == "rule"
    assert settled.audit_copy is None
    assert _record(settled, identical).inclusion_probability is None


def test_a_record_refuses_a_zero_probability() -> None:
    pair = make_pair()
    with pytest.raises(ValueError, match="greater than 0"):
        DecisionRecord.model_validate(
            {
                "pair_id": pair.pair_id,
                "series": {"judge_provider": "p", "judge_model": "m", "prompt_template_hash": "h", "rubric": "r"},
                "stage": "primary",
                "outcome": "verdict",
                "auto_decided": True,
                "candidates": (X, Y),
                "inclusion_probability": 0.0,
            }
        )
