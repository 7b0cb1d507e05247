"""Backpressure: the judge goes down while pairs keep arriving, then comes back.

While the judge is down the worker must stop taking pairs from Kafka (its circuit breaker is open and
its buffers are bounded) rather than queue them in memory or escalate them all to review. After the
judge recovers, the backlog drains and every pair gets exactly one final outcome.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.producer import send_events
from pairjudge_dev.workers import kafka_run, running_worker
from tests.fixtures.fake_judge_server import FakeJudgeServer
from tests.fixtures.marked import MarkedJudge, marked_pair

# Alone under xdist: the worker's memory growth during the outage is asserted, and a loaded machine buffers more.
pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.serial]

N_BEFORE, N_DURING = 200, 1800
FILLER = "The quick brown fox writes a calm and friendly paragraph for the customer. " * 110  # ~8 KB


def _pairs(prefix: str, start: int, count: int) -> list[bytes]:
    return [marked_pair(f"{prefix}-{i:05d}", str(i), FILLER, FILLER) for i in range(start, start + count)]


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def _committed(bootstrap: str, group: str, topic: str) -> int:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    return sum(meta.offset for tp, meta in offsets.items() if tp.topic == topic and meta.offset > 0)


async def test_a_judge_outage_pauses_intake_and_loses_nothing(kafka_bootstrap: str, tmp_path: Path) -> None:
    server = FakeJudgeServer().start()
    judge = MarkedJudge(down=True)
    server.set_responder(judge)
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "bp",
        worker={"concurrency": 4},
        judge={
            "kind": "openai",
            "base_url": server.base_url,
            "model": "fake-model",
            "max_retries": 1,
            "read_timeout_s": 5,
            "breaker_failures": 3,
            "breaker_cooldown_s": 0.5,
            "breaker_max_cooldown_s": 2,
            "cache_dir": tmp_path / "cache",
        },
    )
    pairs_topic = settings.topics.name("pairs")
    try:
        with running_worker(settings, tmp_path / "worker.log") as worker:
            await send_events(settings, _pairs(settings.topics.prefix, 0, N_BEFORE))
            # The breaker opens and the worker stalls on its first few pairs. The baseline is read once the worker
            # has met the judge (its judging path loaded), not after a fixed time: a quiet run grows by under 1 MB
            # over the outage, but on a loaded machine a baseline read at a fixed 8 s was once 17.7 MB short.
            for _ in range(120):
                if judge.calls_while_down >= 3:
                    break
                await asyncio.sleep(0.5)
            assert judge.calls_while_down >= 3, "the worker never asked the judge"
            await asyncio.sleep(4)
            rss_before = _rss_kib(worker.pid)
            await send_events(settings, _pairs(settings.topics.prefix, N_BEFORE, N_DURING))
            await asyncio.sleep(8)
            rss_during = _rss_kib(worker.pid)
            committed_during = await _committed(kafka_bootstrap, settings.worker.app_id, pairs_topic)
            nothing_yet = await collect_outcomes(settings, {"none"}, timeout=2)
            calls_while_down = judge.calls_while_down

            judge.down = False  # the judge comes back
            expected = {f"{settings.topics.prefix}-{i:05d}" for i in range(N_BEFORE + N_DURING)}
            outcomes = await collect_outcomes(settings, expected, timeout=300, settle=2)
            assert worker.poll() is None, "the worker died"
    finally:
        server.stop()

    whole_log = (tmp_path / "worker.log").read_text(errors="replace")
    log = whole_log[-3000:]
    # Stopped gracefully, the worker closed its judge's HTTP pool and cache on the loop that opened them.
    assert "Unclosed" not in whole_log, whole_log[whole_log.find("Unclosed") - 200 :][:1000]
    sent_during_outage_mb = N_DURING * 2 * len(FILLER) / 1e6
    # Nothing was escalated or otherwise published while the judge was down ...
    assert nothing_yet.unexpected == 0, "outcomes were published during the outage (escalated instead of waiting)"
    # ... the worker took only a bounded share of the backlog, and did not hold it all in memory ...
    assert committed_during < (N_BEFORE + N_DURING) // 2, f"committed {committed_during} offsets during the outage"
    assert (rss_during - rss_before) / 1024 < sent_during_outage_mb / 2, (rss_before, rss_during, sent_during_outage_mb)
    # ... and the open breaker kept it from hammering the judge.
    assert calls_while_down < 200, calls_while_down
    # After recovery, every pair has exactly one final outcome, and it is the judged one.
    assert outcomes.complete, f"{len(outcomes.missing)} missing\n{log}"
    assert outcomes.conflicting == {}
    kinds = {kind for kind, _ in outcomes.final.values()}
    assert kinds == {"verdicts"}, {k: e.get("reason") for k, e in outcomes.final.values() if k != "verdicts"}
    assert all(event["winner"] == "champion" for _, event in outcomes.final.values())
