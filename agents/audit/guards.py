"""The guards of seeds 001 and 002 and the configured bounds, applied to one window's sums.

The kappa guard (seed 001) pauses automatic decisions when the judge's Cohen's kappa against people
falls below a floor. By default the floor is absolute (0.7). In the relative mode it is a share of the
human ceiling instead: ``relative_kappa_ratio`` x the kappa of people against each other (audit pairs
labelled by two reviewers), because a judge cannot be expected to agree with people more than people
agree with each other. On MT-Bench, GPT-4 agreed with experts 66% of the time and experts with each
other 63% (ties counted): on a task where people disagree that much, an absolute 0.7 would keep a judge
paused that is as good as a second person, and on a task where people agree almost always, 0.7 would
let through a judge much worse than a person. Until a window has ``min_human_pairs`` such pairs (or
while their kappa is undefined) the ceiling is not known well enough, and the absolute floor applies,
as the finding and the snapshot say.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pairjudge.agents.audit.agreement_guard import e_below, tripped
from pairjudge.agents.audit.sums import WindowStats, rate_of
from pairjudge.agents.stats import cohen_kappa, kappa_interval
from pairjudge.schemas.audit import (
    AlertKind,
)


@dataclass(frozen=True, slots=True)
class GuardBounds:
    """When a window raises an alert. Each bound acts only once its minimum count is in."""

    kappa_min: float = 0.7  # seed 001
    min_labels: int = 50
    #: "absolute": the kappa guard's floor is ``kappa_min``. "relative": ``relative_kappa_ratio`` x the
    #: human-human kappa, once a window has ``min_human_pairs`` doubly labelled audit pairs.
    guard_mode: Literal["absolute", "relative"] = "absolute"
    relative_kappa_ratio: float = 0.9
    min_human_pairs: int = 30
    #: The agreement guard's level (``agents.audit.agreement_guard``): a judge agreeing with people as often as
    #: the floor or more is paused by it at most this often per window. None: the agreement guard is off.
    agreement_alpha: float | None = 0.05
    #: The agreement guard's floor on raw agreement; None: the kappa floor in force, read as an agreement.
    agreement_min: float | None = None
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


@dataclass(frozen=True, slots=True)
class KappaFloor:
    """The kappa guard's floor for one window, and where it came from."""

    #: The mode configured.
    mode: Literal["absolute", "relative"]
    #: The judge-human kappa below which the guard trips.
    kappa_min: float
    #: True when the floor is relative to the human ceiling (the relative mode with enough human pairs).
    relative: bool
    human_pairs: int
    human_kappa: float | None
    #: Why the relative mode fell back to the absolute floor (None when it did not, or in absolute mode).
    note: str | None = None


def kappa_floor(stats: WindowStats, bounds: GuardBounds) -> KappaFloor:
    """The floor the kappa guard holds the window's judge-human kappa to (see the module docstring)."""
    pairs = stats.human_pairs
    first, second = stats.human_label_lists()
    human_kappa = cohen_kappa(first, second) if pairs else None
    if bounds.guard_mode == "absolute":
        return KappaFloor("absolute", bounds.kappa_min, False, pairs, human_kappa)
    fixed = f"judged against the fixed floor {bounds.kappa_min:.2f}: "
    if pairs == 0:
        note = fixed + "no pair has two people's labels yet"
        return KappaFloor("relative", bounds.kappa_min, False, pairs, human_kappa, note)
    if pairs < bounds.min_human_pairs:
        note = (
            fixed
            + f"only {pairs} {'pair has' if pairs == 1 else 'pairs have'} two people's labels, "
            + f"{bounds.min_human_pairs} are needed"
        )
        return KappaFloor("relative", bounds.kappa_min, False, pairs, human_kappa, note)
    if human_kappa is None:
        note = (
            fixed + f"the two people gave the same label throughout the {pairs} pairs they both labelled, "
            "so how well people agree with each other cannot be measured"
        )
        return KappaFloor("relative", bounds.kappa_min, False, pairs, None, note)
    return KappaFloor("relative", bounds.relative_kappa_ratio * human_kappa, True, pairs, human_kappa)


@dataclass(frozen=True, slots=True)
class AgreementGuard:
    """The agreement guard's state for one window: the floor it tests against and the evidence so far."""

    floor: float
    alpha: float
    labels: int
    agreeing: int
    #: The e-value against "agreement >= floor": the guard trips when it reaches ``1 / alpha``.
    evidence: float
    tripped: bool


def agreement_guard(stats: WindowStats, bounds: GuardBounds) -> AgreementGuard | None:
    """The agreement guard on the window's labelled pairs whose two orders agreed; None when it is off, or when
    its floor is not a share strictly between 0 and 1 (no agreement can be below a floor of 0 or less)."""
    if bounds.agreement_alpha is None:
        return None
    floor = bounds.agreement_min if bounds.agreement_min is not None else kappa_floor(stats, bounds).kappa_min
    if not 0 < floor < 1:
        return None
    n, k = stats.orders_agreed_labels, stats.orders_agreed_correct
    return AgreementGuard(
        floor, bounds.agreement_alpha, n, k, e_below(k, n, floor), tripped(k, n, floor, bounds.agreement_alpha)
    )


def findings(stats: WindowStats, bounds: GuardBounds) -> list[Finding]:
    """Every bound the window breaks, in a fixed order. The kappa guard's finding is the first."""
    out: list[Finding] = []
    labels = stats.labels
    if labels >= bounds.min_labels:
        judge, human = stats.label_lists()
        kappa = kappa_interval(judge, human)
        floor = kappa_floor(stats, bounds)
        # Undefined kappa (both raters gave one label throughout) is no evidence of agreement: it
        # does not trip the guard on its own, and the snapshot shows it as None.
        if kappa is not None and kappa.kappa < floor.kappa_min:
            below = (
                f"{bounds.relative_kappa_ratio:g} x the human-human kappa {floor.human_kappa:.3f} "
                f"over {floor.human_pairs} pairs (= {floor.kappa_min:.3f})"
                if floor.relative
                else f"{floor.kappa_min:g}" + (f" ({floor.note})" if floor.note else "")
            )
            out.append(
                Finding(
                    "kappa_below_threshold",
                    kappa.kappa,
                    floor.kappa_min,
                    f"Cohen's kappa against humans is {kappa.kappa:.3f} "
                    f"({kappa.confidence:.0%} CI {kappa.low:.3f}..{kappa.high:.3f}) over {labels} labels, below "
                    f"{below}: automatic decisions are paused until a person resumes them",
                )
            )
    guard = agreement_guard(stats, bounds)
    if guard is not None and guard.tripped:
        share = guard.agreeing / guard.labels
        out.append(
            Finding(
                "agreement_below_floor",
                share,
                guard.floor,
                f"the judge agreed with people on {guard.agreeing} of {guard.labels} pairs it decided alone "
                f"({share:.0%}): evidence {guard.evidence:.3g} against agreeing {guard.floor:.0%} of the time or "
                f"more reached 1/{guard.alpha:g}, so automatic decisions are paused until a person resumes them",
            )
        )
    if labels >= bounds.min_labels:
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
