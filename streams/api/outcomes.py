"""What ``compare`` answers: the event the worker would publish for a pair, wrapped in one typed union.

One wrapper per outcome kind (``schemas.outcomes`` declares the kinds, their events and when each happens);
``Outcome`` lists them, and everything else (``WRAPPERS``, the evaluator's dispatch, the results rows, the
package's exports) derives from that union.
Each wraps the worker's own event (``event``), so nothing is lost and the wire contracts stay the single
source of truth; the wrappers add what a caller usually wants first (``kind``, ``winner``, ``confidence``,
``reason``) and what led to it (the decoded ``pair``, the ``tiebreak_request`` when the tie-break stage
decided). ``TieBreakPending`` comes back only when ``tiebreak=False`` was asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal, get_args

from pairjudge.schemas import CandidatePair, DeadLetter, OrderingResult, PairVerdict, ReviewRequest, TieBreakRequest
from pairjudge.schemas.audit import DecisionRecord
from pairjudge.schemas.outcomes import DECIDED_EVENTS, OutcomeEvent, OutcomeKind, outcome_kind

__all__ = [
    "Failed",
    "Outcome",
    "Rejected",
    "Review",
    "TieBreakPending",
    "Verdict",
]


@dataclass(frozen=True, slots=True)
class _Decided:
    #: The input as the worker decoded it; None when it could not be decoded (a rejected input).
    pair: CandidatePair | None
    #: The primary stage's request when the tie-break stage made this outcome; None otherwise.
    tiebreak_request: TieBreakRequest | None
    #: The decision record the stage published with the outcome (None when it published none: an input that
    #: did not decode, an error): among others, how the audit sampled the pair.
    record: DecisionRecord | None = field(default=None, kw_only=True)

    @property
    def primary_orderings(self) -> tuple[OrderingResult, ...]:
        """The primary stage's orderings (AB then BA, per judge or juror), without the tie-break's."""
        if self.tiebreak_request is not None:
            return self.tiebreak_request.primary
        event = getattr(self, "event", None)
        return event.judged_orderings if isinstance(event, DECIDED_EVENTS) else ()

    @property
    def detail(self) -> str | None:
        """Why, readable, for an outcome that was not judged; None otherwise."""
        return None


@dataclass(frozen=True, slots=True)
class _Undecided(_Decided):
    """No winner and no confidence: nothing was decided (yet)."""

    @property
    def winner(self) -> None:
        return None

    @property
    def confidence(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class Verdict(_Decided):
    """Decided without a human: ``winner`` is a candidate id, or "TIE" for a pair settled by rule."""

    event: PairVerdict
    kind: Literal["verdict"] = "verdict"

    @property
    def pair_id(self) -> str:
        return self.event.pair_id

    @property
    def winner(self) -> str:
        return self.event.winner

    @property
    def confidence(self) -> float:
        return self.event.confidence

    @property
    def reason(self) -> str | None:
        """Why the tie-break was needed, for a verdict of the tie-break stage; None otherwise."""
        return self.event.tiebreak_reason


@dataclass(frozen=True, slots=True)
class TieBreakPending(_Undecided):
    """The primary stage could not decide; returned only when the tie-break stage was not to run."""

    event: TieBreakRequest
    kind: Literal["tiebreak"] = "tiebreak"

    @property
    def pair_id(self) -> str:
        return self.event.pair_id

    @property
    def reason(self) -> str:
        return self.event.reason


@dataclass(frozen=True, slots=True)
class Review(_Undecided):
    """A human must decide; ``reason`` says why (``ReviewReason`` in docs/reference/events.md)."""

    event: ReviewRequest
    kind: Literal["review"] = "review"

    @property
    def pair_id(self) -> str:
        return self.event.pair_id

    @property
    def reason(self) -> str:
        return self.event.reason


@dataclass(frozen=True, slots=True)
class _Lettered(_Undecided):
    """A dead letter: why, in ``reason`` (a code) and ``detail`` (readable), and the original bytes."""

    event: DeadLetter

    @property
    def pair_id(self) -> str | None:
        return self.event.pair_id

    @property
    def reason(self) -> str:
        return self.event.reason

    @property
    def detail(self) -> str:
        return self.event.error


@dataclass(frozen=True, slots=True)
class Rejected(_Lettered):
    """The input cannot be judged (malformed JSON, a schema error, an oversized output, an unknown rubric)."""

    kind: Literal["rejected"] = "rejected"


@dataclass(frozen=True, slots=True)
class Failed(_Lettered):
    """The input is fine but was not judged: the judge refused it (reason ``judge_rejected``, a 4xx no
    retry fixes) or an internal error (``internal_error``). The worker dead-letters these for replay."""

    kind: Literal["failed"] = "failed"


Outcome = Verdict | TieBreakPending | Review | Rejected | Failed

#: The wrapper of each outcome kind, from the ``Outcome`` union (checked against ``schemas.outcomes`` by the tests).
WRAPPERS: Final[Mapping[OutcomeKind, type[Outcome]]] = MappingProxyType(
    {cls.__dataclass_fields__["kind"].default: cls for cls in get_args(Outcome)}
)


def wrap(
    event: OutcomeEvent,
    pair: CandidatePair | None,
    request: TieBreakRequest | None,
    record: DecisionRecord | None = None,
) -> Outcome:
    """The outcome ``event`` is, wrapped: the wrapper of its kind (``WRAPPERS``), with the stage's ``record``."""
    wrapper: Any = WRAPPERS[outcome_kind(event)]  # each takes its own event type: the registry pairs them
    made: Outcome = wrapper(pair, request, event, record=record)
    return made
