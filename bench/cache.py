"""The response cache alone: CPU per lookup and store, old (one thread hop per get and put) beside new.

Issue 13 measured the cache slowing the worker down with every lookup missing (0.90× at 128 calls in
flight): every get and every put hopped to a worker thread, about 1.4 ms of CPU per pair on a miss.
This runs ``CachingJudge`` over both implementations in one process, alternating rounds so machine
noise hits both alike:

* **old**: ``streams/judges/cache.py`` as of ``--baseline`` (default 93099e9, before the change),
  read with ``git show`` into a temporary module;
* **new**: the module in this checkout.

Two measurements, each on a fresh cache directory per round:

1. **CPU per call** (process CPU, every thread included, ÷ calls), ``--calls`` distinct requests with
   ``--inflight`` in flight, over an in-process judge that only yields to the loop:

   - *miss*: every lookup misses, every reply is stored (what a fresh worker pays per call, compared
     with the same calls with no cache at all: ``off``);
   - *hit, same process*: the same requests again through a new ``CachingJudge`` on the same store;
   - *hit, restart*: the store closed (flushing what is queued) and reopened: a restarted worker, every
     hit read from disk;
   - *close*: the time ``close()`` takes after the misses (the new cache flushes its queue here).

2. **A worker-shaped load**: calls that each burn ``--worker-cpu-ms`` of CPU on the event loop (what
   the rest of the worker spends per call; the issue measured about 3.3 ms per pair, two calls) and
   wait ``--latency`` for the judge, ``--inflight`` in flight, every lookup missing. With 2 cores this
   is CPU bound, as the issue's worker was: calls per second with the cache on ÷ off, old and new.

    python -m bench.cache [--calls 4000] [--inflight 128] [--rounds 3] [--load-calls 2000]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import anyio.lowlevel

from pairjudge.agents.judge import ChatMessage, Judge, JudgeRequest
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.streams.judges import cache as new_cache

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "93099e9"  # main before the cache change: the "today" of issue 13's figures
REPLY = (
    '{"winner": "A", "confidence": 0.9, "justification": "Output A follows the style guide more closely.", '
    '"dimension_scores": {"tone_match": {"A": 4, "B": 3}}, "key_differentiator": "warmer register in A"}'
)
SYSTEM = "You are an evaluation judge. " * 40  # about a real prompt's size: the key hashes all of it


def load_baseline(commit: str, work: Path) -> ModuleType:
    """``streams/judges/cache.py`` at ``commit`` as a module of its own (it imports only shared code)."""
    source = subprocess.run(
        ["git", "show", f"{commit}:streams/judges/cache.py"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    path = work / "bench_old_response_cache.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("bench_old_response_cache", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def requests(n: int, tag: str) -> list[JudgeRequest]:
    return [
        JudgeRequest(
            template="tone_style",
            messages=(ChatMessage("system", SYSTEM), ChatMessage("user", f"Compare output A and B, {tag} #{i}.")),
            response_schema={"type": "object", "properties": {"winner": {"enum": ["A", "B", "tie"]}}},
            schema_name="tone_style_verdict",
        )
        for i in range(n)
    ]


def judge(on_request: Callable[[JudgeRequest], Awaitable[None]] | None = None) -> ScriptedJudge:
    return ScriptedJudge(lambda _: REPLY, model="bench-m", input_tokens=300, output_tokens=80, on_request=on_request)


async def yield_once(_: JudgeRequest) -> None:
    await anyio.lowlevel.checkpoint()  # as a real call has one: the calls in flight interleave


async def drive(target: Judge, reqs: Sequence[JudgeRequest], inflight: int) -> tuple[float, float]:
    """All of ``reqs`` through ``target.complete``, ``inflight`` at a time: (CPU s, wall s)."""
    source = iter(reqs)

    async def slot() -> None:
        for request in source:
            await target.complete(request)

    cpu, wall = time.process_time(), time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(inflight):
            tg.start_soon(slot)
    return time.process_time() - cpu, time.perf_counter() - wall


async def until_ready(store: Any) -> None:
    # The new cache loads its key set in its writer thread; until then every miss reads the disk.
    # Measure the steady state, as a worker that has been up for a second is.
    with anyio.fail_after(30):
        while not getattr(store, "keys_loaded", True):  # noqa: ASYNC110 - polling a thread's state
            await anyio.sleep(0.005)


@dataclasses.dataclass
class Micro:
    miss_us: list[float] = dataclasses.field(default_factory=list)
    off_us: list[float] = dataclasses.field(default_factory=list)
    hit_us: list[float] = dataclasses.field(default_factory=list)
    disk_hit_us: list[float] = dataclasses.field(default_factory=list)
    close_ms: list[float] = dataclasses.field(default_factory=list)
    miss_rate: list[float] = dataclasses.field(default_factory=list)


async def micro_round(module: ModuleType, work: Path, calls: int, inflight: int, out: Micro, tag: str) -> None:
    reqs = requests(calls, tag)
    cpu, _ = await drive(judge(yield_once), reqs, inflight)
    out.off_us.append(cpu / calls * 1e6)

    store = module.ResponseCache(work / tag)
    await until_ready(store)
    cpu, wall = await drive(module.CachingJudge(judge(yield_once), store), reqs, inflight)
    out.miss_us.append(cpu / calls * 1e6)
    out.miss_rate.append(calls / wall)
    caching = module.CachingJudge(judge(), store)
    cpu, _ = await drive(caching, reqs, inflight)
    out.hit_us.append(cpu / calls * 1e6)
    if caching.stats.hits != calls:
        raise SystemExit(f"{tag}: {caching.stats.hits} hits of {calls} in the same process")
    started = time.perf_counter()
    store.close()
    out.close_ms.append((time.perf_counter() - started) * 1e3)

    reopened = module.ResponseCache(work / tag)
    await until_ready(reopened)
    caching = module.CachingJudge(judge(), reopened)
    cpu, _ = await drive(caching, reqs, inflight)
    out.disk_hit_us.append(cpu / calls * 1e6)
    reopened.close()
    if caching.stats.hits != calls:
        raise SystemExit(f"{tag}: {caching.stats.hits} hits of {calls} after a restart")


async def load_round(
    module: ModuleType | None, work: Path, calls: int, inflight: int, cpu_ms: float, latency: float, tag: str
) -> tuple[float, float]:
    """(calls per second, ms of CPU per call) on the worker-shaped load (``module`` None: no cache).

    The CPU figure moves less with a noisy neighbour than the rate does: read both."""

    async def worker_call(_: JudgeRequest) -> None:
        end = time.thread_time() + cpu_ms / 1000  # the rest of the worker's CPU per call, on the loop
        while time.thread_time() < end:
            pass
        await anyio.sleep(latency)

    target: Judge = judge(worker_call)
    store = None
    if module is not None:
        store = module.ResponseCache(work / tag)
        await until_ready(store)
        target = module.CachingJudge(target, store)
    reqs = requests(calls, tag)
    started = time.process_time()
    _, wall = await drive(target, reqs, inflight)
    if store is not None:
        store.close()  # its final flush is part of what the cache costs
    return calls / wall, (time.process_time() - started) / calls * 1e3


def med(values: Sequence[float]) -> float:
    return statistics.median(values)


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as tmp:
        work = Path(tmp)
        impls: dict[str, ModuleType] = {"old": load_baseline(args.baseline, work), "new": new_cache}
        micro = {name: Micro() for name in impls}
        load: dict[str, list[float]] = {"off": [], "old": [], "new": []}
        load_cpu: dict[str, list[float]] = {"off": [], "old": [], "new": []}
        for r in range(args.rounds):
            # Alternate the order so a noisy neighbour does not favour one side.
            names = list(impls) if r % 2 == 0 else list(reversed(impls))
            for name in names:
                await micro_round(impls[name], work, args.calls, args.inflight, micro[name], f"{name}-{r}")
            if args.load_calls:
                for label in ("off", *names):
                    rate, cpu = await load_round(
                        impls.get(label),
                        work,
                        args.load_calls,
                        args.inflight,
                        args.worker_cpu_ms,
                        args.latency,
                        f"load-{label}-{r}",
                    )
                    load[label].append(rate)
                    load_cpu[label].append(cpu)
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    old, new = micro["old"], micro["new"]
    print(
        f"\nCPU per call (µs, process CPU incl. all threads; median of {args.rounds} rounds), "
        f"{args.calls} distinct requests, {args.inflight} in flight, instant in-process judge\n"
    )
    print(f"{'':42}{'old':>10}{'new':>10}{'old ÷ new':>11}")

    def row(label: str, a: float, b: float, unit: str = "") -> None:
        print(f"{label:42}{a:>10.1f}{b:>10.1f}{a / b if b else float('inf'):>10.1f}×{unit}")

    row("no cache (same loop, judge alone)", med(old.off_us), med(new.off_us))
    row("miss: lookup + judge + store", med(old.miss_us), med(new.miss_us))
    row(
        "  of which the cache (miss − no cache)", med(old.miss_us) - med(old.off_us), med(new.miss_us) - med(new.off_us)
    )
    row(
        "  cache per pair (2 calls), µs",
        2 * (med(old.miss_us) - med(old.off_us)),
        2 * (med(new.miss_us) - med(new.off_us)),
    )
    row("hit, same process", med(old.hit_us), med(new.hit_us))
    row("hit, restarted (read from disk)", med(old.disk_hit_us), med(new.disk_hit_us))
    print(f"{'close() after the misses, ms':42}{med(old.close_ms):>10.1f}{med(new.close_ms):>10.1f}")
    print(f"{'misses: calls/s (wall, higher is better)':42}{med(old.miss_rate):>10.1f}{med(new.miss_rate):>10.1f}")
    if args.load_calls:
        off = med(load["off"])
        print(
            f"\nWorker-shaped load: {args.load_calls} calls, each {args.worker_cpu_ms:g} ms of loop CPU and "
            f"{args.latency * 1000:g} ms of judge latency, {args.inflight} in flight, all misses "
            f"(median of {args.rounds})\n"
        )
        print(f"{'':42}{'off':>10}{'old':>10}{'new':>10}")
        print(f"{'calls/s':42}{off:>10.1f}{med(load['old']):>10.1f}{med(load['new']):>10.1f}")
        ratios = f"{med(load['old']) / off:>10.2f}{med(load['new']) / off:>10.2f}"
        print(f"{'cache on ÷ off (goal ≥ 1.0)':42}{1.0:>10.2f}{ratios}")
        print(f"{'  per round, old':42}{_ratios(load['old'], load['off'])}")
        print(f"{'  per round, new':42}{_ratios(load['new'], load['off'])}")
        cpu_off, cpu_old, cpu_new = (med(load_cpu[label]) for label in ("off", "old", "new"))
        print(f"{'CPU per call, ms (all threads)':42}{cpu_off:>10.3f}{cpu_old:>10.3f}{cpu_new:>10.3f}")
        cpu_ratios = f"{cpu_off / cpu_old:>10.2f}{cpu_off / cpu_new:>10.2f}"
        print(f"{'CPU off ÷ on (the ratio when CPU bound)':42}{1.0:>10.2f}{cpu_ratios}")


def _ratios(on: Sequence[float], off: Sequence[float]) -> str:
    return " ".join(f"{a / b:.2f}" for a, b in zip(on, off, strict=True))


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=4000, help="distinct requests per micro run (default 4000)")
    parser.add_argument("--inflight", type=int, default=128, help="calls in flight (default 128)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--load-calls", type=int, default=2000, help="calls per worker-shaped run; 0 skips it")
    parser.add_argument("--worker-cpu-ms", type=float, default=1.6, help="loop CPU per call (default 1.6 ms)")
    parser.add_argument("--latency", type=float, default=0.2, help="judge latency, seconds (default 0.2)")
    parser.add_argument("--baseline", default=BASELINE, help=f"commit of the old cache (default {BASELINE})")
    args = parser.parse_args(argv)
    if args.calls < 1 or args.inflight < 1 or args.rounds < 1 or args.load_calls < 0:
        parser.error("--calls, --inflight and --rounds must be >= 1, --load-calls >= 0")
    return args


if __name__ == "__main__":
    anyio.run(main, parse())
