"""Failures while delivering an outcome never ack the input silently (issue 6, finding 2).

Faust acks an event in a ``finally`` when the agent body raises, so a failed send used to make the
input committable with no output. These tests make the real broker refuse outputs, by shrinking a
topic's ``max.message.bytes``, and check what a worker does:

- the outcome is refused but a dead letter is not: the pair is dead-lettered with the reason;
- nothing can be delivered: the worker stops, the group's committed offset stays at the pair, and a
  worker started after the topics are fixed gives every pair its outcome.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType  # type: ignore[import-untyped,unused-ignore]

from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.producer import send_events
from pairjudge_dev.pairgen import many_pairs
from pairjudge_dev.workers import kafka_run, running_worker

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


async def _set_max_message_bytes(settings: Settings, kinds: list[str], value: int | None) -> None:
    """Shrink (or, with None, restore the broker default of) the largest record each topic accepts."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka.bootstrap_servers)
    await admin.start()
    try:
        for kind in kinds:
            configs = {"max.message.bytes": str(value if value is not None else 1048588)}
            await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, settings.topics.name(kind), configs)])
    finally:
        await admin.close()
    # Brokers apply topic config changes asynchronously; give the log a moment to pick it up.
    await asyncio.sleep(2)


async def _committed(settings: Settings) -> dict[int, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka.bootstrap_servers)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(settings.worker.app_id)
    finally:
        await admin.close()
    topic = settings.topics.name("pairs")
    return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic and meta.offset >= 0}


async def _end_offsets(settings: Settings) -> dict[int, int]:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka.bootstrap_servers)
    await consumer.start()
    try:
        topic = settings.topics.name("pairs")
        tps = [TopicPartition(topic, p) for p in range(settings.kafka.partitions)]
        ends = await consumer.end_offsets(tps)
        return {tp.partition: offset for tp, offset in ends.items()}
    finally:
        await consumer.stop()


async def test_an_outcome_the_broker_refuses_is_dead_lettered_with_its_reason(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await kafka_run(kafka_bootstrap, tmp_path, "refused", worker={"concurrency": 4})
    # Verdicts and tie-break requests are a few KB; 300 bytes refuses every one of them.
    await _set_max_message_bytes(settings, ["verdicts", "tiebreak"], 300)
    pairs = many_pairs(12, settings.topics.prefix)
    expected = {json.loads(raw)["pair_id"] for raw in pairs}
    with running_worker(settings, tmp_path / "worker.log") as worker:
        await send_events(settings, pairs)
        outcomes = await collect_outcomes(settings, expected, timeout=120, settle=2)
        alive = worker.poll() is None
    log = (tmp_path / "worker.log").read_text(errors="replace")[-3000:]
    assert outcomes.complete, f"{len(outcomes.missing)} pairs have no outcome\n{log}"
    assert alive, f"the worker died\n{log}"
    assert outcomes.conflicting == {}
    letters = {pid: event for pid, (kind, event) in outcomes.final.items() if kind == "deadletter"}
    # Some pairs may end in review (a small message that fits); every other one is a dead letter.
    assert letters, "no outcome was refused, so this test did not test anything"
    for letter in letters.values():
        assert letter["reason"] == "outcome_undeliverable"
        assert "MessageSizeTooLarge" in letter["error"] or "RecordTooLarge" in letter["error"]
        assert letter["stage"] in ("judge", "tiebreak")


async def test_when_nothing_can_be_delivered_the_worker_stops_without_committing(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await kafka_run(kafka_bootstrap, tmp_path, "stuck", worker={"concurrency": 4})
    every_output = ["verdicts", "tiebreak", "review", "deadletter"]
    await _set_max_message_bytes(settings, every_output, 300)
    pairs = many_pairs(8, settings.topics.prefix)
    expected = {json.loads(raw)["pair_id"] for raw in pairs}
    await send_events(settings, pairs)
    ends = await _end_offsets(settings)

    with running_worker(settings, tmp_path / "worker-1.log") as worker:
        try:
            exited: int | None = await asyncio.to_thread(worker.wait, 90)
        except subprocess.TimeoutExpired:
            exited = None
    log = (tmp_path / "worker-1.log").read_text(errors="replace")
    assert exited is not None, f"the worker kept running with nothing deliverable\n{log[-3000:]}"
    assert "stopping without committing" in log, log[-3000:]
    committed = await _committed(settings)
    # Nothing was delivered, so no partition may be committed past its first pair.
    for partition, offset in committed.items():
        assert offset == 0, f"partition {partition} committed to {offset} with nothing delivered (end {ends})"

    await _set_max_message_bytes(settings, every_output, None)
    with running_worker(settings, tmp_path / "worker-2.log") as worker:
        outcomes = await collect_outcomes(settings, expected, timeout=120, settle=2)
        alive = worker.poll() is None
    log2 = (tmp_path / "worker-2.log").read_text(errors="replace")[-3000:]
    assert outcomes.complete, f"{sorted(outcomes.missing)} have no outcome after the topics were fixed\n{log2}"
    assert alive, log2
    assert outcomes.conflicting == {}
    # Every pair ends as it would have: nothing was dead-lettered for the earlier refusals.
    assert {kind for kind, _ in outcomes.final.values()} <= {"verdicts", "review"}
