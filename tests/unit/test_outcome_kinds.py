"""The outcome kinds are declared once (``schemas.outcomes``): every other list of them is derived or checked here."""

from __future__ import annotations

from typing import get_args

from pairjudge.agents import DecidedKind as CoreDecidedKind
from pairjudge.agents import OutcomeKind as CoreOutcomeKind
from pairjudge.api import Failed, OutcomeKind, Rejected, Review, TieBreakPending, Verdict
from pairjudge.schemas import DeadLetter, DecisionRecord
from pairjudge.schemas.outcomes import OUTCOMES, DecidedKind, OutcomeTopic, decided_kind, letter_kind
from pairjudge.streams.kafka.topics import KINDS
from tests.unit.factories import make_pair


def test_the_literals_are_the_registry() -> None:
    assert set(get_args(OutcomeKind)) == set(OUTCOMES)
    assert all(kind == entry.kind for kind, entry in OUTCOMES.items())
    assert set(get_args(DecidedKind)) == {k for k, e in OUTCOMES.items() if e.decided}
    assert set(get_args(OutcomeTopic)) == {e.topic for e in OUTCOMES.values()}
    assert set(get_args(OutcomeTopic)) <= set(KINDS)  # every outcome topic is created
    # The core, the API and the drift audit's record name the same kinds.
    assert (CoreOutcomeKind, CoreDecidedKind) == (OutcomeKind, DecidedKind)
    assert set(get_args(DecisionRecord.model_fields["outcome"].annotation)) == set(get_args(DecidedKind))


def test_the_apis_outcomes_are_one_per_kind() -> None:
    kinds = {cls.__dataclass_fields__["kind"].default for cls in (Verdict, TieBreakPending, Review, Rejected, Failed)}
    assert kinds == set(OUTCOMES)


def test_each_event_names_its_kind() -> None:
    for kind, entry in OUTCOMES.items():
        if entry.decided:
            assert decided_kind(_any_event(entry.event)) == kind  # type: ignore[arg-type]
    letter = DeadLetter(stage="decode", reason="malformed_json", error="x", original=b"{")
    assert letter_kind(letter) == "rejected"
    assert letter_kind(letter.model_copy(update={"stage": "judge"})) == "failed"


def _any_event(model: type[object]) -> object:
    """An instance of ``model`` made without validation: only its type is read."""
    return model.model_construct(pair=make_pair())  # type: ignore[attr-defined]
