"""Bytes <-> pydantic contracts at the Kafka boundary.

Faust cannot carry pydantic v2 models as values (DESIGN §8), so topics carry raw bytes and this module
is the one codec: JSON via pydantic, with decode errors turned into a dead-letter reason code.
"""

from __future__ import annotations

import json
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from agents.errors import InputRejected

M = TypeVar("M", bound=BaseModel)


def encode(model: BaseModel) -> bytes:
    return model.model_dump_json().encode("utf-8")


def decode(model_type: type[M], raw: bytes | None, *, max_bytes: int) -> M:
    """Decode one event strictly, or raise ``InputRejected`` with a short reason code and a clear detail."""
    if raw is None or len(raw) == 0:
        raise InputRejected("empty_event", "the event has no value")
    if len(raw) > max_bytes:
        raise InputRejected("oversized_event", f"the event is {len(raw)} bytes; the limit is {max_bytes}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputRejected("not_utf8", f"the event is not UTF-8: {exc.reason} at byte {exc.start}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputRejected(
            "malformed_json", f"the event is not JSON: {exc.msg} at line {exc.lineno} col {exc.colno}"
        ) from None
    if not isinstance(data, dict):
        raise InputRejected("malformed_json", f"the event is JSON {type(data).__name__}, not an object")
    try:
        return model_type.model_validate(data)
    except ValidationError as exc:
        raise InputRejected(_reason_code(exc), _describe(exc)) from None


def _reason_code(exc: ValidationError) -> str:
    kinds = {e["type"] for e in exc.errors()}
    if kinds == {"extra_forbidden"}:
        return "unknown_field"
    if kinds == {"missing"}:
        return "missing_field"
    return "invalid_field"


def _describe(exc: ValidationError, limit: int = 5) -> str:
    parts = []
    for err in exc.errors()[:limit]:
        where = ".".join(str(p) for p in err["loc"]) or "(event)"
        # Never echo the offending input: it may be a huge or sensitive model output.
        parts.append(f"{where}: {err['msg']}")
    more = len(exc.errors()) - limit
    if more > 0:
        parts.append(f"... and {more} more")
    return "; ".join(parts)
