"""The gateway's fault run (issue 38's goal: 0 client-visible errors caused by anything downstream of the
champion), on a real Apache Kafka of this test's own that it stops and starts again mid-run.

Concurrent clients (the official ``openai`` SDK, streamed and not, some with tool calls) call a scripted champion
on 127.0.0.1 whose latencies are heavy-tailed (Pareto, capped) through an in-process ``pairjudge gateway`` with a
small capture buffer, while:

- Kafka is stopped under it, stays down for a while, and is started again on the same port and data;
- the buffer overflows (``PAIRJUDGE_GATEWAY__MAX_BUFFERED`` is small, so it does while Kafka is down);
- the capture encoder raises for some exchanges (the sink's normaliser, monkeypatched in this process: no
  test-only path in the gateway).

Checked: no call failed; every client got the champion's bytes exactly (status and body, streamed or not); every
call's capture is either on the topic (with the champion's message, a stream assembled) or counted in
``pairjudge_capture_dropped_total`` on the gateway's ``/metrics`` by its reason (the counts add up exactly, so
nothing is lost silently); and calls made after Kafka came back are captured again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from openai import AsyncOpenAI
from prometheus_client.parser import text_string_to_metric_families

from pairjudge.agents.capture import make_capture
from pairjudge.streams.gateway import running
from pairjudge.streams.gateway.server import STATE, bound_port
from pairjudge_dev.kafka import start_kafka
from pairjudge_dev.workers import kafka_run
from tests.fixtures.provider_streams import Call, chat_reply, chat_stream
from tests.integration.test_shadow_kafka import _read_all

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

OPENAI_KEY = "sk-gateway-fault-7d2"
#: Clients calling at once (each its own SDK client, one call after the other with a short pause).
CLIENTS = 8
#: The pause between a client's calls: about CLIENTS / (PAUSE + latency) calls a second, kind to a shared machine.
PAUSE_S = 0.15
#: The champion's latency to its first byte: PARETO_SCALE_MS * Pareto(ALPHA), capped at PARETO_CAP_MS; a stream's
#: chunks come a tenth of that apart (same law).
PARETO_ALPHA = 1.5
PARETO_SCALE_MS = 4.0
PARETO_CAP_MS = 400.0
#: Captures waiting for Kafka at most: overflowed within a second or two of Kafka going down.
MAX_BUFFERED = 20
#: Seconds Kafka stays stopped before it is started again (its start-up adds to that: measured and printed).
DOWN_S = 15.0
#: The word in a request that makes the capture encoder raise for that exchange.
POISON = "poison-pill"


@dataclass
class ParetoChampion:
    """A scripted OpenAI-compatible champion on 127.0.0.1 (aiohttp): each call's reply names the call (its
    ``call-N`` marker), streamed (SSE events written one by one, with pauses) or not, with a tool call on every
    fifth; latencies heavy-tailed. It records the bytes it sent for each call, and the most calls it had at once."""

    rng: random.Random = field(default_factory=lambda: random.Random(38))
    sent: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    #: Milliseconds to the first byte, and between a stream's chunks.
    first_ms: list[float] = field(default_factory=list)
    gaps_ms: list[float] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    _runner: web.AppRunner | None = None

    def _delay(self, scale: float, into: list[float]) -> float:
        ms = min(PARETO_SCALE_MS * scale * self.rng.paretovariate(PARETO_ALPHA), PARETO_CAP_MS * scale)
        into.append(ms)
        return ms / 1000

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        marker = body["messages"][-1]["content"].split()[0]
        number = int(marker.removeprefix("call-"))
        calls = (Call(f"call_{number}", "get_weather", {"city": f"City {number}"}),) if number % 5 == 0 else ()
        text = f"Answer to {marker}: all good."
        finish = "tool_calls" if calls else "stop"
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self._delay(1.0, self.first_ms))
            if not body.get("stream"):
                action = chat_reply(text, calls, finish=finish)
                self.sent[marker] = (200, action.body)
                return web.Response(body=action.body, content_type="application/json")
            action = chat_stream(text, calls, finish=finish)
            out = web.StreamResponse(headers=dict(action.headers))
            await out.prepare(request)
            events = action.body.split(b"\n\n")
            pieces = [e + b"\n\n" for e in events[:-1]] + ([events[-1]] if events[-1] else [])
            for piece in pieces:
                await out.write(piece)
                await asyncio.sleep(self._delay(0.1, self.gaps_ms))
            await out.write_eof()
            self.sent[marker] = (200, b"".join(pieces))
            return out
        finally:
            self.in_flight -= 1

    async def __aenter__(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0, backlog=256).start()
        return f"http://127.0.0.1:{bound_port(self._runner)}"

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()


@dataclass
class Calls:
    """What the clients did: by call marker, whether streamed, the phase it started in, and what came back."""

    phase: str = "kafka up"
    next_number: int = 0
    streamed: dict[str, bool] = field(default_factory=dict)
    phases: dict[str, str] = field(default_factory=dict)
    got: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    errors: list[tuple[str, str]] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    def take(self) -> tuple[str, bool]:
        number = self.next_number
        self.next_number += 1
        marker = f"call-{number}"
        # Streamed and not, in an order that is not a simple alternation with the clients' turns.
        self.streamed[marker] = streamed = number % 3 != 0
        self.phases[marker] = self.phase
        return marker, streamed

    def poisoned(self, marker: str) -> bool:
        return int(marker.removeprefix("call-")) % 7 == 3

    def count(self, phase: str) -> Counter[bool]:
        return Counter(s for m, s in self.streamed.items() if self.phases[m] == phase and m in self.got)


async def _client(base: str, calls: Calls) -> None:
    client = AsyncOpenAI(base_url=f"{base}/v1", api_key=OPENAI_KEY, max_retries=0, timeout=60)
    async with client:
        while not calls.stop.is_set():
            marker, streamed = calls.take()
            words = f"{marker} {POISON}" if calls.poisoned(marker) else f"{marker} weather please"
            try:
                # The raw bytes as the SDK received them (``with_streaming_response``), to compare byte for byte.
                async with client.chat.completions.with_streaming_response.create(
                    model="gpt-champion",
                    messages=[{"role": "user", "content": words}],
                    tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
                    stream=streamed,
                ) as response:
                    calls.got[marker] = (response.status_code, await response.read())
            except Exception as exc:  # noqa: BLE001 - what the app would see: recorded, asserted empty
                calls.errors.append((marker, f"{type(exc).__name__}: {exc}"))
            await asyncio.sleep(PAUSE_S)


def _samples(metrics_text: str, name: str, label: str) -> dict[str, float]:
    """The samples of counter ``name`` by the value of ``label`` ("" when the counter has no labels)."""
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name == name:
                key = sample.labels.get(label, "")
                found[key] = found.get(key, 0) + sample.value
    return found


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _wait(predicate: Any, timeout: float, step: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(step)
    return True


async def test_kafka_stopped_and_restarted_a_full_buffer_and_a_raising_encoder_cost_no_call_and_lose_nothing_silently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="pairjudge")

    def raising_make_capture(api: Any, request: Any, response: Any, **kwargs: Any) -> Any:
        if POISON in json.dumps(request):
            raise RuntimeError("capture encoder bug (injected by the test)")
        return make_capture(api, request, response, **kwargs)

    # The sink's normaliser, as the sink's thread calls it, in this process (the gateway runs in it).
    monkeypatch.setattr("pairjudge.streams.capture.sink.make_capture", raising_make_capture)

    broker = start_kafka(tmp_path / "kafka")
    champion = ParetoChampion()
    calls = Calls()
    timings: dict[str, float] = {}
    try:
        base_settings = await kafka_run(broker.bootstrap, tmp_path, "gwfault")
        async with champion as upstream:
            settings = base_settings.model_copy(
                update={
                    "gateway": base_settings.gateway.model_copy(
                        update={"upstream": upstream, "port": 0, "max_buffered": MAX_BUFFERED}
                    )
                }
            )
            async with running(settings) as runner:
                base = f"http://127.0.0.1:{bound_port(runner)}"
                sink = runner.app[STATE].sink
                assert sink is not None
                clients = [asyncio.create_task(_client(base, calls)) for _ in range(CLIENTS)]
                try:
                    # Kafka up: captures flow.
                    assert await _wait(lambda: sink.stats().sent >= 30, timeout=60), sink.stats()
                    # Kafka stopped under the running calls, down for DOWN_S, then started again (same port, data).
                    calls.phase = "kafka down"
                    started = time.monotonic()
                    await asyncio.to_thread(broker.stop)
                    await asyncio.sleep(DOWN_S)
                    calls.phase = "kafka starting"
                    broker = await asyncio.to_thread(start_kafka, tmp_path / "kafka", broker.port)
                    timings["down_s"] = time.monotonic() - started
                    calls.phase = "kafka back"
                    first_after = calls.next_number
                    sent_at_restart = sink.stats().sent
                    # The gateway sends again: captures of calls made after the restart reach Kafka.
                    assert await _wait(lambda: sink.stats().sent >= sent_at_restart + 30, timeout=120), sink.stats()
                finally:
                    calls.stop.set()
                    await asyncio.gather(*clients)
                # Every call's capture has been sent or counted lost by now (nothing waits in the buffer).
                answered = sum(1 for status, _ in calls.got.values() if status == 200)
                assert await _wait(lambda: sink.stats().sent + sink.stats().dropped_total >= answered, 60), (
                    sink.stats(),
                    answered,
                )
                stats = sink.stats()
                async with aiohttp.ClientSession() as http, http.get(f"{base}/metrics") as scraped:
                    metrics_text = await scraped.text()
            # One more than were sent, waiting a while for it: a capture on the topic twice would show.
            captures = await _read_all(settings, "captures", want=stats.sent + 1, timeout=20)
    finally:
        broker.stop()

    drops = _samples(metrics_text, "pairjudge_capture_dropped_total", "reason")
    print(  # the run's conditions and figures, for the report (pytest -s)
        f"\nfault run: {len(calls.got)} calls by {CLIENTS} clients, champion up to {champion.max_in_flight} at once; "
        f"latency Pareto(alpha={PARETO_ALPHA}) x {PARETO_SCALE_MS} ms capped at {PARETO_CAP_MS} ms, "
        f"to first byte p50 {_quantile(champion.first_ms, 0.5):.1f} ms, "
        f"p99 {_quantile(champion.first_ms, 0.99):.1f} ms, max {max(champion.first_ms):.1f} ms; "
        f"Kafka down {timings['down_s']:.1f} s; by phase (streamed: count): "
        f"{ {p: dict(calls.count(p)) for p in ('kafka up', 'kafka down', 'kafka starting', 'kafka back')} }; "
        f"sink {stats}; /metrics drops {drops}; on the topic {len(captures)}"
    )
    # 0 client-visible errors, and every reply byte for byte the champion's.
    assert calls.errors == []
    assert len(calls.got) == calls.next_number
    assert champion.max_in_flight > 1
    for marker, got in calls.got.items():
        assert got == champion.sent[marker], marker
    for phase in ("kafka up", "kafka down", "kafka back"):
        assert set(calls.count(phase)) == {True, False}, phase  # streamed and not, in each

    # Every capture on the topic or counted by reason, the counts adding up exactly: nothing lost silently.
    by_marker = {c["request"]["messages"][-1]["content"].split()[0]: c for c in captures}
    assert len(by_marker) == len(captures) == len({c["capture_id"] for c in captures})  # one capture a call, at most
    # /metrics says what the sink's own counts say (a reason never counted has no sample).
    assert drops == {reason: float(count) for reason, count in stats.dropped.items() if count}
    assert _samples(metrics_text, "pairjudge_capture_sent_total", "") == {"": float(stats.sent)}
    assert len(by_marker) == stats.sent
    assert len(by_marker) + sum(drops.values()) == len(calls.got)
    requests = _samples(metrics_text, "pairjudge_gateway_requests_total", "status")
    assert requests == {"2xx": float(len(calls.got))}
    assert drops["buffer_full"] > 0  # the buffer overflowed while Kafka was down
    assert drops["error"] > 0  # the raising encoder
    assert not any(calls.poisoned(m) for m in by_marker)  # a capture that would not encode is never sent
    assert set(drops) <= {"buffer_full", "error", "kafka_unavailable"}
    # What reached the topic is the champion's exchange, a stream captured as its assembled message.
    for marker, capture in by_marker.items():
        number = int(marker.removeprefix("call-"))
        assert capture["response"]["streamed"] is calls.streamed[marker]
        assert capture["response"]["message"]["content"] == f"Answer to {marker}: all good."
        if number % 5 == 0:
            assert capture["response"]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
        assert OPENAI_KEY not in json.dumps(capture)
    # Logged now and then, not once a capture: the sink's lines about thousands of lost captures are a handful.
    lines = [r for r in caplog.records if r.name.startswith("pairjudge.")]
    assert 0 < len(lines) <= 12, [r.getMessage() for r in lines]
    # Captured again after Kafka came back: calls made after the restart are on the topic.
    assert any(int(m.removeprefix("call-")) >= first_after for m in by_marker)
