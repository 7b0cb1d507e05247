"""``Delivery`` on its own: publish, deliver, release, consume and the stages' processor, without Faust.

The app, the topics, the pipeline, the outcome tables and the stream are small fakes that log what was
asked of them, so each test reads as the order in which an input's outcome is recorded, published,
marked done and acked, or why it is not. The same object, wired into a real Faust app, is driven in
``test_faust_agents.py`` and against a broker in the Kafka tests.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError, MessageSizeTooLargeError, RecordTooLargeError

from pairjudge.streams.faust_compat.inflight import InFlight
from pairjudge.streams.worker.delivery import Delivery
from pairjudge.streams.worker.error_budget import WorkerBroken
from pairjudge.streams.worker.pipeline import Origin, Outgoing, Stage, StageResult
from pairjudge.streams.worker.tables import forget, store

GENERATION = 5

# --- the fakes ----------------------------------------------------------------------------------------


@dataclass
class Message:
    topic: str = "p.pairs"
    partition: int = 2
    offset: int = 7
    key: bytes = b"pair-1"
    generation_id: int = GENERATION


@dataclass
class Event:
    value: bytes | None = b"{}"
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    message: Message = field(default_factory=Message)


class Topic:
    """A topic whose ``send`` hands back a future that the test (or ``ack_at_once``) resolves."""

    def __init__(self, kind: str, log: list[Any], *, ack_at_once: bool = True) -> None:
        self.kind = kind
        self.log = log
        self.ack_at_once = ack_at_once
        self.futures: list[asyncio.Future[None]] = []
        self.refuse: BaseException | None = None

    async def send(self, *, key: bytes, value: bytes, headers: Any = None) -> asyncio.Future[None]:
        self.log.append(("send", self.kind, key))
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.refuse is not None:
            fut.set_exception(self.refuse)
        elif self.ack_at_once:
            fut.set_result(None)
        self.futures.append(fut)
        return fut


class Consumer:
    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def done(self, message: Message) -> None:
        self.log.append(("done", message.offset))


class App:
    def __init__(self, log: list[Any]) -> None:
        self.log = log
        self.consumer = Consumer(log)
        self.consumer_generation_id = GENERATION
        self.crashed: list[BaseException] = []
        self.conf = SimpleNamespace(producer_max_request_size=1_000_000)

    async def crash(self, reason: BaseException) -> None:
        self.log.append(("crash", type(reason).__name__))
        self.crashed.append(reason)


class Outcomes:
    def __init__(self, log: list[Any]) -> None:
        self.log = log
        #: (stage, offset) -> how many times it stopped a worker.
        self.marks: dict[tuple[Stage, int | None], int] = {}

    async def record(self, stage: Stage, pair_id: str, partition: int, outgoing: list[Outgoing]) -> None:
        self.log.append(("record", stage, pair_id, partition, [m.kind for m in outgoing]))

    def release(self, stage: Stage, pair_id: str) -> None:
        self.log.append(("release", stage, pair_id))

    def mark_published(self, stage: Stage, pair_id: str, partition: int) -> None:
        self.log.append(("mark_published", stage, pair_id))

    def crashes(self, stage: Stage, origin: Origin) -> int:
        return self.marks.get((stage, origin.offset), 0)

    async def mark_crash(self, stage: Stage, origin: Origin) -> int:
        count = self.marks[(stage, origin.offset)] = self.crashes(stage, origin) + 1
        self.log.append(("mark_crash", stage, origin.offset, count))
        return count


class Pipeline:
    """``handle`` returns ``result`` (after ``judging`` is set, when given); ``undeliverable`` a dead letter."""

    def __init__(self, log: list[Any], result: StageResult | None = None) -> None:
        self.log = log
        self.result = result or StageResult(outgoing=[out("verdicts")], pair_id="pair-1")
        self.judging: asyncio.Event | None = None
        self.while_judging: Callable[[], None] = lambda: None
        #: Raised by ``handle`` when set (a bug escaping the stage, or ``WorkerBroken``).
        self.raises: BaseException | None = None

    async def handle(
        self, stage: Stage, raw: bytes | None, headers: Any, origin: Origin, *, after_crash: bool = False
    ) -> StageResult:
        self.log.append(
            ("handle", stage, origin.offset, after_crash) if after_crash else ("handle", stage, origin.offset)
        )
        if isinstance(self.raises, BaseException):
            raise self.raises
        self.while_judging()
        if self.judging is not None:
            await self.judging.wait()
        return self.result

    def undeliverable(self, stage: Stage, raw: bytes | None, origin: Origin, detail: str) -> Outgoing:
        self.log.append(("undeliverable", stage, raw, origin.offset, detail))
        return out("deadletter")

    def crashed_worker(self, stage: Stage, raw: bytes | None, origin: Origin, detail: str) -> Outgoing:
        self.log.append(("crashed_worker", stage, raw, origin.offset, detail))
        return out("deadletter")


class Stream:
    def __init__(self, events: list[Event], log: list[Any]) -> None:
        self._events = events
        self.log = log

    def noack(self) -> Stream:
        return self

    async def events(self) -> AsyncIterator[Event]:
        for event in self._events:
            yield event

    async def ack(self, event: Event) -> None:
        self.log.append(("ack", event.message.offset))


def out(kind: Any, key: bytes = b"pair-1") -> Outgoing:
    return Outgoing(kind, key, b"value", [])


@dataclass
class Rig:
    delivery: Delivery
    log: list[Any]
    app: App
    topics: dict[str, Topic]
    pipeline: Pipeline
    inflight: InFlight


def rig(*, ack_at_once: bool = True, result: StageResult | None = None) -> Rig:
    log: list[Any] = []
    app = App(log)
    kinds = ("verdicts", "tiebreak", "review", "deadletter", "decisions", "alerts")
    topics = {kind: Topic(kind, log, ack_at_once=ack_at_once) for kind in kinds}
    pipeline = Pipeline(log, result)
    inflight = InFlight()
    delivery = Delivery(
        app,
        topics=topics,  # type: ignore[arg-type]
        pipeline=pipeline,  # type: ignore[arg-type]
        outcomes=Outcomes(log),  # type: ignore[arg-type]
        inflight=inflight,
    )
    return Rig(delivery, log, app, topics, pipeline, inflight)


ORIGIN = Origin(topic="p.pairs", partition=2, offset=7, key=b"pair-1")


async def drain(
    delivery: Delivery,
    events: list[Event],
    log: list[Any],
    process: Any,
    what: str = "primary",
    *,
    stage: Stage | None = None,
) -> int:
    """Run ``consume`` over ``events`` to its end; returns how many inputs it yielded (finished)."""
    finished = 0
    async for _ in delivery.consume(Stream(events, log), what, process, stage=stage):
        finished += 1
    # A judging stage's deliveries run behind it (``Delivery.processor``): their ends are part of the run.
    await delivery.settle()
    return finished


async def drain_without_settling(delivery: Delivery, events: list[Event], log: list[Any]) -> int:
    """``consume`` over ``events`` without waiting for the deliveries it started."""
    finished = 0
    async for _ in delivery.consume(Stream(events, log), "primary", delivery.processor("primary")):
        finished += 1
    return finished


# --- publish ------------------------------------------------------------------------------------------


async def test_publish_hands_every_message_to_the_producer_before_awaiting_any_ack() -> None:
    r = rig(ack_at_once=False)
    publishing = asyncio.ensure_future(r.delivery.publish([out("verdicts"), out("decisions"), out("review")]))
    for _ in range(5):
        await asyncio.sleep(0)
    # All three are with the producer, one produce round for the lot; none is acked yet.
    assert r.log == [("send", "verdicts", b"pair-1"), ("send", "decisions", b"pair-1"), ("send", "review", b"pair-1")]
    assert not publishing.done()
    for topic in ("verdicts", "decisions"):
        r.topics[topic].futures[0].set_result(None)
    await asyncio.sleep(0)
    assert not publishing.done(), "publish returned before every output was acknowledged"
    r.topics["review"].futures[0].set_result(None)
    await publishing


async def test_publish_awaits_every_ack_and_then_raises_the_first_failure() -> None:
    r = rig(ack_at_once=False)
    publishing = asyncio.ensure_future(r.delivery.publish([out("verdicts"), out("decisions"), out("review")]))
    for _ in range(5):
        await asyncio.sleep(0)
    r.topics["decisions"].futures[0].set_exception(KafkaTimeoutError("second"))
    r.topics["verdicts"].futures[0].set_exception(RecordTooLargeError("first"))
    await asyncio.sleep(0)
    # The third output is still unacknowledged: publish waits for it rather than leave it unawaited.
    assert not publishing.done()
    r.topics["review"].futures[0].set_result(None)
    with pytest.raises(RecordTooLargeError, match="first"):
        await publishing


async def test_publishing_nothing_sends_nothing() -> None:
    r = rig()
    await r.delivery.publish([])
    assert r.log == []


# --- deliver and release ------------------------------------------------------------------------------


async def test_an_outcome_is_recorded_before_it_is_published_and_marked_published_after() -> None:
    result = StageResult(outgoing=[out("verdicts"), out("decisions")], pair_id="pair-1", alerts=[out("alerts")])
    r = rig(result=result)
    await r.delivery.deliver("primary", result, b"raw", ORIGIN)
    assert r.log == [
        ("record", "primary", "pair-1", 2, ["verdicts", "decisions"]),
        ("send", "verdicts", b"pair-1"),
        ("send", "decisions", b"pair-1"),
        ("send", "alerts", b"pair-1"),  # alerts go with it, unrecorded
        ("mark_published", "primary", "pair-1"),
    ]


async def test_no_published_mark_until_every_output_is_acknowledged() -> None:
    result = StageResult(outgoing=[out("verdicts"), out("decisions")], pair_id="pair-1")
    r = rig(result=result, ack_at_once=False)
    delivering = asyncio.ensure_future(r.delivery.deliver("primary", result, b"raw", ORIGIN))
    for _ in range(5):
        await asyncio.sleep(0)
    r.topics["verdicts"].futures[0].set_result(None)
    await asyncio.sleep(0)
    assert "mark_published" not in [entry[0] for entry in r.log]
    r.topics["decisions"].futures[0].set_exception(KafkaTimeoutError("the broker went away"))
    with pytest.raises(KafkaTimeoutError):
        await delivering
    assert "mark_published" not in [entry[0] for entry in r.log]  # the redelivery re-sends it all


async def test_a_redelivered_pair_already_on_the_broker_sends_nothing() -> None:
    result = StageResult(outgoing=[], pair_id="pair-1", replayed=True)
    r = rig(result=result)
    assert await drain(r.delivery, [Event()], r.log, r.delivery.processor("primary")) == 1
    # Acked for Faust once judged; done (committable) once its delivery, here nothing to send, is over.
    assert r.log == [("handle", "primary", 7), ("ack", 7), ("done", 7)]


@pytest.mark.parametrize(
    "result",
    [
        StageResult(outgoing=[out("verdicts")], pair_id="pair-1", replayed=True),
        StageResult(outgoing=[out("deadletter")], pair_id=None),
    ],
    ids=["replayed", "undecodable"],
)
async def test_a_replayed_or_undecodable_outcome_is_published_but_never_recorded_or_released(
    result: StageResult,
) -> None:
    r = rig(result=result)
    await r.delivery.deliver("tiebreak", result, b"raw", Origin(partition=None))
    r.delivery.release("tiebreak", result)
    # A re-sent recorded outcome is then marked published, so the next redelivery sends nothing.
    assert [entry[0] for entry in r.log] == (["send", "mark_published"] if result.replayed else ["send"])


async def test_an_input_without_a_partition_is_recorded_in_partition_zero() -> None:
    r = rig()
    await r.delivery.deliver("primary", r.pipeline.result, None, Origin(partition=None))
    assert r.log[0] == ("record", "primary", "pair-1", 0, ["verdicts"])


@pytest.mark.parametrize("refusal", [MessageSizeTooLargeError, RecordTooLargeError])
async def test_an_outcome_the_broker_refuses_becomes_a_dead_letter_of_the_input(refusal: type[Exception]) -> None:
    r = rig()
    r.topics["verdicts"].refuse = refusal("too big")
    await r.delivery.deliver("primary", r.pipeline.result, b"raw", ORIGIN)
    detail = f"the broker refused the primary outcome ({refusal.__name__}: {refusal('too big')})"
    assert r.log == [
        ("record", "primary", "pair-1", 2, ["verdicts"]),
        ("send", "verdicts", b"pair-1"),
        ("undeliverable", "primary", b"raw", 7, detail),
        ("send", "deadletter", b"pair-1"),
    ]


async def test_delivery_raises_when_neither_the_outcome_nor_its_dead_letter_can_be_delivered() -> None:
    r = rig()
    r.topics["verdicts"].refuse = MessageSizeTooLargeError("too big")
    r.topics["deadletter"].refuse = MessageSizeTooLargeError("also too big")
    with pytest.raises(MessageSizeTooLargeError, match="also too big"):
        await r.delivery.deliver("primary", r.pipeline.result, b"raw", ORIGIN)


async def test_any_other_send_failure_is_raised_not_dead_lettered() -> None:
    r = rig()
    r.topics["verdicts"].refuse = KafkaTimeoutError("the broker went away")
    with pytest.raises(KafkaTimeoutError):
        await r.delivery.deliver("primary", r.pipeline.result, b"raw", ORIGIN)
    assert not any(entry[0] == "undeliverable" for entry in r.log)


async def test_release_gives_up_the_claim_of_a_fresh_outcome() -> None:
    r = rig()
    r.delivery.release("primary", r.pipeline.result)
    assert r.log == [("release", "primary", "pair-1")]


# --- consume ------------------------------------------------------------------------------------------


async def test_each_input_is_marked_done_then_acked_only_after_its_handler_returned() -> None:
    r = rig()

    async def process(event: Any, origin: Origin) -> None:
        r.log.append(("process", origin))

    events = [Event(message=Message(offset=7)), Event(message=Message(offset=8))]
    assert await drain(r.delivery, events, r.log, process) == 2
    assert r.log == [
        ("process", Origin(topic="p.pairs", partition=2, offset=7, key=b"pair-1")),
        ("done", 7),
        ("ack", 7),
        ("process", Origin(topic="p.pairs", partition=2, offset=8, key=b"pair-1")),
        ("done", 8),
        ("ack", 8),
    ]


async def test_a_handed_back_input_is_acked_but_never_marked_done_and_the_loop_goes_on() -> None:
    from pairjudge.streams.faust_compat.inflight import HandedBack

    r = rig()

    async def process(event: Any, origin: Origin) -> None:
        if origin.offset == 7:
            raise HandedBack

    events = [Event(message=Message(offset=7)), Event(message=Message(offset=8))]
    assert await drain(r.delivery, events, r.log, process) == 1
    assert r.log == [("ack", 7), ("done", 8), ("ack", 8)]
    assert r.app.crashed == []


async def test_a_failed_delivery_crashes_the_app_and_stops_without_acking(caplog: pytest.LogCaptureFixture) -> None:
    r = rig()

    async def process(event: Any, origin: Origin) -> None:
        if origin.offset == 7:
            raise KafkaTimeoutError("the broker went away")
        r.log.append(("process", origin.offset))

    events = [Event(message=Message(offset=7)), Event(message=Message(offset=8))]
    with caplog.at_level(logging.CRITICAL, logger="pairjudge.streams.worker.delivery"):
        assert await drain(r.delivery, events, r.log, process, "audit join") == 0
    # Nothing after the failure either: the worker stops, the commit stays below the input.
    assert r.log == [("crash", "KafkaTimeoutError")]
    assert "could not deliver the audit join outcome (KafkaTimeoutError: " in caplog.text
    assert "stopping without committing p.pairs[2]@7" in caplog.text
    assert r.delivery.stopped is not None
    assert "p.pairs[2]@7" in r.delivery.stopped


async def test_a_judging_input_that_stops_the_worker_is_marked_first_and_says_how_often() -> None:
    r = rig()
    stops: list[str] = []
    r.delivery.on_stop = stops.append
    r.pipeline.raises = WorkerBroken("a run of unexpected errors: 6 unexpected errors within 60 s")
    events = [Event(message=Message(offset=7)), Event(message=Message(offset=8))]
    assert await drain(r.delivery, events, r.log, r.delivery.processor("primary"), stage="primary") == 0
    assert r.log == [("handle", "primary", 7), ("mark_crash", "primary", 7, 1), ("crash", "WorkerBroken")]
    assert len(stops) == 1
    assert stops[0].startswith("a run of unexpected errors")
    assert "it has stopped a worker 1 time(s) of 3" in stops[0]


async def test_an_input_that_stopped_a_worker_before_is_handled_strictly() -> None:
    r = rig()
    await r.delivery.processor("primary")(Event(message=Message(offset=7)), ORIGIN)
    r.log.clear()
    outcomes: Any = r.delivery._outcomes
    outcomes.marks[("primary", 7)] = 1
    await r.delivery.processor("primary")(Event(message=Message(offset=7)), ORIGIN)
    assert r.log[0] == ("handle", "primary", 7, True)


async def test_an_input_at_the_crash_loop_limit_is_dead_lettered_unhandled() -> None:
    r = rig()
    outcomes: Any = r.delivery._outcomes
    outcomes.marks[("tiebreak", 7)] = r.delivery.crash_loop_limit
    await r.delivery.processor("tiebreak")(Event(value=b"poison", message=Message(offset=7)), ORIGIN)
    assert r.log == [
        ("crashed_worker", "tiebreak", b"poison", 7, "this input stopped a worker 3 times (crash_loop_limit 3)"),
        ("send", "deadletter", b"pair-1"),
    ]


# --- the stages' processor ----------------------------------------------------------------------------


async def test_a_stage_input_is_judged_counted_in_flight_and_delivered() -> None:
    r = rig()
    seen: list[int] = []
    r.pipeline.while_judging = lambda: seen.append(r.inflight.count)
    assert await drain(r.delivery, [Event()], r.log, r.delivery.processor("tiebreak")) == 1
    assert seen == [1]
    assert r.inflight.count == 0
    assert r.log == [
        ("handle", "tiebreak", 7),
        ("ack", 7),
        ("record", "tiebreak", "pair-1", 2, ["verdicts"]),
        ("send", "verdicts", b"pair-1"),
        ("mark_published", "tiebreak", "pair-1"),
        ("done", 7),
    ]


async def test_a_result_from_an_older_generation_is_released_and_dropped(caplog: pytest.LogCaptureFixture) -> None:
    r = rig()
    r.app.consumer_generation_id = GENERATION + 1  # reassigned while the input was judged
    with caplog.at_level(logging.INFO, logger="pairjudge.streams.worker.delivery"):
        assert await drain(r.delivery, [Event()], r.log, r.delivery.processor("primary")) == 1
    # Nothing recorded or published: the partition's new owner judges it (or replays what was recorded).
    assert r.log == [("handle", "primary", 7), ("release", "primary", "pair-1"), ("done", 7), ("ack", 7)]
    assert "dropping a stale primary result for p.pairs:7" in caplog.text


async def test_a_failed_delivery_releases_the_claim_before_the_app_crashes() -> None:
    r = rig()
    r.topics["verdicts"].refuse = KafkaTimeoutError("the broker went away")
    # Judged, so handed over to its delivery (acked for Faust); the delivery fails: never done, the app crashes.
    assert await drain(r.delivery, [Event()], r.log, r.delivery.processor("primary")) == 1
    assert r.log == [
        ("handle", "primary", 7),
        ("ack", 7),
        ("record", "primary", "pair-1", 2, ["verdicts"]),
        ("send", "verdicts", b"pair-1"),
        ("release", "primary", "pair-1"),
        # Counted against the input, as when it stops the worker while judging (crash_loop_limit).
        ("mark_crash", "primary", 7, 1),
        ("crash", "KafkaTimeoutError"),
    ]
    assert r.inflight.count == 0


async def test_the_next_input_is_judged_while_the_last_ones_delivery_waits_for_the_broker() -> None:
    """A judging slot is free once the judge has answered: the outcome's round trips run behind it, and the
    input is done only when they are over; ``settle`` waits for them (before a hand-over)."""
    r = rig(ack_at_once=False)
    events = [Event(message=Message(offset=7)), Event(message=Message(offset=8))]
    finished = await asyncio.wait_for(drain_without_settling(r.delivery, events, r.log), 1)
    assert finished == 2
    # Both judged and handed over while the first send still waits for its ack; nothing is done yet.
    assert [e for e in r.log if e[0] == "handle"] == [("handle", "primary", 7), ("handle", "primary", 8)]
    assert not [e for e in r.log if e[0] == "done"]
    assert r.inflight.count == 2
    settling = asyncio.ensure_future(r.delivery.settle())
    await asyncio.sleep(0.01)
    assert not settling.done()
    for fut in r.topics["verdicts"].futures:
        fut.set_result(None)
    await asyncio.wait_for(settling, 1)
    assert sorted(e for e in r.log if e[0] == "done") == [("done", 7), ("done", 8)]
    assert r.inflight.count == 0


async def test_judging_cut_off_by_the_shutdown_is_acked_never_done_and_nothing_is_published() -> None:
    r = rig()
    r.pipeline.judging = asyncio.Event()  # never set: the judge does not answer
    consuming = asyncio.ensure_future(drain(r.delivery, [Event()], r.log, r.delivery.processor("primary")))
    for _ in range(5):
        await asyncio.sleep(0)
    assert r.inflight.count == 1
    assert r.inflight.hand_back() == 1
    assert await consuming == 0
    # No result came, so there is no claim of this delivery's to release (the pipeline released its own).
    assert r.log == [("handle", "primary", 7), ("ack", 7)]
    assert r.app.crashed == []
    assert r.inflight.count == 0


# --- the table writes delivery relies on (streams.worker.tables) ---------------------------------------


class Table:
    def __init__(self, log: list[Any]) -> None:
        self.data: dict[bytes, bytes] = {}
        self.log = log

    def send_changelog(self, partition: int, key: bytes, value: bytes | None) -> Awaitable[None]:
        # What the entry held when the changelog record was handed over: written here first.
        self.log.append(("changelog", partition, key, value, self.data.get(key)))
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut


async def test_store_writes_the_entry_here_before_its_changelog_record() -> None:
    log: list[Any] = []
    table = Table(log)
    await store(table, 3, b"k", b"v")
    assert log == [("changelog", 3, b"k", b"v", b"v")]


async def test_forget_drops_the_entry_first_announces_then_tombstones_and_a_standby_only_forgets() -> None:
    log: list[Any] = []
    table = Table(log)
    table.data[b"k"] = b"old"

    async def announce() -> None:
        log.append(("announce", table.data.get(b"k")))

    await forget(table, 3, b"k", before_tombstone=announce)
    assert log == [("announce", None), ("changelog", 3, b"k", None, None)]
    log.clear()
    table.data[b"k"] = b"old"
    await forget(table, None, b"k", before_tombstone=announce)
    assert log == []
    assert b"k" not in table.data
