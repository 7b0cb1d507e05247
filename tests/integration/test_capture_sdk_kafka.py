"""The producer SDK end to end: the official ``openai`` and ``anthropic`` async clients, wrapped, against scripted
servers on 127.0.0.1, their captures on a real Kafka topic; and with Kafka down, nothing raised, memory bounded,
every lost capture counted."""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, ConsumerRecord
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from pairjudge.schemas import WIRE_CONTEXT, Capture
from pairjudge.streams.capture import CaptureSink, capture_meta, wrap_anthropic, wrap_openai
from pairjudge.streams.kafka.admin import TopicSpec, create_topics
from tests.fixtures.fake_anthropic_server import FakeAnthropicServer, fake_anthropic_server
from tests.fixtures.fake_judge_server import FakeJudgeServer, closed_port, fake_judge_server
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

pytestmark = [pytest.mark.kafka]

OPENAI_KEY = "sk-test-openai-3f9a7c1e"
ANTHROPIC_KEY = "sk-ant-test-77d01b2e"
CALLS = (Call("call_1", "get_weather", {"city": "Paris"}), Call("call_2", "get_time", {"tz": "Europe/Paris"}))
WEATHER_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather now",
        "parameters": WEATHER_PARAMETERS,
    },
}
HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a travel assistant."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_0", "content": "12 °C and rain"},
    {"role": "user", "content": "And the time there? Check the weather again too."},
]


@pytest.fixture
async def topic(kafka_bootstrap: str) -> str:
    name = f"test.capture.{uuid.uuid4().hex[:10]}.captures"
    await create_topics(kafka_bootstrap, {name: TopicSpec(partitions=2, compacted=False, replication=1)})
    return name


@pytest.fixture
def sink(kafka_bootstrap: str, topic: str) -> Iterator[CaptureSink]:
    with CaptureSink(kafka_bootstrap, topic=topic, linger_s=0.01) as s:
        yield s


