"""The one health endpoint of ``pairjudge worker --processes N``: ``/livez``, ``/readyz``, ``/metrics`` of N workers.

Each worker process serves its own health server (streams.worker.health_server) on a loopback port the
supervisor chose; this server, on ``PAIRJUDGE_HEALTH__HOST``/``__PORT``, answers for all of them by asking
each in turn, so an orchestrator probes and scrapes one address whatever N is:

- ``/livez``: 200 while the supervisor runs and every worker process either runs or waits for its restart.
  A worker whose own ``/livez`` does not answer within ``PROBE_TIMEOUT_S`` has a stuck event loop: 503, for
  the orchestrator to restart the whole, as it would a single stuck worker. A worker that answers 503
  (a stalled table recovery) is stopping itself and will be restarted here, so it does not fail this probe.
- ``/readyz``: 200 only when every worker process answers its ``/readyz`` with 200; otherwise 503 with the
  reasons of each, prefixed with its process number (``process 1: control topic not caught up yet``).
- ``/metrics``: every worker's page merged into one (streams.worker.merged_metrics), each sample labelled
  ``process="<i>"``, with the supervisor's own series (processes, which run, restarts).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from pairjudge.streams.config.settings import HealthSettings
from pairjudge.streams.worker.health_server import serve_probes
from pairjudge.streams.worker.merged_metrics import merge, render, supervisor_families

log = logging.getLogger(__name__)

#: Below the kubelet's 2 s probe timeout (deploy/k8s): a worker slower than this would fail its probe alone too.
PROBE_TIMEOUT_S = 1.5
#: A busy worker renders its metrics in well under this; a scrape waits for the slowest process.
METRICS_TIMEOUT_S = 5.0


class WorkerView(Protocol):
    """What the health endpoint reads of one supervised worker process (streams.worker.supervisor.Child)."""

    @property
    def index(self) -> int: ...

    @property
    def pid(self) -> int | None:
        """The running process's id; None while it waits for a (re)start."""

    @property
    def health_port(self) -> int | None:
        """Where its own health server listens on 127.0.0.1; None when health is off."""

    @property
    def waiting(self) -> str | None:
        """Why it does not run (``restarting in 2 s after exit status 1 (crashed)``); None while it runs."""

    @property
    def restarts(self) -> int: ...


class SupervisorHealth:
    """The aiohttp server for the supervisor's ``/livez``, ``/readyz`` and ``/metrics`` (module doc)."""

    def __init__(self, settings: HealthSettings, workers: Sequence[WorkerView], stopping: Callable[[], bool]) -> None:
        self.settings = settings
        self.workers = workers
        self.stopping = stopping
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession()
        self._runner = await serve_probes(self.settings, self._livez, self._readyz, self._metrics)
        log.warning(
            "health: /livez, /readyz and /metrics of %d worker processes on http://%s:%s/",
            len(self.workers),
            self.settings.host,
            self.settings.port,
        )

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def ask(self, worker: WorkerView, path: str, timeout_s: float) -> tuple[int | None, str]:
        """``(status, body)`` of ``GET path`` on the worker's own server; ``(None, why)`` when it did not answer.

        ``why`` is ``refused`` when nothing listens (the worker is starting or leaving) and ``timeout`` when
        something listens but does not answer in time (its event loop is stuck)."""
        assert self._session is not None
        url = f"http://127.0.0.1:{worker.health_port}{path}"
        try:
            async with self._session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as response:
                return response.status, await response.text()
        except TimeoutError:
            return None, "timeout"
        except aiohttp.ClientError:
            return None, "refused"

    def _running(self) -> list[WorkerView]:
        return [w for w in self.workers if w.pid is not None and w.health_port is not None]

    async def _livez(self, _: web.Request) -> web.Response:
        running = self._running()
        answers = await asyncio.gather(*(self.ask(w, "/livez", PROBE_TIMEOUT_S) for w in running))
        silent = {w.index: why for w, (status, why) in zip(running, answers, strict=True) if status is None}
        stuck = [i for i, why in silent.items() if why == "timeout"]
        processes = []
        for w in self.workers:
            if w.waiting is not None:
                state = w.waiting
            elif w.index in stuck:
                state = "its event loop does not answer /livez"
            elif w.index in silent:
                state = "starting"  # running, its health server not listening yet
            else:
                state = "running"
            processes.append({"process": w.index, "pid": w.pid, "state": state, "restarts": w.restarts})
        body = {"status": "stuck" if stuck else "ok", "processes": processes}
        return web.json_response(body, status=503 if stuck else 200)

    async def _readyz(self, _: web.Request) -> web.Response:
        answers = await asyncio.gather(*(self._readiness(w) for w in self.workers))
        reasons = ["shutting down"] if self.stopping() else []
        processes: dict[str, Any] = {}
        for w, own in zip(self.workers, answers, strict=True):
            processes[str(w.index)] = {"status": "not ready" if own else "ready", "reasons": own}
            reasons.extend(f"process {w.index}: {reason}" for reason in own)
        body = {"status": "not ready" if reasons else "ready", "reasons": reasons, "processes": processes}
        return web.json_response(body, status=503 if reasons else 200)

    async def _readiness(self, worker: WorkerView) -> list[str]:
        """Why this worker process is not ready (empty when it is)."""
        if worker.pid is None:
            return [worker.waiting or "not running"]
        if worker.health_port is None:
            return ["its health server is off"]
        status, body = await self.ask(worker, "/readyz", PROBE_TIMEOUT_S)
        if status is None:
            return ["starting (its health server does not answer yet)" if body == "refused" else "/readyz timed out"]
        if status == 200:
            return []
        try:
            reasons = json.loads(body).get("reasons") or [f"/readyz answered {status}"]
        except (ValueError, AttributeError):
            reasons = [f"/readyz answered {status}"]
        return [str(reason) for reason in reasons]

    async def _metrics(self, _: web.Request) -> web.Response:
        running = self._running()
        answers = await asyncio.gather(*(self.ask(w, "/metrics", METRICS_TIMEOUT_S) for w in running))
        pages = {str(w.index): body for w, (status, body) in zip(running, answers, strict=True) if status == 200}
        up = {str(w.index): w.pid is not None for w in self.workers}
        restarts = {str(w.index): w.restarts for w in self.workers}
        families = merge(pages) + supervisor_families(up, restarts)
        response = web.Response(body=render(families))
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response
