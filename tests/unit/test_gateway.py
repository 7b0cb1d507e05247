"""``pairjudge gateway`` over real HTTP on 127.0.0.1: the official ``openai`` and ``anthropic`` SDKs as clients,
scripted upstreams, byte-for-byte comparison with going direct; the captures the sink builds (its Kafka send
replaced by a list: the Kafka path is tests/integration/test_gateway_kafka.py); and failing open."""

from __future__ import annotations

import asyncio
import gzip
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import pytest
from aiohttp import web
from anthropic import AsyncAnthropic
from openai import APIStatusError, AsyncOpenAI

from pairjudge.agents.shadow import joins
from pairjudge.schemas.captures import Capture
from pairjudge.schemas.experiments import Experiment
from pairjudge.streams.capture.sink import CaptureSink, _Pending, _Record
from pairjudge.streams.config.sections import GatewaySettings, KafkaSettings, ShadowSettings
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.gateway import GatewaySettingsError, Sampler, build_app, running
from pairjudge.streams.gateway.proxy import HOP_BY_HOP
from pairjudge.streams.gateway.server import bound_port
from tests.fixtures.fake_anthropic_server import FakeAnthropicServer, bad_key, fake_anthropic_server
from tests.fixtures.fake_judge_server import (
    Action,
    FakeJudgeServer,
    closed_port,
    fake_judge_server,
    hang,
    openai_error,
)
from tests.fixtures.provider_streams import (
    Call,
    anthropic_reply,
    anthropic_stream,
    chat_reply,
    chat_stream,
    responses_reply,
    responses_stream,
)

__all__ = ["closed_port", "fake_anthropic_server", "fake_judge_server"]  # fixtures, used by name

OPENAI_KEY = "sk-test-gateway-5b1e9d"
ANTHROPIC_KEY = "sk-ant-test-gateway-0c4f"
CALLS = (Call("call_1", "get_weather", {"city": "Paris"}), Call("call_2", "get_time", {"tz": "Europe/Paris"}))
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
HISTORY: list[Any] = [
    {"role": "system", "content": "You are a travel assistant."},
    {"role": "user", "content": "Weather and time in Paris?"},
]
#: Headers that differ between two responses of the same server by nature (the clock).
_CLOCK = frozenset({"date"})


class RecordingSink(CaptureSink):
    """The real sink (buffer, normalisers, redaction, encoding, drop counts) with its Kafka send replaced by a list."""

    def __init__(self, **options: Any) -> None:
        self.records: list[_Record] = []
        super().__init__("127.0.0.1:1", **options)

    async def _connect(self) -> Any:
        return object()

    async def _send(self, producer: Any, records: list[_Record]) -> None:
        self.records.extend(records)
        with self._count_lock:
            self._sent += len(records)

    def captures(self) -> list[Capture]:
        return [Capture.model_validate_json(r.value) for r in self.records]

    async def wait_for(self, count: int, timeout: float = 5.0) -> list[Capture]:
        deadline = time.monotonic() + timeout
        while len(self.records) < count and time.monotonic() < deadline:  # noqa: ASYNC110 - the sink's thread adds
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)  # and no more than that
        return self.captures()


class FailingBuildSink(RecordingSink):
    """A capture that will not encode: the build raises (a bug in the capture path)."""

    def _build(self, pending: _Pending) -> Capture:
        raise RuntimeError("encoder bug")


class RaisingSink(RecordingSink):
    """A sink whose ``capture`` itself raises (a bug on the gateway's side of the hand-over)."""

    def capture(self, *args: Any, **kwargs: Any) -> bool:
        raise RuntimeError("capture bug")


def settings_for(upstream: str, **gateway: Any) -> Settings:
    return Settings(gateway=GatewaySettings(upstream=upstream, port=0, **gateway))


@pytest.fixture
def sink() -> Iterator[RecordingSink]:
    sink = RecordingSink(redact=lambda text: text.replace("Paris", "[city]"))
    yield sink
    sink.close(1.0)


@pytest.fixture
def gateway_for(sink: RecordingSink) -> Callable[..., Any]:
    """``async with gateway_for(upstream_url, sink=..., **settings) as base``: the gateway's root URL."""

    def start(upstream: str, *, use: CaptureSink | None = None, **gateway: Any) -> Any:
        return _Serving(settings_for(upstream, **gateway), use if use is not None else sink)

    return start


