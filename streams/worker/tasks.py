"""Long-running tasks on a worker's Faust app whose failure must stop the worker, not leave it on stale state."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)


def keep_following(app: Any, topic: str, follow: Callable[[], Awaitable[None]]) -> None:
    """A task on ``app`` that runs ``follow`` (reading ``topic`` for as long as the worker runs); its failure
    stops the worker loudly instead of leaving it judging on stale state (the control and spend topics)."""

    async def follower() -> None:
        try:
            await follow()
        except Exception as exc:
            log.exception("following %s failed", topic)
            await app.crash(exc)

    app.task(follower)
