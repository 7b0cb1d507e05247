"""What ``pairjudge gateway`` adds to a call, beside going direct and beside a LiteLLM proxy, in one run.

Four processes on 127.0.0.1: the champion (``bench._gateway_upstream``: a fixed ``--latency-ms`` before the
first byte, then ``--chunks`` streamed chunks ``--chunk-ms`` apart; answered at once for the model ``bench-fast``),
the gateway (``pairjudge gateway``), a LiteLLM proxy (``bench._litellm_proxy``: LiteLLM 1.110.2 with its
``ShadowEvalLogger`` registered, access log off), and this load generator (aiohttp, raw HTTP: no SDK
time in the figures). Kafka is a closed port unless ``--bootstrap`` names one: the gateway fails open, and the
capture path still runs to its drop.

1. **Requests a second on one core** (first, to find the rate LiteLLM sustains): ``--concurrency`` connections,
   closed loop, unstreamed, no upstream latency, each proxy pinned to ``--cpu`` (every thread of its process and
   its children) for its turns and free again after them; the targets take turns (``--rounds``) so that all see
   the same machine. Per target: requests a second, and the CPU seconds (``/proc``, the process and its children) of the
   process in the middle per request: the proxy's, or for the direct row the champion's own.
2. **Added latency at a fixed rate**: ``--rate`` requests a second, half unstreamed, half streamed, to direct and
   one proxy interleaved, in blocks that alternate between the two proxies (so neither proxy's CPU lands on the
   other's figures, and both see the same machine), no process pinned. Time to the first body byte and to the
   last; the added latency is the proxy's percentile minus that of the direct calls of the same blocks. LiteLLM
   is measured at ``--rate`` if it sustains it, else at a quarter of what it sustained in part 1 (or
   ``--litellm-rate``).
3. **RSS with Kafka down**: the gateway's, each second over the whole run, ``--rss-seconds`` more of load at
   ``--rate`` at the end (``--ten-minutes`` for the issue's ten); then the capture sink's counts from ``/readyz``.

    python -m bench.gateway [--rate 200] [--seconds 10] [--ten-minutes] [--no-litellm]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from rich.console import Console
from rich.table import Table

from bench._litellm_proxy import litellm_proxy_url, litellm_venv

_TICKS = os.sysconf("SC_CLK_TCK")
_MESSAGES = [{"role": "user", "content": "Say something short."}]
BODY = json.dumps({"model": "bench", "messages": _MESSAGES, "max_tokens": 32}).encode()
STREAM_BODY = json.dumps({"model": "bench", "messages": _MESSAGES, "stream": True}).encode()
#: The closed loop's call: the champion answers the model ``bench-fast`` at once.
FAST_BODY = json.dumps({"model": "bench-fast", "messages": _MESSAGES, "max_tokens": 32}).encode()
JSON = {"Content-Type": "application/json"}
PROXIES = ("gateway", "litellm")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _descendants(pid: int) -> list[int]:
    found = [pid]
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                for child in f.read().split():
                    found += _descendants(int(child))
    return found


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user and system, all threads) of ``pid`` and its descendants."""
    total = 0
    for one_pid in _descendants(pid):
        with contextlib.suppress(OSError), open(f"/proc/{one_pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / _TICKS


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of ``pid`` and of its descendants on ``cpus`` (threads started later inherit it)."""
    for one_pid in _descendants(pid):
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{one_pid}/task"):
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(int(task), cpus)


def same_autogroup_nice(pid: int) -> None:
    """``pid``'s autogroup (its session's, Linux) at this process's autogroup's nice. The LiteLLM proxy runs in a
    session of its own; with autogroups, CPU is shared between sessions first, so without this it would not get
    the same share of the machine as the gateway (in this process's session) when the bench's session is raised."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/self/autogroup") as f:
            nice = f.read().split("nice")[1].strip()
        with open(f"/proc/{pid}/autogroup", "w") as f:
            f.write(nice)


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


