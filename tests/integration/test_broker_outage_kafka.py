"""A broker outage under a running worker: the worker says so, quietly, and judges again once the broker is back.

Without streams/telemetry/logs.py a worker logged about 110 lines a second here while its broker was down
(aiokafka's and Faust's reconnect loops: the same four errors over and over).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from pathlib import Path

import pytest

from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.collector import Outcomes, collect_outcomes
from pairjudge.streams.kafka.embedded import RunningBroker
from pairjudge.streams.kafka.producer import send_events
from pairjudge_dev.kafka import start_kafka
from pairjudge_dev.pairgen import many_pairs
from pairjudge_dev.workers import kafka_run, running_worker

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

OUTAGE_S = 15.0
#: On average over the outage; with the filter it is under one.
MAX_LINES_PER_S = 20.0
#: The first report of the outage must not wait for a window to pass.
FIRST_REPORT_WITHIN_S = 3.0
#: aiokafka's words for "the broker is not there" (its ERROR lines, first occurrences let through).
UNREACHABLE = re.compile(r"\[ERROR\] .*(Unable connect to node|Connect call failed|Unable to update metadata)")
SUMMARY = re.compile(r"\[repeated (\d+) times in the last \d+ s")


async def _judged(settings: Settings, tag: str, n: int, timeout: float) -> Outcomes:
    prefix = f"{settings.topics.prefix}-{tag}"
    await send_events(settings, many_pairs(n, prefix))
    return await collect_outcomes(settings, {f"{prefix}-{i:04d}" for i in range(n)}, timeout=timeout)


def _kill(broker: RunningBroker) -> None:
    # SIGKILL, not a graceful stop: connections drop at once, as when a broker host dies.
    os.killpg(broker.process.pid, signal.SIGKILL)
    broker.process.wait(10)


def _since(path: Path, offset: int) -> str:
    with path.open("rb") as log:
        log.seek(offset)
        return log.read().decode(errors="replace")


async def test_a_broker_outage_is_logged_quietly_and_the_worker_judges_again_after_it(tmp_path: Path) -> None:
    # A broker of the test's own: it is killed, which the shared one must never be.
    broker = start_kafka(tmp_path / "kafka")
    try:
        settings = await kafka_run(broker.bootstrap, tmp_path, "outage")
        log_path = tmp_path / "worker.log"
        with running_worker(settings, log_path):
            before = await _judged(settings, "before", 4, timeout=120)
            assert before.complete, _since(log_path, 0)[-3000:]

            start = log_path.stat().st_size
            _kill(broker)
            killed_at = time.monotonic()
            await asyncio.sleep(FIRST_REPORT_WITHIN_S)
            early = _since(log_path, start)
            await asyncio.sleep(OUTAGE_S - (time.monotonic() - killed_at))
            outage = _since(log_path, start)
            elapsed = time.monotonic() - killed_at

            broker = start_kafka(tmp_path / "kafka", port=broker.port)  # same data, same address
            after = await _judged(settings, "after", 4, timeout=180)
            recovered = _since(log_path, start)
    finally:
        broker.stop()

    lines = outage.splitlines()
    rate = len(lines) / elapsed
    assert rate < MAX_LINES_PER_S, f"{rate:.1f} lines/s during the outage:\n" + "\n".join(lines[:60])
    # Quiet, not silent: the outage is reported at once, and the repeats are counted, not lost.
    assert UNREACHABLE.search(early), f"nothing said the broker was unreachable within {FIRST_REPORT_WITHIN_S} s"
    repeats = [int(m.group(1)) for m in SUMMARY.finditer(recovered)]
    assert repeats, "no line counted the suppressed repeats"
    assert sum(repeats) > len(lines)
    assert after.complete, f"missing after the outage: {sorted(after.missing)}\n{recovered[-3000:]}"
