"""The HTTP client the judges post with: httpx on the aiohttp transport (or a direct POST), and the guard
that keeps an API key off clear text off this machine.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import httpx
from httpx_aiohttp import HttpxAiohttpClient
from pydantic import SecretStr

from pairjudge.agents.errors import JudgeRejected
from pairjudge.streams.judges.wire import host_label
from pairjudge.streams.security.cleartext import cleartext_host

log = logging.getLogger(__name__)


class DirectPost:
    """POSTs to one URL through the transport an ``httpx.AsyncClient`` would use, without its per-call layers.

    ``AsyncClient.stream`` merges URL, headers and cookies into a new request, runs auth and redirect
    handling (neither used here: no auth flow, redirects never followed) and stores cookies from every
    response (a JSON API sets none we want). Measured at 128 pairs in flight, those layers cost more
    CPU than the aiohttp transport under them. This keeps what matters: the client's own transport
    for the URL (a proxy from the environment included, as the client resolved it), its default
    headers and timeouts, and the client's request hooks, run on every request as the client runs
    them. Requests and responses are httpx's own, so the callers and error handling do not change.

    When the client cannot say which transport it would use (``_transport_for_url`` is httpx's own
    method, not a public one), every request goes through ``AsyncClient.stream`` as before.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        url: httpx.URL,
        request_hooks: Sequence[Callable[[httpx.Request], Awaitable[None]]] = (),
    ) -> None:
        self._client = client
        self._url = url
        self._hooks = tuple(request_hooks)
        pick = getattr(client, "_transport_for_url", None)
        transport = pick(url) if callable(pick) else None
        self._transport: httpx.AsyncBaseTransport | None = (
            transport if isinstance(transport, httpx.AsyncBaseTransport) else None
        )
        #: The client's default headers by lower-cased name; a call's own headers replace them by name.
        self._base_headers = {name.lower(): value for name, value in client.headers.items()}
        self._timeout = client.timeout.as_dict()

    @contextlib.asynccontextmanager
    async def stream(self, body: bytes, headers: Mapping[str, str]) -> AsyncIterator[httpx.Response]:
        """The response to one POST of ``body``, its body not read yet; closed on exit."""
        if self._transport is None:
            async with self._client.stream("POST", self._url, content=body, headers=headers) as response:
                yield response
            return
        merged = dict(self._base_headers)
        for name, value in headers.items():
            merged[name.lower()] = value
        request = httpx.Request("POST", self._url, headers=merged, content=body, extensions={"timeout": self._timeout})
        for hook in self._hooks:
            await hook(request)
        response = await self._transport.handle_async_request(request)
        response.request = request
        try:
            yield response
        finally:
            await response.aclose()


class CleartextKeyRefused(JudgeRejected):
    """A request carrying the key was about to leave for somewhere the key must not go: over plain HTTP
    to a host that is not loopback (unless allowed), or to another origin than the judge's own."""


def secret_guard(
    origin: httpx.URL, secrets: Sequence[SecretStr], *, allow_cleartext: bool, label: str
) -> Callable[[httpx.Request], Awaitable[None]]:
    """An httpx request hook that refuses (``CleartextKeyRefused``) any request whose headers hold one of
    ``secrets`` when it goes to another origin than ``origin`` (scheme, host, port), or over plain HTTP
    off this machine unless ``allow_cleartext``.

    Defence in depth behind the start-up check (``streams.config.settings.check_api_key``): it holds for every
    request the client sends, a redirect's included, should redirects ever be followed, so a key reaches
    only the server it was configured for. The message names hosts, never the key.
    """
    values = [s.get_secret_value().encode() for s in secrets if s.get_secret_value()]
    home = (origin.scheme, origin.host, origin.port)

    async def guard(request: httpx.Request) -> None:
        if not values or not any(v in raw for _, raw in request.headers.raw for v in values):
            return
        url = request.url
        if (url.scheme, url.host, url.port) != home:
            raise CleartextKeyRefused(
                f"judge {label}: refusing to send its key to {url.scheme}://{host_label(url)}, "
                f"which is not the judge's own origin ({origin.scheme}://{host_label(origin)})"
            )
        host = cleartext_host(str(url))
        if host is not None and not allow_cleartext:
            raise CleartextKeyRefused(
                f"judge {label}: refusing to send its key over plain http:// to {host}, which is not a "
                "loopback address (use https://, or allow it with PAIRJUDGE_JUDGE__ALLOW_CLEARTEXT_KEY)"
            )

    return guard


def check_key_transport(base_url: httpx.URL, api_key: SecretStr | None, *, allowed: bool) -> None:
    """``ValueError`` when ``api_key`` would go over plain HTTP off this machine (``streams.security.cleartext``)."""
    if api_key is None or not api_key.get_secret_value() or allowed:
        return
    host = cleartext_host(str(base_url))
    if host is not None:
        raise ValueError(
            f"refusing to send the API key over plain http:// to {host}, which is not a loopback address; "
            "use https://, or allow it with PAIRJUDGE_JUDGE__ALLOW_CLEARTEXT_KEY"
        )


def encode_json(payload: Mapping[str, Any]) -> bytes:
    """``payload`` as compact UTF-8 JSON, as httpx's ``json=`` would send it."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def make_client(
    *,
    connect_timeout: float,
    read_timeout: float,
    max_connections: int,
    headers: dict[str, str] | None = None,
    request_hooks: Sequence[Callable[[httpx.Request], Awaitable[None]]] = (),
) -> httpx.AsyncClient:
    """An httpx client on the aiohttp transport. It never follows redirects: a redirect is an answer.

    httpx's own async pool collapses under concurrency (encode/httpx#3215, docs/design.md §8); the aiohttp
    transport holds. The pool is sized to the judge's concurrency limit, so callers never queue for a
    connection and the pool timeout cannot fire. ``request_hooks`` run before every request is sent.
    """
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    timeout = httpx.Timeout(connect=connect_timeout, read=read_timeout, write=read_timeout, pool=None)
    # HttpxAiohttpClient (not AsyncClient(transport=...)) so proxies from the environment also go through
    # aiohttp instead of silently falling back to httpx's own pool.
    client: httpx.AsyncClient = HttpxAiohttpClient(
        limits=limits,
        timeout=timeout,
        headers=headers,
        follow_redirects=False,
        event_hooks={"request": list(request_hooks), "response": []},
    )
    return client
