"""What the three normalisers share: reading loosely typed JSON bodies, content parts, the unreadable error."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pairjudge.schemas.captures import ContentPart, TextPart, UnseenKind, UnseenPart

#: A decoded JSON object, as a provider's request or response body is.
Body = Mapping[str, Any]


class CaptureUnreadable(ValueError):
    """A request or response cannot be read as a capture; the message says which field, never its text."""


#: Provider part types the judge cannot see, by kind (OpenAI chat, Anthropic Messages, the Responses API).
UNSEEN_KINDS: Final[Mapping[str, UnseenKind]] = {
    "image_url": "image",
    "image": "image",
    "input_image": "image",
    "input_audio": "audio",
    "audio": "audio",
    "file": "file",
    "input_file": "file",
    "document": "file",
}


def obj(value: object, where: str) -> Body:
    if not isinstance(value, Mapping):
        raise CaptureUnreadable(f"{where}: expected an object, got {type(value).__name__}")
    return value


def seq(value: object, where: str) -> Sequence[Any]:
    if value is None:
        return ()
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise CaptureUnreadable(f"{where}: expected a list, got {type(value).__name__}")
    return value


def text(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise CaptureUnreadable(f"{where}: expected a string, got {type(value).__name__}")
    return value


def opt_str(body: Body, key: str) -> str | None:
    value = body.get(key)
    return value if isinstance(value, str) else None


def opt_int(body: Body, key: str) -> int | None:
    value = body.get(key)
    return value if type(value) is int else None


def opt_float(body: Body, key: str) -> float | None:
    value = body.get(key)
    if type(value) is int or type(value) is float:
        return float(value)
    return None


def opt_bool(body: Body, key: str) -> bool | None:
    value = body.get(key)
    return value if isinstance(value, bool) else None


def stops(value: object) -> tuple[str, ...]:
    """``stop`` / ``stop_sequences``: one string or a list of them."""
    if isinstance(value, str):
        return (value,)
    return tuple(s for s in seq(value, "stop") if isinstance(s, str))


def unseen(part_type: str) -> UnseenPart:
    return UnseenPart(kind=UNSEEN_KINDS.get(part_type, "other"), original_type=part_type[:100] or "unknown")


def arguments_text(value: object) -> str:
    """A tool call's arguments as JSON text: kept as written when already text (a model may write invalid JSON),
    else encoded the way ``json.dumps`` does by default, so a streamed and an unstreamed reply agree."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def simplify(parts: Sequence[ContentPart]) -> str | tuple[ContentPart, ...] | None:
    """One text part as a string (how most apps send it), several parts as they are; None when there are none."""
    if not parts:
        return None
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    return tuple(parts)
