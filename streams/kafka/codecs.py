"""Bytes <-> pydantic contracts at the Kafka boundary.

Faust cannot carry pydantic v2 models as values (docs/design.md §8), so topics carry raw bytes and this module
is the one codec: JSON via pydantic, with decode errors turned into a dead-letter reason code.

Every event is untrusted, so parsing is bounded before anything recursive or quadratic sees it:

- **size**: ``max_bytes``, checked first (``oversized_event``);
- **nesting**: at most ``MAX_DEPTH`` levels of arrays and objects (``too_deep``). Python's ``json`` and
  pydantic both recurse, so a 2 KB event of 1,000 ``[`` would raise ``RecursionError``. The depth is
  measured by a linear scan of the bytes (``bytes`` methods only: no recursion, no Python loop over
  characters), before ``json.loads`` runs;
- **numbers**: at most ``MAX_NUMBER_CHARS`` characters each, and floats must be finite
  (``number_too_large``). Python refuses to turn more than 4,300 digits into an int (``ValueError``),
  and JSON's ``1e999`` silently becomes ``inf``; ``NaN`` and ``Infinity`` are not JSON at all.

Whatever still escapes ``json.loads`` (``ValueError``, ``RecursionError``) is a last guard, turned into
``InputRejected`` as well: no input can make ``decode`` raise anything else.
"""

from __future__ import annotations

import json
import math
from array import array
from itertools import accumulate
from typing import Any, Final, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from pairjudge.agents.errors import InputRejected
from pairjudge.schemas._base import SUPPORTED_SCHEMA_VERSIONS, WIRE_CONTEXT

M = TypeVar("M", bound=BaseModel)

#: Deepest nesting of arrays and objects accepted. A CandidatePair nests 4 levels, a TieBreakRequest
#: about 7; 64 leaves room for any contract without letting a recursive parser near its limit (1,000).
MAX_DEPTH: Final = 64
#: Longest number literal accepted, sign, fraction and exponent included. No contract needs more than
#: 20 digits (an int64 has 19); 100 is generous and keeps int() and float() cheap.
MAX_NUMBER_CHARS: Final = 100
#: Longest piece of a field path quoted in a detail: unknown keys are attacker-chosen text.
_MAX_LOC_CHARS: Final = 64
#: Longest validation message kept per error in a detail.
_MAX_MESSAGE_CHARS: Final = 200

# Brackets become +1 / -1 (0xff as a signed byte); every other byte is deleted.
_OPEN_CLOSE: Final = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS: Final = bytes(set(range(256)) - set(b"[{]}"))
#: MAX_DEPTH + 1 openers in a row (in the output of _bracket_steps): too deep, whatever follows.
_DEEP_RUN: Final = b"\x01" * (MAX_DEPTH + 1)


def encode(model: BaseModel) -> bytes:
    return model.model_dump_json().encode("utf-8")


def decode(model_type: type[M], raw: bytes | None, *, max_bytes: int) -> M:
    """Decode one event strictly, or raise ``InputRejected`` with a short reason code and a clear detail."""
    return validate(model_type, parse_object(raw, max_bytes=max_bytes))


def validate(model_type: type[M], data: dict[str, Any]) -> M:
    """A JSON object from ``parse_object`` as ``model_type``, strictly, or ``InputRejected`` as ``decode`` says."""
    try:
        return model_type.model_validate(data, context=WIRE_CONTEXT)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        raise InputRejected(_reason_code(errors), _describe(errors)) from None


