"""Stress the at-least-once promise across rebalances: does any pair go missing on real Apache Kafka?

Each run creates its own 4-partition topics and consumer group (a unique prefix), puts part of
~1000 pairs on the pairs topic up front and streams the rest while workers churn::

    start w1 · start w2 · stop w1 · start w3 · stop w2 · ... (every start and stop is a rebalance)

By default the rest of the pairs trickle in steadily; ``--bursts`` instead drops a backlog on the
topic a second before every start/stop, so each rebalance lands on fetched-but-unprocessed records.

One stop per run can be a SIGKILL instead of a SIGTERM (``--crash-every``): a crash may re-deliver,
but it must not lose anything, because a worker commits an input offset only after the broker has
acknowledged that input's outputs. The last worker drains, the final-outcome topics are read back
(``streams.collector``), and every run reports sent / decided / missing (lost) / duplicates. A
duplicate is a re-delivery after a rebalance (faust#502): expected and harmless, pair ids dedupe.

For every missing pair the report says where it stopped: the stage (a tie-break request on the
topic means the first stage did its job), partition and offset, which workers' traces show it was
judged, and the group's committed offset there. Committed past it = LOST (an offset was skipped and
will never come back); not committed = stuck (a live worker would still process it: liveness, not
loss). A worker that exits on its own aborts the bench (exit 2): such a run says nothing about offsets.

The aiokafka under test is whatever the interpreter running this script has: workers are started
with ``sys.executable -m streams.cli worker``. Exit status: 0 every pair has an outcome, 1 some pair
has none (lost or stuck), 2 the harness itself failed.

    python bench/rebalance_loss.py --runs 5 --crash-every 2
    python bench/rebalance_loss.py --runs 3 --bursts --pairs 1500 --crash-every 2
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

import streams.collector
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


class WorkerDied(RuntimeError):
    """A worker exited without being asked to: the code under test is broken, not the offsets."""


def _check_alive(workers: list[Worker], timeline: Timeline) -> None:
    for worker in workers:
        if worker.stopped_at is None and worker.died_early is None and worker.proc.poll() is not None:
            worker.died_early = worker.proc.returncode
            timeline.note(f"worker {worker.number} DIED on its own (exit {worker.died_early})")
            tail = worker.log_path.read_text(errors="replace").splitlines()[-15:]
            raise WorkerDied(f"worker {worker.number} exited with {worker.died_early}:\n" + "\n".join(tail))


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


async def _commit_ahead(bootstrap: str, group: str, tp: TopicPartition, offset: int) -> None:
    """Commit ``offset`` for the group before any worker joins: the first records of ``tp`` are skipped.

    The harness's negative control (--self-test-skip): the same symptom a skipped offset has, so a
    run with it must report exactly that many LOST pairs, or the detector is broken.
    """
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([tp])
        await consumer.commit({tp: offset})
    finally:
        await consumer.stop()


async def _group_offsets(bootstrap: str, group: str, topics: list[str]) -> dict[str, dict[str, int]]:
    """topic -> partition -> (committed offset, log end offset) for the worker group."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await admin.start()
    await consumer.start()
    try:
        tps = [TopicPartition(t, p) for t in topics for p in range(PARTITIONS)]
        committed = await admin.list_consumer_group_offsets(group, partitions=tps)
        consumer.assign(tps)  # so the consumer tracks (has metadata for) these topics; see _known_partitions
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


