"""No part of an API key leaks through an error excerpt, wherever a server puts it.

Servers that refuse a key often quote it. The excerpt of an error body is cut several times (the head
read of the body, a window of it, the final excerpt length) and collapses runs of whitespace, so a key
echoed after padding can straddle a cut: a key redacted only *after* cutting leaked its beginning,
which no longer matched the whole key. Real servers on 127.0.0.1 echo the key at every offset around
each cut, padded with spaces (which collapse) and with letters (which do not), as raw text and inside
the providers' JSON error envelopes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

import pytest
from pydantic import SecretStr

from pairjudge.agents.errors import JudgeRejected, JudgeUnavailable
from pairjudge.agents.judge import ChatMessage, JudgeRequest
from pairjudge.schemas.replies import ToneStyleReply
from pairjudge.streams.judges.anthropic import AnthropicJudge
from pairjudge.streams.judges.openai import OpenAICompatibleJudge
from pairjudge.streams.judges.wire import (
    ERROR_EXCERPT_CHARS,
    MIN_PARTIAL_SECRET_CHARS,
    REDACTED,
    describe_transport_error,
    excerpt,
    redact,
    redact_edge,
)
from tests.fixtures.fake_anthropic_server import FakeAnthropicServer, fake_anthropic_server
from tests.fixtures.fake_judge_server import Action, FakeJudgeServer, fake_judge_server

__all__ = ["fake_anthropic_server", "fake_judge_server"]

KEY = "Zq9vKEYxx-DO-NOT-LEAK-4f1c2a7e9b30d1e5"
#: The head of an error body that is read (``JSONEndpoint._round_trip``).
HEAD_BYTES = 4096

#: Offsets of the key's first character around every cut: the final excerpt length, the old byte
#: window (4 x the length: 800), and the end of the head read of the body.
OFFSETS = [
    *range(ERROR_EXCERPT_CHARS - len(KEY) - 2, ERROR_EXCERPT_CHARS + 3),
    *range(4 * ERROR_EXCERPT_CHARS - len(KEY) - 2, 4 * ERROR_EXCERPT_CHARS + 3),
    *range(HEAD_BYTES - len(KEY) - 2, HEAD_BYTES + 3),
]


def leaked(text: str, secret: str = KEY) -> list[str]:
    """Pieces of ``secret`` in ``text``: any beginning of MIN_PARTIAL_SECRET_CHARS or more, any 8 in a row."""
    pieces = [secret[:n] for n in range(MIN_PARTIAL_SECRET_CHARS, len(secret) + 1) if secret[:n] in text]
    pieces += [secret[i : i + 8] for i in range(len(secret) - 7) if secret[i : i + 8] in text]
    return pieces


def request() -> JudgeRequest:
    return JudgeRequest(
        template="tone_style",
        messages=(ChatMessage("system", "Compare."), ChatMessage("user", "<a>Hi</a><b>Hello</b>")),
        response_schema=ToneStyleReply.model_json_schema(by_alias=True),
        schema_name="ToneStyleReply",
    )


Body = Callable[[str], bytes]

#: How a server may put the padded key in an error body.
BODIES: dict[str, Body] = {
    "raw": lambda text: text.encode(),
    "openai-json": lambda text: json.dumps({"error": {"message": text, "code": "invalid_api_key"}}).encode(),
    "anthropic-json": lambda text: json.dumps(
        {"type": "error", "error": {"type": "authentication_error", "message": text}}
    ).encode(),
}


def echoes(form: Body, pad: str, status: int = 401) -> Iterable[Action]:
    for offset in OFFSETS:
        text = pad * offset + KEY + " was refused"
        yield Action(status=status, body=form(text))


@pytest.mark.parametrize("pad", [" ", "x", "\n"])
@pytest.mark.parametrize("form", sorted(BODIES))
async def test_openai_error_excerpts_never_leak_the_key(
    fake_judge_server: FakeJudgeServer, form: str, pad: str
) -> None:
    actions = list(echoes(BODIES[form], pad))
    fake_judge_server.script(*actions)
    async with OpenAICompatibleJudge(
        base_url=fake_judge_server.base_url, model="m", api_key=SecretStr(KEY), response_format="none"
    ) as judge:
        for offset in OFFSETS:
            with pytest.raises(JudgeRejected) as info:
                await judge.complete(request())
            message = str(info.value)
            assert leaked(message) == [], f"offset {offset}: {message[-80:]!r}"
    assert fake_judge_server.request_count == len(actions)


@pytest.mark.parametrize("pad", [" ", "x"])
@pytest.mark.parametrize("form", ["raw", "anthropic-json"])
async def test_anthropic_error_excerpts_never_leak_the_key(
    fake_anthropic_server: FakeAnthropicServer, form: str, pad: str
) -> None:
    fake_anthropic_server.script(*echoes(BODIES[form], pad, status=403))
    async with AnthropicJudge(model="m", api_key=SecretStr(KEY), base_url=fake_anthropic_server.base_url) as judge:
        for offset in OFFSETS:
            with pytest.raises(JudgeRejected) as info:
                await judge.complete(request())
            assert leaked(str(info.value)) == [], f"offset {offset}"


@pytest.mark.parametrize("pad", [" ", "x"])
async def test_retried_errors_and_malformed_replies_never_leak_the_key(
    fake_judge_server: FakeJudgeServer, pad: str
) -> None:
    # 5xx excerpts end in JudgeUnavailable; a 200 that is not a completion is excerpted at 80/120 chars.
    offsets = [*range(300, 340), *range(460, 500), *range(180, 220)]
    async with OpenAICompatibleJudge(
        base_url=fake_judge_server.base_url, model="m", api_key=SecretStr(KEY), response_format="none", max_retries=0
    ) as judge:
        for offset in offsets:
            text = pad * offset + KEY + " tail"
            fake_judge_server.script(
                Action(status=503, body=text.encode()),
                Action(status=200, body=json.dumps({"error": {"message": text}}).encode()),
                Action(status=200, body=text.encode()),
            )
            for _ in range(3):
                with pytest.raises(JudgeUnavailable) as info:
                    await judge.complete(request())
                assert leaked(str(info.value)) == [], f"offset {offset}: {str(info.value)[-60:]!r}"


# --- the functions themselves -----------------------------------------------------------------------


def test_excerpt_redacts_before_cutting() -> None:
    for offset in range(700, 820):
        for pad in (" ", "x", "\t"):
            out = excerpt((pad * offset + KEY).encode(), [KEY])
            assert leaked(out) == [], (offset, pad)
            assert len(out) <= ERROR_EXCERPT_CHARS + len(REDACTED)


def test_excerpt_redacts_a_key_cut_by_the_end_of_the_body() -> None:
    # The head of a longer body ends inside the key.
    for size in range(MIN_PARTIAL_SECRET_CHARS, len(KEY)):
        out = excerpt((" " * 300 + KEY[:size]).encode(), [KEY])
        assert out == REDACTED, size
    # A stub shorter than that is no secret and stays (it would match ordinary text too often).
    assert excerpt(b"the code Zq9", [KEY]) == "the code Zq9"


def test_redact_and_redact_edge() -> None:
    assert redact(f"a {KEY} b {KEY}", [KEY, None, ""]) == f"a {REDACTED} b {REDACTED}"
    # The longer of two secrets that overlap is replaced whole.
    assert redact("key=abcdef123456", ["abcdef", "abcdef123456"]) == f"key={REDACTED}"
    assert redact_edge(f"text {KEY[:10]}", [KEY]) == f"text {REDACTED}"
    assert redact_edge(f"text {KEY}", [KEY]) == f"text {KEY}"  # whole secrets are redact()'s job
    assert redact_edge("text Zq9", [KEY]) == "text Zq9"
    assert redact_edge("", [KEY]) == ""


def test_transport_error_descriptions_are_scrubbed_before_they_are_cut() -> None:
    exc = ValueError("header value " + " " * 100 + KEY)
    described = describe_transport_error(exc, [KEY])
    assert leaked(described) == []
    assert described.startswith("transport error (ValueError: header value")


def test_redact_edge_takes_the_longest_beginning_of_any_secret() -> None:
    # "123456789" ends the text; it begins the second (shorter) secret, and only "56789" begins the first.
    assert redact_edge("id 123456789", ["56789abcdefghijk", "123456789xy"]) == f"id {REDACTED}"
