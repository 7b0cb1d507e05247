"""Scale-out, shown: 1, 2 and 4 workers on 8 partitions against a latency-bound judge, then a rebalance under load.

Run from the checkout root::

    python -m bench.scaleout                         # Apache Kafka started in a temp dir; about 5 minutes
    python -m bench.scaleout --quick                 # small counts and windows (the CI smoke run)
    python -m bench.scaleout --latency 0.5 --calls 64 --workers 1,2,3,4 --bootstrap 127.0.0.1:9092
    python -m bench.scaleout --quick --workers 1 --self-test-lost 2   # negative control: must fail, 2 lost

**Throughput legs.** One simulated judge (``bench._speed_server``, a process of its own on 127.0.0.1)
holds every call for ``--latency`` L seconds (1.0). A worker runs ``PAIRJUDGE_WORKER__CONCURRENCY`` =
C/2 pairs at once and ``PAIRJUDGE_JUDGE__MAX_CONCURRENCY`` = C calls (``--calls``, 32: the shipped
defaults). The pipeline judges a pair by asking AB and BA at the same time (``agents.core``:
``gather_in_order``), so a pair takes one latency and two call slots, and one worker's bound is
C/2 pairs every L seconds: C ÷ 2L pairs/s (16/s at the defaults). At that rate a worker needs about
16 × 6 ms ≈ 0.1 of a core (issue 13: 3.5 ms of CPU a pair in a backlog, 6.2 ms all in), so even four
workers leave most of a 2-core machine idle: the legs measure the design (the judge's latency and the
slots), not the CPU. For N in ``--workers`` (1, 2, 4), back to back, on fresh 8-partition topics and
a fresh consumer group each:

1. N workers start (``python -m pairjudge.streams.cli worker``, judge kind openai, cache off, telemetry
   off), and the bench waits until the group is Stable with N members and reads each member's share
   of the pairs topic from the group's assignment (DescribeGroups): each must hold 8/N partitions.
2. Only then is the backlog produced: N × C/2L × ``--backlog-s`` pairs (30 s of work at the bound),
   spread evenly over the 8 partitions (pair i to partition i mod 8), so no worker drains early and
   start-up is not in the measurement.
3. Rate = completions ÷ time over the steady window: the broker timestamps of the pairs' final outcomes,
   without the first and last 10 % (``bench.speed``'s ``Rate``). Worker CPU (/proc, every 0.1 s) over
   the same window ÷ its completions. Before the backlog, each settled worker's idle CPU is taken over
   5 s (2 in quick runs), so the table also gives what a pair costs above that. ÷ 1 worker is N's rate
   over the 1-worker rate of the same run; ÷ ideal N is that over N.

**Rebalance leg.** A second judge, ``pairjudge_dev.slow_judge_server``: per-call latency lognormal
(median ``--churn-median``, σ 0.6) plus a 1 % tail of 3-10 s, and ``--flip-share`` of calls answered
with a random winner and confidence (as a model sampling at temperature > 0: a pair judged twice can end
differently, so a re-judged redelivery shows as a conflict). Two workers judge a stream paced at
``--churn-rate`` (half of one worker's bound at the mean latency) of mixed-template pairs
(``pairjudge_dev.pairgen``) for ``--churn-s`` seconds; at random moments (seeded, ``--seed``) a third
starts, one worker gets SIGTERM (escalated to SIGKILL after 45 s, more than the worker's default
shutdown grace of 30 s) and another SIGKILL. Then the survivor drains, and every pair sent must have
exactly one final outcome (verdict, review or dead letter; a tie-break is a way-station): lost = none
at all, conflicting = two different ones (another kind, or verdicts for different winners);
duplicates (the same outcome again, from a redelivery) are at-least-once and are only counted.

Exit 1 (``BENCH FAILED``, work dir kept) when a pair is lost, conflicting, or (throughput legs) not a
verdict for its marked candidate, when the partitions were not spread, when a worker died on its own, or
when a judge server refused a request. The ratios are printed, never judged: the machine may be shared.
The last line, ``SCALEOUT ...``, carries the figures in one parseable line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.errors import KafkaError
from rich.table import Table

from bench._speed_kit import (
    REPO,
    OutcomeWatcher,
    Sampler,
    Samples,
    SpeedPairs,
    log_tail,
    produce_paced,
    run_bench,
    start_process,
    worker_env,
)
from bench._speed_server import SpeedServer
from bench.speed import Rate
from pairjudge.streams.cli.demo import stop_process
from pairjudge.streams.config.settings import Settings, load_settings
from pairjudge.streams.faust_compat.recovery_watch import EXIT_RECOVERY_STALLED
from pairjudge.streams.kafka.admin import create_topics
from pairjudge.streams.kafka.topics import FINAL_KINDS, topic_specs
from pairjudge_dev.bench import (
    BenchBroker,
    add_broker_args,
    bench_broker,
    console,
    fail,
    parse_counts,
    run_settings,
    work_dir,
)
from pairjudge_dev.pairgen import many_pairs
from pairjudge_dev.slow_judge_server import Behaviour, JudgeServerProcess, Latency

#: The lognormal's spread in the rebalance leg (slow_judge_server's default): mean = median × e^(σ²/2).
SIGMA = 0.6
#: Seconds a SIGTERMed worker gets before SIGKILL: above the worker's default shutdown grace (30 s).
TERM_GRACE_S = 45.0
#: The workers' PAIRJUDGE_WORKER__RECOVERY_STALL_S here (the default is longer than the drain window).
RECOVERY_STALL_S = 30.0


@dataclass(frozen=True)
class Plan:
    """Counts and windows; ``--quick`` shrinks them."""

    backlog_s: float  # each throughput leg's backlog, in seconds of work at its bound
    churn_s: float  # seconds of paced arrivals in the rebalance leg
    tail: tuple[float, float]  # the rebalance judge's slow tail, seconds
    ready_s: float  # most seconds for a group to settle
    idle_s: float  # seconds the settled workers' idle CPU is taken over, before the backlog
    timeout_s: float  # most seconds to wait for a leg's outcomes

    @classmethod
    def of(cls, args: argparse.Namespace) -> Plan:
        if args.quick:
            return cls(args.backlog_s or 8.0, args.churn_s or 15.0, (3.0, 6.0), ready_s=120, idle_s=2, timeout_s=180)
        return cls(args.backlog_s or 30.0, args.churn_s or 45.0, (3.0, 10.0), ready_s=180, idle_s=5, timeout_s=400)


@dataclass
class Leg:
    """One throughput leg's figures."""

    workers: int
    pairs: int
    bound: float  # pairs/s: workers × C ÷ 2L
    spread: list[int]  # pairs-topic partitions held by each member once the group settled
    ready_s: float  # seconds from the first worker's start to that settled assignment
    idle_cores: float = float("nan")  # CPU of one settled worker with nothing to do, in cores (mean)
    rate: Rate | None = None

    @property
    def above_idle_ms(self) -> float:
        """CPU ms per pair beyond what the workers burn idle: the marginal cost of a pair."""
        if self.rate is None:
            return float("nan")
        return self.rate.cpu_ms - 1000 * self.idle_cores * self.workers / self.rate.rate


