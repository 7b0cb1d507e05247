"""The HTTP judge client under load: pairs per second through ``judge_pair`` against a local server.

Run from the checkout root (its pairs come from ``pairjudge_dev.pairgen``, its replies from
``pairjudge_dev.replies``, both shared with the tests)::

    python -m bench.judge                 # 200 ms replies, about 70 s on 2 cores
    python -m bench.judge --latency 0.5   # slower replies
    python -m bench.judge --quick         # shorter windows and fewer pairs, about 35 s

docs/design.md §8 records that httpx's own async connection pool collapses under concurrency (encode/httpx#3215)
and that aiohttp holds; the judges post with aiohttp (``streams/judges/client.py``). This script measures the
judge pairjudge actually ships against the judging core's own ceiling, so that choice stays checked. One run
does this:

1. **A simulated judge server** in a separate process (``aiohttp.web`` on 127.0.0.1, a free port), so it
   shares neither the client's event loop nor its CPU accounting. Every ``/v1/chat/completions`` call is
   held for exactly ``--latency`` seconds, then answered with a valid seed 000 (tone and style) reply
   with usage tokens. The winner is whichever position, A or B, shows the candidate whose output carries
   a marker, so both orderings pick the same candidate and every pair must end as a consistent verdict
   for the marked candidate. The server answers 400 to anything that is not a seed 000 prompt. It
   counts requests, the peak number in flight and its own CPU time (``GET /stats``).
2. **Throughput.** ``judge_pair`` (AB and BA concurrently, so two calls per pair) is driven in a
   closed loop with 16, 64 and 128 pairs in flight. Slot starts are spread over one latency period, then
   completions are counted over a fixed window after a warm-up. The ideal is pairs in flight ÷ latency,
   the same as calls in flight ÷ latency ÷ 2. The judges compared (plain httpx, which the judges do not
   use, is no longer a column: docs/design.md §8 keeps its figures):

   - **shipped**: ``build_judge_stack`` with ``kind=openai`` and the cache off, so
     ``OpenAICompatibleJudge`` under pricing and the breaker, posting through its aiohttp session
     (``streams.judges.client.make_session``).
   - **no HTTP** (reference): ``judge_pair`` on an in-process judge that sleeps ``--latency`` and gives
     the same replies. What is missing from this figure is the judging core's own CPU cost on this
     machine, not the transport's.

   The judge's ``max_concurrency``, and so its connection pool, is twice the pairs in flight, so no call
   queues inside the judge. ``max_retries`` is 0: an error fails the bench instead of being retried out of
   sight. Every pair's verdict is checked, and the server's request count must equal two per pair.
3. **Per-pair latency at low load.** One call at a time (``judge.complete`` on one ordering), then one
   pair at a time (``judge_pair``), on the shipped judge. If AB and BA run concurrently, a pair takes
   about one call's time (ratio about 1.0, not 2.0), and the server sees a peak of 2 in flight.
4. **Response cache.** A stream of ``--cache-pairs`` pairs, ``--repeat-share`` of them exact repeats of
   others, shuffled, with ``--cache-concurrency`` pairs in flight. It runs on the shipped stack with the
   cache on (``CachingJudge`` over a ``ResponseCache`` in a temp dir), then on the same stack with the
   cache off, then once more with a new stack on the now-warm cache directory (a restarted worker). The
   hit rate counts disk hits and coalesced calls over all lookups. Each repeat must save exactly its
   two calls, and the server's count must equal the cache's misses.

The machine may be shared, so expect a spread of ±10% between runs. The table shows the client's and
the server's CPU use (in cores) for each cell: when they add up to the machine's cores, the CPU, not
the transport, is the limit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import aiohttp
import anyio
from aiohttp import web
from rich.table import Table

from pairjudge.agents.core import Decision, judge_pair
from pairjudge.agents.judge import Judge, JudgeIdentity, JudgeRequest, JudgeResponse
from pairjudge.agents.pair_checks import resolve_rubric
from pairjudge.agents.policy import Policy
from pairjudge.agents.prompts import render_primary
from pairjudge.schemas import CandidatePair
from pairjudge.schemas.events import PairVerdict
from pairjudge.streams.config.settings import JudgeSettings
from pairjudge.streams.judges.cache import CachingJudge
from pairjudge.streams.judges.factory import JudgeStack, build_judge_stack
from pairjudge_dev.bench import console, fail, percentile
from pairjudge_dev.pairgen import sample_dicts
from pairjudge_dev.processes import AnnouncedProcess, serve_announced
from pairjudge_dev.replies import tone_reply

DEFAULT_LEVELS = (16, 64, 128)
#: Put in the preferred candidate's output; the server's reply picks whichever position shows it.
MARKER = "[[bench-preferred]]"
#: The first line of seed 000's template: the server refuses any other prompt.
SEED_000_OPENING = "You are an impartial style judge."
MODEL = "bench-judge"
#: What the shipped judge posts with, as the report names it.
SHIPPED_CLIENT = "aiohttp"

Letter = Literal["A", "B"]


# --------------------------------------------------------------------------------------------------
# 1. The simulated judge server (its own process)
# --------------------------------------------------------------------------------------------------

_SHOWN = {
    letter: re.compile(rf'<output_{letter.lower()} id="[^"]*">\n(.*?)\n</output_{letter.lower()} id=', re.DOTALL)
    for letter in ("A", "B")
}


def winner_for(prompt: str) -> Letter:
    """The position (A or B) that shows the marked output. ``ValueError`` unless exactly one does."""
    if not prompt.startswith(SEED_000_OPENING):
        raise ValueError("not a seed 000 (tone and style) prompt")
    marked: list[Letter] = []
    for letter in ("A", "B"):
        found = _SHOWN[letter].search(prompt)
        if found is None:
            raise ValueError(f"no delimited output {letter} in the prompt")
        if MARKER in found.group(1):
            marked.append("A" if letter == "A" else "B")
    if len(marked) != 1:
        raise ValueError(f"{len(marked)} outputs carry the marker; exactly one must")
    return marked[0]


def reply_text(prompt: str) -> str:
    """A valid seed 000 reply preferring the marked output, confident enough for a verdict."""
    return tone_reply(winner_for(prompt), confidence=0.9)


def _user_prompt(payload: object) -> tuple[str, str]:
    """(model, user prompt) from a chat-completions request body. ``ValueError`` for any other shape."""
    if not isinstance(payload, dict):
        raise ValueError("body is not a JSON object")
    model, messages = payload.get("model"), payload.get("messages")
    if not isinstance(model, str) or not isinstance(messages, list) or payload.get("stream") not in (None, False):
        raise ValueError("need a model, a list of messages and no streaming")
    users = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if len(users) != 1 or not isinstance(users[0], str):
        # A re-ask would add a second user message: the bench's replies are valid, so none should come.
        raise ValueError(f"expected exactly one user message, got {len(users)}")
    return model, users[0]


@dataclass
class ServerState:
    latency: float
    requests: int = 0
    bad: int = 0
    inflight: int = 0
    peak: int = 0


STATE = web.AppKey("state", ServerState)


async def _chat(request: web.Request) -> web.Response:
    state = request.app[STATE]
    state.requests += 1
    state.inflight += 1
    state.peak = max(state.peak, state.inflight)
    try:
        try:
            model, prompt = _user_prompt(await request.json())
            text = reply_text(prompt)
        except ValueError as exc:  # json.JSONDecodeError is a ValueError too
            state.bad += 1
            return web.json_response({"error": {"message": str(exc), "type": "invalid_request_error"}}, status=400)
        await asyncio.sleep(state.latency)
        body = {
            "id": f"chatcmpl-bench-{state.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            # About four characters per token, like English text through a BPE tokenizer.
            "usage": {
                "prompt_tokens": len(prompt) // 4,
                "completion_tokens": len(text) // 4,
                "total_tokens": (len(prompt) + len(text)) // 4,
            },
        }
        return web.json_response(body)
    finally:
        state.inflight -= 1


async def _stats(request: web.Request) -> web.Response:
    state = request.app[STATE]
    body = {
        "requests": state.requests,
        "bad": state.bad,
        "inflight": state.inflight,
        "peak": state.peak,
        "cpu_s": time.process_time(),
    }
    if request.query.get("reset") == "1":
        state.peak = state.inflight
    return web.json_response(body)


async def serve(latency: float) -> None:
    """Serve on a free port of 127.0.0.1 and print ``PORT <n>`` once listening; stop on SIGTERM/SIGINT."""
    app = web.Application()
    app[STATE] = ServerState(latency=latency)
    app.router.add_post("/v1/chat/completions", _chat)
    app.router.add_get("/stats", _stats)
    await serve_announced(app)


@dataclass(frozen=True)
class ServerStats:
    requests: int
    bad: int
    inflight: int
    peak: int
    cpu_s: float


class ServerProcess(AnnouncedProcess):
    """The server child process, started from this module in ``--serve`` mode."""

    def __init__(self, latency: float, log_path: Path) -> None:
        try:
            super().__init__([sys.executable, "-m", "bench.judge", "--serve", "--latency", repr(latency)], log_path)
        except RuntimeError as exc:
            fail(str(exc))
        self._session: aiohttp.ClientSession | None = None

    async def stats(self, *, reset: bool = False) -> ServerStats:
        # A separate small session: the judges' own pools are what is being measured.
        if self._session is None:
            self._session = aiohttp.ClientSession()
        url = f"http://127.0.0.1:{self.port}/stats" + ("?reset=1" if reset else "")
        async with self._session.get(url) as resp:
            resp.raise_for_status()
            data = await resp.json()
        return ServerStats(
            requests=int(data["requests"]),
            bad=int(data["bad"]),
            inflight=int(data["inflight"]),
            peak=int(data["peak"]),
            cpu_s=float(data["cpu_s"]),
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


# --------------------------------------------------------------------------------------------------
# Load and checks
# --------------------------------------------------------------------------------------------------


def make_pairs(n: int, prefix: str) -> list[CandidatePair]:
    """``n`` valid tone pairs with distinct texts (so distinct cache keys); the marked candidate alternates."""
    # A tone-and-style pair (seed 000: the only template the server answers) from the demo's samples.
    template: dict[str, Any] = next(p for p in sample_dicts() if p["rubric"]["kind"] == "tone_style")  # type: ignore[index]
    pairs: list[CandidatePair] = []
    for i in range(n):
        first = f"Hi there! Your refund for order {prefix}-{i} is on its way and lands in 3 days. Cheers"
        second = f"Dear customer, the refund for order {prefix}-{i} has been processed; allow 3 business days."
        outputs = (f"{first} {MARKER}", second) if i % 2 == 0 else (first, f"{second} {MARKER}")
        candidates = [{**c, "output": text} for c, text in zip(template["candidates"], outputs, strict=True)]
        pairs.append(
            CandidatePair.model_validate({**template, "pair_id": f"{prefix}-{i:05d}", "candidates": candidates})
        )
    return pairs


def check_decision(pair: CandidatePair, decision: Decision) -> str | None:
    """None when ``decision`` is the verdict the server's replies imply, else what is wrong."""
    outcome = decision.outcome
    if not isinstance(outcome, PairVerdict):
        return f"{pair.pair_id}: {type(outcome).__name__} instead of a verdict"
    expected = next(c.candidate_id for c in pair.candidates if MARKER in c.output)
    if outcome.winner != expected or not outcome.consistent:
        return f"{pair.pair_id}: winner {outcome.winner} (consistent={outcome.consistent}), expected {expected}"
    return None


