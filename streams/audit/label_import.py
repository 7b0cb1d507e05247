"""``pairjudge labels import``: publish a label file's labels, and dead-letter its bad lines.

Labels go to ``<prefix>.labels`` keyed by ``pair_id``, so a label lands on the partition of its pair
(the topics have one partition count, ``streams.kafka.topics``). A line that is not a valid label goes to
``<prefix>.deadletter`` with its reason, a readable error and its original bytes (``streams.kafka.dead_letters``),
in file order with the labels. Every send is awaited with ``acks=all``, as ``pairjudge send`` does.

Like ``pairjudge send``, this creates no topics (the worker does): it checks they exist first, because a
labels topic auto-created by the broker would have the broker's default partition count, and labels
would then land on other partitions than their pairs.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field

from aiokafka import AIOKafkaProducer

from pairjudge.streams.audit.label_files import Accepted, ParsedFile, Rejected
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.admin import BrokerError, topic_partitions
from pairjudge.streams.kafka.codecs import encode
from pairjudge.streams.kafka.dead_letters import BuiltLetter, build_dead_letter
from pairjudge.streams.security.kafka_clients import client_config


@dataclass(frozen=True, slots=True)
class ImportReport:
    #: Valid labels in the file (published, or that would be with --dry-run).
    labels: int
    #: Lines dead-lettered (or that would be with --dry-run).
    dead_lettered: int
    #: Pair ids with more than one label in the file (all of them kept).
    duplicate_pair_ids: int
    #: Labels the broker acknowledged; 0 with --dry-run.
    published: int = 0
    reasons: dict[str, int] = field(default_factory=dict)


def summarise(parsed: ParsedFile, *, published: int = 0) -> ImportReport:
    rejected = parsed.rejected
    return ImportReport(
        labels=len(parsed.labels),
        dead_lettered=len(rejected),
        duplicate_pair_ids=len(parsed.duplicate_pair_ids()),
        published=published,
        reasons=dict(Counter(r.reason for r in rejected).most_common()),
    )


async def check_topics(settings: Settings) -> None:
    """Raise ``BrokerError`` unless the labels and dead-letter topics exist with the pairs topic's
    partition count (otherwise a label's key would not put it on its pair's partition)."""
    names = [settings.topics.name(kind) for kind in ("pairs", "labels", "deadletter")]
    try:
        partitions = await topic_partitions(client_config(settings.kafka), names)
    except BrokerError as exc:
        raise BrokerError(f"{exc} (start a worker, which creates the pairjudge topics, or create them)") from None
    pairs, labels = (len(partitions[n]) for n in names[:2])
    if labels != pairs:
        raise BrokerError(
            f"{names[1]} has {labels} partitions and {names[0]} has {pairs}: labels would not land on "
            "the partition of their pair"
        )


async def publish(settings: Settings, parsed: ParsedFile, source: str) -> ImportReport:
    """Publish every label and every dead letter of ``parsed``, in file order; every send awaited.

    A send the broker refuses raises (aiokafka's ``KafkaError``): the labels already sent stay on the
    topic, so a re-run publishes them again, which the labels' consumer sees as duplicates.
    """
    await check_topics(settings)
    labels_topic = settings.topics.name("labels")
    letters_topic = settings.topics.name("deadletter")
    # No idempotent producer, as in `pairjudge send`: Tansu does not support it.
    producer = AIOKafkaProducer(**client_config(settings.kafka).kwargs(acks="all", linger_ms=5))
    await producer.start()
    try:
        pending: list[tuple[bool, asyncio.Future[object]]] = []
        for item in parsed.items:
            if isinstance(item, Accepted):
                label = item.label
                fut = await producer.send(labels_topic, value=encode(label), key=label.pair_id.encode())
                pending.append((True, fut))
            else:
                letter = _letter(item, source, labels_topic)
                fut = await producer.send(letters_topic, value=letter.value, key=letter.key or None)
                pending.append((False, fut))
        published = 0
        for is_label, fut in pending:
            await fut
            published += is_label
        return summarise(parsed, published=published)
    finally:
        await producer.stop()


def _letter(item: Rejected, source: str, labels_topic: str) -> BuiltLetter:
    return build_dead_letter(
        stage="decode",
        reason=item.reason,
        detail=f"{source} {item.where}: {item.detail}",
        raw=item.raw,
        # The topic the line was meant for; no partition or offset, since it never reached Kafka.
        topic=labels_topic,
        key=item.key,
    )
