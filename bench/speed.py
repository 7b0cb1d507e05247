"""Issue 13's table in one run: pairjudge against the bound C ÷ 2L, FastChat, a bare Faust agent, itself.

Run from the checkout root::

    python -m bench.speed                       # every row, Apache Kafka started in a temp dir
    python -m bench.speed --quick               # tiny counts and windows (the CI smoke run)
    python -m bench.speed --rows 1,2,3          # some rows (and only the phases they need)
    python -m bench.speed --tree /path/to/old   # the workers from another checkout (a git worktree)
    python -m bench.speed --rows 4,5,6 --worker-env PAIRJUDGE_KAFKA__PRODUCER_LINGER_MS=0   # a tuning under test
    python -m bench.speed --rows 1,5 --tiers decide     # with a two-tier judge cascade (issue 28)
    python -m bench.speed --rows 4,5 --paced-share 0.75   # row 4 at 3/4 of the worker's own backlog rate
    python -m bench.speed --latency 0.5 --outage 60 --bootstrap 127.0.0.1:9092

A simulated OpenAI-compatible judge (``bench._speed_server``, a process of its own on 127.0.0.1) holds
every call for ``--latency`` L seconds (0.2). With C calls in flight a judge allows C ÷ 2L pairs per
second, since each pair needs two calls (AB and BA, at once). A pairjudge worker with C calls in flight
runs C/2 pairs at once (``PAIRJUDGE_WORKER__CONCURRENCY``) and ``PAIRJUDGE_JUDGE__MAX_CONCURRENCY`` = C.
Every pairjudge topic has ``--partitions`` (8) partitions; every worker is ``python -m pairjudge.streams.cli
worker`` with ``judge.kind=openai``, the response cache off (unless said), telemetry exporter ``none``,
everything else at its default. Pairs are tone-and-style pairs with one output marked; the judge prefers
the marked one in both orders, so every pair must end as a verdict for its marked candidate.

Phases, and the rows they feed (the README of ``bench/`` says what each row means):

* **backlog C=32 and C=128** (rows 1, 3, 5; 7 and 9 use C=128 as their "1 worker, cache off"): N pairs
  are produced first, then one worker starts. Rate = completions ÷ time over the steady window: the
  broker timestamps of the pairs' final outcomes, less the first and last 10 % (start-up and drain).
  Worker CPU (user + system from /proc, sampled every 0.1 s) over the same window ÷ its completions.
* **paced** (rows 4, 5): the C=128 worker, warmed up and then idle (its audit agents done with what the
  backlog left them: under 5 % of a core for 2 s), gets pairs at half its bound (C ÷ 4L, 160/s at
  200 ms) for a while, each stamped ``created_at`` as it is produced. Pair latency = broker timestamp of
  its final outcome − ``created_at``; "one call" is the median of sequential calls to the same server.
* **outage** (row 8): the same worker; the judge answers 503 to everything (completions and the model
  list) for ``--outage`` s while pairs keep arriving (5/s), then comes back. Figure: seconds from the
  judge's return to the first final verdict's broker timestamp.
* **dead judge** (row 10): the same worker; the judge answers 503 again, the worker's RSS is taken, a
  backlog (10,000 pairs) is produced and its RSS sampled for 30 s. Those pairs are not waited for.
* **FastChat C=32 and C=128** (rows 2, 3): ``bench/_fastchat_child.py`` in ~/.cache/pairjudge/fastchat-venv
  plays the same pairs with ``play_a_match_pair`` in ``ThreadPoolExecutor(C)``; its rate and CPU are taken
  the same way from the ``tstamp`` FastChat writes per match and /proc.
* **cache on** (row 7): as backlog C=128, with the response cache on (a fresh directory): all misses.
* **2 workers** (row 9): as backlog C=128, with two workers and twice the pairs.
* **instant judge and bare Faust** (row 6): ``bench/_instant_worker.py`` (create_app with an in-process
  judge that answers at once) against ``bench/_passthrough.py`` (one Faust agent that sends an output of
  pairjudge's measured outcome size per input and awaits its ack), the same input bytes, partitions
  and agent concurrency (C/2 for C=128). A third phase, not a goal, runs the pass-through with
  ``--writes``: the same agent also making the broker writes pairjudge's delivery makes per pair (the
  outcome recorded and acknowledged before the output, then its published mark and the audit join's
  entry) on RocksDB tables. Its ratio to the bare agent is the floor under row 6 while every pair keeps
  a recorded outcome.

Exit 1 (``BENCH FAILED``) when a pair has no final outcome, or one other than a consistent verdict for
its marked candidate (a review "judge_unavailable" is allowed in the outage only), when FastChat judges
a match wrongly, when the server refused a request, or when a worker died. A missed goal is only "miss".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from rich.table import Table

from bench._speed_kit import (
    REPO,
    OutcomeWatcher,
    Sampler,
    Samples,
    SpeedPairs,
    check_tree,
    ensure_fastchat_venv,
    log_tail,
    produce_backlog,
    produce_bytes,
    produce_paced,
    run_bench,
    start_process,
    steady_window,
    worker_env,
)
from bench._speed_server import MARKER, SpeedServer
from pairjudge.streams.cli.demo import stop_process
from pairjudge.streams.config.settings import Settings, load_settings
from pairjudge.streams.kafka.admin import TopicSpec, create_topics
from pairjudge.streams.kafka.topics import FINAL_KINDS, topic_specs
from pairjudge_dev.bench import (
    BenchBroker,
    add_broker_args,
    bench_broker,
    console,
    fail,
    percentile,
    run_settings,
    work_dir,
)

ALL_ROWS = tuple(range(1, 11))
#: This file's folder: the helper scripts run by path live here.
HERE = Path(__file__).resolve().parent
LOW, HIGH = 32, 128  # calls in flight
#: Pairs arriving per second while the judge is down (row 8).
OUTAGE_ARRIVALS = 5.0


@dataclass(frozen=True)
class Plan:
    """Counts and windows; ``--quick`` shrinks them all."""

    backlog_s: float  # backlog size, in seconds of work at the bound
    paced_s: float
    instant_pairs: int
    rss_pairs: int
    rss_s: float
    outage_s: float
    timeout_s: float

    @classmethod
    def of(cls, args: argparse.Namespace) -> Plan:
        if args.quick:
            return cls(1.0, 1.5, 200, 1000, 3.0, args.outage or 10.0, 120.0)
        return cls(15.0, 20.0, 3000, 10_000, 30.0, args.outage or 45.0, 300.0)


# --------------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------------


@dataclass
class Rate:
    """A throughput measured over a steady window, with the CPU spent in it."""

    n: int
    rate: float  # completions per second in the window
    window_s: float
    cpu_ms: float  # CPU ms per completion in the window (all measured processes)

    @classmethod
    def of(cls, times: Sequence[float], samples: Sequence[Samples]) -> Rate:
        start, end, done = steady_window(times)
        span = max(end - start, 1e-3)
        cpu = sum(s.cpu_between(start, end) for s in samples)
        return cls(n=len(times), rate=done / span, window_s=span, cpu_ms=1000 * cpu / max(done, 1))


@dataclass
class Results:
    latency: float
    one_call_s: float = float("nan")
    backlog: dict[str, Rate] = field(default_factory=dict)  # "32", "128", "cache", "two"
    fastchat: dict[int, Rate] = field(default_factory=dict)
    fastchat_prompt: str = ""
    paced_rate: float = float("nan")
    paced_latency_s: list[float] = field(default_factory=list)
    paced: Rate | None = None
    instant: Rate | None = None
    bare: Rate | None = None
    bare_writes: Rate | None = None
    outcome_bytes: tuple[float, float] = (0.0, 0.0)
    outage_s: float = float("nan")
    first_verdict_s: float = float("nan")
    outage_reviews: int = 0
    rss_mb: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    server: dict[str, Any] = field(default_factory=dict)

    def bound(self, calls: int) -> float:
        return calls / (2 * self.latency)


# --------------------------------------------------------------------------------------------------
# The run's context
# --------------------------------------------------------------------------------------------------


@dataclass
class Run:
    args: argparse.Namespace
    plan: Plan
    broker: BenchBroker
    work: Path
    tree: Path
    server: SpeedServer
    sampler: Sampler
    results: Results
    base: Settings = field(default_factory=load_settings)

    def settings(self, tag: str) -> Settings:
        return run_settings(
            self.base, self.broker, self.work / tag, tag=tag, kafka={"partitions": self.args.partitions}
        )

    async def topics(self, settings: Settings) -> None:
        await create_topics(self.broker.bootstrap, topic_specs(settings))

    def watcher(self, settings: Settings) -> OutcomeWatcher:
        finals = [settings.topics.name(kind) for kind in FINAL_KINDS]
        return OutcomeWatcher(self.broker.bootstrap, finals)

    def check(self, phase: str, pairs: SpeedPairs, watcher: OutcomeWatcher, *, outage: bool = False) -> int:
        """Record every pair without a final outcome, or with a wrong one; returns the reviews allowed."""
        allowed = 0
        wrong: list[str] = []
        lost = [pid for pid in pairs.ids if pid not in watcher.first]
        for pid in pairs.ids:
            seen = watcher.first.get(pid)
            if seen is None:
                continue
            event = seen.event or {}
            if seen.topic.endswith(".verdicts"):
                if event.get("winner") != pairs.expected[pid] or not event.get("consistent"):
                    wrong.append(f"{pid}: verdict for {event.get('winner')}, expected {pairs.expected[pid]}")
            elif outage and seen.topic.endswith(".review") and event.get("reason") == "judge_unavailable":
                allowed += 1
            else:
                reason = event.get("reason") or event.get("detail")
                wrong.append(f"{pid}: {seen.topic.rsplit('.', 1)[-1]} ({reason})")
        if lost:
            self.results.problems.append(f"{phase}: {len(lost)} of {len(pairs.ids)} pairs lost, e.g. {lost[:3]}")
        if wrong:
            self.results.problems.append(f"{phase}: {len(wrong)} pairs wrongly judged, e.g. {wrong[:3]}")
        return allowed


@contextlib.asynccontextmanager
async def workers(
    run: Run, name: str, argv: Sequence[str], envs: Sequence[dict[str, str]]
) -> AsyncIterator[list[Samples]]:
    """Worker processes (one per env) in the tree, sampled; stopped at the end, and a death recorded."""
    procs, logs = [], []
    for i, env in enumerate(envs):
        logs.append(run.work / f"{name}-{i + 1}.log")
        procs.append(start_process(argv, env, run.tree, logs[-1]))
    try:
        yield [run.sampler.watch(p.pid) for p in procs]
        if any(p.poll() is not None for p in procs):
            run.results.problems.append(f"{name}: a worker exited during the run\n{log_tail(logs)}")
    finally:
        await asyncio.gather(*(asyncio.to_thread(stop_process, proc) for proc in procs))


def pairjudge_argv() -> list[str]:
    return [sys.executable, "-m", "pairjudge.streams.cli", "worker"]


def pairjudge_envs(
    run: Run, settings: Settings, calls: int, count: int = 1, cache: bool = False
) -> list[dict[str, str]]:
    return [
        with_tiers(
            run,
            calls,
            with_worker_env(
                run,
                worker_env(
                    settings,
                    run.tree,
                    pairs_in_flight=calls // 2,
                    calls_in_flight=calls,
                    data_dir=run.work / f"{settings.topics.prefix}-data-{i}",
                    judge_url=run.server.base_url,
                    cache_dir=run.work / f"{settings.topics.prefix}-cache" if cache else None,
                ),
            ),
        )
        for i in range(count)
    ]


def with_tiers(run: Run, calls: int, env: dict[str, str]) -> dict[str, str]:
    """``env`` with ``--tiers``' two-tier cascade on the same simulated judge (as models "bench-cheap" and
    "bench-strong"): ``decide``, the cheap tier decides every pair (its threshold 0: the judge answers 0.9), which
    measures the cascade's own work; ``escalate``, it passes every pair on (0.95), so each pair costs both tiers'
    calls. A tree from before the tiers ignores the variable and runs its one judge."""
    if run.args.tiers is None:
        return env
    threshold = 0.0 if run.args.tiers == "decide" else 0.95
    tiers = [
        {
            "name": name,
            "kind": "openai",
            "base_url": run.server.base_url,
            "model": f"bench-{name}",
            "max_concurrency": calls,
            "cache_enabled": False,
            "threshold": tier_threshold,
        }
        for name, tier_threshold in (("cheap", threshold), ("strong", 0.0))
    ]
    return {**env, "PAIRJUDGE_TIERS": json.dumps(tiers)}


def with_worker_env(run: Run, env: dict[str, str]) -> dict[str, str]:
    """``env`` with the run's ``--worker-env`` settings on top (a tuning under test)."""
    return {**env, **dict(item.split("=", 1) for item in run.args.worker_env)}


