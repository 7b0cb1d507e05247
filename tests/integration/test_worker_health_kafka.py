"""A real worker's health server: readiness through start-up and a judge outage, metrics, where it listens.

The worker judges through the OpenAI-compatible adapter against a real HTTP judge on 127.0.0.1 that
starts down (503 to every completion). /readyz must say 503 while the control topic is not yet caught
up (polled from the moment the server binds, before the app has read the topic), 503 with the open
circuit once pairs fail, and 200 once the judge is back and a pair was judged. /metrics must parse as
Prometheus text and count the outcomes. The server binds 127.0.0.1 only; a worker with the port at 0
listens on nothing at all.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.producer import send_events
from pairjudge_dev.workers import kafka_run, read_log, running_worker
from tests.fixtures.fake_judge_server import FakeJudgeServer
from tests.fixtures.health import breaker_judge_settings, free_port, get, listening
from tests.fixtures.marked import MarkedJudge, marked_pair

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


async def _readyz_until(port: int, predicate: str, timeout: float) -> list[tuple[int | None, str]]:
    """Every /readyz answer until one has status 200 (``predicate == "ready"``) or names ``predicate``."""
    seen: list[tuple[int | None, str]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = await asyncio.to_thread(get, port, "/readyz", 1.0)
        if answer[0] is not None:
            seen.append(answer)
            if (predicate == "ready" and answer[0] == 200) or (predicate != "ready" and predicate in answer[1]):
                return seen
        await asyncio.sleep(0.02)
    return seen


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if not k.startswith("otel_")))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_readiness_metrics_and_binding_of_a_real_worker(kafka_bootstrap: str, tmp_path: Path) -> None:
    server = FakeJudgeServer().start()
    judge = MarkedJudge(down=True)
    server.set_responder(judge)
    port = free_port()
    judge_settings = breaker_judge_settings(server.base_url)
    settings = await kafka_run(
        kafka_bootstrap, tmp_path, "health", health={"port": port}, judge=judge_settings, worker={"shutdown_grace_s": 2}
    )
    prefix = settings.topics.prefix
    log_path = tmp_path / "worker.log"
    try:
        with running_worker(settings, log_path) as worker:
            # From the moment the server binds: not ready until the control topic was read up to date.
            start = await _readyz_until(port, "control topic not caught up", timeout=60)
            assert start, read_log(log_path)[-3000:]
            assert start[-1][0] == 503, start
            assert (await asyncio.to_thread(get, port, "/livez"))[0] == 200
            ready = await _readyz_until(port, "ready", timeout=60)
            assert ready, read_log(log_path)[-3000:]
            assert ready[-1][0] == 200, ready
            assert listening(worker.pid) == {("127.0.0.1", port)}

            # The judge is down: pairs fail until the breaker opens, and readiness says so.
            await send_events(settings, [marked_pair(f"{prefix}-000", "0"), marked_pair(f"{prefix}-001", "1")])
            outage = await _readyz_until(port, "judge fake-model: circuit", timeout=60)
            assert outage, read_log(log_path)[-3000:]
            assert outage[-1][0] == 503, outage

            judge.down = False
            outcomes = await collect_outcomes(settings, {f"{prefix}-000", f"{prefix}-001"}, timeout=60)
            assert outcomes.complete, read_log(log_path)[-3000:]
            back = await _readyz_until(port, "ready", timeout=30)
            assert back, read_log(log_path)[-3000:]
            assert back[-1][0] == 200, back

            status_code, text = await asyncio.to_thread(get, port, "/metrics")
            assert status_code == 200, text
            samples = _samples(text)
            verdicts = samples.get(
                ("pairjudge_outcomes_total", (("pairjudge_outcome", "verdict"), ("pairjudge_stage", "primary")))
            )
            assert verdicts == 2, {k: v for k, v in samples.items() if k[0].startswith("pairjudge")}
            assert samples[("pairjudge_judge_breaker_openings_total", (("judge", "fake-model"),))] >= 1
            assert samples[("pairjudge_judge_breaker_open", (("judge", "fake-model"),))] == 0
            assert samples[("pairjudge_worker_ready", ())] == 1
            calls = sum(v for (name, _), v in samples.items() if name == "pairjudge_judge_calls_total")
            assert calls >= 4, calls
            assert worker.poll() is None, read_log(log_path)[-3000:]

        # The port at 0 (the default): no server, and the worker listens on nothing.
        off = settings.model_copy(update={"health": settings.health.model_copy(update={"port": 0})})
        with running_worker(off, tmp_path / "worker-off.log") as quiet:
            await send_events(off, [marked_pair(f"{prefix}-002", "2")])
            judged = await collect_outcomes(off, {f"{prefix}-002"}, timeout=60)
            assert judged.complete, read_log(tmp_path / "worker-off.log")[-3000:]
            assert listening(quiet.pid) == set()
    finally:
        server.stop()
