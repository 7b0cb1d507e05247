"""The capture: one production exchange (the request and what the champion answered), in OpenAI's chat shape.

Captures arrive on ``pairjudge.captures`` from the producer SDK (``pairjudge.streams.capture``), and later from
the gateway and the LiteLLM callback; the shadow stage reads them, asks a challenger the same request and
publishes the pair. Whatever API the app called (chat completions, Anthropic Messages, the Responses API), the
normalisers (``pairjudge.agents.capture``) bring the exchange to one shape: OpenAI chat messages, tools in
OpenAI's function shape, the champion's reply as one assistant message.

Nothing is silently dropped: a part the judge cannot see (an image, audio, a file) stays in its message as an
``UnseenPart`` naming its kind, and a provider's built-in tool (web search, code execution) is named in
``CaptureRequest.builtin_tools``, so the shadow stage can set the capture aside with a named reason instead of
judging it blind (``Capture.unseen``). Credentials never enter a capture: the normalisers read the request's
body fields only, never its headers, and the hints carry header values only for the names the app lists.

The message shapes here are the capture's own (``Captured…``), kept in OpenAI's chat shape field by field, so
they can be unified with the pair contract's conversation shapes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from pairjudge.schemas._base import Contract, Event
from pairjudge.schemas.pair import utc_now

CaptureId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:\-]+$")]
#: Who said a turn, in OpenAI's chat shape: ``developer`` is OpenAI's newer name for a system turn, ``tool`` a
#: tool's result.
CapturedRole = Literal["system", "developer", "user", "assistant", "tool"]
#: What a part the judge cannot see was: an image, audio, a file or document, or something else.
UnseenKind = Literal["image", "audio", "file", "other"]
#: Which API the app called.
CapturedApi = Literal["chat_completions", "anthropic_messages", "responses"]
#: Why the champion stopped, in OpenAI's words: ``length`` is a reply cut off by its token limit. ``other`` for a
#: reason OpenAI's chat API has no word for (the provider's own is in ``CapturedResponse.provider_finish_reason``).
FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "other"]


class TextPart(Contract):
    """A text part of a message's content."""

    type: Literal["text"] = "text"
    text: str


class UnseenPart(Contract):
    """A part the judge cannot see, kept as a marker: its kind and the provider's name for it, never its data
    (an image's bytes or URL, audio)."""

    type: Literal["unseen"] = "unseen"
    kind: UnseenKind
    #: The part's type as the provider wrote it (``image_url``, ``input_audio``, ``image``, ``document``,
    #: ``input_file``, …).
    original_type: str = Field(min_length=1, max_length=100)


ContentPart = Annotated[TextPart | UnseenPart, Field(discriminator="type")]


class CapturedFunctionCall(Contract):
    """The function a tool call names, and its arguments as the model wrote them (JSON text, not parsed: a model
    may write invalid JSON, and the judge should see what it wrote)."""

    name: str = Field(min_length=1, max_length=200)
    arguments: str = ""


class CapturedToolCall(Contract):
    """One tool call of an assistant turn (OpenAI's ``tool_calls[]``)."""

    id: str = Field(min_length=1, max_length=200)
    type: Literal["function"] = "function"
    function: CapturedFunctionCall


class CapturedMessage(Contract):
    """One turn, in OpenAI's chat shape: content as text or parts, an assistant's tool calls, a tool's result.

    Untrusted text, like every output.
    """

    role: CapturedRole
    #: A string, a list of parts, or None (an assistant turn of tool calls only).
    content: str | tuple[ContentPart, ...] | None = None
    name: str | None = Field(default=None, max_length=200)
    tool_calls: tuple[CapturedToolCall, ...] = ()
    #: A ``tool`` turn's answer to this tool call id.
    tool_call_id: str | None = Field(default=None, max_length=200)
    #: An assistant's refusal, as OpenAI reports it apart from the content.
    refusal: str | None = None

    @model_validator(mode="after")
    def _tool_fields_fit_the_role(self) -> CapturedMessage:
        if self.tool_calls and self.role != "assistant":
            raise ValueError(f"only an assistant turn carries tool_calls, not a {self.role} turn")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool turn names the tool call it answers (tool_call_id)")
        return self

    @property
    def text(self) -> str:
        """The content's text: the string, or its text parts joined (unseen parts leave nothing)."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def unseen(self) -> tuple[UnseenKind, ...]:
        """The kinds of the parts the judge cannot see, in order."""
        if isinstance(self.content, tuple):
            return tuple(p.kind for p in self.content if isinstance(p, UnseenPart))
        return ()


class CapturedFunctionDefinition(Contract):
    """A function tool offered to the model, in OpenAI's shape (Anthropic's ``input_schema`` is ``parameters``)."""

    name: str = Field(min_length=1, max_length=200)
    description: str | None = None
    #: The arguments' JSON Schema.
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class CapturedTool(Contract):
    type: Literal["function"] = "function"
    function: CapturedFunctionDefinition


class NamedFunction(Contract):
    name: str = Field(min_length=1, max_length=200)


class NamedToolChoice(Contract):
    """``tool_choice`` naming one function: the model must call it."""

    type: Literal["function"] = "function"
    function: NamedFunction


#: ``none``, ``auto``, ``required`` (Anthropic's ``any``), or one named function.
ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


class ResponseFormat(Contract):
    """OpenAI chat's ``response_format``: plain text, any JSON object, or JSON matching a schema."""

    type: Literal["text", "json_object", "json_schema"]
    #: For ``json_schema``: ``{"name": ..., "schema": {...}, "strict": ...}`` as OpenAI takes it.
    json_schema: dict[str, Any] | None = None


