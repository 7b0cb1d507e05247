"""The outcome kinds are declared once (``schemas.outcomes``): every other list of them is derived or checked here."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, get_args, get_type_hints

import pytest

import pairjudge.api
import pairjudge.schemas
from pairjudge.agents import DecidedKind as CoreDecidedKind
from pairjudge.agents import OutcomeKind as CoreOutcomeKind
from pairjudge.agents.audit import sums, windows
from pairjudge.agents.audit.join import JoinEntry, on_record
from pairjudge.agents.audit.sums import WindowStats
from pairjudge.agents.audit.windows import SeriesWindow
from pairjudge.api import OutcomeKind
from pairjudge.schemas import DeadLetter, DecisionRecord
from pairjudge.schemas.audit import AuditObservation, AuditSnapshot
from pairjudge.schemas.export import EXPORTED
from pairjudge.schemas.kinds import STAGES
from pairjudge.schemas.outcomes import (
    DECIDED_EVENTS,
    OUTCOMES,
    DecidedKind,
    OutcomeEntry,
    OutcomeTopic,
    decided_kind,
    entry_for_topic,
    letter_kind,
    outcome_kind,
)
from pairjudge.streams.api.outcomes import WRAPPERS, wrap
from pairjudge.streams.api.results import result_for
from pairjudge.streams.cli.demo import _summary_row
from pairjudge.streams.cli.evaluate import EvaluateReport
from pairjudge.streams.kafka.topics import FINAL_KINDS, KINDS
from pairjudge.streams.worker.delivery import _is_outcome
from pairjudge.streams.worker.pipeline import Outgoing
from pairjudge_dev.docs_reference import expand, render_outcomes
from pairjudge_dev.workers import _final_of
from tests.unit.factories import make_pair
from tests.unit.test_audit import SERIES, record

ROOT = Path(__file__).resolve().parents[2]


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
    assert set(WRAPPERS) == set(OUTCOMES)
    for kind, wrapper in WRAPPERS.items():
        assert get_type_hints(wrapper)["event"] is OUTCOMES[kind].event, kind
        # Exported by name from the package, like every other part of the public API.
        assert getattr(pairjudge.api, wrapper.__name__) is wrapper
        assert wrapper.__name__ in pairjudge.api.__all__


def test_each_outcome_event_is_exported_as_a_contract() -> None:
    for entry in OUTCOMES.values():
        assert entry.event in EXPORTED, entry.kind
        assert getattr(pairjudge.schemas, entry.event.__name__) is entry.event
        assert entry.event.__name__ in pairjudge.schemas.__all__
    assert set(DECIDED_EVENTS) == {e.event for e in OUTCOMES.values() if e.decided}


def test_kinds_sharing_a_topic_agree_on_what_a_reader_of_the_topic_asks() -> None:
    for topic in {e.topic for e in OUTCOMES.values()}:
        sharing = [e for e in OUTCOMES.values() if e.topic == topic]
        asked = {(e.event, e.decided, e.settles_stage, e.label, e.count_label) for e in sharing}
        assert len(asked) == 1, topic
        assert entry_for_topic(topic) == sharing[0]
    # The topics where a pair's story ends (for now) are those the outcome collector waits on.
    assert {t for t in FINAL_KINDS if entry_for_topic(t)} == {
        e.topic for e in OUTCOMES.values() if e.ends_story or not e.settles_stage
    }


# --- what the flags mean ----------------------------------------------------------------------------

#: What each kind did before the flags existed (the code named the kinds: ``!= "tiebreak"`` in the join, the
#: scoreboard and the workers' helper, "not dead letters alone" in delivery, ``("rejected", "error")`` and
#: ``!= "verdict"`` in evaluate, the demo's summary words). A new kind is not pinned here: its flags are its own.
WAS: dict[str, tuple[bool, bool, bool, bool, str, str, str]] = {
    # ends_story, settles_stage, judged, escalated, row, label, count_label
    "verdict": (True, True, True, False, "verdict", "verdict", "verdicts"),
    "tiebreak": (False, True, True, True, "tiebreak", "tie-break", "tie-breaks"),
    # The demo's words for a review were "review" until issue 39 asked for plain words: "needs review".
    "review": (True, True, True, True, "review", "needs review", "needs review"),
    "rejected": (True, False, False, True, "rejected", "dead letter", "dead letters"),
    "failed": (True, False, False, True, "error", "dead letter", "dead letters"),
}


@pytest.mark.parametrize("kind", list(WAS))
def test_the_flags_keep_what_the_code_did_for_each_kind(kind: OutcomeKind) -> None:
    e = OUTCOMES[kind]
    assert (e.ends_story, e.settles_stage, e.judged, e.escalated, e.row, e.label, e.count_label) == WAS[kind]


def test_the_flags_hang_together() -> None:
    sources = {spec.source for spec in STAGES.values()}
    for kind, e in OUTCOMES.items():
        if e.topic in sources:  # a stage reads it: the pair's story goes on there
            assert not e.ends_story, kind
        if not e.decided:  # a dead letter: nothing was judged, and a replay must reach the judge
            assert not e.settles_stage, kind
            assert not e.judged, kind
    assert len({e.row for e in OUTCOMES.values()}) == len(OUTCOMES)  # a row names one kind


# --- the registry's flags are what the code does ---------------------------------------------------


def _event_of(entry: OutcomeEntry) -> object:
    """A real event of ``entry``'s kind, from a real decision where there is one."""
    pair = make_pair()
    if entry.event is DeadLetter:
        stage = "decode" if entry.kind == "rejected" else "judge"
        return DeadLetter(stage=stage, reason="x", error="why, readable", original=b"{}", pair_id=pair.pair_id)
    # Built without validation, with what a reader of any outcome may ask (a model keeps only its own fields).
    model: Any = entry.event
    made = model.model_construct(
        pair_id=pair.pair_id,
        pair=pair,
        reason="r",
        stage="primary",
        orderings=(),
        primary=(),
        detail="why, readable",
        winner=pair.candidates[0].candidate_id,
        confidence=0.9,
        decided_by="primary",
        winner_role=None,
        tiebreak_reason=None,
    )
    assert outcome_kind(made) == entry.kind
    return made


