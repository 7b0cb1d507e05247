"""The OpenAI-compatible judge against a real local HTTP server that fails on cue.

Each failure mode asserts the outcome the core relies on: what is retried (and how often), what is
raised (``JudgeUnavailable`` vs ``JudgeRejected``), and what is handed back as text for the core's
strict validator to judge.
"""

from __future__ import annotations

import email.utils
import json
import logging
import time
import traceback
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pydantic
import pytest
from pydantic import SecretStr

from pairjudge.agents.errors import JudgeRejected, JudgeUnavailable
from pairjudge.agents.judge import ChatMessage, Judge, JudgeIdentity, JudgeRequest
from pairjudge.schemas.replies import ToneStyleReply
from pairjudge.streams.config.settings import JudgeSettings
from pairjudge.streams.judges.cache import CachingJudge
from pairjudge.streams.judges.cache_store import ResponseCache
from pairjudge.streams.judges.cost import CACHED_INPUT_TOKENS, ModelPrice, PricedJudge, PriceTable
from pairjudge.streams.judges.factory import build_inner_judge
from pairjudge.streams.judges.http import RequestRefused
from pairjudge.streams.judges.openai import OpenAICompatibleJudge
from pairjudge.streams.judges.openai_errors import is_format_refusal
from tests.fixtures.fake_judge_server import (
    CONTEXT_LENGTH_EXCEEDED,
    DEFAULT_CONTENT,
    JSON_SCHEMA_REFUSED,
    LLAMA_CPP_PYTHON_JSON_SCHEMA_REFUSED,
    SCHEMA_KEY_REFUSED,
    Action,
    FakeJudgeServer,
    closed_port,
    completion,
    fake_judge_server,
    hang,
    huge,
    no_choices,
    not_json,
    openai_error,
    refusal,
    refusing_forms,
    reply,
    request_form,
    status,
    truncated,
)

__all__ = ["closed_port", "fake_judge_server"]  # fixtures, imported for pytest

API_KEY = "sk-test-DO-NOT-LEAK-4f1c2a"

JudgeFactory = Callable[..., OpenAICompatibleJudge]


def format_http_date(seconds_from_now: float) -> str:
    """An HTTP date ``seconds_from_now`` in the future: a ``Retry-After`` as a date."""
    moment = datetime.fromtimestamp(time.time() + seconds_from_now, tz=UTC)
    return email.utils.format_datetime(moment, usegmt=True)


def make_request() -> JudgeRequest:
    return JudgeRequest(
        template="tone_style",
        messages=(
            ChatMessage("system", "You compare two responses for tone and style. Reply with JSON only."),
            ChatMessage("user", "<response_a>Hi there!</response_a>\n<response_b>Greetings.</response_b>"),
        ),
        response_schema=ToneStyleReply.model_json_schema(by_alias=True),
        schema_name="ToneStyleReply",
    )


@pytest.fixture
async def make_judge(fake_judge_server: FakeJudgeServer) -> AsyncIterator[JudgeFactory]:
    """Judges against the fake server with fast backoff; closed at the end of the test."""
    made: list[OpenAICompatibleJudge] = []

    def factory(**overrides: Any) -> OpenAICompatibleJudge:
        options: dict[str, Any] = {
            "base_url": fake_judge_server.base_url,
            "model": "fake-model",
            "api_key": SecretStr(API_KEY),
            "max_retries": 2,
            "backoff_initial": 0.01,
            "backoff_max": 0.05,
            "connect_timeout": 2.0,
            "read_timeout": 5.0,
        }
        options.update(overrides)
        judge = OpenAICompatibleJudge(**options)
        made.append(judge)
        return judge

    yield factory
    for judge in made:
        await judge.aclose()


def assert_no_key(exc: BaseException) -> None:
    rendered = "".join(traceback.format_exception(exc))
    assert API_KEY not in rendered
    assert API_KEY not in repr(exc)


# --- the good path ------------------------------------------------------------------------------


