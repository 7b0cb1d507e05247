"""The input event: one task, two candidate outputs, and what to judge them against."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import Field, model_validator

from pairjudge.schemas._base import Contract, Event
from pairjudge.schemas.messages import ChatRole as ChatRole  # re-exported: the pair's turns are these
from pairjudge.schemas.messages import Message as Message  # re-exported: the pair's turns are these
from pairjudge.schemas.messages import ToolCall, ToolDefinition
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
    #: The tool calls the reply makes (schema version 3), in OpenAI's chat shape: the reply is ``output``'s
    #: text, these calls, or both. Never executed: the judge compares them as data (docs/guides/tool-calls.md).
    tool_calls: tuple[ToolCall, ...] = ()

    @model_validator(mode="after")
    def _distinct_call_ids(self) -> Candidate:
        ids = [c.id for c in self.tool_calls]
        if len(set(ids)) != len(ids):
            raise ValueError(f"two tool calls of candidate {self.candidate_id!r} share an id")
        return self

    @property
    def is_empty(self) -> bool:
        """Whether the reply says nothing at all: no text but whitespace, and no tool call (a text of hidden
        characters only is ``agents.pair_checks``'s to find: it needs the characters' table)."""
        return not self.output.strip() and not self.tool_calls


#: How much a pair's decision matters (seed 001's [RISK_LEVEL]): it selects the thresholds it must clear.
RiskLevel = Literal["low", "normal", "high"]


class Task(Contract):
    """What the two candidates answer: a single ``prompt``, or a conversation in ``messages``.

    - ``prompt``: one instruction, answered once by each candidate (schema version 1's only form).
    - ``messages`` whose last turn is the user's: the conversation so far, shared by both candidates; each
      candidate's ``output`` is its reply to that last turn.
    - ``messages`` of user (and system) turns only, with candidates that carry ``turns``: a transcript
      comparison, each candidate having answered every user turn in its own conversation (MT-Bench's two
      turns).

    Schema version 3 adds tools: ``tools``, the functions the assistants were offered, and tool turns in
    ``messages``. After the last user turn a conversation may go on with the assistant's tool calls and the
    tools' results (an agent's loop); the candidates then reply to the last result, still answering that
    last user turn (:attr:`after_question`).
    """

    prompt: str | None = Field(default=None, min_length=1)
    context: str | None = None
    messages: tuple[Message, ...] = ()
    #: The tools offered with the request (schema version 3), in OpenAI's chat shape.
    tools: tuple[ToolDefinition, ...] = ()

    @model_validator(mode="after")
    def _one_form(self) -> Task:
        if (self.prompt is None) == (not self.messages):
            raise ValueError("a task has either a prompt or messages (a conversation), not both and not neither")
        if self.messages:
            self._check_conversation()
        names = [t.function.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ValueError("two of the task's tools share a name")
        return self

    def _check_conversation(self) -> None:
        asked = self._question_index()
        if asked is None:
            raise ValueError("a conversation needs a user turn: the candidates reply to the last one")
        if self.messages[asked].content == "":
            raise ValueError("a conversation's last user turn is empty")
        after = self.messages[asked + 1 :]
        if after and after[-1].role != "tool":
            raise ValueError(
                "a conversation's last turn must be the user's, or a tool's result after it: the candidates reply to it"
            )
        if any(m.role not in ("assistant", "tool") or (m.role == "assistant" and not m.tool_calls) for m in after):
            raise ValueError(
                "after the last user turn a conversation holds only the assistant's tool calls and their results"
            )
        called: set[str] = set()
        for m in self.messages:
            called.update(c.id for c in m.tool_calls)
            if m.tool_call_id is not None and m.tool_call_id not in called:
                raise ValueError(f"tool turn answers {m.tool_call_id!r}, which no earlier assistant turn called")

    def _question_index(self) -> int | None:
        for index in range(len(self.messages) - 1, -1, -1):
            if self.messages[index].role == "user":
                return index
        return None

    @property
    def _asked(self) -> int:
        index = self._question_index()
        assert index is not None, "validated: a conversation has a user turn"
        return index

    @property
    def question(self) -> str:
        """The instruction the candidates' outputs answer: the prompt, or the conversation's last user turn."""
        if self.prompt is not None:
            return self.prompt
        return self.messages[self._asked].content

    @property
    def history(self) -> tuple[Message, ...]:
        """The turns before the question (empty for a single prompt)."""
        return self.messages[: self._asked] if self.messages else ()

    @property
    def after_question(self) -> tuple[Message, ...]:
        """The assistant's tool calls and their results after the question, before the candidates' replies
        (schema version 3; empty when the conversation ends with the question)."""
        return self.messages[self._asked + 1 :] if self.messages else ()

    @property
    def uses_tools(self) -> bool:
        """Whether the task offers tools or holds a tool call or result (schema version 3)."""
        return bool(self.tools) or any(m.uses_tools for m in self.messages)

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
    def uses_tools(self) -> bool:
        """Whether the pair has anything of tools (schema version 3): tools offered, tool turns, or a
        candidate's tool calls. Such a pair is judged with the tool-call blocks in its prompts."""
        return self.task.uses_tools or any(c.tool_calls for c in self.candidates)

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
        if self.schema_version < 3 and self.uses_tools:
            raise ValueError("tools, tool turns and tool calls need schema_version 3 (docs/reference/events.md)")
        self._check_tool_use()
        if self.human_label is not None and self.human_label.winner not in (
            first.candidate_id,
            second.candidate_id,
            TIE,
        ):
            raise ValueError(f"human_label.winner {self.human_label.winner!r} names neither candidate nor TIE")
        return self

    def _check_tool_use(self) -> None:
        if not self.uses_tools:
            return
        for c in self.candidates:
            if c.is_empty:
                # In a tool-using pair an empty reply is a capture that lost its calls, not an answer: it
                # must never be judged as an empty (losing) output. (Without tools the established rule
                # stands: an empty output is an ordinary losing answer, agents.settle.)
                raise ValueError(
                    f"candidate {c.candidate_id!r} has neither text nor tool calls: in a pair with tools a reply "
                    "is its text, its tool calls, or both"
                )
        if self.is_transcript:
            raise ValueError("a transcript comparison's turns are text only: tools need a reply comparison")
        # A call to a function the task does not offer is the candidate's mistake, for the judge to weigh.

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
