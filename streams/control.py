"""Live settings from the compacted ``pairjudge.control`` topic, without a redeploy.

Every worker must see every update, so this is not a Faust agent (an agent's consumer group would
give the one control partition to a single worker): each worker reads the whole topic with its own
groupless consumer, from the beginning, and keeps following it. ``pairjudge control set`` writes.
"""

from __future__ import annotations

import logging
from typing import get_args

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from pydantic import ValidationError

from agents.errors import InputRejected
from schemas import ControlUpdate
from schemas.events import ControlKey
from streams.brokers import topic_partitions
from streams.codecs import decode, encode
from streams.pipeline import PolicyHolder
from streams.settings import Settings

log = logging.getLogger(__name__)

#: How long a poll may come back empty before the topic counts as read up to date at start-up.
#: (End offsets are not used: Tansu reports them wrongly.)
CATCH_UP_IDLE_MS = 1000
MAX_CONTROL_BYTES = 4096
CONTROL_KEYS: tuple[str, ...] = get_args(ControlKey)


def apply_record(holder: PolicyHolder, key: bytes | None, value: bytes | None) -> None:
    """Apply one control record; a tombstone returns its setting to the configured value."""
    if value is None:
        if key:
            holder.clear(key.decode("utf-8", "replace"))
            log.warning("control: %s cleared; back to the configured value", key.decode("utf-8", "replace"))
        return
    try:
        update = decode(ControlUpdate, value, max_bytes=MAX_CONTROL_BYTES)
        holder.apply(update)
    except (InputRejected, ValueError) as exc:
        # A bad control message must not stop the worker or change anything; it is reported loudly.
        log.error("control: ignored an invalid update (key %r): %s", key, exc)
        return
    log.warning("control: %s = %s (by %s)", update.key, update.value, update.updated_by or "unknown")


async def follow_control(settings: Settings, holder: PolicyHolder) -> None:
    """Read the control topic from the start, mark the holder ready once caught up, then keep following."""
    topic = settings.topics.name("control")
    partitions = (await topic_partitions(settings.kafka.bootstrap_servers, [topic]))[topic]
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka.bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        while True:
            batch = await consumer.getmany(timeout_ms=CATCH_UP_IDLE_MS)
            for records in batch.values():
                for record in records:
                    apply_record(holder, record.key, record.value)
            if not batch and not holder.ready.is_set():
                holder.ready.set()
                log.info("control: caught up; policy %s", holder.current)
    finally:
        await consumer.stop()


def parse_value(key: str, raw: str) -> float | bool:
    if key == "tiebreak_enabled":
        lowered = raw.strip().lower()
        if lowered not in ("true", "false"):
            raise ValueError(f"tiebreak_enabled takes true or false, not {raw!r}")
        return lowered == "true"
    return float(raw)


async def publish_control(settings: Settings, key: str, value: float | bool | None, updated_by: str) -> None:
    """Write one update (``value=None`` writes a tombstone: back to the configured value)."""
    payload: bytes | None = None
    if value is not None:
        try:
            update = ControlUpdate.model_validate({"key": key, "value": value, "updated_by": updated_by})
        except ValidationError as exc:
            raise ValueError(f"invalid control update: {exc.errors()[0]['msg']}") from None
        # Refuse what a worker would refuse, before it reaches the topic.
        PolicyHolder(settings.policy.to_policy()).apply(update)
        payload = encode(update)
    elif key not in CONTROL_KEYS:
        raise ValueError(f"unknown control key {key!r}; one of {', '.join(CONTROL_KEYS)}")
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(settings.topics.name("control"), value=payload, key=key.encode())
    finally:
        await producer.stop()
