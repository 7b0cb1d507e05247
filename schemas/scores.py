"""The champion-challenger scoreboard's events: what is counted, what is published, and the gate."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from pairjudge.schemas._base import Contract, Event
from pairjudge.schemas.pair import PairId, utc_now

Side = Literal["win", "loss", "tie"]
GateDecision = Literal["promote", "reject", "continue"]


class ScoreEvent(Event):
    """One pair's final outcome from the challenger's side, keyed by experiment (internal topic)."""

    experiment: str = Field(min_length=1, max_length=200)
    pair_id: PairId
    #: "judged": an automatic verdict (a judge's, or a rule's); "human": a person decided an escalated pair.
    kind: Literal["judged", "human"]
    side: Side
    rubric_kind: str
    traffic: str
    #: (challenger, champion) output lengths in characters, and models.
    chars: tuple[int, int] | None = None
    models: tuple[str, str] | None = None
    at: datetime = Field(default_factory=utc_now)


class TallySnapshot(Contract):
    wins: int
    losses: int
    ties: int
    #: The challenger's share of decisive pairs, and its Wilson 95% interval.
    win_rate: float | None = None
    low: float | None = None
    high: float | None = None


class StrengthSnapshot(Contract):
    model: str
    strength: float
    low: float
    high: float
    comparisons: int


class GateSnapshot(Contract):
    decision: GateDecision
    wins: int
    losses: int
    e_promote: float
    e_reject: float
    threshold: float
    alpha: float
    min_effect: float
    #: Set when the gate will not decide (the kappa guard has paused automatic decisions): it says why.
    refused: str | None = None


class HistoryPoint(Contract):
    at: datetime
    pairs: int
    win_rate: float | None = None
    low: float | None = None
    high: float | None = None
    log_e_promote: float | None = None
    log_e_reject: float | None = None


class ScoreSnapshot(Event):
    """An experiment's scoreboard, published on ``pairjudge.scores`` (keyed by experiment)."""

    experiment: str
    overall: TallySnapshot
    by_rubric: dict[str, TallySnapshot] = Field(default_factory=dict)
    by_traffic: dict[str, TallySnapshot] = Field(default_factory=dict)
    #: Escalated pairs a person decided, counted apart from the judge's.
    human: TallySnapshot
    length_controlled_win_rate: float | None = None
    length_coefficient: float | None = None
    strengths: tuple[StrengthSnapshot, ...] = ()
    gate: GateSnapshot
    history: tuple[HistoryPoint, ...] = ()
    updated_at: datetime = Field(default_factory=utc_now)


class GateUpdate(Event):
    """The gate's latest decision for an experiment, on the compacted ``pairjudge.gate`` topic."""

    experiment: str
    gate: GateSnapshot
    decided_at: datetime = Field(default_factory=utc_now)
