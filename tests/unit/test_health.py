"""The health server's parts on their own: settings, readiness reasons, the HTTP answers, /metrics, hand-back."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError

from pairjudge.streams.config.settings import HealthSettings, Settings, TelemetrySettings, WorkerSettings
from pairjudge.streams.faust_compat.inflight import HandedBack, InFlight
from pairjudge.streams.judges.breaker import CircuitBreaker
from pairjudge.streams.telemetry.tracing import Telemetry
from pairjudge.streams.worker.health_server import HealthServer, PrometheusMetrics, WorkerHealth
from tests.fixtures.health import free_port, get


def test_the_server_is_off_and_on_loopback_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert HealthSettings().host == "127.0.0.1"
    assert HealthSettings().port == 0
    assert WorkerSettings().shutdown_grace_s == 30.0
    monkeypatch.setenv("PAIRJUDGE_HEALTH__PORT", "9465")
    monkeypatch.setenv("PAIRJUDGE_HEALTH__HOST", "0.0.0.0")
    monkeypatch.setenv("PAIRJUDGE_WORKER__SHUTDOWN_GRACE_S", "45")
    settings = Settings()
    assert (settings.health.host, settings.health.port, settings.worker.shutdown_grace_s) == ("0.0.0.0", 9465, 45.0)
    for bad in ("-1", "65536"):
        monkeypatch.setenv("PAIRJUDGE_HEALTH__PORT", bad)
        with pytest.raises(ValidationError):
            Settings()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _open(breaker: CircuitBreaker) -> None:
    for _ in range(2):
        breaker.record_failure(breaker.admit())


async def test_readiness_waits_for_control_and_credentials_and_a_closed_breaker() -> None:
    clock = Clock()
    breaker = CircuitBreaker(failure_threshold=2, cooldown_s=5, clock=clock, name="judge-x")
    health = WorkerHealth(control_caught_up=asyncio.Event(), judges_checked=asyncio.Event(), breakers=(breaker,))
    assert health.reasons() == ["control topic not caught up yet", "judge credentials not checked yet"]
    health.control_caught_up.set()
    health.judges_checked.set()
    assert health.reasons() == []
    _open(breaker)
    assert health.reasons() == ["judge judge-x: circuit open"]
    clock.now = 6.0  # the cooldown is over, but only a probe that succeeds closes it
    assert health.reasons() == ["judge judge-x: circuit half_open"]
    breaker.record_success(breaker.admit())
    assert health.reasons() == []
    health.mark_stopping()
    assert health.reasons() == ["shutting down"]


async def test_the_server_answers_livez_readyz_and_metrics_on_127_0_0_1() -> None:
    breaker = CircuitBreaker(failure_threshold=2, cooldown_s=60, name="judge-x")
    health = WorkerHealth(control_caught_up=asyncio.Event(), judges_checked=asyncio.Event(), breakers=(breaker,))
    health.judges_checked.set()
    metrics = PrometheusMetrics("pairjudge-test")
    metrics.observe(health)
    telemetry = Telemetry(TelemetrySettings(), meter_provider=metrics.provider)
    port = free_port()
    server = HealthServer(HealthSettings(port=port), health, metrics)
    await server.start()
    try:
        assert await asyncio.to_thread(get, port, "/livez") == (200, '{"status": "ok"}')
        status, body = await asyncio.to_thread(get, port, "/readyz")
        assert (status, body) == (503, '{"status": "not ready", "reasons": ["control topic not caught up yet"]}')
        health.control_caught_up.set()
        assert (await asyncio.to_thread(get, port, "/readyz"))[0] == 200

        for outcome in ("verdict", "verdict", "review"):
            telemetry.instruments.outcomes.add(1, {"pairjudge.stage": "primary", "pairjudge.outcome": outcome})
        telemetry.instruments.judge_latency.record(0.3, {"pairjudge.stage": "primary"})
        _open(breaker)
        status, text = await asyncio.to_thread(get, port, "/metrics")
        assert status == 200
        samples = {
            (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if not k.startswith("otel_")))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        outcomes = "pairjudge_outcomes_total"
        assert samples[(outcomes, (("pairjudge_outcome", "verdict"), ("pairjudge_stage", "primary")))] == 2
        assert samples[(outcomes, (("pairjudge_outcome", "review"), ("pairjudge_stage", "primary")))] == 1
        assert samples[("pairjudge_judge_breaker_open", (("judge", "judge-x"),))] == 1
        assert samples[("pairjudge_judge_breaker_openings_total", (("judge", "judge-x"),))] == 1
        assert samples[("pairjudge_worker_ready", ())] == 0
        assert samples[("pairjudge_worker_pairs_in_flight", ())] == 0
        # Seconds buckets (the GenAI conventions'), not the SDK's millisecond defaults.
        latency = "gen_ai_client_operation_duration_seconds_bucket"
        assert samples[(latency, (("le", "0.32"), ("pairjudge_stage", "primary")))] == 1
        assert samples[(latency, (("le", "0.16"), ("pairjudge_stage", "primary")))] == 0
        assert any(name == "process_resident_memory_bytes" for name, _ in samples)
    finally:
        await server.stop()
        metrics.shutdown()
    assert (await asyncio.to_thread(get, port, "/livez"))[0] is None


async def test_hand_back_cancels_only_the_judging_and_says_so() -> None:
    inflight = InFlight()
    release = asyncio.Event()

    async def slow_decision() -> str:
        await asyncio.sleep(3600)
        return "never"

    async def quick_decision() -> str:
        await release.wait()
        return "verdict"

    async def pair(decide: Callable[[], Awaitable[str]]) -> str:
        with inflight.pair():
            try:
                result = await inflight.judging(decide())
            except HandedBack:
                return "handed back"
            # Publishing: past the judging, a hand-back no longer reaches it.
            await release.wait()
            await asyncio.sleep(0.05)
            return str(result)

    slow = asyncio.create_task(pair(slow_decision))
    quick = asyncio.create_task(pair(quick_decision))
    await asyncio.sleep(0.01)
    assert inflight.count == 2
    release.set()
    await asyncio.sleep(0.01)  # quick is publishing now
    assert inflight.hand_back() == 1
    assert await slow == "handed back"
    assert await quick == "verdict"
    assert not slow.cancelling()
    assert inflight.count == 0
    # After the hand-back nothing starts judging.
    assert await pair(quick_decision) == "handed back"


async def test_a_cancellation_that_is_not_the_hand_back_stays_one() -> None:
    inflight = InFlight()
    task = asyncio.create_task(inflight.judging(asyncio.sleep(3600)))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
