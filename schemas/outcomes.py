"""The outcome kinds: every way a stage can end for a pair, the topic each one is published to, and what it means
for everything downstream.

Declared once, here: the core's facts (``agents.facts``), the drift audit's ``DecisionRecord`` and its label join,
the scoreboard, the worker's routing and its outcome table (``streams.worker``), the Python API's ``Outcome``
(``streams.api``), ``pairjudge evaluate``'s rows and exit code, the demo's summary, the JSON Schema export and the
generated outcomes table of the events reference (``pairjudge_dev.docs_reference``) all take their kinds, topics,
event models and flags from this table, and ask it rather than naming a kind. Adding an outcome kind means an
entry here (and its member in the Literals beside it), its event contract (``schemas.events``, with the
decided-outcome properties if it is a judged decision's), its topic kind (``schemas.kinds``), and the handler
that makes it; ``tests/unit/test_outcome_kinds.py`` checks the rest.

The first three kinds are what a judged decision publishes (``DecidedKind``: the core's decisions and their
records); the last two are dead letters, told apart by the stage that wrote the letter (:func:`letter_kind`).
The events reference renders the table (its "Outcomes" section) with each entry's ``when``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal, cast

from pairjudge.schemas.events import DeadLetter, PairVerdict, ReviewRequest, TieBreakRequest

__all__ = [
    "DECIDED_EVENTS",
    "OUTCOMES",
    "DecidedEvent",
    "DecidedKind",
    "OutcomeEntry",
    "OutcomeEvent",
    "OutcomeKind",
    "OutcomeTopic",
    "decided_kind",
    "entry_for_row",
    "entry_for_topic",
    "letter_kind",
    "outcome_kind",
    "unsettling_topics",
]

OutcomeKind = Literal["verdict", "tiebreak", "review", "rejected", "failed"]
#: The kinds of a judged decision: an outcome event of its own (a subset of ``OutcomeKind``, checked against
#: ``OUTCOMES`` by the tests).
DecidedKind = Literal["verdict", "tiebreak", "review"]
#: The topic kinds an outcome goes to (a subset of the worker's topic kinds).
OutcomeTopic = Literal["verdicts", "tiebreak", "review", "deadletter"]
#: What a stage's judged decision publishes (the core's ``Outcome``). Every member answers the decided-outcome
#: properties ``judged_orderings``, ``decider`` and ``outcome_reason`` (``schemas.events``), so the core's facts and
#: records read them without asking which event it is; mypy checks each member has them.
DecidedEvent = PairVerdict | TieBreakRequest | ReviewRequest
OutcomeEvent = DecidedEvent | DeadLetter


@dataclass(frozen=True, slots=True)
class OutcomeEntry:
    """One outcome kind, and what the rest of the system does with it."""

    kind: OutcomeKind
    topic: OutcomeTopic
    event: type[OutcomeEvent]
    #: A judged decision's outcome (``DecidedKind``): the core makes it and the drift audit records it, rather
    #: than a dead letter.
    decided: bool
    #: Where the pair's story ends: the audit join's final record (joined with a person's label), the scoreboard's
    #: outcome. False for a way-station (the tie-break request: the tie-break stage decides next).
    ends_story: bool
    #: The stage is done with the pair: the worker keeps it in its outcome table (a redelivered pair gets the same
    #: answer, unjudged) and the audit join counts the stage once. False for a dead letter: kept, it would answer
    #: every ``pairjudge deadletter replay`` of the pair, and the fixed judge would never be asked.
    settles_stage: bool
    #: The pair was judged (``pairjudge evaluate``): when not, the command lists it and exits non-zero.
    judged: bool
    #: The judge handed the pair on without an automatic verdict: counted in evaluate's "escalated" share.
    escalated: bool
    #: Its ``outcome`` in a results row (``pairjudge evaluate --out``): the names the rows always had.
    row: str
    #: One of them in plain words (the demo's summary table), and how a count of them reads.
    label: str
    count_label: str
    #: When it happens (the events reference's outcomes table).
    when: str
    #: The drift audit's ``AuditSnapshot`` field that counts it (at either stage), for a kind the window sums count
    #: by its entry (``WindowStats.outcome_counts``). None for the first kinds, which the sums count by hand
    #: (verdicts per stage, tie-breaks, reviews: their sums are the audit's wire format, ``AuditDelta.stats``),
    #: and for dead letters, which leave no decision record.
    audit_count: str | None = None


OUTCOMES: Final[Mapping[OutcomeKind, OutcomeEntry]] = MappingProxyType(
    {
        "verdict": OutcomeEntry(
            "verdict",
            "verdicts",
            PairVerdict,
            decided=True,
            ends_story=True,
            settles_stage=True,
            judged=True,
            escalated=False,
            row="verdict",
            label="verdict",
            count_label="verdicts",
            when=(
                "decided without a person: by the judge (both orders agree, confidently enough), by the tie-break, "
                "or by a rule (an empty output loses, identical outputs tie); `winner` is a candidate id or `TIE`"
            ),
        ),
        "tiebreak": OutcomeEntry(
            "tiebreak",
            "tiebreak",
            TieBreakRequest,
            decided=True,
            ends_story=False,
            settles_stage=True,
            judged=True,
            escalated=True,
            row="tiebreak",
            label="tie-break",
            count_label="tie-breaks",
            when=(
                "the primary stage could not decide (the orders flip, either calls a tie, or the confidence is too "
                "low): the tie-break stage decides next. The Python API returns it only with `tiebreak=False`"
            ),
        ),
        "review": OutcomeEntry(
            "review",
            "review",
            ReviewRequest,
            decided=True,
            ends_story=True,
            settles_stage=True,
            judged=True,
            escalated=True,
            row="review",
            label="needs review",
            count_label="needs review",
            when=(
                "a person must decide; `reason` says why (an ordering stays invalid, the tie-break cannot settle it, "
                "an output tries to steer the judge, the kappa guard holds, an audit sample, ...)"
            ),
        ),
        "rejected": OutcomeEntry(
            "rejected",
            "deadletter",
            DeadLetter,
            decided=False,
            ends_story=True,
            settles_stage=False,
            judged=False,
            escalated=True,
            row="rejected",
            label="dead letter",
            count_label="dead letters",
            when=(
                "the input cannot be judged (malformed, oversized, unknown rubric or schema version): a dead letter "
                "with its `reason` (a code), readable `detail` and original bytes"
            ),
        ),
        "failed": OutcomeEntry(
            "failed",
            "deadletter",
            DeadLetter,
            decided=False,
            ends_story=True,
            settles_stage=False,
            judged=False,
            escalated=True,
            row="error",
            label="dead letter",
            count_label="dead letters",
            when=(
                "the input is fine but was not judged: the judge refused the request (`judge_rejected`, a 4xx) or "
                "an internal error; a dead letter, for `pairjudge deadletter replay` once fixed"
            ),
        ),
    }
)

#: The events of judged decisions, for an ``isinstance`` check.
# The decided entries' events and kinds are DecidedEvent's and DecidedKind's (the tests check the Literals and
# unions against the table), which the entry's own types cannot say.
DECIDED_EVENTS: Final = cast(
    tuple[type[DecidedEvent], ...], tuple(dict.fromkeys(e.event for e in OUTCOMES.values() if e.decided))
)
_DECIDED_BY_EVENT: Final = cast(
    Mapping[type[DecidedEvent], DecidedKind],
    MappingProxyType({e.event: e.kind for e in OUTCOMES.values() if e.decided}),
)


def decided_kind(event: DecidedEvent) -> DecidedKind:
    """The kind of a judged decision's outcome event."""
    return _DECIDED_BY_EVENT[type(event)]


