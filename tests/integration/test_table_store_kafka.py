"""The RocksDB table store on real Kafka (issue 26; docs/operations/sizing.md#memory).

A worker on the default store keeps each table in one RocksDB database per partition under its own data
directory. Its recorded outcomes must be in the database of the partition their pair arrived on (the one
its changelog record went to: a write placed by Faust's "current event" instead could land elsewhere, or
assert outside a stream), with the changelog offset applied, so that a worker restarted on the same
directory has them before it reads anything, and a pair sent again gets no second, different outcome.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from aiokafka.partitioner import DefaultPartitioner
from rocksdict import AccessType, Options, Rdict

from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.producer import key_of, send_events
from pairjudge_dev.pairgen import many_pairs
from pairjudge_dev.workers import kafka_run, running_worker, wait_until_committed

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

N_PAIRS = 24
#: Where Faust's RocksDB store keeps the changelog offset a database has applied.
OFFSET_KEY = b"__faust\x00offset__"


def _stored(tables: Path, table: str, partition: int) -> tuple[set[bytes], bytes | None]:
    """The keys in one table database (a stopped worker's), and the changelog offset it records."""
    db = Rdict(
        str(tables / f"{table}-{partition}.db"), options=Options(raw_mode=True), access_type=AccessType.read_only()
    )
    try:
        # raw_mode: every key is bytes (rocksdict types them as any value it can hold).
        keys = {k for k in db.keys() if isinstance(k, bytes)}  # noqa: SIM118 - an Rdict is not iterable itself
        offset = db.get(OFFSET_KEY)
    finally:
        db.close()
    return keys - {OFFSET_KEY}, offset


async def test_outcomes_are_stored_on_disk_in_their_input_partition_and_serve_a_restarted_worker(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await kafka_run(kafka_bootstrap, tmp_path, "store")
    assert settings.worker.table_store == "rocksdb"  # the default
    raws = many_pairs(N_PAIRS, settings.topics.prefix)
    ids = {(key_of(raw) or b"").decode() for raw in raws}
    log = tmp_path / "worker.log"
    with running_worker(settings, log):
        assert await send_events(settings, raws) == N_PAIRS
        first = await collect_outcomes(settings, ids, timeout=120)
        assert first.complete, first.missing
        assert await wait_until_committed(settings, timeout=60)

    # Stopped, so its databases are closed. The producer's partitioner put each pair on a partition; its
    # outcome is in that partition's database and no other, beside the offset of its changelog record.
    partitioner = DefaultPartitioner()
    partitions = list(range(settings.kafka.partitions))
    expected: dict[int, set[bytes]] = {p: set() for p in partitions}
    for pair_id in ids:
        expected[partitioner(pair_id.encode(), partitions, partitions)].add(pair_id.encode())
    tables = settings.worker.data_dir / log.stem / "v1" / "tables"  # start_worker: a data dir per worker log
    for partition in partitions:
        keys, offset = _stored(tables, "outcomes-primary", partition)
        pair_keys = {k for k in keys if not k.startswith(b"\x00")}  # crash marks, if any, are not pairs
        assert pair_keys == expected[partition], f"partition {partition}"
        assert offset is not None
        assert int(offset) >= len(expected[partition]) - 1

    # Started again on the same directory, and every pair sent again (a producer's retry): each gets its
    # recorded outcome, never a second, different one.
    with running_worker(settings, log):
        assert await send_events(settings, raws) == N_PAIRS
        assert await wait_until_committed(settings, timeout=120)
        again = await collect_outcomes(settings, ids, timeout=30, settle=3)
    assert again.complete
    assert again.ok, (again.missing, again.conflicting)
    assert log.read_text(errors="replace").count("Crashed") == 0