async def backlog(run: Run, key: str, calls: int, *, count: int = 1, cache: bool = False) -> None:
    """N pairs produced first, then ``count`` worker(s) with ``calls`` calls in flight each."""
    n = max(20, math.ceil(run.results.bound(calls) * run.plan.backlog_s * count))
    settings = run.settings(f"speed-{key}")
    await run.topics(settings)
    pairs = SpeedPairs.make(n, settings.topics.prefix)
    watcher = await run.watcher(settings).start()
    try:
        await produce_backlog(run.broker.bootstrap, settings.topics.name("pairs"), pairs)
        console.print(f"[bold]{key}[/bold]: {n} pairs waiting; {count} worker(s), {calls} calls in flight")
        envs = pairjudge_envs(run, settings, calls, count, cache)
        async with workers(run, f"worker-{key}", pairjudge_argv(), envs) as samples:
            await watcher.wait_for(pairs.ids, run.plan.timeout_s, idle=60)
        run.check(key, pairs, watcher)
        if cache and not any((run.work / f"{settings.topics.prefix}-cache").glob("*")):
            run.results.problems.append(f"{key}: the worker wrote nothing to its response cache")
        times = [watcher.first[p].timestamp for p in pairs.ids if p in watcher.first]
        if len(times) >= 3:
            run.results.backlog[key] = Rate.of(times, samples)
    finally:
        await watcher.aclose()


