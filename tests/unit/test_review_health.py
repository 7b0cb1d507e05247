"""The review service's probes (streams.review.probes): what makes it not live, and what makes it not ready."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pairjudge.streams.review.probes import ReviewHealth
from pairjudge.streams.review.store import ReviewStore


async def _failing() -> None:
    raise RuntimeError("connection to db.internal:5432 as admin failed")


async def test_a_feed_that_ended_with_an_error_makes_the_service_not_live_naming_only_the_error_type(
    tmp_path: Path,
) -> None:
    store = ReviewStore(f"sqlite+aiosqlite:///{tmp_path}/review.db")
    await store.migrate()
    try:
        running = asyncio.create_task(asyncio.sleep(60))
        health = ReviewHealth(store, tasks={"review feed": running})
        assert health.not_live() is None
        assert await health.not_ready() == []

        failed = asyncio.create_task(_failing())
        await asyncio.wait([failed])
        health.tasks = {"scores feed": running, "review feed": failed}
        assert health.not_live() == "review feed stopped (RuntimeError)"
        reasons = await health.not_ready()
        assert reasons == ["review feed stopped (RuntimeError)"]
        assert "db.internal" not in " ".join(reasons)
        running.cancel()
        health.tasks = {"review feed": running}
        await asyncio.wait([running])
        assert health.not_live() is None  # cancelled: the service is stopping, not broken
    finally:
        await store.close()


async def test_a_feed_that_cannot_store_and_a_database_that_does_not_answer_make_it_not_ready(tmp_path: Path) -> None:
    store = ReviewStore(f"sqlite+aiosqlite:///{tmp_path}/review.db")
    await store.migrate()
    feed: Any = SimpleNamespace(problem=None)
    health = ReviewHealth(store, feed=feed)
    try:
        assert await health.not_ready() == []
        feed.problem = "review requests not stored: database unavailable (OperationalError)"
        assert await health.not_ready() == [feed.problem]
        feed.problem = None
    finally:
        await store.close()
    # A database file that cannot be opened: the ping fails, with the error's type only.
    missing = ReviewStore(f"sqlite+aiosqlite:///{tmp_path}/gone/review.db")
    try:
        shutil.rmtree(tmp_path / "gone")
        reasons = await ReviewHealth(missing).not_ready()
        assert reasons == ["database not answering (OperationalError)"], reasons
    finally:
        await missing.close()
