"""Observations summed where they are joined, for the series agent to merge: one delta per series and window.

The join used to send every observation to its series as an event of its own: a produce, a decode, a
window read and written with its changelog record, per pair and stage. The series only ever adds them
up (``WindowStats`` is counts and sums), so the join adds them up first. A ``DeltaBuffer`` holds what
the join counted since its last flush, per (series, window); the edge (``streams.audit.handlers``) sends
each entry as one ``AuditDelta`` and the series agent merges it (``WindowStats.merge``,
``ConfidenceHistogram.merge``). The sums, and every figure of a snapshot computed from them, are the
same as one by one; floats only in their last bits, since they add in another order.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from pairjudge.agents.audit.calibration import ConfidenceHistogram
from pairjudge.agents.audit.sums import WindowStats
from pairjudge.agents.audit.windows import window_start
from pairjudge.schemas.audit import AuditDelta, AuditObservation, AuditSeries

#: Sums a delta may carry: every field of ``WindowStats`` but the window's own bookkeeping.
DELTA_FIELDS = frozenset(f.name for f in fields(WindowStats)) - {"alerts_raised", "final_published"}


@dataclass
class SeriesDelta:
    """One series' sums over one window since the last flush."""

    series: AuditSeries
    start: float
    size: float
    stats: WindowStats = field(default_factory=WindowStats)
    calibration: ConfidenceHistogram = field(default_factory=ConfidenceHistogram)
    observations: int = 0
    #: The tie-break stage's labelled decisions, calibrated apart (``agents.audit.stages``).
    tiebreak: ConfidenceHistogram = field(default_factory=ConfidenceHistogram)

    def add(self, observation: AuditObservation, *, tiebreak_evidence: bool = True) -> None:
        """Count ``observation``; ``tiebreak_evidence`` False keeps a label of the old tie-break's decision out of
        the tie-break's histogram (it was switched back on since: ``agents.audit.stages.decided_before``)."""
        self.stats.add(observation)
        # Labelled decisions with a judge's winner only, each in its own stage's histogram; a no-op otherwise.
        self.calibration.add(observation, "primary")
        if tiebreak_evidence:
            self.tiebreak.add(observation, "tiebreak")
        self.observations += 1

    def to_event(self) -> AuditDelta:
        stats = self.stats.as_json()
        return AuditDelta(
            series=self.series,
            window_start=self.start,
            window_s=self.size,
            observations=self.observations,
            stats={name: value for name, value in stats.items() if name in DELTA_FIELDS},
            calibration_counts=None if self.calibration.empty else self.calibration.counts,
            calibration_agrees=None if self.calibration.empty else self.calibration.agrees,
            tiebreak_counts=None if self.tiebreak.empty else self.tiebreak.counts,
            tiebreak_agrees=None if self.tiebreak.empty else self.tiebreak.agrees,
        )

    @classmethod
    def from_event(cls, event: AuditDelta) -> SeriesDelta:
        """The delta an ``AuditDelta`` carries; ``ValueError`` when its sums are not a window's."""
        unknown = set(event.stats) - DELTA_FIELDS
        if unknown:
            raise ValueError(f"unknown sums in a delta: {', '.join(sorted(unknown))[:200]}")
        try:
            stats = WindowStats(**event.stats)
            calibration = (
                ConfidenceHistogram(counts=list(event.calibration_counts), agrees=list(event.calibration_agrees or []))
                if event.calibration_counts is not None
                else ConfidenceHistogram()
            )
            tiebreak = (
                ConfidenceHistogram(counts=list(event.tiebreak_counts), agrees=list(event.tiebreak_agrees or []))
                if event.tiebreak_counts is not None
                else ConfidenceHistogram()
            )
            # Shapes checked here, not halfway through a merge: a delta is merged whole or not at all.
            WindowStats().merge(stats)
            ConfidenceHistogram().merge(calibration)
            ConfidenceHistogram().merge(tiebreak)
        except (TypeError, ValueError, IndexError) as exc:
            raise ValueError(f"malformed sums in a delta: {type(exc).__name__}: {exc}"[:300]) from None
        return cls(event.series, event.window_start, event.window_s, stats, calibration, event.observations, tiebreak)


class DeltaBuffer:
    """What the join counted since its last flush, per (series key, window start)."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._deltas: dict[tuple[str, float], SeriesDelta] = {}

    def add(self, observation: AuditObservation, *, tiebreak_evidence: bool = True) -> None:
        start = window_start(observation.observed_at, self.window_s)
        key = (observation.series.key, start)
        delta = self._deltas.get(key)
        if delta is None:
            delta = self._deltas[key] = SeriesDelta(observation.series, start, self.window_s)
        delta.add(observation, tiebreak_evidence=tiebreak_evidence)

    def deltas(self) -> list[SeriesDelta]:
        return list(self._deltas.values())

    def __len__(self) -> int:
        return len(self._deltas)