async def main_worker(run: Run, rows: set[int]) -> None:
    """One C=128 worker: the backlog, then (same process) the paced phase, the outage, the dead judge."""
    settings = run.settings("speed-128")
    await run.topics(settings)
    watcher = await run.watcher(settings).start()
    pairs_topic = settings.topics.name("pairs")
    bootstrap = run.broker.bootstrap
    results = run.results
    try:
        backlog_pairs: SpeedPairs | None = None
        if rows & {1, 2, 3, 5, 7, 9}:
            n = max(20, math.ceil(results.bound(HIGH) * run.plan.backlog_s))
            backlog_pairs = SpeedPairs.make(n, f"{settings.topics.prefix}-backlog")
            await produce_backlog(bootstrap, pairs_topic, backlog_pairs)
            console.print(f"[bold]128[/bold]: {n} pairs waiting; 1 worker, {HIGH} calls in flight")
        async with workers(run, "worker-128", pairjudge_argv(), pairjudge_envs(run, settings, HIGH)) as samples:
            if backlog_pairs is not None:
                await watcher.wait_for(backlog_pairs.ids, run.plan.timeout_s, idle=60)
                run.check("backlog 128", backlog_pairs, watcher)
                times = [watcher.first[p].timestamp for p in backlog_pairs.ids if p in watcher.first]
                if len(times) >= 3:
                    results.backlog["128"] = Rate.of(times, samples)
            else:
                warm = SpeedPairs.make(20, f"{settings.topics.prefix}-warm")
                await produce_backlog(bootstrap, pairs_topic, warm)
                await watcher.wait_for(warm.ids, run.plan.timeout_s, idle=60)
                run.check("warm-up", warm, watcher)
            if rows & {4, 5}:
                await paced(run, watcher, pairs_topic, samples, f"{settings.topics.prefix}-paced")
            if 8 in rows:
                await outage(run, watcher, pairs_topic, f"{settings.topics.prefix}-outage")
            if 10 in rows:
                await dead_judge(run, pairs_topic, samples[0], f"{settings.topics.prefix}-dead")
    finally:
        await asyncio.to_thread(run.server.set_outage, False)
        await watcher.aclose()


