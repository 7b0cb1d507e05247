"""Transparent capture around the official ``openai`` and ``anthropic`` async clients.

    client = wrap_openai(AsyncOpenAI(), sink, route="/support/chat", prompt_version="v7")
    reply = await client.chat.completions.create(model=..., messages=..., tools=...)   # captured

``chat.completions.create`` and ``responses.create`` (OpenAI) and ``messages.create`` (Anthropic) are replaced on
that client's own resource objects, so the call, its arguments, its return value and its errors are the SDK's,
unchanged. After a reply has come back whole (a streamed one: once the app has read it to the end), the exchange
goes to ``CaptureSink.capture``; a call that fails, or a stream left before its end, captures nothing.

Only the request's body fields are captured. ``extra_headers`` are not, except the values of the header names the
app lists in ``hint_headers`` (which may not name a credential); the client's API key and auth headers are never
read here at all.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final, TypeVar

from pairjudge.schemas.captures import CapturedApi
from pairjudge.streams.capture.sink import NO_META, CaptureMeta, CaptureSink

ClientT = TypeVar("ClientT")
#: Header names that carry credentials, refused in ``hint_headers``.
_CREDENTIAL: Final = re.compile(r"auth|key|token|secret|cookie|password|session", re.IGNORECASE)
#: ``create`` arguments that are not part of the request body.
_NOT_BODY: Final = frozenset({"extra_headers", "extra_query", "extra_body", "timeout"})
_WRAPPED: Final = "__pairjudge_capture__"

_CURRENT: contextvars.ContextVar[CaptureMeta | None] = contextvars.ContextVar("pairjudge_capture_meta", default=None)


@contextlib.contextmanager
def capture_meta(
    *, route: str | None = None, prompt_version: str | None = None, tags: Sequence[str] | None = None
) -> Iterator[None]:
    """Name the route, prompt version or tags of the calls made inside the block (over the wrapper's defaults)."""
    changes: dict[str, Any] = {}
    if route is not None:
        changes["route"] = route
    if prompt_version is not None:
        changes["prompt_version"] = prompt_version
    if tags is not None:
        changes["tags"] = tuple(tags)
    token = _CURRENT.set(replace(_CURRENT.get() or NO_META, **changes))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def wrap_openai(
    client: ClientT,
    sink: CaptureSink,
    *,
    route: str = "",
    prompt_version: str = "",
    tags: Sequence[str] = (),
    hint_headers: Sequence[str] = (),
) -> ClientT:
    """Capture ``client.chat.completions.create`` and ``client.responses.create`` (an ``AsyncOpenAI``); returns
    the same client."""
    defaults = _defaults(route, prompt_version, tags, hint_headers)
    chat = client.chat.completions  # type: ignore[attr-defined]  # any AsyncOpenAI-shaped client
    _install(chat, "chat_completions", sink, defaults, hint_headers)
    responses = getattr(client, "responses", None)
    if responses is not None:
        _install(responses, "responses", sink, defaults, hint_headers)
    return client


def wrap_anthropic(
    client: ClientT,
    sink: CaptureSink,
    *,
    route: str = "",
    prompt_version: str = "",
    tags: Sequence[str] = (),
    hint_headers: Sequence[str] = (),
) -> ClientT:
    """Capture ``client.messages.create`` (an ``AsyncAnthropic``); returns the same client."""
    defaults = _defaults(route, prompt_version, tags, hint_headers)
    _install(client.messages, "anthropic_messages", sink, defaults, hint_headers)  # type: ignore[attr-defined]
    return client


def _defaults(route: str, prompt_version: str, tags: Sequence[str], hint_headers: Sequence[str]) -> CaptureMeta:
    refused = [h for h in hint_headers if _CREDENTIAL.search(h)]
    if refused:
        raise ValueError(f"hint_headers may not name a credential header: {', '.join(refused)}")
    return CaptureMeta(prompt_version=prompt_version, route=route, tags=tuple(tags))


def _install(
    resource: Any, api: CapturedApi, sink: CaptureSink, defaults: CaptureMeta, hint_headers: Sequence[str]
) -> None:
    original = resource.create
    if getattr(original, _WRAPPED, False):
        return  # wrapped already: one capture a call
    wanted = tuple(h.lower() for h in hint_headers)

    @functools.wraps(original)
    async def create(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        result = await original(*args, **kwargs)  # the SDK's own result and errors, untouched
        try:
            meta = _meta(defaults, kwargs.get("extra_headers"), wanted)
            request = _body(kwargs)
            if kwargs.get("stream") is True:
                return CapturedStream(result, functools.partial(_done, sink, api, request, meta, started))
            sink.capture(request, result, api=api, meta=meta, latency_ms=(time.perf_counter() - started) * 1000)
        except Exception as exc:  # noqa: BLE001 - the app gets its reply whatever happens here
            sink._drop("error", exc)
        return result

    setattr(create, _WRAPPED, True)
    resource.create = create


def _done(
    sink: CaptureSink, api: CapturedApi, request: dict[str, Any], meta: CaptureMeta, started: float, pieces: list[Any]
) -> None:
    latency = (time.perf_counter() - started) * 1000
    sink.capture(request, pieces, api=api, meta=meta, streamed=True, latency_ms=latency)


def _body(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    # Lists copied now, at the call: a stream is captured at its end, by when the app may have added to them.
    body = {k: list(v) if type(v) is list else v for k, v in kwargs.items() if k not in _NOT_BODY}
    extra = kwargs.get("extra_body")
    if isinstance(extra, Mapping):
        body.update(extra)  # sent in the body: part of the request
    return body


def _meta(defaults: CaptureMeta, extra_headers: object, wanted: tuple[str, ...]) -> CaptureMeta:
    meta = defaults
    current = _CURRENT.get()
    if current is not None:
        meta = CaptureMeta(
            prompt_version=current.prompt_version or defaults.prompt_version,
            route=current.route or defaults.route,
            tags=(*defaults.tags, *current.tags),
        )
    if wanted and isinstance(extra_headers, Mapping):
        found = {str(k).lower(): v for k, v in extra_headers.items() if str(k).lower() in wanted and isinstance(v, str)}
        if found:
            meta = replace(meta, headers=found)
    return meta


class CapturedStream:
    """The SDK's stream, passed through piece by piece; once the app has read it to its end, the pieces go to the
    sink as one streamed reply. Anything else (``close()``, ``response``, ``with``) is the SDK stream's own."""

    def __init__(self, stream: Any, on_end: Callable[[list[Any]], None]) -> None:
        self._stream = stream
        self._on_end = on_end
        self._pieces: list[Any] = []
        self._ended = False

    def __aiter__(self) -> CapturedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            piece = await self._stream.__anext__()
        except StopAsyncIteration:
            self._end()
            raise
        self._pieces.append(piece)
        return piece

    def _end(self) -> None:
        if self._ended:
            return
        self._ended = True
        # The capture is the sink's to count; the app's stream is done whatever happens there.
        with contextlib.suppress(Exception):
            self._on_end(self._pieces)
        self._pieces = []

    async def __aenter__(self) -> CapturedStream:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> Any:
        return await self._stream.__aexit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


__all__ = ["CapturedStream", "capture_meta", "wrap_anthropic", "wrap_openai"]
