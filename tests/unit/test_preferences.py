"""The preference export's choice of rows (agents.preferences) and its files (streams.cli.export), without Kafka:
who decided, what is left out and why, the filters, the two styles, the state that keeps a rerun from writing a
pair twice, and ``datasets`` reading what was written."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import datasets
import pytest

from pairjudge.agents.preferences import COLUMNS, ExportFilters, PreferenceLedger, choose_style
from pairjudge.schemas.events import HumanLabel, JudgeInfo, PairVerdict, ReviewRequest, TieBreakRequest
from pairjudge.schemas.messages import FunctionCall, Message, ToolCall
from pairjudge.schemas.pair import TIE, Candidate, CandidatePair, CandidateSource, Task
from pairjudge.streams.cli.durable import drop_torn_tail
from pairjudge.streams.cli.export import append_rows, load_state, save_state, summary
from tests.unit.factories import FIRST_ID, FIRST_OUTPUT, SECOND_ID, SECOND_OUTPUT, make_pair

JUDGE = JudgeInfo(provider="openai", model="gpt-judge", version="2026-11", prompt_template_hash="abc123")
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def verdict(pair_id: str, winner: str = FIRST_ID, **overrides: Any) -> PairVerdict:
    loser = SECOND_ID if winner == FIRST_ID else FIRST_ID
    values: dict[str, Any] = {
        "pair_id": pair_id,
        "winner": winner,
        "winner_role": "champion" if winner == FIRST_ID else "challenger",
        "loser": loser,
        "confidence": 0.9,
        "decided_by": "primary",
        "consistent": True,
        "orderings": (),
        "justification": "clearer",
        "rubric_kind": "tone_style",
        "judge": JUDGE,
        "experiment_id": "exp-tone-42",
        "decided_at": T0,
    }
    if winner == TIE:
        values |= {"winner_role": None, "loser": None, "decided_by": "rule"}
    return PairVerdict(**(values | overrides))


def label(pair_id: str, winner: str, reviewer: str = "ana", minutes: int = 5, audit: bool = True) -> HumanLabel:
    return HumanLabel(
        pair_id=pair_id, winner=winner, reviewer=reviewer, from_audit=audit, labelled_at=T0 + timedelta(minutes=minutes)
    )


def review(pair: CandidatePair, audit: bool) -> ReviewRequest:
    return ReviewRequest(
        pair_id=pair.pair_id, reason="audit_sample" if audit else "tiebreak_no_signal", stage="primary", pair=pair,
        audit=audit, judge=JUDGE,
    )  # fmt: skip


def ledger_of(*pairs: CandidatePair) -> PreferenceLedger:
    ledger = PreferenceLedger()
    for pair in pairs:
        ledger.add_pair(pair)
    return ledger


def by_id(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["pair_id"]: row for row in rows}


def test_a_judge_verdict_is_a_row_with_its_provenance() -> None:
    ledger = ledger_of(make_pair(pair_id="p1"))
    ledger.add_verdict(verdict("p1", SECOND_ID, confidence=0.82))
    selection = ledger.select(ExportFilters(), style="plain")
    (row,) = selection.rows
    assert list(row) == list(COLUMNS)
    assert (row["prompt"], row["chosen"], row["rejected"]) == (
        "Tell the customer their refund was processed.",
        SECOND_OUTPUT,
        FIRST_OUTPUT,
    )
    assert row["chosen_source"] == {
        "model": "zeta-small-chat",
        "version": "2030-12-24",
        "prompt_version": "prompt-v18-chall",
        "role": "challenger",
    }
    assert row["rejected_source"]["model"] == "acme-frontier-xl"
    assert (row["judge_provider"], row["judge_model"], row["judge_version"]) == ("openai", "gpt-judge", "2026-11")
    assert (row["confidence"], row["orders_agreed"], row["decided_by"]) == (0.82, True, "judge")
    assert (row["human_label"], row["human_labels"], row["experiment"]) == (None, 0, "exp-tone-42")
    assert row["decided_at"] == T0.isoformat()


def test_a_label_overrides_the_judge_and_keeps_what_the_judge_said() -> None:
    pair = make_pair(pair_id="p1")
    ledger = ledger_of(pair)
    ledger.add_verdict(verdict("p1", FIRST_ID))
    ledger.add_review(review(pair, audit=True))
    assert ledger.select(ExportFilters()).rows == []  # drawn for a check: waits for its label
    ledger.add_label(label("p1", SECOND_ID))
    (row,) = ledger.select(ExportFilters()).rows
    assert (row["chosen_candidate"], row["judge_winner"], row["human_label"]) == (SECOND_ID, FIRST_ID, SECOND_ID)
    assert row["decided_by"] == "person"
    assert row["decided_at"] == (T0 + timedelta(minutes=5)).isoformat()


def test_ties_disagreements_and_undecided_pairs_are_left_out_and_counted() -> None:
    pairs = [make_pair(pair_id=f"p{i}") for i in range(7)]
    ledger = ledger_of(*pairs)
    ledger.add_verdict(verdict("p0", TIE))  # a rule's tie
    ledger.add_label(label("p1", TIE))  # people call it a tie
    ledger.add_label(label("p2", FIRST_ID, "ana"))
    ledger.add_label(label("p2", SECOND_ID, "bo"))  # people disagree
    ledger.add_review(review(pairs[3], audit=False))  # waiting for a person
    tiebreak = TieBreakRequest(
        pair_id="p4", reason="position_inconsistent", pair=pairs[4], primary=(), primary_judge=JUDGE
    )
    ledger.add_tiebreak(tiebreak)
    ledger.add_verdict(verdict("p5"))
    # A reviewer who changes their mind replaces their own label: no disagreement.
    ledger.add_label(label("p6", FIRST_ID, "ana", minutes=1))
    ledger.add_label(label("p6", SECOND_ID, "ana", minutes=2))
    selection = ledger.select(ExportFilters())
    assert sorted(by_id(selection.rows)) == ["p5", "p6"]
    assert by_id(selection.rows)["p6"]["chosen_candidate"] == SECOND_ID
    assert dict(selection.left_out) == {
        "a tie (identical or empty replies)": 1,
        "a tie (people)": 1,
        "people disagreed": 1,
    }
    assert dict(selection.waiting) == {
        "in the review queue, waiting for a person": 1,
        "at the tie-break, not decided yet": 1,
    }


def test_a_verdict_decided_moments_ago_waits_for_its_check_to_arrive() -> None:
    pair = make_pair(pair_id="p1")
    ledger = ledger_of(pair)
    ledger.add_verdict(verdict("p1"))
    recent = ExportFilters(settled_before=T0 - timedelta(seconds=60))
    assert ledger.select(recent).rows == []
    assert dict(ledger.select(recent).waiting) == {"decided moments ago (its check may be on the way)": 1}
    ledger.add_review(review(pair, audit=True))  # the check arrives: now it waits for the label
    assert dict(ledger.select(recent).waiting) == {"drawn for a person's check, waiting for the label": 1}
    assert [row["pair_id"] for row in ledger.select(ExportFilters(settled_before=T0)).rows] == []
    ledger.add_label(label("p1", SECOND_ID))
    assert [row["pair_id"] for row in ledger.select(recent).rows] == ["p1"]


def test_a_label_the_pair_carries_counts_once_judged_and_canaries_stay_out_unless_asked() -> None:
    from pairjudge.schemas.pair import KnownLabel, PairMetadata

    known = KnownLabel(winner=SECOND_ID)
    evaluation = make_pair(pair_id="eval", human_label=known, metadata=PairMetadata(traffic="offline"))
    canary = make_pair(pair_id="canary", human_label=known, metadata=PairMetadata(traffic="canary"))
    ledger = ledger_of(evaluation, canary)
    assert dict(ledger.select(ExportFilters()).waiting) == {"not decided yet": 2}  # not judged yet
    ledger.add_verdict(verdict("eval", FIRST_ID))
    ledger.add_verdict(verdict("canary", FIRST_ID))
    selection = ledger.select(ExportFilters())
    (row,) = selection.rows
    assert (row["pair_id"], row["chosen_candidate"], row["human_label"], row["judge_winner"]) == (
        "eval",
        SECOND_ID,
        SECOND_ID,
        FIRST_ID,
    )
    assert (row["decided_by"], row["human_labels"], row["decided_at"]) == ("person", 1, T0.isoformat())
    assert dict(selection.left_out) == {
        "a canary, the same known-answer pair sent again and again (--include-canaries)": 1
    }
    assert len(ledger.select(ExportFilters(include_canaries=True)).rows) == 2
    ledger.add_label(label("eval", FIRST_ID))  # a label on the topic wins over the one the pair carries
    assert ledger.select(ExportFilters()).rows[0]["chosen_candidate"] == FIRST_ID


def test_a_verdict_whose_pair_text_is_gone_is_counted() -> None:
    ledger = PreferenceLedger()
    ledger.add_verdict(verdict("gone"))
    selection = ledger.select(ExportFilters())
    assert selection.rows == []
    assert dict(selection.left_out) == {"the pair's text is no longer on the pairs topic": 1}


def _mixed_ledger() -> PreferenceLedger:
    """p0: judge, confident, both orders; p1: judge, unsure, orders apart (tie-break); p2: labelled after an audit
    draw; p3: review then labelled; p4: judge, a day later."""
    pairs = [make_pair(pair_id=f"p{i}") for i in range(5)]
    ledger = ledger_of(*pairs)
    ledger.add_verdict(verdict("p0", confidence=0.95))
    ledger.add_verdict(verdict("p1", confidence=0.6, consistent=False, decided_by="tiebreak"))
    ledger.add_verdict(verdict("p2", confidence=0.9))
    ledger.add_review(review(pairs[2], audit=True))
    ledger.add_label(label("p2", FIRST_ID))
    ledger.add_review(review(pairs[3], audit=False))
    ledger.add_label(label("p3", SECOND_ID, audit=False))
    ledger.add_verdict(verdict("p4", decided_at=T0 + timedelta(days=1)))
    return ledger


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (ExportFilters(), ["p0", "p1", "p2", "p3", "p4"]),
        (ExportFilters(people_only=True), ["p2", "p3"]),
        (ExportFilters(min_confidence=0.9), ["p0", "p2", "p4"]),
        (ExportFilters(orders_agreed=True), ["p0", "p2", "p4"]),
        (ExportFilters(exclude_review=True), ["p0", "p1", "p2", "p4"]),
        (ExportFilters(since=T0 + timedelta(hours=1)), ["p4"]),
        (ExportFilters(until=T0 + timedelta(hours=1)), ["p0", "p1", "p2", "p3"]),
    ],
)
def test_the_filters(filters: ExportFilters, expected: list[str]) -> None:
    selection = _mixed_ledger().select(filters)
    assert sorted(by_id(selection.rows)) == expected
    assert len(selection.rows) + sum(selection.left_out.values()) == 5


def test_the_people_only_export_is_exactly_the_labelled_pairs() -> None:
    rows = _mixed_ledger().select(ExportFilters(people_only=True)).rows
    assert {row["pair_id"]: (row["decided_by"], row["human_label"]) for row in rows} == {
        "p2": ("person", FIRST_ID),
        "p3": ("person", SECOND_ID),
    }
    assert by_id(rows)["p3"]["judge_winner"] is None
    assert by_id(rows)["p3"]["judge_model"] == "gpt-judge"


def _tool_pair() -> CandidatePair:
    call = ToolCall(id="call_1", function=FunctionCall(name="lookup_order", arguments='{"id": 7}'))
    base = make_pair()
    first, second = base.candidates
    return make_pair(
        pair_id="tools",
        schema_version=3,
        task=Task(
            context="You are a support agent.",
            messages=(
                Message(role="user", content="Where is order 7?"),
                Message(role="assistant", tool_calls=(call,)),
                Message(role="tool", tool_call_id="call_1", content='{"status": "shipped"}'),
            ),
        ),
        candidates=(
            first.model_copy(update={"output": "It shipped yesterday."}),
            second.model_copy(
                update={
                    "output": "",
                    "tool_calls": (ToolCall(id="call_2", function=FunctionCall(name="track", arguments="{}")),),
                }
            ),
        ),
    )


def _transcript_pair() -> CandidatePair:
    source = CandidateSource(model="m", role="candidate")
    return make_pair(
        pair_id="transcript",
        schema_version=2,
        task=Task(messages=(Message(role="user", content="Hi"), Message(role="user", content="And then?"))),
        candidates=(
            Candidate(candidate_id=FIRST_ID, output="Then this.", turns=("Hello!",), source=source),
            Candidate(candidate_id=SECOND_ID, output="Then that.", turns=("Hey.",), source=source),
        ),
    )


def test_conversations_are_written_as_chat_messages() -> None:
    ledger = ledger_of(make_pair(pair_id="plain"), _tool_pair(), _transcript_pair())
    for pair_id in ("plain", "tools", "transcript"):
        ledger.add_verdict(verdict(pair_id))
    assert choose_style(None, ledger) == "conversational"
    assert choose_style("plain", ledger) == "plain"  # a file keeps the style it started with
    rows = by_id(ledger.select(ExportFilters(), style="conversational").rows)
    assert rows["plain"]["prompt"] == [{"role": "user", "content": "Tell the customer their refund was processed."}]
    assert rows["plain"]["chosen"] == [{"role": "assistant", "content": FIRST_OUTPUT}]
    tools = rows["tools"]
    assert tools["prompt"] == [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": "Where is order 7?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "lookup_order", "arguments": '{"id": 7}'}}
            ],
        },
        {"role": "tool", "content": '{"status": "shipped"}', "tool_call_id": "call_1"},
    ]
    assert tools["chosen"] == [{"role": "assistant", "content": "It shipped yesterday."}]
    assert tools["rejected"] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "call_2", "type": "function", "function": {"name": "track", "arguments": "{}"}}],
        }
    ]
    transcript = rows["transcript"]
    assert transcript["prompt"] == [{"role": "user", "content": "Hi"}]
    assert transcript["chosen"] == [
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "And then?"},
        {"role": "assistant", "content": "Then this."},
    ]
    # A plain export cannot hold a conversation: left out and counted, never flattened.
    plain = ledger.select(ExportFilters(), style="plain")
    assert [row["pair_id"] for row in plain.rows] == ["plain"]
    assert plain.wrong_style == 2


def test_datasets_reads_the_export_with_the_documented_columns(tmp_path: Path) -> None:
    ledger = ledger_of(make_pair(pair_id="plain"), _tool_pair(), _transcript_pair(), make_pair(pair_id="labelled"))
    for pair_id in ("plain", "tools", "transcript", "labelled"):
        ledger.add_verdict(verdict(pair_id))
    ledger.add_label(label("labelled", SECOND_ID))
    out = tmp_path / "prefs.jsonl"
    append_rows(out, ledger.select(ExportFilters(), style="conversational").rows)
    assert out.stat().st_mode & 0o777 == 0o600
    data = datasets.load_dataset("json", data_files=str(out), split="train")
    assert data.column_names == list(COLUMNS)
    assert data.num_rows == 4
    first = data[0]
    assert first["pair_id"] == "labelled"
    assert first["decided_by"] == "person"
    assert first["human_label"] == SECOND_ID
    assert first["chosen"][0]["role"] == "assistant"
    assert data.filter(lambda row: row["human_label"] is not None)["pair_id"] == ["labelled"]
    people = tmp_path / "people.jsonl"
    append_rows(people, ledger.select(ExportFilters(people_only=True), style="plain").rows)
    plain = datasets.load_dataset("json", data_files=str(people), split="train")
    assert plain["pair_id"] == ["labelled"]
    assert plain["chosen"] == [SECOND_OUTPUT]


def test_a_rerun_writes_only_new_pairs_and_survives_a_lost_state(tmp_path: Path) -> None:
    out, state = tmp_path / "prefs.jsonl", tmp_path / "prefs.jsonl.state.json"
    pairs = [make_pair(pair_id=f"p{i}") for i in range(4)]
    ledger = ledger_of(*pairs[:2])
    ledger.add_verdict(verdict("p0"))
    ledger.add_review(review(pairs[1], audit=False))

    def run() -> int:
        style, written = load_state(state, out)
        chosen = choose_style(style, ledger)
        selection = ledger.select(ExportFilters(), written=written, style=chosen)
        append_rows(out, selection.rows)
        save_state(state, chosen, written | {row["pair_id"] for row in selection.rows})
        return len(selection.rows)

    assert run() == 1  # p0; p1 waits for a person
    # New events between the runs: p1 labelled, p2 and p3 judged; the whole history is read again.
    ledger.add_label(label("p1", SECOND_ID, audit=False))
    for pair in pairs[2:]:
        ledger.add_pair(pair)
        ledger.add_verdict(verdict(pair.pair_id))
    assert run() == 3
    assert run() == 0
    state.unlink()  # a run stopped after writing rows, before saving its state: the file itself remembers
    assert run() == 0
    ids = [json.loads(line)["pair_id"] for line in out.read_text().splitlines()]
    assert sorted(ids) == ["p0", "p1", "p2", "p3"]
    assert json.loads(state.read_text())["style"] == "plain"


def test_a_half_row_a_killed_run_left_is_cut_before_the_rerun_appends(tmp_path: Path) -> None:
    out, state = tmp_path / "prefs.jsonl", tmp_path / "prefs.jsonl.state.json"
    ledger = ledger_of(*(make_pair(pair_id=f"p{i}") for i in range(3)))
    for i in range(3):
        ledger.add_verdict(verdict(f"p{i}"))
    rows = ledger.select(ExportFilters(), written=set(), style="plain").rows
    whole = json.dumps(rows[0]) + "\n"
    # Killed inside the second row, then (another time) right before its newline: a whole JSON object that is
    # not yet a line. Neither pair counts as written; the file goes back to its last whole line.
    for torn in (json.dumps(rows[1])[:40], json.dumps(rows[1])):
        out.write_text(whole + torn)
        assert drop_torn_tail(out) == len(torn.encode())
        assert out.read_text() == whole
        assert load_state(state, out)[1] == {"p0"}
    assert drop_torn_tail(out) == 0
    assert drop_torn_tail(tmp_path / "missing.jsonl") == 0
    out.write_text("no newline at all")
    assert drop_torn_tail(out) == len("no newline at all")
    assert out.read_text() == ""


def test_the_guide_documents_every_column() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs/guides/preference-export.md").read_text()
    table = guide.split("## The columns", 1)[1].split("\n## ", 1)[0]
    documented = [line.split("`")[1] for line in table.splitlines() if line.startswith("| `")]
    assert documented == list(COLUMNS)


def test_the_summary_says_what_was_written_left_out_and_held_in_plain_words() -> None:
    selection = _mixed_ledger().select(ExportFilters(people_only=True), written=["p0"])
    text = summary(selection, Path("out/p.jsonl"), "plain", ledger_pairs=5, unreadable=1)
    assert text.splitlines() == [
        "wrote 2 new rows (plain) to out/p.jsonl; 1 pair written by earlier runs; 5 pairs read",
        "left out:",
        "  2 no person labelled it (--people-only)",
        "1 record on the topics could not be read as their topic's event: skipped",
    ]


def test_since_and_until_take_a_utc_offset(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pairjudge.streams.cli import app

    result = CliRunner().invoke(
        app, ["export", "preferences", "--out", str(tmp_path / "o.jsonl"), "--since", "2026-12-06T09:00:00+01:00",
              "--style", "plain", "--timeout", "0.1", "--bootstrap", "127.0.0.1:1"],
    )  # fmt: skip
    assert "Invalid value for '--since'" not in result.output
    assert result.exit_code != 2, result.output  # the options were taken; what failed was the absent broker
