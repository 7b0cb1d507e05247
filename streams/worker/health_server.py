"""The worker's health and metrics server: ``/livez``, ``/readyz`` and ``/metrics`` (Prometheus text).

Off unless ``PAIRJUDGE_HEALTH__PORT`` is set; bound to 127.0.0.1 unless ``PAIRJUDGE_HEALTH__HOST`` says
otherwise (a container sets 0.0.0.0 for its orchestrator's probes). It runs on the worker's own event
loop, so an answer from ``/livez`` is itself the proof that the loop is not stuck. Faust's own web server
(``PAIRJUDGE_WORKER__WEB_*``) is another thing and stays off by default.

``/readyz`` answers 200 only while the worker can judge: the control topic has been read up to date
(no pair is judged under stale live settings), the judges' credentials were checked at start-up, every
judge's circuit breaker is closed, and the worker is not shutting down. Otherwise 503, with the reasons
as JSON. Readiness does not stop Kafka from handing this worker pairs (the consumer group decides that);
it tells an orchestrator and a dashboard that the worker is not judging, and why.

``/metrics`` renders the project's OpenTelemetry instruments (``streams.telemetry.tracing.Instruments``) through
the SDK's Prometheus reader, plus a few gauges read at scrape time and the process collector. The SDK
meter provider is built only when the server is on: otherwise the instruments stay the API's no-ops,
which cost nothing per judge call (issue 13).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field

from aiohttp import web
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, ProcessCollector, generate_latest

from pairjudge.streams.config.settings import HealthSettings
from pairjudge.streams.faust_compat.inflight import InFlight
from pairjudge.streams.judges.breaker import CircuitBreaker

log = logging.getLogger(__name__)

INSTRUMENTATION = "pairjudge.worker"


@dataclass
class WorkerHealth:
    """What ``/readyz`` reports, read from the parts that know: nothing here is kept up to date by hand."""

    #: ``PolicyHolder.ready``: set once the control (and thresholds) topics were read up to date.
    control_caught_up: asyncio.Event
    #: ``Pipeline.judges_checked``: set once the judges' credentials were checked at start-up.
    judges_checked: asyncio.Event
    breakers: Sequence[CircuitBreaker] = ()
    inflight: InFlight = field(default_factory=InFlight)
    stopping: bool = False
    #: Whether the app has started stopping (``GracefulApp.stopping``): readiness goes 503 from its first moment.
    app_stopping: Callable[[], bool] = lambda: False
    #: None unless the app is restoring its tables from their changelogs (it judges nothing meanwhile);
    #: then the changelog records it still has to read (0 until it knows): ``recovery_watch.records_left``.
    recovering: Callable[[], int | None] = lambda: None
    #: Why the worker gave up on a stalled table recovery (streams.faust_compat.recovery_watch): not live from then on.
    stalled: str | None = None
    #: Why the worker stopped itself over an input (a run of bugs, an undeliverable outcome: streams.worker.delivery).
    broken: str | None = None

    def mark_stopping(self) -> None:
        """The worker is shutting down: not ready from now on."""
        self.stopping = True

    def mark_stalled(self, reason: str) -> None:
        """Table recovery stopped making progress: ``/livez`` fails, for an orchestrator to restart it."""
        self.stalled = reason

    def mark_broken(self, reason: str) -> None:
        """The worker is stopping itself over an input it could not handle: not ready, and says why."""
        self.broken = reason

    def reasons(self) -> list[str]:
        """Why the worker is not ready; empty when it is."""
        reasons = []
        if self.broken is not None:
            reasons.append(f"stopped: {self.broken}")
        if self.stopping or self.app_stopping():
            reasons.append("shutting down")
        left = self.recovering()
        if left is not None:
            # The count tells an operator whether a long recovery is moving (and tests when it has begun).
            reasons.append(f"recovering tables ({left} changelog records left)" if left else "recovering tables")
        if not self.control_caught_up.is_set():
            reasons.append("control topic not caught up yet")
        if not self.judges_checked.is_set():
            reasons.append("judge credentials not checked yet")
        for breaker in self.breakers:
            state = breaker.state
            if state != "closed":
                reasons.append(f"judge {breaker.name}: circuit {state}")
        return reasons


class PrometheusMetrics:
    """An SDK meter provider whose only reader renders Prometheus text, on a registry of its own."""

    def __init__(self, service_name: str) -> None:
        # A registry of this worker's own, not prometheus_client's global one: two apps in one process
        # (tests) never collide, and nothing registered by a library shows up by surprise.
        self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)  # process_cpu_seconds_total, process_resident_memory_bytes, ...
        self._reader = PrometheusMetricReader(registry=self.registry)
        self.provider = MeterProvider(
            metric_readers=[self._reader], resource=Resource.create({"service.name": service_name})
        )

    def observe(self, health: WorkerHealth) -> None:
        """Gauges read at scrape time: readiness, pairs in flight, and each judge's breaker."""
        meter = self.provider.get_meter(INSTRUMENTATION)

        def ready(_: CallbackOptions) -> Iterable[Observation]:
            yield Observation(0 if health.reasons() else 1)

        def in_flight(_: CallbackOptions) -> Iterable[Observation]:
            yield Observation(health.inflight.count)

        def breaker_open(_: CallbackOptions) -> Iterable[Observation]:
            for breaker in health.breakers:
                yield Observation(0 if breaker.state == "closed" else 1, {"judge": breaker.name})

        def breaker_openings(_: CallbackOptions) -> Iterable[Observation]:
            for breaker in health.breakers:
                yield Observation(breaker.opened_count, {"judge": breaker.name})

        meter.create_observable_gauge(
            "pairjudge.worker.ready", [ready], description="1 when /readyz answers 200, else 0"
        )
        meter.create_observable_gauge(
            "pairjudge.worker.pairs_in_flight", [in_flight], description="Pairs and tie-breaks being processed"
        )
        meter.create_observable_gauge(
            "pairjudge.judge.breaker.open", [breaker_open], description="1 while a judge's circuit is not closed"
        )
        meter.create_observable_counter(
            "pairjudge.judge.breaker.openings", [breaker_openings], description="Times a judge's circuit opened"
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def shutdown(self) -> None:
        self.provider.shutdown()


Probe = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def serve_probes(settings: HealthSettings, livez: Probe, readyz: Probe, metrics: Probe) -> web.AppRunner:
    """``/livez``, ``/readyz`` and ``/metrics`` served on the configured host and port: the worker's server and
    the ``--processes`` supervisor's (``streams.worker.supervisor_health``). Returns the runner to clean up."""
    app = web.Application()
    app.router.add_get("/livez", livez)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, settings.host, settings.port).start()
    return runner


