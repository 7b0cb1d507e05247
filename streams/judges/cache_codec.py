"""What one response-cache entry is (docs/design.md §5): its key, and the reply stored under it.

* The **key** (:func:`request_key`) is sha256 over a canonical JSON of everything that shapes the reply:
  provider, model, version and temperature; the rendered messages; the response schema and its name; the
  forced-choice flag; and the judge's parameters (seed, max_tokens, response format, endpoint, ...).
  ``attempt`` is not in the key: a re-ask's messages already differ (they carry the validation error).
  :data:`KEY_FORMAT` is in it, so a change to what goes in simply stops old entries matching.
* The **value** (:class:`CachedReply`) is stored as JSON text, never a pickle, with :data:`VALUE_FORMAT`;
  anything else reads as a miss.

Apart from the store (``streams.judges.cache_store``) and the wrapper (``streams.judges.cache``) so that
what invalidates every cache on a host, a change here, is visible as one small file's diff.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from pairjudge.agents.judge import Judge, JudgeRequest
from pairjudge.agents.validation import strip_fence

#: Bumped whenever what goes into a key changes, so old entries simply stop matching.
KEY_FORMAT: Final = 1
#: Bumped whenever the stored value's shape changes; entries of another format read as misses.
VALUE_FORMAT: Final = 1


def canonical(material: Mapping[str, Any]) -> bytes:
    # ensure_ascii: the bytes hashed never depend on how (or whether) odd Unicode can be encoded.
    return json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def request_key(judge: Judge, request: JudgeRequest, params: Mapping[str, Any]) -> str:
    """The cache key of ``request`` to ``judge``: a sha256 hex digest (see the module docstring)."""
    who = judge.identity
    material = {
        "key_format": KEY_FORMAT,
        "provider": who.provider,
        "model": who.model,
        "version": who.version,
        "temperature": who.temperature,
        "messages": [[m.role, m.content] for m in request.messages],
        "response_schema": request.response_schema,
        "schema_name": request.schema_name,
        "forced_choice": request.forced_choice,
        "params": dict(params),
    }
    return hashlib.sha256(canonical(material)).hexdigest()


def is_json_object(text: str) -> bool:
    """True when ``text`` is one JSON object, bare or in one markdown fence (what the validator reads)."""
    try:
        return isinstance(json.loads(strip_fence(text)), dict)
    except (ValueError, RecursionError):
        return False


@dataclass(frozen=True, slots=True)
class CachedReply:
    """What is stored per key: enough to rebuild the ``JudgeResponse`` it came from."""

    text: str
    model: str
    input_tokens: int | None
    output_tokens: int | None
    #: The original call's latency, for information.
    latency_s: float
    #: Wall-clock time of storing (seconds since the epoch).
    stored_at: float

    def encode(self) -> str:
        # JSON text, not pickle: diskcache stores a str as is, and ``_TextOnlyDisk`` refuses to
        # unpickle anything, whoever else could write to the directory.
        # Spelled out rather than ``dataclasses.asdict``, which deep-copies and took 20 µs a reply.
        return json.dumps(
            {
                "format": VALUE_FORMAT,
                "text": self.text,
                "model": self.model,
                "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "latency_s": self.latency_s,
                "stored_at": self.stored_at,
            },
            separators=(",", ":"),
        )

    @classmethod
    def decode(cls, raw: object) -> CachedReply | None:
        """The stored reply, or None for anything not written by this version of this class."""
        if not isinstance(raw, str):
            return None
        try:
            data = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(data, dict) or data.get("format") != VALUE_FORMAT:
            return None
        text, model, stored_at, latency = (
            data.get("text"),
            data.get("model"),
            data.get("stored_at"),
            data.get("latency_s"),
        )
        tokens = data.get("input_tokens"), data.get("output_tokens")
        if not (isinstance(text, str) and isinstance(model, str)):
            return None
        if not all(t is None or (isinstance(t, int) and not isinstance(t, bool)) for t in tokens):
            return None
        if not (isinstance(stored_at, int | float) and isinstance(latency, int | float)):
            return None
        return cls(text, model, tokens[0], tokens[1], float(latency), float(stored_at))
