"""The Anthropic Messages judge against a real local HTTP server speaking the Messages wire format.

Each failure mode asserts what the core relies on: what is retried (and how often), what is raised
(``JudgeUnavailable`` vs ``JudgeRejected``), and what is handed back as text for the core's strict
validator. The last tests run the real judging core over this judge, end to end.
"""

from __future__ import annotations

import json
import re
import time
import traceback
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pydantic
import pytest
from pydantic import SecretStr

from pairjudge.agents.core import judge_pair
from pairjudge.agents.errors import InvalidReply, JudgeRejected, JudgeUnavailable
from pairjudge.agents.judge import ChatMessage, Judge, JudgeIdentity, JudgeRequest
from pairjudge.agents.pair_checks import resolve_rubric
from pairjudge.agents.policy import Policy
from pairjudge.agents.prompt_fill import SYSTEM_PROMPT
from pairjudge.agents.prompts import REASK_INSTRUCTION, render_primary
from pairjudge.agents.untrusted import unmark
from pairjudge.agents.validation import parse_reply
from pairjudge.schemas.events import PairVerdict, ReviewRequest
from pairjudge.schemas.replies import ToneStyleReply
from pairjudge.streams.config.settings import JudgeSettings
from pairjudge.streams.judges.anthropic import DEFAULT_TOOL_DESCRIPTION, AnthropicJudge, tool_name_for
from pairjudge.streams.judges.factory import build_inner_judge
from tests.fixtures.fake_anthropic_server import (
    DEFAULT_VERDICT,
    FAKE_MODEL,
    REQUEST_ID,
    TONE_TOOL,
    FakeAnthropicServer,
    cut_json,
    error,
    fake_anthropic_server,
    huge,
    message,
    overloaded,
    respond,
    text_block,
    text_reply,
    tool_block,
    tool_reply,
    truncated,
    usage,
)
from tests.fixtures.fake_judge_server import Action, RecordedRequest, closed_port, hang
from tests.unit.factories import FIRST_ID, FIRST_OUTPUT, make_pair, tone_reply

__all__ = ["closed_port", "fake_anthropic_server"]  # fixtures, imported for pytest

API_KEY = "sk-ant-test-DO-NOT-LEAK-9d2e7b"

JudgeFactory = Callable[..., AnthropicJudge]


def make_request() -> JudgeRequest:
    """The real first ask for the factory pair, AB ordering, as the core renders it."""
    pair = make_pair()
    return render_primary(pair, resolve_rubric(pair, {}), "AB")


@pytest.fixture
async def make_judge(fake_anthropic_server: FakeAnthropicServer) -> AsyncIterator[JudgeFactory]:
    """Judges against the fake server with fast backoff; closed at the end of the test."""
    made: list[AnthropicJudge] = []

    def factory(**overrides: Any) -> AnthropicJudge:
        options: dict[str, Any] = {
            "base_url": fake_anthropic_server.base_url,
            "model": "claude-test",
            "api_key": SecretStr(API_KEY),
            "max_retries": 2,
            "backoff_initial": 0.01,
            "backoff_max": 0.05,
            "connect_timeout": 2.0,
            "read_timeout": 5.0,
        }
        options.update(overrides)
        judge = AnthropicJudge(**options)
        made.append(judge)
        return judge

    yield factory
    for judge in made:
        await judge.aclose()


def assert_no_key(exc: BaseException) -> None:
    rendered = "".join(traceback.format_exception(exc))
    assert API_KEY not in rendered
    assert API_KEY not in repr(exc)
    assert API_KEY not in str(exc)


# --- the good path ------------------------------------------------------------------------------