async def _records(
    bootstrap: str, topic: str, expected: int, timeout: float = 20.0
) -> list[ConsumerRecord[bytes, bytes]]:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    records: list[ConsumerRecord[bytes, bytes]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(records) < expected and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                records.extend(batch)
    finally:
        await consumer.stop()
    return records


def _captures(records: list[ConsumerRecord[bytes, bytes]]) -> dict[tuple[str, bool], Capture]:
    out: dict[tuple[str, bool], Capture] = {}
    for record in records:
        capture = Capture.model_validate_json(record.value, context=WIRE_CONTEXT)
        assert record.key == capture.capture_id.encode()
        out[(capture.source.api, capture.response.streamed)] = capture
    return out


def chat_body(text: str) -> dict[str, Any]:
    return {"model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}


async def _drain(stream: AsyncIterator[Any]) -> list[Any]:
    return [piece async for piece in stream]


async def test_openai_chat_and_responses_with_tools_streamed_and_not_arrive_as_captures(
    fake_judge_server: FakeJudgeServer, sink: CaptureSink, kafka_bootstrap: str, topic: str
) -> None:
    server = fake_judge_server
    server.script(
        chat_reply("Checking both.", CALLS, finish="tool_calls"),
        chat_stream("Checking both.", CALLS, finish="tool_calls"),
        responses_reply("Sunny, and it is noon.", CALLS),
        responses_stream("Sunny, and it is noon.", CALLS),
    )
    client = wrap_openai(
        AsyncOpenAI(base_url=server.base_url, api_key=OPENAI_KEY), sink, route="/travel", hint_headers=["X-Experiment"]
    )
    headers = {"X-Experiment": "exp-7", "Authorization": f"Bearer {OPENAI_KEY}"}
    request: dict[str, Any] = {"model": "gpt-x", "messages": HISTORY, "tools": [WEATHER_TOOL], "temperature": 0.3}

    reply = await client.chat.completions.create(**request, extra_headers=headers)
    with capture_meta(prompt_version="v7", tags=["beta"]):
        messages = list(HISTORY)
        stream = await client.chat.completions.create(
            **{**request, "messages": messages}, stream=True, stream_options={"include_usage": True}
        )
        # The app adds to its list while it reads the stream: the capture holds the request as it was sent.
        messages.append({"role": "user", "content": "added while the reply streamed"})
        chunks = await _drain(stream)
    responses_input: list[dict[str, Any]] = [
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "call_id": "call_0", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "call_0", "output": "12 °C and rain"},
    ]
    tool = {"type": "function", "name": "get_weather", "parameters": WEATHER_PARAMETERS}
    asked: dict[str, Any] = {"model": "gpt-x", "input": responses_input, "tools": [tool]}
    answer = await client.responses.create(**asked)
    events = await _drain(await client.responses.create(**asked, stream=True))

    # The app got the SDK's own replies, untouched.
    assert reply.choices[0].message.tool_calls is not None
    names = [c.model_dump()["function"]["name"] for c in reply.choices[0].message.tool_calls]
    assert names == ["get_weather", "get_time"]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Checking both."
    assert answer.output_text == "Sunny, and it is noon."
    assert events[-1].type == "response.completed"
    # Each request reached the server once, with the app's own headers.
    assert server.request_count == 4
    assert server.requests[0].headers["x-experiment"] == "exp-7"

    records = await _records(kafka_bootstrap, topic, 4)
    assert len(records) == 4
    for record in records:
        assert OPENAI_KEY.encode() not in record.value  # the key, never in a capture (nor its header)
        assert b"Bearer" not in record.value
    captures = _captures(records)
    chat, chat_streamed = captures[("chat_completions", False)], captures[("chat_completions", True)]
    # The streamed reply's capture holds the assembled message: the same as the unstreamed one.
    assert chat_streamed.response.message == chat.response.message
    assert chat.response.message.content == "Checking both."
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in chat.response.message.tool_calls] == [
        (c.id, c.name, c.arguments) for c in CALLS
    ]
    assert chat.response.finish_reason == chat_streamed.response.finish_reason == "tool_calls"
    assert chat_streamed.response.usage == chat.response.usage
    assert [m.role for m in chat.request.messages] == ["system", "user", "assistant", "tool", "user"]
    assert chat_streamed.request.messages == chat.request.messages
    assert chat.request.tools[0].function.name == "get_weather"
    assert chat.request.sampling.temperature == 0.3
    assert (chat.source.model, chat.source.route, chat.hints.headers) == ("gpt-x", "/travel", {"x-experiment": "exp-7"})
    assert (chat_streamed.source.prompt_version, chat_streamed.hints.tags) == ("v7", ("beta",))
    assert chat.response.latency_ms is not None
    assert chat.response.latency_ms > 0
    responses, responses_streamed = captures[("responses", False)], captures[("responses", True)]
    assert responses_streamed.response.message == responses.response.message
    assert responses.response.message.content == "Sunny, and it is noon."
    assert [m.role for m in responses.request.messages] == ["user", "assistant", "tool"]
    assert responses.request.messages[1].tool_calls[0].id == "call_0"


async def test_anthropic_messages_with_tools_streamed_and_not_arrive_as_captures(
    fake_anthropic_server: FakeAnthropicServer, sink: CaptureSink, kafka_bootstrap: str, topic: str
) -> None:
    server = fake_anthropic_server
    # The key reaches the server (this SDK sends it as a bearer token), and never the capture.
    server.require_auth("authorization", f"Bearer {ANTHROPIC_KEY}")
    server.script(
        anthropic_reply("Checking both.", CALLS, stop="tool_use"),
        anthropic_stream("Checking both.", CALLS, stop="tool_use"),
    )
    client = wrap_anthropic(AsyncAnthropic(base_url=server.base_url, api_key=ANTHROPIC_KEY), sink, route="/travel")
    request: dict[str, Any] = {
        "model": "claude-x",
        "max_tokens": 400,
        "system": "You are a travel assistant.",
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_0", "name": "get_weather", "input": {"city": "Paris"}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_0", "content": "12 °C and rain"},
                    {"type": "text", "text": "And the time there?"},
                ],
            },
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "The weather now",
                "input_schema": WEATHER_PARAMETERS,
            }
        ],
    }
    message = await client.messages.create(**request)
    async with await client.messages.create(**request, stream=True) as stream:
        events = await _drain(stream)

    assert [b.type for b in message.content] == ["text", "tool_use", "tool_use"]
    assert events[-1].type == "message_stop"
    records = await _records(kafka_bootstrap, topic, 2)
    assert len(records) == 2
    assert all(ANTHROPIC_KEY.encode() not in r.value for r in records)
    captures = _captures(records)
    whole, streamed = captures[("anthropic_messages", False)], captures[("anthropic_messages", True)]
    assert streamed.response.message == whole.response.message
    assert whole.response.message.content == "Checking both."
    assert [c.function.name for c in whole.response.message.tool_calls] == ["get_weather", "get_time"]
    assert (whole.response.finish_reason, whole.response.provider_finish_reason) == ("tool_calls", "tool_use")
    assert [m.role for m in whole.request.messages] == ["system", "user", "assistant", "tool", "user"]
    assert whole.request.messages[3].tool_call_id == "toolu_0"
    assert whole.request.sampling.max_tokens == 400
    assert streamed.response.usage == whole.response.usage


