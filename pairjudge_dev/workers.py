"""What every end-to-end run on Kafka sets up: its own topics and group, raw input, workers that get stopped.

Shared by the integration tests and the benchmarks (``pairjudge_dev.bench``).
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from pairjudge.agents.audit import JoinEntry
from pairjudge.schemas.audit import DecisionRecord
from pairjudge.schemas.outcomes import OUTCOMES
from pairjudge.streams.cli.demo import start_worker, stop_process
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.admin import create_topics
from pairjudge.streams.kafka.producer import key_of
from pairjudge.streams.kafka.readers import from_start
from pairjudge.streams.kafka.topics import AUDIT_JOIN_TABLE, changelog_topic, topic_specs
from pairjudge.streams.security.kafka_clients import ClientConfig, as_client_config, client_config


def run_settings(base: Settings, bootstrap: str, work: Path, *, tag: str, **sections: Any) -> Settings:
    """``base`` for one run on ``bootstrap``: a topic prefix and consumer group of its own (``<tag>-<id>``),
    4 partitions, worker data under ``work``. ``sections`` add to (or override) those settings; a list
    (``tiers``, ``jury``) replaces the setting whole."""
    run = f"{tag}-{uuid.uuid4().hex[:8]}"
    values: dict[str, dict[str, Any]] = {
        "kafka": {"bootstrap_servers": bootstrap, "partitions": 4},
        "topics": {"prefix": run},
        "worker": {"app_id": f"pairjudge-{run}", "data_dir": work / "data"},
    }
    lists = {name: section for name, section in sections.items() if isinstance(section, list | tuple)}
    for name, section in sections.items():
        if name not in lists:
            values[name] = {**values.get(name, {}), **section}
    merged = base.model_dump()
    for name, section in values.items():
        merged[name] = {**merged[name], **section}
    merged.update(lists)
    # Validated again (model_copy would not): sections may carry strings for URLs and paths.
    return Settings.model_validate(merged)


async def kafka_run(bootstrap: str, tmp_path: Path, tag: str, **sections: Any) -> Settings:
    """Settings for one test run (``run_settings`` over the defaults), with its topics created."""
    settings = run_settings(Settings(), bootstrap, tmp_path, tag=tag, **sections)
    await create_topics(client_config(settings.kafka), topic_specs(settings))
    return settings


async def produce_raw(bootstrap: str | ClientConfig, topic: str, raws: Sequence[bytes], *, keyed: bool) -> None:
    """The bytes as they are, keyed by ``key_of`` or with no key, the way any producer might send them."""
    producer = AIOKafkaProducer(**as_client_config(bootstrap).kwargs(acks="all", linger_ms=5))
    await producer.start()
    try:
        futures = [await producer.send(topic, value=raw, key=key_of(raw) if keyed else None) for raw in raws]
        for fut in futures:
            await fut
    finally:
        await producer.stop()


@contextlib.contextmanager
def running_worker(settings: Settings, log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A ``pairjudge worker`` process, stopped gracefully (which flushes its spans) however the test ends."""
    worker = start_worker(settings, log_path)
    try:
        yield worker
    finally:
        stop_process(worker)


def read_log(path: Path) -> str:
    """A worker's log so far; empty before the worker has written it."""
    return path.read_text(errors="replace") if path.exists() else ""


async def wait_for_log(path: Path, text: str, timeout: float) -> str:
    """The log once it holds ``text``, or as it is after ``timeout`` seconds (the caller asserts on it)."""
    deadline = time.monotonic() + timeout
    while True:
        log = await asyncio.to_thread(read_log, path)
        if text in log or time.monotonic() > deadline:
            return log
        await asyncio.sleep(0.5)


async def committed_offsets(settings: Settings, kind: str = "pairs") -> dict[int, int]:
    """The workers' group's committed offset on each partition of the ``kind`` topic (absent: none yet)."""
    admin = AIOKafkaAdminClient(**client_config(settings.kafka).kwargs())
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(settings.worker.app_id)
    finally:
        await admin.close()
    topic = settings.topics.name(kind)
    return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic and meta.offset >= 0}


async def end_offsets(settings: Settings, kind: str = "pairs") -> dict[int, int]:
    """The end offset of each partition of the ``kind`` topic."""
    consumer = AIOKafkaConsumer(**client_config(settings.kafka).kwargs())
    await consumer.start()
    try:
        tps = [TopicPartition(settings.topics.name(kind), p) for p in range(settings.kafka.partitions)]
        return {tp.partition: offset for tp, offset in (await consumer.end_offsets(tps)).items()}
    finally:
        await consumer.stop()


async def wait_until_committed(settings: Settings, timeout: float, kind: str = "pairs") -> bool:
    """Whether the workers' group committed every record of the ``kind`` topic (as it ends now) within
    ``timeout`` seconds: every input read and done, including those whose outcome was already published."""
    ends = {p: end for p, end in (await end_offsets(settings, kind)).items() if end > 0}
    deadline = time.monotonic() + timeout
    while True:
        committed = await committed_offsets(settings, kind)
        if all(committed.get(p, 0) >= end for p, end in ends.items()):
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.5)


async def final_decision_records(
    settings: Settings, pair_ids: set[str], *, timeout: float = 60.0
) -> dict[str, DecisionRecord]:
    """Each pair's final decision record (a verdict's or a review's), as the audit's join keeps it.

    A judging stage hands its record to the join on its own worker, so the records are read where the join
    writes them: its table's changelog (the latest entry per pair wins), and ``pairjudge.decisions`` for a
    pair whose records went through the topic. Waits until every pair in ``pair_ids`` has one, or ``timeout``.
    """
    join = changelog_topic(settings.worker.app_id, AUDIT_JOIN_TABLE)
    decisions = settings.topics.name("decisions")
    found: dict[str, DecisionRecord] = {}
    async with from_start(client_config(settings.kafka), [join, decisions]) as reader:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not pair_ids <= found.keys():
            for tp, batch in (await reader.batches(timeout_ms=200, max_records=1000)).items():
                for r in batch:
                    record = _final_of(r.value, from_join=tp.topic == join)
                    if record is not None and record.pair_id in pair_ids:
                        found[record.pair_id] = record
    return found


def _final_of(value: bytes | None, *, from_join: bool) -> DecisionRecord | None:
    if not value:
        return None
    if from_join:
        # A join entry as stored: "<partition>:" and its JSON (streams.audit.stored).
        return JoinEntry.from_bytes(value.split(b":", 1)[1]).final
    record = DecisionRecord.model_validate_json(value)
    return record if OUTCOMES[record.outcome].ends_story else None
