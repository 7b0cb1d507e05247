"""``CaptureSink``: captures off the app's request path, onto ``pairjudge.captures``.

``capture()`` is the only part that runs on the caller's path, and does almost nothing there: it snapshots the
request's top level (so the app may append to its message list right after), notes the trace context and the
time, and appends to a bounded buffer. A background thread with its own event loop does the rest, in batches:
normalise (``pairjudge.agents.capture``), redact, encode, send with aiokafka.

What it never does: raise into the caller, block it, or grow without bound. A capture that cannot be kept is
dropped and counted, by reason (``DROP_REASONS``), in ``stats()`` and in the OpenTelemetry counter
``pairjudge.capture.dropped``:

- ``buffer_full``: the buffer holds ``max_buffered`` captures already (Kafka slow or down);
- ``closed``: ``capture()`` after ``close()``;
- ``unreadable``: the bodies could not be read as a capture (the log says which field, never its text);
- ``too_large``: the encoded capture is larger than ``max_capture_bytes``;
- ``kafka_unavailable``: the broker did not take it (the producer gave up on it, or could not queue it within
  ``send_timeout_s``), or it was still waiting at ``close()``. A capture the producer still holds after
  ``send_timeout_s`` (its broker down) is counted when the producer settles it: sent if the broker takes it once
  back, else this. Counting it lost at the timeout would count twice one the broker takes later;
- ``error``: anything else (a bug here), logged with its type.

Memory is bounded by ``max_buffered`` pending captures plus what the producer holds (one batch being sent, and
with a broker down the batches it keeps for it, bounded by its own queue: ``send()`` waits when it is full).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple

from aiokafka import AIOKafkaProducer
from opentelemetry import metrics, trace
from opentelemetry.trace import SpanContext

from pairjudge.agents.capture import CaptureUnreadable, make_capture, map_texts
from pairjudge.agents.redaction import Redactor
from pairjudge.schemas.captures import Capture, CapturedApi
from pairjudge.streams.capture.bodies import WireBody, as_body, assembled
from pairjudge.streams.security.kafka_clients import ClientConfig, as_client_config, client_config
from pairjudge.streams.security.redaction_hook import EventRedactor, build_redactor

if TYPE_CHECKING:
    from pairjudge.streams.config.settings import Settings

log = logging.getLogger(__name__)

DropReason = Literal["buffer_full", "closed", "unreadable", "too_large", "kafka_unavailable", "error"]
DROP_REASONS: Final[tuple[DropReason, ...]] = (
    "buffer_full",
    "closed",
    "unreadable",
    "too_large",
    "kafka_unavailable",
    "error",
)
#: Seconds between two warnings of the same kind.
_WARN_EVERY_S: Final = 60.0
#: Seconds between attempts to reach a broker that is down (doubling up to the last).
_RECONNECT_S: Final = (0.5, 1.0, 2.0, 5.0, 10.0)


@dataclass(frozen=True, slots=True)
class CaptureMeta:
    """What the app says about an exchange besides its bodies (``Capture.source`` and ``Capture.hints``)."""

    prompt_version: str = ""
    route: str = ""
    tags: tuple[str, ...] = ()
    #: Request header values the app chose to pass, by lower-case name (never a credential: see ``wrap``).
    headers: Mapping[str, str] = field(default_factory=dict)


NO_META: Final = CaptureMeta()


@dataclass(slots=True)
class _Pending:
    api: CapturedApi
    request: Mapping[str, Any] | WireBody
    #: A response body or SDK object; for a streamed reply, the list of its chunks or events.
    response: Any
    at: float
    span: SpanContext | None
    meta: CaptureMeta
    streamed: bool
    latency_ms: float | None
    capture_id: str | None = None


class _Record(NamedTuple):
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]


@dataclass(frozen=True, slots=True)
class CaptureStats:
    buffered: int
    sent: int
    dropped: Mapping[DropReason, int]

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())


def _snapshot(request: Mapping[str, Any] | WireBody) -> Mapping[str, Any] | WireBody:
    if type(request) is WireBody:
        return request  # bytes: nothing the caller can change
    # The top level and its lists copied, so an app that appends the reply to its message list right after the
    # call does not change what was captured. Deeper objects are shared: apps do not edit sent messages in place.
    assert not isinstance(request, WireBody)
    return {k: list(v) if type(v) is list else v for k, v in request.items()}


class CaptureSink:
    """Sends captures to ``topic`` from a background thread; ``capture()`` never raises and never blocks.

    ``kafka``: a ``host:port[,...]`` string for a plaintext broker, or a ``ClientConfig`` (TLS, SASL:
    ``client_config(settings.kafka)``). ``redact``: applied to every text of a capture before it leaves the
    process (``str -> str``; if it raises, the text is withheld as ``[redacted:hook_failed]``).
    ``CaptureSink.from_settings(settings)`` takes all of it from pairjudge's settings.
    """

    def __init__(
        self,
        kafka: str | ClientConfig,
        *,
        topic: str = "pairjudge.captures",
        redact: Callable[[str], str] | EventRedactor | None = None,
        max_buffered: int = 1000,
        batch_size: int = 100,
        linger_s: float = 0.05,
        max_capture_bytes: int = 1_000_000,
        send_timeout_s: float = 10.0,
        meter_provider: metrics.MeterProvider | None = None,
        producer: str = "sdk",
    ) -> None:
        if max_buffered < 1 or batch_size < 1:
            raise ValueError("max_buffered and batch_size must be at least 1")
        self.topic = topic
        #: What the captures say made them (``Capture.source.producer``): ``sdk``, ``gateway``, ``litellm``.
        self.producer = producer
        self._client = as_client_config(kafka)
        if redact is None or isinstance(redact, EventRedactor):
            self._redactor = redact
        else:
            self._redactor = EventRedactor(Redactor((), redact))
        self._max = max_buffered
        self._batch = batch_size
        self._linger = linger_s
        self._max_bytes = max_capture_bytes
        self._send_timeout = send_timeout_s
        self._buffer: deque[_Pending] = deque()
        self._dropped: dict[DropReason, int] = dict.fromkeys(DROP_REASONS, 0)
        self._sent = 0
        #: Deliveries the producer still holds after ``send_timeout_s`` (a broker down): counted once settled.
        self._in_flight: set[asyncio.Future[Any]] = set()
        self._count_lock = threading.Lock()
        meter = (meter_provider or metrics.get_meter_provider()).get_meter("pairjudge.capture")
        self._drop_counter = meter.create_counter(
            "pairjudge.capture.dropped", description="Captures dropped before reaching Kafka, by reason"
        )
        self._sent_counter = meter.create_counter("pairjudge.capture.sent", description="Captures Kafka took")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._wake_pending = False
        self._closing = False
        self._warned: dict[str, float] = {}
        self._stopped = threading.Event()
        self._ready = threading.Event()
        # Started now, not on the first capture: the caller's path never waits for a thread to start.
        self._sender = threading.Thread(target=self._main, name="pairjudge-capture", daemon=True)
        self._sender.start()
        atexit.register(self.close, 2.0)
        self._ready.wait(5.0)

    @classmethod
    def from_settings(cls, settings: Settings, **options: Any) -> CaptureSink:
        """A sink for pairjudge's settings: its Kafka (security included), topic prefix and redaction."""
        return cls(
            client_config(settings.kafka),
            topic=settings.topics.name("captures"),
            redact=build_redactor(settings.redaction),
            **options,
        )

    # --- the caller's path --------------------------------------------------------------------------------

    def capture(
        self,
        request: Mapping[str, Any] | WireBody,
        response: Any,
        *,
        api: CapturedApi = "chat_completions",
        meta: CaptureMeta = NO_META,
        streamed: bool = False,
        latency_ms: float | None = None,
        capture_id: str | None = None,
    ) -> bool:
        """Queue one exchange: ``request`` as the body sent (a dict), ``response`` as the body received (a dict or
        the SDK's response object; for a streamed reply, the list of its chunks or events with ``streamed=True``;
        either may be a ``WireBody``, the bytes as HTTP carried them; a streamed reply already joined into one body,
        as LiteLLM hands it over, is that body with ``streamed=True``). ``capture_id``: the capture's id when the
        caller drew it already (the gateway's sampling), else a new one.
        True when queued; False when dropped (counted). Never raises."""
        try:
            if self._closing:
                self._drop("closed")
                return False
            if len(self._buffer) >= self._max:
                self._drop("buffer_full")
                return False
            if self._stopped.is_set():  # the sending thread ended on a bug (logged): nothing would send it
                self._drop("error")
                return False
            span = trace.get_current_span().get_span_context()
            self._buffer.append(
                _Pending(
                    api,
                    _snapshot(request),
                    response,
                    time.time(),
                    span if span.is_valid else None,
                    meta,
                    streamed,
                    latency_ms,
                    capture_id,
                )
            )
            loop = self._loop
            if loop is not None and not self._wake_pending:
                self._wake_pending = True
                loop.call_soon_threadsafe(self._set_wake)
            return True
        except Exception as exc:  # noqa: BLE001 - the app's request must never fail because of a capture
            self._drop("error", exc)
            return False

    def stats(self) -> CaptureStats:
        with self._count_lock:
            return CaptureStats(
                buffered=len(self._buffer) + len(self._in_flight), sent=self._sent, dropped=dict(self._dropped)
            )

    def close(self, timeout: float = 5.0) -> CaptureStats:
        """Send what is buffered (for up to ``timeout`` seconds), stop the thread; later captures are dropped
        (``closed``). What could not be sent by then is dropped (``kafka_unavailable``). Idempotent."""
        self._closing = True
        loop = self._loop
        if loop is not None and not self._stopped.is_set():
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(self._set_wake)
            self._stopped.wait(timeout)
            if not self._stopped.is_set():
                log.warning("capture sink: not flushed within %.1f s", timeout)
        # Popped one by one: a capture the sending thread takes meanwhile is counted there, not twice.
        left = 0
        with contextlib.suppress(IndexError):
            while True:
                self._buffer.popleft()
                left += 1
        if left:
            self._drop("kafka_unavailable", count=left)
        return self.stats()

    def __enter__(self) -> CaptureSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- counting -----------------------------------------------------------------------------------------

    def drop(self, reason: DropReason, exc: BaseException | None = None) -> None:
        """Count one capture lost before it reached ``capture()`` (the gateway's: a body too large to keep, a bug
        on its side); never raises."""
        self._drop(reason, exc)

    def _drop(self, reason: DropReason, exc: BaseException | None = None, *, count: int = 1) -> None:
        try:
            with self._count_lock:
                self._dropped[reason] += count
            self._drop_counter.add(count, {"reason": reason})
            if exc is not None:
                self._warn(reason, "capture dropped (%s): %s", reason, type(exc).__name__)
        except Exception:  # noqa: BLE001, S110 - counting must not raise into the caller either
            pass

    def _warn(self, what: str, message: str, *args: object) -> None:
        # Once a minute for each kind of trouble: a broker down for an hour must not fill the app's log.
        now = time.monotonic()
        if now - self._warned.get(what, -_WARN_EVERY_S) >= _WARN_EVERY_S:
            self._warned[what] = now
            log.warning(message, *args)

    # --- the background thread ----------------------------------------------------------------------------

    def _set_wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except Exception as exc:  # noqa: BLE001 - a bug here loses captures (counted), never the app
            log.error("capture sink stopped: %s", type(exc).__name__)
        finally:
            self._stopped.set()

    async def _run(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._ready.set()
        producer: AIOKafkaProducer | None = None
        attempt = 0
        records: list[_Record] = []
        try:
            while True:
                # Reset before looking at the buffer: a capture appended after the look then wakes the loop.
                self._wake_pending = False
                if not self._buffer and not records:
                    if self._closing:
                        return
                    await self._wake.wait()
                    self._wake.clear()
                    if not self._closing:
                        await asyncio.sleep(self._linger)  # let a batch gather
                if not records:
                    records = self._encode_batch()
                    if not records:
                        continue
                if producer is None:
                    producer = await self._connect()
                    if producer is None:
                        if self._closing:
                            self._drop("kafka_unavailable", count=len(records))
                            return
                        await self._pause(_RECONNECT_S[min(attempt, len(_RECONNECT_S) - 1)])
                        attempt += 1
                        continue
                    attempt = 0
                await self._send(producer, records)
                records = []
        finally:
            if producer is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(producer.stop(), timeout=2.0)
            # What the producer still held when it stopped: never sent.
            if self._in_flight:
                left = len(self._in_flight)
                self._in_flight.clear()
                self._drop("kafka_unavailable", count=left)

    async def _pause(self, seconds: float) -> None:
        assert self._wake is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closed_wait(), timeout=seconds)

    async def _closed_wait(self) -> None:
        assert self._wake is not None
        while not self._closing:
            self._wake.clear()
            await self._wake.wait()

    async def _connect(self) -> AIOKafkaProducer | None:
        producer = AIOKafkaProducer(
            **self._client.kwargs(
                acks="all",
                linger_ms=5,
                request_timeout_ms=int(self._send_timeout * 1000),
                max_request_size=max(self._max_bytes + 4096, 1_048_576),
            )
        )
        try:
            await asyncio.wait_for(producer.start(), timeout=self._send_timeout)
        except Exception as exc:  # noqa: BLE001 - a broker down now is retried; its captures wait (bounded)
            self._warn(
                "connect", "capture sink: cannot reach Kafka at %s (%s); retrying", self._client, type(exc).__name__
            )
            with contextlib.suppress(Exception):
                await producer.stop()
            return None
        return producer

    async def _send(self, producer: AIOKafkaProducer, records: list[_Record]) -> None:
        deliveries: list[asyncio.Future[Any]] = []

        async def queue() -> None:
            # send() only queues (it waits when the broker's metadata is missing, or the producer's queue is full).
            for r in records:
                deliveries.append(await producer.send(self.topic, value=r.value, key=r.key, headers=r.headers))

        trouble: BaseException | None = None
        deadline = time.monotonic() + self._send_timeout
        try:
            await asyncio.wait_for(queue(), timeout=self._send_timeout)
        except Exception as exc:  # noqa: BLE001 - Kafka gone: what was not queued is lost, and counted
            trouble = exc
        failed = len(records) - len(deliveries)
        done: set[asyncio.Future[Any]] = set()
        if deliveries:
            done, pending = await asyncio.wait(deliveries, timeout=max(deadline - time.monotonic(), 0.001))
            # Still held by the producer (its broker down): the broker may yet take them once back, so they are
            # counted when settled, not now (then a capture counted lost could reach the topic after all).
            for delivery in pending:
                self._in_flight.add(delivery)
                delivery.add_done_callback(self._settled)
        errors = [d for d in done if d.cancelled() or d.exception() is not None]
        failed += len(errors)
        sent = len(done) - len(errors)
        with self._count_lock:
            self._sent += sent
        self._sent_counter.add(sent)
        if failed:
            cause = type(trouble).__name__ if trouble is not None else _failure_name(errors[0])
            self._warn("send", "capture sink: Kafka did not take %d captures (%s)", failed, cause)
            self._drop("kafka_unavailable", count=failed)

    def _settled(self, delivery: asyncio.Future[Any]) -> None:
        if delivery not in self._in_flight:
            return  # counted already (at the end)
        self._in_flight.discard(delivery)
        if delivery.cancelled() or delivery.exception() is not None:
            self._drop("kafka_unavailable")
        else:
            with self._count_lock:
                self._sent += 1
            self._sent_counter.add(1)

    def _encode_batch(self) -> list[_Record]:
        records: list[_Record] = []
        while self._buffer and len(records) < self._batch:
            pending = self._buffer.popleft()
            try:
                capture = self._build(pending)
                value = capture.model_dump_json().encode()
            except CaptureUnreadable as exc:
                self._warn("unreadable", "capture dropped (unreadable): %s", exc)
                self._drop("unreadable")
                continue
            except Exception as exc:  # noqa: BLE001 - one bad exchange must not stop the others
                self._drop("error", exc)
                continue
            if len(value) > self._max_bytes:
                self._warn("too_large", "capture dropped (too_large): %d bytes", len(value))
                self._drop("too_large")
                continue
            # The trace context as a header too, where the worker's consumer looks for it.
            headers = [] if capture.trace is None else [("traceparent", capture.trace.traceparent.encode())]
            records.append(_Record(capture.capture_id.encode(), value, headers))
        return records

    def _build(self, pending: _Pending) -> Capture:
        request = as_body(pending.request)
        response = (
            assembled(pending.api, pending.response)
            if pending.streamed and _in_pieces(pending.response)
            else as_body(pending.response)
        )
        span = pending.span
        capture = make_capture(
            pending.api,
            request,
            response,
            capture_id=pending.capture_id or uuid.uuid4().hex,
            captured_at=datetime.fromtimestamp(pending.at, UTC),
            producer=self.producer,
            prompt_version=pending.meta.prompt_version,
            route=pending.meta.route,
            tags=pending.meta.tags,
            headers=pending.meta.headers,
            traceparent=None
            if span is None
            else f"00-{span.trace_id:032x}-{span.span_id:016x}-{int(span.trace_flags):02x}",
            tracestate=(span.trace_state.to_header() or None) if span is not None else None,
            streamed=pending.streamed,
            latency_ms=pending.latency_ms,
        )
        if self._redactor is not None:
            capture = map_texts(capture, self._redactor.text).model_copy(update={"redacted": True})
        return capture


def capture_stats_text(stats: CaptureStats) -> str:
    """One line for a log: sent, buffered, and the drops by reason."""
    drops = ", ".join(f"{k} {v}" for k, v in stats.dropped.items() if v) or "none"
    return f"sent {stats.sent}, buffered {stats.buffered}, dropped: {drops}"


__all__: Sequence[str] = ["DROP_REASONS", "CaptureMeta", "CaptureSink", "CaptureStats", "DropReason"]


def _failure_name(delivery: asyncio.Future[Any]) -> str:
    return "CancelledError" if delivery.cancelled() else type(delivery.exception()).__name__


def _in_pieces(response: Any) -> bool:
    """Whether a streamed reply came as its chunks or events (to assemble), not already joined into one body."""
    return isinstance(response, (list, tuple, WireBody))
