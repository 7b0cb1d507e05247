"""What the worker's Faust tables share: which partitions this worker owns, writing an entry here and on
its changelog, and walking a large table without stalling the agents."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

#: A sweep lets other tasks run after this many entries.
SWEEP_YIELD_EVERY = 1000


def owned_partitions(app: Any, topic: str | None = None) -> set[int]:
    """The partitions of ``topic`` (of any topic, with None) assigned to this worker's consumer.

    Raises Faust's ``ConsumerNotStarted`` before the consumer runs.
    """
    return {tp.partition for tp in app.consumer.assignment() if topic is None or tp.topic == topic}


async def store(table: Any, partition: int, key: bytes, value: bytes) -> None:
    """Write ``key`` in ``table`` and wait until the broker has its changelog record (in ``partition``).

    The in-memory write happens before the first await: the handler's read-modify-write (no await
    between its read and this call) cannot lose another's update.
    """
    table.data[key] = value
    await table.send_changelog(partition, key, value)


async def forget(
    table: Any, partition: int | None, key: bytes, *, before_tombstone: Callable[[], Awaitable[None]] | None = None
) -> None:
    """Drop ``key`` from ``table`` and, given the ``partition`` (this worker owns it), tombstone it on the
    changelog; without one (a standby's copy) it is only forgotten here: the owner tombstones.

    Dropped before the first await, so an update arriving meanwhile starts a fresh entry instead of being
    tombstoned with the old one. ``before_tombstone`` runs between the two, and only for the owner: what
    the entry's expiry means is published before the tombstone, so a crash in between repeats it on
    restart, never loses it.
    """
    table.data.pop(key, None)
    if partition is None:
        return
    if before_tombstone is not None:
        await before_tombstone()
    await table.send_changelog(partition, key, None)


async def current_entries(data: Mapping[bytes, bytes]) -> AsyncIterator[tuple[bytes, bytes]]:
    """Every non-empty entry of ``data`` as it stands when its turn comes, for a sweep that may expire it.

    Tables hold days of pairs, so the walk yields to the event loop every ``SWEEP_YIELD_EVERY`` entries
    instead of stalling the agents. It walks a snapshot of the items, and an entry whose value changed
    or went away meanwhile (an agent stored it again while the sweep yielded or awaited) is skipped:
    it is judged on its new value by the next sweep, never expired on a stale one.
    """
    for seen, (key, stored) in enumerate(list(data.items()), 1):
        if seen % SWEEP_YIELD_EVERY == 0:
            await asyncio.sleep(0)
        if stored and data.get(key) == stored:
            yield key, stored
