"""``pairjudge worker --processes N``: N worker processes in one consumer group, kept running, behind one endpoint.

A worker judges on one core (Python), so a host or pod with more cores either runs more workers or leaves them
idle. This supervisor runs N ordinary workers (``python -m pairjudge.streams.cli worker --processes 1
--no-create-topics``) with the supervisor's own environment, changed only where they must differ:

- ``PAIRJUDGE_WORKER__DATA_DIR``: ``<data_dir>/proc-<i>``. Each worker locks its data directory
  (streams.worker.data_dir) and its RocksDB tables cannot be shared; a restarted process finds its own again.
- ``PAIRJUDGE_HEALTH__HOST``/``__PORT``: a free port on 127.0.0.1, chosen at every start, when the supervisor's
  health server is on (streams.worker.supervisor_health asks each worker there); off when it is off.
- ``PAIRJUDGE_WORKER__WEB_PORT``: ``web_port + i``, when Faust's web server is on.

Every other setting (the app id, so the consumer group; the judge; telemetry; logging) is the supervisor's.
The topics are created or checked once, by the command, before the supervisor starts.

A worker that exits is restarted after a backoff, or not, by its exit status (streams.worker.supervision):
status 2 (a start-up refusal) and 4 (a broken deploy) stop every worker and become the supervisor's own status.
SIGTERM or SIGINT stops every worker with SIGTERM (a worker's graceful stop), waits up to the workers'
``shutdown_grace_s`` plus ``SHUTDOWN_MARGIN_S``, then kills what is left. Each worker is asked by the kernel to
stop (SIGTERM) if the supervisor dies without stopping it, so no worker outlives it holding its partitions.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pairjudge.streams.config.settings import HealthSettings, Settings
from pairjudge.streams.worker.supervision import EXIT_UNCLEAN_STOP, Backoff, after_exit, shutdown_status
from pairjudge.streams.worker.supervisor_health import SupervisorHealth

log = logging.getLogger(__name__)

#: Beyond the workers' shutdown grace: the hand-back's settle time (streams.faust_compat.inflight.SETTLE_S), the last
#: commit and leaving the group. An orchestrator's own grace should exceed the sum by a few seconds (45 s for 30).
SHUTDOWN_MARGIN_S = 12.0


def process_data_dir(data_dir: Path, index: int) -> Path:
    """Worker process ``index``'s data directory under the configured one."""
    return data_dir / f"proc-{index}"


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now. The worker binds it a moment later; should another process take it first,
    the worker fails to start and is started again on another."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Launch:
    """How to start one worker process."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    #: Its health server's port on 127.0.0.1; None when health is off.
    health_port: int | None


#: Worker process ``i``'s launch, asked for at every start (a fresh health port each time).
Launcher = Callable[[int], Launch]


def worker_launcher(settings: Settings) -> Launcher:
    """Launches of ``pairjudge worker`` processes for ``settings`` (module doc: what differs between them)."""

    def launch(index: int) -> Launch:
        env = dict(os.environ)
        env.update(
            {
                "PAIRJUDGE_WORKER__PROCESSES": "1",
                "PAIRJUDGE_WORKER__DATA_DIR": str(process_data_dir(settings.worker.data_dir, index)),
                # --bootstrap, when the command was given one.
                "PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS": settings.kafka.bootstrap_servers,
            }
        )
        health_port = free_port() if settings.health.port else None
        env["PAIRJUDGE_HEALTH__HOST"] = "127.0.0.1"
        env["PAIRJUDGE_HEALTH__PORT"] = str(health_port or 0)
        if settings.worker.web_enabled:
            env["PAIRJUDGE_WORKER__WEB_PORT"] = str(settings.worker.web_port + index)
        argv = (sys.executable, "-m", "pairjudge.streams.cli", "worker", "--processes", "1", "--no-create-topics")
        return Launch(argv, env, health_port)

    return launch


# The kernel's "signal me when my parent dies" (prctl PR_SET_PDEATHSIG), set in the child between fork and exec.
# Resolved here, before any fork: the child then calls it without loading anything.
_PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def _stop_with_parent(parent: int) -> None:
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the call: nobody would ever stop this worker
        os._exit(1)


@dataclass
class Child:
    """One supervised worker process: its number, the process running now, and its history."""

    index: int
    proc: asyncio.subprocess.Process | None = None
    health_port: int | None = None
    #: Why it does not run; None while it does.
    waiting: str | None = "starting"
    restarts: int = 0
    started_at: float = 0.0
    #: The exit statuses of its processes, in order.
    statuses: list[int] = field(default_factory=list)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.returncode is None else None


class Supervisor:
    """Keeps ``count`` worker processes running until a signal or an exit status says to stop (module doc)."""

    def __init__(
        self,
        count: int,
        launcher: Launcher,
        *,
        grace_s: float,
        margin_s: float = SHUTDOWN_MARGIN_S,
        health: HealthSettings | None = None,
        backoff: Callable[[], Backoff] = Backoff,
    ) -> None:
        self.children = [Child(i) for i in range(count)]
        self.launcher = launcher
        #: How long the workers may take to stop after SIGTERM before they are killed.
        self.stop_timeout_s = grace_s + margin_s
        self.health = health
        self.backoff = backoff
        self.stopping = False
        #: The status a worker's exit decided for the supervisor (2 or 4); None when a signal stops it.
        self.stop_with: int | None = None
        self._stop = asyncio.Event()

    def request_stop(self, why: str, stop_with: int | None = None) -> None:
        """Stop every worker (once): from a signal, or from a worker's exit status."""
        if self.stopping:
            log.warning("supervisor: %s; already stopping", why)
            return
        log.warning("supervisor: %s; stopping %d worker processes", why, len(self.children))
        self.stopping = True
        self.stop_with = stop_with
        self._stop.set()

    async def run(self) -> int:
        """Run until stopped; the supervisor's exit status (streams.worker.supervision.shutdown_status)."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop, f"got {signal.Signals(sig).name}")
        server = (
            SupervisorHealth(self.health, self.children, lambda: self.stopping)
            if self.health is not None and self.health.port
            else None
        )
        keepers: list[asyncio.Task[None]] = []
        try:
            if server is not None:
                await server.start()  # before the workers: /readyz says why not yet from the first probe
            keepers = [asyncio.create_task(self._keep(child)) for child in self.children]
            await self._stop.wait()
            await self._stop_all(keepers)
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            for keeper in keepers:
                keeper.cancel()
            await asyncio.gather(*keepers, return_exceptions=True)
            if server is not None:
                await server.stop()
        # The last process of each worker that ran when the stop began says how it ended.
        last = [child.statuses[-1] for child in self.children if child.statuses and child.waiting == "stopped"]
        status = shutdown_status(last, stop_with=self.stop_with)
        log.warning("supervisor: every worker process has exited; exit status %d", status)
        return status

    async def _keep(self, child: Child) -> None:
        """Start the child, and again each time it exits, until the supervisor stops."""
        try:
            await self._keep_running(child)
        except Exception as exc:
            # The supervisor's own failure (the interpreter cannot be started, say): nothing keeps this worker
            # running any more, so nothing keeps the others either.
            log.exception("supervising worker process %d failed", child.index)
            child.waiting = f"not supervised: {exc}"
            self.request_stop(f"supervising worker process {child.index} failed", EXIT_UNCLEAN_STOP)

    async def _keep_running(self, child: Child) -> None:
        backoff = self.backoff()
        while not self.stopping:
            await self._start(child)
            assert child.proc is not None
            status = await child.proc.wait()
            child.statuses.append(status)
            decision = after_exit(status, stopping=self.stopping)
            if self.stopping:
                child.waiting = "stopped"
                return
            log.warning("worker process %d (pid %d): %s", child.index, child.proc.pid, decision.why)
            if decision.stop_with is not None:
                child.waiting = f"stopped: {decision.why}"
                self.request_stop(f"worker process {child.index}: {decision.why}", decision.stop_with)
                return
            delay = backoff.delay(time.monotonic() - child.started_at)
            child.waiting = f"restarting in {delay:g} s after {decision.why}"
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)
            if not self.stopping:
                child.restarts += 1

    async def _start(self, child: Child) -> None:
        launch = self.launcher(child.index)
        child.health_port = launch.health_port
        child.started_at = time.monotonic()
        child.proc = await asyncio.create_subprocess_exec(
            *launch.argv,
            env=dict(launch.env),
            stdin=asyncio.subprocess.DEVNULL,
            preexec_fn=functools.partial(_stop_with_parent, os.getpid()),
        )
        child.waiting = None
        log.warning("worker process %d started (pid %d)", child.index, child.proc.pid)
        if self.stopping:  # the stop came while it was being started: it got no signal yet
            child.proc.send_signal(signal.SIGTERM)

    async def _stop_all(self, keepers: list[asyncio.Task[None]]) -> None:
        """SIGTERM to every running worker; SIGKILL to those still running after the grace and the margin."""
        for child in self.children:
            if child.pid is not None:
                assert child.proc is not None
                with contextlib.suppress(ProcessLookupError):
                    child.proc.send_signal(signal.SIGTERM)
        timeout = self.stop_timeout_s
        _, pending = await asyncio.wait(keepers, timeout=timeout)
        if not pending:
            return
        for child in self.children:
            if child.pid is not None:
                assert child.proc is not None
                log.warning(
                    "worker process %d (pid %d) still ran %g s after SIGTERM: killed", child.index, child.pid, timeout
                )
                with contextlib.suppress(ProcessLookupError):
                    child.proc.kill()
        await asyncio.wait(pending)


def run_supervisor(settings: Settings, count: int) -> int:
    """Supervise ``count`` workers configured by ``settings``; the exit status for the command."""
    supervisor = Supervisor(
        count,
        worker_launcher(settings),
        grace_s=settings.worker.shutdown_grace_s,
        health=settings.health,
    )
    return asyncio.run(supervisor.run())
