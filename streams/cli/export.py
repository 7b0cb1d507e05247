"""``pairjudge export preferences``: the decided pairs as chosen/rejected rows for preference training (TRL's DPO
format), with their provenance; incremental, so a rerun writes only what is new.

The choice of rows is ``agents.preferences``' (pure, tested without Kafka); this module reads the topics into it,
appends the rows to a JSON Lines file and keeps the export's state beside it.
"""

from __future__ import annotations

import asyncio
import json
import os
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.markup import escape

from pairjudge.agents.preferences import ExportFilters, PreferenceLedger, Selection, Style, choose_style
from pairjudge.schemas.events import HumanLabel, PairVerdict, ReviewRequest, TieBreakRequest
from pairjudge.schemas.pair import CandidatePair
from pairjudge.streams.cli.base import Bootstrap, console, export_app, settings_for
from pairjudge.streams.cli.durable import drop_torn_tail, replace_whole
from pairjudge.streams.cli.parquet_rows import ParquetUnavailable, write_part, written_in
from pairjudge.streams.cli.topic_history import decoding, read_to_end
from pairjudge.streams.config.settings import Settings

STATE_VERSION = 1


class FormatOption(StrEnum):
    auto = "auto"
    jsonl = "jsonl"
    parquet = "parquet"


class StyleOption(StrEnum):
    auto = "auto"
    plain = "plain"
    conversational = "conversational"


@export_app.command("preferences")
def preferences(
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="The JSON Lines file rows are appended to, or (Parquet) the directory each run adds a part file to.",
        ),
    ] = Path("out/preferences.jsonl"),
    file_format: Annotated[
        FormatOption,
        typer.Option(
            "--format",
            help="jsonl or parquet (a directory of part files); auto: parquet when --out ends in .parquet.",
        ),
    ] = FormatOption.auto,
    state: Annotated[
        Path | None,
        typer.Option(help="Where the export remembers the pairs it wrote (default: <out>.state.json)."),
    ] = None,
    people_only: Annotated[bool, typer.Option("--people-only", help="Only pairs a person labelled.")] = False,
    min_confidence: Annotated[
        float | None,
        typer.Option("--min-confidence", min=0.0, max=1.0, help="Only rows whose judge confidence is at least this."),
    ] = None,
    orders_agreed: Annotated[
        bool, typer.Option("--orders-agreed", help="Only rows whose judge chose the same reply in both orders.")
    ] = False,
    exclude_review: Annotated[
        bool,
        typer.Option("--exclude-review", help="Leave out pairs the judge could not decide and sent to people."),
    ] = False,
    since: Annotated[
        datetime | None, typer.Option(help="Only rows decided at or after this time (UTC unless it says).")
    ] = None,
    until: Annotated[
        datetime | None, typer.Option(help="Only rows decided before this time (UTC unless it says).")
    ] = None,
    wait_for_labels: Annotated[
        bool,
        typer.Option(
            "--wait-for-labels/--no-wait-for-labels",
            help="Hold a verdict drawn for a person's check until its label comes (the label may overturn it).",
        ),
    ] = True,
    include_canaries: Annotated[
        bool,
        typer.Option(
            "--include-canaries", help="Keep canary pairs (known-answer pairs sent again and again under fresh ids)."
        ),
    ] = False,
    settle: Annotated[
        float,
        typer.Option(
            min=0.0,
            help="Seconds a verdict must be old to be written: one younger may still have its person's check on"
            " the way, and waits for the next run.",
        ),
    ] = 60.0,
    style: Annotated[
        StyleOption,
        typer.Option(
            help="plain: strings; conversational: chat messages; auto: conversational once any pair is a "
            "conversation. A file keeps the style it started with."
        ),
    ] = StyleOption.auto,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the broker to hand over the topics.")] = 60.0,
    bootstrap: Bootstrap = None,
) -> None:
    """Write every decided pair once as a prompt/chosen/rejected row (TRL's DPO format), with its provenance.

    Human labels override the judge. Ties and undecided pairs are left out and counted.

    A rerun appends only the pairs not written before (docs/guides/preference-export.md). Exit codes:

    0: the new rows were written (or there were none).

    2: an option, the output or its state file is wrong; nothing was written.

    3: the broker failed, or the topics were not read to their end in time; nothing was written.
    """
    state_path = state or out.with_name(out.name + ".state.json")
    parquet = file_format is FormatOption.parquet or (file_format is FormatOption.auto and out.suffix == ".parquet")
    filters = ExportFilters(
        people_only=people_only,
        min_confidence=min_confidence,
        orders_agreed=orders_agreed,
        exclude_review=exclude_review,
        since=_utc(since),
        until=_utc(until),
        wait_for_labels=wait_for_labels,
        include_canaries=include_canaries,
        settled_before=datetime.now(UTC) - timedelta(seconds=settle),
    )
    try:
        # A run killed while appending may have left half a row: its pair is not counted as written anywhere.
        torn = 0 if parquet or out.is_dir() else drop_torn_tail(out)
        kept_style, written = load_state(state_path, out, parquet=parquet)
    except ParquetUnavailable as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(code=2) from None
    except (OSError, ValueError) as exc:
        console.print(f"[red]error:[/red] cannot read the export's state {escape(str(state_path))}: {escape(str(exc))}")
        raise typer.Exit(code=2) from None
    if kept_style is not None and style is not StyleOption.auto and style.value != kept_style:
        console.print(
            f"[red]error:[/red] {escape(str(out))} holds {kept_style} rows; --style {style.value} would mix two "
            "shapes in one file (datasets cannot read that). Write to another --out."
        )
        raise typer.Exit(code=2)
    settings = settings_for(bootstrap)
    try:
        ledger, unreadable = asyncio.run(read_ledger(settings, timeout=timeout))
    except TimeoutError:
        console.print(f"[red]error:[/red] the topics were not read to their end within {timeout:g} s; nothing written")
        raise typer.Exit(code=3) from None
    chosen_style = choose_style(kept_style, ledger, _style(style.value) or "auto")
    selection = ledger.select(filters, written=written, style=chosen_style)
    if parquet:
        write_part(out, selection.rows, chosen_style)
    else:
        append_rows(out, selection.rows)
    save_state(state_path, chosen_style, written | {row["pair_id"] for row in selection.rows})
    typer.echo(summary(selection, out, chosen_style, ledger_pairs=len(ledger), unreadable=unreadable, torn=torn))


