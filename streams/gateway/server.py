"""The gateway's aiohttp application: the proxy on every path but its own three (``/healthz``, ``/readyz``,
``/metrics``), its client session to the champion, its capture sink; and ``serve``, for ``pairjudge gateway``."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import re
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Final

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST
from yarl import URL

from pairjudge.streams.capture.sink import CaptureSink, capture_stats_text
from pairjudge.streams.config.experiments import load_experiments
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.gateway.proxy import Proxy
from pairjudge.streams.gateway.sampling import Sampler
from pairjudge.streams.worker.health_server import PrometheusMetrics

log = logging.getLogger(__name__)

#: Header names that carry credentials, refused as hint headers (their values would go into captures).
_CREDENTIAL: Final = re.compile(r"auth|key|token|secret|cookie|password|session", re.IGNORECASE)
#: The gateway's own paths; every other one is the champion's.
OWN_PATHS: Final = ("/healthz", "/readyz", "/metrics")
#: Seconds a stopping gateway gives the calls in flight (a long stream) before it closes them: less than the
#: Kubernetes Deployment's terminationGracePeriodSeconds (60) and compose's stop_grace_period (45).
_DRAIN_S: Final = 30.0
#: Seconds between two log lines about lost captures.
_REPORT_EVERY_S: Final = 60.0
#: The largest request body the gateway reads (one it may capture): the champion refuses larger ones anyway.
MAX_REQUEST_BYTES: Final = 64 * 1024 * 1024


class GatewaySettingsError(ValueError):
    """The gateway's settings cannot start it (the message names the variable, never a secret)."""


@dataclass
class GatewayState:
    proxy: Proxy
    sink: CaptureSink | None
    metrics: PrometheusMetrics
    session: aiohttp.ClientSession
    stopping: bool = False


#: The application key of the running gateway's state (``GatewayState``).
STATE: Final = web.AppKey("pairjudge_gateway", GatewayState)


def hint_header_names(raw: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in raw.split(",") if n.strip())
    refused = [n for n in names if _CREDENTIAL.search(n)]
    if refused:
        raise GatewaySettingsError(
            f"PAIRJUDGE_GATEWAY__HINT_HEADERS may not name a credential header: {', '.join(refused)}"
        )
    return names


def sampler_for(settings: Settings) -> Sampler:
    gateway = settings.gateway
    return Sampler.build(
        load_experiments(settings.shadow.experiments_file),
        share=gateway.share,
        route=gateway.route,
        prompt_version=gateway.prompt_version,
        hint_headers=hint_header_names(gateway.hint_headers),
    )


def build_app(settings: Settings, *, sink: CaptureSink | None = None) -> web.Application:
    """The gateway for ``settings``: its sink is ``sink`` when given (tests), else one on the settings' Kafka,
    started and closed with the app."""
    gateway = settings.gateway
    if not gateway.upstream:
        raise GatewaySettingsError("PAIRJUDGE_GATEWAY__UPSTREAM: set the champion's base URL (e.g. http://model:8000)")
    url = URL(gateway.upstream)
    if url.scheme not in ("http", "https") or not url.host:
        raise GatewaySettingsError("PAIRJUDGE_GATEWAY__UPSTREAM: not an http(s) URL")
    sampler = sampler_for(settings)
    app = web.Application(client_max_size=MAX_REQUEST_BYTES, handler_args={"max_field_size": 65536})

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        metrics = PrometheusMetrics("pairjudge-gateway")
        own_sink = sink is None and sampler.captures_any
        used = (
            CaptureSink.from_settings(
                settings,
                max_buffered=gateway.max_buffered,
                max_capture_bytes=gateway.max_capture_bytes + 64 * 1024,
                meter_provider=metrics.provider,
                producer="gateway",
            )
            if own_sink
            else sink
        )
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=gateway.max_connections, ttl_dns_cache=300),
            timeout=aiohttp.ClientTimeout(
                total=None, connect=gateway.connect_timeout_s, sock_read=gateway.read_timeout_s
            ),
            # The bytes as the champion sent them (compressed or not), and no header of the session's own.
            auto_decompress=False,
            skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        proxy = Proxy(
            gateway.upstream,
            session,
            used,
            sampler,
            max_capture_bytes=gateway.max_capture_bytes,
            meter_provider=metrics.provider,
        )
        state = GatewayState(proxy, used, metrics, session)
        app[STATE] = state
        reporter = asyncio.create_task(_report_losses(used)) if used is not None else None
        try:
            yield
        finally:
            state.stopping = True
            if reporter is not None:
                reporter.cancel()
            await session.close()
            if own_sink and used is not None:
                await asyncio.to_thread(used.close, 5.0)
            metrics.shutdown()

    app.cleanup_ctx.append(lifecycle)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    app.router.add_get("/metrics", _metrics)
    app.router.add_route("*", "/{tail:.*}", _proxy)
    return app