def letter_kind(letter: DeadLetter) -> Literal["rejected", "failed"]:
    """A dead letter's kind: "rejected" when the input itself could not be judged (it failed to decode or
    validate), "failed" when it was fine but was not judged (the judge refused it, an internal error)."""
    return "rejected" if letter.stage in ("decode", "validate") else "failed"


def outcome_kind(event: OutcomeEvent) -> OutcomeKind:
    """The kind of any outcome event: a judged decision's, or a dead letter's."""
    return letter_kind(event) if isinstance(event, DeadLetter) else decided_kind(event)


def entry_for_topic(topic: str) -> OutcomeEntry | None:
    """The (first) outcome kind published to topic kind ``topic``; None for a topic that carries no outcome.
    Kinds that share a topic (the dead letters) agree on everything a reader of the topic asks (tested)."""
    return next((e for e in OUTCOMES.values() if e.topic == topic), None)


def entry_for_row(row: str) -> OutcomeEntry | None:
    """The outcome kind of a results row's ``outcome``; None for a value no kind writes."""
    return next((e for e in OUTCOMES.values() if e.row == row), None)


def unsettling_topics() -> frozenset[str]:
    """The topic kinds whose outcome leaves its stage unsettled (``OutcomeEntry.settles_stage`` false: the dead
    letters): what the worker does not record. Kinds sharing a topic agree on it (tested)."""
    return frozenset(e.topic for e in OUTCOMES.values() if not e.settles_stage)