# --------------------------------------------------------------------------------------------------
# Judges
# --------------------------------------------------------------------------------------------------


def judge_settings(base_url: str, max_concurrency: int, cache_dir: Path | None = None) -> JudgeSettings:
    return JudgeSettings(
        kind="openai",
        base_url=base_url,
        model=MODEL,
        max_concurrency=max_concurrency,
        # An error must fail the bench, not hide in a retry; a 60 s read timeout never fires at 0.2 s.
        max_retries=0,
        cache_enabled=cache_dir is not None,
        cache_dir=cache_dir or Path("unused"),
    )


async def build_stack(server: ServerProcess, max_concurrency: int, cache_dir: Path | None = None) -> JudgeStack:
    """The shipped judge stack on ``server``."""
    return build_judge_stack(judge_settings(server.base_url, max_concurrency, cache_dir))


@dataclass
class SleepJudge:
    """The no-HTTP reference: the server's replies after the same sleep, in process."""

    latency: float
    identity: JudgeIdentity = field(default_factory=lambda: JudgeIdentity(provider="bench-in-process", model=MODEL))

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        started = time.perf_counter()
        await anyio.sleep(self.latency)
        prompt = next(m.content for m in request.messages if m.role == "user")
        text = reply_text(prompt)
        return JudgeResponse(
            text=text,
            model=self.identity.model,
            input_tokens=len(prompt) // 4,
            output_tokens=len(text) // 4,
            latency_s=time.perf_counter() - started,
        )