def _locate(
    placed: Placement | None,
    tiebreaks: list[Placement],
    judged: dict[str, list[int]],
    offsets: dict[str, dict[str, int]],
    base: Settings,
) -> dict[str, Any]:
    """Where a missing pair stopped, and whether the group committed past it (lost) or not (stuck)."""
    # A tie-break request on the topic means the first stage did its job: look at the second.
    stage, where = ("tiebreak", tiebreaks[-1]) if tiebreaks else ("pairs", placed)
    detail: dict[str, Any] = {
        "stage": stage,
        "partition": where.partition if where else None,
        "offset": where.offset if where else None,
        "judged_by_workers": judged,
    }
    if where is not None:
        committed = offsets[base.topics.name(stage)].get(f"p{where.partition}.committed", -1)
        detail["group_committed"] = committed
        detail["committed_past"] = committed > where.offset
    return detail


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
    missing_detail: dict[str, dict[str, Any]] = field(default_factory=dict)
    offsets: dict[str, dict[str, int]] = field(default_factory=dict)
    timeline: list[tuple[float, str]] = field(default_factory=list)

    @property
    def lost(self) -> int:
        """Missing pairs whose input offset the group has committed past: skipped, never to come back."""
        return sum(1 for d in self.missing_detail.values() if d.get("committed_past"))

    @property
    def stuck(self) -> int:
        """Missing pairs not committed yet: a live worker would still (re)process them; a liveness failure."""
        return len(self.missing) - self.lost


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
    bursts: bool
    burst_lead: float
    self_test_skip: int


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
    producing: asyncio.Task[None] | None = None
    rebalances = 0
    crash_cycle = plan.cycles // 2 if crash else -1
    try:
        await _produce(bootstrap, pairs_topic, events[:head], placements, over_seconds=0)
        timeline.note(f"pre-produced {head} pairs on {pairs_topic}")
        if plan.self_test_skip:
            await _commit_ahead(bootstrap, base.worker.app_id, TopicPartition(pairs_topic, 0), plan.self_test_skip)
            timeline.note(f"self-test: committed offset {plan.self_test_skip} on {pairs_topic}[0] before any worker")
        workers.append(await asyncio.to_thread(_launch, base, run_dir, 1, timeline))
        rebalances += 1
        rest = events[head:]
        steps = 2 * plan.cycles
        bursts = [rest[i * len(rest) // steps : (i + 1) * len(rest) // steps] for i in range(steps)]

        async def before_step(step: int) -> None:
            # Bursts: a backlog lands just before every start/stop, so each rebalance revokes partitions
            # with fetched-but-unprocessed records and agents mid-pair (the case faust#221/#223 is about).
            if plan.bursts:
                await _produce(bootstrap, pairs_topic, bursts[step], placements, over_seconds=0)
                timeline.note(f"burst of {len(bursts[step])} pairs")
                await asyncio.sleep(plan.burst_lead)

        if not plan.bursts:
            # Steady: the rest flows in for the whole churn, so every rebalance happens with pairs in flight.
            churn_seconds = plan.interval * (1 + steps)
            producing = asyncio.create_task(
                _produce(bootstrap, pairs_topic, rest, placements, over_seconds=churn_seconds)
            )
        await asyncio.sleep(plan.interval)
        _check_alive(workers, timeline)
        for cycle in range(plan.cycles):
            await before_step(2 * cycle)
            workers.append(await asyncio.to_thread(_launch, base, run_dir, len(workers) + 1, timeline))
            rebalances += 1
            await asyncio.sleep(plan.interval)
            _check_alive(workers, timeline)
            oldest = next(w for w in workers if w.stopped_at is None)
            await before_step(2 * cycle + 1)
            await asyncio.to_thread(_stop, oldest, crash=cycle == crash_cycle, timeline=timeline)
            rebalances += 1
            await asyncio.sleep(plan.interval)
            _check_alive(workers, timeline)
        if producing is not None:
            await producing
        timeline.note(f"all {len(placements)} pairs produced; worker {workers[-1].number} drains")
        outcomes = await collect_outcomes(base, expected, timeout=plan.collect_timeout, settle=3)
        timeline.note(f"collected: {len(outcomes.final)}/{len(expected)} decided, {outcomes.duplicates} duplicates")
        _check_alive(workers, timeline)
        # Let the survivor commit what it acked (commit interval 1 s) before reading the group's offsets.
        await asyncio.sleep(3)
        offsets = await _group_offsets(bootstrap, base.worker.app_id, [pairs_topic, base.topics.name("tiebreak")])
    finally:
        if producing is not None and not producing.done():
            producing.cancel()
        for w in workers:
            if w.stopped_at is None and w.died_early is None:
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
        offsets=offsets,
        timeline=timeline.events,
    )
    if report.missing:
        tiebreaks = await _read_topic_ids(bootstrap, base.topics.name("tiebreak"))
        judged = _judged_by(workers)
        for pid in report.missing:
            report.missing_detail[pid] = _locate(
                placements.get(pid), tiebreaks.get(pid, []), judged.get(pid, {}), offsets, base
            )
    (run_dir / "report.json").write_text(json.dumps(asdict(report), indent=2))
    return report


# --------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------


def _print_table(reports: list[RunReport], write: Callable[[str], None]) -> None:
    write(
        f"{'run':>3} {'aiokafka':>8} {'crash':>5} {'rebal':>5} {'sent':>5} {'decided':>7} "
        f"{'lost':>4} {'stuck':>5} {'dups':>5}  wall"
    )
    for r in reports:
        write(
            f"{r.run:>3} {r.aiokafka:>8} {'yes' if r.crash else 'no':>5} {r.rebalances:>5} {r.sent:>5} "
            f"{r.decided:>7} {r.lost:>4} {r.stuck:>5} {r.duplicates:>5}  {r.wall_s:.0f}s"
        )
    write(
        f"total: {len(reports)} runs, {sum(r.lost for r in reports)} lost in "
        f"{sum(1 for r in reports if r.lost)} runs, {sum(r.stuck for r in reports)} stuck, "
        f"{sum(r.duplicates for r in reports)} duplicates"
    )


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--bootstrap", help="a running Kafka; default: start Apache Kafka in the work dir")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--cycles", type=int, default=3, help="start-new / stop-oldest cycles per run")
    parser.add_argument("--interval", type=float, default=7.0, help="seconds between churn steps")
    parser.add_argument("--preproduce", type=float, default=0.3, help="share of pairs sent before worker 1")
    parser.add_argument(
        "--bursts", action="store_true", help="send the rest in bursts just before each churn step, not steadily"
    )
    parser.add_argument("--burst-lead", type=float, default=1.0, help="seconds between a burst and its step")
    parser.add_argument(
        "--self-test-skip",
        type=int,
        default=0,
        metavar="N",
        help="negative control: commit past the first N records of pairs[0] up front; must report N lost",
    )
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
    # SIGTERM (a CI timeout, kill) cancels the run, so the finally blocks stop workers and the broker:
    # both live in their own sessions and would outlive us otherwise.
    task = asyncio.current_task()
    if task is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    created = args.workdir is None
    workdir: Path = args.workdir or Path(tempfile.mkdtemp(prefix="pairjudge-rebalance-"))
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    version = importlib.metadata.version("aiokafka")
    print(
        f"aiokafka {version}, faust-streaming {importlib.metadata.version('faust-streaming')}, "
        f"python {sys.executable}; code {Path(streams.collector.__file__).parents[1]}; work dir {workdir}",
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
        bursts=args.bursts,
        burst_lead=args.burst_lead,
        self_test_skip=args.self_test_skip,
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
                f"  -> sent {report.sent}, decided {report.decided}, LOST {report.lost}, stuck {report.stuck}, "
                f"duplicates {report.duplicates}, conflicting {len(report.conflicting)}",
                flush=True,
            )
            for pid, detail in list(report.missing_detail.items())[:10]:
                print(f"     missing {pid}: {json.dumps(detail)}", flush=True)
            if len(report.missing) > 10:
                print(f"     ... {len(report.missing) - 10} more in {run_dir / 'report.json'}", flush=True)
            if args.keep == "failed" and not report.missing:
                shutil.rmtree(run_dir, ignore_errors=True)
    finally:
        if broker is not None:
            await asyncio.to_thread(broker.stop)
    print()
    _print_table(reports, print)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in reports], indent=2))
    lost = any(r.missing for r in reports)
    if lost:
        print(f"pairs without an outcome: logs kept under {workdir}")
    elif args.keep == "failed" and created:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if lost else 0


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    try:
        return asyncio.run(_main(args))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("interrupted", file=sys.stderr)
        return 2
    except WorkerDied as exc:
        print(
            f"harness error: a worker died on its own, so this run says nothing about offsets: {exc}", file=sys.stderr
        )
        return 2
    except Exception:  # noqa: BLE001 - the harness failing is exit 2, distinct from "lost messages" (1)
        traceback.print_exc()
        return 2


if __name__ == "__main__":
    sys.exit(main())
