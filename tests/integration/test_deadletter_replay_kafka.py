"""`pairjudge deadletter list|replay` on a real Kafka broker, run through the command line entry point.

The acceptance test: a worker's HTTP judge (a real server on 127.0.0.1) answers 401 for a while, so every
pair is dead-lettered ``judge_rejected``; the judge recovers; ``pairjudge deadletter replay`` puts the
letters back; every pair then has exactly one outcome, judged once, and a second replay judges nothing and
makes no other outcome (the worker re-emits the recorded one, byte for byte: docs/design.md §2.12).

The others need no worker: letters are put on the dead-letter topic as a worker builds them
(``build_dead_letter``), and what reaches the pairs topic is read back.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from pairjudge.streams.config.settings import Settings, environ_for
from pairjudge.streams.kafka.collector import collect_outcomes, read_topic
from pairjudge.streams.kafka.dead_letters import build_dead_letter
from pairjudge.streams.kafka.producer import send_events
from pairjudge.streams.kafka.replay import REPLAY_HEADER
from pairjudge.streams.security.kafka_clients import client_config
from pairjudge_dev.workers import kafka_run, produce_raw, read_log, running_worker, wait_until_committed
from tests.fixtures.fake_judge_server import Action, FakeJudgeServer, RecordedRequest, model_list, openai_error
from tests.fixtures.marked import good_wins, marked_pair

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

N_PAIRS = 12
OUTCOME_KINDS = ("verdicts", "tiebreak", "review")


def cli(settings: Settings, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``pairjudge deadletter ARGS`` in a process of its own, reading these settings from its environment."""
    return subprocess.run(
        [sys.executable, "-m", "pairjudge.streams.cli", "deadletter", *args],
        env={**environ_for(settings), "COLUMNS": "250"},  # wide enough that a table folds no pair id
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=120,
    )