# --------------------------------------------------------------------------------------------------
# 2. Throughput cells
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    inflight: int
    completed: int  # pairs that finished inside the window
    window_s: float
    launched: int  # every pair started, drained ones included
    pair_ms: tuple[float, ...]  # wall time of the pairs that finished inside the window
    client_cores: float
    server_cores: float | None  # None for the no-HTTP reference
    server_peak: int | None
    client: str

    @property
    def rate(self) -> float:
        return self.completed / self.window_s if self.window_s > 0 else 0.0


async def run_cell(
    judge: Judge,
    pairs: Sequence[CandidatePair],
    inflight: int,
    *,
    latency: float,
    warmup: float,
    window: float,
    server: ServerProcess | None,
    client: str,
) -> Cell:
    """``inflight`` closed-loop slots running ``judge_pair``; completions counted in the window."""
    policy = Policy()
    source = iter(pairs)
    problems: list[str] = []
    done: list[tuple[float, float]] = []  # (finished at, wall time)
    launched = 0
    t0 = time.perf_counter()
    w_start, w_end = t0 + warmup, t0 + warmup + window
    before = await server.stats(reset=True) if server is not None else None
    marks: dict[str, tuple[float, float, ServerStats | None]] = {}

    async def slot(k: int) -> None:
        nonlocal launched
        # Spread the starts over one latency period, so completions arrive evenly, not in waves.
        await anyio.sleep(latency * k / inflight)
        while time.perf_counter() < w_end and not problems:
            pair = next(source, None)
            if pair is None:
                problems.append("ran out of pairs: the pool is too small for this rate")
                return
            launched += 1
            started = time.perf_counter()
            try:
                decision = await judge_pair(pair, judge, policy)
            except Exception as exc:  # noqa: BLE001 - collected and reported as a bench failure
                problems.append(f"{pair.pair_id}: {type(exc).__name__}: {exc}")
                return
            finished = time.perf_counter()
            if (problem := check_decision(pair, decision)) is not None:
                problems.append(problem)
                return
            done.append((finished, finished - started))

    async def mark(name: str, at: float) -> None:
        await anyio.sleep(max(0.0, at - time.perf_counter()))
        stats = await server.stats() if server is not None else None
        marks[name] = (time.perf_counter(), time.process_time(), stats)

    async with anyio.create_task_group() as tg:
        for k in range(inflight):
            tg.start_soon(slot, k)
        tg.start_soon(mark, "start", w_start)
        tg.start_soon(mark, "end", w_end)
    if problems:
        fail(f"{client}, {inflight} pairs in flight: {len(problems)} problem(s), e.g. {problems[:3]}")
    (ws, cpu0, s0), (we, cpu1, s1) = marks["start"], marks["end"]
    in_window = [wall for finished, wall in done if ws <= finished < we]
    server_cores = server_peak = None
    if server is not None and before is not None and s0 is not None and s1 is not None:
        after = await server.stats()
        if after.bad or after.requests - before.requests != 2 * launched:
            fail(
                f"{client}, {inflight} in flight: the server saw {after.requests - before.requests} requests "
                f"({after.bad - before.bad} bad) for {launched} pairs; expected exactly 2 per pair"
            )
        server_cores = (s1.cpu_s - s0.cpu_s) / (we - ws)
        server_peak = after.peak
    return Cell(
        inflight=inflight,
        completed=len(in_window),
        window_s=we - ws,
        launched=launched,
        pair_ms=tuple(1000 * w for w in in_window),
        client_cores=(cpu1 - cpu0) / (we - ws),
        server_cores=server_cores,
        server_peak=server_peak,
        client=client,
    )


