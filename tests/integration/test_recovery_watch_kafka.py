"""A table recovery that stops making progress stops the worker with exit status 3 (faust_compat.recovery_watch).

The stall seen in bench.scaleout (a changelog partition that never delivers a record to recovery) cannot be
produced on demand, so this test stops progress another way, with a real worker on a broker of the test's
own: the outcome table's changelog holds 60,000 records, and once the worker reports (on ``/readyz``) that
it is recovering its tables with records left to read, the broker is frozen with SIGSTOP. Recovery then
reads nothing more. The worker must say why on ``/livez`` (503 "stalled"), log it, and exit with status 3
within the stall limit plus its stop (here the orderly stop cannot finish against a frozen broker, so the
hard exit after the grace is what ends it). The broker is thawed afterwards.

Frozen earlier, while recovery is still fetching the changelogs' offsets, the worker just waits for its
broker: the watch counts progress only once there is a count. A CI run froze it there and the worker waited,
so the test waits for ``/readyz`` to give the count.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import time
import zlib
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from pairjudge.streams.cli.demo import start_worker, stop_process
from pairjudge.streams.faust_compat.recovery_watch import EXIT_RECOVERY_STALLED
from pairjudge.streams.kafka.topics import outcome_table_name
from pairjudge_dev.kafka import start_kafka
from pairjudge_dev.workers import kafka_run, read_log
from tests.fixtures.health import free_port, get

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

RECORDS = 60_000
STALL_S = 8.0
GRACE_S = 2.0


async def _fill_changelog(bootstrap: str, topic: str, partitions: int) -> None:
    """Outcome records as the pipeline stores them (stored_at:partition:zlib(JSON)), spread over partitions."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks=1)
    await producer.start()
    try:
        payload = zlib.compress(b"[]")
        now = int(time.time())
        batch = []
        for i in range(RECORDS):
            partition = i % partitions
            value = f"{now}:{partition}:".encode() + payload
            batch.append(await producer.send(topic, key=f"pair-{i:06d}".encode(), value=value, partition=partition))
        await asyncio.gather(*batch)
    finally:
        await producer.stop()


async def test_a_stalled_recovery_stops_the_worker_with_status_3(tmp_path: Path) -> None:
    broker = start_kafka(tmp_path / "kafka")
    frozen = False
    worker: subprocess.Popen[bytes] | None = None
    try:
        port = free_port()
        settings = await kafka_run(
            broker.bootstrap,
            tmp_path,
            "stall",
            worker={"recovery_stall_s": STALL_S, "shutdown_grace_s": GRACE_S},
            health={"port": port},
        )
        changelog = f"{settings.worker.app_id}-{outcome_table_name('primary')}-changelog"
        await _fill_changelog(broker.bootstrap, changelog, settings.kafka.partitions)

        log = tmp_path / "worker.log"
        worker = start_worker(settings, log)
        deadline = time.monotonic() + 120
        left = 0
        while time.monotonic() < deadline and worker.poll() is None:
            status, body = await asyncio.to_thread(get, port, "/readyz")
            found = re.search(r"recovering tables \((\d+) changelog records left\)", body) if status == 503 else None
            if found:
                left = int(found.group(1))
                break
            await asyncio.sleep(0.02)
        assert 0 < left <= RECORDS, read_log(log)[-3000:]

        os.killpg(broker.process.pid, signal.SIGSTOP)
        frozen = True
        frozen_at = time.monotonic()
        said_stalled = False
        while worker.poll() is None and time.monotonic() - frozen_at < STALL_S + GRACE_S + 60:
            status, body = await asyncio.to_thread(get, port, "/livez")
            said_stalled = said_stalled or (status == 503 and '"stalled"' in body)
            await asyncio.sleep(0.2)
        took = time.monotonic() - frozen_at
        text = read_log(log)
        assert worker.poll() == EXIT_RECOVERY_STALLED, (worker.poll(), text[-3000:])
        assert said_stalled, text[-3000:]
        assert "table recovery has read no changelog record" in text
        assert changelog in text  # the report names the partitions it waited on
        # ...and where each stands in Faust's and aiokafka's consumer (private attributes: this catches a rename).
        assert "consumer state unavailable" not in text, text[-3000:]
        assert re.search(r"read up to -?\d+ of \d+, assigned, fetched, .*position \d+, highwater", text), text[-3000:]
        # Not before the limit (it was recovering, then frozen), and not long after: the limit, a check
        # period, then the hard exit after the grace plus 30 s when the stop cannot finish.
        assert STALL_S <= took <= STALL_S + 5 + GRACE_S + 30 + 10, took
    finally:
        if frozen:
            os.killpg(broker.process.pid, signal.SIGCONT)
        if worker is not None:
            stop_process(worker)
        broker.stop()
