"""The proxy: every request passed to the champion and its response passed back as it comes, then (for a sampled
share of the chat completions, Responses and Anthropic Messages calls that succeeded) a capture handed to the sink.

What the client gets is the champion's: its status, its headers (less the hop-by-hop ones, which belong to each
connection), its body byte for byte, a stream chunk by chunk as it arrives, never held back. The capture path
only ever appends to the sink's bounded buffer; everything else (reading the JSON or the events, normalising,
redacting, encoding, sending) happens on the sink's thread. Nothing in it can fail the request: a failure there is
counted (``pairjudge.capture.dropped``) and logged now and then, by the sink.

The caller's credentials (``Authorization``, ``x-api-key``, ...) go to the champion and nowhere else: the capture
holds the bodies and the hint headers only, and a hint header may not name a credential.
"""

from __future__ import annotations

import logging
import time
from typing import Final, NamedTuple

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy
from opentelemetry import metrics
from yarl import URL

from pairjudge.schemas.captures import CapturedApi
from pairjudge.streams.capture.bodies import WireBody
from pairjudge.streams.capture.sink import CaptureMeta, CaptureSink
from pairjudge.streams.gateway.sampling import Sampler

log = logging.getLogger(__name__)

#: Headers that belong to one connection, never forwarded (RFC 9110 §7.6.1), besides those ``Connection`` names.
HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
#: Request headers the client's connection sets for itself (the champion's is another connection).
#: ``Expect: 100-continue`` was answered by the gateway's own server already.
_REQUEST_OWN: Final = frozenset({"host", "content-length", "expect"})
#: A body streamed through keeps the client's Content-Length (the champion gets the same framing).
_HOST: Final = frozenset({"host", "expect"})
#: The largest unstreamed response read whole before answering (one write); larger ones are streamed through.
_READ_WHOLE_BYTES: Final = 4 * 1024 * 1024


def captured_api(method: str, path: str) -> CapturedApi | None:
    """The API a request calls, when it is one the gateway captures."""
    if method != "POST":
        return None
    path = path.rstrip("/")
    if path.endswith("/chat/completions"):
        return "chat_completions"
    if path.endswith("/v1/responses"):
        return "responses"
    if path.endswith("/v1/messages"):
        return "anthropic_messages"
    return None


def forwarded(headers: CIMultiDictProxy[str], *, own: frozenset[str] = frozenset()) -> CIMultiDict[str]:
    """``headers`` less the hop-by-hop ones (and those ``Connection`` names) and ``own``."""
    connection = headers.get("Connection")
    named = {t.strip().lower() for t in connection.split(",")} if connection else set()
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        lower = name.lower()
        if lower in HOP_BY_HOP or lower in own or lower in named:
            continue
        out.add(name, value)
    return out


def _error(status: int, message: str) -> web.Response:
    # The shape of an OpenAI error, which both SDKs read as an API error with this status.
    return web.json_response({"error": {"message": message, "type": "gateway_error", "code": status}}, status=status)


