"""What `pairjudge deadletter list|replay` select and decide, without a broker (the pure parts).

The Kafka side (reading the topic, publishing, the worker's idempotence) is in
tests/integration/test_deadletter_replay_kafka.py.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta

import pytest
import typer

from pairjudge.schemas import DeadLetter
from pairjudge.streams.cli.deadletter import _json_line, parse_when
from pairjudge.streams.kafka.dead_letters import build_dead_letter
from pairjudge.streams.kafka.letters import LetterFilter, StoredLetter, latest_per_pair
from pairjudge.streams.kafka.replay import (
    REPLAY_HEADER,
    SKIP_CORRUPT,
    SKIP_NO_TOPIC,
    SKIP_OLDER,
    SKIP_REDACTED,
    SKIP_TRUNCATED,
    Pacer,
    plan_replay,
    skip_reason_not_selected,
)

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def stored(
    pair_id: str | None = "p-1",
    *,
    reason: str = "judge_rejected",
    stage: str = "judge",
    at: datetime = T0,
    original: bytes | None = None,
    topic: str | None = "t.pairs",
    offset: int = 0,
    key: bytes | None = None,
    **fields: object,
) -> StoredLetter:
    raw = original if original is not None else json.dumps({"pair_id": pair_id or "x"}).encode()
    letter = DeadLetter.model_validate(
        {
            "stage": stage,
            "reason": reason,
            "error": "HTTP 401",
            "original": raw,
            "pair_id": pair_id,
            "topic": topic,
            "partition": 1,
            "offset": 40 + offset,
            "failed_at": at,
            "original_size": len(raw),
            "original_sha256": hashlib.sha256(raw).hexdigest(),
            **fields,
        }
    )
    return StoredLetter(letter, key if key is not None else (pair_id or "").encode(), "t.deadletter", 0, offset)


# --- times --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "back"),
    [
        ("90s", timedelta(seconds=90)),
        ("15m", timedelta(minutes=15)),
        ("2h", timedelta(hours=2)),
        ("1.5d", timedelta(hours=36)),
        ("1w", timedelta(days=7)),
    ],
)
def test_a_span_is_counted_back_from_now(text: str, back: timedelta) -> None:
    assert parse_when(text, now=T0) == T0 - back


def test_iso_times_keep_their_offset_and_a_time_without_one_is_utc() -> None:
    assert parse_when("2026-03-01T10:00:00+01:00") == T0
    assert parse_when("2026-03-01T09:00Z") == T0
    assert parse_when("2026-03-01T09:00") == T0


@pytest.mark.parametrize("text", ["yesterday", "2 hours", "-2h", "2026-13-01", ""])
def test_anything_else_is_a_clear_error(text: str) -> None:
    with pytest.raises(typer.BadParameter, match="ISO-8601"):
        parse_when(text, now=T0)


# --- filters ------------------------------------------------------------------------------------------


def test_each_filter_selects_what_it_says_and_they_combine() -> None:
    letters = [
        stored("a", reason="judge_rejected", stage="judge", at=T0),
        stored("b", reason="malformed_json", stage="decode", at=T0 + timedelta(hours=1)),
        stored("c", reason="judge_rejected", stage="tiebreak", at=T0 + timedelta(hours=2)),
        stored("d", reason="internal_error", stage="judge", at=T0 + timedelta(hours=3)),
    ]

    def ids(selection: LetterFilter) -> list[str | None]:
        return [s.letter.pair_id for s in letters if selection.matches(s.letter)]

    assert ids(LetterFilter()) == ["a", "b", "c", "d"]
    assert ids(LetterFilter(reasons=frozenset({"judge_rejected"}))) == ["a", "c"]
    assert ids(LetterFilter(reasons=frozenset({"judge_rejected", "internal_error"}))) == ["a", "c", "d"]
    assert ids(LetterFilter(stages=frozenset({"tiebreak"}))) == ["c"]
    assert ids(LetterFilter(pair_ids=frozenset({"b", "d"}))) == ["b", "d"]
    # Inclusive at both ends.
    assert ids(LetterFilter(since=T0 + timedelta(hours=1), until=T0 + timedelta(hours=2))) == ["b", "c"]
    assert ids(LetterFilter(reasons=frozenset({"judge_rejected"}), since=T0 + timedelta(minutes=1))) == ["c"]


def test_latest_keeps_each_pairs_latest_letter_and_every_letter_without_a_pair_id() -> None:
    first = stored("a", at=T0, offset=0)
    again = stored("a", reason="internal_error", at=T0 + timedelta(minutes=5), offset=1)
    other = stored("b", at=T0 + timedelta(minutes=1), offset=2)
    anon1 = stored(None, reason="malformed_json", at=T0, original=b"{", offset=3)
    anon2 = stored(None, reason="malformed_json", at=T0, original=b"[", offset=4)
    kept = latest_per_pair([again, first, other, anon1, anon2])
    assert kept == [anon1, anon2, other, again]


# --- what a replay does with each letter --------------------------------------------------------------


def test_a_replayable_letter_is_replayed_as_its_original_bytes_keyed_by_pair_id_to_its_topic() -> None:
    letter = stored("p-9", key=b"ignored-when-a-pair-id-is-known")
    (plan,) = plan_replay([letter])
    assert plan.skip is None
    assert (plan.topic, plan.key, plan.value) == ("t.pairs", b"p-9", letter.letter.original)
    assert plan.headers == [(REPLAY_HEADER, b"t.deadletter[0]@0")]
    assert plan_replay([letter], to_topic="elsewhere")[0].topic == "elsewhere"


def test_a_letter_without_a_pair_id_keeps_the_inputs_key() -> None:
    (plan,) = plan_replay([stored(None, reason="internal_error", key=b"k-7", original=b"odd")])
    assert (plan.skip, plan.key) == (None, b"k-7")
    (plan,) = plan_replay([stored(None, reason="internal_error", key=b"", original=b"odd")])
    assert (plan.skip, plan.key) == (None, None)


def test_a_truncated_original_is_reported_not_replayed_even_when_named() -> None:
    raw = b'{"pair_id": "big", "x": "' + b"y" * 40_000 + b'"}'
    built = build_dead_letter(stage="judge", reason="judge_rejected", detail="401", raw=raw, max_bytes=16_384)
    letter = DeadLetter.model_validate_json(built.value)
    assert letter.original_truncated
    held = StoredLetter(letter, built.key, "t.deadletter", 0, 0)
    (plan,) = plan_replay([held], named_reasons=frozenset({"judge_rejected"}))
    assert plan.skip == SKIP_TRUNCATED


def test_a_redacted_original_is_reported_not_replayed() -> None:
    (plan,) = plan_replay([stored(original_redacted=True)])
    assert plan.skip == SKIP_REDACTED


def test_an_original_that_no_longer_matches_its_sha256_is_reported_not_replayed() -> None:
    letter = stored()
    tampered = letter.letter.model_copy(update={"original_sha256": "0" * 64})
    (plan,) = plan_replay([StoredLetter(tampered, letter.key, letter.topic, 0, 0)])
    assert plan.skip == SKIP_CORRUPT


def test_a_fault_of_the_event_itself_is_replayed_only_when_its_reason_is_named() -> None:
    letter = stored(None, reason="malformed_json", stage="decode", original=b'{"pair_id": ')
    assert plan_replay([letter])[0].skip == skip_reason_not_selected("malformed_json")
    assert plan_replay([letter], named_reasons=frozenset({"judge_rejected"}))[0].skip is not None
    assert plan_replay([letter], named_reasons=frozenset({"malformed_json"}))[0].skip is None


@pytest.mark.parametrize(
    "reason",
    ["judge_rejected", "internal_error", "outcome_undeliverable", "unsupported_schema_version", "unknown_rubric"],
)
def test_causes_outside_the_event_are_replayed_by_default(reason: str) -> None:
    assert plan_replay([stored(reason=reason)])[0].skip is None


def test_a_letter_with_no_source_topic_needs_to_topic() -> None:
    letter = stored(topic=None)
    assert plan_replay([letter])[0].skip == SKIP_NO_TOPIC
    assert plan_replay([letter], to_topic="t.pairs")[0].skip is None


def test_a_pair_is_replayed_once_from_its_latest_letter() -> None:
    older = stored("a", at=T0, offset=0)
    newer = stored("a", at=T0 + timedelta(minutes=3), offset=5)
    plans = plan_replay([newer, older])
    assert [(p.stored, p.skip) for p in plans] == [(older, SKIP_OLDER), (newer, None)]


def test_json_lines_carry_the_original_as_base64_or_leave_it_out() -> None:
    letter = stored("p-1", original=b'{"pair_id": "p-1", "\xff": 1}')
    line = json.loads(_json_line(letter, with_original=True))
    assert DeadLetter.model_validate_json(json.dumps({k: v for k, v in line.items() if k != "letter"})) == letter.letter
    assert line["letter"] == {"topic": "t.deadletter", "partition": 0, "offset": 0}
    assert "original" not in json.loads(_json_line(letter, with_original=False))


# --- the rate -----------------------------------------------------------------------------------------


async def test_the_pacer_spaces_sends_evenly_and_never_bursts_to_catch_up() -> None:
    now = [100.0]
    sent_at: list[float] = []

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    pacer = Pacer(4.0, clock=lambda: now[0], sleep=sleep)
    for n in range(10):
        await pacer.wait()
        sent_at.append(now[0])
        if n == 4:
            now[0] += 3.0  # the caller was slow once: the schedule does not let it make up lost sends
    for end in sent_at:  # in every one-second window, at most rate sends (+1 at its closed end)
        assert sum(1 for t in sent_at if end - 1.0 < t <= end) <= 4
    assert sent_at[:5] == [100.0, 100.25, 100.5, 100.75, 101.0]
    # After the pause, still one interval apart: no burst of the sends the pause "missed".
    assert sent_at[5:] == [104.0, 104.25, 104.5, 104.75, 105.0]


def test_a_rate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Pacer(0)
