"""The review service waits out a PostgreSQL outage: nothing lost, nothing doubled, and the probes say so.

Real Kafka and a PostgreSQL cluster of the test's own, stopped (``pg_ctl -m fast``: sessions are cut) while
review requests keep arriving, then started again on the same port. Before the fix, the first failed
insert ended the review feed's task for good: the web app kept answering, and every later review request
waited unread until the process was restarted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import httpx
import pytest

from pairjudge.schemas import ReviewRequest
from pairjudge_dev.postgres import PostgresCluster
from tests.fixtures.review import review_settings, send_reviews, serving, wait_stored
from tests.unit.factories import make_pair

# Alone under xdist: the service is stopped and started again, and its clients' connect timeouts are seconds.
pytestmark = [pytest.mark.kafka, pytest.mark.postgres, pytest.mark.serial]


@pytest.fixture
def cluster() -> Iterator[PostgresCluster]:
    cluster = PostgresCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.remove()


def _requests(first: int, count: int) -> list[ReviewRequest]:
    return [
        ReviewRequest(pair_id=f"outage-{i:03d}", reason="tiebreak_disagreement", stage="tiebreak", pair=make_pair())
        for i in range(first, first + count)
    ]


async def _until(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.2)


async def test_review_requests_sent_while_the_database_is_down_are_stored_once_it_is_back(
    cluster: PostgresCluster, kafka_bootstrap: str, unique_topic_prefix: str, tmp_path: Path
) -> None:
    settings = review_settings(kafka_bootstrap, unique_topic_prefix.rstrip("."), tmp_path, database_url=cluster.url)
    async with serving(settings) as server, httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        health = server.running.review.health
        assert health is not None
        feed_task = health.tasks["review feed"]
        ready = await client.get("/readyz")
        assert (ready.status_code, ready.json()) == (200, {"status": "ready", "reasons": []})

        await send_reviews(settings, _requests(0, 20))
        await wait_stored(server, 20)

        cluster.stop()
        down = await client.get("/readyz")
        assert down.status_code == 503, down.text
        assert any(r.startswith("database not answering") for r in down.json()["reasons"]), down.text
        assert (await client.get("/livez")).status_code == 200  # a restart would not bring the database back

        await send_reviews(settings, _requests(20, 30))  # arrive during the outage

        async def feed_reports_it() -> bool:
            body = (await client.get("/readyz")).json()
            return any(r.startswith("review requests not stored: database unavailable") for r in body["reasons"])

        await _until(feed_reports_it, 30, "/readyz names the feed's problem")
        body = (await client.get("/readyz")).text
        # Probes answer without signing in: no host, port, user or driver message in them.
        for secret_ish in (str(cluster.port), "postgres", "127.0.0.1"):
            assert secret_ish not in body.lower(), body
        assert not feed_task.done()
        await asyncio.sleep(3)  # a few failed retries while it stays down

        cluster.start()
        await wait_stored(server, 50, timeout=90)

        async def ready_again() -> bool:
            return (await client.get("/readyz")).status_code == 200

        await _until(ready_again, 30, "/readyz 200 again")
        assert not feed_task.done()

        # Every request exactly once in the queue, none lost during the outage, none doubled by the retries.
        stats = await server.running.store.stats()
        assert (stats.waiting, stats.claimed, stats.done) == (50, 0, 0)
        assert server.running.feed.stored == 50