async def paced(run: Run, watcher: OutcomeWatcher, topic: str, samples: list[Samples], prefix: str) -> None:
    rate, why = paced_rate(run)
    n = max(10, math.ceil(rate * run.plan.paced_s))
    pairs = SpeedPairs.make(n, prefix)
    waited = max([await s.wait_idle() for s in samples], default=0.0)
    console.print(f"[bold]paced[/bold]: {n} pairs at {rate:g}/s ({why}); {waited:.0f} s to idle")
    started = time.time()
    created = await produce_paced(run.broker.bootstrap, topic, pairs.dicts, rate)
    await watcher.wait_for(pairs.ids, run.plan.timeout_s, idle=60)
    run.check("paced", pairs, watcher)
    done = [watcher.first[p] for p in pairs.ids if p in watcher.first]
    if not done:
        return
    ended = max(s.timestamp for s in done)
    run.results.paced_rate = rate
    run.results.paced_latency_s = [watcher.first[p].timestamp - created[p] for p in pairs.ids if p in watcher.first]
    cpu = sum(s.cpu_between(started, ended) for s in samples)
    run.results.paced = Rate(
        n=len(done),
        rate=len(done) / max(ended - started, 1e-3),
        window_s=ended - started,
        cpu_ms=1000 * cpu / len(done),
    )


def paced_rate(run: Run) -> tuple[float, str]:
    """The paced phase's arrival rate, and what it is: ``--paced-share`` of this worker's own backlog rate at
    128 calls when that was measured in the run (a rate it sustains), else half the 128-call bound."""
    backlog = run.results.backlog.get("128")
    share = run.args.paced_share
    if share is not None and backlog is not None:
        return round(share * backlog.rate, 1), f"{share:g} of its own backlog rate, {backlog.rate:.1f}/s"
    return HIGH / (4 * run.results.latency), f"half the {HIGH}-call bound"


async def outage(run: Run, watcher: OutcomeWatcher, topic: str, prefix: str) -> None:
    seconds = run.plan.outage_s
    n = max(5, math.ceil(OUTAGE_ARRIVALS * seconds))
    pairs = SpeedPairs.make(n, prefix)
    console.print(f"[bold]outage[/bold]: the judge answers 503 for {seconds:g} s while {n} pairs arrive")
    await asyncio.to_thread(run.server.set_outage, True)
    await produce_paced(run.broker.bootstrap, topic, pairs.dicts, n / seconds)
    back = await asyncio.to_thread(run.server.set_outage, False)
    # After the return the worker needs at most its longest cooldown (60 s by default) and the backlog.
    await watcher.wait_for(pairs.ids, run.plan.timeout_s + 60, idle=90)
    run.results.outage_reviews = run.check("outage", pairs, watcher, outage=True)
    run.results.outage_s = seconds
    after = [s.timestamp for p in pairs.ids if (s := watcher.first.get(p)) and s.topic.endswith(".verdicts")]
    after = [t for t in after if t >= back]
    if after:
        run.results.first_verdict_s = min(after) - back


async def dead_judge(run: Run, topic: str, samples: Samples, prefix: str) -> None:
    pairs = SpeedPairs.make(run.plan.rss_pairs, prefix)
    await asyncio.to_thread(run.server.set_outage, True)
    await asyncio.sleep(1.0)
    before = time.time()
    console.print(f"[bold]dead judge[/bold]: {len(pairs.ids)} pairs waiting; RSS for {run.plan.rss_s:g} s")
    await produce_backlog(run.broker.bootstrap, topic, pairs)
    await asyncio.sleep(run.plan.rss_s)
    start_rss = samples.rss_between(before - 1.0, before)
    run.results.rss_mb = start_rss[-1:] + samples.rss_between(before, time.time())


