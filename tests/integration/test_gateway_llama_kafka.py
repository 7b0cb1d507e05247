"""The gateway's real wire path, once: the official ``openai`` SDK calls ``pairjudge gateway`` in front of the real
llama.cpp server (SmolLM2-135M, OpenAI-compatible, on 127.0.0.1) as the champion, streamed and not, and the same
calls go direct to the server for comparison.

A real server's replies cannot be compared byte for byte between two calls: each carries its own ``id`` and
``created`` time. Everything else can, and is: with temperature 0 and a fixed seed the server writes the same
reply both times, so the bodies are compared whole once those two fields are set aside (a stream event by event,
the SSE comments the server may send as keep-alives set aside too), and the status and the content type exactly.
(That the gateway passes bytes through unchanged is proven byte for byte against scripted servers in
tests/unit/test_gateway.py.) Then the captures on Kafka: one for each call through the gateway, the streamed one
holding the assembled message, the same as the unstreamed one and as what the app read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI

from pairjudge.streams.gateway import running
from pairjudge.streams.gateway.server import bound_port
from pairjudge_dev.workers import kafka_run
from tests.fixtures.llama import LlamaServer
from tests.integration.test_shadow_kafka import _read_all

# With the other llama tests: one llama.cpp server (a session fixture) on one worker, alone (it is CPU-bound).
pytestmark = [
    pytest.mark.kafka,
    pytest.mark.llama,
    pytest.mark.slow,
    pytest.mark.xdist_group("llama"),
    pytest.mark.serial,
]

_PER_CALL = frozenset({"id", "created"})
MESSAGES: list[Any] = [
    {"role": "system", "content": "You are a friendly assistant. Answer in one short sentence."},
    {"role": "user", "content": "Say hello to a new customer."},
]


def _without_per_call(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in _PER_CALL}


def _events(raw: bytes) -> list[Any]:
    """A stream's ``data:`` payloads in order (JSON, or the closing ``[DONE]``), less the per-call fields."""
    events: list[Any] = []
    for line in raw.decode().splitlines():
        if not line.startswith("data:"):
            continue  # blank separators, and SSE comments (keep-alive pings with a timestamp)
        data = line.removeprefix("data:").strip()
        events.append(data if data == "[DONE]" else _without_per_call(json.loads(data)))
    return events


def _streamed_text(events: list[Any]) -> str:
    return "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e != "[DONE]" and e["choices"])


async def _raw(client: AsyncOpenAI, model: str, *, stream: bool) -> tuple[int, str, bytes]:
    async with client.chat.completions.with_streaming_response.create(
        model=model, messages=MESSAGES, temperature=0, seed=38, max_tokens=48, stream=stream
    ) as response:
        return response.status_code, response.headers["content-type"], await response.read()


async def test_the_openai_sdk_through_the_gateway_in_front_of_llama_cpp_gets_the_direct_reply_and_it_is_captured(
    kafka_bootstrap: str, llama_server: LlamaServer, tmp_path: Path
) -> None:
    settings = await kafka_run(kafka_bootstrap, tmp_path, "gwllama")
    root = llama_server.base_url.removesuffix("/v1")
    settings = settings.model_copy(
        update={"gateway": settings.gateway.model_copy(update={"upstream": root, "port": 0, "route": "/welcome"})}
    )
    direct = AsyncOpenAI(base_url=llama_server.base_url, api_key="sk-llama-direct", max_retries=0, timeout=180)
    async with running(settings) as runner:
        via = AsyncOpenAI(
            base_url=f"http://127.0.0.1:{bound_port(runner)}/v1", api_key="sk-llama-gw", max_retries=0, timeout=180
        )
        there_plain = await _raw(direct, llama_server.model, stream=False)
        through_plain = await _raw(via, llama_server.model, stream=False)
        there_stream = await _raw(direct, llama_server.model, stream=True)
        through_stream = await _raw(via, llama_server.model, stream=True)

    # Unstreamed: the same status, content type and body but for the reply's id and time.
    assert through_plain[:2] == there_plain[:2]
    assert through_plain[0] == 200
    plain = _without_per_call(json.loads(through_plain[2]))
    assert plain == _without_per_call(json.loads(there_plain[2]))
    text = plain["choices"][0]["message"]["content"]
    assert text.strip()
    # Streamed: the same events in the same order, the same way.
    assert through_stream[:2] == there_stream[:2]
    assert through_stream[1].startswith("text/event-stream")
    events = _events(through_stream[2])
    assert events == _events(there_stream[2])
    assert events[-1] == "[DONE]"
    assert _streamed_text(events) == text  # greedy decoding: the stream says what the whole reply says

    captures = await _read_all(settings, "captures", want=2, timeout=30)
    assert len(captures) == 2  # the gateway's two calls; the direct ones passed it by
    by_streamed = {c["response"]["streamed"]: c for c in captures}
    assert set(by_streamed) == {True, False}
    for capture in captures:
        assert capture["response"]["message"]["content"] == text  # the assembled message, what the app read
        # The request as the contract's messages (which spell out the fields the app left out).
        assert [(m["role"], m["content"]) for m in capture["request"]["messages"]] == [
            (m["role"], m["content"]) for m in MESSAGES
        ]
        assert (capture["source"]["api"], capture["source"]["producer"]) == ("chat_completions", "gateway")
        assert capture["source"]["route"] == "/welcome"
        assert "sk-llama" not in json.dumps(capture)
    assert by_streamed[True]["response"]["message"] == by_streamed[False]["response"]["message"]
