"""A judge's key reaches only its own server, and never travels in clear text off this machine.

Real HTTP servers on 127.0.0.1. To see what would cross a network, one of them is the HTTP proxy
(``HTTP_PROXY``) through which a request to a remote ``http://`` judge would go: whatever reaches it
would have crossed the wire in clear. Another redirects to a third, a different origin, which must
never see the key. Each refusal is paired with the same request allowed (or unguarded), which does
deliver the key: the setup can show a leak, so the refusals mean something.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from pairjudge.agents.errors import JudgeRejected
from pairjudge.agents.judge import ChatMessage, JudgeRequest
from pairjudge.schemas.replies import ToneStyleReply
from pairjudge.streams.judges.anthropic import AnthropicJudge
from pairjudge.streams.judges.client import CleartextKeyRefused, make_session, secret_guard
from pairjudge.streams.judges.http import JSONEndpoint
from pairjudge.streams.judges.openai import OpenAICompatibleJudge
from pairjudge.streams.judges.wire import RetryPolicy
from tests.fixtures.fake_judge_server import Action, FakeJudgeServer, fake_judge_server

__all__ = ["fake_judge_server"]

KEY = "sk-live-Zq9vKEYxx-DO-NOT-LEAK-4f1c2a7e"
REMOTE = "http://judge.example.com/v1"


def request() -> JudgeRequest:
    return JudgeRequest(
        template="tone_style",
        messages=(ChatMessage("system", "Compare."), ChatMessage("user", "<a>Hi</a><b>Hello</b>")),
        response_schema=ToneStyleReply.model_json_schema(by_alias=True),
        schema_name="ToneStyleReply",
    )


def carried_key(server: FakeJudgeServer) -> list[str]:
    """Every recorded request (POST or GET) whose headers hold the key."""
    return [r.path for r in [*server.requests, *server.get_requests] if any(KEY in v for v in r.headers.values())]


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeJudgeServer]:
    """A server on 127.0.0.1 acting as the HTTP proxy every plain-HTTP request goes through."""
    server = FakeJudgeServer().start()
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.port}")
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{server.port}")
    try:
        yield server
    finally:
        server.stop()


def endpoint(url: str, *, allow: bool = False) -> JSONEndpoint:
    return JSONEndpoint(
        url=url,
        label="m@judge.example.com",
        policy=RetryPolicy(max_retries=0),
        connect_timeout=2.0,
        read_timeout=5.0,
        secrets=(SecretStr(KEY),),
        allow_cleartext_secrets=allow,
    )


async def test_a_key_never_goes_over_plain_http_to_a_remote_judge(wire: FakeJudgeServer) -> None:
    # The adapter layer on its own (as a base_url from another path would reach it): refused, unsent.
    guarded = endpoint(REMOTE + "/chat/completions")
    try:
        with pytest.raises(CleartextKeyRefused) as err:
            await guarded.post({"model": "m"}, {"Authorization": f"Bearer {KEY}"})
        assert "judge.example.com" in str(err.value)
        assert KEY not in str(err.value)
        probe = await guarded.probe(REMOTE + "/models", {"Authorization": f"Bearer {KEY}"}, timeout_s=5)
        assert probe.status is None
        assert probe.failure is not None
        assert "plain http://" in probe.failure
        # A request without the key may go: the guard is about the key, not the host.
        await guarded.post({"model": "m"})
    finally:
        await guarded.aclose()
    assert carried_key(wire) == []
    assert len(wire.requests) == 1  # only the keyless one

    # The judge itself refuses to be built that way.
    with pytest.raises(ValueError, match=r"judge\.example\.com"):
        OpenAICompatibleJudge(base_url=REMOTE, model="m", api_key=SecretStr(KEY))
    assert carried_key(wire) == []

    # Allowed by its switch, the same judge does send the key in clear: the wire sees it.
    async with OpenAICompatibleJudge(
        base_url=REMOTE, model="m", api_key=SecretStr(KEY), allow_cleartext_key=True, max_retries=0
    ) as allowed:
        response = await allowed.complete(request())
        assert response.text
    assert carried_key(wire) == ["http://judge.example.com/v1/chat/completions"]


def redirect_to(url: str) -> Action:
    return Action(status=307, body=b"", headers=(("Location", url), ("Content-Type", "text/plain")))


@pytest.fixture
def elsewhere() -> Iterator[FakeJudgeServer]:
    """Another origin (another port on 127.0.0.1) that a redirect points to."""
    server = FakeJudgeServer().start()
    try:
        yield server
    finally:
        server.stop()


async def test_a_redirect_is_an_answer_and_never_carries_the_key(
    fake_judge_server: FakeJudgeServer, elsewhere: FakeJudgeServer
) -> None:
    fake_judge_server.set_default(redirect_to(elsewhere.base_url + "/chat/completions"))
    async with OpenAICompatibleJudge(
        base_url=fake_judge_server.base_url, model="m", api_key=SecretStr(KEY), max_retries=0
    ) as judge:
        with pytest.raises(JudgeRejected, match="307"):
            await judge.complete(request())
    async with AnthropicJudge(
        base_url=fake_judge_server.base_url.removesuffix("/v1"), model="m", api_key=SecretStr(KEY), max_retries=0
    ) as anthropic:
        with pytest.raises(JudgeRejected, match="307"):
            await anthropic.complete(request())
    assert len(carried_key(fake_judge_server)) == 2  # the judge's own server got the key, as it should
    assert elsewhere.requests == []


async def test_the_guard_stops_a_followed_redirect_to_another_origin(
    fake_judge_server: FakeJudgeServer, elsewhere: FakeJudgeServer
) -> None:
    """Should redirects ever be followed, the guard still keeps the key home.

    aiohttp drops ``Authorization`` on a redirect to another origin, but not ``x-api-key`` (Anthropic's
    header): unguarded, the other origin receives it.
    """
    target = fake_judge_server.base_url + "/chat/completions"
    fake_judge_server.set_default(redirect_to(elsewhere.base_url + "/chat/completions"))
    headers = {"x-api-key": KEY}

    unguarded = make_session(connect_timeout=2, read_timeout=5, max_connections=2)
    try:
        async with unguarded.post(target, json={}, headers=headers, allow_redirects=True) as response:
            assert response.status == 200
    finally:
        await unguarded.close()
    assert carried_key(elsewhere) == ["/v1/chat/completions"]  # the leak the guard exists for

    before = len(elsewhere.requests)
    guard = secret_guard(target, (SecretStr(KEY),), allow_cleartext=False, label="m@127.0.0.1")
    guarded = make_session(connect_timeout=2, read_timeout=5, max_connections=2, middlewares=(guard,))
    try:
        with pytest.raises(CleartextKeyRefused, match="not the judge's own origin") as err:
            async with guarded.post(target, json={}, headers=headers, allow_redirects=True):
                pass
        assert KEY not in str(err.value)
    finally:
        await guarded.close()
    assert len(elsewhere.requests) == before
    assert len(carried_key(fake_judge_server)) == 2  # the first hop, to the judge's own origin, went both times
