"""From the app's call through ``pairjudge gateway`` to a verdict, on Apache Kafka (issue 38's Done means): the
official ``openai`` (streamed) and ``anthropic`` clients call scripted champions through two gateways on
127.0.0.1, with tools; the gateways' own sinks put the captures on ``pairjudge.captures``; a real worker's shadow
stage asks the challenger and publishes the pairs, and judges them against a scripted judge. Checked: the apps got
the champions' replies, no key reached the topic, both captures end in a final outcome. (The fault run, Kafka
stopped and started again under the gateway: test_gateway_fault_kafka.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from pairjudge.agents.shadow import shadow_pair_id
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.gateway import running
from pairjudge.streams.gateway.server import bound_port
from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge_dev.workers import kafka_run, running_worker
from tests.fixtures.fake_anthropic_server import FakeAnthropicServer, fake_anthropic_server
from tests.fixtures.fake_judge_server import FakeJudgeServer, fake_judge_server
from tests.fixtures.provider_streams import Call, anthropic_reply, chat_stream
from tests.integration.test_conversations_kafka import _judge
from tests.integration.test_shadow_kafka import EXPERIMENT, TOOLS, _challenger, _experiments_file, _read_all

__all__ = ["fake_anthropic_server", "fake_judge_server"]  # fixtures, used by name
pytestmark = [pytest.mark.kafka]

_ASK: list[Any] = [{"role": "user", "content": "Anything new?"}]
OPENAI_KEY = "sk-gateway-kafka-e1"
ANTHROPIC_KEY = "sk-ant-gateway-kafka-e2"


@pytest.fixture
def judge_server() -> Iterator[FakeJudgeServer]:
    server = FakeJudgeServer().start()
    server.set_responder(_judge)
    try:
        yield server
    finally:
        server.stop()


def _gateway(settings: Settings, upstream: str) -> Settings:
    return settings.model_copy(
        update={"gateway": settings.gateway.model_copy(update={"upstream": upstream, "port": 0, "route": "/support"})}
    )


async def test_calls_through_the_gateway_become_captures_then_pairs_then_verdicts(
    kafka_bootstrap: str,
    tmp_path: Path,
    fake_judge_server: FakeJudgeServer,
    fake_anthropic_server: FakeAnthropicServer,
    judge_server: FakeJudgeServer,
) -> None:
    champion = FakeJudgeServer().start()
    try:
        champion.script(chat_stream(None, (Call("call_c1", "get_weather", {"city": "Oslo"}),), finish="tool_calls"))
        fake_anthropic_server.script(
            anthropic_reply("Let me check.", (Call("toolu_1", "get_weather", {"city": "Lima"}),), stop="tool_use")
        )
        fake_judge_server.set_responder(_challenger)  # the challenger
        settings = await kafka_run(
            kafka_bootstrap,
            tmp_path,
            "gateway",
            judge=judge_server.judge_settings(),
            policy={"audit_share": 0.0},
            shadow={"experiments_file": str(_experiments_file(tmp_path, fake_judge_server.base_url))},
        )
        openai_gateway = _gateway(settings, f"http://127.0.0.1:{champion.port}")
        async with (
            running(openai_gateway) as openai_runner,
            running(_gateway(settings, fake_anthropic_server.base_url)) as anthropic_runner,
        ):
            openai = AsyncOpenAI(base_url=f"http://127.0.0.1:{bound_port(openai_runner)}/v1", api_key=OPENAI_KEY)
            claude = AsyncAnthropic(base_url=f"http://127.0.0.1:{bound_port(anthropic_runner)}", api_key=ANTHROPIC_KEY)
            messages: list[Any] = [{"role": "user", "content": "What's the weather in Oslo?"}]
            tools: list[Any] = TOOLS
            stream = await openai.chat.completions.create(model="gpt-x", messages=messages, tools=tools, stream=True)
            chunks = [c async for c in stream]
            function = TOOLS[0]["function"]
            reply = await claude.messages.create(
                model="claude-x",
                max_tokens=300,
                messages=[{"role": "user", "content": "And in Lima?"}],
                tools=[
                    {
                        "name": function["name"],
                        "description": function["description"],
                        "input_schema": function["parameters"],
                    }
                ],
            )
        # The apps got the champions' replies.
        deltas = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or ()]
        calls = [tc.function.name for tc in deltas if tc.function is not None]
        assert "get_weather" in calls
        assert [b.type for b in reply.content] == ["text", "tool_use"]

        captures = await _read_all(settings, "captures", want=2, timeout=30)
        assert len(captures) == 2
        for capture in captures:
            text = json.dumps(capture)
            assert OPENAI_KEY not in text
            assert ANTHROPIC_KEY not in text
            assert (capture["source"]["route"], capture["source"]["producer"]) == ("/support", "gateway")
        streamed = next(c for c in captures if c["source"]["api"] == "chat_completions")
        assert streamed["response"]["streamed"] is True
        assert streamed["response"]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
        pair_ids = {shadow_pair_id(c["capture_id"], EXPERIMENT) for c in captures}
        log = tmp_path / "worker.log"
        with running_worker(settings, log):
            outcomes = await collect_outcomes(settings, pair_ids, timeout=120)
        assert outcomes.complete, log.read_text()[-3000:]
    finally:
        champion.stop()
    for pair_id in pair_ids:
        kind, _ = outcomes.final[pair_id]
        assert kind in {"verdicts", "tiebreak", "review"}, (pair_id, kind)


def test_the_gateway_bench_runs_tiny() -> None:
    """``bench.gateway`` as a user runs it, tiny, so it cannot rot: exit 0 means no call through the gateway
    failed, Kafka down (a closed port) included."""
    from tests.integration.test_bench_smoke import run_bench

    output = run_bench(
        ["bench.gateway", "--seconds", "1", "--rate", "20", "--rss-seconds", "1", "--concurrency", "4"], timeout=300
    )
    assert "client-visible errors through the gateway: 0" in output, output[-3000:]
    assert "gateway per core" in output, output[-3000:]
