"""The outcome kinds: every way a stage can end for a pair, and the topic each one is published to.

Declared once, here: the core's facts (``agents.facts``), the drift audit's ``DecisionRecord``, the worker's
routing (``streams.worker.pipeline``) and the Python API's ``Outcome`` (``streams.api``) all take their kinds,
topics and event models from this table. Adding an outcome kind means an entry here, its event contract, and
the handler that makes it.

    ========  ============  ====================  ==============================================================
    kind      topic kind    event                 when
    ========  ============  ====================  ==============================================================
    verdict   verdicts      ``PairVerdict``       decided: by the judge, the tie-break, or a rule
    tiebreak  tiebreak      ``TieBreakRequest``   the primary stage could not decide; the tie-break stage will
    review    review        ``ReviewRequest``     a human must decide (its reason says why)
    rejected  deadletter    ``DeadLetter``        the input cannot be judged (malformed, oversized, unknown rubric)
    failed    deadletter    ``DeadLetter``        the input is fine but was not judged (the judge refused it, a bug)
    ========  ============  ====================  ==============================================================

The first three are what a judged decision publishes (``DecidedKind``: the core's decisions and their
records); the last two are dead letters, told apart by the stage that wrote the letter (:func:`letter_kind`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

from pairjudge.schemas.events import DeadLetter, PairVerdict, ReviewRequest, TieBreakRequest

__all__ = [
    "OUTCOMES",
    "DecidedKind",
    "OutcomeEntry",
    "OutcomeEvent",
    "OutcomeKind",
    "OutcomeTopic",
    "decided_kind",
    "letter_kind",
]

OutcomeKind = Literal["verdict", "tiebreak", "review", "rejected", "failed"]
#: The kinds of a judged decision: an outcome event of its own (a subset of ``OutcomeKind``, checked against
#: ``OUTCOMES`` by the tests).
DecidedKind = Literal["verdict", "tiebreak", "review"]
#: The topic kinds an outcome goes to (a subset of the worker's topic kinds).
OutcomeTopic = Literal["verdicts", "tiebreak", "review", "deadletter"]
OutcomeEvent = PairVerdict | TieBreakRequest | ReviewRequest | DeadLetter


@dataclass(frozen=True, slots=True)
class OutcomeEntry:
    kind: OutcomeKind
    topic: OutcomeTopic
    event: type[OutcomeEvent]
    #: A judged decision's outcome (``DecidedKind``), rather than a dead letter.
    decided: bool


OUTCOMES: Final[Mapping[OutcomeKind, OutcomeEntry]] = MappingProxyType(
    {
        "verdict": OutcomeEntry("verdict", "verdicts", PairVerdict, decided=True),
        "tiebreak": OutcomeEntry("tiebreak", "tiebreak", TieBreakRequest, decided=True),
        "review": OutcomeEntry("review", "review", ReviewRequest, decided=True),
        "rejected": OutcomeEntry("rejected", "deadletter", DeadLetter, decided=False),
        "failed": OutcomeEntry("failed", "deadletter", DeadLetter, decided=False),
    }
)


def decided_kind(event: PairVerdict | TieBreakRequest | ReviewRequest) -> DecidedKind:
    """The kind of a judged decision's outcome event."""
    if isinstance(event, PairVerdict):
        return "verdict"
    if isinstance(event, TieBreakRequest):
        return "tiebreak"
    return "review"


def letter_kind(letter: DeadLetter) -> Literal["rejected", "failed"]:
    """A dead letter's kind: "rejected" when the input itself could not be judged (it failed to decode or
    validate), "failed" when it was fine but was not judged (the judge refused it, an internal error)."""
    return "rejected" if letter.stage in ("decode", "validate") else "failed"
