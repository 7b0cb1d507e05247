"""The audit's join sweep on a large table: cheap per entry, yielding to the worker, never expiring a fresh value.

The join table keeps every pair for ``join_retention_s`` (three days by default), so a sweep may walk millions
of entries. It used to decode each one in full (18 µs apiece, measured) without yielding: a second of stalled
agents per 55,000 pairs kept. The sweep itself is the real code on a real ``create_app``; the partitions the
worker owns are given, since no broker assigns them here. It runs on both table stores: on RocksDB the walk is
a database iterator, not a copy of the table.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Literal

import pytest

from pairjudge.agents.audit.join import JoinEntry
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.streams.app import create_app
from pairjudge.streams.audit.stored import with_partition
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.worker.tables import SWEEP_YIELD_EVERY, put, read
from tests.unit.factories import tone_reply


def test_the_time_is_read_without_decoding_and_agrees_with_a_full_decode() -> None:
    tricky = JoinEntry(extra_labels=2, updated_at=1_796_000_000.125)
    raw = tricky.to_bytes()
    assert JoinEntry.updated_at_of(raw) == JoinEntry.from_bytes(raw).updated_at == 1_796_000_000.125
    assert JoinEntry.updated_at_of(JoinEntry(updated_at=0.0).to_bytes()) == 0.0
    # The key's text inside a string value is escaped, so it cannot be mistaken for the member.
    spoof = raw.replace(b'"joined":false', b'"joined":false,"x":"\\"updated_at\\":1.0"')
    assert JoinEntry.updated_at_of(spoof) == 1_796_000_000.125
    # Bytes not written by to_bytes still read right, through the full parse.
    assert JoinEntry.updated_at_of(b'{"updated_at": 5.5, "joined": true}') == 5.5


@pytest.mark.parametrize("table_store", ["rocksdb", "memory"])
async def test_the_join_sweep_yields_keeps_fresh_and_updated_entries_and_expires_the_rest(
    tmp_path: Path, table_store: Literal["rocksdb", "memory"]
) -> None:
    settings = Settings(worker={"data_dir": tmp_path, "table_store": table_store})
    wired = create_app(settings, judge=ScriptedJudge(lambda _req: tone_reply()), follow_control=False)
    audit = wired.audit
    assert audit is not None
    audit._owned = lambda _kind: {0}  # type: ignore[method-assign,assignment]  # no broker assigns partitions here
    tombstones: list[bytes] = []

    def send_changelog(partition: int, key: bytes, value: bytes | None, **_: Any) -> Any:
        assert value is None
        tombstones.append(key)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut

    audit.join_table.send_changelog = send_changelog
    now = time.time()
    old = now - settings.audit.join_retention_s - 60
    data = audit.join_table.data
    n_old, n_fresh = 2 * SWEEP_YIELD_EVERY + 500, SWEEP_YIELD_EVERY
    for i in range(n_old):
        put(data, 0, f"old-{i}".encode(), with_partition(0, JoinEntry(updated_at=old).to_bytes()))
    for i in range(n_fresh):
        put(data, 0, f"fresh-{i}".encode(), with_partition(0, JoinEntry(updated_at=now).to_bytes()))
    # The last old entry gets a label while the sweep is under way: it must stay.
    last = f"old-{n_old - 1}".encode()
    ran_during_sweep: list[int] = []

    async def label_arrives() -> None:
        await asyncio.sleep(0)
        ran_during_sweep.append(len(tombstones))
        put(data, 0, last, with_partition(0, JoinEntry(updated_at=time.time()).to_bytes()))

    relabel = asyncio.create_task(label_arrives())
    expired = await audit.sweep_join(now=now)
    await relabel

    assert ran_during_sweep, "the sweep never let another task run"
    assert 0 < ran_during_sweep[0] < n_old - 1, "the other task ran only before or after the sweep"
    assert expired == n_old - 1
    assert read(data, last) is not None
    assert all(read(data, f"fresh-{i}".encode()) is not None for i in range(n_fresh))
    assert all(read(data, f"old-{i}".encode()) is None for i in range(n_old - 1))
    assert sorted(tombstones) == sorted(f"old-{i}".encode() for i in range(n_old - 1))
