"""``pairjudge worker --processes 1`` against ``--processes 2`` on one host: what the second core buys (issue 27).

Run from the checkout root::

    python -m bench.processes                              # Apache Kafka started in a temp dir; 2-4 minutes
    python -m bench.processes --bootstrap 127.0.0.1:9092   # a running broker
    python -m bench.processes --quick                      # small backlogs (a smoke run)
    python -m bench.processes --processes 1,2,3 --latency 0.5

A simulated judge (``bench._speed_server``, a process of its own on 127.0.0.1) holds every call for
``--latency`` L seconds (0.2), and prefers the output carrying ``bench._speed_server.MARKER`` in both orders, so
every pair must end as a verdict for its marked candidate. For N in ``--processes`` (1 and 2), back to back,
on fresh ``--partitions``-partition topics (8) and a fresh consumer group each:

1. ``python -m pairjudge.streams.cli worker --processes N --no-create-topics`` starts, with
   ``PAIRJUDGE_WORKER__CONCURRENCY`` = C/2 and ``PAIRJUDGE_JUDGE__MAX_CONCURRENCY`` = C per worker process
   (``--calls``, 128: 64 pairs and 128 calls in flight each, as issue 13's fast worker), the judge kind openai,
   the response cache and telemetry off, and its health endpoint on (so N = 1 and N = 2 both collect metrics).
   With N = 1 that is the plain worker, in the command's own process; with N = 2 a supervisor and two workers.
   Each process's bound is C ÷ 2L pairs/s (320/s at the defaults), above what one core judges (issue 13:
   a worker at C = 128 was CPU-bound at about 244/s), so the legs measure how the processes use the cores.
2. The bench waits until ``/readyz`` answers 200 (every worker ready) and the group is Stable with N members
   holding ``partitions ÷ N`` partitions each, then produces the backlog: N × C ÷ 2L × ``--backlog-s`` pairs
   (15 s of work at the bound; 3 with ``--quick``), spread evenly over the partitions (pair i to partition
   i mod P), so no worker drains early and start-up is not in the measurement.
3. Rate = completions ÷ time over the steady window: the broker timestamps of the pairs' final outcomes,
   without the first and last 10 % (``bench.speed.Rate``). CPU: the command's process and, for N > 1, its
   workers (from ``/livez``), from /proc every 0.1 s, over the same window, per pair.
4. SIGTERM to the command; it must exit 0 (for N > 1, after stopping its workers).

The table gives each N's rate, its ratio to N = 1's, the CPU per pair and the cores used. The machine may be
shared (the broker and the judge server run on it too), so the ratio is printed, never judged. Exit 1
(``BENCH FAILED``, work dir kept) when a pair is lost or wrongly judged, when a worker process was restarted
during a leg, when the command did not exit 0 on SIGTERM, or when the judge server refused a request. The last
line, ``PROCESSES ...``, carries the figures in one parseable line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka.errors import KafkaError
from rich.table import Table

from bench._speed_kit import (
    REPO,
    OutcomeWatcher,
    Sampler,
    SpeedPairs,
    log_tail,
    produce_paced,
    run_bench,
    start_process,
    worker_env,
)
from bench._speed_server import SpeedServer
from bench.scaleout import group_shares
from bench.speed import Rate
from pairjudge.streams.cli.demo import stop_process
from pairjudge.streams.config.settings import Settings, load_settings
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

#: Seconds the command gets to exit after SIGTERM: the workers' default grace (30 s) and the supervisor's margin.
STOP_S = 60.0


@dataclass(frozen=True)
class Plan:
    backlog_s: float  # each leg's backlog, in seconds of work at its bound
    ready_s: float  # most seconds for the workers to be ready and the group to settle
    timeout_s: float  # most seconds to wait for a leg's outcomes

    @classmethod
    def of(cls, args: argparse.Namespace) -> Plan:
        if args.quick:
            return cls(args.backlog_s or 3.0, ready_s=180, timeout_s=240)
        return cls(args.backlog_s or 15.0, ready_s=180, timeout_s=400)


@dataclass
class Leg:
    processes: int
    pairs: int
    bound: float  # pairs/s: processes × C ÷ 2L
    spread: list[int] = field(default_factory=list)  # pairs partitions per group member once settled
    rate: Rate | None = None
    exit_status: int | None = None


@dataclass
class Run:
    args: argparse.Namespace
    plan: Plan
    broker: BenchBroker
    work: Path
    sampler: Sampler
    problems: list[str] = field(default_factory=list)
    base: Settings = field(default_factory=load_settings)

    @property
    def per_process_bound(self) -> float:
        calls: int = self.args.calls
        latency: float = self.args.latency
        return calls / (2 * latency)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def health(port: int, path: str) -> tuple[int | None, dict[str, Any]]:
    """``(status, JSON body)`` of the command's health endpoint; ``(None, {})`` while nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return int(response.status), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), json.loads(exc.read() or b"{}")
    except (OSError, ValueError):
        return None, {}


