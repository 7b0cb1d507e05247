"""The review queue on a real SQLite database, and the service's password and login-limit rules."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pairjudge.schemas import ReviewRequest
from pairjudge.schemas.pair import PairMetadata
from pairjudge.streams.review.auth import LoginLimiter, User, Users, hash_password, verify_password
from pairjudge.streams.review.store import Filters, ReviewStore, StaleClaim
from tests.unit.factories import h2h_rubric, make_pair


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def request(
    i: int, reason: str = "tiebreak_disagreement", *, audit: bool = False, experiment: str = "exp-a"
) -> ReviewRequest:
    pair = make_pair(pair_id=f"p{i}", metadata=PairMetadata(experiment_id=experiment))
    return ReviewRequest(pair_id=pair.pair_id, reason=reason, stage="tiebreak", pair=pair, audit=audit)


@pytest.fixture
async def store(tmp_path: Path) -> ReviewStore:
    clock = Clock()
    s = ReviewStore(f"sqlite+aiosqlite:///{tmp_path}/queue.db", clock=clock)
    await s.migrate()
    s.clock = clock  # type: ignore[attr-defined]
    return s


async def test_a_redelivered_request_is_stored_once_but_an_audit_copy_is_its_own_item(store: ReviewStore) -> None:
    assert await store.add(request(1))
    assert not await store.add(request(1))
    assert await store.add(request(1, "audit_sample", audit=True))
    assert (await store.stats()).waiting == 2
    assert await store.migrate() == 1  # migrations apply once


async def test_claims_are_exclusive_expire_and_record_the_order_shown(store: ReviewStore) -> None:
    for i in range(2):
        await store.add(request(i))
    ana = await store.claim_next("ana", Filters(), ttl_s=60)
    bo = await store.claim_next("bo", Filters(), ttl_s=60)
    assert ana is not None
    assert bo is not None
    assert ana.id != bo.id
    assert {ana.left, ana.right} == {c.candidate_id for c in ana.request.pair.candidates}
    assert (await store.claim_next("ana", Filters(), ttl_s=60)).id == ana.id  # type: ignore[union-attr]
    assert await store.claim_next("cy", Filters(), ttl_s=60) is None
    store.clock.now += 61  # type: ignore[attr-defined]
    with pytest.raises(StaleClaim):
        await store.claimed_item(ana.id, "ana")
    again = await store.claim_next("cy", Filters(), ttl_s=60)
    assert again is not None
    assert again.id == ana.id
    with pytest.raises(StaleClaim):
        await store.complete(ana.id, "ana", "x")
    await store.complete(again.id, "cy", again.left)
    stats = await store.stats(reviewer="cy")
    assert (stats.done, stats.mine, stats.waiting, stats.claimed) == (1, 1, 1, 0)  # bo's claim lapsed too
    assert (await store.stats(reviewer="ana")).mine == 0


async def test_filters_by_experiment_rubric_and_reason(store: ReviewStore) -> None:
    await store.add(request(1, "tiebreak_no_signal", experiment="exp-a"))
    await store.add(request(2, "kappa_guard", experiment="exp-b"))
    pair = make_pair(pair_id="p3", rubric=h2h_rubric())
    await store.add(ReviewRequest(pair_id="p3", reason="tiebreak_disagreement", stage="tiebreak", pair=pair))
    got = await store.claim_next("ana", Filters(experiment="exp-b"), ttl_s=60)
    assert got is not None
    assert got.pair_id == "p2"
    got = await store.claim_next("bo", Filters(rubric_kind="head_to_head"), ttl_s=60)
    assert got is not None
    assert got.pair_id == "p3"
    got = await store.claim_next("cy", Filters(reason="tiebreak_no_signal"), ttl_s=60)
    assert got is not None
    assert got.pair_id == "p1"
    choices = await store.choices()
    assert set(choices["reason"]) == {"tiebreak_no_signal", "kappa_guard", "tiebreak_disagreement"}
    assert (await store.stats(Filters(experiment="exp-a"))).claimed == 1


async def test_concurrent_reviewers_never_share_an_item_on_sqlite(store: ReviewStore) -> None:
    for i in range(60):
        await store.add(request(i))
    taken: list[int] = []

    async def reviewer(name: str) -> None:
        while (item := await store.claim_next(name, Filters(), ttl_s=600)) is not None:
            taken.append(item.id)
            await store.complete(item.id, name, item.left)

    await asyncio.gather(*(reviewer(f"r{n}") for n in range(8)))
    assert sorted(taken) == sorted(set(taken))
    assert len(taken) == 60


def test_passwords_hash_with_salt_and_verify() -> None:
    first, second = hash_password("correct horse"), hash_password("correct horse")
    assert first != second  # salted
    assert first.startswith("scrypt$")
    assert verify_password("correct horse", first)
    assert not verify_password("Correct horse", first)
    assert not verify_password("x", "not-a-hash")
    users = Users([User("ana", "reviewer", first)])
    assert users.authenticate("ana", "correct horse") is not None
    assert users.authenticate("ana", "wrong") is None
    assert users.authenticate("nobody", "correct horse") is None


def test_roles_nest() -> None:
    assert User("o", "operator", "").may("reviewer")
    assert not User("r", "reviewer", "").may("operator")


def test_failed_logins_are_limited_per_key_and_forgotten_after_the_window() -> None:
    now = [0.0]
    limiter = LoginLimiter(3, 60.0, clock=lambda: now[0])
    for _ in range(3):
        assert limiter.blocked_for("user:ana") == 0
        limiter.failed("user:ana", "addr:1")
    assert limiter.blocked_for("user:ana") == pytest.approx(60.0)
    assert limiter.blocked_for("user:bo", "addr:1") > 0  # the address is limited too
    now[0] = 61.0
    assert limiter.blocked_for("user:ana", "addr:1") == 0
