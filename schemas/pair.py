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
    #: Untrusted model output: the reply to the task's last user turn. Size is bounded by the worker's
    #: configured limit, not here, so that an oversized pair is dead-lettered with a clear reason rather
    #: than a schema error. An empty output is valid: in production it is an ordinary losing answer
    #: (``agents.settle``).
    output: str
    source: CandidateSource
    #: A transcript comparison (schema version 2): this candidate's own replies to the task's earlier user
    #: turns, in order, one a turn; ``output`` is its reply to the last. Empty for a single reply.
    turns: tuple[str, ...] = ()


#: Who said a turn, as in OpenAI's chat format.
ChatRole = Literal["system", "user", "assistant"]
#: How much a pair's decision matters (seed 001's [RISK_LEVEL]): it selects the thresholds it must clear.
RiskLevel = Literal["low", "normal", "high"]


class Message(Contract):
    """One turn of a conversation. Untrusted text, like every output."""

    role: ChatRole
    content: str


class Task(Contract):
    """What the two candidates answer: a single ``prompt``, or a conversation in ``messages``.

    - ``prompt``: one instruction, answered once by each candidate (schema version 1's only form).
    - ``messages`` whose last turn is the user's: the conversation so far, shared by both candidates; each
      candidate's ``output`` is its reply to that last turn.
    - ``messages`` of user (and system) turns only, with candidates that carry ``turns``: a transcript
      comparison, each candidate having answered every user turn in its own conversation (MT-Bench's two
      turns).
    """

    prompt: str | None = Field(default=None, min_length=1)
    context: str | None = None
    messages: tuple[Message, ...] = ()

    @model_validator(mode="after")
    def _one_form(self) -> Task:
        if (self.prompt is None) == (not self.messages):
            raise ValueError("a task has either a prompt or messages (a conversation), not both and not neither")
        if self.messages:
            if self.messages[-1].role != "user":
                raise ValueError("a conversation's last turn must be the user's: the candidates reply to it")
            if self.messages[-1].content == "":
                raise ValueError("a conversation's last user turn is empty")
        return self

    @property
    def question(self) -> str:
        """The instruction the candidates' outputs answer: the prompt, or the conversation's last user turn."""
        if self.prompt is not None:
            return self.prompt
        return self.messages[-1].content

    @property
    def history(self) -> tuple[Message, ...]:
        """The turns before the question (empty for a single prompt)."""
        return self.messages[:-1]

    @property
    def user_turns(self) -> tuple[str, ...]:
        """Every user turn in order, the question last (just the prompt for a single prompt)."""
        if self.prompt is not None:
            return (self.prompt,)
        return tuple(m.content for m in self.messages if m.role == "user")


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
    #: Seed 001's [RISK_LEVEL] (schema version 2): each level has its own thresholds; by default ``high``
    #: pairs need more confidence to be auto-decided and go to review below it, and ``low`` pairs are judged
    #: like ``normal`` ones until an operator loosens them. None is ``normal``. docs/guides/risk-levels.md.
    risk_level: RiskLevel | None = None

    @property
    def risk(self) -> RiskLevel:
        """The pair's risk level, ``normal`` when it names none."""
        return self.risk_level or "normal"

    @property
    def is_transcript(self) -> bool:
        """True when the candidates are whole transcripts (their ``turns``), not replies to one last turn."""
        return any(c.turns for c in self.candidates)

    @model_validator(mode="after")
    def _distinct_candidates(self) -> CandidatePair:
        first, second = self.candidates
        if first.candidate_id == second.candidate_id:
            raise ValueError(f"the two candidates share the id {first.candidate_id!r}")
        self._check_conversation()
        if self.schema_version == 1 and (self.task.messages or self.is_transcript or self.risk_level is not None):
            raise ValueError(
                "task.messages, candidate turns and risk_level need schema_version 2 (docs/reference/events.md)"
            )
        if self.human_label is not None and self.human_label.winner not in (
            first.candidate_id,
            second.candidate_id,
            TIE,
        ):
            raise ValueError(f"human_label.winner {self.human_label.winner!r} names neither candidate nor TIE")
        return self

    def _check_conversation(self) -> None:
        if not self.is_transcript:
            return
        if any(m.role == "assistant" for m in self.task.messages):
            raise ValueError(
                "a transcript comparison's task.messages hold the user (and system) turns only: each candidate's "
                "own replies are its turns"
            )
        earlier = len(self.task.user_turns) - 1
        for c in self.candidates:
            if len(c.turns) != earlier:
                raise ValueError(
                    f"candidate {c.candidate_id!r} has {len(c.turns)} earlier turns for {earlier} earlier user "
                    "turns: a transcript has one reply a user turn, the last being its output"
                )

    def candidate(self, candidate_id: str) -> Candidate:
        for c in self.candidates:
            if c.candidate_id == candidate_id:
                return c
        raise KeyError(candidate_id)
