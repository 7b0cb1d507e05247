"""The hourly spending cap survives a worker killed mid-flight (issue 28), on real Kafka.

A worker judges through the scripted judge server on 127.0.0.1 with a heavy-tailed latency, 4 pairs in flight,
at a price raised so that the first pairs pass the $1 cap. Once its spend report is on the topic it is killed
with SIGKILL at a random moment. A new worker of the same group starts with an empty ledger: it must read the
hour's spend from the compacted spend topic, so no pair after the kill reaches the judge. Every pair still ends
in one final outcome, never two different ones (the killed worker's are redelivered).

Here the new worker's group join takes longer than reading the topic, so this test does not catch a worker that
gates before it has read it; ``tests/unit/test_spend_cap.py`` holds that race open and does.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from pairjudge.schemas import SpendReport
from pairjudge.streams.cli.demo import start_worker, stop_process
from pairjudge.streams.kafka.collector import collect_outcomes, read_topic
from pairjudge.streams.kafka.producer import send_events
from pairjudge_dev.pairgen import sample_dicts
from pairjudge_dev.slow_judge_server import Behaviour, JudgeServer, Latency
from pairjudge_dev.workers import kafka_run, read_log
from tests.fixtures.clock import within_one_clock_hour

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

CAP_USD = 1.0
#: The spend before the kill and the capped pairs after it must fall in one UTC hour (the cap's window); the test
#: takes 20-60 s, up to its 240 s outcome timeout on a loaded machine.
ONE_HOUR_NEEDS_S = 240.0


@pytest.fixture
def judge() -> Iterator[JudgeServer]:
    latency = Latency(median_s=0.15, sigma=0.8, tail_share=0.05, tail_min_s=1.0, tail_max_s=3.0)
    server = JudgeServer(Behaviour(hold_marker=None, latency=latency, seed=7)).start()
    server.set_usage_scale(100_000)  # tens of dollars a call at the table's price: the first pairs pass the cap
    try:
        yield server
    finally:
        server.stop()


def _pairs(prefix: str, tag: str, count: int) -> list[bytes]:
    samples = [p for p in sample_dicts() if isinstance(p["rubric"], dict) and p["rubric"]["kind"] == "tone_style"]
    out = []
    for i in range(count):
        pair = dict(samples[i % len(samples)])
        pair["pair_id"] = f"{prefix}-{tag}-{i}"
        out.append(json.dumps(pair).encode())
    return out


def _ids(raws: list[bytes]) -> set[str]:
    return {str(json.loads(r)["pair_id"]) for r in raws}


async def test_a_worker_started_after_a_kill_keeps_the_cap_from_the_spend_topic(
    kafka_bootstrap: str, judge: JudgeServer, tmp_path: Path
) -> None:
    await within_one_clock_hour(ONE_HOUR_NEEDS_S)
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "spendkill",
        worker={"concurrency": 4},
        judge={
            "kind": "openai",
            "base_url": judge.base_url,
            "model": "strong-judge",
            "cache_enabled": False,
            "prices": {"strong-judge": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}},
        },
        policy={"spend_hourly_cap_usd": CAP_USD, "spend_action": "review", "audit_share": 0.0},
    )
    prefix = settings.topics.prefix
    first_log, second_log = tmp_path / "worker-a.log", tmp_path / "worker-b.log"
    first = start_worker(settings, first_log)
    second = None
    try:
        early = _pairs(prefix, "early", 12)
        await send_events(settings, early)

        def over_cap(records: list[tuple[bytes | None, bytes | None]]) -> bool:
            reports = [SpendReport.model_validate_json(v) for _, v in records if v]
            return any(sum(r.by_experiment.values()) > CAP_USD for r in reports)

        spent = await read_topic(settings, "spend", timeout=120, until=over_cap)
        assert over_cap(spent), read_log(first_log)[-3000:]
        # Killed at a random moment after its report is out: judge calls in flight, outputs half sent.
        await asyncio.sleep(random.uniform(0.0, 0.8))
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)
        calls_at_kill = judge.stats().requests

        second = start_worker(settings, second_log)
        late = _pairs(prefix, "late", 4)
        await send_events(settings, late)
        outcomes = await collect_outcomes(settings, _ids(early) | _ids(late), timeout=240)
        assert outcomes.complete, read_log(second_log)[-3000:]
        for pid in _ids(late):
            kind, event = outcomes.final[pid]
            assert (kind, event.get("reason")) == ("review", "spend_capped"), (pid, kind, event)
        # The new worker judged nothing: the cap held from the spend the killed worker had reported.
        assert judge.stats().requests == calls_at_kill, read_log(second_log)[-3000:]
        # Every early pair ended once: judged before the kill, or redelivered and then capped.
        for pid in _ids(early):
            kind, event = outcomes.final[pid]
            assert kind == "verdicts" or (kind, event.get("reason")) == ("review", "spend_capped"), (pid, event)
        assert not outcomes.conflicting, outcomes.conflicting
    finally:
        stop_process(first)
        if second is not None:
            stop_process(second)
