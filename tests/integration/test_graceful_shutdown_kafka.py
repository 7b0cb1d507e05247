"""SIGTERM while judge calls are in flight: finish what fits in the grace, hand the rest back, lose nothing.

A real worker (concurrency 4) judges through the OpenAI-compatible adapter against a real HTTP judge on
127.0.0.1 whose latency varies by pair: most answer within 0.5-2.5 s, some take 45 s. The worker is sent
SIGTERM once both kinds are in flight, with ``PAIRJUDGE_WORKER__SHUTDOWN_GRACE_S`` at 6 s. It must:

* go unready at once and exit within the grace plus a margin (Faust alone waits for every pair in
  flight, however slow: 45 s here);
* finish the quick pairs it was judging, publish and commit them: a second worker never judges them
  again, and they have their outcome before that worker starts;
* hand back the slow ones uncommitted: no outcome from the first worker, judged by the second.

Across both workers every pair ends with exactly one final outcome (no duplicate, no conflict).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from pairjudge.streams.cli.demo import start_worker, stop_process
from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.producer import send_events
from pairjudge_dev.workers import kafka_run, read_log, running_worker
from tests.fixtures.fake_judge_server import Action, FakeJudgeServer, RecordedRequest
from tests.fixtures.health import free_port, get
from tests.fixtures.marked import good_wins, marked_pair, prompt_of

# Alone under xdist: the time from SIGTERM to exit is asserted against the grace period.
pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.serial]

GRACE_S = 6.0
#: Stopping after the grace: the hand-back, the last commit, leaving the group, closing the clients.
MARGIN_S = 8.0
SLOW_S = 45.0
N_PAIRS = 12
SLOW = {0, 5, 9}


def _quick_s(i: int) -> float:
    return 0.5 + (i % 5) * 0.5


@dataclass(frozen=True)
class Call:
    pair: int
    at: float
    delay: float


class Judge:
    """A competent judge whose latency depends on the pair (while ``varied``); records every call."""

    def __init__(self) -> None:
        self.varied = True
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Action:
        prompt = prompt_of(request)
        i = int(prompt[prompt.index("PAIR") + 4 :][:3])
        delay = (SLOW_S if i in SLOW else _quick_s(i)) if self.varied else 0.1
        with self._lock:
            self.calls.append(Call(i, time.monotonic(), delay))
        answer = good_wins(request)
        return Action(status=answer.status, body=answer.body, headers=answer.headers, delay=delay)

    def in_flight(self, now: float) -> set[int]:
        with self._lock:
            return {c.pair for c in self.calls if c.at <= now < c.at + c.delay}

    def calls_for(self, pair: int, *, after: float = 0.0) -> int:
        with self._lock:
            return sum(1 for c in self.calls if c.pair == pair and c.at >= after)


def _wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout)


async def test_sigterm_finishes_what_fits_in_the_grace_and_hands_back_the_rest(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    server = FakeJudgeServer().start()
    judge = Judge()
    server.set_responder(judge)
    port = free_port()
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "graceful",
        worker={"concurrency": 4, "shutdown_grace_s": GRACE_S},
        health={"port": port},
        judge={
            "kind": "openai",
            "base_url": server.base_url,
            "model": "fake-model",
            "max_retries": 0,
            "read_timeout_s": 120,
            "cache_enabled": False,
        },
    )
    prefix = settings.topics.prefix
    ids = {f"{prefix}-{i:03d}" for i in range(N_PAIRS)}
    first_log, second_log = tmp_path / "worker-1.log", tmp_path / "worker-2.log"
    first = start_worker(settings, first_log)
    try:
        await send_events(settings, [marked_pair(f"{prefix}-{i:03d}", f"PAIR{i:03d}") for i in range(N_PAIRS)])
        # SIGTERM once a slow pair and a quick one are both being judged.
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            now = time.monotonic()
            flying = judge.in_flight(now)
            if flying & SLOW and flying - SLOW:
                break
            await asyncio.sleep(0.02)
        else:
            pytest.fail(
                f"never had slow and quick pairs in flight at once: {judge.calls}\n{read_log(first_log)[-3000:]}"
            )
        assert (await asyncio.to_thread(get, port, "/readyz"))[0] == 200
        termed_at = time.monotonic()
        os.killpg(first.pid, signal.SIGTERM)
        await asyncio.sleep(0.5)
        status, body = await asyncio.to_thread(get, port, "/readyz")
        assert status == 503, body
        assert "shutting down" in body, body
        await asyncio.to_thread(_wait_exit, first, SLOW_S + 30)
        exited_after = time.monotonic() - termed_at
    finally:
        stop_process(first)
    first_log_text = read_log(first_log)[-4000:]
    quick_flying = {i for i in flying if i not in SLOW}
    slow_flying = flying & SLOW
    print(
        f"in flight at SIGTERM: quick {sorted(quick_flying)}, slow {sorted(slow_flying)};"
        f" exited after {exited_after:.1f} s"
    )
    assert first.returncode == 0, first_log_text
    assert exited_after <= GRACE_S + MARGIN_S, (exited_after, first_log_text)

    # What the first worker published before the second one started.
    before = await collect_outcomes(settings, ids, timeout=3)
    for i in quick_flying:
        assert f"{prefix}-{i:03d}" in before.final, (i, first_log_text)
    for i in slow_flying:
        assert f"{prefix}-{i:03d}" not in before.final, (i, first_log_text)

    judge.varied = False
    second_started = time.monotonic()
    with running_worker(settings, second_log):
        after = await collect_outcomes(settings, ids, timeout=120, settle=3)
    assert after.ok, (after.missing, after.conflicting, read_log(second_log)[-3000:])
    # Duplicates may appear, and must be replays: the group's offset cannot pass a handed-back pair, so pairs
    # after it on its partition that the first worker finished are redelivered to the second, which
    # re-publishes their recorded outcome (the same one: `after.ok` has no conflict) without judging them.
    # Once, on a loaded 2-core machine, 7 of 12 were redelivered this way.
    assert {kind for kind, _ in after.final.values()} == {"verdicts"}, after.final
    for pair_id in before.final:
        # Decided by the first worker: never judged again, whether redelivered or not.
        assert judge.calls_for(int(pair_id.rsplit("-", 1)[1]), after=second_started) == 0, pair_id
    for i in slow_flying:
        # Handed back: judged by the second worker.
        assert judge.calls_for(i, after=second_started) >= 2, i
    server.stop()
