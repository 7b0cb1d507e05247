"""An Anthropic challenger: the capture's request (OpenAI chat shape, ``agents.shadow.challenger_request``) as an
Anthropic Messages body, and a Messages reply read as the challenger's next message.

System turns become ``system``; an assistant's tool calls become ``tool_use`` blocks (their arguments parsed: the
Messages API takes an object); tool turns become ``tool_result`` blocks of a user turn, consecutive ones joined;
tools take ``input_schema``; ``tool_choice`` ``required`` is ``any``. The reply's text blocks are joined and its
``tool_use`` blocks are its tool calls (never run); ``max_tokens`` is ``length``, ``refusal`` is refused.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from pairjudge.agents.shadow import ChallengerReply, Unusable
from pairjudge.schemas.messages import FunctionCall, ToolCall

__all__ = ["DEFAULT_MAX_TOKENS", "messages_request", "read_messages_reply"]

#: The Messages API requires ``max_tokens``: used when neither the request nor the challenger sets one.
DEFAULT_MAX_TOKENS = 4096

_STOP = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}


def _tool_use(call: dict[str, Any]) -> dict[str, Any]:
    try:
        arguments = json.loads(call["function"].get("arguments") or "{}")
    except ValueError:
        arguments = {}
    if not isinstance(arguments, dict):
        arguments = {}
    return {"type": "tool_use", "id": call["id"], "name": call["function"]["name"], "input": arguments}


def messages_request(chat: dict[str, Any]) -> dict[str, Any]:
    """The Messages body asking what the chat completions body ``chat`` asks."""
    system = [m["content"] for m in chat["messages"] if m["role"] == "system" and m.get("content")]
    turns: list[dict[str, Any]] = []
    for m in chat["messages"]:
        if m["role"] == "system":
            continue
        if m["role"] == "tool":
            block = {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m.get("content") or ""}
            if turns and turns[-1]["role"] == "user" and isinstance(turns[-1]["content"], list):
                turns[-1]["content"].append(block)
            else:
                turns.append({"role": "user", "content": [block]})
            continue
        blocks: list[dict[str, Any]] = [{"type": "text", "text": m["content"]}] if m.get("content") else []
        blocks += [_tool_use(c) for c in m.get("tool_calls") or ()]
        turns.append({"role": m["role"], "content": blocks})
    body: dict[str, Any] = {
        "model": chat["model"],
        "messages": turns,
        "max_tokens": chat.get("max_tokens") or DEFAULT_MAX_TOKENS,
    }
    if system:
        body["system"] = "\n\n".join(system)
    for name in ("temperature", "top_p"):
        if chat.get(name) is not None:
            body[name] = chat[name]
    if chat.get("stop"):
        body["stop_sequences"] = list(chat["stop"])
    if chat.get("tools"):
        body["tools"] = [
            {
                "name": t["function"]["name"],
                "description": t["function"].get("description") or "",
                "input_schema": t["function"].get("parameters") or {"type": "object", "properties": {}},
            }
            for t in chat["tools"]
        ]
        choice = chat.get("tool_choice")
        if choice in ("auto", "required"):
            body["tool_choice"] = {"type": "auto" if choice == "auto" else "any"}
        elif choice == "none":
            body["tool_choice"] = {"type": "none"}
        elif isinstance(choice, dict):
            body["tool_choice"] = {"type": "tool", "name": choice["function"]["name"]}
    return body


def read_messages_reply(body: bytes) -> ChallengerReply:
    """The challenger's Messages reply, or ``Unusable`` naming why it cannot stand in a pair."""
    try:
        data = json.loads(body)
        blocks = data["content"]
        if not isinstance(blocks, list):
            raise TypeError("content")
    except (ValueError, KeyError, TypeError) as exc:
        raise Unusable("challenger_unreadable", f"not a Messages reply ({type(exc).__name__})") from None
    stop = data.get("stop_reason")
    if stop == "refusal":
        raise Unusable("challenger_refused", "the challenger refused the request")
    text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
    try:
        calls = tuple(
            ToolCall(id=b["id"], function=FunctionCall(name=b["name"], arguments=json.dumps(b.get("input", {}))))
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "tool_use"
        )
    except (KeyError, TypeError, ValidationError) as exc:
        raise Unusable("challenger_unreadable", f"a tool call could not be read ({type(exc).__name__})") from None
    if not text.strip() and not calls:
        raise Unusable("challenger_empty", "the challenger answered no text and no tool call")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    tokens = [usage.get(k) for k in ("input_tokens", "output_tokens")]
    prompt, completion = (t if type(t) is int and t >= 0 else 0 for t in tokens)
    return ChallengerReply(
        text=text,
        tool_calls=calls,
        finish_reason=_STOP.get(stop, "other") if isinstance(stop, str) else None,
        model=data.get("model") if isinstance(data.get("model"), str) else None,
        prompt_tokens=prompt,
        completion_tokens=completion,
    )
