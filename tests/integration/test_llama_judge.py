"""The OpenAI-compatible judge against the real llama.cpp server (SmolLM2-135M, docs/design.md §7).

The verdicts of a 135M model mean nothing; these tests prove the wire path and constrained decoding:
the server compiles the reply schema (as the judge adapts it for llama.cpp) into a grammar, so the
reply is JSON of the contract's shape, and the contract's strict validation holds.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pydantic
import pytest

from pairjudge.agents.judge import ChatMessage, JudgeRequest
from pairjudge.agents.logprobs import choice_probabilities
from pairjudge.schemas.replies import ToneStyleReply
from pairjudge.streams.judges.openai import OpenAICompatibleJudge
from tests.fixtures.llama import LlamaServer

# Every llama test on one worker (one llama.cpp server, a session fixture) and alone (serial): the server is
# CPU-bound, and on a machine busy with other tests its replies outlast the judge's read timeout.
pytestmark = [pytest.mark.llama, pytest.mark.slow, pytest.mark.xdist_group("llama"), pytest.mark.serial]

MAX_TOKENS = 400
STYLE_GUIDE = (
    "Warm, plain English. Short sentences. Address the reader as 'you'. "
    "Forbidden terms: 'pursuant', 'kindly', 'leverage'. No jargon."
)
AUDIENCE = "New customers of a mobile banking app; many are reading on a phone, some are not native speakers."
OUTPUT_1 = 'Hi! Thanks for joining. Tap "Accounts" to see your balance. Need help? Message us in the chat, any time.'
OUTPUT_2 = (
    "Pursuant to your enrollment, kindly consult the onboarding documentation in order to leverage "
    "the account balance retrieval functionality."
)

# Seed 000's template, filled in by hand: rendering is the core's job, this test is about the wire.
SEED_000 = """You are an impartial style judge. Your task is to compare two AI-generated outputs and decide which one \
better matches the provided tone and style guidelines. You must choose one output as the winner. Do not declare a tie.

## STYLE GUIDE
{style_guide}

## TARGET AUDIENCE
{audience}

## OUTPUT A
<output_a>
{output_a}
</output_a>

## OUTPUT B
<output_b>
{output_b}
</output_b>

## EVALUATION CRITERIA
Evaluate both outputs on the following dimensions, weighted by importance:
1. Tone Match (40%): How well does the output's tone align with the style guide? Consider formality, warmth, \
authority, and emotional register.
2. Audience Suitability (30%): Is the language, complexity, and framing appropriate for the target audience?
3. Stylistic Consistency (20%): Does the output maintain a consistent voice throughout, or does it drift between styles?
4. Guideline Adherence (10%): Does the output follow any explicit stylistic rules, forbidden terms, or structural \
conventions in the style guide?

## OUTPUT FORMAT
Return a valid JSON object with exactly this structure:
{{
  "winner": "A" | "B",
  "confidence": 0.0-1.0,
  "justification": "A concise paragraph explaining the decision, referencing specific evidence.",
  "dimension_scores": {{
    "tone_match": {{"A": 1-5, "B": 1-5}},
    "audience_suitability": {{"A": 1-5, "B": 1-5}},
    "stylistic_consistency": {{"A": 1-5, "B": 1-5}},
    "guideline_adherence": {{"A": 1-5, "B": 1-5}}
  }},
  "key_differentiator": "The single most decisive factor that determined the winner."
}}