async def test_tool_use_reply_and_exact_request(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer
) -> None:
    judge = make_judge(max_tokens=300)
    assert isinstance(judge, Judge)
    assert judge.identity == JudgeIdentity(provider="anthropic", model="claude-test", temperature=0.0)
    fake_anthropic_server.script(
        tool_reply(DEFAULT_VERDICT, usage_=usage(input_tokens=40, output_tokens=77, cache_creation=1500, cache_read=0))
    )
    request = make_request()

    response = await judge.complete(request)

    # The tool input, serialised, is the reply text; the core's own strict validator accepts it.
    assert json.loads(response.text) == DEFAULT_VERDICT
    parse_reply(response.text, ToneStyleReply)
    assert response.model == FAKE_MODEL  # what the server says answered, not what we asked for
    assert response.input_tokens == 40 + 1500  # cached tokens are input tokens too ...
    assert response.output_tokens == 77
    assert response.extra["cache_creation_input_tokens"] == 1500  # ... and the split is kept for cost
    assert response.extra["cache_read_input_tokens"] == 0
    assert response.extra["uncached_input_tokens"] == 40
    assert response.extra["stop_reason"] == "tool_use"
    assert response.extra["tool_use"] is True
    assert response.extra["request_id"] == REQUEST_ID
    assert response.extra["http_retries"] == 0
    assert response.latency_s > 0

    [sent] = fake_anthropic_server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert sent.headers["x-api-key"] == API_KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["content-type"] == "application/json"
    assert "authorization" not in sent.headers  # the key goes in one header only
    system, user = request.messages
    assert system.content == SYSTEM_PROMPT
    assert sent.json() == {
        "model": "claude-test",
        "max_tokens": 300,
        "temperature": 0.0,
        "system": [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": user.content}],
        "tools": [
            {
                "name": "tone_style_verdict",
                "description": DEFAULT_TOOL_DESCRIPTION,
                "input_schema": request.response_schema,
            }
        ],
        "tool_choice": {"type": "tool", "name": "tone_style_verdict", "disable_parallel_tool_use": True},
    }
    # The schema keeps its $defs/$ref: the API takes them, and dropping them would loosen the contract.
    assert "$defs" in sent.json()["tools"][0]["input_schema"]


async def test_system_messages_are_hoisted_and_the_conversation_kept(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer
) -> None:
    request = JudgeRequest(
        template="tone_style",
        messages=(
            ChatMessage("system", "Stable rules."),
            ChatMessage("system", "   "),  # empty text blocks are rejected by the API: left out
            ChatMessage("system", "More stable rules."),
            ChatMessage("user", "Compare A and B."),
            ChatMessage("assistant", '{"winner": "C"}'),
            ChatMessage("user", "Your previous reply was rejected."),
        ),
        response_schema={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            **ToneStyleReply.model_json_schema(),
        },
        schema_name="tone style/verdict v2",
        attempt=1,
    )
    # A base URL with the /v1 prefix (as OpenAI-style settings have it) means the same endpoint.
    judge = make_judge(base_url=fake_anthropic_server.base_url + "/v1/")
    await judge.complete(request)
    payload = fake_anthropic_server.requests[-1].json()
    assert fake_anthropic_server.requests[-1].path == "/v1/messages"
    assert payload["system"] == [
        {"type": "text", "text": "Stable rules."},
        {"type": "text", "text": "More stable rules.", "cache_control": {"type": "ephemeral"}},
    ]
    assert payload["messages"] == [
        {"role": "user", "content": "Compare A and B."},
        {"role": "assistant", "content": '{"winner": "C"}'},
        {"role": "user", "content": "Your previous reply was rejected."},
    ]
    name = payload["tools"][0]["name"]
    assert name == tool_name_for("tone style/verdict v2") == "tone_style_verdict_v2"
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name)
    assert payload["tool_choice"]["name"] == name
    assert "$schema" not in payload["tools"][0]["input_schema"]
    assert payload["tools"][0]["input_schema"]["type"] == "object"

    # Caching can be switched off; the system prompt is then sent without a breakpoint.
    await make_judge(cache_system_prompt=False).complete(request)
    assert all("cache_control" not in block for block in fake_anthropic_server.requests[-1].json()["system"])