@dataclass
class Churn:
    """The rebalance leg's figures."""

    sent: int = 0
    decided: int = 0
    lost: list[str] = field(default_factory=list)
    duplicates: int = 0
    conflicting: dict[str, list[str]] = field(default_factory=dict)
    #: Workers that stopped themselves over a stalled table recovery and were restarted.
    restarts: int = 0
    events: list[str] = field(default_factory=list)
    server: dict[str, Any] = field(default_factory=dict)


@dataclass
class Run:
    args: argparse.Namespace
    plan: Plan
    broker: BenchBroker
    work: Path
    sampler: Sampler
    problems: list[str] = field(default_factory=list)
    base: Settings = field(default_factory=load_settings)

    def settings(self, tag: str) -> Settings:
        return run_settings(
            self.base, self.broker, self.work / tag, tag=tag, kafka={"partitions": self.args.partitions}
        )

    @property
    def per_worker_bound(self) -> float:
        calls: int = self.args.calls
        latency: float = self.args.latency
        return calls / (2 * latency)


# --------------------------------------------------------------------------------------------------
# Workers and the group
# --------------------------------------------------------------------------------------------------


@dataclass
class Worker:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    samples: Samples
    #: How the bench stopped it ("sigterm", "sigterm->sigkill", "sigkill"); None while it should run.
    stopped: str | None = None