async def test_the_redaction_hook_runs_before_a_capture_leaves_and_the_trace_is_kept(
    fake_judge_server: FakeJudgeServer, kafka_bootstrap: str, topic: str
) -> None:
    fake_judge_server.script(chat_reply("I mailed ann@example.com."))
    tracer = TracerProvider().get_tracer("test")
    with CaptureSink(
        kafka_bootstrap, topic=topic, linger_s=0.01, redact=lambda t: t.replace("ann@example.com", "[redacted:email]")
    ) as sink:
        client = wrap_openai(AsyncOpenAI(base_url=fake_judge_server.base_url, api_key=OPENAI_KEY), sink)
        with tracer.start_as_current_span("app request") as span:
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "Mail ann@example.com"}]
            )
        trace_id = f"{span.get_span_context().trace_id:032x}"
    records = await _records(kafka_bootstrap, topic, 1)
    assert b"ann@example.com" not in records[0].value
    capture = Capture.model_validate_json(records[0].value, context=WIRE_CONTEXT)
    assert capture.redacted
    assert capture.request.messages[0].content == "Mail [redacted:email]"
    assert capture.trace is not None
    assert capture.trace.traceparent.split("-")[1] == trace_id
    assert dict(records[0].headers)["traceparent"].decode() == capture.trace.traceparent


def test_credential_headers_cannot_be_asked_for_as_hints(kafka_bootstrap: str) -> None:
    with CaptureSink(kafka_bootstrap) as sink, pytest.raises(ValueError, match="credential"):
        wrap_openai(
            AsyncOpenAI(api_key=OPENAI_KEY, base_url="http://127.0.0.1:9/v1"), sink, hint_headers=["Authorization"]
        )


async def test_with_kafka_down_the_app_never_fails_memory_stays_bounded_and_every_drop_is_counted(
    fake_judge_server: FakeJudgeServer, closed_port: int
) -> None:
    reader = InMemoryMetricReader()
    sink = CaptureSink(
        f"127.0.0.1:{closed_port}",
        max_buffered=20,
        batch_size=5,
        linger_s=0.0,
        send_timeout_s=1.0,
        meter_provider=MeterProvider(metric_readers=[reader]),
    )
    fake_judge_server.set_default(chat_reply("fine", CALLS, finish="tool_calls"))
    client = wrap_openai(AsyncOpenAI(base_url=fake_judge_server.base_url, api_key=OPENAI_KEY), sink)
    calls = 60
    for n in range(calls):
        reply = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"q{n}"}])
        assert reply.choices[0].message.content == "fine"
        assert sink.stats().buffered <= 20  # the bound holds while the broker is away
    body = {"model": "m", "messages": [{"role": "user", "content": "direct"}]}
    started = time.perf_counter()
    queued = [sink.capture(body, {"choices": [{"message": {"content": "x"}}]}) for _ in range(1000)]
    elapsed = time.perf_counter() - started
    assert elapsed < 1.0  # never blocked on the broker
    assert queued.count(True) <= 20
    stats = sink.close(timeout=3.0)
    await asyncio.sleep(1.5)  # a connection attempt in flight at close ends, and counts what it held
    stats = sink.stats()
    assert stats.sent == 0
    assert stats.buffered == 0
    assert stats.dropped_total == calls + 1000
    assert stats.dropped["buffer_full"] >= calls + 1000 - 20 - 5
    # After close: dropped and counted, never raised.
    assert sink.capture(body, {}) is False
    assert sink.stats().dropped["closed"] == 1
    points = reader.get_metrics_data().resource_metrics[0].scope_metrics[0].metrics  # type: ignore[union-attr]
    dropped = next(m for m in points if m.name == "pairjudge.capture.dropped")
    by_reason = {p.attributes["reason"]: p.value for p in dropped.data.data_points}  # type: ignore[union-attr, index]
    assert sum(by_reason.values()) == calls + 1000 + 1
    assert by_reason == {k: v for k, v in sink.stats().dropped.items() if v}


