"""Stopping tasks that use aiokafka, for certain.

aiokafka 0.12's client and fetcher ``close()`` wait for their own background task inside
``contextlib.suppress(asyncio.CancelledError)``. A cancellation of the *calling* task that arrives during
that wait is swallowed with it (aio-libs/aiokafka#983; the fix, aio-libs/aiokafka#1000, is not released).
A reader cancelled while it opens its consumer (``topic_partitions`` closes an admin client on the way)
then carries on as if it had never been asked, and a follower that reads for ever never ends: the review
service's shutdown waited on its scores feed for ever (a test hung for 600 s in a loaded, concurrent run).

Two guards. Readers that run until cancelled check each time round whether a request to stop was swallowed
(``stop_if_cancelled``); an owner stopping its tasks repeats the request until they have ended
(``cancel_and_wait``), as anyio's level-triggered cancellation would.
"""

from __future__ import annotations

import asyncio
from typing import Any

#: How long an owner waits for its cancelled tasks before asking again.
CANCEL_AGAIN_AFTER_S = 1.0


def stop_if_cancelled() -> None:
    """Raise ``CancelledError`` if this task was asked to stop and the request was swallowed on the way.

    ``Task.cancelling()`` counts requests not yet taken back with ``uncancel()`` (``asyncio.timeout`` takes
    its own back), so outside an ``except``/``finally`` that is handling one, non-zero means a lost request.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def cancel_and_wait(*tasks: asyncio.Task[Any], again_after_s: float = CANCEL_AGAIN_AFTER_S) -> None:
    """Cancel ``tasks`` and return once every one has ended, cancelling again those that run on.

    Then, like awaiting them, raise the first one's error (in the order given) if any ended with one.
    """
    running = {task for task in tasks if not task.done()}
    while running:
        for task in running:
            task.cancel()
        _, running = await asyncio.wait(running, timeout=again_after_s)
    for task in tasks:
        if not task.cancelled() and (error := task.exception()) is not None:
            raise error
