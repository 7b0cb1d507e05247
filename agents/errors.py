"""The judging core's errors.

    PairjudgeError
    ├── InputRejected          the pair cannot be judged as given (dead-letter it)   retriable=False
    └── JudgeError             the judge could not give a usable answer
        ├── JudgeUnavailable   transport failure, timeout, 5xx/429 after retries    retriable=True
        ├── JudgeRejected      4xx other than 429: auth, bad request               retriable=False
        └── InvalidReply       the reply failed strict validation                   retriable=True

Adapters (HTTP judges) translate their libraries' exceptions into these at the boundary, so the core
and the stream edges decide on ``retriable`` instead of matching foreign exception types.
An invalid reply is never coerced into a verdict or a tie.
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
    """The judge failed to produce a usable answer."""


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