async def fastchat(run: Run, python: Path, calls: int) -> None:
    n = max(20, math.ceil(run.results.bound(calls) * run.plan.backlog_s))
    folder = run.work / f"fastchat-{calls}"
    folder.mkdir(parents=True, exist_ok=True)
    pairs = SpeedPairs.make(n, f"fastchat-{calls}")
    matches, expected = [], {}
    for i, data in enumerate(pairs.dicts):
        first, second = data["candidates"]
        matches.append(
            {
                "id": i,
                "question": data["task"]["prompt"],
                "model_1": first["candidate_id"],
                "model_2": second["candidate_id"],
                "answer_1": first["output"],
                "answer_2": second["output"],
            }
        )
        expected[i] = "model_1" if MARKER in first["output"] else "model_2"
    output_file, summary_file = folder / "judgments.jsonl", folder / "summary.json"
    spec = {
        "api_base": run.server.base_url,
        "parallel": calls,
        "matches": matches,
        "output_file": str(output_file),
        "summary_file": str(summary_file),
    }
    (folder / "spec.json").write_text(json.dumps(spec))
    console.print(f"[bold]FastChat {calls}[/bold]: {n} matches, ThreadPoolExecutor({calls})")
    # Nothing of this venv's: no PYTHONPATH, no pairjudge settings.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PAIRJUDGE_")}
    proc = start_process(
        [str(python), str(HERE / "_fastchat_child.py"), str(folder / "spec.json")], env, folder, folder / "fastchat.log"
    )
    samples = run.sampler.watch(proc.pid)
    try:
        with contextlib.suppress(subprocess.TimeoutExpired):
            await asyncio.to_thread(proc.wait, run.plan.timeout_s)
    finally:
        await asyncio.to_thread(stop_process, proc)
    if proc.returncode != 0 or not summary_file.exists():
        run.results.problems.append(
            f"FastChat {calls}: exited {proc.returncode}\n{log_tail([folder / 'fastchat.log'])}"
        )
        return
    rows = [json.loads(line) for line in output_file.read_text().splitlines() if line.strip()]
    wrong = [
        f"{r['question_id']}: {r['g1_winner']}/{r['g2_winner']}, expected {expected[r['question_id']]}"
        for r in rows
        if not r["g1_winner"] == r["g2_winner"] == expected[r["question_id"]]
    ]
    if len({r["question_id"] for r in rows}) != n:
        run.results.problems.append(f"FastChat {calls}: {n - len(rows)} of {n} matches have no judgment")
    if wrong:
        run.results.problems.append(f"FastChat {calls}: {len(wrong)} matches judged wrongly, e.g. {wrong[:3]}")
    run.results.fastchat_prompt = json.loads(summary_file.read_text())["prompt_source"]
    if len(rows) >= 3:
        run.results.fastchat[calls] = Rate.of([float(r["tstamp"]) for r in rows], [samples])


async def instant_and_bare(run: Run) -> None:
    n, concurrency = run.plan.instant_pairs, HIGH // 2
    settings = run.settings("speed-instant")
    await run.topics(settings)
    pairs = SpeedPairs.make(n, settings.topics.prefix)
    watcher = await run.watcher(settings).start()
    try:
        await produce_backlog(run.broker.bootstrap, settings.topics.name("pairs"), pairs)
        console.print(f"[bold]instant judge[/bold]: {n} pairs waiting; agent concurrency {concurrency}")
        env = with_worker_env(
            run, worker_env(settings, run.tree, pairs_in_flight=concurrency, data_dir=run.work / "instant-data")
        )
        argv = [sys.executable, str(HERE / "_instant_worker.py")]
        async with workers(run, "worker-instant", argv, [env]) as samples:
            await watcher.wait_for(pairs.ids, run.plan.timeout_s, idle=60)
        run.check("instant judge", pairs, watcher)
        seen = [watcher.first[p] for p in pairs.ids if p in watcher.first]
        if len(seen) < 3:
            return
        run.results.instant = Rate.of([s.timestamp for s in seen], samples)
        value_bytes = statistics.fmean(s.value_bytes for s in seen)
        header_bytes = statistics.fmean(s.header_bytes for s in seen)
        run.results.outcome_bytes = (value_bytes, header_bytes)
        # The same input bytes, the pairs as the instant phase produced them (created_at and all).
        inputs = [(p.encode(), json.dumps(d).encode()) for p, d in zip(pairs.ids, pairs.dicts, strict=True)]
    finally:
        await watcher.aclose()

    run.results.bare = await bare_faust(run, settings, inputs, value_bytes, header_bytes, writes=False)
    run.results.bare_writes = await bare_faust(run, settings, inputs, value_bytes, header_bytes, writes=True)


