"""The deployment gate: promote, reject or continue, valid however often it is looked at.

A fixed-sample test checked after every verdict stops early on noise far more often than its nominal
level says. This gate uses two test martingales (e-processes) on the challenger's win probability ``p``
over decisive comparisons (ties carry no information about which is better, and are left out):

* **promote** tests H0 "the challenger is no better" (``p <= 1/2``) against a uniform mixture over
  ``p`` in (1/2, 1). Under H0 each mixture component is a nonnegative supermartingale, so by Ville's
  inequality the chance it *ever* reaches ``1/alpha`` is at most ``alpha``: an equal challenger is
  promoted at most ``alpha`` of the time, however long the stream and however often it is checked.
* **reject** tests H0 "the challenger is better by at least the minimum effect" (``p >= 1/2 + delta``)
  against a uniform mixture over (0, 1/2 + delta): a challenger that good is rejected at most
  ``alpha`` of the time.

Until one of them reaches ``1/alpha`` the decision is ``continue``. Should both (a challenger better,
but by less than the minimum effect, with a great deal of data), promotion wins: it is not worse.

The mixture integrals have closed forms in the regularised incomplete beta function (scipy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import betainc, betaincc, betaln

GateDecision = Literal["promote", "reject", "continue"]


@dataclass(frozen=True, slots=True)
class GateConfig:
    alpha: float = 0.05
    #: The smallest win-probability margin over 1/2 worth shipping for (0.05: wins 55% of decisive pairs).
    min_effect: float = 0.05

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError("alpha must be in (0, 1)")
        if not 0 < self.min_effect < 0.5:
            raise ValueError("min_effect must be in (0, 0.5)")

    @property
    def threshold(self) -> float:
        """The e-value at which a hypothesis is rejected: ``1/alpha``."""
        return 1.0 / self.alpha


def _log(x: ArrayLike) -> NDArray[np.float64]:
    """log, with log(0) = -inf (no evidence) instead of a warning."""
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(x, dtype=np.float64))


def log_e_promote(wins: ArrayLike, losses: ArrayLike) -> NDArray[np.float64]:
    """log of the e-value against "p <= 1/2": the uniform mixture over p in (1/2, 1) of the
    likelihood ratio p^W (1-p)^L / (1/2)^(W+L)."""
    w, lo = np.asarray(wins, dtype=float), np.asarray(losses, dtype=float)
    p0 = 0.5
    tail = betaincc(w + 1, lo + 1, p0)  # the share of the Beta(W+1, L+1) mass above p0
    log_e = betaln(w + 1, lo + 1) + _log(tail) - math.log(1 - p0) - w * math.log(p0) - lo * math.log(1 - p0)
    return np.asarray(log_e, dtype=np.float64)


def log_e_reject(wins: ArrayLike, losses: ArrayLike, min_effect: float) -> NDArray[np.float64]:
    """log of the e-value against "p >= 1/2 + min_effect": the uniform mixture over p in (0, p1)."""
    w, lo = np.asarray(wins, dtype=float), np.asarray(losses, dtype=float)
    p1 = 0.5 + min_effect
    head = betainc(w + 1, lo + 1, p1)  # the share of the Beta(W+1, L+1) mass below p1
    log_e = betaln(w + 1, lo + 1) + _log(head) - math.log(p1) - w * math.log(p1) - lo * math.log(1 - p1)
    return np.asarray(log_e, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class GateState:
    """The gate on ``wins`` and ``losses`` of the challenger (decisive comparisons only)."""

    wins: int
    losses: int
    e_promote: float
    e_reject: float
    decision: GateDecision
    threshold: float


DEFAULT_GATE = GateConfig()


def decide(wins: int, losses: int, config: GateConfig = DEFAULT_GATE) -> GateState:
    lp = float(log_e_promote(wins, losses))
    lr = float(log_e_reject(wins, losses, config.min_effect))
    log_threshold = math.log(config.threshold)
    decision: GateDecision
    if lp >= log_threshold:
        decision = "promote"
    elif lr >= log_threshold:
        decision = "reject"
    else:
        decision = "continue"
    return GateState(wins, losses, _exp(lp), _exp(lr), decision, config.threshold)


def _exp(log_value: float) -> float:
    return math.exp(min(log_value, 700.0))  # capped: an e-value past e^700 says nothing more
