"""How a real worker on real Kafka fails: all of an input's outputs or none, a broken deploy that stops instead
of dead-lettering the stream, and a poison pill that is set aside after stopping workers ``crash_loop_limit``
times.

The bugs are real code changes in a real ``pairjudge worker`` process (``tests.fixtures.buggy_worker``), as a
bad deploy would bring them; the broker, the topics, the consumer group and its commits are real.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from pairjudge.streams.cli.demo import stop_process
from pairjudge.streams.config.settings import Settings, environ_for
from pairjudge.streams.kafka.codecs import encode
from pairjudge.streams.kafka.collector import collect_outcomes, read_topic
from pairjudge.streams.kafka.producer import key_of
from pairjudge.streams.security.files import open_private_append
from pairjudge.streams.security.kafka_clients import client_config
from pairjudge.streams.worker.error_budget import BROKEN_DEPLOY_EXIT
from pairjudge_dev.pairgen import many_pairs
from pairjudge_dev.replies import tone_reply
from pairjudge_dev.workers import committed_offsets, kafka_run, produce_raw, read_log, running_worker
from tests.fixtures.fake_judge_server import Action, FakeJudgeServer, RecordedRequest, fake_judge_server, reply
from tests.unit.factories import make_pair

__all__ = ["fake_judge_server"]  # a fixture, imported for pytest
pytestmark = [pytest.mark.kafka, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
#: Every topic a pair's outputs can land on.
OUTPUT_KINDS = ("verdicts", "tiebreak", "review", "deadletter", "decisions")


def start_buggy_worker(settings: Settings, mode: str, log_path: Path) -> subprocess.Popen[bytes]:
    log = open_private_append(log_path, what="worker log")
    return subprocess.Popen(
        [sys.executable, "-m", "tests.fixtures.buggy_worker", mode],
        env=environ_for(settings),
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


async def wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """The process's exit status, or None if it still runs after ``timeout`` seconds."""
    try:
        return await asyncio.to_thread(proc.wait, timeout)
    except subprocess.TimeoutExpired:
        return None