class Fleet:
    """The worker processes of one leg, all in one consumer group, each with a data dir of its own."""

    def __init__(self, run: Run, settings: Settings, judge_url: str) -> None:
        self.run, self.settings, self.judge_url = run, settings, judge_url
        self.workers: list[Worker] = []

    def start(self) -> Worker:
        number = len(self.workers) + 1
        prefix = self.settings.topics.prefix
        env = worker_env(
            self.settings,
            REPO,
            pairs_in_flight=self.run.args.calls // 2,
            calls_in_flight=self.run.args.calls,
            data_dir=self.run.work / f"{prefix}-data-{number}",
            judge_url=self.judge_url,
        )
        # A worker whose table recovery stalls stops with EXIT_RECOVERY_STALLED (streams.faust_compat.recovery_watch);
        # the bench restarts it as a supervisor would. 30 s, not the default, to fit the drain window.
        env["PAIRJUDGE_WORKER__RECOVERY_STALL_S"] = str(RECOVERY_STALL_S)
        log = self.run.work / f"{prefix}-worker-{number}.log"
        argv = [sys.executable, "-m", "pairjudge.streams.cli", "worker", "--no-create-topics"]
        proc = start_process(argv, env, REPO, log)
        worker = Worker(f"w{number}", proc, log, self.run.sampler.watch(proc.pid))
        self.workers.append(worker)
        return worker

    @property
    def live(self) -> list[Worker]:
        return [w for w in self.workers if w.stopped is None]

    def restart_stalled(self) -> list[tuple[Worker, Worker]]:
        """Restart, as a supervisor would, every worker that stopped itself over a stalled recovery."""
        restarted = []
        for worker in list(self.workers):
            if worker.stopped is None and worker.proc.poll() == EXIT_RECOVERY_STALLED:
                worker.stopped = "recovery stalled"
                restarted.append((worker, self.start()))
        return restarted

    def died(self) -> list[Worker]:
        """Workers that exited without being asked to."""
        return [w for w in self.workers if w.stopped is None and w.proc.poll() is not None]

    async def sigterm(self, worker: Worker) -> float:
        """SIGTERM, SIGKILL after TERM_GRACE_S; the seconds it took to exit."""
        worker.stopped = "sigterm"
        begun = time.monotonic()
        await asyncio.to_thread(stop_process, worker.proc, TERM_GRACE_S)
        if worker.proc.returncode == -signal.SIGKILL:
            worker.stopped = "sigterm->sigkill"
        return time.monotonic() - begun

    def sigkill(self, worker: Worker) -> None:
        worker.stopped = "sigkill"
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.proc.pid, signal.SIGKILL)  # the worker leads a session of its own
        worker.proc.wait(10)

    def check_alive(self, leg: str) -> None:
        dead = self.died()
        if dead:
            self.run.problems.append(
                f"{leg}: worker(s) {', '.join(w.name for w in dead)} exited on their own\n"
                + log_tail([w.log for w in dead])
            )

    async def aclose(self) -> None:
        live = [w for w in self.workers if w.proc.poll() is None]
        await asyncio.gather(*(asyncio.to_thread(stop_process, w.proc, TERM_GRACE_S) for w in live))


@contextlib.asynccontextmanager
async def fleet(run: Run, settings: Settings, judge_url: str) -> AsyncIterator[Fleet]:
    workers = Fleet(run, settings, judge_url)
    try:
        yield workers
    finally:
        await workers.aclose()


