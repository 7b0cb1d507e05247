"""HTTP plumbing shared by the HTTP judges: client, retry policy, ``Retry-After``, capped reads, redaction.

The judges translate everything here into ``agents.errors`` at their boundary; nothing in this module
leaks httpx or aiohttp exceptions to the core. ``JSONEndpoint`` is that boundary packaged for reuse: one
POST with retries, timeouts, a concurrency cap and a body cap, failing only with ``JudgeUnavailable`` or
``JudgeRejected``; a judge adds its wire format on top (``streams/judges/openai.py``,
``streams/judges/anthropic.py``).
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import logging
import math
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self

import aiohttp
import anyio
import httpx
from httpx_aiohttp import HttpxAiohttpClient
from pydantic import SecretStr
from tenacity import AsyncRetrying, RetryCallState, RetryError, retry_if_exception_type

from pairjudge.agents.errors import JudgeRejected, JudgeUnavailable
from pairjudge.agents.judge import JudgeIdentity
from pairjudge.streams.security.cleartext import cleartext_host

log = logging.getLogger(__name__)

#: Statuses worth another try: rate limiting, overload, gateway trouble. 408 is a timeout by another name.
RETRIABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})

#: A reply to a judge prompt is a few KiB; anything near this is a misbehaving server, not a verdict.
DEFAULT_MAX_RESPONSE_BYTES = 1 << 20

#: How much of an error body we keep for messages: enough to see "invalid model", not enough to dump a page.
ERROR_EXCERPT_CHARS = 200

#: What a secret is replaced with wherever it appears.
REDACTED = "[REDACTED]"
#: The shortest beginning of a secret that is cut out when a text *ends* with it: what a cut through a
#: secret leaves behind. Shorter stubs ("sk-") carry no secret and would match ordinary text too often.
MIN_PARTIAL_SECRET_CHARS = 4


class RetriableHTTPError(Exception):
    """One attempt failed in a way another attempt may fix. Internal to the judges' retry loops."""

    def __init__(self, reason: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.retry_after = retry_after


class ResponseTooLargeError(Exception):
    """The body passed the cap; reading stopped there."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Backoff for one judge call, in seconds. ``max_retries`` counts retries, so attempts = max_retries + 1."""

    max_retries: int = 3
    backoff_initial: float = 0.5
    backoff_max: float = 20.0
    #: A server asking us to wait longer than this is treated as down for now: holding a worker slot for
    #: minutes helps nobody, and the stream edge can retry the pair later.
    max_retry_after: float = 60.0

    def backoff(self, retry_number: int) -> float:
        """Exponential backoff with "equal jitter": half fixed, half random, so bursts of callers spread out."""
        ceiling = min(self.backoff_max, self.backoff_initial * (2.0 ** max(retry_number - 1, 0)))
        return ceiling / 2 + random.uniform(0, ceiling / 2)  # noqa: S311 - jitter, not security

    def wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, RetriableHTTPError) and exc.retry_after is not None:
            # Honour the server's figure exactly, plus a little jitter on top (never below it) so every
            # worker told "1 s" does not come back in the same millisecond.
            return exc.retry_after + random.uniform(0, min(0.25, exc.retry_after * 0.1))  # noqa: S311
        return self.backoff(state.attempt_number)

    def should_stop(self, state: RetryCallState) -> bool:
        if state.attempt_number > self.max_retries:
            return True
        exc = state.outcome.exception() if state.outcome is not None else None
        return (
            isinstance(exc, RetriableHTTPError)
            and exc.retry_after is not None
            and exc.retry_after > self.max_retry_after
        )

    def retrying(self) -> AsyncRetrying:
        return AsyncRetrying(
            retry=retry_if_exception_type(RetriableHTTPError),
            stop=self.should_stop,
            wait=self.wait,
            reraise=False,
        )


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date. ``None`` if absent/garbled."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT by definition
        when = when.replace(tzinfo=UTC)
    current = now if now is not None else time.time()
    return max(0.0, when.timestamp() - current)


