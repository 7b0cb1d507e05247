"""The LiteLLM callback in a real LiteLLM proxy (the ``litellm`` CLI, 1.110.2, from deploy/litellm/setup.sh's
environment) on 127.0.0.1, in front of a scripted OpenAI-compatible upstream, the official ``openai`` client calling
the proxy: chat completions streamed and not, with tools, become captures on a real Kafka topic holding the message
the client got; no key (the proxy's master key, the upstream's key, the virtual key's hash) is ever in one; with
Kafka unreachable, the proxy answers every request and the callback counts every capture it lost; and a call
through the proxy becomes a capture, then a pair, then a verdict through a real worker's shadow stage."""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI, AsyncStream

from pairjudge.agents.shadow import drawn, shadow_pair_id
from pairjudge.schemas import WIRE_CONTEXT, Capture
from pairjudge.streams.kafka.admin import TopicSpec, create_topics
from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge_dev.workers import kafka_run, running_worker
from tests.fixtures.fake_anthropic_server import FakeAnthropicServer
from tests.fixtures.fake_judge_server import FakeJudgeServer, closed_port
from tests.fixtures.litellm_proxy import CHECKOUT, LiteLLMProxy, litellm_proxy, litellm_python, proxy_config
from tests.fixtures.provider_streams import (
    Call,
    anthropic_reply,
    anthropic_stream,
    chat_reply,
    chat_stream,
    responses_reply,
    responses_stream,
)
from tests.integration.test_conversations_kafka import _judge
from tests.integration.test_shadow_kafka import EXPERIMENT, TOOLS, _challenger, _experiments_file, _read_all

__all__ = ["closed_port"]  # a fixture, used by name
pytestmark = [pytest.mark.kafka]

MASTER_KEY = "sk-litellm-master-6b1e0c"
UPSTREAM_KEY = "sk-upstream-secret-93d7f2"
CALLS = (Call("call_1", "get_weather", {"city": "Paris"}), Call("call_2", "get_time", {"tz": "Europe/Paris"}))
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a travel assistant."},
    {"role": "user", "content": "Weather and time in Paris? Mail me at ana.lima@example.com"},
]
EMAIL = "ana.lima@example.com"


@pytest.fixture
def upstream() -> Iterator[FakeJudgeServer]:
    server = FakeJudgeServer().start()
    # The upstream answers only LiteLLM's own key: a request that reached it carried no client credential.
    server.require_auth("authorization", f"Bearer {UPSTREAM_KEY}")
    try:
        yield server
    finally:
        server.stop()


def _config(upstream: FakeJudgeServer) -> dict[str, Any]:
    return proxy_config(
        {"support": {"model": "openai/gpt-upstream", "api_base": upstream.base_url, "api_key": UPSTREAM_KEY}},
        master_key=MASTER_KEY,
    )


def _client(proxy: LiteLLMProxy) -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=f"{proxy.base_url}/v1", api_key=MASTER_KEY, max_retries=0, default_headers={"X-Team": "support"}
    )


async def _topic(bootstrap: str, prefix: str) -> str:
    name = f"{prefix}.captures"
    await create_topics(bootstrap, {name: TopicSpec(partitions=1, compacted=False, replication=1)})
    return name


async def _ask(client: AsyncOpenAI, *, stream: bool, route: str = "/support") -> dict[str, Any]:
    """The message the client got (text and tool calls), streamed or not."""
    metadata = {"pairjudge_route": route, "pairjudge_prompt_version": "v7"}
    if not stream:
        reply = await client.chat.completions.create(
            model="support",
            messages=MESSAGES,  # type: ignore[arg-type]
            tools=TOOLS,  # type: ignore[arg-type]
            temperature=0.3,
            extra_body={"metadata": metadata},
        )
        message = reply.choices[0].message
        calls = [(c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []]  # type: ignore[union-attr]
        return {"text": message.content, "calls": calls}
    text = ""
    calls_by_index: dict[int, dict[str, str]] = {}
    stream_reply = await client.chat.completions.create(
        model="support",
        messages=MESSAGES,  # type: ignore[arg-type]
        tools=TOOLS,  # type: ignore[arg-type]
        stream=True,
        extra_body={"metadata": metadata},
    )
    assert isinstance(stream_reply, AsyncStream)
    async for chunk in stream_reply:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for call in choice.delta.tool_calls or []:
                slot = calls_by_index.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] = slot["id"] or (call.id or "")
                if call.function is not None:
                    slot["name"] += call.function.name or ""
                    slot["arguments"] += call.function.arguments or ""
    calls = [(c["id"], c["name"], json.loads(c["arguments"])) for _, c in sorted(calls_by_index.items())]
    return {"text": text or None, "calls": calls}


