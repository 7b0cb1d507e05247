"""The review queue in a real database: SQLite by default, PostgreSQL for several service instances.

One row per review item. An item is keyed by its pair and whether it is an audit sample, so a review
request delivered twice (a rebalance, a replay) is stored once. An item is ``pending``, ``claimed`` by
one reviewer until its claim expires (then any reviewer may claim it again: nothing is lost when a
reviewer walks away), or ``done`` once its label is on the broker. Claiming is one atomic statement; on
PostgreSQL it also skips rows another instance has locked (``FOR UPDATE SKIP LOCKED``), so two instances
never hand one item to two reviewers.

An audit item may want two labels (``ReviewRequest.reviews_wanted`` 2): the audit's human ceiling, how
well people agree with each other, measured on the same pairs as the judge. After its first label such
an item is pending again, for a *different* reviewer: every label is recorded in ``review_labels`` (one
row per item and reviewer, unique), and no reviewer is ever handed an item they have labelled. The second
label completes it. Each label is published as a ``HumanLabel`` like any other.

The schema is versioned: ``MIGRATIONS`` are applied in order and recorded in ``review_schema_version``.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import (
    and_,
    case,
    func,
    or_,
    select,
    update,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from pairjudge.schemas import ReviewRequest
from pairjudge.streams.review.tables import MIGRATION_LOCK, MIGRATIONS, claims, items, labels, metadata, schema_version
from pairjudge.streams.security.files import private_dir, private_file, tighten_if_exists

Status = Literal["pending", "claimed", "done"]
#: What a database that is down, restarting, failing over or not answering raises: worth waiting out.
#: (Not every DBAPIError: a constraint or schema error would fail again on every retry.)
STORE_UNAVAILABLE: tuple[type[BaseException], ...] = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.TimeoutError,  # the connection pool's wait
    TimeoutError,  # a statement that got no answer in time (ReviewFeed bounds its inserts)
    OSError,
)
CHOICES_TTL_S = 10.0


@dataclass(frozen=True, slots=True)
class Filters:
    experiment: str | None = None
    rubric_kind: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Item:
    id: int
    pair_id: str
    experiment: str | None
    rubric_kind: str
    reason: str
    audit: bool
    request: ReviewRequest
    status: Status
    claimed_by: str | None
    claim_expires: float | None
    shown_left: str | None
    created_at: float
    #: Labels the item wants (2: an audit item that also goes to a second, different reviewer) and has.
    reviews_wanted: int = 1
    label_count: int = 0

    @property
    def second_opinion(self) -> bool:
        """This claim is for the item's second label (another reviewer gave the first)."""
        return self.label_count > 0

    @property
    def left(self) -> str:
        """The candidate id shown on the left in the current claim."""
        return self.shown_left or self.request.pair.candidates[0].candidate_id

    @property
    def right(self) -> str:
        return next(c.candidate_id for c in self.request.pair.candidates if c.candidate_id != self.left)


@dataclass(frozen=True, slots=True)
class QueueStats:
    waiting: int
    claimed: int
    done: int
    oldest_waiting_s: float | None
    #: Items the asking reviewer has labelled (in these filters).
    mine: int
    #: Waiting items that have their first label and wait for a second reviewer's (part of ``waiting``).
    second_opinion: int = 0


class StaleClaim(Exception):
    """The item is not (or no longer) claimed by this reviewer."""


def item_key(request: ReviewRequest) -> str:
    return f"{request.pair_id}:{'audit' if request.audit else 'review'}"


