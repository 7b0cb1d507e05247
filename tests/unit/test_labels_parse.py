"""Reading label files (streams.audit.label_files): every line a label or a rejection with its reason and bytes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pairjudge.streams.audit.label_files import (
    MAX_LINE_BYTES,
    Accepted,
    LabelFileError,
    ParsedFile,
    Rejected,
    detect_format,
    parse_labels,
)
from pairjudge.streams.cli import app


def _label(pair_id: str = "p-1", winner: str = "cand-a", **extra: object) -> bytes:
    return json.dumps({"pair_id": pair_id, "winner": winner, "reviewer": "alice", **extra}).encode()


def _only(parsed: ParsedFile) -> Accepted | Rejected:
    assert len(parsed.items) == 1, parsed.items
    return parsed.items[0]


def _rejected(parsed: ParsedFile) -> Rejected:
    item = _only(parsed)
    assert isinstance(item, Rejected), item
    return item


# --- JSONL ------------------------------------------------------------------------------------


def test_jsonl_valid_labels_in_order_with_line_numbers() -> None:
    data = b"\n".join(
        [
            _label("p-1", "cand-a", rationale="clearer", labelled_at="2026-11-30T10:00:00Z", from_audit=True),
            b"",
            _label("p-2", "TIE"),
        ]
    )
    parsed = parse_labels(data, "jsonl")
    assert [(a.line, a.label.pair_id, a.label.winner) for a in parsed.labels] == [
        (1, "p-1", "cand-a"),
        (3, "p-2", "TIE"),
    ]
    first = parsed.labels[0].label
    assert first.from_audit is True
    assert first.rationale == "clearer"
    assert first.labelled_at == datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    assert parsed.rejected == []


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"pair_id": "p-1", "winner": "A"', "malformed_json"),  # bad JSON
        (b"[1, 2]", "malformed_json"),  # JSON, but not an object
        (b'{"pair_id": "p-1", "winner": "A"}', "missing_field"),  # no reviewer
        (_label(extra_field=1), "unknown_field"),  # extra="forbid"
        (_label(winner="not a candidate"), "invalid_field"),  # spaces: neither an id nor TIE
        (_label(from_audit="maybe"), "invalid_field"),
        (_label(rationale="x" * 5_001), "invalid_field"),  # over the contract's 5,000 characters
        (_label(schema_version=4), "unsupported_schema_version"),
        (b'{"pair_id": "p-\xff", "winner": "A", "reviewer": "r"}', "not_utf8"),
        (b"[" * 100 + b"]" * 100, "too_deep"),
        (b'{"pair_id": "p-1", "winner": "A", "reviewer": "r", "n": ' + b"9" * 200 + b"}", "number_too_large"),
    ],
)
def test_jsonl_every_malformed_kind_is_rejected_with_its_reason_and_bytes(line: bytes, reason: str) -> None:
    rejected = _rejected(parse_labels(line, "jsonl"))
    assert rejected.reason == reason
    assert rejected.raw == line  # the original bytes, exactly
    assert rejected.line == rejected.last_line == 1
    assert rejected.detail


def test_jsonl_an_oversized_line_is_rejected_unparsed() -> None:
    line = _label(rationale="x" * (MAX_LINE_BYTES + 10))
    rejected = _rejected(parse_labels(line, "jsonl"))
    assert rejected.reason == "oversized_line"
    assert rejected.raw == line
    assert str(MAX_LINE_BYTES) in rejected.detail


def test_jsonl_bom_crlf_and_blank_lines() -> None:
    data = b"\xef\xbb\xbf" + _label("p-1") + b"\r\n\r\n   \r\n" + _label("p-2") + b"\r\n" + b"{bad\r\n"
    parsed = parse_labels(data, "jsonl")
    assert [a.label.pair_id for a in parsed.labels] == ["p-1", "p-2"]
    bad = parsed.rejected
    assert [(r.line, r.reason, r.raw) for r in bad] == [(5, "malformed_json", b"{bad")]  # no \r, no BOM


def test_jsonl_a_bom_is_not_part_of_the_first_lines_bytes() -> None:
    rejected = _rejected(parse_labels(b"\xef\xbb\xbf{nope", "jsonl"))
    assert rejected.raw == b"{nope"


def test_duplicate_pair_ids_are_kept_and_counted() -> None:
    data = b"\n".join([_label("p-1", "cand-a"), _label("p-1", "cand-b"), _label("p-2"), _label("p-1", "TIE")])
    parsed = parse_labels(data, "jsonl")
    assert len(parsed.labels) == 4
    assert parsed.duplicate_pair_ids() == {"p-1": 3}


# --- CSV --------------------------------------------------------------------------------------

HEADER = b"pair_id,winner,reviewer,rationale,labelled_at,from_audit\r\n"


def test_csv_valid_rows_with_quoted_commas_quotes_and_newlines() -> None:
    data = (
        HEADER
        + b'p-1,cand-a,alice,"clearer, and shorter",2026-11-30T10:00:00+00:00,true\r\n'
        + b'p-2,TIE,bob,"she said ""fine""\nand left",,0\r\n'
        + b"p-3,cand-b,carol,,,\r\n"
    )
    parsed = parse_labels(data, "csv")
    assert parsed.rejected == []
    one, two, three = (a.label for a in parsed.labels)
    assert (one.rationale, one.from_audit, one.labelled_at) == (
        "clearer, and shorter",
        True,
        datetime(2026, 11, 30, 10, tzinfo=UTC),
    )
    assert (two.winner, two.rationale, two.from_audit) == ("TIE", 'she said "fine"\nand left', False)
    assert (three.rationale, three.from_audit) == ("", False)  # empty cells take the contract's defaults
    assert [a.line for a in parsed.labels] == [2, 3, 5]  # physical lines: the quoted newline counts


def test_csv_columns_in_any_order_and_only_the_required_ones() -> None:
    parsed = parse_labels(b"reviewer,pair_id,winner\nalice,p-1,cand-a\n", "csv")
    assert [(a.label.pair_id, a.label.reviewer, a.label.winner) for a in parsed.labels] == [("p-1", "alice", "cand-a")]


def test_csv_bom_crlf_and_blank_lines() -> None:
    data = b"\xef\xbb\xbf" + HEADER + b"\r\n" + b"p-1,cand-a,alice,,,\r\n" + b"\r\n\r\n" + b"p-2,cand-b,bob,,,"
    parsed = parse_labels(data, "csv")
    assert [(a.line, a.label.pair_id) for a in parsed.labels] == [(3, "p-1"), (6, "p-2")]
    assert parsed.rejected == []


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (b"p-1,cand-a", "wrong_field_count"),
        (b"p-1,cand-a,alice,,,,extra", "wrong_field_count"),
        (b'p-1,cand-a,alice,"closed"then-more,,', "bad_csv_row"),
        (b",cand-a,alice,,,", "missing_field"),  # an empty required cell is a missing field
        (b"p-1,,alice,,,", "missing_field"),
        (b"p 1,cand-a,alice,,,", "invalid_field"),  # not a pair id
        (b"p-1,cand-a,alice,,yesterday,", "invalid_field"),
        (b"p-1,cand-a,alice,,,yes", "invalid_field"),  # from_audit: true/false/1/0 only
        (b"p-1,cand-a,\xff\xfe,,,", "not_utf8"),
    ],
)
def test_csv_every_malformed_row_is_rejected_with_its_reason_and_bytes(row: bytes, reason: str) -> None:
    good = b"p-9,cand-b,bob,,,"
    parsed = parse_labels(HEADER + row + b"\r\n" + good + b"\r\n", "csv")
    rejected = [r for r in parsed.items if isinstance(r, Rejected)]
    assert [(r.reason, r.raw, r.line) for r in rejected] == [(reason, row, 2)]
    # The next row is read as usual: one bad row costs nothing else.
    assert [a.label.pair_id for a in parsed.labels] == ["p-9"]


def test_csv_rejections_are_keyed_by_a_readable_pair_id_only() -> None:
    parsed = parse_labels(HEADER + b"p-1,,alice,,,\r\np-2\r\n", "csv")
    assert [(r.reason, r.key) for r in parsed.rejected] == [("missing_field", b"p-1"), ("wrong_field_count", None)]


def test_csv_an_unclosed_quote_takes_the_rest_of_the_file_into_one_rejected_record() -> None:
    data = HEADER + b'p-1,cand-a,alice,"never closed,,\r\np-2,cand-b,bob,,,\r\n'
    parsed = parse_labels(data, "csv")
    rejected = _rejected(parsed)
    assert rejected.reason == "bad_csv_row"
    assert (rejected.line, rejected.last_line) == (2, 3)
    assert rejected.raw == b'p-1,cand-a,alice,"never closed,,\r\np-2,cand-b,bob,,,'
    assert "line 2 to line 3" in rejected.detail


def test_csv_an_oversized_record_is_rejected_and_reading_goes_on() -> None:
    huge = b"p-1,cand-a,alice," + b"x" * (MAX_LINE_BYTES + 1) + b",,"
    parsed = parse_labels(HEADER + huge + b"\r\np-2,cand-b,bob,,,\r\n", "csv")
    assert [(r.reason, r.raw) for r in parsed.rejected] == [("oversized_line", huge)]
    assert [a.label.pair_id for a in parsed.labels] == ["p-2"]


def test_csv_a_runaway_quoted_field_stops_at_the_bound_and_reading_resumes() -> None:
    filler = b"".join(b"line %d of a runaway field\r\n" % n for n in range(5_000))  # ~130 KB
    data = HEADER + b'p-1,cand-a,alice,"runaway\r\n' + filler
    parsed = parse_labels(data, "csv")
    # Bounded records, each dead-lettered, never one unbounded read of the whole file.
    assert parsed.labels == []
    assert {r.reason for r in parsed.rejected} <= {"oversized_line", "wrong_field_count", "bad_csv_row"}
    assert parsed.rejected[0].reason == "oversized_line"
    assert all(len(r.raw) <= MAX_LINE_BYTES + 100 for r in parsed.rejected)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "no header row"),
        (b"\r\n\r\n", "no header row"),
        (b"pair_id,winner\r\np-1,cand-a\r\n", "missing columns reviewer"),
        (b"pair_id,winner,reviewer,score\r\n", "unknown columns 'score'"),
        (b"pair_id,winner,reviewer,winner\r\n", "repeated columns winner"),
        (b"pair_id,winner,reviewer,schema_version\r\n", "unknown columns 'schema_version'"),
    ],
)
def test_csv_a_bad_header_rejects_the_whole_file(data: bytes, message: str) -> None:
    with pytest.raises(LabelFileError, match=message):
        parse_labels(data, "csv")


def test_format_from_the_extension_or_the_override() -> None:
    assert detect_format(Path("a.JSONL")) == "jsonl"
    assert detect_format(Path("a.ndjson")) == "jsonl"
    assert detect_format(Path("a.csv")) == "csv"
    assert detect_format(Path("a.txt"), "csv") == "csv"
    with pytest.raises(LabelFileError, match="--format"):
        detect_format(Path("a.txt"))


# --- the command, without a broker ----------------------------------------------------------------


def test_dry_run_counts_and_exits_1_on_bad_lines_unless_allowed(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_bytes(b"\n".join([_label("p-1"), _label("p-1"), b"{bad", _label(extra=1)]) + b"\n")
    runner = CliRunner()
    result = runner.invoke(app, ["labels", "import", str(path), "--dry-run"])
    assert result.exit_code == 1, result.output
    assert "dry run: 2 labels would be published" in result.output
    assert "2 lines would be dead-lettered" in result.output
    assert "line 3: malformed_json" in result.output
    assert "1 pair ids labelled more than once" in result.output
    allowed = runner.invoke(app, ["labels", "import", str(path), "--dry-run", "--allow-bad"])
    assert allowed.exit_code == 0, allowed.output


def test_dry_run_of_a_clean_file_exits_0(tmp_path: Path) -> None:
    path = tmp_path / "labels.txt"
    path.write_bytes(b"pair_id,winner,reviewer\np-1,cand-a,alice\n")
    result = CliRunner().invoke(app, ["labels", "import", str(path), "--format", "csv", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "0 lines would be dead-lettered" in result.output


@pytest.mark.parametrize("name", ["missing.jsonl", "a-directory.jsonl"])
def test_an_unreadable_file_is_exit_2(tmp_path: Path, name: str) -> None:
    (tmp_path / "a-directory.jsonl").mkdir()
    result = CliRunner().invoke(app, ["labels", "import", str(tmp_path / name), "--dry-run"])
    assert result.exit_code == 2, result.output
    assert "cannot read" in result.output


@pytest.mark.parametrize(
    ("name", "content", "args", "message"),
    [
        ("labels.txt", b"", [], "use --format"),
        ("labels.csv", b"pair_id,winner\n", [], "missing columns reviewer"),
        ("labels.csv", b"", ["--format", "xml"], "--format is jsonl or csv"),
    ],
)
def test_a_file_of_the_wrong_shape_is_exit_2(
    tmp_path: Path, name: str, content: bytes, args: list[str], message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    result = CliRunner().invoke(app, ["labels", "import", str(path), "--dry-run", *args])
    assert result.exit_code == 2, result.output
    # The console wraps long lines (a long temp path moves the breaks): compare the words.
    assert message in " ".join(result.output.split())
