"""``pairjudge deadletter list|replay``: see what the workers set aside, and send it back once fixed.

Both read the dead-letter topic from its start to its end offsets as they were when the command began
(``streams.kafka.letters``), so they terminate however busy the topic is. The replay's rules (what is
never replayed, what only when named) are in ``streams.kafka.replay``; docs/operations/dead-letters.md
says them for users.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated, Final

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from pairjudge.schemas.kinds import DEAD_LETTER_STAGES
from pairjudge.streams.cli.base import Bootstrap, app, console, settings_for
from pairjudge.streams.cli.words import words_for
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.letters import LetterFilter, LetterRead, StoredLetter, latest_per_pair
from pairjudge.streams.kafka.replay import REPLAYABLE_REASONS, Planned, ReplayReport

deadletter_app = typer.Typer(
    no_args_is_help=True,
    help="Dead letters on pairjudge.deadletter: list them, and replay them once their cause is fixed.",
)
app.add_typer(deadletter_app, name="deadletter")

_UNITS: Final = {"s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800}
_RELATIVE: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
#: Characters of a letter's error shown in the table (``--json`` has it whole).
_ERROR_CHARS: Final = 80


def parse_when(text: str, *, now: datetime | None = None) -> datetime:
    """A point in time: ISO-8601 (``2026-03-01T09:30``, ``2026-03-01T09:30:00+01:00``; no offset means UTC)
    or a span back from now (``90s``, ``15m``, ``2h``, ``3d``, ``1w``)."""
    relative = _RELATIVE.match(text)
    if relative:
        span = timedelta(seconds=float(relative.group(1)) * _UNITS[relative.group(2)])
        return (now or datetime.now(UTC)) - span
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise typer.BadParameter(f"{text!r} is neither ISO-8601 (2026-03-01T09:30Z) nor a span like 2h") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _when(text: str | None) -> datetime | None:
    return parse_when(text) if text is not None else None


Reasons = Annotated[
    list[str] | None,
    typer.Option(
        "--reason", "-r", help="Only letters with this reason code (repeatable): judge_rejected, malformed_json..."
    ),
]
Stages = Annotated[
    list[str] | None,
    typer.Option("--stage", help="Only letters of this stage (repeatable): " + ", ".join(DEAD_LETTER_STAGES) + "."),
]
Since = Annotated[
    str | None,
    typer.Option(
        help="Only letters that failed at or after this time: ISO-8601 (UTC when no offset) or a span back, e.g. 2h."
    ),
]
Until = Annotated[
    str | None,
    typer.Option(
        help="Only letters that failed at or before this time: ISO-8601 (UTC when no offset) or a span back, e.g. 30m."
    ),
]
PairIds = Annotated[list[str] | None, typer.Option("--pair-id", help="Only the letters of this pair (repeatable).")]

_STAGES: Final = DEAD_LETTER_STAGES


def _selection(
    reasons: Sequence[str] | None,
    stages: Sequence[str] | None,
    since: str | None,
    until: str | None,
    pair_ids: Sequence[str] | None,
) -> LetterFilter:
    bad = [s for s in stages or () if s not in _STAGES]
    if bad:
        raise typer.BadParameter(f"--stage is one of {', '.join(_STAGES)}, not {', '.join(bad)}")
    selection = LetterFilter(
        reasons=frozenset(reasons or ()),
        stages=frozenset(stages or ()),
        pair_ids=frozenset(pair_ids or ()),
        since=_when(since),
        until=_when(until),
    )
    if selection.since and selection.until and selection.since > selection.until:
        raise typer.BadParameter("--since is after --until: no letter can match")
    return selection


def _read(settings: Settings, selection: LetterFilter) -> tuple[str, LetterRead]:
    from pairjudge.streams.kafka.letters import ReadStalled, read_letters
    from pairjudge.streams.security.kafka_clients import client_config

    topic = settings.topics.name("deadletter")
    try:
        return topic, asyncio.run(read_letters(client_config(settings.kafka), topic, selection))
    except ReadStalled as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(code=3) from None


def _report_unreadable(read: LetterRead) -> None:
    for reason, count in sorted(read.unreadable.items()):
        console.print(f"[yellow]{count} records on the topic are not dead letters ({escape(reason)})[/yellow]")


def _size(stored: StoredLetter) -> str:
    letter = stored.letter
    size = f"{letter.original_size}" if letter.original_size is not None else f"{len(letter.original)}?"
    flags = [f for f, on in (("truncated", letter.original_truncated), ("redacted", letter.original_redacted)) if on]
    return f"{size} ({', '.join(flags)})" if flags else size


def _letters_table(letters: Sequence[StoredLetter], *, title: str, target: dict[int, str] | None = None) -> Table:
    # Every cell is a Text: pair ids and errors are untrusted and must not be read as rich markup.
    table = Table(title=title, show_lines=False)
    for column in ("failed at (UTC)", "reason", "stage", "pair id", "from", "bytes", "error"):
        table.add_column(column, overflow="fold")
    if target is not None:
        table.add_column("to")
    for stored in letters:
        letter = stored.letter
        source = f"{letter.topic}[{letter.partition}]@{letter.offset}" if letter.topic else "-"
        error = letter.error if len(letter.error) <= _ERROR_CHARS else letter.error[:_ERROR_CHARS] + "…"
        row = [
            letter.failed_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S"),
            letter.reason,
            letter.stage,
            letter.pair_id or "-",
            source,
            _size(stored),
            error,
        ]
        if target is not None:
            row.append(target.get(id(stored), "-"))
        table.add_row(*(Text(cell) for cell in row))
    return table


def _json_line(stored: StoredLetter, *, with_original: bool) -> str:
    body = stored.letter.model_dump(mode="json", exclude=None if with_original else {"original"})
    body["letter"] = {"topic": stored.topic, "partition": stored.partition, "offset": stored.offset}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _print_counts(out: Console, letters: Sequence[StoredLetter], scanned: int) -> None:
    counts = Counter(s.letter.reason for s in letters)
    out.print(f"{len(letters)} of {scanned} letters selected", highlight=False)
    for reason, count in counts.most_common():
        words = words_for(reason)
        out.print(Text(f"  {reason}: {count}" + (f" ({words})" if words else "")))


@deadletter_app.command("list")
def deadletter_list(
    reason: Reasons = None,
    stage: Stages = None,
    since: Since = None,
    until: Until = None,
    pair_id: PairIds = None,
    latest: Annotated[
        bool,
        typer.Option(
            "--latest", help="Only each pair's latest letter (a replayed pair that failed again has several)."
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="One letter per line as JSON on stdout (original base64), counts on stderr.")
    ] = False,
    no_original: Annotated[
        bool, typer.Option("--no-original", help="With --json: leave the original bytes out.")
    ] = False,
    bootstrap: Bootstrap = None,
) -> None:
    """List the dead letters the filters select, oldest first, then how many there are of each reason.

    Reads the dead-letter topic from its start to where it ended when the command began, without a
    consumer group: it takes nothing from the workers and always finishes. The filters combine (a letter
    must match every one given); a repeated option matches any of its values.
    """
    selection = _selection(reason, stage, since, until, pair_id)
    topic, read = _read(settings_for(bootstrap), selection)
    letters = latest_per_pair(read.letters) if latest else read.letters
    if as_json:
        for stored in letters:
            sys.stdout.write(_json_line(stored, with_original=not no_original) + "\n")
        sys.stdout.flush()
        _print_counts(console, letters, read.scanned)
    else:
        out = Console()
        if letters:
            out.print(_letters_table(letters, title=f"dead letters on {topic}"))
        _print_counts(out, letters, read.scanned)
    _report_unreadable(read)


@deadletter_app.command("replay")
def deadletter_replay(
    reason: Reasons = None,
    stage: Stages = None,
    since: Since = None,
    until: Until = None,
    pair_id: PairIds = None,
    to_topic: Annotated[
        str | None, typer.Option("--to-topic", help="Publish here instead of the topic each letter was read from.")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would be replayed; publish nothing.")] = False,
    rate: Annotated[
        float | None,
        typer.Option(help="At most this many messages a second, evenly spaced (default: no limit).", min=0.001),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Replay without asking for confirmation.")] = False,
    bootstrap: Bootstrap = None,
) -> None:
    """Re-publish the original bytes of the dead letters the filters select to the topic each came from.

    Each pair is replayed once, from its latest letter, keyed by its pair id (so it lands beside its
    recorded outcome). A pair decided meanwhile is read and committed unjudged, with nothing sent again,
    as any redelivery of a published outcome: replaying twice never makes two outcomes.

    Without --reason, only letters whose cause lies outside the event are replayed: judge_rejected,
    internal_error, crashed_worker, outcome_undeliverable, unsupported_schema_version and unknown_rubric. Any other
    reason (malformed_json, oversized_output...) is replayed only when named with --reason. A letter
    whose original was truncated or redacted, or no longer matches its SHA-256, is never replayed.

    Exit codes: 0 every selected letter was replayed or skipped for a stated reason; 1 some sends
    failed; 2 bad options, a missing target topic, or no confirmation; 3 the broker failed.
    """
    from pairjudge.streams.kafka.replay import plan_replay, skipped_of

    selection = _selection(reason, stage, since, until, pair_id)
    settings = settings_for(bootstrap)
    topic, read = _read(settings, selection)
    _report_unreadable(read)
    plans = plan_replay(read.letters, named_reasons=selection.reasons, to_topic=to_topic)
    chosen = [p for p in plans if p.skip is None]
    out = Console()
    out.print(f"{len(read.letters)} of {read.scanned} letters on {topic} selected", highlight=False)
    if dry_run:
        if chosen:
            target = {id(p.stored): str(p.topic) for p in chosen}
            out.print(_letters_table([p.stored for p in chosen], title="would be replayed", target=target))
        _summary(out, "would replay", len(chosen), skipped_of(plans), Counter())
        return
    if not chosen:
        _summary(out, "replayed", 0, skipped_of(plans), Counter())
        return
    _check_targets(settings, {str(p.topic) for p in chosen})
    if not yes:
        targets = ", ".join(sorted(Counter(str(p.topic) for p in chosen)))
        try:
            confirmed = typer.confirm(f"Replay {len(chosen)} letters to {targets}?", default=False, err=True)
        except typer.Abort:  # no terminal to answer on (end of input): no is the answer
            confirmed = False
        if not confirmed:
            console.print("nothing replayed (give --yes to replay without asking)")
            raise typer.Exit(code=2)
    report = asyncio.run(_publish(settings, plans, rate))
    _summary(out, "replayed", len(report.replayed), report.skipped, report.failed)
    if report.failed:
        raise typer.Exit(code=1)


def _check_targets(settings: Settings, topics: set[str]) -> None:
    """Exit 2 naming a target topic that does not exist: a send to it would wait and then time out."""
    from pairjudge.streams.kafka.admin import BrokerError, topic_partitions
    from pairjudge.streams.security.kafka_clients import client_config

    try:
        asyncio.run(topic_partitions(client_config(settings.kafka), sorted(topics)))
    except BrokerError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(code=2) from None


async def _publish(settings: Settings, plans: list[Planned], rate: float | None) -> ReplayReport:
    from pairjudge.streams.kafka.replay import publish_replay
    from pairjudge.streams.security.kafka_clients import client_config

    return await publish_replay(client_config(settings.kafka), plans, rate=rate)


def _summary(out: Console, verb: str, done: int, skipped: Counter[str], failed: Counter[str]) -> None:
    out.print(f"{verb}: {done}", highlight=False)
    out.print(f"skipped: {sum(skipped.values())}", highlight=False)
    for why, count in skipped.most_common():
        out.print(Text(f"  {count}: {why}"))
    out.print(f"failed: {sum(failed.values())}", highlight=False)
    for why, count in failed.most_common():
        out.print(Text(f"  {count}: {why}"))


__all__ = ["REPLAYABLE_REASONS", "deadletter_app", "parse_when"]
