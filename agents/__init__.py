"""The judging core: pure decision logic over a ``Judge`` port (docs/design.md §2).

The public face, for the stream edges and for anyone embedding the core::

    decision = await judge_pair(pair, judge, policy, catalog)        # one judge
    decision = await judge_pair(pair, [j1, j2, j3], policy, catalog) # a jury
    decision = await resolve_tiebreak(request, judge, policy)        # seed 002's resolver

A ``Decision`` carries the outcome event (verdict, tie-break request or review request) and its
``Disposition`` (publish it, judge the pair again later, or dead-letter it), an audit copy when sampled,
every judge call, and typed ``DecisionFacts`` for telemetry. Nothing here
does I/O: no Kafka, HTTP or OpenTelemetry (the layering check in the test suite enforces it).
"""

from pairjudge.agents.builders import Outcome
from pairjudge.agents.core import Decision, capped_decision, judge_pair, resolve_tiebreak
from pairjudge.agents.disposition import DeadLetterPair, Disposition, Publish, RetryLater
from pairjudge.agents.errors import (
    InputRejected,
    InvalidReply,
    JudgeError,
    JudgeRejected,
    JudgeUnavailable,
    PairjudgeError,
)
from pairjudge.agents.facts import DecisionFacts, EvaluationResult
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
from pairjudge.agents.pair_checks import check_pair, resolve_rubric
from pairjudge.agents.policy import Policy
from pairjudge.schemas.outcomes import DecidedKind, OutcomeKind

__all__ = [
    "ChatMessage",
    "DeadLetterPair",
    "DecidedKind",
    "Decision",
    "DecisionFacts",
    "Disposition",
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
    "Publish",
    "RetryLater",
    "capped_decision",
    "check_pair",
    "judge_info",
    "judge_pair",
    "resolve_rubric",
    "resolve_tiebreak",
]