async def throughput(
    server: ServerProcess, levels: Sequence[int], pool: Sequence[CandidatePair], args: argparse.Namespace
) -> dict[str, list[Cell]]:
    results: dict[str, list[Cell]] = {"shipped": [], "inprocess": []}
    for n in levels:
        stack = await build_stack(server, 2 * n)
        console.print(f"  {n:>3} pairs in flight, {SHIPPED_CLIENT} ...", end="")
        try:
            cell = await run_cell(
                stack.judge,
                pool,
                n,
                latency=args.latency,
                warmup=args.warmup,
                window=args.window,
                server=server,
                client=SHIPPED_CLIENT,
            )
        finally:
            await stack.aclose()
        console.print(f" {cell.rate:,.1f} pairs/s")
        results["shipped"].append(cell)
        console.print(f"  {n:>3} pairs in flight, in-process sleep judge ...", end="")
        cell = await run_cell(
            SleepJudge(args.latency),
            pool,
            n,
            latency=args.latency,
            warmup=args.warmup,
            window=args.window,
            server=None,
            client="no HTTP",
        )
        console.print(f" {cell.rate:,.1f} pairs/s")
        results["inprocess"].append(cell)
    return results


# --------------------------------------------------------------------------------------------------
# 3. Per-pair latency at low load
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LowLoad:
    call_ms: tuple[float, ...]
    pair_ms: tuple[float, ...]
    call_peak: int
    pair_peak: int


