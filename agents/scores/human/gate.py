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
    BasisArrays,
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

#: The sampling strata in plain words, for the reason a gate waits ("not enough labels yet in ...").
STRATUM_WORDS = {
    "confident": "the verdicts the judge was sure of",
    "uncertain": "the verdicts the judge was unsure of",
    "review": "the pairs sent to people for review",
}


def stratum_words(stratum: str) -> str:
    return STRATUM_WORDS.get(stratum, f"the {stratum} pairs")


@dataclass(frozen=True, slots=True)
class HeldInterval:
    """The running intersection of the gate's intervals over one series: the highest low end and the lowest
    high end of every interval read while the gate was allowed to decide (enough labels in all and in every
    stratum). Intersecting is valid exactly when each interval is a confidence sequence (valid at every look
    at once, not only at a sample size fixed in advance): then all of them hold together with probability
    ``1 - alpha``, so their intersection does too. It only narrows, so a decision once reached stays.

    A series is the basis the gate reads, under one ``alpha``, ``target_labels`` and way of reading missing
    labels (the interval's construction): a gate read under other settings starts a new series (the held
    interval starts over); a new experiment is a new basis and starts over too."""

    low: float = 0.0
    high: float = 1.0
    #: Looks taken in (intervals read while the gate could decide).
    looks: int = 0
    alpha: float | None = None
    target_labels: int | None = None
    missing: str | None = None

    def fits(self, alpha: float, target_labels: int, missing: str) -> bool:
        """Whether this was held under the same construction (otherwise the gate starts a new series)."""
        return (self.alpha, self.target_labels, self.missing) == (alpha, target_labels, missing)

    def to_dict(self) -> dict[str, Any]:
        return {
            "low": self.low,
            "high": self.high,
            "looks": self.looks,
            "alpha": self.alpha,
            "target_labels": self.target_labels,
            "missing": self.missing,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HeldInterval:
        alpha, target, missing = data.get("alpha"), data.get("target_labels"), data.get("missing")
        return cls(
            low=float(data.get("low", 0.0)),
            high=float(data.get("high", 1.0)),
            looks=int(data.get("looks", 0)),
            alpha=None if alpha is None else float(alpha),
            target_labels=None if target is None else int(target),
            missing=None if missing is None else str(missing),
        )


@dataclass(frozen=True, slots=True)
class GateArrays:
    """:func:`decide_arrays`'s answer, elementwise."""

    decision: NDArray[np.int8]
    #: The confidence sequence at this look (what the gate took in when ``ready``).
    interval: EstimateArrays
    #: Whether the gate could decide at this look: enough labels in all and in every stratum with pairs.
    ready: NDArray[np.bool_]
    #: The running intersection the decision read (looks not ready count as [0, 1]).
    low: Array
    high: Array


def strata_ready(strata: Mapping[str, SumsArray], min_stratum_labels: int) -> NDArray[np.bool_]:
    """Elementwise: every stratum with pairs has at least ``min_stratum_labels`` labels."""
    ready: NDArray[np.bool_] | None = None
    for s in strata.values():
        ok = (s.pairs <= 0) | (s.labels >= min_stratum_labels)
        ready = ok if ready is None else ready & ok
    return np.asarray(True) if ready is None else ready


def short_stratum(basis: HumanBasis, min_stratum_labels: int) -> tuple[str, int] | None:
    """The stratum with pairs but fewer than ``min_stratum_labels`` labels that holds the most pairs, with
    its labels; None when every stratum has its minimum."""
    short = [
        (s.pairs, name, s.labels) for name, s in basis.strata.items() if s.pairs > 0 and s.labels < min_stratum_labels
    ]
    if not short:
        return None
    _, name, labels = max(short)
    return name, labels


def decide_arrays(
    basis: BasisArrays,
    *,
    alpha: float = 0.05,
    min_effect: float = 0.05,
    min_labels: int = MIN_LABELS,
    min_stratum_labels: int | None = None,
    target_labels: int = DEFAULT_TARGET_LABELS,
    lam: float | None = None,
    pseudo: float | None = None,
    bounds: tuple[Array, Array] | None = None,
    held: tuple[Array | float, Array | float] = (0.0, 1.0),
    hold_axis: int | None = None,
) -> GateArrays:
    """The human gate elementwise: the one rule :func:`decide_human` applies to a single basis.

    At each look the gate takes in the confidence sequence (or ``bounds``, the interval to read instead,
    such as :func:`worst_case`'s) only when it is ready: at least ``min_labels`` labels in all and
    ``min_stratum_labels`` (default: ``min_labels``) in every stratum with pairs. The decision reads the
    intersection of ``held`` (the running intersection so far) with this look's interval and, along
    ``hold_axis`` (a simulation's looks in order), with every earlier look's: promote when it lies above
    1/2, reject when it lies below 1/2 + ``min_effect``."""
    per_stratum = min_labels if min_stratum_labels is None else min_stratum_labels
    cs = estimate_arrays(
        basis.strata,
        alpha,
        lam=lam,
        sequence=True,
        target_labels=target_labels,
        pseudo=pseudo,
        known_pairs=basis.known_pairs,
        known_total=basis.known_total,
    )
    low, high = (cs.low, cs.high) if bounds is None else bounds
    ready = cs.defined & (cs.labels >= min_labels) & strata_ready(basis.strata, per_stratum)
    low = np.where(ready, low, 0.0)
    high = np.where(ready, high, 1.0)
    if hold_axis is not None:
        low = np.maximum.accumulate(low, axis=hold_axis)
        high = np.minimum.accumulate(high, axis=hold_axis)
    low = np.maximum(low, held[0])
    high = np.minimum(high, held[1])
    return GateArrays(_read(low, high, min_effect), cs, np.asarray(ready), low, high)


def _read(low: Array, high: Array, min_effect: float) -> NDArray[np.int8]:
    """The decision an interval (the running intersection) gives: promote above 1/2, reject below the margin."""
    promote = low > 0.5
    reject = ~promote & (high < 0.5 + min_effect)
    return np.where(promote, PROMOTE, np.where(reject, REJECT, CONTINUE)).astype(np.int8)


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
    #: The confidence sequence at this look; None when there are no labels at all.
    interval: HumanEstimate | None
    #: Why it continues, in words a user can act on.
    reason: str
    #: For "continue": the further labels the current estimate and variance imply; None when unknown.
    labels_needed: int | None
    #: The running intersection the decision read, to keep for the next look (:class:`HeldInterval`).
    held: HeldInterval = HeldInterval()
    #: The largest stratum still short of its minimum, and its labels (None: none is short).
    short: tuple[str, int] | None = None
    min_stratum_labels: int = MIN_LABELS


def decide_human(
    basis: HumanBasis,
    *,
    alpha: float = 0.05,
    min_effect: float = 0.05,
    min_labels: int = MIN_LABELS,
    min_stratum_labels: int | None = None,
    target_labels: int = DEFAULT_TARGET_LABELS,
    lam: float | None = None,
    missing: MissingLabels = "at_random",
    held: HeldInterval | None = None,
) -> HumanGate:
    """Promote when the running intersection of the confidence sequence lies above 1/2, reject when it lies
    below 1/2 + min_effect (:func:`decide_arrays` on this one basis).

    An equal challenger (theta <= 1/2) is promoted, and one better by min_effect rejected, at most
    ``alpha`` of the time under the module's assumptions, however often this is called. Never falls back
    to the judge: without enough labels (in all, and in every stratum with pairs) the answer is "continue"
    with what is missing. ``held``: the running intersection kept from the series' earlier looks (None, or
    one held under other settings: a new series); the answer's ``held`` is the one to keep, so a decision
    once reached stays.

    ``missing="worst_case"`` drops the missing-at-random assumption: it promotes only if the sequence lies
    above 1/2 with every missing label set against the challenger, and rejects only if it lies below the
    boundary with every one set for it (:func:`worst_case`). Pending labels then only delay decisions.
    """
    per_stratum = min_labels if min_stratum_labels is None else min_stratum_labels
    if held is None or not held.fits(alpha, target_labels, missing):
        held = HeldInterval(alpha=alpha, target_labels=target_labels, missing=missing)
    interval = confidence_sequence(basis, alpha, lam=lam, target_labels=target_labels)
    bounds = worst_case(basis, alpha, lam=lam, target_labels=target_labels) if missing == "worst_case" else None
    if interval is None:  # no stratum with labels: nothing to take in at this look
        code = int(_read(np.asarray(held.low), np.asarray(held.high), min_effect))
        short = short_stratum(basis, per_stratum)
        return _answer(code, basis, None, held, short, per_stratum, alpha, min_effect, min_labels, target_labels, None)
    gate = decide_arrays(
        BasisArrays.of(basis),
        alpha=alpha,
        min_effect=min_effect,
        min_labels=min_labels,
        min_stratum_labels=per_stratum,
        target_labels=target_labels,
        lam=lam,
        bounds=None if bounds is None else (np.asarray(bounds[0]), np.asarray(bounds[1])),
        held=(held.low, held.high),
    )
    now = HeldInterval(
        low=float(gate.low),
        high=float(gate.high),
        looks=held.looks + int(bool(gate.ready)),
        alpha=alpha,
        target_labels=target_labels,
        missing=missing,
    )
    short = short_stratum(basis, per_stratum)
    return _answer(
        int(gate.decision),
        basis,
        interval,
        now,
        short,
        per_stratum,
        alpha,
        min_effect,
        min_labels,
        target_labels,
        bounds,
    )


def _answer(
    code: int,
    basis: HumanBasis,
    interval: HumanEstimate | None,
    held: HeldInterval,
    short: tuple[str, int] | None,
    per_stratum: int,
    alpha: float,
    min_effect: float,
    min_labels: int,
    target_labels: int,
    bounds: tuple[float, float] | None,
) -> HumanGate:
    """The gate's answer for ``code``, with the reason a user reads."""

    def answer(decision: HumanDecision, reason: str, needed: int | None = None) -> HumanGate:
        return HumanGate(decision, interval, reason, needed, held, short, per_stratum)

    labels = basis.labels
    if code == PROMOTE:
        return answer("promote", "people prefer the challenger")
    if code == REJECT:
        return answer("reject", "people do not prefer the challenger by the minimum effect")
    if interval is None:
        first = max(min_labels - labels, 1)
        return answer("continue", f"no human labels yet; at least {first} expected to be needed")
    forecast = labels_needed(interval, alpha=alpha, min_effect=min_effect, target_labels=target_labels)
    needed = max(forecast, min_labels - labels) if forecast is not None else None
    text = (
        f"{needed} more human labels expected to be needed"
        if needed is not None
        else f"more than {MAX_FORECAST_LABELS:,} more human labels would be needed at the current estimate"
    )
    if short is not None:
        text = f"not enough labels yet in {stratum_words(short[0])}: {short[1]} of {per_stratum}; " + text
    if interval.unlabelled_share > 0:
        text += f"; {interval.unlabelled_share:.0%} of pairs are in strata with too few labels"
    if bounds is not None and bounds != (interval.low, interval.high):
        text += f"; read at the worst case of {basis.pending + basis.expired} missing labels"
    return answer("continue", text, needed)


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
