"""Faust's shutdown wait, bounded: ``GracefulApp`` replaces ``App._consumer_wait_empty`` and extends ``on_stop``.

Why (``streams.faust_compat.inflight`` has the whole story): faust-streaming 0.15.3 waits in
``Consumer.wait_empty`` without a bound when the app stops, so a slow or dead judge keeps the worker
from ever leaving the group. The replacement keeps Faust's wait for rebalances and bounds it with
``shutdown_grace_s`` only when the app is stopping; the pairs still judging then are handed back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import faust

from pairjudge.streams.faust_compat.inflight import InFlight, drain
from pairjudge.streams.judges.breaker import CircuitBreaker

#: How long each step before a hand-over may take (``GracefulApp.before_handover``): a flush is a few broker
#: round trips.
HANDOVER_STEP_TIMEOUT_S = 15.0


class GracefulApp(faust.App):
    """A ``faust.App`` whose shutdown waits at most ``shutdown_grace_s`` for in-flight pairs (module doc)."""

    shutdown_grace_s: float = 30.0
    inflight: InFlight
    breakers: Sequence[CircuitBreaker] = ()
    _stopping = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inflight = InFlight()
        #: Run once the agents are idle and before this worker's partitions go (a revocation or a shutdown):
        #: what a stage holds for its partitions (the audit join's buffer) goes to the broker first.
        self.before_handover: list[Callable[[], Awaitable[Any]]] = []

    @property
    def stopping(self) -> bool:
        """Whether the app has started stopping: from the first thing ``on_stop`` does (readiness reads it)."""
        return self._stopping

    async def on_stop(self) -> None:
        # First thing: readiness (WorkerHealth.app_stopping) goes 503 before anything else happens.
        self._stopping = True
        await super().on_stop()

    async def _consumer_wait_empty(self, consumer: Any, logger: Any) -> None:
        if not self._stopping:
            # A revocation during a rebalance: Faust's wait, unchanged (faust_compat.offsets guards its commits).
            await super()._consumer_wait_empty(consumer, logger)
        else:
            logger.info("shutdown: waiting up to %g s for pairs in flight", self.shutdown_grace_s)
            await drain(
                lambda: super(GracefulApp, self)._consumer_wait_empty(consumer, logger),
                self.inflight,
                self.breakers,
                self.shutdown_grace_s,
            )
        # Faust calls this in both paths (App._on_partitions_revoked, App._stop_consumer) after pausing the
        # partitions and before the tables stop: the last point where this worker still holds them. Not after
        # a crash: the producer may be what failed, and what the steps hold is read again by the partitions'
        # next owner anyway (none of it was committed); each step is bounded for the same reason.
        if self.crashed:
            return
        for step in self.before_handover:
            try:
                await asyncio.wait_for(step(), HANDOVER_STEP_TIMEOUT_S)
            except Exception:
                logger.exception("a step before handing over the partitions failed; its inputs are read again")
