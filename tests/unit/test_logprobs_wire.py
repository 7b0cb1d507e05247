"""Token probabilities over the wire: the OpenAI-compatible judge asks a real HTTP server on 127.0.0.1 for
``logprobs``, the core reads them into each order's probabilities and the decision's confidence, and a server
that refuses the parameter costs one refused request, never a judgement."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from openai import AsyncOpenAI

from pairjudge.agents.audit import record_for
from pairjudge.agents.core import judge_pair
from pairjudge.agents.logprobs import choice_probabilities
from pairjudge.agents.policy import Policy
from pairjudge.schemas.events import PairVerdict, ReviewRequest, TieBreakRequest
from pairjudge.streams.judges.openai import OpenAICompatibleJudge
from tests.fixtures.fake_judge_server import (
    Action,
    FakeJudgeServer,
    RecordedRequest,
    completion,
    fake_judge_server,
    openai_error,
)
from tests.unit.factories import FIRST_ID, FIRST_OUTPUT, SECOND_OUTPUT, make_pair

__all__ = ["fake_judge_server"]  # a fixture, imported for pytest

_TOKEN = re.compile(r"\w+|\s+|[^\w\s]+")

#: The judge's probability for whichever letter the first candidate sits at, by the position it sits at.
FIRST_WINS = {"A": 0.8, "B": 0.7}


def tone_reply(winner: str, confidence: float) -> str:
    score = {"A": 4, "B": 3}
    return json.dumps(
        {
            "winner": winner,
            "confidence": confidence,
            "justification": "plain and friendly",
            "dimension_scores": {
                "tone_match": score,
                "audience_suitability": score,
                "stylistic_consistency": score,
                "guideline_adherence": score,
            },
            "key_differentiator": "friendly wording",
        }
    )


def with_logprobs(content: str, winner: str, p_winner: float) -> dict[str, Any]:
    """A chat completion whose ``logprobs.content`` spells ``content``, certain except at the verdict letter."""
    other = "B" if winner == "A" else "A"
    tokens = _TOKEN.findall(content)
    at = next(i for i, tok in enumerate(tokens) if tok == winner and tokens[i - 1] == '"' and "winner" in tokens[i - 4])
    items = []
    for i, tok in enumerate(tokens):
        top = [(tok, 0.0)] if i != at else [(winner, math.log(p_winner)), (other, math.log(1 - p_winner)), ("C", -9.0)]
        items.append(
            {
                "token": tok,
                "logprob": top[0][1],
                "bytes": list(tok.encode()),
                "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top],
            }
        )
    body = completion(content)
    body["choices"][0]["logprobs"] = {"content": items, "refusal": None}
    return body


def first_wins(request: RecordedRequest) -> Action:
    """Both orders prefer the pair's first candidate, at the position it is shown in, stated 0.95; with token
    probabilities when the request asks for them, as a real server answers."""
    sent = request.json()
    prompt = sent["messages"][-1]["content"]
    letter = "A" if prompt.index(FIRST_OUTPUT) < prompt.index(SECOND_OUTPUT) else "B"
    content = tone_reply(letter, 0.95)
    body = with_logprobs(content, letter, FIRST_WINS[letter]) if sent.get("logprobs") else completion(content)
    return Action(body=json.dumps(body).encode())


@pytest.fixture
async def make_judge(fake_judge_server: FakeJudgeServer) -> AsyncIterator[Callable[..., OpenAICompatibleJudge]]:
    made: list[OpenAICompatibleJudge] = []

    def factory(**overrides: Any) -> OpenAICompatibleJudge:
        options: dict[str, Any] = {"base_url": fake_judge_server.base_url, "model": "fake-model", "max_retries": 0}
        judge = OpenAICompatibleJudge(**(options | overrides))
        made.append(judge)
        return judge

    yield factory
    for judge in made:
        await judge.aclose()


#: Datamarking off so the server can find the outputs in the prompt (it only decides where each one sits).
POLICY = Policy(datamark=False, audit_share=0.0, audit_uncertain_share=0.0)


async def test_token_probabilities_decide_and_are_recorded_beside_the_stated_confidence(
    make_judge: Callable[..., OpenAICompatibleJudge], fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.set_responder(first_wins)
    pair = make_pair()
    decision = await judge_pair(pair, make_judge(), POLICY)
    sent = [r.json() for r in fake_judge_server.requests]
    assert [(s["logprobs"], s["top_logprobs"]) for s in sent] == [(True, 5), (True, 5)]
    outcome = decision.outcome
    assert isinstance(outcome, PairVerdict)
    assert outcome.winner == FIRST_ID
    ab, ba = outcome.orderings
    assert ab.token_probabilities is not None
    assert ba.token_probabilities is not None
    # The server's numbers, renormalised over A and B (the "C" alternative left out), mapped back to candidates.
    assert ab.token_probabilities[FIRST_ID] == pytest.approx(0.8)
    assert ba.token_probabilities[FIRST_ID] == pytest.approx(0.7)
    assert outcome.confidence_source == "token_probability"
    assert outcome.confidence == pytest.approx(0.75)
    assert (outcome.token_confidence, outcome.stated_confidence) == pytest.approx((0.75, 0.95))
    record = record_for(decision, pair)
    assert record is not None
    assert (record.confidence, record.token_confidence, record.stated) == pytest.approx((0.75, 0.75, 0.95))
    # And the threshold reads it: at 0.8 the token probability sends the pair to the tie-break, the stated
    # confidence would have decided it.
    strict = await judge_pair(pair, make_judge(), Policy(datamark=False, primary_confidence_threshold=0.8))
    assert isinstance(strict.outcome, TieBreakRequest)
    assert strict.outcome.reason == "low_confidence"
    stated = Policy(datamark=False, primary_confidence_threshold=0.8, confidence_source="stated")
    as_stated = await judge_pair(pair, make_judge(), stated)
    assert isinstance(as_stated.outcome, PairVerdict)
    assert as_stated.outcome.confidence == pytest.approx(0.95)
    assert as_stated.outcome.confidence_source == "stated"
    assert as_stated.outcome.token_confidence == pytest.approx(0.75)


async def test_a_server_that_refuses_logprobs_is_asked_without_them_once_and_for_good(
    make_judge: Callable[..., OpenAICompatibleJudge], fake_judge_server: FakeJudgeServer
) -> None:
    refused = openai_error(400, "logprobs is not supported by this model", param="logprobs")

    def responder(request: RecordedRequest) -> Action:
        if "logprobs" in request.json():
            return refused
        return first_wins(request)

    fake_judge_server.set_responder(responder)
    judge = make_judge()
    decision = await judge_pair(make_pair(), judge, POLICY)
    assert isinstance(decision.outcome, PairVerdict)
    assert decision.outcome.confidence_source == "stated"
    assert decision.outcome.confidence == pytest.approx(0.95)
    assert decision.outcome.token_confidence is None
    # Both orders go out at once, so both may meet the refusal (like a refused response_format); each is sent
    # again without logprobs, and the judge asks for them no more.
    asked = sum("logprobs" in r.json() for r in fake_judge_server.requests)
    assert judge.logprobs is False
    assert 1 <= judge.logprobs_refusals == asked <= 2
    assert len(fake_judge_server.requests) == 2 + asked
    await judge_pair(make_pair(), judge, POLICY)
    assert judge.logprobs_refusals == asked
    assert len(fake_judge_server.requests) == 4 + asked


async def test_logprobs_switched_off_are_not_asked_for(
    make_judge: Callable[..., OpenAICompatibleJudge], fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.set_responder(first_wins)
    decision = await judge_pair(make_pair(), make_judge(logprobs=False, top_logprobs=3), POLICY)
    assert all("logprobs" not in r.json() and "top_logprobs" not in r.json() for r in fake_judge_server.requests)
    assert isinstance(decision.outcome, PairVerdict)


async def test_the_official_sdk_reads_the_same_reply_shape(fake_judge_server: FakeJudgeServer) -> None:
    """The scripted reply is a chat completion the official ``openai`` SDK parses, and what it parses gives the
    same probabilities as the raw JSON the judge passes through."""
    content = tone_reply("B", 0.9)
    fake_judge_server.set_default(Action(body=json.dumps(with_logprobs(content, "B", 0.6)).encode()))
    async with AsyncOpenAI(base_url=fake_judge_server.base_url, api_key="unused", max_retries=0) as client:
        reply = await client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "?"}], logprobs=True, top_logprobs=5
        )
    choice = reply.choices[0]
    assert choice.logprobs is not None
    assert choice.logprobs.content is not None
    content_items = [item.model_dump() for item in choice.logprobs.content]
    got = choice_probabilities(content_items, "tone_style", text=choice.message.content)
    assert got == pytest.approx({"A": 0.4, "B": 0.6})
    assert fake_judge_server.requests[0].json()["top_logprobs"] == 5


async def test_the_risk_levels_read_the_token_probability(
    make_judge: Callable[..., OpenAICompatibleJudge], fake_judge_server: FakeJudgeServer
) -> None:
    """A high-risk pair needs 0.85 and goes to a person below it: at a token confidence of 0.75 it does, though
    the judge says 0.95; deciding on the stated number, it is a verdict."""
    fake_judge_server.set_responder(first_wins)
    pair = make_pair(risk_level="high")
    held = await judge_pair(pair, make_judge(), POLICY)
    assert isinstance(held.outcome, ReviewRequest)
    assert held.outcome.reason == "risk_review"
    stated = await judge_pair(pair, make_judge(), dataclasses.replace(POLICY, confidence_source="stated"))
    assert isinstance(stated.outcome, PairVerdict)
    assert stated.outcome.confidence == pytest.approx(0.95)
