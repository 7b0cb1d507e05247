"""Two review-service instances on one real PostgreSQL never hand the same item to two reviewers."""

from __future__ import annotations

import asyncio

import pytest

from pairjudge.schemas import ReviewRequest
from pairjudge.streams.review.store import Filters, ReviewStore
from tests.unit.factories import make_pair

pytestmark = [pytest.mark.postgres]


async def test_two_instances_share_one_queue_without_double_claims(postgres_url: str) -> None:
    first, second = ReviewStore(postgres_url), ReviewStore(postgres_url)
    try:
        await asyncio.gather(first.migrate(), second.migrate())  # both start at once: one migrates
        assert await first.migrate() == 1
        pairs = [make_pair(pair_id=f"pg-{i}") for i in range(300)]
        requests = [
            ReviewRequest(pair_id=p.pair_id, reason="tiebreak_disagreement", stage="tiebreak", pair=p) for p in pairs
        ]
        # Both instances consume the same requests (a replay): each item is stored once.
        added = await asyncio.gather(*(s.add(r) for r in requests for s in (first, second)))
        assert sum(added) == 300
        claimed: dict[int, str] = {}
        doubles: list[int] = []

        async def reviewer(store: ReviewStore, name: str) -> None:
            while (item := await store.claim_next(name, Filters(), ttl_s=600)) is not None:
                if item.id in claimed:
                    doubles.append(item.id)
                claimed[item.id] = name
                await store.complete(item.id, name, item.left)

        await asyncio.gather(*(reviewer(s, f"{tag}{n}") for s, tag in ((first, "a"), (second, "b")) for n in range(8)))
        assert doubles == []
        assert len(claimed) == 300
        assert {name[0] for name in claimed.values()} == {"a", "b"}  # both instances did work
        stats = await first.stats()
        assert (stats.waiting, stats.claimed, stats.done) == (0, 0, 300)
    finally:
        await first.close()
        await second.close()