def format_http_date(seconds_from_now: float) -> str:
    """An HTTP date ``seconds_from_now`` in the future (for servers and tests)."""
    moment = datetime.fromtimestamp(time.time() + seconds_from_now, tz=UTC)
    return email.utils.format_datetime(moment, usegmt=True)


async def read_capped(response: httpx.Response, limit: int) -> bytes:
    """Read a streamed body, stopping as soon as it passes ``limit`` bytes (decoded)."""
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ResponseTooLargeError(f"declared {declared} bytes")
    chunks: list[bytes] = []
    total = 0
    async for chunk in response.aiter_bytes():
        total += len(chunk)
        if total > limit:
            raise ResponseTooLargeError(f"more than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_head(response: httpx.Response, limit: int) -> bytes:
    """The first ``limit`` bytes of a streamed body (for error excerpts); the rest is never read."""
    chunks: list[bytes] = []
    total = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        total += len(chunk)
        if total >= limit:
            break
    return b"".join(chunks)[:limit]


def _secret_values(secrets: Iterable[str | None]) -> list[str]:
    # Longest first, so a secret that contains another is replaced whole.
    return sorted({s for s in secrets if s}, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """Remove secret values from text that may echo them (some servers quote the key they refused).

    Only whole occurrences: a text that was cut may still end with a secret's beginning, which is
    :func:`redact_edge`'s job. Redact a text *before* cutting it, then its edge.
    """
    for secret in _secret_values(secrets):
        text = text.replace(secret, REDACTED)
    return text


def redact_edge(text: str, secrets: Iterable[str | None], *, min_chars: int = MIN_PARTIAL_SECRET_CHARS) -> str:
    """``text`` with a secret's beginning at its very end replaced, as a cut through the secret leaves it.

    The longest beginning of any secret that ``text`` ends with, if it has at least ``min_chars``
    characters, becomes ``[REDACTED]``. Whole secrets are :func:`redact`'s job.
    """
    longest = 0
    for secret in _secret_values(secrets):
        for size in range(min(len(secret) - 1, len(text)), max(min_chars, longest + 1) - 1, -1):
            if text.endswith(secret[:size]):
                longest = size
                break
    return text[: len(text) - longest] + REDACTED if longest else text


def excerpt(body: bytes, secrets: Iterable[str | None] = (), limit: int = ERROR_EXCERPT_CHARS) -> str:
    """A short, printable, secret-free excerpt of an untrusted body, for error messages.

    Secrets are cut out of the whole decoded body before anything is shortened, and again at every
    place where the text is cut (the body's own end, which may be a read cut short, included): a cut
    through a secret would otherwise leave its beginning, which no longer matches the whole secret,
    and collapsing a run of padding could then bring it into the excerpt. The result is at most
    ``limit`` characters, or a few more when a secret's beginning at the cut became ``[REDACTED]``.
    """
    values = _secret_values(secrets)
    text = redact(body.decode("utf-8", errors="replace"), values)
    text = redact_edge(text, values)  # the body may itself be the head of a longer one
    # Bounded work for a large body: only a window is made printable. Its cut is a cut like any other.
    window = text[: limit * 4]
    if len(window) < len(text):
        window = redact_edge(window, values)
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in window).split())
    # Dropping non-printable characters and spaces may have put a secret's beginning at the end.
    text = redact_edge(text, values)
    if len(text) <= limit:
        return text
    return redact_edge(text[: limit - 1], values) + "…"


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


def _encode_json(payload: Mapping[str, Any]) -> bytes:
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

    httpx's own async pool collapses under concurrency (encode/httpx#3215, DESIGN §8); the aiohttp
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


