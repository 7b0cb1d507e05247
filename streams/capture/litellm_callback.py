"""The LiteLLM callback: a LiteLLM proxy's successful calls as captures on ``pairjudge.captures``.

In the proxy's ``config.yaml`` (guide: docs/guides/litellm.md)::

    litellm_settings:
      callbacks: ["pairjudge.streams.capture.litellm_callback.capture_callback"]

``capture_callback`` is made when LiteLLM imports this module, from pairjudge's settings in the environment
(``PAIRJUDGE_KAFKA__*``, ``PAIRJUDGE_TOPICS__PREFIX``, ``PAIRJUDGE_REDACTION__*``, and the experiments file,
``PAIRJUDGE_SHADOW__EXPERIMENTS_FILE``, for the draw) plus ``PAIRJUDGE_LITELLM_HINT_HEADERS`` (comma-separated
request header names whose values the experiments may select on; never a credential's).

The sending is the producer SDK's ``CaptureSink``: a bounded buffer, the redaction hook, drop counting by reason,
batched aiokafka sends on a thread of its own. Nothing here raises into LiteLLM: what cannot be captured is
dropped and counted (``CaptureSink.stats()``, the OpenTelemetry counter ``pairjudge.capture.dropped``).

Imports aiokafka, pydantic and OpenTelemetry's API, never Faust (an import-linter contract checks it).
"""

from __future__ import annotations

import atexit
import logging
import os
import time
from collections.abc import Collection, Sequence
from typing import Any, Final

from litellm.integrations.custom_logger import CustomLogger
from litellm.litellm_core_utils.redact_messages import should_redact_message_logging
from litellm.llms.anthropic.messages.adapters.transformation import AnthropicAdapter

from pairjudge.schemas.experiments import Experiment
from pairjudge.streams.capture.litellm_exchange import (
    HINT_HEADERS_ENV,
    MAX_BUFFERED_ENV,
    REPORT_EVERY_ENV,
    Exchange,
    draw,
    read_exchange,
)
from pairjudge.streams.capture.sink import CaptureMeta, CaptureSink, CaptureStats, capture_stats_text
from pairjudge.streams.config.experiments import load_experiments
from pairjudge.streams.config.settings import load_settings

log = logging.getLogger(__name__)


class PairjudgeCallback(CustomLogger):  # type: ignore[misc]  # LiteLLM's class is untyped
    """Captures the proxy's successful calls that an experiment draws (every call without experiments)."""

    def __init__(
        self,
        sink: CaptureSink | None = None,
        *,
        experiments: Sequence[Experiment] | None = None,
        hint_headers: Collection[str] | None = None,
    ) -> None:
        super().__init__()
        if sink is None or experiments is None:
            settings = load_settings()
            if experiments is None:
                experiments = load_experiments(settings.shadow.experiments_file)
            if sink is None:
                sink = CaptureSink.from_settings(
                    settings, max_buffered=int(os.environ.get(MAX_BUFFERED_ENV, "1000")), producer="litellm"
                )
        if hint_headers is None:
            hint_headers = [h.strip() for h in os.environ.get(HINT_HEADERS_ENV, "").split(",") if h.strip()]
        self.sink = sink
        self.experiments = tuple(experiments)
        self.hint_headers = tuple(hint_headers)
        #: Calls no experiment drew (not a loss: they were never to be captured).
        self.not_drawn = 0
        #: Calls whose content LiteLLM is told not to log (``turn_off_message_logging``, globally, per key or per
        #: request): never captured either.
        self.withheld = 0
        self._report_every = float(os.environ.get(REPORT_EVERY_ENV, "60"))
        self._next_report = time.monotonic() + self._report_every
        # Registered after the sink's own flush at exit, so run before it: the last counts are logged.
        atexit.register(self.close)

    def close(self, timeout: float = 2.0) -> CaptureStats:
        """Send what is buffered (for up to ``timeout`` seconds) and log what was sent and lost. Idempotent."""
        stats = self.sink.close(timeout)
        self._report(stats)
        return stats

    def stats(self) -> CaptureStats:
        return self.sink.stats()

    async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        self.log_success(kwargs, response_obj, start_time, end_time)

    def log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        # LiteLLM calls this one for its synchronous entry points; the proxy calls the async one.
        self.log_success(kwargs, response_obj, start_time, end_time)

    def log_success(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> bool:
        """Queue the call's capture if an experiment draws it. True when queued. Never raises."""
        try:
            return self._capture(kwargs, response_obj, start_time, end_time)
        except Exception as exc:  # noqa: BLE001 - a capture must never fail LiteLLM's call
            self.sink.drop("error", exc)  # counted with the sink's own drops
            return False
        finally:
            self._maybe_report()

    def _capture(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> bool:
        exchange = read_exchange(kwargs, response_obj, start_time, end_time, hint_headers=self.hint_headers)
        if exchange is None:
            return False
        if should_redact_message_logging(kwargs):
            self.withheld += 1
            return False
        capture_id = draw(exchange, self.experiments)
        if capture_id is None:
            self.not_drawn += 1
            return False
        response = _anthropic_body(exchange.response) if exchange.api == "anthropic_messages" else exchange.response
        return self.sink.capture(
            exchange.request,
            response,
            api=exchange.api,
            meta=_meta(exchange),
            # LiteLLM hands over a streamed reply already joined: the sink takes it as one body, and the capture
            # says it was streamed, as the SDK's wrappers' captures of a streamed call do.
            streamed=exchange.streamed,
            latency_ms=exchange.latency_ms,
            capture_id=capture_id,
        )

    def _maybe_report(self) -> None:
        # From a call's event, at most once per interval: the counts reach the proxy's log even when it is ended
        # by SIGTERM, which uvicorn re-raises after its shutdown, so that no exit hook runs.
        try:
            now = time.monotonic()
            if now >= self._next_report:
                self._next_report = now + self._report_every
                self._report(self.sink.stats())
        except Exception:  # noqa: BLE001, S110 - a log line is not worth failing a call
            pass

    def _report(self, stats: CaptureStats) -> None:
        level = logging.WARNING if stats.dropped_total else logging.INFO
        log.log(
            level,
            "pairjudge LiteLLM callback: %s; not drawn %d, withheld %d",
            capture_stats_text(stats),
            self.not_drawn,
            self.withheld,
        )


def _anthropic_body(response: Any) -> Any:
    """The Anthropic message the client got. LiteLLM hands its callbacks a ``/v1/messages`` reply in chat shape (a
    ``ModelResponse``), streamed or not, and converts it back for the client: the same conversion here."""
    if getattr(response, "choices", None) is None:
        return response  # already an Anthropic body
    return AnthropicAdapter().translate_completion_output_params(response)


def _meta(exchange: Exchange) -> CaptureMeta:
    return CaptureMeta(
        prompt_version=exchange.prompt_version,
        route=exchange.route,
        tags=exchange.tags,
        headers=dict(exchange.headers),
    )


#: The instance a LiteLLM proxy's config names.
capture_callback: Final = PairjudgeCallback()

__all__ = ["PairjudgeCallback", "capture_callback"]