async def test_cache_reads_count_as_input(make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer) -> None:
    fake_anthropic_server.script(
        tool_reply(usage_=usage(input_tokens=35, cache_creation=0, cache_read=1500)),
        # A gateway that reports no cache fields at all.
        tool_reply(usage_=usage(input_tokens=900, cache_creation=None, cache_read=None)),
    )
    judge = make_judge()
    first = await judge.complete(make_request())
    assert (first.input_tokens, first.extra["cache_read_input_tokens"]) == (1535, 1500)
    second = await judge.complete(make_request())
    assert (second.input_tokens, second.extra["cache_read_input_tokens"]) == (900, 0)


async def test_api_key_none_sends_no_key(make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer) -> None:
    judge = make_judge(api_key=None)
    await judge.complete(make_request())
    assert "x-api-key" not in fake_anthropic_server.requests[-1].headers
    assert repr(judge).endswith("auth=no)")


# --- retries -------------------------------------------------------------------------------------


async def test_429_retry_after_is_honoured(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer
) -> None:
    fake_anthropic_server.script(
        error(429, "rate_limit_error", "Number of request tokens has exceeded", retry_after="1")
    )
    started = time.monotonic()
    response = await make_judge().complete(make_request())
    assert json.loads(response.text) == DEFAULT_VERDICT
    first, second = fake_anthropic_server.requests
    # Backoff alone would be ~0.01 s; the server asked for 1 s.
    assert second.at - first.at >= 1.0
    assert time.monotonic() - started >= 1.0
    assert response.extra["http_retries"] == 1
    assert response.extra["http_retry_reasons"] == ["HTTP 429: rate_limit_error: Number of request tokens has exceeded"]


async def test_retry_after_ms_wins_over_retry_after(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer
) -> None:
    # Retry-After rounds up to whole seconds; retry-after-ms is the precise figure the SDKs use.
    fake_anthropic_server.script(error(429, "rate_limit_error", retry_after="5", retry_after_ms="400"))
    await make_judge().complete(make_request())
    first, second = fake_anthropic_server.requests
    assert 0.4 <= second.at - first.at < 3.0


async def test_529_overloaded_is_retried(make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer) -> None:
    fake_anthropic_server.script(overloaded(), overloaded())
    response = await make_judge().complete(make_request())
    assert json.loads(response.text) == DEFAULT_VERDICT
    assert fake_anthropic_server.request_count == 3
    assert response.extra["http_retry_reasons"] == ["HTTP 529: overloaded_error: Overloaded"] * 2


async def test_500_and_503_are_retried(make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer) -> None:
    fake_anthropic_server.script(error(500, "api_error"), error(503, "api_error", "upstream connect error"))
    response = await make_judge().complete(make_request())
    assert fake_anthropic_server.request_count == 3
    assert [r.split(":")[0] for r in response.extra["http_retry_reasons"]] == ["HTTP 500", "HTTP 503"]


async def test_persistent_overload_is_unavailable(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer
) -> None:
    fake_anthropic_server.set_default(overloaded())
    with pytest.raises(JudgeUnavailable, match=r"after 3 attempt\(s\): HTTP 529: overloaded_error") as info:
        await make_judge(max_retries=2).complete(make_request())
    assert fake_anthropic_server.request_count == 3
    assert info.value.retriable is True
    assert_no_key(info.value)


async def test_retry_after_beyond_limit_gives_up_at_once(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer
) -> None:
    fake_anthropic_server.script(error(429, "rate_limit_error", retry_after="3600"))
    started = time.monotonic()
    with pytest.raises(JudgeUnavailable, match="3600"):
        await make_judge(max_retry_after=30).complete(make_request())
    assert time.monotonic() - started < 5
    assert fake_anthropic_server.request_count == 1


# --- timeouts and transport faults ----------------------------------------------------------------


