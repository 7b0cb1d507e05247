"""The shadow stage on Apache Kafka (docs/guides/production-traffic.md): a real worker reads captures, asks the
challenger (a real OpenAI-compatible HTTP server on 127.0.0.1 that counts every request) and publishes the pairs,
which the same worker then judges (the offline judge).

Checked: a text capture and a tool-call capture each become one pair and then a final outcome; a capture with an
image part is set aside (dead letter ``capture_unseen_image``, the challenger never asked); a challenger that
refuses is asked again and the capture dead-lettered ``challenger_refused`` with its original bytes, never made a
pair; a redelivered capture (the same bytes produced again) publishes nothing new and never asks the challenger
again (the server's own count); a challenger that stays down is retried and the capture dead-lettered
``challenger_unavailable``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from pairjudge.agents.capture.build import make_capture
from pairjudge.agents.shadow import shadow_pair_id
from pairjudge.schemas.captures import Capture, TraceContext
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.live import publish_control
from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.readers import from_start
from pairjudge.streams.security.kafka_clients import client_config
from pairjudge_dev.workers import kafka_run, running_worker, wait_for_log, wait_until_committed
from tests.fixtures.fake_anthropic_server import FakeAnthropicServer, fake_anthropic_server, text_reply
from tests.fixtures.fake_judge_server import (
    Action,
    FakeJudgeServer,
    RecordedRequest,
    completion,
    fake_judge_server,
    refusal,
    reply,
    status,
)
from tests.unit.factories import tone_rubric

__all__ = ["fake_anthropic_server", "fake_judge_server"]  # fixtures, imported for pytest
pytestmark = [pytest.mark.kafka]

EXPERIMENT = "exp-a"
APP_TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
ATTEMPTS = 2
HTTP_RETRIES = 1
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


def _capture(capture_id: str, question: str | list[dict[str, Any]], *, tools: bool = False) -> Capture:
    request: dict[str, Any] = {
        "model": "gpt-champion",
        "messages": [
            {"role": "system", "content": "You are a friendly support assistant."},
            {"role": "user", "content": question},
        ],
    }
    message: dict[str, Any] = {"role": "assistant", "content": "Happy to help: here is what I found for you."}
    finish = "stop"
    if tools:
        request["tools"] = TOOLS
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                }
            ],
        }
        finish = "tool_calls"
    response = {
        "id": "r",
        "object": "chat.completion",
        "model": "gpt-champion-1",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30},
    }
    return make_capture("chat_completions", request, response, capture_id=capture_id, route="/support")


def _challenger(request: RecordedRequest) -> Action:
    """Answers by the question: refuses one, calls the tool for another, and writes text otherwise."""
    body = request.json()
    question = json.dumps(body["messages"][-1])
    if "refuse me" in question:
        return refusal("I can't help with that.")
    if body.get("tools"):
        answer = completion("Let me look that up.", model="challenger-1", finish_reason="tool_calls")
        answer["choices"][0]["message"]["tool_calls"] = [
            {"id": "call_x", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
        ]
        return Action(body=json.dumps(answer).encode())
    return reply("Thanks for asking! Here is a clear, friendly answer to your question.", model="challenger-1")


def _experiments_file(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "experiments.json"
    path.write_text(
        json.dumps(
            {
                "experiments": [
                    {
                        "id": EXPERIMENT,
                        "share": 1.0,
                        "select": {"routes": ["/support"]},
                        "challenger": {"base_url": base_url, "model": "challenger", "prompt_version": "v2"},
                        "rubric": json.loads(tone_rubric().model_dump_json()),
                    }
                ]
            }
        )
    )
    return path


async def _settings(kafka_bootstrap: str, tmp_path: Path, tag: str, base_url: str) -> Settings:
    return await kafka_run(
        kafka_bootstrap,
        tmp_path,
        tag,
        policy={"audit_share": 0.0},
        shadow={
            "experiments_file": str(_experiments_file(tmp_path, base_url)),
            "attempts": ATTEMPTS,
            "http_retries": HTTP_RETRIES,
            "backoff_s": 0.05,
            "backoff_max_s": 0.2,
            "timeout_s": 5.0,
        },
    )


async def _produce(settings: Settings, captures: list[Capture]) -> list[bytes]:
    raws = [c.model_dump_json().encode() for c in captures]
    producer = AIOKafkaProducer(**client_config(settings.kafka).kwargs(acks="all"))
    await producer.start()
    try:
        for capture, raw in zip(captures, raws, strict=True):
            await producer.send_and_wait(settings.topics.name("captures"), value=raw, key=capture.capture_id.encode())
    finally:
        await producer.stop()
    return raws


async def _read_all(settings: Settings, kind: str, *, want: int, timeout: float) -> list[dict[str, Any]]:
    """Every record on the ``kind`` topic, once there are ``want`` (or after ``timeout``)."""
    found: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    async with from_start(client_config(settings.kafka), [settings.topics.name(kind)]) as reader:
        while time.monotonic() < deadline and len(found) < want:
            for _, batch in (await reader.batches(timeout_ms=300, max_records=1000)).items():
                found += [json.loads(r.value) for r in batch if r.value]
    return found


async def _pair_traces(settings: Settings) -> dict[str, str]:
    """The trace id each pair on the pairs topic was published in (its ``traceparent`` header), by pair id."""
    traces: dict[str, str] = {}
    async with from_start(client_config(settings.kafka), [settings.topics.name("pairs")]) as reader:
        for _, batch in (await reader.batches(timeout_ms=2000, max_records=1000)).items():
            for r in batch:
                parent = dict(r.headers).get("traceparent", b"").decode()
                traces[json.loads(r.value)["pair_id"]] = parent.split("-")[1] if parent else ""
    return traces


def _asks(server: FakeJudgeServer, marker: str) -> int:
    return sum(1 for r in server.requests if marker in json.dumps(r.json()["messages"]))


async def test_captures_become_pairs_then_verdicts_once_and_failures_are_dead_lettered(
    kafka_bootstrap: str, tmp_path: Path, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.set_responder(_challenger)
    settings = await _settings(kafka_bootstrap, tmp_path, "shadow", fake_judge_server.base_url)
    text = _capture("cap-text", "How do I reset my password?").model_copy(
        update={"trace": TraceContext(traceparent=APP_TRACE)}
    )
    tool = _capture("cap-tool", "What's the weather in Oslo?", tools=True)
    image = _capture(
        "cap-image",
        [
            {"type": "text", "text": "What is in this photo?"},
            {"type": "image_url", "image_url": {"url": "https://x/p.png"}},
        ],
    )
    refused = _capture("cap-refused", "Please refuse me politely")
    elsewhere = _capture("cap-elsewhere", "Not in the experiment").model_copy(
        update={"source": text.source.model_copy(update={"route": "/billing"})}
    )
    pair_ids = {shadow_pair_id(c.capture_id, EXPERIMENT) for c in (text, tool)}
    log = tmp_path / "worker.log"
    with running_worker(settings, log):
        raws = await _produce(settings, [text, tool, image, refused, elsewhere])
        outcomes = await collect_outcomes(settings, pair_ids, timeout=120)
        assert outcomes.complete, log.read_text()[-3000:]
        letters = await _read_all(settings, "deadletter", want=2, timeout=60)
        assert await wait_until_committed(settings, 60, kind="captures"), log.read_text()[-3000:]

        # Redelivered: the same captures again. Nothing new is asked or published.
        asked_before = len(fake_judge_server.requests)
        await _produce(settings, [text, tool])
        assert await wait_until_committed(settings, 60, kind="captures"), log.read_text()[-3000:]
        await asyncio.sleep(2.0)
        assert len(fake_judge_server.requests) == asked_before

    for pair_id in pair_ids:
        kind, _ = outcomes.final[pair_id]
        assert kind in {"verdicts", "tiebreak", "review"}, (pair_id, kind)

    pairs = await _read_all(settings, "pairs", want=2, timeout=30)
    assert Counter(p["pair_id"] for p in pairs) == Counter(pair_ids)  # one pair each, none for the failures
    # The pair carries the app's trace (the capture's traceparent), so the judging joins it.
    traces = await _pair_traces(settings)
    assert traces[shadow_pair_id("cap-text", EXPERIMENT)] == APP_TRACE.split("-")[1]
    by_id = {p["pair_id"]: p for p in pairs}
    tool_pair = by_id[shadow_pair_id("cap-tool", EXPERIMENT)]
    champion, challenger = tool_pair["candidates"]
    assert champion["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city":"Oslo"}'}
    assert challenger["output"] == "Let me look that up."
    assert challenger["tool_calls"][0]["function"]["name"] == "get_weather"
    assert tool_pair["metadata"]["experiment_id"] == EXPERIMENT
    assert tool_pair["metadata"]["traffic"] == "shadow"
    assert challenger["source"]["prompt_version"] == "v2"

    # The server's own count: each joining capture asked once; the refusal asked ATTEMPTS times; the image never.
    assert _asks(fake_judge_server, "reset my password") == 1
    assert _asks(fake_judge_server, "weather in Oslo") == 1
    assert _asks(fake_judge_server, "refuse me") == ATTEMPTS
    assert _asks(fake_judge_server, "this photo") == 0
    assert _asks(fake_judge_server, "Not in the experiment") == 0

    shadow_letters = {json.loads(base64.b64decode(x["original"]))["capture_id"]: x for x in letters}
    assert set(shadow_letters) == {"cap-image", "cap-refused"}
    assert shadow_letters["cap-image"]["reason"] == "capture_unseen_image"
    assert shadow_letters["cap-refused"]["reason"] == "challenger_refused"
    for letter in shadow_letters.values():
        assert letter["stage"] == "shadow"
        assert EXPERIMENT in letter["error"]
    assert base64.b64decode(shadow_letters["cap-refused"]["original"]) == raws[3]


async def test_a_challenger_that_stays_down_is_retried_then_the_capture_is_dead_lettered(
    kafka_bootstrap: str, tmp_path: Path, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.set_default(status(503))
    settings = await _settings(kafka_bootstrap, tmp_path, "shadow-down", fake_judge_server.base_url)
    capture = _capture("cap-down", "Is anyone there?")
    log = tmp_path / "worker.log"
    with running_worker(settings, log):
        raws = await _produce(settings, [capture])
        letters = await _read_all(settings, "deadletter", want=1, timeout=90)
    assert len(letters) == 1, log.read_text()[-3000:]
    letter = letters[0]
    assert (letter["stage"], letter["reason"]) == ("shadow", "challenger_unavailable")
    assert base64.b64decode(letter["original"]) == raws[0]
    # Every ask, and every HTTP retry of each: then no more.
    assert len(fake_judge_server.requests) == ATTEMPTS * (HTTP_RETRIES + 1)
    assert not await _read_all(settings, "pairs", want=1, timeout=3)


async def test_live_control_changes_an_experiment_s_share_and_pauses_it(
    kafka_bootstrap: str, tmp_path: Path, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.set_responder(_challenger)
    settings = await _settings(kafka_bootstrap, tmp_path, "shadow-live", fake_judge_server.base_url)
    # The file says 0: no capture would join. The control topic raises it before the worker starts.
    path = tmp_path / "experiments.json"
    data = json.loads(path.read_text())
    data["experiments"][0]["share"] = 0.0
    path.write_text(json.dumps(data))
    await publish_control(settings, "shadow_shares", f"{EXPERIMENT}=1.0", "test")
    first, second = _capture("cap-live-1", "First question?"), _capture("cap-live-2", "Second question?")
    log = tmp_path / "worker.log"
    with running_worker(settings, log):
        await _produce(settings, [first])
        outcomes = await collect_outcomes(settings, {shadow_pair_id("cap-live-1", EXPERIMENT)}, timeout=90)
        assert outcomes.complete, log.read_text()[-3000:]
        await publish_control(settings, "shadow_paused", EXPERIMENT, "test")
        assert "control: shadow_paused" in await wait_for_log(log, "control: shadow_paused", 30)
        await _produce(settings, [second])
        assert await wait_until_committed(settings, 60, kind="captures"), log.read_text()[-3000:]
    assert _asks(fake_judge_server, "First question?") == 1
    assert _asks(fake_judge_server, "Second question?") == 0
    pairs = await _read_all(settings, "pairs", want=2, timeout=5)
    assert [p["pair_id"] for p in pairs] == [shadow_pair_id("cap-live-1", EXPERIMENT)]


async def test_an_anthropic_challenger_is_asked_in_its_own_shape_with_its_key(
    kafka_bootstrap: str, tmp_path: Path, fake_anthropic_server: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_anthropic_server.require_key("sk-ant-challenger")
    fake_anthropic_server.set_default(text_reply("Hello there! Here is a friendly answer."))
    monkeypatch.setenv("SHADOW_TEST_ANTHROPIC_KEY", "sk-ant-challenger")  # the worker inherits it
    settings = await _settings(kafka_bootstrap, tmp_path, "shadow-anthropic", fake_anthropic_server.base_url)
    path = tmp_path / "experiments.json"
    data = json.loads(path.read_text())
    data["experiments"][0]["challenger"].update(api="anthropic", api_key_env="SHADOW_TEST_ANTHROPIC_KEY")
    path.write_text(json.dumps(data))
    capture = _capture("cap-anthropic", "How do I change my address?")
    pair_id = shadow_pair_id(capture.capture_id, EXPERIMENT)
    log = tmp_path / "worker.log"
    with running_worker(settings, log):
        await _produce(settings, [capture])
        outcomes = await collect_outcomes(settings, {pair_id}, timeout=90)
    assert outcomes.complete, log.read_text()[-3000:]
    [request] = fake_anthropic_server.requests
    assert request.path == "/v1/messages"
    sent = request.json()
    assert sent["system"] == "You are a friendly support assistant."
    assert sent["messages"] == [{"role": "user", "content": [{"type": "text", "text": "How do I change my address?"}]}]
    [pair] = await _read_all(settings, "pairs", want=1, timeout=10)
    assert pair["candidates"][1]["output"] == "Hello there! Here is a friendly answer."
    assert "sk-ant-challenger" not in log.read_text()
