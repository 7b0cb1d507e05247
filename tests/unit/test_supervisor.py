"""The supervisor of ``pairjudge worker --processes N`` with real processes and real health servers, no Kafka.

The worker processes here are small stand-ins (``FAKE_WORKER``: exit with a status, run until SIGTERM, or ignore
it), so that what the supervisor does with processes (restart, stop everything, forward SIGTERM, kill after
the grace, take its workers down when it dies) is checked in seconds. The health endpoint is checked against
real worker health servers (streams.worker.health_server) in this process. The whole, with real workers on
real Kafka, is tests/integration/test_worker_processes_kafka.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pairjudge.streams.config.settings import HealthSettings, Settings, TelemetrySettings
from pairjudge.streams.telemetry.tracing import Telemetry
from pairjudge.streams.worker.health_server import HealthServer, PrometheusMetrics, WorkerHealth
from pairjudge.streams.worker.supervision import EXIT_UNCLEAN_STOP, Backoff
from pairjudge.streams.worker.supervisor import Launch, Supervisor, worker_launcher
from pairjudge.streams.worker.supervisor_health import SupervisorHealth
from tests.fixtures.health import free_port, get

REPO = Path(__file__).resolve().parents[2]

#: A stand-in worker: ``python -c FAKE_WORKER MODE INDEX WORK_DIR``. It appends its pid to ``starts-<index>``;
#: ``exit:N`` exits N at once, ``fail-first:N`` exits N on its first start only, ``ignore-term`` ignores SIGTERM,
#: and otherwise it runs until SIGTERM, recording the signal in ``stopped-<index>-<pid>``.
FAKE_WORKER = r"""
import os, signal, sys, time
from pathlib import Path
mode, index, work = sys.argv[1], sys.argv[2], Path(sys.argv[3])
starts = work / f"starts-{index}"
with starts.open("a") as out:
    out.write(f"{os.getpid()}\n")
first = len(starts.read_text().split()) == 1
if mode.startswith("exit:"):
    sys.exit(int(mode.split(":")[1]))
if mode.startswith("fail-first:") and first:
    sys.exit(int(mode.split(":")[1]))
def stop(signum, frame):
    (work / f"stopped-{index}-{os.getpid()}").write_text(signal.Signals(signum).name)
    sys.exit(0)
signal.signal(signal.SIGTERM, signal.SIG_IGN if mode == "ignore-term" else stop)
(work / f"running-{index}-{os.getpid()}").touch()
while True:
    time.sleep(0.05)