async def test_hang_past_timeout_is_retried_then_unavailable(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer
) -> None:
    fake_anthropic_server.set_default(hang(10, tool_reply()))
    started = time.monotonic()
    with pytest.raises(JudgeUnavailable, match="timeout") as info:
        await make_judge(read_timeout=0.5, max_retries=1).complete(make_request())
    elapsed = time.monotonic() - started
    assert fake_anthropic_server.request_count == 2
    assert 1.0 <= elapsed < 5.0  # two attempts of ~0.5 s each, not the 10 s hang
    assert_no_key(info.value)


async def test_attempt_timeout_bounds_a_slow_server(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer
) -> None:
    fake_anthropic_server.script(hang(10, tool_reply()))
    response = await make_judge(read_timeout=30, attempt_timeout=0.3).complete(make_request())
    assert response.extra["http_retry_reasons"] == ["attempt exceeded 0.3 s"]
    assert fake_anthropic_server.request_count == 2


async def test_refused_connection_is_unavailable(make_judge: JudgeFactory, closed_port: int) -> None:
    judge = make_judge(base_url=f"http://127.0.0.1:{closed_port}", max_retries=1)
    with pytest.raises(JudgeUnavailable, match=r"after 2 attempt\(s\): cannot connect") as info:
        await judge.complete(make_request())
    assert_no_key(info.value)


async def test_truncated_body_is_retried(make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer) -> None:
    fake_anthropic_server.script(truncated())
    response = await make_judge().complete(make_request())
    assert json.loads(response.text) == DEFAULT_VERDICT
    assert fake_anthropic_server.request_count == 2
    assert response.extra["http_retry_reasons"][0].startswith("transport error")


# --- malformed bodies: the server's fault, not the model's --------------------------------------------


async def test_cut_off_json_body_is_unavailable(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer
) -> None:
    fake_anthropic_server.script(cut_json())
    with pytest.raises(JudgeUnavailable, match="malformed response, body is not JSON"):
        await make_judge().complete(make_request())
    assert fake_anthropic_server.request_count == 1


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "x"}}).encode(), "error object"),
        (json.dumps({"type": "message", "model": "m", "usage": {}}).encode(), "no content block list"),
        (json.dumps(message(["not a block"])).encode(), "no content block list"),
        (json.dumps(message([{"type": "text", "text": 5}])).encode(), "text block without text"),
        (b"[1, 2]", "not a JSON object"),
        (b"[" * 100_000, "body is not JSON"),
    ],
    ids=["error-envelope", "no-content", "block-not-object", "text-not-string", "array", "deeply-nested"],
)
async def test_body_that_is_not_a_message_is_unavailable(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer, body: bytes, match: str
) -> None:
    fake_anthropic_server.script(respond(body))
    with pytest.raises(JudgeUnavailable, match=match):
        await make_judge().complete(make_request())
    assert fake_anthropic_server.request_count == 1


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_huge_body_is_rejected(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer, chunked: bool
) -> None:
    fake_anthropic_server.script(huge(2 * 1024 * 1024, chunked=chunked))
    with pytest.raises(JudgeUnavailable, match="response too large"):
        await make_judge().complete(make_request())
    assert fake_anthropic_server.request_count == 1
    # The cap is a setting: the same body passes a larger one (and then fails validation, as it should).
    fake_anthropic_server.script(huge(2 * 1024 * 1024, chunked=chunked))
    response = await make_judge(max_response_bytes=4 * 1024 * 1024).complete(make_request())
    assert len(json.loads(response.text)["justification"]) == 2 * 1024 * 1024


# --- rejections: no retries, no key ------------------------------------------------------------------


async def test_401_rejected_without_retry_and_key_scrubbed(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer
) -> None:
    # A server quoting the key it refused must not get it into our message either.
    fake_anthropic_server.script(error(401, "authentication_error", f"invalid x-api-key {API_KEY}"))
    judge = make_judge()
    with pytest.raises(JudgeRejected, match="HTTP 401: authentication_error: invalid x-api-key") as info:
        await judge.complete(make_request())
    assert fake_anthropic_server.request_count == 1
    assert info.value.retriable is False
    assert "[REDACTED]" in str(info.value)
    assert_no_key(info.value)
    assert API_KEY not in repr(judge)