def _utc(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


async def read_ledger(settings: Settings, *, timeout: float) -> tuple[PreferenceLedger, int]:
    """Every event on the topics an export reads, from their start to their end as it was when reading began,
    into a ledger; and how many records could not be read as their topic's event (left out, never fatal)."""
    ledger = PreferenceLedger()
    # The pairs' texts, what the stages decided, and what people said.
    takers = {
        "pairs": decoding(CandidatePair, ledger.add_pair, settings),
        "verdicts": decoding(PairVerdict, ledger.add_verdict, settings),
        "tiebreak": decoding(TieBreakRequest, ledger.add_tiebreak, settings),
        "review": decoding(ReviewRequest, ledger.add_review, settings),
        "labels": decoding(HumanLabel, ledger.add_label, settings),
    }
    unreadable = await read_to_end(settings, takers, timeout=timeout)
    return ledger, unreadable


def load_state(state_path: Path, out: Path, *, parquet: bool = False) -> tuple[Style | None, set[str]]:
    """The export's style and the pairs it wrote: the state file's, and every ``pair_id`` already in ``out``
    (so a run stopped between writing rows and saving its state still never writes a pair twice)."""
    style: Style | None = None
    written: set[str] = set()
    if state_path.exists():
        data = json.loads(state_path.read_text())
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            raise ValueError(f"not a version {STATE_VERSION} export state")
        style = _style(data.get("style"))
        written.update(str(pair_id) for pair_id in data.get("written", []))
    if parquet:
        in_parts, held = written_in(out)
        return style or in_parts, written | held
    if out.is_dir():
        raise ValueError(f"{out} is a directory: a Parquet export? add --format parquet")
    if out.exists():
        with out.open(encoding="utf-8") as rows:
            for number, line in enumerate(rows, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    written.add(str(row["pair_id"]))
                except (ValueError, KeyError, TypeError):
                    raise ValueError(f"{out} line {number} is not a row this command wrote") from None
                style = style or ("plain" if isinstance(row.get("prompt"), str) else "conversational")
    return style, written


def _style(value: object) -> Style | None:
    if value is None or value == "auto":
        return None
    if value == "plain":
        return "plain"
    if value == "conversational":
        return "conversational"
    raise ValueError(f"unknown style {value!r}")


def append_rows(out: Path, rows: list[dict[str, Any]]) -> None:
    """Append ``rows`` as JSON Lines, flushed to disk before the state says they were written. The file holds
    model outputs and the task's text: owner-only, as pairjudge's other files of content are."""
    from pairjudge.streams.security.files import private_file

    out.parent.mkdir(parents=True, exist_ok=True)
    private_file(out, what="the preference export")
    with out.open("a", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def save_state(state_path: Path, style: Style, written: set[str]) -> None:
    """Saved whole or not at all (written beside, renamed into place), and only after the rows it names are on
    disk: a run killed before it leaves the earlier state, and the rows' own ``pair_id`` s say the rest."""
    body: dict[str, Any] = {"version": STATE_VERSION, "style": style, "written": sorted(written)}
    replace_whole(state_path, json.dumps(body) + "\n")


def summary(selection: Selection, out: Path, style: Literal["plain", "conversational"], **counts: int) -> str:
    """What the run did, in plain words."""
    lines = [
        f"wrote {_n(len(selection.rows), 'new row')} ({style}) to {out}; "
        f"{_n(selection.already_written, 'pair')} written by earlier runs; {_n(counts['ledger_pairs'], 'pair')} read"
    ]
    if selection.left_out:
        lines.append("left out:")
        lines += [f"  {count:,} {why}" for why, count in selection.left_out.most_common()]
    if selection.wrong_style:
        lines.append(f"  {selection.wrong_style:,} conversations, which a plain export cannot hold (use another --out)")
    if selection.waiting:
        lines.append("not decided yet (a later run writes them once they are):")
        lines += [f"  {count:,} {why}" for why, count in selection.waiting.most_common()]
    if counts.get("torn"):
        lines.append(
            f"cut a partial last row ({_n(counts['torn'], 'byte')}) off {out}: a run was stopped while writing it;"
            " its pair was written again"
        )
    if counts["unreadable"]:
        unreadable = counts["unreadable"]
        lines.append(f"{_n(unreadable, 'record')} on the topics could not be read as their topic's event: skipped")
    return "\n".join(lines)


def _n(count: int, what: str) -> str:
    return f"{count:,} {what}{'' if count == 1 else 's'}"