"""


def fake_launcher(modes: Sequence[str], work: Path) -> Callable[[int], Launch]:
    def launch(index: int) -> Launch:
        return Launch((sys.executable, "-c", FAKE_WORKER, modes[index], str(index), str(work)), dict(os.environ), None)

    return launch


def quick_backoff() -> Backoff:
    return Backoff(first_s=0.2, max_s=1.0, stable_s=60.0)


async def until(predicate: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def starts(work: Path, index: int) -> list[int]:
    path = work / f"starts-{index}"
    return [int(pid) for pid in path.read_text().split()] if path.exists() else []


def running(work: Path, index: int) -> list[int]:
    return [int(p.name.rsplit("-", 1)[1]) for p in work.glob(f"running-{index}-*")]


# --- exit statuses, restarts, stopping -------------------------------------------------------------------


async def test_a_start_up_refusal_stops_every_worker_and_is_not_restarted(tmp_path: Path) -> None:
    supervisor = Supervisor(2, fake_launcher(["run", "exit:2"], tmp_path), grace_s=5, backoff=quick_backoff)
    status = await asyncio.wait_for(supervisor.run(), 30)
    assert status == 2
    other, refused = supervisor.children
    assert refused.statuses == [2]
    assert refused.restarts == 0
    assert len(starts(tmp_path, 1)) == 1  # started once, never again
    # The other got SIGTERM: 0 from its handler, or the signal itself if it came before the handler was set.
    assert other.statuses in ([0], [-signal.SIGTERM]), other.statuses
    assert other.restarts == 0


async def test_a_broken_deploy_stops_every_worker_with_status_4(tmp_path: Path) -> None:
    supervisor = Supervisor(2, fake_launcher(["run", "fail-first:4"], tmp_path), grace_s=5, backoff=quick_backoff)
    status = await asyncio.wait_for(supervisor.run(), 30)
    assert status == 4
    assert len(starts(tmp_path, 1)) == 1
    assert supervisor.children[0].restarts == 0


async def test_crashed_stalled_and_killed_workers_are_restarted(tmp_path: Path) -> None:
    """Exit 1 (a crash) and 3 (a stalled recovery) on the first start, and a SIGKILL from outside: each one
    is started again after the backoff; then a stop ends every worker cleanly, status 0."""
    supervisor = Supervisor(
        3, fake_launcher(["fail-first:1", "fail-first:3", "run"], tmp_path), grace_s=5, backoff=quick_backoff
    )
    task = asyncio.create_task(supervisor.run())
    try:
        crashed, stalled, killed = supervisor.children
        assert await until(lambda: bool(running(tmp_path, 2)))
        os.kill(running(tmp_path, 2)[0], signal.SIGKILL)
        assert await until(lambda: all(c.restarts == 1 and c.pid is not None for c in supervisor.children)), [
            (c.statuses, c.waiting) for c in supervisor.children
        ]
        assert await until(lambda: all(len(running(tmp_path, i)) == 1 + (i == 2) for i in range(3)))
        assert (crashed.statuses, stalled.statuses, killed.statuses) == ([1], [3], [-signal.SIGKILL])
        # The restart came after the backoff, not at once.
        for i in range(3):
            assert len(starts(tmp_path, i)) == 2
        supervisor.request_stop("test")
        assert await asyncio.wait_for(task, 30) == 0
    finally:
        if not task.done():
            supervisor.request_stop("test failed")
            await asyncio.wait_for(task, 30)
    for i, child in enumerate(supervisor.children):
        pid = starts(tmp_path, i)[-1]
        assert (tmp_path / f"stopped-{i}-{pid}").read_text() == "SIGTERM"
        assert child.statuses[-1] == 0


async def test_the_restart_waits_out_the_backoff(tmp_path: Path) -> None:
    backoff = lambda: Backoff(first_s=1.5, max_s=1.5)  # noqa: E731
    supervisor = Supervisor(1, fake_launcher(["fail-first:1"], tmp_path), grace_s=5, backoff=backoff)
    task = asyncio.create_task(supervisor.run())
    try:
        assert await until(lambda: supervisor.children[0].statuses == [1])
        failed_at = time.monotonic()
        assert supervisor.children[0].waiting == "restarting in 1.5 s after exit status 1 (crashed)"
        assert await until(lambda: supervisor.children[0].pid is not None)
        assert time.monotonic() - failed_at >= 1.3
    finally:
        supervisor.request_stop("test")
        assert await asyncio.wait_for(task, 30) == 0


async def test_workers_still_running_after_the_grace_are_killed(tmp_path: Path) -> None:
    supervisor = Supervisor(1, fake_launcher(["ignore-term"], tmp_path), grace_s=0.5, margin_s=0.5)
    task = asyncio.create_task(supervisor.run())
    assert await until(lambda: bool(running(tmp_path, 0)))
    began = time.monotonic()
    supervisor.request_stop("test")
    assert await asyncio.wait_for(task, 30) == EXIT_UNCLEAN_STOP
    assert 0.9 <= time.monotonic() - began < 10
    assert supervisor.children[0].statuses == [-signal.SIGKILL]


SUPERVISOR_SCRIPT = """
import asyncio, os, sys
from pairjudge.streams.worker.supervisor import Launch, Supervisor
fake, work = sys.argv[1], sys.argv[2]
launch = lambda i: Launch((sys.executable, "-c", fake, "run", str(i), work), dict(os.environ), None)
asyncio.run(Supervisor(1, launch, grace_s=5).run())
"""


def test_workers_are_stopped_when_their_supervisor_is_killed(tmp_path: Path) -> None:
    """A SIGKILLed supervisor cannot stop its workers; the kernel sends them SIGTERM (no orphan keeps partitions)."""
    proc = subprocess.Popen([sys.executable, "-c", SUPERVISOR_SCRIPT, FAKE_WORKER, str(tmp_path)], cwd=REPO)
    try:
        deadline = time.monotonic() + 30
        while not running(tmp_path, 0) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        (pid,) = running(tmp_path, 0)
        proc.kill()
        proc.wait(10)
        stopped = tmp_path / f"stopped-0-{pid}"
        deadline = time.monotonic() + 10
        while not stopped.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stopped.read_text() == "SIGTERM"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


# --- what each worker process is started with ---------------------------------------------------------------


def test_each_worker_gets_its_data_dir_health_port_and_web_port(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in [n for n in os.environ if n.startswith("PAIRJUDGE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PAIRJUDGE_WORKER__APP_ID", "pairjudge-shared")
    monkeypatch.setenv("PAIRJUDGE_WORKER__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("PAIRJUDGE_WORKER__PROCESSES", "2")
    monkeypatch.setenv("PAIRJUDGE_WORKER__WEB_ENABLED", "true")
    monkeypatch.setenv("PAIRJUDGE_WORKER__WEB_PORT", "7000")
    monkeypatch.setenv("PAIRJUDGE_HEALTH__HOST", "0.0.0.0")
    monkeypatch.setenv("PAIRJUDGE_HEALTH__PORT", "9465")
    monkeypatch.setenv("PAIRJUDGE_TELEMETRY__SERVICE_NAME", "pairjudge-host-a")
    settings = Settings(kafka={"bootstrap_servers": "broker-from-the-flag:9092"})
    launch = worker_launcher(settings)
    loaded = []
    for index in range(2):
        started = launch(index)
        assert started.argv[1:] == ("-m", "pairjudge.streams.cli", "worker", "--processes", "1", "--no-create-topics")
        for name, value in started.env.items():
            if name.startswith("PAIRJUDGE_"):
                monkeypatch.setenv(name, value)
        child = Settings()
        assert (child.health.host, child.health.port) == ("127.0.0.1", started.health_port)
        loaded.append(child)
    zero, one = loaded
    assert {s.worker.app_id for s in loaded} == {"pairjudge-shared"}  # one consumer group
    assert {s.telemetry.service_name for s in loaded} == {"pairjudge-host-a"}  # the rest as the supervisor's
    assert {s.kafka.bootstrap_servers for s in loaded} == {"broker-from-the-flag:9092"}
    assert (zero.worker.data_dir, one.worker.data_dir) == (tmp_path / "data" / "proc-0", tmp_path / "data" / "proc-1")
    assert (zero.worker.web_port, one.worker.web_port) == (7000, 7001)
    assert zero.health.port != one.health.port
    assert {s.worker.processes for s in loaded} == {1}
    # Health off for the supervisor: off for its workers too (no port is chosen, no metrics are collected).
    quiet = worker_launcher(settings.model_copy(update={"health": HealthSettings(port=0)}))(0)
    assert quiet.health_port is None
    assert quiet.env["PAIRJUDGE_HEALTH__PORT"] == "0"


# --- the one health endpoint --------------------------------------------------------------------------------


@dataclass
class View:
    """A supervised worker as the health endpoint sees it (streams.worker.supervisor.Child)."""

    index: int
    pid: int | None
    health_port: int | None
    waiting: str | None = None
    restarts: int = 0


@dataclass
class Worker:
    """A real worker health server in this process."""

    health: WorkerHealth
    metrics: PrometheusMetrics
    telemetry: Telemetry
    server: HealthServer


async def worker_server() -> Worker:
    health = WorkerHealth(control_caught_up=asyncio.Event(), judges_checked=asyncio.Event())
    health.judges_checked.set()
    metrics = PrometheusMetrics("pairjudge-test")
    metrics.observe(health)
    telemetry = Telemetry(TelemetrySettings(), meter_provider=metrics.provider)
    server = HealthServer(HealthSettings(port=free_port()), health, metrics)
    await server.start()
    return Worker(health, metrics, telemetry, server)


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers: a worker whose event loop is stuck."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield int(sock.getsockname()[1])


async def _get(port: int, path: str) -> tuple[int | None, dict[str, object] | str]:
    status, body = await asyncio.to_thread(get, port, path, 5.0)
    return status, json.loads(body) if path != "/metrics" and status is not None else body


async def test_one_endpoint_answers_for_every_worker(silent_port: int) -> None:
    workers = [await worker_server(), await worker_server()]
    views = [View(i, os.getpid(), w.server.port) for i, w in enumerate(workers)]
    stopping = False
    port = free_port()
    endpoint = SupervisorHealth(HealthSettings(port=port), views, lambda: stopping)
    await endpoint.start()
    try:
        # Neither has read its control topic: not ready, with each one's reasons.
        status, body = await _get(port, "/readyz")
        assert status == 503
        assert isinstance(body, dict)
        assert body["reasons"] == [
            "process 0: control topic not caught up yet",
            "process 1: control topic not caught up yet",
        ]
        workers[0].health.control_caught_up.set()
        status, body = await _get(port, "/readyz")
        assert (status, body["reasons"]) == (503, ["process 1: control topic not caught up yet"])  # type: ignore[index]
        workers[1].health.control_caught_up.set()
        assert (await _get(port, "/readyz"))[0] == 200

        # A worker waiting for its restart: live (it is being restarted), not ready.
        views[1].pid, views[1].waiting = None, "restarting in 2 s after killed by SIGKILL"
        assert (await _get(port, "/livez"))[0] == 200
        status, body = await _get(port, "/readyz")
        assert (status, body["reasons"]) == (503, ["process 1: restarting in 2 s after killed by SIGKILL"])  # type: ignore[index]
        # Started again, its server not listening yet: live, not ready.
        views[1].pid, views[1].waiting, views[1].health_port = os.getpid(), None, free_port()
        status, body = await _get(port, "/livez")
        assert status == 200
        assert body["processes"][1]["state"] == "starting"  # type: ignore[index]
        assert (await _get(port, "/readyz"))[0] == 503
        # A worker whose event loop does not answer: not live, for the orchestrator to restart the whole.
        views[1].health_port = silent_port
        status, body = await _get(port, "/livez")
        assert status == 503, body
        assert body["processes"][1]["state"] == "its event loop does not answer /livez"  # type: ignore[index]
        views[1].health_port = workers[1].server.port
        assert (await _get(port, "/livez"))[0] == 200

        stopping = True
        status, body = await _get(port, "/readyz")
        assert (status, body["reasons"]) == (503, ["shutting down"])  # type: ignore[index]
    finally:
        await endpoint.stop()
        for w in workers:
            await w.server.stop()
            w.metrics.shutdown()


async def test_metrics_of_every_worker_on_one_page() -> None:
    workers = [await worker_server(), await worker_server()]
    for i, w in enumerate(workers):
        for _ in range(i + 2):
            w.telemetry.instruments.outcomes.add(1, {"pairjudge.stage": "primary", "pairjudge.outcome": "verdict"})
    views = [View(0, os.getpid(), workers[0].server.port, restarts=3), View(1, os.getpid(), workers[1].server.port)]
    port = free_port()
    endpoint = SupervisorHealth(HealthSettings(port=port), views, lambda: False)
    await endpoint.start()
    try:
        status, text = await asyncio.to_thread(get, port, "/metrics")
    finally:
        await endpoint.stop()
        for w in workers:
            await w.server.stop()
            w.metrics.shutdown()
    assert status == 200
    types = [line for line in text.splitlines() if line.startswith("# TYPE ")]
    assert len(types) == len(set(types)), "a family described twice: a scrape would refuse the page"
    samples = {
        (s.name, s.labels.get("process"), s.labels.get("pairjudge_outcome")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("pairjudge_outcomes_total", "0", "verdict")] == 2
    assert samples[("pairjudge_outcomes_total", "1", "verdict")] == 3
    assert samples[("process_resident_memory_bytes", "1", None)] > 0
    assert samples[("pairjudge_supervisor_restarts_total", "0", None)] == 3
    assert samples[("pairjudge_supervisor_process_up", "1", None)] == 1