def parse_object(raw: bytes | None, *, max_bytes: int) -> dict[str, Any]:
    """Untrusted bytes to a JSON object, within every bound above; ``InputRejected`` otherwise.

    Reasons: ``empty_event``, ``oversized_event``, ``not_utf8``, ``too_deep``, ``number_too_large``,
    ``malformed_json`` (not JSON, or JSON that is not an object).
    """
    if raw is None or len(raw) == 0:
        raise InputRejected("empty_event", "the event has no value")
    if len(raw) > max_bytes:
        raise InputRejected("oversized_event", f"the event is {len(raw)} bytes; the limit is {max_bytes}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputRejected("not_utf8", f"the event is not UTF-8: {exc.reason} at byte {exc.start}") from None
    if _too_deep(raw):
        raise InputRejected(
            "too_deep", f"the event nests arrays or objects more than {MAX_DEPTH} deep; the limit is {MAX_DEPTH}"
        )
    data = _loads(text)
    if not isinstance(data, dict):
        raise InputRejected("malformed_json", f"the event is JSON {type(data).__name__}, not an object")
    return data


def nesting_depth(raw: bytes) -> int:
    """The deepest nesting of ``[``/``{`` outside JSON strings (for text that is not JSON, an upper bound
    on how deep a parser could get before it fails)."""
    return max(accumulate(array("b", _bracket_steps(raw))), default=0)


def _too_deep(raw: bytes) -> bool:
    """``nesting_depth(raw) > MAX_DEPTH``, answered cheaply for the shapes that matter.

    Most events have a handful of brackets, and an event cannot nest deeper than it has openers. Deep
    attacks are mostly a run of openers with nothing closed in between, found by one substring search.
    Only what is left pays the running sum, in C but one Python int per bracket.
    """
    if not _openers_exceed(raw, MAX_DEPTH):
        return False
    steps = _bracket_steps(raw)
    if _DEEP_RUN in steps:
        return True
    return max(accumulate(array("b", steps)), default=0) > MAX_DEPTH


def _openers_exceed(raw: bytes, limit: int) -> bool:
    # find() is a memchr; at most limit + 1 of them, so this never walks the bytes more than twice.
    seen = 0
    for opener in (b"[", b"{"):
        at = raw.find(opener)
        while at >= 0:
            seen += 1
            if seen > limit:
                return True
            at = raw.find(opener, at + 1)
    return False


def _bracket_steps(raw: bytes) -> bytes:
    """One byte per bracket outside strings, in order: 0x01 opens, 0xff (-1 as a signed byte) closes.

    Linear, with no Python loop over the bytes and no recursion. Escapes go first: pairs of backslashes,
    then escaped quotes (pairing left to right, as a JSON parser reads them). Every ``"`` left is then a
    string delimiter, so splitting on it alternates outside and inside. An unterminated string runs to
    the end, as a parser would fail there. ``"`` and ``\\`` never occur inside a UTF-8 multi-byte
    sequence, so scanning the bytes is the same as scanning the text.
    """
    # find() first: replace() copies the bytes even when there is nothing to replace.
    if raw.find(b"\\\\") >= 0:
        raw = raw.replace(b"\\\\", b"")
    if raw.find(b'\\"') >= 0:
        raw = raw.replace(b'\\"', b"")
    outside = b"".join(raw.split(b'"')[::2])
    return outside.translate(_OPEN_CLOSE, _NOT_BRACKETS)


def _loads(text: str) -> Any:
    try:
        return json.loads(text, parse_int=_bounded_int, parse_float=_bounded_float, parse_constant=_not_json_constant)
    except json.JSONDecodeError as exc:
        raise InputRejected(
            "malformed_json", f"the event is not JSON: {exc.msg} at line {exc.lineno} col {exc.colno}"
        ) from None
    except RecursionError:
        # Unreachable after the depth scan; kept so that no input can ever crash an agent.
        raise InputRejected("too_deep", "the event nests too deeply to parse") from None
    except ValueError as exc:
        raise InputRejected("malformed_json", f"the event is not JSON: {str(exc)[:200]}") from None


def _bounded_int(literal: str) -> int:
    if len(literal) > MAX_NUMBER_CHARS:
        raise InputRejected(
            "number_too_large", f"an integer has {len(literal)} characters; the limit is {MAX_NUMBER_CHARS}"
        )
    return int(literal)


def _bounded_float(literal: str) -> float:
    if len(literal) > MAX_NUMBER_CHARS:
        raise InputRejected(
            "number_too_large", f"a number has {len(literal)} characters; the limit is {MAX_NUMBER_CHARS}"
        )
    value = float(literal)
    if not math.isfinite(value):
        # 1e999 would become inf, which no contract means and JSON cannot write back.
        raise InputRejected("number_too_large", f"the number {literal} is out of range for a float")
    return value


def _not_json_constant(literal: str) -> Any:
    raise InputRejected("malformed_json", f"the event is not JSON: {literal} is not a JSON value")


# --- reason codes -----------------------------------------------------------------------------


def _reason_code(errors: list[ErrorDetails]) -> str:
    if any(_is_version_error(e) for e in errors):
        # A version this consumer does not know may legitimately carry other fields: the version is
        # the cause, whatever else failed.
        return "unsupported_schema_version"
    kinds = {e["type"] for e in errors}
    if kinds == {"extra_forbidden"}:
        return "unknown_field"
    if kinds == {"missing"}:
        return "missing_field"
    return "invalid_field"


def _is_version_error(err: ErrorDetails) -> bool:
    return bool(err["loc"]) and err["loc"][-1] == "schema_version"


def _describe(errors: list[ErrorDetails], limit: int = 5) -> str:
    version_errors = [e for e in errors if _is_version_error(e)]
    if version_errors:
        return _describe_version(version_errors[0])
    parts = []
    for err in errors[:limit]:
        where = _where(err) or "(event)"
        # Never echo the offending input: it may be a huge or sensitive model output. A few pydantic
        # messages quote a little of it anyway (a union's unknown tag), so each message is capped too.
        parts.append(f"{where}: {_short(err['msg'], _MAX_MESSAGE_CHARS)}")
    more = len(errors) - limit
    if more > 0:
        parts.append(f"... and {more} more")
    return "; ".join(parts)


def _describe_version(err: ErrorDetails) -> str:
    where = _where(err)
    supported = ", ".join(str(v) for v in SUPPORTED_SCHEMA_VERSIONS)
    found = _quote_scalar(err.get("input"))
    return (
        f"{where} {found} is not supported: this consumer accepts schema_version {supported} "
        "(a JSON integer); upgrade the consumer before producers send a new version"
    )


def _where(err: ErrorDetails) -> str:
    # A path can be 64 levels of attacker-chosen keys: shorten each key and the whole path.
    return _short(".".join(_short(str(p), _MAX_LOC_CHARS) for p in err["loc"]), 4 * _MAX_LOC_CHARS)


def _quote_scalar(value: object) -> str:
    """The found version as JSON, shortened: the one input value worth quoting in a detail."""
    if isinstance(value, str):
        return _short(json.dumps(value[:64]), 42)
    if value is None or isinstance(value, int | float | bool):
        return _short(json.dumps(value), 42)
    return f"a JSON {'array' if isinstance(value, list | tuple) else 'object'}"


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[: limit - 1]}…"
