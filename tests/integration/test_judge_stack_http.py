"""The factory's judge stack (cache -> breaker -> pricing -> OpenAI-compatible adapter) over real HTTP.

Against the tests' own local server: the breaker stops traffic to a server that keeps failing, a cached
reply is served without a request even while the breaker is open, and replies are priced from the
usage the server reports for the model it says answered.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pairjudge.agents.core import judge_pair
from pairjudge.agents.errors import JudgeUnavailable
from pairjudge.agents.policy import Policy
from pairjudge.agents.prompts import render_primary
from pairjudge.agents.untrusted import unmark
from pairjudge.schemas import PairVerdict, ReviewRequest, RubricRef
from pairjudge.streams.config.settings import JudgeSettings
from pairjudge.streams.judges.breaker import CircuitOpen
from pairjudge.streams.judges.cost import ModelPrice
from pairjudge.streams.judges.factory import JudgeStack, build_judge_stack
from tests.fixtures.fake_judge_server import (
    Action,
    FakeJudgeServer,
    RecordedRequest,
    fake_judge_server,
    reply,
    status,
)
from tests.unit.factories import FIRST_OUTPUT, SECOND_OUTPUT, make_pair, tone_reply

__all__ = ["fake_judge_server"]

ANSWERED = "fake-model-2024-01-01"  # what the fake server says answered
PRICE = ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0)


@pytest.fixture
async def stack(fake_judge_server: FakeJudgeServer, tmp_path: Path) -> AsyncIterator[JudgeStack]:
    settings = JudgeSettings(
        kind="openai",
        base_url=fake_judge_server.base_url,
        model="fake-model",
        response_format="none",
        max_retries=0,  # one attempt per call: each 503 is one outage for the breaker
        breaker_failures=2,
        breaker_cooldown_s=30.0,
        cache_dir=tmp_path / "cache",
        prices={ANSWERED: PRICE},
    )
    built = build_judge_stack(settings)
    yield built
    await built.aclose()


async def test_replies_are_priced_from_reported_usage_and_served_again_from_the_cache(
    stack: JudgeStack, fake_judge_server: FakeJudgeServer
) -> None:
    pair = make_pair()

    def per_order(request: RecordedRequest) -> Action:
        # Both orders prefer the pair's first candidate, wherever it sits: a consistent verdict.
        user = unmark(request.json()["messages"][-1]["content"])  # the outputs are datamarked (Policy.datamark)
        first_shown_first = user.index(FIRST_OUTPUT) < user.index(SECOND_OUTPUT)
        return reply(tone_reply("A" if first_shown_first else "B"), prompt_tokens=1000, completion_tokens=250)

    fake_judge_server.set_responder(per_order)
    first = (await judge_pair(pair, stack.judge, Policy())).outcome
    assert fake_judge_server.request_count == 2
    assert isinstance(first, PairVerdict)
    assert first.cost_usd == pytest.approx(2 * (1000 * 2.0 + 250 * 8.0) / 1e6)
    per_call = (1000 * 2.0 + 250 * 8.0) / 1e6
    assert [o.cost_usd for o in first.orderings] == [pytest.approx(per_call)] * 2
    assert [o.answered_by_model for o in first.orderings] == [ANSWERED] * 2

    again = (await judge_pair(pair, stack.judge, Policy())).outcome
    assert fake_judge_server.request_count == 2  # both orderings came from the cache
    assert isinstance(again, PairVerdict)
    assert [o.cache_hits for o in again.orderings] == [1, 1]
    assert [o.cost_usd for o in again.orderings] == [0.0, 0.0]
    assert (again.winner, again.cost_usd) == (first.winner, 0.0)


async def test_the_breaker_stops_calling_a_failing_server_but_cached_replies_still_flow(
    stack: JudgeStack, fake_judge_server: FakeJudgeServer
) -> None:
    pair = make_pair()
    assert not isinstance(pair.rubric, RubricRef)
    cached_request = render_primary(pair, pair.rubric, "AB")
    other_request = render_primary(pair, pair.rubric, "BA")
    fake_judge_server.script(reply())
    await stack.judge.complete(cached_request)  # stored
    assert fake_judge_server.request_count == 1

    fake_judge_server.set_default(status(503))
    for _ in range(2):
        with pytest.raises(JudgeUnavailable):
            await stack.judge.complete(other_request)
    assert stack.breaker is not None
    assert stack.breaker.is_open
    assert fake_judge_server.request_count == 3

    with pytest.raises(CircuitOpen):
        await stack.judge.complete(other_request)
    assert fake_judge_server.request_count == 3  # refused without a request

    served = await stack.judge.complete(cached_request)  # the cache is outside the breaker
    assert served.cached
    assert fake_judge_server.request_count == 3

    # A whole pair while the judge is down: the uncached ordering fails fast and the pair goes to
    # review as judge_unavailable, with no request sent.
    out = (await judge_pair(pair, stack.judge, Policy())).outcome
    assert isinstance(out, ReviewRequest)
    assert out.reason == "judge_unavailable"
    assert fake_judge_server.request_count == 3
