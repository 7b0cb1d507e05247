"""The drift audit as pure logic (docs/design.md §3): decision records, the label join, window sums, the guards.

Three steps, each a pure function or a small value type, so the Faust agents in ``streams.audit.handlers`` only
move bytes and the arithmetic is tested without a broker:

1. :func:`decision_record` turns a stage's ``Decision`` into a ``DecisionRecord``: facts, no text.
2. :class:`JoinEntry` pairs a pair's records with its human label, whichever comes first, and says
   what to count: each stage's decision once, and the automatic decision joined with its label once.
3. :class:`WindowStats` sums observations for one series and one tumbling window. Every field is a
   count or a sum, so two workers' sums could be added, and a snapshot is computed from them alone:
   agreement and Cohen's kappa (with its interval) from the 3x3 confusion counts, calibration from
   per-bin counts and sums, the Brier score from a sum of squares. :func:`findings` applies the guards
   of seeds 001 and 002 and the configured bounds to a window.

An audit pair labelled by two different reviewers also yields a ``second_label`` observation: the
series sums its two labels apart, as the human ceiling (human-human agreement and kappa), which the
kappa guard may hold the judge to instead of the absolute 0.7 (``GuardBounds.guard_mode``).
"""

from pairjudge.agents.audit.calibration import (
    CALIBRATION_SUFFIX,
    HISTOGRAM_BINS,
    ConfidenceHistogram,
    TierCalibration,
    calibration_key,
    grid_bin,
    threshold_snapshot,
)
from pairjudge.agents.audit.deltas import DeltaBuffer, SeriesDelta
from pairjudge.agents.audit.guards import (
    AgreementGuard,
    Finding,
    GuardBounds,
    KappaFloor,
    agreement_guard,
    findings,
    kappa_floor,
)
from pairjudge.agents.audit.join import (
    KNOWN_LABEL_REVIEWER,
    JoinEntry,
    LabelOutcome,
    is_second_opinion,
    known_label,
    on_label,
    on_record,
)
from pairjudge.agents.audit.records import decision_record, longer_candidate, record_for, series_of
from pairjudge.agents.audit.sums import CALIBRATION_BINS, WindowStats
from pairjudge.agents.audit.windows import SeriesWindow, snapshot, window_key, window_start

__all__ = [
    "CALIBRATION_BINS",
    "CALIBRATION_SUFFIX",
    "HISTOGRAM_BINS",
    "KNOWN_LABEL_REVIEWER",
    "AgreementGuard",
    "ConfidenceHistogram",
    "DeltaBuffer",
    "Finding",
    "GuardBounds",
    "JoinEntry",
    "KappaFloor",
    "LabelOutcome",
    "SeriesDelta",
    "SeriesWindow",
    "TierCalibration",
    "WindowStats",
    "agreement_guard",
    "calibration_key",
    "decision_record",
    "findings",
    "grid_bin",
    "is_second_opinion",
    "kappa_floor",
    "known_label",
    "longer_candidate",
    "on_label",
    "on_record",
    "record_for",
    "series_of",
    "snapshot",
    "threshold_snapshot",
    "window_key",
    "window_start",
]
