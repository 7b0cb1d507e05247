"""The spending cap (issue 28): what judging costs per clock hour, and what a pair over the cap meets.

Two caps, both per UTC clock hour and both live settings (``Policy.spend_*``, ``pairjudge control set``): one
on everything the workers spend together, and one on each experiment's share. A pair of the primary stage is
judged only while neither cap it falls under is reached; past one, the configured action applies:

* ``review``: the pair goes to a person (review "spend_capped"), with no judge call;
* ``sample``: a stable share of the pairs (by pair id, ``agents.sampling.still_sampled``) is still judged, the
  rest are set aside on the dead-letter topic with their bytes ("spend_capped"): ``pairjudge deadletter replay``
  judges them once there is budget again;
* ``queue``: the pair waits, holding its judging slot, until the hour turns or the cap is raised. Once every
  slot of a worker holds a waiting pair it stops reading its partitions: Kafka keeps the rest, but pairs of
  other experiments on the same partitions wait too.

None of them drops a pair or counts it as a tie, and the edge raises a "spend_cap" alert when a cap is met. A
pair already judged in the primary stage still gets its tie-break: the cap decides which pairs start.

The ledger sums what every worker spent in the hour: its own spend as it happens, the others' as they publish
it (``streams.worker.spend``), so the caps hold across workers to within a second of their spend.

Pure: the clock and the spend come in as arguments.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import get_args

from pairjudge.schemas.kinds import SpendAction as SpendAction  # re-exported: the spend module names it

SPEND_ACTIONS: tuple[SpendAction, ...] = get_args(SpendAction)
#: The ledger's key for the pairs of no experiment (only the overall cap applies to them).
NO_EXPERIMENT = "-"
#: Hours the ledger keeps (the current one and the one before, for a publisher late across the hour).
HOURS_KEPT = 2


def hour_of(now_s: float) -> int:
    """The UTC clock hour ``now_s`` (seconds since the epoch) falls in, as hours since the epoch."""
    return math.floor(now_s / 3600)


@dataclass(frozen=True, slots=True)
class SpendCaps:
    """The caps in force (0 means none) and the action past them."""

    hourly_usd: float = 0.0
    experiment_hourly_usd: float = 0.0
    action: SpendAction = "review"
    #: ``sample``: the share of a capped experiment's pairs still judged.
    sample_share: float = 0.1

    def __post_init__(self) -> None:
        if self.hourly_usd < 0 or self.experiment_hourly_usd < 0:
            raise ValueError("a spending cap cannot be negative (0 means no cap)")
        if self.action not in SPEND_ACTIONS:
            raise ValueError(f"spend_action must be one of {', '.join(SPEND_ACTIONS)}, got {self.action!r}")
        if not 0.0 <= self.sample_share <= 1.0:
            raise ValueError(f"spend_sample_share must be within [0, 1], got {self.sample_share!r}")

    @property
    def any(self) -> bool:
        return self.hourly_usd > 0 or self.experiment_hourly_usd > 0


@dataclass(frozen=True, slots=True)
class CapReached:
    """Which cap a pair is over: its scope ("all" or the experiment), what was spent and the cap."""

    scope: str
    spent_usd: float
    cap_usd: float

    @property
    def describe(self) -> str:
        what = "all pairs" if self.scope == "all" else f"experiment {self.scope}"
        return f"{what} spent {self.spent_usd:.4f} USD this hour, at or over its cap of {self.cap_usd:g} USD"


@dataclass
class SpendLedger:
    """US dollars spent per clock hour, per worker and per experiment.

    Each worker's figures for an hour are cumulative: a worker adds its own spend as it happens
    (``add``), and takes another's latest total as it comes (``set_worker``), so reading a total twice
    (a restart, a redelivery) never counts it twice."""

    #: hour -> worker -> experiment (or ``NO_EXPERIMENT``) -> US dollars.
    hours: dict[int, dict[str, dict[str, float]]] = field(default_factory=dict)

    def add(self, worker: str, hour: int, experiment: str | None, usd: float) -> None:
        if usd <= 0:
            return
        spent = self.hours.setdefault(hour, {}).setdefault(worker, {})
        key = experiment or NO_EXPERIMENT
        spent[key] = spent.get(key, 0.0) + usd
        self._forget_before(hour)

    def set_worker(self, worker: str, hour: int, by_experiment: Mapping[str, float]) -> None:
        """Another worker's total so far in ``hour``, by experiment (it replaces what it said before)."""
        self.hours.setdefault(hour, {})[worker] = dict(by_experiment)
        self._forget_before(max(self.hours))

    def of_worker(self, worker: str, hour: int) -> dict[str, float]:
        """What ``worker`` spent in ``hour``, by experiment."""
        return dict(self.hours.get(hour, {}).get(worker, {}))

    def _forget_before(self, hour: int) -> None:
        for old in [h for h in self.hours if h <= hour - HOURS_KEPT]:
            del self.hours[old]

    def spent(self, hour: int, experiment: str | None = None) -> float:
        """All spend in ``hour``, or one experiment's, over every worker."""
        workers = self.hours.get(hour, {}).values()
        if experiment is None:
            return sum(sum(by.values()) for by in workers)
        return sum(by.get(experiment, 0.0) for by in workers)

    def reached(self, caps: SpendCaps, hour: int, experiment: str | None) -> CapReached | None:
        """The cap a pair of ``experiment`` is over in ``hour``, if any: the overall one first."""
        if caps.hourly_usd > 0 and (total := self.spent(hour)) >= caps.hourly_usd:
            return CapReached("all", total, caps.hourly_usd)
        if experiment and caps.experiment_hourly_usd > 0:
            share = self.spent(hour, experiment)
            if share >= caps.experiment_hourly_usd:
                return CapReached(experiment, share, caps.experiment_hourly_usd)
        return None
