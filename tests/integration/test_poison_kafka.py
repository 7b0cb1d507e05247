"""Poison events on real Kafka: a real ``pairjudge worker`` dead-letters every kind, and keeps judging.

Each poison kind once crashed the judge agent or vanished: JSON nested 1,000 or 100,000 deep, a
5,000-digit number, ``1e999``, events between 750 KB and the broker's 1 MB limit (whose base64 dead
letter was too large to send), unknown ``schema_version`` values, outputs of zero-width characters.
Every one must get exactly one dead letter, with the right reason, the whole event's size and SHA-256,
and a head of the original when it was too large to carry. Valid pairs sent around them must still be
judged, and the worker must still be running at the end.

``poison_events`` and ``read_dead_letters`` are also used by ``bench/poison_events.py``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from schemas import DeadLetter
from streams.brokers import topic_partitions
from streams.collector import collect_outcomes
from streams.deadletter import DEFAULT_MAX_LETTER_BYTES
from streams.producer import key_of, send_events
from streams.settings import Settings
from tests.integration.harness import kafka_run, running_worker
from tests.integration.pairgen import many_pairs

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

#: Just under what a default broker takes in one record batch (message.max.bytes 1,048,588) and what
#: aiokafka's producer sends by default (max_request_size 1,048,576), with room for the record overhead.
NEAR_BROKER_LIMIT = 1_040_000
#: A dead letter of at most 900,000 bytes keeps a whole original up to about 674,000 bytes (base64 adds a
#: third); the poison sizes stay clear of that edge on both sides.
WHOLE_BELOW, CUT_ABOVE = 650_000, 700_000


@dataclass(frozen=True)
class Poison:
    kind: str
    raw: bytes
    reason: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()


def _pair(pair_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(many_pairs(1, "poison")[0])
    data["pair_id"] = pair_id
    return data


def _with_literal(pair_id: str, literal: str) -> bytes:
    """A valid pair with one more field holding ``literal`` as raw JSON (a number JSON cannot carry)."""
    return json.dumps(_pair(pair_id)).encode()[:-1] + b', "n": ' + literal.encode() + b"}"


def _sized(pair_id: str, size: int) -> bytes:
    """A well-formed pair of exactly ``size`` bytes (its first output is padded)."""
    data = _pair(pair_id)
    data["candidates"][0]["output"] = ""
    data["candidates"][0]["output"] = "x" * (size - len(json.dumps(data).encode()))
    raw = json.dumps(data).encode()
    assert len(raw) == size
    return raw


def _with_output(pair_id: str, output: str) -> bytes:
    data = _pair(pair_id)
    data["candidates"][1]["output"] = output
    return json.dumps(data).encode()


def _with_version(pair_id: str, version: object) -> bytes:
    return json.dumps({**_pair(pair_id), "schema_version": version}).encode()


def _not_utf8(pair_id: str) -> bytes:
    return json.dumps(_pair(pair_id)).encode().replace(b'"output": "', b'"output": "\xff\xfe', 1)


#: kind -> (build the raw event for a pair id, the dead-letter reason it must get)
KINDS: dict[str, tuple[Any, str]] = {
    "deep_1000": (lambda pid: f'{{"pair_id": "{pid}", "x": {"[" * 1_000}{"]" * 1_000}}}'.encode(), "too_deep"),
    "deep_100k": (lambda pid: f'{{"pair_id": "{pid}", "x": {"{" * 100_000}'.encode(), "too_deep"),
    "deep_300k_oversized": (
        lambda pid: f'{{"pair_id": "{pid}", "x": {"[" * 300_000}{"]" * 300_000}}}'.encode(),
        "oversized_event",
    ),
    "huge_int": (lambda pid: _with_literal(pid, "9" * 5_000), "number_too_large"),
    "huge_float": (lambda pid: _with_literal(pid, "1." + "0" * 5_000), "number_too_large"),
    "float_1e999": (lambda pid: _with_literal(pid, "1e999"), "number_too_large"),
    "nan": (lambda pid: _with_literal(pid, "NaN"), "malformed_json"),
    "event_800kb": (lambda pid: _sized(pid, 800_000), "oversized_event"),
    "event_1mb": (lambda pid: _sized(pid, NEAR_BROKER_LIMIT), "oversized_event"),
    "not_utf8": (_not_utf8, "not_utf8"),
    "not_an_object": (lambda pid: json.dumps([_pair(pid)]).encode(), "malformed_json"),
    "version_99": (lambda pid: _with_version(pid, 99), "unsupported_schema_version"),
    "version_-1": (lambda pid: _with_version(pid, -1), "unsupported_schema_version"),
    'version_"2"': (lambda pid: _with_version(pid, "2"), "unsupported_schema_version"),
    'version_"1"': (lambda pid: _with_version(pid, "1"), "unsupported_schema_version"),
    "version_true": (lambda pid: _with_version(pid, True), "unsupported_schema_version"),
    "version_1.0": (lambda pid: _with_version(pid, 1.0), "unsupported_schema_version"),
    "version_null": (lambda pid: _with_version(pid, None), "unsupported_schema_version"),
    "zero_width_output": (lambda pid: _with_output(pid, "\u200b\u200c\u200d\u2060\ufeff" * 20), "empty_output"),
    "empty_output": (lambda pid: _with_output(pid, ""), "empty_output"),
}


def poison_events(prefix: str, kind: str, count: int) -> list[Poison]:
    """``count`` distinct events of one poison kind (distinct pair ids, so distinct SHA-256)."""
    build, reason = KINDS[kind]
    slug = "".join(c if c.isalnum() else "_" for c in kind)
    events = [Poison(kind, build(f"{prefix}-{slug}-{i:04d}"), reason) for i in range(count)]
    assert all(not WHOLE_BELOW <= len(p.raw) <= CUT_ABOVE for p in events)
    return events


def expect_truncated(event: Poison) -> bool:
    return len(event.raw) > CUT_ABOVE


async def send_raw(settings: Settings, events: list[bytes], keyed: bool = False) -> None:
    """The bytes as they are, with no key (or ``key_of``'s), the way any producer might send them."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers, acks="all", linger_ms=5)
    await producer.start()
    try:
        topic = settings.topics.name("pairs")
        futures = [await producer.send(topic, value=raw, key=key_of(raw) if keyed else None) for raw in events]
        for fut in futures:
            await fut
    finally:
        await producer.stop()


async def read_dead_letters(
    settings: Settings, expected: set[str], *, timeout: float, settle: float = 0.0
) -> dict[str, list[tuple[DeadLetter, int]]]:
    """Dead letters by their original's SHA-256, each with its record size (key + value), read from the
    start until every ``expected`` digest has one (or ``timeout``); then ``settle`` s more for duplicates.
    """
    topic = settings.topics.name("deadletter")
    found: dict[str, list[tuple[DeadLetter, int]]] = defaultdict(list)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka.bootstrap_servers, enable_auto_commit=False, max_partition_fetch_bytes=2**21
    )
    await consumer.start()
    try:
        parts = [
            TopicPartition(topic, p) for p in (await topic_partitions(settings.kafka.bootstrap_servers, [topic]))[topic]
        ]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        deadline = time.monotonic() + timeout
        done_at: float | None = None
        while time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500, max_records=500)
            for records in batches.values():
                for record in records:
                    letter = DeadLetter.model_validate_json(record.value or b"")
                    found[letter.original_sha256 or ""].append(
                        (letter, len(record.key or b"") + len(record.value or b""))
                    )
            if expected <= found.keys():
                done_at = done_at or time.monotonic()
                if time.monotonic() - done_at >= settle:
                    break
        return dict(found)
    finally:
        await consumer.stop()


