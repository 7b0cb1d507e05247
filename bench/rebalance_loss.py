"""Stress the at-least-once promise across rebalances: does any pair go missing on real Apache Kafka?

Each run creates its own 4-partition topics and consumer group (a unique prefix), puts part of
~1000 pairs on the pairs topic up front and streams the rest while workers churn::

    start w1 · start w2 · stop w1 · start w3 · stop w2 · ... (every start and stop is a rebalance)

One stop per run can be a SIGKILL instead of a SIGTERM (``--crash-every``): a crash may re-deliver,
but it must not lose anything, because a worker commits an input offset only after the broker has
acknowledged that input's outputs. The last worker drains, the final-outcome topics are read back
(``streams.collector``), and every run reports sent / decided / missing (lost) / duplicates. A
duplicate is a re-delivery after a rebalance (faust#502): expected and harmless, pair ids dedupe.

For every missing pair the report says where it was lost: its partition and offset on the pairs
topic, whether a tie-break request for it exists (lost in the second stage), whether any worker's
trace shows it was judged, and the group's committed offset for that partition (committed past
it = an offset was skipped, not merely left unprocessed).

The aiokafka under test is whatever the interpreter running this script has: workers are started
with ``sys.executable -m streams.cli worker``. Exit status: 0 nothing lost, 1 something lost,
2 the harness itself failed.

    python bench/rebalance_loss.py --runs 5 --crash-every 2
    python bench/rebalance_loss.py --bootstrap 127.0.0.1:9092 --runs 1 --keep all
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from streams.brokers import RunningBroker, create_topics, start_kafka, wait_until_ready
from streams.collector import collect_outcomes
from streams.demo import start_worker, stop_process
from streams.settings import Settings
from streams.topics import topic_specs

REPO = Path(__file__).resolve().parents[1]
PARTITIONS = 4


def _many_pairs(n: int, prefix: str) -> list[bytes]:
    # The generator lives with the integration tests; the checkout root is not on sys.path when this
    # file is run as a script (only the installed packages are).
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tests.integration.pairgen import many_pairs

    return many_pairs(n, prefix)


# --------------------------------------------------------------------------------------------------
# Workers
# --------------------------------------------------------------------------------------------------


@dataclass
class Worker:
    number: int
    proc: subprocess.Popen[bytes]
    log_path: Path
    traces_path: Path
    started_at: float
    stopped_at: float | None = None
    #: "sigterm", "sigkill" (our crash), "sigterm->sigkill" (did not stop within the grace period).
    stopped_by: str | None = None
    #: Exit code seen before we asked it to stop: a worker that died on its own.
    died_early: int | None = None


@dataclass
class Timeline:
    """What happened when, in seconds since the run started, for reading next to the worker logs."""

    started: float = field(default_factory=time.monotonic)
    events: list[tuple[float, str]] = field(default_factory=list)

    def note(self, what: str) -> None:
        at = round(time.monotonic() - self.started, 2)
        self.events.append((at, what))
        print(f"    [{at:7.2f}s] {what}", flush=True)


def _worker_settings(base: Settings, run_dir: Path, number: int) -> Settings:
    # Each worker its own data dir and trace file, as if on its own host.
    return base.model_copy(
        update={
            "worker": base.worker.model_copy(update={"data_dir": run_dir / f"worker-{number}-data"}),
            "telemetry": base.telemetry.model_copy(update={"file_path": run_dir / f"worker-{number}-traces.jsonl"}),
        }
    )


def _launch(base: Settings, run_dir: Path, number: int, timeline: Timeline) -> Worker:
    settings = _worker_settings(base, run_dir, number)
    log_path = run_dir / f"worker-{number}.log"
    proc = start_worker(settings, log_path)
    timeline.note(f"start worker {number} (pid {proc.pid})")
    return Worker(number, proc, log_path, settings.telemetry.file_path, time.monotonic())


def _stop(worker: Worker, *, crash: bool, timeline: Timeline) -> None:
    """SIGTERM (graceful; escalates to SIGKILL after 15 s, in stop_process) or a SIGKILL crash."""
    if worker.proc.poll() is not None:
        worker.died_early = worker.proc.returncode
        timeline.note(f"worker {worker.number} had already exited with {worker.proc.returncode}")
        return
    if crash:
        timeline.note(f"SIGKILL worker {worker.number} (crash)")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.proc.pid, signal.SIGKILL)
        worker.proc.wait(10)
        worker.stopped_by = "sigkill"
    else:
        timeline.note(f"SIGTERM worker {worker.number}")
        begun = time.monotonic()
        stop_process(worker.proc)
        # stop_process escalates to SIGKILL after its grace period; a negative code tells which signal won.
        worker.stopped_by = "sigterm" if worker.proc.returncode != -signal.SIGKILL else "sigterm->sigkill"
        timeline.note(
            f"worker {worker.number} exited ({worker.stopped_by}, code {worker.proc.returncode}, "
            f"{time.monotonic() - begun:.1f}s)"
        )
    worker.stopped_at = time.monotonic()


# --------------------------------------------------------------------------------------------------
# Producing
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Placement:
    partition: int
    offset: int


async def _produce(
    bootstrap: str,
    topic: str,
    events: list[tuple[str, bytes]],
    placements: dict[str, Placement],
    *,
    over_seconds: float,
) -> None:
    """Send ``events`` evenly spread over ``over_seconds``, recording where each one landed."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        tick = 0.1
        per_tick = max(1, round(len(events) * tick / over_seconds)) if over_seconds > 0 else len(events)
        for start in range(0, len(events), per_tick):
            chunk = events[start : start + per_tick]
            futures = [(pid, await producer.send(topic, key=pid.encode(), value=raw)) for pid, raw in chunk]
            for pid, fut in futures:
                meta = await fut
                placements[pid] = Placement(meta.partition, meta.offset)
            if over_seconds > 0:
                await asyncio.sleep(tick)
    finally:
        await producer.stop()


