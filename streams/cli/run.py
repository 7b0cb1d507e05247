"""The commands that judge: ``demo``, ``send`` and ``evaluate`` (``worker`` has its own module)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from pairjudge.streams.cli.base import (
    Bootstrap,
    app,
    console,
    settings_for,
)


@app.command()
def demo(
    bootstrap: Bootstrap = None,
    out: Annotated[Path, typer.Option(help="Where to write the outcomes (JSONL).")] = Path("out/demo-outcomes.jsonl"),
    pairs: Annotated[Path | None, typer.Option(help="Pairs to send (JSONL); default: the built-in sample set.")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for every pair's outcome.")] = 180.0,
    serve: Annotated[
        bool,
        typer.Option(
            "--serve",
            help="Run the whole loop live until Ctrl-C: Tansu, a worker, the review service (with a demo reviewer"
            " and operator) and a trickle of sample pairs; prints the URLs and the passwords.",
        ),
    ] = False,
    rate: Annotated[float, typer.Option(help="With --serve: sample pairs sent a second.", min=0.1, max=50)] = 3.0,
) -> None:
    """The main job on embedded defaults: start Tansu and a worker, judge the sample pairs, print a summary.

    With --serve: the live loop instead (streams.cli.live_demo), on the embedded broker only."""
    from pairjudge.streams.cli.worker import refuse_unverified_runtime

    # Its worker would refuse too, but only after the broker was started and the pairs sent.
    refuse_unverified_runtime(settings_for())
    if serve:
        if bootstrap is not None or pairs is not None:
            console.print("[red]error:[/red] --serve runs on the embedded broker and the sample pairs only")
            raise typer.Exit(code=2)
        try:
            import aiosqlite  # noqa: F401
            import uvicorn  # noqa: F401
        except ImportError:
            console.print("[red]error:[/red] --serve runs the review service: pip install 'pairjudge-stream[review]'")
            raise typer.Exit(code=2) from None
        from pairjudge.streams.cli.live_demo import run_live

        raise typer.Exit(code=asyncio.run(run_live(settings_for(), rate=rate)))
    from pairjudge.streams.cli.demo import run_demo
    from pairjudge.streams.cli.inputs import require_json_lines

    if pairs is not None:
        require_json_lines(pairs)
    result = asyncio.run(run_demo(settings_for(), bootstrap=bootstrap, out_path=out, pairs_path=pairs, timeout=timeout))
    raise typer.Exit(code=0 if result.complete else 1)


@app.command()
def send(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="JSONL, one CandidatePair per line.")],
    bootstrap: Bootstrap = None,
) -> None:
    """Send pairs to the pairs topic, as they are: the worker dead-letters malformed ones."""
    from pairjudge.streams.cli.inputs import require_json_lines
    from pairjudge.streams.kafka.producer import send_file

    require_json_lines(file)
    sent = asyncio.run(send_file(settings_for(bootstrap), file, console=console))
    console.print(f"sent {sent} events to {settings_for(bootstrap).topics.name('pairs')}")


@app.command()
def evaluate(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="JSONL, one CandidatePair per line.")],
    out: Annotated[
        Path | None,
        typer.Option(
            help="Append each pair's outcome here (JSONL) as it is decided; rerun to resume: pairs already in it "
            "are skipped and the report covers them all."
        ),
    ] = None,
    baselines: Annotated[
        bool | None,
        typer.Option(
            "--baselines/--no-baselines",
            help="Score 'longer wins', a seeded coin flip and 'always TIE' beside the judge "
            "(default: on when the file has human labels).",
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Pairs judged at once.", min=1)] = 8,
    fresh: Annotated[bool, typer.Option("--fresh", help="Start --out over instead of resuming it.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the totals, not a line per pair.")] = False,
) -> None:
    """Judge a file with the same core and no Kafka; report agreement with any human labels.

    Exits 1 when any pair could not be judged (rejected or an error); --out names each one's reason."""
    from rich.markup import escape

    from pairjudge.streams.cli.evaluate import run_evaluate
    from pairjudge.streams.cli.inputs import require_json_lines
    from pairjudge.streams.worker.spend import SpendCapUnsupported

    require_json_lines(file)
    try:
        report = asyncio.run(
            run_evaluate(
                settings_for(),
                file,
                out_path=out,
                console=Console(),
                baselines=baselines,
                concurrency=concurrency,
                fresh=fresh,
                quiet=quiet,
            )
        )
    except SpendCapUnsupported as exc:
        # Refused before any pair is judged: a cap the run cannot honour is never silently dropped.
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(code=2) from None
    # Any pair not judged (rejected input or an error) fails the command: a CI step must notice.
    raise typer.Exit(code=1 if report.failed else 0)
