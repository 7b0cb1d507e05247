"""The backtest's import format: one recorded pair per JSON line (docs/guides/backtest.md).

What a judge answered in each order (the position letter it named, as the judge saw the outputs, and its
confidence), what the tie-break answered if it was asked, and what people said. ``pairjudge backtest``
replays these answers through the judging core under a policy, so the decision is the one the worker would
have made with those answers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pairjudge.schemas._base import Contract
from pairjudge.schemas.pair import RiskLevel

__all__ = ["HumanLabel", "RecordedAnswer", "RecordedOrders", "RecordedPair"]

#: A person's answer, relative to the pair: the first output, the second, or neither.
HumanLabel = Literal["first", "second", "tie"]


class RecordedAnswer(Contract):
    """One order's answer. ``winner`` is the position the judge named in that order: in order AB, "A" is the
    pair's first output; in order BA, "A" is the second output (it was shown first)."""

    winner: Literal["A", "B", "tie"] | None = None
    confidence: float | None = Field(default=None, ge=0, le=1)
    #: False: the judge's reply could not be read (it goes through the core's re-asks and fails again).
    valid: bool = True
    #: What the call cost in US dollars; None: unknown.
    cost_usd: float | None = Field(default=None, ge=0)


class RecordedOrders(Contract):
    ab: RecordedAnswer
    ba: RecordedAnswer


class RecordedPair(Contract):
    pair_id: str = Field(min_length=1, max_length=200)
    experiment: str | None = None
    risk_level: RiskLevel | None = None
    #: Every person's label (several reviewers: the majority counts; a split is a tie).
    labels: tuple[HumanLabel, ...] = ()
    primary: RecordedOrders
    #: The tie-break's answers, if the pair reached it when it was recorded.
    tiebreak: RecordedOrders | None = None
