"""``pairjudge report``, ``pairjudge gate`` and ``pairjudge schemas export``: what the audit and the
scoreboard concluded, and the contracts."""

from __future__ import annotations

import asyncio
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console

from pairjudge.streams.cli.base import (
    Bootstrap,
    app,
    console,
    schemas_app,
    settings_for,
)


@app.command()
def report(
    out: Annotated[Path, typer.Option(help="The HTML file to write.")] = Path("out/pairjudge-report.html"),
    source: Annotated[
        Path | None,
        typer.Option("--from", help="A JSONL export of snapshots and alerts; without it, read pairjudge.audit."),
    ] = None,
    bootstrap: Bootstrap = None,
) -> None:
    """Write one self-contained HTML report of the drift audit and the scoreboards (inline SVG, no script)."""
    from rich.markup import escape

    try:
        import matplotlib  # noqa: F401
    except ImportError:
        console.print("[red]error:[/red] the report needs matplotlib: pip install 'pairjudge-stream[report]'")
        raise typer.Exit(code=2) from None

    from pairjudge.streams.audit.report import parse_audit_events, write_report

    if source is not None:
        from pairjudge.streams.cli.inputs import require_json_lines

        if source.is_file():
            require_json_lines(source)
        try:
            lines: list[bytes] = source.read_bytes().splitlines()
        except OSError as exc:
            console.print(f"[red]error:[/red] cannot read {escape(str(source))}: {escape(str(exc.strerror or exc))}")
            raise typer.Exit(code=2) from None
    else:
        from pairjudge.streams.kafka.collector import read_topic

        settings = settings_for(bootstrap)
        records = asyncio.run(read_topic(settings, "audit", timeout=10))
        records += asyncio.run(read_topic(settings, "scores", timeout=10))
        lines = [value for _, value in records if value]
    events = parse_audit_events(lines)
    # Kappa drawn and shown from the audit's own minimum of labels, as the pages do.
    write_report(events, out, min_labels=settings_for(bootstrap).audit.min_labels)
    Console().print(f"wrote {out}: {len(events.snapshots)} snapshots, {len(events.alerts)} alerts")


class GateBasis(StrEnum):
    """``pairjudge gate --basis``: whose answer the gate reads."""

    human = "human"
    judge = "judge"


@app.command()
def gate(
    experiment: Annotated[str, typer.Option(help="The experiment id the pairs carry (metadata.experiment_id).")],
    basis: Annotated[
        GateBasis,
        typer.Option(
            case_sensitive=False,
            help="human: what people would decide, from the verdicts and the audit sample's labels (never the"
            " judge alone). judge: the judge's opinion, not people's.",
        ),
    ] = GateBasis.human,
    bootstrap: Bootstrap = None,
) -> None:
    """The deployment gate's decision for an experiment: exit 0 promote, 1 reject, 2 continue."""
    from pairjudge.streams.scores.gate_reader import gate_status

    chosen: Literal["human", "judge"] = "judge" if basis is GateBasis.judge else "human"
    code, text = asyncio.run(gate_status(settings_for(bootstrap), experiment, chosen))
    print(text)
    raise typer.Exit(code=code)


@schemas_app.command("export")
def schemas_export(directory: Annotated[Path, typer.Argument(help="Directory to write JSON Schemas into.")]) -> None:
    """Write every event and reply contract as JSON Schema."""
    from pairjudge.schemas.export import export_json_schemas

    for path in export_json_schemas(directory):
        console.print(str(path))