def _private_sqlite_file(database: str | None) -> None:
    """Create the SQLite database file ``0o600`` (a missing parent ``0o700``) before SQLite opens it, so
    the queue (which holds the outputs under review) is its owner's only, whatever the umask. SQLite gives
    its journal and WAL files the database file's mode; any left with wider ones are tightened."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database)
    if not path.parent.exists():
        private_dir(path.parent)
    private_file(path, what="review database")
    for suffix in ("-journal", "-wal", "-shm"):
        tighten_if_exists(path.with_name(path.name + suffix), what="review database")


class ReviewStore:
    """The queue's operations; ``clock`` is injectable so claim expiry is testable without sleeping."""

    def __init__(self, url: str, *, clock: Callable[[], float] = time.time, **engine_options: Any) -> None:
        self.url = url
        if url.startswith("sqlite"):
            engine_options.setdefault("connect_args", {"timeout": 30})
        else:
            # After a database restart the pooled connections are dead: test each on checkout, so the
            # first request after the restart does not fail on one.
            engine_options.setdefault("pool_pre_ping", True)
            # A server that accepts no connection (frozen, unreachable) fails a connect in 10 s, not never.
            engine_options.setdefault("connect_args", {"connect_timeout": 10})
        self.engine: AsyncEngine = create_async_engine(url, **engine_options)
        if self.engine.dialect.name == "sqlite":
            _private_sqlite_file(self.engine.url.database)
        self._clock = clock
        self._postgres = self.engine.dialect.name == "postgresql"
        # SQLite has one writer and no row locks: this process's writes go one at a time, so a read in a
        # write transaction is never stale. (Several instances share a queue on PostgreSQL, not SQLite.)
        self._sqlite_writes = asyncio.Lock() if not self._postgres else None
        self._choices: tuple[float, dict[str, Sequence[str]]] | None = None

    @contextlib.asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncConnection]:
        if self._sqlite_writes is None:
            async with self.engine.begin() as conn:
                yield conn
            return
        async with self._sqlite_writes, self.engine.begin() as conn:
            yield conn

    async def migrate(self) -> int:
        """Apply the migrations this database has not seen; return its schema version."""
        async with self._write() as conn:
            if self._postgres:  # one instance migrates at a time, the others wait and then find it done
                await conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
            await conn.run_sync(lambda sync: metadata.create_all(sync, tables=[schema_version]))
            current = (await conn.execute(select(func.max(schema_version.c.version)))).scalar() or 0
            for number, migration in enumerate(MIGRATIONS, start=1):
                if number > current:
                    await migration(conn)
                    await conn.execute(schema_version.insert().values(version=number))
            return len(MIGRATIONS)

    async def close(self) -> None:
        await self.engine.dispose()

    async def ping(self) -> None:
        """Raises unless the database answers a query (readiness)."""
        async with self.engine.connect() as conn:
            await conn.exec_driver_sql("SELECT 1")

    # --- filling the queue ---------------------------------------------------------------------

    async def add(self, request: ReviewRequest) -> bool:
        """Store a review request; False when it was already there (a re-delivery)."""
        return await self.add_many([request]) == 1

    async def add_many(self, requests: Sequence[ReviewRequest]) -> int:
        """Store review requests in one transaction; return how many were new (re-deliveries are skipped)."""
        if not requests:
            return 0
        now = self._clock()
        rows = [self._row(r, now) for r in requests]
        dialect = postgresql if self._postgres else sqlite
        stmt = (
            dialect.insert(items).values(rows).on_conflict_do_nothing(index_elements=["item_key"]).returning(items.c.id)
        )
        async with self._write() as conn:
            # RETURNING, not rowcount: drivers differ on the rowcount of a skipped conflict.
            return len((await conn.execute(stmt)).all())

    @staticmethod
    def _row(request: ReviewRequest, now: float) -> dict[str, Any]:
        return {
            "item_key": item_key(request),
            "pair_id": request.pair_id,
            "experiment": request.pair.metadata.experiment_id,
            "rubric_kind": request.pair.rubric.kind,
            "reason": request.reason,
            "audit": request.audit,
            "request": request.model_dump_json(),
            "status": "pending",
            "created_at": now,
            "reviews_wanted": request.reviews_wanted,
        }

    # --- claiming ------------------------------------------------------------------------------

    def _available(self, now: float) -> Any:
        return or_(items.c.status == "pending", and_(items.c.status == "claimed", items.c.claim_expires < now))

    @staticmethod
    def _labelled_by(reviewer: str) -> Any:
        """The item has a label by ``reviewer`` (a correlated test on ``review_labels``)."""
        return select(labels.c.id).where(labels.c.item_id == items.c.id, labels.c.reviewer == reviewer).exists()

    def _available_to(self, now: float, reviewer: str) -> Any:
        """Available, and not labelled by ``reviewer`` already: a second opinion is someone else's."""
        return and_(self._available(now), or_(items.c.label_count == 0, ~self._labelled_by(reviewer)))

    @staticmethod
    def _filtered(query: Any, filters: Filters) -> Any:
        if filters.experiment:
            query = query.where(items.c.experiment == filters.experiment)
        if filters.rubric_kind:
            query = query.where(items.c.rubric_kind == filters.rubric_kind)
        if filters.reason:
            query = query.where(items.c.reason == filters.reason)
        return query

    async def claim_next(self, reviewer: str, filters: Filters, ttl_s: float) -> Item | None:
        """The reviewer's current claim if it is still theirs, else the oldest available item they have not
        labelled, claimed now (with a fresh random left/right order, recorded); None when nothing matches.

        An item waiting for its second opinion keeps its place in the queue (its age), so second labels come
        soon after the first; it is never offered to the reviewer who gave the first.
        """
        now = self._clock()
        async with self._write() as conn:
            held = self._filtered(
                select(items).where(
                    items.c.status == "claimed", items.c.claimed_by == reviewer, items.c.claim_expires >= now
                ),
                filters,
            ).order_by(items.c.created_at, items.c.id)
            row = (await conn.execute(held.limit(1))).mappings().first()
            if row is not None:
                return _item(row)
            pick = self._filtered(select(items.c.id).where(self._available_to(now, reviewer)), filters)
            pick = pick.order_by(items.c.created_at, items.c.id).limit(1)
            if self._postgres:
                pick = pick.with_for_update(skip_locked=True)
            candidate = (await conn.execute(pick)).scalar()
            if candidate is None:
                return None
            request = ReviewRequest.model_validate_json(
                (await conn.execute(select(items.c.request).where(items.c.id == candidate))).scalar_one()
            )
            left = secrets.choice([c.candidate_id for c in request.pair.candidates])
            # The WHERE repeats the availability test: on SQLite, where there is no row lock, a claim that
            # raced this one leaves nothing to update here.
            claimed = await conn.execute(
                update(items)
                .where(items.c.id == candidate, self._available_to(now, reviewer))
                .values(status="claimed", claimed_by=reviewer, claim_expires=now + ttl_s, shown_left=left)
                .returning(*items.c)
            )
            row = claimed.mappings().first()
            if row is None:
                return None
            await conn.execute(
                claims.insert().values(item_id=candidate, reviewer=reviewer, shown_left=left, claimed_at=now)
            )
            return _item(row)

    async def claimed_item(self, item_id: int, reviewer: str) -> Item:
        """The item, if ``reviewer`` holds an unexpired claim on it; else ``StaleClaim``."""
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(items).where(items.c.id == item_id))).mappings().first()
        if row is None:
            raise StaleClaim("no such item")
        item = _item(row)
        if item.status != "claimed" or item.claimed_by != reviewer or (item.claim_expires or 0) < self._clock():
            raise StaleClaim("this item is no longer claimed by you (it expired, or it is done)")
        return item

    async def complete(self, item_id: int, reviewer: str, winner: str) -> None:
        """Record the reviewer's label (call only once it is on the broker): the item is done when it has
        the labels it wants, else pending again for a different reviewer (its second opinion)."""
        now = self._clock()
        # SET expressions read the row as it was: label_count here is the count before this label.
        last = items.c.label_count + 1 >= items.c.reviews_wanted
        async with self._write() as conn:
            result = await conn.execute(
                update(items)
                .where(items.c.id == item_id, items.c.status == "claimed", items.c.claimed_by == reviewer)
                .values(
                    label_count=items.c.label_count + 1,
                    status=case((last, "done"), else_="pending"),
                    claimed_by=case((last, items.c.claimed_by), else_=None),
                    claim_expires=case((last, items.c.claim_expires), else_=None),
                    shown_left=case((last, items.c.shown_left), else_=None),
                    done_at=case((last, now), else_=None),
                    done_by=case((last, reviewer), else_=None),
                    label_winner=case((last, winner), else_=None),
                )
            )
            if result.rowcount != 1:
                raise StaleClaim("the item was not claimed by you any more")
            dialect = postgresql if self._postgres else sqlite
            inserted = await conn.execute(
                dialect.insert(labels)
                .values(item_id=item_id, reviewer=reviewer, winner=winner, labelled_at=now)
                .on_conflict_do_nothing(index_elements=["item_id", "reviewer"])
                .returning(labels.c.id)
            )
            if inserted.first() is None:  # never handed out twice (claim_next); rolled back if it were
                raise StaleClaim("you have labelled this item already")

    async def release(self, item_id: int, reviewer: str) -> None:
        """Give a claim back (skip): the item is pending again at once."""
        async with self._write() as conn:
            await conn.execute(
                update(items)
                .where(items.c.id == item_id, items.c.status == "claimed", items.c.claimed_by == reviewer)
                .values(status="pending", claimed_by=None, claim_expires=None, shown_left=None)
            )

    # --- what the page shows -------------------------------------------------------------------

    async def stats(self, filters: Filters = Filters(), reviewer: str | None = None) -> QueueStats:
        """The queue's size and age, claims, done items and ``reviewer``'s labels, in one scan."""
        now = self._clock()
        available = self._available(now)
        live_claim = and_(items.c.status == "claimed", items.c.claim_expires >= now)
        done = items.c.status == "done"
        mine = (
            func.sum(case((and_(items.c.label_count > 0, self._labelled_by(reviewer)), 1), else_=0))
            if reviewer
            else func.sum(0)
        )
        query = self._filtered(
            select(
                func.sum(case((available, 1), else_=0)),
                func.min(case((available, items.c.created_at), else_=None)),
                func.sum(case((live_claim, 1), else_=0)),
                func.sum(case((done, 1), else_=0)),
                mine,
                func.sum(case((and_(available, items.c.label_count > 0), 1), else_=0)),
            ),
            filters,
        )
        async with self.engine.connect() as conn:
            waiting, oldest, claimed, done_count, labelled, second = (await conn.execute(query)).one()
        return QueueStats(
            waiting=int(waiting or 0),
            claimed=int(claimed or 0),
            done=int(done_count or 0),
            oldest_waiting_s=(now - float(oldest)) if oldest is not None else None,
            mine=int(labelled or 0),
            second_opinion=int(second or 0),
        )

    async def choices(self) -> dict[str, Sequence[str]]:
        """Distinct experiments, rubric kinds and reasons among items not done, for the filter menus.

        Kept for ``CHOICES_TTL_S``: three distinct scans of the queue per page would make a long queue slow,
        and a menu a few seconds old is fine."""
        now = self._clock()
        if self._choices is not None and now - self._choices[0] < CHOICES_TTL_S:
            return self._choices[1]
        out: dict[str, Sequence[str]] = {}
        async with self.engine.connect() as conn:
            for name, column in (
                ("experiment", items.c.experiment),
                ("rubric_kind", items.c.rubric_kind),
                ("reason", items.c.reason),
            ):
                rows = await conn.execute(
                    select(column)
                    .where(items.c.status != "done", column.is_not(None))
                    .distinct()
                    .order_by(column)
                    .limit(200)
                )
                out[name] = [str(v) for (v,) in rows.all()]
        self._choices = (now, out)
        return out


def _item(row: Any) -> Item:
    return Item(
        id=int(row["id"]),
        pair_id=str(row["pair_id"]),
        experiment=row["experiment"],
        rubric_kind=str(row["rubric_kind"]),
        reason=str(row["reason"]),
        audit=bool(row["audit"]),
        request=ReviewRequest.model_validate_json(row["request"]),
        status=row["status"],
        claimed_by=row["claimed_by"],
        claim_expires=row["claim_expires"],
        shown_left=row["shown_left"],
        created_at=float(row["created_at"]),
        reviews_wanted=int(row["reviews_wanted"]),
        label_count=int(row["label_count"]),
    )
