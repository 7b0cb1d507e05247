"""The ``pairjudge`` command line."""

from __future__ import annotations

import asyncio
import logging
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

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
control_app = typer.Typer(no_args_is_help=True, help="Live settings on pairjudge.control, applied by every worker.")
app.add_typer(control_app, name="control")
labels_app = typer.Typer(no_args_is_help=True, help="Human labels on pairjudge.labels.")
app.add_typer(labels_app, name="labels")
canary_app = typer.Typer(no_args_is_help=True, help="Canary pairs: human-labelled pairs judged on a schedule.")
app.add_typer(canary_app, name="canary")
topics_app = typer.Typer(no_args_is_help=True, help="The pairjudge topics on the cluster: create or check them.")
app.add_typer(topics_app, name="topics")
review_app = typer.Typer(
    help="The human-review service: a queue of review requests with a web UI.", no_args_is_help=True
)
app.add_typer(review_app, name="review")
console = Console(stderr=True)
log = logging.getLogger("pairjudge.streams.cli")

Bootstrap = Annotated[
    str | None,
    typer.Option("--bootstrap", "-b", help="Kafka bootstrap servers (default: PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS)."),
]


#: The settings the running command read (for main's error report: the Kafka it was talking to).
_used: list[Settings] = []


def _settings(bootstrap: str | None = None) -> Settings:
    base = load_settings()
    if bootstrap:
        base = base.model_copy(update={"kafka": base.kafka.model_copy(update={"bootstrap_servers": bootstrap})})
    _used[:] = [base]
    return base


