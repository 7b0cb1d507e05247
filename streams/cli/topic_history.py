"""A deployment's history read off its topics, for the commands that replay or export it (``export preferences``,
``export backtest``): every record of some topic kinds, from their start to their end as it was when reading
began, without a consumer group (so it never takes partitions from a worker or commits an offset)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TypeVar

from pydantic import BaseModel

from pairjudge.streams.config.settings import Settings

E = TypeVar("E", bound=BaseModel)

#: A record's value taken into whatever collects the history; raises ``InputRejected`` when unreadable.
Take = Callable[[bytes | None], None]


def decoding(model: type[E], add: Callable[[E], object], settings: Settings) -> Take:
    """``add`` each record decoded as ``model``. Up to 4x an input event's bound: a tie-break or review request
    carries its pair and the primary's orderings."""
    from pairjudge.streams.kafka.codecs import decode

    max_bytes = 4 * settings.max_event_bytes

    def take(raw: bytes | None) -> None:
        add(decode(model, raw, max_bytes=max_bytes))

    return take


async def read_to_end(settings: Settings, takers: Mapping[str, Take], *, timeout: float) -> int:
    """Every record of the topic kinds ``takers`` names, each given to its kind's taker; returns how many could
    not be read as their topic's event (left out, never fatal: the worker dead-lettered them already, or a producer
    wrote junk). Raises ``TimeoutError`` when the topics are not read to their end within ``timeout`` seconds."""
    from pairjudge.agents.errors import InputRejected
    from pairjudge.streams.kafka.readers import from_start
    from pairjudge.streams.security.kafka_clients import client_config

    kinds = {settings.topics.name(kind): kind for kind in takers}
    unreadable = 0
    async with asyncio.timeout(timeout), from_start(client_config(settings.kafka), list(kinds)) as reader:
        while not await reader.caught_up():
            for tp, records in (await reader.batches(timeout_ms=500, max_records=2000)).items():
                take = takers[kinds[tp.topic]]
                for record in records:
                    try:
                        take(record.value)
                    except InputRejected:
                        unreadable += 1
    return unreadable
