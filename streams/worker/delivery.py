"""At-least-once delivery: an input is done only once its outputs are on the broker.

``Delivery`` is what every agent's loop goes through. ``consume`` acks an input only after its handler
returned, which for a stage means ``deliver`` has recorded the outcome (``streams.worker.published``) and
the broker has acknowledged every output (``publish``). A handler that raises stops the worker without
acking (``stop``): the commit ledger (``streams.faust_compat.offsets``) keeps the group's offset
below the input, and a restart judges it again. A pair the shutdown cut off (``HandedBack``) is acked for
Faust's bookkeeping but never marked done, so its partition's next owner judges it.

An input's outputs appear all or none: ``publish`` checks every record against the producer's size limit
before the first send, so a too-large review request never leaves its decision record already sent.
A judging input that stops a worker is marked (``OutcomeTables.mark_crash``) before the worker stops;
after ``crash_loop_limit`` marks it is dead-lettered as ``crashed_worker`` instead of being handled again.

The audit and the scoreboard publish through ``publish`` and consume through ``consume`` too; the two
judging stages' handler is ``processor(stage)``. Built by the composition root (``streams.app``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Final, Protocol

import faust
from aiokafka.errors import MessageSizeTooLargeError, RecordTooLargeError
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from pairjudge.schemas.kinds import STAGES, WorkerStage
from pairjudge.schemas.outcomes import unsettling_topics
from pairjudge.streams.faust_compat.inflight import HandedBack, InFlight
from pairjudge.streams.faust_compat.offsets import mark_done
from pairjudge.streams.faust_compat.shutdown import GracefulApp
from pairjudge.streams.worker.error_budget import WorkerBroken
from pairjudge.streams.worker.pipeline import Origin, Outgoing, Pipeline, Stage, StageResult
from pairjudge.streams.worker.published import OutcomeTables

log = logging.getLogger(__name__)

#: Sends messages and returns once the broker has acknowledged every one (``Delivery.publish``).
Publish = Callable[[list[Outgoing]], Awaitable[None]]
#: Handles one event (``event.value``, ``event.headers``, ``event.message``) read at ``Origin``. Returning True
#: defers it: its handler marks the message done itself (``mark_done``) once its outputs are on the broker
#: (the audit join's flush).
Process = Callable[[Any, Origin], Awaitable[bool | None]]
#: An agent's loop over a stream: yields once per input done (``Delivery.consume``).
Consume = Callable[[Any, str, Process], AsyncIterator[None]]

#: How long a crash mark may take to reach the broker before the worker stops without it.
CRASH_MARK_TIMEOUT_S = 10.0


class LocalJoin(Protocol):
    """The audit's join on this worker (``streams.audit.handlers.Audit``), taking a stage's decision record
    directly instead of through the decisions topic."""

    def accepts(self, pair_id: str, partition: int) -> bool:
        """Whether this worker's share of the join table holds ``pair_id`` when it owns input ``partition``."""
        ...

    async def join_record(
        self, record: Outgoing, origin: Origin, message: Any, on_flushed: Callable[[], Any] | None = None
    ) -> bool:
        """Count ``record``; True when it waits for the join's flush, which then calls ``on_flushed`` (its
        result awaited when awaitable) and marks ``message`` done."""
        ...


class RecordTooLarge(Exception):
    """An output would be refused by the producer: nothing of the input's outputs was sent."""


def record_bytes(message: Outgoing) -> int:
    """The most bytes ``message`` takes as a record batch of its own, uncompressed (aiokafka's upper bound,
    headers included: the producer's own check leaves them out, the broker's does not)."""
    return int(DefaultRecordBatchBuilder.estimate_size_in_bytes(message.key, message.value, list(message.headers)))