async def outputs_for(settings: Settings, pair_id: str) -> dict[str, list[dict[str, Any]]]:
    """Every record on every output topic that belongs to ``pair_id`` (dead letters by their ``pair_id``)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for kind in OUTPUT_KINDS:
        for _, value in await read_topic(settings, kind, timeout=3):
            event = json.loads(value or b"{}")
            if event.get("pair_id") == pair_id:
                found.setdefault(kind, []).append(event)
    return found


# --- all or none ------------------------------------------------------------------------------------------


async def test_a_pair_whose_review_copy_is_too_large_gets_exactly_one_outcome(
    kafka_bootstrap: str, tmp_path: Path, fake_judge_server: FakeJudgeServer
) -> None:
    """The verdict fits; its audit copy (the review request carrying both outputs) is over the producer's 1 MB.

    Before the size check, the verdict and the decision record were already on their way when the audit
    copy's send raised, and the dead letter followed: a verdict *and* a dead letter for one pair.
    """

    def prefers_the_winner(request: RecordedRequest) -> Action:
        prompt = "\n".join(m["content"] for m in request.json()["messages"])
        return reply(tone_reply("A" if prompt.index("WINNERTOKEN") < prompt.index("LOSERTOKEN") else "B", 0.95))

    fake_judge_server.set_responder(prefers_the_winner)
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "allornone",
        judge=fake_judge_server.judge_settings(),
        # Raised limits (what makes this reachable): every verdict audited, outputs of 650,000 characters.
        policy={"audit_share": 1.0, "max_output_chars": 1_000_000},
    )
    settings = Settings.model_validate({**settings.model_dump(), "max_event_bytes": 4_000_000})
    # 650 KB each: the pair (1.3 MB) compresses to a few KB on the pairs topic, the review copy does not fit.
    words = " ".join(["refund"] * 100_000)
    pair = make_pair(pair_id="too-large-0001", outputs=(f"WINNERTOKEN {words}", f"LOSERTOKEN {words}"))
    raw = encode(pair)
    assert len(raw) > 1_000_000
    producer = AIOKafkaProducer(
        **client_config(settings.kafka).kwargs(acks="all", compression_type="gzip", max_request_size=8_000_000)
    )
    await producer.start()
    try:
        await producer.send_and_wait(settings.topics.name("pairs"), raw, key=key_of(raw))
    finally:
        await producer.stop()

    with running_worker(settings, tmp_path / "worker.log") as worker:
        done = await collect_outcomes(settings, {pair.pair_id}, timeout=120, settle=3)
        alive = worker.poll() is None
    log = read_log(tmp_path / "worker.log")
    assert alive, log[-3000:]
    assert done.complete, f"missing {done.missing}\n{log[-3000:]}"
    found = await outputs_for(settings, pair.pair_id)
    letters = found.get("deadletter", [])
    assert [letter["reason"] for letter in letters] == ["outcome_undeliverable"], found.keys()
    assert "producer's limit" in letters[0]["error"]
    assert set(found) == {"deadletter"}, f"outputs besides the dead letter: {sorted(set(found) - {'deadletter'})}"


# --- a bug stops, bad input dead-letters --------------------------------------------------------------------


async def test_a_broken_deploy_stops_without_dead_lettering_the_stream(kafka_bootstrap: str, tmp_path: Path) -> None:
    limit = 3
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "brokendeploy",
        worker={"concurrency": 4, "internal_error_limit": limit, "internal_error_window_s": 600},
        health={"port": 0},
    )
    raws = many_pairs(40, f"{settings.topics.prefix}-p")
    ids = {json.loads(r)["pair_id"] for r in raws}
    await produce_raw(settings.kafka.bootstrap_servers, settings.topics.name("pairs"), raws, keyed=True)

    log_path = tmp_path / "broken.log"
    broken = start_buggy_worker(settings, "every-pair", log_path)
    try:
        status = await wait_exit(broken, timeout=120)
    finally:
        stop_process(broken)
    log = read_log(log_path)
    assert status == BROKEN_DEPLOY_EXIT, f"exit status {status}\n{log[-4000:]}"
    assert "a run of unexpected errors" in log, log[-4000:]
    assert "KeyError: 'criteria_weights'" in log

    letters = [json.loads(v or b"{}") for _, v in await read_topic(settings, "deadletter", timeout=3)]
    internal = [letter for letter in letters if letter["reason"] == "internal_error"]
    assert len(internal) <= limit, f"{len(internal)} dead-lettered, the limit is {limit}"
    assert all("KeyError" in letter["error"] for letter in internal)
    # Nothing past them is committed: every committed input is one of the dead-lettered few.
    offsets = await committed_offsets(settings)
    assert sum(offsets.values()) <= len(internal), f"committed {offsets} with {len(internal)} dead letters"
    verdicts = await read_topic(settings, "verdicts", timeout=2)
    assert verdicts == []

    # The fixed deploy judges everything the broken one did not commit; nothing was lost or dropped.
    with running_worker(settings, tmp_path / "fixed.log"):
        done = await collect_outcomes(settings, ids, timeout=120)
    assert done.complete, f"missing after the fix: {sorted(done.missing)[:5]}"
    assert sum(1 for kind, _ in done.final.values() if kind == "deadletter") == len(internal)


async def test_a_pair_that_stops_every_worker_is_dead_lettered_after_the_crash_loop_limit(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    crash_loop_limit = 2
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "crashloop",
        worker={"concurrency": 4, "crash_loop_limit": crash_loop_limit},
    )
    raws = many_pairs(8, f"{settings.topics.prefix}-p")
    poison_raw = raws[3]
    poison = json.loads(poison_raw)["pair_id"]
    ids = {json.loads(r)["pair_id"] for r in raws}
    await produce_raw(settings.kafka.bootstrap_servers, settings.topics.name("pairs"), raws, keyed=True)

    statuses = []
    # A supervisor's restart loop: the same broken code each time.
    for run in range(crash_loop_limit + 1):
        worker = start_buggy_worker(settings, f"poison:{poison}", tmp_path / f"run{run}.log")
        try:
            status = await wait_exit(worker, timeout=60)
            if status is None:  # still running: it got past the pill
                done = await collect_outcomes(settings, ids, timeout=90)
                break
        finally:
            stop_process(worker)
        statuses.append(status)
    else:
        pytest.fail(f"the worker never got past the poison pill: exit statuses {statuses}")
    logs = "\n".join(read_log(tmp_path / f"run{run}.log") for run in range(len(statuses) + 1))
    assert statuses == [BROKEN_DEPLOY_EXIT] * crash_loop_limit, f"{statuses}\n{logs[-4000:]}"
    assert f"a bug that only pair {poison} trips" in logs
    assert done.complete, f"missing {sorted(done.missing)}"
    kind, letter = done.final[poison]
    assert kind == "deadletter", done.final[poison]
    assert letter["reason"] == "crashed_worker"
    assert "stopped a worker 2 times" in letter["error"]
    assert letter["original_sha256"]
    assert not letter.get("original_truncated")
    assert all(done.final[i][0] != "deadletter" for i in ids - {poison})