# --------------------------------------------------------------------------------------------------
# Diagnostics for missing pairs
# --------------------------------------------------------------------------------------------------


async def _read_topic_ids(bootstrap: str, topic: str) -> dict[str, list[Placement]]:
    """pair id -> where it appears on ``topic`` (read from the start, no consumer group)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    found: dict[str, list[Placement]] = {}
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends: dict[Any, int] = await consumer.end_offsets(tps)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            positions = [await consumer.position(tp) for tp in tps]
            if all(pos >= ends[tp] for pos, tp in zip(positions, tps, strict=True)):
                break
            batches = await consumer.getmany(timeout_ms=500, max_records=2000)
            for tp, records in batches.items():
                for record in records:
                    pid = record.key.decode("utf-8", "replace") if record.key else "?"
                    found.setdefault(pid, []).append(Placement(tp.partition, record.offset))
    finally:
        await consumer.stop()
    return found


async def _group_offsets(bootstrap: str, group: str, topics: list[str]) -> dict[str, dict[str, int]]:
    """topic -> partition -> (committed offset, log end offset) for the worker group."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await admin.start()
    await consumer.start()
    try:
        tps = [TopicPartition(t, p) for t in topics for p in range(PARTITIONS)]
        committed = await admin.list_consumer_group_offsets(group, partitions=tps)
        ends = await consumer.end_offsets(tps)
        out: dict[str, dict[str, int]] = {}
        for tp in tps:
            meta = committed.get(tp)
            out.setdefault(tp.topic, {})[f"p{tp.partition}.committed"] = meta.offset if meta is not None else -1
            out[tp.topic][f"p{tp.partition}.end"] = int(ends[tp])
        return out
    finally:
        await consumer.stop()
        await admin.close()


def _judged_by(workers: list[Worker]) -> dict[str, dict[str, list[int]]]:
    """pair id -> stage -> numbers of the workers whose traces show they judged it (flushed spans only)."""
    seen: dict[str, dict[str, list[int]]] = {}
    for worker in workers:
        if not worker.traces_path.exists():
            continue
        for line in worker.traces_path.read_text(errors="replace").splitlines():
            try:
                span = json.loads(line)
            except ValueError:
                continue
            attrs = span.get("attributes") or {}
            pid, stage = attrs.get("pairjudge.pair_id"), attrs.get("pairjudge.stage")
            if isinstance(pid, str) and isinstance(stage, str) and span.get("name", "").startswith("pairjudge."):
                seen.setdefault(pid, {}).setdefault(stage, []).append(worker.number)
    return seen


# --------------------------------------------------------------------------------------------------
# One run
# --------------------------------------------------------------------------------------------------


@dataclass
class RunReport:
    run: int
    run_dir: str
    aiokafka: str
    sent: int
    decided: int
    missing: list[str]
    duplicates: int
    conflicting: dict[str, list[str]]
    crash: bool
    rebalances: int
    wall_s: float
    worker_deaths: dict[int, int]
    missing_detail: dict[str, dict[str, Any]] = field(default_factory=dict)
    offsets: dict[str, dict[str, int]] = field(default_factory=dict)
    timeline: list[tuple[float, str]] = field(default_factory=list)

    @property
    def lost(self) -> int:
        return len(self.missing)


