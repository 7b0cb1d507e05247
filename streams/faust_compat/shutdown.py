"""Faust's shutdown wait, bounded: ``GracefulApp`` replaces ``App._consumer_wait_empty`` and extends ``on_stop``.

Why (``streams.worker.shutdown`` has the whole story): faust-streaming 0.15.3 waits in
``Consumer.wait_empty`` without a bound when the app stops, so a slow or dead judge keeps the worker
from ever leaving the group. The replacement keeps Faust's wait for rebalances and bounds it with
``shutdown_grace_s`` only when the app is stopping; the pairs still judging then are handed back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import faust

from pairjudge.streams.judges.breaker import CircuitBreaker
from pairjudge.streams.worker.shutdown import InFlight, drain


class GracefulApp(faust.App):
    """A ``faust.App`` whose shutdown waits at most ``shutdown_grace_s`` for in-flight pairs (module doc)."""

    shutdown_grace_s: float = 30.0
    inflight: InFlight
    breakers: Sequence[CircuitBreaker] = ()
    #: Told first thing when the app stops (readiness goes 503 before anything else happens).
    on_stopping: Callable[[], None] | None = None
    _stopping = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inflight = InFlight()

    async def on_stop(self) -> None:
        self._stopping = True
        if self.on_stopping is not None:
            self.on_stopping()
        await super().on_stop()

    async def _consumer_wait_empty(self, consumer: Any, logger: Any) -> None:
        if not self._stopping:
            # A revocation during a rebalance: Faust's wait, unchanged (faust_compat.offsets guards its commits).
            await super()._consumer_wait_empty(consumer, logger)
            return
        logger.info("shutdown: waiting up to %g s for pairs in flight", self.shutdown_grace_s)
        await drain(
            lambda: super(GracefulApp, self)._consumer_wait_empty(consumer, logger),
            self.inflight,
            self.breakers,
            self.shutdown_grace_s,
        )
