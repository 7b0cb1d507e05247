"""A judge that refuses requests, over real HTTP through the worker's judge stack (cache -> breaker ->
prices -> adapter): every pair ends as review "judge_rejected" after one request per ordering (no
retries), the circuit breaker never counts a refusal as an outage, nothing is cached, and
The decision's disposition (``agents.disposition``) hands the edge a scrubbed detail with the status.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pairjudge.agents.core import judge_pair
from pairjudge.agents.disposition import DeadLetterPair
from pairjudge.agents.errors import JudgeRejected, JudgeUnavailable
from pairjudge.agents.policy import Policy
from pairjudge.agents.prompts import render_primary
from pairjudge.agents.untrusted import unmark
from pairjudge.schemas import PairVerdict, ReviewRequest
from pairjudge.schemas.rubric import ToneStyleRubric
from pairjudge.streams.config.settings import JudgeSettings
from pairjudge.streams.judges.factory import JudgeStack, build_judge_stack
from pairjudge.streams.judges.http import JudgeAuthError
from tests.fixtures.fake_judge_server import (
    CONTEXT_LENGTH_EXCEEDED,
    Action,
    FakeJudgeServer,
    RecordedRequest,
    fake_judge_server,
    openai_error,
    reply,
    status,
)
from tests.unit.factories import FIRST_OUTPUT, SECOND_OUTPUT, make_pair, tone_reply

__all__ = ["fake_judge_server"]

KEY = "sk-test-rejected-DO-NOT-LEAK-9a8b7c"


@pytest.fixture
async def stack(fake_judge_server: FakeJudgeServer, tmp_path: Path) -> AsyncIterator[JudgeStack]:
    settings = JudgeSettings(
        kind="openai",
        base_url=fake_judge_server.base_url,
        model="fake-model",
        api_key=KEY,
        response_format="none",
        max_retries=3,  # a refusal must not use any of them
        breaker_failures=2,
        breaker_cooldown_s=30.0,
        cache_dir=tmp_path / "cache",
    )
    built = build_judge_stack(settings)
    yield built
    await built.aclose()


def consistent(request: RecordedRequest) -> Action:
    user = unmark(request.json()["messages"][-1]["content"])  # the outputs are datamarked (Policy.datamark)
    return reply(tone_reply("A" if user.index(FIRST_OUTPUT) < user.index(SECOND_OUTPUT) else "B"))


async def test_a_bad_key_gives_judge_rejected_without_retries_or_opening_the_breaker(
    stack: JudgeStack, fake_judge_server: FakeJudgeServer
) -> None:
    echo = openai_error(401, f"Incorrect API key provided: {KEY}.", err="invalid_api_key")
    fake_judge_server.set_default(echo)
    assert stack.breaker is not None
    for index in range(5):  # well past breaker_failures=2
        decision = await judge_pair(make_pair(pair_id=f"pair-{index}"), stack.judge, Policy())
        out = decision.outcome
        assert isinstance(out, ReviewRequest)
        assert out.reason == "judge_rejected"
        assert stack.breaker.state == "closed"
        assert stack.breaker.consecutive_failures == 0
    assert fake_judge_server.request_count == 10  # one request per ordering: nothing retried or re-asked
    assert isinstance(decision.disposition, DeadLetterPair)
    detail = decision.disposition.detail
    assert "rejected the request: HTTP 401: invalid_api_key: Incorrect API key provided: [REDACTED]" in detail
    assert f"fake-model@127.0.0.1:{fake_judge_server.port}" in detail
    assert KEY[:8] not in detail
    assert KEY[:8] not in json.dumps(out.model_dump(mode="json"))
    assert decision.disposition.status == 401

    pair = make_pair()
    assert isinstance(pair.rubric, ToneStyleRubric)
    with pytest.raises(JudgeAuthError) as info:
        await stack.judge.complete(render_primary(pair, pair.rubric, "AB"))
    assert (info.value.status, info.value.retriable) == (401, False)

    # Control: the same breaker does open on outages, after two.
    fake_judge_server.set_default(status(503, retry_after_ms="1"))  # retried quickly, then an outage
    for _ in range(2):
        with pytest.raises(JudgeUnavailable):
            await stack.judge.complete(render_primary(pair, pair.rubric, "BA"))
    assert stack.breaker.state == "open"


async def test_a_prompt_over_the_context_length_is_rejected_not_an_auth_error(
    stack: JudgeStack, fake_judge_server: FakeJudgeServer
) -> None:
    pair = make_pair()
    fake_judge_server.set_default(CONTEXT_LENGTH_EXCEEDED)
    decision = await judge_pair(pair, stack.judge, Policy())
    assert isinstance(decision.outcome, ReviewRequest)
    assert decision.outcome.reason == "judge_rejected"
    assert isinstance(decision.disposition, DeadLetterPair)
    assert decision.disposition.status == 400
    assert "maximum context length is 4096 tokens" in decision.disposition.detail
    assert isinstance(pair.rubric, ToneStyleRubric)
    with pytest.raises(JudgeRejected) as info:
        await stack.judge.complete(render_primary(pair, pair.rubric, "AB"))
    assert not isinstance(info.value, JudgeAuthError)


async def test_a_refusal_is_never_cached(stack: JudgeStack, fake_judge_server: FakeJudgeServer) -> None:
    pair = make_pair()
    fake_judge_server.set_default(status(401))
    first = await judge_pair(pair, stack.judge, Policy())
    assert isinstance(first.outcome, ReviewRequest)
    assert first.outcome.reason == "judge_rejected"
    fake_judge_server.set_responder(consistent)  # the key is fixed: both orders prefer the first output
    second = await judge_pair(pair, stack.judge, Policy())
    assert isinstance(second.outcome, PairVerdict)
    assert fake_judge_server.request_count == 4  # asked again, not served a stored refusal
