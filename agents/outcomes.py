"""Reading a ``Decision`` for the stream edge: facts about an outcome that decide where it goes.

``rejected_detail`` serves the edge's rule for refusals: a decision whose outcome is a review for
"judge_rejected" (a judge answered a request with a 4xx such as a bad key or a prompt over its context
length; see :func:`agents.truth_table.failure_reason`) is not something a reviewer can fix, so the edge
dead-letters the pair and raises an ``Alert`` instead of asking a human. This module gives it the text
for both, from what the orderings already recorded (``OrderingResult.error_kind`` and ``error``,
written by :func:`agents.validation.ask_validated` from the judge's exception, whose message the HTTP
judges have already scrubbed of credentials), and the HTTP status as the judge raised it
(``JudgeError.status``, kept in the decision's ``JudgeCall.status``): nothing is read back out of text.

Pure: no I/O, only the contracts.
"""

from __future__ import annotations

from typing import Final

from pairjudge.agents.builders import Outcome
from pairjudge.agents.core import Decision
from pairjudge.schemas.events import OrderingResult, ReviewRequest

__all__ = ["is_judge_rejected", "rejected_detail", "rejected_orderings", "rejected_status"]

#: Distinct details kept in one ``rejected_detail``: a jury of many jurors refused alike says it once.
_MAX_DETAILS: Final = 4


def _outcome(decision: Decision | Outcome) -> Outcome:
    return decision.outcome if isinstance(decision, Decision) else decision


def is_judge_rejected(decision: Decision | Outcome) -> bool:
    """True when the outcome is a review for "judge_rejected" (never for its audit copy)."""
    outcome = _outcome(decision)
    return isinstance(outcome, ReviewRequest) and outcome.reason == "judge_rejected"


def rejected_orderings(decision: Decision | Outcome) -> tuple[OrderingResult, ...]:
    """The orderings whose judge refused the request, in the outcome's order; empty unless judge_rejected."""
    outcome = _outcome(decision)
    if not isinstance(outcome, ReviewRequest) or outcome.reason != "judge_rejected":
        return ()
    return tuple(o for o in outcome.orderings if not o.valid and o.error_kind == "judge_rejected")


def rejected_detail(decision: Decision | Outcome) -> str | None:
    """Why the judge refused, for a dead letter's ``error`` and an alert's ``message``; else None.

    None unless the outcome is a review for "judge_rejected". The text is each refusing ordering's
    recorded detail, e.g. ``judge gpt-x@api.example.com rejected
    the request: HTTP 401: Incorrect API key provided: [REDACTED]``. Orderings refused alike (both
    orders, several jurors) give it once; different refusals are joined with " | " in ordering order,
    at most four. Never empty for a judge_rejected outcome: when no ordering carries a detail (an
    outcome built by hand), it says so.
    """
    outcome = _outcome(decision)
    if not isinstance(outcome, ReviewRequest) or outcome.reason != "judge_rejected":
        return None
    details: dict[str, None] = {}
    for ordering in rejected_orderings(outcome):
        detail = (ordering.error or "").strip()
        details.setdefault(detail or "the judge refused the request (no detail recorded)", None)
    if not details:
        return "the judge refused the request (no detail recorded)"
    shown = list(details)[:_MAX_DETAILS]
    more = len(details) - len(shown)
    return " | ".join(shown) + (f" | and {more} more" if more else "")


def rejected_status(decision: Decision | Outcome) -> int | None:
    """The HTTP status of the first refused call that had one (401, 403, 400, ...); None if none did.

    Lets the edge tell an authentication failure (401/403: every pair will fail alike) from a refusal
    of this pair's request (400: e.g. a prompt over the judge's context length). The status is the
    judge's own (``JudgeError.status``), carried by the decision's calls in the outcome's order; an
    outcome event on its own records only the text, so for one the answer is None.
    """
    if not isinstance(decision, Decision) or not is_judge_rejected(decision):
        return None
    for call in decision.calls:
        if call.error_kind == "judge_rejected" and call.status is not None:
            return call.status
    return None
