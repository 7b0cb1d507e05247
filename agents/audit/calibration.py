"""The auto-decision threshold with a guarantee, calibrated per series from a confidence histogram."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields

from pairjudge.agents.stats import DEFAULT_THRESHOLD_GRID, Guarantee, calibrate_threshold
from pairjudge.schemas.audit import (
    AuditObservation,
    ThresholdSnapshot,
)
from pairjudge.schemas.events import Stage

#: Confidence resolution of the calibration histogram: one bin per point of the default threshold grid.
HISTOGRAM_BINS = 100


@dataclass
class ConfidenceHistogram:
    """Labelled automatic decisions of one series, all windows together: per confidence bin of width
    0.01, how many and how many agreed with the humans.

    Enough to calibrate the auto-decision threshold exactly on the default grid (0.00, 0.01, ..., 1.00):
    a confidence c is at or above the grid point k/100 exactly when its bin floor(100 c) is at or above
    k, so the walk sees the same counts as on the raw confidences, in constant memory.
    """

    counts: list[int] = field(default_factory=lambda: [0] * (HISTOGRAM_BINS + 1))
    agrees: list[int] = field(default_factory=lambda: [0] * (HISTOGRAM_BINS + 1))
    #: The input offset of the last observation taken in (the edge skips anything at or below it).
    last_offset: int = -1
    #: The calibrated threshold last published to the workers; None while the configured one applies.
    published_threshold: float | None = None
    #: The tie-break stage's histogram only: whether the series' switch-off was last published as on.
    published_off: bool = False
    #: The tie-break stage's histogram only: when a person switched the tie-break back on and its evidence started
    #: afresh (seconds since the epoch; ``agents.audit.stages.restart_evidence``); None if it never was.
    fresh_since: float | None = None

    def add(self, observation: AuditObservation, stage: Stage = "primary") -> None:
        """Count a labelled decision of ``stage``: each stage is calibrated on its own labels
        (``agents.audit.stages``), so a tie-break verdict never moves the primary judge's threshold."""
        record, label = observation.record, observation.label
        if observation.kind != "labelled" or label is None or record.canary or record.rule or record.stage != stage:
            return
        if record.judge_winner is None or record.confidence is None:
            return
        index = grid_bin(record.confidence)
        self.counts[index] += 1
        self.agrees[index] += record.judge_winner == label.winner

    def merge(self, other: ConfidenceHistogram) -> None:
        """Add ``other``'s counts (a delta summed where the labels were joined: ``agents.audit.deltas``)."""
        for i, (count, agree) in enumerate(zip(other.counts, other.agrees, strict=True)):
            self.counts[i] += count
            self.agrees[i] += agree

    @property
    def empty(self) -> bool:
        return not any(self.counts)

    def guarantee(self, *, target: float, risk: float, min_labels: int, floor: float = 0.0) -> Guarantee:
        """The calibrated threshold on the default grid, walking no lower than ``floor``.

        The floor is the configured threshold: labels come from automatic verdicts, which all had at
        least that confidence, so the data says nothing about pairs below it. Without the floor the
        walk would certify every lower grid point too (the pairs above them are the same pairs).
        """
        confidences: list[float] = []
        agreeing: list[bool] = []
        for index, (count, agree) in enumerate(zip(self.counts, self.agrees, strict=True)):
            confidences.extend([index / HISTOGRAM_BINS] * count)
            agreeing.extend([True] * agree + [False] * (count - agree))
        grid = [t for t in DEFAULT_THRESHOLD_GRID if t >= floor]
        return calibrate_threshold(confidences, agreeing, target=target, risk=risk, min_labels=min_labels, grid=grid)

    def to_bytes(self) -> bytes:
        # Flat JSON values: a shallow dict encodes the same as asdict's deep copy, without the copy.
        body = {f.name: getattr(self, f.name) for f in fields(self)}
        return json.dumps(body, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_bytes(cls, raw: bytes | None) -> ConfidenceHistogram:
        return cls(**json.loads(raw)) if raw else cls()


def grid_bin(confidence: float) -> int:
    """The largest k with ``confidence >= k / 100`` in float arithmetic: the comparison the threshold
    walk makes, so the histogram and the raw confidences can never disagree about a grid point."""
    k = min(math.floor(confidence * HISTOGRAM_BINS), HISTOGRAM_BINS)
    if k < HISTOGRAM_BINS and confidence >= (k + 1) / HISTOGRAM_BINS:
        k += 1
    while k > 0 and confidence < k / HISTOGRAM_BINS:
        k -= 1
    return k


@dataclass(frozen=True, slots=True)
class TierCalibration:
    """A judge cascade tier's own calibration settings (``[[tiers]]``): its floor on the threshold, and the
    target and risk of its calibrated one (None: the audit's)."""

    floor: float = 0.0
    target: float | None = None
    risk: float | None = None


def threshold_snapshot(
    histogram: ConfidenceHistogram,
    *,
    configured: float,
    target: float,
    risk: float,
    min_labels: int,
) -> ThresholdSnapshot:
    """The threshold a series' snapshot reports: the calibrated one when it carries the guarantee,
    else the configured one, saying why."""
    found = histogram.guarantee(target=target, risk=risk, min_labels=min_labels, floor=configured)
    if found.threshold is None:
        return ThresholdSnapshot(
            source="configured",
            threshold=configured,
            target=target,
            risk=risk,
            labels=found.n_labels,
            note=f"configured threshold in force: {found.reason}",
        )
    return ThresholdSnapshot(
        source="calibrated",
        threshold=found.threshold,
        coverage=found.coverage,
        target=target,
        risk=risk,
        labels=found.n_labels,
        note=(
            f"auto-decided pairs at confidence >= {found.threshold:.2f} agree with humans at >= {target:g} "
            f"with probability >= {1 - risk:g} ({found.n_used} of {found.n_labels} labelled pairs above it, "
            f"{found.realised_agreement:.1%} agreeing); the walk stops at the configured threshold, below "
            "which no automatic verdict (so no label) exists"
        ),
    )


#: How a series' calibration histogram is keyed beside its windows (``calibration_key``).
CALIBRATION_SUFFIX = b"#calibration"


def calibration_key(series_key: str) -> bytes:
    return series_key.encode() + CALIBRATION_SUFFIX