class HealthServer:
    """The aiohttp server for ``/livez``, ``/readyz`` and ``/metrics`` (``start``/``stop`` on the worker's loop)."""

    def __init__(self, settings: HealthSettings, health: WorkerHealth, metrics: PrometheusMetrics | None) -> None:
        self.settings = settings
        self.health = health
        self.metrics = metrics
        self._runner: web.AppRunner | None = None
        #: The port actually bound (the configured one).
        self.port: int | None = None

    async def start(self) -> None:
        self._runner = await serve_probes(self.settings, self._livez, self._readyz, self._metrics)
        self.port = self.settings.port
        log.warning("health: /livez, /readyz and /metrics on http://%s:%s/", self.settings.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def _livez(self, _: web.Request) -> web.Response:
        # Answering at all is the check: the handler runs on the worker's loop. A worker whose table
        # recovery stalled is stopping itself; until it has, it is not live either.
        if self.health.stalled is not None:
            return web.json_response({"status": "stalled", "reason": self.health.stalled}, status=503)
        return web.json_response({"status": "ok"})

    async def _readyz(self, _: web.Request) -> web.Response:
        reasons = self.health.reasons()
        body = {"status": "not ready" if reasons else "ready", "reasons": reasons}
        return web.Response(status=503 if reasons else 200, text=json.dumps(body), content_type="application/json")

    async def _metrics(self, _: web.Request) -> web.Response:
        if self.metrics is None:
            return web.Response(status=404, text="metrics are not collected in this process\n")
        response = web.Response(body=self.metrics.render())
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response