@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, "invalid_request_error"), (403, "permission_error"), (404, "not_found_error"), (413, "request_too_large")],
)
async def test_other_4xx_rejected_without_retry(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer, status: int, kind: str
) -> None:
    fake_anthropic_server.script(error(status, kind, "tools.0.input_schema: JSON schema is invalid"))
    with pytest.raises(JudgeRejected, match=f"HTTP {status}: {kind}: tools.0.input_schema"):
        await make_judge().complete(make_request())
    assert fake_anthropic_server.request_count == 1


async def test_non_object_schema_is_rejected_before_sending(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer
) -> None:
    request = make_request()
    bad = JudgeRequest(
        template=request.template,
        messages=request.messages,
        response_schema={"type": "array", "items": {"type": "string"}},
        schema_name=request.schema_name,
    )
    with pytest.raises(JudgeRejected, match="top-level type 'object'"):
        await make_judge().complete(bad)
    assert fake_anthropic_server.request_count == 0


# --- the model's own answer, good or bad, goes back as text --------------------------------------------


async def test_off_schema_tool_input_is_returned_as_text(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer
) -> None:
    off_schema = {"winner": "C", "confidence": 7, "note": "extra field"}
    fake_anthropic_server.script(tool_reply(off_schema))
    response = await make_judge().complete(make_request())
    assert json.loads(response.text) == off_schema
    assert fake_anthropic_server.request_count == 1  # not a transport fault: no HTTP retry
    # The core's strict validator is what rejects it (and re-asks), never the transport.
    with pytest.raises(pydantic.ValidationError) as info:
        ToneStyleReply.model_validate_json(response.text)
    fields = {str(e["loc"][0]) for e in info.value.errors()}
    assert {"winner", "confidence", "note", "justification"} <= fields
    with pytest.raises(InvalidReply, match="winner"):
        parse_reply(response.text, ToneStyleReply)


async def test_text_only_refusal_is_returned_as_text(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer
) -> None:
    fake_anthropic_server.script(
        text_reply("I can't compare these two responses."),
        text_reply("", stop_reason="refusal"),
    )
    judge = make_judge()
    first = await judge.complete(make_request())
    assert first.text == "I can't compare these two responses."
    assert (first.extra["tool_use"], first.extra["refusal"]) == (False, False)
    second = await judge.complete(make_request())
    assert second.text == ""
    assert second.extra["refusal"] is True
    for response in (first, second):
        with pytest.raises(InvalidReply):
            parse_reply(response.text, ToneStyleReply)


async def test_cut_off_tool_use_is_never_used_as_a_verdict(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer
) -> None:
    # Even a complete-looking, valid input is not trusted when the answer stopped for max_tokens.
    fake_anthropic_server.script(
        respond(message([text_block("Let me think"), tool_block(DEFAULT_VERDICT)], stop_reason="max_tokens")),
        respond(message([tool_block(DEFAULT_VERDICT)], stop_reason="refusal")),
    )
    judge = make_judge()
    cut = await judge.complete(make_request())
    assert cut.text == "Let me think"
    assert (cut.extra["stop_reason"], cut.extra["tool_use"], cut.extra["tool_use_blocks"]) == ("max_tokens", False, 1)
    refused = await judge.complete(make_request())
    assert refused.text == ""
    assert refused.extra["refusal"] is True


async def test_several_different_tool_calls_are_not_one_verdict(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer
) -> None:
    other = {**DEFAULT_VERDICT, "winner": "B"}
    fake_anthropic_server.script(
        respond(message([tool_block(DEFAULT_VERDICT), tool_block(other, block_id="toolu_2")])),
        respond(message([tool_block(DEFAULT_VERDICT), tool_block(DEFAULT_VERDICT, block_id="toolu_2")])),
        # A call to a tool we never offered is not an answer to this prompt.
        respond(message([text_block("hmm"), tool_block(DEFAULT_VERDICT, name="other_tool")])),
    )
    judge = make_judge()
    both = await judge.complete(make_request())
    with pytest.raises(InvalidReply):  # the adapter does not pick one; the validator refuses both
        parse_reply(both.text, ToneStyleReply)
    same = await judge.complete(make_request())
    assert json.loads(same.text) == DEFAULT_VERDICT
    stranger = await judge.complete(make_request())
    assert stranger.text == "hmm"