## CONSTRAINTS
- You must choose A or B as the winner. No ties.
- Base your decision only on the style guide and audience description provided.
- Return only the JSON object. No preamble, no markdown fences."""


def tone_request(output_a: str, output_b: str) -> JudgeRequest:
    prompt = SEED_000.format(style_guide=STYLE_GUIDE, audience=AUDIENCE, output_a=output_a, output_b=output_b)
    return JudgeRequest(
        template="tone_style",
        messages=(ChatMessage("user", prompt),),
        response_schema=ToneStyleReply.model_json_schema(by_alias=True),
        schema_name="ToneStyleReply",
    )


def make_judge(server: LlamaServer, **overrides: Any) -> OpenAICompatibleJudge:
    options: dict[str, Any] = {
        "base_url": server.base_url,
        "model": server.model,
        "response_format": "json_object_schema",  # llama.cpp rejects the json_schema form
        "max_tokens": MAX_TOKENS,
        "seed": 42,
        "read_timeout": 180.0,  # the server answers one request at a time; a queued one waits its turn
        "max_retries": 1,
        # Off but where a test asks for them: they cost llama-cpp-python 2-3x the time per reply.
        "logprobs": False,
    }
    options.update(overrides)
    return OpenAICompatibleJudge(**options)


@pytest.fixture
async def llama_judge(llama_server: LlamaServer) -> AsyncIterator[OpenAICompatibleJudge]:
    async with make_judge(llama_server) as judge:
        yield judge


def score_values(data: dict[str, Any]) -> dict[tuple[str, str], Any]:
    return {(dim, pos): value for dim, pair in data["dimension_scores"].items() for pos, value in pair.items()}


async def test_constrained_reply_is_a_valid_tone_style_reply(
    llama_judge: OpenAICompatibleJudge, llama_server: LlamaServer
) -> None:
    started = time.monotonic()
    response = await llama_judge.complete(tone_request(OUTPUT_1, OUTPUT_2))
    wall = time.monotonic() - started
    print(
        f"\nllama answer: latency {response.latency_s:.2f} s (wall {wall:.2f} s), tokens in/out "
        f"{response.input_tokens}/{response.output_tokens}, finish {response.extra['finish_reason']}"
    )

    # Finished by the grammar, not cut off by max_tokens.
    assert response.extra["finish_reason"] == "stop", response.text
    data = json.loads(response.text)  # the grammar guarantees JSON ...
    # ... of the contract's shape: exactly its keys, winner a position, each score an int 1-5 (sent as an enum).
    assert set(data) == set(ToneStyleReply.model_json_schema(by_alias=True)["required"])
    assert data["winner"] in ("A", "B")
    scores = score_values(data)
    assert len(scores) == 8
    assert all(isinstance(v, int) and 1 <= v <= 5 for v in scores.values()), scores
    # And the strict contract itself. (Confidence is the one bound llama.cpp cannot enforce, a float
    # range; with greedy decoding this reply is deterministic, and it is in range.)
    reply = ToneStyleReply.model_validate_json(response.text)
    assert reply.winner == data["winner"]

    assert response.model == llama_server.model  # what the server says answered
    assert response.input_tokens is not None
    assert response.input_tokens > 300  # the whole seed-000 prompt was counted
    assert response.output_tokens is not None
    assert 0 < response.output_tokens <= MAX_TOKENS
    assert 0 < response.latency_s <= wall
    assert response.extra["http_retries"] == 0


async def test_without_enum_narrowing_strict_validation_reports_exactly_the_out_of_range_scores(
    llama_server: LlamaServer,
) -> None:
    # docs/design.md §7: the server ignores minimum/maximum. Sent as plain bounds, scores may leave 1-5; the
    # reply is still JSON of the right shape, and strict validation must flag precisely those scores.
    async with make_judge(llama_server, wire_int_enum_max=None) as judge:
        response = await judge.complete(tone_request(OUTPUT_1, OUTPUT_2))
    data = json.loads(response.text)
    scores = score_values(data)
    assert len(scores) == 8
    assert all(isinstance(v, int) for v in scores.values())
    out_of_range = {key for key, value in scores.items() if not 1 <= value <= 5}
    print(f"\nscores without enum narrowing: {scores}; out of range: {sorted(out_of_range)}")

    try:
        ToneStyleReply.model_validate_json(response.text)
        reported: set[tuple[str, str]] = set()
        other_errors: list[Any] = []
    except pydantic.ValidationError as exc:
        errors = exc.errors()
        reported = {(str(e["loc"][1]), str(e["loc"][2])) for e in errors if e["loc"][0] == "dimension_scores"}
        other_errors = [e for e in errors if e["loc"][0] != "dimension_scores"]
        assert all(
            e["type"] in ("less_than_equal", "greater_than_equal") for e in errors if e["loc"][0] == "dimension_scores"
        )
    assert reported == out_of_range
    confidence_ok = 0.0 <= data["confidence"] <= 1.0
    assert [e["loc"] for e in other_errors] == ([] if confidence_ok else [("confidence",)])


async def test_both_orders_concurrently(llama_judge: OpenAICompatibleJudge) -> None:
    """The core judges AB and BA at once; the server queues the second, both must come back valid."""
    results: dict[str, str] = {}

    async def ask(order: str, request: JudgeRequest) -> None:
        results[order] = (await llama_judge.complete(request)).text

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask, "AB", tone_request(OUTPUT_1, OUTPUT_2))
        tg.start_soon(ask, "BA", tone_request(OUTPUT_2, OUTPUT_1))
    for order, text in results.items():
        data = json.loads(text)
        assert data["winner"] in ("A", "B"), order
        assert all(1 <= v <= 5 for v in score_values(data).values()), order
    assert set(results) == {"AB", "BA"}


async def test_auto_mode_finds_the_json_object_schema_form(
    llama_server: LlamaServer, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/design.md §7: this server rejects the json_schema form. Verified: llama-cpp-python 0.3.36 answers it
    with a request-validation error sent as HTTP 500 (not a 400), which auto mode must take as a refusal,
    not as a fault to retry."""
    async with make_judge(llama_server, response_format="auto", max_retries=3) as judge:
        first = await judge.complete(tone_request(OUTPUT_1, OUTPUT_2))
        assert judge.effective_response_format == "json_object_schema"
        second = await judge.complete(tone_request(OUTPUT_2, OUTPUT_1))

    for response in (first, second):
        assert response.extra["response_format"] == "json_object_schema"
        assert response.extra["response_format_fallback"] is True
        assert response.extra["http_retries"] == 0  # the refusal was not retried as a 500
        assert response.extra["finish_reason"] == "stop", response.text
        # Constrained by the grammar, and valid under the strict contract.
        reply = ToneStyleReply.model_validate_json(response.text)
        assert reply.winner in ("A", "B")
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING and "falling back" in r.getMessage()]
    assert "HTTP 500" in warning.getMessage()