async def bare_faust(
    run: Run,
    settings: Settings,
    inputs: list[tuple[bytes, bytes]],
    value_bytes: float,
    header_bytes: float,
    *,
    writes: bool,
) -> Rate | None:
    """The bare Faust pass-through over ``inputs``; ``writes``: with pairjudge's broker writes per pair."""
    name = "bare-writes" if writes else "bare"
    in_topic, out_topic = settings.topics.name(f"{name}-in"), settings.topics.name(f"{name}-out")
    spec = TopicSpec(partitions=settings.kafka.partitions, replication=settings.kafka.replication_factor)
    app_id = f"{settings.worker.app_id}-{name}"
    topics = {in_topic: spec, out_topic: spec}
    if writes:
        # The agent's tables' changelogs: it declares no topics, as pairjudge's worker declares none.
        changelog = TopicSpec(partitions=spec.partitions, compacted=True, replication=spec.replication)
        topics |= {f"{app_id}-bench-{table}-changelog": changelog for table in ("outcomes", "join")}
    await create_topics(run.broker.bootstrap, topics)
    await produce_bytes(run.broker.bootstrap, in_topic, inputs)
    bare = await OutcomeWatcher(run.broker.bootstrap, [out_topic], json_values=False).start()
    n, concurrency = len(inputs), HIGH // 2
    try:
        what = "with pairjudge's broker writes" if writes else "pass-through"
        console.print(f"[bold]bare Faust[/bold], {what}: {n} messages waiting; agent concurrency {concurrency}")
        argv = [sys.executable, str(HERE / "_passthrough.py")]
        argv += ["--bootstrap", run.broker.bootstrap, "--app-id", app_id]
        argv += ["--data-dir", str(run.work / f"{name}-data"), "--in-topic", in_topic, "--out-topic", out_topic]
        argv += ["--partitions", str(settings.kafka.partitions), "--concurrency", str(concurrency)]
        argv += ["--value-bytes", str(round(value_bytes)), "--header-bytes", str(round(header_bytes))]
        argv += ["--writes"] if writes else []
        # The baseline is this checkout's script on this venv's Faust, whatever --tree says.
        env = {k: v for k, v in worker_env(settings, REPO, pairs_in_flight=1, data_dir=run.work).items()}
        async with workers(run, f"{name}-faust", argv, [env]) as samples:
            missing = await bare.wait_for([key.decode() for key, _ in inputs], run.plan.timeout_s, idle=60)
        if missing:
            run.results.problems.append(f"bare Faust ({name}): {len(missing)} of {n} messages have no output")
        times = [s.timestamp for s in bare.first.values()]
        return Rate.of(times, samples) if len(times) >= 3 else None
    finally:
        await bare.aclose()


async def one_call(server: SpeedServer, samples: int) -> float:
    """The median of ``samples`` sequential calls (a FastChat-shaped prompt) on one connection."""
    body = {
        "model": "gpt-4",
        "messages": [
            {
                "role": "user",
                "content": "[User Question]\nq\n\n[The Start of Assistant A's Answer]\na "
                f"{MARKER}\n[The End of Assistant A's Answer]\n\n[The Start of Assistant B's Answer]\nb\n"
                "[The End of Assistant B's Answer]",
            }
        ],
    }
    times = []
    async with aiohttp.ClientSession() as session:
        for _ in range(samples):
            started = time.perf_counter()
            async with session.post(f"{server.base_url}/chat/completions", json=body) as resp:
                resp.raise_for_status()
                await resp.read()
            times.append(time.perf_counter() - started)
    return statistics.median(times)


# --------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------


def _ratio(a: float | None, b: float | None) -> float:
    if a is None or b is None or not b or math.isnan(a) or math.isnan(b):
        return float("nan")
    return a / b


def rate(r: Rate | None) -> float | None:
    return None if r is None else r.rate


def cpu(r: Rate | None) -> float | None:
    return None if r is None else r.cpu_ms


