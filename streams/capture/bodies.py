"""The SDKs' objects as the JSON bodies the normalisers read, and a streamed reply's pieces assembled.

Runs on the sink's thread, never on the caller's path. The official ``openai`` and ``anthropic`` clients give
pydantic models (``model_dump``); their parameters are plain dicts and lists, with ``Omit``/``NotGiven``
sentinels for what the call left out, which are left out here too.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pairjudge.agents.capture import (
    CaptureUnreadable,
    assemble_anthropic_events,
    assemble_chat_chunks,
    final_response,
)
from pairjudge.schemas.captures import CapturedApi

#: The SDKs' markers for an argument not given (``openai.Omit``, ``openai.NotGiven``, and Anthropic's the same).
_SENTINELS = frozenset({"Omit", "NotGiven"})


@dataclass(frozen=True, slots=True)
class WireBody:
    """A body as the HTTP wire carried it (the gateway's): JSON, or for a streamed reply its server-sent events,
    maybe compressed (``encoding``: the ``Content-Encoding``). Read on the sink's thread, never on the request's."""

    data: bytes
    encoding: str = ""

    def text(self) -> str:
        data = self.data
        encoding = self.encoding.strip().lower()
        if encoding in ("gzip", "x-gzip"):
            data = zlib.decompress(data, wbits=31)
        elif encoding == "deflate":
            try:
                data = zlib.decompress(data)
            except zlib.error:
                data = zlib.decompress(data, wbits=-15)  # the raw deflate some servers send
        elif encoding not in ("", "identity"):
            raise CaptureUnreadable(f"body encoded as {encoding!r}, which the capture cannot read")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise CaptureUnreadable("body is not UTF-8") from None

    def json(self) -> Any:
        try:
            return json.loads(self.text())
        except json.JSONDecodeError as exc:
            raise CaptureUnreadable(f"body is not JSON (line {exc.lineno}, column {exc.colno})") from None

    def events(self) -> list[Any]:
        """The ``data:`` of each server-sent event, as JSON (OpenAI's closing ``[DONE]`` left out)."""
        events: list[Any] = []
        data: list[str] = []
        for line in [*self.text().splitlines(), ""]:
            if not line:
                if data:
                    joined = "\n".join(data)
                    data = []
                    if joined.strip() == "[DONE]":
                        continue
                    try:
                        events.append(json.loads(joined))
                    except json.JSONDecodeError:
                        raise CaptureUnreadable(f"event {len(events) + 1} of the stream is not JSON") from None
            elif line.startswith("data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(" ") else value)
        return events


def as_json(value: Any) -> Any:
    """``value`` as plain JSON values: SDK models dumped, tuples and iterables as lists, sentinels removed."""
    kind = type(value)
    # Exact types first: a request is mostly plain dicts, lists and strings, and the ABC checks below are slow.
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if kind is dict:
        return {k: as_json(v) for k, v in value.items() if type(v).__name__ not in _SENTINELS}
    if kind is list or kind is tuple:
        return [as_json(v) for v in value]
    if isinstance(value, str | int | float | bool):
        return value
    if kind is WireBody:
        return value.json()
    if isinstance(value, Mapping):
        return {str(k): as_json(v) for k, v in value.items() if type(v).__name__ not in _SENTINELS}
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", by_alias=True, exclude_unset=True)
    if isinstance(value, bytes | bytearray):
        return "<bytes>"  # a file upload's content: never captured as data
    if isinstance(value, Iterable):
        return [as_json(v) for v in value]
    return str(value)


def as_body(value: Any) -> dict[str, Any]:
    body = as_json(value)
    if not isinstance(body, dict):
        raise TypeError(f"expected a JSON object, got {type(body).__name__}")
    return body


def assembled(api: CapturedApi, pieces: Iterable[Any]) -> dict[str, Any]:
    """A streamed reply's chunks (chat completions) or events (Anthropic, the Responses API) as one body."""
    bodies = [as_body(p) for p in (pieces.events() if isinstance(pieces, WireBody) else pieces)]
    if api == "chat_completions":
        return assemble_chat_chunks(bodies)
    if api == "anthropic_messages":
        return assemble_anthropic_events(bodies)
    return final_response(bodies)
