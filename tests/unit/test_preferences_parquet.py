"""The preference export as Parquet (streams.cli.parquet_rows): one part file per run with one fixed schema, so
``datasets`` reads runs whose rows differ (no tool call in one, a person's label only in the next) as one table;
a rerun adds only new pairs, and a lost state is rebuilt from the part files."""

from __future__ import annotations

from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest

from pairjudge.agents.preferences import COLUMNS, ExportFilters, PreferenceLedger, Style, choose_style
from pairjudge.schemas.pair import CandidatePair
from pairjudge.streams.cli.export import load_state, save_state
from pairjudge.streams.cli.parquet_rows import PART_GLOB, schema, write_part, written_in
from tests.unit.factories import FIRST_ID, SECOND_ID, SECOND_OUTPUT, make_pair
from tests.unit.test_preferences import _tool_pair, label, ledger_of, verdict


def _run(ledger: PreferenceLedger, out: Path, state: Path, style: Style | None = None) -> int:
    kept, written = load_state(state, out, parquet=True)
    chosen = choose_style(kept, ledger, style or "auto")
    selection = ledger.select(ExportFilters(), written=written, style=chosen)
    write_part(out, selection.rows, chosen)
    save_state(state, chosen, written | {row["pair_id"] for row in selection.rows})
    return len(selection.rows)


@pytest.mark.parametrize("style", ["plain", "conversational"])
def test_runs_with_different_rows_read_back_as_one_table(tmp_path: Path, style: Style) -> None:
    out, state = tmp_path / "prefs.parquet", tmp_path / "prefs.parquet.state.json"
    first = [make_pair(pair_id=f"p{i}") for i in range(2)]
    ledger = ledger_of(*first)
    for pair in first:
        ledger.add_verdict(verdict(pair.pair_id))
    assert _run(ledger, out, state, style) == 2  # no label, no tool call: all-null columns in this part
    later: list[CandidatePair] = [make_pair(pair_id="p2")]
    if style == "conversational":
        later.append(_tool_pair())
    for pair in later:
        ledger.add_pair(pair)
        ledger.add_verdict(verdict(pair.pair_id))
    ledger.add_label(label("p2", SECOND_ID))
    assert _run(ledger, out, state) == len(later)
    assert _run(ledger, out, state) == 0  # nothing new: no empty part file either
    parts = sorted(out.glob(PART_GLOB))
    assert len(parts) == 2
    assert all(pq.read_schema(part).equals(schema(style)) for part in parts)
    assert {part.stat().st_mode & 0o777 for part in parts} == {0o600}
    data = datasets.load_dataset("parquet", data_files=str(out / PART_GLOB), split="train")
    assert data.column_names == list(COLUMNS)
    rows = {row["pair_id"]: row for row in data}
    assert sorted(rows) == sorted(["p0", "p1", *(p.pair_id for p in later)])
    assert (rows["p2"]["decided_by"], rows["p2"]["human_label"], rows["p2"]["human_labels"]) == ("person", SECOND_ID, 1)
    assert rows["p0"]["human_label"] is None
    assert rows["p0"]["chosen_source"]["role"] == "champion"
    if style == "plain":
        assert rows["p2"]["chosen"] == SECOND_OUTPUT
    else:
        assert rows["p2"]["chosen"][0]["content"] == SECOND_OUTPUT
        call = rows["tools"]["prompt"][2]["tool_calls"][0]
        assert (call["id"], call["function"]["name"]) == ("call_1", "lookup_order")


def test_a_lost_state_is_rebuilt_from_the_part_files(tmp_path: Path) -> None:
    out, state = tmp_path / "prefs.parquet", tmp_path / "prefs.parquet.state.json"
    ledger = ledger_of(make_pair(pair_id="p0"))
    ledger.add_verdict(verdict("p0", winner=FIRST_ID))
    assert _run(ledger, out, state) == 1
    state.unlink()  # stopped after the part file was renamed into place, before the state was saved
    assert written_in(out) == ("plain", {"p0"})
    assert _run(ledger, out, state) == 0
    assert len(list(out.glob(PART_GLOB))) == 1


def test_a_file_where_the_directory_should_be_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "prefs.parquet"
    out.write_text("not a directory")
    with pytest.raises(ValueError, match="directory of part files"):
        load_state(tmp_path / "state.json", out, parquet=True)
    jsonl_dir = tmp_path / "prefs.jsonl"
    jsonl_dir.mkdir()
    with pytest.raises(ValueError, match="--format parquet"):
        load_state(tmp_path / "state.json", jsonl_dir)


def test_without_pyarrow_the_error_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pairjudge.streams.cli.parquet_rows import ParquetUnavailable

    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)
    with pytest.raises(ParquetUnavailable, match=r"pairjudge-stream\[parquet\]"):
        written_in(tmp_path / "prefs.parquet")
