"""pairjudge contracts: pure pydantic models, no I/O. Every event is frozen and forbids unknown fields."""

from pairjudge.schemas import events as _events
from pairjudge.schemas._base import SCHEMA_VERSION, WIRE_CONTEXT, Contract, Event
from pairjudge.schemas.audit import (
    Alert,
    AlertKind,
    AuditDelta,
    AuditObservation,
    AuditSeries,
    AuditSnapshot,
    DecisionRecord,
    RelativeWinner,
    ThresholdUpdate,
)
from pairjudge.schemas.events import *  # noqa: F403 - the contracts events.py lists as public (its __all__)
from pairjudge.schemas.messages import ChatRole, FunctionCall, FunctionDefinition, Message, ToolCall, ToolDefinition
from pairjudge.schemas.pair import (
    TIE,
    Candidate,
    CandidatePair,
    CandidateSource,
    KnownLabel,
    PairMetadata,
    RiskLevel,
    Task,
)
from pairjudge.schemas.rubric import (
    DEFAULT_TIEBREAK_WEIGHTS,
    Criterion,
    HeadToHeadRubric,
    InlineRubric,
    PairwiseRubric,
    Rubric,
    RubricRef,
    TieBreakWeights,
    ToneStyleRubric,
    WeightedCriterion,
)

__all__ = [
    "DEFAULT_TIEBREAK_WEIGHTS",
    "SCHEMA_VERSION",
    "TIE",
    "WIRE_CONTEXT",
    "Alert",
    "AlertKind",
    "AuditDelta",
    "AuditObservation",
    "AuditSeries",
    "AuditSnapshot",
    "Candidate",
    "CandidatePair",
    "CandidateSource",
    "ChatRole",
    "Contract",
    "Criterion",
    "DecisionRecord",
    "Event",
    "FunctionCall",
    "FunctionDefinition",
    "HeadToHeadRubric",
    "InlineRubric",
    "KnownLabel",
    "Message",
    "PairMetadata",
    "PairwiseRubric",
    "RelativeWinner",
    "RiskLevel",
    "Rubric",
    "RubricRef",
    "Task",
    "ThresholdUpdate",
    "TieBreakWeights",
    "ToneStyleRubric",
    "ToolCall",
    "ToolDefinition",
    "WeightedCriterion",
]
__all__ += _events.__all__
