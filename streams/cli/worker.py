"""``pairjudge worker``: one judging worker (the judge and tie-break agents, the audit, the scoreboard), or N of them
under a supervisor (``--processes``, streams.worker.supervisor)."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Annotated, NoReturn

import typer
from rich.markup import escape

from pairjudge.streams.cli.base import (
    Bootstrap,
    app,
    console,
    settings_for,
)
from pairjudge.streams.cli.topics import ensure_topics
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.faust_compat.runtime import UnverifiedRuntime, check_runtime

log = logging.getLogger("pairjudge.streams.cli")

#: The exit status of a worker that refuses an unverified Faust, mode or aiokafka: a start-up refusal, like a
#: broker or topic problem (``ensure_topics``), which a supervisor must not restart into a loop of.
EXIT_UNVERIFIED_RUNTIME = 2
#: The exit status of a worker whose data directory another live worker holds: a start-up refusal too.
EXIT_DATA_DIR_IN_USE = 2


def refuse_unverified_runtime(settings: Settings) -> None:
    """Exit with status 2 and the reason when the stream runtime is not the verified one (and not allowed).

    First thing, before the broker is contacted or Faust is imported: the overrides in
    streams.faust_compat are only known to be called on the verified versions."""
    try:
        check_runtime(allow=settings.worker.allow_unverified_runtime)
    except UnverifiedRuntime as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(code=EXIT_UNVERIFIED_RUNTIME) from None


Processes = Annotated[
    int | None,
    typer.Option(
        "--processes",
        min=1,
        max=64,
        help=(
            "Worker processes to run, in one consumer group (default: PAIRJUDGE_WORKER__PROCESSES, 1). Above 1 the "
            "command supervises them: each gets <data_dir>/proc-<i>, a worker that fails is restarted, and one "
            "health endpoint answers for all."
        ),
    ),
]


@app.command()
def worker(
    bootstrap: Bootstrap = None,
    create_topics: Annotated[bool, typer.Option(help="Create the pairjudge topics first (idempotent).")] = True,
    processes: Processes = None,
) -> None:
    """Run a judging worker (judge and tie-break agents), or several under one supervisor (--processes).

    Start more, on this host or others, for more partitions."""
    settings = settings_for(bootstrap)
    count = processes or settings.worker.processes
    if count > 1:
        supervise(settings, count, create_topics=create_topics)
    run_worker(settings, create_topics=create_topics)


def supervise(settings: Settings, count: int, *, create_topics: bool) -> NoReturn:
    """``count`` worker processes under one supervisor (streams.worker.supervisor); exits with its status."""
    from pairjudge.streams.worker.supervisor import run_supervisor

    # Not the quiet log filter: it would fold the supervisor's lines about different processes into one
    # (it groups by message template), and the supervisor does not talk to the broker once it runs.
    logging.basicConfig(level=settings.worker.log_level)
    # Refused here once rather than by each worker in turn, with the same status 2.
    refuse_unverified_runtime(settings)
    # Once for every worker, which then only check them (--no-create-topics).
    ensure_topics(settings, create=create_topics, what="worker start-up")
    # The workers' data directories are proc-<i> inside this one; holding it keeps a second supervisor (or a
    # single worker) from starting on the same directories, with the same message and status as a worker's.
    data_dir_lock = hold_data_dir(settings)
    try:
        status = run_supervisor(settings, count)
    finally:
        os.close(data_dir_lock)
    raise typer.Exit(code=status)


def hold_data_dir(settings: Settings) -> int:
    """The data directory made owner-only and locked (its descriptor), or exit with status 2 and the reason
    when another live process holds it."""
    from pairjudge.streams.security.files import private_dir
    from pairjudge.streams.worker.data_dir import DataDirInUse, lock_data_dir

    private_dir(settings.worker.data_dir)
    try:
        return lock_data_dir(settings.worker.data_dir)
    except DataDirInUse as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(code=EXIT_DATA_DIR_IN_USE) from None


def run_worker(settings: Settings, *, create_topics: bool) -> None:
    """One worker in this process: the Faust app, its health server and its recovery watch."""
    from pairjudge.streams.app import create_app
    from pairjudge.streams.faust_compat.recovery_watch import EXIT_RECOVERY_STALLED, RecoveryWatch
    from pairjudge.streams.faust_compat.worker import QuietWorker
    from pairjudge.streams.telemetry.logs import install_quiet_logging
    from pairjudge.streams.worker.error_budget import BROKEN_DEPLOY_EXIT
    from pairjudge.streams.worker.health_server import HealthServer

    logging.basicConfig(level=settings.worker.log_level)
    refuse_unverified_runtime(settings)
    # A broker outage makes aiokafka and Faust log the same errors hundreds of times a second:
    # repeats collapse to one line per message per window, with counts (streams/telemetry/logs.py).
    install_quiet_logging()
    # Topics first (or, with --no-create-topics, a check that they exist): on a secured cluster this is
    # where a wrong password, a refused certificate or a missing ACL stops the worker, with a clear
    # message and exit code 2, before Faust starts (which would retry for ever).
    ensure_topics(settings, create=create_topics, what="worker start-up")
    # Faust keeps its tables (pairs' outcomes, the audit's join) under the data directory: owner-only. One
    # worker per data directory: a second one would wait on the table databases' locks and crash.
    data_dir_lock = hold_data_dir(settings)
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

    async def started() -> None:
        # Before the app starts: /livez answers and /readyz says why not yet during start-up.
        if health_server is not None:
            await health_server.start()
        if watch is not None:
            watch_task.append(asyncio.ensure_future(watch.run()))

    async def stopped() -> None:
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

    faust_worker = QuietWorker(
        wired.faust_app,
        loglevel=settings.worker.log_level.lower(),
        quiet=True,
        on_started=started,
        on_stopped=stopped,
    )
    try:
        faust_worker.execute_from_commandline()
    except SystemExit:
        if watch is not None and watch.stalled is not None:
            raise SystemExit(EXIT_RECOVERY_STALLED) from None
        if wired.delivery is not None and wired.delivery.stopped is not None:
            # Stopped over an input (a run of bugs: a broken deploy): a status of its own for supervisors and
            # alerts, never 0, whatever Faust's own exit made of the crash.
            log.critical("worker stopped: %s", wired.delivery.stopped)
            raise SystemExit(BROKEN_DEPLOY_EXIT) from None
        raise
    finally:
        for task in watch_task:
            task.cancel()
        wired.telemetry.shutdown()
        os.close(data_dir_lock)