@app.command()
def demo(
    bootstrap: Bootstrap = None,
    out: Annotated[Path, typer.Option(help="Where to write the outcomes (JSONL).")] = Path("out/demo-outcomes.jsonl"),
    pairs: Annotated[Path | None, typer.Option(help="Pairs to send (JSONL); default: the built-in sample set.")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for every pair's outcome.")] = 180.0,
) -> None:
    """The main job on embedded defaults: start Tansu and a worker, judge the sample pairs, print a summary."""
    from pairjudge.streams.cli.demo import run_demo

    result = asyncio.run(run_demo(_settings(), bootstrap=bootstrap, out_path=out, pairs_path=pairs, timeout=timeout))
    raise typer.Exit(code=0 if result.complete else 1)


@app.command()
def worker(
    bootstrap: Bootstrap = None,
    create_topics: Annotated[bool, typer.Option(help="Create the pairjudge topics first (idempotent).")] = True,
) -> None:
    """Run a judging worker (judge and tie-break agents). Start more for more partitions."""
    from faust import Worker

    from pairjudge.streams.app import create_app
    from pairjudge.streams.faust_compat.recovery_watch import EXIT_RECOVERY_STALLED, RecoveryWatch
    from pairjudge.streams.security.files import private_dir
    from pairjudge.streams.telemetry.logs import install_quiet_logging
    from pairjudge.streams.worker.health_server import HealthServer

    class QuietWorker(Worker):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # No terminal spinner. At WARNING and above Faust would add a handler that spins on every
            # record and set the root logger to DEBUG for it, so every debug line of aiokafka and Faust
            # (several per message produced) was formatted only to turn the spinner: 3-5% of a busy
            # worker's CPU, for a progress wheel nobody sees in a container's log.
            self.spinner = None

        def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
            super().on_setup_root_logger(logger, level)
            # Faust has just replaced the root handlers with its own: filter those too.
            install_quiet_logging()

        async def on_execute(self) -> None:
            await super().on_execute()
            # Before the app starts: /livez answers and /readyz says why not yet during start-up.
            if health_server is not None:
                await health_server.start()
            if watch is not None:
                watch_task.append(asyncio.ensure_future(watch.run()))

        async def on_shutdown(self) -> None:
            await super().on_shutdown()
            # Runs once the app and its agents have stopped, on the loop that opened them: the judges'
            # HTTP pools, the response cache (its queued writes flushed) and the alert webhook close
            # here, instead of being dropped with the loop ("Unclosed client session").
            try:
                await wired.aclose()
            except Exception:
                log.exception("closing the judges and the alert webhook failed")
            # Last: probes keep getting their 503 until the very end.
            if health_server is not None:
                await health_server.stop()

    settings = _settings(bootstrap)
    logging.basicConfig(level=settings.worker.log_level)
    # A broker outage makes aiokafka and Faust log the same errors hundreds of times a second:
    # repeats collapse to one line per message per window, with counts (streams/telemetry/logs.py).
    install_quiet_logging()
    # Topics first (or, with --no-create-topics, a check that they exist): on a secured cluster this is
    # where a wrong password, a refused certificate or a missing ACL stops the worker, with a clear
    # message and exit code 2, before Faust starts (which would retry for ever).
    _ensure_topics(settings, create=create_topics, what="worker start-up")
    # Faust keeps its tables (pairs' outcomes, the audit's join) under the data directory: owner-only.
    private_dir(settings.worker.data_dir)
    wired = create_app(settings)
    health_server = (
        HealthServer(settings.health, wired.health, wired.metrics)
        if settings.health.port and wired.health is not None
        else None
    )
    # A table recovery that stops making progress stops the worker (exit status 3) for its supervisor to
    # restart: the group then rebalances, which has always recovered (streams/faust_compat/recovery_watch.py).
    watch = (
        RecoveryWatch(
            wired.faust_app.tables.recovery,  # type: ignore[attr-defined]  # TableManager has it; its protocol not
            settings.worker.recovery_stall_s,
            on_stalled=wired.health.mark_stalled if wired.health is not None else lambda reason: None,
            hard_exit_after_s=settings.worker.shutdown_grace_s + 30,
        )
        if settings.worker.recovery_stall_s > 0
        else None
    )
    watch_task: list[asyncio.Future[None]] = []
    try:
        QuietWorker(wired.faust_app, loglevel=settings.worker.log_level.lower(), quiet=True).execute_from_commandline()
    except SystemExit:
        if watch is not None and watch.stalled is not None:
            raise SystemExit(EXIT_RECOVERY_STALLED) from None
        raise
    finally:
        for task in watch_task:
            task.cancel()
        wired.telemetry.shutdown()


def _ensure_topics(settings: Settings, *, create: bool, what: str) -> int:
    """Create (idempotent) or check every pairjudge topic; exit 2 with the broker's reason on failure.

    On a secured cluster this is where a wrong password, a refused certificate or a missing ACL shows,
    with a clear message, instead of a Faust worker retrying for ever.
    """
    from aiokafka.errors import KafkaError
    from rich.markup import escape

    from pairjudge.streams.kafka.admin import BrokerError, check_topics, create_topics
    from pairjudge.streams.kafka.topics import topic_specs
    from pairjudge.streams.security.kafka_clients import client_config, explain

    config = client_config(settings.kafka)
    specs = topic_specs(settings)
    try:
        asyncio.run((create_topics if create else check_topics)(config, specs))
    except (BrokerError, KafkaError, OSError) as exc:
        console.print(f"[red]error:[/red] {escape(asyncio.run(explain(exc, config, what=what)))}")
        raise typer.Exit(code=2) from None
    return len(specs)


@topics_app.command("create")
def topics_create(bootstrap: Bootstrap = None) -> None:
    """Create every pairjudge topic (and the tables' changelogs) with its partition count, then exit.

    Idempotent: existing topics are kept. A topic that exists with another partition count fails the
    command, naming it (partitions cap a consumer group's workers, so the count is chosen once).
    Deployments run this once before the workers, which then start with ``--no-create-topics``.
    """
    settings = _settings(bootstrap)
    count = _ensure_topics(settings, create=True, what="topic creation")
    console.print(f"{count} topics ready on {settings.kafka.bootstrap_servers}")


@topics_app.command("check")
def topics_check(bootstrap: Bootstrap = None) -> None:
    """Exit 0 if every pairjudge topic exists with its partition count, 2 (naming what is wrong) if not."""
    settings = _settings(bootstrap)
    count = _ensure_topics(settings, create=False, what="topic check")
    console.print(f"{count} topics present on {settings.kafka.bootstrap_servers}")


@app.command()
def send(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="JSONL, one CandidatePair per line.")],
    bootstrap: Bootstrap = None,
) -> None:
    """Send pairs to the pairs topic, as they are: the worker dead-letters malformed ones."""
    from pairjudge.streams.kafka.producer import send_file

    sent = asyncio.run(send_file(_settings(bootstrap), file, console=console))
    console.print(f"sent {sent} events to {_settings(bootstrap).topics.name('pairs')}")


