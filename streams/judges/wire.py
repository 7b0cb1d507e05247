"""What the HTTP judges share about the wire: retriable statuses, the retry policy, ``Retry-After``,
capped reads, error excerpts, secret redaction and URL labels. No client and no judge: plain functions.
"""

from __future__ import annotations

import email.utils
import logging
import math
import random
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC

import aiohttp
import httpx
from aiohttp.http_exceptions import ContentEncodingError
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type

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


async def read_capped(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """Read a streamed body, stopping as soon as it passes ``limit`` bytes (decoded)."""
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ResponseTooLargeError(f"declared {declared} bytes")
    chunks: list[bytes] = []
    total = 0
    async for chunk in response.content.iter_any():
        total += len(chunk)
        if total > limit:
            raise ResponseTooLargeError(f"more than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_head(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The first ``limit`` bytes of a streamed body (for error excerpts); the rest is never read."""
    chunks: list[bytes] = []
    total = 0
    async for chunk in response.content.iter_any():
        chunks.append(chunk)
        total += len(chunk)
        if total >= limit:
            break
    return b"".join(chunks)[:limit]


def secret_values(secrets: Iterable[str | None]) -> list[str]:
    # Longest first, so a secret that contains another is replaced whole.
    return sorted({s for s in secrets if s}, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """Remove secret values from text that may echo them (some servers quote the key they refused).

    Only whole occurrences: a text that was cut may still end with a secret's beginning, which is
    :func:`redact_edge`'s job. Redact a text *before* cutting it, then its edge.
    """
    for secret in secret_values(secrets):
        text = text.replace(secret, REDACTED)
    return text


def redact_edge(text: str, secrets: Iterable[str | None], *, min_chars: int = MIN_PARTIAL_SECRET_CHARS) -> str:
    """``text`` with a secret's beginning at its very end replaced, as a cut through the secret leaves it.

    The longest beginning of any secret that ``text`` ends with, if it has at least ``min_chars``
    characters, becomes ``[REDACTED]``. Whole secrets are :func:`redact`'s job.
    """
    longest = 0
    for secret in secret_values(secrets):
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
    values = secret_values(secrets)
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


def describe_transport_error(exc: BaseException, secrets: Iterable[str | None] = ()) -> str:
    """A short, accurate reason for a failed round trip, without any of ``secrets``.

    A refused connection reads as one, not as a timeout, so whoever is on call looks for a dead server,
    not a slow one.
    """
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"cannot connect ({exc.os_error.strerror or type(exc.os_error).__name__})"
    if isinstance(exc, aiohttp.ServerTimeoutError | TimeoutError):
        return f"timeout ({type(exc).__name__})"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return f"server disconnected ({type(exc).__name__})"
    return f"transport error ({type(exc).__name__}: {excerpt(str(exc).encode(), secrets, limit=120)})"


def is_undecodable(exc: aiohttp.ClientPayloadError) -> bool:
    """Whether the body arrived whole but its ``Content-Encoding`` could not be undone (no retry fixes that),
    rather than cut short."""
    return isinstance(exc.__cause__, ContentEncodingError)


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
    names up case-insensitively (aiohttp's response headers do).
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
