"""Canary rounds through a cached HTTP judge (seed 000): every round is judged anew by the judge itself.

A canary round re-sends the same labelled pairs under fresh ids, so every round renders the same prompts
and would otherwise be answered from the response cache. The rounds exist to watch the judge's scores
over time (a provider re-pointing a model alias must show in ``canary_accuracy``), so a canary's call
always reaches the judge, and its reply is not stored: production traffic keeps the replies it was
served. Counted at a real HTTP judge server on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pairjudge.agents.core import judge_pair
from pairjudge.agents.policy import Policy
from pairjudge.agents.untrusted import unmark
from pairjudge.schemas import CandidatePair, KnownLabel, PairMetadata, PairVerdict
from pairjudge.streams.audit.canary import round_events, round_stamp
from pairjudge.streams.config.settings import JudgeSettings
from pairjudge.streams.judges.factory import JudgeStack, build_judge_stack
from tests.fixtures.fake_judge_server import (
    Action,
    FakeJudgeServer,
    RecordedRequest,
    Responder,
    fake_judge_server,
    reply,
)
from tests.unit.factories import FIRST_ID, FIRST_OUTPUT, SECOND_ID, SECOND_OUTPUT, make_pair, tone_reply

__all__ = ["fake_judge_server"]  # a fixture, imported for pytest

ROUNDS = 3


@pytest.fixture
async def stack(fake_judge_server: FakeJudgeServer, tmp_path: Path) -> AsyncIterator[JudgeStack]:
    settings = JudgeSettings(
        kind="openai",
        base_url=fake_judge_server.base_url,
        model="fake-model",
        response_format="none",
        max_retries=0,
        cache_enabled=True,
        cache_dir=tmp_path / "cache",
    )
    built = build_judge_stack(settings)
    assert built.caching is not None
    yield built
    await built.aclose()


def prefers(candidate_output: str) -> Responder:
    """A judge that names whichever position ``candidate_output`` is shown in: a consistent pick."""

    def respond(request: RecordedRequest) -> Action:
        user = unmark(request.json()["messages"][-1]["content"])  # the outputs are datamarked (Policy.datamark)
        other = SECOND_OUTPUT if candidate_output == FIRST_OUTPUT else FIRST_OUTPUT
        return reply(tone_reply("A" if user.index(candidate_output) < user.index(other) else "B"))

    return respond


def canary_round(source: CandidatePair, hour: int) -> CandidatePair:
    """One round's copy of ``source``, exactly as ``pairjudge canary send`` puts it on the pairs topic."""
    (event,) = round_events([source], round_stamp(datetime(2026, 12, 6, hour, tzinfo=UTC)))
    return CandidatePair.model_validate_json(event)


async def test_every_canary_round_calls_the_judge_whatever_the_cache_holds(
    stack: JudgeStack, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.set_responder(prefers(FIRST_OUTPUT))
    source = make_pair(human_label=KnownLabel(winner=FIRST_ID))
    winners = []
    for n in range(ROUNDS):
        pair = canary_round(source, 10 + n)
        assert pair.metadata.traffic == "canary"
        if n == ROUNDS - 1:
            # The provider re-points the model alias: the last round must see the new model's answer.
            fake_judge_server.set_responder(prefers(SECOND_OUTPUT))
        outcome = (await judge_pair(pair, stack.judge, Policy())).outcome
        assert isinstance(outcome, PairVerdict), outcome
        assert [o.cache_hits for o in outcome.orderings] == [0, 0], f"round {n + 1} was served from the cache"
        assert fake_judge_server.request_count == 2 * (n + 1), f"round {n + 1} did not call the judge"
        winners.append(outcome.winner)
    assert winners == [FIRST_ID, FIRST_ID, SECOND_ID]  # the drift shows in the canary's answers


async def test_a_canary_neither_reads_nor_overwrites_what_production_traffic_cached(
    stack: JudgeStack, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.set_responder(prefers(FIRST_OUTPUT))
    production = make_pair(metadata=PairMetadata(traffic="production"))
    first = (await judge_pair(production, stack.judge, Policy())).outcome
    assert isinstance(first, PairVerdict)
    assert fake_judge_server.request_count == 2
    assert stack.cache is not None
    stored = len(stack.cache)

    # The same pair as a canary, after the model behind the alias changed: judged by the new model...
    fake_judge_server.set_responder(prefers(SECOND_OUTPUT))
    canary = (await judge_pair(canary_round(production, 10), stack.judge, Policy())).outcome
    assert isinstance(canary, PairVerdict)
    assert canary.winner == SECOND_ID
    assert fake_judge_server.request_count == 4

    # ...while production's redelivery is still served what it was first given, and nothing new was stored.
    again = (await judge_pair(production, stack.judge, Policy())).outcome
    assert isinstance(again, PairVerdict)
    assert (again.winner, [o.cache_hits for o in again.orderings]) == (first.winner, [1, 1])
    assert fake_judge_server.request_count == 4
    assert len(stack.cache) == stored
    assert stack.caching is not None
    assert stack.caching.stats.bypassed == 2
