"""The preference export as Parquet: a directory of part files, one per run, all with one fixed schema.

A run adds one part file (written beside, then renamed into place, so a reader never sees half a file) and never
rewrites an earlier one: the same "append only what is new" as the JSON Lines file. The schema is written out
rather than inferred, because inference follows the rows of one run (a run whose rows carry no tool call, or no
person's label, would infer other types than the next), and ``datasets`` refuses part files whose schemas differ.

pyarrow is an optional dependency (``pip install 'pairjudge-stream[parquet]'``), imported only here.
"""

from __future__ import annotations

import os
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pairjudge.agents.preferences import COLUMNS, Style
from pairjudge.streams.cli.durable import sync_directory

if TYPE_CHECKING:
    import pyarrow as pa

PART_GLOB = "part-*.parquet"
INSTALL_HINT = "Parquet needs pyarrow: pip install 'pairjudge-stream[parquet]'"


class ParquetUnavailable(RuntimeError):
    """pyarrow is not installed."""


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise ParquetUnavailable(INSTALL_HINT) from None
    return pyarrow


def schema(style: Style) -> pa.Schema:
    """The columns of ``agents.preferences.COLUMNS``, typed; prompt/chosen/rejected as strings or chat messages."""
    pa = _pyarrow()
    text = pa.string()
    call = pa.struct(
        [
            ("id", text),
            ("type", text),
            ("function", pa.struct([("name", text), ("arguments", text)])),
        ]
    )
    message = pa.struct([("role", text), ("content", text), ("tool_calls", pa.list_(call)), ("tool_call_id", text)])
    turns = text if style == "plain" else pa.list_(message)
    source = pa.struct([("model", text), ("version", text), ("prompt_version", text), ("role", text)])
    types: dict[str, Any] = {
        "prompt": turns,
        "chosen": turns,
        "rejected": turns,
        "chosen_source": source,
        "rejected_source": source,
        "confidence": pa.float64(),
        "orders_agreed": pa.bool_(),
        "human_labels": pa.int64(),
    }
    return pa.schema([(name, types.get(name, text)) for name in COLUMNS])


def write_part(directory: Path, rows: list[dict[str, Any]], style: Style) -> Path | None:
    """Write ``rows`` as a new part file in ``directory`` (owner-only, as the JSON Lines export); None if empty."""
    if not rows:
        return None
    pa = _pyarrow()
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    part = directory / f"part-{stamp}-{secrets.token_hex(3)}.parquet"
    partial = directory / f".{part.name}.partial"
    table = pa.Table.from_pylist(rows, schema=schema(style))
    pa.parquet.write_table(table, partial)
    partial.chmod(0o600)
    # On disk before it has its name, and the name on disk after: the next run reads the part's pair ids as
    # written, so a part that a power loss could leave empty must never be there under its name.
    with partial.open("rb") as handle:
        os.fsync(handle.fileno())
    partial.replace(part)
    sync_directory(directory)
    return part


def written_in(directory: Path) -> tuple[Style | None, set[str]]:
    """The style of the part files already in ``directory`` and every pair they hold."""
    pa = _pyarrow()
    if not directory.exists():
        return None, set()
    if not directory.is_dir():
        raise ValueError(f"{directory} is a file; a Parquet export is a directory of part files")
    style: Style | None = None
    written: set[str] = set()
    for part in sorted(directory.glob(PART_GLOB)):
        try:
            table = pa.parquet.read_table(part, columns=["pair_id", "prompt"])
        except (OSError, pa.ArrowException) as exc:
            raise ValueError(f"{part} is not a part file this command wrote: {exc}") from None
        written.update(str(pair_id) for pair_id in table.column("pair_id").to_pylist())
        style = style or ("plain" if pa.types.is_string(table.schema.field("prompt").type) else "conversational")
    return style, written