async def _report_losses(sink: CaptureSink) -> None:
    """Once a minute, when captures were lost since the last time, one log line with the counts by reason (the
    sink itself logs some reasons, not a full buffer, which can happen thousands of times a minute)."""
    reported = 0
    while True:
        await asyncio.sleep(_REPORT_EVERY_S)
        stats = sink.stats()
        if stats.dropped_total != reported:
            reported = stats.dropped_total
            log.warning("gateway: captures lost (the calls were served): %s", capture_stats_text(stats))


async def _proxy(request: web.Request) -> web.StreamResponse:
    return await request.app[STATE].proxy.handle(request)


async def _healthz(_: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def _readyz(request: web.Request) -> web.Response:
    # Ready while not stopping: Kafka down does not make the gateway unready (it fails open: the champion's
    # responses still pass); the body says how the captures fare.
    state = request.app[STATE]
    body: dict[str, object] = {"status": "not ready" if state.stopping else "ready"}
    if state.sink is not None:
        stats = state.sink.stats()
        body["captures"] = {"sent": stats.sent, "buffered": stats.buffered, "dropped": dict(stats.dropped)}
    return web.json_response(body, status=503 if state.stopping else 200)


async def _metrics(request: web.Request) -> web.Response:
    response = web.Response(body=request.app[STATE].metrics.render())
    response.headers["Content-Type"] = CONTENT_TYPE_LATEST
    return response


@contextlib.asynccontextmanager
async def running(settings: Settings, *, sink: CaptureSink | None = None) -> AsyncIterator[web.AppRunner]:
    """The gateway serving on the settings' host and port (port 0: any free one) until the block ends."""
    runner = web.AppRunner(
        build_app(settings, sink=sink), access_log=None, handler_cancellation=True, shutdown_timeout=_DRAIN_S
    )
    await runner.setup()
    try:
        await web.TCPSite(runner, settings.gateway.host, settings.gateway.port, backlog=1024).start()
        yield runner
    finally:
        await runner.cleanup()


def bound_port(runner: web.AppRunner) -> int:
    for address in runner.addresses:
        return int(address[1])
    raise RuntimeError("the gateway is not listening")


async def serve(settings: Settings) -> None:
    """Run until SIGTERM or SIGINT, then finish the requests in flight and flush the captures."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with running(settings) as runner:
        # What start-up made (modules, settings, the app) lives as long as the process: out of the collector's
        # reach, a full collection walks only what the calls made since, a pause of well under a millisecond
        # instead of the ~100 ms a walk over the start-up heap stalls every call in flight for.
        gc.freeze()
        log.warning(
            "gateway on http://%s:%s/ in front of %s",
            settings.gateway.host,
            settings.gateway.port,
            settings.gateway.upstream,
        )
        await stop.wait()
        # Not ready from now on, while the calls in flight finish (``shutdown_timeout``) and the captures flush.
        runner.app[STATE].stopping = True
