"""The guards of seeds 001 and 002 and the configured bounds, applied to one window's sums."""

from __future__ import annotations

from dataclasses import dataclass

from pairjudge.agents.audit.sums import WindowStats, rate_of
from pairjudge.agents.stats import kappa_interval
from pairjudge.schemas.audit import (
    AlertKind,
)


@dataclass(frozen=True, slots=True)
class GuardBounds:
    """When a window raises an alert. Each bound acts only once its minimum count is in."""

    kappa_min: float = 0.7  # seed 001
    min_labels: int = 50
    tiebreak_rate_max: float = 0.2  # seed 002
    flip_rate_max: float = 0.3
    invalid_reply_rate_max: float = 0.1
    ece_max: float = 0.2
    canary_accuracy_min: float = 0.7
    min_canaries: int = 20
    min_pairs: int = 20


@dataclass(frozen=True, slots=True)
class Finding:
    kind: AlertKind
    value: float
    threshold: float
    message: str


def findings(stats: WindowStats, bounds: GuardBounds) -> list[Finding]:
    """Every bound the window breaks, in a fixed order. The kappa guard's finding is the first."""
    out: list[Finding] = []
    labels = stats.labels
    if labels >= bounds.min_labels:
        judge, human = stats.label_lists()
        kappa = kappa_interval(judge, human)
        # Undefined kappa (both raters gave one label throughout) is no evidence of agreement: it
        # does not trip the guard on its own, and the snapshot shows it as None.
        if kappa is not None and kappa.kappa < bounds.kappa_min:
            out.append(
                Finding(
                    "kappa_below_threshold",
                    kappa.kappa,
                    bounds.kappa_min,
                    f"Cohen's kappa against humans is {kappa.kappa:.3f} "
                    f"({kappa.confidence:.0%} CI {kappa.low:.3f}..{kappa.high:.3f}) over {labels} labels, below "
                    f"{bounds.kappa_min:g}: automatic decisions are paused until a person resumes them",
                )
            )
        ece = stats.ece()
        if ece is not None and ece > bounds.ece_max:
            detail = f"expected calibration error {ece:.3f} over {labels} labels"
            out.append(Finding("ece_high", ece, bounds.ece_max, detail))
    if stats.pairs >= bounds.min_pairs:
        tiebreak = stats.tiebreaks / stats.pairs
        if tiebreak > bounds.tiebreak_rate_max:
            out.append(
                Finding(
                    "tiebreak_rate_high",
                    tiebreak,
                    bounds.tiebreak_rate_max,
                    f"the tie-break ran on {tiebreak:.0%} of {stats.pairs} pairs, above "
                    f"{bounds.tiebreak_rate_max:.0%}: the primary judge needs recalibration",
                )
            )
        flip = rate_of(stats.flips, stats.both_valid)
        if flip is not None and flip > bounds.flip_rate_max:
            detail = f"{flip:.0%} of pairs with both orders valid flipped with the order shown"
            out.append(Finding("flip_rate_high", flip, bounds.flip_rate_max, detail))
    invalid = rate_of(stats.invalid_replies, stats.calls)
    if invalid is not None and stats.calls >= bounds.min_pairs and invalid > bounds.invalid_reply_rate_max:
        out.append(
            Finding(
                "invalid_reply_rate_high",
                invalid,
                bounds.invalid_reply_rate_max,
                f"{invalid:.0%} of {stats.calls} judge replies failed validation",
            )
        )
    if stats.model_mismatches:
        out.append(
            Finding(
                "judge_model_mismatch",
                float(stats.model_mismatches),
                0.0,
                f"{stats.model_mismatches} judge call(s) answered by {stats.last_mismatched_model!r}, "
                "not the model requested",
            )
        )
    if stats.canary_labels >= bounds.min_canaries:
        accuracy = stats.canary_correct / stats.canary_labels
        if accuracy < bounds.canary_accuracy_min:
            out.append(
                Finding(
                    "canary_accuracy_low",
                    accuracy,
                    bounds.canary_accuracy_min,
                    f"the judge got {accuracy:.0%} of {stats.canary_labels} canary pairs right",
                )
            )
    return out
