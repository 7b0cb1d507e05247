"""Graceful SIGTERM: finish what can finish within a grace period, hand the rest back uncommitted.

What faust-streaming 0.15.3 does on its own (read in ``faust/app/base.py`` and seen with a real worker):
on ``App.on_stop`` it stops the flow, pauses every partition, empties the agents' buffers and then
waits in ``Consumer.wait_empty`` until every event an agent took has been acked, committing as it goes;
only then does the consumer stop and leave the group. Pairs in flight are therefore finished, which is
right, but the wait has no bound: a judge that answers in minutes, or one that is down (the pairs wait
on its circuit breaker), keeps the worker from ever stopping until the orchestrator kills it, and a
killed worker commits nothing it finished during the wait either.

``GracefulApp`` (``streams.faust_compat.shutdown``) keeps Faust's wait and bounds it with
``shutdown_grace_s``. Whatever is still being judged then (or at once, when a judge's breaker is open:
nothing waiting on it can finish) is handed back: its judging is cancelled, the pipeline releases its
outcome claim, and the event is acked for Faust's bookkeeping but never marked done, so the commit ledger
(``streams.faust_compat.offsets``) keeps the group's offset below it and the partition's next owner judges
it. A pair already publishing is never cut off: only the judging phase is cancelled, so no pair is published
half-way by one worker and again by the next. The consumer then commits what finished and leaves the group,
as before."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, TypeVar

from pairjudge.streams.judges.breaker import CircuitBreaker

log = logging.getLogger(__name__)

T = TypeVar("T")

#: After the hand-back, how long pairs that were already publishing get to finish (a broker round trip).
SETTLE_S = 10.0
#: How often the bounded wait looks at the breakers.
POLL_S = 0.25


class HandedBack(Exception):
    """The shutdown cancelled this pair's judging: not done, not committed; its next owner judges it."""


class InFlight:
    """The stage events being processed, and which of them are still judging (so may be handed back)."""

    def __init__(self) -> None:
        self.count = 0
        self._judging: set[asyncio.Task[Any]] = set()
        self._handed_back: set[asyncio.Task[Any]] = set()
        self._handing_back = False

    @contextlib.contextmanager
    def pair(self) -> Iterator[None]:
        """Count one event from the moment an agent takes it until it is done or handed back."""
        self.count += 1
        try:
            yield
        finally:
            self.count -= 1

    async def judging(self, work: Awaitable[T]) -> T:
        """Await ``work`` (the pipeline's decision) such that ``hand_back`` may cancel it.

        Raises ``HandedBack`` when it did; any other cancellation (the agent stopping) goes on as one.
        """
        task = asyncio.current_task()
        assert task is not None
        if self._handing_back:
            if asyncio.iscoroutine(work):
                work.close()
            raise HandedBack
        self._judging.add(task)
        try:
            return await work
        except asyncio.CancelledError:
            if self._claim(task) and task.uncancel() == 0:
                raise HandedBack from None
            raise
        finally:
            self._judging.discard(task)
            if self._claim(task):
                # The work swallowed the hand-back's cancellation and finished anyway: its result stands.
                task.uncancel()

    def _claim(self, task: asyncio.Task[Any]) -> bool:
        """Whether ``hand_back`` cancelled ``task`` (answered once)."""
        if task in self._handed_back:
            self._handed_back.discard(task)
            return True
        return False

    def hand_back(self) -> int:
        """Cancel every pair still judging (and any that starts); returns how many were cancelled."""
        self._handing_back = True
        tasks = list(self._judging)
        for task in tasks:
            self._handed_back.add(task)
            task.cancel()
        return len(tasks)


async def drain(
    wait_empty: Callable[[], Awaitable[None]],
    inflight: InFlight,
    breakers: Sequence[CircuitBreaker],
    grace_s: float,
    *,
    settle_s: float = SETTLE_S,
) -> None:
    """Faust's ``wait_empty`` for at most ``grace_s`` (less while a breaker is open), then hand back."""
    loop = asyncio.get_running_loop()
    waiting = asyncio.ensure_future(wait_empty())
    deadline = loop.time() + grace_s
    try:
        while not waiting.done():
            left = deadline - loop.time()
            open_judges = [b.name for b in breakers if b.is_open]
            if left <= 0 or open_judges:
                why = f"judge {', '.join(open_judges)} is down" if open_judges else f"after {grace_s:g} s"
                cancelled = inflight.hand_back()
                log.warning(
                    "shutdown: %d pairs still judging %s; handed back uncommitted for the partition's next owner",
                    cancelled,
                    why,
                )
                break
            await asyncio.wait({waiting}, timeout=min(left, POLL_S))
        # Handed-back events are acked at once, pairs already publishing within a broker round trip.
        await asyncio.wait_for(asyncio.shield(waiting), settle_s if not waiting.done() else None)
    except TimeoutError:
        log.warning("shutdown: events still unacked %.0f s after the hand-back; stopping anyway", settle_s)
    finally:
        if not waiting.done():
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting
