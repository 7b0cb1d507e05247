"""What ``pairjudge gateway`` adds to a call: latency, CPU, memory, side by side with going direct, in one run.

Three processes on 127.0.0.1: the champion (``bench._gateway_upstream``: a fixed ``--latency-ms`` before the
first byte, then ``--chunks`` streamed chunks ``--chunk-ms`` apart), the gateway (``pairjudge gateway``, its own
process, pinned to one core), and this load generator (aiohttp, raw HTTP: no SDK time in the figures). Kafka is
a closed port unless ``--bootstrap`` names one: the gateway fails open, and the capture path still runs to its
drop (the worst case for memory; the send path costs the sink's thread, not the request's).

1. **Added latency at a fixed rate**: ``--rate`` requests a second to each target (direct and through the gateway,
   interleaved so both see the same machine) for ``--seconds``, half unstreamed, half streamed; time to the first
   body byte and to the last. The added latency is the gateway's percentile minus the direct one.
2. **Requests a second on one core**: ``--concurrency`` connections, closed loop, unstreamed and with no upstream
   latency, for ``--seconds``; the gateway's CPU seconds (``/proc``) per request.
3. **RSS with Kafka down** over the whole run, sampled each second (``--rss-seconds`` more of load at ``--rate``
   at the end; ``--ten-minutes`` for the issue's ten).

    python -m bench.gateway [--rate 200] [--seconds 10] [--ten-minutes]

The LiteLLM row (issue 38) is another helper's; this file measures direct and the gateway.
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
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import aiohttp
from rich.console import Console
from rich.table import Table

_TICKS = os.sysconf("SC_CLK_TCK")
BODY = json.dumps(
    {"model": "bench", "messages": [{"role": "user", "content": "Say something short."}], "max_tokens": 32}
).encode()
STREAM_BODY = json.dumps(
    {"model": "bench", "messages": [{"role": "user", "content": "Say something short."}], "stream": True}
).encode()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


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


@dataclass
class Timings:
    first: list[float] = field(default_factory=list)
    last: list[float] = field(default_factory=list)
    errors: int = 0


async def one(http: aiohttp.ClientSession, url: str, body: bytes, into: Timings) -> None:
    started = time.perf_counter()
    try:
        async with http.post(url, data=body, headers={"Content-Type": "application/json"}) as r:
            first = None
            async for _ in r.content.iter_any():
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


def pct(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def fixed_rate(targets: dict[str, str], rate: float, seconds: float) -> dict[tuple[str, bool], Timings]:
    """``rate`` requests a second to each target, alternating streamed and not, interleaved across targets."""
    results = {(name, streamed): Timings() for name in targets for streamed in (False, True)}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        tasks = []
        start = time.perf_counter()
        n = int(rate * seconds)
        for i in range(n):
            for name, url in targets.items():
                due = start + i / rate
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                streamed = i % 2 == 1
                body = STREAM_BODY if streamed else BODY
                tasks.append(asyncio.create_task(one(http, url, body, results[(name, streamed)])))
        await asyncio.gather(*tasks)
    return results


async def closed_loop(url: str, concurrency: int, seconds: float) -> tuple[int, int]:
    done = errors = 0
    stop = time.perf_counter() + seconds
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:

        async def worker() -> None:
            nonlocal done, errors
            while time.perf_counter() < stop:
                timings = Timings()
                await one(http, url, BODY, timings)
                done += len(timings.first)
                errors += timings.errors

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done, errors


async def run(args: argparse.Namespace) -> int:
    """The three parts' tables; returns the calls through the gateway that failed."""
    console = Console()
    up_port, gw_port = free_port(), free_port()
    bootstrap = args.bootstrap or f"127.0.0.1:{free_port()}"
    env = {**os.environ, "PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS": bootstrap, "PAIRJUDGE_GATEWAY__SHARE": "1.0"}
    upstream = [sys.executable, "-m", "bench._gateway_upstream", str(up_port)]
    gateway = [sys.executable, "-m", "pairjudge.streams.cli", "gateway", "--upstream", f"http://127.0.0.1:{up_port}"]
    direct = f"http://127.0.0.1:{up_port}/v1/chat/completions"
    through = f"http://127.0.0.1:{gw_port}/v1/chat/completions"
    rss: list[float] = []
    with (
        process([*upstream, str(args.latency_ms), str(args.chunks), str(args.chunk_ms)]) as up,
        process([*gateway, "--port", str(gw_port)], env) as gw,
    ):
        await wait_up(f"http://127.0.0.1:{gw_port}/healthz", gw)
        with contextlib.suppress(OSError):
            os.sched_setaffinity(gw.pid, {0})  # one core for the gateway
        await asyncio.sleep(0.5)

        async def sample() -> None:
            while True:
                rss.append(rss_mb(gw.pid))
                await asyncio.sleep(1.0)

        sampler = asyncio.create_task(sample())
        assert up.pid
        # 1. added latency at a fixed rate
        await fixed_rate({"direct": direct, "gateway": through}, args.rate, 1.0)  # warm-up
        results = await fixed_rate({"direct": direct, "gateway": through}, args.rate, args.seconds)
        table = Table(title=f"Latency at {args.rate:g} req/s per target, {args.seconds:g} s (ms)")
        for col in ("target", "reply", "n", "errors", "first p50", "first p99", "last p50", "last p99"):
            table.add_column(col, justify="right")
        for (name, streamed), t in results.items():
            table.add_row(
                name,
                "streamed" if streamed else "whole",
                str(len(t.first)),
                str(t.errors),
                *(f"{pct(v, q):.2f}" for v in (t.first, t.last) for q in (0.5, 0.99)),
            )
        for streamed in (False, True):
            d, g = results[("direct", streamed)], results[("gateway", streamed)]
            table.add_row(
                "added",
                "streamed" if streamed else "whole",
                "",
                "",
                *(
                    f"{pct(gv, q) - pct(dv, q):+.2f}"
                    for dv, gv in ((d.first, g.first), (d.last, g.last))
                    for q in (0.5, 0.99)
                ),
            )
        console.print(table)
        lost = sum(t.errors for (name, _), t in results.items() if name == "gateway")

        # 2. the most a core sustains
        # A champion without latency, and a gateway in front of it, beside the fixed-latency pair.
        fast_up = free_port()
        fast_gw = free_port()
        with (
            process([sys.executable, "-m", "bench._gateway_upstream", str(fast_up), "0", "0", "0"]) as fu,
            process([*gateway[:-1], f"http://127.0.0.1:{fast_up}", "--port", str(fast_gw)], env) as fg,
        ):
            await wait_up(f"http://127.0.0.1:{fast_gw}/healthz", fg)
            with contextlib.suppress(OSError):
                os.sched_setaffinity(fg.pid, {0})
            assert fu.pid
            throughput = Table(
                title=f"Closed loop, {args.concurrency} connections, {args.seconds:g} s, no upstream latency"
            )
            for col in ("target", "requests/s", "errors", "gateway CPU ms/request"):
                throughput.add_column(col, justify="right")
            done, errors = await closed_loop(
                f"http://127.0.0.1:{fast_up}/v1/chat/completions", args.concurrency, args.seconds
            )
            throughput.add_row("direct", f"{done / args.seconds:.0f}", str(errors), "")
            cpu0 = cpu_seconds(fg.pid)
            done, errors = await closed_loop(
                f"http://127.0.0.1:{fast_gw}/v1/chat/completions", args.concurrency, args.seconds
            )
            cpu = cpu_seconds(fg.pid) - cpu0
            lost += errors
            throughput.add_row(
                "gateway (1 core)", f"{done / args.seconds:.0f}", str(errors), f"{cpu * 1000 / max(done, 1):.3f}"
            )
            throughput.add_row("gateway per core", f"{done / max(cpu, 1e-9):.0f}", "", "")
            console.print(throughput)

        # 3. memory with Kafka down (or up) under load
        if args.rss_seconds:
            memory_run = await fixed_rate({"gateway": through}, args.rate, args.rss_seconds)
            lost += sum(t.errors for t in memory_run.values())
        sampler.cancel()
        kafka = "given" if args.bootstrap else "down (a closed port)"
        console.print(
            f"gateway RSS, Kafka {kafka}: start {rss[0]:.1f} MB, max {max(rss):.1f} MB, end {rss[-1]:.1f} MB "
            f"over {len(rss)} s ({statistics.mean(rss):.1f} MB mean)"
        )
        console.print(f"client-visible errors through the gateway: {lost}")
        return lost


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    parser.add_argument("--rate", type=float, default=200.0, help="requests a second to each target")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each timed phase")
    parser.add_argument("--latency-ms", type=int, default=20, help="the champion's time to its first byte")
    parser.add_argument("--chunks", type=int, default=20, help="streamed chunks after the first")
    parser.add_argument("--chunk-ms", type=int, default=5, help="time between two streamed chunks")
    parser.add_argument("--concurrency", type=int, default=32, help="connections of the closed-loop phase")
    parser.add_argument("--rss-seconds", type=float, default=0.0, help="more load at the end for the memory figure")
    parser.add_argument("--ten-minutes", action="store_true", help="--rss-seconds 600")
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
