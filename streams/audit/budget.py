"""The audit label budget at the edge: measure the verdict rate, set ``Policy.audit_scale``.

With ``PAIRJUDGE_POLICY__AUDIT_LABEL_BUDGET`` set, every worker estimates the fleet's rate of automatic
verdicts by sampling class and sets the scale on the audit shares at which the expected audit labels per
``audit_budget_period`` fit the budget (the arithmetic is ``agents.sampling.budget_scale``). Each verdict
records the probability it was drawn with, so the estimates stay exact however the scale moves.

The fleet's rate is estimated, not counted: this worker's rate (an exponentially weighted rate with a
10-minute time constant, see :class:`VerdictRate`) times the input partitions (pairs and tie-break
topics) over the ones it owns. That assumes the fleet's traffic spreads evenly over partitions, as
hash-keyed pairs do; a worker that owns no partition keeps its last scale. No coordination is needed
and every worker arrives at about the same scale. Replayed outcomes are not counted (they were counted
when decided), so redeliveries do not inflate the rate.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from faust.exceptions import ConsumerNotStarted
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from pairjudge.agents.core import Decision
from pairjudge.agents.sampling import CONFIDENT, UNCERTAIN, VerdictClass, budget_scale
from pairjudge.streams.control.live import PolicyHolder
from pairjudge.streams.worker.tables import owned_partitions

log = logging.getLogger(__name__)

PERIOD_S: Mapping[str, float] = {"hour": 3600.0, "day": 86400.0}
#: The rate meter's time constant: about the last 10 minutes count.
RATE_TAU_S = 600.0
#: How often each worker recomputes the scale.
UPDATE_EVERY_S = 30.0
#: Before this much time has passed, the warm-up correction uses this instead (a handful of verdicts in
#: the first seconds would otherwise read as a huge rate and squeeze the sample for no reason).
_MIN_ELAPSED_S = 60.0


class VerdictRate:
    """An exponentially weighted event rate (events per second), bias-corrected while warming up.

    Each event adds ``1/tau`` to a level that decays as ``exp(-dt/tau)``: for a steady stream of rate r
    the level tends to r. Before ``tau`` has passed the level has not filled yet, so it is divided by
    ``1 - exp(-elapsed/tau)``, the share of the window seen so far.
    """

    def __init__(self, tau_s: float = RATE_TAU_S, *, now: float) -> None:
        if tau_s <= 0:
            raise ValueError("tau_s must be positive")
        self.tau_s = tau_s
        self._start = now
        self._last = now
        self._level = 0.0

    def add(self, now: float, count: float = 1.0) -> None:
        self._level = self._decayed(now) + count / self.tau_s
        self._last = max(self._last, now)

    def rate(self, now: float) -> float:
        elapsed = max(now - self._start, _MIN_ELAPSED_S)
        return self._decayed(now) / -math.expm1(-elapsed / self.tau_s)

    def _decayed(self, now: float) -> float:
        return self._level * math.exp(-max(0.0, now - self._last) / self.tau_s)


def keep_label_budget(app: Any, budget: AuditBudget, inputs: Sequence[str], partitions: int) -> None:
    """A timer on a worker's ``app`` that rescales the audit shares every ``UPDATE_EVERY_S``: this worker's verdict
    rate, extrapolated to the fleet by its share of the ``inputs`` topics' partitions (``partitions`` each)."""

    async def rescale_audit() -> None:
        try:
            owned = sum(len(owned_partitions(app, topic)) for topic in inputs)
        except ConsumerNotStarted:
            return  # not consuming yet: nothing measured to extrapolate from; a timer must not crash the app
        budget.update(owned, partitions * len(inputs))

    app.timer(interval=UPDATE_EVERY_S)(rescale_audit)


class AuditBudget:
    """Counts this worker's fresh automatic verdicts by class and keeps the holder's scale on budget."""

    def __init__(
        self,
        holder: PolicyHolder,
        *,
        budget: int,
        period: Literal["hour", "day"],
        clock: Callable[[], float] = time.monotonic,
        tau_s: float = RATE_TAU_S,
    ) -> None:
        self.holder = holder
        self.budget = budget
        self.period_s = PERIOD_S[period]
        self._clock = clock
        now = clock()
        self._rates: dict[VerdictClass, VerdictRate] = {
            CONFIDENT: VerdictRate(tau_s, now=now),
            UNCERTAIN: VerdictRate(tau_s, now=now),
        }

    def observe(self, decision: Decision) -> None:
        """Count a decision that is about to be published, if it is a verdict that was sampled for audit.

        Counted by the class it was sampled in; a verdict without one (a rule's, or with auditing off)
        costs no audit labels whatever the scale.
        """
        facts = decision.facts
        if facts.outcome != "verdict" or facts.sampling_class not in (CONFIDENT, UNCERTAIN):
            return
        cls: VerdictClass = CONFIDENT if facts.sampling_class == CONFIDENT else UNCERTAIN
        self._rates[cls].add(self._clock())

    def fleet_verdicts_per_period(self, owned: int, total: int) -> dict[VerdictClass, float]:
        """The fleet's verdicts per period by class, from this worker's rate and its share of partitions."""
        now = self._clock()
        factor = total / owned
        return {cls: meter.rate(now) * factor * self.period_s for cls, meter in self._rates.items()}

    def update(self, owned: int, total: int) -> float:
        """Recompute the scale for ``owned`` of ``total`` input partitions and set it; returns it.

        With no owned partition there is nothing to extrapolate from: the scale stays as it was.
        """
        if owned <= 0 or total <= 0:
            return self.holder.current.audit_scale
        verdicts = self.fleet_verdicts_per_period(min(owned, total), total)
        scale = budget_scale(self.holder.current, verdicts, float(self.budget))
        previous = self.holder.current.audit_scale
        self.holder.set_audit_scale(scale)
        if not math.isclose(scale, previous, rel_tol=0.05):
            log.info(
                "audit budget: %d labels per %s at about %.0f confident and %.0f uncertain verdicts per period "
                "(fleet estimate); audit shares scaled by %.3f",
                self.budget,
                "hour" if self.period_s == PERIOD_S["hour"] else "day",
                verdicts[CONFIDENT],
                verdicts[UNCERTAIN],
                scale,
            )
        return scale


def observe_scale(provider: MeterProvider, holder: PolicyHolder) -> None:
    """A ``pairjudge_audit_scale`` gauge on /metrics: the budget's current factor on the audit shares."""
    meter = provider.get_meter("pairjudge.worker")

    def scale(_: CallbackOptions) -> Iterable[Observation]:
        yield Observation(holder.current.audit_scale)

    meter.create_observable_gauge(
        "pairjudge.audit.scale", [scale], description="The label budget's factor on the audit shares (1: none)"
    )
