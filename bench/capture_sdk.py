"""The capture SDK's cost to the app: the time ``capture()`` adds to the caller's path, and memory with Kafka down.

Side by side in one run, each row paced at ``--rate`` calls a second (an app's request rate, so the sink's thread
works as it would beside a real app, not flat out):

1. **The caller's path** (µs, p50 / p99 / max over ``--calls`` calls each), with the official ``openai`` SDK's own
   response objects (a chat completion with two tool calls, a 40-chunk stream):

   - ``capture()`` alone, Kafka up: the exchange queued, then normalised, encoded and sent on the sink's thread;
   - ``capture()`` alone, Kafka unreachable and the buffer full: the drop path;
   - an instant ``chat.completions.create`` (no network: a coroutine that returns the prebuilt reply) called bare,
     then through ``wrap_openai``: the difference is everything the wrapper adds, ``capture()`` included;
   - the same for a streamed reply, read to its end bare and through the wrapper;
   - the real SDK over HTTP against a local OpenAI-compatible server (aiohttp on 127.0.0.1, on a thread of its
     own, answering the chat completion above at once), bare and wrapped, interleaved: the round trip an app
     sees, where the wrapper's part is within noise.

2. **Memory with Kafka unreachable**: captures (each a new 6-turn conversation with tools, about 5 kB) at ``--rate`` for
   ``--rss-seconds`` (``--five-minutes`` for the issue's 5 minutes) into a sink whose broker is a closed port; the
   process's RSS each second, the buffer, the drops. At the end every capture must be accounted for: sent 0,
   dropped (counted by reason) = made.

    python -m bench.capture_sdk --bootstrap 127.0.0.1:9092 [--calls 3000] [--rate 1000] [--five-minutes]
    python -m bench.capture_sdk --memory-only --five-minutes      # the memory run alone, no broker needed

Without ``--bootstrap`` it starts Apache Kafka in a temp dir (the benches' harness, ``pairjudge_dev.bench``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import gc
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from aiohttp import web
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from rich.table import Table

from pairjudge.streams.capture import CaptureSink, wrap_openai
from pairjudge.streams.kafka.admin import TopicSpec, create_topics
from pairjudge_dev.bench import add_broker_args, bench_broker, console, fail, percentile, quiet_kafka_client, work_dir

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"Look up the {name.split('_')[1]} for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
    for name in ("get_weather", "get_time", "get_events")
]
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a travel assistant. Answer briefly and call tools when needed. " * 4},
    {"role": "user", "content": "I am going to Paris next week. What should I pack? " * 6},
    {"role": "assistant", "content": "Light layers and an umbrella; the weather changes quickly in spring. " * 5},
    {"role": "user", "content": "And what is the weather right now, and the local time?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_0", "content": '{"temp_c": 12, "sky": "rain", "wind_kph": 20}'},
]
REQUEST: dict[str, Any] = {"model": "gpt-x", "messages": MESSAGES, "tools": TOOLS, "temperature": 0.3}
REPLY = ChatCompletion.model_validate(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-x",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "It is raining; let me check the time too.",
                    "tool_calls": [
                        {
                            "id": f"call_{i}",
                            "type": "function",
                            "function": {"name": n, "arguments": '{"city":"Paris"}'},
                        }
                        for i, n in ((1, "get_weather"), (2, "get_time"))
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 420, "completion_tokens": 38, "total_tokens": 458},
    }
)
CHUNKS = [
    ChatCompletionChunk.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-x",
            "choices": [{"index": 0, "delta": {"content": f"word{i} "}, "finish_reason": "stop" if i == 39 else None}],
        }
    )
    for i in range(40)
]


class Row:
    def __init__(self, name: str, micros: Sequence[float], note: str = "") -> None:
        self.name, self.note = name, note
        self.p50, self.p99, self.max = percentile(micros, 0.5), percentile(micros, 0.99), max(micros)


async def paced(calls: int, rate: float, step: Callable[[], Awaitable[None]]) -> list[float]:
    """``step`` ``calls`` times at ``rate`` a second; each call's time in µs."""
    micros: list[float] = []
    interval = 1.0 / rate
    next_at = time.perf_counter()
    for _ in range(calls):
        next_at += interval
        delay = next_at - time.perf_counter()
        await asyncio.sleep(max(delay, 0))
        started = time.perf_counter_ns()
        await step()
        micros.append((time.perf_counter_ns() - started) / 1000)
    return micros


class InstantChat:
    """Stands in for the SDK's ``chat.completions``: answers at once with the prebuilt objects."""

    async def create(self, **kwargs: Any) -> Any:
        if kwargs.get("stream"):
            return _stream()
        return REPLY


async def _stream() -> AsyncIterator[ChatCompletionChunk]:
    for chunk in CHUNKS:
        yield chunk