async def low_load(server: ServerProcess, pairs: Sequence[CandidatePair], samples: int) -> LowLoad:
    policy = Policy()
    stack = await build_stack(server, 4)
    try:
        # One untimed round of each opens the connections (a running worker has them open).
        warm = pairs[0]
        await stack.judge.complete(render_primary(warm, resolve_rubric(warm, {}), "AB"))
        await judge_pair(warm, stack.judge, policy)
        await server.stats(reset=True)
        call_ms = []
        for pair in pairs[1 : samples + 1]:
            request = render_primary(pair, resolve_rubric(pair, {}), "AB")
            started = time.perf_counter()
            response = await stack.judge.complete(request)
            call_ms.append(1000 * (time.perf_counter() - started))
            if json.loads(response.text).get("winner") != winner_for(request.messages[-1].content):
                fail(f"single call for {pair.pair_id} got an unexpected reply: {response.text[:200]!r}")
        call_peak = (await server.stats(reset=True)).peak
        pair_ms = []
        for pair in pairs[samples + 1 : 2 * samples + 1]:
            started = time.perf_counter()
            decision = await judge_pair(pair, stack.judge, policy)
            pair_ms.append(1000 * (time.perf_counter() - started))
            if (problem := check_decision(pair, decision)) is not None:
                fail(problem)
        pair_peak = (await server.stats()).peak
    finally:
        await stack.aclose()
    return LowLoad(tuple(call_ms), tuple(pair_ms), call_peak, pair_peak)


# --------------------------------------------------------------------------------------------------
# 4. The response cache
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamRun:
    label: str
    pairs: int
    wall_s: float
    server_requests: int
    hits: int = 0
    coalesced: int = 0
    misses: int = 0
    stored: int = 0
    errors: int = 0

    @property
    def rate(self) -> float:
        return self.pairs / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def lookups(self) -> int:
        return self.hits + self.coalesced + self.misses


def repeat_stream(unique: Sequence[CandidatePair], total: int, seed: int) -> list[CandidatePair]:
    """``unique`` plus ``total - len(unique)`` exact copies of random ones (re-parsed, like a re-sent
    event), shuffled."""
    rng = random.Random(seed)
    copies = [
        CandidatePair.model_validate_json(rng.choice(unique).model_dump_json()) for _ in range(total - len(unique))
    ]
    stream = [*unique, *copies]
    rng.shuffle(stream)
    return stream


async def run_stream(
    label: str,
    judge: Judge,
    caching: CachingJudge | None,
    stream: Sequence[CandidatePair],
    inflight: int,
    server: ServerProcess,
) -> StreamRun:
    """All of ``stream`` through ``judge_pair`` with ``inflight`` pairs at a time, in arrival order."""
    policy = Policy()
    source = iter(stream)
    problems: list[str] = []

    async def slot() -> None:
        for pair in source:
            try:
                decision = await judge_pair(pair, judge, policy)
            except Exception as exc:  # noqa: BLE001 - collected and reported as a bench failure
                problems.append(f"{pair.pair_id}: {type(exc).__name__}: {exc}")
                return
            if (problem := check_decision(pair, decision)) is not None:
                problems.append(problem)
                return

    before = await server.stats()
    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(inflight):
            tg.start_soon(slot)
    wall = time.perf_counter() - started
    after = await server.stats()
    if problems:
        fail(f"cache stream, {label}: {len(problems)} problem(s), e.g. {problems[:3]}")
    if after.bad != before.bad:
        fail(f"cache stream, {label}: the server refused {after.bad - before.bad} requests")
    stats = caching.stats if caching is not None else None
    return StreamRun(
        label=label,
        pairs=len(stream),
        wall_s=wall,
        server_requests=after.requests - before.requests,
        hits=stats.hits if stats else 0,
        coalesced=stats.coalesced if stats else 0,
        misses=stats.misses if stats else 0,
        stored=stats.stored if stats else 0,
        errors=stats.errors if stats else 0,
    )


