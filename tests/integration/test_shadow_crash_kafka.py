"""A shadow worker SIGKILLed at a random moment, and a challenger down for a minute (issue 37's Done means), on
Apache Kafka.

The challenger is a real HTTP server on 127.0.0.1 with heavy-tailed latency (Pareto, capped), and every answer
carries a fresh random token, so two asks of one capture give two different pairs. The worker asks up to 4 at once
(concurrency > 1); it is killed with SIGKILL a random moment after the first ask, then started again on its data
directory, as a restarted pod would be. Checked: no capture is lost (each has its pair), no pair conflicts (every
copy of a pair id is the same bytes), and the server's own count shows a repeated ask only for a capture whose
first ask was in flight at the kill (asked before it, its pair not on the broker before it), at most 4 of them.

The challenger then answers 503 for a minute and comes back: every capture ends as exactly one pair or one dead
letter ``challenger_unavailable`` with its original bytes.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import signal
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from pairjudge.agents.shadow import shadow_pair_id
from pairjudge.streams.cli.demo import start_worker, stop_process
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.readers import from_start
from pairjudge.streams.security.kafka_clients import client_config
from pairjudge_dev.workers import running_worker
from tests.fixtures.fake_judge_server import Action, FakeJudgeServer, RecordedRequest, fake_judge_server, reply, status
from tests.integration.test_shadow_kafka import EXPERIMENT, _asks, _capture, _produce, _settings

__all__ = ["fake_judge_server"]  # a fixture, imported for pytest
pytestmark = [pytest.mark.kafka, pytest.mark.slow]

N_CAPTURES = 24
CONCURRENCY = 4
RNG = random.Random(37)
#: How long the challenger is down in the outage test.
DOWN_S = 60.0


def _slow_challenger(request: RecordedRequest) -> Action:
    delay = min(5.0, 0.3 * RNG.paretovariate(1.5))
    answer = reply(f"Here is a careful answer ({uuid.uuid4().hex}).", model="challenger-1")
    return Action(status=answer.status, body=answer.body, headers=answer.headers, delay=delay)


async def _pairs_by_id(settings: Settings, want: int, timeout: float) -> dict[str, list[tuple[int, bytes]]]:
    """Every copy of every pair on the pairs topic (broker timestamp in ms, bytes), once ``want`` ids are there."""
    copies: dict[str, list[tuple[int, bytes]]] = defaultdict(list)
    deadline = time.monotonic() + timeout
    async with from_start(client_config(settings.kafka), [settings.topics.name("pairs")]) as reader:
        while time.monotonic() < deadline:
            for _, batch in (await reader.batches(timeout_ms=300, max_records=1000)).items():
                for record in batch:
                    copies[json.loads(record.value)["pair_id"]].append((record.timestamp, record.value))
            if len(copies) >= want:
                # A little longer, for late duplicates.
                for _, batch in (await reader.batches(timeout_ms=2000, max_records=1000)).items():
                    for record in batch:
                        copies[json.loads(record.value)["pair_id"]].append((record.timestamp, record.value))
                break
    return copies


async def test_a_shadow_worker_killed_at_a_random_moment_loses_nothing_and_repeats_only_what_was_in_flight(
    kafka_bootstrap: str, tmp_path: Path, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.set_responder(_slow_challenger)
    base = await _settings(kafka_bootstrap, tmp_path, "shadow-kill", fake_judge_server.base_url)
    settings = base.model_copy(update={"worker": base.worker.model_copy(update={"concurrency": CONCURRENCY})})
    captures = [_capture(f"cap-kill-{i:02d}", f"Question number {i:02d}?") for i in range(N_CAPTURES)]
    log = tmp_path / "worker.log"
    first = start_worker(settings, log)
    try:
        await _produce(settings, captures)
        for _ in range(600):  # the first ask, within a minute
            if fake_judge_server.requests:
                break
            await asyncio.sleep(0.1)
        assert fake_judge_server.requests, log.read_text()[-3000:]
        await asyncio.sleep(RNG.uniform(1.0, 4.0))
        killed_wall_ms, killed_mono = time.time() * 1000, time.monotonic()
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
    finally:
        stop_process(first)
    asked_before_kill = len(fake_judge_server.requests)
    second = start_worker(settings, log)
    try:
        copies = await _pairs_by_id(settings, N_CAPTURES, timeout=180)
    finally:
        stop_process(second)

    expected = {shadow_pair_id(c.capture_id, EXPERIMENT): c.capture_id for c in captures}
    assert set(copies) == set(expected), log.read_text()[-3000:]  # no capture lost
    for pair_id, seen in copies.items():
        assert len({value for _, value in seen}) == 1, pair_id  # no conflicting pair

    repeated = []
    for pair_id, capture_id in expected.items():
        marker = f"Question number {capture_id[-2:]}?"
        asks = _asks(fake_judge_server, marker)
        assert asks >= 1
        if asks == 1:
            continue
        repeated.append(capture_id)
        first_ask = min(r.at for r in fake_judge_server.requests if marker in json.dumps(r.json()["messages"]))
        assert first_ask < killed_mono, capture_id  # its first ask was made before the kill
        assert min(ts for ts, _ in copies[pair_id]) >= killed_wall_ms, capture_id  # and had no pair before it
        assert asks == 2, capture_id
    assert len(repeated) <= CONCURRENCY, repeated
    print(f"asks before the kill {asked_before_kill}, in all {len(fake_judge_server.requests)}; repeated {repeated}")


async def test_a_challenger_down_for_a_minute_then_back_leaves_every_capture_a_pair_or_a_dead_letter(
    kafka_bootstrap: str, tmp_path: Path, fake_judge_server: FakeJudgeServer
) -> None:
    started = time.monotonic()

    def down_then_back(request: RecordedRequest) -> Action:
        if request.at - started < DOWN_S:
            return status(503)
        return reply("Back again, with a clear and friendly answer.", model="challenger-1")

    fake_judge_server.set_responder(down_then_back)
    base = await _settings(kafka_bootstrap, tmp_path, "shadow-outage", fake_judge_server.base_url)
    # Asks spread over about a minute: some captures outlast the outage, some do not.
    shadow = base.shadow.model_copy(update={"attempts": 4, "http_retries": 2, "backoff_s": 2.0, "backoff_max_s": 12.0})
    settings = base.model_copy(update={"shadow": shadow})
    captures = [_capture(f"cap-out-{i}", f"Outage question {i}?") for i in range(6)]
    log = tmp_path / "worker.log"
    with running_worker(settings, log):
        raws = await _produce(settings, captures[:3])
        await asyncio.sleep(DOWN_S / 2)
        raws += await _produce(settings, captures[3:])
        pairs, letters = await _ended(settings, len(captures), timeout=240)
    ended_as_pair = {p["pair_id"] for p in pairs}
    lettered = {json.loads(base64.b64decode(x["original"]))["capture_id"]: x for x in letters}
    for capture, raw in zip(captures, raws, strict=True):
        pair_id = shadow_pair_id(capture.capture_id, EXPERIMENT)
        letter = lettered.get(capture.capture_id)
        assert (pair_id in ended_as_pair) != (letter is not None), capture.capture_id  # one or the other
        if letter is not None:
            assert (letter["stage"], letter["reason"]) == ("shadow", "challenger_unavailable")
            assert base64.b64decode(letter["original"]) == raw
    assert len(pairs) == len(ended_as_pair)  # one pair each
    print(f"outage: {len(ended_as_pair)} pairs, {len(lettered)} dead letters")


async def _ended(settings: Settings, want: int, timeout: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pairs and dead letters on their topics, once there are ``want`` of them together (or ``timeout``)."""
    pairs: list[dict[str, Any]] = []
    letters: list[dict[str, Any]] = []
    topics = [settings.topics.name("pairs"), settings.topics.name("deadletter")]
    deadline = time.monotonic() + timeout
    async with from_start(client_config(settings.kafka), topics) as reader:
        while time.monotonic() < deadline and len(pairs) + len(letters) < want:
            for tp, batch in (await reader.batches(timeout_ms=500, max_records=1000)).items():
                into = pairs if tp.topic == topics[0] else letters
                into += [json.loads(r.value) for r in batch if r.value]
        for tp, batch in (await reader.batches(timeout_ms=2000, max_records=1000)).items():  # late duplicates
            into = pairs if tp.topic == topics[0] else letters
            into += [json.loads(r.value) for r in batch if r.value]
    return pairs, letters