class InstantClient:
    def __init__(self) -> None:
        self.chat = type("Chat", (), {})()
        self.chat.completions = InstantChat()


@contextlib.contextmanager
def chat_server() -> Iterator[str]:
    """An OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1 answering ``REPLY`` at once; its base URL."""
    body = REPLY.model_dump_json().encode()

    async def answer(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", answer)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app, access_log=None)
    ready = threading.Event()
    ports: list[int] = []

    def serve() -> None:
        # Its own loop on its own thread: the bench's loop times only the client.
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        ports.append(runner.addresses[0][1])
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield f"http://127.0.0.1:{ports[0]}/v1"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def caller_path(args: argparse.Namespace, bootstrap: str) -> list[Row]:
    topic = f"bench-capture-{uuid.uuid4().hex[:8]}.captures"
    await create_topics(bootstrap, {topic: TopicSpec(partitions=1, compacted=False, replication=1)})
    rows: list[Row] = []
    # A buffer for the whole run: this sink must send every capture, so its figures count what Kafka took.
    up = CaptureSink(bootstrap, topic=topic, max_buffered=1_000_000)
    began = time.perf_counter()
    down = CaptureSink(f"127.0.0.1:{closed_port()}", max_buffered=10, send_timeout_s=1.0)
    for _ in range(20):
        down.capture(REQUEST, REPLY)  # fill its buffer: every capture below takes the drop path

    async def capture_up() -> None:
        up.capture(REQUEST, REPLY)

    async def capture_down() -> None:
        down.capture(REQUEST, REPLY)

    bare, wrapped = InstantClient(), wrap_openai(InstantClient(), up)

    async def call_bare() -> None:
        await bare.chat.completions.create(**REQUEST)

    async def call_wrapped() -> None:
        await wrapped.chat.completions.create(**REQUEST)

    async def stream_bare() -> None:
        async for _ in await bare.chat.completions.create(**REQUEST, stream=True):
            pass

    async def stream_wrapped() -> None:
        async for _ in await wrapped.chat.completions.create(**REQUEST, stream=True):
            pass

    n, rate = args.calls, args.rate
    rows.append(Row("capture(), Kafka up", await paced(n, rate, capture_up), "queued; sent on the sink's thread"))
    rows.append(Row("capture(), Kafka unreachable", await paced(n, rate, capture_down), "buffer full: dropped"))
    rows.append(Row("create(), bare", await paced(n, rate, call_bare), "instant create, no network"))
    rows.append(Row("create(), wrapped", await paced(n, rate, call_wrapped), "the same, through wrap_openai"))
    rows.append(Row("stream of 40 chunks, bare", await paced(n, rate, stream_bare), "read to its end"))
    rows.append(Row("stream of 40 chunks, wrapped", await paced(n, rate, stream_wrapped), "through wrap_openai"))

    with chat_server() as base_url:
        http_bare = AsyncOpenAI(base_url=base_url, api_key="bench")
        http_wrapped = wrap_openai(AsyncOpenAI(base_url=base_url, api_key="bench"), up)
        small: dict[str, Any] = {
            "model": "judge",
            "messages": [{"role": "user", "content": "Which is better, A or B?"}],
        }
        times: dict[str, list[float]] = {"bare": [], "wrapped": []}
        for _ in range(args.http_calls):
            for name, client in (("bare", http_bare), ("wrapped", http_wrapped)):
                started = time.perf_counter_ns()
                await client.chat.completions.create(**small)
                times[name].append((time.perf_counter_ns() - started) / 1000)
        rows.append(Row("HTTP round trip, bare", times["bare"], "official SDK, local server"))
        rows.append(Row("HTTP round trip, wrapped", times["wrapped"], "interleaved with the bare calls"))
        await http_bare.close()
        await http_wrapped.close()

    stats = await asyncio.to_thread(up.close, 120.0)
    elapsed = time.perf_counter() - began
    down.close(0.5)
    made = 3 * n + args.http_calls  # capture_up, the wrapped create and stream calls, the wrapped HTTP calls
    if stats.sent != made or stats.dropped_total:
        fail(f"Kafka up: {made} captures made, {stats.sent} sent, dropped {dict(stats.dropped)}")
    load = os.getloadavg()[0]
    console.print(
        f"The sink's thread sent all {made} captures to Kafka in {elapsed:.1f} s, close() included: "
        f"{made / elapsed:.0f} captures/s (normalise, encode, send), load average {load:.1f} on {os.cpu_count()} cores"
    )
    return rows


async def memory_with_kafka_down(args: argparse.Namespace) -> tuple[Table, str]:
    sink = CaptureSink(f"127.0.0.1:{closed_port()}", max_buffered=args.max_buffered, send_timeout_s=2.0)
    gc.collect()
    start_rss = rss_mb()
    table = Table(title=f"RSS with Kafka unreachable, {args.rate:.0f} captures/s, buffer {args.max_buffered}")
    for column in ("second", "RSS (MB)", "made", "buffered", "dropped"):
        table.add_column(column, justify="right")
    made, peak = 0, start_rss
    every = max(1, args.rss_seconds // 15)
    interval = 1.0 / args.rate
    began = time.perf_counter()
    for second in range(1, args.rss_seconds + 1):
        while time.perf_counter() - began < second:
            # A new request each time, as an app's are: what the buffer holds on to is real memory.
            request = copy.deepcopy(REQUEST)
            request["messages"][1] = {"role": "user", "content": f"Question {made}: " + "x" * 2000}
            sink.capture(request, REPLY)
            made += 1
            await asyncio.sleep(interval)
        peak = max(peak, rss_mb())
        if second % every == 0 or second == args.rss_seconds:
            stats = sink.stats()
            table.add_row(str(second), f"{rss_mb():.1f}", str(made), str(stats.buffered), str(stats.dropped_total))
    end_rss = rss_mb()
    stats = await asyncio.to_thread(sink.close, 3.0)
    await asyncio.sleep(2.5)  # a connection attempt in flight at close ends and counts what it held
    stats = sink.stats()
    if stats.sent or stats.dropped_total != made:
        fail(f"Kafka down: {made} captures made, {stats.sent} sent, {stats.dropped_total} counted as dropped")
    reasons = ", ".join(f"{k} {v}" for k, v in stats.dropped.items() if v)
    summary = (
        f"RSS {start_rss:.1f} MB at the start, {peak:.1f} MB at the peak, {end_rss:.1f} MB at the end "
        f"(+{end_rss - start_rss:.1f} MB); {made} captures made, all {stats.dropped_total} dropped and counted "
        f"({reasons})"
    )
    return table, summary


async def run(args: argparse.Namespace) -> None:
    quiet_kafka_client()
    # The unreachable broker's connection errors, once per retry: the drop counts below say what they cost.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    logging.getLogger("pairjudge.streams.capture").setLevel(logging.ERROR)
    with work_dir("bench-capture-", keep=args.keep) as wd:
        if args.memory_only:
            await memory_table(args)
            wd.ok = True
            return
        async with bench_broker(wd.path, bootstrap=args.bootstrap) as broker:
            rows = await caller_path(args, broker.bootstrap)
        table = Table(title=f"The caller's path (µs), {args.calls} calls a row at {args.rate:.0f}/s, on {broker.name}")
        for column in ("path", "p50", "p99", "max", ""):
            table.add_column(column, justify="left" if column in ("path", "") else "right")
        for row in rows:
            table.add_row(row.name, f"{row.p50:.1f}", f"{row.p99:.1f}", f"{row.max:.0f}", row.note)
        console.print(table)
        wrapper_p99 = rows[3].p99 - rows[2].p99
        console.print(
            f"capture() p99 {rows[0].p99:.1f} µs (goal ≤ 50); the wrapper adds {rows[3].p50 - rows[2].p50:.1f} µs "
            f"at p50, {wrapper_p99:.1f} µs at p99 to an unstreamed call, "
            f"{rows[5].p50 - rows[4].p50:.1f} µs at p50 to a 40-chunk stream"
        )
        if rows[0].p99 > 50:
            console.print("[yellow]capture() p99 above the 50 µs goal on this run[/yellow]")
        await memory_table(args)
        wd.ok = True


async def memory_table(args: argparse.Namespace) -> None:
    memory, summary = await memory_with_kafka_down(args)
    console.print(memory)
    console.print(summary)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    add_broker_args(parser)
    parser.add_argument("--calls", type=int, default=3000, help="calls per caller's-path row (default 3000)")
    parser.add_argument("--http-calls", type=int, default=300, help="HTTP round trips, bare and wrapped each")
    parser.add_argument("--rate", type=float, default=1000.0, help="calls (and captures) a second (default 1000)")
    parser.add_argument("--rss-seconds", type=int, default=20, help="how long Kafka stays down (default 20 s)")
    parser.add_argument("--five-minutes", action="store_true", help="Kafka down for 5 minutes (the issue's run)")
    parser.add_argument("--memory-only", action="store_true", help="only the memory run (no broker needed)")
    parser.add_argument("--max-buffered", type=int, default=1000, help="the sink's buffer (default 1000)")
    args = parser.parse_args(argv)
    if args.five_minutes:
        args.rss_seconds = 300
    return args


def main(argv: Sequence[str] | None = None) -> None:
    asyncio.run(run(parse_args(argv)))


if __name__ == "__main__":
    main()
