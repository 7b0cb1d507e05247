"""Dead letters that always fit, and a pair-id guess that never fails.

A dead letter carries its original bytes, base64-encoded in JSON, so it is a third larger than the event
it reports. An event near the broker's 1 MB limit would make a letter the producer refuses (Faust's
``producer_max_request_size`` is 1,000,000 bytes), and the agent would crash on the input it was trying
to set aside. ``build_dead_letter`` bounds the whole record (key and encoded letter) to ``max_bytes``: when
the original does not fit, it keeps the first bytes, flags ``original_truncated``, and records the
whole event's size and SHA-256, which every letter carries so consumers can match it to what was sent.

Everything here must work on any input: it runs exactly when an input was found to be bad.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, field
from typing import Final

from pairjudge.agents.errors import InputRejected
from pairjudge.schemas import DeadLetter
from pairjudge.schemas.kinds import DeadLetterStage
from pairjudge.streams.kafka.codecs import encode, parse_object
from pairjudge.streams.security.redaction_hook import EventRedactor

log = logging.getLogger(__name__)

#: Default bound on key + encoded letter: Faust's producer refuses requests over 1,000,000 bytes, and
#: the headers (traceparent) and record overhead need a little room.
DEFAULT_MAX_LETTER_BYTES: Final = 900_000
#: The smallest bound that always leaves room for the letter's own fields.
MIN_MAX_LETTER_BYTES: Final = 16_384
#: Longest ``error`` kept: details quote exception messages, which may carry anything.
MAX_ERROR_CHARS: Final = 2_000
#: Longest ``reason`` kept: reason codes are short; anything longer is a bug upstream.
MAX_REASON_CHARS: Final = 64
#: Longest input key reused as the letter's key; a longer one is replaced by its SHA-256 (still stable).
MAX_KEY_BYTES: Final = 256
#: Largest event whose pair id is read by parsing it (bounded, see ``streams.kafka.codecs``); larger events
#: are only scanned, so a flood of oversized events costs a linear search each, not a parse.
GUESS_PARSE_BYTES: Final = 262_144

_PAIR_ID: Final = re.compile(r"^[A-Za-z0-9_.:\-]{1,128}$")
# `"pair_id": "<id>"` anywhere in the bytes. Only a guess (it may sit in a nested object), so it is
# trusted only when every match names the same id.
_PAIR_ID_FIELD: Final = re.compile(rb'"pair_id"[ \t\r\n]*:[ \t\r\n]*"([A-Za-z0-9_.:\-]{1,128})"')
_SCAN_MATCHES: Final = 8


@dataclass(frozen=True, slots=True)
class BuiltLetter:
    """A dead letter ready to publish: ``len(key) + len(value) <= max_bytes``."""

    key: bytes
    value: bytes
    pair_id: str | None
    truncated: bool
    #: The letter ``value`` encodes, for a caller in this process (the Python API) that wants it typed.
    event: DeadLetter = field(compare=False, repr=False)


def build_dead_letter(
    *,
    stage: DeadLetterStage,
    reason: str,
    detail: str,
    raw: bytes | None,
    topic: str | None = None,
    partition: int | None = None,
    offset: int | None = None,
    key: bytes | None = None,
    max_bytes: int = DEFAULT_MAX_LETTER_BYTES,
    redactor: EventRedactor | None = None,
) -> BuiltLetter:
    """Encode the dead letter for ``raw``, keeping as much of it as ``max_bytes`` allows.

    The letter is keyed by the guessed pair id, so it lands beside the pair's other events; otherwise by
    the input's key (bounded); otherwise it has an empty key. With a ``redactor`` (``streams.security.redaction_hook``)
    the original and the detail are redacted first and the letter says so (``original_redacted``); its
    size and SHA-256 still describe the event as received.
    """
    if max_bytes < MIN_MAX_LETTER_BYTES:
        raise ValueError(f"max_bytes must be at least {MIN_MAX_LETTER_BYTES}, not {max_bytes}")
    received = raw or b""
    pair_id = guess_pair_id(received)
    letter_key = pair_id.encode() if pair_id else _bounded_key(key)
    original = redactor.raw(received) if redactor is not None else received
    whole = DeadLetter(
        stage=stage,
        reason=_cap(reason, MAX_REASON_CHARS),
        error=_cap(redactor.text(detail) if redactor is not None else detail, MAX_ERROR_CHARS),
        original=original,
        pair_id=pair_id,
        topic=topic,
        partition=partition,
        offset=offset,
        original_size=len(received),
        original_sha256=hashlib.sha256(received).hexdigest(),
        original_truncated=False,
        original_redacted=redactor is not None,
    )
    # The letter without its original, as it would be encoded ("false" is the longer flag), tells how
    # many base64 characters are left: 4 for every 3 bytes kept.
    room = max_bytes - len(letter_key) - len(encode(whole.model_copy(update={"original": b""})))
    keep = max(0, room) // 4 * 3
    if len(original) <= keep:
        return BuiltLetter(letter_key, encode(whole), pair_id, truncated=False, event=whole)
    letter = whole.model_copy(update={"original": original[:keep], "original_truncated": True})
    value = encode(letter)
    if len(letter_key) + len(value) > max_bytes:
        # Not reachable by the arithmetic above (base64 is never escaped in JSON); if it ever were,
        # a letter without its original still fits, and a letter that fits is what matters.
        log.error("dead letter of %d bytes over its bound of %d; sent without the original", len(value), max_bytes)
        letter = whole.model_copy(update={"original": b"", "original_truncated": True})
        value = encode(letter)
    log.info("dead letter for a %d-byte event keeps its first %d bytes", len(original), keep)
    return BuiltLetter(letter_key, value, pair_id, truncated=True, event=letter)


def read_pair_id(raw: bytes | None, *, max_bytes: int = GUESS_PARSE_BYTES) -> str | None:
    """The top-level ``pair_id`` of an event that parses within the codec's bounds (depth, numbers, size
    ``max_bytes``) and looks like a pair id; None otherwise. Never raises, never recurses on the input."""
    return _read(raw, max_bytes)[1]


def guess_pair_id(raw: bytes | None) -> str | None:
    """Best effort, so a dead letter can still be matched to its pair. Never raises.

    An event up to ``GUESS_PARSE_BYTES`` that parses has its top-level ``pair_id`` or none. Anything that
    does not parse, or is larger, is scanned for ``"pair_id": "..."``, trusted only when every match
    agrees (it may sit in a nested object).
    """
    parsed, pair_id = _read(raw, GUESS_PARSE_BYTES)
    return pair_id if parsed or not raw else _scan_pair_id(raw)


def _read(raw: bytes | None, max_bytes: int) -> tuple[bool, str | None]:
    """(whether ``raw`` parsed as a JSON object within the bounds, its valid top-level pair id)."""
    if not raw or len(raw) > max_bytes:
        return False, None
    try:
        pair_id = parse_object(raw, max_bytes=max_bytes).get("pair_id")
    except InputRejected:
        return False, None
    except Exception:  # a read for a key or a dead letter must never become a crash
        log.debug("could not read a pair id", exc_info=True)
        return False, None
    return True, pair_id if isinstance(pair_id, str) and _PAIR_ID.match(pair_id) else None


def _scan_pair_id(raw: bytes) -> str | None:
    # A linear regex search with a literal prefix: cheap even on a 1 MB event, and it cannot raise.
    found = set()
    for n, match in enumerate(_PAIR_ID_FIELD.finditer(raw)):
        if n == _SCAN_MATCHES:
            break
        found.add(match.group(1))
    return found.pop().decode("ascii") if len(found) == 1 else None


def _bounded_key(key: bytes | None) -> bytes:
    if not key:
        return b""
    return key if len(key) <= MAX_KEY_BYTES else hashlib.sha256(key).hexdigest().encode("ascii")


def _cap(text: str, limit: int) -> str:
    """At most ``limit`` characters (and a note of how many were cut), always encodable as UTF-8."""
    if len(text) > limit:
        text = f"{text[:limit]}… ({len(text) - limit} more characters)"
    # A lone surrogate (from an exception message quoting odd text) would make the letter unencodable.
    return text.encode("utf-8", "replace").decode("utf-8")
