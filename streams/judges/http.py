"""HTTP plumbing shared by the HTTP judges: client, retry policy, ``Retry-After``, capped reads, redaction.

The judges translate everything here into ``agents.errors`` at their boundary; nothing in this module
leaks httpx or aiohttp exceptions to the core.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

import aiohttp
import httpx
from httpx_aiohttp import HttpxAiohttpClient
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type

#: Statuses worth another try: rate limiting, overload, gateway trouble. 408 is a timeout by another name.
RETRIABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})

#: A reply to a judge prompt is a few KiB; anything near this is a misbehaving server, not a verdict.
DEFAULT_MAX_RESPONSE_BYTES = 1 << 20

#: How much of an error body we keep for messages: enough to see "invalid model", not enough to dump a page.
ERROR_EXCERPT_CHARS = 200


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


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """Remove secret values from text that may echo them (some servers quote the key they refused)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[REDACTED]")
    return text


def excerpt(body: bytes, secrets: Iterable[str | None] = (), limit: int = ERROR_EXCERPT_CHARS) -> str:
    """A short, printable, secret-free excerpt of an untrusted body, for error messages."""
    text = body[: limit * 4].decode("utf-8", errors="replace")
    text = redact(text, secrets)
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def make_client(
    *,
    connect_timeout: float,
    read_timeout: float,
    max_connections: int,
    headers: dict[str, str] | None = None,
) -> httpx.AsyncClient:
    """An httpx client on the aiohttp transport.

    httpx's own async pool collapses under concurrency (encode/httpx#3215, DESIGN §8); the aiohttp
    transport holds. The pool is sized to the judge's concurrency limit, so callers never queue for a
    connection and the pool timeout cannot fire.
    """
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    timeout = httpx.Timeout(connect=connect_timeout, read=read_timeout, write=read_timeout, pool=None)
    # HttpxAiohttpClient (not AsyncClient(transport=...)) so proxies from the environment also go through
    # aiohttp instead of silently falling back to httpx's own pool.
    client: httpx.AsyncClient = HttpxAiohttpClient(
        limits=limits, timeout=timeout, headers=headers, follow_redirects=False
    )
    return client


def describe_transport_error(exc: BaseException) -> str:
    """A short, accurate reason for a failed round trip.

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
    return f"transport error ({type(cause).__name__}: {excerpt(str(cause).encode(), limit=120)})"