# --- concurrency and lifecycle ---------------------------------------------------------------------------


async def test_max_concurrency_caps_calls_in_flight(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer
) -> None:
    fake_anthropic_server.set_default(hang(0.3, tool_reply()))
    judge = make_judge(max_concurrency=2)
    async with anyio.create_task_group() as tg:
        for _ in range(6):
            tg.start_soon(judge.complete, make_request())
    assert fake_anthropic_server.request_count == 6
    assert fake_anthropic_server.max_in_flight == 2


async def test_async_context_manager_closes(fake_anthropic_server: FakeAnthropicServer) -> None:
    async with AnthropicJudge(
        base_url=fake_anthropic_server.base_url, model="claude-test", api_key=SecretStr(API_KEY)
    ) as judge:
        await judge.complete(make_request())
    with pytest.raises(RuntimeError, match="closed"):  # a programming error, not a judge outage
        await judge.complete(make_request())


async def test_factory_builds_it_from_settings(fake_anthropic_server: FakeAnthropicServer) -> None:
    settings = JudgeSettings(
        kind="anthropic",
        base_url=fake_anthropic_server.base_url,
        model="claude-from-settings",
        api_key=SecretStr(API_KEY),
        anthropic_version="2099-01-01",
        max_tokens=512,
    )
    judge = build_inner_judge(settings)
    assert isinstance(judge, AnthropicJudge)
    try:
        await judge.complete(make_request())
    finally:
        await judge.aclose()
    [sent] = fake_anthropic_server.requests
    assert (sent.headers["anthropic-version"], sent.headers["x-api-key"]) == ("2099-01-01", API_KEY)
    assert (sent.json()["model"], sent.json()["max_tokens"]) == ("claude-from-settings", 512)
    assert JudgeSettings().anthropic_version == "2023-06-01"


def test_config_errors() -> None:
    with pytest.raises(ValueError, match="http"):
        AnthropicJudge(base_url="ftp://example.org", model="m", api_key=None)
    with pytest.raises(ValueError, match="temperature"):
        AnthropicJudge(model="m", api_key=None, temperature=1.5)
    with pytest.raises(ValueError, match="max_tokens"):
        AnthropicJudge(model="m", api_key=None, max_tokens=0)


# --- the real judging core over this judge, end to end ----------------------------------------------------

_OUTPUT_A = re.compile(r'<output_a id="(?P<nonce>[^"]+)">\n(?P<text>.*?)\n</output_a id="(?P=nonce)">', re.DOTALL)


def ordering_of(request: RecordedRequest) -> str:
    """Which ordering a recorded request shows, from the text inside its <output_a> block."""
    first_user = request.json()["messages"][0]["content"]
    found = _OUTPUT_A.search(first_user)
    assert found is not None, "no <output_a> block in the prompt"
    return "AB" if unmark(found["text"]) == FIRST_OUTPUT else "BA"  # shown datamarked (Policy.datamark)


