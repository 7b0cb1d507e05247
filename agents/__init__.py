"""The judging core: pure decision logic over a ``Judge`` port (docs/design.md §2).

The public face, for the stream edges and for anyone embedding the core::

    decision = await judge_pair(pair, judge, policy, catalog)        # one judge
    decision = await judge_pair(pair, [j1, j2, j3], policy, catalog) # a jury
    decision = await resolve_tiebreak(request, judge, policy)        # seed 002's resolver

A ``Decision`` carries the outcome event to publish (verdict, tie-break request or review request),
an audit copy when sampled, every judge call, and typed ``DecisionFacts`` for telemetry. Nothing here
does I/O: no Kafka, HTTP or OpenTelemetry (the layering check in the test suite enforces it).
"""

from pairjudge.agents.builders import Outcome
from pairjudge.agents.core import Decision, capped_decision, check_pair, judge_pair, resolve_rubric, resolve_tiebreak
from pairjudge.agents.errors import (
    InputRejected,
    InvalidReply,
    JudgeError,
    JudgeRejected,
    JudgeUnavailable,
    PairjudgeError,
)
from pairjudge.agents.facts import DecisionFacts, EvaluationResult, outcome_kind
from pairjudge.agents.judge import (
    ChatMessage,
    Judge,
    JudgeCall,
    JudgeIdentity,
    JudgeRequest,
    JudgeResponse,
    JudgeWrapper,
    judge_info,
)
from pairjudge.agents.outcomes import is_judge_rejected, rejected_detail, rejected_status
from pairjudge.agents.policy import Policy
from pairjudge.agents.truth_table import OutcomeKind

__all__ = [
    "ChatMessage",
    "Decision",
    "DecisionFacts",
    "EvaluationResult",
    "InputRejected",
    "InvalidReply",
    "Judge",
    "JudgeCall",
    "JudgeError",
    "JudgeIdentity",
    "JudgeRejected",
    "JudgeRequest",
    "JudgeResponse",
    "JudgeUnavailable",
    "JudgeWrapper",
    "Outcome",
    "OutcomeKind",
    "PairjudgeError",
    "Policy",
    "capped_decision",
    "check_pair",
    "is_judge_rejected",
    "judge_info",
    "judge_pair",
    "outcome_kind",
    "rejected_detail",
    "rejected_status",
    "resolve_rubric",
    "resolve_tiebreak",
]
