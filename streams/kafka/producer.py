"""Putting pairs on the pairs topic, each starting its own trace."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from pathlib import Path

from aiokafka import AIOKafkaProducer
from aiokafka.errors import MessageSizeTooLargeError
from opentelemetry.trace import SpanKind, Tracer
from rich.console import Console
from rich.progress import Progress

from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.dead_letters import read_pair_id
from pairjudge.streams.security.kafka_clients import client_config
from pairjudge.streams.telemetry.tracing import inject_headers

log = logging.getLogger(__name__)


#: Largest line whose pair id is read for its key. The read is bounded (streams.kafka.codecs), so this only
#: caps the cost; a larger line is still sent, with no key.
KEY_PARSE_BYTES = 16 * 1024 * 1024


def key_of(raw: bytes) -> bytes | None:
    """The pair id as the key, so every event of a pair lands on one partition; None if unreadable.

    Any line may be malformed (the worker dead-letters it), so the read is bounded and never raises: a
    line nested 100,000 deep or holding a 5,000-digit number gets no key, not a crash. A line that is not
    valid JSON gets no key either, even if an id could be guessed from it: a key is a claim about the pair.
    """
    pair_id = read_pair_id(raw, max_bytes=KEY_PARSE_BYTES)
    return pair_id.encode() if pair_id is not None else None


def read_lines(path: Path) -> list[bytes]:
    return [line for line in path.read_bytes().splitlines() if line.strip()]


async def send_events(
    settings: Settings,
    events: Iterable[bytes],
    *,
    tracer: Tracer | None = None,
    progress: Progress | None = None,
) -> int:
    """Send raw events to the pairs topic; returns how many were acknowledged by the broker.

    Events are sent as they are: a malformed one reaches the worker, which dead-letters it. Only an event
    too large for the producer or the broker is left out (logged), since nothing could carry it.
    """
    topic = settings.topics.name("pairs")
    # No idempotent producer: Tansu does not support it, and pair-level idempotency comes from pair_id.
    producer = AIOKafkaProducer(**client_config(settings.kafka).kwargs(acks="all", linger_ms=5))
    await producer.start()
    events = list(events)
    task = progress.add_task("sending", total=len(events)) if progress else None
    try:
        futures: list[tuple[int, asyncio.Future[object]]] = []
        for n, raw in enumerate(events):
            if tracer is not None:
                with tracer.start_as_current_span(f"{topic} publish", kind=SpanKind.PRODUCER):
                    headers = inject_headers()
            else:
                headers = []
            try:
                futures.append((n, await producer.send(topic, value=raw, key=key_of(raw), headers=headers)))
            except MessageSizeTooLargeError:
                _too_large(n, len(events), len(raw), "the producer's request limit")
            if progress is not None and task is not None:
                progress.advance(task)
        acknowledged = 0
        for n, fut in futures:
            try:
                await fut
            except MessageSizeTooLargeError:
                _too_large(n, len(events), len(events[n]), "the broker's message limit")
            else:
                acknowledged += 1
        return acknowledged
    finally:
        await producer.stop()


def _too_large(n: int, total: int, size: int, limit: str) -> None:
    # Nothing can carry such an event to the worker's dead-letter topic: say which line it was and go
    # on with the rest, rather than abandon the whole file.
    log.warning("event %d of %d is %d bytes, over %s; not sent", n + 1, total, size, limit)


async def send_file(settings: Settings, path: Path, console: Console) -> int:
    from pairjudge.streams.telemetry.tracing import Telemetry

    telemetry = Telemetry(settings.telemetry)
    try:
        with Progress(console=console, transient=False) as progress:
            return await send_events(settings, read_lines(path), tracer=telemetry.tracer, progress=progress)
    finally:
        telemetry.shutdown()
