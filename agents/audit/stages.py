"""Agreement with people by deciding stage, and the tie-break stage's own threshold and switch-off.

A series' automatic decisions come from two stages: the primary judge (both orders agreed; in a cascade each
tier is its own series, so its tier's name is on the row) and the tie-break, which decides the flips, ties and
low-confidence pairs the primary could not. Their agreement with people differs a lot (issue 41: 81-87% for
pairs whose orders agreed, 33-71% for tie-break decisions of the same real judges), so the audit keeps one
:class:`ConfidenceHistogram` per stage and reports each stage apart:

- :func:`stage_agreement`: a stage's labelled decisions, how many agreed, and the Wilson score interval (the
  interval the audit already gives rates: ``agents.audit.ambiguity``), shown only from ``min_labels`` labels.
- :func:`tiebreak_threshold`: the tie-break's verdicts get the primary's construction on their own labels
  (``agents.stats.calibrate_threshold``: Learn-then-Test, fixed-sequence, exact binomial test), walking no
  lower than the configured tie-break threshold, below which no tie-break verdict exists.
- :func:`tiebreak_cannot_reach`: with enough labels, no threshold reaching the target and its agreement shown
  below the target, the series' tie-break is switched off: its flips go to review (``Policy.tiebreak_off_series``),
  with an alert.
- :func:`restart_evidence`: a person switches it back on (``pairjudge control tiebreak-on``, the operators'
  page), usually after changing its prompt or model: the audit drops the labels that switched it off and judges
  the tie-break afresh on labels of the decisions it makes from then on (:func:`decided_before`).

What each figure assumes is in docs/guides/drift-audit.md#agreement-by-deciding-stage. Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

from pairjudge.agents.audit.calibration import CALIBRATION_SUFFIX, ConfidenceHistogram, threshold_snapshot
from pairjudge.agents.stats import wilson_interval
from pairjudge.schemas.audit import Alert, AuditSeries, StageAgreement, ThresholdSnapshot, ThresholdUpdate
from pairjudge.schemas.events import Stage

__all__ = [
    "ALTERNATIVE_GAPS",
    "TIEBREAK_KEY_SUFFIX",
    "Z_95",
    "StageView",
    "below_target",
    "below_target_evalue",
    "decided_before",
    "restart_evidence",
    "stage_agreement",
    "stage_view",
    "tiebreak_calibration_key",
    "tiebreak_cannot_reach",
    "tiebreak_threshold",
    "tiebreak_threshold_key",
]

#: The normal quantile of a two-sided 95% interval.
Z_95 = 1.959963984540054
#: How the tie-break stage's threshold is keyed on the thresholds topic: ``<series>#tiebreak`` (a ``#`` never
#: occurs in a series key's judge, template or rubric parts that the primary's threshold uses as they are).
TIEBREAK_KEY_SUFFIX = "#tiebreak"


def tiebreak_threshold_key(series_key: str) -> str:
    """The thresholds topic's key of a series' tie-break threshold."""
    return series_key + TIEBREAK_KEY_SUFFIX


def tiebreak_calibration_key(series_key: str) -> bytes:
    """Where the series' tie-break histogram is stored beside its windows: it ends like the primary's
    (``calibration_key``), so everything that skips calibration entries skips it too."""
    return (series_key + TIEBREAK_KEY_SUFFIX).encode() + CALIBRATION_SUFFIX


def stage_agreement(
    stage: Stage,
    histogram: ConfidenceHistogram,
    *,
    min_labels: int,
    series: AuditSeries | None = None,
    z: float = Z_95,
    confidence: float = 0.95,
) -> StageAgreement:
    """One stage's agreement with people over its labelled decisions, with its Wilson interval from
    ``min_labels`` labels on (below it: the counts only).

    Assumes the labelled decisions are independent draws with one common agreement rate; each stage's audit
    sample is drawn at its own rate (the tie-break's verdicts are all "uncertain", audited at
    ``audit_uncertain_share``; its held-back verdicts go to review and are all labelled), so within a stage
    the labels are not weighted; the stages are never pooled.
    """
    labels, agreeing = sum(histogram.counts), sum(histogram.agrees)
    shown = labels >= min_labels and labels > 0
    low, high = wilson_interval(agreeing, labels, z) if shown else (None, None)
    return StageAgreement(
        stage=stage,
        tier=series.judge_tier if series is not None and stage == "primary" else None,
        labels=labels,
        agreeing=agreeing,
        min_labels=min_labels,
        agreement=agreeing / labels if shown else None,
        low=low,
        high=high,
        confidence=confidence,
    )


def tiebreak_threshold(
    histogram: ConfidenceHistogram, *, configured: float, target: float, risk: float, min_labels: int
) -> ThresholdSnapshot:
    """The tie-break stage's threshold: the primary's construction (``threshold_snapshot``) on the tie-break's
    own labelled verdicts, the walk stopping at its configured threshold (each ordering's reply needed it, so no
    tie-break verdict's mean confidence is below it)."""
    return threshold_snapshot(histogram, configured=configured, target=target, risk=risk, min_labels=min_labels)


#: The alternatives the switch-off's e-value mixes: agreement this far below the target (an equal-weight mixture,
#: fixed in advance), so a tie-break far below is caught within a few dozen labels and one just below in hundreds.
ALTERNATIVE_GAPS: tuple[float, ...] = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5)


