"""One series' tumbling window: its sums, where it is stored, and the snapshot published from it."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pairjudge.agents.audit.guards import Finding, GuardBounds, agreement_guard, findings, kappa_floor
from pairjudge.agents.audit.sums import CALIBRATION_BINS, WindowStats, rate_of
from pairjudge.agents.stats import cohen_kappa, kappa_interval
from pairjudge.schemas.audit import (
    AuditSeries,
    AuditSnapshot,
    ReliabilityBinSnapshot,
    ThresholdSnapshot,
)
from pairjudge.schemas.outcomes import OUTCOMES


@dataclass
class SeriesWindow:
    """A series' sums over one window, with what the series agent needs to publish them."""

    series: AuditSeries
    start: float  # Unix seconds
    size: float
    #: The partition of the observations topic this window's series is read from (its owner).
    partition: int
    stats: WindowStats = field(default_factory=WindowStats)
    #: The input offset of the last observation taken in (the edge skips anything at or below it).
    last_offset: int = -1

    @property
    def end(self) -> float:
        return self.start + self.size

    def to_bytes(self) -> bytes:
        body = {
            "series": self.series.model_dump(mode="json"),
            "start": self.start,
            "size": self.size,
            "partition": self.partition,
            "stats": self.stats.as_json(),
            "last_offset": self.last_offset,
        }
        return json.dumps(body, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_bytes(cls, raw: bytes) -> SeriesWindow:
        body = json.loads(raw)
        return cls(
            series=AuditSeries.model_validate(body["series"]),
            start=body["start"],
            size=body["size"],
            partition=body["partition"],
            stats=WindowStats(**body["stats"]),
            last_offset=body["last_offset"],
        )

    def snapshot(
        self, *, final: bool, threshold: ThresholdSnapshot | None = None, bounds: GuardBounds | None = None
    ) -> AuditSnapshot:
        return snapshot(
            self.stats,
            self.series,
            datetime.fromtimestamp(self.start, UTC),
            datetime.fromtimestamp(self.end, UTC),
            final=final,
            threshold=threshold,
            bounds=bounds,
        )

    def new_findings(self, bounds: GuardBounds) -> list[Finding]:
        """Findings not yet raised in this window; they are marked raised (one alert per kind and window)."""
        fresh = [f for f in findings(self.stats, bounds) if f.kind not in self.stats.alerts_raised]
        self.stats.alerts_raised.extend(f.kind for f in fresh)
        return fresh


def window_key(series_key: str, start: float) -> bytes:
    return f"{series_key}#{int(start)}".encode()


def window_start(at: datetime, size_s: float) -> float:
    """The start (Unix seconds) of the tumbling window of ``size_s`` holding ``at``, aligned to the epoch."""
    return math.floor(at.timestamp() / size_s) * size_s


def reliability_snapshot(bins: list[list[float]]) -> tuple[ReliabilityBinSnapshot, ...]:
    """Calibration bins of [count, sum of confidence, count agreeing] as the snapshot publishes them."""
    return tuple(
        ReliabilityBinSnapshot(
            lower=i / CALIBRATION_BINS,
            upper=(i + 1) / CALIBRATION_BINS,
            count=int(row[0]),
            mean_confidence=row[1] / row[0] if row[0] else None,
            accuracy=row[2] / row[0] if row[0] else None,
        )
        for i, row in enumerate(bins)
    )


def snapshot(
    stats: WindowStats,
    series: AuditSeries,
    window_start: datetime,
    window_end: datetime,
    *,
    final: bool,
    threshold: ThresholdSnapshot | None = None,
    kappa_confidence: float = 0.95,
    bounds: GuardBounds | None = None,
) -> AuditSnapshot:
    """The published statistics of one window: the judge's against people, the human ceiling beside
    them, and (given the guard's ``bounds``) the kappa floor the guard held the window to."""
    judge, human = stats.label_lists()
    kappa = kappa_interval(judge, human, kappa_confidence) if judge else None
    first, second = stats.human_label_lists()
    floor = kappa_floor(stats, bounds) if bounds is not None else None
    guard = agreement_guard(stats, bounds) if bounds is not None else None
    bins = reliability_snapshot(stats.bins)
    both = any(row[0] for row in stats.token_bins)
    figures = AuditSnapshot(
        series=series.key,
        series_info=series,
        window_start=window_start,
        window_end=window_end,
        final=final,
        pairs=stats.pairs,
        verdicts=stats.verdicts,
        flips=stats.flips,
        tiebreaks=stats.tiebreaks,
        reviews=stats.reviews,
        invalid_replies=stats.invalid_replies,
        position_a_wins=stats.position_a_wins,
        human_labels=stats.labels,
        human_decided=stats.human_decided,
        calls=stats.calls,
        decisive_orderings=stats.decisive_orderings,
        flip_rate=rate_of(stats.flips, stats.both_valid),
        tiebreak_rate=rate_of(stats.tiebreaks, stats.pairs),
        escalation_rate=rate_of(stats.reviews, stats.pairs),
        invalid_reply_rate=rate_of(stats.invalid_replies, stats.calls),
        position_a_win_rate=rate_of(stats.position_a_wins, stats.decisive_orderings),
        agreement=stats.agreement(),
        cohen_kappa=kappa.kappa if kappa is not None else None,
        kappa_low=kappa.low if kappa is not None else None,
        kappa_high=kappa.high if kappa is not None else None,
        kappa_confidence=kappa_confidence if kappa is not None else None,
        ece=stats.ece(),
        brier=stats.brier(),
        reliability=bins,
        token_reliability=reliability_snapshot(stats.token_bins) if both else (),
        stated_reliability=reliability_snapshot(stats.stated_bins) if both else (),
        judge_longer_win_rate=rate_of(stats.judge_longer, stats.length_decided),
        human_longer_win_rate=rate_of(stats.human_longer, stats.length_decided),
        canary_labels=stats.canary_labels,
        canary_accuracy=rate_of(stats.canary_correct, stats.canary_labels),
        human_pairs=stats.human_pairs,
        human_agreement=stats.human_agreement(),
        human_kappa=cohen_kappa(first, second) if first else None,
        guard_mode=floor.mode if floor is not None else None,
        guard_kappa_min=floor.kappa_min if floor is not None else None,
        guard_note=floor.note if floor is not None else None,
        orders_agreed_labels=stats.orders_agreed_labels,
        orders_agreed_agreement=stats.orders_agreed_agreement(),
        agreement_guard_floor=guard.floor if guard is not None else None,
        agreement_guard_alpha=guard.alpha if guard is not None else None,
        agreement_guard_evidence=guard.evidence if guard is not None else None,
        threshold=threshold,
        ambiguity=stats.ambiguity.snapshot(kappa_confidence),
    )
    # The kinds the sums count by their registry entry (OutcomeEntry.audit_count), each in its own field.
    counted = {e.audit_count: stats.outcome_counts.get(k, 0) for k, e in OUTCOMES.items() if e.audit_count}
    return figures.model_copy(update=counted) if counted else figures
