"""What the worker's sweeps over Faust table data share: walking a large table without stalling the agents."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping

#: A sweep lets other tasks run after this many entries.
SWEEP_YIELD_EVERY = 1000


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
