"""Reading topics from their start without a consumer group: the one way pairjudge reads a topic back.

Every reader here is an observer: it assigns itself every partition (no group, so it never takes
partitions from a worker and never commits an offset) and seeks to the beginning. What differs between
callers is only how long they read and what they keep: the outcome collector and ``read_topic`` read
until a deadline or a condition, the gate and the control follower until they have caught up with the
end offsets read at the start, the review service's feeds for ever.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord

from pairjudge.streams.kafka.admin import topic_partitions
from pairjudge.streams.security.kafka_clients import ClientConfig

Batches = dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]


def caught_up(positions: Mapping[TopicPartition, int], targets: Mapping[TopicPartition, int]) -> bool:
    """Whether every partition's position has reached its end offset as read at the start.

    ``>=``, not ``==``: compaction and transaction markers move a position past offsets that hold no
    record, and records written after the start may already have been read.
    """
    return all(positions.get(tp, -1) >= end for tp, end in targets.items())


@dataclass
class FromStart:
    """An assigned, group-less consumer positioned at the start of every partition of its topics."""

    consumer: AIOKafkaConsumer
    partitions: list[TopicPartition]
    #: Each partition's end offset, read before anything was assigned.
    ends: dict[TopicPartition, int]

    async def batches(self, timeout_ms: int, max_records: int | None = None) -> Batches:
        """The next records, by partition (empty after ``timeout_ms`` without any)."""
        got: Batches = await self.consumer.getmany(timeout_ms=timeout_ms, max_records=max_records)
        return got

    async def caught_up(self) -> bool:
        """Whether every partition has been read to the end offset it had at the start."""
        # position() only reports what this consumer has handed out (it waits for the seek to resolve
        # first), so records fetched but not yet returned do not count.
        positions = {tp: await self.consumer.position(tp) for tp in self.partitions}
        return caught_up(positions, self.ends)


@asynccontextmanager
async def from_start(
    config: ClientConfig,
    topics: Sequence[str],
    *,
    partitions: Mapping[str, Sequence[int]] | None = None,
    **consumer_options: Any,
) -> AsyncIterator[FromStart]:
    """A ``FromStart`` over every partition of ``topics`` (or just ``partitions``), stopped on exit.

    ``consumer_options`` go to ``AIOKafkaConsumer`` (``max_partition_fetch_bytes``, say).
    """
    consumer = AIOKafkaConsumer(**config.kwargs(enable_auto_commit=False, **consumer_options))
    try:
        await consumer.start()  # inside: a reader cancelled while it starts still stops its consumer
        ids = partitions if partitions is not None else await topic_partitions(config, list(topics))
        tps = [TopicPartition(topic, p) for topic in topics for p in ids[topic]]
        # End offsets first, before anything is assigned: once the fetcher long-polls a partition,
        # the broker answers this connection's next request only after that fetch (up to 0.5 s).
        ends: dict[TopicPartition, int] = await consumer.end_offsets(tps) if tps else {}
        consumer.assign(tps)
        if tps:
            await consumer.seek_to_beginning(*tps)
        yield FromStart(consumer, tps, ends)
    finally:
        await consumer.stop()
