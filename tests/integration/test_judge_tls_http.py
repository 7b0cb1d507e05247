"""A judge on ``https://`` checks its server's certificate against the trust store a deployment names.

A real HTTPS server on 127.0.0.1 (``aiohttp.web``), its certificate signed by a throwaway CA made by ``openssl``
(``tests/fixtures/otlp_tls.py``). The judges' client reads ``SSL_CERT_FILE`` as httpx did
(``streams.judges.client.tls_context``): naming the CA, the call goes through, with the key; naming another CA,
or nothing (certifi's public roots), the server is refused before any request is sent.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from pydantic import SecretStr

from pairjudge.agents.errors import JudgeUnavailable
from pairjudge.agents.judge import ChatMessage, JudgeRequest
from pairjudge.schemas.replies import ToneStyleReply
from pairjudge.streams.judges.openai import OpenAICompatibleJudge
from tests.fixtures.fake_judge_server import completion
from tests.fixtures.otlp_tls import TLSMaterial, tls_material

__all__ = ["tls_material"]

KEY = "sk-tls-test-key-0123456789"
CONTENT = json.dumps({"winner": "A", "confidence": 0.9})


@dataclass
class Seen:
    authorizations: list[str] = field(default_factory=list)


@pytest.fixture
async def https_judge_server(tls_material: TLSMaterial) -> AsyncIterator[tuple[str, Seen]]:
    seen = Seen()

    async def chat(request: web.Request) -> web.Response:
        seen.authorizations.append(request.headers.get("Authorization", ""))
        return web.json_response(completion(CONTENT))

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls_material.server_cert, tls_material.server_key)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"https://127.0.0.1:{port}/v1", seen
    finally:
        await runner.cleanup()


def request() -> JudgeRequest:
    return JudgeRequest(
        template="tone_style",
        messages=(ChatMessage("system", "Compare."), ChatMessage("user", "<a>Hi</a><b>Hello</b>")),
        response_schema=ToneStyleReply.model_json_schema(by_alias=True),
        schema_name="ToneStyleReply",
    )


async def call(base_url: str) -> str:
    async with OpenAICompatibleJudge(
        base_url=base_url, model="m", api_key=SecretStr(KEY), max_retries=0, connect_timeout=5, read_timeout=5
    ) as judge:
        return (await judge.complete(request())).text


async def test_the_ca_named_by_ssl_cert_file_is_trusted(
    https_judge_server: tuple[str, Seen], tls_material: TLSMaterial, monkeypatch: pytest.MonkeyPatch
) -> None:
    base_url, seen = https_judge_server
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_material.ca))
    assert await call(base_url) == CONTENT
    assert seen.authorizations == [f"Bearer {KEY}"]


@pytest.mark.parametrize("trust", ["another CA", "certifi"])
async def test_a_server_outside_the_trust_store_is_refused_before_anything_is_sent(
    https_judge_server: tuple[str, Seen], tls_material: TLSMaterial, monkeypatch: pytest.MonkeyPatch, trust: str
) -> None:
    base_url, seen = https_judge_server
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    if trust == "another CA":
        monkeypatch.setenv("SSL_CERT_FILE", str(tls_material.other_ca))
    else:
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with pytest.raises(JudgeUnavailable, match="certificate") as err:
        await call(base_url)
    assert KEY not in str(err.value)
    assert seen.authorizations == []