class _Serving:
    def __init__(self, settings: Settings, sink: CaptureSink | None) -> None:
        self._cm = running(settings, sink=sink)

    async def __aenter__(self) -> str:
        runner = await self._cm.__aenter__()
        return f"http://127.0.0.1:{bound_port(runner)}"

    async def __aexit__(self, *exc: Any) -> None:
        await self._cm.__aexit__(*exc)


def _root(server: FakeJudgeServer) -> str:
    return f"http://127.0.0.1:{server.port}"


def _headers(headers: Any) -> list[tuple[str, str]]:
    # Less the clock, and the headers of each connection (``Connection: close``), which a proxy does not forward.
    return [(k.lower(), v) for k, v in headers.items() if k.lower() not in _CLOCK and k.lower() not in HOP_BY_HOP]


async def _raw_openai(client: AsyncOpenAI, path: str, body: dict[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
    resource = client.chat.completions if path == "chat" else client.responses
    async with resource.with_streaming_response.create(**body) as response:
        return response.status_code, _headers(response.headers), await response.read()


def _upstream_view(server: FakeJudgeServer, index: int) -> tuple[dict[str, str], bytes]:
    request = server.requests[index]
    # Less the headers of each connection (Host, Connection: keep-alive), which a proxy does not forward.
    return {k: v for k, v in request.headers.items() if k != "host" and k not in HOP_BY_HOP}, request.body


# --- byte for byte, and captured ---------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_openai_calls_streamed_and_not_with_tools_are_byte_for_byte_the_champion_s_and_captured(
    fake_judge_server: FakeJudgeServer, sink: RecordingSink, gateway_for: Callable[..., Any], api: str
) -> None:
    server = fake_judge_server
    plain, streamed = (
        (
            chat_reply("Checking both.", CALLS, finish="tool_calls"),
            chat_stream("Checking both.", CALLS, finish="tool_calls"),
        )
        if api == "chat"
        else (responses_reply("Sunny in Paris.", CALLS), responses_stream("Sunny in Paris.", CALLS))
    )
    body: dict[str, Any] = (
        {"model": "gpt-x", "messages": HISTORY, "tools": [WEATHER_TOOL], "temperature": 0.3}
        if api == "chat"
        else {
            "model": "gpt-x",
            "input": "Weather in Paris?",
            "tools": [
                {"type": "function", "name": "get_weather", "parameters": WEATHER_TOOL["function"]["parameters"]}
            ],
        }
    )
    async with gateway_for(_root(server)) as base:
        direct = AsyncOpenAI(base_url=server.base_url, api_key=OPENAI_KEY, max_retries=0)
        via = AsyncOpenAI(base_url=f"{base}/v1", api_key=OPENAI_KEY, max_retries=0)
        for action, stream in ((plain, False), (streamed, True)):
            server.script(action, action)
            extra = {"stream": True} if stream else {}
            there = await _raw_openai(direct, api, {**body, **extra})
            through = await _raw_openai(via, api, {**body, **extra})
            assert through == there  # status, headers (less the clock) and body, byte for byte
            assert _upstream_view(server, -1) == _upstream_view(server, -2)  # the champion saw the same request
        # And the SDK's own objects, through the gateway.
        server.script(streamed)
        if api == "chat":
            chunks = [c async for c in await via.chat.completions.create(**body, stream=True)]
            assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Checking both."
        else:
            events = [e async for e in await via.responses.create(**body, stream=True)]
            assert events[-1].type == "response.completed"

    captures = await sink.wait_for(3)
    assert len(captures) == 3  # the gateway's three calls; the direct ones passed it by
    for record in sink.records:
        assert OPENAI_KEY.encode() not in record.value
        assert b"Bearer" not in record.value
    whole = next(c for c in captures if not c.response.streamed)
    streamed_captures = [c for c in captures if c.response.streamed]
    assert len(streamed_captures) == 2
    # A streamed reply is captured as the assembled message: the same as the unstreamed one.
    for capture in streamed_captures:
        assert capture.response.message == whole.response.message
        assert capture.request == whole.request
    assert [c.function.name for c in whole.response.message.tool_calls] == ["get_weather", "get_time"]
    assert whole.source.api == ("chat_completions" if api == "chat" else "responses")
    assert whole.source.model == "gpt-x"
    assert whole.redacted
    assert "Paris" not in json.dumps(whole.model_dump(mode="json")["request"]["messages"])  # the redaction hook ran
    assert whole.response.latency_ms is not None


async def test_anthropic_messages_streamed_and_not_with_tools_are_byte_for_byte_and_captured(
    fake_anthropic_server: FakeAnthropicServer, sink: RecordingSink, gateway_for: Callable[..., Any]
) -> None:
    server = fake_anthropic_server
    # The SDK sends its key as a bearer token to a base URL that is not Anthropic's own.
    server.require_auth("authorization", f"Bearer {ANTHROPIC_KEY}", bad_key())
    body: dict[str, Any] = {
        "model": "claude-x",
        "max_tokens": 200,
        "system": "You are a travel assistant.",
        "messages": [{"role": "user", "content": "Weather and time?"}],
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
    }
    async with gateway_for(server.base_url) as base:
        direct = AsyncAnthropic(base_url=server.base_url, api_key=ANTHROPIC_KEY, max_retries=0)
        via = AsyncAnthropic(base_url=base, api_key=ANTHROPIC_KEY, max_retries=0)
        for action, stream in (
            (anthropic_reply("Checking.", CALLS, stop="tool_use"), False),
            (anthropic_stream("Checking.", CALLS, stop="tool_use"), True),
        ):
            server.script(action, action)
            results = []
            for client in (direct, via):
                async with client.messages.with_streaming_response.create(**body, stream=stream) as response:
                    results.append((response.status_code, _headers(response.headers), await response.read()))
            assert results[1] == results[0]
            assert _upstream_view(server, -1) == _upstream_view(server, -2)
        server.script(anthropic_stream("Checking.", CALLS, stop="tool_use"))
        async with via.messages.stream(**body) as stream_:
            final = await stream_.get_final_message()
        assert [b.type for b in final.content] == ["text", "tool_use", "tool_use"]
        # A wrong key: the champion's 401, as it sent it.
        with pytest.raises(anthropic.AuthenticationError) as refused:
            await AsyncAnthropic(base_url=base, api_key="wrong", max_retries=0).messages.create(**body)
        assert refused.value.status_code == 401

    captures = await sink.wait_for(3)
    assert len(captures) == 3  # not the refused call
    whole = next(c for c in captures if not c.response.streamed)
    assert all(c.response.message == whole.response.message for c in captures)
    assert whole.source.api == "anthropic_messages"
    assert [c.function.name for c in whole.response.message.tool_calls] == ["get_weather", "get_time"]
    assert all(ANTHROPIC_KEY.encode() not in r.value for r in sink.records)


async def test_every_other_path_and_method_is_passed_through_untouched(
    fake_judge_server: FakeJudgeServer, sink: RecordingSink, gateway_for: Callable[..., Any]
) -> None:
    server = fake_judge_server
    async with gateway_for(_root(server)) as base, aiohttp.ClientSession() as http:
        for method, path in (("GET", "/v1/models?limit=2"), ("PUT", "/v1/files/f-1"), ("POST", "/v1/embeddings")):
            answers = []
            for root in (_root(server), base):
                async with http.request(
                    method,
                    root + path,
                    data=b'{"input": "x"}',
                    headers={"Authorization": f"Bearer {OPENAI_KEY}", "X-Custom": "1"},
                ) as r:
                    answers.append((r.status, _headers(r.headers), await r.read()))
            assert answers[1] == answers[0], (method, path)
        assert server.get_requests[-1].path == server.get_requests[-2].path == "/v1/models?limit=2"
        assert server.requests[-1].headers["authorization"] == f"Bearer {OPENAI_KEY}"
        assert server.requests[-1].headers["x-custom"] == "1"
    assert await sink.wait_for(0) == []  # none of those is a call the gateway captures


# --- upstream errors ---------------------------------------------------------------------------------------


async def test_upstream_errors_reach_the_client_as_sent_and_are_not_captured(
    fake_judge_server: FakeJudgeServer, sink: RecordingSink, gateway_for: Callable[..., Any], closed_port: int
) -> None:
    server = fake_judge_server
    async with gateway_for(_root(server)) as base:
        direct = AsyncOpenAI(base_url=server.base_url, api_key=OPENAI_KEY, max_retries=0)
        via = AsyncOpenAI(base_url=f"{base}/v1", api_key=OPENAI_KEY, max_retries=0)
        for action in (
            openai_error(429, "slow down"),
            openai_error(500, "boom", error_type="server_error"),
            openai_error(400, "bad tools", param="tools"),
        ):
            server.script(action, action)
            raised = []
            for client in (direct, via):
                with pytest.raises(APIStatusError) as error:
                    await client.chat.completions.create(model="m", messages=HISTORY)
                response = error.value.response
                raised.append((type(error.value), response.status_code, _headers(response.headers), response.content))
            assert raised[1] == raised[0]  # the same error, status, headers and body
            assert raised[1][1] == action.status
    async with gateway_for(_root(server), read_timeout_s=0.3) as base:
        server.script(hang(2.0))
        with pytest.raises(APIStatusError) as gateway_error:
            await AsyncOpenAI(base_url=f"{base}/v1", api_key="k", max_retries=0).chat.completions.create(
                model="m",
                messages=HISTORY,
            )
        assert gateway_error.value.status_code == 504
    async with gateway_for(f"http://127.0.0.1:{closed_port}") as base:
        with pytest.raises(APIStatusError) as gateway_error:
            await AsyncOpenAI(base_url=f"{base}/v1", api_key="k", max_retries=0).chat.completions.create(
                model="m",
                messages=HISTORY,
            )
        assert gateway_error.value.status_code == 502
    assert await sink.wait_for(0) == []


# --- streams: never held back; a client that leaves cancels the champion's call ------------------------------


class SlowUpstream:
    """An aiohttp upstream that streams a chat completion in two parts, the second only when ``release`` is set;
    it records whether its handler was cancelled (the gateway cut the call)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.first = chat_stream("Hello there, traveller.").body.split(b"\n\n", 2)
        self._runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        out = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await out.prepare(request)
        try:
            await out.write(self.first[0] + b"\n\n")
            await self.release.wait()
            await out.write(self.first[1] + b"\n\n" + self.first[2])
            await out.write_eof()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return out

    async def __aenter__(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        self._runner = web.AppRunner(app, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        return f"http://127.0.0.1:{bound_port(self._runner)}"

    async def __aexit__(self, *exc: Any) -> None:
        self.release.set()
        assert self._runner is not None
        await self._runner.cleanup()


async def test_a_stream_s_chunks_pass_as_they_come_and_a_client_that_leaves_cancels_the_champion_s_call(
    sink: RecordingSink, gateway_for: Callable[..., Any]
) -> None:
    upstream = SlowUpstream()
    async with upstream as root, gateway_for(root) as base:
        client = AsyncOpenAI(base_url=f"{base}/v1", api_key=OPENAI_KEY, max_retries=0)
        # The first chunk arrives while the champion still holds the rest: nothing is held back.
        stream = await client.chat.completions.create(model="m", messages=HISTORY, stream=True)
        first = await asyncio.wait_for(stream.__anext__(), timeout=5.0)
        assert first.choices[0].delta.role == "assistant" or first.choices[0].delta.content is not None
        upstream.release.set()
        rest = [c async for c in stream]
        assert rest
        assert len(await sink.wait_for(1)) == 1

        # Now a client that leaves mid-stream.
        upstream.release.clear()
        stream = await client.chat.completions.create(model="m", messages=HISTORY, stream=True)
        await asyncio.wait_for(stream.__anext__(), timeout=5.0)
        await stream.close()
        await asyncio.wait_for(upstream.cancelled.wait(), timeout=5.0)  # the champion's call was cut
    assert len(await sink.wait_for(2, timeout=0.5)) == 1  # and made no capture


# --- failing open --------------------------------------------------------------------------------------------


async def _many_calls(base: str, n: int) -> list[Any]:
    client = AsyncOpenAI(base_url=f"{base}/v1", api_key=OPENAI_KEY, max_retries=0)
    # At most 8 at once: the scripted upstream is a small threaded server with a short listen queue.
    limit = asyncio.Semaphore(8)

    async def call() -> Any:
        async with limit:
            return await client.chat.completions.create(model="m", messages=HISTORY)

    return await asyncio.gather(*(call() for _ in range(n)))


async def test_with_kafka_unreachable_and_the_buffer_full_every_client_gets_its_reply_and_drops_are_counted(
    fake_judge_server: FakeJudgeServer, closed_port: int
) -> None:
    server = fake_judge_server
    server.set_default(chat_reply("Fine."))
    settings = Settings(
        kafka=KafkaSettings(bootstrap_servers=f"127.0.0.1:{closed_port}"),
        gateway=GatewaySettings(upstream=_root(server), port=0, max_buffered=2),
    )
    async with running(settings) as runner:  # the gateway's own sink, on a Kafka that is not there
        base = f"http://127.0.0.1:{bound_port(runner)}"
        replies = await _many_calls(base, 30)
        assert [r.choices[0].message.content for r in replies] == ["Fine."] * 30
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/readyz") as ready:
                assert ready.status == 200  # Kafka down does not take the gateway out of service
                captures = (await ready.json())["captures"]
            async with http.get(f"{base}/metrics") as metrics:
                text = await metrics.text()
    assert captures["dropped"]["buffer_full"] >= 20
    assert captures["buffered"] <= 2
    assert re.search(r'pairjudge_capture_dropped_total\{[^}]*reason="buffer_full"\} (\d+)', text)
    assert "pairjudge_gateway_requests_total" in text


@pytest.mark.parametrize("broken", [FailingBuildSink, RaisingSink])
async def test_a_capture_path_that_raises_never_reaches_the_client(
    fake_judge_server: FakeJudgeServer, gateway_for: Callable[..., Any], broken: type[RecordingSink]
) -> None:
    server = fake_judge_server
    server.set_default(chat_reply("Fine."))
    sink = broken()
    try:
        async with gateway_for(_root(server), use=sink) as base:
            replies = await _many_calls(base, 5)
            server.script(chat_stream("Streamed."))
            client = AsyncOpenAI(base_url=f"{base}/v1", api_key=OPENAI_KEY, max_retries=0)
            chunks = [c async for c in await client.chat.completions.create(model="m", messages=HISTORY, stream=True)]
        assert [r.choices[0].message.content for r in replies] == ["Fine."] * 5
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Streamed."
        await asyncio.sleep(0.3)
        assert sink.stats().dropped["error"] == 6
        assert sink.records == []
    finally:
        sink.close(1.0)


async def test_an_unreadable_body_is_passed_through_and_counted(
    fake_judge_server: FakeJudgeServer, sink: RecordingSink, gateway_for: Callable[..., Any]
) -> None:
    server = fake_judge_server
    server.script(Action(body=b"not json at all"))
    async with (
        gateway_for(_root(server)) as base,
        aiohttp.ClientSession() as http,
        http.post(f"{base}/v1/chat/completions", json={"model": "m", "messages": HISTORY}) as r,
    ):
        assert (r.status, await r.read()) == (200, b"not json at all")
    await sink.wait_for(1, timeout=0.5)
    assert sink.stats().dropped["unreadable"] == 1


# --- sampling, settings, health ------------------------------------------------------------------------------


def _experiment(experiment_id: str, share: float, *, paused: bool = False, **select: Any) -> Experiment:
    return Experiment.model_validate(
        {
            "id": experiment_id,
            "share": share,
            "paused": paused,
            "select": select,
            "challenger": {"base_url": "http://127.0.0.1:1/v1", "model": "c"},
            "rubric": {"kind": "named", "name": "tone_style"},
        }
    )


async def test_the_gateway_draws_as_the_shadow_stage_does_so_every_capture_it_sends_joins_an_experiment(
    fake_judge_server: FakeJudgeServer, sink: RecordingSink, tmp_path: Path
) -> None:
    server = fake_judge_server
    server.set_default(chat_reply("Fine."))
    experiments = (
        _experiment("a", 0.2),
        _experiment("b", 0.1, routes=["/support"]),
        _experiment("c", 1.0, paused=True),
    )
    sampler = Sampler.build(experiments, share=1.0)
    # The draw, many times: about a fifth (a, on every route) plus a tenth of the rest on /support.
    metas = [sampler.meta({"X-Pairjudge-Route": "/support"}) for _ in range(4000)]
    kept = sum(sampler.draw(m) is not None for m in metas)
    assert 0.23 < kept / 4000 < 0.33

    # The same through the gateway, reading the shadow stage's experiments file.
    path = tmp_path / "experiments.json"
    path.write_text(json.dumps({"experiments": [e.model_dump(mode="json") for e in experiments]}))
    settings = Settings(
        gateway=GatewaySettings(upstream=_root(server), port=0, route="/support"),
        shadow=ShadowSettings(experiments_file=path),
    )
    async with running(settings, sink=sink) as runner:
        await _many_calls(f"http://127.0.0.1:{bound_port(runner)}", 200)
    captures = await sink.wait_for(200, timeout=1.0)
    assert 20 < len(captures) < 110
    for capture in captures:
        assert capture.source.route == "/support"
        assert joins(capture, experiments)  # the stage's draw agrees: no capture is sent for nothing


def test_settings_refuse_a_missing_upstream_and_credential_hint_headers() -> None:
    with pytest.raises(GatewaySettingsError, match="PAIRJUDGE_GATEWAY__UPSTREAM"):
        build_app(Settings())
    with pytest.raises(GatewaySettingsError, match="credential"):
        build_app(Settings(gateway=GatewaySettings(upstream="http://x:1", hint_headers="X-Team, X-Api-Key")))
    assert GatewaySettings().host == "127.0.0.1"


async def test_health_endpoints_answer(fake_judge_server: FakeJudgeServer, gateway_for: Callable[..., Any]) -> None:
    async with gateway_for(_root(fake_judge_server)) as base, aiohttp.ClientSession() as http:
        async with http.get(f"{base}/healthz") as r:
            assert (r.status, await r.json()) == (200, {"status": "ok"})
        async with http.get(f"{base}/readyz") as r:
            assert r.status == 200


async def test_a_compressed_reply_passes_compressed_and_is_captured_read(
    fake_judge_server: FakeJudgeServer, sink: RecordingSink, gateway_for: Callable[..., Any]
) -> None:
    server = fake_judge_server
    plain = chat_reply("Squeezed.", CALLS, finish="tool_calls")
    packed = Action(
        body=gzip.compress(plain.body), headers=(("Content-Type", "application/json"), ("Content-Encoding", "gzip"))
    )
    server.script(packed, packed)
    answers = []
    async with gateway_for(_root(server)) as base, aiohttp.ClientSession(auto_decompress=False) as http:
        for root in (_root(server), base):
            async with http.post(f"{root}/v1/chat/completions", json={"model": "m", "messages": HISTORY}) as r:
                answers.append((r.status, _headers(r.headers), await r.read()))
    assert answers[1] == answers[0]
    assert answers[1][2] == packed.body  # as the champion sent it: still compressed
    (capture,) = await sink.wait_for(1)
    assert capture.response.message.content == "Squeezed."


async def test_route_tags_and_hint_headers_go_into_the_capture_never_a_credential(
    fake_judge_server: FakeJudgeServer, sink: RecordingSink, gateway_for: Callable[..., Any]
) -> None:
    server = fake_judge_server
    server.set_default(chat_reply("Fine."))
    async with gateway_for(_root(server), route="/default", prompt_version="v1", hint_headers="X-Team") as base:
        client = AsyncOpenAI(base_url=f"{base}/v1", api_key=OPENAI_KEY, max_retries=0)
        await client.chat.completions.create(model="m", messages=HISTORY, extra_headers={"X-Team": "blue"})
        await client.chat.completions.create(
            model="m",
            messages=HISTORY,
            extra_headers={"X-Pairjudge-Route": "/billing", "X-Pairjudge-Tags": "beta, eu", "Cookie": "s=1"},
        )
    first, second = sorted(await sink.wait_for(2), key=lambda c: c.source.route)
    assert (second.source.route, second.source.prompt_version, second.hints.headers) == (
        "/default",
        "v1",
        {"x-team": "blue"},
    )
    assert (first.source.route, first.hints.tags, first.hints.headers) == ("/billing", ("beta", "eu"), {})
    assert all(b"s=1" not in r.value and OPENAI_KEY.encode() not in r.value for r in sink.records)
