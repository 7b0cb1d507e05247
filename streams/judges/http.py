"""HTTP plumbing shared by the HTTP judges: client, retry policy, ``Retry-After``, capped reads, redaction.

The judges translate everything here into ``agents.errors`` at their boundary; nothing in this module
leaks aiohttp exceptions to the core. ``JSONEndpoint`` is that boundary packaged for reuse: one
POST with retries, timeouts, a concurrency cap and a body cap, failing only with ``JudgeUnavailable`` or
``JudgeRejected``; a judge adds its wire format on top (``streams/judges/openai.py``,
``streams/judges/anthropic.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import aiohttp
import anyio
from pydantic import SecretStr
from tenacity import RetryError

from pairjudge.agents.errors import JudgeRejected, JudgeUnavailable
from pairjudge.agents.judge import JudgeIdentity
from pairjudge.streams.judges.client import (
    CleartextKeyRefused,
    encode_json,
    make_session,
    route_for,
    secret_guard,
)
from pairjudge.streams.judges.wire import (
    DEFAULT_MAX_RESPONSE_BYTES,
    ERROR_EXCERPT_CHARS,
    RETRIABLE_STATUSES,
    ResponseTooLargeError,
    RetriableHTTPError,
    RetryPolicy,
    describe_transport_error,
    excerpt,
    is_undecodable,
    parse_retry_after_headers,
    read_capped,
    read_head,
    redact,
)

log = logging.getLogger(__name__)


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
    #: The start of the error body the check recognised (untrusted; for telling refusals apart, never shown).
    head: bytes

    def __init__(self, message: str, *, status: int, head: bytes = b"") -> None:
        super().__init__(message, status=status)
        self.head = head


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
        # Created on first use: anyio primitives want a running event loop on older anyio releases, and an
        # aiohttp session binds to the loop it is made on.
        self._limiter: anyio.CapacityLimiter | None = None
        self._session: aiohttp.ClientSession | None = None
        self._closed = False
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._headers = dict(headers) if headers else None
        # Every request carrying a secret goes to this URL's origin only, and not over plain HTTP off
        # this machine unless allowed: the key cannot leave by another path (``secret_guard``).
        self._guard = secret_guard(url, self._secrets, allow_cleartext=allow_cleartext_secrets, label=label)
        self._route = route_for(url)

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
        if self._session is not None:
            await self._session.close()

    def _session_now(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = make_session(
                connect_timeout=self._connect_timeout,
                read_timeout=self._read_timeout,
                max_connections=self._max_concurrency,
                headers=self._headers,
                middlewares=(self._guard,),
            )
        return self._session

    def __repr__(self) -> str:
        return f"JSONEndpoint(label={self._label!r})"

    def secret_values(self) -> list[str]:
        return [s.get_secret_value() for s in self._secrets]

    def scrub(self, text: str) -> str:
        """``text`` without any of the secrets (whole ones: cut a text only after scrubbing it)."""
        return redact(text, self.secret_values())

    def excerpt(self, body: bytes, limit: int = ERROR_EXCERPT_CHARS) -> str:
        """A short, printable, secret-free excerpt of an untrusted body."""
        return excerpt(body, self.secret_values(), limit)

    async def probe(self, url: str, headers: Mapping[str, str] | None = None, *, timeout_s: float) -> ProbeResult:
        """One GET of ``url`` with this endpoint's client, for a start-up check: no retries, no limiter.

        Never raises for what the server does: the status (with a scrubbed excerpt of an error body),
        or the reason no answer came within ``timeout_s`` seconds. A 2xx body is not read.
        """
        if self._closed:
            raise RuntimeError(f"judge {self._label} is closed")
        route = self._route if url == self._url else route_for(url)
        try:
            with anyio.fail_after(timeout_s):
                async with self._session_now().get(
                    url,
                    headers=dict(headers or {}),
                    allow_redirects=False,
                    proxy=route.proxy,
                    proxy_headers=route.proxy_headers,
                ) as resp:
                    status = resp.status
                    if 200 <= status < 300:
                        return ProbeResult(status)
                    try:
                        head = await read_head(resp, 4096)
                    except aiohttp.ClientError:
                        head = b""
                    return ProbeResult(status, self._detail(head))
        except CleartextKeyRefused as exc:
            return ProbeResult(None, failure=str(exc))
        except (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError) as exc:
            return ProbeResult(None, failure=f"unsupported URL ({self.excerpt(str(exc).encode(), 120)})")
        except aiohttp.ClientError as exc:
            return ProbeResult(None, failure=describe_transport_error(exc, self.secret_values()))
        except TimeoutError:
            return ProbeResult(None, failure=f"no answer within {timeout_s:g} s")

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
        body = payload if isinstance(payload, bytes) else encode_json(payload)
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
            # aiohttp's own timeouts are TimeoutErrors too: its errors are caught first, so that only the
            # attempt's deadline reads as one.
            try:
                with anyio.fail_after(self._attempt_timeout):
                    reply, response_headers = await self._round_trip(body, headers, refused)
            except (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError) as exc:
                raise JudgeRejected(f"judge {self._label}: unsupported URL: {exc}") from None
            except aiohttp.ClientPayloadError as exc:
                if is_undecodable(exc):
                    raise JudgeUnavailable(f"judge {self._label}: undecodable response body ({exc})") from None
                # A body cut short: worth another attempt.
                raise RetriableHTTPError(describe_transport_error(exc, self.secret_values())) from None
            except aiohttp.ClientError as exc:
                # Timeouts, refused or dropped connections: all worth another attempt.
                raise RetriableHTTPError(describe_transport_error(exc, self.secret_values())) from None
            except TimeoutError:
                raise RetriableHTTPError(f"attempt exceeded {self._attempt_timeout} s") from None
            except ResponseTooLargeError as exc:
                raise JudgeUnavailable(
                    f"judge {self._label}: response too large ({exc}; limit {self._max_response_bytes} bytes)"
                ) from None
            return reply, time.perf_counter() - t0, response_headers

    async def _round_trip(
        self, body: bytes, headers: Mapping[str, str], refused: RefusalCheck | None = None
    ) -> tuple[bytes, Mapping[str, str]]:
        route = self._route
        async with self._session_now().post(
            self._url,
            data=body,
            headers=headers,
            allow_redirects=False,
            proxy=route.proxy,
            proxy_headers=route.proxy_headers,
        ) as resp:
            status = resp.status
            if 200 <= status < 300:
                body = await read_capped(resp, self._max_response_bytes)
                return body, {k.lower(): v for k, v in resp.headers.items()}
            # Error bodies are read only as far as an excerpt needs.
            try:
                head = await read_head(resp, 4096)
            except aiohttp.ClientError:
                head = b""  # the status is what matters; a broken error body must not mask it
            detail = self._detail(head)
            if refused is not None and self._is_refusal(refused, status, head):
                raise RequestRefused(
                    f"judge {self._label} refused the request's form: HTTP {status}: {detail or '(empty body)'}",
                    status=status,
                    head=head,
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
    ``CachingJudge`` puts in its key (``streams.judges.cache_codec.request_key``). The key already holds the
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
