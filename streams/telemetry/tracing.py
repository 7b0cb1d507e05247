"""OpenTelemetry at the edge: providers, ``traceparent`` in Kafka headers, and spans for judge calls.

What to record is decided by the core (``Decision.facts``, ``Decision.evaluation``); this module
owns how: the spans, their attribute names, and the exporters. Stage names are the same in spans, logs and metrics.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import IO, Any

from opentelemetry import context as otel_context
from opentelemetry import metrics
from opentelemetry import trace as trace_api
from opentelemetry.propagate import get_global_textmap
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from pairjudge.agents import Decision, DecisionFacts, Judge, JudgeError, JudgeRequest, JudgeResponse, JudgeWrapper
from pairjudge.agents.cost import known_usd
from pairjudge.schemas.kinds import WorkerStage
from pairjudge.streams.config.settings import TelemetrySettings
from pairjudge.streams.security.cleartext import check_cleartext
from pairjudge.streams.security.files import open_private_append

INSTRUMENTATION = "pairjudge"
AttributeValue = str | int | float | bool


def decision_attributes(facts: DecisionFacts) -> dict[str, AttributeValue]:
    """The decision span's ``pairjudge.*`` attributes: one per fact that applies (None is left out)."""
    attributes: dict[str, AttributeValue] = {}
    for field in fields(facts):
        value = getattr(facts, field.name)
        if isinstance(value, tuple):
            # The cascade's tiers passed, in order: one readable string, left out when there are none.
            value = ",".join(value) or None
        if value is not None:
            attributes[f"pairjudge.{field.name}"] = value
    return attributes


def _compact_json(span: ReadableSpan) -> str:
    return json.dumps(json.loads(span.to_json()), separators=(",", ":")) + "\n"


def make_tracer_provider(settings: TelemetrySettings, exporter: SpanExporter | None = None) -> TracerProvider:
    """A provider for the configured exporter; tests pass their own (e.g. an in-memory exporter)."""
    provider = TracerProvider(resource=Resource.create({"service.name": settings.service_name}))
    if exporter is None:
        exporter = _configured_exporter(settings)
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=500))
    return provider


def _configured_exporter(settings: TelemetrySettings) -> SpanExporter | None:
    if settings.exporter == "none":
        return None
    if settings.exporter == "console":
        return ConsoleSpanExporter(formatter=_compact_json)
    if settings.exporter == "file":
        # Owner-only (0o600, a created parent 0o700) whatever the umask; an existing file is tightened.
        out: IO[str] = open_private_append(settings.file_path, what="trace file")
        return ConsoleSpanExporter(out=out, formatter=_compact_json)
    return otlp_exporter(settings)


def otlp_exporter(settings: TelemetrySettings) -> SpanExporter:
    """OTLP/HTTP to ``otlp_endpoint``, with the configured headers and TLS files.

    The headers (often an auth token) go on export requests and nowhere else: never logged, never on a
    span. They are refused over plain HTTP to a collector off this machine unless allowed
    (``streams.security.cleartext``), here as well as at start-up. The exporter never follows redirects.
    """
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    headers = settings.resolved_otlp_headers()
    endpoint = settings.otlp_endpoint.rstrip("/") + "/v1/traces"
    if headers:
        check_cleartext(
            endpoint,
            allowed=settings.otlp_allow_cleartext_headers,
            what="the OTLP headers (PAIRJUDGE_TELEMETRY__OTLP_HEADERS)",
            setting="PAIRJUDGE_TELEMETRY__OTLP_ENDPOINT",
            allow_setting="PAIRJUDGE_TELEMETRY__OTLP_ALLOW_CLEARTEXT_HEADERS",
        )

    def path(value: Path | None) -> str | None:
        return str(value) if value is not None else None

    return OTLPSpanExporter(
        endpoint=endpoint,
        headers=headers or None,
        certificate_file=path(settings.otlp_certificate_file),
        client_certificate_file=path(settings.otlp_client_certificate_file),
        client_key_file=path(settings.otlp_client_key_file),
        session=_pinned_ca_session() if settings.otlp_certificate_file is not None else None,
    )


