"""Faust's RocksDB table store (``faust.stores.rocksdb.Store``) read and written by partition.

Faust's own mapping interface on the store assumes it is called from inside a stream: a write goes to the
partition of the *current event* (an ``assert`` outside one, as in our timers), a read looks only there, and
iteration covers only the active partitions, through a full list where our sweeps would read days of entries
into memory. ``streams.worker.tables`` needs an explicit partition (the one its changelog record goes to) and
a walk a page at a time, so these functions use the store's private members, and nothing else in pairjudge
does. Each member is an entry of ``HOOKS`` (kinds "calls", "reads" and "updates") with its signature or
declared type as verified; ``tests/unit/test_faust_hooks.py`` checks them against the installed Faust and
``tests/unit/test_rocksdb_store_contacts.py`` runs these functions on a real store, checking that each
member is used and that Faust's own lookups agree with what they wrote.
"""

from __future__ import annotations

from faust.stores.rocksdb import Store


def get(store: Store, key: bytes) -> bytes | None:
    """The value of ``key`` in any open database (owned and standby partitions), or None.

    The database the key was last seen in first (Faust's key index); a bloom filter answers "not here"
    for the others.
    """
    found = store._get_bucket_for_key(key)
    return None if found is None else bytes(found.value)


def put(store: Store, partition: int, key: bytes, value: bytes) -> None:
    """Write ``key`` in ``partition``'s database, opening it if need be, and point Faust's key index there."""
    store._db_for_partition(partition).put(key, value)
    store._key_index[key] = partition


def delete(store: Store, key: bytes) -> None:
    """Delete ``key`` from the database it was last seen in, else from every open one (cheap when absent)."""
    store._del(key)


def open_partitions(store: Store) -> list[int]:
    """The partitions whose databases are open (owned and standby), as they are now."""
    return list(store._dbs)


def page(store: Store, partition: int, after: bytes | None, limit: int) -> list[tuple[bytes, bytes]]:
    """Up to ``limit`` entries of ``partition``'s database after the key ``after`` ([] when it is closed).

    Read with an iterator that is done before this returns: a database handle held across an await would
    keep the partition's lock past a rebalance that revokes it. Faust's record of the changelog offset it
    applied lives in the same database and is left out.
    """
    db = store._dbs.get(partition)
    if db is None:
        return []
    entries: list[tuple[bytes, bytes]] = []
    for key, value in db.items(from_key=after):
        if key == after or key == store.offset_key:
            continue
        entries.append((bytes(key), bytes(value)))
        if len(entries) == limit:
            break
    return entries
