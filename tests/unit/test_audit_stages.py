"""Agreement with people by deciding stage, the tie-break's own threshold and its switch-off (agents.audit.stages),
and the worker side: the policy, the tie-break's decision, the thresholds topic's records."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom, binomtest

from pairjudge.agents.audit import ConfidenceHistogram, SeriesDelta
from pairjudge.agents.audit.stages import (
    ALTERNATIVE_GAPS,
    StageView,
    below_target,
    below_target_evalue,
    stage_agreement,
    stage_view,
    tiebreak_threshold_key,
)
from pairjudge.agents.core import resolve_tiebreak
from pairjudge.agents.policy import Policy
from pairjudge.agents.policy_overlay import apply_policy
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.agents.stats import wilson_interval
from pairjudge.agents.truth_table import Reconciliation
from pairjudge.schemas import PairVerdict, ReviewRequest
from pairjudge.schemas.audit import AuditObservation, AuditSeries, ThresholdUpdate
from pairjudge.streams.audit.report_stages import flips_per_hour, review_load
from pairjudge.streams.control.live import PolicyHolder, apply_threshold_record
from pairjudge.streams.kafka.codecs import encode
from tests.unit.factories import FIRST_ID, SECOND_ID, per_order, tiebreak_reply
from tests.unit.test_audit import SERIES, label, record
from tests.unit.test_tiebreak import ALL_A, ALL_B, _request

Z = 1.959963984540054


def _histogram(confidences: list[float], agrees: list[bool]) -> ConfidenceHistogram:
    h = ConfidenceHistogram()
    for c, ok in zip(confidences, agrees, strict=True):
        obs = AuditObservation(
            kind="labelled",
            series=SERIES,
            record=record(stage="tiebreak", winner=FIRST_ID, confidence=c),
            label=label(FIRST_ID if ok else SECOND_ID),
        )
        h.add(obs, "tiebreak")
    return h


# --- the by-stage rows --------------------------------------------------------------------------------


@pytest.mark.parametrize(("k", "n"), [(0, 50), (13, 50), (41, 50), (50, 50), (37, 120), (500, 700)])
def test_the_interval_is_scipys_wilson_interval(k: int, n: int) -> None:
    h = _histogram([0.9] * n, [True] * k + [False] * (n - k))
    row = stage_agreement("tiebreak", h, min_labels=30)
    ref = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert (row.labels, row.agreeing) == (n, k)
    assert row.low == pytest.approx(ref.low, abs=1e-9)
    assert row.high == pytest.approx(ref.high, abs=1e-9)


def test_below_the_minimum_only_the_counts_are_shown() -> None:
    row = stage_agreement("tiebreak", _histogram([0.9] * 12, [True] * 3 + [False] * 9), min_labels=30)
    assert (row.labels, row.agreeing, row.min_labels) == (12, 3, 30)
    assert (row.agreement, row.low, row.high) == (None, None, None)


def _coverage(z: float, p: float, n: int, runs: int = 1000) -> float:
    """Share of ``runs`` simulated stages (n labels, true agreement p) whose interval holds p (vectorised)."""
    k = np.random.default_rng(41).binomial(n, p, size=runs)
    hat = k / n
    denom = 1 + z * z / n
    centre = (hat + z * z / (2 * n)) / denom
    half = z * np.sqrt(hat * (1 - hat) / n + z * z / (4 * n * n)) / denom
    # The vectorised formula is the project's: checked against wilson_interval on the same draws.
    for i in range(0, runs, 97):
        assert (max(0.0, centre[i] - half[i]), min(1.0, centre[i] + half[i])) == pytest.approx(
            wilson_interval(int(k[i]), n, z)
        )
    return float(np.mean((np.maximum(0, centre - half) <= p) & (p <= np.minimum(1, centre + half))))


@pytest.mark.parametrize("p", [0.33, 0.55, 0.71, 0.85])
@pytest.mark.parametrize("n", [30, 100, 400])
def test_the_95_interval_covers_the_true_agreement_in_1000_runs(p: float, n: int) -> None:
    """The tie-break's real agreement range (33-71%) and the primary's (81-87%): Wilson covers at about 95%
    from the minimum of 30 labels on. A 68% interval (z = 1) fails the same check, so it can fail."""
    assert _coverage(Z, p, n) >= 0.92
    assert _coverage(1.0, p, n) < 0.9


# --- the stages are counted apart ---------------------------------------------------------------------


def test_each_stage_has_its_own_histogram_and_a_delta_carries_both() -> None:
    delta = SeriesDelta(SERIES, 0.0, 60.0)
    for stage, ok in [("primary", True), ("tiebreak", False), ("tiebreak", True)]:
        obs = AuditObservation(
            kind="labelled",
            series=SERIES,
            record=record(stage=stage, confidence=0.8),
            label=label(FIRST_ID if ok else SECOND_ID),
        )
        delta.add(obs)
    assert (sum(delta.calibration.counts), sum(delta.calibration.agrees)) == (1, 1)
    assert (sum(delta.tiebreak.counts), sum(delta.tiebreak.agrees)) == (2, 1)
    back = SeriesDelta.from_event(delta.to_event())
    assert back.tiebreak.counts == delta.tiebreak.counts
    assert back.tiebreak.agrees == delta.tiebreak.agrees
    assert back.calibration.counts == delta.calibration.counts


@pytest.mark.parametrize(
    ("k", "n", "target"), [(0, 1, 0.9), (20, 100, 0.9), (85, 100, 0.9), (90, 100, 0.9), (30, 40, 0.8)]
)
def test_the_evalue_is_the_mixture_of_binomial_likelihood_ratios(k: int, n: int, target: float) -> None:
    """Cross-checked against scipy's binomial probabilities: the alternatives' mean of P(k | q) / P(k | target)."""
    qs = [target - g for g in ALTERNATIVE_GAPS if target - g > 0]
    reference = float(np.mean([binom.pmf(k, n, q) / binom.pmf(k, n, target) for q in qs]))
    assert below_target_evalue(k, n, target=target) == pytest.approx(reference, rel=1e-9)


def _log_evalues(k: np.ndarray, n: np.ndarray, target: float) -> np.ndarray:
    """The e-value's log for arrays of counts (vectorised; checked against the project's on samples)."""
    qs = np.array([target - g for g in ALTERNATIVE_GAPS if target - g > 0])
    logs = k[..., None] * np.log(qs / target) + (n - k)[..., None] * np.log((1 - qs) / (1 - target))
    top = logs.max(-1)
    return np.asarray(top + np.log(np.exp(logs - top[..., None]).mean(-1)))


@pytest.mark.parametrize(("p", "most"), [(0.9, 0.1), (0.95, 0.1)])
def test_a_tiebreak_at_its_target_is_rarely_switched_off_however_often_the_audit_looks(p: float, most: float) -> None:
    """1,000 runs of 400 labels, looked at after every label: the share of runs the test ever calls below target
    stays under the risk (0.1) for a tie-break at (or above) its target of 0.9 (measured: 6% at 0.9)."""
    target, risk, runs, labels = 0.9, 0.1, 1000, 400
    k = np.cumsum(np.random.default_rng(5).random((runs, labels)) < p, axis=1)
    n = np.arange(1, labels + 1)[None, :]
    log_e = _log_evalues(k, np.broadcast_to(n, k.shape), target)
    for run in range(0, runs, 111):
        assert below_target(int(k[run, -1]), labels, target=target, risk=risk) == (log_e[run, -1] >= np.log(1 / risk))
    assert float(np.mean((log_e >= np.log(1 / risk)).any(axis=1))) <= most


@pytest.mark.parametrize(("p", "within"), [(0.33, 20), (0.5, 30), (0.71, 100)])
def test_a_tiebreak_far_below_its_target_is_caught_within_a_few_dozen_labels(p: float, within: int) -> None:
    """The issue's real tie-breaks (33-71% agreement): 99% of 1,000 runs are called below 0.9 within ``within``
    labels (measured medians: 4, 5 and 15)."""
    runs = 1000
    k = np.cumsum(np.random.default_rng(6).random((runs, within)) < p, axis=1)
    n = np.broadcast_to(np.arange(1, within + 1)[None, :], k.shape)
    assert float(np.mean((_log_evalues(k, n, 0.9) >= np.log(10)).any(axis=1))) >= 0.99


def _view(h: ConfidenceHistogram, min_labels: int = 100) -> StageView:
    return stage_view(
        SERIES,
        ConfidenceHistogram(),
        h,
        configured=0.6,
        min_labels=30,
        target=0.9,
        risk=0.1,
        calibration_min_labels=min_labels,
    )


def test_a_mostly_wrong_tiebreak_is_switched_off_with_an_alert_in_plain_words() -> None:
    n = 120
    view = _view(_histogram([0.9] * n, [i % 5 == 0 for i in range(n)]))
    assert view.off
    assert view.live_threshold is None
    alert = view.alert(SERIES.key)
    assert alert.kind == "tiebreak_below_target"
    assert alert.value == pytest.approx(24 / 120)
    assert "24 of 120 labelled tie-break decisions agreed with people (20%" in alert.message
    assert "go to people for review" in alert.message
    update = view.update(SERIES.key)
    assert (update.stage, update.switched_off, update.threshold, update.labels) == ("tiebreak", True, None, 120)


def test_a_good_tiebreak_gets_its_own_calibrated_threshold() -> None:
    rng = np.random.default_rng(3)
    confidences = list(np.round(rng.uniform(0.6, 1.0, 400), 2))
    # Right on 99% of its confident decisions (0.8 and up), a coin below: a threshold near 0.8 carries the target.
    agrees = [bool(rng.random() < (0.99 if c >= 0.8 else 0.5)) for c in confidences]
    view = _view(_histogram(confidences, agrees))
    assert not view.off
    assert view.live_threshold is not None
    assert 0.75 <= view.live_threshold <= 0.85
    assert view.threshold.source == "calibrated"


def test_below_the_minimum_of_labels_it_is_not_switched_off() -> None:
    view = _view(_histogram([0.9] * 29, [False] * 29))  # the audit's minimum here is 30
    assert not view.off
    assert view.threshold.source == "configured"


def test_a_tiebreak_that_shows_neither_stays_on_at_its_configured_threshold() -> None:
    """88% on 120 labels: no threshold shows 90%, and nothing shows it below 90% either."""
    view = _view(_histogram([0.9] * 120, [i % 25 not in (0, 1, 2) for i in range(120)]))
    assert view.threshold.source == "configured"
    assert not view.off


def test_the_tiebreak_threshold_keeps_its_promise_in_1000_runs() -> None:
    """The primary's construction on the tie-break's labels: over 1,000 simulated stages (200 labels each, true
    agreement equal to the stated confidence), the returned threshold's true agreement is below the target in
    at most ``risk`` of the runs."""
    rng = np.random.default_rng(11)
    target, risk, runs, n = 0.85, 0.1, 1000, 200
    bins = np.arange(60, 101)  # confidences 0.60 ... 1.00
    failures = 0
    for _ in range(runs):
        idx = rng.integers(0, len(bins), n)
        conf = bins[idx] / 100
        ok = rng.random(n) < conf
        counts = np.bincount(bins[idx], minlength=101)
        agrees = np.bincount(bins[idx], weights=ok, minlength=101)
        h = ConfidenceHistogram(counts=[int(c) for c in counts], agrees=[int(a) for a in agrees])
        found = h.guarantee(target=target, risk=risk, min_labels=100, floor=0.6)
        if found.threshold is not None:
            above = bins[bins >= round(found.threshold * 100)] / 100
            failures += float(above.mean()) < target  # A(t): the mean confidence of the uniform bins above t
    assert failures / runs <= risk


# --- the worker: the policy, the tie-break's decision, the thresholds topic ------------------------------


def test_a_switched_off_series_sends_its_flips_to_review() -> None:
    flip = Reconciliation("tiebreak", "position_inconsistent", None, 0.9, consistent=False, flip=True)
    policy = Policy(tiebreak_off_series=frozenset({SERIES.key}))
    assert apply_policy(flip, policy, "normal", SERIES.key).reason == "tiebreak_disabled"
    assert apply_policy(flip, policy, "normal", "another-series") is flip
    guarded = Policy(kappa_guard_tripped=True, tiebreak_off_series=policy.tiebreak_off_series)
    assert apply_policy(flip, guarded, "normal", SERIES.key).reason == "kappa_guard"


async def test_the_tiebreak_stage_checks_the_switch_and_its_own_threshold() -> None:
    request = _request()
    key = AuditSeries.for_pair(request.primary_judge, request.pair).key
    # Switched off for the series (the request was sent before): review, no judge call.
    judge = ScriptedJudge([])
    off = await resolve_tiebreak(request, judge, Policy(tiebreak_off_series=frozenset({key})))
    assert isinstance(off.outcome, ReviewRequest)
    assert off.outcome.reason == "tiebreak_disabled"
    assert judge.calls == 0

    def answers() -> ScriptedJudge:
        return ScriptedJudge(per_order(request.pair, tiebreak_reply(ALL_A, confidence=0.8), tiebreak_reply(ALL_B)))

    # Its own calibrated threshold above the verdict's mean confidence: held back, its winner kept on the record.
    held = await resolve_tiebreak(request, answers(), Policy(tiebreak_series_thresholds={key: 0.95}))
    assert isinstance(held.outcome, ReviewRequest)
    assert held.outcome.reason == "tiebreak_no_signal"
    assert held.facts.judged_winner == FIRST_ID
    assert held.facts.judged_confidence is not None
    # At or below it: the verdict stands.
    mean = held.facts.judged_confidence
    passed = await resolve_tiebreak(request, answers(), Policy(tiebreak_series_thresholds={key: mean}))
    assert isinstance(passed.outcome, PairVerdict)
    assert passed.outcome.decided_by == "tiebreak"


def test_the_worker_follows_the_tiebreak_records_and_their_tombstones() -> None:
    holder = PolicyHolder(Policy())
    key = tiebreak_threshold_key(SERIES.key).encode()
    update = ThresholdUpdate(
        series=SERIES.key, threshold=None, target=0.9, risk=0.1, labels=120, stage="tiebreak", switched_off=True
    )
    apply_threshold_record(holder, key, encode(update))
    assert not holder.current.tiebreak_on_for(SERIES.key)
    assert holder.current.series_thresholds == {}  # the primary's threshold is untouched
    calibrated = update.model_copy(update={"threshold": 0.92, "switched_off": False})
    apply_threshold_record(holder, key, encode(calibrated))
    assert holder.current.tiebreak_on_for(SERIES.key)
    assert holder.current.tiebreak_verdict_threshold_for(SERIES.key) == 0.92
    apply_threshold_record(holder, key, encode(update))
    apply_threshold_record(holder, key, None)  # a person deleted the record: on again, configured threshold
    assert holder.current.tiebreak_on_for(SERIES.key)
    assert holder.current.tiebreak_verdict_threshold_for(SERIES.key) == Policy().tiebreak_confidence_threshold


def test_the_review_load_is_the_flip_rate_per_hour_and_day() -> None:
    from datetime import UTC, datetime, timedelta

    from pairjudge.schemas.audit import AuditSnapshot

    start = datetime(2026, 12, 6, 10, tzinfo=UTC)
    window = AuditSnapshot(
        series=SERIES.key,
        window_start=start,
        window_end=start + timedelta(hours=2),
        final=True,
        pairs=100,
        verdicts=60,
        flips=30,
        tiebreaks=40,
        reviews=0,
        invalid_replies=0,
        position_a_wins=0,
        human_labels=0,
        tiebreak_off=True,
        published_at=start + timedelta(hours=3),
    )
    assert flips_per_hour([window]) == pytest.approx(15.0)
    assert review_load([window]) == (
        "At the current flip rate (15.0 per hour), sending flips to people instead of the tie-break adds up to "
        "15.0 review items per hour (360 per day)."
    )


async def test_the_audit_sample_covers_tiebreak_verdicts() -> None:
    """Tie-break verdicts are "uncertain": drawn at ``audit_uncertain_share``, never left out of the sample."""
    request = _request()
    judge = ScriptedJudge(per_order(request.pair, tiebreak_reply(ALL_A), tiebreak_reply(ALL_B)))
    decision = await resolve_tiebreak(request, judge, Policy(audit_uncertain_share=1.0))
    assert isinstance(decision.outcome, PairVerdict)
    assert decision.audit_copy is not None
    assert (decision.facts.sampling_class, decision.facts.inclusion_probability) == ("uncertain", 1.0)
    judge = ScriptedJudge(per_order(request.pair, tiebreak_reply(ALL_A), tiebreak_reply(ALL_B)))
    default = await resolve_tiebreak(request, judge, Policy())
    assert default.facts.inclusion_probability == Policy().audit_uncertain_share
