"""OpenAI chat completions to a capture: the request and response bodies, and a streamed reply's chunks joined.

The capture's shape is this API's own, so this is mostly reading: parts the judge cannot see become
``UnseenPart`` markers, legacy ``functions`` / ``function_call`` become tools and tool calls, and non-function
tools (OpenAI's ``custom`` tools) are named in ``builtin_tools``. Only the first choice is captured (``n`` > 1
answers are alternatives of one turn, and the pair compares one reply).
"""

from __future__ import annotations

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
    UnseenPart,
    Usage,
)

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


def chat_request(body: Body) -> CapturedRequest:
    """A chat completions request body (what ``chat.completions.create`` sends) as a capture's request."""
    messages = tuple(_message(obj(m, f"messages[{i}]"), f"messages[{i}]") for i, m in enumerate(_messages(body)))
    tools, builtin = _tools(body)
    return CapturedRequest(
        messages=messages,
        tools=tools,
        builtin_tools=builtin,
        tool_choice=_tool_choice(body.get("tool_choice", body.get("function_call"))),
        response_format=_response_format(body.get("response_format")),
        sampling=Sampling(
            temperature=opt_float(body, "temperature"),
            top_p=opt_float(body, "top_p"),
            max_tokens=opt_int(body, "max_completion_tokens") or opt_int(body, "max_tokens"),
            stop=stops(body.get("stop")),
            seed=opt_int(body, "seed"),
            presence_penalty=opt_float(body, "presence_penalty"),
            frequency_penalty=opt_float(body, "frequency_penalty"),
            parallel_tool_calls=opt_bool(body, "parallel_tool_calls"),
        ),
    )


def chat_response(body: Body, *, streamed: bool = False, latency_ms: float | None = None) -> CapturedResponse:
    """A chat completion (or ``assemble_chat_chunks``' join of a streamed one) as the champion's response."""
    choices = seq(body.get("choices"), "choices")
    if not choices:
        raise CaptureUnreadable("choices: the completion has no choice")
    choice = obj(choices[0], "choices[0]")
    message = _message({**obj(choice.get("message"), "choices[0].message"), "role": "assistant"}, "message")
    if obj(choice.get("message"), "choices[0].message").get("audio"):
        # An audio reply: the judge cannot hear it (its transcript, when there is one, is not the reply itself).
        parts = message.content if isinstance(message.content, tuple) else _as_parts(message.content)
        message = message.model_copy(update={"content": (*parts, UnseenPart(kind="audio", original_type="audio"))})
    reason = opt_str(choice, "finish_reason")
    return CapturedResponse(
        message=message,
        finish_reason=None if reason is None else _FINISH.get(reason, "other"),
        provider_finish_reason=reason,
        model=opt_str(body, "model"),
        usage=_usage(body.get("usage")),
        streamed=streamed,
        latency_ms=latency_ms,
    )


def assemble_chat_chunks(chunks: Iterable[Body]) -> dict[str, Any]:
    """A streamed chat completion's chunks joined into the body an unstreamed call returns: the first choice's
    content, refusal and tool-call deltas concatenated (tool calls by their ``index``), its last finish reason,
    and the usage chunk's usage (``stream_options.include_usage``)."""
    content: list[str] = []
    refusal: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    out: dict[str, Any] = {"choices": []}
    finish: str | None = None
    for chunk in chunks:
        for key in ("id", "model", "created"):
            if chunk.get(key) is not None:
                out.setdefault(key, chunk[key])
        if chunk.get("usage"):
            out["usage"] = chunk["usage"]
        for choice in seq(chunk.get("choices"), "choices"):
            if obj(choice, "choice").get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                content.append(delta["content"])
            if isinstance(delta.get("refusal"), str):
                refusal.append(delta["refusal"])
            for call in seq(delta.get("tool_calls"), "delta.tool_calls"):
                _join_call(calls, obj(call, "delta.tool_calls[]"))
            finish = choice.get("finish_reason") or finish
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content) if content else None}
    if refusal:
        message["refusal"] = "".join(refusal)
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    out["choices"] = [{"index": 0, "message": message, "finish_reason": finish}]
    return out


