"""The judge cascade (issue 28): judges ordered cheap to strong, each deciding only where it is sure enough.

A pair meets the first tier. The tier judges both orders (a jury judges them juror by juror) and decides the
pair when its orders agree on a winner with at least the tier's threshold: its configured floor, raised by its
series' calibrated threshold once the drift audit has one (``Policy.primary_threshold_for``). Anything else (a
flip, a tie, low confidence, invalid or refused replies) passes the pair to the next tier, and what the last
tier cannot decide goes on as one judge's would: a tie-break request, then humans. A judge *outage* is not
passed on: the pair's review "judge_unavailable" goes back to the edge, which waits for the judge and judges
the pair again (``streams.worker.pipeline``), instead of sending every pair of a cheap judge's outage to the
expensive one.

Each tier is its own drift series (``JudgeInfo.tier`` is part of ``AuditSeries``), so its agreement with
humans, flips and calibrated threshold are its own, and the record names the tier that decided and the tiers
it passed (``DecisionRecord.escalated_from``). What the thresholds guarantee for the auto-decided pairs as a
whole is in ``agents.stats.calibrate_cascade`` and docs/guides/cascade.md.

Pure: no I/O; ``agents.core.judge_pair`` walks the tiers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pairjudge.agents.judge import Judge
from pairjudge.agents.truth_table import Reconciliation

#: A tier's name: it is part of series keys and metric labels, so short and plain.
TIER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True, slots=True)
class Tier:
    """One rung of the cascade: a judge (or a jury, in a fixed order) and the confidence it needs.

    The name "" is the one tier of a judge or jury outside a cascade (``agents.core.judge_pair``): its events
    name no tier."""

    name: str
    judges: tuple[Judge, ...]
    #: This tier's floor on the confidence a verdict needs: the policy's threshold for the pair's risk level
    #: (and the series' calibrated one) still applies when higher. A cheap judge usually needs more.
    threshold: float = 0.0

    def __post_init__(self) -> None:
        if self.name and not TIER_NAME.match(self.name):
            raise ValueError(f"a tier's name must match {TIER_NAME.pattern}, got {self.name!r}")
        if not self.judges:
            raise ValueError(f"tier {self.name!r} has no judge" if self.name else "a jury needs at least one judge")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"tier {self.name!r}: threshold must be in [0, 1], got {self.threshold!r}")

    @property
    def is_jury(self) -> bool:
        return len(self.judges) > 1


@dataclass(frozen=True, slots=True)
class Cascade:
    """Tiers in order, cheap first. Names are unique: they key the tiers' series."""

    tiers: tuple[Tier, ...]

    def __post_init__(self) -> None:
        if not self.tiers:
            raise ValueError("a cascade needs at least one tier")
        if any(not t.name for t in self.tiers):
            raise ValueError("every tier of a cascade needs a name")
        names = [t.name for t in self.tiers]
        if len(set(names)) != len(names):
            raise ValueError(f"tier names must be unique, got {names}")

    @property
    def judges(self) -> tuple[Judge, ...]:
        """Every tier's judges, in tier order."""
        return tuple(j for t in self.tiers for j in t.judges)


def passes_on(raw: Reconciliation) -> bool:
    """Whether a tier's reconciliation sends the pair to the next tier: anything but a verdict, except an outage."""
    return raw.outcome != "verdict" and raw.failure != "judge_unavailable"