@pytest.mark.parametrize("kind", list(OUTCOMES))
def test_the_worker_records_exactly_the_outcomes_that_settle_their_stage(kind: OutcomeKind) -> None:
    entry = OUTCOMES[kind]
    outgoing = [Outgoing(entry.topic, b"p", b"v", []), Outgoing("decisions", b"p", b"v", [])]
    assert _is_outcome(outgoing if entry.decided else outgoing[:1]) is entry.settles_stage
    # What is not an outcome at all (a stage that writes pairs, such as the shadow stage of issue 37) is recorded.
    assert _is_outcome([Outgoing("pairs", b"p", b"v", [])])


@pytest.mark.parametrize("kind", [k for k, e in OUTCOMES.items() if e.decided])
def test_the_audit_join_counts_a_stage_and_ends_the_story_as_the_registry_says(kind: DecidedKind) -> None:
    entry = OUTCOMES[kind]
    joined, observations = on_record(JoinEntry(), record(outcome=kind, winner=None), now=1.0)
    assert len(observations) == 1  # every decision is counted in its window
    assert (joined.stages_counted == ("primary",)) is entry.settles_stage
    assert (joined.final is not None) is entry.ends_story
    assert (_final_of(record(outcome=kind, winner=None).model_dump_json().encode(), from_join=False) is not None) is (
        entry.ends_story
    )


@pytest.mark.parametrize("kind", list(OUTCOMES))
def test_evaluate_reads_judged_escalated_and_the_row_from_the_registry(kind: OutcomeKind) -> None:
    entry = OUTCOMES[kind]
    outcome = wrap(_event_of(entry), make_pair(), None)  # type: ignore[arg-type]
    assert outcome.kind == kind
    row = result_for(outcome, b"{}")
    assert row.outcome == entry.row
    assert row.detail == (None if entry.judged else outcome.detail)
    assert row.candidate_ids is not None
    row.human = row.candidate_ids[0]  # labelled: in the judge's score, and its escalated share
    report = EvaluateReport([row])
    assert report.failed is not entry.judged
    assert report.judge_score().escalated == (1.0 if entry.escalated else 0.0)


