"""A judge speaking OpenAI's chat-completions wire format: OpenAI, vLLM, llama.cpp server, Ollama, LiteLLM.

What this adapter owns, and what it leaves to the core:

* Transport faults (connect errors, timeouts, 408/429/5xx) are retried by the shared ``JSONEndpoint``
  with backoff that honours ``retry-after-ms``/``Retry-After``; when retries run out they become
  ``JudgeUnavailable``. Other 4xx are configuration or auth problems that no retry fixes:
  ``JudgeRejected`` at once.
* A reply *body* that is not a chat completion (not JSON, no ``choices``) is the server's fault:
  ``JudgeUnavailable``. A reply *content* that is bad JSON, off-schema, a refusal or empty is the
  model's answer: it is returned as text and the core's strict validator re-asks or escalates.
* Prompt-cache reads the provider reports (``usage.prompt_tokens_details.cached_tokens``) go into
  ``extra["cached_input_tokens"]``, so ``PricedJudge`` bills them at the cached rate; ``input_tokens``
  stays the whole prompt, cached part included, as OpenAI counts it.
* The API key is a ``SecretStr``; it goes into the Authorization header and nowhere else (not into
  ``repr``, messages or logs; error bodies are scrubbed of it in case a server echoes it).
* In ``response_format="auto"`` mode the judge finds by itself which structured-output form the server
  takes: ``json_schema`` first, then ``json_object`` with a schema, then plain JSON. A server that
  refuses a form (``is_format_refusal``) gets the same request again at once in the next form; the
  form that worked is kept for the judge's lifetime, so the probing costs one refused request per
  form, not one per call.
* Token probabilities (``logprobs`` with ``top_logprobs``, on by default) are asked for so the core can read
  the judge's probability for each side at its verdict token (``agents.logprobs``); the reply's
  ``logprobs.content`` goes into ``extra["logprobs"]`` untouched. A server that refuses the parameter
  (``is_logprobs_refusal``) gets the same request again at once without it, and the judge stops asking for
  good (logged once, counted in ``logprobs_refusals``): judging never depends on token probabilities.

Why one module over 500 lines: the wire format's quirks (schema adaptation for llama.cpp, error bodies,
the structured-output probing) are what this module is; each part is read with the others.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any, Final, Literal, TypeGuard

from pydantic import SecretStr

from pairjudge.agents.errors import JudgeUnavailable
from pairjudge.agents.judge import JudgeIdentity, JudgeRequest, JudgeResponse
from pairjudge.streams.judges.client import check_key_transport
from pairjudge.streams.judges.cost import CACHED_INPUT_TOKENS, usage_count
from pairjudge.streams.judges.http import EndpointJudge, JSONEndpoint, PostResult, RequestRefused
from pairjudge.streams.judges.openai_errors import error_detail, is_format_refusal, is_logprobs_refusal
from pairjudge.streams.judges.wire import (
    DEFAULT_MAX_RESPONSE_BYTES,
    RetryPolicy,
    host_label,
    parse_base_url,
    public_url,
)

log = logging.getLogger(__name__)

#: How the reply schema goes on the wire, one request at a time.
WireFormat = Literal["json_schema", "json_object_schema", "none"]
#: What a judge is configured with: one wire form, or ``auto`` to find the one the server takes.
ResponseFormatMode = Literal["auto", "json_schema", "json_object_schema", "none"]

#: ``auto`` mode's order: the strictest form first, then the next one on each refusal. ``none`` is last
#: and is never taken for a refusal (there is no form left to fall back to).
_NEXT_FORM: Final[dict[WireFormat, WireFormat]] = {"json_schema": "json_object_schema", "json_object_schema": "none"}

#: llama-cpp-python 0.3.36 turns ``maxLength`` into nested grammar repetitions and its server process
#: *exits* when one passes roughly 1000 (measured: 1001 works, 1024 kills it).
DEFAULT_WIRE_MAX_LENGTH = 1000
#: llama.cpp's schema-to-grammar ignores ``minimum``/``maximum``, but honours ``enum``: integer ranges up
#: to this many values are sent as the equivalent enum, so the grammar enforces seed 000's 1-5 scores.
DEFAULT_WIRE_INT_ENUM_MAX = 64

#: How many encoded stable request parts a judge keeps (one per template, criteria list and form in use).
_MAX_STABLE_PARTS = 512

_SCHEMA_NAME_RE = re.compile(r"[^A-Za-z0-9_-]")

#: How many alternatives per token a judge asks for by default, and OpenAI's most.
DEFAULT_TOP_LOGPROBS = 5
MAX_TOP_LOGPROBS = 20

#: The ``provider`` in this judge's identity (any OpenAI-compatible server).
PROVIDER = "openai-compatible"


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_range_as_enum(node: dict[str, Any], max_values: int) -> dict[str, Any] | None:
    lo, hi = node.get("minimum"), node.get("maximum")
    if node.get("type") != "integer" or "enum" in node or not _is_int(lo) or not _is_int(hi):
        return None
    lo += 1 if node.get("exclusiveMinimum") is True else 0
    hi -= 1 if node.get("exclusiveMaximum") is True else 0
    if not 0 < hi - lo + 1 <= max_values:
        return None
    rest = {k: v for k, v in node.items() if k not in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")}
    return {**rest, "enum": list(range(lo, hi + 1))}


def adapt_schema_for_llama(schema: Any, *, max_length: int | None, int_enum_max: int | None) -> Any:
    """A copy of a JSON Schema that llama.cpp's grammar compiler can take and actually enforce.

    Every change only *narrows* what the schema admits (or restates it exactly), so anything the
    server's grammar lets through still validates against the real contract, which the core checks:
    ``maxLength`` is lowered to ``max_length``; small integer ranges become the equivalent ``enum``.
    """
    if isinstance(schema, list):
        return [adapt_schema_for_llama(item, max_length=max_length, int_enum_max=int_enum_max) for item in schema]
    if not isinstance(schema, dict):
        return schema
    node = schema
    if int_enum_max is not None and (as_enum := _int_range_as_enum(node, int_enum_max)) is not None:
        node = as_enum
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "maxLength" and max_length is not None and _is_int(value):
            out[key] = min(value, max_length)
        else:
            out[key] = adapt_schema_for_llama(value, max_length=max_length, int_enum_max=int_enum_max)
    return out


class OpenAICompatibleJudge(EndpointJudge):
    """One chat-completions endpoint as a ``Judge``. Safe to call concurrently; ``aclose()`` when done.

    ``base_url`` includes the API prefix (``http://127.0.0.1:8080/v1``); requests go to
    ``{base_url}/chat/completions``. ``response_format`` picks how the reply schema is sent:

    * ``json_schema``: OpenAI strict structured outputs (OpenAI, vLLM, LiteLLM);
    * ``json_object_schema``: ``{"type": "json_object", "schema": ...}``, llama.cpp's form;
    * ``none``: no schema on the wire; the prompt asks for JSON and the core validates strictly anyway;
    * ``auto``: each of those in turn, as far as the server refuses them (see the module docstring).
      A refusal is an error answer ``is_format_refusal`` recognises; any other error is handled as in
      a fixed mode. Each downgrade is logged once, as a WARNING, and kept until the judge is rebuilt
      (a restart probes again). ``effective_response_format`` is the form in use. Replies carry the
      form that produced them in ``extra["response_format"]``, and ``extra["response_format_fallback"]``
      is true when it is not ``json_schema`` in ``auto`` mode.

    Times are in seconds. ``connect_timeout`` and ``read_timeout`` bound each socket phase;
    ``attempt_timeout`` (default: their sum) bounds a whole attempt, so a server trickling bytes cannot
    hold a call forever. ``max_retries`` retries follow the first attempt, with exponential backoff and
    jitter from ``backoff_initial`` up to ``backoff_max``, or exactly the server's ``retry-after-ms`` (or
    else ``Retry-After``) when it sends one; a wait above ``max_retry_after`` ends the call at once
    (``JudgeUnavailable``). ``max_concurrency`` caps calls in flight to this endpoint;
    ``max_response_bytes`` caps a reply body. ``max_tokens_field`` is ``max_completion_tokens`` for
    OpenAI models that refuse ``max_tokens``. In ``json_object_schema`` mode the schema sent (never the
    one validated) is adapted for llama.cpp, see ``adapt_schema_for_llama``: ``wire_max_length`` caps
    ``maxLength``, ``wire_int_enum_max`` turns small integer ranges into enums; ``None`` switches either off.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: SecretStr | None = None,
        version: str = "",
        temperature: float = 0.0,
        response_format: ResponseFormatMode = "json_schema",
        seed: int | None = None,
        max_tokens: int = 1024,
        max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
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
        wire_max_length: int | None = DEFAULT_WIRE_MAX_LENGTH,
        wire_int_enum_max: int | None = DEFAULT_WIRE_INT_ENUM_MAX,
        logprobs: bool = True,
        top_logprobs: int = DEFAULT_TOP_LOGPROBS,
    ) -> None:
        url = parse_base_url(base_url, example="http://127.0.0.1:8080/v1")
        # The start-up check (streams.config.settings.check_api_key) again, for judges built by other paths.
        check_key_transport(str(url), api_key, allowed=allow_cleartext_key)
        if not 1 <= top_logprobs <= MAX_TOP_LOGPROBS:
            raise ValueError(f"top_logprobs must be between 1 and {MAX_TOP_LOGPROBS}")
        if max_concurrency < 1 or max_retries < 0 or max_tokens < 1 or max_response_bytes < 1:
            raise ValueError("max_concurrency, max_tokens and max_response_bytes must be >= 1, max_retries >= 0")
        self._where = host_label(url)
        self._identity = JudgeIdentity(provider=PROVIDER, model=model, version=version, temperature=temperature)
        self._api_key = api_key
        self._response_format: ResponseFormatMode = response_format
        #: The form requests go out in. Fixed unless the mode is auto, where it only ever moves down
        #: ``_NEXT_FORM``, under ``_form_lock``.
        self._form: WireFormat = "json_schema" if response_format == "auto" else response_format
        # A threading lock, not an anyio one: the critical section never awaits, so it is held for
        # microseconds and needs no event loop; it also holds should one judge serve several loops.
        self._form_lock = threading.Lock()
        #: ``_body``'s encoded stable parts, by (form, schema name, schema id), with the schema they encode.
        self._stable_parts: dict[tuple[WireFormat, bool, str, int], tuple[object, bytes]] = {}
        self._seed = seed
        #: Whether requests ask for token probabilities; set False, for good, by the first refusal.
        self._logprobs = logprobs
        self._top_logprobs = top_logprobs
        #: Requests the server refused for their ``logprobs`` (at most a few: the first one switches them off).
        self.logprobs_refusals = 0
        self._max_tokens = max_tokens
        self._max_tokens_field = max_tokens_field
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._wire_max_length = wire_max_length
        self._wire_int_enum_max = wire_int_enum_max
        self._public_endpoint = public_url(url)
        self._models_url = str(url).rstrip("/") + "/models"
        self._http = JSONEndpoint(
            url=str(url).rstrip("/") + "/chat/completions",
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
            error_detail=error_detail,
            allow_cleartext_secrets=allow_cleartext_key,
        )

    # --- the Judge protocol (identity, aclose: EndpointJudge) ---------------------------------------

    @property
    def response_format(self) -> ResponseFormatMode:
        """The configured mode (``auto`` included)."""
        return self._response_format

    @property
    def effective_response_format(self) -> WireFormat:
        """The form requests go out in now: the configured one, or in ``auto`` mode the one found so far."""
        return self._form

    @property
    def logprobs(self) -> bool:
        """Whether requests ask for token probabilities now (False once the server refused them)."""
        return self._logprobs

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        started = time.perf_counter()
        form = self._form
        refusals = 0
        while True:
            logprobs = self._logprobs
            # The last form is never taken for a format refusal: nothing is left to fall back to.
            formats = self._response_format == "auto" and form in _NEXT_FORM
            check = _refusal_check(formats=formats, logprobs=logprobs)
            try:
                result = await self._http.post(self._body(request, form, logprobs), self._headers(), refused=check)
            except RequestRefused as exc:
                refusals += 1
                if logprobs and is_logprobs_refusal(exc.status, exc.head):
                    self._stop_logprobs(exc.status)
                else:
                    form = self._downgrade(form, exc.status)
                continue
            response = self._parse(result, form)
            if refusals:
                # The refused round trips are part of what this call took.
                response.extra["elapsed_s"] = time.perf_counter() - started
            return response

    def cache_params(self) -> dict[str, Any]:
        """The settings that shape a reply, for ``CachingJudge``'s key (see ``EndpointJudge``).

        The endpoint is in because a local server (llama.cpp, Ollama) answers with whatever model it
        loaded, whatever name is asked for.
        """
        params: dict[str, Any] = {
            "endpoint": self._public_endpoint,
            "model": self._model,
            # The *configured* mode, auto included, not the form found: CachingJudge takes the params
            # once, when it is built, and looks a reply up before this judge knows which form the call
            # will end in. With the endpoint in the key, "auto" stands for "the form this server
            # takes", the same for every call; and replies of a fixed form never mix with auto's.
            "response_format": self._response_format,
            "seed": self._seed,
            "max_tokens": self._max_tokens,
            # Not just a name: for reasoning models max_completion_tokens also bounds hidden reasoning.
            "max_tokens_field": self._max_tokens_field,
        }
        if self._response_format in ("json_object_schema", "auto"):
            # Only in this form is the schema on the wire adapted, and so the grammar the server enforces
            # (auto mode may end up in it).
            params["wire_max_length"] = self._wire_max_length
            params["wire_int_enum_max"] = self._wire_int_enum_max
        return params

    def __repr__(self) -> str:
        # Deliberately no api_key, not even masked: its presence is all anyone debugging needs.
        return (
            f"OpenAICompatibleJudge(endpoint={self._where!r}, model={self._model!r}, "
            f"response_format={self._response_format!r}"
            + (f" (using {self._form!r})" if self._response_format == "auto" else "")
            + f", auth={'yes' if self._api_key else 'no'})"
        )

    # --- internals -------------------------------------------------------------------------------

    def _auth_headers(self) -> dict[str, str]:
        if self._api_key is None:
            return {}
        return {"Authorization": f"Bearer {self._api_key.get_secret_value()}"}

    def _headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json", **self._auth_headers()}

    def _llama_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        adapted: dict[str, Any] = adapt_schema_for_llama(
            schema, max_length=self._wire_max_length, int_enum_max=self._wire_int_enum_max
        )
        return adapted

    def _downgrade(self, refused: WireFormat, status: int) -> WireFormat:
        """The form to try after the server refused ``refused``; moves the judge's form down once.

        Calls in flight when the server first refuses a form all see the refusal; the first to get here
        moves the form down (and logs it), the others find it moved and just take the current form.
        Forms only move down, so every call ends after at most one refusal per form.
        """
        with self._form_lock:
            if self._form == refused:
                self._form = _NEXT_FORM[refused]
                # No body excerpt: an error body may quote the prompt. The status and forms suffice.
                log.warning(
                    "judge %s refused response_format %s (HTTP %d); falling back to %s for this judge",
                    self._label,
                    refused,
                    status,
                    self._form,
                )
            return self._form

    def _stop_logprobs(self, status: int) -> None:
        """Stop asking for token probabilities after the server refused them (once per judge, like a form)."""
        with self._form_lock:
            self.logprobs_refusals += 1
            if self._logprobs:
                self._logprobs = False
                log.warning(
                    "judge %s refused logprobs (HTTP %d); judging on without token probabilities "
                    "(the judge's stated confidence) for this judge",
                    self._label,
                    status,
                )

    def _body(self, request: JudgeRequest, form: WireFormat, logprobs: bool = False) -> bytes:
        """The request's JSON: the messages encoded now, everything else encoded once per schema and form.

        Only the messages change from call to call. The rest (model, sampling settings and above all
        the reply schema, several KiB) is the same for every call of one template and criteria list,
        so it is kept encoded, keyed by the schema object (``agents.response_schemas.response_schema``
        shares one per template and criteria) and held by reference so its id cannot be reused.
        """
        key = (form, logprobs, request.schema_name, id(request.response_schema))
        cached = self._stable_parts.get(key)
        if cached is None or cached[0] is not request.response_schema:
            stable = self._payload(request, form, logprobs)
            encoded = json.dumps(stable, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
            if len(self._stable_parts) >= _MAX_STABLE_PARTS:
                self._stable_parts.clear()  # a bound, not a policy: real workloads have a few dozen
            cached = (request.response_schema, encoded[1:-1])  # the members, without the braces
            self._stable_parts[key] = cached
        messages = json.dumps(
            [{"role": m.role, "content": m.content} for m in request.messages],
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode()
        return b'{"messages":' + messages + b"," + cached[1] + b"}"

    def _payload(self, request: JudgeRequest, form: WireFormat, logprobs: bool = False) -> dict[str, Any]:
        """Every member of the request but the messages (see ``_body``)."""
        payload: dict[str, Any] = {
            "model": self._model,
            "temperature": self._identity.temperature,
            self._max_tokens_field: self._max_tokens,
            "stream": False,
        }
        if logprobs:
            payload["logprobs"] = True
            payload["top_logprobs"] = self._top_logprobs
        if self._seed is not None:
            payload["seed"] = self._seed
        if form == "json_schema":
            # OpenAI's strict structured outputs; the name must match ^[A-Za-z0-9_-]{1,64}$.
            name = _SCHEMA_NAME_RE.sub("_", request.schema_name)[:64] or "reply"
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": request.response_schema, "strict": True},
            }
        elif form == "json_object_schema":
            # llama.cpp's form: it rejects the json_schema form but compiles this schema into a grammar.
            payload["response_format"] = {"type": "json_object", "schema": self._llama_schema(request.response_schema)}
        return payload

    def _parse(self, result: PostResult, form: WireFormat) -> JudgeResponse:
        body = result.body
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise JudgeUnavailable(
                f"judge {self._label}: malformed response, body is not JSON: {self._http.excerpt(body, 80)!r}"
            ) from None
        if not isinstance(data, dict):
            data = {}
        choices = data.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, dict) else None
        if not isinstance(first, dict) or not isinstance(message, dict):
            # Often an error object sent with a 200 by a proxy; show its start, scrubbed.
            raise JudgeUnavailable(
                f"judge {self._label}: malformed response, no choices[0].message: {self._http.excerpt(body, 120)!r}"
            )
        content = _content_text(message.get("content"))
        if content is None:
            raise JudgeUnavailable(f"judge {self._label}: malformed response, message.content has an unknown shape")
        refusal = message.get("refusal")
        refused = isinstance(refusal, str) and bool(refusal)
        # A refusal or an empty answer is still the model's answer: hand the text (maybe empty) to the
        # core, whose validator fails it and re-asks or escalates. Never invent content here.
        text = content if content else (refusal if isinstance(refusal, str) else "")
        usage = data.get("usage")
        answered = data.get("model")
        logprobs = first.get("logprobs")
        return JudgeResponse(
            text=text,
            model=answered if isinstance(answered, str) and answered else self._model,
            input_tokens=usage_count(usage, "prompt_tokens"),
            output_tokens=usage_count(usage, "completion_tokens"),
            latency_s=result.latency_s,
            extra={
                **result.extra(),
                "finish_reason": first.get("finish_reason"),
                "refusal": refused,
                "model_reported": isinstance(answered, str) and bool(answered),
                "response_id": data.get("id") if isinstance(data.get("id"), str) else None,
                # Part of input_tokens, billed at the cached rate; None when the server does not say.
                CACHED_INPUT_TOKENS: _cached_input_tokens(usage),
                "connect_timeout": self._connect_timeout,
                "read_timeout": self._read_timeout,
                # The form this reply was asked in; a fallback is a weaker constraint, worth seeing.
                "response_format": form,
                "response_format_fallback": self._response_format == "auto" and form != "json_schema",
                # The server's per-token log probabilities, as sent (agents.logprobs reads them); None without.
                "logprobs": logprobs.get("content") if isinstance(logprobs, dict) else None,
            },
        )


def _refusal_check(*, formats: bool, logprobs: bool) -> Callable[[int, bytes], bool] | None:
    """The refusals a request may meet and fall back from: its structured-output form, its logprobs."""
    if formats and logprobs:
        return lambda status, body: is_logprobs_refusal(status, body) or is_format_refusal(status, body)
    if formats:
        return is_format_refusal
    if logprobs:
        return is_logprobs_refusal
    return None


def _content_text(content: object) -> str | None:
    """``message.content`` as text: a string, null, or a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if not isinstance(part, dict) or not isinstance(part.get("text", ""), str):
                return None
            parts.append(part.get("text", ""))
        return "".join(parts)
    return None


def _cached_input_tokens(usage: object) -> int | None:
    """``usage.prompt_tokens_details.cached_tokens``: prompt tokens read from the provider's prompt cache."""
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    cached = usage_count(details, "cached_tokens")
    # A negative count is garbage, not a discount: treat it as unreported.
    return cached if cached is not None and cached >= 0 else None
