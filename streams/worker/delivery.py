"""At-least-once delivery: an input is done only once its outputs are on the broker.

``Delivery`` is what every agent's loop goes through. ``consume`` acks an input only after its handler
returned, which for a stage means ``deliver`` has recorded the outcome (``streams.worker.published``) and
the broker has acknowledged every output (``publish``). A handler that raises stops the worker without
acking (``app.crash``): the commit ledger (``streams.faust_compat.offsets``) keeps the group's offset
below the input, and a restart judges it again. A pair the shutdown cut off (``HandedBack``) is acked for
Faust's bookkeeping but never marked done, so its partition's next owner judges it.

The audit and the scoreboard publish through ``publish`` and consume through ``consume`` too; the two
judging stages' handler is ``processor(stage)``. Built by the composition root (``streams.app``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import faust
from aiokafka.errors import MessageSizeTooLargeError, RecordTooLargeError

from pairjudge.streams.faust_compat.offsets import mark_done
from pairjudge.streams.worker.pipeline import Origin, Outgoing, Pipeline, Stage, StageResult
from pairjudge.streams.worker.published import OutcomeTables
from pairjudge.streams.worker.shutdown import HandedBack, InFlight

log = logging.getLogger(__name__)

#: Sends messages and returns once the broker has acknowledged every one (``Delivery.publish``).
Publish = Callable[[list[Outgoing]], Awaitable[None]]
#: Handles one event (``event.value``, ``event.headers``, ``event.message``) read at ``Origin``.
Process = Callable[[Any, Origin], Awaitable[None]]
#: An agent's loop over a stream: yields once per input done (``Delivery.consume``).
Consume = Callable[[Any, str, Process], AsyncIterator[None]]


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
    ) -> None:
        self._app = app
        self._topics = topics
        self._pipeline = pipeline
        self._outcomes = outcomes
        self._inflight = inflight

    async def publish(self, messages: list[Outgoing]) -> None:
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

    async def deliver(self, stage: Stage, result: StageResult, raw: bytes | None, origin: Origin) -> None:
        """Record the outcome, then publish it; an outcome the broker refuses becomes a dead letter.

        Raises when neither can be delivered: the caller then stops the worker without acking.
        """
        partition = origin.partition or 0
        if result.pair_id is not None and not result.replayed:
            if result.outgoing and all(m.kind == "deadletter" for m in result.outgoing):
                # A dead letter is not the pair's outcome: recorded, it would be re-emitted for every
                # `pairjudge deadletter replay` of the pair within the retention, and the fixed judge never asked.
                self._outcomes.release(stage, result.pair_id)
            else:
                await self._outcomes.record(stage, result.pair_id, partition, result.outgoing)
        try:
            await self.publish(result.outgoing + result.alerts)
        except (MessageSizeTooLargeError, RecordTooLargeError) as exc:
            detail = f"the broker refused the {stage} outcome ({type(exc).__name__}: {exc})"
            # Not recorded: a redelivery replays the recorded outcome, which is refused (and
            # dead-lettered) again, or delivered once the topic accepts it.
            await self.publish([self._pipeline.undeliverable(stage, raw, origin, detail)])

    def release(self, stage: Stage, result: StageResult) -> None:
        """Give up the outcome claim of a result that will not be delivered (a waiting delivery decides)."""
        if result.pair_id is not None and not result.replayed:
            self._outcomes.release(stage, result.pair_id)

    async def consume(self, stream: Any, what: str, process: Process) -> AsyncIterator[None]:
        # Manual acks: Faust acks in a ``finally`` when the body raises, which would make an input
        # committable with no outcome. Here an input is acked only after its outputs are on the broker.
        async for event in stream.noack().events():
            msg = event.message
            origin = Origin(topic=msg.topic, partition=msg.partition, offset=msg.offset, key=msg.key)
            try:
                await process(event, origin)
            except HandedBack:
                # Cut off by the shutdown's grace (streams.worker.shutdown): acked for Faust's bookkeeping, never
                # marked done, so the offset ledger keeps the commit below it and its next owner judges it.
                await stream.ack(event)
                continue
            except Exception as exc:
                log.critical(
                    "could not deliver the %s outcome for %s[%s]@%s; stopping without committing it",
                    what,
                    msg.topic,
                    msg.partition,
                    msg.offset,
                    exc_info=True,
                )
                await self._app.crash(exc)
                return
            mark_done(self._app, msg)
            await stream.ack(event)
            yield None

    def processor(self, stage: Stage) -> Process:
        """The handler of a judging stage's events, for ``consume``."""

        async def process(event: Any, origin: Origin) -> None:
            with self._inflight.pair():
                await self._decide_and_deliver(stage, event, origin)

        return process

    async def _decide_and_deliver(self, stage: Stage, event: Any, origin: Origin) -> None:
        result: StageResult | None = None
        try:
            # Only the judging may be cut off by the shutdown (HandedBack); a delivery, once begun, finishes.
            result = await self._inflight.judging(self._pipeline.handle(stage, event.value, event.headers, origin))
            if event.message.generation_id != self._app.consumer_generation_id:
                # The partition was reassigned while this input was judged. Its new owner judges
                # it again (or replays what was recorded); publishing now could race that.
                log.info("dropping a stale %s result for %s:%s", stage, origin.topic, origin.offset)
                self.release(stage, result)
            else:
                await self.deliver(stage, result, event.value, origin)
        except Exception:
            if result is not None:
                self.release(stage, result)
            raise


def wire_stages(
    app: faust.App, delivery: Delivery, topics: dict[str, faust.TopicT], *, concurrency: int
) -> tuple[Any, Any]:
    """The judge and tie-break agents on ``app``, each a ``consume`` loop of its stage; returns the two."""

    @app.agent(topics["pairs"], name="pairjudge.judge", concurrency=concurrency)
    async def judge_agent(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for _ in delivery.consume(stream, "primary", delivery.processor("primary")):
            yield None

    @app.agent(topics["tiebreak"], name="pairjudge.tiebreak", concurrency=concurrency)
    async def tiebreak_agent(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for _ in delivery.consume(stream, "tiebreak", delivery.processor("tiebreak")):
            yield None

    return judge_agent, tiebreak_agent