@pytest.mark.parametrize("kind", list(OUTCOMES))
def test_the_demo_names_each_outcome_by_its_label(kind: OutcomeKind) -> None:
    entry = OUTCOMES[kind]
    shown = _summary_row(entry.topic, {"reason": "r", "winner": "a", "confidence": 0.9, "decided_by": "primary"})
    assert shown[0] == entry.label


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


# --- the docs ----------------------------------------------------------------------------------------


def test_the_generated_outcomes_table_has_a_row_per_kind() -> None:
    page = render_outcomes()
    for kind, entry in OUTCOMES.items():
        assert f"| `{kind}` | `pairjudge.{entry.topic}` | [{entry.event.__name__}](" in page, kind


@pytest.mark.parametrize("page", ["README.md", "docs/index.md", "docs/design.md"])
def test_the_drawn_pipelines_show_every_outcome_topic(page: str) -> None:
    # The diagrams are drawn by hand (a picture, not a list): this is what keeps them whole. The site's front page
    # shows the README's.
    text = expand((ROOT / page).read_text())
    for topic in {e.topic for e in OUTCOMES.values()}:
        assert f"─► pairjudge.{topic}" in text, (page, topic)


def test_the_readme_outcome_table_has_every_outcome_topic() -> None:
    # The README's table says more than the registry (thresholds, what a person sees), so it is written, not
    # generated; the generated one is the events reference's.
    rows = [line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| **")]
    for topic in {e.topic for e in OUTCOMES.values()}:
        assert any(line.endswith(f"| `pairjudge.{topic}` |") for line in rows), topic


# --- the drift audit's counts ------------------------------------------------------------------------


def test_each_audit_count_is_a_snapshot_field_an_older_snapshot_may_lack() -> None:
    for kind, e in OUTCOMES.items():
        if e.audit_count is not None:
            assert e.decided, kind  # a dead letter leaves no record to count
            field = AuditSnapshot.model_fields[e.audit_count]
            assert (field.annotation, field.default) == (int, 0), kind


def test_a_kind_counted_by_its_entry_is_summed_merged_stored_and_published(monkeypatch: pytest.MonkeyPatch) -> None:
    # Today no kind is counted by its entry (the first kinds have their own sums): count reviews that way too, into
    # another int field of the snapshot (one no window sum fills without labels), beside the hand-written sum.
    registry = dict(OUTCOMES) | {"review": dataclasses.replace(OUTCOMES["review"], audit_count="human_decided")}
    monkeypatch.setattr(sums, "OUTCOMES", registry)
    monkeypatch.setattr(windows, "OUTCOMES", registry)
    stats, other = WindowStats(), WindowStats()
    stats.add(AuditObservation(kind="decision", series=SERIES, record=record(outcome="review", winner=None)))
    other.add(
        AuditObservation(kind="decision", series=SERIES, record=record(outcome="review", stage="tiebreak", winner=None))
    )
    stats.merge(WindowStats(**json.loads(json.dumps(other.as_json()))))  # as a delta carries it
    assert stats.outcome_counts == {"review": 2}
    assert stats.reviews == 2
    stored = WindowStats(**json.loads(json.dumps(stats.as_json())))
    window = SeriesWindow(series=SERIES, start=0.0, size=60.0, partition=0, stats=stored)
    snapshot = window.snapshot(final=True)
    assert (snapshot.human_decided, snapshot.reviews) == (2, 2)


def test_the_sums_json_is_unchanged_while_no_kind_is_counted_by_its_entry() -> None:
    stats = WindowStats()
    stats.add(AuditObservation(kind="decision", series=SERIES, record=record(outcome="review", winner=None)))
    assert "outcome_counts" not in stats.as_json()  # an older worker reads today's deltas and stored windows
