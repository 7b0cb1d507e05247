"""The start-up credentials check (``streams.judges.preflight``) against real HTTP servers on 127.0.0.1.

A refused key (401/403) stops start-up with ``JudgeAuthError``, whose message names the judge and the
settings but never the key. Anything that says nothing about the key (server down or hanging, no
model list, 5xx, a key that may judge but not list models) only logs a WARNING.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from pydantic import SecretStr

from pairjudge.agents.errors import JudgeRejected
from pairjudge.agents.offline import OfflineJudge
from pairjudge.streams.config.settings import JudgeSettings
from pairjudge.streams.judges.anthropic import AnthropicJudge
from pairjudge.streams.judges.factory import JudgeStack, build_judge_stack
from pairjudge.streams.judges.http import EndpointJudge
from pairjudge.streams.judges.openai import OpenAICompatibleJudge
from pairjudge.streams.judges.preflight import JudgeAuthError, endpoint_judge_of, preflight, preflight_all
from tests.fixtures.fake_anthropic_server import FakeAnthropicServer, error, fake_anthropic_server
from tests.fixtures.fake_judge_server import (
    Action,
    FakeJudgeServer,
    closed_port,
    fake_judge_server,
    hang,
    model_list,
    openai_error,
    status,
)

__all__ = ["closed_port", "fake_anthropic_server", "fake_judge_server"]

KEY = "sk-test-preflight-DO-NOT-LEAK-77e1"
WRONG = "sk-test-wrong-key-DO-NOT-LEAK-0000"
LOGGER = "pairjudge.streams.judges.preflight"

Stacks = Callable[..., JudgeStack]


@pytest.fixture
async def stacks(tmp_path: Path) -> AsyncIterator[Stacks]:
    """Judge stacks built from settings as the worker builds them; closed at the end of the test."""
    built: list[JudgeStack] = []

    def make(**settings: object) -> JudgeStack:
        defaults: dict[str, object] = {"model": "fake-model", "cache_dir": tmp_path / f"cache{len(built)}"}
        stack = build_judge_stack(JudgeSettings(**(defaults | settings)))
        built.append(stack)
        return stack

    yield make
    for stack in built:
        await stack.aclose()


def assert_no_key(text: str) -> None:
    for secret in (KEY, WRONG):
        for size in range(8, len(secret) + 1):
            assert secret[:size] not in text, f"{size} characters of a key leaked"


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


# --- OpenAI-compatible ---------------------------------------------------------------------------


async def test_openai_accepted_key_passes_with_one_authenticated_get(
    fake_judge_server: FakeJudgeServer, stacks: Stacks, caplog: pytest.LogCaptureFixture
) -> None:
    fake_judge_server.require_auth("Authorization", f"Bearer {KEY}")
    stack = stacks(kind="openai", base_url=fake_judge_server.base_url, api_key=KEY)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        await preflight(stack)
    [get] = fake_judge_server.get_requests
    assert get.path == "/v1/models"
    assert get.headers["authorization"] == f"Bearer {KEY}"
    assert fake_judge_server.request_count == 0  # no chat completion: nothing billed
    assert stack.breaker is not None
    assert stack.breaker.consecutive_failures == 0
    assert any("credentials accepted" in r.getMessage() for r in caplog.records)
    assert warnings_of(caplog) == []


async def test_openai_wrong_key_stops_start_up_without_saying_it(
    fake_judge_server: FakeJudgeServer, stacks: Stacks
) -> None:
    fake_judge_server.require_auth(
        "Authorization",
        f"Bearer {KEY}",
        # As OpenAI does: the refusal quotes (part of) the key it was sent.
        openai_error(401, f"Incorrect API key provided: {WRONG}.", error_type="invalid_request_error"),
    )
    stack = stacks(kind="openai", base_url=fake_judge_server.base_url, api_key=WRONG)
    with pytest.raises(JudgeAuthError) as info:
        await preflight(stack)
    err = info.value
    assert isinstance(err, JudgeRejected)
    assert err.retriable is False
    assert err.status == 401
    message = str(err)
    assert f"fake-model@127.0.0.1:{fake_judge_server.port}" in message
    assert "configured API key was refused" in message
    assert "PAIRJUDGE_JUDGE__API_KEY" in message
    assert "GET /v1/models answered HTTP 401: Incorrect API key provided: [REDACTED]" in message
    assert_no_key(message)
    assert_no_key(repr(err.args))
    assert len(fake_judge_server.get_requests) == 1  # not retried


async def test_openai_403_stops_start_up(fake_judge_server: FakeJudgeServer, stacks: Stacks) -> None:
    fake_judge_server.script_get(openai_error(403, "Your key has been disabled."))
    with pytest.raises(JudgeAuthError, match="HTTP 403: Your key has been disabled") as info:
        await preflight(stacks(kind="openai", base_url=fake_judge_server.base_url, api_key=KEY))
    assert info.value.status == 403


async def test_missing_key_for_a_server_that_wants_one_says_so(
    fake_judge_server: FakeJudgeServer, stacks: Stacks
) -> None:
    # A loopback server may be run without a key; this one wants one.
    fake_judge_server.require_auth("Authorization", f"Bearer {KEY}")
    stack = stacks(kind="openai", base_url=fake_judge_server.base_url)
    with pytest.raises(JudgeAuthError, match="no API key is configured"):
        await preflight(stack)
    assert "authorization" not in fake_judge_server.get_requests[0].headers


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (status(404, body=b'{"detail": "Not Found"}'), "HTTP 404: Not Found"),
        (status(405, body=b""), "HTTP 405: (empty body)"),
        (status(500), "HTTP 500"),
        (status(503, retry_after="1"), "HTTP 503"),
        (Action(status=302, headers=(("Location", "http://127.0.0.1:1/elsewhere"),)), "HTTP 302"),
        (
            # A restricted key may judge without listing models: not a bad key.
            openai_error(
                401,
                "You have insufficient permissions for this operation. Missing scopes: api.model.read.",
            ),
            "may not list models",
        ),
        (
            openai_error(403, "You have insufficient permissions for this operation. Missing scopes: api.model.read."),
            "may not list models",
        ),
    ],
)
async def test_answers_that_say_nothing_about_the_key_only_warn(
    fake_judge_server: FakeJudgeServer,
    stacks: Stacks,
    caplog: pytest.LogCaptureFixture,
    answer: Action,
    expected: str,
) -> None:
    fake_judge_server.script_get(answer)
    stack = stacks(kind="openai", base_url=fake_judge_server.base_url, api_key=KEY, max_retries=3)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await preflight(stack)
    [warning] = warnings_of(caplog)
    assert expected in warning
    assert "starting anyway" in warning
    assert len(fake_judge_server.get_requests) == 1  # one attempt, whatever the status
    assert stack.breaker is not None
    assert stack.breaker.consecutive_failures == 0  # the check is outside the breaker


async def test_a_server_that_is_down_only_warns(
    closed_port: int, stacks: Stacks, caplog: pytest.LogCaptureFixture
) -> None:
    stack = stacks(kind="openai", base_url=f"http://127.0.0.1:{closed_port}/v1", api_key=KEY)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await preflight(stack)
    [warning] = warnings_of(caplog)
    assert "cannot connect" in warning
    assert_no_key(warning)


async def test_a_hanging_server_only_warns_after_the_timeout(
    fake_judge_server: FakeJudgeServer, stacks: Stacks, caplog: pytest.LogCaptureFixture
) -> None:
    fake_judge_server.script_get(hang(30, model_list()))
    stack = stacks(kind="openai", base_url=fake_judge_server.base_url, api_key=KEY)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await preflight(stack, timeout_s=0.5)
    assert time.monotonic() - started < 5
    [warning] = warnings_of(caplog)
    assert "no answer within 0.5 s" in warning


async def test_a_bare_or_wrapped_adapter_is_checked_too(fake_judge_server: FakeJudgeServer, stacks: Stacks) -> None:
    fake_judge_server.require_auth("Authorization", f"Bearer {KEY}")
    stack = stacks(kind="openai", base_url=fake_judge_server.base_url, api_key=WRONG)
    adapter: object = stack.inner
    assert isinstance(adapter, OpenAICompatibleJudge)
    assert endpoint_judge_of(stack) is adapter
    assert endpoint_judge_of(stack.judge) is adapter  # cache -> breaker -> prices -> adapter
    with pytest.raises(JudgeAuthError):
        await preflight(stack.judge)
    async with OpenAICompatibleJudge(
        base_url=fake_judge_server.base_url + "/", model="m", api_key=SecretStr(KEY)
    ) as bare:
        await preflight(bare)
    assert [r.path for r in fake_judge_server.get_requests] == ["/v1/models", "/v1/models"]


async def test_the_offline_judge_needs_no_check(stacks: Stacks) -> None:
    stack = stacks()  # kind="offline"
    assert endpoint_judge_of(stack) is None
    await preflight(stack)
    await preflight(OfflineJudge())


# --- Anthropic --------------------------------------------------------------------------------------


async def test_anthropic_accepted_key_passes_with_the_api_headers(
    fake_anthropic_server: FakeAnthropicServer, stacks: Stacks
) -> None:
    fake_anthropic_server.require_key(KEY)
    for base_url in (fake_anthropic_server.base_url, fake_anthropic_server.base_url + "/v1"):
        await preflight(stacks(kind="anthropic", base_url=base_url, api_key=KEY))
    gets = fake_anthropic_server.get_requests
    assert [g.path for g in gets] == ["/v1/models", "/v1/models"]
    assert all(g.headers["x-api-key"] == KEY for g in gets)
    assert all(g.headers["anthropic-version"] == "2023-06-01" for g in gets)
    assert fake_anthropic_server.request_count == 0


async def test_anthropic_wrong_key_stops_start_up(fake_anthropic_server: FakeAnthropicServer, stacks: Stacks) -> None:
    fake_anthropic_server.require_key(KEY)
    with pytest.raises(JudgeAuthError) as info:
        await preflight(stacks(kind="anthropic", base_url=fake_anthropic_server.base_url, api_key=WRONG))
    message = str(info.value)
    assert "HTTP 401: authentication_error: invalid x-api-key" in message
    assert f"fake-model@127.0.0.1:{fake_anthropic_server.port}" in message
    assert_no_key(message)


async def test_anthropic_permission_error_only_warns(
    fake_anthropic_server: FakeAnthropicServer, caplog: pytest.LogCaptureFixture
) -> None:
    fake_anthropic_server.script_get(error(403, "permission_error", "not allowed to list models"))
    async with AnthropicJudge(model="claude-x", api_key=SecretStr(KEY), base_url=fake_anthropic_server.base_url) as j:
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            await preflight(j)
    [warning] = warnings_of(caplog)
    assert "may not list models" in warning


# --- several judges ------------------------------------------------------------------------------------


async def test_preflight_all_raises_the_first_refusal_and_logs_the_others(
    fake_judge_server: FakeJudgeServer,
    fake_anthropic_server: FakeAnthropicServer,
    stacks: Stacks,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake_judge_server.require_auth("Authorization", f"Bearer {KEY}")
    fake_anthropic_server.require_key(KEY)
    good = stacks(kind="openai", base_url=fake_judge_server.base_url, api_key=KEY, model="good")
    bad_openai = stacks(kind="openai", base_url=fake_judge_server.base_url, api_key=WRONG, model="bad-openai")
    bad_anthropic = stacks(
        kind="anthropic", base_url=fake_anthropic_server.base_url, api_key=WRONG, model="bad-anthropic"
    )
    await preflight_all([good, stacks()])
    with caplog.at_level(logging.ERROR, logger=LOGGER), pytest.raises(JudgeAuthError, match="bad-openai@"):
        await preflight_all([good, bad_openai, bad_anthropic])
    assert any("bad-anthropic@" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)


def test_endpoint_judges_expose_what_the_check_needs() -> None:
    judge = OpenAICompatibleJudge(base_url="http://127.0.0.1:9/v1", model="m", api_key=SecretStr(KEY))
    assert isinstance(judge, EndpointJudge)
    assert judge.models_url == "http://127.0.0.1:9/v1/models"
    assert judge.authenticated
    assert KEY not in json.dumps([judge.label, judge.models_url, repr(judge)])
