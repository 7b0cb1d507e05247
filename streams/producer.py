"""Putting pairs on the pairs topic, each starting its own trace."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from aiokafka import AIOKafkaProducer
from opentelemetry.trace import SpanKind, Tracer
from rich.console import Console
from rich.progress import Progress

from streams.settings import Settings
from streams.telemetry import inject_headers


def key_of(raw: bytes) -> bytes | None:
    """The pair id as the key, so every event of a pair lands on one partition; None if unreadable."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    pair_id = data.get("pair_id") if isinstance(data, dict) else None
    return pair_id.encode() if isinstance(pair_id, str) else None


def read_lines(path: Path) -> list[bytes]:
    return [line for line in path.read_bytes().splitlines() if line.strip()]


async def send_events(
    settings: Settings,
    events: Iterable[bytes],
    *,
    tracer: Tracer | None = None,
    progress: Progress | None = None,
) -> int:
    """Send raw events to the pairs topic; returns how many were acknowledged by the broker."""
    topic = settings.topics.name("pairs")
    # No idempotent producer: Tansu does not support it, and pair-level idempotency comes from pair_id.
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers, acks="all", linger_ms=5)
    await producer.start()
    events = list(events)
    task = progress.add_task("sending", total=len(events)) if progress else None
    try:
        futures = []
        for raw in events:
            if tracer is not None:
                with tracer.start_as_current_span(f"{topic} publish", kind=SpanKind.PRODUCER):
                    headers = inject_headers()
            else:
                headers = []
            futures.append(await producer.send(topic, value=raw, key=key_of(raw), headers=headers))
            if progress is not None and task is not None:
                progress.advance(task)
        for fut in futures:
            await fut
        return len(futures)
    finally:
        await producer.stop()


async def send_file(settings: Settings, path: Path, console: Console) -> int:
    from streams.telemetry import Telemetry

    telemetry = Telemetry(settings.telemetry)
    try:
        with Progress(console=console, transient=False) as progress:
            return await send_events(settings, read_lines(path), tracer=telemetry.tracer, progress=progress)
    finally:
        telemetry.shutdown()