def report(res: Results, rows: set[int], tree: str, broker: str) -> None:
    table = Table(title=f"issue 13, measured on {broker}; workers from {tree}; L = {res.latency * 1000:g} ms")
    for name, justify in (("row", "left"), ("measured", "right"), ("goal", "right"), ("ok?", "center")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]

    def add(row: int, name: str, value: float, goal: float, *, at_most: bool = False, fmt: str = ".3f") -> None:
        if row not in rows:
            return
        if math.isnan(value):
            shown, ok = "—", "[red]none[/red]"
        else:
            met = value <= goal if at_most else value >= goal
            shown, ok = format(value, fmt), "ok" if met else "[yellow]miss[/yellow]"
        table.add_row(f"{row}. {name}", shown, f"{'≤' if at_most else '≥'} {format(goal, fmt)}", ok)

    b32, b128 = res.backlog.get("32"), res.backlog.get("128")
    fc32, fc128 = res.fastchat.get(LOW), res.fastchat.get(HIGH)
    add(1, f"pairs/s ÷ bound, {LOW} calls in flight", _ratio(rate(b32), res.bound(LOW)), 0.95)
    add(1, f"pairs/s ÷ bound, {HIGH} calls in flight", _ratio(rate(b128), res.bound(HIGH)), 0.9)
    add(2, f"pairs/s ÷ FastChat's, {LOW} calls", _ratio(rate(b32), rate(fc32)), 1.0)
    add(2, f"pairs/s ÷ FastChat's, {HIGH} calls", _ratio(rate(b128), rate(fc128)), 1.0)
    add(3, f"CPU per pair ÷ FastChat's, {HIGH} calls", _ratio(cpu(b128), cpu(fc128)), 1.0, at_most=True)
    add(3, f"CPU per pair ÷ FastChat's, {LOW} calls", _ratio(cpu(b32), cpu(fc32)), 1.0, at_most=True)
    lat = res.paced_latency_s
    p50 = percentile(lat, 0.5) if lat else float("nan")
    p95 = percentile(lat, 0.95) if lat else float("nan")
    add(
        4, f"pair latency p50 ÷ one call, paced at {res.paced_rate:g}/s", _ratio(p50, res.one_call_s), 1.1, at_most=True
    )
    add(
        4, f"pair latency p95 ÷ one call, paced at {res.paced_rate:g}/s", _ratio(p95, res.one_call_s), 1.5, at_most=True
    )
    add(
        5,
        f"worker CPU ms per pair, HTTP judge, backlog ({HIGH} calls)",
        cpu(b128) or float("nan"),
        1.2,
        at_most=True,
        fmt=".2f",
    )
    add(5, "worker CPU ms per pair, HTTP judge, paced", cpu(res.paced) or float("nan"), 1.2, at_most=True, fmt=".2f")
    add(6, "instant-judge pipeline ÷ bare Faust pass-through", _ratio(rate(res.instant), rate(res.bare)), 0.5)
    if 6 in rows:
        # Not a goal: the floor under the row above while every pair keeps its recorded outcome.
        floor = _ratio(rate(res.bare_writes), rate(res.bare))
        table.add_row("6. (floor) bare Faust with pairjudge's broker writes ÷ bare", format(floor, ".3f"), "", "")
    add(
        7, f"response cache on ÷ off, all misses, {HIGH} calls", _ratio(rate(res.backlog.get("cache")), rate(b128)), 1.0
    )
    add(
        8,
        f"s to first verdict after a {res.outage_s:g} s outage ends",
        res.first_verdict_s,
        5.0,
        at_most=True,
        fmt=".1f",
    )
    add(9, f"2 workers ÷ 1, {HIGH} calls each", _ratio(rate(res.backlog.get("two")), rate(b128)), 1.8)
    if 10 in rows:
        rss = res.rss_mb
        if rss:
            start, end, top = rss[0], rss[-1], max(rss)
            flat = top - start <= max(10.0, 0.1 * start)
            shown = f"{start:.0f} → {end:.0f} MB (max {top:.0f})"
            table.add_row(
                "10. RSS, pairs waiting on a dead judge",
                shown,
                "flat (+≤10 MB or 10 %)",
                "ok" if flat else "[yellow]miss[/yellow]",
            )
        else:
            table.add_row("10. RSS, pairs waiting on a dead judge", "—", "flat", "[red]none[/red]")
    console.print(table)

    raw = Table(title="raw figures (rates and CPU over each phase's steady window: outcomes 10 %–90 %)")
    for name in ("phase", "items", "rate /s", "bound /s", "÷ bound", "window s", "CPU ms / item"):
        raw.add_column(name, justify="left" if name == "phase" else "right")

    def raw_row(name: str, r: Rate | None, bound: float | None) -> None:
        if r is None:
            return
        raw.add_row(
            name,
            str(r.n),
            f"{r.rate:,.1f}",
            f"{bound:,.0f}" if bound else "",
            f"{r.rate / bound:.3f}" if bound else "",
            f"{r.window_s:.2f}",
            f"{r.cpu_ms:.2f}",
        )

    raw_row(f"pairjudge, backlog, {LOW} calls", b32, res.bound(LOW))
    raw_row(f"pairjudge, backlog, {HIGH} calls", b128, res.bound(HIGH))
    raw_row(f"FastChat play_a_match_pair, {LOW} threads", fc32, res.bound(LOW))
    raw_row(f"FastChat play_a_match_pair, {HIGH} threads", fc128, res.bound(HIGH))
    raw_row(f"pairjudge, paced at {res.paced_rate:g}/s", res.paced, None)
    raw_row(f"pairjudge, cache on, {HIGH} calls", res.backlog.get("cache"), res.bound(HIGH))
    raw_row(f"pairjudge, 2 workers, {HIGH} calls each", res.backlog.get("two"), 2 * res.bound(HIGH))
    raw_row("pairjudge, instant in-process judge", res.instant, None)
    raw_row("bare Faust pass-through", res.bare, None)
    raw_row("bare Faust with pairjudge's broker writes", res.bare_writes, None)
    console.print(raw)
    notes = [f"one call (median, sequential): {res.one_call_s * 1000:.1f} ms"]
    if lat:
        notes.append(
            f"paced pair latency: p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, max {max(lat) * 1000:.0f} ms"
        )
    if res.instant is not None:
        notes.append(
            f"outcome size for the bare agent: {res.outcome_bytes[0]:.0f} B value, {res.outcome_bytes[1]:.0f} B headers"
        )
    if res.fastchat:
        notes.append(f"FastChat's pair-v2 prompt: {res.fastchat_prompt}")
    if not math.isnan(res.outage_s):
        notes.append(f"outage: reviews 'judge_unavailable' {res.outage_reviews}")
    if res.server:
        notes.append("server: " + ", ".join(f"{k} {v}" for k, v in res.server.items() if k != "cpu_s"))
    for note in notes:
        console.print(note)


