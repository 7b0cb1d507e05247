"""The RocksDB table store's private members (``streams.faust_compat.rocksdb_store``) in use, on a real store.

tests/unit/test_faust_hooks.py reads the installed Faust: every member ``HOOKS`` lists for the store is
there, with the signature or declared type it was verified with. This runs the code. Faust calls none of
these members on pairjudge's behalf (pairjudge calls them), so a real store is enough, no worker: a Faust
app's table on Faust's RocksDB store (real ``rocksdict`` databases under a temporary directory), with the
table options the worker gives it. It checks that ``rocksdb_store`` uses every member it is indexed for and
no other, and that each use means to Faust what pairjudge relies on: a write lands in the database of the
partition given and Faust's own lookup follows its key index there; a delete is gone for Faust too; the
walk covers every open database, page by page, without Faust's changelog offset record.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import faust
import pytest
from faust.stores.rocksdb import Store
from faust.types import TP

from pairjudge.streams.faust_compat import HOOKS, rocksdb_store
from pairjudge.streams.worker.tables import SWEEP_YIELD_EVERY, drop, entries, put, read, table_options

ROOT = Path(__file__).resolve().parents[2]
#: Every member of Faust's store that ``HOOKS`` says ``rocksdb_store`` uses.
INDEXED = {h.attribute for h in HOOKS if h.ours.startswith(rocksdb_store.__name__ + ":")}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    app = faust.App("contacts", broker="kafka://127.0.0.1:1", store="rocksdb://", tabledir=tmp_path, web_enabled=False)
    table = app.Table("entries", partitions=4, options=table_options(app))
    data = table.data
    assert isinstance(data, Store)
    yield data
    for db in data._dbs.values():  # Faust's stop() only forgets them; close the handles
        db.close()


class Spy:
    """The real store, recording which of its attributes the code under test looks up."""

    def __init__(self, real: Store) -> None:
        self._real = real
        self.used: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.used.add(name)
        return getattr(self._real, name)


def test_rocksdb_store_uses_every_member_it_is_indexed_for_and_no_other(store: Store) -> None:
    assert {"_get_bucket_for_key", "_db_for_partition", "_key_index", "_del", "_dbs", "offset_key"} == INDEXED
    spy = Spy(store)
    seen: Any = spy  # the functions take the store; the spy forwards every lookup to it
    rocksdb_store.put(seen, 1, b"k", b"v")
    assert rocksdb_store.get(seen, b"k") == b"v"
    assert rocksdb_store.open_partitions(seen) == [1]
    assert rocksdb_store.page(seen, 1, None, SWEEP_YIELD_EVERY) == [(b"k", b"v")]
    rocksdb_store.delete(seen, b"k")
    assert rocksdb_store.get(seen, b"k") is None
    assert spy.used == INDEXED


def test_a_write_lands_in_the_partition_given_and_faust_reads_it_there_first(store: Store) -> None:
    # The same key in two databases: Faust's lookup goes to the partition its key index names, and only
    # falls back to every open database (partition 1's first, opened first) without an entry there.
    store._db_for_partition(1).put(b"k", b"stale")
    put(store, 2, b"k", b"fresh")
    assert store._db_for_partition(2).get(b"k") == b"fresh"
    assert store._get(b"k") == b"fresh"  # Faust's own read outside a stream
    assert read(store, b"k") == b"fresh"
    store._key_index.clear()
    assert store._get(b"k") == b"stale"  # what an index left behind would have served


def test_a_delete_is_gone_for_faust_too(store: Store) -> None:
    put(store, 3, b"k", b"v")
    drop(store, b"k")
    assert read(store, b"k") is None
    assert store._get(b"k") is None
    assert store._db_for_partition(3).get(b"k") is None
    drop(store, b"never-there")  # nothing to delete is no error


def test_the_walk_covers_every_open_database_page_by_page_without_the_changelog_offset(store: Store) -> None:
    written = {}
    for partition in (0, 2):
        for i in range(SWEEP_YIELD_EVERY + 7):  # more than a page in each
            key, value = f"{partition}-{i:05}".encode(), f"v{i}".encode()
            put(store, partition, key, value)
            written[key] = value
    store._db_for_partition(3)  # a partition opened by Faust (a standby's), empty
    changelog = TP(f"contacts-entries-changelog-{0}", 0)
    store.set_persisted_offset(changelog, 41)  # Faust's record, in partition 0's database
    walked = list(entries(store))
    assert dict(walked) == written
    assert len(walked) == len(written)  # each entry once, across page boundaries
    assert store.persisted_offset(changelog) == 41  # left as Faust wrote it


def test_no_runtime_module_outside_faust_compat_names_an_indexed_private_member() -> None:
    """docs/design.md §10: the private contacts live in one place."""
    private = {h.attribute for h in HOOKS if h.attribute.startswith("_")}
    pattern = re.compile(r"\.(" + "|".join(re.escape(name) for name in sorted(private)) + r")\b")
    found = []
    for package in ("agents", "schemas", "streams"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if "faust_compat" in path.parts:
                continue
            for match in pattern.finditer(path.read_text()):
                found.append(f"{path.relative_to(ROOT)}: {match.group(1)}")
    assert not found, f"private Faust members used outside streams/faust_compat: {found}"
