"""The agreement guard: a sequential test that pauses a judge which is consistently wrong, as soon as the
audit labels show it, at any number of labels (docs/guides/drift-audit.md#the-agreement-guard).

A judge can be wrong the same way in both orders: its orders agree, the pair is decided alone, and only a
person's label shows the mistake. The kappa guard acts only once a window has ``min_labels`` (50) labels; this
guard reads the labels on pairs whose two orders agreed and tests

    H0: the judge agrees with people on them at least ``floor`` of the time

with an e-process: the likelihood ratio of "agreement q" against "agreement ``floor``", mixed over q uniform on
(0, floor). Under H0 each ratio is a nonnegative supermartingale (for a true agreement p >= floor a label
multiplies it by ``p q/floor + (1-p)(1-q)/(1-floor)``, which is at most 1 when q < floor), so by Ville's
inequality the chance it *ever* reaches ``1/alpha`` is at most ``alpha``, however often it is looked at. The
mixture has a closed form in the regularised incomplete beta function, and depends only on the counts (labels,
agreeing), so it is a function of the window's sums: restart-safe and additive across workers like the rest.

Why the floor is the kappa floor itself, read as an agreement: Cohen's kappa is never above raw agreement
(``(po - pe) / (1 - pe) <= po`` whenever ``pe < 1``), so a judge agreeing with people less than the kappa floor
has a kappa below it whatever the label mix. The agreement guard thus never pauses a judge for a reason the kappa
guard would not share; it only says so sooner. ``GuardBounds.agreement_min`` sets another floor.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray


def log_e_below(agreeing: ArrayLike, labels: ArrayLike, floor: float) -> NDArray[np.float64]:
    """log of the e-value against "agreement >= floor", from ``agreeing`` of ``labels`` (arrays broadcast).

    The uniform mixture over q in (0, floor) of q^S (1-q)^F / (floor^S (1-floor)^F), with S agreeing and F
    disagreeing labels: (1/floor) B(S+1, F+1) I_floor(S+1, F+1) / (floor^S (1-floor)^F). 0 labels give 1 (log 0).
    """
    if not 0 < floor < 1:
        raise ValueError("the agreement floor must be in (0, 1)")
    # Imported here, not with the module: the LiteLLM callback's environment imports the audit's settings
    # (through streams.config) without scipy (docs/guides/litellm.md installs pairjudge there with --no-deps).
    from scipy.special import betainc, betaln

    s = np.asarray(agreeing, dtype=np.float64)
    f = np.asarray(labels, dtype=np.float64) - s
    head = betainc(s + 1, f + 1, floor)  # the share of the Beta(S+1, F+1) mass below the floor
    with np.errstate(divide="ignore"):
        log_head = np.log(head)
    log_e: NDArray[np.float64] = (
        betaln(s + 1, f + 1) + log_head - math.log(floor) - s * math.log(floor) - f * math.log1p(-floor)
    )
    return log_e


def e_below(agreeing: int, labels: int, floor: float) -> float:
    """The e-value against "agreement >= floor" for one window's counts (:func:`log_e_below`); capped at 1e300."""
    log_e = float(log_e_below(agreeing, labels, floor))
    return math.exp(min(log_e, 690.0))


def tripped(agreeing: int, labels: int, floor: float, alpha: float) -> bool:
    """True when the evidence that agreement is below ``floor`` has reached level ``alpha`` (e-value >= 1/alpha)."""
    return labels > 0 and float(log_e_below(agreeing, labels, floor)) >= -math.log(alpha)


def trip_boundary(floor: float, alpha: float, horizon: int) -> NDArray[np.int64]:
    """For n = 1..``horizon`` labels, the most agreeing labels at which the guard trips (-1: none can).

    The e-value falls as agreeing labels rise (each one is likelier under the floor than under any
    alternative below it), so the guard trips at n labels exactly when the agreeing count is at most this.
    What the simulations and the docs' table compute labels-to-pause from, without an e-value per run.
    """
    level = -math.log(alpha)
    out = np.full(horizon, -1, dtype=np.int64)
    for n in range(1, horizon + 1):
        s = np.arange(0, math.ceil(floor * n) + 1)
        trips = np.flatnonzero(log_e_below(s, n, floor) >= level)
        if trips.size:
            out[n - 1] = int(trips[-1])
    return out


def pause_probabilities(agreement: float, floor: float, alpha: float, horizon: int) -> NDArray[np.float64]:
    """The exact chance the guard has paused by n = 1..``horizon`` labels, for a judge whose labels agree with
    people independently with probability ``agreement``: the binomial paths, stopped at :func:`trip_boundary`.

    The bound the docs state (docs/guides/drift-audit.md#the-agreement-guard): its median and quantiles are the
    labels to pause, and at ``agreement >= floor`` its last value is the false-pause rate (at most ``alpha``).
    """
    boundary = trip_boundary(floor, alpha, horizon)
    alive = np.zeros(horizon + 1)
    alive[0] = 1.0  # the chance of k agreeing labels so far without a pause
    paused = np.empty(horizon)
    total = 0.0
    for n in range(1, horizon + 1):
        step = np.zeros(horizon + 1)
        step[1 : n + 1] += alive[:n] * agreement
        step[:n] += alive[:n] * (1.0 - agreement)
        cut = boundary[n - 1]
        if cut >= 0:
            total += float(step[: cut + 1].sum())
            step[: cut + 1] = 0.0
        alive = step
        paused[n - 1] = total
    return paused