async def group_shares(bootstrap: str, group: str, topic: str) -> tuple[str, list[int]]:
    """(the group's state, how many partitions of ``topic`` each member holds), from DescribeGroups.

    Faust's own assignor puts its bookkeeping in the assignment's user data; the partitions themselves
    are in the standard consumer-protocol layout, which is all that is read here.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        described = (await admin.describe_consumer_groups([group]))[0].to_object()
    finally:
        await admin.close()
    found = described["groups"][0]
    shares = []
    for member in found["members"]:
        raw = member["member_assignment"]
        held = ConsumerProtocolMemberAssignment.decode(raw).assignment if raw else []
        shares.append(sum(len(parts) for name, parts in held if name == topic))
    return str(found["state"]), sorted(shares, reverse=True)


async def wait_spread(run: Run, settings: Settings, members: int, workers: Fleet) -> tuple[list[int], float]:
    """Wait until the group is Stable with ``members`` members holding every pairs partition as evenly as
    they can (8/N each); (the shares, seconds waited). On timeout the last shares, and a problem noted."""
    topic, partitions = settings.topics.name("pairs"), run.args.partitions
    even = {partitions // members, math.ceil(partitions / members)}
    started = time.monotonic()
    state, shares = "?", list[int]()
    while time.monotonic() - started < run.plan.ready_s:
        if workers.died():
            break
        with contextlib.suppress(KafkaError):  # the coordinator may still be loading the new group
            state, shares = await group_shares(run.broker.bootstrap, settings.worker.app_id, topic)
        if state == "Stable" and len(shares) == members and sum(shares) == partitions and set(shares) <= even:
            return shares, time.monotonic() - started
        await asyncio.sleep(0.5)
    run.problems.append(
        f"{members} worker(s): the group never held the {partitions} partitions evenly "
        f"(state {state}, partitions per member {shares})"
    )
    return shares, time.monotonic() - started


# --------------------------------------------------------------------------------------------------
# Throughput legs
# --------------------------------------------------------------------------------------------------


def check_verdicts(run: Run, leg: str, pairs: SpeedPairs, watcher: OutcomeWatcher) -> None:
    """Every pair a consistent verdict for its marked candidate (the speed server always prefers it)."""
    lost = [pid for pid in pairs.ids if pid not in watcher.first]
    wrong = []
    for pid in pairs.ids:
        seen = watcher.first.get(pid)
        if seen is None:
            continue
        event = seen.event or {}
        if not seen.topic.endswith(".verdicts") or event.get("winner") != pairs.expected[pid]:
            wrong.append(f"{pid}: {seen.topic.rsplit('.', 1)[-1]} {event.get('winner') or event.get('reason')}")
    if lost:
        run.problems.append(f"{leg}: {len(lost)} of {len(pairs.ids)} pairs have no outcome, e.g. {lost[:3]}")
    if wrong:
        run.problems.append(f"{leg}: {len(wrong)} pairs wrongly judged, e.g. {wrong[:3]}")


async def throughput_leg(run: Run, server: SpeedServer, count: int) -> Leg:
    settings = run.settings(f"scale-{count}")
    await create_topics(run.broker.bootstrap, topic_specs(settings))
    bound = count * run.per_worker_bound
    n = max(20, math.ceil(bound * run.plan.backlog_s))
    pairs = SpeedPairs.make(n, settings.topics.prefix)
    finals = [settings.topics.name(kind) for kind in FINAL_KINDS]
    watcher = await OutcomeWatcher(run.broker.bootstrap, finals).start()
    leg_name = f"{count} worker(s)"
    try:
        async with fleet(run, settings, server.base_url) as workers:
            for _ in range(count):
                workers.start()
            shares, ready_s = await wait_spread(run, settings, count, workers)
            leg = Leg(count, n, bound, shares, ready_s)
            console.print(
                f"[bold]{leg_name}[/bold]: group settled in {ready_s:.0f} s, pairs partitions per worker {shares}; "
                f"{n} pairs waiting ({run.plan.backlog_s:g} s at the bound of {bound:g}/s)"
            )
            if workers.died():
                workers.check_alive(leg_name)
                return leg
            # What a worker costs with nothing to do (its loop, timers, fetches, commits): a fixed cost
            # that a slow judge spreads over few pairs per second, so it is part of the CPU per pair.
            idle_from = time.time()
            await asyncio.sleep(run.plan.idle_s)
            idle_cpu = sum(w.samples.cpu_between(idle_from, time.time()) for w in workers.workers)
            leg.idle_cores = idle_cpu / (count * (time.time() - idle_from))
            await produce_paced(
                run.broker.bootstrap, settings.topics.name("pairs"), pairs.dicts, None, spread=run.args.partitions
            )
            await watcher.wait_for(pairs.ids, run.plan.timeout_s, idle=60)
            workers.check_alive(leg_name)
            check_verdicts(run, leg_name, pairs, watcher)
            times = [watcher.first[p].timestamp for p in pairs.ids if p in watcher.first]
            if len(times) >= 3:
                leg.rate = Rate.of(times, [w.samples for w in workers.workers])
            return leg
    finally:
        await watcher.aclose()


# --------------------------------------------------------------------------------------------------
# The rebalance leg
# --------------------------------------------------------------------------------------------------


def churn_judge(run: Run) -> JudgeServerProcess:
    low, high = run.plan.tail
    behaviour = Behaviour(
        hold_marker=None,
        latency=Latency(median_s=run.args.churn_median, sigma=SIGMA, tail_share=0.01, tail_min_s=low, tail_max_s=high),
        flip_share=run.args.flip_share,
        seed=run.args.seed,
    )
    return JudgeServerProcess(behaviour, run.work / "churn-judge.log")


def churn_rate(args: argparse.Namespace) -> float:
    """Half of one worker's bound at the mean latency: the survivor of the kills still keeps up."""
    if args.churn_rate:
        return float(args.churn_rate)
    calls: int = args.calls
    mean: float = args.churn_median * math.exp(SIGMA**2 / 2)
    return round(0.5 * calls / (2 * mean), 1)