class Publisher:
    """Sends an input's outputs to their topics, all or none, and waits for the broker's acks."""

    def __init__(self, topics: dict[str, faust.TopicT], *, max_record_bytes: int) -> None:
        self._topics = topics
        #: The producer refuses records over this (Faust's ``producer_max_request_size``).
        self.max_record_bytes = max_record_bytes

    def check_sizes(self, messages: list[Outgoing]) -> None:
        """Raise ``RecordTooLarge`` when any of ``messages`` is over the producer's limit: before anything is sent."""
        for m in messages:
            size = record_bytes(m)
            if size > self.max_record_bytes:
                raise RecordTooLarge(
                    f"the {m.kind} record would be {size} bytes, over the producer's limit of "
                    f"{self.max_record_bytes} (producer_max_request_size); none of the input's outputs was sent"
                )

    async def publish(self, messages: list[Outgoing]) -> None:
        # All or none: a record the producer would refuse is found before the first send, not after the
        # earlier ones are already on their way (a verdict and a dead letter for one pair).
        self.check_sizes(messages)
        # Wait for the broker's ack of every output before the input may count as done: at-least-once.
        # All of an input's outputs are handed to the producer first and their acks awaited together,
        # so they share produce requests instead of costing one broker round trip each. Every future
        # is awaited even when one fails (gather without return_exceptions would leave the others
        # unawaited); the first failure is then raised, as a sequential loop would have.
        futures = [await self._topics[m.kind].send(key=m.key, value=m.value, headers=m.headers) for m in messages]
        if not futures:
            return
        results = await asyncio.gather(*futures, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result


class Delivery:
    """Publish, record, ack: the at-least-once path from an agent's input to the broker."""

    def __init__(
        self,
        app: Any,
        *,
        topics: dict[str, faust.TopicT],
        pipeline: Pipeline,
        outcomes: OutcomeTables,
        inflight: InFlight,
        crash_loop_limit: int = 3,
        on_stop: Callable[[str], None] = lambda reason: None,
        max_deliveries: int = 64,
        publisher: Publisher | None = None,
        join: LocalJoin | None = None,
    ) -> None:
        self._app = app
        self._topics = topics
        self._pipeline = pipeline
        self._outcomes = outcomes
        self._inflight = inflight
        self.crash_loop_limit = crash_loop_limit
        #: Told why, when an input stops the worker (the health server's readiness, the CLI's exit status).
        self.on_stop = on_stop
        self.publisher = publisher or Publisher(topics, max_record_bytes=int(app.conf.producer_max_request_size))
        #: Why this worker stopped itself, once it has.
        self.stopped: str | None = None
        #: The audit's join on this worker, when it runs here: decision records go straight to it instead of
        #: through the decisions topic (``deliver``).
        self.join = join
        #: Deliveries running behind the judging stages (``processor``), at most ``max_deliveries`` at once.
        self._deliveries: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(max_deliveries)

    @property
    def max_record_bytes(self) -> int:
        """The producer refuses records over this (Faust's ``producer_max_request_size``)."""
        return self.publisher.max_record_bytes

    @max_record_bytes.setter
    def max_record_bytes(self, value: int) -> None:
        self.publisher.max_record_bytes = value

    def check_sizes(self, messages: list[Outgoing]) -> None:
        self.publisher.check_sizes(messages)

    async def publish(self, messages: list[Outgoing]) -> None:
        await self.publisher.publish(messages)

    async def deliver(
        self, stage: WorkerStage, result: StageResult, raw: bytes | None, origin: Origin, message: Any = None
    ) -> bool:
        """Record the outcome, then publish it; an outcome the broker refuses becomes a dead letter.

        The decision record goes to the audit's join on this worker when its share of the join holds the
        pair (``LocalJoin``), not to the decisions topic: one produce, one fetch and one decode fewer per pair.
        The outcome is then marked published, and the input done, by the join's flush, once what it counted
        is on the broker: a crash before that replays the recorded outcome (the record included) instead of
        losing the record. Returns True when the input waits for that flush.

        Raises when neither can be delivered: the caller then stops the worker without acking.
        """
        partition = origin.partition or 0
        recorded = result.pair_id is not None and _is_outcome(result.outgoing)
        if result.pair_id is not None and not result.replayed:
            if recorded:
                await self._outcomes.record(stage, result.pair_id, partition, result.outgoing)
            else:
                # A dead letter is not the pair's outcome: recorded, it would be re-emitted for every
                # `pairjudge deadletter replay` of the pair within the retention, and the fixed judge never asked.
                self._outcomes.release(stage, result.pair_id)
        local = self._local_record(result, origin)
        try:
            await self.publish([m for m in result.outgoing if m is not local] + result.alerts)
        except (RecordTooLarge, MessageSizeTooLargeError, RecordTooLargeError) as exc:
            detail = f"the broker refused the {stage} outcome ({type(exc).__name__}: {exc})"
            # Not recorded: a redelivery replays the recorded outcome, which is refused (and
            # dead-lettered) again, or delivered once the topic accepts it.
            await self.publish([self._pipeline.undeliverable(stage, raw, origin, detail)])
            return False
        pair_id = result.pair_id
        if not recorded or pair_id is None:
            return False

        def mark() -> Any:
            # On the broker, all of it: a redelivery from now on sends nothing (streams.worker.published).
            return self._outcomes.mark_published(stage, pair_id, partition)

        if local is not None and self.join is not None:
            return await self.join.join_record(local, origin, message, on_flushed=mark)
        mark()
        return False

    def _local_record(self, result: StageResult, origin: Origin) -> Outgoing | None:
        """The decision record among ``result``'s outputs that the join on this worker takes, if any."""
        if self.join is None or result.pair_id is None or origin.partition is None:
            return None
        record = next((m for m in result.outgoing if m.kind == "decisions"), None)
        if record is None or not self.join.accepts(result.pair_id, origin.partition):
            return None
        return record

    def release(self, stage: WorkerStage, result: StageResult) -> None:
        """Give up the outcome claim of a result that will not be delivered (a waiting delivery decides)."""
        if result.pair_id is not None and not result.replayed:
            self._outcomes.release(stage, result.pair_id)

    async def consume(
        self, stream: Any, what: str, process: Process, *, stage: WorkerStage | None = None
    ) -> AsyncIterator[None]:
        """Handle every event of ``stream`` and ack it once done; ``stage`` names a judging stage, whose inputs
        get a crash mark when they stop the worker."""
        # Manual acks: Faust acks in a ``finally`` when the body raises, which would make an input
        # committable with no outcome. Here an input is acked only after its outputs are on the broker.
        async for event in stream.noack().events():
            msg = event.message
            origin = Origin(topic=msg.topic, partition=msg.partition, offset=msg.offset, key=msg.key)
            try:
                deferred = await process(event, origin)
            except HandedBack:
                # Cut off by the shutdown's grace (streams.faust_compat.inflight): acked for Faust's bookkeeping, never
                # marked done, so the offset ledger keeps the commit below it and its next owner judges it.
                await stream.ack(event)
                continue
            except Exception as exc:  # noqa: BLE001  # logged, with its traceback, by stop
                await self.stop(what, origin, exc, stage=stage)
                return
            if not deferred:
                mark_done(self._app, msg)
            await stream.ack(event)
            yield None

    async def stop(self, what: str, origin: Origin, exc: Exception, *, stage: WorkerStage | None) -> None:
        """Stop the worker over ``exc``, raised handling the input at ``origin``, without committing it.

        A judging input is marked first, so that after ``crash_loop_limit`` stops it is dead-lettered
        (``processor``) instead of stopping every worker that reads it.
        """
        at = f"{origin.topic}[{origin.partition}]@{origin.offset}"
        marks = None
        if stage is not None:
            try:
                marks = await asyncio.wait_for(self._outcomes.mark_crash(stage, origin), CRASH_MARK_TIMEOUT_S)
            except Exception:
                log.exception("could not record that %s stopped the worker", at)
        broken = isinstance(exc, WorkerBroken)
        why = str(exc) if broken else f"could not deliver the {what} outcome ({type(exc).__name__}: {exc})"
        counted = f"; it has stopped a worker {marks} time(s) of {self.crash_loop_limit}" if marks else ""
        reason = f"{why}; stopping without committing {at}{counted}"
        if self.stopped is None:
            self.stopped = reason
            self.on_stop(reason)
        log.critical("%s", reason, exc_info=None if broken else exc)
        await self._app.crash(exc)

    def processor(self, stage: Stage) -> Process:
        """The handler of a judging stage's events, for ``consume``.

        It judges, then hands the delivery to a task of its own and takes the next input: a judging slot
        is free again as soon as the judge has answered, not after the outcome's broker round trips (the
        record, the outputs), which cost a tenth of a 200 ms judge's throughput at 32 calls in flight. The
        task marks the input done (or leaves it to the audit join's flush); at most ``max_deliveries`` run
        at once, and ``settle`` waits for them before the partitions are handed over.
        """

        async def process(event: Any, origin: Origin) -> bool:
            with self._inflight.pair():
                marks = self._outcomes.crashes(stage, origin)
                if marks >= self.crash_loop_limit:
                    # A poison pill: it stopped a worker every time it was read. Set aside, with its bytes.
                    detail = f"this input stopped a worker {marks} times (crash_loop_limit {self.crash_loop_limit})"
                    letter = self._pipeline.crashed_worker(stage, event.value, origin, detail)
                    await self.deliver(stage, StageResult([letter]), event.value, origin)
                    return False
                result = await self._decide(stage, event, origin, after_crash=marks > 0)
                if result is None:
                    return False
                await self._slots.acquire()
            task = asyncio.create_task(self._deliver_in_background(stage, result, event, origin))
            self._deliveries.add(task)
            task.add_done_callback(self._deliveries.discard)
            return True

        return process

    async def _decide(self, stage: Stage, event: Any, origin: Origin, *, after_crash: bool) -> StageResult | None:
        """Judge one input; None when its partition was reassigned meanwhile (nothing to deliver)."""
        result: StageResult | None = None
        try:
            # Only the judging may be cut off by the shutdown (HandedBack); a delivery, once begun, finishes.
            handled = self._pipeline.handle(stage, event.value, event.headers, origin, after_crash=after_crash)
            result = await self._inflight.judging(handled)
            if event.message.generation_id != self._app.consumer_generation_id:
                # The partition was reassigned while this input was judged. Its new owner judges
                # it again (or replays what was recorded); publishing now could race that.
                log.info("dropping a stale %s result for %s:%s", stage, origin.topic, origin.offset)
                self.release(stage, result)
                return None
            return result
        except BaseException:
            if result is not None:
                self.release(stage, result)
            raise

    async def _deliver_in_background(self, stage: Stage, result: StageResult, event: Any, origin: Origin) -> None:
        try:
            with self._inflight.pair():
                deferred = await self.deliver(stage, result, event.value, origin, event.message)
            if not deferred:
                mark_done(self._app, event.message)
        except Exception as exc:  # noqa: BLE001  # logged, with its traceback, by stop
            self.release(stage, result)
            # Out of what ``settle`` waits for: the stop it starts waits for ``settle``, which would wait for this.
            task = asyncio.current_task()
            if task is not None:
                self._deliveries.discard(task)
            await self.stop(stage, origin, exc, stage=stage)
        finally:
            self._slots.release()

    async def settle(self) -> None:
        """Wait for the deliveries still running: before the partitions are handed over, so that nothing of
        this worker is published after their next owner has started (``GracefulApp.before_handover``)."""
        while self._deliveries:
            await asyncio.gather(*list(self._deliveries), return_exceptions=True)


#: The topic kinds of the outcomes that leave their stage unsettled (``schemas.outcomes``: the dead letters).
_UNSETTLED: Final = unsettling_topics()


def _is_outcome(outgoing: list[Outgoing]) -> bool:
    """Whether ``outgoing`` is a stage's result to record (and mark published): anything but an outcome that leaves
    its stage unsettled (``OutcomeEntry.settles_stage``), such as a dead letter, which a stage publishes alone."""
    return bool(outgoing) and outgoing[0].kind not in _UNSETTLED


def wire_stages(
    app: GracefulApp,
    delivery: Delivery,
    topics: dict[str, faust.TopicT],
    *,
    concurrency: int,
    processors: Mapping[WorkerStage, Process] | None = None,
) -> dict[WorkerStage, Any]:
    """One agent per stage of the registry (``schemas.kinds.STAGES``), each a ``consume`` loop of its stage on the
    topic the stage reads; by stage. The judging stages' handler is ``Delivery.processor``; a stage that judges
    nothing brings its own in ``processors`` (the shadow stage's, ``streams.shadow``). The deliveries still running
    finish before partitions are handed over (and before the audit join's flush, which counts them: ``wire_audit``
    comes after this)."""
    app.before_handover.append(delivery.settle)
    handlers = dict(processors or {})
    agents: dict[WorkerStage, Any] = {}
    for stage, spec in STAGES.items():
        process = handlers.pop(stage, None)
        if process is None:
            if stage == "shadow":
                raise ValueError("the shadow stage needs its processor (streams.shadow.ShadowStage.process)")
            process = delivery.processor(stage)
        agents[stage] = _stage_agent(
            app, delivery, topics[spec.source], stage, process, name=spec.agent, concurrency=concurrency
        )
    if handlers:
        raise ValueError(f"processors for stages the registry does not have: {sorted(handlers)}")
    return agents


def _stage_agent(
    app: faust.App,
    delivery: Delivery,
    topic: faust.TopicT,
    stage: WorkerStage,
    process: Process,
    *,
    name: str,
    concurrency: int,
) -> Any:
    async def stage_agent(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for _ in delivery.consume(stream, stage, process, stage=stage):
            yield None

    return app.agent(topic, name=name, concurrency=concurrency)(stage_agent)