def below_target_evalue(agreeing: int, labels: int, *, target: float) -> float:
    """The evidence that a stage's agreement is below ``target``: an e-value for H0 "agreement >= target".

    For each alternative q = target - gap (``ALTERNATIVE_GAPS``, kept above 0), the likelihood ratio
    (q / target)^k ((1 - q) / (1 - target))^(n - k) of k agreeing in n labels is, label by label, a nonnegative
    supermartingale under any agreement >= target (each factor's mean is 1 - (p - target)(...) <= 1 there), and so
    is their average. Ville's inequality then bounds the chance it ever reaches 1 / risk by risk: the test stays
    valid however often the audit looks, as labels come in. It depends on the counts only, not their order.
    Assumes the labels are independent given the stage, each agreeing with probability at least the stage's rate.
    """
    if labels <= 0:
        return 1.0
    logs = []
    for gap in ALTERNATIVE_GAPS:
        q = target - gap
        if q <= 0.0:
            continue
        logs.append(agreeing * math.log(q / target) + (labels - agreeing) * math.log((1 - q) / (1 - target)))
    if not logs:
        return 1.0
    top = max(logs)
    return math.exp(top) * math.fsum(math.exp(x - top) for x in logs) / len(logs) if top < 700 else math.inf


def below_target(agreeing: int, labels: int, *, target: float, risk: float) -> bool:
    """Whether ``agreeing`` of ``labels`` show the stage's agreement below ``target``, at level ``risk`` under
    continuous monitoring (:func:`below_target_evalue` reaches 1 / risk)."""
    return below_target_evalue(agreeing, labels, target=target) >= 1.0 / risk


def tiebreak_cannot_reach(
    snapshot: ThresholdSnapshot, *, labels: int, agreeing: int, target: float, risk: float, min_labels: int
) -> bool:
    """Whether the series' tie-break cannot reach its target: ``min_labels`` labels (the audit's minimum for
    showing an estimate, so the alert can give the interval), no threshold shows the target, and its agreement
    over all its labelled verdicts is shown below the target (:func:`below_target`).

    Both, because "no threshold shows it" alone is not evidence of a bad tie-break: on 100 labels a tie-break
    that agrees 95% of the time fails to show 90% at risk 0.1 in 38% of draws, and a switch-off stops the very
    labels that could clear it. With the e-value test as well, a tie-break at or above its target is switched
    off in at most ``risk`` of runs however often the audit looks (tests/unit/test_audit_stages.py, 1,000 runs),
    one at 33-71% within its first labels. Between the two (nothing shown either way) the tie-break keeps
    deciding at its configured threshold, as the primary judge does before its calibration.
    """
    if snapshot.source != "configured" or labels < min_labels:
        return False
    return below_target(agreeing, labels, target=target, risk=risk)