@dataclass(frozen=True, slots=True)
class Plan:
    pairs: int
    cycles: int
    interval: float
    preproduce: float
    concurrency: int
    session_timeout: float
    collect_timeout: float
    log_level: str


async def run_once(bootstrap: str, run_dir: Path, number: int, plan: Plan, *, crash: bool) -> RunReport:
    tag = uuid.uuid4().hex[:8]
    base = Settings(
        kafka={
            "bootstrap_servers": bootstrap,
            "partitions": PARTITIONS,
            "session_timeout_s": plan.session_timeout,
            "heartbeat_interval_s": 1.0,
        },
        topics={"prefix": f"rb-{tag}"},
        worker={
            "app_id": f"pairjudge-rb-{tag}",
            "data_dir": run_dir / "data",
            "concurrency": plan.concurrency,
            "log_level": plan.log_level,
        },
        telemetry={"exporter": "file", "file_path": run_dir / "traces.jsonl"},
    )
    await asyncio.to_thread(run_dir.mkdir, parents=True, exist_ok=True)
    timeline = Timeline()
    await create_topics(bootstrap, topic_specs(base))
    pairs_topic = base.topics.name("pairs")
    raw = _many_pairs(plan.pairs, base.topics.prefix)
    events = [(str(json.loads(r)["pair_id"]), r) for r in raw]
    expected = {pid for pid, _ in events}
    placements: dict[str, Placement] = {}
    head = int(len(events) * plan.preproduce)

    workers: list[Worker] = []
    rebalances = 0
    crash_cycle = plan.cycles // 2 if crash else -1
    try:
        await _produce(bootstrap, pairs_topic, events[:head], placements, over_seconds=0)
        timeline.note(f"pre-produced {head} pairs on {pairs_topic}")
        workers.append(await asyncio.to_thread(_launch, base, run_dir, 1, timeline))
        rebalances += 1
        # The rest flows in for the whole churn, so every rebalance happens with pairs in flight.
        churn_seconds = plan.interval * (1 + 2 * plan.cycles)
        producing = asyncio.create_task(
            _produce(bootstrap, pairs_topic, events[head:], placements, over_seconds=churn_seconds)
        )
        await asyncio.sleep(plan.interval)
        for cycle in range(plan.cycles):
            workers.append(await asyncio.to_thread(_launch, base, run_dir, len(workers) + 1, timeline))
            rebalances += 1
            await asyncio.sleep(plan.interval)
            oldest = next(w for w in workers if w.stopped_at is None and w.died_early is None)
            await asyncio.to_thread(_stop, oldest, crash=cycle == crash_cycle, timeline=timeline)
            rebalances += 1
            await asyncio.sleep(plan.interval)
        await producing
        timeline.note(f"all {len(placements)} pairs produced; worker {workers[-1].number} drains")
        outcomes = await collect_outcomes(base, expected, timeout=plan.collect_timeout, settle=3)
        timeline.note(f"collected: {len(outcomes.final)}/{len(expected)} decided, {outcomes.duplicates} duplicates")
        for w in workers:
            if w.stopped_at is None and w.proc.poll() is not None:
                w.died_early = w.proc.returncode
        # Let the survivor commit what it acked (commit interval 1 s) before reading the group's offsets.
        await asyncio.sleep(3)
        offsets = await _group_offsets(bootstrap, base.worker.app_id, [pairs_topic, base.topics.name("tiebreak")])
    finally:
        for w in workers:
            if w.stopped_at is None:
                await asyncio.to_thread(_stop, w, crash=False, timeline=timeline)

    report = RunReport(
        run=number,
        run_dir=str(run_dir),
        aiokafka=importlib.metadata.version("aiokafka"),
        sent=len(placements),
        decided=len(outcomes.final),
        missing=sorted(outcomes.missing),
        duplicates=outcomes.duplicates,
        conflicting={pid: sorted(kinds) for pid, kinds in outcomes.conflicting.items()},
        crash=crash,
        rebalances=rebalances,
        wall_s=round(time.monotonic() - timeline.started, 1),
        worker_deaths={w.number: w.died_early for w in workers if w.died_early is not None},
        offsets=offsets,
        timeline=timeline.events,
    )
    if report.missing:
        tiebreaks = await _read_topic_ids(bootstrap, base.topics.name("tiebreak"))
        judged = _judged_by(workers)
        for pid in report.missing:
            where = placements.get(pid)
            detail: dict[str, Any] = {
                "pairs_partition": where.partition if where else None,
                "pairs_offset": where.offset if where else None,
                "tiebreak_requests": [asdict(p) for p in tiebreaks.get(pid, [])],
                "judged_by_workers": judged.get(pid, {}),
            }
            if where is not None:
                detail["group_committed_on_that_partition"] = offsets[pairs_topic].get(f"p{where.partition}.committed")
            report.missing_detail[pid] = detail
    (run_dir / "report.json").write_text(json.dumps(asdict(report), indent=2))
    return report