def describe_transport_error(exc: BaseException, secrets: Iterable[str | None] = ()) -> str:
    """A short, accurate reason for a failed round trip, without any of ``secrets``.

    httpx-aiohttp maps a refused connection (aiohttp ``ClientConnectorError``) to ``httpx.ConnectTimeout``,
    which would send whoever is on call looking for a slow server instead of a dead one; the aiohttp
    cause it chains tells the truth.
    """
    cause = exc.__cause__ if isinstance(exc.__cause__, aiohttp.ClientError) else exc
    if isinstance(cause, aiohttp.ClientConnectorError):
        return f"cannot connect ({cause.os_error.strerror or type(cause.os_error).__name__})"
    if isinstance(cause, aiohttp.ServerTimeoutError | httpx.TimeoutException | TimeoutError):
        return f"timeout ({type(cause).__name__})"
    if isinstance(cause, aiohttp.ServerDisconnectedError | httpx.RemoteProtocolError):
        return f"server disconnected ({type(cause).__name__})"
    return f"transport error ({type(cause).__name__}: {excerpt(str(cause).encode(), secrets, limit=120)})"


# --- a reusable POST-JSON boundary for HTTP judges ------------------------------------------------------


def parse_base_url(base_url: str, *, example: str) -> httpx.URL:
    """``base_url`` parsed, or ``ValueError`` unless it is an absolute http(s) URL (``example`` shows one)."""
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL:
        raise ValueError("base_url is not a valid URL") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(f"base_url must be an absolute http(s) URL, e.g. {example}")
    return url


def host_label(url: httpx.URL) -> str:
    """``host[:port]`` for messages: never the userinfo part, which could carry credentials."""
    return f"{url.host}:{url.port}" if url.port else url.host


def public_url(url: httpx.URL) -> str:
    """``url`` without userinfo, query, fragment or trailing slash: who answers, safe to log and hash.

    For cache keys: two endpoints serving one model name must not share replies (a local server
    answers with whatever model it loaded), while credentials must never end up in a key.
    """
    host = f"[{url.host}]" if ":" in url.host else url.host
    netloc = f"{host}:{url.port}" if url.port else host
    return f"{url.scheme}://{netloc}{url.path.rstrip('/')}"


