"""The input event: one task, two candidate outputs, and what to judge them against."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import Field, model_validator

from pairjudge.schemas._base import Contract, Event
from pairjudge.schemas.rubric import Rubric, TieBreakWeights

CandidateId = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:\-]+$")]
PairId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:\-]+$")]
Role = Literal["champion", "challenger", "baseline", "candidate"]
#: What a human (or a canary's known answer) says: a candidate id, or a tie.
LabelWinner = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^([A-Za-z0-9_.:\-]+)$")]
TIE = "TIE"


def utc_now() -> datetime:
    return datetime.now(UTC)


class CandidateSource(Contract):
    """Where an output came from. Never shown to the judge (docs/design.md §2.2)."""

    model: str = Field(min_length=1, max_length=200)
    version: str = Field(default="", max_length=100)
    prompt_version: str = Field(default="", max_length=100)
    role: Role = "candidate"


class Candidate(Contract):
    candidate_id: CandidateId
    #: Untrusted model output. Size is bounded by the worker's configured limit, not here,
    #: so that an oversized pair is dead-lettered with a clear reason rather than a schema error.
    #: An empty output is valid: in production it is an ordinary losing answer (``agents.settle``).
    output: str
    source: CandidateSource


class Task(Contract):
    prompt: str = Field(min_length=1)
    context: str | None = None


class PairMetadata(Contract):
    traffic: Literal["production", "shadow", "canary", "offline"] = "production"
    experiment_id: str | None = Field(default=None, max_length=200)
    tenant: str | None = Field(default=None, max_length=200)
    created_at: datetime = Field(default_factory=utc_now)


class KnownLabel(Contract):
    """A human answer already known for this pair: calibration canaries and labelled evaluation sets."""

    winner: LabelWinner  # a candidate_id, or "TIE"
    rationale: str = Field(default="", max_length=5_000)


class CandidatePair(Event):
    pair_id: PairId
    task: Task
    candidates: tuple[Candidate, Candidate]
    rubric: Rubric
    tiebreak: TieBreakWeights | None = None
    metadata: PairMetadata = Field(default_factory=PairMetadata)
    human_label: KnownLabel | None = None

    @model_validator(mode="after")
    def _distinct_candidates(self) -> CandidatePair:
        first, second = self.candidates
        if first.candidate_id == second.candidate_id:
            raise ValueError(f"the two candidates share the id {first.candidate_id!r}")
        if self.human_label is not None and self.human_label.winner not in (
            first.candidate_id,
            second.candidate_id,
            TIE,
        ):
            raise ValueError(f"human_label.winner {self.human_label.winner!r} names neither candidate nor TIE")
        return self

    def candidate(self, candidate_id: str) -> Candidate:
        for c in self.candidates:
            if c.candidate_id == candidate_id:
                return c
        raise KeyError(candidate_id)