async def run_cli(settings: Settings, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(cli, settings, *args, stdin=stdin)


class ExpiringKeyJudge:
    """Answers 401 (an expired key) while ``refusing``, then prefers the ``GOOD`` output in either order."""

    def __init__(self) -> None:
        self.refusing = True

    def __call__(self, request: RecordedRequest) -> Action:
        if self.refusing:
            return openai_error(401, "Incorrect API key provided.", err="invalid_api_key")
        return good_wins(request)


async def outcomes_by_pair(settings: Settings) -> dict[str, list[bytes]]:
    """Every non-audit record on the outcome topics, by pair id, as the broker has them."""
    found: dict[str, list[bytes]] = {}
    for kind in OUTCOME_KINDS:
        for _, value in await read_topic(settings, kind, timeout=3):
            event = json.loads(value or b"{}")
            if not event.get("audit"):
                found.setdefault(event["pair_id"], []).append(value or b"")
    return found


async def wait_for(settings: Settings, ready: object, timeout: float) -> dict[str, list[bytes]]:
    assert callable(ready)
    deadline = time.monotonic() + timeout
    while True:
        found = await outcomes_by_pair(settings)
        if ready(found) or time.monotonic() > deadline:
            return found
        await asyncio.sleep(1)


async def test_pairs_refused_by_an_expired_key_are_replayed_into_exactly_one_outcome_each(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    server = FakeJudgeServer().start()
    judge = ExpiringKeyJudge()
    server.set_responder(judge)
    server.set_get_default(model_list("fake-model"))  # the start-up check passes: the key expires later
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "dlreplay",
        judge={
            "kind": "openai",
            "base_url": server.base_url,
            "model": "fake-model",
            "api_key": "sk-test-expiring-key-0123456789",
            "response_format": "none",
            "cache_enabled": False,
            "max_retries": 0,
        },
    )
    prefix = settings.topics.prefix
    pairs = [marked_pair(f"{prefix}-{n:03d}", str(n)) for n in range(N_PAIRS)]
    expected = {json.loads(raw)["pair_id"] for raw in pairs}
    log_path = tmp_path / "worker.log"
    try:
        with running_worker(settings, log_path) as worker:
            await send_events(settings, pairs)
            # And one event no replay can fix: reported, not replayed, unless named.
            await produce_raw(client_config(settings.kafka), settings.topics.name("pairs"), [b"{not json"], keyed=False)
            lettered = await collect_outcomes(settings, expected, timeout=90, settle=1)
            assert lettered.complete, f"{sorted(lettered.missing)}\n{read_log(log_path)[-3000:]}"
            assert {(kind, event["reason"]) for kind, event in lettered.final.values()} == {
                ("deadletter", "judge_rejected")
            }
            assert await outcomes_by_pair(settings) == {}, "a refused pair got an outcome"

            listed = await run_cli(settings, "list", "--json", "--no-original")
            assert listed.returncode == 0, listed.stderr
            letters = [json.loads(line) for line in listed.stdout.splitlines()]
            assert sorted(letter["reason"] for letter in letters) == ["judge_rejected"] * N_PAIRS + ["malformed_json"]
            assert all("original" not in letter for letter in letters)
            assert f"judge_rejected: {N_PAIRS}" in listed.stderr
            assert "malformed_json: 1" in listed.stderr

            judge.refusing = False  # the key is renewed
            asked_before = server.request_count

            first = await run_cli(settings, "replay", "--yes")
            assert first.returncode == 0, first.stdout + first.stderr
            assert f"replayed: {N_PAIRS}" in first.stdout, first.stdout
            assert "1: reason malformed_json is a fault of the event itself" in first.stdout, first.stdout
            decided = await wait_for(settings, lambda found: found.keys() >= expected, timeout=90)
            assert decided.keys() == expected, f"{sorted(expected - decided.keys())}\n{read_log(log_path)[-3000:]}"
            # Exactly one outcome each, the verdict the recovered judge gives, from one judging (two orders).
            assert {pid: len(values) for pid, values in decided.items()} == dict.fromkeys(expected, 1)
            for values in decided.values():
                verdict = json.loads(values[0])
                assert verdict["winner"] == "champion", verdict
            assert server.request_count - asked_before == 2 * N_PAIRS

            # The same letters again: every pair was decided and its outcome is on the broker, so the worker
            # reads each one, asks no judge and sends nothing (issue 26: no duplicate for consumers to drop).
            asked_before = server.request_count
            second = await run_cli(settings, "replay", "--yes")
            assert second.returncode == 0, second.stdout + second.stderr
            assert f"replayed: {N_PAIRS}" in second.stdout, second.stdout
            assert await wait_until_committed(settings, timeout=90), read_log(log_path)[-3000:]
            await asyncio.sleep(2)  # anything the worker would still send
            again = await outcomes_by_pair(settings)
            assert again == decided, {p: len(again.get(p, [])) for p in expected}
            assert server.request_count == asked_before, "a replay of a decided pair asked the judge again"

            # No pair failed again, so each one's latest letter is still the one it had.
            latest = await run_cli(settings, "list", "--json", "--latest", "--reason", "judge_rejected")
            assert latest.returncode == 0, latest.stderr
            assert sorted(json.loads(line)["pair_id"] for line in latest.stdout.splitlines()) == sorted(expected)
            assert worker.poll() is None, read_log(log_path)[-3000:]
    finally:
        server.stop()


# --- without a worker: letters as a worker writes them, and what reaches the pairs topic ---------------


def _pair(prefix: str, n: int) -> bytes:
    return marked_pair(f"{prefix}-{n:03d}", str(n))


async def put_letters(
    settings: Settings, letters: Sequence[tuple[bytes, bytes]], *, at: datetime | None = None
) -> None:
    producer = AIOKafkaProducer(**client_config(settings.kafka).kwargs(acks="all"))
    await producer.start()
    try:
        for key, value in letters:
            if at is not None:
                letter = json.loads(value)
                letter["failed_at"] = at.isoformat()
                value = json.dumps(letter).encode()
            await producer.send_and_wait(settings.topics.name("deadletter"), value=value, key=key)
    finally:
        await producer.stop()


def letter(settings: Settings, raw: bytes, reason: str = "judge_rejected", **kwargs: object) -> tuple[bytes, bytes]:
    built = build_dead_letter(
        stage="judge",
        reason=reason,
        detail="HTTP 401",
        raw=raw,
        topic=settings.topics.name("pairs"),
        partition=0,
        offset=0,
        **kwargs,  # type: ignore[arg-type]
    )
    return built.key, built.value


async def replayed_to_pairs(settings: Settings) -> list[tuple[bytes | None, bytes | None]]:
    return await read_topic(settings, "pairs", timeout=2)


async def test_a_dry_run_publishes_nothing_and_truncated_or_unnamed_letters_are_reported_not_replayed(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await kafka_run(kafka_bootstrap, tmp_path, "dlplan")
    prefix = settings.topics.prefix
    big = json.dumps({"pair_id": f"{prefix}-big", "pad": "x" * 40_000}).encode()
    await put_letters(
        settings,
        [
            letter(settings, _pair(prefix, 1)),
            letter(settings, _pair(prefix, 2), reason="internal_error"),
            letter(settings, big, max_bytes=16_384),  # cut to fit: only its first bytes are kept
            letter(settings, b'{"pair_id": ', reason="malformed_json"),
        ],
    )

    dry = await run_cli(settings, "replay", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would replay: 2" in dry.stdout, dry.stdout
    assert "1: original truncated" in dry.stdout, dry.stdout
    assert "1: reason malformed_json" in dry.stdout, dry.stdout
    assert f"{prefix}-001" in dry.stdout
    assert f"{prefix}-002" in dry.stdout
    assert await replayed_to_pairs(settings) == [], "a dry run published"

    # No terminal to confirm on: nothing is published.
    unconfirmed = await run_cli(settings, "replay")
    assert unconfirmed.returncode == 2, unconfirmed.stdout + unconfirmed.stderr
    assert await replayed_to_pairs(settings) == []

    done = await run_cli(settings, "replay", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "replayed: 2" in done.stdout, done.stdout
    assert "skipped: 2" in done.stdout, done.stdout
    got = await replayed_to_pairs(settings)
    assert sorted(got) == sorted(
        [(f"{prefix}-001".encode(), _pair(prefix, 1)), (f"{prefix}-002".encode(), _pair(prefix, 2))]
    )

    # Named, the malformed event is replayed as it was (the worker will dead-letter it again).
    named = await run_cli(settings, "replay", "--yes", "--reason", "malformed_json")
    assert named.returncode == 0, named.stdout + named.stderr
    assert "replayed: 1" in named.stdout, named.stdout
    assert (None, b'{"pair_id": ') in await replayed_to_pairs(settings)
    # Even named, a truncated original is never replayed.
    still = await run_cli(settings, "replay", "--yes", "--reason", "judge_rejected", "--pair-id", f"{prefix}-big")
    assert "replayed: 0" in still.stdout, still.stdout
    assert "1: original truncated" in still.stdout, still.stdout


async def test_filters_select_what_they_say(kafka_bootstrap: str, tmp_path: Path) -> None:
    settings = await kafka_run(kafka_bootstrap, tmp_path, "dlfilter")
    prefix = settings.topics.prefix
    now = datetime.now(UTC)
    await put_letters(settings, [letter(settings, _pair(prefix, 1))], at=now - timedelta(hours=5))
    await put_letters(
        settings, [letter(settings, _pair(prefix, 2), reason="internal_error")], at=now - timedelta(hours=1)
    )
    await put_letters(settings, [letter(settings, _pair(prefix, 3))], at=now - timedelta(minutes=1))
    await put_letters(settings, [letter(settings, _pair(prefix, 1), reason="internal_error")], at=now)

    async def ids(*args: str) -> list[str]:
        done = await run_cli(settings, "list", "--json", *args)
        assert done.returncode == 0, done.stderr
        return [json.loads(line)["pair_id"].removeprefix(f"{prefix}-") for line in done.stdout.splitlines()]

    assert await ids() == ["001", "002", "003", "001"]
    assert await ids("--reason", "internal_error") == ["002", "001"]
    assert await ids("--reason", "judge_rejected", "--reason", "internal_error", "--since", "2h") == [
        "002",
        "003",
        "001",
    ]
    assert await ids("--since", "2h", "--until", "30m") == ["002"]
    assert await ids("--until", (now - timedelta(hours=4)).isoformat()) == ["001"]
    assert await ids("--pair-id", f"{prefix}-001") == ["001", "001"]
    assert await ids("--latest") == ["002", "003", "001"]
    assert await ids("--stage", "tiebreak") == []
    table = await run_cli(settings, "list", "--reason", "internal_error")
    assert table.returncode == 0, table
    assert f"{prefix}-002" in table.stdout, table
    assert "internal_error: 2" in table.stdout, table
    bad = await run_cli(settings, "list", "--since", "yesterday")
    assert bad.returncode == 2, bad.stderr
    assert "ISO-8601" in bad.stderr, bad.stderr

    # Replay the same selection: each pair once, from its latest letter.
    done = await run_cli(settings, "replay", "--yes", "--pair-id", f"{prefix}-001", "--pair-id", f"{prefix}-003")
    assert "replayed: 2" in done.stdout, done.stdout
    assert "1: an older letter" in done.stdout, done.stdout
    keys = sorted(key or b"" for key, _ in await replayed_to_pairs(settings))
    assert keys == [f"{prefix}-001".encode(), f"{prefix}-003".encode()]


async def test_the_rate_limit_holds_on_the_broker(kafka_bootstrap: str, tmp_path: Path) -> None:
    settings = await kafka_run(kafka_bootstrap, tmp_path, "dlrate")
    prefix = settings.topics.prefix
    rate, count = 10, 25
    await put_letters(settings, [letter(settings, _pair(prefix, n)) for n in range(count)])
    done = await run_cli(settings, "replay", "--yes", "--rate", str(rate))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"replayed: {count}" in done.stdout
    stamps = await _create_times(settings)
    assert len(stamps) == count
    # Counted on the records' own timestamps (set when the producer took each one): in any one-second
    # window, at most rate of them (one more for millisecond rounding at the window's edges).
    for end in stamps:
        assert sum(1 for t in stamps if end - 1000 < t <= end) <= rate + 1, stamps
    assert stamps[-1] - stamps[0] >= (count - 1) / rate * 1000 - 50


async def _create_times(settings: Settings) -> list[int]:
    from pairjudge.streams.kafka.readers import from_start

    times: list[int] = []
    async with from_start(client_config(settings.kafka), [settings.topics.name("pairs")]) as reader:
        while not await reader.caught_up():
            for records in (await reader.batches(timeout_ms=500)).values():
                for record in records:
                    assert (
                        dict(record.headers)
                        .get(REPLAY_HEADER, b"")
                        .startswith(settings.topics.name("deadletter").encode())
                    )
                    times.append(record.timestamp)
    return sorted(times)
