"""Poison events: 20 kinds of malformed input, each with the dead-letter reason it must get.

Each kind once crashed the judge agent or vanished: JSON nested 1,000 or 100,000 deep, a 5,000-digit
number, ``1e999``, events between 750 KB and the broker's 1 MB limit (whose base64 dead letter was too
large to send), unknown ``schema_version`` values, outputs of zero-width characters. Shared by
``tests/integration/test_poison_kafka.py`` and ``bench/poison_events.py``, with the reader of their
dead letters.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pairjudge.schemas import DeadLetter
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.readers import FromStart, from_start
from pairjudge.streams.security.kafka_clients import client_config
from pairjudge_dev.pairgen import many_pairs
from pairjudge_dev.workers import produce_raw

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
    # Valid JSON and a valid contract, but over the worker's output limit (20,000 characters): refused
    # when the pair is checked, not when it is decoded. (An empty output is not poison: it loses.)
    "output_30k": (lambda pid: _with_output(pid, "x" * 30_000), "oversized_output"),
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
    """The bytes as they are to the pairs topic, with no key (or ``key_of``'s)."""
    await produce_raw(client_config(settings.kafka), settings.topics.name("pairs"), events, keyed=keyed)


class DeadLetterReader:
    """Reads the dead-letter topic from the start, incrementally: letters by their original's SHA-256,
    each with its record size (key + value), so a caller can check the size bound too."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.letters: dict[str, list[tuple[DeadLetter, int]]] = {}
        self._exit = contextlib.AsyncExitStack()
        self._reader: FromStart | None = None

    async def start(self) -> None:
        topic = self.settings.topics.name("deadletter")
        config = client_config(self.settings.kafka)
        self._reader = await self._exit.enter_async_context(
            from_start(config, [topic], max_partition_fetch_bytes=2**21)
        )

    async def poll(self) -> None:
        assert self._reader is not None, "start() first"
        for records in (await self._reader.batches(timeout_ms=200, max_records=500)).values():
            for record in records:
                letter = DeadLetter.model_validate_json(record.value or b"")
                size = len(record.key or b"") + len(record.value or b"")
                self.letters.setdefault(letter.original_sha256 or "", []).append((letter, size))

    async def until(self, shas: set[str], timeout: float, alive: Callable[[], bool] = lambda: True) -> bool:
        """Read until every digest in ``shas`` has a letter (True), ``timeout`` passes or ``alive()`` fails."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            await self.poll()
            if shas <= self.letters.keys():
                return True
            if not alive():
                return False
        return False

    async def settle(self, seconds: float) -> None:
        """Keep reading ``seconds`` more, so late duplicates are counted too."""
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            await self.poll()

    async def stop(self) -> None:
        await self._exit.aclose()


async def read_dead_letters(
    settings: Settings, expected: set[str], *, timeout: float, settle: float = 0.0
) -> dict[str, list[tuple[DeadLetter, int]]]:
    """The letters (``DeadLetterReader.letters``) once every ``expected`` digest has one (or after
    ``timeout``), read ``settle`` s more for duplicates."""
    reader = DeadLetterReader(settings)
    await reader.start()
    try:
        if await reader.until(expected, timeout):
            await reader.settle(settle)
        return reader.letters
    finally:
        await reader.stop()