# --------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> None:
    rows: set[int] = set(args.rows)
    plan = Plan.of(args)
    tree: Path = args.tree
    tree_text = check_tree(tree)
    loop_started = time.monotonic()
    with work_dir("pairjudge-speed-", keep=args.keep) as work:
        venv: asyncio.Task[Path] | None = None
        if rows & {2, 3}:
            # Built (first time only) while the broker starts, not while anything is measured.
            venv = asyncio.create_task(asyncio.to_thread(ensure_fastchat_venv))
        async with bench_broker(work.path, bootstrap=args.bootstrap) as broker:
            fastchat_python = await venv if venv is not None else None
            console.print(f"[bold]broker[/bold]: {broker.name} ({broker.bootstrap}); workers from {tree_text}")
            server = SpeedServer(args.latency, work.path / "judge-server.log")
            sampler = Sampler()
            res = Results(latency=args.latency)
            ctx = Run(args, plan, broker, work.path, tree, server, sampler, res)
            try:
                res.one_call_s = await one_call(server, 5)
                steps: list[tuple[set[int], Callable[[], Any]]] = [
                    ({1, 2, 3}, lambda: backlog(ctx, "32", LOW)),
                    ({1, 2, 3, 4, 5, 7, 8, 9, 10}, lambda: main_worker(ctx, rows)),
                    ({2, 3}, lambda: fastchat(ctx, fastchat_python, LOW)),  # type: ignore[arg-type]
                    ({2, 3}, lambda: fastchat(ctx, fastchat_python, HIGH)),  # type: ignore[arg-type]
                    ({7}, lambda: backlog(ctx, "cache", HIGH, cache=True)),
                    ({9}, lambda: backlog(ctx, "two", HIGH, count=2)),
                    ({6}, lambda: instant_and_bare(ctx)),
                ]
                for needed, step in steps:
                    if rows & needed:
                        step_started = time.monotonic()
                        await step()
                        console.print(f"  [dim]took {time.monotonic() - step_started:.0f} s[/dim]")
                stats = await asyncio.to_thread(server.stats)
                res.server = {
                    "requests": stats.requests,
                    "refused (400)": stats.bad,
                    "503s": stats.unavailable,
                    "peak in flight": stats.peak,
                }
                if stats.bad:
                    res.problems.append(f"the judge server refused {stats.bad} requests (see {server.log_path})")
            finally:
                await sampler.aclose()
                server.stop()
        report(res, rows, tree_text, broker.name)
        console.print(f"run time {time.monotonic() - loop_started:.0f} s")
        if res.problems:
            for problem in res.problems:
                console.print(f"[red]{problem}[/red]")
            fail(f"{len(res.problems)} problem(s) above; logs in {work.path}")
        work.ok = True


def parse_rows(text: str) -> list[int]:
    rows = sorted({int(part) for part in text.split(",") if part.strip()})
    if not rows or any(r not in ALL_ROWS for r in rows):
        raise argparse.ArgumentTypeError(f"rows are 1..{len(ALL_ROWS)}, comma-separated")
    return rows


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    add_broker_args(parser)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the judge holds each call (0.2)")
    parser.add_argument("--outage", type=float, help="seconds the judge is down in row 8 (45; quick 12)")
    parser.add_argument("--rows", type=parse_rows, default=list(ALL_ROWS), help="rows to measure, e.g. 1,2,3")
    parser.add_argument("--quick", action="store_true", help="tiny counts and windows (the CI smoke run)")
    parser.add_argument("--tree", help="run the workers from this checkout (e.g. a git worktree of an older commit)")
    parser.add_argument("--partitions", type=int, default=8, help="partitions per topic (8)")
    parser.add_argument(
        "--paced-share",
        type=float,
        help="pace row 4 at this share of the worker's measured backlog rate (rows 1-3 or 5 measure it), e.g. 0.75;"
        " default: half the 128-call bound",
    )
    parser.add_argument(
        "--tiers",
        choices=("decide", "escalate"),
        help="run the pairjudge workers with a two-tier cascade on the simulated judge: the cheap tier decides every"
        " pair (decide) or passes every pair on (escalate)",
    )
    parser.add_argument(
        "--worker-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for every pairjudge worker, e.g. PAIRJUDGE_KAFKA__PRODUCER_LINGER_MS=0 (repeatable)",
    )
    args = parser.parse_args(argv)
    for item in args.worker_env:
        if "=" not in item or not item.startswith("PAIRJUDGE_"):
            parser.error(f"--worker-env takes PAIRJUDGE_NAME=VALUE, not {item!r}")
    args.tree = Path(args.tree).resolve() if args.tree else REPO
    if args.latency <= 0 or args.partitions < 2:
        parser.error("--latency must be positive and --partitions at least 2")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    run_bench(run(parse_args(argv)))


if __name__ == "__main__":
    main()