def _pinned_ca_session() -> Any:
    """A ``requests`` session that verifies with the CA file it is given, whatever the environment says.

    requests lets ``REQUESTS_CA_BUNDLE`` (or ``CURL_CA_BUNDLE``) override a session's own ``verify``
    (psf/requests#3829), so a configured collector CA would be silently replaced by the system bundle
    on any host that sets it, and the export would fail. Proxies from the environment still apply.
    """
    import requests

    class PinnedCASession(requests.Session):
        def merge_environment_settings(
            self, url: Any, proxies: Any, stream: Any, verify: Any, cert: Any
        ) -> dict[str, Any]:
            merged: dict[str, Any] = super().merge_environment_settings(url, proxies, stream, verify, cert)
            merged["verify"] = self.verify
            return merged

    return PinnedCASession()


class ContextOnlyTracer(trace_api.Tracer):
    """A tracer for when nothing exports: every span is a ``NonRecordingSpan`` with real ids.

    With the exporter set to ``none`` an SDK tracer would still build, time and fill every span only to
    drop it (5-10% of a busy worker). This one records nothing, yet trace context flows as before: a span
    continues its parent's trace (a new trace id when there is none) with a span id of its own, so
    ``traceparent`` goes on in Kafka headers and ``trace_id`` into outcomes, and a downstream service
    that does export sees the same trace. The sampled flag is the parent's, or set for a new trace, as
    the SDK's default sampler (parent-based, always on) would have set it, so downstream sampling
    decisions do not change with this worker's exporter. Code that fills spans checks
    ``span.is_recording()`` first, so it skips that work too.
    """

    def __init__(self) -> None:
        self._ids = RandomIdGenerator()

    def start_span(
        self,
        name: str,
        context: otel_context.Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Any = None,
        links: Any = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Span:
        parent = trace_api.get_current_span(context).get_span_context()
        if parent.is_valid:
            trace_id, flags, state = parent.trace_id, parent.trace_flags, parent.trace_state
        else:
            trace_id, flags, state = self._ids.generate_trace_id(), TraceFlags(TraceFlags.SAMPLED), None
        span_context = SpanContext(trace_id, self._ids.generate_span_id(), False, flags, state)
        return trace_api.NonRecordingSpan(span_context)

    # The API declares its private context-manager type here; a plain one behaves the same in ``with``.
    @contextlib.contextmanager
    def start_as_current_span(  # type: ignore[override]
        self,
        name: str,
        context: otel_context.Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Any = None,
        links: Any = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[Span]:
        span = self.start_span(name, context, kind)
        with trace_api.use_span(span, end_on_exit=end_on_exit, record_exception=False) as current:
            yield current


# --- traceparent in Kafka headers -------------------------------------------------------------


def _header_dict(headers: Iterable[tuple[str, bytes]] | Mapping[str, bytes] | None) -> dict[str, str]:
    if headers is None:
        return {}
    items = headers.items() if isinstance(headers, Mapping) else headers
    out = {}
    for key, value in items:
        if isinstance(value, bytes):
            out[key.lower()] = value.decode("latin-1")
        elif isinstance(value, str):
            out[key.lower()] = value
    return out


def extract_context(headers: Iterable[tuple[str, bytes]] | Mapping[str, bytes] | None) -> otel_context.Context:
    return get_global_textmap().extract(_header_dict(headers))


def inject_headers(ctx: otel_context.Context | None = None) -> list[tuple[str, bytes]]:
    carrier: dict[str, str] = {}
    get_global_textmap().inject(carrier, context=ctx)
    return [(k, v.encode("latin-1")) for k, v in carrier.items()]


def trace_id_of(span: Span) -> str | None:
    ctx = span.get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else None


# --- metrics ------------------------------------------------------------------------------------


JUDGE_LATENCY_BUCKETS_S = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)


@dataclass
class Instruments:
    outcomes: metrics.Counter
    flips: metrics.Counter
    judge_calls: metrics.Counter
    judge_latency: metrics.Histogram
    tokens: metrics.Counter
    cost: metrics.Counter
    pair_cost: metrics.Counter
    cache_hits: metrics.Counter
    dead_letters: metrics.Counter
    replays: metrics.Counter
    alerts: metrics.Counter
    internal_errors: metrics.Counter
    shadow_asks: metrics.Counter
    shadow_repeats: metrics.Counter
    shadow_set_aside: metrics.Counter

    @classmethod
    def create(cls, meter: metrics.Meter) -> Instruments:
        return cls(
            outcomes=meter.create_counter("pairjudge.outcomes", description="Decisions by stage and outcome"),
            flips=meter.create_counter("pairjudge.position_flips", description="Pairs whose two orders disagreed"),
            judge_calls=meter.create_counter("pairjudge.judge.calls", description="Judge calls by validity"),
            judge_latency=meter.create_histogram(
                "gen_ai.client.operation.duration",
                unit="s",
                # The GenAI semantic conventions' buckets: the SDK's default ones are for milliseconds,
                # so every judge call would land in the first few (seen on /metrics, streams.worker.health_server).
                explicit_bucket_boundaries_advisory=JUDGE_LATENCY_BUCKETS_S,
            ),
            tokens=meter.create_counter("gen_ai.client.token.usage", unit="{token}"),
            cost=meter.create_counter("pairjudge.judge.cost", unit="USD", description="Priced judge spend"),
            pair_cost=meter.create_counter(
                "pairjudge.decision.cost",
                unit="USD",
                description=(
                    "Priced spend of each decision's calls (every tier's), by stage, outcome and deciding tier: "
                    "divided by pairjudge.outcomes, the cost per decided pair"
                ),
            ),
            cache_hits=meter.create_counter("pairjudge.judge.cache_hits", description="Judge calls served from cache"),
            dead_letters=meter.create_counter("pairjudge.dead_letters", description="Events dead-lettered by reason"),
            replays=meter.create_counter(
                "pairjudge.replays", description="Redelivered inputs answered with their recorded outcome, unjudged"
            ),
            alerts=meter.create_counter("pairjudge.alerts", description="Drift-audit alerts raised, by kind"),
            internal_errors=meter.create_counter(
                "pairjudge.internal_errors", description="Unexpected errors (bugs, not bad input) by stage"
            ),
            shadow_asks=meter.create_counter(
                "pairjudge.shadow.asks", description="Challenger calls of the shadow stage, by experiment and result"
            ),
            shadow_repeats=meter.create_counter(
                "pairjudge.shadow.repeated_asks",
                description=(
                    "Challenger calls for a capture and experiment already asked before a crash or rebalance cut "
                    "the first ask off (in flight then: at-least-once)"
                ),
            ),
            shadow_set_aside=meter.create_counter(
                "pairjudge.shadow.set_aside",
                description="Captures the judge cannot see whole or compare fairly, set aside by reason",
            ),
        )


class Telemetry:
    """The tracer, meter and content-capture switch, passed to the edges that record."""

    def __init__(
        self,
        settings: TelemetrySettings,
        tracer_provider: TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self.settings = settings
        self.tracer_provider = tracer_provider or make_tracer_provider(settings)
        self.tracer: trace_api.Tracer = (
            # Nothing would see a recorded span: keep the ids flowing, skip the recording.
            ContextOnlyTracer()
            if tracer_provider is None and settings.exporter == "none"
            else self.tracer_provider.get_tracer(INSTRUMENTATION)
        )
        # Without a provider that has a reader, nothing would ever read a measurement: the SDK's provider
        # would still build each one (with its context) and aggregate it, per judge call and decision.
        # A caller that reads metrics passes its provider; otherwise the instruments are no-ops.
        self.meter_provider = meter_provider or metrics.NoOpMeterProvider()
        self.instruments = Instruments.create(self.meter_provider.get_meter(INSTRUMENTATION))

    @property
    def capture_content(self) -> bool:
        return self.settings.capture_content

    def shutdown(self) -> None:
        self.tracer_provider.force_flush()
        self.tracer_provider.shutdown()

    def record_decision(self, span: Span, decision: Decision) -> None:
        """Put the core's decision on the stage span, and count it."""
        facts = decision.facts
        labels: dict[str, str] = {"pairjudge.stage": facts.stage, "pairjudge.outcome": facts.outcome}
        if facts.tier is not None:
            labels["pairjudge.tier"] = facts.tier
        self.instruments.outcomes.add(1, labels)
        spent = known_usd(decision.calls)
        if spent:
            self.instruments.pair_cost.add(spent, labels)
        if facts.flip:
            self.instruments.flips.add(1, {"pairjudge.stage": facts.stage})
        if not span.is_recording():
            return
        span.set_attributes(decision_attributes(facts))
        ev = decision.evaluation
        if ev is not None:
            attrs: dict[str, Any] = {
                "gen_ai.evaluation.name": ev.name,
                "gen_ai.evaluation.score.label": ev.score_label,
            }
            if ev.score_value is not None:
                attrs["gen_ai.evaluation.score.value"] = ev.score_value
            if self.capture_content and ev.explanation:
                # The explanation quotes output text, so it follows the content-capture switch.
                attrs["gen_ai.evaluation.explanation"] = ev.explanation
            span.add_event("gen_ai.evaluation.result", attrs)


class TracingJudge(JudgeWrapper):
    """Wraps any judge so each call is a child span following the GenAI semantic conventions."""

    def __init__(self, inner: Judge, telemetry: Telemetry, stage: WorkerStage, *, tier: str | None = None) -> None:
        super().__init__(inner)
        self._telemetry = telemetry
        self._stage = stage
        #: The judge cascade's tier this judge is (``agents.cascade``): on the span and on every metric's labels,
        #: so calls, latency, tokens and cost show per tier.
        self._labels: dict[str, str] = {"pairjudge.stage": stage} | ({"pairjudge.tier": tier} if tier else {})

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        tel = self._telemetry
        order = request.order
        who = self._inner.identity
        with tel.tracer.start_as_current_span(f"chat {who.model}", kind=SpanKind.CLIENT) as span:
            if span.is_recording():
                span.set_attributes(
                    {
                        "gen_ai.operation.name": "chat",
                        "gen_ai.provider.name": who.provider,
                        "gen_ai.request.model": who.model,
                        "gen_ai.request.temperature": who.temperature,
                        **self._labels,
                        "pairjudge.template": request.template,
                        "pairjudge.order_shown": order,
                        "pairjudge.swapped": order == "BA",
                        "pairjudge.retry": request.attempt,
                        "pairjudge.forced_choice": request.forced_choice,
                    }
                )
                if tel.capture_content:
                    span.set_attribute("gen_ai.input.messages", json.dumps([m.content for m in request.messages]))
            started = time.perf_counter()
            try:
                response = await self._inner.complete(request)
            except JudgeError as exc:
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                span.set_attribute("error.type", type(exc).__name__)
                tel.instruments.judge_calls.add(1, {**self._labels, "outcome": "error"})
                raise
            elapsed = time.perf_counter() - started
            base = {"gen_ai.request.model": who.model, **self._labels}
            tel.instruments.judge_latency.record(elapsed, base)
            tel.instruments.judge_calls.add(1, {**self._labels, "outcome": "ok"})
            if response.cached:
                # A cache hit spent nothing: its stored token counts must not be counted again.
                tel.instruments.cache_hits.add(1, base)
            else:
                if response.input_tokens is not None:
                    tel.instruments.tokens.add(response.input_tokens, {**base, "gen_ai.token.type": "input"})
                if response.output_tokens is not None:
                    tel.instruments.tokens.add(response.output_tokens, {**base, "gen_ai.token.type": "output"})
                if response.cost_usd:
                    tel.instruments.cost.add(response.cost_usd, base)
            if span.is_recording():
                span.set_attribute("gen_ai.response.model", response.model)
                span.set_attribute("pairjudge.cached", response.cached)
                if response.model != who.model:
                    # The server answered with another model than requested: judge drift, made visible.
                    span.set_attribute("pairjudge.model_rerouted", True)
                if response.cost_usd is not None:
                    span.set_attribute("pairjudge.cost_usd", response.cost_usd)
                span.set_attribute("pairjudge.latency_ms", round(elapsed * 1000, 3))
                if response.input_tokens is not None:
                    span.set_attribute("gen_ai.usage.input_tokens", response.input_tokens)
                if response.output_tokens is not None:
                    span.set_attribute("gen_ai.usage.output_tokens", response.output_tokens)
                http_retries = response.extra.get("http_retries")
                if isinstance(http_retries, int):
                    span.set_attribute("pairjudge.http_retries", http_retries)
                if tel.capture_content:
                    span.set_attribute("gen_ai.output.messages", response.text)
            return response
