"""The human gate: promote, reject or continue from the whole anytime interval, the worst case for missing
labels, the forecast of labels still needed, and the Neyman allocation of the audit's shares."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pairjudge.agents.scores.human.basis import (
    DEFAULT_TARGET_LABELS,
    MAX_FORECAST_LABELS,
    MIN_LABELS,
    MIN_STRATUM_LABELS,
    HumanBasis,
    HumanDecision,
    StratumSums,
)
from pairjudge.agents.scores.human.estimator import (
    Array,
    EstimateArrays,
    HumanEstimate,
    MissingLabels,
    SumsArray,
    _stratum,
    confidence_sequence,
    cs_radius_factor,
    estimate,
    estimate_arrays,
    pseudo_disagreements,
)

#: decide_arrays' codes.
PROMOTE, REJECT, CONTINUE = 1, -1, 0


def _decision(
    low: Array, high: Array, labels: Array, defined: NDArray[np.bool_], min_effect: float, min_labels: int
) -> NDArray[np.int8]:
    ready = defined & (labels >= min_labels)
    promote = ready & (low > 0.5)
    reject = ready & ~promote & (high < 0.5 + min_effect)
    return np.where(promote, PROMOTE, np.where(reject, REJECT, CONTINUE)).astype(np.int8)


def decide_arrays(
    strata: Mapping[str, SumsArray],
    *,
    alpha: float = 0.05,
    min_effect: float = 0.05,
    min_labels: int = MIN_LABELS,
    target_labels: int = DEFAULT_TARGET_LABELS,
    lam: float | None = None,
    pseudo: float | None = None,
) -> tuple[NDArray[np.int8], EstimateArrays]:
    """:func:`decide_human`'s decision elementwise (``PROMOTE``, ``REJECT``, ``CONTINUE``), and the
    confidence sequence it read."""
    cs = estimate_arrays(strata, alpha, lam=lam, sequence=True, target_labels=target_labels, pseudo=pseudo)
    return _decision(cs.low, cs.high, cs.labels, cs.defined, min_effect, min_labels), cs


def worst_case(
    basis: HumanBasis,
    alpha: float = 0.05,
    *,
    sequence: bool = True,
    lam: float | None = None,
    target_labels: int = DEFAULT_TARGET_LABELS,
) -> tuple[float, float] | None:
    """(low, high): the interval's low end with every missing label (pending or expired) set against the
    challenger, and its high end with every one set for it. It assumes nothing about why labels are
    missing (a team that skips the hard items included), only the other three assumptions; the gap to
    :func:`confidence_sequence` shows how much the answer leans on "missing at random". None without labels."""
    if basis.labels < 1:
        return None
    make = confidence_sequence if sequence else estimate
    kwargs: dict[str, Any] = {"lam": lam, "target_labels": target_labels} if sequence else {"lam": lam}
    low, high = make(basis.completed(0.0), alpha, **kwargs), make(basis.completed(1.0), alpha, **kwargs)
    if low is None or high is None:
        return None
    return low.low, high.high


@dataclass(frozen=True, slots=True)
class HumanGate:
    decision: HumanDecision
    #: The anytime-valid interval the decision read; None when there are no labels at all.
    interval: HumanEstimate | None
    #: Why it continues, in words a user can act on.
    reason: str
    #: For "continue": the further labels the current estimate and variance imply; None when unknown.
    labels_needed: int | None


def decide_human(
    basis: HumanBasis,
    *,
    alpha: float = 0.05,
    min_effect: float = 0.05,
    min_labels: int = MIN_LABELS,
    target_labels: int = DEFAULT_TARGET_LABELS,
    lam: float | None = None,
    missing: MissingLabels = "at_random",
) -> HumanGate:
    """Promote when the confidence sequence lies above 1/2, reject when it lies below 1/2 + min_effect.

    An equal challenger (theta <= 1/2) is promoted, and one better by min_effect rejected, at most
    ``alpha`` of the time under the module's assumptions, however often this is called. Never falls back
    to the judge: without enough labels the answer is "continue" with the labels still needed.

    ``missing="worst_case"`` drops the missing-at-random assumption: it promotes only if the sequence lies
    above 1/2 with every missing label set against the challenger, and rejects only if it lies below the
    boundary with every one set for it (:func:`worst_case`). Pending labels then only delay decisions.
    """
    interval = confidence_sequence(basis, alpha, lam=lam, target_labels=target_labels)
    labels = basis.labels
    if interval is None:
        first = max(min_labels - labels, 1)
        return HumanGate("continue", None, f"no human labels yet; at least {first} expected to be needed", None)
    low, high = interval.low, interval.high
    if missing == "worst_case":
        bounds = worst_case(basis, alpha, lam=lam, target_labels=target_labels)
        if bounds is not None:
            low, high = bounds
    code = _decision(
        np.asarray(low),
        np.asarray(high),
        np.asarray(float(labels)),
        np.asarray(True),
        min_effect,
        min_labels,
    )
    if code == PROMOTE:
        return HumanGate("promote", interval, "people prefer the challenger", None)
    if code == REJECT:
        return HumanGate("reject", interval, "people do not prefer the challenger by the minimum effect", None)
    forecast = labels_needed(interval, alpha=alpha, min_effect=min_effect, target_labels=target_labels)
    needed = max(forecast, min_labels - labels) if forecast is not None else None
    text = (
        f"{needed} more human labels expected to be needed"
        if needed is not None
        else f"more than {MAX_FORECAST_LABELS:,} more human labels would be needed at the current estimate"
    )
    if interval.unlabelled_share > 0:
        text += f"; {interval.unlabelled_share:.0%} of pairs are in strata with too few labels"
    if missing == "worst_case" and (low, high) != (interval.low, interval.high):
        text += f"; read at the worst case of {basis.pending + basis.expired} missing labels"
    return HumanGate("continue", interval, text, needed)


def labels_needed(
    interval: HumanEstimate, *, alpha: float, min_effect: float, target_labels: int = DEFAULT_TARGET_LABELS
) -> int | None:
    """Further labels until the sequence would clear the nearer decision boundary, if the estimate held
    and the variance fell as 1/labels (the rectifier's share); None above ``MAX_FORECAST_LABELS``."""
    n = interval.labels
    margin = max(interval.rate - 0.5, 0.5 + min_effect - interval.rate) - interval.unlabelled_share
    if margin <= 0 or n < 1:
        return None
    unit = interval.std_error * math.sqrt(n)  # the standard deviation per label

    def clears(m: int) -> bool:
        return unit / math.sqrt(m) * cs_radius_factor(m, alpha, target_labels) < margin

    if clears(n):
        return 0
    high = max(2 * n, 2)
    while not clears(high):
        if high > MAX_FORECAST_LABELS:
            return None
        high *= 2
    low = high // 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if clears(mid) else (mid, high)
    return high - n


#: The sampling classes whose shares an operator sets (``Policy.audit_share``, ``audit_uncertain_share``);
#: review pairs are always labelled and rule pairs never.
SAMPLED_CLASSES = ("confident", "uncertain")


def rectifier_sd(s: StratumSums, alpha: float = 0.05) -> float | None:
    """The spread of ``person - lambda * judge`` over one stratum's labels (weighted, with the
    finite-sample correction, so a stratum whose few labels all agree is not taken as certain); None with
    fewer than ``MIN_STRATUM_LABELS`` labels."""
    if s.labels < MIN_STRATUM_LABELS or s.pairs == 0:
        return None
    *_, var_r = _stratum(SumsArray.of(s), None, pseudo_disagreements(alpha))
    return math.sqrt(float(var_r))


def neyman_shares(
    basis: HumanBasis, *, floor: float = 0.01, alpha: float = 0.05, classes: tuple[str, ...] = SAMPLED_CLASSES
) -> dict[str, float] | None:
    """The audit shares that would give the narrowest human-basis interval for the labels the current
    shares cost (Neyman allocation: each class's probability in proportion to its rectifier's spread;
    Zrnic and Candès 2024, the optimal sampling rule for active inference), clipped to [floor, 1]; None until
    every class with pairs has enough labels to measure its spread.

    The labels the current design costs per pair are read off the data (a class's mean inclusion probability
    is its labels over their summed weights), so following the recommendation keeps the label bill the same.
    """
    present = {c: basis.strata[c] for c in classes if c in basis.strata and basis.strata[c].pairs > 0}
    if not present:
        return None
    spreads: dict[str, float] = {}
    for name, sums in present.items():
        sd = rectifier_sd(sums, alpha)
        if sd is None:
            return None
        spreads[name] = sd
    pairs = sum(c.pairs for c in present.values())
    labels_per_pair = sum(c.pairs * (c.labels / c.w) for c in present.values()) / pairs
    weighted = sum(present[c].pairs / pairs * spreads[c] for c in present)
    if weighted <= 0.0:
        return {c: min(1.0, max(floor, labels_per_pair)) for c in present}  # no spread anywhere: uniform
    return {c: min(1.0, max(floor, labels_per_pair * spreads[c] / weighted)) for c in present}
