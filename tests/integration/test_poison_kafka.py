"""Poison events on real Kafka: a real ``pairjudge worker`` dead-letters every kind, and keeps judging.

Each poison kind once crashed the judge agent or vanished: JSON nested 1,000 or 100,000 deep, a
5,000-digit number, ``1e999``, events between 750 KB and the broker's 1 MB limit (whose base64 dead
letter was too large to send), unknown ``schema_version`` values, outputs of zero-width characters.
Every one must get exactly one dead letter, with the right reason, the whole event's size and SHA-256,
and a head of the original when it was too large to carry. Valid pairs sent around them must still be
judged, and the worker must still be running at the end.

The poison kinds themselves are in ``pairjudge_dev.poison``, shared with ``bench/poison_events.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.dead_letters import DEFAULT_MAX_LETTER_BYTES
from pairjudge.streams.kafka.producer import send_events
from pairjudge_dev.pairgen import many_pairs
from pairjudge_dev.poison import KINDS, expect_truncated, poison_events, read_dead_letters, send_raw
from pairjudge_dev.workers import kafka_run, running_worker

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


async def test_every_poison_event_is_dead_lettered_once_and_the_worker_keeps_judging(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await kafka_run(kafka_bootstrap, tmp_path, "poison", worker={"concurrency": 8})
    prefix = settings.topics.prefix
    poison = [event for kind in KINDS for event in poison_events(prefix, kind, 1)]
    before, after = many_pairs(6, f"{prefix}-ok-a"), many_pairs(6, f"{prefix}-ok-b")
    valid_ids = {json.loads(raw)["pair_id"] for raw in before + after}

    with running_worker(settings, tmp_path / "worker.log") as worker:
        await send_events(settings, before)
        # Half through the producer's own path (key_of reads what it can), half with no key at all.
        await send_raw(settings, [p.raw for p in poison[::2]])
        assert await send_events(settings, [p.raw for p in poison[1::2]]) == len(poison[1::2])
        await send_events(settings, after)
        letters = await read_dead_letters(settings, {p.sha256 for p in poison}, timeout=180, settle=3)
        outcomes = await collect_outcomes(settings, valid_ids, timeout=180)
        alive = worker.poll() is None

    log = (tmp_path / "worker.log").read_text(errors="replace")
    assert alive, f"the worker exited\n{log[-4000:]}"
    assert "RecursionError" not in log
    assert "MessageSizeTooLarge" not in log
    problems = []
    for event in poison:
        got = letters.get(event.sha256, [])
        if len(got) != 1:
            problems.append(f"{event.kind}: {len(got)} dead letters")
            continue
        letter, record_size = got[0]
        if letter.reason != event.reason:
            problems.append(f"{event.kind}: reason {letter.reason}, expected {event.reason} ({letter.error})")
        if letter.original_size != len(event.raw) or not event.raw.startswith(letter.original):
            problems.append(f"{event.kind}: original of {len(letter.original)}/{letter.original_size} bytes")
        if letter.original_truncated != expect_truncated(event):
            problems.append(f"{event.kind}: truncated={letter.original_truncated} for {len(event.raw)} bytes")
        if record_size > DEFAULT_MAX_LETTER_BYTES:
            problems.append(f"{event.kind}: a {record_size}-byte dead letter")
        if letter.topic != settings.topics.name("pairs") or letter.offset is None:
            problems.append(f"{event.kind}: origin {letter.topic}/{letter.partition}/{letter.offset}")
    assert not problems, "\n".join(problems)
    # Each reason says why in words, and a version error names what this consumer accepts.
    by_kind = {p.kind: letters[p.sha256][0][0] for p in poison}
    assert "accepts schema_version 1" in by_kind["version_99"].error
    assert by_kind["deep_100k"].stage == "decode"
    assert by_kind["output_30k"].stage == "validate"
    assert by_kind["event_1mb"].pair_id == f"{prefix}-event_1mb-0000"

    assert outcomes.complete, f"valid pairs without an outcome: {sorted(outcomes.missing)}\n{log[-4000:]}"
    assert {kind for kind, _ in outcomes.final.values()} <= {"verdicts", "review"}, outcomes.final


async def test_send_skips_an_event_no_broker_would_take_and_sends_the_rest(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await kafka_run(kafka_bootstrap, tmp_path, "poison-send")
    prefix = settings.topics.prefix
    events = [
        *(p.raw for p in poison_events(prefix, "deep_100k", 1)),
        b'{"pair_id": "' + prefix.encode() + b'-too-big", "x": "' + b"y" * 1_200_000 + b'"}',
        *(p.raw for p in poison_events(prefix, "huge_int", 1)),
    ]
    assert await send_events(settings, events) == 2
