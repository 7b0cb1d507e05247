"""One exchange to one ``Capture``: the API's normaliser, the source, hints and trace; and a capture's texts mapped
(the redaction hook, applied before a capture leaves the app)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Final

from pydantic import ValidationError

from pairjudge.agents.capture._read import Body, CaptureUnreadable
from pairjudge.agents.capture.anthropic import anthropic_request, anthropic_response
from pairjudge.agents.capture.chat import chat_request, chat_response
from pairjudge.agents.capture.responses import responses_request, responses_response
from pairjudge.schemas.captures import (
    Capture,
    CapturedApi,
    CapturedMessage,
    CapturedRequest,
    CapturedResponse,
    CaptureSource,
    ExperimentHints,
    TextPart,
    TraceContext,
)

RequestReader = Callable[[Body], CapturedRequest]
ResponseReader = Callable[..., CapturedResponse]

#: Each API's normalisers: its request body, and its response body (a streamed reply already assembled).
NORMALISERS: Final[Mapping[CapturedApi, tuple[RequestReader, ResponseReader]]] = {
    "chat_completions": (chat_request, chat_response),
    "anthropic_messages": (anthropic_request, anthropic_response),
    "responses": (responses_request, responses_response),
}


def make_capture(
    api: CapturedApi,
    request: Body,
    response: Body,
    *,
    capture_id: str,
    captured_at: datetime | None = None,
    prompt_version: str = "",
    route: str = "",
    producer: str = "sdk",
    tags: Sequence[str] = (),
    headers: Mapping[str, str] | None = None,
    traceparent: str | None = None,
    tracestate: str | None = None,
    streamed: bool = False,
    latency_ms: float | None = None,
) -> Capture:
    """The capture of one exchange with ``api``; ``CaptureUnreadable`` when the bodies cannot be read as one.

    The error names the field that failed, never its value: a capture's texts are personal data until redacted.
    """
    read_request, read_response = NORMALISERS[api]
    try:
        model = request.get("model")
        return Capture(
            capture_id=capture_id,
            source=CaptureSource(
                api=api,
                model=model if isinstance(model, str) and model else "unknown",
                prompt_version=prompt_version,
                route=route,
                producer=producer,
            ),
            request=read_request(request),
            response=read_response(response, streamed=streamed, latency_ms=latency_ms),
            hints=ExperimentHints(tags=tuple(tags), headers=dict(headers or {})),
            trace=TraceContext(traceparent=traceparent, tracestate=tracestate) if traceparent else None,
            **({"captured_at": captured_at} if captured_at is not None else {}),
        )
    except ValidationError as exc:
        where = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_input=False)[:5]
        )
        raise CaptureUnreadable(f"not a valid capture: {where}") from None


def map_texts(capture: Capture, fn: Callable[[str], str]) -> Capture:
    """``capture`` with ``fn`` applied to every text a person or a model wrote: each turn's content and refusal, the
    tool calls' arguments, the tools' results, and the hints' header values. The tool definitions and the response
    format are the app's own and stay as they are."""
    request = capture.request.model_copy(update={"messages": tuple(_message(m, fn) for m in capture.request.messages)})
    response = capture.response.model_copy(update={"message": _message(capture.response.message, fn)})
    hints = capture.hints.model_copy(update={"headers": {k: fn(v) for k, v in capture.hints.headers.items()}})
    return capture.model_copy(update={"request": request, "response": response, "hints": hints})


def _message(message: CapturedMessage, fn: Callable[[str], str]) -> CapturedMessage:
    content = message.content
    if isinstance(content, str):
        content = fn(content)
    elif content is not None:
        content = tuple(p.model_copy(update={"text": fn(p.text)}) if isinstance(p, TextPart) else p for p in content)
    calls = tuple(
        c.model_copy(update={"function": c.function.model_copy(update={"arguments": fn(c.function.arguments)})})
        for c in message.tool_calls
    )
    refusal = None if message.refusal is None else fn(message.refusal)
    return message.model_copy(update={"content": content, "tool_calls": calls, "refusal": refusal})


__all__ = ["NORMALISERS", "CaptureUnreadable", "make_capture", "map_texts"]
