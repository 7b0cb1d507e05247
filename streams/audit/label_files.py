"""Reading human-label files (JSONL or CSV) into ``HumanLabel`` events, line by line, never dropping one.

``pairjudge labels import`` reads exports from annotation tools. Each line (a CSV record, which may span
lines when a quoted field holds a newline) becomes either an accepted ``HumanLabel`` or a rejection with
a reason code, a readable detail and the line's original bytes, ready for the dead-letter topic. Nothing
here talks to Kafka (``streams.audit.label_import`` publishes), so all of it is tested as pure logic.

JSON goes through the one codec (``streams.kafka.codecs.decode``), so a label file and the labels topic give
the same reason codes for the same fault. A CSV row is turned into the same JSON object first, for the
same reason.

Reason codes, besides the codec's (``malformed_json``, ``not_utf8``, ``too_deep``, ``number_too_large``,
``missing_field``, ``unknown_field``, ``invalid_field``, ``unsupported_schema_version``):

- ``oversized_line``: a line (a CSV record) longer than ``MAX_LINE_BYTES``;
- ``bad_csv_row``: a record the CSV reader refuses (a stray or unbalanced quote);
- ``wrong_field_count``: a CSV record with more or fewer fields than the header.

Problems with the file as a whole (no CSV header, an unknown or missing column) raise ``LabelFileError``:
every row would fail the same way, so nothing is published and the user fixes the file.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from pairjudge.agents.errors import InputRejected
from pairjudge.schemas import HumanLabel
from pairjudge.streams.kafka.codecs import decode

LabelFormat = Literal["jsonl", "csv"]

#: Longest line (CSV record) read. A valid label is far smaller: its longest field, the rationale, is at
#: most 5,000 characters, 30,000 bytes even if every one is a JSON ``\\u`` escape. Anything larger is not a
#: label, and bounding it keeps one runaway quoted CSV field from swallowing the rest of a file unseen.
MAX_LINE_BYTES: Final = 64 * 1024
#: CSV columns: the first three required, the rest optional. An empty cell counts as absent.
REQUIRED_COLUMNS: Final = ("pair_id", "winner", "reviewer")
OPTIONAL_COLUMNS: Final = ("rationale", "labelled_at", "from_audit")
#: Extensions that decide the format when ``--format`` is not given.
EXTENSIONS: Final[dict[str, LabelFormat]] = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}

_BOM: Final = b"\xef\xbb\xbf"
_PAIR_ID: Final = re.compile(r"^[A-Za-z0-9_.:\-]{1,128}$")
_TRUE: Final = frozenset({"true", "1"})
_FALSE: Final = frozenset({"false", "0"})


class LabelFileError(ValueError):
    """The file as a whole cannot be read as labels (its format, its header). Nothing is published."""


@dataclass(frozen=True, slots=True)
class Accepted:
    line: int
    label: HumanLabel


@dataclass(frozen=True, slots=True)
class Rejected:
    """A line that is not a valid label. ``raw`` is its bytes as in the file, without the line ending."""

    line: int
    last_line: int
    raw: bytes
    reason: str
    detail: str
    #: The pair id to key the dead letter by, when it could be read reliably (a CSV cell); JSON lines
    #: are keyed by ``streams.kafka.dead_letters``'s own reading of ``pair_id``.
    key: bytes | None = None

    @property
    def where(self) -> str:
        return f"line {self.line}" if self.last_line == self.line else f"lines {self.line}-{self.last_line}"


@dataclass(slots=True)
class ParsedFile:
    """Every non-blank line of a label file, in file order, accepted or rejected."""

    items: list[Accepted | Rejected] = field(default_factory=list)

    @property
    def labels(self) -> list[Accepted]:
        return [item for item in self.items if isinstance(item, Accepted)]

    @property
    def rejected(self) -> list[Rejected]:
        return [item for item in self.items if isinstance(item, Rejected)]

    def duplicate_pair_ids(self) -> dict[str, int]:
        """Pair ids with more than one valid label in this file, and how many each has. All are kept:
        Kafka is a log, and the consumer that joins labels to verdicts decides what a repeat means."""
        counts = Counter(item.label.pair_id for item in self.labels)
        return {pair_id: n for pair_id, n in counts.items() if n > 1}


def detect_format(path: Path, override: LabelFormat | None = None) -> LabelFormat:
    if override is not None:
        return override
    found = EXTENSIONS.get(path.suffix.lower())
    if found is None:
        known = ", ".join(EXTENSIONS)
        raise LabelFileError(f"cannot tell the format of {path.name} from its extension ({known}); use --format")
    return found


def parse_labels(data: bytes, fmt: LabelFormat, *, max_line_bytes: int = MAX_LINE_BYTES) -> ParsedFile:
    # A UTF-8 byte-order mark (Excel and many Windows tools write one) belongs to the file, not to its
    # first line: it is dropped, and the first line's original bytes are kept without it.
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    if fmt == "jsonl":
        return parse_jsonl(data, max_line_bytes=max_line_bytes)
    return parse_csv(data, max_line_bytes=max_line_bytes)


def parse_jsonl(data: bytes, *, max_line_bytes: int = MAX_LINE_BYTES) -> ParsedFile:
    """One ``HumanLabel`` object per line. Blank lines are skipped; ``\\r\\n`` endings are accepted."""
    parsed = ParsedFile()
    # Split on \n only: a lone \r is JSON whitespace and may legitimately sit inside a line.
    for n, line in enumerate(data.split(b"\n"), start=1):
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line.strip():
            continue
        if len(line) > max_line_bytes:
            parsed.items.append(_oversized(n, n, line, max_line_bytes))
            continue
        try:
            parsed.items.append(Accepted(n, decode(HumanLabel, line, max_bytes=max_line_bytes)))
        except InputRejected as exc:
            parsed.items.append(Rejected(n, n, line, exc.reason, exc.detail))
    return parsed


def parse_csv(data: bytes, *, max_line_bytes: int = MAX_LINE_BYTES) -> ParsedFile:
    """A header row naming the columns, then one label per record (RFC 4180 quoting; UTF-8)."""
    lines = data.splitlines(keepends=True)
    parsed = ParsedFile()
    header: list[str] | None = None
    pos = 0
    while pos < len(lines):
        feed = _LineFeed(lines, pos, max_line_bytes)
        # strict: text after a closing quote is an error, not silently glued onto the field. (A quote
        # inside an unquoted field stays a literal character, as spreadsheets read it.)
        reader = csv.reader(feed, strict=True)
        try:
            for row in reader:
                start, end, bad_utf8 = feed.take_record()
                raw = _strip_ending(b"".join(lines[start:end]))
                if not raw.strip():
                    continue
                if header is None:
                    header = _read_header(row, bad_utf8)
                    continue
                parsed.items.append(_row_to_item(header, row, raw, (start + 1, end), bad_utf8, max_line_bytes))
            break
        except _TooLong:
            start, end, _ = feed.take_record()
            if header is None:
                raise LabelFileError(f"the CSV header is longer than {max_line_bytes} bytes") from None
            parsed.items.append(_oversized(start + 1, end, _strip_ending(b"".join(lines[start:end])), max_line_bytes))
            pos = end
        except csv.Error as exc:
            start, end, _ = feed.take_record()
            if header is None:
                raise LabelFileError(f"the CSV header is not valid CSV: {exc}") from None
            raw = _strip_ending(b"".join(lines[start:end]))
            detail = f"not a valid CSV record: {exc}"
            if end > start + 1:
                # A quote left open makes the reader take every following line into the record.
                detail += f" (the record runs from line {start + 1} to line {end}: is a quote left open?)"
            parsed.items.append(Rejected(start + 1, end, raw, "bad_csv_row", detail))
            # Carry on with a fresh reader after the bad record: a damaged row must not cost the rest.
            pos = end
    if header is None:
        raise LabelFileError(f"the CSV file has no header row; it needs the columns {', '.join(REQUIRED_COLUMNS)}")
    return parsed


class _TooLong(Exception):
    """A CSV record grew past the line bound while the reader was still asking for more lines."""


class _LineFeed(Iterator[str]):
    """Feeds ``csv.reader`` one physical line at a time, and remembers which lines made each record.

    ``csv.reader`` pulls lines only as it needs them, so the lines taken since the last record are
    exactly the current record's: that is how each record keeps its original bytes and line numbers.
    """

    def __init__(self, lines: list[bytes], pos: int, max_bytes: int) -> None:
        self._lines = lines
        self._start = pos
        self._pos = pos
        self._max = max_bytes
        self._size = 0
        #: Why the current record is not UTF-8 (its first such line), or None.
        self._bad_utf8: str | None = None

    def __next__(self) -> str:
        if self._pos >= len(self._lines):
            raise StopIteration
        line = self._lines[self._pos]
        self._pos += 1
        self._size += len(line)
        if self._size > self._max + 2:  # + 2: the line ending is not part of the record
            raise _TooLong
        try:
            return line.decode("utf-8")
        except UnicodeDecodeError as exc:
            if self._bad_utf8 is None:
                self._bad_utf8 = f"line {self._pos} is not UTF-8: {exc.reason} at byte {exc.start}"
            return line.decode("utf-8", "replace")

    def take_record(self) -> tuple[int, int, str | None]:
        """The record just read: (first line index, index after its last line, why it is not UTF-8 or
        None). Starts the next record."""
        record = (self._start, self._pos, self._bad_utf8)
        self._start = self._pos
        self._size = 0
        self._bad_utf8 = None
        return record


def _read_header(row: list[str], bad_utf8: str | None) -> list[str]:
    if bad_utf8 is not None:
        raise LabelFileError(f"the CSV header is not UTF-8 ({bad_utf8})")
    names = [name.strip() for name in row]
    known = set(REQUIRED_COLUMNS) | set(OPTIONAL_COLUMNS)
    unknown = [name for name in names if name not in known]
    missing = [name for name in REQUIRED_COLUMNS if name not in names]
    repeated = sorted({name for name in names if names.count(name) > 1})
    problems = []
    if unknown:
        problems.append(f"unknown columns {', '.join(repr(n[:40]) for n in unknown[:5])}")
    if missing:
        problems.append(f"missing columns {', '.join(missing)}")
    if repeated:
        problems.append(f"repeated columns {', '.join(repeated)}")
    if problems:
        allowed = f"{', '.join(REQUIRED_COLUMNS)} and optionally {', '.join(OPTIONAL_COLUMNS)}"
        raise LabelFileError(f"bad CSV header: {'; '.join(problems)}. Columns: {allowed}")
    return names


def _row_to_item(
    header: list[str], row: list[str], raw: bytes, lines: tuple[int, int], bad_utf8: str | None, max_bytes: int
) -> Accepted | Rejected:
    first, last = lines
    if len(raw) > max_bytes:
        return _oversized(first, last, raw, max_bytes)
    if bad_utf8 is not None:
        return Rejected(first, last, raw, "not_utf8", bad_utf8)
    if len(row) != len(header):
        # No key: with the fields misaligned, the first cell is not known to be a pair id.
        detail = f"the record has {len(row)} fields; the header has {len(header)}"
        return Rejected(first, last, raw, "wrong_field_count", detail)
    cells = dict(zip(header, row, strict=True))
    pair_id = cells.get("pair_id", "")
    key = pair_id.encode() if _PAIR_ID.match(pair_id) else None
    obj: dict[str, object] = {}
    for name, value in cells.items():
        if value == "":
            continue  # an empty cell is an absent field: the contract's default, or missing_field
        if name == "from_audit":
            lowered = value.strip().lower()
            if lowered not in _TRUE | _FALSE:
                return Rejected(first, last, raw, "invalid_field", "from_audit: must be true or false (or 1 or 0)", key)
            obj[name] = lowered in _TRUE
        else:
            obj[name] = value
    # Through the codec, so a CSV row and a JSON line get the same reason codes and details.
    try:
        label = decode(HumanLabel, json.dumps(obj).encode(), max_bytes=4 * max_bytes)
    except InputRejected as exc:
        return Rejected(first, last, raw, exc.reason, exc.detail, key)
    return Accepted(first, label)


def _oversized(first: int, last: int, raw: bytes, limit: int) -> Rejected:
    return Rejected(first, last, raw, "oversized_line", f"the line is {len(raw)} bytes; the limit is {limit}")


def _strip_ending(raw: bytes) -> bytes:
    if raw.endswith(b"\r\n"):
        return raw[:-2]
    if raw.endswith((b"\n", b"\r")):
        return raw[:-1]
    return raw
