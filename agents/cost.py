"""What judge calls cost, by one rule: unknown stays unknown.

* A call is billed when it got a reply (``JudgeCall.answered_model``), valid or not: a call that raised
  (the judge down, a refusal) got none and costs nothing.
* A billed call costs what its pricing wrapper said (``JudgeCall.cost_usd``; 0.0 for a cache hit), or is
  unpriced (None: a model missing from the price table, a reply without token counts).
* A total (:func:`cost_of`) is the exact sum of the billed calls (``math.fsum``), 0.0 when none was billed,
  and None when any billed call is unpriced: never a partial sum passed off as the total, never free.

Every figure the project reports is this total: an ordering's, a verdict's, a decision's facts and record, a
tie-break request's primary spend. On an event a total is None also when nothing was billed
(:func:`event_cost`: the contracts' "no cost recorded", kept as the wire has always had it).

Two consumers can only add numbers: the spending caps' ledger (``streams.worker.spend``) and the
``pairjudge.decision.cost`` metric. They add :func:`known_usd`, the priced part: what is known to have been
spent, never less. For the caps that is the conservative reading: an unpriced call adds nothing (it cannot be
priced), and its decision's priced calls still count in full. A judge with no price table never reaches a cap.

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from pairjudge.agents.judge import JudgeCall

__all__ = ["billed", "cost_of", "event_cost", "known_usd", "total_usd"]


def billed(calls: Iterable[JudgeCall]) -> list[float | None]:
    """The costs of the billed calls (those that got a reply), in order."""
    return [c.cost_usd for c in calls if c.answered_model is not None]


def total_usd(costs: Sequence[float | None]) -> float | None:
    """The exact sum of ``costs``; 0.0 for none; None when any is unknown."""
    known: list[float] = []
    for cost in costs:
        if cost is None:
            return None
        known.append(cost)
    return math.fsum(known)


def cost_of(calls: Iterable[JudgeCall]) -> float | None:
    """What ``calls`` cost in US dollars: the total of the billed ones (see the module docstring)."""
    return total_usd(billed(calls))


def event_cost(costs: Sequence[float | None]) -> float | None:
    """An event's ``cost_usd`` over the billed ``costs``: their total, or None when there are none."""
    return total_usd(costs) if costs else None


def known_usd(calls: Iterable[JudgeCall]) -> float:
    """The priced part of what ``calls`` cost: for counters that can only add what is known."""
    return math.fsum([c.cost_usd for c in calls if c.answered_model is not None and c.cost_usd is not None])
