"""Anthropic Messages to a capture in OpenAI's chat shape, and a streamed reply's events joined.

- ``system`` (a string or text blocks) becomes the first message, a system turn.
- A user turn's ``tool_result`` blocks become ``tool`` turns (OpenAI's order: the results first, answering the
  assistant's calls just before), and its other blocks a user turn after them.
- An assistant turn's ``tool_use`` blocks become ``tool_calls`` (the input object as JSON text).
- ``image`` and ``document`` blocks, and the blocks of Anthropic's server tools (``server_tool_use``,
  ``web_search_tool_result``, …), stay as ``UnseenPart`` markers; ``thinking`` blocks are the model's reasoning,
  not its reply, and are left out.
- ``stop_reason``: ``end_turn`` and ``stop_sequence`` are ``stop``, ``max_tokens`` is ``length``, ``tool_use``
  is ``tool_calls``, ``refusal`` is ``content_filter``.
- Usage: ``prompt_tokens`` is every input token (``input_tokens`` counts only those after the last cache
  breakpoint), ``cached_tokens`` those read from the cache.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pairjudge.agents.capture._read import (
    Body,
    CaptureUnreadable,
    arguments_text,
    obj,
    opt_bool,
    opt_float,
    opt_int,
    opt_str,
    seq,
    simplify,
    stops,
    text,
    unseen,
)
from pairjudge.schemas.captures import (
    CapturedFunctionCall,
    CapturedFunctionDefinition,
    CapturedMessage,
    CapturedRequest,
    CapturedResponse,
    CapturedTool,
    CapturedToolCall,
    ContentPart,
    FinishReason,
    NamedFunction,
    NamedToolChoice,
    ResponseFormat,
    Sampling,
    TextPart,
    ToolChoice,
    Usage,
)

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
_REASONING = frozenset({"thinking", "redacted_thinking"})


def anthropic_request(body: Body) -> CapturedRequest:
    """A Messages request body (what ``messages.create`` sends) as a capture's request."""
    messages: list[CapturedMessage] = []
    system = body.get("system")
    if system:
        content = system if isinstance(system, str) else simplify(_parts(system, "system"))
        messages.append(CapturedMessage(role="system", content=content))
    raw = seq(body.get("messages"), "messages")
    if not raw:
        raise CaptureUnreadable("messages: the request has no message")
    for i, m in enumerate(raw):
        messages.extend(_turn(obj(m, f"messages[{i}]"), f"messages[{i}]"))
    tools, builtin = _tools(body)
    choice, parallel = _tool_choice(body.get("tool_choice"))
    return CapturedRequest(
        messages=tuple(messages),
        tools=tools,
        builtin_tools=builtin,
        tool_choice=choice,
        response_format=_output_format(body.get("output_format")),
        sampling=Sampling(
            temperature=opt_float(body, "temperature"),
            top_p=opt_float(body, "top_p"),
            max_tokens=opt_int(body, "max_tokens"),
            stop=stops(body.get("stop_sequences")),
            parallel_tool_calls=parallel,
        ),
    )


def anthropic_response(body: Body, *, streamed: bool = False, latency_ms: float | None = None) -> CapturedResponse:
    """A Messages response (or ``assemble_anthropic_events``' join of a streamed one) as the champion's response."""
    message = _assistant(seq(body.get("content"), "content"), "content")
    reason = opt_str(body, "stop_reason")
    return CapturedResponse(
        message=message,
        finish_reason=None if reason is None else _FINISH.get(reason, "other"),
        provider_finish_reason=reason,
        model=opt_str(body, "model"),
        usage=_usage(body.get("usage")),
        streamed=streamed,
        latency_ms=latency_ms,
    )


def assemble_anthropic_events(events: Iterable[Body]) -> dict[str, Any]:
    """A streamed reply's server-sent events joined into the body an unstreamed call returns: ``message_start``'s
    message, each content block with its text and ``input_json_delta`` pieces joined (the tool input parsed once
    whole), and ``message_delta``'s stop reason and usage."""
    message: dict[str, Any] = {"content": []}
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, list[str]] = {}
    for event in events:
        kind = event.get("type")
        if kind == "message_start":
            message = {**obj(event.get("message"), "message_start.message"), "content": []}
        elif kind == "content_block_start":
            index = event.get("index", len(blocks))
            blocks[index] = dict(obj(event.get("content_block"), "content_block_start.content_block"))
            if blocks[index].get("type") == "text":
                blocks[index]["text"] = blocks[index].get("text", "")
        elif kind == "content_block_delta":
            block, delta = blocks.get(event.get("index", -1)), obj(event.get("delta"), "content_block_delta.delta")
            if block is None:
                raise CaptureUnreadable("content_block_delta: a delta for a block that never started")
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + text(delta.get("text"), "text_delta.text")
            elif delta.get("type") == "input_json_delta":
                partial.setdefault(event["index"], []).append(text(delta.get("partial_json"), "partial_json"))
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            for key in ("stop_reason", "stop_sequence"):
                if key in delta:
                    message[key] = delta[key]
            if isinstance(event.get("usage"), dict):
                message["usage"] = {**(message.get("usage") or {}), **event["usage"]}
    for index, pieces in partial.items():
        joined = "".join(pieces)
        try:
            blocks[index]["input"] = json.loads(joined) if joined else {}
        except ValueError:
            blocks[index]["input"] = joined  # kept as the model wrote it
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


