"""The drift audit's agents and timers on the Faust app (docs/design.md §3): the join and series agents that feed
``streams.audit.handlers.Audit``, its flush, snapshot and sweep timers, and the flush before a hand-over.

Kept apart from the handlers: they hold the tables and the logic of each input, and are driven directly in the
tests; this is only where Faust's agents and timers call them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import faust

from pairjudge.streams.audit.handlers import Audit
from pairjudge.streams.faust_compat.shutdown import GracefulApp
from pairjudge.streams.worker.delivery import Consume
from pairjudge.streams.worker.pipeline import Origin

__all__ = ["wire_audit"]


def wire_audit(app: GracefulApp, audit: Audit, topics: dict[str, faust.TopicT], consume: Consume) -> tuple[Any, Any]:
    """The join and series agents and the audit's timers, on ``app``; returns the two agents. What the join holds
    is flushed before partitions are handed over (a rebalance, a shutdown): after the deliveries have settled,
    so ``wire_stages`` comes first."""
    app.before_handover.append(audit.flush)
    names = audit.topic_names
    join_source = app.topic(
        names["decisions"],
        names["labels"],
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
    )

    async def join_one(event: Any, origin: Origin) -> bool:
        # Deferred: marked done by the flush that puts what it counted on the broker.
        return await audit.on_join_input(event.value, origin, event.message)

    async def observe_one(event: Any, origin: Origin) -> None:
        await audit.on_observation(event.value, origin)

    @app.agent(join_source, name="pairjudge.audit-join", concurrency=1)
    async def audit_join(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for _ in consume(stream, "audit join", join_one):
            yield None

    @app.agent(topics["observations"], name="pairjudge.audit-series", concurrency=1)
    async def audit_series(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for _ in consume(stream, "audit series", observe_one):
            yield None

    async def snapshots() -> None:
        await audit.publish_snapshots()

    async def sweep() -> None:
        await audit.sweep_join()

    async def flush() -> None:
        await audit.flush()

    app.timer(interval=audit.settings.flush_interval_s)(flush)
    app.timer(interval=audit.settings.snapshot_interval_s)(snapshots)
    app.timer(interval=max(1.0, min(600.0, audit.settings.join_retention_s / 10)))(sweep)
    return audit_join, audit_series