async def test_good_reply_records_model_tokens_latency(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer
) -> None:
    judge = make_judge(seed=7, max_tokens=300)
    assert isinstance(judge, Judge)
    assert judge.identity == JudgeIdentity(provider="openai-compatible", model="fake-model", temperature=0.0)
    fake_judge_server.script(
        reply(DEFAULT_CONTENT, model="fake-model-2024-06-01", prompt_tokens=321, completion_tokens=54)
    )

    response = await judge.complete(make_request())

    assert response.text == DEFAULT_CONTENT
    ToneStyleReply.model_validate_json(response.text)
    # The model the server says answered, not the one we asked for: a silent reroute must be visible.
    assert response.model == "fake-model-2024-06-01"
    assert (response.input_tokens, response.output_tokens) == (321, 54)
    assert response.latency_s > 0
    assert response.extra["http_retries"] == 0
    assert response.extra["http_attempts"] == 1
    assert response.extra["finish_reason"] == "stop"
    assert response.extra["refusal"] is False

    [sent] = fake_judge_server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    payload = sent.json()
    assert payload["model"] == "fake-model"
    assert payload["temperature"] == 0.0
    assert payload["seed"] == 7
    assert payload["max_tokens"] == 300
    assert payload["stream"] is False
    assert [m["role"] for m in payload["messages"]] == ["system", "user"]
    fmt = payload["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "ToneStyleReply"
    assert fmt["json_schema"]["strict"] is True
    # The strict OpenAI form carries the contract exactly as written.
    assert fmt["json_schema"]["schema"] == ToneStyleReply.model_json_schema(by_alias=True)


async def test_json_object_schema_mode_adapts_the_wire_schema_for_llama(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer
) -> None:
    judge = make_judge(response_format="json_object_schema", wire_max_length=800)
    await judge.complete(make_request())
    fmt = fake_judge_server.requests[-1].json()["response_format"]
    assert fmt["type"] == "json_object"
    wire = fmt["schema"]
    contract = ToneStyleReply.model_json_schema(by_alias=True)
    assert contract["properties"]["justification"]["maxLength"] == 1000  # the contract itself is unchanged
    # Narrowed on the wire only (llama.cpp's grammar compiler kills the server above ~1000) ...
    assert wire["properties"]["justification"]["maxLength"] == 800
    assert wire["properties"]["key_differentiator"]["maxLength"] == 300
    # ... and the 1-5 scores as an enum, which llama.cpp enforces (it ignores minimum/maximum).
    score = wire["$defs"]["ScorePair"]["properties"]["A"]
    assert score["enum"] == [1, 2, 3, 4, 5]
    assert "minimum" not in score
    assert "maximum" not in score
    # Floats keep their bounds (no enum can restate them); the core's validator still checks them.
    assert wire["properties"]["confidence"] == contract["properties"]["confidence"]


async def test_wire_adaptations_can_be_switched_off(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer
) -> None:
    judge = make_judge(response_format="json_object_schema", wire_max_length=None, wire_int_enum_max=None)
    await judge.complete(make_request())
    wire = fake_judge_server.requests[-1].json()["response_format"]["schema"]
    assert wire == ToneStyleReply.model_json_schema(by_alias=True)


async def test_none_mode_sends_no_response_format(make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer) -> None:
    judge = make_judge(response_format="none", api_key=None)
    await judge.complete(make_request())
    [sent] = fake_judge_server.requests
    assert "response_format" not in sent.json()
    assert "authorization" not in sent.headers


# --- retries -------------------------------------------------------------------------------------


async def test_5xx_then_success_is_retried(make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer) -> None:
    fake_judge_server.script(status(500), status(503), reply())
    response = await make_judge().complete(make_request())
    assert response.text == DEFAULT_CONTENT
    assert fake_judge_server.request_count == 3
    assert response.extra["http_retries"] == 2
    assert [r.split(":")[0] for r in response.extra["http_retry_reasons"]] == ["HTTP 500", "HTTP 503"]


async def test_retry_after_seconds_is_honoured(make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer) -> None:
    fake_judge_server.script(status(429, retry_after="1"), reply())
    started = time.monotonic()
    response = await make_judge().complete(make_request())
    elapsed = time.monotonic() - started
    assert response.extra["http_retries"] == 1
    first, second = fake_judge_server.requests
    # Backoff alone would be ~0.01 s; the server asked for 1 s.
    assert second.at - first.at >= 1.0
    assert elapsed >= 1.0


async def test_retry_after_http_date_is_honoured(make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer) -> None:
    # HTTP dates have whole-second resolution, so "2 s from now" means somewhere in (1, 2] s.
    fake_judge_server.script(status(503, retry_after=format_http_date(2)), reply())
    await make_judge().complete(make_request())
    first, second = fake_judge_server.requests
    assert second.at - first.at >= 0.9


async def test_retry_after_beyond_limit_gives_up_at_once(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.script(status(429, retry_after="3600"))
    started = time.monotonic()
    with pytest.raises(JudgeUnavailable, match="3600") as info:
        await make_judge(max_retry_after=30).complete(make_request())
    assert time.monotonic() - started < 5
    assert fake_judge_server.request_count == 1
    assert info.value.retriable is True


async def test_exhausted_retries_raise_unavailable(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.set_default(status(503))
    with pytest.raises(JudgeUnavailable, match=r"after 3 attempt\(s\).*HTTP 503") as info:
        await make_judge(max_retries=2).complete(make_request())
    assert fake_judge_server.request_count == 3
    assert_no_key(info.value)


async def test_zero_retries_means_one_attempt(make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer) -> None:
    fake_judge_server.script(status(502), reply())
    with pytest.raises(JudgeUnavailable):
        await make_judge(max_retries=0).complete(make_request())
    assert fake_judge_server.request_count == 1


# --- rejections: no retries, no key ------------------------------------------------------------------


async def test_401_rejected_without_retry_and_key_scrubbed(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer
) -> None:
    # Some servers quote the key they refused; it must not reach our message either.
    echo = json.dumps({"error": {"message": f"Incorrect API key provided: {API_KEY}"}}).encode()
    fake_judge_server.script(status(401, body=echo))
    judge = make_judge()
    with pytest.raises(JudgeRejected, match="HTTP 401") as info:
        await judge.complete(make_request())
    assert fake_judge_server.request_count == 1
    assert info.value.retriable is False
    assert "Incorrect API key provided" in str(info.value)  # the excerpt is there ...
    assert_no_key(info.value)  # ... without the key
    assert API_KEY not in repr(judge)


async def test_400_rejected_without_retry(make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer) -> None:
    fake_judge_server.script(status(400, body=b'{"error": {"message": "response_format json_schema not supported"}}'))
    with pytest.raises(JudgeRejected, match="json_schema not supported"):
        await make_judge().complete(make_request())
    assert fake_judge_server.request_count == 1


async def test_long_error_body_is_excerpted(make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer) -> None:
    fake_judge_server.script(status(404, body=b"<html>" + b"not found " * 2000 + b"</html>"))
    with pytest.raises(JudgeRejected, match="HTTP 404: <html>not found not found") as info:
        await make_judge().complete(make_request())
    assert len(str(info.value)) < 400


async def test_deeply_nested_body_is_unavailable(make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer) -> None:
    fake_judge_server.script(Action(body=b"[" * 200_000))
    with pytest.raises(JudgeUnavailable, match="malformed response"):
        await make_judge().complete(make_request())


# --- timeouts and transport faults ----------------------------------------------------------------


async def test_hang_past_read_timeout_is_retried_then_unavailable(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.set_default(hang(10))
    started = time.monotonic()
    with pytest.raises(JudgeUnavailable, match="timeout") as info:
        await make_judge(read_timeout=0.5, max_retries=1).complete(make_request())
    elapsed = time.monotonic() - started
    assert fake_judge_server.request_count == 2
    assert 1.0 <= elapsed < 5.0  # two attempts of ~0.5 s each, not the 10 s hang
    assert_no_key(info.value)


async def test_one_hang_then_success(make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer) -> None:
    fake_judge_server.script(hang(10), reply())
    response = await make_judge(read_timeout=0.5).complete(make_request())
    assert response.text == DEFAULT_CONTENT
    assert response.extra["http_retries"] == 1
    assert "timeout" in response.extra["http_retry_reasons"][0]


async def test_attempt_timeout_bounds_a_slow_server(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.set_default(hang(10))
    started = time.monotonic()
    with pytest.raises(JudgeUnavailable, match="attempt exceeded"):
        await make_judge(read_timeout=30, attempt_timeout=0.3, max_retries=0).complete(make_request())
    assert time.monotonic() - started < 3


async def test_refused_connection_is_unavailable(make_judge: JudgeFactory, closed_port: int) -> None:
    judge = make_judge(base_url=f"http://127.0.0.1:{closed_port}/v1", max_retries=1)
    with pytest.raises(JudgeUnavailable, match=r"after 2 attempt\(s\): cannot connect") as info:
        await judge.complete(make_request())
    assert_no_key(info.value)


async def test_truncated_body_is_retried(make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer) -> None:
    fake_judge_server.script(truncated(), reply())
    response = await make_judge().complete(make_request())
    assert response.text == DEFAULT_CONTENT
    assert fake_judge_server.request_count == 2
    assert response.extra["http_retries"] == 1
    assert response.extra["http_retry_reasons"][0].startswith("transport error")


# --- malformed bodies: the server's fault, not the model's --------------------------------------------


async def test_body_not_json_is_unavailable(make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer) -> None:
    fake_judge_server.script(not_json())
    with pytest.raises(JudgeUnavailable, match="malformed response, body is not JSON"):
        await make_judge().complete(make_request())
    assert fake_judge_server.request_count == 1


async def test_an_undecodable_body_is_unavailable_at_once(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer
) -> None:
    """A whole body whose ``Content-Encoding`` cannot be undone comes again on a retry: not retried,
    unlike a body cut short (above)."""
    bad_gzip = Action(
        body=b"not gzip at all", headers=(("Content-Type", "application/json"), ("Content-Encoding", "gzip"))
    )
    fake_judge_server.script(bad_gzip, reply())
    with pytest.raises(JudgeUnavailable, match="undecodable response body"):
        await make_judge().complete(make_request())
    assert fake_judge_server.request_count == 1


async def test_body_without_choices_is_unavailable(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.script(no_choices())
    with pytest.raises(JudgeUnavailable, match=r"no choices\[0\]\.message.*upstream overloaded"):
        await make_judge().complete(make_request())


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_huge_body_is_rejected(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer, chunked: bool
) -> None:
    fake_judge_server.script(huge(2 * 1024 * 1024, chunked=chunked))
    with pytest.raises(JudgeUnavailable, match="response too large"):
        await make_judge().complete(make_request())
    assert fake_judge_server.request_count == 1
    # The cap is a setting: the same body passes a larger one.
    fake_judge_server.script(huge(2 * 1024 * 1024, chunked=chunked))
    response = await make_judge(max_response_bytes=4 * 1024 * 1024).complete(make_request())
    assert len(response.text) == 2 * 1024 * 1024


# --- the model's own answer, good or bad, goes back as text --------------------------------------------


async def test_off_schema_content_is_returned_as_text(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer
) -> None:
    off_schema = json.dumps({"winner": "C", "confidence": 7, "note": "extra field"})
    fake_judge_server.script(reply(off_schema))
    response = await make_judge().complete(make_request())
    assert response.text == off_schema
    assert fake_judge_server.request_count == 1  # not a transport fault: no HTTP retry
    # The core's strict validator is what rejects it (and re-asks), never the transport.
    with pytest.raises(pydantic.ValidationError):
        ToneStyleReply.model_validate_json(response.text)


async def test_content_that_is_not_json_is_returned_as_text(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.script(reply('Sure! {"winner": "A"', finish_reason="length"))
    response = await make_judge().complete(make_request())
    assert response.text == 'Sure! {"winner": "A"'
    assert response.extra["finish_reason"] == "length"


async def test_refusal_is_returned_as_text(make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer) -> None:
    fake_judge_server.script(refusal("I can't compare these."))
    response = await make_judge().complete(make_request())
    assert response.text == "I can't compare these."
    assert response.extra["refusal"] is True


async def test_empty_content_is_returned_empty(make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer) -> None:
    fake_judge_server.script(reply(None), reply(""))
    judge = make_judge()
    assert (await judge.complete(make_request())).text == ""
    assert (await judge.complete(make_request())).text == ""
    assert fake_judge_server.request_count == 2


# --- concurrency and lifecycle ---------------------------------------------------------------------------


async def test_max_concurrency_caps_calls_in_flight(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.set_default(hang(0.3))
    judge = make_judge(max_concurrency=2)
    async with anyio.create_task_group() as tg:
        for _ in range(6):
            tg.start_soon(judge.complete, make_request())
    assert fake_judge_server.request_count == 6
    assert fake_judge_server.max_in_flight == 2


async def test_async_context_manager_closes(fake_judge_server: FakeJudgeServer) -> None:
    async with OpenAICompatibleJudge(base_url=fake_judge_server.base_url, model="fake-model") as judge:
        await judge.complete(make_request())
    with pytest.raises(RuntimeError, match="closed"):  # a programming error, not a judge outage
        await judge.complete(make_request())


def test_bad_base_url_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="http"):
        OpenAICompatibleJudge(base_url="ftp://example.org/v1", model="m")


# --- Retry-After precision, provider prompt caching, the response cache's key ---------------------------------


async def test_retry_after_ms_wins_over_retry_after(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer
) -> None:
    # Retry-After rounds up to whole seconds; retry-after-ms is the precise figure OpenAI's SDK prefers.
    fake_judge_server.script(status(429, retry_after="5", retry_after_ms="400"), reply())
    response = await make_judge().complete(make_request())
    assert response.extra["http_retries"] == 1
    first, second = fake_judge_server.requests
    assert 0.4 <= second.at - first.at < 3.0


async def test_provider_cache_reads_are_reported_and_billed_at_the_cached_rate(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.script(
        reply(prompt_tokens=1000, completion_tokens=50, cached_tokens=768),
        reply(prompt_tokens=1000, completion_tokens=50),  # a server without prompt caching says nothing
        reply(prompt_tokens=1000, completion_tokens=50, cached_tokens=0),
    )
    price = ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0, cached_input_per_mtok=0.5)
    judge = PricedJudge(make_judge(), PriceTable.of({"fake-model-2024-01-01": price}))

    hit = await judge.complete(make_request())
    # OpenAI counts cached tokens inside prompt_tokens: input stays the whole prompt, the split is extra.
    assert (hit.input_tokens, hit.extra[CACHED_INPUT_TOKENS]) == (1000, 768)
    assert hit.cost_usd == pytest.approx((232 * 2.0 + 768 * 0.5 + 50 * 8.0) / 1e6)

    unreported = await judge.complete(make_request())
    assert unreported.extra[CACHED_INPUT_TOKENS] is None
    assert unreported.cost_usd == pytest.approx((1000 * 2.0 + 50 * 8.0) / 1e6)

    miss = await judge.complete(make_request())
    assert miss.extra[CACHED_INPUT_TOKENS] == 0
    assert miss.cost_usd == unreported.cost_usd


@pytest.mark.parametrize(
    "details",
    [{"cached_tokens": -5}, {"cached_tokens": "768"}, {"cached_tokens": True}, {"cached_tokens": 7.5}, [768], "768"],
    ids=["negative", "string", "bool", "float", "list", "details-string"],
)
async def test_garbled_cache_counts_are_unreported_not_a_discount(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer, details: Any
) -> None:
    body = completion(DEFAULT_CONTENT, prompt_tokens=1000)
    body["usage"]["prompt_tokens_details"] = details
    fake_judge_server.script(Action(body=json.dumps(body).encode()))
    response = await make_judge().complete(make_request())
    assert response.extra[CACHED_INPUT_TOKENS] is None
    assert response.input_tokens == 1000


async def test_cache_params_cover_every_setting_that_shapes_the_reply(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer, closed_port: int
) -> None:
    base = make_judge().cache_params()
    assert base == {
        "endpoint": fake_judge_server.base_url,
        "model": "fake-model",
        "response_format": "json_schema",
        "seed": None,
        "max_tokens": 1024,
        "max_tokens_field": "max_tokens",
    }
    for change in (
        {"base_url": f"http://127.0.0.1:{closed_port}/v1"},  # another server may have another model loaded
        {"model": "other-model"},
        {"response_format": "none"},
        {"seed": 7},
        {"max_tokens": 300},
        {"max_tokens_field": "max_completion_tokens"},
    ):
        assert make_judge(**change).cache_params() != base, change
    # The wire schema llama.cpp compiles into a grammar is adapted only in json_object_schema mode.
    llama = make_judge(response_format="json_object_schema").cache_params()
    assert (llama["wire_max_length"], llama["wire_int_enum_max"]) == (1000, 64)
    assert make_judge(response_format="json_object_schema", wire_max_length=800).cache_params() != llama
    assert make_judge(response_format="json_object_schema", wire_int_enum_max=None).cache_params() != llama
    assert make_judge(wire_max_length=800).cache_params() == base
    # What decides only whether an answer arrives stays out of the key.
    quiet = make_judge(
        api_key=SecretStr("sk-other"), max_retries=0, read_timeout=1.0, attempt_timeout=2.0, max_concurrency=1
    )
    assert quiet.cache_params() == base
    # Credentials and queries in the URL never reach the key.
    with_userinfo = make_judge(base_url=f"http://user:{API_KEY}@127.0.0.1:{fake_judge_server.port}/v1/?token=abc")
    params = json.dumps(with_userinfo.cache_params())
    assert API_KEY not in params
    assert "abc" not in params
    assert with_userinfo.cache_params()["endpoint"] == fake_judge_server.base_url


async def test_judges_that_may_answer_differently_do_not_share_cached_replies(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer, tmp_path: Path
) -> None:
    cache = ResponseCache(tmp_path / "cache")
    try:
        await CachingJudge(make_judge(seed=1), cache).complete(make_request())
        assert fake_judge_server.request_count == 1
        other_seed = await CachingJudge(make_judge(seed=2), cache).complete(make_request())
        assert not other_seed.cached
        assert fake_judge_server.request_count == 2
        same = await CachingJudge(make_judge(seed=1, max_retries=0), cache).complete(make_request())
        assert same.cached
        assert fake_judge_server.request_count == 2
    finally:
        cache.close()


# --- response_format="auto": finding the structured-output form the server takes --------------------------


def fallback_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING and "falling back" in r.getMessage()]


def forms_sent(server: FakeJudgeServer) -> list[str]:
    return [request_form(r) for r in server.requests]


@pytest.mark.parametrize(
    ("status_code", "body", "expected"),
    [
        # vLLM / llama.cpp style, OpenAI's shape
        (400, b'{"error": {"message": "response_format type json_schema is not supported"}}', True),
        # OpenAI, for a model without structured outputs
        (
            400,
            b'{"error": {"message": "Invalid parameter: \'response_format\' of type \'json_schema\' is not '
            b'supported with this model.", "type": "invalid_request_error", "param": "response_format", "code": null}}',
            True,
        ),
        (400, SCHEMA_KEY_REFUSED.body, True),
        # only the param says so
        (400, b'{"error": {"message": "Invalid value.", "param": "response_format.type"}}', True),
        # vLLM's flat error object
        (400, b'{"object": "error", "message": "json_schema is not supported", "code": 400}', True),
        # Ollama
        (400, b'{"error": "structured outputs are not supported by this model"}', True),
        # a FastAPI server's request validation (the input it echoes is ignored)
        (
            422,
            b'{"detail": [{"type": "literal_error", "loc": ["body", "response_format", "type"], '
            b'"msg": "Input should be \'text\' or \'json_object\'", "input": "json_schema"}]}',
            True,
        ),
        (400, b"schema is not supported", True),  # plain text
        (500, LLAMA_CPP_PYTHON_JSON_SCHEMA_REFUSED.body, True),
        # --- not a refusal of the form ---
        (400, CONTEXT_LENGTH_EXCEEDED.body, False),
        (
            400,
            b'{"error": {"message": "max_tokens is too large: 9000. This model supports at most 4096 completion '
            b'tokens.", "param": "max_tokens"}}',
            False,
        ),
        (400, b'{"error": {"message": "The model `gpt-5-nano` does not exist"}}', False),
        # OpenAI reasoning models refusing other parameters
        (
            400,
            b'{"error": {"message": "Unsupported parameter: \'max_tokens\' is not supported with this model. Use '
            b'\'max_completion_tokens\' instead.", "param": "max_tokens", "code": "unsupported_parameter"}}',
            False,
        ),
        (
            400,
            b'{"error": {"message": "Unsupported value: \'temperature\' does not support 0.0 with this model. '
            b'Only the default (1) value is supported.", "param": "temperature", "code": "unsupported_value"}}',
            False,
        ),
        (
            422,
            b'{"detail": [{"loc": ["body", "messages"], "msg": "Field required", '
            b'"input": {"response_format": {"type": "json_schema"}}}]}',
            False,
        ),
        (500, b'{"error": {"message": "scripted 500"}}', False),  # transient: retried, not a refusal
        (500, b'{"error": {"message": "1 validation error: loc (body, messages)"}}', False),
        (401, b'{"error": {"message": "response_format is not available on your plan"}}', False),
        (404, b'{"error": {"message": "json_schema not supported"}}', False),
        (429, JSON_SCHEMA_REFUSED.body, False),
        (400, b"", False),
        (400, b"\xff\xfe{[[[[", False),
    ],
)
def test_is_format_refusal(status_code: int, body: bytes, expected: bool) -> None:
    assert is_format_refusal(status_code, body) is expected


async def test_auto_mode_on_a_json_schema_server_stays_there(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer, caplog: pytest.LogCaptureFixture
) -> None:
    judge = make_judge(response_format="auto")
    response = await judge.complete(make_request())
    assert forms_sent(fake_judge_server) == ["json_schema"]
    assert response.extra["response_format"] == "json_schema"
    assert response.extra["response_format_fallback"] is False
    assert judge.effective_response_format == "json_schema"
    assert not fallback_warnings(caplog)


async def test_auto_mode_falls_back_to_json_object_schema_once(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer, caplog: pytest.LogCaptureFixture
) -> None:
    fake_judge_server.set_responder(refusing_forms({"json_schema": JSON_SCHEMA_REFUSED}))
    judge = make_judge(response_format="auto", wire_max_length=800)

    first = await judge.complete(make_request())

    assert first.text == DEFAULT_CONTENT
    ToneStyleReply.model_validate_json(first.text)
    assert forms_sent(fake_judge_server) == ["json_schema", "json_object_schema"]
    assert first.extra["response_format"] == "json_object_schema"
    assert first.extra["response_format_fallback"] is True
    assert first.extra["http_attempts"] == 1  # the refusal is not a retry: the 400 went nowhere near the policy
    # The fallback request is the json_object_schema mode's, wire adaptations included.
    wire = fake_judge_server.requests[-1].json()["response_format"]["schema"]
    assert wire["properties"]["justification"]["maxLength"] == 800
    assert judge.effective_response_format == "json_object_schema"
    assert "using 'json_object_schema'" in repr(judge)

    second = await judge.complete(make_request())
    # Remembered: straight to the form that works, no second refusal.
    assert forms_sent(fake_judge_server) == ["json_schema", "json_object_schema", "json_object_schema"]
    assert second.extra["response_format"] == "json_object_schema"
    assert second.extra["response_format_fallback"] is True

    [warning] = fallback_warnings(caplog)
    message = warning.getMessage()
    assert "json_schema" in message
    assert "json_object_schema" in message
    assert "HTTP 400" in message
    assert API_KEY not in message
    assert "Hi there" not in message  # no prompt text
    assert "not supported" not in message  # nor the server's body, which may quote the prompt


async def test_auto_mode_falls_back_to_plain_json_when_both_schema_forms_are_refused(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer, caplog: pytest.LogCaptureFixture
) -> None:
    fake_judge_server.set_responder(
        refusing_forms({"json_schema": JSON_SCHEMA_REFUSED, "json_object_schema": SCHEMA_KEY_REFUSED})
    )
    judge = make_judge(response_format="auto")

    first = await judge.complete(make_request())

    assert first.text == DEFAULT_CONTENT
    assert forms_sent(fake_judge_server) == ["json_schema", "json_object_schema", "none"]
    assert "response_format" not in fake_judge_server.requests[-1].json()
    assert (first.extra["response_format"], first.extra["response_format_fallback"]) == ("none", True)
    # The call's wall time covers the refused round trips too.
    assert first.extra["elapsed_s"] >= fake_judge_server.requests[-1].at - fake_judge_server.requests[0].at

    await judge.complete(make_request())
    assert forms_sent(fake_judge_server)[3:] == ["none"]
    assert len(fallback_warnings(caplog)) == 2  # one per downgrade


async def test_auto_mode_takes_llama_cpp_pythons_500_as_a_refusal_without_retrying_it(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.set_responder(refusing_forms({"json_schema": LLAMA_CPP_PYTHON_JSON_SCHEMA_REFUSED}))
    judge = make_judge(response_format="auto", max_retries=3)
    response = await judge.complete(make_request())
    assert forms_sent(fake_judge_server) == ["json_schema", "json_object_schema"]
    assert response.extra["response_format"] == "json_object_schema"
    assert response.extra["http_retries"] == 0


async def test_fixed_json_schema_mode_against_llama_cpp_pythons_500_is_unchanged(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer
) -> None:
    # Outside auto mode a 500 is a 500: retried, then unavailable; no fallback.
    fake_judge_server.set_responder(refusing_forms({"json_schema": LLAMA_CPP_PYTHON_JSON_SCHEMA_REFUSED}))
    with pytest.raises(JudgeUnavailable, match="HTTP 500"):
        await make_judge(max_retries=1).complete(make_request())
    assert forms_sent(fake_judge_server) == ["json_schema", "json_schema"]


async def test_fixed_json_schema_mode_refused_is_rejected_as_before(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer, caplog: pytest.LogCaptureFixture
) -> None:
    fake_judge_server.set_responder(refusing_forms({"json_schema": JSON_SCHEMA_REFUSED}))
    judge = make_judge()  # json_schema, fixed
    with pytest.raises(JudgeRejected, match=r"HTTP 400: .*json_schema is not supported") as info:
        await judge.complete(make_request())
    assert not isinstance(info.value, RequestRefused)
    assert forms_sent(fake_judge_server) == ["json_schema"]
    assert judge.effective_response_format == "json_schema"
    assert not fallback_warnings(caplog)


async def test_auto_mode_context_length_error_is_rejected_without_fallback(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer, caplog: pytest.LogCaptureFixture
) -> None:
    fake_judge_server.script(CONTEXT_LENGTH_EXCEEDED)
    judge = make_judge(response_format="auto")
    with pytest.raises(JudgeRejected, match="maximum context length") as info:
        await judge.complete(make_request())
    assert not isinstance(info.value, RequestRefused)
    assert fake_judge_server.request_count == 1
    assert judge.effective_response_format == "json_schema"
    assert not fallback_warnings(caplog)
    # And the judge is none the worse for it.
    response = await judge.complete(make_request())
    assert response.extra["response_format"] == "json_schema"


async def test_auto_mode_other_bad_request_is_rejected_without_fallback(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.script(openai_error(400, "The model `fake-model` does not exist", err="model_not_found"))
    judge = make_judge(response_format="auto")
    with pytest.raises(JudgeRejected, match="does not exist"):
        await judge.complete(make_request())
    assert fake_judge_server.request_count == 1
    assert judge.effective_response_format == "json_schema"


async def test_auto_mode_still_retries_a_transient_5xx_in_the_same_form(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.script(status(500), reply())
    judge = make_judge(response_format="auto")
    response = await judge.complete(make_request())
    assert forms_sent(fake_judge_server) == ["json_schema", "json_schema"]
    assert response.extra["http_retries"] == 1
    assert response.extra["response_format_fallback"] is False


async def test_auto_mode_plain_json_refused_too_is_rejected(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer
) -> None:
    # With no form left, a refusal-looking error on plain JSON is an ordinary rejection: no loop.
    fake_judge_server.set_default(JSON_SCHEMA_REFUSED)
    judge = make_judge(response_format="auto")
    with pytest.raises(JudgeRejected, match="HTTP 400") as info:
        await judge.complete(make_request())
    assert not isinstance(info.value, RequestRefused)
    assert forms_sent(fake_judge_server) == ["json_schema", "json_object_schema", "none"]


async def test_auto_mode_concurrent_calls_during_the_first_refusal_downgrade_once(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer, caplog: pytest.LogCaptureFixture
) -> None:
    calls = 8
    # Refusals held back 1.5 s, so every call is in flight with json_schema before the first refusal lands,
    # even on a loaded CI machine (0.3 s once let the eighth call arrive after the first refusal).
    fake_judge_server.set_responder(refusing_forms({"json_schema": JSON_SCHEMA_REFUSED}, delay=1.5))
    judge = make_judge(response_format="auto")
    formats: list[tuple[str, bool]] = []

    async def ask() -> None:
        response = await judge.complete(make_request())
        ToneStyleReply.model_validate_json(response.text)
        formats.append((response.extra["response_format"], response.extra["response_format_fallback"]))

    async with anyio.create_task_group() as tg:
        for _ in range(calls):
            tg.start_soon(ask)

    assert formats == [("json_object_schema", True)] * calls
    assert fake_judge_server.max_in_flight >= calls  # they really were in flight together
    sent = forms_sent(fake_judge_server)
    # Each call was refused at most once and then asked once in the form that works ...
    assert sent.count("json_object_schema") == calls
    assert sent.count("json_schema") == calls
    assert "none" not in sent  # ... and the refusals did not push the judge down twice
    assert judge.effective_response_format == "json_object_schema"
    assert len(fallback_warnings(caplog)) == 1

    await judge.complete(make_request())
    assert forms_sent(fake_judge_server)[-1] == "json_object_schema"
    assert len(fake_judge_server.requests) == 2 * calls + 1


async def test_auto_mode_cache_key_holds_the_configured_mode(
    make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer, tmp_path: Path
) -> None:
    params = make_judge(response_format="auto").cache_params()
    assert params["response_format"] == "auto"
    # Auto mode may end up sending the adapted llama.cpp schema, so its adaptations are in the key too.
    assert (params["wire_max_length"], params["wire_int_enum_max"]) == (1000, 64)
    assert make_judge(response_format="auto", wire_max_length=800).cache_params() != params

    fake_judge_server.set_responder(refusing_forms({"json_schema": JSON_SCHEMA_REFUSED}))
    cache = ResponseCache(tmp_path / "cache")
    try:
        first = await CachingJudge(make_judge(response_format="auto"), cache).complete(make_request())
        assert first.extra["response_format"] == "json_object_schema"
        assert fake_judge_server.request_count == 2
        # A new auto judge on the same endpoint (a restart) is served from the cache, no probing ...
        again = await CachingJudge(make_judge(response_format="auto"), cache).complete(make_request())
        assert again.cached
        assert fake_judge_server.request_count == 2
        # ... while a judge fixed to a form never reads auto's replies, even the form auto found.
        fixed = await CachingJudge(make_judge(response_format="json_object_schema"), cache).complete(make_request())
        assert not fixed.cached
        assert fake_judge_server.request_count == 3
    finally:
        cache.close()


async def test_settings_can_ask_for_auto_mode(fake_judge_server: FakeJudgeServer) -> None:
    settings = JudgeSettings(kind="openai", base_url=fake_judge_server.base_url, model="m", response_format="auto")
    judge = build_inner_judge(settings)
    assert isinstance(judge, OpenAICompatibleJudge)
    try:
        assert (judge.response_format, judge.effective_response_format) == ("auto", "json_schema")
    finally:
        await judge.aclose()
    assert JudgeSettings().response_format == "json_schema"  # the default stays OpenAI's strict form
    with pytest.raises(pydantic.ValidationError):
        JudgeSettings.model_validate({"response_format": "automatic"})


async def test_the_request_on_the_wire(make_judge: JudgeFactory, fake_judge_server: FakeJudgeServer) -> None:
    """What a call sends, header by header: the judge's own headers, the body as encoded, nothing carried
    over from the client library that could change a reply or leak (no cookie, no proxy header)."""
    request = make_request()
    fake_judge_server.script(reply(DEFAULT_CONTENT), reply(DEFAULT_CONTENT))
    judge = make_judge(seed=3)
    await judge.complete(request)
    await judge.complete(request)

    first, second = fake_judge_server.requests
    assert (first.method, first.path) == (second.method, second.path) == ("POST", "/v1/chat/completions")
    assert first.body == second.body
    assert first.json()["seed"] == 3
    headers = {k.lower(): v for k, v in first.headers.items()}
    assert headers["authorization"] == f"Bearer {API_KEY}"
    assert headers["content-type"] == "application/json"
    assert headers["accept"] == "application/json"
    assert headers["user-agent"] == "pairjudge"
    assert headers["content-length"] == str(len(first.body))
    assert not {"cookie", "proxy-authorization", "transfer-encoding"} & set(headers)