def _join_call(calls: dict[int, dict[str, Any]], delta: Body) -> None:
    index = delta.get("index", len(calls))
    call = calls.setdefault(index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
    if delta.get("id"):
        call["id"] = delta["id"]
    function = delta.get("function") or {}
    if function.get("name"):
        call["function"]["name"] += function["name"]
    if isinstance(function.get("arguments"), str):
        call["function"]["arguments"] += function["arguments"]


def _messages(body: Body) -> list[Any]:
    messages = list(seq(body.get("messages"), "messages"))
    if not messages:
        raise CaptureUnreadable("messages: the request has no message")
    return messages


def _as_parts(content: object) -> tuple[ContentPart, ...]:
    if isinstance(content, str) and content:
        return (TextPart(text=content),)
    return ()


def _content(value: object, where: str) -> tuple[str | tuple[ContentPart, ...] | None, str | None]:
    """A message's content, and a refusal found among its parts (an assistant turn's ``refusal`` part)."""
    if value is None or isinstance(value, str):
        return value, None
    parts: list[ContentPart] = []
    refusal: str | None = None
    for i, raw in enumerate(seq(value, where)):
        part = obj(raw, f"{where}[{i}]")
        kind = opt_str(part, "type") or ""
        if kind == "text":
            parts.append(TextPart(text=text(part.get("text"), f"{where}[{i}].text")))
        elif kind == "refusal":
            refusal = opt_str(part, "refusal")
        else:
            parts.append(unseen(kind))
    return simplify(parts), refusal


def _message(m: Body, where: str) -> CapturedMessage:
    role = opt_str(m, "role")
    if role == "function":  # the legacy form of a tool result, named by function instead of call id
        return CapturedMessage(role="tool", content=_content(m.get("content"), where)[0], tool_call_id=m.get("name"))
    if role not in ("system", "developer", "user", "assistant", "tool"):
        raise CaptureUnreadable(f"{where}.role: {role!r} is not a chat role")
    content, part_refusal = _content(m.get("content"), f"{where}.content")
    calls = [_tool_call(obj(c, f"{where}.tool_calls[{i}]")) for i, c in enumerate(seq(m.get("tool_calls"), where))]
    legacy = m.get("function_call")
    if isinstance(legacy, dict) and legacy.get("name"):
        calls.append(_tool_call({"id": "function_call", "function": legacy}))
    return CapturedMessage(
        role=role,
        content=content,
        name=opt_str(m, "name"),
        tool_calls=tuple(calls),
        tool_call_id=opt_str(m, "tool_call_id"),
        refusal=opt_str(m, "refusal") or part_refusal,
    )


def _tool_call(call: Body) -> CapturedToolCall:
    if call.get("type") == "custom":  # a custom tool's call carries free text as its input
        custom = obj(call.get("custom"), "tool_call.custom")
        function = CapturedFunctionCall(name=text(custom.get("name"), "name"), arguments=str(custom.get("input", "")))
    else:
        f = obj(call.get("function"), "tool_call.function")
        function = CapturedFunctionCall(
            name=text(f.get("name"), "function.name"), arguments=arguments_text(f.get("arguments", ""))
        )
    return CapturedToolCall(id=text(call.get("id"), "tool_call.id"), function=function)


def _tools(body: Body) -> tuple[tuple[CapturedTool, ...], tuple[str, ...]]:
    tools: list[CapturedTool] = []
    builtin: list[str] = []
    for i, raw in enumerate(seq(body.get("tools"), "tools")):
        tool = obj(raw, f"tools[{i}]")
        if tool.get("type", "function") == "function":
            tools.append(CapturedTool(function=_function(obj(tool.get("function"), f"tools[{i}].function"))))
        else:
            builtin.append(str(tool.get("type")))
    for i, raw in enumerate(seq(body.get("functions"), "functions")):  # the legacy form of tools
        tools.append(CapturedTool(function=_function(obj(raw, f"functions[{i}]"))))
    return tuple(tools), tuple(builtin)


def _function(f: Body) -> CapturedFunctionDefinition:
    parameters = f.get("parameters")
    return CapturedFunctionDefinition(
        name=text(f.get("name"), "function.name"),
        description=opt_str(f, "description"),
        parameters=dict(parameters) if isinstance(parameters, dict) else None,
        strict=opt_bool(f, "strict"),
    )


def _tool_choice(value: object) -> ToolChoice | None:
    if value in ("none", "auto", "required"):
        return value
    if isinstance(value, dict):
        function = value.get("function") if value.get("type") == "function" else value  # legacy: {"name": ...}
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return NamedToolChoice(function=NamedFunction(name=function["name"]))
    return None


def _response_format(value: object) -> ResponseFormat | None:
    if not isinstance(value, dict) or value.get("type") not in ("text", "json_object", "json_schema"):
        return None
    schema = value.get("json_schema")
    return ResponseFormat(type=value["type"], json_schema=dict(schema) if isinstance(schema, dict) else None)


def _usage(value: object) -> Usage | None:
    if not isinstance(value, dict):
        return None
    details = value.get("prompt_tokens_details")
    cached = opt_int(details, "cached_tokens") if isinstance(details, dict) else None
    return Usage(
        prompt_tokens=opt_int(value, "prompt_tokens"),
        completion_tokens=opt_int(value, "completion_tokens"),
        cached_tokens=cached,
    )