async def test_core_judges_a_pair_end_to_end(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer
) -> None:
    def answer(request: RecordedRequest) -> Action:
        # The first candidate wins in both orderings: shown as A in AB and as B in BA.
        winner = "A" if ordering_of(request) == "AB" else "B"
        return tool_reply(json.loads(tone_reply(winner, confidence=0.9)), usage_=usage(cache_read=1200))

    fake_anthropic_server.set_responder(answer)
    judge = make_judge()

    decision = await judge_pair(make_pair(), judge, Policy())

    verdict = decision.outcome
    assert isinstance(verdict, PairVerdict)
    assert verdict.winner == FIRST_ID
    assert verdict.consistent is True
    assert (verdict.judge.provider, verdict.judge.model, verdict.judge.heuristic) == ("anthropic", "claude-test", False)
    assert sorted(o.order_shown for o in verdict.orderings) == ["AB", "BA"]
    assert all(o.answered_by_model == FAKE_MODEL and o.input_tokens == 200 + 1200 for o in verdict.orderings)
    requests = fake_anthropic_server.requests
    assert sorted(ordering_of(r) for r in requests) == ["AB", "BA"]
    for sent in requests:
        payload = sent.json()
        assert payload["tool_choice"] == {"type": "tool", "name": TONE_TOOL, "disable_parallel_tool_use": True}
        assert payload["system"][-1]["cache_control"] == {"type": "ephemeral"}
    # Both orderings share the cacheable prefix (tools, then system) byte for byte.
    ab, ba = (r.json() for r in requests)
    assert (ab["tools"], ab["system"]) == (ba["tools"], ba["system"])
    assert ab["messages"] != ba["messages"]


async def test_core_escalates_a_judge_that_stays_off_schema(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer
) -> None:
    off_schema = {"winner": "C", "confidence": 7}
    fake_anthropic_server.set_responder(lambda _request: tool_reply(off_schema))
    judge = make_judge()
    policy = Policy()

    decision = await judge_pair(make_pair(), judge, policy)

    review = decision.outcome
    assert isinstance(review, ReviewRequest)
    assert review.reason == "ordering_invalid"
    asks = policy.max_reasks + 1
    assert asks == 3
    requests = fake_anthropic_server.requests
    assert len(requests) == 2 * asks
    assert sorted(ordering_of(r) for r in requests) == ["AB"] * asks + ["BA"] * asks
    assert all(o.error_kind == "invalid_reply" and o.error is not None for o in review.orderings)
    # Each re-ask is the first ask plus the rejected reply (as the assistant) and the validator's error.
    reasks = [r.json()["messages"] for r in requests if len(r.json()["messages"]) > 1]
    assert len(reasks) == 2 * (asks - 1)
    prefix = REASK_INSTRUCTION.split("{error}")[0]
    for messages in reasks:
        assert [m["role"] for m in messages] == ["user", "assistant", "user"]
        assert json.loads(messages[1]["content"]) == off_schema
        assert messages[2]["content"].startswith(prefix)
        assert "winner" in messages[2]["content"]


# --- the response cache's key ----------------------------------------------------------------------------


async def test_cache_params_cover_every_setting_that_shapes_the_reply(
    make_judge: JudgeFactory, fake_anthropic_server: FakeAnthropicServer, closed_port: int
) -> None:
    base = make_judge().cache_params()
    assert base == {
        "endpoint": f"{fake_anthropic_server.base_url}/v1/messages",
        "model": "claude-test",
        "anthropic_version": "2023-06-01",
        "max_tokens": 1024,
        "tool_description": DEFAULT_TOOL_DESCRIPTION,
    }
    for change in (
        {"base_url": f"http://127.0.0.1:{closed_port}"},
        {"model": "claude-other"},
        {"anthropic_version": "2099-01-01"},
        {"max_tokens": 300},
        {"tool_description": "Say who won."},  # the model reads it
    ):
        assert make_judge(**change).cache_params() != base, change
    # The same endpoint written either way is one endpoint.
    assert make_judge(base_url=f"{fake_anthropic_server.base_url}/v1/").cache_params() == base
    # Prompt caching changes the bill, not the answer; retries, limits and keys change neither.
    quiet = make_judge(
        cache_system_prompt=False, api_key=SecretStr("sk-ant-other"), max_retries=0, read_timeout=1.0, max_concurrency=1
    )
    assert quiet.cache_params() == base
    with_userinfo = make_judge(base_url=f"http://user:{API_KEY}@127.0.0.1:{fake_anthropic_server.port}/?token=abc")
    params = json.dumps(with_userinfo.cache_params())
    assert API_KEY not in params
    assert "abc" not in params
    assert with_userinfo.cache_params() == base
