"""``pairjudge worker --processes 2`` on real Kafka: two real workers in one group behind one supervisor.

The supervisor (streams.worker.supervisor) is started as a deployment would start it, with the offline judge.
Both workers must join the consumer group and judge pairs; the one health endpoint must say ready only
once both are, and serve both workers' metrics on one page a scrape accepts. A worker SIGKILLed from outside
is restarted and pairs keep getting their outcomes; SIGTERM to the supervisor stops everything, status 0.
A worker that refuses to start (its data directory held by another process) stops the supervisor with
status 2 instead of being restarted in a loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from prometheus_client.parser import text_string_to_metric_families

from pairjudge.streams.cli.demo import stop_process
from pairjudge.streams.config.settings import Settings, environ_for
from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.security.files import open_private_append, private_dir
from pairjudge.streams.security.kafka_clients import client_config
from pairjudge.streams.worker.data_dir import lock_data_dir
from pairjudge.streams.worker.supervisor import process_data_dir
from pairjudge_dev.pairgen import many_pairs
from pairjudge_dev.workers import kafka_run, produce_raw, read_log
from tests.fixtures.health import free_port, get, listening

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def start_supervisor(settings: Settings, processes: int, log_path: Path) -> subprocess.Popen[bytes]:
    """``pairjudge worker --processes N``, as a deployment starts it (it creates the topics itself)."""
    log = open_private_append(log_path, what="supervisor log")
    return subprocess.Popen(
        [sys.executable, "-m", "pairjudge.streams.cli", "worker", "--processes", str(processes)],
        env=environ_for(settings),
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


async def answer(port: int, path: str) -> tuple[int | None, Any]:
    status, body = await asyncio.to_thread(get, port, path, 10.0)
    if status is None or path == "/metrics":
        return status, body
    return status, json.loads(body)


async def wait_answer(port: int, path: str, wanted: Any, timeout: float) -> tuple[int | None, Any]:
    """The first answer for which ``wanted(status, body)`` holds, or the last one after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        status, body = await answer(port, path)
        if (status is not None and wanted(status, body)) or time.monotonic() > deadline:
            return status, body
        await asyncio.sleep(0.5)


async def group_partitions(settings: Settings) -> tuple[str, list[int]]:
    """(the group's state, how many partitions of the pairs topic each member holds), from DescribeGroups."""
    admin = AIOKafkaAdminClient(**client_config(settings.kafka).kwargs())
    await admin.start()
    try:
        found = (await admin.describe_consumer_groups([settings.worker.app_id]))[0].to_object()["groups"][0]
    finally:
        await admin.close()
    topic = settings.topics.name("pairs")
    shares = []
    for member in found["members"]:
        raw = member["member_assignment"]
        held = ConsumerProtocolMemberAssignment.decode(raw).assignment if raw else []
        shares.append(sum(len(parts) for name, parts in held if name == topic))
    return str(found["state"]), sorted(shares)


def verdicts_by_process(text: str) -> dict[str, float]:
    """Outcomes published, per process label, from the merged page."""
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "pairjudge_outcomes_total":
                process = sample.labels["process"]
                totals[process] = totals.get(process, 0.0) + sample.value
    return totals


def running(pid: int | None) -> bool:
    return pid is not None and Path(f"/proc/{pid}").exists()


def pids(livez: dict[str, Any]) -> list[int | None]:
    return [p["pid"] for p in livez["processes"]]


