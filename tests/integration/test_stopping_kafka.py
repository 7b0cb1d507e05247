"""The review service's Kafka readers stop when asked, even when aiokafka loses the request.

aiokafka 0.12's client ``close()`` swallows a cancellation of the task that calls it
(streams.kafka.cancellation). Under load, the review service's shutdown once reached a reader while it was
still opening (closing the admin client it reads the partitions with): the reader carried on reading
for ever and the service never stopped. Here the cancellation is made to arrive at exactly that point, on
a real broker: the first client ``close()`` inside the reader's task is preceded by a cancel of that task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from aiokafka.client import AIOKafkaClient

from pairjudge.agents.policy import Policy
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.live import PolicyHolder, follow_control
from pairjudge.streams.kafka.admin import create_topics
from pairjudge.streams.kafka.cancellation import cancel_and_wait
from pairjudge.streams.kafka.topics import topic_specs
from pairjudge.streams.review.kafka import follow_from_start

pytestmark = [pytest.mark.kafka]

STOP_WITHIN_S = 30.0


def _cancel_on_first_close(monkeypatch: pytest.MonkeyPatch, target: list[asyncio.Task[Any]]) -> list[str]:
    """Patch aiokafka's client ``close()`` so that the first call made in ``target[0]``'s task is preceded
    by a cancel of that task: the request then reaches the task inside close(), as in the race."""
    real_close = AIOKafkaClient.close
    fired: list[str] = []

    async def close(self: AIOKafkaClient) -> None:
        task = asyncio.current_task()
        if not fired and target and task is target[0]:
            fired.append("cancelled inside close()")
            task.cancel()
        await real_close(self)

    monkeypatch.setattr(AIOKafkaClient, "close", close)
    return fired


def _settings(bootstrap: str, prefix: str) -> Settings:
    return Settings.model_validate({"kafka": {"bootstrap_servers": bootstrap}, "topics": {"prefix": prefix}})


Reader = Callable[[Settings], Coroutine[Any, Any, None]]
READERS: dict[str, Reader] = {
    "scores feed": lambda s: follow_from_start(s, s.topics.name("scores"), lambda _: None),
    "control follower": lambda s: follow_control(s, PolicyHolder(Policy(), follows_control=True)),
}


@pytest.mark.parametrize("reader", list(READERS))
async def test_a_reader_cancelled_while_it_opens_stops(
    reader: str, kafka_bootstrap: str, unique_topic_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _settings(kafka_bootstrap, unique_topic_prefix.rstrip("."))
    await create_topics(kafka_bootstrap, topic_specs(settings))
    target: list[asyncio.Task[Any]] = []
    fired = _cancel_on_first_close(monkeypatch, target)
    task = asyncio.create_task(READERS[reader](settings))
    target.append(task)
    try:
        done, _ = await asyncio.wait({task}, timeout=STOP_WITHIN_S)
    finally:
        await cancel_and_wait(task)  # on the old code, a second request ends it (it then waits on a poll)
    assert fired, "the reader closed no aiokafka client while it opened: the race is not reproduced"
    assert done, f"the {reader} was cancelled but still runs after {STOP_WITHIN_S:.0f} s"
    assert task.cancelled()
