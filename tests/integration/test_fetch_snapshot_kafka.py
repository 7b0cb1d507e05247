"""aiokafka hands over a paused partition's records when the set of partitions it was asked for is emptied
while it waits: why ``LedgerConsumer._getmany`` passes a snapshot (streams/faust_compat/offsets.py).

Faust's fetcher passes its live set of active partitions to ``Fetcher.fetched_records`` on the consumer's
thread (faust.transport.drivers.aiokafka ``_fetch_records``), and table recovery pauses partitions (removes
them from that set) while aiokafka waits. aiokafka reads an empty set as "every assigned partition": it
returned the records of stream partitions Faust had paused and moved its position past them, and Faust
dropped them. The worker then handed over records far past the committed offset and committed them
(bench/rebalance_loss.py --judge llm: 87 pairs never judged). Real Apache Kafka, aiokafka called as Faust
calls it; the second test is the consumer's snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from pairjudge.streams.kafka.admin import TopicSpec, create_topics

pytestmark = [pytest.mark.kafka]

STREAM_RECORDS = 20


@contextlib.asynccontextmanager
async def _consumer_with_buffered_stream(bootstrap: str, topic: str) -> AsyncIterator[AIOKafkaConsumer]:
    await create_topics(bootstrap, {topic: TopicSpec(partitions=2)})
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for i in range(STREAM_RECORDS):
            await producer.send_and_wait(topic, f"pair-{i}".encode(), partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        stream, changelog = TopicPartition(topic, 0), TopicPartition(topic, 1)
        consumer.assign([stream, changelog])
        await consumer.seek_to_beginning(stream, changelog)
        # aiokafka's background routine fetches every assigned partition, paused by Faust or not.
        for _ in range(100):
            if stream in consumer._fetcher._records:
                break
            await asyncio.sleep(0.05)
        assert stream in consumer._fetcher._records, "aiokafka never buffered the stream partition"
        yield consumer
    finally:
        await consumer.stop()


async def _fetch_while_recovery_pauses(
    bootstrap: str, topic: str, asked: Callable[[set[TopicPartition]], set[TopicPartition] | frozenset[TopicPartition]]
) -> dict[TopicPartition, list[int]]:
    """Fetch with only the changelog partition active; it is paused while aiokafka waits, then a changelog
    record arrives (which wakes aiokafka up)."""
    async with _consumer_with_buffered_stream(bootstrap, topic) as consumer:
        changelog = TopicPartition(topic, 1)
        active = {changelog}  # Faust: the stream partition is paused during table recovery
        fetch = asyncio.ensure_future(consumer._fetcher.fetched_records(asked(active), timeout=10.0, max_records=500))
        await asyncio.sleep(0.5)
        assert not fetch.done()
        active.clear()  # recovery done reading: the changelog partition is paused too
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"changelog", partition=1)
        finally:
            await producer.stop()
        records = await asyncio.wait_for(fetch, 15.0)
        return {tp: [r.offset for r in batch] for tp, batch in records.items()}


async def test_the_live_set_emptied_during_the_wait_hands_over_a_paused_partition(
    kafka_bootstrap: str, unique_topic_prefix: str
) -> None:
    # The hazard, as Faust's fetcher meets it: the set passed is the one recovery empties.
    topic = f"{unique_topic_prefix}pairs"
    got = await _fetch_while_recovery_pauses(kafka_bootstrap, topic, lambda active: active)
    assert got.get(TopicPartition(topic, 0)) == list(range(STREAM_RECORDS)), got


async def test_a_snapshot_keeps_aiokafka_to_the_partitions_that_were_active(
    kafka_bootstrap: str, unique_topic_prefix: str
) -> None:
    topic = f"{unique_topic_prefix}pairs"
    got = await _fetch_while_recovery_pauses(kafka_bootstrap, topic, frozenset)
    assert TopicPartition(topic, 0) not in got, got
    assert got.get(TopicPartition(topic, 1)) == [0], got
