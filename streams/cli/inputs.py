"""Input files the commands read as JSON Lines: one clear error for a file in the wrong shape.

A JSON array (what many tools export) read line by line would dead-letter every line as
``malformed_json``: dozens of rows that each say the same thing and none of them the cause. So every
command that reads a JSON Lines file looks at its first bytes first and, for an array or a single
pretty-printed object, stops with one sentence and the way to convert it.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import typer
from rich.markup import escape

from pairjudge.streams.cli.base import console

#: Enough of the head to tell an array or a pretty-printed object from JSON Lines.
_HEAD_BYTES = 64 * 1024


def wrong_shape(path: Path) -> str | None:
    """Why ``path`` is not JSON Lines, when that is clear from its first bytes; None when it may well be
    (a malformed line in a real JSON Lines file is the dead-letter path's business, not this check's)."""
    with path.open("rb") as fh:
        head = fh.read(_HEAD_BYTES)
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    quoted = shlex.quote(str(path))
    converted = shlex.quote(str(path.with_suffix(".jsonl")) if path.suffix != ".jsonl" else f"{path}.lines")
    if text.startswith(b"["):
        return (
            f"{path} looks like a JSON array (it starts with '['); pairjudge reads JSON Lines, one object per "
            f"line. Convert it with: jq -c '.[]' {quoted} > {converted}"
        )
    first_line = text.split(b"\n", 1)[0].strip()
    if first_line == b"{":
        # One object spread over many lines: its first line alone can never be a whole object.
        return (
            f"{path} looks like pretty-printed JSON (its first line is a lone '{{'); pairjudge reads JSON Lines, "
            f"one whole object per line. Convert it with: jq -c '.' {quoted} > {converted}"
        )
    return None


def require_json_lines(path: Path) -> None:
    """Stop the command (exit 2, nothing sent or judged) when ``path`` is plainly not JSON Lines."""
    try:
        problem = wrong_shape(path)
    except OSError as exc:
        console.print(f"[red]error:[/red] cannot read {escape(str(path))}: {escape(str(exc.strerror or exc))}")
        raise typer.Exit(code=2) from None
    if problem is not None:
        console.print(f"[red]error:[/red] {escape(problem)}", soft_wrap=True)
        raise typer.Exit(code=2)


__all__ = ["require_json_lines", "wrong_shape"]
