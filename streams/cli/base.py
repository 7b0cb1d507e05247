"""What every ``pairjudge`` command shares: the typer app and its groups, the console, ``--bootstrap``,
and the settings the running command read."""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import sys
from importlib import metadata
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from pairjudge.streams.config.settings import Settings, load_settings

# No local variables in tracebacks: they would show secrets (a Kafka client's password, a judge's key).
app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Judge pairs of AI outputs on Kafka.",
    pretty_exceptions_show_locals=False,
)

schemas_app = typer.Typer(no_args_is_help=True, help="Event contracts.")
app.add_typer(schemas_app, name="schemas")

control_app = typer.Typer(
    no_args_is_help=True,
    help="Live settings on pairjudge.control, applied by every worker; a switched-off tie-break switched back on.",
)
app.add_typer(control_app, name="control")

labels_app = typer.Typer(no_args_is_help=True, help="Human labels on pairjudge.labels.")
app.add_typer(labels_app, name="labels")

canary_app = typer.Typer(no_args_is_help=True, help="Canary pairs: human-labelled pairs judged on a schedule.")
app.add_typer(canary_app, name="canary")

topics_app = typer.Typer(no_args_is_help=True, help="The pairjudge topics on the cluster: create or check them.")
app.add_typer(topics_app, name="topics")

export_app = typer.Typer(no_args_is_help=True, help="Data out of pairjudge: preference pairs for training.")
app.add_typer(export_app, name="export")

review_app = typer.Typer(
    help="The human-review service: a queue of review requests with a web UI.", no_args_is_help=True
)
app.add_typer(review_app, name="review")

console = Console(stderr=True)

#: The distribution pairjudge is installed as (the name ``pairjudge`` on PyPI is another project's).
DISTRIBUTION = "pairjudge-stream"


def installed_version() -> str:
    """The installed package's version, from its metadata (what pip installed, not a copy in the code)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"pairjudge {installed_version()} ({DISTRIBUTION})")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Judge pairs of AI outputs on Kafka."""


#: Columns a table printed to a pipe or file is laid out for: rich's 80 would cut the outcome tables, and a
#: file has no width of its own. A terminal keeps its own width (tables fold their cells to fit it).
PIPED_WIDTH = 120


def output_console() -> Console:
    """The console for a command's results, on stdout: the terminal's width, or ``PIPED_WIDTH`` when piped
    (unless ``COLUMNS`` says otherwise)."""
    probe = Console()
    if probe.is_terminal or "COLUMNS" in os.environ:
        return probe
    return Console(width=PIPED_WIDTH)


def pairjudge_command() -> str:
    """How to run ``pairjudge`` again from the directory the user is in, for commands printed to be pasted:
    ``pairjudge`` when that is the one on PATH, else the installed script's path (``.venv/bin/pairjudge``
    after the README's install), relative to here where it can be."""
    script = Path(sys.executable).parent / "pairjudge"
    if not script.exists():
        return f"{shlex.quote(sys.executable)} -m pairjudge.streams.cli"
    on_path = shutil.which("pairjudge")
    if on_path is not None and Path(on_path).resolve() == script.resolve():
        return "pairjudge"
    try:
        return shlex.quote(str(script.relative_to(Path.cwd())))
    except ValueError:
        return shlex.quote(str(script))


log = logging.getLogger("pairjudge.streams.cli")


Bootstrap = Annotated[
    str | None,
    typer.Option("--bootstrap", "-b", help="Kafka bootstrap servers (default: PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS)."),
]


#: The settings the running command read (for main's error report: the Kafka it was talking to).
_used: list[Settings] = []


def settings_for(bootstrap: str | None = None) -> Settings:
    base = load_settings()
    if bootstrap:
        base = base.model_copy(update={"kafka": base.kafka.model_copy(update={"bootstrap_servers": bootstrap})})
    _used[:] = [base]
    return base
