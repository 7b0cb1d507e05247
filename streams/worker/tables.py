"""What the worker's Faust tables share: which partitions this worker owns, reading and writing an entry
here and on its changelog, and walking a large table without stalling the agents, on either table store.

Two stores (``PAIRJUDGE_WORKER__TABLE_STORE``, docs/operations/sizing.md#memory):

* ``memory``: Faust's dict. Every entry in memory, the whole changelog re-read at every start.
* ``rocksdb``: Faust's RocksDB store (``rocksdict``), one database per table and partition under the data
  directory. Faust's own mapping interface on it assumes it is called from inside a stream, so this module
  reads and writes the databases of an explicit partition (the one the caller owns, as with the changelog
  record) and walks them with a RocksDB iterator, a page at a time, through
  ``streams.faust_compat.rocksdb_store``: the store's private members are used there and indexed in
  ``faust_compat.HOOKS``, like every other private contact with Faust.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from faust.stores.rocksdb import Store as RocksDBStore

from pairjudge.streams.faust_compat import rocksdb_store

#: A sweep lets other tasks run after this many entries.
SWEEP_YIELD_EVERY = 1000

#: The RocksDB options of every table. Faust's defaults are for one big table on a dedicated host: a 2 GiB
#: block cache and up to 3 x 64 MiB of memtables *per database*, and a worker opens one database per table
#: and partition it holds, active or standby (5 tables x 8 partitions is 40). These bound each database to
#: 16 MiB: a cache this small still holds the blocks a redelivery reads back soon after its pair, and the
#: rest of the data is in the kernel's page cache (reclaimable, not the worker's RSS). ``bench/table_store.py``
#: measured the worker's RSS at 179-274 MB from 10k to 1M pairs kept (docs/operations/sizing.md#memory).
ROCKSDB_OPTIONS: dict[str, int] = {
    "block_cache_size": 8 * 1024**2,
    "write_buffer_size": 4 * 1024**2,
    "max_write_buffer_number": 2,
    "target_file_size_base": 64 * 1024**2,
}


def table_options(app: Any) -> dict[str, int] | None:
    """The ``options`` of every ``app.Table`` on the app's store (``Settings.worker.table_store``)."""
    # A fresh dict per table: Faust's RocksDB store pops its own keys out of the one it is given.
    return dict(ROCKSDB_OPTIONS) if app.conf.store.scheme == "rocksdb" else None


def owned_partitions(app: Any, topic: str | None = None) -> set[int]:
    """The partitions of ``topic`` (of any topic, with None) assigned to this worker's consumer.

    Raises Faust's ``ConsumerNotStarted`` before the consumer runs.
    """
    return {tp.partition for tp in app.consumer.assignment() if topic is None or tp.topic == topic}


async def store(table: Any, partition: int, key: bytes, value: bytes) -> None:
    """Write ``key`` in ``table`` and wait until the broker has its changelog record (in ``partition``).

    The local write happens before the first await: the handler's read-modify-write (no await
    between its read and this call) cannot lose another's update.
    """
    put(table.data, partition, key, value)
    await table.send_changelog(partition, key, value)


def read(data: Any, key: bytes) -> bytes | None:
    """The value of ``key`` in a table's store (``table.data``), whichever partition holds it, or None."""
    if isinstance(data, RocksDBStore):
        return rocksdb_store.get(data, key)  # owned and standby partitions, as the memory store holds both
    value = data.get(key)
    return None if value is None else bytes(value)


def put(data: Any, partition: int, key: bytes, value: bytes) -> None:
    """Write ``key`` in ``partition``'s share of a table's store (the changelog partition it is sent to)."""
    if isinstance(data, RocksDBStore):
        rocksdb_store.put(data, partition, key, value)
    else:
        data[key] = value


def drop(data: Any, key: bytes) -> None:
    """Remove ``key`` from a table's store, wherever it is; nothing if it is not there."""
    if isinstance(data, RocksDBStore):
        rocksdb_store.delete(data, key)
    else:
        data.pop(key, None)


def entries(data: Any) -> Iterator[tuple[bytes, bytes]]:
    """Every entry of a table's store as it is read, owned and standby partitions alike.

    On RocksDB a page of ``SWEEP_YIELD_EVERY`` entries at a time, each from a fresh iterator that is closed
    before the page is handed out: the caller may await between entries, and a database handle still held
    then (an iterator keeps its database open) would keep the partition's lock past a rebalance that
    revokes it, so that reopening it (the partition assigned again) fails on the lock for up to 30 s. A
    partition revoked meanwhile is left. Entries written meanwhile may or may not be seen. On the memory
    store a copy of the items (a dict cannot change size under its iterator).
    """
    if not isinstance(data, RocksDBStore):
        yield from list(data.items())
        return
    for partition in rocksdb_store.open_partitions(data):
        after: bytes | None = None
        while page := rocksdb_store.page(data, partition, after, SWEEP_YIELD_EVERY):
            yield from page
            after = page[-1][0]


async def forget(
    table: Any, partition: int | None, key: bytes, *, before_tombstone: Callable[[], Awaitable[None]] | None = None
) -> None:
    """Drop ``key`` from ``table`` and, given the ``partition`` (this worker owns it), tombstone it on the
    changelog; without one (a standby's copy) it is only forgotten here: the owner tombstones.

    Dropped before the first await, so an update arriving meanwhile starts a fresh entry instead of being
    tombstoned with the old one. ``before_tombstone`` runs between the two, and only for the owner: what
    the entry's expiry means is published before the tombstone, so a crash in between repeats it on
    restart, never loses it.
    """
    drop(table.data, key)
    if partition is None:
        return
    if before_tombstone is not None:
        await before_tombstone()
    await table.send_changelog(partition, key, None)


async def current_entries(data: Any) -> AsyncIterator[tuple[bytes, bytes]]:
    """Every non-empty entry of a table's store (``table.data``) as it stands when its turn comes, for a
    sweep that may expire it.

    Tables hold days of pairs, so the walk yields to the event loop every ``SWEEP_YIELD_EVERY`` entries
    instead of stalling the agents. It walks the ``entries`` (a snapshot, or a RocksDB iterator), and an
    entry whose value changed or went away meanwhile (an agent stored it again while the sweep yielded or
    awaited) is skipped: it is judged on its new value by the next sweep, never expired on a stale one.
    """
    for seen, (key, stored) in enumerate(entries(data), 1):
        if seen % SWEEP_YIELD_EVERY == 0:
            await asyncio.sleep(0)
        if stored and read(data, key) == stored:
            yield key, stored
