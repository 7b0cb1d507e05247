"""The review queue on a real SQLite database, and the service's password and login-limit rules."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import select

from pairjudge.schemas import ReviewRequest
from pairjudge.schemas.pair import PairMetadata
from pairjudge.streams.review.auth import LoginLimiter, User, Users, hash_password, verify_password
from pairjudge.streams.review.store import Filters, Item, ReviewStore, StaleClaim, _item
from pairjudge.streams.review.tables import MIGRATIONS, items, labels, schema_version
from tests.unit.factories import h2h_rubric, make_pair


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def request(
    i: int,
    reason: str = "tiebreak_disagreement",
    *,
    audit: bool = False,
    experiment: str = "exp-a",
    reviews_wanted: int = 1,
) -> ReviewRequest:
    pair = make_pair(pair_id=f"p{i}", metadata=PairMetadata(experiment_id=experiment))
    return ReviewRequest(
        pair_id=pair.pair_id, reason=reason, stage="tiebreak", pair=pair, audit=audit, reviews_wanted=reviews_wanted
    )


def double(i: int) -> ReviewRequest:
    """An audit copy that wants a second, different reviewer (the human ceiling)."""
    return request(i, "audit_sample", audit=True, reviews_wanted=2)


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
    assert await store.migrate() == 2  # migrations apply once


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


async def test_an_item_wanting_two_labels_goes_to_a_second_different_reviewer(store: ReviewStore) -> None:
    await store.add(double(1))
    first = await store.claim_next("ana", Filters(), ttl_s=60)
    assert first is not None
    assert (first.reviews_wanted, first.label_count, first.second_opinion) == (2, 0, False)
    await store.complete(first.id, "ana", first.left)
    stats = await store.stats(reviewer="ana")
    assert (stats.waiting, stats.second_opinion, stats.done, stats.mine) == (1, 1, 0, 1)
    assert await store.claim_next("ana", Filters(), ttl_s=60) is None  # never the same item twice
    second = await store.claim_next("bo", Filters(), ttl_s=60)
    assert second is not None
    assert (second.id, second.label_count, second.second_opinion) == (first.id, 1, True)
    assert await store.claim_next("cy", Filters(), ttl_s=60) is None  # claimed by bo meanwhile
    await store.complete(second.id, "bo", second.right)
    stats = await store.stats(reviewer="bo")
    assert (stats.waiting, stats.second_opinion, stats.done, stats.mine) == (0, 0, 1, 1)
    assert (await store.stats(reviewer="ana")).mine == 1
    assert await store.claim_next("cy", Filters(), ttl_s=60) is None  # done with two labels
    async with store.engine.connect() as conn:
        rows = (await conn.execute(select(labels.c.reviewer, labels.c.winner).order_by(labels.c.id))).all()
    assert [tuple(r) for r in rows] == [("ana", first.left), ("bo", second.right)]


async def test_a_second_opinion_skipped_or_lapsed_stays_someone_elses(store: ReviewStore) -> None:
    await store.add(double(1))
    await store.add(request(2))  # a younger single item
    item = await store.claim_next("ana", Filters(), ttl_s=60)
    assert item is not None
    assert item.pair_id == "p1"
    await store.complete(item.id, "ana", item.left)
    # ana is offered the younger item, not the older one she labelled.
    nxt = await store.claim_next("ana", Filters(), ttl_s=60)
    assert nxt is not None
    assert nxt.pair_id == "p2"
    bo = await store.claim_next("bo", Filters(), ttl_s=60)
    assert bo is not None
    assert bo.pair_id == "p1"
    await store.release(bo.id, "bo")  # skipped: pending again, still wanting its second label
    cy = await store.claim_next("cy", Filters(), ttl_s=60)
    assert cy is not None
    assert cy.pair_id == "p1"
    store.clock.now += 61  # type: ignore[attr-defined]  # cy walks away, ana's claim lapses too
    assert (await store.claim_next("ana", Filters(), ttl_s=60)).pair_id == "p2"  # type: ignore[union-attr]
    with pytest.raises(StaleClaim):
        await store.complete(cy.id, "ana", cy.left)  # ana cannot label it on cy's claim


async def test_concurrent_reviewers_give_every_double_item_two_different_labels(store: ReviewStore) -> None:
    for i in range(30):
        await store.add(double(i))
        await store.add(request(100 + i))
    labelled: dict[int, list[str]] = {}

    async def reviewer(name: str) -> None:
        while (item := await store.claim_next(name, Filters(), ttl_s=600)) is not None:
            labelled.setdefault(item.id, []).append(name)
            await store.complete(item.id, name, item.left)

    await asyncio.gather(*(reviewer(f"r{n}") for n in range(6)))
    wanted = {i.id: i.reviews_wanted for i in await _all_items(store)}
    assert {item_id: len(names) for item_id, names in labelled.items()} == wanted
    assert all(len(set(names)) == len(names) for names in labelled.values())
    stats = await store.stats()
    assert (stats.waiting, stats.second_opinion, stats.done) == (0, 0, 60)


async def _all_items(store: ReviewStore) -> list[Item]:
    async with store.engine.connect() as conn:
        return [_item(row) for row in (await conn.execute(select(items))).mappings().all()]


async def test_migration_2_keeps_the_labels_of_a_version_1_queue(tmp_path: Path) -> None:
    """A queue created before second opinions: its done items count one label, by whoever gave it."""
    clock = Clock()
    old = ReviewStore(f"sqlite+aiosqlite:///{tmp_path}/v1.db", clock=clock)
    async with old.engine.begin() as conn:
        await conn.run_sync(lambda sync: schema_version.create(sync))
        await MIGRATIONS[0](conn)
        await conn.execute(schema_version.insert().values(version=1))
        for i, status in ((1, "done"), (2, "pending")):
            row = ReviewStore._row(request(i), clock.now)
            del row["reviews_wanted"]  # not a column yet
            row.update(status=status)
            if status == "done":
                row.update(done_by="ana", done_at=clock.now, label_winner="x")
            await conn.exec_driver_sql(
                f"INSERT INTO review_items ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})",
                tuple(row.values()),
            )
    assert await old.migrate() == 2
    stats = await old.stats(reviewer="ana")
    assert (stats.done, stats.waiting, stats.mine, stats.second_opinion) == (1, 1, 1, 0)
    got = await old.claim_next("ana", Filters(), ttl_s=60)
    assert got is not None
    assert (got.pair_id, got.reviews_wanted, got.label_count) == ("p2", 1, 0)
    await old.close()


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