async def churn_leg(run: Run) -> Churn:
    """2 workers on a paced stream; a 3rd joins, one is SIGTERMed and another SIGKILLed, at random moments."""
    rng = random.Random(run.args.seed)
    settings = run.settings("scale-churn")
    await create_topics(run.broker.bootstrap, topic_specs(settings))
    rate, seconds = churn_rate(run.args), run.plan.churn_s
    dicts = [json.loads(raw) for raw in many_pairs(max(10, math.ceil(rate * seconds)), settings.topics.prefix)]
    ids = [str(d["pair_id"]) for d in dicts]
    # The negative control: pairs counted as sent that are never produced must come out as lost.
    phantoms = [f"{settings.topics.prefix}-never-sent-{i}" for i in range(run.args.self_test_lost)]
    finals = [settings.topics.name(kind) for kind in FINAL_KINDS]
    result = Churn(sent=len(ids) + len(phantoms))
    judge = await asyncio.to_thread(churn_judge, run)
    watcher = await OutcomeWatcher(run.broker.bootstrap, finals).start()
    began = time.monotonic()

    def note(what: str) -> None:
        line = f"[{time.monotonic() - began:6.1f} s] {what}"
        result.events.append(line)
        console.print(f"  {line}")

    async def supervise(workers: Fleet) -> None:
        while True:
            await asyncio.sleep(1.0)
            for stalled, replacement in workers.restart_stalled():
                result.restarts += 1
                note(f"{stalled.name} stopped itself (table recovery stalled); restarted as {replacement.name}")

    try:
        async with fleet(run, settings, judge.base_url) as workers:
            supervisor = asyncio.create_task(supervise(workers))
            for _ in range(2):
                note(f"start {workers.start().name}")
            await wait_spread(run, settings, 2, workers)
            note(f"group settled; {len(ids)} pairs at {rate:g}/s for {seconds:g} s")
            began_stream = time.monotonic()
            producing = asyncio.create_task(
                produce_paced(run.broker.bootstrap, settings.topics.name("pairs"), dicts, rate)
            )
            moments = [rng.uniform(0.15, 0.3), rng.uniform(0.35, 0.55), rng.uniform(0.6, 0.8)]
            terminating: asyncio.Task[float] | None = None
            for step, share in enumerate(moments):
                await asyncio.sleep(max(0.0, began_stream + share * seconds - time.monotonic()))
                workers.check_alive("rebalance")
                if step == 0:
                    note(f"start {workers.start().name}")
                    continue
                victim = rng.choice(workers.live)
                if step == 1:
                    note(f"SIGTERM {victim.name}")
                    victim.stopped = "sigterm"  # now, not when the task first runs: no SIGKILL for it
                    terminating = asyncio.create_task(workers.sigterm(victim))
                else:
                    note(f"SIGKILL {victim.name}")
                    workers.sigkill(victim)
            await producing
            note(f"all {len(ids)} pairs sent; {', '.join(w.name for w in workers.live)} drain")
            if terminating is not None:
                took = await terminating
                stopped = next(w for w in workers.workers if w.stopped and w.stopped.startswith("sigterm"))
                note(f"{stopped.name} exited {took:.1f} s after SIGTERM ({stopped.stopped})")
            # A pair caught in the tail takes up to its maximum per call, and again in a tie-break.
            await watcher.wait_for(ids, run.plan.timeout_s, idle=2 * run.plan.tail[1] + 60)
            supervisor.cancel()
            workers.check_alive("rebalance")
            note(f"{sum(1 for p in ids if p in watcher.first)} of {len(ids)} decided")
        result.lost = [p for p in ids + phantoms if p not in watcher.first]
        result.decided = result.sent - len(result.lost)
        result.duplicates = watcher.duplicates
        result.conflicting = {p: sorted(watcher.distinct[p]) for p in ids if len(watcher.distinct.get(p, ())) > 1}
        stats = await asyncio.to_thread(judge.stats)
        result.server = {
            "requests": stats.requests,
            "refused (400)": stats.bad,
            "flipped": stats.flipped,
            f"calls of {run.plan.tail[0]:g} s or more": stats.tail_calls,
            "peak in flight": stats.peak_in_flight,
        }
        if stats.bad:
            run.problems.append(f"rebalance: the judge refused {stats.bad} requests (see {judge.log_path})")
        if result.lost:
            run.problems.append(f"rebalance: {len(result.lost)} pairs LOST (no final outcome), e.g. {result.lost[:3]}")
        if result.conflicting:
            example = list(result.conflicting.items())[:3]
            run.problems.append(f"rebalance: {len(result.conflicting)} pairs with conflicting outcomes, e.g. {example}")
        return result
    finally:
        await watcher.aclose()
        await asyncio.to_thread(judge.stop)