def _parts(blocks: object, where: str) -> list[ContentPart]:
    parts: list[ContentPart] = []
    for i, raw in enumerate(seq(blocks, where)):
        block = obj(raw, f"{where}[{i}]")
        kind = opt_str(block, "type") or ""
        if kind == "text":
            parts.append(TextPart(text=text(block.get("text"), f"{where}[{i}].text")))
        elif kind not in _REASONING:
            parts.append(unseen(kind))
    return parts


def _turn(m: Body, where: str) -> list[CapturedMessage]:
    role = opt_str(m, "role")
    content = m.get("content")
    if role == "assistant":
        return [
            _assistant([{"type": "text", "text": content}] if isinstance(content, str) else seq(content, where), where)
        ]
    if role != "user":
        raise CaptureUnreadable(f"{where}.role: {role!r} is neither user nor assistant")
    if isinstance(content, str):
        return [CapturedMessage(role="user", content=content)]
    out: list[CapturedMessage] = []
    rest: list[Any] = []
    for i, raw in enumerate(seq(content, where)):
        block = obj(raw, f"{where}.content[{i}]")
        if block.get("type") == "tool_result":
            result = block.get("content")
            body = result if isinstance(result, str) else simplify(_parts(result, f"{where}.content[{i}].content"))
            out.append(
                CapturedMessage(
                    role="tool", content=body or "", tool_call_id=text(block.get("tool_use_id"), "tool_use_id")
                )
            )
        else:
            rest.append(block)
    if rest:
        out.append(CapturedMessage(role="user", content=simplify(_parts(rest, f"{where}.content"))))
    return out


def _assistant(blocks: Iterable[Any], where: str) -> CapturedMessage:
    texts: list[str] = []
    other: list[ContentPart] = []
    calls: list[CapturedToolCall] = []
    for i, raw in enumerate(blocks):
        block = obj(raw, f"{where}[{i}]")
        kind = opt_str(block, "type") or ""
        if kind == "text":
            texts.append(text(block.get("text"), f"{where}[{i}].text"))
        elif kind == "tool_use":
            function = CapturedFunctionCall(
                name=text(block.get("name"), "tool_use.name"), arguments=arguments_text(block.get("input", {}))
            )
            calls.append(CapturedToolCall(id=text(block.get("id"), "tool_use.id"), function=function))
        elif kind not in _REASONING:
            other.append(unseen(kind))
    # Consecutive text blocks are one reply (citations split it into blocks): joined as the API's clients join them.
    joined = "".join(texts)
    content: str | tuple[ContentPart, ...] | None = joined if texts else None
    if other:
        content = (TextPart(text=joined), *other) if texts else tuple(other)
    return CapturedMessage(role="assistant", content=content, tool_calls=tuple(calls))


def _tools(body: Body) -> tuple[tuple[CapturedTool, ...], tuple[str, ...]]:
    tools: list[CapturedTool] = []
    builtin: list[str] = []
    for i, raw in enumerate(seq(body.get("tools"), "tools")):
        tool = obj(raw, f"tools[{i}]")
        if tool.get("type", "custom") == "custom" and "input_schema" in tool:
            schema = tool.get("input_schema")
            function = CapturedFunctionDefinition(
                name=text(tool.get("name"), f"tools[{i}].name"),
                description=opt_str(tool, "description"),
                parameters=dict(schema) if isinstance(schema, dict) else None,
                strict=opt_bool(tool, "strict"),
            )
            tools.append(CapturedTool(function=function))
        else:
            builtin.append(str(tool.get("type") or tool.get("name")))
    return tuple(tools), tuple(builtin)


def _tool_choice(value: object) -> tuple[ToolChoice | None, bool | None]:
    if not isinstance(value, dict):
        return None, None
    parallel = False if value.get("disable_parallel_tool_use") is True else None
    kind = value.get("type")
    if kind == "tool" and isinstance(value.get("name"), str):
        return NamedToolChoice(function=NamedFunction(name=value["name"])), parallel
    named: dict[Any, ToolChoice] = {"auto": "auto", "any": "required", "none": "none"}
    return named.get(kind), parallel


def _output_format(value: object) -> ResponseFormat | None:
    if isinstance(value, dict) and value.get("type") == "json_schema" and isinstance(value.get("schema"), dict):
        return ResponseFormat(type="json_schema", json_schema={"name": "output", "schema": dict(value["schema"])})
    return None


def _usage(value: object) -> Usage | None:
    if not isinstance(value, dict):
        return None
    read = opt_int(value, "cache_read_input_tokens")
    counts = [opt_int(value, k) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")]
    known = [c for c in counts if c is not None]
    return Usage(
        prompt_tokens=sum(known) if counts[0] is not None else None,
        completion_tokens=opt_int(value, "output_tokens"),
        cached_tokens=read,
    )
