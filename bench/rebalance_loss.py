"""Stress the at-least-once promise across rebalances and crashes: does any pair go missing on real Apache Kafka?

Each run creates its own 4-partition topics and consumer group (a unique prefix), and two judges can
drive the workers:

``--judge offline`` (the default): the deterministic offline judge, uniform latency. Part of ~1000 pairs
goes on the pairs topic up front and the rest streams in while workers churn::

    start w1 · start w2 · stop w1 · start w3 · stop w2 · ... (every start and stop is a rebalance)

By default the rest of the pairs trickle in steadily; ``--bursts`` instead drops a backlog on the
topic a second before every start/stop, so each rebalance lands on fetched-but-unprocessed records.
One stop per run can be a SIGKILL instead of a SIGTERM (``--crash-every``).

``--judge llm``: an LLM-like judge. The bench starts an OpenAI-compatible server in a process of its
own (``pairjudge_dev.slow_judge_server``) with seeded, heavy-tailed per-call latency (lognormal,
median 0.3 s, plus a 1 % tail of 5-30 s) that answers a share of calls (``--flip-share``) with a random
winner and confidence, as a model sampling at temperature > 0 does: a pair judged twice can end
differently. Three workers (``--workers``) with concurrency 16 judge over HTTP while the pairs stream in
for ``--duration`` seconds, and at random moments (every ``--kill-min``..``--kill-max`` s, seeded) a
random worker is SIGKILLed and replaced. Uneven latency with concurrency above 1 is what makes later
pairs finish first, which is when a commit can move past a pair still in flight.

Both modes check the same things:

- **lost**: the last worker drains, the final-outcome topics are read back, and every pair with no
  final outcome is located: the stage it stopped at, partition and offset, which workers' traces show
  it was judged, and the group's committed offset there. Committed past it = LOST (skipped, never to
  come back); not committed = stuck (a live worker would still process it: liveness, not loss);
- **commit violations**: the group's committed offsets on the pairs and tie-break topics are polled all
  run long (``--poll``, admin ``list_consumer_group_offsets``), and every distinct (partition, committed
  offset, time first seen) is kept. At the end, every input below each sighting must have had its
  outcome published *by the time of that sighting*: a final outcome (verdict, review, dead letter), or
  for a pair, a tie-break request that a final outcome follows. Anything else is "committed past an
  unjudged pair", even when the pair was judged later and nothing was lost in the end. A worker commits
  only after the broker has acknowledged the outputs, and an output's broker timestamp is taken before
  it is sent, so a violation reported here is a real one;
- **conflicting**: a pair with two different final outcomes (a different kind, or verdicts for
  different winners): a re-delivered pair was judged again and published again instead of re-publishing
  its stored outcome. With the offline judge that cannot show (it always answers the same); with the
  LLM-like judge it does;
- **duplicates**: extra copies of a final outcome from re-delivery after a rebalance (faust#502):
  expected and harmless, pair ids dedupe.

A worker that exits on its own aborts the bench (exit 2): such a run says nothing about offsets.

The aiokafka under test is whatever the interpreter running this script has: workers are started
with ``sys.executable -m pairjudge.streams.cli worker``. Exit status: 0 nothing lost, stuck, conflicting or
committed early; 1 any of those; 2 the harness itself failed.

    python -m bench.rebalance_loss --runs 5 --crash-every 2
    python -m bench.rebalance_loss --runs 3 --bursts --pairs 1500 --crash-every 2
    python -m bench.rebalance_loss --judge llm --runs 3 --bootstrap 127.0.0.1:9092
    python -m bench.rebalance_loss --judge llm --pairs 3000 --duration 90 --kill-min 3 --kill-max 8
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import importlib.metadata
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from pairjudge.streams.cli.demo import start_worker, stop_process
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka import collector as streams_collector
from pairjudge.streams.kafka.admin import create_topics
from pairjudge.streams.kafka.collector import Outcomes
from pairjudge.streams.kafka.topics import FINAL_KINDS, topic_specs
from pairjudge_dev.bench import bench_broker
from pairjudge_dev.pairgen import many_pairs
from pairjudge_dev.slow_judge_server import Behaviour, JudgeServerProcess, Latency, Stats
from pairjudge_dev.workers import run_settings

PARTITIONS = 4
JudgeMode = Literal["offline", "llm"]
#: The stages' input topics: the group commits on both.
INPUT_KINDS = ("pairs", "tiebreak")


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

    @property
    def live(self) -> bool:
        return self.stopped_at is None and self.died_early is None


@dataclass
class Timeline:
    """What happened when, in seconds since the run started, for reading next to the worker logs."""

    started: float = field(default_factory=time.monotonic)
    #: The same start on the wall clock, for broker timestamps.
    started_wall: float = field(default_factory=time.time)
    events: list[tuple[float, str]] = field(default_factory=list)

    def note(self, what: str) -> None:
        at = round(time.monotonic() - self.started, 2)
        self.events.append((at, what))
        print(f"    [{at:7.2f}s] {what}", flush=True)

    def since_start(self, wall: float) -> float:
        return round(wall - self.started_wall, 2)


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
        if worker.live and worker.proc.poll() is not None:
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
# Observers: committed offsets, and everything published
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sighting:
    """The group's committed offset for one input partition, first seen at ``at`` (epoch seconds, taken
    when the answer arrived: the commit was made no later than that)."""

    topic: str
    partition: int
    committed: int
    at: float


class CommitWatcher:
    """Polls the group's committed offsets and keeps every distinct value with the time it was first seen."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], poll_s: float) -> None:
        self.bootstrap, self.group, self.poll_s = bootstrap, group, poll_s
        self.tps = [TopicPartition(t, p) for t in topics for p in range(PARTITIONS)]
        self.sightings: list[Sighting] = []
        self.polls = 0
        self.errors: list[str] = []
        self._last: dict[TopicPartition, int] = {}

    async def run(self, stop: asyncio.Event) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        await admin.start()
        try:
            while not stop.is_set():
                await self._poll(admin)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.poll_s)
            await self._poll(admin)  # the last word: what the group holds once every worker has stopped
        finally:
            await admin.close()

    async def _poll(self, admin: AIOKafkaAdminClient) -> None:
        try:
            offsets = await admin.list_consumer_group_offsets(self.group, partitions=self.tps)
        except KafkaError as exc:  # a coordinator moving or loading: ask again next time, but say so
            self.errors.append(repr(exc))
            return
        at = time.time()
        self.polls += 1
        for tp, meta in offsets.items():
            if meta is not None and meta.offset >= 0 and self._last.get(tp) != meta.offset:
                self._last[tp] = meta.offset
                self.sightings.append(Sighting(tp.topic, tp.partition, meta.offset, at))


