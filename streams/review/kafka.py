"""The review service's Kafka edges: review requests in (into the store), labels out; the scoreboards and
the drift audit's snapshots followed for the pages.

The feed commits a review request's offset only after the store has it (a crash re-reads, and the
store's unique key makes the re-read a no-op); an unreadable request is dead-lettered with its reason
and bytes before its offset is committed. A label is acknowledged to the reviewer only after the broker
has it (``acks="all"``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError
from aiokafka.structs import OffsetAndMetadata
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential_jitter

from pairjudge.agents.errors import InputRejected
from pairjudge.schemas import HumanLabel, ReviewRequest
from pairjudge.schemas.audit import AuditSnapshot
from pairjudge.schemas.scores import ScoreSnapshot
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.cancellation import stop_if_cancelled
from pairjudge.streams.kafka.codecs import decode, encode
from pairjudge.streams.kafka.dead_letters import build_dead_letter
from pairjudge.streams.kafka.readers import from_start
from pairjudge.streams.review.store import STORE_UNAVAILABLE, ReviewStore
from pairjudge.streams.security.kafka_clients import client_config

log = logging.getLogger(__name__)

#: How long one batch insert may take before it counts as the database not answering (then retried).
STORE_BATCH_TIMEOUT_S = 30.0


class LabelSink:
    """One producer for the service's labels; ``publish`` returns once the broker has the label."""

    def __init__(self, settings: Settings) -> None:
        self._topic = settings.topics.name("labels")
        self._kafka = settings.kafka
        self._idempotent = settings.review.idempotent_labels
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> None:
        self._producer = AIOKafkaProducer(
            **client_config(self._kafka).kwargs(acks="all", enable_idempotence=self._idempotent)
        )
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
        #: Why requests are not being stored right now (``/readyz``); None while they are.
        self.problem: str | None = None

    async def start(self) -> None:
        await self._producer.start()
        await self._consumer.start()

    async def stop(self) -> None:
        await self._consumer.stop()
        await self._producer.stop()

    async def run(self) -> None:
        """Consume until cancelled. A database outage is waited out (module doc); other errors end the task."""
        while True:
            batches = await self._consumer.getmany(timeout_ms=500, max_records=200)
            for tp, records in batches.items():
                requests = [r for r in [await self._read(rec.value, tp, rec.offset, rec.key) for rec in records] if r]
                new = await self._store_batch(requests)  # one transaction per partition batch
                self.stored += new
                self.duplicates += len(requests) - new
                await self._commit(tp, records[-1].offset + 1)

    async def _store_batch(self, requests: list[ReviewRequest]) -> int:
        """Store a batch, retrying (with backoff, for as long as it takes) while the database is unreachable.

        Nothing is committed before the batch is stored, and the store's unique key makes a repeated
        insert a no-op, so retrying loses and doubles nothing. Without this, one failed insert (a
        PostgreSQL restart, a fail-over) ended the feed for good: the web app kept serving, and review
        requests waited unread until someone restarted the process.
        """
        async for attempt in AsyncRetrying(
            retry=retry_if_exception_type(STORE_UNAVAILABLE),
            wait=wait_exponential_jitter(multiplier=0.5, max=15),
            before_sleep=self._note_store_failure,
            reraise=True,
        ):
            with attempt:
                # Bounded: a database that stopped answering mid-insert must not hold the feed for ever.
                new = await asyncio.wait_for(self._store.add_many(requests), STORE_BATCH_TIMEOUT_S)
        if self.problem is not None:
            log.warning("the review database answers again: storing review requests")
        self.problem = None
        return new

    def _note_store_failure(self, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        # The exception's type only: its text can hold the database's host and user name.
        problem = f"review requests not stored: database unavailable ({type(error).__name__})"
        if problem != self.problem:
            log.error("%s; retrying until it answers", problem)
        self.problem = problem

    async def _commit(self, tp: TopicPartition, offset: int) -> None:
        try:
            await self._consumer.commit({tp: OffsetAndMetadata(offset, "")})
        except (CommitFailedError, IllegalStateError) as exc:
            # The group rebalanced meanwhile (a long database outage outlasts max.poll.interval.ms): the
            # partition's next owner re-reads from the last commit, and the store ignores what it has.
            log.warning("commit of %s[%d]@%d refused (%s): it will be re-read", tp.topic, tp.partition, offset, exc)

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


async def follow_from_start(settings: Settings, topic: str, take: Callable[[bytes | None], object]) -> None:
    """Read every partition of ``topic`` from its start without a consumer group, for ever, handing each
    record's value to ``take``: the review service's views of compacted-ish topics (scores, audit)."""
    async with from_start(client_config(settings.kafka), [topic]) as reader:
        while True:
            stop_if_cancelled()  # a request to stop swallowed while the reader opened (streams.kafka.cancellation)
            for records in (await reader.batches(timeout_ms=1000)).values():
                for record in records:
                    take(record.value)


class ScoresFeed:
    """Follows ``pairjudge.scores`` from the start (no group): the latest snapshot of every experiment."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._topic = settings.topics.name("scores")
        self.latest: dict[str, ScoreSnapshot] = {}

    def take(self, raw: bytes | None) -> bool:
        """Keep ``raw`` if it is an experiment's latest snapshot; False for an older or unreadable one."""
        try:
            snap = decode(ScoreSnapshot, raw, max_bytes=self._settings.max_event_bytes)
        except InputRejected:
            log.warning("unreadable score snapshot skipped")
            return False
        current = self.latest.get(snap.experiment)
        if current is not None and snap.updated_at < current.updated_at:
            return False
        self.latest[snap.experiment] = snap
        return True

    async def run(self) -> None:
        await follow_from_start(self._settings, self._topic, self.take)


class AuditFeed:
    """Follows ``pairjudge.audit`` from the start (no group): the latest window's snapshot of every series.

    For the operators' page: the judge's kappa against people beside the human ceiling, and the kappa
    guard's mode and floor, as the audit computed them. Alerts on the same topic are passed over.
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._topic = settings.topics.name("audit")
        self.latest: dict[str, AuditSnapshot] = {}

    def take(self, raw: bytes | None) -> bool:
        """Keep ``raw`` if it is a snapshot of a series' latest window (a later one, or a newer publication
        of the same window); False for anything else (an alert, an older window, an unreadable record)."""
        if not raw or b'"window_end"' not in raw:
            return False  # an alert (or nothing): the topic carries both
        try:
            snap = decode(AuditSnapshot, raw, max_bytes=self._settings.max_event_bytes)
        except InputRejected:
            log.warning("unreadable audit snapshot skipped")
            return False
        current = self.latest.get(snap.series)
        order = (snap.window_start, snap.published_at)
        if current is not None and order < (current.window_start, current.published_at):
            return False
        self.latest[snap.series] = snap
        return True

    async def run(self) -> None:
        await follow_from_start(self._settings, self._topic, self.take)
