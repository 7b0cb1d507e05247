"""The review service's Kafka edges: review requests in (into the store), labels out.

The feed commits a review request's offset only after the store has it (a crash re-reads, and the
store's unique key makes the re-read a no-op); an unreadable request is dead-lettered with its reason
and bytes before its offset is committed. A label is acknowledged to the reviewer only after the broker
has it (``acks="all"``).
"""

from __future__ import annotations

import asyncio
import logging

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from pairjudge.agents.errors import InputRejected
from pairjudge.schemas import HumanLabel, ReviewRequest
from pairjudge.schemas.scores import ScoreSnapshot
from pairjudge.streams.brokers import topic_partitions
from pairjudge.streams.codecs import decode, encode
from pairjudge.streams.deadletter import build_dead_letter
from pairjudge.streams.kafka_security import client_config
from pairjudge.streams.review.store import ReviewStore
from pairjudge.streams.settings import Settings

log = logging.getLogger(__name__)


class LabelSink:
    """One producer for the service's labels; ``publish`` returns once the broker has the label."""

    def __init__(self, settings: Settings) -> None:
        self._topic = settings.topics.name("labels")
        self._kafka = settings.kafka
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> None:
        self._producer = AIOKafkaProducer(**client_config(self._kafka).kwargs(acks="all", enable_idempotence=True))
        await self._producer.start()

    async def stop(self) -> None:
        if self._producer is not None:
            await self._producer.stop()

    async def publish(self, label: HumanLabel, timeout_s: float = 15.0) -> None:
        if self._producer is None:
            raise RuntimeError("the label sink was not started")
        await asyncio.wait_for(
            self._producer.send_and_wait(self._topic, value=encode(label), key=label.pair_id.encode()), timeout_s
        )


class ReviewFeed:
    """Consumes the review topic into the store, in a consumer group shared by the service's instances."""

    def __init__(self, settings: Settings, store: ReviewStore) -> None:
        self._settings = settings
        self._store = store
        self._topic = settings.topics.name("review")
        self._letters = settings.topics.name("deadletter")
        config = client_config(settings.kafka)
        self._consumer = AIOKafkaConsumer(
            self._topic,
            **config.kwargs(
                group_id=settings.review.group_id,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                isolation_level="read_committed",
            ),
        )
        self._producer = AIOKafkaProducer(**config.kwargs(acks="all"))
        self.stored = 0
        self.duplicates = 0
        self.dead_lettered = 0

    async def start(self) -> None:
        await self._producer.start()
        await self._consumer.start()

    async def stop(self) -> None:
        await self._consumer.stop()
        await self._producer.stop()

    async def run(self) -> None:
        """Consume until cancelled."""
        while True:
            batches = await self._consumer.getmany(timeout_ms=500, max_records=200)
            for tp, records in batches.items():
                requests = [r for r in [await self._read(rec.value, tp, rec.offset, rec.key) for rec in records] if r]
                new = await self._store.add_many(requests)  # one transaction per partition batch
                self.stored += new
                self.duplicates += len(requests) - new
                await self._consumer.commit({tp: OffsetAndMetadata(records[-1].offset + 1, "")})

    async def _read(
        self, raw: bytes | None, tp: TopicPartition, offset: int, key: bytes | None
    ) -> ReviewRequest | None:
        """The request in ``raw``; an unreadable one is dead-lettered (before its offset is committed)."""
        try:
            return decode(ReviewRequest, raw, max_bytes=self._settings.max_event_bytes)
        except InputRejected as exc:
            letter = build_dead_letter(
                stage="decode",
                reason=exc.reason,
                detail=f"review request not readable: {exc.detail}",
                raw=raw,
                topic=tp.topic,
                partition=tp.partition,
                offset=offset,
                key=key,
            )
            await self._producer.send_and_wait(self._letters, value=letter.value, key=letter.key or None)
            self.dead_lettered += 1
            log.warning("review request at %s[%d]@%d dead-lettered: %s", tp.topic, tp.partition, offset, exc.reason)
            return None


class ScoresFeed:
    """Follows ``pairjudge.scores`` from the start (no group): the latest snapshot of every experiment."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._topic = settings.topics.name("scores")
        self.latest: dict[str, ScoreSnapshot] = {}

    async def run(self) -> None:
        config = client_config(self._settings.kafka)
        partitions = (await topic_partitions(config, [self._topic]))[self._topic]
        consumer = AIOKafkaConsumer(**config.kwargs(enable_auto_commit=False))
        await consumer.start()
        try:
            tps = [TopicPartition(self._topic, p) for p in partitions]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            while True:
                batches = await consumer.getmany(timeout_ms=1000)
                for records in batches.values():
                    for record in records:
                        try:
                            snap = decode(ScoreSnapshot, record.value, max_bytes=self._settings.max_event_bytes)
                        except InputRejected:
                            log.warning("unreadable score snapshot at offset %d skipped", record.offset)
                            continue
                        current = self.latest.get(snap.experiment)
                        if current is None or snap.updated_at >= current.updated_at:
                            self.latest[snap.experiment] = snap
        finally:
            await consumer.stop()
