"""A judge back from a long outage is used again within seconds, not after the breaker's doubled cooldown.

A real worker on Kafka judges through the OpenAI-compatible adapter against a real HTTP server on
127.0.0.1. The judge goes down (every completion and the model list answer 503) for long enough that the
breaker's cooldown doubles several times. It comes back right after a failed probe, when the cooldown
has just doubled to 8 s: without the breaker's checks the next real call would wait those 8 s. With a
check of the model list every second, the pair waiting since the outage began must be judged again
within the check interval plus some slack for a shared machine.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import pytest

from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.producer import send_events
from pairjudge_dev.workers import kafka_run, read_log, running_worker
from tests.fixtures.fake_judge_server import (
    FakeJudgeServer,
    model_list,
    status,
)
from tests.fixtures.marked import MarkedJudge, marked_pair

# Alone under xdist: the times between the judge's return and its first call are asserted to a fraction of a second.
pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.serial]

CHECK_INTERVAL_S = 1.0
#: Scheduling on a shared 2-core machine, the worker's poll of the breaker, the probe's round trip.
SLACK_S = 2.5
#: Come back right after a probe that failed this long after the one before it: the cooldown was
#: (at least) 4 s, so it is 8 s now, far beyond the interval plus slack.
GROWN_GAP_S = 3.5


async def test_a_judge_back_from_a_long_outage_is_used_within_the_check_interval(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    server = FakeJudgeServer().start()
    judge = MarkedJudge()
    server.set_responder(judge)
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "recovery",
        judge={
            "kind": "openai",
            "base_url": server.base_url,
            "model": "fake-model",
            "max_retries": 0,  # each 503 is one outage for the breaker
            "read_timeout_s": 5,
            "breaker_failures": 2,
            "breaker_cooldown_s": 0.5,
            "breaker_max_cooldown_s": 20,
            "breaker_probe_interval_s": CHECK_INTERVAL_S,
            "cache_enabled": False,
        },
    )
    prefix = settings.topics.prefix
    log_path = tmp_path / "worker.log"
    try:
        with running_worker(settings, log_path) as worker:
            await send_events(settings, [marked_pair(f"{prefix}-000", "0")])
            warm = await collect_outcomes(settings, {f"{prefix}-000"}, timeout=90)
            assert warm.complete, read_log(log_path)[-3000:]

            # The judge goes down, model list included (a crashed server behind its proxy).
            judge.down = True
            server.set_get_default(status(503))
            down_at = time.monotonic()
            calls_before = server.request_count
            await send_events(settings, [marked_pair(f"{prefix}-001", "1")])
            came_back_at: float | None = None
            deadline = down_at + 60
            while time.monotonic() < deadline:
                stamps = [r.at for r in server.requests[calls_before:]]
                gaps = [b - a for a, b in itertools.pairwise(stamps)]
                if gaps and gaps[-1] >= GROWN_GAP_S and time.monotonic() - stamps[-1] < 0.5:
                    # The probe that just failed came after a cooldown of 4 s or more: it is 8 s now.
                    server.set_get_default(model_list())
                    judge.down = False
                    came_back_at = time.monotonic()
                    break
                await asyncio.sleep(0.02)
            assert came_back_at is not None, f"the cooldown never grew: real calls at {stamps}"
            outage_s = came_back_at - down_at
            calls_while_down = server.request_count - calls_before
            checks_while_down = [r for r in server.get_requests if down_at <= r.at < came_back_at]

            verdict = await collect_outcomes(settings, {f"{prefix}-001"}, timeout=30)
            verdict_after_s = time.monotonic() - came_back_at
            first_call_after_s = min(r.at for r in server.requests if r.at >= came_back_at) - came_back_at
            assert worker.poll() is None, "the worker died"
    finally:
        server.stop()

    log = read_log(log_path)[-3000:]
    print(
        f"outage {outage_s:.1f} s, {calls_while_down} real calls and {len(checks_while_down)} checks while down;"
        f" first judge call {first_call_after_s:.2f} s after the judge came back, verdict read after"
        f" {verdict_after_s:.2f} s"
    )
    # Down long enough for the cooldown to grow, without hammering: the two failures that opened the
    # breaker, then one probe per cooldown (0.5, 1, 2, 4 s ...), and about one check per interval.
    assert outage_s >= 6.0
    assert calls_while_down <= 10, calls_while_down
    assert len(checks_while_down) <= outage_s / CHECK_INTERVAL_S + 3, len(checks_while_down)
    # Used again within the check interval (plus slack), not after the 8 s cooldown.
    assert first_call_after_s <= CHECK_INTERVAL_S + SLACK_S, (first_call_after_s, log)
    assert verdict.complete, log
    kinds = {kind for kind, _ in verdict.final.values()}
    assert kinds == {"verdicts"}, verdict.final
    assert verdict_after_s <= CHECK_INTERVAL_S + SLACK_S + 2.0, verdict_after_s  # + collect's read poll
