"""A judge speaking Anthropic's Messages API (``POST /v1/messages``).

How a verdict is asked for and read back:

* The reply schema goes out as the one tool the model may call, named after ``schema_name``, and
  ``tool_choice`` forces that tool, so a complete answer arrives as a ``tool_use`` block whose
  ``input`` is already a JSON object. That object, serialised, is the reply text the core validates
  strictly; the schema on the wire only steers the model, it never replaces the validation.
* System messages become the top-level ``system`` blocks. The last one carries an ``ephemeral``
  ``cache_control`` breakpoint: Anthropic caches the prefix up to it (the tool definition, then the
  system prompt), which is identical for every pair judged with the same rubric. Prompts shorter
  than the model's minimum cacheable length are simply not cached; nothing fails.
* A reply without a usable ``tool_use`` block (a refusal, plain text, or a cut-off answer:
  ``stop_reason`` ``max_tokens``/``refusal``) is returned as its text, possibly empty, so the core
  re-asks or escalates. A ``tool_use`` block from a cut-off answer is never used: its input may be
  a truncated object that happens to validate, which would be a verdict nobody gave.

Transport faults, 429, 529 (overloaded) and other 5xx are retried by the shared ``JSONEndpoint``,
honouring ``retry-after-ms``/``Retry-After``; other 4xx are ``JudgeRejected`` at once. A 2xx body that
is not a Messages response is ``JudgeUnavailable``. The key is a ``SecretStr`` that goes into the
``x-api-key`` header and nowhere else; error bodies are scrubbed of it in case a server echoes it.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import httpx
from pydantic import SecretStr

from pairjudge.agents.errors import JudgeRejected, JudgeUnavailable
from pairjudge.agents.judge import JudgeIdentity, JudgeRequest, JudgeResponse
from pairjudge.streams.judges.client import check_key_transport
from pairjudge.streams.judges.cost import usage_count
from pairjudge.streams.judges.http import EndpointJudge, JSONEndpoint, PostResult
from pairjudge.streams.judges.wire import (
    DEFAULT_MAX_RESPONSE_BYTES,
    RETRIABLE_STATUSES,
    RetryPolicy,
    host_label,
    parse_base_url,
    public_url,
)

DEFAULT_BASE_URL: Final = "https://api.anthropic.com"
DEFAULT_ANTHROPIC_VERSION: Final = "2023-06-01"

#: 529 is Anthropic's "overloaded"; every 5xx is retried anyway, but it is named here so nobody
#: "fixes" the retry rule into excluding it.
ANTHROPIC_RETRIABLE_STATUSES: Final = RETRIABLE_STATUSES | {529}

#: Stop reasons of an answer the model finished. A ``tool_use`` block is read only under one of these;
#: ``max_tokens``, ``refusal``, ``pause_turn``, ``model_context_window_exceeded`` and any reason added
#: later mean the answer is incomplete or not an answer.
COMPLETE_STOP_REASONS: Final = frozenset({"tool_use", "end_turn", "stop_sequence"})

DEFAULT_TOOL_DESCRIPTION: Final = (
    "Record your verdict on the two outputs. Call this exactly once; its input is your whole answer "
    "and must follow the schema exactly."
)

#: Top-level keys of a JSON Schema document that describe the document rather than the object; the
#: API's ``input_schema`` is a schema for the tool's input object, so they are left off the wire.
_DOCUMENT_KEYS: Final = frozenset({"$schema", "$id"})

_TOOL_NAME_RE = re.compile(r"[^A-Za-z0-9_-]")

#: The ``provider`` in this judge's identity (Anthropic Messages).
PROVIDER = "anthropic"


def tool_name_for(schema_name: str) -> str:
    """A tool name the API accepts (``^[a-zA-Z0-9_-]{1,64}$``) derived from ``schema_name``."""
    return _TOOL_NAME_RE.sub("_", schema_name)[:64] or "verdict"


def input_schema_for(schema: dict[str, Any]) -> dict[str, Any]:
    """The reply schema as a tool ``input_schema``: an object schema, ``$defs``/``$ref`` kept as they are.

    Raises ``JudgeRejected`` for a schema that is not an object schema: the API would reject it, and no
    retry or re-ask could change that.
    """
    if schema.get("type") != "object":
        raise JudgeRejected("the reply schema must be a JSON Schema with top-level type 'object' to be a tool input")
    return {key: value for key, value in schema.items() if key not in _DOCUMENT_KEYS}


def _error_detail(head: bytes) -> str | None:
    """``"<error type>: <message>"`` from Anthropic's error envelope, or ``None`` to show the raw excerpt."""
    try:
        data = json.loads(head)
    except (ValueError, RecursionError):
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return None
    kind, message = error.get("type"), error.get("message")
    if isinstance(kind, str) and isinstance(message, str):
        return f"{kind}: {message}"
    return None