@dataclass(frozen=True, slots=True)
class StageView:
    """A series' by-stage figures for its snapshot, and the tie-break's threshold or switch-off for the workers."""

    stages: tuple[StageAgreement, ...]
    threshold: ThresholdSnapshot
    off: bool
    tiebreak: StageAgreement

    @property
    def live_threshold(self) -> float | None:
        """The tie-break's calibrated threshold the workers apply; None while the configured one does."""
        return self.threshold.threshold if self.threshold.source == "calibrated" else None

    def snapshot_fields(self) -> dict[str, object]:
        """The ``AuditSnapshot`` fields this view fills."""
        return {"stages": self.stages, "tiebreak_threshold": self.threshold, "tiebreak_off": self.off}

    def update(self, series_key: str, fresh_since: float | None = None) -> ThresholdUpdate:
        """The thresholds topic's record of the series' tie-break stage (carrying when its evidence last started
        afresh, so the compacted topic keeps that moment after the person's own record is compacted away)."""
        t = self.threshold
        assert t.target is not None
        assert t.risk is not None
        return ThresholdUpdate(
            series=series_key,
            threshold=self.live_threshold,
            coverage=t.coverage,
            target=t.target,
            risk=t.risk,
            labels=t.labels,
            stage="tiebreak",
            switched_off=self.off,
            fresh_since=None if fresh_since is None else datetime.fromtimestamp(fresh_since, UTC),
        )

    def alert(self, series_key: str) -> Alert:
        """The switch-off's alert, in plain words: what was measured, and what happens now."""
        tb, t = self.tiebreak, self.threshold
        target = t.target or 0.0
        measured = f"{tb.agreeing:,} of {tb.labels:,} labelled tie-break decisions agreed with people"
        if tb.agreement is not None and tb.low is not None and tb.high is not None:
            measured += f" ({tb.agreement:.0%}, 95% interval {tb.low:.0%} to {tb.high:.0%})"
        return Alert(
            kind="tiebreak_below_target",
            series=series_key,
            message=(
                f"The tie-break's decisions agree with people less than {target:.0%} of the time: {measured}, "
                f"which shows it with {1 - (t.risk or 0.0):.0%} certainty, and at no confidence level do they reach "
                f"{target:.0%}. "
                "From now on this series' pairs that need a tie-break (flips, ties, low confidence) go to people "
                'for review ("tiebreak_disabled") instead; `pairjudge report` shows the extra review load.'
            ),
            value=tb.agreement if tb.agreement is not None else (tb.agreeing / tb.labels if tb.labels else 0.0),
            threshold=target,
        )


def stage_view(
    series: AuditSeries,
    primary: ConfidenceHistogram,
    tiebreak: ConfidenceHistogram,
    *,
    configured: float,
    min_labels: int,
    target: float,
    risk: float,
    calibration_min_labels: int,
) -> StageView:
    """The by-stage agreement rows (shown from ``min_labels``, the audit's minimum), the tie-break's own
    threshold (calibrated from ``calibration_min_labels``, as the primary's) and whether it is switched off."""
    rows = (
        stage_agreement("primary", primary, min_labels=min_labels, series=series),
        stage_agreement("tiebreak", tiebreak, min_labels=min_labels, series=series),
    )
    threshold = tiebreak_threshold(
        tiebreak, configured=configured, target=target, risk=risk, min_labels=calibration_min_labels
    )
    counts = rows[1]
    off = tiebreak_cannot_reach(
        threshold, labels=counts.labels, agreeing=counts.agreeing, target=target, risk=risk, min_labels=min_labels
    )
    return StageView(rows, threshold, off, rows[1])


def restart_evidence(histogram: ConfidenceHistogram, since: float) -> ConfidenceHistogram | None:
    """The tie-break's histogram started afresh at ``since`` (seconds since the epoch), or None when it already
    was at that moment or later (the command read again after a restart, or an older one).

    Everything the old tie-break's labels said goes: the counts, the threshold and switch-off last published (the
    person's record already told the workers "on", configured threshold). What keeps the input in order stays:
    the offset of the last delta taken in, so a redelivered delta is still skipped.
    """
    if histogram.fresh_since is not None and histogram.fresh_since >= since:
        return None
    return ConfidenceHistogram(last_offset=histogram.last_offset, fresh_since=since)


def decided_before(recorded_at: float, fresh_since: float | None) -> bool:
    """Whether a labelled tie-break decision, recorded by the audit at ``recorded_at``, was made before its
    tie-break was switched back on at ``fresh_since``: its label is the old tie-break's evidence, not the new one's
    (a label that comes late, from the review queue, after the switch back on)."""
    return fresh_since is not None and recorded_at < fresh_since
