"""From the app's call to a verdict, on Apache Kafka (issue 37's Done means): the official ``openai`` and
``anthropic`` async clients, wrapped by the producer SDK, call scripted champions on 127.0.0.1 with tools; their
captures reach ``pairjudge.captures``; a real worker's shadow stage asks the challenger (a scripted
OpenAI-compatible server) and publishes the pairs; the same worker judges them through the OpenAI-compatible judge
adapter against a third HTTP server, which records every prompt. Checked: both captures end in a final outcome,
and the judge saw both sides' tool calls as data inside their outputs' tags."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from pairjudge.agents.shadow import shadow_pair_id
from pairjudge.agents.untrusted import unmark
from pairjudge.streams.capture import CaptureSink, wrap_anthropic, wrap_openai
from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge_dev.workers import kafka_run, running_worker
from tests.fixtures.fake_anthropic_server import FakeAnthropicServer, fake_anthropic_server
from tests.fixtures.fake_judge_server import FakeJudgeServer, fake_judge_server
from tests.fixtures.provider_streams import Call, anthropic_reply, chat_reply
from tests.integration.test_conversations_kafka import _judge
from tests.integration.test_shadow_kafka import EXPERIMENT, TOOLS, _challenger, _experiments_file, _read_all

__all__ = ["fake_anthropic_server", "fake_judge_server"]  # fixtures, used by name
pytestmark = [pytest.mark.kafka]


@pytest.fixture
def judge_server() -> Iterator[FakeJudgeServer]:
    server = FakeJudgeServer().start()
    server.set_responder(_judge)
    try:
        yield server
    finally:
        server.stop()


async def test_sdk_captures_with_tools_become_pairs_then_verdicts_the_judge_seeing_the_calls(
    kafka_bootstrap: str,
    tmp_path: Path,
    fake_judge_server: FakeJudgeServer,
    fake_anthropic_server: FakeAnthropicServer,
    judge_server: FakeJudgeServer,
) -> None:
    champion = FakeJudgeServer().start()
    try:
        champion.script(chat_reply(None, (Call("call_c1", "get_weather", {"city": "Oslo"}),), finish="tool_calls"))
        fake_anthropic_server.script(
            anthropic_reply("Let me check.", (Call("toolu_1", "get_weather", {"city": "Lima"}),), stop="tool_use")
        )
        fake_judge_server.set_responder(_challenger)  # the challenger
        settings = await kafka_run(
            kafka_bootstrap,
            tmp_path,
            "shadow-sdk",
            judge=judge_server.judge_settings(),
            policy={"audit_share": 0.0},
            shadow={"experiments_file": str(_experiments_file(tmp_path, fake_judge_server.base_url))},
        )
        with CaptureSink(kafka_bootstrap, topic=settings.topics.name("captures"), linger_s=0.01) as sink:
            openai = wrap_openai(AsyncOpenAI(base_url=champion.base_url, api_key="sk-x"), sink, route="/support")
            claude = wrap_anthropic(
                AsyncAnthropic(base_url=fake_anthropic_server.base_url, api_key="sk-y"), sink, route="/support"
            )
            messages: list[dict[str, Any]] = [{"role": "user", "content": "What's the weather in Oslo?"}]
            await openai.chat.completions.create(model="gpt-x", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
            function = TOOLS[0]["function"]
            await claude.messages.create(
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
        captures = await _read_all(settings, "captures", want=2, timeout=30)
        assert len(captures) == 2
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

    # The tone rubric shows no task: each prompt is told apart by the champion's call (Oslo's capture: Oslo, like
    # the challenger's; Lima's: Lima).
    prompts = [unmark(r.json()["messages"][1]["content"]) for r in judge_server.requests]
    assert prompts
    for prompt in prompts:
        # Both outputs' calls, as data in their tags; the challenger's text; never a provider's call id.
        assert prompt.count("<tool_call id=") == 2, prompt[-2000:]
        assert "Let me look that up." in prompt
        assert "call_c1" not in prompt
        assert "toolu_1" not in prompt
    assert any('"city": "Lima"' in p for p in prompts)
    assert any(p.count('"city": "Oslo"') == 2 for p in prompts)
