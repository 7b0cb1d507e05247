"""The capture sink counts each capture once, as what happened to it: a capture the Kafka producer still holds when
the sink's send timeout passes (its broker down) is counted when the producer settles it, sent if the broker took
it once back, lost if not; never counted lost and then found on the topic (the gateway's fault run,
tests/integration/test_gateway_fault_kafka.py, found that on a real broker stopped and started again).

The producer here is a stand-in whose deliveries settle when the test says: what is tested is the counting."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError, NotLeaderForPartitionError

from pairjudge.streams.capture.sink import CaptureSink, _Record

RECORDS = [_Record(f"k{i}".encode(), b"{}", []) for i in range(3)]


class HeldProducer:
    """Queues every record at once; its deliveries settle after ``settle_after`` seconds, taken or failed."""

    def __init__(self, settle_after: float, *, error: BaseException | None = None, queue_fails: bool = False) -> None:
        self.settle_after = settle_after
        self.error = error
        self.queue_fails = queue_fails

    async def send(self, topic: str, *, value: bytes, key: bytes, headers: Any) -> asyncio.Future[Any]:
        if self.queue_fails:
            raise KafkaTimeoutError()
        delivery: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def settle() -> None:
            if self.error is not None:
                delivery.set_exception(self.error)
            else:
                delivery.set_result(object())

        asyncio.get_running_loop().call_later(self.settle_after, settle)
        return delivery


@pytest.fixture
def sink() -> Iterator[CaptureSink]:
    sink = CaptureSink("127.0.0.1:1", send_timeout_s=0.2)
    yield sink
    sink.close(0.5)


async def test_a_capture_held_past_the_timeout_is_counted_sent_when_the_broker_takes_it(sink: CaptureSink) -> None:
    await sink._send(HeldProducer(0.5), RECORDS)
    stats = sink.stats()
    assert (stats.sent, stats.dropped_total, stats.buffered) == (0, 0, 3)  # not counted lost: still held
    await asyncio.sleep(0.5)
    stats = sink.stats()
    assert (stats.sent, stats.dropped_total, stats.buffered) == (3, 0, 0)


async def test_a_capture_held_past_the_timeout_is_counted_lost_once_when_the_producer_gives_up(
    sink: CaptureSink,
) -> None:
    await sink._send(HeldProducer(0.5, error=NotLeaderForPartitionError()), RECORDS)
    assert sink.stats().dropped_total == 0
    await asyncio.sleep(0.5)
    stats = sink.stats()
    assert (stats.sent, stats.dropped["kafka_unavailable"], stats.buffered) == (0, 3, 0)


async def test_taken_in_time_sent_and_not_queued_lost_at_once(sink: CaptureSink) -> None:
    await sink._send(HeldProducer(0.0), RECORDS)
    assert (sink.stats().sent, sink.stats().dropped_total) == (3, 0)
    await sink._send(HeldProducer(0.0, queue_fails=True), RECORDS)
    assert (sink.stats().sent, sink.stats().dropped["kafka_unavailable"]) == (3, 3)
