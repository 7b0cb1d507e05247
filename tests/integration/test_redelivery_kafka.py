"""The same outcome on redelivery, across processes (issue 6, finding 4; docs/design.md §2.12).

A first worker judges pairs with a judge server, then stops. The group's offsets are rewound to the
start, as after a crash before a commit, and a second worker, on another host (its own data dir),
meets every pair again. Its judge is a *different* server that answers at random, like an LLM
sampling at temperature > 0. The second worker must rebuild the outcome tables from their changelog,
find every outcome marked published, and commit every pair without a single call to its judge and
without a second copy of any outcome (issue 26: duplicates cut at the source).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.admin import topic_partitions
from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.producer import send_events
from pairjudge.streams.kafka.topics import FINAL_KINDS
from pairjudge_dev.pairgen import many_pairs
from pairjudge_dev.slow_judge_server import Behaviour, JudgeServer
from pairjudge_dev.workers import kafka_run, running_worker, wait_until_committed

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

N_PAIRS = 40


def _on_host(settings: Settings, tmp_path: Path, host: str, judge_url: str) -> Settings:
    return settings.model_copy(
        update={
            "worker": settings.worker.model_copy(update={"data_dir": tmp_path / host}),
            "judge": settings.judge.model_copy(update={"base_url": judge_url}),
        }
    )


async def _rewind_group(settings: Settings) -> None:
    """Commit offset 0 on every pairs partition for the workers' group (no worker is running)."""
    topic = settings.topics.name("pairs")
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka.bootstrap_servers, group_id=settings.worker.app_id, enable_auto_commit=False
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(settings.kafka.partitions)]
        consumer.assign(tps)
        await consumer.commit({tp: OffsetAndMetadata(0, "") for tp in tps})
    finally:
        await consumer.stop()


async def _published(settings: Settings) -> dict[str, list[bytes]]:
    """Every final outcome on the topics, by pair id, in the order the broker has them."""
    topics = [settings.topics.name(kind) for kind in FINAL_KINDS]
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka.bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    found: dict[str, list[bytes]] = {}
    try:
        by_topic = await topic_partitions(settings.kafka.bootstrap_servers, topics)
        tps = [TopicPartition(t, p) for t, ps in by_topic.items() for p in ps]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)

        async def behind() -> bool:
            return any([await consumer.position(tp) < ends[tp] for tp in tps])

        while await behind():
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for record in records:
                    event = json.loads(record.value or b"{}")
                    if event.get("audit"):
                        continue
                    found.setdefault(event["pair_id"], []).append(record.value or b"")
    finally:
        await consumer.stop()
    return found


async def test_a_redelivered_pair_gets_its_recorded_outcome_from_another_worker(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    first_judge = JudgeServer(Behaviour(hold_marker=None)).start()
    fickle_judge = JudgeServer(Behaviour(hold_marker=None, flip_share=1.0, seed=7)).start()
    try:
        settings = await kafka_run(
            kafka_bootstrap,
            tmp_path,
            "redeliver",
            worker={"concurrency": 8, "log_level": "INFO"},
            judge={"kind": "openai", "base_url": first_judge.base_url, "model": "slow-judge", "cache_enabled": False},
        )
        pairs = many_pairs(N_PAIRS, settings.topics.prefix)
        expected = {json.loads(raw)["pair_id"] for raw in pairs}
        await send_events(settings, pairs)
        with running_worker(_on_host(settings, tmp_path, "host-1", first_judge.base_url), tmp_path / "w1.log"):
            first = await collect_outcomes(settings, expected, timeout=120, settle=2)
        assert first.complete, (tmp_path / "w1.log").read_text(errors="replace")[-3000:]
        judged = first_judge.stats().requests
        assert judged >= 2 * N_PAIRS

        await _rewind_group(settings)
        log2 = tmp_path / "w2.log"
        with running_worker(_on_host(settings, tmp_path, "host-2", fickle_judge.base_url), log2) as worker:
            # Wait until the second worker has met and committed every pair again.
            caught_up = await wait_until_committed(settings, timeout=120)
            assert worker.poll() is None, log2.read_text(errors="replace")[-3000:]
            await asyncio.sleep(2)  # anything it would still send
        tail = log2.read_text(errors="replace")[-3000:]
        assert caught_up, f"not every pair was redelivered\n{tail}"
        assert fickle_judge.stats().requests == 0, "the second worker judged redelivered pairs again"
        published = await _published(settings)
        copies = {pid: len(published.get(pid, [])) for pid in expected}
        assert set(copies.values()) == {1}, f"outcomes published again: {[p for p, n in copies.items() if n != 1]}"
        again = await collect_outcomes(settings, expected, timeout=30, settle=1)
        assert again.conflicting == {}
        assert again.duplicates == 0
    finally:
        first_judge.stop()
        fickle_judge.stop()
