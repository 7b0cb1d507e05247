"""Chat messages, tool calls and tool definitions, in OpenAI's chat-completions shape (schema version 3).

The shapes a conversation and a candidate's reply are made of, kept apart from the pair so that any contract
that carries a chat exchange (a pair's task and candidates; a captured production exchange) can share them:

* :class:`Message`: one turn, ``role`` system, user, assistant or tool. An assistant turn may carry
  ``tool_calls``; a ``tool`` turn carries the result of one call, linked by ``tool_call_id``.
* :class:`ToolCall`: ``{"id", "type": "function", "function": {"name", "arguments"}}``; ``arguments`` is
  the JSON text the model wrote, kept as written (a model can write invalid JSON: that is part of its answer,
  and the judge is shown it as such, ``agents.tool_views``).
* :class:`ToolDefinition`: ``{"type": "function", "function": {"name", "description", "parameters"}}``.

Every text here is untrusted (a tool result comes from the outside world, arguments from a model): the
judge sees them delimited and datamarked like outputs. Ids and names are restricted to characters that
cannot form markup, so they can be shown as they are.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue, model_validator

from pairjudge.schemas._base import Contract

__all__ = [
    "ChatRole",
    "FunctionCall",
    "FunctionDefinition",
    "Message",
    "ToolCall",
    "ToolCallId",
    "ToolDefinition",
    "ToolName",
]

#: Who said a turn, as in OpenAI's chat format (``tool``: a tool's result, schema version 3).
ChatRole = Literal["system", "user", "assistant", "tool"]
#: A function's name: OpenAI's and Anthropic's rule (letters, digits, ``_`` and ``-``; Anthropic allows up to 128),
#: plus ``.`` and ``:`` that namespaced tools use. Nothing that could form markup: it is shown as it is.
ToolName = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:\-]+$")]
#: A call's id, as the provider made it (``call_…``, ``toolu_…``): links a tool turn to the call it answers.
ToolCallId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:\-]+$")]


class FunctionCall(Contract):
    """What a call asks for: a function by name, and its arguments as the JSON text the model wrote."""

    name: ToolName
    #: Untrusted: the model's own text, meant to be a JSON object; kept as written, never parsed on the wire.
    arguments: str


class ToolCall(Contract):
    """One call an assistant turn makes (OpenAI's ``tool_calls`` item)."""

    id: ToolCallId
    type: Literal["function"] = "function"
    function: FunctionCall


class FunctionDefinition(Contract):
    """A function the assistants were offered: its name, what it does, and its parameters' JSON Schema."""

    name: ToolName
    description: str = ""
    #: The parameters' JSON Schema, as the application sent it (shown to the judge as JSON).
    parameters: dict[str, JsonValue] | None = None
    #: OpenAI's structured-outputs switch for the function, kept so a request reads back as sent.
    strict: bool | None = None


class ToolDefinition(Contract):
    """One tool offered with the request (OpenAI's ``tools`` item)."""

    type: Literal["function"] = "function"
    function: FunctionDefinition


class Message(Contract):
    """One turn of a conversation. Untrusted text, like every output.

    ``content`` may be left out only by an assistant turn that makes tool calls (OpenAI writes it null there;
    write it out or leave it out). ``tool_calls`` belong to assistant turns, ``tool_call_id`` to tool turns.
    """

    role: ChatRole
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: ToolCallId | None = None

    @model_validator(mode="after")
    def _fits_its_role(self) -> Message:
        if self.tool_calls and self.role != "assistant":
            raise ValueError(f"a {self.role} turn cannot make tool calls: only an assistant turn does")
        if (self.role == "tool") != (self.tool_call_id is not None):
            raise ValueError("a tool turn, and only a tool turn, names the call it answers (tool_call_id)")
        if "content" not in self.model_fields_set and not self.tool_calls:
            raise ValueError(f"a {self.role} turn needs content (only an assistant turn making tool calls may omit it)")
        ids = [c.id for c in self.tool_calls]
        if len(set(ids)) != len(ids):
            raise ValueError("two tool calls of one turn share an id")
        return self

    @property
    def uses_tools(self) -> bool:
        """Whether this turn is a tool call or a tool result (a schema version 3 turn)."""
        return bool(self.tool_calls) or self.role == "tool"