@app.command()
def evaluate(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="JSONL, one CandidatePair per line.")],
    out: Annotated[Path | None, typer.Option(help="Write each pair's outcome here (JSONL).")] = None,
    baselines: Annotated[
        bool | None,
        typer.Option(
            "--baselines/--no-baselines",
            help="Score 'longer wins', a seeded coin flip and 'always TIE' beside the judge "
            "(default: on when the file has human labels).",
        ),
    ] = None,
) -> None:
    """Judge a file with the same core and no Kafka; report agreement with any human labels.

    Exits 1 when any pair could not be judged (rejected or an error); --out names each one's reason."""
    from pairjudge.streams.cli.evaluate import run_evaluate

    report = asyncio.run(run_evaluate(_settings(), file, out_path=out, console=Console(), baselines=baselines))
    # Any pair not judged (rejected input or an error) fails the command: a CI step must notice.
    raise typer.Exit(code=1 if report.failed else 0)


@control_app.command("set")
def control_set(
    key: Annotated[str, typer.Argument(help="tiebreak_enabled, tiebreak_confidence_threshold, ...")],
    value: Annotated[str, typer.Argument(help="true/false, or a number")],
    bootstrap: Bootstrap = None,
    by: Annotated[str, typer.Option(help="Who made the change, for the record.")] = "",
) -> None:
    """Change a setting on every running worker, without a redeploy."""
    from pairjudge.streams.control.live import parse_value, publish_control

    settings = _settings(bootstrap)
    asyncio.run(publish_control(settings, key, parse_value(key, value), by))
    console.print(f"{settings.topics.name('control')}: {key} = {value}")


@control_app.command("pause")
def control_pause(
    by: Annotated[str, typer.Option(help="Who paused, and why: kept on the control topic.")],
    bootstrap: Bootstrap = None,
) -> None:
    """Pause automatic decisions on every worker (the kappa guard): every pair goes to human review."""
    from pairjudge.streams.control.live import publish_control

    settings = _settings(bootstrap)
    asyncio.run(publish_control(settings, "kappa_guard_tripped", True, by))
    console.print(f"{settings.topics.name('control')}: automatic decisions paused by {by}")


@control_app.command("resume")
def control_resume(
    by: Annotated[str, typer.Option(help="Who resumed: a person, kept on the control topic.")],
    bootstrap: Bootstrap = None,
) -> None:
    """Resume automatic decisions after the kappa guard paused them (seed 001: only a person does this)."""
    from pairjudge.streams.control.live import publish_control

    settings = _settings(bootstrap)
    # An explicit false, not a tombstone: the record of who resumed stays on the compacted topic.
    asyncio.run(publish_control(settings, "kappa_guard_tripped", False, by))
    console.print(f"{settings.topics.name('control')}: automatic decisions resumed by {by}")


