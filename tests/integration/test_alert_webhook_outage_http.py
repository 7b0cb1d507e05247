"""A webhook receiver that dies mid-run and comes back: a real HTTP server on 127.0.0.1 that takes alerts, is
stopped (connections refused), comes back answering 503, then too slowly, then well again; alerts keep coming at
seeded, jittered moments throughout, as an audit raises them.

Every alert ends delivered, or lost after its retries (counted on ``pairjudge.alert.webhook`` and logged with its
series), never neither; alerts raised while the receiver was away reach it once it is back; whoever raises alerts
is never held up; a worker stopping with alerts still queued counts and logs them as lost.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from pydantic import SecretStr

from pairjudge.schemas.audit import Alert
from pairjudge.streams.telemetry.alerts import AlertWebhook

PATH = "/hooks/s3cr3t"
TIMEOUT_S = 1.0


def _alert(number: int) -> Alert:
    return Alert(
        kind="tiebreak_rate_high",
        series=f"offline:m|h|tone_style|{number}",
        message=f"alert {number}",
        value=0.6,
        threshold=0.2,
    )


@dataclass
class Receiver:
    """Takes alerts on a fixed port; ``mode`` says how it answers, ``stop`` closes the port (refused)."""

    port: int
    mode: str = "ok"
    #: Alerts answered 200 in time, by message.
    taken: Counter[str] = field(default_factory=Counter)
    answers: Counter[str] = field(default_factory=Counter)
    _runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.Response:
        message = (await request.json())["alerts"][0]["annotations"]["summary"]
        mode = self.mode
        self.answers[mode] += 1
        if mode == "5xx":
            return web.Response(status=503)
        if mode == "slow":
            await asyncio.sleep(2.5 * TIMEOUT_S)  # the sender has given up on this attempt by now
            return web.Response(text="late")
        self.taken[message] += 1
        return web.Response(text="ok")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post(PATH, self.handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True).start()

    @property
    def running(self) -> bool:
        return self._runner is not None

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _outcomes(reader: InMemoryMetricReader) -> Counter[str]:
    counts: Counter[str] = Counter()
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "pairjudge.alert.webhook":
                    for point in metric.data.data_points:
                        assert isinstance(point, NumberDataPoint)
                        counts[str((point.attributes or {})["outcome"])] += int(point.value)
    return counts


async def test_alerts_outlive_a_receiver_that_goes_away_and_comes_back(caplog: pytest.LogCaptureFixture) -> None:
    receiver = Receiver(_free_port())
    await receiver.start()
    reader = InMemoryMetricReader()
    hook = AlertWebhook(
        SecretStr(f"http://127.0.0.1:{receiver.port}{PATH}"),
        attempts=5,
        backoff_s=0.2,  # waits of about 0.2, 0.4, 0.8, 1.6 s: some alerts outlast the outage, some do not
        timeout_s=TIMEOUT_S,
        meter_provider=MeterProvider(metric_readers=[reader]),
    )
    rng = random.Random(7)
    raised: dict[str, float] = {}
    submit_times: list[float] = []
    planned = 0.0
    back_at: float | None = None  # when the receiver answered well again
    started = time.monotonic()
    caplog.set_level(logging.ERROR, logger="pairjudge.streams.telemetry.alerts")
    number = 0
    # Up for 1 s, down (refusing) until 3.5 s, then back answering 503 to two attempts, then too slowly to one,
    # then well: the later phases end on what the receiver saw, not on the clock, so a slow machine cannot skip one.
    while back_at is None or time.monotonic() - back_at < 1.5:
        now = time.monotonic() - started
        assert now < 60, f"the sender never reached the receiver's phases: {receiver.answers}"
        if 1.0 <= now < 3.5 and receiver.running:
            await receiver.stop()
        elif now >= 3.5 and not receiver.running:
            receiver.mode = "5xx"
            await receiver.start()
        elif receiver.mode == "5xx" and receiver.answers["5xx"] >= 2:
            receiver.mode = "slow"
        elif receiver.mode == "slow" and receiver.answers["slow"] >= 1:
            receiver.mode, back_at = "ok", time.monotonic()
        before = time.monotonic()
        hook.submit(_alert(number))
        submit_times.append(time.monotonic() - before)
        raised[f"alert {number}"] = now
        number += 1
        pause = rng.expovariate(1 / 0.25)  # uneven: bursts and pauses
        planned += pause
        await asyncio.sleep(pause)
    took = time.monotonic() - started
    well_again = (back_at or 0.0) - started
    async with asyncio.timeout(60):
        await hook.drain()

    submitted = len(raised)
    counts = _outcomes(reader)
    assert counts["delivered"] + counts["lost"] + counts["dropped"] == submitted, counts
    assert (counts["delivered"], counts["lost"], counts["dropped"]) == (hook.delivered, hook.failed, hook.dropped)
    # Delivered means the receiver took it in time; a lost alert is logged with its series.
    assert hook.delivered == len(receiver.taken)
    lost_lines = [r.getMessage() for r in caplog.records if "could not deliver" in r.getMessage()]
    assert len(lost_lines) == hook.failed
    lost_series = {line.rsplit(" on ", 1)[1] for line in lost_lines}
    never_taken = {int(m.split()[1]) for m in raised if m not in receiver.taken}
    assert lost_series == {_alert(n).series for n in never_taken}
    # The outage was felt (refused, 503, too slow) and bridged: alerts raised while the receiver was away reached
    # it once it was back; everything raised after it was well again reached it.
    assert receiver.answers["5xx"]
    assert receiver.answers["slow"]
    assert any(1.0 <= raised[m] < well_again for m in receiver.taken)
    assert all(m in receiver.taken for m, at in raised.items() if at >= well_again)
    # Whoever raised the alerts never waited for the receiver (each attempt may take a second, the retries many).
    assert max(submit_times) < 0.5
    assert took - planned < 3.0

    # A worker that stops while the receiver is away: what is still queued is counted and logged as lost.
    await receiver.stop()
    hook.submit(_alert(1000))
    hook.submit(_alert(1001))
    await asyncio.sleep(0.1)
    await hook.aclose()
    counts = _outcomes(reader)
    assert counts["lost"] == hook.failed
    assert counts["delivered"] + counts["lost"] + counts["dropped"] == submitted + 2
    assert sum("stopped before it was delivered" in r.getMessage() for r in caplog.records) == 2
    assert "s3cr3t" not in caplog.text