def _captured(capture: Capture) -> dict[str, Any]:
    message = capture.response.message
    calls = [(c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls]
    text = message.content if isinstance(message.content, str) or message.content is None else None
    return {"text": text or None, "calls": calls}


def test_the_callback_imports_without_faust_in_litellms_environment() -> None:
    """In the proxy's own environment (no Faust installed there at all), the callback's module imports and its
    instance is made; nothing of Faust, mode, or pairjudge's worker is loaded."""
    probe = (
        "import sys\n"
        "import pairjudge.streams.capture.litellm_callback as m\n"
        "assert m.capture_callback.sink is not None\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in {'faust', 'mode'} "
        "or n.startswith(('pairjudge.streams.worker', 'pairjudge.streams.app', 'pairjudge.streams.shadow')))\n"
        "print('loaded:', bad)\n"
        "m.capture_callback.close(0.1)\n"
    )
    result = subprocess.run(
        [str(litellm_python()), "-c", probe],
        env={"PYTHONPATH": str(CHECKOUT), "PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:9", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "loaded: []" in result.stdout, result.stdout


async def test_proxied_chat_calls_streamed_and_not_with_tools_become_captures(
    kafka_bootstrap: str, upstream: FakeJudgeServer, tmp_path: Path
) -> None:
    prefix = f"test.litellm.{uuid.uuid4().hex[:10]}"
    topic = await _topic(kafka_bootstrap, prefix)
    upstream.script(
        chat_reply("Let me check both.", CALLS, finish="tool_calls", model="gpt-upstream"),
        chat_stream("Checking now.", CALLS, finish="tool_calls", model="gpt-upstream"),
    )
    env = {
        "PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS": kafka_bootstrap,
        "PAIRJUDGE_TOPICS__PREFIX": prefix,
        "PAIRJUDGE_REDACTION__ENABLED": "true",  # pairjudge's redaction, applied before a capture leaves the proxy
        # A credential's name listed by mistake is still never taken.
        "PAIRJUDGE_LITELLM_HINT_HEADERS": "x-team,authorization",
    }
    with litellm_proxy(_config(upstream), env, tmp_path / "proxy") as proxy:
        client = _client(proxy)
        got = {False: await _ask(client, stream=False), True: await _ask(client, stream=True)}
        records = await _records(kafka_bootstrap, topic, expected=2)
        log_text = proxy.log()
    assert len(upstream.requests) == 2
    assert got[False]["calls"]
    assert got[True]["calls"]

    assert len(records) == 2, log_text[-3000:]
    captures: dict[bool, Capture] = {}
    for key, value in records:
        # No key, in any form, anywhere in the bytes on Kafka.
        for secret in (MASTER_KEY, UPSTREAM_KEY, "Bearer", EMAIL):
            assert secret.encode() not in value
        assert re.search(rb"user_api_key|litellm_proxy", value) is None
        capture = Capture.model_validate_json(value, context=WIRE_CONTEXT)
        assert key == capture.capture_id.encode()
        captures[capture.response.streamed] = capture
    assert set(captures) == {False, True}
    for streamed, capture in captures.items():
        # The message the client got, assembled the same way streamed or not.
        assert _captured(capture) == got[streamed]
        assert capture.source.api == "chat_completions"
        assert capture.source.model == "support"  # the model the client named
        assert (capture.source.route, capture.source.prompt_version) == ("/support", "v7")
        assert [m.role for m in capture.request.messages] == ["system", "user"]
        assert capture.redacted
        assert capture.hints.headers == {"x-team": "support"}
        assert capture.request.messages[1].content == "Weather and time in Paris? Mail me at [redacted:email]"
        assert [t.function.name for t in capture.request.tools] == ["get_weather"]
        assert capture.response.finish_reason == "tool_calls"
    assert captures[False].request.sampling.temperature == 0.3
    usage = captures[False].response.usage
    assert usage is not None
    assert usage.prompt_tokens == 31


async def _records(bootstrap: str, topic: str, expected: int, timeout: float = 30.0) -> list[tuple[bytes, bytes]]:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    found: list[tuple[bytes, bytes]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(found) < expected and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                found += [(r.key or b"", r.value or b"") for r in batch]
    finally:
        await consumer.stop()
    return found


async def test_proxied_anthropic_messages_and_responses_calls_become_captures(
    kafka_bootstrap: str, upstream: FakeJudgeServer, tmp_path: Path
) -> None:
    """Anthropic's ``/v1/messages`` (to an Anthropic upstream) and ``/v1/responses``, streamed and not, with tools,
    through the proxy: each capture holds the text and tool call the client got, in chat shape."""
    prefix = f"test.litellm.{uuid.uuid4().hex[:10]}"
    topic = await _topic(kafka_bootstrap, prefix)
    claude = FakeAnthropicServer().start()
    try:
        claude.require_key(UPSTREAM_KEY)
        call = (Call("toolu_1", "get_weather", {"city": "Lima"}),)
        claude.script(
            anthropic_reply("Let me see.", call, stop="tool_use"),
            anthropic_stream("Let me see.", call, stop="tool_use"),
        )
        upstream.script(responses_reply("Checking.", call), responses_stream("Checking.", call))
        config = _config(upstream)
        config["model_list"].append(
            {
                "model_name": "claude",
                "litellm_params": {
                    "model": "anthropic/claude-upstream",
                    "api_base": claude.base_url,
                    "api_key": UPSTREAM_KEY,
                },
            }
        )
        env = {"PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS": kafka_bootstrap, "PAIRJUDGE_TOPICS__PREFIX": prefix}
        function = TOOLS[0]["function"]
        with litellm_proxy(config, env, tmp_path / "proxy") as proxy:
            anthropic = AsyncAnthropic(base_url=proxy.base_url, api_key=MASTER_KEY, max_retries=0)
            question: list[Any] = [{"role": "user", "content": "Weather in Lima?"}]
            tools: list[Any] = [
                {
                    "name": function["name"],
                    "description": function["description"],
                    "input_schema": function["parameters"],
                }
            ]
            unstreamed = await anthropic.messages.create(model="claude", max_tokens=200, messages=question, tools=tools)
            async with anthropic.messages.stream(
                model="claude", max_tokens=200, messages=question, tools=tools
            ) as stream:
                streamed = await stream.get_final_message()
            blocks = [
                [(b.type, getattr(b, "text", None), getattr(b, "input", None)) for b in m.content]
                for m in (unstreamed, streamed)
            ]
            assert blocks[0] == blocks[1] == [("text", "Let me see.", None), ("tool_use", None, {"city": "Lima"})]
            openai = _client(proxy)
            responses_tools: list[Any] = [{"type": "function", **function}]
            await openai.responses.create(model="support", input="Weather in Lima?", tools=responses_tools)
            events = await openai.responses.create(
                model="support", input="Weather in Lima?", tools=responses_tools, stream=True
            )
            async for _ in events:
                pass
            records = await _records(kafka_bootstrap, topic, expected=4)
            log_text = proxy.log()
    finally:
        claude.stop()
    assert len(records) == 4, log_text[-3000:]
    seen: set[tuple[str, bool]] = set()
    for _, value in records:
        for secret in (MASTER_KEY, UPSTREAM_KEY):
            assert secret.encode() not in value
        capture = Capture.model_validate_json(value, context=WIRE_CONTEXT)
        seen.add((capture.source.api, capture.response.streamed))
        message = capture.response.message
        text = "Let me see." if capture.source.api == "anthropic_messages" else "Checking."
        texts = (
            [message.content]
            if isinstance(message.content, str)
            else [getattr(p, "text", None) for p in message.content or ()]
        )
        assert texts == [text], (capture.source.api, capture.response.streamed)
        assert [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls] == [
            ("get_weather", {"city": "Lima"})
        ]
        assert capture.request.messages[-1].role == "user"
        assert [t.function.name for t in capture.request.tools] == ["get_weather"]
    assert seen == {
        ("anthropic_messages", False),
        ("anthropic_messages", True),
        ("responses", False),
        ("responses", True),
    }


async def test_only_the_calls_an_experiment_draws_are_sent_under_the_id_the_draw_used(
    kafka_bootstrap: str, upstream: FakeJudgeServer, tmp_path: Path
) -> None:
    """An experiment taking half its route's calls: the proxy sends about half, each under a capture id the shadow
    stage's own draw (``agents.shadow.drawn``) takes too, so the stage pairs every one of them."""
    prefix = f"test.litellm.{uuid.uuid4().hex[:10]}"
    topic = await _topic(kafka_bootstrap, prefix)
    experiments = json.loads(_experiments_file(tmp_path, "http://127.0.0.1:9/v1").read_text())
    experiments["experiments"][0]["share"] = 0.5
    path = tmp_path / "half.json"
    path.write_text(json.dumps(experiments))
    calls = 16
    upstream.set_default(chat_reply("Sure."))
    env = {
        "PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS": kafka_bootstrap,
        "PAIRJUDGE_TOPICS__PREFIX": prefix,
        "PAIRJUDGE_SHADOW__EXPERIMENTS_FILE": str(path),
    }
    with litellm_proxy(_config(upstream), env, tmp_path / "proxy") as proxy:
        client = _client(proxy)
        for i in range(calls):
            await client.chat.completions.create(
                model="support",
                messages=[{"role": "user", "content": f"question {i}"}],
                extra_body={"metadata": {"pairjudge_route": "/support"}},
            )
        records = await _records(kafka_bootstrap, topic, expected=calls, timeout=8)
    captures = [Capture.model_validate_json(value, context=WIRE_CONTEXT) for _, value in records]
    assert 0 < len(captures) < calls  # 16 calls at 50%: all or none would be 1 in 65536
    assert all(drawn(c.capture_id, EXPERIMENT, 0.5) for c in captures), [c.capture_id for c in captures]


async def test_calls_litellm_is_told_not_to_log_are_not_captured(
    kafka_bootstrap: str, upstream: FakeJudgeServer, tmp_path: Path
) -> None:
    """LiteLLM's message-logging switch (``turn_off_message_logging`` in its settings, a key's or a request's; here
    the request's header): no content of such a call leaves the proxy through the callback. The call beside it,
    without the header, is captured."""
    prefix = f"test.litellm.{uuid.uuid4().hex[:10]}"
    topic = await _topic(kafka_bootstrap, prefix)
    upstream.script(chat_reply("Private answer."), chat_reply("Loggable answer."))
    env = {"PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS": kafka_bootstrap, "PAIRJUDGE_TOPICS__PREFIX": prefix}
    with litellm_proxy(_config(upstream), env, tmp_path / "proxy") as proxy:
        client = _client(proxy)
        private = await client.chat.completions.create(
            model="support",
            messages=[{"role": "user", "content": "a"}],
            extra_headers={"x-litellm-enable-message-redaction": "true"},
        )
        loggable = await client.chat.completions.create(model="support", messages=[{"role": "user", "content": "b"}])
        records = await _records(kafka_bootstrap, topic, expected=2, timeout=8)
    assert private.choices[0].message.content == "Private answer."
    assert loggable.choices[0].message.content == "Loggable answer."
    assert len(records) == 1
    capture = Capture.model_validate_json(records[0][1], context=WIRE_CONTEXT)
    assert capture.response.message.content == "Loggable answer."


async def test_with_kafka_unreachable_the_proxy_answers_every_request_and_the_losses_are_counted(
    upstream: FakeJudgeServer, closed_port: int, tmp_path: Path
) -> None:
    requests = 8
    for i in range(requests):
        upstream.script(chat_stream(f"Answer {i}.") if i % 2 else chat_reply(f"Answer {i}."))
    env = {
        "PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS": f"127.0.0.1:{closed_port}",
        "PAIRJUDGE_LITELLM_MAX_BUFFERED": "3",  # the buffer fills: both ways of losing a capture are counted
        "PAIRJUDGE_LITELLM_REPORT_EVERY_S": "0",  # the counts logged after every call
    }
    with litellm_proxy(_config(upstream), env, tmp_path / "proxy") as proxy:
        client = _client(proxy)
        texts = []
        for i in range(requests):
            texts.append((await _ask(client, stream=bool(i % 2)))["text"])
        running = _counts(proxy.log())
    assert texts == [f"Answer {i}." for i in range(requests)]
    # While running, from the calls' events: nothing sent, captures held for Kafka (the buffer and the batch the
    # sender holds while it retries), the rest dropped as the buffer was full.
    assert running, proxy.log()[-3000:]
    sent, held, drops = running[-1]
    assert sent == 0
    assert held == 3
    assert set(drops) == {"buffer_full"}
    # Stopped: what was held could not be sent either. Every capture is counted, none lost uncounted.
    log_text = proxy.log()
    sent, held, drops = _counts(log_text)[-1]
    assert (sent, held) == (0, 0)
    assert set(drops) == {"buffer_full", "kafka_unavailable"}, drops
    assert sum(drops.values()) == requests, drops
    assert "Traceback" not in log_text


def _counts(log_text: str) -> list[tuple[int, int, dict[str, int]]]:
    """The callback's count lines: sent, buffered, and the drops by reason."""
    lines = re.findall(
        r"pairjudge LiteLLM callback: sent (\d+), buffered (\d+), dropped: (.*); not drawn \d+", log_text
    )
    return [
        (int(sent), int(held), {reason: int(n) for reason, n in re.findall(r"(\w+) (\d+)", drops)})
        for sent, held, drops in lines
    ]


async def test_a_call_through_the_proxy_becomes_a_capture_then_a_pair_then_a_verdict(
    kafka_bootstrap: str, upstream: FakeJudgeServer, tmp_path: Path
) -> None:
    challenger = FakeJudgeServer().start()
    judge = FakeJudgeServer().start()
    try:
        challenger.set_responder(_challenger)
        judge.set_responder(_judge)
        upstream.script(chat_reply(None, (Call("call_c1", "get_weather", {"city": "Oslo"}),), finish="tool_calls"))
        settings = await kafka_run(
            kafka_bootstrap,
            tmp_path,
            "litellm-shadow",
            judge=judge.judge_settings(),
            policy={"audit_share": 0.0},
            shadow={"experiments_file": str(_experiments_file(tmp_path, challenger.base_url))},
        )
        env = {
            "PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS": kafka_bootstrap,
            "PAIRJUDGE_TOPICS__PREFIX": settings.topics.prefix,
            "PAIRJUDGE_SHADOW__EXPERIMENTS_FILE": str(settings.shadow.experiments_file),
        }
        with litellm_proxy(_config(upstream), env, tmp_path / "proxy") as proxy:
            got = await _ask(_client(proxy), stream=False)
            # Not in the experiment's routes: the callback does not send it (the draw is the stage's rule).
            upstream.script(chat_reply("Elsewhere."))
            await _client(proxy).chat.completions.create(
                model="support",
                messages=[{"role": "user", "content": "hi"}],
                extra_body={"metadata": {"pairjudge_route": "/elsewhere"}},
            )
            captures = await _read_all(settings, "captures", want=2, timeout=15)
        assert got["calls"] == [("call_c1", "get_weather", {"city": "Oslo"})]
        assert len(captures) == 1, [c["source"] for c in captures]
        pair_id = shadow_pair_id(captures[0]["capture_id"], EXPERIMENT)
        log = tmp_path / "worker.log"
        with running_worker(settings, log):
            outcomes = await collect_outcomes(settings, {pair_id}, timeout=120)
        assert outcomes.complete, log.read_text()[-3000:]
        kind, _ = outcomes.final[pair_id]
        assert kind in {"verdicts", "tiebreak", "review"}, kind
        assert judge.requests  # judged by the worker's judge, both orders
        assert challenger.requests  # the challenger was asked the proxied request
        asked = challenger.requests[0].json()
        assert [m["role"] for m in asked["messages"]] == ["system", "user"]
        assert asked["tools"]
    finally:
        challenger.stop()
        judge.stop()
