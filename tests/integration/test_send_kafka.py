"""``pairjudge send``: events land on the pairs topic as they are, keyed by pair id, each with a trace."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from typer.testing import CliRunner

from pairjudge.streams.cli import app
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.admin import create_topics, topic_partitions
from pairjudge.streams.kafka.topics import topic_specs
from pairjudge_dev.pairgen import many_pairs

pytestmark = [pytest.mark.kafka]


def test_send_puts_every_line_on_the_pairs_topic(
    kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Synchronous: the command runs its own event loop, as it does for a user.
    prefix = f"send-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("PAIRJUDGE_TOPICS__PREFIX", prefix)
    settings = Settings()
    asyncio.run(create_topics(kafka_bootstrap, topic_specs(settings)))
    lines = [*many_pairs(5, prefix), b'{"not": "a pair"']  # a malformed line is sent too: the worker dead-letters it
    path = tmp_path / "pairs.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")

    result = CliRunner().invoke(app, ["send", str(path), "--bootstrap", kafka_bootstrap])
    assert result.exit_code == 0, result.output
    assert f"sent 6 events to {prefix}.pairs" in result.output

    records = asyncio.run(_read_all(kafka_bootstrap, f"{prefix}.pairs"))
    assert sorted(r.value for r in records) == sorted(lines)
    for record in records:
        try:
            pair_id = json.loads(record.value)["pair_id"]
        except (ValueError, KeyError):
            assert record.key is None
            continue
        assert record.key == pair_id.encode()
    # Every event starts its own trace.
    trace_ids = {dict(r.headers or ())["traceparent"].decode().split("-")[1] for r in records}
    assert len(trace_ids) == len(records)


async def _read_all(bootstrap: str, topic: str) -> list[ConsumerRecord[bytes, bytes]]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        parts = [TopicPartition(topic, p) for p in (await topic_partitions(bootstrap, [topic]))[topic]]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        records: list[ConsumerRecord[bytes, bytes]] = []
        while batch := await consumer.getmany(timeout_ms=2000):
            records.extend(r for rs in batch.values() for r in rs)
        return records
    finally:
        await consumer.stop()