async def test_two_worker_processes_in_one_group_behind_one_endpoint(kafka_bootstrap: str, tmp_path: Path) -> None:
    port = free_port()
    settings = await kafka_run(
        kafka_bootstrap, tmp_path, "procs", health={"port": port}, worker={"concurrency": 8, "shutdown_grace_s": 5}
    )
    prefix = settings.topics.prefix
    log_path = tmp_path / "supervisor.log"
    supervisor = start_supervisor(settings, 2, log_path)
    try:
        status, ready = await wait_answer(port, "/readyz", lambda s, _: s == 200, timeout=180)
        assert status == 200, f"{ready}\n{read_log(log_path)[-4000:]}"
        assert sorted(ready["processes"]) == ["0", "1"]
        status, live = await answer(port, "/livez")
        assert status == 200, live
        first = pids(live)
        assert len(set(first)) == 2, live
        assert None not in first
        # The one endpoint where it was configured; each worker's own on loopback only, on a port of its own.
        assert listening(supervisor.pid) == {("127.0.0.1", port)}
        own = [listening(pid) for pid in first if pid is not None]
        assert all(len(ports) == 1 and next(iter(ports))[0] == "127.0.0.1" for ports in own), own
        assert own[0] != own[1]
        for index in range(2):
            assert (process_data_dir(settings.worker.data_dir, index) / ".worker.lock").read_text() == str(first[index])

        # Two members of the one group, each holding half the pairs partitions.
        state, shares = "?", list[int]()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (state, shares) != ("Stable", [2, 2]):
            state, shares = await group_partitions(settings)
            await asyncio.sleep(0.5)
        assert (state, shares) == ("Stable", [2, 2])

        raws = many_pairs(40, f"{prefix}-a")
        await produce_raw(settings.kafka.bootstrap_servers, settings.topics.name("pairs"), raws, keyed=True)
        done = await collect_outcomes(settings, {json.loads(r)["pair_id"] for r in raws}, timeout=180)
        assert done.complete, f"missing {sorted(done.missing)[:5]}\n{read_log(log_path)[-4000:]}"

        status, text = await answer(port, "/metrics")
        assert status == 200
        types = [line for line in text.splitlines() if line.startswith("# TYPE ")]
        assert len(types) == len(set(types)), "a family described twice: a scrape would refuse the page"
        judged = verdicts_by_process(text)
        # Both workers judged pairs, and between them every pair (a tie-break's outcome counts too).
        assert set(judged) == {"0", "1"}, judged
        assert min(judged.values()) > 0, judged
        assert sum(judged.values()) >= 40, judged

        # A worker killed from outside is started again, and pairs keep flowing.
        killed = first[0]
        assert killed is not None
        os.kill(killed, signal.SIGKILL)
        status, live = await wait_answer(
            port,
            "/livez",
            lambda _, body: pids(body)[0] not in (None, killed) and body["processes"][0]["restarts"] == 1,
            timeout=60,
        )
        assert status == 200, live
        restarted = pids(live)
        assert restarted[0] not in (None, killed), f"{live}\n{read_log(log_path)[-4000:]}"
        assert restarted[1] == first[1], "the other worker must not have been touched"
        raws = many_pairs(20, f"{prefix}-b")
        await produce_raw(settings.kafka.bootstrap_servers, settings.topics.name("pairs"), raws, keyed=True)
        done = await collect_outcomes(settings, {json.loads(r)["pair_id"] for r in raws}, timeout=240)
        assert done.complete, f"missing after the restart {sorted(done.missing)[:5]}\n{read_log(log_path)[-4000:]}"
        status, ready = await wait_answer(port, "/readyz", lambda s, _: s == 200, timeout=120)
        assert status == 200, ready
        status, text = await answer(port, "/metrics")
        restarts = {
            s.labels["process"]: s.value
            for f in text_string_to_metric_families(text)
            for s in f.samples
            if s.name == "pairjudge_supervisor_restarts_total"
        }
        assert restarts == {"0": 1.0, "1": 0.0}

        # SIGTERM to the supervisor alone: it stops both workers gracefully and exits 0.
        began = time.monotonic()
        supervisor.send_signal(signal.SIGTERM)
        status_code = await asyncio.to_thread(supervisor.wait, 60)
        took = time.monotonic() - began
        log = read_log(log_path)
        assert status_code == 0, log[-4000:]
        assert took < 5 + 12 + 10, took  # within the grace and the margin
        for pid in restarted:
            assert not running(pid), f"worker {pid} outlived its supervisor"
        assert "worker process 0 (pid" in log
        assert "killed by SIGKILL" in log
    finally:
        stop_process(supervisor, timeout=30)


async def test_a_worker_that_refuses_to_start_stops_the_supervisor_with_status_2(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await kafka_run(kafka_bootstrap, tmp_path, "procsrefused", worker={"shutdown_grace_s": 5})
    # Another process holds worker 1's data directory: that worker exits 2 at start-up, every time.
    held = process_data_dir(settings.worker.data_dir, 1)
    private_dir(held)
    lock = lock_data_dir(held)
    log_path = tmp_path / "supervisor.log"
    supervisor = start_supervisor(settings, 2, log_path)
    try:
        status = await asyncio.to_thread(supervisor.wait, 120)
    except subprocess.TimeoutExpired:
        status = None
    finally:
        stop_process(supervisor, timeout=30)
        os.close(lock)
    log = read_log(log_path)
    assert status == 2, log[-4000:]
    assert log.count("worker process 1 started") == 1, "a start-up refusal must not be restarted"
    assert "worker process 1 (pid" in log
    assert "exit status 2 (refused to start)" in log
    # The worker's own reason. The console wraps it at 80 columns, a long path mid-word (xdist's tmp paths are
    # longer: .../popen-gw2/...), so the text is compared with every space and line break taken out.
    assert "proc-1 is in use by pid".replace(" ", "") in "".join(log.split())