async def test_a_failed_call_or_an_abandoned_stream_captures_nothing(
    fake_judge_server: FakeJudgeServer, sink: CaptureSink, kafka_bootstrap: str, topic: str
) -> None:
    from openai import APIStatusError

    from tests.fixtures.fake_judge_server import status

    fake_judge_server.script(status(400), chat_stream("A long story about a cat.", ()))
    client = wrap_openai(AsyncOpenAI(base_url=fake_judge_server.base_url, api_key=OPENAI_KEY, max_retries=0), sink)
    with pytest.raises(APIStatusError):  # the SDK's own error, as without the wrapper
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    stream = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}], stream=True)
    async for _ in stream:
        break  # the app stops reading: the reply is not whole
    await stream.close()
    await asyncio.sleep(0.3)
    assert sink.stats().sent == 0
    assert sink.stats().dropped_total == 0


async def test_unreadable_and_oversized_captures_are_dropped_by_reason_never_raised(closed_port: int) -> None:
    # Both are decided on the sink's thread before Kafka is reached, so an unreachable broker is enough here.
    with CaptureSink(f"127.0.0.1:{closed_port}", linger_s=0.0, max_capture_bytes=600, send_timeout_s=1.0) as sink:
        assert sink.capture({"model": "m", "messages": []}, chat_body("ok"))  # no message: unreadable
        assert sink.capture({"model": "m", "messages": [{"role": "user", "content": "q" * 1000}]}, chat_body("ok"))
        assert sink.capture("not a request", chat_body("ok")) is False  # type: ignore[arg-type]  # an app's mistake
        for _ in range(200):  # the sink's thread decides within a moment
            if sink.stats().dropped_total >= 3:
                break
            await asyncio.sleep(0.05)
        stats = sink.stats()
    assert stats.dropped["unreadable"] == 1
    assert stats.dropped["too_large"] == 1
    # A request that is not a mapping fails on the caller's path, where it is caught and counted too.
    assert stats.dropped["error"] == 1


async def test_from_settings_uses_the_topic_prefix_and_pairjudge_s_redaction(
    fake_judge_server: FakeJudgeServer, kafka_bootstrap: str
) -> None:
    from pairjudge.streams.config.settings import Settings

    prefix = f"test-capture-{uuid.uuid4().hex[:8]}"
    settings = Settings.model_validate(
        {"kafka": {"bootstrap_servers": kafka_bootstrap}, "topics": {"prefix": prefix}, "redaction": {"enabled": True}}
    )
    await create_topics(
        kafka_bootstrap, {f"{prefix}.captures": TopicSpec(partitions=1, compacted=False, replication=1)}
    )
    fake_judge_server.script(chat_reply("Call me on +44 20 7946 0958."))
    with CaptureSink.from_settings(settings, linger_s=0.01) as sink:
        assert sink.topic == f"{prefix}.captures"
        client = wrap_openai(AsyncOpenAI(base_url=fake_judge_server.base_url, api_key=OPENAI_KEY), sink)
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "I am bob@example.org"}])
    records = await _records(kafka_bootstrap, f"{prefix}.captures", 1)
    assert b"bob@example.org" not in records[0].value
    assert b"7946" not in records[0].value
    capture = Capture.model_validate_json(records[0].value, context=WIRE_CONTEXT)
    assert capture.redacted
    assert capture.request.messages[0].content == "I am [redacted:email]"
    assert capture.response.message.content == "Call me on [redacted:phone]."


def test_the_capture_bench_runs_with_tiny_counts(kafka_bootstrap: str) -> None:
    """``bench.capture_sdk`` as a user runs it, tiny, so it cannot rot: exit 0 means every capture made with Kafka
    up reached Kafka and every capture made with Kafka unreachable was counted as dropped."""
    from tests.integration.test_bench_smoke import run_bench

    args = ["--calls", "50", "--http-calls", "10", "--rss-seconds", "2", "--rate", "500"]
    output = run_bench(["bench.capture_sdk", "--bootstrap", kafka_bootstrap, *args], timeout=300)
    assert "capture() p99" in output, output[-3000:]
    assert re.search(r"captures made, all \d+ dropped and counted", output), output[-3000:]