def parse_retry_after_headers(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from a response's headers: ``retry-after-ms`` if usable, else ``Retry-After``.

    Anthropic (and OpenAI) send ``retry-after-ms`` next to ``Retry-After`` and their SDKs prefer it: it
    has millisecond precision where ``Retry-After`` rounds up to whole seconds. ``headers`` should look
    names up case-insensitively (``httpx.Headers`` does).
    """
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis.strip())
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value / 1000.0
    return parse_retry_after(headers.get("retry-after"))


@dataclass(frozen=True, slots=True)
class PostResult:
    """A 2xx body and how it was obtained."""

    body: bytes
    #: The successful attempt's round trip, in seconds (backoff sleeps excluded).
    latency_s: float
    attempts: int
    retry_reasons: tuple[str, ...]
    #: Wall time for the whole call, backoff sleeps included.
    elapsed_s: float
    #: The successful response's headers, names lower-cased.
    headers: Mapping[str, str]

    @property
    def retries(self) -> int:
        return self.attempts - 1

    def extra(self) -> dict[str, Any]:
        """The ``JudgeResponse.extra`` entries every HTTP judge reports about how its call went."""
        return {
            "http_attempts": self.attempts,
            "http_retries": self.retries,
            "http_retry_reasons": list(self.retry_reasons),
            "elapsed_s": self.elapsed_s,
        }


#: Turns an error body into a short detail for messages (``None``: fall back to a plain excerpt). Its
#: result is scrubbed of secrets and clipped like any excerpt, so it may quote the body freely.
ErrorDetail = Callable[[bytes], str | None]

#: Tells, from an error status and the head of its body, that the server refused *how* the request was
#: put (a request form it does not support), so the caller can re-send it in another form. It sees
#: untrusted bytes: it must not raise, and should be specific (a wrong guess is a wrong fallback).
RefusalCheck = Callable[[int, bytes], bool]


class RequestRefused(JudgeRejected):
    """A non-2xx answer that the caller's ``RefusalCheck`` recognised; never retried, whatever its status.

    A ``JudgeRejected``, so a caller that does not handle it fails as for any rejection.
    """

    status: int

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message, status=status)


#: Statuses that say the credentials were refused: a missing, wrong, revoked or under-privileged key.
AUTH_STATUSES = frozenset({401, 403})


class JudgeAuthError(JudgeRejected):
    """The judge refused our credentials (HTTP 401 or 403): never retried, since no retry fixes a key.

    A ``JudgeRejected``, so the core files it like any refusal ("judge_rejected"). The message names
    the judge (model and host) and carries a scrubbed excerpt of the server's answer, never the key.
    """

    status: int

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message, status=status)


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """The answer to one GET (see ``JSONEndpoint.probe``), or why none came."""

    #: The HTTP status; None when no answer arrived (then ``failure`` says why).
    status: int | None
    #: A scrubbed excerpt of an error body ("" for a 2xx, which is not read).
    detail: str = ""
    #: Why no status arrived: refused connection, timeout, bad URL. Scrubbed.
    failure: str | None = None


class JSONEndpoint:
    """POST JSON to one URL as a judge would: retries, timeouts, concurrency and body caps, redaction.

    Failures come out as ``agents.errors`` only: connect errors, timeouts, truncated bodies and the
    ``retriable_statuses`` (plus every 5xx) are retried with ``policy`` (honouring ``retry-after-ms`` /
    ``Retry-After``) and end as ``JudgeUnavailable``; any other non-2xx is ``JudgeRejected`` at once; an
    oversized or undecodable 2xx body is ``JudgeUnavailable`` without a retry (a server that sent 2 MiB
    once will do it again); an error the caller's ``refused`` check (see ``post``) recognises is
    ``RequestRefused`` at once. ``secrets`` are scrubbed from every message, ``label`` names the endpoint in
    them (never put credentials in it). Safe to use concurrently; ``aclose()`` when done.
    """

    def __init__(
        self,
        *,
        url: str,
        label: str,
        policy: RetryPolicy,
        connect_timeout: float,
        read_timeout: float,
        attempt_timeout: float | None = None,
        max_concurrency: int = 32,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        headers: Mapping[str, str] | None = None,
        secrets: Sequence[SecretStr | None] = (),
        retriable_statuses: frozenset[int] = RETRIABLE_STATUSES,
        error_detail: ErrorDetail | None = None,
        allow_cleartext_secrets: bool = False,
    ) -> None:
        if max_concurrency < 1 or max_response_bytes < 1:
            raise ValueError("max_concurrency and max_response_bytes must be >= 1")
        self._url = url
        self._label = label
        self._policy = policy
        self._attempt_timeout = attempt_timeout if attempt_timeout is not None else connect_timeout + read_timeout
        self._max_concurrency = max_concurrency
        self._max_response_bytes = max_response_bytes
        self._secrets = tuple(s for s in secrets if s is not None)
        self._retriable_statuses = retriable_statuses
        self._error_detail = error_detail
        # Created on first use: anyio primitives want a running event loop on older anyio releases.
        self._limiter: anyio.CapacityLimiter | None = None
        self._closed = False
        # Every request carrying a secret goes to this URL's origin only, and not over plain HTTP off
        # this machine unless allowed: the key cannot leave by another path (``secret_guard``).
        guard = secret_guard(httpx.URL(url), self._secrets, allow_cleartext=allow_cleartext_secrets, label=label)
        self._client = make_client(
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            max_connections=max_concurrency,
            headers=dict(headers) if headers else None,
            request_hooks=(guard,),
        )
        self._direct = DirectPost(self._client, httpx.URL(url), (guard,))

    @property
    def policy(self) -> RetryPolicy:
        return self._policy

    @property
    def max_response_bytes(self) -> int:
        return self._max_response_bytes

    @property
    def closed(self) -> bool:
        return self._closed

    async def aclose(self) -> None:
        self._closed = True
        await self._client.aclose()

    def __repr__(self) -> str:
        return f"JSONEndpoint(label={self._label!r})"

    def _secret_values(self) -> list[str]:
        return [s.get_secret_value() for s in self._secrets]

    def scrub(self, text: str) -> str:
        """``text`` without any of the secrets (whole ones: cut a text only after scrubbing it)."""
        return redact(text, self._secret_values())

    def excerpt(self, body: bytes, limit: int = ERROR_EXCERPT_CHARS) -> str:
        """A short, printable, secret-free excerpt of an untrusted body."""
        return excerpt(body, self._secret_values(), limit)

    async def probe(self, url: str, headers: Mapping[str, str] | None = None, *, timeout_s: float) -> ProbeResult:
        """One GET of ``url`` with this endpoint's client, for a start-up check: no retries, no limiter.

        Never raises for what the server does: the status (with a scrubbed excerpt of an error body),
        or the reason no answer came within ``timeout_s`` seconds. A 2xx body is not read.
        """
        if self._closed:
            raise RuntimeError(f"judge {self._label} is closed")
        try:
            with anyio.fail_after(timeout_s):
                async with self._client.stream("GET", url, headers=dict(headers or {})) as resp:
                    status = resp.status_code
                    if 200 <= status < 300:
                        return ProbeResult(status)
                    try:
                        head = await read_head(resp, 4096)
                    except httpx.HTTPError:
                        head = b""
                    return ProbeResult(status, self._detail(head))
        except TimeoutError:
            return ProbeResult(None, failure=f"no answer within {timeout_s:g} s")
        except CleartextKeyRefused as exc:
            return ProbeResult(None, failure=str(exc))
        except httpx.UnsupportedProtocol as exc:
            return ProbeResult(None, failure=f"unsupported URL ({self.excerpt(str(exc).encode(), 120)})")
        except (httpx.TransportError, aiohttp.ClientError) as exc:
            return ProbeResult(None, failure=describe_transport_error(exc, self._secret_values()))
        except httpx.HTTPError as exc:
            return ProbeResult(None, failure=f"{type(exc).__name__}: {self.excerpt(str(exc).encode(), 120)}")

    async def post(
        self,
        payload: Mapping[str, Any] | bytes,
        headers: Mapping[str, str] | None = None,
        *,
        refused: RefusalCheck | None = None,
    ) -> PostResult:
        """POST ``payload`` as JSON until a 2xx arrives or the policy gives up.

        ``payload`` is a JSON-able mapping, or its encoding already (a judge that keeps the stable part of
        its requests encoded once sends bytes); it is encoded once per call, not once per attempt.

        An error answer for which ``refused(status, head_of_body)`` is true raises ``RequestRefused`` at
        once, before the status is considered for a retry: some servers report a request they cannot
        take as a 500 (llama-cpp-python does, for a ``response_format`` it does not know), and retrying
        that only burns the retry budget.
        """
        if self._closed:
            raise RuntimeError(f"judge {self._label} is closed")
        started = time.perf_counter()
        attempts = 1
        reasons: list[str] = []
        result: tuple[bytes, float, Mapping[str, str]] | None = None
        body = payload if isinstance(payload, bytes) else _encode_json(payload)
        sent_headers = self._request_headers(headers)
        # The first attempt runs outside tenacity: nearly every call succeeds at once, and building a
        # retry controller per call cost more CPU than the rest of the call's bookkeeping. Only a
        # retriable failure enters the policy's loop, whose first round replays that failure, so
        # waits and stops count attempts exactly as if the loop had run from the start.
        try:
            result = await self._attempt(body, sent_headers, refused)
        except RetriableHTTPError as exc:
            reasons.append(exc.reason)
            log.warning("judge %s attempt 1 failed: %s", self._label, exc.reason)
            first_failure: RetriableHTTPError | None = exc
        else:
            first_failure = None
        if first_failure is not None:
            result, attempts = await self._retry(body, sent_headers, refused, first_failure, reasons)
        assert result is not None  # _retry returns a result or raises
        body_in, latency, response_headers = result
        # A careless or hostile server may echo the key inside a 200 reply; the reply text travels
        # on into prompts, events and spans, so the key is cut out here, at the boundary.
        for secret in self._secrets:
            body_in = body_in.replace(secret.get_secret_value().encode(), b"[REDACTED]")
        return PostResult(
            body=body_in,
            latency_s=latency,
            attempts=attempts,
            retry_reasons=tuple(reasons),
            elapsed_s=time.perf_counter() - started,
            headers=response_headers,
        )

    def _request_headers(self, headers: Mapping[str, str] | None) -> dict[str, str]:
        # The body is always JSON bytes, whoever encoded it; a judge's own content type (any case) wins.
        merged = dict(headers or {})
        if not any(name.lower() == "content-type" for name in merged):
            merged["Content-Type"] = "application/json"
        return merged

    async def _retry(
        self,
        body: bytes,
        headers: Mapping[str, str],
        refused: RefusalCheck | None,
        first_failure: RetriableHTTPError,
        reasons: list[str],
    ) -> tuple[tuple[bytes, float, Mapping[str, str]], int]:
        """Attempts 2, 3, ... under the retry policy, after ``first_failure``; the result and attempts made."""
        attempts = 1
        result: tuple[bytes, float, Mapping[str, str]] | None = None
        try:
            async for attempt in self._policy.retrying():
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    if attempts == 1:
                        raise first_failure  # already made: let the policy decide on it
                    try:
                        result = await self._attempt(body, headers, refused)
                    except RetriableHTTPError as exc:
                        reasons.append(exc.reason)
                        log.warning("judge %s attempt %d failed: %s", self._label, attempts, exc.reason)
                        raise
        except RetryError as exc:
            last = exc.last_attempt.exception()
            reason = last.reason if isinstance(last, RetriableHTTPError) else repr(last)
            if (
                isinstance(last, RetriableHTTPError)
                and last.retry_after is not None
                and last.retry_after > self._policy.max_retry_after
            ):
                reason += (
                    f", asked to retry after {last.retry_after:.0f} s (limit {self._policy.max_retry_after:.0f} s)"
                )
            raise JudgeUnavailable(
                f"judge {self._label} unavailable after {attempts} attempt(s): {reason}",
                status=last.status if isinstance(last, RetriableHTTPError) else None,
            ) from None
        assert result is not None  # the loop only ends without raising after a successful attempt
        return result, attempts

    def _limiter_now(self) -> anyio.CapacityLimiter:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self._max_concurrency)
        return self._limiter

    async def _attempt(
        self, body: bytes, headers: Mapping[str, str], refused: RefusalCheck | None = None
    ) -> tuple[bytes, float, Mapping[str, str]]:
        # The limiter is held per attempt, not across backoff sleeps, so a throttled call does not
        # keep a slot from calls that could go ahead.
        async with self._limiter_now():
            t0 = time.perf_counter()
            try:
                with anyio.fail_after(self._attempt_timeout):
                    reply, response_headers = await self._round_trip(body, headers, refused)
            except TimeoutError:
                raise RetriableHTTPError(f"attempt exceeded {self._attempt_timeout} s") from None
            except httpx.UnsupportedProtocol as exc:
                raise JudgeRejected(f"judge {self._label}: unsupported URL: {exc}") from None
            except (httpx.TransportError, aiohttp.ClientError) as exc:
                # Timeouts, refused or dropped connections, truncated bodies: all worth another attempt.
                raise RetriableHTTPError(describe_transport_error(exc, self._secret_values())) from None
            except httpx.DecodingError as exc:
                raise JudgeUnavailable(f"judge {self._label}: undecodable response body ({exc})") from None
            except ResponseTooLargeError as exc:
                raise JudgeUnavailable(
                    f"judge {self._label}: response too large ({exc}; limit {self._max_response_bytes} bytes)"
                ) from None
            return reply, time.perf_counter() - t0, response_headers

    async def _round_trip(
        self, body: bytes, headers: Mapping[str, str], refused: RefusalCheck | None = None
    ) -> tuple[bytes, Mapping[str, str]]:
        async with self._direct.stream(body, headers) as resp:
            status = resp.status_code
            if 200 <= status < 300:
                body = await read_capped(resp, self._max_response_bytes)
                return body, {k.lower(): v for k, v in resp.headers.items()}
            # Error bodies are read only as far as an excerpt needs.
            try:
                head = await read_head(resp, 4096)
            except httpx.HTTPError:
                head = b""  # the status is what matters; a broken error body must not mask it
            detail = self._detail(head)
            if refused is not None and self._is_refusal(refused, status, head):
                raise RequestRefused(
                    f"judge {self._label} refused the request's form: HTTP {status}: {detail or '(empty body)'}",
                    status=status,
                )
            if status in self._retriable_statuses or status >= 500:
                raise RetriableHTTPError(
                    f"HTTP {status}" + (f": {detail}" if detail else ""),
                    status=status,
                    retry_after=parse_retry_after_headers(resp.headers),
                )
            message = f"judge {self._label} rejected the request: HTTP {status}: {detail or '(empty body)'}"
            if status in AUTH_STATUSES:
                raise JudgeAuthError(message, status=status)
            raise JudgeRejected(message, status=status)

    @staticmethod
    def _is_refusal(refused: RefusalCheck, status: int, head: bytes) -> bool:
        try:
            return bool(refused(status, head))
        except Exception:  # noqa: BLE001 - a check tripping on a hostile body must not hide the status
            return False

    def _detail(self, head: bytes) -> str:
        if self._error_detail is not None:
            try:
                described = self._error_detail(head)
            except Exception:  # noqa: BLE001 - a describer tripping on a hostile body must not hide the status
                described = None
            if described:
                return self.excerpt(described.encode())
        return self.excerpt(head)


class EndpointJudge:
    """What a ``Judge`` over one ``JSONEndpoint`` shares whatever its wire format: identity and lifecycle.

    A subclass sets ``_identity``, ``_where`` (see ``host_label``), ``_models_url`` (the server's
    model list, for ``probe_models``) and ``_http`` in its constructor, and adds ``complete``,
    ``_auth_headers`` and its wire format.

    It also adds ``cache_params()``: every setting besides the prompt that shapes a reply, which
    ``CachingJudge`` puts in its key (``streams.judges.cache.request_key``). The key already holds the
    provider, model, version and temperature; the model is repeated in ``cache_params()`` so it reads
    on its own. Credentials, timeouts, retries and limits stay out: they decide whether an answer
    arrives, never which.
    """

    _identity: JudgeIdentity
    _where: str
    _models_url: str
    _api_key: SecretStr | None
    _http: JSONEndpoint

    @property
    def identity(self) -> JudgeIdentity:
        return self._identity

    @property
    def _model(self) -> str:
        """The model this judge requests (the wire formats send it with every call)."""
        return self._identity.model

    async def aclose(self) -> None:
        await self._http.aclose()

    @property
    def label(self) -> str:
        """Names the judge in messages and logs: model and host, never credentials."""
        return self._label

    @property
    def authenticated(self) -> bool:
        """Whether a key is configured (never the key itself)."""
        return self._api_key is not None and bool(self._api_key.get_secret_value())

    @property
    def models_url(self) -> str:
        """The server's model list: what ``probe_models`` reads."""
        return self._models_url

    def _auth_headers(self) -> dict[str, str]:
        """The headers every request carries beyond the client's own: credentials, API version."""
        raise NotImplementedError

    async def probe_models(self, *, timeout_s: float) -> ProbeResult:
        """GET the model list with this judge's credentials: the cheapest call that proves them.

        One attempt, outside the concurrency limit and any breaker; see ``JSONEndpoint.probe``.
        """
        return await self._http.probe(self._models_url, self._auth_headers(), timeout_s=timeout_s)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    @property
    def _label(self) -> str:
        """Names the judge in messages and logs: model and host, never credentials."""
        return f"{self._model}@{self._where}"