class Sampling(Contract):
    """The sampling parameters the request set (None: the provider's default)."""

    temperature: float | None = None
    top_p: float | None = None
    #: The reply's token limit (``max_tokens``, ``max_completion_tokens`` or ``max_output_tokens``).
    max_tokens: int | None = Field(default=None, ge=1)
    stop: tuple[str, ...] = ()
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    parallel_tool_calls: bool | None = None


class CapturedRequest(Contract):
    """What the app asked: the conversation, the tools offered, and how to answer."""

    messages: tuple[CapturedMessage, ...] = Field(min_length=1)
    tools: tuple[CapturedTool, ...] = ()
    tool_choice: ToolChoice | None = None
    #: The provider's built-in tools that were offered too (web search, code execution, …), by the provider's
    #: type name: a challenger cannot be offered the same, so the shadow stage sets such a capture aside.
    builtin_tools: tuple[str, ...] = ()
    #: Context the request referred to without carrying it (``previous_response_id``, ``item_reference``, a stored
    #: ``conversation``): the conversation is not whole here, so the shadow stage sets such a capture aside.
    stored_context: tuple[str, ...] = ()
    response_format: ResponseFormat | None = None
    sampling: Sampling = Field(default_factory=Sampling)


class Usage(Contract):
    """Tokens, in OpenAI's words: ``prompt_tokens`` counts every input token, cached ones included."""

    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)
    #: The part of ``prompt_tokens`` read from the provider's prompt cache.
    cached_tokens: int | None = Field(default=None, ge=0)


class CapturedResponse(Contract):
    """What the champion answered: one assistant message (text, tool calls, or both), why it stopped, and usage."""

    message: CapturedMessage
    finish_reason: FinishReason | None = None
    #: The provider's own stop reason (``end_turn``, ``max_tokens``, ``incomplete``, …).
    provider_finish_reason: str | None = Field(default=None, max_length=100)
    #: The model that answered, as the provider named it (may be more precise than the requested one).
    model: str | None = Field(default=None, max_length=200)
    usage: Usage | None = None
    #: True when the champion's reply was streamed; the message is then the assembled whole.
    streamed: bool = False
    #: From the call to its last byte, as the app saw it (None when the producer did not time it).
    latency_ms: float | None = Field(default=None, ge=0.0)

    @model_validator(mode="after")
    def _an_assistant_message(self) -> CapturedResponse:
        if self.message.role != "assistant":
            raise ValueError(f"the champion's response is an assistant message, not a {self.message.role} one")
        return self


class CaptureSource(Contract):
    """Where the exchange happened: which API, the model asked for, and the app's own names for it."""

    api: CapturedApi
    #: The model the request named.
    model: str = Field(min_length=1, max_length=200)
    #: The app's version of its prompt (a system prompt's release, a template's hash), as it names it.
    prompt_version: str = Field(default="", max_length=100)
    #: The app's route or feature (``/support/chat``, ``summarise``), as it names it.
    route: str = Field(default="", max_length=200)
    #: Who produced the capture (``sdk``, ``gateway``, ``litellm``).
    producer: str = Field(default="sdk", max_length=50)


class ExperimentHints(Contract):
    """What the app says about the exchange, for the experiments to select on: its tags, and the values of the
    request headers it chose to pass (never a credential)."""

    tags: tuple[str, ...] = Field(default=(), max_length=50)
    #: Header name (lower case) to value, for the names the producer was told to copy.
    headers: dict[str, str] = Field(default_factory=dict, max_length=50)


class TraceContext(Contract):
    """The W3C trace context of the exchange, so the shadow call and the judging join the app's trace."""

    traceparent: str = Field(pattern=r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
    tracestate: str | None = Field(default=None, max_length=512)


class Capture(Event):
    """One production exchange on ``pairjudge.captures``, keyed by ``capture_id``."""

    capture_id: CaptureId
    source: CaptureSource
    request: CapturedRequest
    response: CapturedResponse
    hints: ExperimentHints = Field(default_factory=ExperimentHints)
    trace: TraceContext | None = None
    captured_at: datetime = Field(default_factory=utc_now)
    #: True when the texts were passed through the redaction hook before the capture left the app.
    redacted: bool = False

    @model_validator(mode="after")
    def _captures_start_at_version_2(self) -> Capture:
        # Captures were introduced after version 1: an unversioned capture is not a version 1 one.
        if self.schema_version < 2:
            raise ValueError("captures start at schema_version 2 (docs/reference/events.md)")
        return self

    @property
    def unseen(self) -> tuple[str, ...]:
        """Why the judge cannot see this exchange whole, one reason a kind, sorted: ``image``, ``audio``, ``file``,
        ``other`` parts anywhere in it, ``builtin_tools`` when a provider's own tool was offered, and
        ``stored_context`` when the request leaned on context stored at the provider. Empty when the judge sees
        all of it."""
        kinds: set[str] = set()
        for message in (*self.request.messages, self.response.message):
            kinds.update(message.unseen)
        if self.request.builtin_tools:
            kinds.add("builtin_tools")
        if self.request.stored_context:
            kinds.add("stored_context")
        return tuple(sorted(kinds))