async def cache_runs(server: ServerProcess, args: argparse.Namespace, work_dir: Path) -> tuple[list[StreamRun], int]:
    total = args.cache_pairs
    repeats = round(total * args.repeat_share)
    unique = make_pairs(total - repeats, "cache")
    stream = repeat_stream(unique, total, seed=20240611)
    n = args.cache_concurrency
    cache_dir = work_dir / "response-cache"
    runs: list[StreamRun] = []
    for label, directory in (
        ("cache on, empty", cache_dir),
        ("cache off", None),
        ("cache on, warm (new stack)", cache_dir),
    ):
        stack = await build_stack(server, 2 * n, cache_dir=directory)
        try:
            if (directory is None) != (stack.caching is None):
                fail(f"cache stream, {label}: build_judge_stack did not honour cache_enabled")
            runs.append(await run_stream(label, stack.judge, stack.caching, stream, n, server))
        finally:
            await stack.aclose()
        console.print(f"  {label}: {runs[-1].rate:,.1f} pairs/s")
    empty, off, warm = runs
    if off.server_requests != 2 * total:
        fail(f"cache off: {off.server_requests} server requests for {total} pairs, expected {2 * total}")
    if empty.lookups != 2 * total or empty.misses != empty.server_requests or empty.errors:
        fail(
            f"cache on: {empty.lookups} lookups (expected {2 * total}), {empty.misses} misses against "
            f"{empty.server_requests} server requests, {empty.errors} cache errors"
        )
    if empty.hits + empty.coalesced != 2 * repeats:
        fail(f"cache on: {empty.hits + empty.coalesced} calls saved, expected exactly {2 * repeats} (2 per repeat)")
    # Warm, repeats in flight together still coalesce, so hits + coalesced (not hits alone) cover every call.
    if warm.server_requests or warm.misses or warm.hits + warm.coalesced != 2 * total:
        fail(
            f"warm cache: {warm.server_requests} server requests, {warm.misses} misses and "
            f"{warm.hits + warm.coalesced} hits + coalesced for {2 * total} calls"
        )
    return runs, repeats


# --------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------


#: What the report prints for a ratio whose denominator is zero (a column that completed no pair).
NA = "n/a"


def _ratio(num: float, den: float) -> str:
    """``num ÷ den`` to 2 places; n/a when ``den`` is zero (or not a number: no samples)."""
    if den == 0 or math.isnan(den) or math.isnan(num):
        return NA
    return f"{num / den:.2f}"


def _ms(values: Sequence[float], q: float, digits: int = 0) -> str:
    """A percentile in ms; n/a without samples."""
    return f"{percentile(values, q):,.{digits}f}" if values else NA


def _share(cell: Cell, ideal: float) -> str:
    # A client that completed nothing in the window (plain httpx did, at high concurrency) is reported
    # as such, not divided by.
    if not cell.completed:
        return "0 pairs"
    return f"{cell.rate:,.1f} ({_ratio(cell.rate, ideal)})"