# --------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------


def report(run: Run, legs: list[Leg], churn: Churn | None, load: tuple[float, float]) -> str:
    """Print the tables; return the one-line summary."""
    args = run.args
    console.print(
        f"\n[bold]Scale-out[/bold]: judge latency {args.latency:g} s, {args.calls} calls in flight per worker "
        f"(worker concurrency {args.calls // 2}), {args.partitions} partitions; per-worker bound "
        f"{args.calls} ÷ (2 × {args.latency:g} s) = {run.per_worker_bound:g} pairs/s"
    )
    table = Table(show_lines=False)
    for column in (
        "workers",
        "partitions each",
        "pairs",
        "bound/s",
        "pairs/s",
        "÷ bound",
        "÷ 1 worker",
        "÷ ideal N",
        "CPU ms/pair",
        "idle CPU/worker",
        "ms/pair above idle",
        "window s",
    ):
        table.add_column(column, justify="right")
    one = next((leg.rate.rate for leg in legs if leg.workers == 1 and leg.rate), None)
    ratios: dict[int, float] = {}
    for leg in legs:
        r = leg.rate
        if r is None:
            table.add_row(str(leg.workers), "/".join(map(str, leg.spread)), str(leg.pairs), f"{leg.bound:g}", "—")
            continue
        ratio = r.rate / one if one else float("nan")
        ratios[leg.workers] = ratio
        table.add_row(
            str(leg.workers),
            "/".join(map(str, leg.spread)),
            str(leg.pairs),
            f"{leg.bound:g}",
            f"{r.rate:.1f}",
            f"{r.rate / leg.bound:.3f}",
            f"{ratio:.2f}",
            f"{ratio / leg.workers:.3f}",
            f"{r.cpu_ms:.2f}",
            f"{100 * leg.idle_cores:.1f} %",
            f"{leg.above_idle_ms:.2f}",
            f"{r.window_s:.1f}",
        )
    console.print(table)
    summary = ["SCALEOUT"] + [f"ratio{n}={ratio:.3f}" for n, ratio in sorted(ratios.items())]
    summary += [f"rate{leg.workers}={leg.rate.rate:.2f}" for leg in legs if leg.rate]
    if churn is not None:
        console.print(
            f"\n[bold]Rebalance under load[/bold] (judge lognormal, median {args.churn_median:g} s, "
            f"flip share {args.flip_share:g}, seed {args.seed}): sent {churn.sent}, decided {churn.decided}, "
            f"lost {len(churn.lost)}, duplicates {churn.duplicates}, conflicting {len(churn.conflicting)}, "
            f"restarted after a stalled table recovery {churn.restarts}"
        )
        console.print("judge server: " + ", ".join(f"{k} {v}" for k, v in churn.server.items()))
        summary += [f"sent={churn.sent}", f"lost={len(churn.lost)}", f"duplicates={churn.duplicates}"]
        summary += [f"conflicting={len(churn.conflicting)}", f"restarts={churn.restarts}"]
    console.print(f"load average before {load[0]:.2f}, after {load[1]:.2f} ({os.cpu_count()} cores)")
    return " ".join(summary)


