"""Dead letters always fit the producer's limit, and always say how to match them to what was sent."""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from pairjudge.schemas import DeadLetter
from pairjudge.streams.kafka.dead_letters import (
    DEFAULT_MAX_LETTER_BYTES,
    MAX_ERROR_CHARS,
    MAX_KEY_BYTES,
    MIN_MAX_LETTER_BYTES,
    build_dead_letter,
)

#: Faust's producer_max_request_size: a letter over it could never be sent.
PRODUCER_LIMIT = 1_000_000
#: The worst detail JSON can be asked to carry: control characters escape to 6 bytes each, and a lone
#: surrogate cannot be encoded at all.
WORST_DETAIL = ('\x00\ud800"\\' * 500_000) + "end"


def _letter(value: bytes) -> DeadLetter:
    return DeadLetter.model_validate_json(value)


def test_a_1mb_original_is_cut_to_fit_and_still_identified() -> None:
    raw = b'{"pair_id": "p-huge", "x": "' + bytes(range(256)) * 4_070 + b'"}'
    assert 1_040_000 < len(raw) < 1_048_576
    built = build_dead_letter(
        stage="decode", reason="oversized_event", detail="too big", raw=raw, topic="t", partition=0, offset=7
    )
    assert len(built.key) + len(built.value) <= DEFAULT_MAX_LETTER_BYTES < PRODUCER_LIMIT
    letter = _letter(built.value)
    assert built.truncated
    assert letter.original_truncated
    assert letter.original_size == len(raw)
    assert letter.original_sha256 == hashlib.sha256(raw).hexdigest()
    assert raw.startswith(letter.original)
    # As much as fits is kept: less than one base64 quantum (4 characters, 3 bytes) is left unused.
    assert len(built.key) + len(built.value) > DEFAULT_MAX_LETTER_BYTES - 4
    assert letter.pair_id == "p-huge"
    assert built.key == b"p-huge"


@pytest.mark.parametrize("size", [0, 1, 2, 3, 1_000, 250_000, 600_000, 700_000, 900_000, 1_048_576])
def test_the_bound_holds_at_every_size_with_the_worst_detail(size: int) -> None:
    raw = b"\xff" * size  # not UTF-8, no pair id: nothing to guess, worst base64 alphabet
    built = build_dead_letter(stage="judge", reason="internal_error", detail=WORST_DETAIL, raw=raw, key=b"k" * 5_000)
    assert len(built.key) + len(built.value) <= DEFAULT_MAX_LETTER_BYTES
    letter = _letter(built.value)
    assert letter.original_size == size
    assert letter.original_sha256 == hashlib.sha256(raw).hexdigest()
    assert letter.original_truncated == (len(letter.original) < size)
    assert raw.startswith(letter.original)
    assert len(letter.error) <= MAX_ERROR_CHARS + 40
    assert "more characters" in letter.error


def test_whole_originals_are_kept_up_to_the_exact_boundary() -> None:
    limit = MIN_MAX_LETTER_BYTES * 2
    sizes_kept = {}
    for size in range(limit // 2, limit):
        built = build_dead_letter(stage="decode", reason="malformed_json", detail="d", raw=b"x" * size, max_bytes=limit)
        assert len(built.key) + len(built.value) <= limit
        sizes_kept[size] = not built.truncated
    whole = [s for s, kept in sizes_kept.items() if kept]
    cut = [s for s, kept in sizes_kept.items() if not kept]
    assert whole
    assert cut
    # Every size up to the largest that fits is kept whole, every larger one is cut: no gaps.
    assert max(whole) < min(cut)
    assert max(whole) > limit * 3 // 4 - 1_000


def test_a_small_original_round_trips_unchanged() -> None:
    raw = b'{"pair_id": "p-7", "task": {"prom'
    built = build_dead_letter(
        stage="decode", reason="malformed_json", detail="the event is not JSON", raw=raw, topic="pairs", offset=3
    )
    letter = _letter(built.value)
    assert letter.original == raw
    assert not letter.original_truncated
    assert (letter.original_size, letter.pair_id, letter.topic, letter.offset) == (len(raw), "p-7", "pairs", 3)
    assert letter.original_sha256 == hashlib.sha256(raw).hexdigest()
    # On the wire the original is base64 (URL-safe alphabet), as every bytes field of the contracts.
    assert base64.urlsafe_b64decode(json.loads(built.value)["original"]) == raw
    assert letter.model_dump_json().encode() == built.value


def test_no_value_still_makes_a_letter() -> None:
    built = build_dead_letter(stage="decode", reason="empty_event", detail="no value", raw=None, key=b"input-key")
    letter = _letter(built.value)
    assert letter.original == b""
    assert letter.original_size == 0
    assert letter.original_sha256 == hashlib.sha256(b"").hexdigest()
    assert built.key == b"input-key"


def test_the_input_key_is_used_when_no_pair_id_is_found_and_bounded() -> None:
    short = build_dead_letter(stage="decode", reason="not_utf8", detail="d", raw=b"\xff", key=b"k-1")
    assert short.key == b"k-1"
    long_key = b"k" * (MAX_KEY_BYTES + 1)
    long = build_dead_letter(stage="decode", reason="not_utf8", detail="d", raw=b"\xff", key=long_key)
    assert long.key == hashlib.sha256(long_key).hexdigest().encode()
    assert build_dead_letter(stage="decode", reason="x", detail="d", raw=b"\xff").key == b""


def test_a_long_reason_is_capped() -> None:
    built = build_dead_letter(stage="decode", reason="r" * 10_000, detail="d", raw=b"{}")
    assert len(_letter(built.value).reason) < 100


def test_a_tiny_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="at least"):
        build_dead_letter(stage="decode", reason="x", detail="d", raw=b"{}", max_bytes=MIN_MAX_LETTER_BYTES - 1)


def test_letters_written_before_the_new_fields_still_read() -> None:
    old = {
        "schema_version": 1,
        "stage": "decode",
        "reason": "malformed_json",
        "error": "e",
        "original": base64.urlsafe_b64encode(b"{").decode(),
        "failed_at": datetime.now(UTC).isoformat(),
    }
    letter = DeadLetter.model_validate_json(json.dumps(old))
    assert (letter.original_size, letter.original_sha256, letter.original_truncated) == (None, None, False)


@pytest.mark.parametrize(
    ("original", "size", "truncated"),
    [(b"abc", 3, True), (b"ab", 3, False), (b"abcd", 3, False), (b"ab", None, True)],
)
def test_the_truncation_flag_must_agree_with_the_sizes(original: bytes, size: int | None, truncated: bool) -> None:
    with pytest.raises(ValidationError):
        DeadLetter(
            stage="decode", reason="x", error="e", original=original, original_size=size, original_truncated=truncated
        )
