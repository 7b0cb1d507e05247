"""With no exporter, spans are not recorded, yet trace context flows exactly as before (streams.telemetry.tracing)."""

from __future__ import annotations

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import TraceFlags

from pairjudge.streams.config.settings import TelemetrySettings
from pairjudge.streams.telemetry.tracing import (
    ContextOnlyTracer,
    Telemetry,
    extract_context,
    inject_headers,
    make_tracer_provider,
)

UPSTREAM = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
UPSTREAM_UNSAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"


def _traceparent(headers: list[tuple[str, bytes]]) -> str:
    return dict(headers)["traceparent"].decode()


def test_exporter_none_records_nothing_but_continues_the_callers_trace() -> None:
    telemetry = Telemetry(TelemetrySettings(exporter="none"))
    assert isinstance(telemetry.tracer, ContextOnlyTracer)
    parent = extract_context([("traceparent", UPSTREAM.encode())])
    with telemetry.tracer.start_as_current_span("pairjudge.primary", context=parent) as stage:
        assert not stage.is_recording()
        stage_ctx = stage.get_span_context()
        with telemetry.tracer.start_as_current_span("chat m") as call:
            call_ctx = call.get_span_context()
        outgoing = _traceparent(inject_headers())
    # The trace id is the caller's, each span has an id of its own, and the headers carry the stage span.
    assert format(stage_ctx.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    assert call_ctx.trace_id == stage_ctx.trace_id
    assert len({stage_ctx.span_id, call_ctx.span_id, 0xB7AD6B7169203331}) == 3
    assert outgoing == f"00-0af7651916cd43dd8448eb211c80319c-{stage_ctx.span_id:016x}-01"


def test_exporter_none_keeps_the_callers_sampling_decision() -> None:
    tracer = ContextOnlyTracer()
    unsampled = extract_context([("traceparent", UPSTREAM_UNSAMPLED.encode())])
    with tracer.start_as_current_span("pairjudge.primary", context=unsampled) as span:
        assert span.get_span_context().trace_flags == TraceFlags.DEFAULT
        assert _traceparent(inject_headers()).endswith("-00")
    # A new trace is marked sampled, as the SDK's default (parent-based, always on) sampler marks it.
    with tracer.start_as_current_span("pairjudge.primary") as root:
        ctx = root.get_span_context()
        assert ctx.is_valid
        assert ctx.trace_flags.sampled
        assert _traceparent(inject_headers()) == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-01"
    # Two new traces do not share an id.
    with tracer.start_as_current_span("again") as other:
        assert other.get_span_context().trace_id != ctx.trace_id


def test_an_exporter_still_gets_recorded_spans() -> None:
    exporter = InMemorySpanExporter()
    provider = make_tracer_provider(TelemetrySettings(exporter="none"), exporter=exporter)
    telemetry = Telemetry(TelemetrySettings(exporter="none"), tracer_provider=provider)
    with telemetry.tracer.start_as_current_span("pairjudge.primary") as span:
        assert span.is_recording()
    provider.force_flush()
    assert [s.name for s in exporter.get_finished_spans()] == ["pairjudge.primary"]


def test_metrics_go_to_a_provider_that_reads_them_and_nowhere_otherwise() -> None:
    from opentelemetry.metrics import NoOpMeterProvider
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    assert isinstance(Telemetry(TelemetrySettings(exporter="none")).meter_provider, NoOpMeterProvider)
    reader = InMemoryMetricReader()
    telemetry = Telemetry(TelemetrySettings(exporter="none"), meter_provider=MeterProvider(metric_readers=[reader]))
    telemetry.instruments.outcomes.add(1, {"pairjudge.stage": "primary", "pairjudge.outcome": "verdict"})
    data = reader.get_metrics_data()
    assert data is not None
    names = [m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics]
    assert names == ["pairjudge.outcomes"]
