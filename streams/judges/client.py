"""The HTTP client the judges post with: one aiohttp session per endpoint, the route a request takes (the
environment's proxy, if any), and the guard that keeps an API key off clear text off this machine.

aiohttp directly, nothing over it: httpx's own async pool collapses under concurrency (encode/httpx#3215,
docs/design.md §8), and httpx on an aiohttp transport paid httpx's per-call layers on top of aiohttp's (a
direct path around them needed a private httpx method). Only public aiohttp and standard-library calls are
made here; ``tests/unit/test_private_http_contacts.py`` keeps it so for the whole of ``streams``.

What httpx did for the judges that is now said here, so that nothing changes for a deployment: the trust
store (``SSL_CERT_FILE``, else ``SSL_CERT_DIR``, else certifi's bundle), the proxy from ``HTTP_PROXY``,
``HTTPS_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` (read once, for the endpoint's URL), no cookies, redirects never
followed, idle connections kept 5 s.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import certifi
from pydantic import SecretStr

from pairjudge.agents.errors import JudgeRejected
from pairjudge.streams.security.cleartext import cleartext_host

#: How long an idle connection is kept for the next call (httpx's default, which the judges had).
KEEPALIVE_S = 5.0

_DEFAULT_PORTS = {"http": 80, "https": 443}


class CleartextKeyRefused(JudgeRejected):
    """A request carrying the key was about to leave for somewhere the key must not go: over plain HTTP
    to a host that is not loopback (unless allowed), or to another origin than the judge's own."""


Origin = tuple[str, str, int | None]


def origin_of(url: str) -> Origin:
    """(scheme, host, port) of ``url``, lower-cased, the scheme's default port filled in."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(scheme)


def _where(origin: Origin) -> str:
    """``scheme://host[:port]`` for messages, the port only when it is not the scheme's default."""
    scheme, host, port = origin
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}" + (f":{port}" if port is not None and port != _DEFAULT_PORTS.get(scheme) else "")


def secret_guard(
    origin: str, secrets: Sequence[SecretStr], *, allow_cleartext: bool, label: str
) -> aiohttp.ClientMiddlewareType:
    """An aiohttp client middleware that refuses (``CleartextKeyRefused``) any request whose headers hold one
    of ``secrets`` when it goes to another origin than ``origin``'s (scheme, host, port), or over plain HTTP
    off this machine unless ``allow_cleartext``.

    Defence in depth behind the start-up check (``streams.config.settings.check_api_key``): aiohttp runs a
    session's middlewares on every request it sends, each hop of a followed redirect included, should
    redirects ever be followed, so a key reaches only the server it was configured for. The message names
    hosts, never the key.
    """
    values = [s.get_secret_value() for s in secrets if s.get_secret_value()]
    home = origin_of(origin)

    async def guard(request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType) -> aiohttp.ClientResponse:
        if values and any(v in value for value in request.headers.values() for v in values):
            url = str(request.url)
            there = origin_of(url)
            if there != home:
                raise CleartextKeyRefused(
                    f"judge {label}: refusing to send its key to {_where(there)}, "
                    f"which is not the judge's own origin ({_where(home)})"
                )
            host = cleartext_host(url)
            if host is not None and not allow_cleartext:
                raise CleartextKeyRefused(
                    f"judge {label}: refusing to send its key over plain http:// to {host}, which is not a "
                    "loopback address (use https://, or allow it with PAIRJUDGE_JUDGE__ALLOW_CLEARTEXT_KEY)"
                )
        return await handler(request)

    return guard


def check_key_transport(base_url: str, api_key: SecretStr | None, *, allowed: bool) -> None:
    """``ValueError`` when ``api_key`` would go over plain HTTP off this machine (``streams.security.cleartext``)."""
    if api_key is None or not api_key.get_secret_value() or allowed:
        return
    host = cleartext_host(base_url)
    if host is not None:
        raise ValueError(
            f"refusing to send the API key over plain http:// to {host}, which is not a loopback address; "
            "use https://, or allow it with PAIRJUDGE_JUDGE__ALLOW_CLEARTEXT_KEY"
        )


def encode_json(payload: Mapping[str, Any]) -> bytes:
    """``payload`` as compact UTF-8 JSON."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


@dataclass(frozen=True, slots=True)
class Route:
    """How requests to one URL leave this machine: directly, or through a proxy (with its credentials)."""

    proxy: str | None = None
    proxy_headers: Mapping[str, str] | None = None


def route_for(url: str) -> Route:
    """The proxy the environment names for ``url``: ``<scheme>_PROXY`` (either case), else ``ALL_PROXY``,
    unless ``NO_PROXY`` exempts the host. Credentials in the proxy's URL become ``Proxy-Authorization``.

    Read once per endpoint, as httpx read it once per client; the standard library's readers, which aiohttp's
    own ``trust_env`` uses too (that option would also read ``~/.netrc`` and look the proxy up again on every
    request, in a thread).
    """
    parts = urllib.parse.urlsplit(url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme.lower()) or proxies.get("all")
    if not proxy or (parts.hostname and urllib.request.proxy_bypass(parts.hostname)):
        return Route()
    if "://" not in proxy:
        proxy = "http://" + proxy  # HTTP_PROXY=host:port, as curl and httpx take it
    proxied = urllib.parse.urlsplit(proxy)
    if proxied.username is None:
        return Route(proxy=proxy)
    netloc = proxied.netloc.rsplit("@", 1)[1]
    user_pass = f"{urllib.parse.unquote(proxied.username)}:{urllib.parse.unquote(proxied.password or '')}"
    credentials = "Basic " + base64.b64encode(user_pass.encode()).decode("ascii")
    bare = urllib.parse.urlunsplit((proxied.scheme, netloc, proxied.path, proxied.query, proxied.fragment))
    return Route(proxy=bare, proxy_headers={"Proxy-Authorization": credentials})


def tls_context() -> ssl.SSLContext:
    """The certificates a judge's server is checked against: ``SSL_CERT_FILE``, else ``SSL_CERT_DIR``, else
    certifi's bundle (what httpx used, so a deployment's trust does not move with the client library)."""
    if cafile := os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=cafile)
    if capath := os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=capath)
    return ssl.create_default_context(cafile=certifi.where())


def make_session(
    *,
    connect_timeout: float,
    read_timeout: float,
    max_connections: int,
    headers: Mapping[str, str] | None = None,
    middlewares: Sequence[aiohttp.ClientMiddlewareType] = (),
) -> aiohttp.ClientSession:
    """An aiohttp session for one judge endpoint; call it with the event loop running (aiohttp binds to it).

    The pool is sized to the judge's concurrency limit, so callers never queue for a connection. The
    timeouts are per socket operation (connect, then each read); the caller bounds a whole attempt. No
    cookie is kept (a JSON API sets none we want), the environment is not read (``route_for`` does that),
    and ``middlewares`` run on every request, before it is sent.
    """
    connector = aiohttp.TCPConnector(
        limit=max_connections, limit_per_host=0, keepalive_timeout=KEEPALIVE_S, ssl=tls_context()
    )
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=read_timeout),
        headers=dict(headers) if headers else None,
        cookie_jar=aiohttp.DummyCookieJar(),
        middlewares=tuple(middlewares),
        trust_env=False,
    )
