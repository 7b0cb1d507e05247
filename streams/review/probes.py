"""The review service's probes: ``/livez`` (is the process worth keeping) and ``/readyz`` (can it serve).

Liveness fails only when the service cannot mend itself: one of its background tasks (the review feed,
the Kafka consumer that fills the queue; the control follower; the scores feed) has ended with an error.
An orchestrator then restarts it. A database outage is *not* a
liveness failure (a restart would not bring the database back, and the feed waits it out): it makes
``/readyz`` answer 503 with the reason, so a load balancer sends reviewers to an instance that works.

The reasons name what is wrong and an exception's type, never its text: a driver's message can carry
the database's host and user name, and these routes answer without signing in.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from pairjudge.streams.review.kafka import ReviewFeed
from pairjudge.streams.review.store import STORE_UNAVAILABLE, ReviewStore

#: How long ``/readyz`` waits for the database's answer to ``SELECT 1``.
DATABASE_ANSWER_S = 2.0


@dataclass
class ReviewHealth:
    store: ReviewStore
    feed: ReviewFeed | None = None
    #: The service's background tasks by name ("review feed", ...), which run until it stops.
    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    def not_live(self) -> str | None:
        """Why the process should be restarted, or None."""
        for name, task in self.tasks.items():
            if task.done() and not task.cancelled():
                error = task.exception()
                return f"{name} stopped ({type(error).__name__})" if error else f"{name} stopped"
        return None

    async def not_ready(self) -> list[str]:
        """Why reviewers should not be sent here now; empty when they may."""
        reasons = []
        if (dead := self.not_live()) is not None:
            reasons.append(dead)
        if self.feed is not None and self.feed.problem is not None:
            reasons.append(self.feed.problem)
        try:
            await asyncio.wait_for(self.store.ping(), DATABASE_ANSWER_S)
        except STORE_UNAVAILABLE as exc:
            reasons.append(f"database not answering ({type(exc).__name__})")
        return reasons
