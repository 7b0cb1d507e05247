"""The recorded outcome's bytes (``streams.worker.published``): framed, read back exactly, old entries still read."""

from __future__ import annotations

import json
import zlib
from base64 import b64encode

import pytest

from pairjudge.streams.worker.pipeline import Outgoing
from pairjudge.streams.worker.published import COMPRESSED, FRAMED, PUBLISHED, header, pack, unpack

OUTCOME = [
    Outgoing("verdicts", b"pair-1", '{"winner":"é","text":"\\u0000 any bytes"}'.encode(), [("traceparent", b"00-ab")]),
    Outgoing("review", b"pair-1", b"\x00\xff" * 300, []),
    Outgoing("decisions", b"", b"", [("a", b""), ("ü-name", b"\x00\x01"), ("b", b"x" * 7_000)]),
]


def _payload(stored: bytes) -> bytes:
    return stored.split(b":", 2)[2]


def test_an_outcome_reads_back_byte_for_byte() -> None:
    stored = pack(OUTCOME, partition=7, stored_at=1_796_000_000.9)
    assert header(stored) == (1_796_000_000.0, 7)
    assert _payload(stored).startswith(FRAMED)
    assert unpack(_payload(stored)) == OUTCOME


def test_an_empty_outcome_and_a_long_value_read_back() -> None:
    assert unpack(_payload(pack([], partition=0, stored_at=0))) == []
    big = [Outgoing("verdicts", b"k", b"v" * 2_000_000, [])]
    stored = pack(big, partition=0, stored_at=0)
    # Large entries are compressed, so that a long review request still fits a changelog record.
    assert _payload(stored).startswith(COMPRESSED)
    assert len(stored) < 100_000
    assert unpack(_payload(stored)) == big


def test_an_entry_of_the_earlier_format_is_still_read() -> None:
    """Recorded by a worker before the framed format (zlib of JSON with base64 bytes): a rolling upgrade's
    redelivery must still replay it."""
    body = [
        {
            "kind": m.kind,
            "key": b64encode(m.key).decode(),
            "value": b64encode(m.value).decode(),
            "headers": [[n, b64encode(v).decode()] for n, v in m.headers],
        }
        for m in OUTCOME
    ]
    old = zlib.compress(json.dumps(body).encode(), level=1)
    assert unpack(old) == OUTCOME


def test_the_formats_first_bytes_never_collide() -> None:
    assert FRAMED not in (PUBLISHED[:1], b"x")  # zlib streams start 0x78 ("x")
    assert not any(str(d).encode() == FRAMED for d in range(10))  # crash marks are counts


def test_an_unknown_kind_is_refused() -> None:
    stored = pack([Outgoing("verdicts", b"k", b"v", [])], partition=0, stored_at=0)
    tampered = _payload(stored).replace(b"verdicts", b"verdictz")
    with pytest.raises(ValueError, match="unknown topic kind"):
        unpack(tampered)