def report(
    results: dict[str, list[Cell]],
    low: LowLoad,
    runs: list[StreamRun],
    repeats: int,
    args: argparse.Namespace,
) -> None:
    latency_ms = 1000 * args.latency
    shipped_name = results["shipped"][0].client
    main = Table(
        title=f"judge_pair throughput, pairs/s (share of ideal): {latency_ms:.0f} ms replies, 2 calls per pair, "
        f"{args.window:g} s window after {args.warmup:g} s warm-up, cache off"
    )
    main.add_column("pairs in flight\n(calls)", justify="right")
    main.add_column("ideal\n(in flight ÷ latency)", justify="right")
    main.add_column(f"shipped\n{shipped_name}", justify="right")
    main.add_column("no HTTP (reference)\nin-process sleep", justify="right")
    main.add_column("shipped ÷ no HTTP", justify="right")
    for shipped, ref in zip(results["shipped"], results["inprocess"], strict=True):
        ideal = shipped.inflight / args.latency
        main.add_row(
            f"{shipped.inflight} ({2 * shipped.inflight})",
            f"{ideal:,.1f}",
            _share(shipped, ideal),
            _share(ref, ideal),
            _ratio(shipped.rate, ref.rate),
        )
    console.print(main)

    detail = Table(title="per cell: pair wall time, server's peak calls in flight, CPU in cores (2 on this machine)")
    detail.add_column("judge")
    detail.add_column("pairs in flight", justify="right")
    detail.add_column("pairs counted", justify="right")
    detail.add_column("pair p50 ms", justify="right")
    detail.add_column("pair p95 ms", justify="right")
    detail.add_column("server peak in flight", justify="right")
    detail.add_column("client CPU", justify="right")
    detail.add_column("client CPU ms/pair", justify="right")
    detail.add_column("server CPU", justify="right")
    for kind in ("shipped", "inprocess"):
        for cell in results[kind]:
            detail.add_row(
                cell.client,
                str(cell.inflight),
                str(cell.completed),
                _ms(cell.pair_ms, 0.5),
                _ms(cell.pair_ms, 0.95),
                "—" if cell.server_peak is None else str(cell.server_peak),
                f"{cell.client_cores:.2f}",
                _ratio(1000 * cell.client_cores, cell.rate),
                "—" if cell.server_cores is None else f"{cell.server_cores:.2f}",
            )
    console.print(detail)

    lat = Table(title=f"low load, shipped judge, one at a time ({len(low.call_ms)} samples each)")
    lat.add_column("")
    lat.add_column("p50 ms", justify="right")
    lat.add_column("p95 ms", justify="right")
    lat.add_column("server peak in flight", justify="right")
    lat.add_row(
        "one call (judge.complete, AB only)",
        _ms(low.call_ms, 0.5, 1),
        _ms(low.call_ms, 0.95, 1),
        str(low.call_peak),
    )
    lat.add_row(
        "one pair (judge_pair: AB and BA)",
        _ms(low.pair_ms, 0.5, 1),
        _ms(low.pair_ms, 0.95, 1),
        str(low.pair_peak),
    )
    lat.add_row(
        "pair ÷ call",
        _ratio(percentile(low.pair_ms, 0.5), percentile(low.call_ms, 0.5)),
        _ratio(percentile(low.pair_ms, 0.95), percentile(low.call_ms, 0.95)),
        "",
    )
    console.print(lat)
    if low.pair_ms and low.call_ms:
        overhead_ms = percentile(low.pair_ms, 0.5) - percentile(low.call_ms, 0.5)
        console.print(
            f"Server latency {latency_ms:.0f} ms; a pair costs {overhead_ms:+.1f} ms "
            f"over one call at p50 (2 calls in sequence would be ×2.0)."
        )

    empty, off, _ = runs
    repeat_share = f"{repeats / empty.pairs:.0%}" if empty.pairs else NA
    cache = Table(
        title=f"response cache: {empty.pairs} pairs, {repeats} exact repeats ({repeat_share}), shuffled, "
        f"{args.cache_concurrency} pairs in flight"
    )
    cache.add_column("")
    for run in runs:
        cache.add_column(run.label, justify="right")
    cache.add_row("pairs/s", *(f"{r.rate:,.1f}" for r in runs))
    cache.add_row("÷ cache off", *(_ratio(r.rate, off.rate) for r in runs))
    cache.add_row("wall s", *(f"{r.wall_s:.2f}" for r in runs))
    cache.add_row("judge calls asked by judge_pair", *(str(2 * r.pairs) for r in runs))
    cache.add_row("requests reaching the server", *(str(r.server_requests) for r in runs))
    cache.add_row("calls saved", *(str(2 * r.pairs - r.server_requests) for r in runs))
    cache.add_row("disk hits", *(str(r.hits) if r.lookups else "—" for r in runs))
    cache.add_row("coalesced (single flight)", *(str(r.coalesced) if r.lookups else "—" for r in runs))
    cache.add_row("misses (went to the judge)", *(str(r.misses) if r.lookups else "—" for r in runs))
    cache.add_row(
        "hit rate (hits + coalesced) ÷ lookups",
        *(f"{(r.hits + r.coalesced) / r.lookups:.1%}" if r.lookups else "—" for r in runs),
    )
    cache.add_row("replies stored", *(str(r.stored) if r.lookups else "—" for r in runs))
    console.print(cache)


