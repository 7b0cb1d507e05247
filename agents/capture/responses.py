"""The OpenAI Responses API to a capture in chat shape, and a streamed reply's final event.

- ``instructions`` becomes the first message, a system turn; ``input`` (a string, or items) the conversation:
  message items are turns, ``function_call`` items are an assistant turn's tool calls (consecutive ones, and the
  assistant message before them, make one turn), ``function_call_output`` items are ``tool`` turns.
- ``reasoning`` items are the model's reasoning, not its reply, and are left out; other items (built-in tool
  calls such as ``web_search_call``) stay as ``UnseenPart`` markers in an assistant turn.
- ``previous_response_id``, a stored ``conversation`` and ``item_reference`` items are context stored at the
  provider: named in ``CapturedRequest.stored_context``.
- Function tools are flat here (``{"type": "function", "name": ...}``) and nested in chat shape; other tools
  (``web_search``, ``file_search``, …) are named in ``builtin_tools``.
- ``status`` ``completed`` is ``stop`` (``tool_calls`` when the output calls a function), ``incomplete`` for
  ``max_output_tokens`` is ``length``, for ``content_filter`` is ``content_filter``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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

_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
_INCOMPLETE: dict[str, FinishReason] = {"max_output_tokens": "length", "content_filter": "content_filter"}
#: The events that end a streamed response, each carrying the whole response.
FINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})


def responses_request(body: Body) -> CapturedRequest:
    """A Responses API request body (what ``responses.create`` sends) as a capture's request."""
    messages: list[CapturedMessage] = []
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        messages.append(CapturedMessage(role="system", content=body["instructions"]))
    stored: list[str] = [k for k in ("previous_response_id", "conversation") if body.get(k)]
    raw = body.get("input")
    if isinstance(raw, str):
        messages.append(CapturedMessage(role="user", content=raw))
    else:
        items, refs = _items(seq(raw, "input"), "input")
        messages.extend(items)
        stored.extend(refs)
    if not messages:
        raise CaptureUnreadable("input: the request has no input")
    tools, builtin = _tools(body)
    return CapturedRequest(
        messages=tuple(messages),
        tools=tools,
        builtin_tools=builtin,
        stored_context=tuple(stored),
        tool_choice=_tool_choice(body.get("tool_choice")),
        response_format=_format(body.get("text")),
        sampling=Sampling(
            temperature=opt_float(body, "temperature"),
            top_p=opt_float(body, "top_p"),
            max_tokens=opt_int(body, "max_output_tokens"),
            parallel_tool_calls=opt_bool(body, "parallel_tool_calls"),
        ),
    )


def responses_response(body: Body, *, streamed: bool = False, latency_ms: float | None = None) -> CapturedResponse:
    """A response object (or a streamed reply's final one, ``final_response``) as the champion's response."""
    items, _ = _items(seq(body.get("output"), "output"), "output")
    assistant = [m for m in items if m.role == "assistant"]
    if len(assistant) > 1:
        raise CaptureUnreadable("output: more than one assistant turn")
    message = assistant[0] if assistant else CapturedMessage(role="assistant", content=None)
    status = opt_str(body, "status")
    details = body.get("incomplete_details")
    incomplete = opt_str(details, "reason") if isinstance(details, dict) else None
    finish: FinishReason | None
    if status == "completed":
        finish = "tool_calls" if message.tool_calls else "stop"
    elif status == "incomplete":
        finish = _INCOMPLETE.get(incomplete or "", "other")
    else:
        finish = None if status is None else "other"
    return CapturedResponse(
        message=message,
        finish_reason=finish,
        provider_finish_reason=incomplete or status,
        model=opt_str(body, "model"),
        usage=_usage(body.get("usage")),
        streamed=streamed,
        latency_ms=latency_ms,
    )


def final_response(events: Iterable[Body]) -> dict[str, Any]:
    """A streamed reply's whole response, which its last event carries (``response.completed``, or
    ``.incomplete`` / ``.failed``); ``CaptureUnreadable`` when the stream ended before it."""
    for event in events:
        if event.get("type") in FINAL_EVENTS:
            return dict(obj(event.get("response"), f"{event.get('type')}.response"))
    raise CaptureUnreadable("the stream ended before its response completed")