async def wait_ready(
    run: Run, port: int, proc: subprocess.Popen[bytes], members: int, settings: Settings
) -> list[int] | None:
    """Wait for ``/readyz`` 200 and a Stable group of ``members`` holding the partitions evenly; their shares,
    or None (a problem noted) when that did not happen within the plan's time."""
    partitions: int = run.args.partitions
    deadline = time.monotonic() + run.plan.ready_s
    status: int | None = None
    body: dict[str, Any] = {}
    state, shares = "?", list[int]()
    while time.monotonic() < deadline and proc.poll() is None:
        status, body = await asyncio.to_thread(health, port, "/readyz")
        if status == 200:
            with contextlib.suppress(KafkaError):  # the coordinator may still be loading the new group
                state, shares = await group_shares(
                    run.broker.bootstrap, settings.worker.app_id, settings.topics.name("pairs")
                )
            if state == "Stable" and len(shares) == members and shares == [partitions // members] * members:
                return shares
        await asyncio.sleep(0.5)
    run.problems.append(
        f"{members} process(es): not ready or not spread (readyz {status} {body.get('reasons')}, "
        f"group {state} {shares}, exit {proc.poll()})"
    )
    return None


def check_verdicts(run: Run, name: str, pairs: SpeedPairs, watcher: OutcomeWatcher) -> None:
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
        run.problems.append(f"{name}: {len(lost)} of {len(pairs.ids)} pairs have no outcome, e.g. {lost[:3]}")
    if wrong:
        run.problems.append(f"{name}: {len(wrong)} pairs wrongly judged, e.g. {wrong[:3]}")


async def leg(run: Run, server: SpeedServer, count: int) -> Leg:
    """One ``pairjudge worker --processes count`` through a backlog (module doc)."""
    name = f"--processes {count}"
    tag = f"procs-{count}"
    settings = run_settings(run.base, run.broker, run.work / tag, tag=tag, kafka={"partitions": run.args.partitions})
    await create_topics(run.broker.bootstrap, topic_specs(settings))
    bound = count * run.per_process_bound
    n = max(20, math.ceil(bound * run.plan.backlog_s))
    result = Leg(count, n, bound)
    pairs = SpeedPairs.make(n, settings.topics.prefix)
    watcher = await OutcomeWatcher(run.broker.bootstrap, [settings.topics.name(k) for k in FINAL_KINDS]).start()
    port = free_port()
    env = worker_env(
        settings,
        REPO,
        pairs_in_flight=run.args.calls // 2,
        calls_in_flight=run.args.calls,
        data_dir=run.work / tag / "data",
        judge_url=server.base_url,
    )
    env["PAIRJUDGE_HEALTH__PORT"] = str(port)
    log = run.work / f"{tag}.log"
    argv = [sys.executable, "-m", "pairjudge.streams.cli", "worker", "--processes", str(count), "--no-create-topics"]
    proc = start_process(argv, env, REPO, log)
    try:
        shares = await wait_ready(run, port, proc, count, settings)
        if shares is None:
            run.problems.append(log_tail([log]))
            return result
        result.spread = shares
        _, live = await asyncio.to_thread(health, port, "/livez")
        workers = [p["pid"] for p in live.get("processes", []) if p.get("pid")]
        samples = [run.sampler.watch(pid) for pid in {proc.pid, *workers}]
        console.print(
            f"[bold]{name}[/bold]: ready, partitions per worker {shares}; {n} pairs "
            f"({run.plan.backlog_s:g} s at the bound of {bound:g}/s)"
        )
        await produce_paced(
            run.broker.bootstrap, settings.topics.name("pairs"), pairs.dicts, None, spread=run.args.partitions
        )
        await watcher.wait_for(pairs.ids, run.plan.timeout_s, idle=60)
        check_verdicts(run, name, pairs, watcher)
        times = [watcher.first[p].timestamp for p in pairs.ids if p in watcher.first]
        if len(times) >= 3:
            result.rate = Rate.of(times, samples)
        _, live = await asyncio.to_thread(health, port, "/livez")
        restarted = [p for p in live.get("processes", []) if p.get("restarts")]
        if restarted or proc.poll() is not None:
            run.problems.append(f"{name}: a worker process exited during the leg ({restarted})\n{log_tail([log])}")
        return result
    finally:
        await watcher.aclose()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(Exception):
                await asyncio.to_thread(proc.wait, STOP_S)
        await asyncio.to_thread(stop_process, proc, 10)
        result.exit_status = proc.returncode
        if proc.returncode != 0:
            run.problems.append(f"{name}: exited {proc.returncode} on SIGTERM, not 0\n{log_tail([log])}")


def report(run: Run, legs: list[Leg], load: tuple[float, float]) -> str:
    """Print the table; return the one-line summary."""
    args = run.args
    console.print(
        f"\n[bold]Worker processes on one host[/bold]: judge latency {args.latency:g} s, {args.calls} calls in "
        f"flight per process (concurrency {args.calls // 2}), {args.partitions} partitions; per-process bound "
        f"{args.calls} ÷ (2 × {args.latency:g} s) = {run.per_process_bound:g} pairs/s; {os.cpu_count()} cores"
    )
    table = Table()
    for column in ("processes", "partitions each", "pairs", "bound/s", "pairs/s", "÷ 1 process", "CPU ms/pair"):
        table.add_column(column, justify="right")
    table.add_column("cores used", justify="right")
    table.add_column("window s", justify="right")
    one = next((lg.rate.rate for lg in legs if lg.processes == 1 and lg.rate), None)
    summary = ["PROCESSES"]
    for lg in legs:
        r = lg.rate
        if r is None:
            table.add_row(str(lg.processes), "/".join(map(str, lg.spread)), str(lg.pairs), f"{lg.bound:g}", "—")
            continue
        ratio = r.rate / one if one else float("nan")
        table.add_row(
            str(lg.processes),
            "/".join(map(str, lg.spread)),
            str(lg.pairs),
            f"{lg.bound:g}",
            f"{r.rate:.1f}",
            f"{ratio:.2f}",
            f"{r.cpu_ms:.2f}",
            f"{r.cpu_ms * r.rate / 1000:.2f}",
            f"{r.window_s:.1f}",
        )
        summary.append(f"rate{lg.processes}={r.rate:.1f}")
        if lg.processes != 1:
            summary.append(f"ratio{lg.processes}={ratio:.3f}")
    console.print(table)
    console.print(f"load average before {load[0]:.2f}, after {load[1]:.2f}")
    return " ".join(summary)


async def main_async(args: argparse.Namespace) -> None:
    # SIGTERM (a CI timeout) cancels the run, so the finally blocks stop the worker commands, the judge server
    # and the broker: they live in sessions of their own and would outlive us otherwise.
    task = asyncio.current_task()
    if task is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    plan = Plan.of(args)
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    with work_dir("pairjudge-processes-", keep=args.keep) as work:
        async with bench_broker(work.path, bootstrap=args.bootstrap) as broker:
            console.print(f"[bold]broker[/bold]: {broker.name} ({broker.bootstrap})")
            run = Run(args, plan, broker, work.path, Sampler())
            legs: list[Leg] = []
            server = SpeedServer(args.latency, work.path / "judge-server.log")
            try:
                for count in args.processes:
                    legs.append(await leg(run, server, count))
                stats = await asyncio.to_thread(server.stats)
                if stats.bad:
                    run.problems.append(f"the judge server refused {stats.bad} requests (see {server.log_path})")
            finally:
                server.stop()
                await run.sampler.aclose()
        summary = report(run, legs, (load_before, os.getloadavg()[0]))
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
    parser.add_argument("--quick", action="store_true", help="small backlogs (a smoke run)")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the judge holds each call (0.2)")
    parser.add_argument("--calls", type=int, default=128, help="judge calls in flight per process (128); pairs: half")
    parser.add_argument("--processes", type=parse_counts, default=[1, 2], help="process counts, e.g. 1,2")
    parser.add_argument("--partitions", type=int, default=8, help="partitions per topic (8)")
    parser.add_argument("--backlog-s", type=float, help="backlog per leg in seconds at its bound (15; quick 3)")
    args = parser.parse_args(argv)
    if args.latency <= 0 or args.calls < 2 or any(args.partitions % n for n in args.processes):
        parser.error("--latency must be positive, --calls at least 2, --partitions a multiple of every count")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    run_bench(main_async(parse_args(argv)))


if __name__ == "__main__":
    main()