# --------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> None:
    work_dir = Path(tempfile.mkdtemp(prefix="pairjudge-judge-bench-"))
    server = ServerProcess(args.latency, work_dir / "server.log")
    ok = False
    load_before = os.getloadavg()[0]
    try:
        console.print(
            f"[bold]server[/bold]: aiohttp.web, pid {server.proc.pid}, {server.base_url}, "
            f"{1000 * args.latency:.0f} ms per reply; work dir {work_dir}"
        )
        # Enough distinct pairs for the fastest cell at 1.5× its ideal rate, plus one per slot.
        top = max(args.levels)
        pool = make_pairs(math.ceil(1.5 * top / args.latency * (args.warmup + args.window)) + top, "load")
        console.print(f"[bold]throughput[/bold]: levels {', '.join(map(str, args.levels))} pairs in flight")
        results = await throughput(server, args.levels, pool, args)
        console.print("[bold]low load[/bold]: one call, then one pair, at a time")
        low = await low_load(server, make_pairs(2 * args.samples + 1, "low"), args.samples)
        console.print(f"[bold]cache[/bold]: {args.cache_pairs} pairs, {args.repeat_share:.0%} repeats")
        runs, repeats = await cache_runs(server, args, work_dir)
        if server.proc.poll() is not None:
            fail(f"the judge server exited (code {server.proc.returncode})")
        report(results, low, runs, repeats, args)
        # Other work on the machine takes CPU from both processes: say how busy it was.
        console.print(
            f"Machine: {os.cpu_count()} cores; 1-minute load average {load_before:.2f} before the run, "
            f"{os.getloadavg()[0]:.2f} after."
        )
        ok = True
    finally:
        await server.aclose()
        server.stop()
        if ok:
            shutil.rmtree(work_dir, ignore_errors=True)
        else:
            console.print(f"server log and cache kept in {work_dir}")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the server holds each reply (default 0.2)")
    parser.add_argument("--quick", action="store_true", help="shorter windows, fewer samples and pairs")
    parser.add_argument(
        "--levels",
        type=lambda s: tuple(int(x) for x in s.split(",")),
        default=DEFAULT_LEVELS,
        help="pairs in flight per cell, comma-separated (default 16,64,128)",
    )
    parser.add_argument("--window", type=float, help="seconds counted per cell (default 3, quick 1)")
    parser.add_argument("--warmup", type=float, help="seconds before the window (default 1, quick 0.6)")
    parser.add_argument("--samples", type=int, help="low-load samples of each kind (default 25, quick 10)")
    parser.add_argument("--cache-pairs", type=int, help="pairs in the cache stream (default 500, quick 200)")
    parser.add_argument("--repeat-share", type=float, default=0.3, help="share of exact repeats (default 0.3)")
    parser.add_argument("--cache-concurrency", type=int, default=64, help="pairs in flight (default 64)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # the server child process
    args = parser.parse_args(argv)
    quick = args.quick
    for name, default, fast in (
        ("window", 3.0, 1.0),
        ("warmup", 1.0, 0.6),
        ("samples", 25, 10),
        ("cache_pairs", 500, 200),
    ):
        if getattr(args, name) is None:
            setattr(args, name, fast if quick else default)
    if not 0.01 <= args.latency <= 5:
        parser.error("--latency must be within [0.01, 5] seconds")
    if args.warmup < args.latency:
        parser.error("--warmup must be at least --latency (the slot starts are spread over one latency)")
    if args.window <= 0 or args.samples < 1 or not args.levels or min(args.levels) < 1:
        parser.error("--window, --samples and --levels must be positive")
    if not 0 <= args.repeat_share < 1 or args.cache_pairs < 2 or args.cache_concurrency < 1:
        parser.error("--repeat-share must be within [0, 1), --cache-pairs >= 2, --cache-concurrency >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.serve:
        asyncio.run(serve(args.latency))
        return
    # Running 2 × 128 sockets in one process: make sure the descriptor limit is not the bottleneck.
    with contextlib.suppress(ValueError, OSError):
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < 4096:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