def _items(raw: Sequence[Any], where: str) -> tuple[list[CapturedMessage], list[str]]:
    """Items as turns: consecutive assistant items (a message, function calls, built-in tool calls) make one."""
    out: list[CapturedMessage] = []
    refs: list[str] = []
    for i, value in enumerate(raw):
        item = obj(value, f"{where}[{i}]")
        kind = item.get("type", "message")
        here = f"{where}[{i}]"
        if kind == "message":
            role = opt_str(item, "role")
            if role not in ("system", "developer", "user", "assistant"):
                raise CaptureUnreadable(f"{here}.role: {role!r} is not a message role")
            content, refusal = _content(item.get("content"), here)
            turn = CapturedMessage(role=role, content=content, refusal=refusal)
            _append(out, turn) if role == "assistant" else out.append(turn)
        elif kind == "function_call":
            name = text(item.get("name"), f"{here}.name")
            call_id = text(item.get("call_id") or item.get("id"), f"{here}.call_id")
            call = CapturedToolCall(
                id=call_id,
                function=CapturedFunctionCall(name=name, arguments=arguments_text(item.get("arguments", ""))),
            )
            _append(out, CapturedMessage(role="assistant", tool_calls=(call,)))
        elif kind == "function_call_output":
            output = item.get("output")
            body = output if isinstance(output, str) else _content(output, f"{here}.output")[0]
            out.append(
                CapturedMessage(
                    role="tool", content=body or "", tool_call_id=text(item.get("call_id"), f"{here}.call_id")
                )
            )
        elif kind == "item_reference":
            refs.append("item_reference")
        elif kind != "reasoning":
            _append(out, CapturedMessage(role="assistant", content=(unseen(str(kind)),)))
    return out, refs


def _append(out: list[CapturedMessage], turn: CapturedMessage) -> None:
    """Add an assistant turn, joined to the assistant turn just before it (the Responses API splits one reply
    into items)."""
    if not out or out[-1].role != "assistant":
        out.append(turn)
        return
    last = out[-1]
    parts = [*_as_parts(last.content), *_as_parts(turn.content)]
    out[-1] = last.model_copy(
        update={
            "content": simplify(parts),
            "tool_calls": (*last.tool_calls, *turn.tool_calls),
            "refusal": last.refusal or turn.refusal,
        }
    )


def _as_parts(content: str | tuple[ContentPart, ...] | None) -> tuple[ContentPart, ...]:
    if content is None:
        return ()
    return (TextPart(text=content),) if isinstance(content, str) else content


def _content(value: object, where: str) -> tuple[str | tuple[ContentPart, ...] | None, str | None]:
    if value is None or isinstance(value, str):
        return value, None
    parts: list[ContentPart] = []
    refusal: str | None = None
    for i, raw in enumerate(seq(value, where)):
        part = obj(raw, f"{where}[{i}]")
        kind = opt_str(part, "type") or ""
        if kind in _TEXT_PARTS:
            parts.append(TextPart(text=text(part.get("text"), f"{where}[{i}].text")))
        elif kind == "refusal":
            refusal = opt_str(part, "refusal")
        else:
            parts.append(unseen(kind))
    # An assistant's output_text parts are one reply, split: joined as the SDK's output_text joins them.
    if parts and all(isinstance(p, TextPart) for p in parts):
        return "".join(p.text for p in parts if isinstance(p, TextPart)), refusal
    return simplify(parts), refusal


def _tools(body: Body) -> tuple[tuple[CapturedTool, ...], tuple[str, ...]]:
    tools: list[CapturedTool] = []
    builtin: list[str] = []
    for i, raw in enumerate(seq(body.get("tools"), "tools")):
        tool = obj(raw, f"tools[{i}]")
        if tool.get("type") == "function":
            parameters = tool.get("parameters")
            function = CapturedFunctionDefinition(
                name=text(tool.get("name"), f"tools[{i}].name"),
                description=opt_str(tool, "description"),
                parameters=dict(parameters) if isinstance(parameters, dict) else None,
                strict=opt_bool(tool, "strict"),
            )
            tools.append(CapturedTool(function=function))
        else:
            builtin.append(str(tool.get("type")))
    return tuple(tools), tuple(builtin)


def _tool_choice(value: object) -> ToolChoice | None:
    if value in ("none", "auto", "required"):
        return value
    if isinstance(value, dict) and value.get("type") == "function" and isinstance(value.get("name"), str):
        return NamedToolChoice(function=NamedFunction(name=value["name"]))
    return None


def _format(value: object) -> ResponseFormat | None:
    fmt = value.get("format") if isinstance(value, dict) else None
    if not isinstance(fmt, dict):
        return None
    kind = fmt.get("type")
    if kind == "json_schema":
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        return ResponseFormat(type="json_schema", json_schema=schema)
    if kind in ("text", "json_object"):
        return ResponseFormat(type=kind)
    return None


def _usage(value: object) -> Usage | None:
    if not isinstance(value, dict):
        return None
    details = value.get("input_tokens_details")
    return Usage(
        prompt_tokens=opt_int(value, "input_tokens"),
        completion_tokens=opt_int(value, "output_tokens"),
        cached_tokens=opt_int(details, "cached_tokens") if isinstance(details, dict) else None,
    )