@dataclass(frozen=True, slots=True)
class Published:
    """One record on an outcome topic (or the tie-break topic), with its broker timestamp."""

    kind: str
    pair_id: str
    at: float
    partition: int
    offset: int
    #: The winning candidate of a verdict; None for every other kind.
    winner: str | None


class OutcomeLog:
    """Reads the final-outcome topics and the tie-break topic from the start, all run long, without a
    consumer group (an observer must neither take partitions from the workers nor commit)."""

    def __init__(self, settings: Settings, expected: set[str]) -> None:
        self.settings = settings
        self.kind_by_topic = {settings.topics.name(k): k for k in (*FINAL_KINDS, "tiebreak")}
        self.records: list[Published] = []
        #: The project's own de-duplicating view of final outcomes (decided, duplicates, kinds seen).
        self.outcomes = Outcomes(expected=expected)
        #: time.monotonic() of the last new decided pair, for "no progress" waits.
        self.progress_at = time.monotonic()

    async def run(self, stop: asyncio.Event) -> None:
        """Read until ``stop`` is set, then on to the end offsets of that moment, and return."""
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.settings.kafka.bootstrap_servers, enable_auto_commit=False, max_poll_records=2000
        )
        await consumer.start()
        try:
            tps = [TopicPartition(t, p) for t in self.kind_by_topic for p in range(PARTITIONS)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            ends: dict[TopicPartition, int] | None = None
            while True:
                if ends is None and stop.is_set():
                    ends = await consumer.end_offsets(tps)
                if ends is not None and all([await consumer.position(tp) >= ends[tp] for tp in tps]):
                    return
                batches = await consumer.getmany(timeout_ms=200, max_records=2000)
                for tp, messages in batches.items():
                    for message in messages:
                        self._add(self.kind_by_topic[tp.topic], tp.partition, message)
        finally:
            await consumer.stop()

    def _add(self, kind: str, partition: int, message: Any) -> None:
        try:
            event = json.loads(message.value or b"{}")
        except ValueError:
            event = {}
        if not isinstance(event, dict):
            event = {}
        key = message.key.decode("utf-8", "replace") if message.key else None
        if kind in FINAL_KINDS:
            decided = len(self.outcomes.final)
            self.outcomes.add(kind, event, key)
            if len(self.outcomes.final) > decided:
                self.progress_at = time.monotonic()
            if kind == "review" and event.get("audit"):
                return  # an audit copy of a verdict is not an outcome of its own
        pair_id = str(event.get("pair_id") or key or "?")
        winner = event.get("winner") if kind == "verdicts" else None
        self.records.append(
            Published(
                kind, pair_id, message.timestamp / 1000, partition, message.offset, str(winner) if winner else None
            )
        )

    def finals(self) -> dict[str, list[Published]]:
        out: dict[str, list[Published]] = {}
        for record in self.records:
            if record.kind != "tiebreak":
                out.setdefault(record.pair_id, []).append(record)
        return out

    def tiebreaks(self) -> list[Published]:
        return [r for r in self.records if r.kind == "tiebreak"]


async def _wait_decided(log: OutcomeLog, expected: set[str], *, timeout: float, idle: float) -> None:
    """Until every pair has a final outcome, or nothing new was decided for ``idle`` seconds (the rest
    will not come: lost or stuck), or ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if expected <= log.outcomes.final.keys() or time.monotonic() - log.progress_at > idle:
            return
        await asyncio.sleep(0.5)


# --------------------------------------------------------------------------------------------------
# Checks: commits against what was published, and conflicting outcomes
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Violation:
    """An input the group committed past before its outcome was published."""

    topic: str
    partition: int
    offset: int
    pair_id: str
    committed: int
    #: Seconds since the run started: when the commit past it was first seen, and when its outcome came.
    seen_at: float
    judged_at: float | None


def _judged_times(log: OutcomeLog) -> tuple[dict[str, float], dict[str, float]]:
    """When each pair's input stopped needing a worker, per stage (epoch s; absent = never).

    A pair is done at the pairs stage once a final outcome or a tie-break request for it is out, the
    latter only if a final outcome follows at all (else it was lost at the tie-break stage: the pair
    counts as unjudged there as well). A tie-break request is done once a final outcome is out.
    """
    final_at: dict[str, float] = {}
    tiebreak_at: dict[str, float] = {}
    for record in log.records:
        into = tiebreak_at if record.kind == "tiebreak" else final_at
        into[record.pair_id] = min(record.at, into.get(record.pair_id, math.inf))
    primary = {pid: min(at, tiebreak_at.get(pid, math.inf)) for pid, at in final_at.items()}
    return primary, final_at


def commit_violations(
    sightings: list[Sighting], inputs: dict[tuple[str, int], list[tuple[int, str]]], judged: dict[str, dict[str, float]]
) -> list[Violation]:
    """Every input below a sighted committed offset whose outcome was not yet published at that sighting.

    ``inputs``: (topic, partition) -> [(offset, pair id)]; ``judged``: topic -> pair id -> when done.
    """
    found: dict[tuple[str, int, int], Violation] = {}
    by_input: dict[tuple[str, int], tuple[list[int], list[str], list[float], list[float]]] = {}
    for (topic, partition), rows in inputs.items():
        rows = sorted(rows)
        times = [judged[topic].get(pid, math.inf) for _, pid in rows]
        running, prefix_max = -math.inf, []
        for at in times:
            running = max(running, at)
            prefix_max.append(running)
        by_input[(topic, partition)] = ([o for o, _ in rows], [p for _, p in rows], times, prefix_max)
    for seen in sightings:
        offsets, pids, times, prefix_max = by_input.get((seen.topic, seen.partition), ([], [], [], []))
        below = bisect.bisect_left(offsets, seen.committed)  # inputs with offset < committed
        if below == 0 or prefix_max[below - 1] <= seen.at:
            continue  # everything below the commit was out before it was seen: fine
        for i in range(below):
            key = (seen.topic, seen.partition, offsets[i])
            if times[i] > seen.at and key not in found:
                found[key] = Violation(
                    seen.topic, seen.partition, offsets[i], pids[i], seen.committed, seen.at, _finite(times[i])
                )
    return sorted(found.values(), key=lambda v: (v.topic, v.partition, v.offset))


def _finite(at: float) -> float | None:
    return None if math.isinf(at) else at


def conflicts(log: OutcomeLog) -> dict[str, list[str]]:
    """Pairs with more than one distinct final outcome: a different kind, or a different winner."""
    out: dict[str, list[str]] = {}
    for pid, records in log.finals().items():
        distinct = sorted({f"{r.kind}:{r.winner}" if r.winner else r.kind for r in records})
        if len(distinct) > 1:
            out[pid] = distinct
    return out


# --------------------------------------------------------------------------------------------------
# Diagnostics for missing pairs
# --------------------------------------------------------------------------------------------------


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
# The LLM-like judge
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LlmJudgePlan:
    seed: int
    median_s: float
    tail_share: float
    tail_min_s: float
    tail_max_s: float
    flip_share: float


def _start_llm_judge(plan: LlmJudgePlan, log_path: Path) -> JudgeServerProcess:
    behaviour = Behaviour(
        hold_marker=None,  # nothing is held here: the latency is all random
        latency=Latency(
            median_s=plan.median_s,
            tail_share=plan.tail_share,
            tail_min_s=plan.tail_min_s,
            tail_max_s=plan.tail_max_s,
        ),
        flip_share=plan.flip_share,
        seed=plan.seed,
    )
    return JudgeServerProcess(behaviour, log_path)


def _llm_judge_settings(base_url: str, plan: Plan) -> dict[str, Any]:
    return {
        "kind": "openai",
        "base_url": base_url,
        "model": "bench-llm",
        "temperature": 0.7,  # what the server imitates; it does not read it
        # Longer than the longest tail call, so the tail is a slow judge, not a timeout.
        "read_timeout_s": plan.llm.tail_max_s + 30 if plan.llm else 60.0,
        "max_retries": 2,
        # Off: a cache shared by the workers of a host would answer a re-judged pair from the first reply
        # and hide non-idempotent outcomes; across hosts, or after an eviction, the judge is asked again.
        "cache_enabled": False,
        "max_concurrency": 2 * plan.concurrency,
    }


# --------------------------------------------------------------------------------------------------
# One run
# --------------------------------------------------------------------------------------------------


@dataclass
class RunReport:
    run: int
    run_dir: str
    judge: str
    aiokafka: str
    sent: int
    decided: int
    missing: list[str]
    duplicates: int
    #: pair id -> its distinct final outcomes ("verdicts:<winner>", "review", "deadletter").
    conflicting: dict[str, list[str]]
    crash: bool
    kills: int
    rebalances: int
    wall_s: float
    violations: list[dict[str, Any]] = field(default_factory=list)
    commit_sightings: int = 0
    #: Every sighting: (input topic kind, partition, committed offset, seconds since the run started).
    commits: list[tuple[str, int, int, float]] = field(default_factory=list)
    commit_polls: int = 0
    commit_poll_errors: int = 0
    judge_server: dict[str, Any] = field(default_factory=dict)
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

    @property
    def refused(self) -> int:
        """Requests the LLM-like judge answered 400: a worker sent a prompt it does not take. Those pairs end
        as dead letters ("judge_rejected") instead of being judged, so the run no longer tests what it says."""
        return int(self.judge_server.get("bad", 0))

    @property
    def failed(self) -> bool:
        return bool(self.missing or self.conflicting or self.violations or self.refused)


@dataclass(frozen=True, slots=True)
class Plan:
    judge: JudgeMode
    pairs: int
    cycles: int
    interval: float
    preproduce: float
    concurrency: int
    session_timeout: float
    collect_timeout: float
    idle_timeout: float
    log_level: str
    bursts: bool
    burst_lead: float
    self_test_skip: int
    poll: float
    workers: int
    duration: float
    kill_min: float
    kill_max: float
    seed: int
    llm: LlmJudgePlan | None


@dataclass
class Run:
    """What one run's churn works with."""

    bootstrap: str
    run_dir: Path
    base: Settings
    plan: Plan
    timeline: Timeline
    events: list[tuple[str, bytes]]
    placements: dict[str, Placement] = field(default_factory=dict)
    workers: list[Worker] = field(default_factory=list)
    rebalances: int = 0
    kills: int = 0

    @property
    def pairs_topic(self) -> str:
        return self.base.topics.name("pairs")

    async def launch(self) -> None:
        self.workers.append(
            await asyncio.to_thread(_launch, self.base, self.run_dir, len(self.workers) + 1, self.timeline)
        )
        self.rebalances += 1

    async def stop(self, worker: Worker, *, crash: bool) -> None:
        await asyncio.to_thread(_stop, worker, crash=crash, timeline=self.timeline)
        self.rebalances += 1
        self.kills += crash

    async def produce(self, events: list[tuple[str, bytes]], *, over_seconds: float) -> None:
        await _produce(self.bootstrap, self.pairs_topic, events, self.placements, over_seconds=over_seconds)


async def _churn_offline(run: Run, *, crash: bool) -> None:
    """start w1 · start w2 · stop w1 · start w3 · stop w2 · ..., one stop a SIGKILL when ``crash``."""
    plan, timeline, events = run.plan, run.timeline, run.events
    head = int(len(events) * plan.preproduce)
    crash_cycle = plan.cycles // 2 if crash else -1
    producing: asyncio.Task[None] | None = None
    try:
        await run.produce(events[:head], over_seconds=0)
        timeline.note(f"pre-produced {head} pairs on {run.pairs_topic}")
        if plan.self_test_skip:
            tp = TopicPartition(run.pairs_topic, 0)
            await _commit_ahead(run.bootstrap, run.base.worker.app_id, tp, plan.self_test_skip)
            timeline.note(
                f"self-test: committed offset {plan.self_test_skip} on {run.pairs_topic}[0] before any worker"
            )
        await run.launch()
        rest = events[head:]
        steps = 2 * plan.cycles
        bursts = [rest[i * len(rest) // steps : (i + 1) * len(rest) // steps] for i in range(steps)]

        async def before_step(step: int) -> None:
            # Bursts: a backlog lands just before every start/stop, so each rebalance revokes partitions
            # with fetched-but-unprocessed records and agents mid-pair (the case faust#221/#223 is about).
            if plan.bursts:
                await run.produce(bursts[step], over_seconds=0)
                timeline.note(f"burst of {len(bursts[step])} pairs")
                await asyncio.sleep(plan.burst_lead)

        if not plan.bursts:
            # Steady: the rest flows in for the whole churn, so every rebalance happens with pairs in flight.
            producing = asyncio.create_task(run.produce(rest, over_seconds=plan.interval * (1 + steps)))
        await asyncio.sleep(plan.interval)
        _check_alive(run.workers, timeline)
        for cycle in range(plan.cycles):
            await before_step(2 * cycle)
            await run.launch()
            await asyncio.sleep(plan.interval)
            _check_alive(run.workers, timeline)
            oldest = next(w for w in run.workers if w.live)
            await before_step(2 * cycle + 1)
            await run.stop(oldest, crash=cycle == crash_cycle)
            await asyncio.sleep(plan.interval)
            _check_alive(run.workers, timeline)
        if producing is not None:
            await producing
    finally:
        if producing is not None and not producing.done():
            producing.cancel()


async def _churn_llm(run: Run, rng: random.Random) -> None:
    """``plan.workers`` workers; while the pairs stream in, SIGKILL a random one at random moments and
    start a replacement at once, so the group keeps its size and every crash is also a rebalance."""
    plan, timeline = run.plan, run.timeline
    for _ in range(plan.workers):
        await run.launch()
    producing = asyncio.create_task(run.produce(run.events, over_seconds=plan.duration))
    try:
        while not producing.done():
            await asyncio.wait([producing], timeout=rng.uniform(plan.kill_min, plan.kill_max))
            _check_alive(run.workers, timeline)
            if producing.done():
                break
            victim = rng.choice([w for w in run.workers if w.live])
            await run.stop(victim, crash=True)
            await run.launch()
        await producing
    finally:
        if not producing.done():
            producing.cancel()


def _run_settings(bootstrap: str, run_dir: Path, plan: Plan, judge_url: str | None) -> Settings:
    sections: dict[str, dict[str, Any]] = {
        "kafka": {"partitions": PARTITIONS, "session_timeout_s": plan.session_timeout, "heartbeat_interval_s": 1.0},
        "worker": {"concurrency": plan.concurrency, "log_level": plan.log_level},
        "telemetry": {"exporter": "file", "file_path": run_dir / "traces.jsonl"},
    }
    if judge_url is not None:
        sections["judge"] = _llm_judge_settings(judge_url, plan)
    return run_settings(Settings(), bootstrap, run_dir, tag="rb", **sections)


async def run_once(
    bootstrap: str, run_dir: Path, number: int, plan: Plan, *, crash: bool, judge: JudgeServerProcess | None
) -> RunReport:
    base = _run_settings(bootstrap, run_dir, plan, judge.base_url if judge else None)
    await asyncio.to_thread(run_dir.mkdir, parents=True, exist_ok=True)
    timeline = Timeline()
    await create_topics(bootstrap, topic_specs(base))
    raw = many_pairs(plan.pairs, base.topics.prefix)
    run = Run(bootstrap, run_dir, base, plan, timeline, [(str(json.loads(r)["pair_id"]), r) for r in raw])
    expected = {pid for pid, _ in run.events}
    input_topics = [base.topics.name(k) for k in INPUT_KINDS]
    watcher = CommitWatcher(bootstrap, base.worker.app_id, input_topics, plan.poll)
    log = OutcomeLog(base, expected)
    stop_watching, stop_reading = asyncio.Event(), asyncio.Event()
    observers = [asyncio.create_task(watcher.run(stop_watching)), asyncio.create_task(log.run(stop_reading))]
    server_before = await asyncio.to_thread(judge.stats) if judge else None
    try:
        if plan.judge == "offline":
            await _churn_offline(run, crash=crash)
        else:
            await _churn_llm(run, random.Random(f"{plan.seed}-{number}"))
        live = [w.number for w in run.workers if w.live]
        timeline.note(f"all {len(run.placements)} pairs produced; workers {live} drain")
        await _wait_decided(log, expected, timeout=plan.collect_timeout, idle=plan.idle_timeout)
        timeline.note(f"{len(log.outcomes.final)}/{len(expected)} decided, {log.outcomes.duplicates} duplicates")
        _check_alive(run.workers, timeline)
        # Let the survivors commit what they acked (commit interval 1 s) before reading the group's offsets.
        await asyncio.sleep(3)
        offsets = await _group_offsets(bootstrap, base.worker.app_id, input_topics)
    finally:
        for w in run.workers:
            if w.live:
                await asyncio.to_thread(_stop, w, crash=False, timeline=timeline)
        # Observers stop last: a graceful stop commits too, and its outputs must be read back.
        stop_watching.set()
        stop_reading.set()
        await asyncio.wait_for(asyncio.gather(*observers, return_exceptions=True), timeout=60)
    for observer in observers:
        observer.result()  # an observer that failed makes the run's figures meaningless: harness error
    report = _report(run, number, crash, log, watcher, offsets)
    if judge is not None and server_before is not None:
        report.judge_server = _delta(server_before, await asyncio.to_thread(judge.stats))
    if report.missing:
        tiebreaks: dict[str, list[Placement]] = {}
        for r in log.tiebreaks():
            tiebreaks.setdefault(r.pair_id, []).append(Placement(r.partition, r.offset))
        judged = _judged_by(run.workers)
        for pid in report.missing:
            report.missing_detail[pid] = _locate(
                run.placements.get(pid), tiebreaks.get(pid, []), judged.get(pid, {}), offsets, base
            )
    (run_dir / "report.json").write_text(json.dumps(asdict(report), indent=2))
    return report


def _report(
    run: Run, number: int, crash: bool, log: OutcomeLog, watcher: CommitWatcher, offsets: dict[str, dict[str, int]]
) -> RunReport:
    topics = run.base.topics
    primary_done, tiebreak_done = _judged_times(log)
    inputs: dict[tuple[str, int], list[tuple[int, str]]] = {}
    for pid, placed in run.placements.items():
        inputs.setdefault((topics.name("pairs"), placed.partition), []).append((placed.offset, pid))
    for r in log.tiebreaks():
        inputs.setdefault((topics.name("tiebreak"), r.partition), []).append((r.offset, r.pair_id))
    judged = {topics.name("pairs"): primary_done, topics.name("tiebreak"): tiebreak_done}
    violations = commit_violations(watcher.sightings, inputs, judged)
    since = run.timeline.since_start
    return RunReport(
        run=number,
        run_dir=str(run.run_dir),
        judge=run.plan.judge,
        aiokafka=importlib.metadata.version("aiokafka"),
        sent=len(run.placements),
        decided=len(log.outcomes.final),
        missing=sorted(log.outcomes.missing),
        duplicates=log.outcomes.duplicates,
        conflicting=conflicts(log),
        crash=crash,
        kills=run.kills,
        rebalances=run.rebalances,
        wall_s=round(time.monotonic() - run.timeline.started, 1),
        violations=[
            asdict(v) | {"seen_at": since(v.seen_at), "judged_at": since(v.judged_at) if v.judged_at else None}
            for v in violations
        ],
        commit_sightings=len(watcher.sightings),
        commits=[(s.topic.rsplit(".", 1)[-1], s.partition, s.committed, since(s.at)) for s in watcher.sightings],
        commit_polls=watcher.polls,
        commit_poll_errors=len(watcher.errors),
        offsets=offsets,
        timeline=run.timeline.events,
    )


def _delta(before: Stats, after: Stats) -> dict[str, Any]:
    """The judge server's counters for one run (it serves every run of the bench)."""
    counters = ("requests", "bad", "flipped", "tail_calls")
    return {name: getattr(after, name) - getattr(before, name) for name in counters} | {
        "peak_in_flight": after.peak_in_flight
    }


# --------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------


def _print_run(report: RunReport, run_dir: Path) -> None:
    print(
        f"  -> sent {report.sent}, decided {report.decided}, LOST {report.lost}, stuck {report.stuck}, "
        f"duplicates {report.duplicates}, conflicting {len(report.conflicting)}, "
        f"commit violations {len(report.violations)}, kills {report.kills}",
        flush=True,
    )
    if report.judge_server:
        print(f"     judge server: {json.dumps(report.judge_server)}", flush=True)
    for pid, detail in list(report.missing_detail.items())[:10]:
        print(f"     missing {pid}: {json.dumps(detail)}", flush=True)
    for pid, kinds in list(report.conflicting.items())[:5]:
        print(f"     conflicting {pid}: {', '.join(kinds)}", flush=True)
    for v in report.violations[:10]:
        judged = "never" if v["judged_at"] is None else f"at {v['judged_at']}s"
        print(
            f"     committed past an unjudged pair: {v['topic']}[{v['partition']}] offset {v['offset']} "
            f"({v['pair_id']}): committed {v['committed']} seen at {v['seen_at']}s, outcome {judged}",
            flush=True,
        )
    hidden = max(0, len(report.missing) - 10) + max(0, len(report.violations) - 10)
    if hidden:
        print(f"     ... more in {run_dir / 'report.json'}", flush=True)


def _print_table(reports: list[RunReport], write: Callable[[str], None]) -> None:
    write(
        f"{'run':>3} {'judge':>7} {'aiokafka':>8} {'kills':>5} {'rebal':>5} {'sent':>5} {'decided':>7} "
        f"{'lost':>4} {'stuck':>5} {'dups':>5} {'confl':>5} {'viol':>5}  wall"
    )
    for r in reports:
        write(
            f"{r.run:>3} {r.judge:>7} {r.aiokafka:>8} {r.kills:>5} {r.rebalances:>5} {r.sent:>5} {r.decided:>7} "
            f"{r.lost:>4} {r.stuck:>5} {r.duplicates:>5} {len(r.conflicting):>5} {len(r.violations):>5}  "
            f"{r.wall_s:.0f}s"
        )
    write(
        f"total: {len(reports)} runs, {sum(r.sent for r in reports)} sent, "
        f"{sum(r.decided for r in reports)} decided, {sum(r.lost for r in reports)} lost in "
        f"{sum(1 for r in reports if r.lost)} runs, {sum(r.stuck for r in reports)} stuck, "
        f"{sum(r.duplicates for r in reports)} duplicates, {sum(len(r.conflicting) for r in reports)} conflicting, "
        f"{sum(len(r.violations) for r in reports)} commit violations in "
        f"{sum(1 for r in reports if r.violations)} runs, {sum(r.kills for r in reports)} kills"
    )


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--bootstrap", help="a running Kafka; default: start Apache Kafka in the work dir")
    parser.add_argument("--judge", choices=("offline", "llm"), default="offline", help="see the module docstring")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--pairs", type=int, help="default: 1000 (offline), 2000 (llm)")
    parser.add_argument("--concurrency", type=int, help="per worker; default: 8 (offline), 16 (llm)")
    parser.add_argument("--session-timeout", type=float, help="default: 10 (offline), 6 (llm; Kafka's minimum)")
    parser.add_argument("--collect-timeout", type=float, default=300.0, help="most seconds to wait for outcomes")
    parser.add_argument(
        "--idle-timeout",
        type=float,
        help="stop waiting once no pair was decided for this long; default: 60, or the judge's tail + 60 (llm)",
    )
    parser.add_argument("--poll", type=float, default=0.15, help="seconds between committed-offset polls")
    parser.add_argument("--worker-log-level", default="INFO")
    offline = parser.add_argument_group("offline judge: scripted churn")
    offline.add_argument("--cycles", type=int, default=3, help="start-new / stop-oldest cycles per run")
    offline.add_argument("--interval", type=float, default=7.0, help="seconds between churn steps")
    offline.add_argument("--preproduce", type=float, default=0.3, help="share of pairs sent before worker 1")
    offline.add_argument(
        "--bursts", action="store_true", help="send the rest in bursts just before each churn step, not steadily"
    )
    offline.add_argument("--burst-lead", type=float, default=1.0, help="seconds between a burst and its step")
    offline.add_argument(
        "--self-test-skip",
        type=int,
        default=0,
        metavar="N",
        help="negative control: commit past the first N records of pairs[0] up front; must report N lost",
    )
    offline.add_argument("--crash-every", type=int, default=0, help="SIGKILL one worker in every Nth run (0: never)")
    llm = parser.add_argument_group("llm judge: random crashes")
    llm.add_argument("--workers", type=int, default=3, help="workers kept running")
    llm.add_argument("--duration", type=float, default=60.0, help="seconds over which the pairs are sent")
    llm.add_argument("--kill-min", type=float, default=4.0, help="least seconds between two SIGKILLs")
    llm.add_argument("--kill-max", type=float, default=12.0, help="most seconds between two SIGKILLs")
    llm.add_argument("--seed", type=int, default=1, help="seeds the kills and the judge server")
    llm.add_argument("--latency-median", type=float, default=0.3, help="judge call latency, lognormal median (s)")
    llm.add_argument("--tail-share", type=float, default=0.01, help="share of judge calls in the slow tail")
    llm.add_argument("--tail-min", type=float, default=5.0)
    llm.add_argument("--tail-max", type=float, default=30.0)
    llm.add_argument(
        "--flip-share", type=float, default=0.25, help="share of judge calls answered with a random winner"
    )
    parser.add_argument("--workdir", type=Path, help="default: a new temp dir")
    parser.add_argument("--keep", choices=("failed", "all"), default="failed", help="run dirs to keep")
    parser.add_argument("--json", type=Path, help="also write every run's report here")
    return parser.parse_args(argv)


def _plan(args: argparse.Namespace) -> Plan:
    is_llm = args.judge == "llm"
    llm = (
        LlmJudgePlan(args.seed, args.latency_median, args.tail_share, args.tail_min, args.tail_max, args.flip_share)
        if is_llm
        else None
    )
    # A pair in the tail can take tail_max per call, and again in the tie-break: wait out more than that.
    idle = args.idle_timeout if args.idle_timeout is not None else (args.tail_max + 60.0 if is_llm else 60.0)
    return Plan(
        judge=args.judge,
        pairs=args.pairs if args.pairs is not None else (2000 if is_llm else 1000),
        cycles=args.cycles,
        interval=args.interval,
        preproduce=args.preproduce,
        concurrency=args.concurrency if args.concurrency is not None else (16 if is_llm else 8),
        session_timeout=args.session_timeout if args.session_timeout is not None else (6.0 if is_llm else 10.0),
        collect_timeout=args.collect_timeout,
        idle_timeout=idle,
        log_level=args.worker_log_level,
        bursts=args.bursts,
        burst_lead=args.burst_lead,
        self_test_skip=args.self_test_skip,
        poll=args.poll,
        workers=args.workers,
        duration=args.duration,
        kill_min=args.kill_min,
        kill_max=args.kill_max,
        seed=args.seed,
        llm=llm,
    )


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
        f"python {sys.executable}; code {Path(streams_collector.__file__).parents[2]}; work dir {workdir}",
        flush=True,
    )
    plan = _plan(args)
    judge: JudgeServerProcess | None = None
    reports: list[RunReport] = []
    async with bench_broker(workdir, bootstrap=args.bootstrap) as broker:
        print(f"{broker.name} (bootstrap {broker.bootstrap})", flush=True)
        try:
            if plan.llm is not None:
                judge = await asyncio.to_thread(_start_llm_judge, plan.llm, workdir / "judge-server.log")
                print(f"LLM-like judge on {judge.base_url}: {plan.llm}", flush=True)
            for n in range(1, args.runs + 1):
                crash = plan.judge == "offline" and args.crash_every > 0 and n % args.crash_every == 0
                run_dir = workdir / f"run-{n}"
                what = "random SIGKILLs" if plan.judge == "llm" else f"{'with' if crash else 'no'} crash"
                print(f"run {n}/{args.runs} ({plan.judge} judge, {what}) in {run_dir}", flush=True)
                report = await run_once(broker.bootstrap, run_dir, n, plan, crash=crash, judge=judge)
                reports.append(report)
                _print_run(report, run_dir)
                if args.keep == "failed" and not report.failed:
                    shutil.rmtree(run_dir, ignore_errors=True)
        finally:
            if judge is not None:
                await asyncio.to_thread(judge.stop)
    print()
    _print_table(reports, print)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in reports], indent=2))
    failed = any(r.failed for r in reports)
    if failed:
        print(
            "pairs lost, stuck, conflicting or committed past unjudged, or requests the judge refused: "
            f"logs kept under {workdir}"
        )
    elif args.keep == "failed" and created:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


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
