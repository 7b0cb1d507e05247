"""The review queue's database schema and its numbered migrations (``streams.review.store`` applies them).

The schema is versioned: ``MIGRATIONS`` are applied in order, exactly once per database, and recorded in
``review_schema_version``; a migration that changes a table also says so beside that table's columns.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.ext.asyncio import AsyncConnection

#: PostgreSQL advisory lock key held while migrating ("pjreview" in ASCII, as a 64-bit integer).
MIGRATION_LOCK = int.from_bytes(b"pjreview", "big") & 0x7FFF_FFFF_FFFF_FFFF

metadata = MetaData()

schema_version = Table("review_schema_version", metadata, Column("version", Integer, nullable=False))


def _item_columns() -> list[Column[Any]]:
    """The columns of ``review_items`` as migration 1 created them."""
    return [
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("item_key", String(200), nullable=False, unique=True),
        Column("pair_id", String(128), nullable=False),
        Column("experiment", String(200), nullable=True),
        Column("rubric_kind", String(40), nullable=False),
        Column("reason", String(60), nullable=False),
        Column("audit", Boolean, nullable=False),
        Column("request", Text, nullable=False),
        Column("status", String(10), nullable=False),
        Column("claimed_by", String(100), nullable=True),
        Column("claim_expires", Float, nullable=True),
        #: The candidate shown on the left for the current claim (the order is random per claim).
        Column("shown_left", String(64), nullable=True),
        Column("created_at", Float, nullable=False),
        Column("done_at", Float, nullable=True),
        Column("done_by", String(100), nullable=True),
        Column("label_winner", String(64), nullable=True),
    ]


#: The schema of migration 1, for migration 1 only (later migrations alter it).
_metadata_1 = MetaData()
_items_1 = Table("review_items", _metadata_1, *_item_columns())
Index("review_items_queue", _items_1.c.status, _items_1.c.created_at)

items = Table(
    "review_items",
    metadata,
    *_item_columns(),
    # Migration 2: how many labels (by different reviewers) the item wants, and how many it has.
    Column("reviews_wanted", Integer, nullable=False, server_default="1"),
    Column("label_count", Integer, nullable=False, server_default="0"),
)

#: Every claim: which reviewer saw which candidate on the left (seed 000: order effects are audited too).
claims = Table(
    "review_claims",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("item_id", Integer, nullable=False),
    Column("reviewer", String(100), nullable=False),
    Column("shown_left", String(64), nullable=False),
    Column("claimed_at", Float, nullable=False),
)
Index("review_claims_item", claims.c.item_id)

#: Every label given in the service (migration 2): who labelled which item, and what. One per item and
#: reviewer, so an item wanting two labels gets them from two different people.
labels = Table(
    "review_labels",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("item_id", Integer, nullable=False),
    Column("reviewer", String(100), nullable=False),
    Column("winner", String(64), nullable=False),
    Column("labelled_at", Float, nullable=False),
    UniqueConstraint("item_id", "reviewer", name="review_labels_item_reviewer"),
)
Index("review_labels_reviewer", labels.c.reviewer)


async def _migration_1(conn: AsyncConnection) -> None:
    await conn.run_sync(lambda sync: _metadata_1.create_all(sync, tables=[_items_1]))
    await conn.run_sync(lambda sync: metadata.create_all(sync, tables=[claims]))


async def _migration_2(conn: AsyncConnection) -> None:
    """Second opinions: items say how many labels they want and have; every label's reviewer is kept.

    Items already done count one label, by their ``done_by`` (plain SQL both SQLite and PostgreSQL take).
    """
    await conn.exec_driver_sql("ALTER TABLE review_items ADD COLUMN reviews_wanted INTEGER NOT NULL DEFAULT 1")
    await conn.exec_driver_sql("ALTER TABLE review_items ADD COLUMN label_count INTEGER NOT NULL DEFAULT 0")
    await conn.exec_driver_sql("UPDATE review_items SET label_count = 1 WHERE status = 'done'")
    await conn.run_sync(lambda sync: metadata.create_all(sync, tables=[labels]))
    await conn.exec_driver_sql(
        "INSERT INTO review_labels (item_id, reviewer, winner, labelled_at) "
        "SELECT id, done_by, label_winner, done_at FROM review_items "
        "WHERE status = 'done' AND done_by IS NOT NULL AND label_winner IS NOT NULL AND done_at IS NOT NULL"
    )


#: Numbered migrations, applied in order exactly once per database.
MIGRATIONS: tuple[Callable[[AsyncConnection], Awaitable[None]], ...] = (_migration_1, _migration_2)