@control_app.command("clear")
def control_clear(key: Annotated[str, typer.Argument()], bootstrap: Bootstrap = None) -> None:
    """Return a setting to its configured value on every worker (writes a tombstone)."""
    from pairjudge.streams.control.live import publish_control

    settings = _settings(bootstrap)
    asyncio.run(publish_control(settings, key, None, ""))
    console.print(f"{settings.topics.name('control')}: {key} cleared")


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

    The formats are in the README ("Importing human labels"). Exit codes:

    0: every line was a valid label, or --allow-bad was given.

    1: some lines were dead-lettered, with a reason each; the valid labels were still published.

    2: the file cannot be read, or its format or CSV header is wrong; nothing was published.

    3: the broker failed or the topics are missing; some labels may have been published.
    """
    from aiokafka.errors import KafkaError
    from rich.markup import escape

    from pairjudge.streams.audit.label_files import LabelFileError, LabelFormat, detect_format, parse_labels
    from pairjudge.streams.audit.label_import import publish, summarise
    from pairjudge.streams.kafka.admin import BrokerError

    out = Console()
    formats: dict[str, LabelFormat] = {"jsonl": "jsonl", "csv": "csv"}
    if file_format is not None and file_format not in formats:
        console.print(f"[red]error:[/red] --format is jsonl or csv, not {escape(repr(file_format))}")
        raise typer.Exit(code=2)
    try:
        fmt = detect_format(file, formats[file_format] if file_format else None)
        data = file.read_bytes()
        parsed = parse_labels(data, fmt)
    except OSError as exc:
        console.print(f"[red]error:[/red] cannot read {escape(str(file))}: {escape(str(exc.strerror or exc))}")
        raise typer.Exit(code=2) from None
    except LabelFileError as exc:
        console.print(f"[red]error:[/red] {escape(str(file))}: {escape(str(exc))}")
        raise typer.Exit(code=2) from None
    settings = _settings(bootstrap)
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


@schemas_app.command("export")
def schemas_export(directory: Annotated[Path, typer.Argument(help="Directory to write JSON Schemas into.")]) -> None:
    """Write every event and reply contract as JSON Schema."""
    from pairjudge.schemas.export import export_json_schemas

    for path in export_json_schemas(directory):
        console.print(str(path))


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

    try:
        pairs = load_canaries(file)
    except (OSError, CanaryFileError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(code=2) from None
    settings = _settings(bootstrap)
    sent = asyncio.run(send_rounds(settings, pairs, every_s=every, rounds=rounds))
    Console().print(f"sent {sent} canary pairs to {settings.topics.name('pairs')}")


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
        console.print("[red]error:[/red] the report needs matplotlib: pip install 'pairjudge[report]'")
        raise typer.Exit(code=2) from None

    from pairjudge.streams.audit.report import parse_audit_events, write_report

    if source is not None:
        try:
            lines: list[bytes] = source.read_bytes().splitlines()
        except OSError as exc:
            console.print(f"[red]error:[/red] cannot read {escape(str(source))}: {escape(str(exc.strerror or exc))}")
            raise typer.Exit(code=2) from None
    else:
        from pairjudge.streams.kafka.collector import read_topic

        settings = _settings(bootstrap)
        records = asyncio.run(read_topic(settings, "audit", timeout=10))
        records += asyncio.run(read_topic(settings, "scores", timeout=10))
        lines = [value for _, value in records if value]
    events = parse_audit_events(lines)
    write_report(events, out)
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
    code, text = asyncio.run(gate_status(_settings(bootstrap), experiment, chosen))
    print(text)
    raise typer.Exit(code=code)


@review_app.command("serve")
def review_serve(bootstrap: Bootstrap = None) -> None:
    """Consume pairjudge.review into the queue and serve the review UI (127.0.0.1:8088 by default)."""
    from pairjudge.streams.review.service import serve

    settings = _settings(bootstrap)
    console.print(f"review UI on http://{settings.review.host}:{settings.review.port}/")
    asyncio.run(serve(settings))


@review_app.command("hash-password")
def review_hash_password() -> None:
    """Read a password (twice, not echoed) and print its scrypt hash for PAIRJUDGE_REVIEW__USERS."""
    from pairjudge.streams.review.auth import hash_password

    password = typer.prompt("password", hide_input=True, confirmation_prompt=True)
    print(hash_password(password))


def main() -> None:
    from aiokafka.errors import KafkaError

    from pairjudge.streams.kafka.admin import BrokerError

    try:
        app()
    except ValueError as exc:
        # Settings errors name the variable, never its value.
        console.print(f"[red]error:[/red] {exc}")
        sys.exit(2)
    except (KafkaError, BrokerError) as exc:
        # A refused ACL, password or certificate: said plainly (streams.security.kafka_clients.explain), never a secret.
        from rich.markup import escape

        from pairjudge.streams.security.kafka_clients import client_config, explain

        settings = _used[0] if _used else load_settings()
        console.print(f"[red]error:[/red] {escape(asyncio.run(explain(exc, client_config(settings.kafka))))}")
        sys.exit(3)


if __name__ == "__main__":
    main()


__all__ = ["app", "main"]
