"""What the edge does with a decision: its ``Disposition``, decided by the core when it builds the ``Decision``.

Three dispositions, and the edge (``streams.worker.pipeline``) reads nothing else to choose between them:

* ``Publish``: publish the outcome, its audit copy and its decision record;
* ``RetryLater``: the judge was down ("judge_unavailable"); judge the pair again once it is back. The outcome
  (a review "judge_unavailable") is what the edge publishes if it stops retrying;
* ``DeadLetterPair``: a judge refused the request ("judge_rejected": a 4xx such as a bad key, or a prompt over the
  context length). No retry and no reviewer fixes that, so the edge dead-letters the pair with this ``kind``,
  ``detail`` and HTTP ``status`` and raises an ``Alert``; ``pairjudge deadletter replay`` re-publishes it once
  the cause is fixed.

The failure comes typed from where the core found it (:func:`agents.truth_table.failure_reason` over the
orderings' ``error_kind``); the detail is each refusing ordering's recorded ``error`` (written by
:func:`agents.validation.ask_validated` from the judge's exception, whose message the HTTP judges have already
scrubbed of credentials) and the status the judge raised (``JudgeError.status``, kept in ``JudgeCall.status``):
nothing is read back out of an event's text.

Pure: no I/O, only the contracts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from pairjudge.agents.judge import JudgeCall
from pairjudge.agents.truth_table import FailureReason
from pairjudge.schemas.events import OrderingResult

__all__ = ["PUBLISH", "RETRY_LATER", "DeadLetterPair", "Disposition", "Publish", "RetryLater", "disposition"]

#: Distinct details kept in one dead letter's detail: a jury of many jurors refused alike says it once.
_MAX_DETAILS: Final = 4
_NO_DETAIL: Final = "the judge refused the request (no detail recorded)"


@dataclass(frozen=True, slots=True)
class Publish:
    """Publish the outcome, its audit copy when sampled, and its decision record."""


@dataclass(frozen=True, slots=True)
class RetryLater:
    """The judge was down: judge the pair again when it is back; publish the outcome only when giving up."""


@dataclass(frozen=True, slots=True)
class DeadLetterPair:
    """Dead-letter the pair and alert: a judge refused the request, which no retry and no reviewer fixes."""

    kind: Literal["judge_rejected"]
    #: The HTTP status of the first refused call that had one (401, 403, 400, ...); None if none did. Tells an
    #: authentication failure (every pair fails alike) from a refusal of this pair's request.
    status: int | None
    #: Why, for the dead letter's ``error`` and the alert: each refusing ordering's detail, e.g. ``judge
    #: gpt-x@api.example.com rejected the request: HTTP 401: Incorrect API key provided: [REDACTED]``. Orderings
    #: refused alike (both orders, several jurors) give it once; different ones are joined with " | ", at most four.
    detail: str


Disposition = Publish | RetryLater | DeadLetterPair
PUBLISH: Final = Publish()
RETRY_LATER: Final = RetryLater()


def disposition(
    failure: FailureReason | None, orderings: Sequence[OrderingResult], calls: Sequence[JudgeCall]
) -> Disposition:
    """The disposition of a decision whose stage failed with ``failure`` (None: it did not), from the outcome's
    ``orderings`` and the stage's ``calls`` in the same order."""
    if failure is None:
        return PUBLISH
    if failure == "judge_unavailable":
        return RETRY_LATER
    status = next((c.status for c in calls if c.error_kind == "judge_rejected" and c.status is not None), None)
    return DeadLetterPair("judge_rejected", status, _rejected_detail(orderings))


def _rejected_detail(orderings: Sequence[OrderingResult]) -> str:
    details: dict[str, None] = {}
    for ordering in orderings:
        if not ordering.valid and ordering.error_kind == "judge_rejected":
            details.setdefault((ordering.error or "").strip() or _NO_DETAIL, None)
    if not details:
        return _NO_DETAIL
    shown = list(details)[:_MAX_DETAILS]
    more = len(details) - len(shown)
    return " | ".join(shown) + (f" | and {more} more" if more else "")
