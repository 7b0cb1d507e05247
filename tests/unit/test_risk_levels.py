"""Risk levels decide (docs/guides/risk-levels.md): each level's thresholds route a pair to a verdict, the
tie-break or a person; the thresholds are validated and live-changeable; each level is its own drift series."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from pairjudge.agents.audit import TierCalibration
from pairjudge.agents.core import judge_pair, resolve_tiebreak
from pairjudge.agents.judge import judge_info
from pairjudge.agents.policy import Policy, RiskThresholds
from pairjudge.agents.policy_overlay import wants_review
from pairjudge.agents.prompts import pair_template_hash, template_hash
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.schemas import CandidatePair, ControlUpdate, ReviewRequest, TieBreakRequest
from pairjudge.schemas.audit import AuditSeries
from pairjudge.schemas.kinds import CONTROLS as CONTROL_SPECS
from pairjudge.schemas.kinds import RISK_THRESHOLD_KEYS, ControlKey
from pairjudge.schemas.outcomes import DecidedEvent, decided_kind
from pairjudge.schemas.pair import RiskLevel
from pairjudge.schemas.rubric import DEFAULT_TIEBREAK_WEIGHTS
from pairjudge.streams.audit.handlers import Audit
from pairjudge.streams.config.sections import PolicySettings
from pairjudge.streams.config.settings import AuditSettings, Settings
from pairjudge.streams.control.live import CONTROL_KEYS, PolicyHolder, parse_value, publish_control
from pairjudge.streams.review.views import CONTROLS
from tests.unit.factories import make_pair, per_order, tiebreak_reply, tone_reply

#: The nine thresholds, each level's three, from the registry (tests/unit/test_kinds_registry.py checks they reach
#: the settings, the docs and the operators' form).
RISK_KEYS: tuple[ControlKey, ...] = RISK_THRESHOLD_KEYS


def _pair(risk: RiskLevel | None) -> CandidatePair:
    return make_pair(pair_id=f"risk-{risk}", risk_level=risk)


def _consistent(pair: CandidatePair, confidence: float) -> ScriptedJudge:
    # Both orders name the first candidate (A in AB, B in BA) with this confidence.
    return ScriptedJudge(per_order(pair, tone_reply("A", confidence), tone_reply("B", confidence)))


def _flip(pair: CandidatePair, confidence: float) -> ScriptedJudge:
    # Both orders pick whatever sits in position A: a position flip.
    return ScriptedJudge(per_order(pair, tone_reply("A", confidence), tone_reply("A", confidence)))


def _routed(outcome: DecidedEvent) -> tuple[str, str | None]:
    return decided_kind(outcome), outcome.outcome_reason


# --- the defaults and the table ---------------------------------------------------------------


def test_normal_is_todays_policy_and_high_is_stricter() -> None:
    policy = Policy()
    assert policy.thresholds_for("normal") == RiskThresholds(primary=0.7, tiebreak=0.6, review_below=0.0)
    # "low" loosens nothing by default: only an operator lowers it.
    assert policy.thresholds_for("low") == policy.thresholds_for("normal")
    assert policy.thresholds_for("high") == RiskThresholds(primary=0.85, tiebreak=0.8, review_below=0.85)
    assert policy.primary_threshold_for("any-series") == 0.7
    assert policy.tiebreak_threshold_for() == 0.6


def test_a_high_pair_never_needs_less_than_a_normal_one() -> None:
    policy = Policy(primary_confidence_threshold=0.9, tiebreak_confidence_threshold=0.85, review_below_confidence=0.9)
    assert policy.thresholds_for("high") == RiskThresholds(primary=0.9, tiebreak=0.85, review_below=0.9)
    # Low follows its own settings, not normal's.
    assert policy.thresholds_for("low").primary == 0.7


def test_a_series_calibrated_threshold_raises_every_level_and_lowers_none() -> None:
    policy = Policy(series_thresholds={"s": 0.9, "t": 0.5}, low_primary_confidence_threshold=0.6)
    assert [policy.primary_threshold_for("s", level) for level in ("low", "normal", "high")] == [0.9, 0.9, 0.9]
    assert [policy.primary_threshold_for("t", level) for level in ("low", "normal", "high")] == [0.6, 0.7, 0.85]


@pytest.mark.parametrize(
    ("risk", "confidence", "expected"),
    [
        (None, 0.9, ("verdict", None)),
        (None, 0.78, ("verdict", None)),
        (None, 0.65, ("tiebreak", "low_confidence")),
        ("normal", 0.78, ("verdict", None)),
        ("normal", 0.65, ("tiebreak", "low_confidence")),
        ("low", 0.78, ("verdict", None)),
        ("low", 0.65, ("tiebreak", "low_confidence")),
        ("high", 0.9, ("verdict", None)),
        ("high", 0.85, ("verdict", None)),  # the threshold itself decides
        ("high", 0.84, ("review", "risk_review")),
        ("high", 0.78, ("review", "risk_review")),  # a verdict at normal risk
        ("high", 0.3, ("review", "risk_review")),
    ],
)
async def test_each_level_routes_a_consistent_pick_by_its_own_thresholds(
    risk: RiskLevel | None, confidence: float, expected: tuple[str, str | None]
) -> None:
    pair = _pair(risk)
    judge = _consistent(pair, confidence)
    decision = await judge_pair(pair, judge, Policy())
    assert _routed(decision.outcome) == expected
    assert decision.facts.primary_threshold == Policy().thresholds_for(pair.risk).primary
    if expected == ("review", "risk_review"):
        # The judges' would-be answers travel with the review, and the policy's override is recorded.
        assert isinstance(decision.outcome, ReviewRequest)
        assert len(decision.outcome.orderings) == 2
        assert decision.facts.policy_overrode == "tiebreak"


@pytest.mark.parametrize(
    ("risk", "confidence", "expected"),
    [
        ("normal", 0.6, ("tiebreak", "position_inconsistent")),
        ("high", 0.9, ("tiebreak", "position_inconsistent")),  # a confident contradiction: the tie-break
        ("high", 0.6, ("review", "risk_review")),
    ],
)
async def test_a_flip_at_high_risk_goes_to_a_person_unless_the_judge_was_confident(
    risk: RiskLevel, confidence: float, expected: tuple[str, str | None]
) -> None:
    pair = _pair(risk)
    decision = await judge_pair(pair, _flip(pair, confidence), Policy())
    assert _routed(decision.outcome) == expected


async def test_review_below_applies_to_any_level_that_sets_it() -> None:
    policy = Policy(review_below_confidence=0.5, low_review_below_confidence=0.68)
    normal, low = _pair(None), _pair("low")
    assert _routed((await judge_pair(normal, _consistent(normal, 0.4), policy)).outcome) == ("review", "risk_review")
    assert _routed((await judge_pair(normal, _consistent(normal, 0.6), policy)).outcome) == (
        "tiebreak",
        "low_confidence",
    )
    assert _routed((await judge_pair(low, _consistent(low, 0.65), policy)).outcome) == ("review", "risk_review")


async def test_a_lower_review_below_lets_a_high_pair_reach_the_tiebreak() -> None:
    pair = _pair("high")
    policy = Policy(high_review_below_confidence=0.6)
    assert _routed((await judge_pair(pair, _consistent(pair, 0.78), policy)).outcome) == (
        "tiebreak",
        "low_confidence",
    )
    assert _routed((await judge_pair(pair, _consistent(pair, 0.5), policy)).outcome) == ("review", "risk_review")


async def test_the_kappa_guard_is_named_first_and_the_risk_level_before_the_tiebreak_switch() -> None:
    high, normal = _pair("high"), _pair(None)
    guard = Policy(kappa_guard_tripped=True)
    off = Policy(tiebreak_enabled=False)
    assert _routed((await judge_pair(high, _consistent(high, 0.78), guard)).outcome) == ("review", "kappa_guard")
    assert _routed((await judge_pair(high, _consistent(high, 0.78), off)).outcome) == ("review", "risk_review")
    assert _routed((await judge_pair(normal, _consistent(normal, 0.65), off)).outcome) == (
        "review",
        "tiebreak_disabled",
    )


async def test_an_invalid_ordering_keeps_its_own_reason_at_high_risk() -> None:
    pair = _pair("high")
    judge = ScriptedJudge(per_order(pair, "not json", tone_reply("B", 0.5)))
    decision = await judge_pair(pair, judge, Policy(max_reasks=0))
    assert _routed(decision.outcome) == ("review", "ordering_invalid")


def test_an_unknown_confidence_counts_as_below_a_review_floor() -> None:
    policy = Policy()
    assert wants_review(policy, "high", None)
    assert not wants_review(policy, "normal", None)  # review_below 0: never
    assert not wants_review(policy, "high", 0.85)
    assert wants_review(policy, "high", 0.849)


async def test_the_tiebreak_stage_holds_a_high_pair_to_its_own_threshold() -> None:
    all_b = {c.name: "B" for c in DEFAULT_TIEBREAK_WEIGHTS.criteria}
    outcomes = {}
    for risk in ("normal", "high"):
        pair = _pair(risk)
        primary = await judge_pair(pair, _flip(pair, 0.9), Policy())
        assert isinstance(primary.outcome, TieBreakRequest)
        # Both orders pick the first candidate at 0.7: above normal's 0.6, below high's 0.8.
        judge = ScriptedJudge(per_order(pair, tiebreak_reply(confidence=0.7), tiebreak_reply(all_b, confidence=0.7)))
        decision = await resolve_tiebreak(primary.outcome, judge, Policy())
        outcomes[risk] = (_routed(decision.outcome), judge.calls)
    assert outcomes["normal"] == (("verdict", None), 2)
    # Below the high threshold: the forced-choice re-ask, still 0.7, so a person decides.
    assert outcomes["high"] == (("review", "tiebreak_no_signal"), 4)


# --- validation and live changes ----------------------------------------------------------------


@pytest.mark.parametrize("key", RISK_KEYS)
@pytest.mark.parametrize("bad", [-0.01, 1.01])
def test_a_threshold_outside_zero_to_one_is_refused(key: ControlKey, bad: float) -> None:
    values: dict[str, Any] = {key: bad}
    with pytest.raises(ValueError, match=key):
        Policy(**values)
    with pytest.raises(ValueError, match=key):
        Policy().apply(ControlUpdate(key=key, value=bad))
    with pytest.raises(ValidationError):
        PolicySettings(**values)


@pytest.mark.parametrize("key", RISK_KEYS)
def test_each_risk_key_changes_its_setting_live_and_a_tombstone_restores_it(key: ControlKey) -> None:
    holder = PolicyHolder(Policy())
    configured = getattr(holder.current, key)
    holder.apply(ControlUpdate(key=key, value=0.42))
    assert getattr(holder.current, key) == 0.42
    # Nothing else moved.
    assert dataclasses.replace(holder.current, **{key: configured}) == Policy()
    holder.clear(key)
    assert getattr(holder.current, key) == configured


def test_a_switch_value_and_an_unknown_key_are_refused() -> None:
    with pytest.raises(ValueError, match="needs a number"):
        Policy().apply(ControlUpdate(key="high_primary_confidence_threshold", value=True))
    with pytest.raises(ValidationError):
        ControlUpdate(key="risk.high.primary", value=0.9)
    assert parse_value("high_review_below_confidence", "0.8") == 0.8


async def test_the_cli_refuses_a_bad_value_before_it_reaches_the_topic() -> None:
    # No broker at this address: the refusal must come before any connection.
    settings = Settings.model_validate({"kafka": {"bootstrap_servers": "127.0.0.1:1"}})
    with pytest.raises(ValueError, match="high_primary_confidence_threshold"):
        await publish_control(settings, "high_primary_confidence_threshold", 1.5, "test")
    with pytest.raises(ValueError, match="unknown control key"):
        await publish_control(settings, "risk.high.primary", None, "test")


def test_the_settings_map_into_the_policy_and_the_operators_form_lists_every_key() -> None:
    values = {key: 0.5 + i / 100 for i, key in enumerate(RISK_KEYS)}
    policy = PolicySettings(**values).to_policy()
    assert {key: getattr(policy, key) for key in RISK_KEYS} == values
    assert PolicySettings().to_policy() == Policy()
    assert set(RISK_KEYS) <= set(CONTROL_KEYS)
    # Every key is on the form but those the registry keeps off it (the kappa guard, the shadow experiments' lists).
    assert set(CONTROLS) == {key for key, spec in CONTROL_SPECS.items() if spec.on_form}
    assert set(CONTROL_SPECS) == set(CONTROL_KEYS)
    assert {key for key, spec in CONTROL_SPECS.items() if not spec.on_form} == {
        "kappa_guard_tripped",
        "shadow_paused",
        "shadow_shares",
    }


# --- the series dimension -----------------------------------------------------------------------


def test_a_normal_pair_keeps_todays_series_key_and_other_levels_get_their_own() -> None:
    info = judge_info(ScriptedJudge([]), template_hash("tone_style"))
    legacy = f"scripted:scripted|{info.prompt_template_hash}|tone_style|exp-tone-42"
    assert AuditSeries.for_pair(info, _pair(None)).key == legacy
    assert AuditSeries.for_pair(info, _pair("normal")) == AuditSeries.for_pair(info, _pair(None))
    assert AuditSeries.for_pair(info, _pair("normal")).risk_level is None
    assert AuditSeries.for_pair(info, _pair("high")).key == f"{legacy}|risk=high"
    assert AuditSeries.for_pair(info, _pair("low")).key == f"{legacy}|risk=low"
    # A series stored before risk levels reads back as the normal series.
    stored = AuditSeries.for_pair(info, _pair(None)).model_dump(mode="json", exclude={"risk_level"})
    assert AuditSeries.model_validate(stored).key == legacy


async def test_a_calibrated_threshold_counts_only_for_its_own_level() -> None:
    normal, high = _pair(None), _pair("high")
    # The series of each pair as the core computes it: a pair with a risk level also shows the judge its
    # risk line, so its template hash (and series) differs beyond the "|risk=" suffix.
    normal_key = AuditSeries.for_pair(
        judge_info(ScriptedJudge([]), pair_template_hash("tone_style", normal, datamark=True)), normal
    ).key
    high_key = AuditSeries.for_pair(
        judge_info(ScriptedJudge([]), pair_template_hash("tone_style", high, datamark=True)), high
    ).key
    assert normal_key != high_key
    raised_normal = Policy(series_thresholds={normal_key: 0.95})
    assert _routed((await judge_pair(high, _consistent(high, 0.9), raised_normal)).outcome) == ("verdict", None)
    assert _routed((await judge_pair(normal, _consistent(normal, 0.9), raised_normal)).outcome) == (
        "tiebreak",
        "low_confidence",
    )
    raised_high = Policy(series_thresholds={high_key: 0.95})
    decision = await judge_pair(high, _consistent(high, 0.9), raised_high)
    # Not a verdict below the calibrated 0.95; at or above "review below" (0.85), so the tie-break.
    assert _routed(decision.outcome) == ("tiebreak", "low_confidence")
    assert decision.facts.primary_threshold == 0.95
    assert _routed((await judge_pair(high, _consistent(high, 0.8), raised_high)).outcome) == ("review", "risk_review")
    assert _routed((await judge_pair(normal, _consistent(normal, 0.9), raised_high)).outcome) == ("verdict", None)


def test_the_audit_walks_a_series_down_to_its_own_levels_threshold() -> None:
    # Only the parts the threshold needs: no Faust app; an empty windows table (no labels yet).
    audit = Audit.__new__(Audit)
    audit._policy = PolicyHolder(Policy())
    audit.settings = AuditSettings()
    audit.windows_table = SimpleNamespace(data={})
    audit._tiers = {}
    series = AuditSeries(judge_provider="p", judge_model="m", prompt_template_hash="h", rubric="tone_style")
    high = audit._threshold(series.model_copy(update={"risk_level": "high"}))
    normal = audit._threshold(series)
    assert (high.source, high.threshold) == ("configured", 0.85)
    assert (normal.source, normal.threshold) == ("configured", 0.7)


def test_the_audit_walks_a_cascade_tiers_series_to_its_own_floor_target_and_risk() -> None:
    audit = Audit.__new__(Audit)
    audit._policy = PolicyHolder(Policy())
    audit.settings = AuditSettings()
    audit.windows_table = SimpleNamespace(data={})
    audit._tiers = {"cheap": TierCalibration(floor=0.9, target=0.8, risk=0.05), "strong": TierCalibration()}
    series = AuditSeries(judge_provider="p", judge_model="m", prompt_template_hash="h", rubric="tone_style")
    cheap = audit._threshold(series.model_copy(update={"judge_tier": "cheap"}))
    strong = audit._threshold(series.model_copy(update={"judge_tier": "strong"}))
    assert (cheap.threshold, cheap.target, cheap.risk) == (0.9, 0.8, 0.05)
    defaults = AuditSettings()
    assert (strong.threshold, strong.target, strong.risk) == (
        0.7,
        defaults.calibration_target,
        defaults.calibration_risk,
    )
    # A floor under the risk level's threshold does not lower it.
    audit._tiers["cheap"] = TierCalibration(floor=0.5)
    assert audit._threshold(series.model_copy(update={"judge_tier": "cheap"})).threshold == 0.7
