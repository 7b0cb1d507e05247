"""The judging core's errors.

    PairjudgeError
    ├── InputRejected          the pair cannot be judged as given (dead-letter it)   retriable=False
    └── JudgeError             the judge could not give a usable answer             retriable=True
        ├── JudgeUnavailable   transport failure, timeout, 5xx/429 after retries    retriable=True
        ├── JudgeRejected      4xx other than 429: auth, bad request               retriable=False
        └── InvalidReply       the reply failed strict validation                   retriable=True

Adapters (HTTP judges) translate their libraries' exceptions into these at the boundary, so the core
and the stream edges decide on ``retriable`` instead of matching foreign exception types.
An invalid reply is never coerced into a verdict or a tie.

``retriable`` says whether asking again can help. The core reads it once, where a failed ask is
recorded (``agents.validation``): a retriable failure is "judge_unavailable" (the edge judges the pair
again later), any other "judge_rejected" (the edge dead-letters the pair and alerts). An invalid reply
is retriable at once, by a re-ask that carries the validation error. A judge failure of no known kind
counts as retriable, as an outage: only a judge's explicit refusal stops the retries.

A judge that got an answer says so in ``status``, the HTTP status (401, 400, 503, ...), as a field:
it travels with the recorded call (``JudgeCall.status``) and is never read back out of the message.
"""

from __future__ import annotations


class PairjudgeError(Exception):
    retriable: bool = False


class InputRejected(PairjudgeError):
    """The pair is malformed, incomplete or oversized. ``reason`` is a short machine-readable code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class JudgeError(PairjudgeError):
    """The judge failed to produce a usable answer. ``status`` is the HTTP status it answered with, if any."""

    retriable = True

    def __init__(self, *args: object, status: int | None = None) -> None:
        super().__init__(*args)
        self.status = status


class JudgeUnavailable(JudgeError):
    retriable = True


class JudgeRejected(JudgeError):
    retriable = False


class InvalidReply(JudgeError):
    """The reply text did not validate. ``raw`` keeps what the judge said, for the audit trail."""

    retriable = True

    def __init__(self, message: str, raw: str) -> None:
        super().__init__(message)
        self.raw = raw