async def test_token_probabilities_of_the_verdict_come_through(llama_server: LlamaServer) -> None:
    """``logprobs`` with ``top_logprobs`` come back from the real server, and the core's reading
    (``agents.logprobs``) gives the winner a probability in (0, 1) equal to the server's own numbers at the
    verdict token, renormalised over A and B."""
    async with make_judge(llama_server, logprobs=True) as judge:
        response = await judge.complete(tone_request(OUTPUT_1, OUTPUT_2))
    items = response.extra["logprobs"]
    assert isinstance(items, list), "the server sent no logprobs.content"
    assert items
    assert "".join(item["token"] for item in items).strip() == response.text.strip()
    winner = json.loads(response.text)["winner"]
    got = choice_probabilities(items, "tone_style", text=response.text)
    assert got is not None
    # The verdict token found independently: the first token after the "winner" key that writes the letter.
    key_end = response.text.index('"winner"') + len('"winner"')
    position, verdict = 0, None
    for item in items:
        if position >= key_end and winner in item["token"]:
            verdict = item
            break
        position += len(item["token"])
    assert verdict is not None
    top = {alt["token"]: alt["logprob"] for alt in verdict["top_logprobs"]}
    other = "B" if winner == "A" else "A"
    mass = {letter: math.exp(top[letter]) if letter in top else 0.0 for letter in (winner, other)}
    print(f"\nllama verdict {winner}: top_logprobs {top}; p = {got}")
    assert 0.0 < got[winner] < 1.0
    assert got[winner] == pytest.approx(mass[winner] / (mass[winner] + mass[other]))
    assert got[winner] + got[other] == pytest.approx(1.0)