# --------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------


async def main_async(args: argparse.Namespace) -> None:
    # SIGTERM (a CI timeout) cancels the run, so the finally blocks stop workers, servers and the broker:
    # they all live in sessions of their own and would outlive us otherwise.
    task = asyncio.current_task()
    if task is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    plan = Plan.of(args)
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    with work_dir("pairjudge-scaleout-", keep=args.keep) as work:
        async with bench_broker(work.path, bootstrap=args.bootstrap) as broker:
            console.print(f"[bold]broker[/bold]: {broker.name} ({broker.bootstrap})")
            run = Run(args, plan, broker, work.path, Sampler())
            legs: list[Leg] = []
            churn: Churn | None = None
            server = SpeedServer(args.latency, work.path / "judge-server.log")
            try:
                for count in args.workers:
                    legs.append(await throughput_leg(run, server, count))
                stats = await asyncio.to_thread(server.stats)
                if stats.bad:
                    run.problems.append(f"the judge server refused {stats.bad} requests (see {server.log_path})")
                if not args.no_churn:
                    churn = await churn_leg(run)
            finally:
                server.stop()
                await run.sampler.aclose()
        summary = report(run, legs, churn, (load_before, os.getloadavg()[0]))
        console.print(f"run time {time.monotonic() - started:.0f} s")
        console.print(summary)
        if run.problems:
            for problem in run.problems:
                console.print(f"[red]{problem}[/red]")
            fail(f"{len(run.problems)} problem(s) above; logs in {work.path}")
        work.ok = True


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    add_broker_args(parser)
    parser.add_argument("--quick", action="store_true", help="small counts and windows (the CI smoke run)")
    parser.add_argument("--latency", type=float, default=1.0, help="seconds the judge holds each call (1.0)")
    parser.add_argument("--calls", type=int, default=32, help="judge calls in flight per worker (32); pairs: half")
    parser.add_argument("--workers", type=parse_counts, default=[1, 2, 4], help="worker counts, e.g. 1,2,4")
    parser.add_argument("--partitions", type=int, default=8, help="partitions per topic (8)")
    parser.add_argument("--backlog-s", type=float, help="backlog per leg in seconds at its bound (30; quick 8)")
    parser.add_argument("--no-churn", action="store_true", help="skip the rebalance leg")
    parser.add_argument("--churn-s", type=float, help="seconds of paced arrivals in the rebalance leg (45; quick 15)")
    parser.add_argument("--churn-rate", type=float, help="pairs/s in the rebalance leg (half a worker's bound)")
    parser.add_argument("--churn-median", type=float, default=1.0, help="median judge latency there, s (1.0)")
    parser.add_argument("--flip-share", type=float, default=0.2, help="share of calls with a random answer (0.2)")
    parser.add_argument("--seed", type=int, default=1, help="seeds the kill moments, victims and judge (1)")
    parser.add_argument(
        "--self-test-lost",
        type=int,
        default=0,
        metavar="N",
        help="negative control: count N pairs as sent that are never produced; must report N lost and fail",
    )
    args = parser.parse_args(argv)
    if args.latency <= 0 or args.calls < 2 or args.partitions < max(args.workers):
        parser.error("--latency must be positive, --calls at least 2, --partitions at least the most workers")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    run_bench(main_async(parse_args(argv)))


if __name__ == "__main__":
    main()