@contextlib.contextmanager
def process(args: list[str], env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def wait_up(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{url}: exited: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
            with contextlib.suppress(aiohttp.ClientError):
                async with http.get(url) as r:
                    await r.read()
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


@dataclass(frozen=True)
class Target:
    url: str
    headers: Mapping[str, str]
    #: The process whose CPU a call through this target costs (the proxy; for direct, the champion).
    pid: int


@dataclass
class Timings:
    first: list[float] = field(default_factory=list)
    last: list[float] = field(default_factory=list)
    #: How many reads the body came in (a streamed reply held back arrives in fewer).
    pieces: list[int] = field(default_factory=list)
    errors: int = 0

    def add(self, other: Timings) -> None:
        self.first += other.first
        self.last += other.last
        self.pieces += other.pieces
        self.errors += other.errors


async def one(http: aiohttp.ClientSession, target: Target, body: bytes, into: Timings) -> None:
    started = time.perf_counter()
    pieces = 0
    try:
        async with http.post(target.url, data=body, headers=target.headers) as r:
            first = None
            async for _ in r.content.iter_any():
                pieces += 1
                if first is None:
                    first = time.perf_counter()
            if r.status != 200 or first is None:
                into.errors += 1
                return
    except aiohttp.ClientError:
        into.errors += 1
        return
    into.first.append((first - started) * 1000)
    into.last.append((time.perf_counter() - started) * 1000)
    into.pieces.append(pieces)


def pct(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def fixed_rate(
    http: aiohttp.ClientSession, targets: Mapping[str, Target], rate: float, seconds: float
) -> dict[tuple[str, bool], Timings]:
    """``rate`` requests a second to each target, alternating unstreamed and streamed, interleaved."""
    results = {(name, streamed): Timings() for name in targets for streamed in (False, True)}
    tasks = []
    start = time.perf_counter()
    for i in range(int(rate * seconds)):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        streamed = i % 2 == 1
        for name, target in targets.items():
            body = STREAM_BODY if streamed else BODY
            tasks.append(asyncio.create_task(one(http, target, body, results[(name, streamed)])))
    await asyncio.gather(*tasks)
    return results


async def closed_loop(http: aiohttp.ClientSession, target: Target, concurrency: int, seconds: float) -> Timings:
    timings = Timings()
    stop = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < stop:
            await one(http, target, FAST_BODY, timings)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return timings


@dataclass
class Throughput:
    done: int = 0
    errors: int = 0
    seconds: float = 0.0
    cpu: float = 0.0

    @property
    def per_second(self) -> float:
        return self.done / max(self.seconds, 1e-9)

    @property
    def per_cpu_second(self) -> float:
        return self.done / max(self.cpu, 1e-9)


async def measure_throughput(
    http: aiohttp.ClientSession, targets: Mapping[str, Target], args: argparse.Namespace
) -> dict[str, Throughput]:
    """Closed loop, the targets taking turns, ``args.rounds`` turns each."""
    out = {name: Throughput() for name in targets}
    turn = args.seconds / args.rounds
    one_core, every_core = {int(args.cpu)}, os.sched_getaffinity(0)
    for _ in range(args.rounds):
        for name, target in targets.items():
            if name != "direct":
                pin(target.pid, one_core)
            cpu0, t0 = cpu_seconds(target.pid), time.perf_counter()
            timings = await closed_loop(http, target, args.concurrency, turn)
            if name != "direct":
                pin(target.pid, every_core)
            row = out[name]
            row.seconds += time.perf_counter() - t0
            row.cpu += cpu_seconds(target.pid) - cpu0
            row.done += len(timings.first)
            row.errors += timings.errors
    return out


async def measure_latency(
    http: aiohttp.ClientSession,
    direct: Target,
    proxies: Mapping[str, Target],
    rates: Mapping[str, float],
    args: argparse.Namespace,
) -> tuple[dict[str, dict[tuple[str, bool], Timings]], dict[str, Throughput]]:
    """Blocks of direct beside one proxy at that proxy's rate, the proxies taking turns. Per proxy: the timings
    of its blocks (its own and the direct ones beside it), and its CPU over them."""
    results = {p: {(n, s): Timings() for n in ("direct", p) for s in (False, True)} for p in proxies}
    cpu = {p: Throughput() for p in proxies}
    for name, proxy in proxies.items():  # warm-up: connections open, caches filled
        await fixed_rate(http, {"direct": direct, name: proxy}, rates[name], 1.0)
    block = args.seconds / args.rounds
    for _ in range(args.rounds):
        for name, proxy in proxies.items():
            cpu0, t0 = cpu_seconds(proxy.pid), time.perf_counter()
            got = await fixed_rate(http, {"direct": direct, name: proxy}, rates[name], block)
            cpu[name].cpu += cpu_seconds(proxy.pid) - cpu0
            cpu[name].seconds += time.perf_counter() - t0
            for key, timings in got.items():
                results[name][key].add(timings)
                if key[0] == name:
                    cpu[name].done += len(timings.first)
                    cpu[name].errors += timings.errors
    return results, cpu


def latency_table(
    results: Mapping[str, Mapping[tuple[str, bool], Timings]],
    rates: Mapping[str, float],
    cpu: Mapping[str, Throughput],
    seconds: float,
) -> Table:
    table = Table(title=f"Latency at a fixed rate, {seconds:g} s a proxy, half the calls streamed (ms)")
    columns = ("row", "reply", "req/s", "n", "errors", "first p50", "first p99", "last p50", "last p99", "pieces")
    for col in columns:
        table.add_column(col, justify="right")
    for proxy, timings in results.items():
        for who in ("direct", proxy):
            for streamed in (False, True):
                t = timings[(who, streamed)]
                table.add_row(
                    who if who == proxy else f"direct (beside {proxy})",
                    "streamed" if streamed else "whole",
                    f"{rates[proxy]:g}",
                    str(len(t.first)),
                    str(t.errors),
                    *(f"{pct(v, q):.2f}" for v in (t.first, t.last) for q in (0.5, 0.99)),
                    f"{statistics.mean(t.pieces):.1f}" if t.pieces else "",
                )
        for streamed in (False, True):
            d, p = timings[("direct", streamed)], timings[(proxy, streamed)]
            table.add_row(
                f"[bold]added by {proxy}[/bold]",
                "streamed" if streamed else "whole",
                "",
                "",
                "",
                *(
                    f"{pct(pv, q) - pct(dv, q):+.2f}"
                    for dv, pv in ((d.first, p.first), (d.last, p.last))
                    for q in (0.5, 0.99)
                ),
                "",
            )
        table.add_row(
            f"{proxy} CPU a call",
            "both",
            "",
            "",
            "",
            f"{cpu[proxy].cpu * 1000 / max(cpu[proxy].done, 1):.3f}",
            "",
            "",
            "",
            "",
        )
    return table


def goals(results: Mapping[str, Mapping[tuple[str, bool], Timings]]) -> list[str]:
    """The issue's latency goal for the gateway: added p50 <= 1 ms and p99 <= 5 ms to the first byte."""
    lines = []
    timings = results["gateway"]
    for streamed in (False, True):
        d, g = timings[("direct", streamed)], timings[("gateway", streamed)]
        p50 = pct(g.first, 0.5) - pct(d.first, 0.5)
        p99 = pct(g.first, 0.99) - pct(d.first, 0.99)
        verdict = "met" if p50 <= 1.0 and p99 <= 5.0 else "NOT met"
        lines.append(
            f"gateway, {'streamed' if streamed else 'whole'}: added to the first byte p50 {p50:+.2f} ms (goal <= 1), "
            f"p99 {p99:+.2f} ms (goal <= 5): {verdict}"
        )
    return lines


def throughput_table(rows: Mapping[str, Throughput], concurrency: int, cpu_list: str) -> Table:
    table = Table(
        title=f"Closed loop, {concurrency} connections, unstreamed, no upstream latency, proxies on CPU {cpu_list}"
    )
    for col in ("row", "requests/s", "errors", "CPU ms a call", "its CPU busy", "calls per CPU second"):
        table.add_column(col, justify="right")
    for name, row in rows.items():
        table.add_row(
            "direct (the champion's CPU)" if name == "direct" else name,
            f"{row.per_second:,.0f}",
            str(row.errors),
            f"{row.cpu * 1000 / max(row.done, 1):.3f}",
            f"{row.cpu / max(row.seconds, 1e-9):.0%}",
            f"{row.per_cpu_second:,.0f}",
        )
    return table


def litellm_rate(args: argparse.Namespace, sustained: float) -> float:
    if args.litellm_rate:
        return float(args.litellm_rate)
    # A quarter of what it sustained unstreamed: a streamed call costs it more than twice an unstreamed one, and
    # near its core's limit the figures would be its queue's.
    return float(min(args.rate, max(5.0, (sustained / 4) // 5 * 5)))


async def sink_counts(url: str) -> str:
    async with aiohttp.ClientSession() as http, http.get(url) as r:
        body = await r.json()
    return json.dumps(body.get("captures", {}))


async def run(args: argparse.Namespace) -> int:
    """All three parts' tables; returns the calls through the gateway that failed."""
    console = Console(width=150)
    up_port, gw_port = free_port(), free_port()
    bootstrap = args.bootstrap or f"127.0.0.1:{free_port()}"
    env = {**os.environ, "PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS": bootstrap, "PAIRJUDGE_GATEWAY__SHARE": "1.0"}
    upstream = [sys.executable, "-m", "bench._gateway_upstream", str(up_port)]
    gateway = [sys.executable, "-m", "pairjudge.streams.cli", "gateway"]
    rss: list[float] = []
    with contextlib.ExitStack() as stack:
        up = stack.enter_context(process([*upstream, str(args.latency_ms), str(args.chunks), str(args.chunk_ms)]))
        gw = stack.enter_context(
            process([*gateway, "--upstream", f"http://127.0.0.1:{up_port}", "--port", str(gw_port)], env)
        )
        await wait_up(f"http://127.0.0.1:{gw_port}/healthz", gw)
        targets = {
            "direct": Target(f"http://127.0.0.1:{up_port}/v1/chat/completions", JSON, up.pid),
            "gateway": Target(f"http://127.0.0.1:{gw_port}/v1/chat/completions", JSON, gw.pid),
        }
        if not args.no_litellm and not (litellm_venv() / "bin" / "litellm").exists():
            console.print(f"the LiteLLM row is left out: no LiteLLM at {litellm_venv()} (deploy/litellm/setup.sh)")
        elif not args.no_litellm:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-gateway-litellm-")))
            console.print(f"starting the LiteLLM proxy ({litellm_venv()}) ...")
            lp = stack.enter_context(
                litellm_proxy_url(
                    f"http://127.0.0.1:{up_port}/v1",
                    workdir,
                    extra_models=("bench-fast",),
                    # Its access log (uvicorn's, at INFO) off, as the gateway has none.
                    env={"LITELLM_LOG": "ERROR"},
                )
            )
            same_autogroup_nice(lp.pid)
            auth = {**JSON, "Authorization": f"Bearer {lp.master_key}"}
            targets["litellm"] = Target(f"{lp.url}/v1/chat/completions", auth, lp.pid)

        async def sample() -> None:
            while True:
                rss.append(rss_mb(gw.pid))
                await asyncio.sleep(1.0)

        sampler = asyncio.create_task(sample())
        lost = 0
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            # 1. the most a core sustains; warm-up first (LiteLLM builds its router and caches on its first calls)
            for target in targets.values():
                await closed_loop(http, target, args.concurrency, 1.0)
            rows = await measure_throughput(http, targets, args)
            lost += rows["gateway"].errors
            console.print(throughput_table(rows, args.concurrency, args.cpu))
            console.print(f"gateway per core: {rows['gateway'].per_cpu_second:,.0f} calls per CPU second")
            if "litellm" in rows:
                g, li = rows["gateway"], rows["litellm"]
                console.print(
                    f"gateway / LiteLLM per core: {g.per_cpu_second / li.per_cpu_second:.1f}x by calls per CPU second, "
                    f"{g.per_second / li.per_second:.1f}x by requests a second each pinned to CPU {args.cpu} "
                    "(goal >= 3x)"
                )

            # 2. added latency at a fixed rate
            rates = {"gateway": args.rate}
            if "litellm" in rows:
                rates["litellm"] = litellm_rate(args, rows["litellm"].per_second)
                if rates["litellm"] < args.rate:
                    console.print(
                        f"LiteLLM measured at {rates['litellm']:g} req/s: it sustained "
                        f"{rows['litellm'].per_second:.0f} unstreamed on one core, not {args.rate:g} with half streamed"
                    )
            proxies = {name: targets[name] for name in PROXIES if name in targets}
            results, cpu = await measure_latency(http, targets["direct"], proxies, rates, args)
            console.print(latency_table(results, rates, cpu, args.seconds))
            for line in goals(results):
                console.print(line)
            lost += sum(t.errors for (name, _), t in results["gateway"].items() if name == "gateway")

            # 3. memory with Kafka down (or up) under load
            if args.rss_seconds:
                started = time.monotonic()
                while time.monotonic() - started < args.rss_seconds:
                    chunk = min(60.0, args.rss_seconds - (time.monotonic() - started))
                    memory_run = await fixed_rate(http, {"gateway": targets["gateway"]}, args.rate, chunk)
                    lost += sum(t.errors for t in memory_run.values())
        sampler.cancel()
        kafka = "given" if args.bootstrap else "down (a closed port)"
        console.print(
            f"gateway RSS, Kafka {kafka}: start {rss[0]:.1f} MB, max {max(rss):.1f} MB, end {rss[-1]:.1f} MB "
            f"over {len(rss)} s ({statistics.mean(rss):.1f} MB mean); "
            f"after the first minute: {_minute_on(rss)}"
        )
        console.print(f"gateway capture sink (/readyz): {await sink_counts(f'http://127.0.0.1:{gw_port}/readyz')}")
        if "litellm" in targets:
            console.print(f"LiteLLM proxy RSS at the end: {rss_mb(targets['litellm'].pid):.1f} MB")
        console.print(f"client-visible errors through the gateway: {lost}")
        return lost


def _minute_on(rss: Sequence[float]) -> str:
    later = rss[60:]
    return f"min {min(later):.1f} MB, max {max(later):.1f} MB" if later else "(run shorter than a minute)"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    parser.add_argument("--rate", type=float, default=200.0, help="requests a second to each target")
    parser.add_argument("--litellm-rate", type=float, default=0.0, help="LiteLLM's rate (default: what it sustains)")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each timed part, per target")
    parser.add_argument("--rounds", type=int, default=3, help="turns the targets take in each part")
    parser.add_argument("--latency-ms", type=int, default=20, help="the champion's time to its first byte")
    parser.add_argument("--chunks", type=int, default=20, help="streamed chunks after the first")
    parser.add_argument("--chunk-ms", type=int, default=5, help="time between two streamed chunks")
    parser.add_argument("--concurrency", type=int, default=32, help="connections of the closed-loop part")
    parser.add_argument("--cpu", default="0", help="the CPU a proxy is pinned to in the closed loop")
    parser.add_argument("--rss-seconds", type=float, default=0.0, help="more load at the end for the memory figure")
    parser.add_argument("--ten-minutes", action="store_true", help="--rss-seconds 600")
    parser.add_argument("--no-litellm", action="store_true", help="without the LiteLLM row")
    parser.add_argument("--bootstrap", default="", help="a Kafka for the captures (default: none, a closed port)")
    args = parser.parse_args(argv)
    if args.ten_minutes:
        args.rss_seconds = 600.0
    return args


def main(argv: Sequence[str] | None = None) -> None:
    """Exit 1 when a call through the gateway failed (the goal: none)."""
    if asyncio.run(run(parse_args(argv))):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
