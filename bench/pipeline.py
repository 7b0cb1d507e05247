"""End-to-end throughput of pairjudge on a real broker, next to a raw aiokafka baseline on the same broker.

Run from the checkout root (the load generator is ``pairjudge_dev.pairgen``, shared with the tests)::

    python -m bench.pipeline                       # Apache Kafka in a temp dir, 1000 pairs, 1 worker
    python -m bench.pipeline --broker tansu        # the embedded Tansu broker instead
    python -m bench.pipeline --bootstrap host:9092 # an existing cluster (topics get a unique prefix)
    python -m bench.pipeline --pairs 2000 --workers 2 --concurrency 16

One run does four things, in this order:

1. **In-process judge cost** (no Kafka). The offline judge runs over the first ``--judge-sample`` (120)
   of the same pairs, one pair at a time on one core, after an untimed warm-up, best of 3 rounds:
   ``judge_pair`` then, for pairs routed to a tie-break, ``resolve_tiebreak`` (what the two agents do
   between them), and separately the worker's whole per-pair handler path (``Pipeline.on_pair`` and
   ``on_tiebreak``: decode, check, judge, encode, spans). This is the ceiling one worker process could
   reach if Kafka and Faust cost nothing.
2. **pairjudge**. N pairs (``many_pairs``, each stamped with ``metadata.created_at``) are produced to the
   pairs topic first. Then W ``pairjudge worker`` processes start (offline judge, agent concurrency C,
   telemetry exporter ``none``). ``collect_outcomes`` must find a final outcome for every pair, or the
   bench fails. Timings use the broker timestamps (producer CreateTime) of each pair's first final
   outcome: *steady* is first outcome to last outcome, *total* is worker start to last outcome, and
   pairs/s is N / steady.
3. **Raw aiokafka baseline**. The same N pair messages (same bytes, same keys) are copied to a second
   topic with the same partition count. Then W processes of this script start in baseline mode. Each one
   does exactly this:

   - one ``AIOKafkaConsumer`` in a consumer group shared by the W processes (``auto_offset_reset=earliest``,
     auto-commit off, ``fetch_max_wait_ms=1500`` like faust, same session and heartbeat times as the
     workers), reading with ``getmany`` into a bounded queue of ``max(64, 4*C)`` records (faust's
     ``stream_buffer_maxsize`` as pairjudge sets it);
   - C tasks, like faust agent concurrency C. Each task takes one record and builds an output value of
     the mean pairjudge outcome size: the input key, the input timestamp, then padding. It adds one header
     as large as pairjudge's mean outcome headers, sends it (``await producer.send(...)``, then
     ``await`` the delivery future), and marks the offset done. There is no JSON parsing and no judging.
     The producer is an ``AIOKafkaProducer`` with ``acks=all`` and ``linger_ms=0``, the same batch size as
     faust, and no idempotence;
   - a committer that commits, per partition, the offset after the highest contiguous done offset. It
     commits every 50 done messages or every 1 s, whichever comes first (``broker_commit_every=50``,
     ``broker_commit_interval=1.0`` in ``streams/worker/faust_app.py``), and again when partitions are revoked.

   The parent counts distinct keys on the output topic, fails if any is missing, and takes
   first-to-last and start-to-last times from the output records' timestamps, as for pairjudge.
4. A side-by-side table.

The default is 1000 pairs because the offline judge is CPU-bound: about 40 ms per pair on one core, with
tie-breaks included. So one worker does about 25 pairs/s, and 1000 pairs keep the whole run, with broker
start-up, under two minutes on two cores.

The two runs differ in one important way. pairjudge writes more than one message for some pairs: a pair
sent to the tie-break makes a tie-break request, then a verdict or review. The table gives the output
messages per pair. The baseline writes exactly one message per input. "Time in system" is measured
from when a pair was produced, and every pair is produced before the workers start. So it mostly
measures the wait in the backlog, not service latency.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from rich.table import Table

from pairjudge.agents.core import judge_pair, resolve_tiebreak
from pairjudge.agents.offline import OfflineJudge
from pairjudge.agents.policy import Policy
from pairjudge.schemas import CandidatePair, TieBreakRequest
from pairjudge.streams.cli.demo import stop_process
from pairjudge.streams.config.settings import Settings, environ_for, load_settings
from pairjudge.streams.control.live import PolicyHolder
from pairjudge.streams.judges.panel import JudgePanel
from pairjudge.streams.kafka.admin import TopicSpec, create_topics, topic_partitions
from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.producer import key_of, send_events
from pairjudge.streams.kafka.topics import FINAL_KINDS, topic_specs
from pairjudge.streams.telemetry.tracing import Telemetry
from pairjudge.streams.worker.pipeline import Origin, Pipeline
from pairjudge_dev.bench import (
    add_broker_args,
    bench_broker,
    console,
    fail,
    quiet_kafka_client,
    run_settings,
    work_dir,
)
from pairjudge_dev.pairgen import many_pairs
from pairjudge_dev.processes import REPO
from pairjudge_dev.workers import produce_raw

#: faust's commit cadence as streams/worker/faust_app.py configures it.
COMMIT_EVERY = 50
COMMIT_INTERVAL_S = 1.0
#: faust's producer defaults (linger 0, 16 KiB batches) and consumer fetch wait (1.5 s).
PRODUCER_MAX_BATCH = 16384
FETCH_MAX_WAIT_MS = 1500
#: One round of pairgen's base pairs, judged untimed before the in-process timing.
WARMUP_PAIRS = 12
#: In-process timings are best of this many rounds.
JUDGE_ROUNDS = 3


# --------------------------------------------------------------------------------------------------
# Load
# --------------------------------------------------------------------------------------------------


def stamp_created_at(raws: Sequence[bytes]) -> list[bytes]:
    """Set ``metadata.created_at`` to now, right before producing, so verdicts carry a time in system."""
    now = datetime.now(UTC).isoformat()
    out = []
    for raw in raws:
        data = json.loads(raw)
        data.setdefault("metadata", {})["created_at"] = now
        out.append(json.dumps(data).encode())
    return out


def _pair_id(raw: bytes) -> str:
    key = key_of(raw)
    if key is None:
        raise ValueError("a generated pair has no pair_id")
    return key.decode()


# --------------------------------------------------------------------------------------------------
# 1. In-process judge cost
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeCost:
    pairs: int
    core_pairs_per_s: float  # judge_pair (+ resolve_tiebreak for tie-break requests)
    handler_pairs_per_s: float  # Pipeline.on_pair (+ on_tiebreak): decode, judge, encode, spans
    tiebreak_share: float


async def judge_cost(raws: Sequence[bytes], settings: Settings, rounds: int = JUDGE_ROUNDS) -> JudgeCost:
    """Best of ``rounds`` interleaved timings of each path: the machine is shared, so the fastest is the cost."""
    policy: Policy = settings.policy.to_policy()
    judge = OfflineJudge()
    pairs = [CandidatePair.model_validate_json(raw) for raw in raws]
    telemetry = Telemetry(settings.telemetry.model_copy(update={"exporter": "none"}))
    pipeline = Pipeline(
        judges=JudgePanel.single(judge),
        policy=PolicyHolder(policy),
        telemetry=telemetry,
        catalog={},
        max_event_bytes=settings.max_event_bytes,
    )
    tiebreaks = 0

    async def core(batch: Sequence[CandidatePair]) -> float:
        nonlocal tiebreaks
        tiebreaks = 0
        started = time.perf_counter()
        for pair in batch:
            decision = await judge_pair(pair, judge, policy)
            if isinstance(decision.outcome, TieBreakRequest):
                tiebreaks += 1
                await resolve_tiebreak(decision.outcome, judge, policy)
        return time.perf_counter() - started

    async def handlers(batch: Sequence[bytes]) -> float:
        started = time.perf_counter()
        for raw in batch:
            for out in (await pipeline.on_pair(raw, None, Origin())).outgoing:
                if out.kind == "tiebreak":
                    await pipeline.on_tiebreak(out.value, out.headers, Origin())
        return time.perf_counter() - started

    try:
        # Warm up untimed (regexes, pydantic validators, prompt templates), as a running worker would be.
        await core(pairs[:WARMUP_PAIRS])
        await handlers(raws[:WARMUP_PAIRS])
        core_s = handler_s = float("inf")
        for _ in range(rounds):
            core_s = min(core_s, await core(pairs))
            handler_s = min(handler_s, await handlers(raws))
    finally:
        telemetry.shutdown()
    return JudgeCost(
        pairs=len(pairs),
        core_pairs_per_s=len(pairs) / core_s,
        handler_pairs_per_s=len(pairs) / handler_s,
        tiebreak_share=tiebreaks / len(pairs),
    )


# --------------------------------------------------------------------------------------------------
# Observing output topics
# --------------------------------------------------------------------------------------------------


@dataclass
class Seen:
    """The first record seen for one key."""

    topic: str
    timestamp_ms: int
    value: bytes
    header_bytes: int


@dataclass
class Observed:
    first: dict[str, Seen] = field(default_factory=dict)  # key -> first record on a "done" topic
    duplicates: int = 0
    other_counts: Counter[str] = field(default_factory=Counter)  # records on the extra topics

    def missing(self, expected: set[str]) -> set[str]:
        return expected - self.first.keys()


async def _partitions(bootstrap: str, topic: str) -> list[Any]:
    ids = (await topic_partitions(bootstrap, [topic]))[topic]
    return [TopicPartition(topic, p) for p in ids]


async def observe(
    bootstrap: str,
    done_topics: Sequence[str],
    expected: set[str],
    *,
    timeout: float,
    extra_topics: Sequence[str] = (),
    audit_topics: Sequence[str] = (),
) -> Observed:
    """Read the topics from the start (no group) until every expected key is seen on a done topic.

    Once they are all seen, it keeps reading up to the end offsets of that moment, so the counts on the
    extra topics are complete too. Records on ``audit_topics`` whose JSON has ``"audit": true`` are skipped.
    """
    observed = Observed()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [tp for topic in (*done_topics, *extra_topics) for tp in await _partitions(bootstrap, topic)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        done = set(done_topics)
        audited = set(audit_topics)
        deadline = time.monotonic() + timeout
        ends: dict[Any, int] | None = None
        while time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=200, max_records=2000)
            for tp, records in batches.items():
                for rec in records:
                    if tp.topic not in done:
                        observed.other_counts[tp.topic] += 1
                        continue
                    key = rec.key.decode() if rec.key else ""
                    if key not in expected:
                        continue
                    if tp.topic in audited and json.loads(rec.value or b"{}").get("audit"):
                        continue  # an audit copy of a verdict (policy.audit_share), not an outcome
                    if key in observed.first:
                        observed.duplicates += 1
                        continue
                    header_bytes = sum(len(k) + len(v or b"") for k, v in rec.headers or ())
                    observed.first[key] = Seen(tp.topic, rec.timestamp, rec.value or b"", header_bytes)
            if observed.missing(expected):
                continue
            if ends is None:
                ends = await consumer.end_offsets(partitions)
            positions = {tp: await consumer.position(tp) for tp in ends}
            if all(positions[tp] >= end for tp, end in ends.items()):
                break
        return observed
    finally:
        await consumer.stop()


# --------------------------------------------------------------------------------------------------
# Phase results
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PhaseResult:
    n: int
    started_ms: int  # wall clock when the first worker process was started
    first_ms: int
    last_ms: int
    in_bytes: float
    out_value_bytes: float
    out_header_bytes: float
    out_messages: int  # every message the run wrote, intermediate ones included
    duplicates: int
    time_in_system_ms: float | None
    detail: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        raws: Sequence[bytes],
        started_ms: int,
        observed: Observed,
        *,
        intermediate: int,
        time_in_system_ms: float | None,
        detail: dict[str, int] | None = None,
    ) -> PhaseResult:
        """The figures of one phase from its inputs and the outputs seen (``intermediate``: other messages)."""
        seen = list(observed.first.values())
        return cls(
            n=len(raws),
            started_ms=started_ms,
            first_ms=min(s.timestamp_ms for s in seen),
            last_ms=max(s.timestamp_ms for s in seen),
            in_bytes=_mean([len(r) for r in raws]),
            out_value_bytes=_mean([len(s.value) for s in seen]),
            out_header_bytes=_mean([s.header_bytes for s in seen]),
            out_messages=len(seen) + observed.duplicates + intermediate,
            duplicates=observed.duplicates,
            time_in_system_ms=time_in_system_ms,
            detail=detail or {},
        )

    @property
    def steady_s(self) -> float:
        return max(self.last_ms - self.first_ms, 1) / 1000

    @property
    def total_s(self) -> float:
        return max(self.last_ms - self.started_ms, 1) / 1000

    @property
    def rate(self) -> float:
        return self.n / self.steady_s

    @property
    def rate_total(self) -> float:
        return self.n / self.total_s


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def _worker_logs(log_dir: Path, pattern: str, chars: int = 2500) -> str:
    return "\n".join(f"--- {p} ---\n{p.read_text(errors='replace')[-chars:]}" for p in sorted(log_dir.glob(pattern)))


def _start(argv: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:  # the child keeps its own descriptor
        return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)


# --------------------------------------------------------------------------------------------------
# 2. pairjudge
# --------------------------------------------------------------------------------------------------


async def run_pairjudge(
    settings: Settings, raws: list[bytes], workers: int, concurrency: int, work_dir: Path, timeout: float
) -> PhaseResult:
    await send_events(settings, raws)
    expected = {_pair_id(raw) for raw in raws}
    created = {_pair_id(raw): datetime.fromisoformat(json.loads(raw)["metadata"]["created_at"]) for raw in raws}
    console.print(f"[bold]pairjudge[/bold]: {len(raws)} pairs pre-produced; starting {workers} worker(s)")

    await anyio.Path(work_dir).mkdir(parents=True, exist_ok=True)  # a phase may run in a subfolder
    env = environ_for(settings)
    # environ_for does not carry the agent concurrency, and this run sets its own.
    env["PAIRJUDGE_WORKER__CONCURRENCY"] = str(concurrency)
    env["PAIRJUDGE_JUDGE__KIND"] = "offline"
    argv = [sys.executable, "-m", "pairjudge.streams.cli", "worker", "--no-create-topics"]
    procs: list[subprocess.Popen[bytes]] = []
    started_ms = int(time.time() * 1000)
    try:
        for i in range(workers):
            procs.append(_start(argv, env, work_dir / f"pairjudge-worker-{i + 1}.log"))
        outcomes = await collect_outcomes(settings, expected, timeout=timeout)
        alive = all(p.poll() is None for p in procs)
        finals = [settings.topics.name(kind) for kind in FINAL_KINDS]
        observed = await observe(
            settings.kafka.bootstrap_servers,
            finals,
            expected,
            timeout=60,
            extra_topics=[settings.topics.name("tiebreak")],
            audit_topics=[settings.topics.name("review")],
        )
    finally:
        for proc in procs:
            stop_process(proc)

    if not outcomes.complete:
        console.print(_worker_logs(work_dir, "pairjudge-worker-*.log"))
        fail(
            f"pairjudge: {len(outcomes.missing)} of {len(expected)} pairs have no final outcome "
            f"after {timeout:g}s, e.g. {sorted(outcomes.missing)[:5]}"
        )
    if outcomes.conflicting:
        fail(
            f"pairjudge: pairs with more than one kind of final outcome: {dict(list(outcomes.conflicting.items())[:5])}"
        )
    if not alive:
        console.print(_worker_logs(work_dir, "pairjudge-worker-*.log"))
        fail("pairjudge: a worker exited during the run")
    if observed.missing(expected):
        fail(f"pairjudge: the timing scan missed {len(observed.missing(expected))} outcomes that collect_outcomes saw")
    kinds = Counter(kind for kind, _ in outcomes.final.values())
    if kinds["deadletter"]:
        fail(f"pairjudge: {kinds['deadletter']} valid pairs were dead-lettered; see the worker logs in {work_dir}")

    latencies = []
    for pair_id, seen in observed.first.items():
        event = json.loads(seen.value)
        at = event.get("decided_at") or event.get("requested_at")
        if at:
            latencies.append((datetime.fromisoformat(at) - created[pair_id]).total_seconds() * 1000)
    by_tiebreak = sum(1 for kind, e in outcomes.final.values() if kind == "verdicts" and e["decided_by"] == "tiebreak")
    tiebreak_topic = settings.topics.name("tiebreak")
    return PhaseResult.of(
        raws,
        started_ms,
        observed,
        intermediate=observed.other_counts[tiebreak_topic],
        time_in_system_ms=_mean(latencies) if latencies else None,
        detail={
            "verdict (primary)": kinds["verdicts"] - by_tiebreak,
            "verdict (tie-break)": by_tiebreak,
            "review": kinds["review"],
            "tie-break requests": observed.other_counts[tiebreak_topic],
        },
    )


# --------------------------------------------------------------------------------------------------
# 3. Raw aiokafka baseline
# --------------------------------------------------------------------------------------------------


async def run_baseline(
    settings: Settings,
    raws: list[bytes],
    workers: int,
    concurrency: int,
    value_bytes: int,
    header_bytes: int,
    work_dir: Path,
    timeout: float,
) -> PhaseResult:
    bootstrap = settings.kafka.bootstrap_servers
    in_topic = settings.topics.name("bench-in")
    out_topic = settings.topics.name("bench-out")
    spec = TopicSpec(partitions=settings.kafka.partitions, replication=settings.kafka.replication_factor)
    await create_topics(bootstrap, {in_topic: spec, out_topic: spec})
    await produce_raw(bootstrap, in_topic, raws, keyed=True)
    expected = {_pair_id(raw) for raw in raws}
    console.print(f"[bold]baseline[/bold]: {len(raws)} messages pre-produced; starting {workers} consumer process(es)")

    argv = [sys.executable, "-m", "bench.pipeline", "--baseline-worker", "--bootstrap", bootstrap]
    argv += ["--in-topic", in_topic, "--out-topic", out_topic, "--group", f"{settings.worker.app_id}-baseline"]
    argv += ["--concurrency", str(concurrency), "--value-bytes", str(value_bytes), "--header-bytes", str(header_bytes)]
    argv += ["--session-timeout", str(settings.kafka.session_timeout_s)]
    argv += ["--heartbeat-interval", str(settings.kafka.heartbeat_interval_s)]
    procs: list[subprocess.Popen[bytes]] = []
    started_ms = int(time.time() * 1000)
    try:
        for i in range(workers):
            procs.append(_start(argv, dict(os.environ), work_dir / f"baseline-worker-{i + 1}.log"))
        observed = await observe(bootstrap, [out_topic], expected, timeout=timeout)
        alive = all(p.poll() is None for p in procs)
    finally:
        for proc in procs:
            stop_process(proc)

    if observed.missing(expected):
        console.print(_worker_logs(work_dir, "baseline-worker-*.log"))
        fail(f"baseline: {len(observed.missing(expected))} of {len(expected)} messages have no output")
    if not alive:
        console.print(_worker_logs(work_dir, "baseline-worker-*.log"))
        fail("baseline: a consumer process exited during the run")
    # The value starts "<key>|<input timestamp ms>|": time in system from the input's broker timestamp.
    latencies = [s.timestamp_ms - int(s.value.split(b"|", 2)[1]) for s in observed.first.values()]
    return PhaseResult.of(raws, started_ms, observed, intermediate=0, time_in_system_ms=_mean(latencies))


class OffsetTracker:
    """Per partition: offsets in fetch order, and which are done; commit the highest contiguous done one.

    This is faust's rule too: an offset is committed only when every offset before it is acknowledged.
    """

    def __init__(self) -> None:
        self.fetched: dict[Any, deque[int]] = {}
        self.done: dict[Any, set[int]] = {}
        self.since_commit = 0

    def on_fetch(self, tp: Any, offset: int) -> None:
        self.fetched.setdefault(tp, deque()).append(offset)
        self.done.setdefault(tp, set())

    def on_done(self, tp: Any, offset: int) -> None:
        if tp in self.done:  # not revoked meanwhile
            self.done[tp].add(offset)
            self.since_commit += 1

    def committable(self, only: set[Any] | None = None) -> dict[Any, int]:
        out = {}
        for tp, fetched in self.fetched.items():
            if only is not None and tp not in only:
                continue
            done = self.done[tp]
            last = None
            while fetched and fetched[0] in done:
                last = fetched.popleft()
                done.discard(last)
            if last is not None:
                out[tp] = last + 1
        if only is None:
            self.since_commit = 0
        return out

    def forget(self, tps: set[Any]) -> None:
        for tp in tps:
            self.fetched.pop(tp, None)
            self.done.pop(tp, None)


async def baseline_worker(args: argparse.Namespace) -> None:
    """One baseline process: consume, send one output per input, await its ack, commit like faust."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)

    tracker = OffsetTracker()
    commit_now = asyncio.Event()
    commit_lock = asyncio.Lock()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
        session_timeout_ms=int(args.session_timeout * 1000),
        heartbeat_interval_ms=int(args.heartbeat_interval * 1000),
    )
    producer = AIOKafkaProducer(
        bootstrap_servers=args.bootstrap, acks="all", linger_ms=0, max_batch_size=PRODUCER_MAX_BATCH
    )

    async def commit(only: set[Any] | None = None) -> None:
        async with commit_lock:
            offsets = tracker.committable(only)
            if offsets:
                await consumer.commit(offsets)

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: set[Any]) -> None:
            await commit(set(revoked))
            tracker.forget(set(revoked))

        async def on_partitions_assigned(self, assigned: set[Any]) -> None:
            return None

    queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=max(64, 4 * args.concurrency))
    header_value = b"0" * max(0, args.header_bytes - len("traceparent"))
    headers = [("traceparent", header_value)] if args.header_bytes else []

    async def fetcher() -> None:
        while True:
            batches = await consumer.getmany(timeout_ms=1000)
            for tp, records in batches.items():
                for rec in records:
                    tracker.on_fetch(tp, rec.offset)
                    await queue.put(rec)

    async def actor() -> None:
        while True:
            rec = await queue.get()
            head = (rec.key or b"") + b"|" + str(rec.timestamp).encode() + b"|"
            value = head + b"x" * max(0, args.value_bytes - len(head))
            fut = await producer.send(args.out_topic, key=rec.key, value=value, headers=headers)
            await fut
            tracker.on_done(TopicPartition(rec.topic, rec.partition), rec.offset)
            if tracker.since_commit >= COMMIT_EVERY:
                commit_now.set()

    async def committer() -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(commit_now.wait(), COMMIT_INTERVAL_S)
            commit_now.clear()
            await commit()

    await producer.start()
    consumer.subscribe([args.in_topic], listener=Listener())
    await consumer.start()
    tasks = [asyncio.create_task(fetcher()), asyncio.create_task(committer())]
    tasks += [asyncio.create_task(actor()) for _ in range(args.concurrency)]
    try:
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait([stopped, *tasks], return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            failure = task.exception() if task.done() else None
            if failure is not None:
                raise failure
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await commit()
        await consumer.stop()
        await producer.stop()


# --------------------------------------------------------------------------------------------------
# 4. Report
# --------------------------------------------------------------------------------------------------


def report(
    pj: PhaseResult,
    base: PhaseResult,
    cost: JudgeCost,
    *,
    broker: str,
    partitions: int,
    workers: int,
    concurrency: int,
) -> None:
    table = Table(
        title=f"pairjudge vs raw aiokafka: {pj.n} pairs, {broker}, {partitions} partitions, "
        f"{workers} worker process(es), concurrency {concurrency}"
    )
    table.add_column("")
    table.add_column("pairjudge (offline judge)", justify="right")
    table.add_column("raw aiokafka", justify="right")
    table.add_column("pairjudge / aiokafka", justify="right")

    def row(name: str, a: float, b: float, fmt: str, ratio: bool = True) -> None:
        table.add_row(name, format(a, fmt), format(b, fmt), f"{a / b:.3f}" if ratio and b else "")

    row("throughput, steady (first→last output), per s", pj.rate, base.rate, ",.1f")
    row("steady time (s)", pj.steady_s, base.steady_s, ".2f")
    row("throughput incl. worker start-up, per s", pj.rate_total, base.rate_total, ",.1f")
    row("total time from worker start (s)", pj.total_s, base.total_s, ".2f")
    row("input message size (bytes, mean)", pj.in_bytes, base.in_bytes, ",.0f", ratio=False)
    row("output value size (bytes, mean)", pj.out_value_bytes, base.out_value_bytes, ",.0f", ratio=False)
    row("output header size (bytes, mean)", pj.out_header_bytes, base.out_header_bytes, ",.0f", ratio=False)
    row("output messages per input", pj.out_messages / pj.n, base.out_messages / base.n, ".2f", ratio=False)
    row("duplicate outputs (redeliveries)", pj.duplicates, base.duplicates, "d", ratio=False)
    if pj.time_in_system_ms is not None and base.time_in_system_ms is not None:
        row("time in system, mean ms (includes backlog wait)", pj.time_in_system_ms, base.time_in_system_ms, ",.0f")
    console.print(table)

    mix = ", ".join(f"{name} {count}" for name, count in pj.detail.items())
    console.print(f"pairjudge outcomes: {mix}")

    judge = Table(
        title=f"offline judge in process, no Kafka "
        f"({cost.pairs} of the same pairs, one at a time, best of {JUDGE_ROUNDS})"
    )
    judge.add_column("")
    judge.add_column("pairs/s", justify="right")
    judge.add_column("ms/pair", justify="right")
    judge.add_column("pipeline ÷ this", justify="right")
    judge.add_row(
        "judge_pair + resolve_tiebreak",
        f"{cost.core_pairs_per_s:,.1f}",
        f"{1000 / cost.core_pairs_per_s:.2f}",
        f"{pj.rate / cost.core_pairs_per_s:.3f}",
    )
    judge.add_row(
        "worker handlers (decode, judge, encode, spans)",
        f"{cost.handler_pairs_per_s:,.1f}",
        f"{1000 / cost.handler_pairs_per_s:.2f}",
        f"{pj.rate / cost.handler_pairs_per_s:.3f}",
    )
    judge.add_row("pairjudge on Kafka (steady, above)", f"{pj.rate:,.1f}", f"{1000 / pj.rate:.2f}", "1.000")
    console.print(judge)
    console.print(
        f"Per pair: pairjudge on the broker {1000 / pj.rate:.2f} ms (wall, {workers} process(es)); the offline "
        f"judge alone {1000 / cost.core_pairs_per_s:.2f} ms (one core); raw aiokafka consume-produce-commit "
        f"{1000 / base.rate:.2f} ms per message. Tie-break share in the sample: {cost.tiebreak_share:.0%}."
    )


def audit_report(with_audit: PhaseResult, without: PhaseResult) -> None:
    """What the drift audit's two agents cost: the same pairs, with and without them, in one run."""
    table = Table(title="the drift audit's cost: the same pairs, workers with and without the audit agents")
    table.add_column("")
    table.add_column("audit on", justify="right")
    table.add_column("audit off", justify="right")
    table.add_column("on / off", justify="right")
    for name, a, b in (
        ("throughput, steady, per s", with_audit.rate, without.rate),
        ("steady time (s)", with_audit.steady_s, without.steady_s),
        ("total time from worker start (s)", with_audit.total_s, without.total_s),
    ):
        table.add_row(name, f"{a:,.2f}", f"{b:,.2f}", f"{a / b:.3f}" if b else "")
    console.print(table)


# --------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> None:
    base = load_settings()
    with work_dir("pairjudge-bench-", keep=args.keep) as work:
        raws = many_pairs(args.pairs, f"bench-{work.path.name}")
        sample = raws[: args.judge_sample] if args.judge_sample > 0 else raws
        console.print(f"[bold]judge[/bold]: timing the offline judge in process over {len(sample)} pairs")
        cost = await judge_cost(sample, base)

        async with bench_broker(work.path, bootstrap=args.bootstrap, kind=args.broker) as broker:
            console.print(f"[bold]broker[/bold]: {broker.name} (bootstrap {broker.bootstrap}); work dir {work.path}")
            settings = run_settings(base, broker, work.path, tag="bench", kafka={"partitions": args.partitions})
            await create_topics(broker.bootstrap, topic_specs(settings))
            raws = stamp_created_at(raws)
            pj = await run_pairjudge(settings, raws, args.workers, args.concurrency, work.path, args.timeout)
            without_audit: PhaseResult | None = None
            if args.audit_compare:
                # The same pairs through workers that run no audit agents (their records still go out).
                quiet = run_settings(
                    base,
                    broker,
                    work.path / "no-audit",
                    tag="bench-noaudit",
                    kafka={"partitions": args.partitions},
                    audit={"enabled": False},
                )
                await create_topics(broker.bootstrap, topic_specs(quiet))
                without_audit = await run_pairjudge(
                    quiet, raws, args.workers, args.concurrency, work.path / "no-audit", args.timeout
                )
            baseline = await run_baseline(
                settings,
                raws,
                args.workers,
                args.concurrency,
                round(pj.out_value_bytes),
                round(pj.out_header_bytes),
                work.path,
                args.timeout,
            )
        report(
            pj,
            baseline,
            cost,
            broker=broker.name,
            partitions=settings.kafka.partitions,
            workers=args.workers,
            concurrency=args.concurrency,
        )
        if without_audit is not None:
            audit_report(pj, without_audit)
        work.ok = True


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    add_broker_args(parser, tansu=True)
    parser.add_argument("--pairs", type=int, default=1000, help="pairs to judge (default 1000)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--concurrency", type=int, default=16, help="agent concurrency per worker (default 16)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions per topic (default 4)")
    parser.add_argument(
        "--judge-sample", type=int, default=120, help="pairs timed in process without Kafka (0 = all; default 120)"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for each phase's outputs")
    parser.add_argument(
        "--no-audit-compare",
        dest="audit_compare",
        action="store_false",
        help="skip the second pairjudge phase with the audit agents off",
    )
    # Baseline mode: this script re-runs itself as the raw aiokafka consumer processes.
    parser.add_argument("--baseline-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--in-topic", help=argparse.SUPPRESS)
    parser.add_argument("--out-topic", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    parser.add_argument("--value-bytes", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--header-bytes", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--session-timeout", type=float, default=10.0, help=argparse.SUPPRESS)
    parser.add_argument("--heartbeat-interval", type=float, default=1.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.pairs < 2:
        parser.error("--pairs must be at least 2 (throughput is measured first output to last)")
    if args.workers < 1 or args.concurrency < 1 or args.partitions < 1:
        parser.error("--workers, --concurrency and --partitions must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    quiet_kafka_client()
    if args.baseline_worker:
        asyncio.run(baseline_worker(args))
    else:
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
