"""Tool calls, tool results and tool definitions as a judge is shown them: one line of JSON each (schema version 3).

Everything about tools reaches the judge as data, never as prose: each call, result and definition is one JSON
object, which the prompt then delimits, neutralises and datamarks like any output (``agents.prompt_blocks``).
The same views are what the injection guard reads (``agents.pair_checks``), what the offline judge compares
and what the drift series count (``agents.audit.records``), so every part looks at the same text.

* **A call** is ``{"name": ..., "arguments": ...}``: the arguments parsed and written back, key order kept, so
  a ``\\u0049gnore`` escape is shown (and screened) as the ``Ignore`` it decodes to, and whitespace a model put
  between tokens changes nothing. Arguments that are not JSON are shown as written, as a string under
  ``"arguments_not_json"``: invalid arguments are part of the answer, and the judge sees that they are.
  A call in the conversation carries its ``"id"`` too (the results name it); a candidate's own calls do not:
  ids are made by the provider (``call_…``, ``toolu_…``) and would tell the judge which model answered.
* **A result** is ``{"tool_call_id": ..., "content": ...}``.
* **A definition** is ``{"name": ..., "description": ..., "parameters": ...}``.

Deterministic: the same call is always the same text, so prompts, nonces and response caches stay stable.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from pairjudge.agents.prompt_blocks import Turn
from pairjudge.schemas.messages import Message, ToolCall, ToolDefinition

__all__ = ["call_view", "calls_equal", "definition_view", "message_views", "reply_length", "result_view"]

#: JSON separators of every view: one line, a space after each separator (readable, and gaps to datamark).
_SEPARATORS: Final = (", ", ": ")


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=_SEPARATORS)


def _parsed(arguments: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(arguments)
    except (ValueError, RecursionError):
        return False, None


def call_view(call: ToolCall, *, with_id: bool = False) -> str:
    """One call as one line of JSON (see the module doc); ``with_id`` for a call in the conversation."""
    body: dict[str, object] = {"id": call.id} if with_id else {}
    body["name"] = call.function.name
    ok, arguments = _parsed(call.function.arguments)
    if ok:
        body["arguments"] = arguments
    else:
        body["arguments_not_json"] = call.function.arguments
    return _dumps(body)


def result_view(message: Message) -> str:
    """A tool turn (a call's result) as one line of JSON."""
    return _dumps({"tool_call_id": message.tool_call_id, "content": message.content})


def definition_view(tool: ToolDefinition) -> str:
    """A tool offered with the request, as one line of JSON (name, description, parameters)."""
    function = tool.function
    return _dumps({"name": function.name, "description": function.description, "parameters": function.parameters})


def message_views(message: Message) -> tuple[Turn, ...]:
    """The turns one message shows, as ``(role, text)``: a text turn as it is; an assistant turn with tool
    calls as its text (when it has any) and then one ``tool_call`` turn per call; a tool turn as its result."""
    if message.role == "tool":
        return (("tool", result_view(message)),)
    if not message.tool_calls:
        return ((message.role, message.content),)
    text: tuple[Turn, ...] = ((message.role, message.content),) if message.content else ()
    return (*text, *(("tool_call", call_view(c, with_id=True)) for c in message.tool_calls))


def calls_equal(first: Sequence[ToolCall], second: Sequence[ToolCall]) -> bool:
    """Whether two replies make the same calls, compared as data: same functions, same arguments (parsed), in
    order; ids never count."""
    return len(first) == len(second) and all(call_view(a) == call_view(b) for a, b in zip(first, second, strict=True))


def reply_length(output: str, calls: Sequence[ToolCall]) -> int:
    """A reply's size in characters as the judge is shown it: its text and each call's view (the drift series'
    output length, and what the output limit bounds)."""
    return len(output) + sum(len(call_view(c)) for c in calls)
