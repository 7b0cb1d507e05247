"""The worker's table stores side by side: resident memory against retained pairs, and restart time.

For each size (10k, 100k, 1M retained pairs by default) the outcome tables' changelogs are filled with
what a worker records, then a real ``pairjudge worker`` is started on them once per store (``memory``, then
``rocksdb``, each with a data directory of its own) and judges one new pair with the offline judge:

* **first start**: the worker reads every changelog record into its store, then judges. Its resident memory
  (``VmRSS``) is read once the pair has its verdict and the worker has settled, and its peak (``VmHWM``).
* **restart**: the same worker is stopped (SIGTERM, graceful) and started again on the same data directory,
  as a restarted pod on its volume, and judges another new pair. The time from process start to that verdict
  is the restart time: the memory store re-reads every changelog, RocksDB only what it has not applied.

What is filled: per pair, the primary stage's recorded outcome, and for the share of pairs the offline judge
sends to the tie-break, the tie-break's too (``streams.worker.published``). Each value is packed by the
worker's own ``pack`` from the messages the real ``Pipeline`` published for one of ``--templates`` sample pairs,
with the pair id replaced (so every value is compressed on its own, as in a worker). The drift audit's join
entries (about 1 KB a pair) are not filled: the figures are for the outcome tables. One worker holds every
partition, so there is no standby copy (another worker's standby doubles the memory store's figure; on
RocksDB it is on disk).

    python -m bench.table_store --bootstrap 127.0.0.1:39092
    python -m bench.table_store --sizes 10000,100000 --stores memory,rocksdb
    python -m bench.table_store --published --sizes 100000,1000000   # what is kept once outcomes are marked

The bench deletes its topics afterwards (they hold gigabytes at 1M). A size the memory store would not fit
in (predicted from the previous size's slope above ``--memory-budget`` of the machine's available memory)
is skipped for that store and reported as such.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from faust.stores.rocksdb import RocksDBOptions
from rich.table import Table

from pairjudge.agents.offline import OfflineJudge
from pairjudge.streams.cli.demo import start_worker, stop_process
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.live import PolicyHolder
from pairjudge.streams.judges.panel import JudgePanel
from pairjudge.streams.kafka.admin import create_topics
from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.producer import send_events
from pairjudge.streams.kafka.topics import changelog_topic, outcome_table_name, topic_specs
from pairjudge.streams.security.kafka_clients import client_config
from pairjudge.streams.telemetry.tracing import Telemetry
from pairjudge.streams.worker.pipeline import Origin, Outgoing, Pipeline
from pairjudge.streams.worker.published import pack, published_mark
from pairjudge.streams.worker.tables import ROCKSDB_OPTIONS
from pairjudge_dev.bench import add_broker_args, bench_broker, console, fail, quiet_kafka_client, run_settings, work_dir
from pairjudge_dev.pairgen import many_pairs

STORES = ("memory", "rocksdb")
#: How long a worker may take from start to its first verdict (the memory store reads 1M records first).
START_TIMEOUT_S = 1800.0
#: Where Faust's RocksDB store keeps the changelog offset a database has applied (``Store.offset_key``).
OFFSET_KEY = b"__faust\0offset__"
#: After the verdict, before memory is read: the worker's start-up garbage is collected, its timers run.
SETTLE_S = 5.0


@dataclass(frozen=True)
class Template:
    pair_id: str
    primary: list[Outgoing]
    tiebreak: list[Outgoing] | None


@dataclass
class Run:
    store: str
    pairs: int
    first_start_s: float = float("nan")
    rss_mb: float = float("nan")
    peak_mb: float = float("nan")
    restart_s: float = float("nan")
    restart_rss_mb: float = float("nan")
    disk_mb: float = float("nan")
    skipped: str = ""


# --------------------------------------------------------------------------------------------------
# What a worker records
# --------------------------------------------------------------------------------------------------


async def templates(n: int, settings: Settings) -> list[Template]:
    """The messages the real pipeline publishes for ``n`` sample pairs, primary and tie-break."""
    telemetry = Telemetry(settings.telemetry.model_copy(update={"exporter": "none"}))
    pipeline = Pipeline(
        judges=JudgePanel.single(OfflineJudge()),
        policy=PolicyHolder(settings.policy.to_policy()),
        telemetry=telemetry,
        catalog={},
        max_event_bytes=settings.max_event_bytes,
    )
    out = []
    try:
        for raw in many_pairs(n, "tpl"):
            primary = await pipeline.on_pair(raw, None, Origin())
            tiebreak = None
            for message in primary.outgoing:
                if message.kind == "tiebreak":
                    tiebreak = (await pipeline.on_tiebreak(message.value, message.headers, Origin())).outgoing
            assert primary.pair_id is not None
            out.append(Template(primary.pair_id, primary.outgoing, tiebreak))
    finally:
        telemetry.shutdown()
    return out


def renamed(messages: list[Outgoing], old: bytes, new: bytes) -> list[Outgoing]:
    return [
        Outgoing(
            m.kind, m.key.replace(old, new), m.value.replace(old, new), [(k, v.replace(old, new)) for k, v in m.headers]
        )
        for m in messages
    ]


@dataclass
class Filled:
    primary: int = 0
    tiebreak: int = 0
    primary_bytes: float = 0.0
    tiebreak_bytes: float = 0.0
    #: The ``stored_at`` of every value: ``records`` gives the same bytes again from it.
    stored_at: float = 0.0
    #: The last offset written, by (changelog topic, partition): where a worker that applied them all stands.
    last_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    #: Filled with published marks (``--published``) instead of the recorded outcomes.
    published: bool = False


def records(
    settings: Settings, shapes: Sequence[Template], n: int, stored_at: float, *, published: bool = False
) -> Iterator[tuple[str, str, int, bytes, bytes]]:
    """(stage, changelog topic, partition, key, value) of ``n`` pairs' recorded outcomes; the same bytes every
    time for the same arguments (``pack`` is deterministic), so the databases can be seeded without keeping
    gigabytes of them in memory. ``published``: each outcome's published mark instead, what a compacted
    changelog keeps of a pair whose outcome reached the broker (``streams.worker.published``)."""
    app_id, partitions = settings.worker.app_id, settings.kafka.partitions
    topics = {stage: changelog_topic(app_id, outcome_table_name(stage)) for stage in ("primary", "tiebreak")}
    for i in range(n):
        shape = shapes[i % len(shapes)]
        pair_id = f"fill-{i:08d}".encode()
        partition = i % partitions
        for stage, messages in (("primary", shape.primary), ("tiebreak", shape.tiebreak)):
            if messages is None:
                continue
            if published:
                value = published_mark(partition, stored_at)
            else:
                value = pack(
                    renamed(messages, shape.pair_id.encode(), pair_id), partition=partition, stored_at=stored_at
                )
            yield stage, topics[stage], partition, pair_id, value


async def fill(settings: Settings, shapes: Sequence[Template], n: int, *, published: bool = False) -> Filled:
    """``n`` pairs' recorded outcomes on the outcome tables' changelogs."""
    producer = AIOKafkaProducer(
        **client_config(settings.kafka).kwargs(
            acks=1, linger_ms=20, max_batch_size=1024 * 1024, max_request_size=4 * 1024**2
        )
    )
    await producer.start()
    counts = {"primary": 0, "tiebreak": 0}
    sizes = {"primary": 0, "tiebreak": 0}
    filled = Filled(stored_at=time.time(), published=published)
    pending: list[asyncio.Future[Any]] = []

    async def settle() -> None:
        for metadata in await asyncio.gather(*pending):
            tp = (metadata.topic, metadata.partition)
            filled.last_offsets[tp] = max(filled.last_offsets.get(tp, -1), metadata.offset)
        pending.clear()

    try:
        for seen, (stage, topic, partition, key, value) in enumerate(
            records(settings, shapes, n, filled.stored_at, published=published), 1
        ):
            counts[stage] += 1
            sizes[stage] += len(value)
            pending.append(await producer.send(topic, value=value, key=key, partition=partition))
            if len(pending) >= 5000:
                await settle()
            if seen % 200_000 == 0:
                console.print(f"  filled {seen:,} records")
        await settle()
    finally:
        await producer.stop()
    filled.primary, filled.tiebreak = counts["primary"], counts["tiebreak"]
    filled.primary_bytes = sizes["primary"] / max(1, counts["primary"])
    filled.tiebreak_bytes = sizes["tiebreak"] / max(1, counts["tiebreak"])
    return filled


def seed_rocksdb(settings: Settings, log: Path, shapes: Sequence[Template], n: int, filled: Filled) -> None:
    """Write the filled records into the worker's RocksDB databases as Faust's recovery would have (the
    same databases, options, keys and values, and the changelog offset applied), without the time a first
    start takes to read them from the broker: the restart on this data dir is what is measured."""
    tables = settings.worker.data_dir / log.stem / "v1" / "tables"  # Faust's tabledir under the worker's datadir
    tables.mkdir(parents=True, exist_ok=True)
    options = RocksDBOptions(**ROCKSDB_OPTIONS, use_rocksdict=True)
    prefix = f"{settings.worker.app_id}-"
    dbs: dict[tuple[str, int], Any] = {}
    for _, topic, partition, key, value in records(settings, shapes, n, filled.stored_at, published=filled.published):
        db = dbs.get((topic, partition))
        if db is None:
            table = topic.removeprefix(prefix).removesuffix("-changelog")
            db = dbs[(topic, partition)] = options.open(tables / f"{table}-{partition}.db")
        db.put(key, value)
    for (topic, partition), db in dbs.items():
        db.put(OFFSET_KEY, str(filled.last_offsets[(topic, partition)]).encode())
        db.flush()
        db.close()


# --------------------------------------------------------------------------------------------------
# A worker: start, first verdict, memory
# --------------------------------------------------------------------------------------------------


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(rest.split()[0]) / 1024  # kB
    return fields["VmRSS"], fields["VmHWM"]


def available_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("inf")


def dir_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1024**2 if path.exists() else 0.0


async def first_verdict(settings: Settings, log: Path, probe: str) -> tuple[subprocess.Popen[bytes], float]:
    """A worker started now, and the seconds from its start to the final outcome of one new pair."""
    started = time.monotonic()
    proc = start_worker(settings, log)
    raw = json.loads(many_pairs(1, "probe")[0])
    raw["pair_id"] = probe
    await send_events(settings, [json.dumps(raw).encode()])
    outcomes = await collect_outcomes(settings, {probe}, timeout=START_TIMEOUT_S)
    elapsed = time.monotonic() - started
    if not outcomes.complete or proc.poll() is not None:
        stop_process(proc)
        fail(f"{log.stem}: no verdict for {probe} within {START_TIMEOUT_S:.0f} s (see {log})")
    return proc, elapsed


async def measure(
    settings: Settings, store: str, work: Path, *, shapes: Sequence[Template], n: int, filled: Filled, once: bool
) -> Run:
    """Start, stop, start again. ``once``: the second start only (a RocksDB data dir seeded from ``filled``;
    for the memory store a restart is a first start: it re-reads every changelog either way)."""
    run = Run(store, n)
    await asyncio.to_thread(work.mkdir, parents=True, exist_ok=True)
    mine = settings.model_copy(update={"worker": settings.worker.model_copy(update={"table_store": store})})
    log = work / f"{store}-{n}.log"  # start_worker: the data dir is <data_dir>/<log stem>, the same on restart
    if once and store == "rocksdb":
        started = time.monotonic()
        await asyncio.to_thread(seed_rocksdb, mine, log, shapes, n, filled)
        console.print(f"  rocksdb databases seeded directly in {time.monotonic() - started:.0f} s")
    else:
        proc, run.first_start_s = await first_verdict(mine, log, f"probe-{store}-{n}-1")
        try:
            await asyncio.sleep(SETTLE_S)
            run.rss_mb, run.peak_mb = memory_mb(proc.pid)
        finally:
            stop_process(proc)
        if once:
            run.restart_s, run.restart_rss_mb = run.first_start_s, run.rss_mb
            return run
    proc, run.restart_s = await first_verdict(mine, log, f"probe-{store}-{n}-2")
    try:
        await asyncio.sleep(SETTLE_S)
        run.restart_rss_mb, restart_peak = memory_mb(proc.pid)
        if once and store == "rocksdb":
            run.rss_mb, run.peak_mb = run.restart_rss_mb, restart_peak
    finally:
        stop_process(proc)
    run.disk_mb = dir_mb(mine.worker.data_dir / log.stem) if store == "rocksdb" else 0.0
    console.print(
        f"  {store:7} {n:>9,} pairs: first start {run.first_start_s:6.1f} s, RSS {run.rss_mb:7.0f} MB "
        f"(peak {run.peak_mb:.0f}), restart {run.restart_s:6.1f} s, RSS after restart {run.restart_rss_mb:.0f} MB"
    )
    return run


async def delete_topics(settings: Settings, names: Sequence[str]) -> None:
    admin = AIOKafkaAdminClient(**client_config(settings.kafka).kwargs())
    await admin.start()
    try:
        await admin.delete_topics(list(names))
    finally:
        await admin.close()


# --------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------


def report(runs: list[Run], baseline: dict[str, float]) -> None:
    sizes = sorted({r.pairs for r in runs})
    by = {(r.store, r.pairs): r for r in runs}
    table = Table(
        title="worker resident memory and start time by retained pairs (outcome tables, one worker, no standby)"
    )
    table.add_column("pairs kept", justify="right")
    for store in STORES:
        table.add_column(f"{store}: RSS MB", justify="right")
        table.add_column(f"{store}: peak MB", justify="right")
    table.add_column("rocksdb: disk MB", justify="right")
    for store in STORES:
        table.add_column(f"{store}: first start s", justify="right")
        table.add_column(f"{store}: restart s", justify="right")

    def cell(store: str, n: int, attr: str, fmt: str) -> str:
        r = by.get((store, n))
        if r is None:
            return ""
        if r.skipped:
            return "skipped"
        value = getattr(r, attr)
        if math.isnan(value):
            return "seeded" if attr == "first_start_s" else ""
        return format(value, fmt)

    for n in sizes:
        row = [f"{n:,}"]
        for store in STORES:
            row += [cell(store, n, "rss_mb", ",.0f"), cell(store, n, "peak_mb", ",.0f")]
        row.append(cell("rocksdb", n, "disk_mb", ",.0f"))
        for store in STORES:
            row += [cell(store, n, "first_start_s", ".1f"), cell(store, n, "restart_s", ".1f")]
        table.add_row(*row)
    console.print(table)
    for store in STORES:
        done = sorted((r for r in runs if r.store == store and not r.skipped), key=lambda r: r.pairs)
        if len(done) >= 2:
            lo, hi = done[0], done[-1]
            slope = (hi.rss_mb - lo.rss_mb) * 1024 / (hi.pairs - lo.pairs)
            console.print(f"{store}: RSS grows {slope:,.2f} KB per pair kept ({lo.pairs:,} to {hi.pairs:,} pairs)")
    skipped = [r for r in runs if r.skipped]
    for r in skipped:
        console.print(f"{r.store} at {r.pairs:,} pairs skipped: {r.skipped}")
    for r in runs:
        # One line per run for scripts (tests/integration/test_bench_smoke.py): nan where not measured.
        console.print(
            f"TABLESTORE store={r.store} pairs={r.pairs} rss_mb={r.rss_mb:.1f} restart_rss_mb={r.restart_rss_mb:.1f} "
            f"first_start_s={r.first_start_s:.2f} restart_s={r.restart_s:.2f} disk_mb={r.disk_mb:.1f} "
            f"skipped={bool(r.skipped)}",
            soft_wrap=True,
        )
    console.print(
        f"per pair filled: primary outcome {baseline['primary_bytes']:,.0f} B, tie-break outcome "
        f"{baseline['tiebreak_bytes']:,.0f} B on {baseline['tiebreak_share']:.0%} of pairs"
    )


# --------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------


async def main(args: argparse.Namespace) -> None:
    quiet_kafka_client()
    sizes = [int(s) for s in args.sizes.split(",")]
    stores = [s for s in STORES if s in args.stores.split(",")]
    runs: list[Run] = []
    baseline: dict[str, float] = {}
    with work_dir("pj-table-store-", keep=args.keep) as work:
        async with bench_broker(work.path, bootstrap=args.bootstrap) as broker:
            base = Settings()
            shapes = await templates(args.templates, run_settings(base, broker, work.path, tag="tpl"))
            baseline["tiebreak_share"] = sum(t.tiebreak is not None for t in shapes) / len(shapes)
            for n in sizes:
                settings = run_settings(base, broker, work.path / f"n{n}", tag=f"ts{n}")
                specs = topic_specs(settings)
                await create_topics(client_config(settings.kafka), specs)
                try:
                    started = time.monotonic()
                    once = n > args.full_starts_up_to
                    filled = await fill(settings, shapes, n, published=args.published)
                    baseline["primary_bytes"], baseline["tiebreak_bytes"] = filled.primary_bytes, filled.tiebreak_bytes
                    console.print(
                        f"{n:,} pairs: {filled.primary:,} primary and {filled.tiebreak:,} tie-break outcomes on the "
                        f"changelogs in {time.monotonic() - started:.0f} s"
                    )
                    for store in stores:
                        previous = [r for r in runs if r.store == store and not r.skipped]
                        if store == "memory":
                            # From the previous size's peak, else from the 7 KB a pair measured on the sample pairs.
                            last = previous[-1] if previous else None
                            predicted = last.peak_mb * n / last.pairs if last else 250 + 7 * n / 1024
                            if predicted > args.memory_budget * available_mb():
                                runs.append(Run(store, n, skipped=f"would need about {predicted:,.0f} MB"))
                                continue
                        runs.append(
                            await measure(
                                settings, store, work.path / f"n{n}", shapes=shapes, n=n, filled=filled, once=once
                            )
                        )
                finally:
                    await delete_topics(settings, list(specs))
            report(runs, baseline)
            work.ok = True


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_broker_args(parser)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="retained pairs, comma-separated")
    parser.add_argument("--stores", default=",".join(STORES), help="memory,rocksdb (either or both)")
    parser.add_argument(
        "--published",
        action="store_true",
        help="fill with published marks (a compacted changelog of outcomes the broker has) instead of outcomes",
    )
    parser.add_argument("--templates", type=int, default=200, help="sample pairs whose outcomes are replicated")
    parser.add_argument(
        "--full-starts-up-to",
        type=int,
        default=200_000,
        help="above this many pairs: the memory store starts once (a restart re-reads the same), and RocksDB's "
        "databases are seeded directly, then restarted",
    )
    parser.add_argument(
        "--memory-budget", type=float, default=0.6, help="skip the memory store above this share of available memory"
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    asyncio.run(main(parse_args()))
