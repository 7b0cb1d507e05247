"""``pairjudge labels import`` and ``pairjudge canary send``: human labels in, canary pairs out."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from pairjudge.streams.cli.base import (
    Bootstrap,
    canary_app,
    console,
    labels_app,
    settings_for,
)


@labels_app.command("import")
def labels_import(
    file: Annotated[Path, typer.Argument(help="Labels: JSONL (one HumanLabel per line) or CSV with a header row.")],
    file_format: Annotated[
        str | None,
        typer.Option("--format", help="jsonl or csv (default: from the extension: .jsonl, .ndjson, .csv)."),
    ] = None,
    bootstrap: Bootstrap = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Validate and count; no broker needed.")] = False,
    allow_bad: Annotated[bool, typer.Option("--allow-bad", help="Exit 0 even when lines were dead-lettered.")] = False,
) -> None:
    """Publish human labels to the labels topic, keyed by pair_id; malformed lines go to the dead-letter topic.

    The formats are in docs/guides/labels.md#formats. Exit codes:

    0: every line was a valid label, or --allow-bad was given.

    1: some lines were dead-lettered, with a reason each; the valid labels were still published.

    2: the file cannot be read, or its format or CSV header is wrong; nothing was published.

    3: the broker failed or the topics are missing; some labels may have been published.
    """
    from aiokafka.errors import KafkaError
    from rich.markup import escape

    from pairjudge.streams.audit.label_files import LabelFileError, LabelFormat, detect_format, parse_labels
    from pairjudge.streams.audit.label_import import publish, summarise
    from pairjudge.streams.cli.inputs import require_json_lines
    from pairjudge.streams.kafka.admin import BrokerError

    out = Console()
    formats: dict[str, LabelFormat] = {"jsonl": "jsonl", "csv": "csv"}
    if file_format is not None and file_format not in formats:
        console.print(f"[red]error:[/red] --format is jsonl or csv, not {escape(repr(file_format))}")
        raise typer.Exit(code=2)
    try:
        fmt = detect_format(file, formats[file_format] if file_format else None)
        if fmt == "jsonl":
            require_json_lines(file)
        data = file.read_bytes()
        parsed = parse_labels(data, fmt)
    except OSError as exc:
        console.print(f"[red]error:[/red] cannot read {escape(str(file))}: {escape(str(exc.strerror or exc))}")
        raise typer.Exit(code=2) from None
    except LabelFileError as exc:
        console.print(f"[red]error:[/red] {escape(str(file))}: {escape(str(exc))}")
        raise typer.Exit(code=2) from None
    settings = settings_for(bootstrap)
    labels_topic, letters_topic = settings.topics.name("labels"), settings.topics.name("deadletter")
    if dry_run:
        report = summarise(parsed)
        out.print(f"dry run: {report.labels} labels would be published to {labels_topic}")
    else:
        try:
            report = asyncio.run(publish(settings, parsed, file.name))
        except (BrokerError, KafkaError, OSError) as exc:  # OSError covers timeouts
            where = settings.kafka.bootstrap_servers
            console.print(f"[red]error:[/red] publishing to {escape(where)} failed: {escape(str(exc))}")
            raise typer.Exit(code=3) from None
        out.print(f"published {report.published} labels to {labels_topic}")
    verb = "would be dead-lettered" if dry_run else "dead-lettered"
    out.print(f"{report.dead_lettered} lines {verb} to {letters_topic}")
    for reason, count in report.reasons.items():
        out.print(f"  {reason}: {count}")
    # The first few, so a user can fix the file; details never quote a line's content.
    for item in parsed.rejected[:_SHOWN_REJECTS]:
        out.print(f"  {item.where}: {item.reason}: {item.detail}", markup=False, highlight=False)
    if len(parsed.rejected) > _SHOWN_REJECTS:
        out.print(f"  ... and {len(parsed.rejected) - _SHOWN_REJECTS} more (see {letters_topic})")
    out.print(f"{report.duplicate_pair_ids} pair ids labelled more than once (every label kept)")
    if report.dead_lettered and not allow_bad:
        raise typer.Exit(code=1)


#: Rejected lines listed by ``labels import``; the rest are counted.
_SHOWN_REJECTS = 10


@canary_app.command("send")
def canary_send(
    file: Annotated[Path, typer.Argument(help="Canary pairs: JSONL, one CandidatePair with a human_label a line.")],
    every: Annotated[
        float | None, typer.Option(help="Seconds between rounds; without it, one round and exit.", min=1.0)
    ] = None,
    rounds: Annotated[int, typer.Option(help="Rounds to send with --every (0: until stopped).", min=0)] = 0,
    bootstrap: Bootstrap = None,
) -> None:
    """Send every canary pair under a fresh id, marked as canary traffic; the drift audit scores them
    against their labels (canary_accuracy, and an alert when it drops)."""
    from rich.markup import escape

    from pairjudge.streams.audit.canary import CanaryFileError, load_canaries, send_rounds
    from pairjudge.streams.cli.inputs import require_json_lines

    if file.is_file():
        require_json_lines(file)
    try:
        pairs = load_canaries(file)
    except (OSError, CanaryFileError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(code=2) from None
    settings = settings_for(bootstrap)
    sent = asyncio.run(send_rounds(settings, pairs, every_s=every, rounds=rounds))
    Console().print(f"sent {sent} canary pairs to {settings.topics.name('pairs')}")