async def test_every_poison_event_is_dead_lettered_once_and_the_worker_keeps_judging(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await kafka_run(kafka_bootstrap, tmp_path, "poison", worker={"concurrency": 8})
    prefix = settings.topics.prefix
    poison = [event for kind in KINDS for event in poison_events(prefix, kind, 1)]
    before, after = many_pairs(6, f"{prefix}-ok-a"), many_pairs(6, f"{prefix}-ok-b")
    valid_ids = {json.loads(raw)["pair_id"] for raw in before + after}

    with running_worker(settings, tmp_path / "worker.log") as worker:
        await send_events(settings, before)
        # Half through the producer's own path (key_of reads what it can), half with no key at all.
        await send_raw(settings, [p.raw for p in poison[::2]])
        assert await send_events(settings, [p.raw for p in poison[1::2]]) == len(poison[1::2])
        await send_events(settings, after)
        letters = await read_dead_letters(settings, {p.sha256 for p in poison}, timeout=180, settle=3)
        outcomes = await collect_outcomes(settings, valid_ids, timeout=180)
        alive = worker.poll() is None

    log = (tmp_path / "worker.log").read_text(errors="replace")
    assert alive, f"the worker exited\n{log[-4000:]}"
    assert "RecursionError" not in log
    assert "MessageSizeTooLarge" not in log
    problems = []
    for event in poison:
        got = letters.get(event.sha256, [])
        if len(got) != 1:
            problems.append(f"{event.kind}: {len(got)} dead letters")
            continue
        letter, record_size = got[0]
        if letter.reason != event.reason:
            problems.append(f"{event.kind}: reason {letter.reason}, expected {event.reason} ({letter.error})")
        if letter.original_size != len(event.raw) or not event.raw.startswith(letter.original):
            problems.append(f"{event.kind}: original of {len(letter.original)}/{letter.original_size} bytes")
        if letter.original_truncated != expect_truncated(event):
            problems.append(f"{event.kind}: truncated={letter.original_truncated} for {len(event.raw)} bytes")
        if record_size > DEFAULT_MAX_LETTER_BYTES:
            problems.append(f"{event.kind}: a {record_size}-byte dead letter")
        if letter.topic != settings.topics.name("pairs") or letter.offset is None:
            problems.append(f"{event.kind}: origin {letter.topic}/{letter.partition}/{letter.offset}")
    assert not problems, "\n".join(problems)
    # Each reason says why in words, and a version error names what this consumer accepts.
    by_kind = {p.kind: letters[p.sha256][0][0] for p in poison}
    assert "accepts schema_version 1" in by_kind["version_99"].error
    assert by_kind["deep_100k"].stage == "decode"
    assert by_kind["zero_width_output"].stage == "validate"
    assert by_kind["event_1mb"].pair_id == f"{prefix}-event_1mb-0000"

    assert outcomes.complete, f"valid pairs without an outcome: {sorted(outcomes.missing)}\n{log[-4000:]}"
    assert {kind for kind, _ in outcomes.final.values()} <= {"verdicts", "review"}, outcomes.final


async def test_send_skips_an_event_no_broker_would_take_and_sends_the_rest(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await kafka_run(kafka_bootstrap, tmp_path, "poison-send")
    prefix = settings.topics.prefix
    events = [
        *(p.raw for p in poison_events(prefix, "deep_100k", 1)),
        b'{"pair_id": "' + prefix.encode() + b'-too-big", "x": "' + b"y" * 1_200_000 + b'"}',
        *(p.raw for p in poison_events(prefix, "huge_int", 1)),
    ]
    assert await send_events(settings, events) == 2