class AnthropicJudge(EndpointJudge):
    """One Anthropic Messages endpoint as a ``Judge``. Safe to call concurrently; ``aclose()`` when done.

    ``base_url`` is the API root (``https://api.anthropic.com``, or a gateway's root); requests go to
    ``{base_url}/v1/messages``. A ``base_url`` already ending in ``/v1`` is accepted as the same thing.
    ``api_key`` goes into ``x-api-key``; ``None`` sends no key (for a gateway that adds its own).
    ``anthropic_version`` is the ``anthropic-version`` header. ``max_tokens`` is required by the API and
    caps the reply; a verdict cut off by it is returned as text, never used.
    ``cache_system_prompt`` puts the prompt-caching breakpoint on the system prompt.

    Retries, timeouts and limits work as in ``OpenAICompatibleJudge`` (times in seconds):
    ``connect_timeout``/``read_timeout`` bound each socket phase, ``attempt_timeout`` (default: their sum)
    a whole attempt; ``max_retries`` retries follow the first attempt with jittered exponential backoff
    from ``backoff_initial`` to ``backoff_max``, or the server's ``retry-after-ms``/``Retry-After`` when
    sent; a wait above ``max_retry_after`` ends the call at once. ``max_concurrency`` caps calls in
    flight; ``max_response_bytes`` caps a reply body.
    """

    def __init__(
        self,
        *,
        model: str,
        api_key: SecretStr | None,
        base_url: str = DEFAULT_BASE_URL,
        version: str = "",
        anthropic_version: str = DEFAULT_ANTHROPIC_VERSION,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        tool_description: str = DEFAULT_TOOL_DESCRIPTION,
        cache_system_prompt: bool = True,
        connect_timeout: float = 5.0,
        read_timeout: float = 60.0,
        attempt_timeout: float | None = None,
        max_retries: int = 3,
        backoff_initial: float = 0.5,
        backoff_max: float = 20.0,
        max_retry_after: float = 60.0,
        max_concurrency: int = 32,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        allow_cleartext_key: bool = False,
    ) -> None:
        url = parse_base_url(base_url, example="https://api.anthropic.com")
        # The start-up check (streams.config.settings.check_api_key) again, for judges built by other paths.
        check_key_transport(str(url), api_key, allowed=allow_cleartext_key)
        if max_concurrency < 1 or max_retries < 0 or max_tokens < 1 or max_response_bytes < 1:
            raise ValueError("max_concurrency, max_tokens and max_response_bytes must be >= 1, max_retries >= 0")
        if not 0.0 <= temperature <= 1.0:
            raise ValueError("temperature must be within [0, 1] for the Messages API")
        root = str(url.copy_with(query=None, fragment=None)).rstrip("/")
        if root.endswith("/v1"):
            root = root[: -len("/v1")]
        self._endpoint = root + "/v1/messages"
        self._models_url = root + "/v1/models"
        self._where = host_label(url)
        self._identity = JudgeIdentity(provider=PROVIDER, model=model, version=version, temperature=temperature)
        self._anthropic_version = anthropic_version
        self._api_key = api_key
        self._max_tokens = max_tokens
        self._tool_description = tool_description
        self._cache_system_prompt = cache_system_prompt
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._http = JSONEndpoint(
            url=self._endpoint,
            label=self._label,
            policy=RetryPolicy(
                max_retries=max_retries,
                backoff_initial=backoff_initial,
                backoff_max=backoff_max,
                max_retry_after=max_retry_after,
            ),
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            attempt_timeout=attempt_timeout,
            max_concurrency=max_concurrency,
            max_response_bytes=max_response_bytes,
            headers={"Accept": "application/json", "User-Agent": "pairjudge"},
            secrets=(api_key,),
            retriable_statuses=ANTHROPIC_RETRIABLE_STATUSES,
            error_detail=_error_detail,
            allow_cleartext_secrets=allow_cleartext_key,
        )

    # --- the Judge protocol (identity, aclose: EndpointJudge) ---------------------------------------

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        payload = self.payload(request)
        result = await self._http.post(payload, self._headers())
        return self._parse(result, tool_name_for(request.schema_name))

    def cache_params(self) -> dict[str, Any]:
        """The settings that shape a reply, for ``CachingJudge``'s key (see ``EndpointJudge``).

        The tool description is part of what the model reads. ``cache_system_prompt`` is left out:
        a prompt-cache hit is billed differently but answers the same.
        """
        return {
            "endpoint": public_url(httpx.URL(self._endpoint)),
            "model": self._model,
            "anthropic_version": self._anthropic_version,
            "max_tokens": self._max_tokens,
            "tool_description": self._tool_description,
        }

    def __repr__(self) -> str:
        # Deliberately no api_key, not even masked: its presence is all anyone debugging needs.
        return (
            f"AnthropicJudge(endpoint={self._where!r}, model={self._model!r}, "
            f"anthropic_version={self._anthropic_version!r}, auth={'yes' if self._api_key else 'no'})"
        )

    # --- the wire format ------------------------------------------------------------------------

    def payload(self, request: JudgeRequest) -> dict[str, Any]:
        """The Messages API request body for ``request`` (public so tests and tools can inspect it)."""
        name = tool_name_for(request.schema_name)
        system: list[dict[str, Any]] = [
            {"type": "text", "text": m.content}
            for m in request.messages
            # The API rejects empty text blocks; an empty system message says nothing anyway.
            if m.role == "system" and m.content.strip()
        ]
        if system and self._cache_system_prompt:
            # One breakpoint after the last system block caches tools + system: the part of the prompt
            # that is the same for every pair judged with the same rubric (docs/design.md §5). The
            # conversation after it differs per pair and ordering, so a breakpoint there would only pay
            # the cache-write premium.
            system[-1]["cache_control"] = {"type": "ephemeral"}
        payload: dict[str, Any] = {
            "model": self._model,
            "max_tokens": self._max_tokens,
            "temperature": self._identity.temperature,
            # System messages are hoisted in order: the Messages API has no system role in ``messages``.
            "messages": [{"role": m.role, "content": m.content} for m in request.messages if m.role != "system"],
            "tools": [
                {
                    "name": name,
                    "description": self._tool_description,
                    "input_schema": input_schema_for(request.response_schema),
                }
            ],
            # Forced, and one call only: without ``disable_parallel_tool_use`` the model may emit several
            # tool_use blocks, i.e. several verdicts to choose from.
            "tool_choice": {"type": "tool", "name": name, "disable_parallel_tool_use": True},
        }
        if system:
            payload["system"] = system
        return payload

    # --- internals -------------------------------------------------------------------------------

    def _auth_headers(self) -> dict[str, str]:
        headers = {"anthropic-version": self._anthropic_version}
        if self._api_key is not None:
            headers["x-api-key"] = self._api_key.get_secret_value()
        return headers

    def _headers(self) -> dict[str, str]:
        return {"content-type": "application/json", **self._auth_headers()}

    def _malformed(self, what: str, body: bytes) -> JudgeUnavailable:
        return JudgeUnavailable(f"judge {self._label}: malformed response, {what}: {self._http.excerpt(body, 120)!r}")

    def _parse(self, result: PostResult, tool_name: str) -> JudgeResponse:
        body = result.body
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise self._malformed("body is not JSON", body) from None
        if not isinstance(data, dict):
            raise self._malformed("body is not a JSON object", body)
        if data.get("type") == "error":
            # An error envelope sent with a 2xx (some gateways do): the server's fault, not the model's.
            raise self._malformed("an error object with a 2xx status", body)
        content = data.get("content")
        if not isinstance(content, list) or not all(
            isinstance(block, dict) and isinstance(block.get("type"), str) for block in content
        ):
            raise self._malformed("no content block list", body)

        texts: list[str] = []
        inputs: list[Any] = []
        for block in content:
            if block["type"] == "text":
                text = block.get("text")
                if not isinstance(text, str):
                    raise self._malformed("a text block without text", body)
                texts.append(text)
            elif block["type"] == "tool_use" and block.get("name") == tool_name:
                if "input" not in block:
                    raise self._malformed("a tool_use block without input", body)
                inputs.append(block["input"])
            # Anything else (thinking, other tools' blocks) is not an answer to this prompt.

        stop_reason = data.get("stop_reason")
        stop_reason = stop_reason if isinstance(stop_reason, str) else None
        use_tool = bool(inputs) and stop_reason in COMPLETE_STOP_REASONS
        if use_tool:
            # ensure_ascii=False keeps the audit copy readable; the core parses the same object either way.
            dumped = list(dict.fromkeys(json.dumps(value, ensure_ascii=False) for value in inputs))
            # Several different verdicts (despite disable_parallel_tool_use) are handed over together, so
            # the validator rejects them as "not one JSON object" rather than this adapter picking one.
            text = "\n".join(dumped)
        else:
            # A refusal, plain text, or an incomplete answer: the model's words (maybe none) for the
            # core's validator to fail and re-ask on. Never invent or salvage a verdict here.
            text = "".join(texts)

        usage = data.get("usage")
        uncached = usage_count(usage, "input_tokens")
        cache_write = usage_count(usage, "cache_creation_input_tokens") or 0
        cache_read = usage_count(usage, "cache_read_input_tokens") or 0
        answered = data.get("model")
        response_id = data.get("id")
        return JudgeResponse(
            text=text,
            model=answered if isinstance(answered, str) and answered else self._model,
            # All input the prompt consumed, cached or not (the GenAI conventions' input_tokens); the
            # split is in ``extra`` for cost accounting, since cached tokens are priced differently.
            input_tokens=None if uncached is None else uncached + cache_write + cache_read,
            output_tokens=usage_count(usage, "output_tokens"),
            latency_s=result.latency_s,
            extra={
                **result.extra(),
                "stop_reason": stop_reason,
                "refusal": stop_reason == "refusal",
                "tool_use": use_tool,
                "tool_use_blocks": len(inputs),
                "uncached_input_tokens": uncached,
                "cache_creation_input_tokens": cache_write,
                "cache_read_input_tokens": cache_read,
                "model_reported": isinstance(answered, str) and bool(answered),
                "response_id": response_id if isinstance(response_id, str) else None,
                "request_id": result.headers.get("request-id"),
                "anthropic_version": self._anthropic_version,
                "connect_timeout": self._connect_timeout,
                "read_timeout": self._read_timeout,
            },
        )
