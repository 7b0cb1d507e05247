"""Two review-service instances on one real PostgreSQL never hand the same item to two reviewers (and give
an item that wants a second opinion to two different ones)."""

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
        assert await first.migrate() == 2
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


async def test_two_instances_give_each_second_opinion_to_a_different_reviewer(postgres_url: str) -> None:
    first, second = ReviewStore(postgres_url), ReviewStore(postgres_url)
    try:
        await asyncio.gather(first.migrate(), second.migrate())
        pairs = [make_pair(pair_id=f"pg2-{i}") for i in range(80)]
        requests = [
            ReviewRequest(
                pair_id=p.pair_id, reason="audit_sample", stage="primary", pair=p, audit=True, reviews_wanted=2
            )
            for p in pairs
        ]
        assert await first.add_many(requests) == 80
        done_before = (await first.stats()).done  # the session's database is shared with the test above
        labelled: dict[int, list[str]] = {}

        async def reviewer(store: ReviewStore, name: str) -> None:
            while (item := await store.claim_next(name, Filters(), ttl_s=600)) is not None:
                labelled.setdefault(item.id, []).append(name)
                await store.complete(item.id, name, item.left)

        await asyncio.gather(*(reviewer(s, f"{tag}{n}") for s, tag in ((first, "a"), (second, "b")) for n in range(4)))
        assert len(labelled) == 80
        assert all(len(names) == 2 and len(set(names)) == 2 for names in labelled.values()), labelled
        stats = await second.stats()
        assert (stats.waiting, stats.second_opinion, stats.claimed, stats.done - done_before) == (0, 0, 0, 80)
    finally:
        await first.close()
        await second.close()