# --------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------


def _print_table(reports: list[RunReport], write: Callable[[str], None]) -> None:
    write(
        f"{'run':>3} {'aiokafka':>8} {'crash':>5} {'rebal':>5} {'sent':>5} {'decided':>7} {'lost':>4} {'dups':>5}  wall"
    )
    for r in reports:
        write(
            f"{r.run:>3} {r.aiokafka:>8} {'yes' if r.crash else 'no':>5} {r.rebalances:>5} {r.sent:>5} "
            f"{r.decided:>7} {r.lost:>4} {r.duplicates:>5}  {r.wall_s:.0f}s"
        )
    write(
        f"total: {len(reports)} runs, {sum(r.lost for r in reports)} lost in "
        f"{sum(1 for r in reports if r.lost)} runs, {sum(r.duplicates for r in reports)} duplicates"
    )


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--bootstrap", help="a running Kafka; default: start Apache Kafka in the work dir")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--cycles", type=int, default=3, help="start-new / stop-oldest cycles per run")
    parser.add_argument("--interval", type=float, default=7.0, help="seconds between churn steps")
    parser.add_argument("--preproduce", type=float, default=0.3, help="share of pairs sent before worker 1")
    parser.add_argument("--crash-every", type=int, default=0, help="SIGKILL one worker in every Nth run (0: never)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--session-timeout", type=float, default=10.0)
    parser.add_argument("--collect-timeout", type=float, default=180.0)
    parser.add_argument("--worker-log-level", default="INFO")
    parser.add_argument("--workdir", type=Path, help="default: a new temp dir")
    parser.add_argument("--keep", choices=("failed", "all"), default="failed", help="run dirs to keep")
    parser.add_argument("--json", type=Path, help="also write every run's report here")
    return parser.parse_args(argv)


async def _main(args: argparse.Namespace) -> int:
    created = args.workdir is None
    workdir: Path = args.workdir or Path(tempfile.mkdtemp(prefix="pairjudge-rebalance-"))
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    version = importlib.metadata.version("aiokafka")
    print(
        f"aiokafka {version}, faust-streaming {importlib.metadata.version('faust-streaming')}, "
        f"python {sys.executable}; work dir {workdir}",
        flush=True,
    )
    plan = Plan(
        pairs=args.pairs,
        cycles=args.cycles,
        interval=args.interval,
        preproduce=args.preproduce,
        concurrency=args.concurrency,
        session_timeout=args.session_timeout,
        collect_timeout=args.collect_timeout,
        log_level=args.worker_log_level,
    )
    broker: RunningBroker | None = None
    reports: list[RunReport] = []
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
            await wait_until_ready(bootstrap, timeout=30)
        else:
            broker = await asyncio.to_thread(start_kafka, workdir / "kafka")
            bootstrap = broker.bootstrap
            print(f"Apache Kafka on {bootstrap} (log {broker.log_path})", flush=True)
        for n in range(1, args.runs + 1):
            crash = args.crash_every > 0 and n % args.crash_every == 0
            run_dir = workdir / f"run-{n}"
            print(f"run {n}/{args.runs} ({'with' if crash else 'no'} crash) in {run_dir}", flush=True)
            report = await run_once(bootstrap, run_dir, n, plan, crash=crash)
            reports.append(report)
            print(
                f"  -> sent {report.sent}, decided {report.decided}, LOST {report.lost}, "
                f"duplicates {report.duplicates}, conflicting {len(report.conflicting)}",
                flush=True,
            )
            for pid, detail in report.missing_detail.items():
                print(f"     missing {pid}: {json.dumps(detail)}", flush=True)
            if report.worker_deaths:
                print(f"     workers that died on their own: {report.worker_deaths}", flush=True)
            if args.keep == "failed" and not report.lost and not report.worker_deaths:
                shutil.rmtree(run_dir, ignore_errors=True)
    finally:
        if broker is not None:
            await asyncio.to_thread(broker.stop)
    print()
    _print_table(reports, print)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in reports], indent=2))
    lost = any(r.lost for r in reports)
    if lost:
        print(f"LOST messages: logs kept under {workdir}")
    elif args.keep == "failed" and created:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if lost else 0


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    try:
        return asyncio.run(_main(args))
    except KeyboardInterrupt:
        return 2
    except Exception:  # noqa: BLE001 - the harness failing is exit 2, distinct from "lost messages" (1)
        traceback.print_exc()
        return 2


if __name__ == "__main__":
    sys.exit(main())