class Proxy:
    """The aiohttp handler (``handle``) for every path the gateway does not answer itself."""

    def __init__(
        self,
        upstream: str,
        session: aiohttp.ClientSession,
        sink: CaptureSink | None,
        sampler: Sampler,
        *,
        max_capture_bytes: int,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self._upstream = upstream.rstrip("/")
        self._session = session
        self._sink = sink if sampler.captures_any else None
        self._sampler = sampler
        self._max_capture = max_capture_bytes
        meter = (meter_provider or metrics.get_meter_provider()).get_meter("pairjudge.gateway")
        self._requests = meter.create_counter(
            "pairjudge.gateway.requests", description="Requests proxied, by captured API and status class"
        )
        self._upstream_errors = meter.create_counter(
            "pairjudge.gateway.upstream_errors", description="Requests the champion could not be reached for"
        )

    async def handle(self, request: web.Request) -> web.StreamResponse:
        api = captured_api(request.method, request.path)
        draw = self._draw(request, api) if api is not None and self._sink is not None else None
        started = time.perf_counter()
        # The body of a call that may be captured is read whole (it is JSON the champion reads whole too);
        # any other is streamed through as it comes (an upload may be large).
        body: bytes | aiohttp.StreamReader
        if draw is not None:
            body = await request.read()
        else:
            body = request.content if request.body_exists else b""
        headers = forwarded(request.headers, own=_REQUEST_OWN if draw is not None else _HOST)
        url = URL(self._upstream + request.raw_path, encoded=True)
        try:
            upstream = await self._session.request(
                request.method, url, headers=headers, data=body, allow_redirects=False
            )
        except TimeoutError:
            self._upstream_errors.add(1, {"error": "timeout"})
            return _error(504, "the gateway timed out waiting for the upstream model server")
        except aiohttp.ClientError as exc:
            self._upstream_errors.add(1, {"error": type(exc).__name__})
            return _error(502, f"the gateway could not reach the upstream model server ({type(exc).__name__})")
        try:
            relayed = await self._relay(request, upstream, keep=draw is not None)
        except BaseException:
            upstream.close()  # the client left (or a bug): the champion's call is cut, not left to run
            raise
        upstream.release()
        self._requests.add(1, {"api": api or "other", "status": f"{upstream.status // 100}xx"})
        if draw is not None and relayed.data is not None and 200 <= upstream.status < 300 and type(body) is bytes:
            encodings = (request.headers.get("Content-Encoding", ""), upstream.headers.get("Content-Encoding", ""))
            self._capture(draw, body, relayed, encodings, started)
        return relayed.web

    def _draw(self, request: web.Request, api: CapturedApi) -> _Draw | None:
        try:
            meta = self._sampler.meta(request.headers)
            capture_id = self._sampler.draw(meta)
        except Exception as exc:  # noqa: BLE001 - the exchange goes through uncaptured, and counted
            if self._sink is not None:
                self._sink.drop("error", exc)
            return None
        return None if capture_id is None else _Draw(api, capture_id, meta)

    async def _relay(self, request: web.Request, upstream: aiohttp.ClientResponse, *, keep: bool) -> _Relayed:
        """The champion's response to the client; ``data``: its body when ``keep`` (None when too large to capture,
        or broken off)."""
        headers = forwarded(upstream.headers)
        length = upstream.content_length
        streamed = upstream.content_type == "text/event-stream"
        if length is not None and length <= _READ_WHOLE_BYTES and not streamed:
            data = await upstream.read()
            del headers["Content-Length"]  # set again from the body, the same
            return _Relayed(
                web.Response(status=upstream.status, reason=upstream.reason, body=data, headers=headers), data, False
            )
        out = web.StreamResponse(status=upstream.status, reason=upstream.reason, headers=headers)
        pieces: list[bytes] = []
        size = 0
        try:
            await out.prepare(request)
            async for chunk in upstream.content.iter_any():
                await out.write(chunk)
                if keep:
                    size += len(chunk)
                    if size > self._max_capture:
                        keep = False
                        pieces = []
                        if self._sink is not None:
                            self._sink.drop("too_large")
                    else:
                        pieces.append(chunk)
            await out.write_eof()
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, TimeoutError):
            # The champion broke off mid-body: the client sees the same, a connection closed early. (A client
            # that left raises ConnectionResetError from ``write``: up to ``handle``, which cuts the champion.)
            upstream.close()
            if request.transport is not None:
                request.transport.close()
            return _Relayed(out, None, streamed)
        return _Relayed(out, b"".join(pieces), streamed) if keep else _Relayed(out, None, streamed)

    def _capture(self, draw: _Draw, body: bytes, relayed: _Relayed, encodings: tuple[str, str], started: float) -> None:
        sink = self._sink
        if sink is None or relayed.data is None:
            return
        try:
            if len(body) > self._max_capture or len(relayed.data) > self._max_capture:
                sink.drop("too_large")
                return
            sink.capture(
                WireBody(body, encodings[0]),
                WireBody(relayed.data, encodings[1]),
                api=draw.api,
                meta=draw.meta,
                streamed=relayed.streamed,
                latency_ms=(time.perf_counter() - started) * 1000,
                capture_id=draw.capture_id,
            )
        except Exception as exc:  # noqa: BLE001 - the client has its response whatever happens here
            sink.drop("error", exc)


class _Draw(NamedTuple):
    api: CapturedApi
    capture_id: str
    meta: CaptureMeta


class _Relayed:
    __slots__ = ("data", "streamed", "web")

    def __init__(self, response: web.StreamResponse, data: bytes | None, streamed: bool) -> None:
        self.web = response
        self.data = data
        self.streamed = streamed
