"""How an OpenAI-compatible server says no: the message, ``param`` and ``code`` of its error body, and whether
an error refuses a request parameter the judge can drop and ask again without (the structured-output form,
``logprobs``), rather than something no retry without it would fix (the prompt's size, a key).

Kept apart from ``streams.judges.openai``: pure parsing of untrusted error bodies, tested on their own.
"""

from __future__ import annotations

import json
from typing import Final

#: An error that names one of these is about the request's structured-output form.
_FORMAT_MARKERS: Final = ("response_format", "response format", "json_schema", "structured output")
#: Words of a refusal to support something; with "schema" they make a format refusal too.
_UNSUPPORTED_MARKERS: Final = ("not supported", "unsupported", "does not support", "not implemented")
#: An error about the prompt's size is never a format refusal, whatever else it names: a smaller form
#: would not fix it, and a fallback would silently weaken the judge for good.
_CONTEXT_MARKERS: Final = (
    "context length",
    "context_length",
    "context window",
    "maximum context",
    "too many tokens",
    "prompt is too long",
    "max_tokens",
    "max_completion_tokens",
)


def _error_fields(body: bytes) -> tuple[str, str, str]:
    """``(message, param, code)`` from an error body, in the shapes OpenAI-compatible servers send.

    OpenAI, vLLM, llama.cpp and LiteLLM send ``{"error": {"message", "param", "code"}}``; vLLM also a
    flat ``{"message", "param"}``; Ollama ``{"error": "..."}``; FastAPI servers ``{"detail": ...}``,
    whose validation errors are read as ``loc: msg`` (their ``input``, which may echo the prompt, is
    left out). Anything else (truncated JSON, plain text) is the body's text as the message.
    """
    text = body.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return text, "", ""
    if not isinstance(data, dict):
        return text, "", ""
    error = data.get("error")
    source = error if isinstance(error, dict) else data
    message = source.get("message")
    if isinstance(error, str):
        message = error
    detail = data.get("detail")
    if message is None and isinstance(detail, str):
        message = detail
    elif message is None and isinstance(detail, list):
        lines = []
        for item in detail:
            if isinstance(item, dict):
                loc = item.get("loc")
                where = ".".join(str(part) for part in loc) if isinstance(loc, list) else ""
                lines.append(f"{where}: {item.get('msg', '')}")
        message = "; ".join(lines)
    param, code = source.get("param"), source.get("code")
    return (
        message if isinstance(message, str) else "",
        param if isinstance(param, str) else "",
        code if isinstance(code, str) else "",
    )


def error_detail(head: bytes) -> str | None:
    """``"<code>: <message>"`` (or the message alone) from an OpenAI-style error body; ``None`` to show
    the raw excerpt instead (a body that is not a JSON error, e.g. an HTML page from a proxy).

    Error messages then read as the server meant them ("HTTP 401: invalid_api_key: Incorrect API key
    provided: [REDACTED]"), not as JSON punctuation; they are scrubbed and clipped like any excerpt.
    """
    try:
        json.loads(head)
    except (ValueError, RecursionError):
        return None
    message, _, code = _error_fields(head)
    if not message.strip():
        return None
    return f"{code}: {message}" if code else message


def _refusal_candidate(status: int, body: bytes) -> tuple[str, str] | None:
    """The error's message (lower case) and ``param`` when the answer may refuse a request parameter: a 400, 422
    or 500 that is not a context-length error (which names the prompt's size and sometimes ``max_tokens``)."""
    if status not in (400, 422, 500):
        return None
    message, param, code = _error_fields(body)
    text = message.lower()
    if "context_length" in code or any(marker in text for marker in _CONTEXT_MARKERS):
        return None
    return text, param


def is_logprobs_refusal(status: int, body: bytes) -> bool:
    """Whether an error answer says the server does not take ``logprobs``/``top_logprobs``: a 400 or 422 (or
    llama-cpp-python's 500 validation error) whose error names them, as message or ``param``. A context-length
    error is never one, as for :func:`is_format_refusal`. ``body`` is the start of an untrusted error body."""
    fields = _refusal_candidate(status, body)
    if fields is None:
        return False
    text, param = fields
    if status == 500:
        return "validation error" in text and "logprobs" in text
    return "logprobs" in param or "logprobs" in text


def is_format_refusal(status: int, body: bytes) -> bool:
    """Whether an error answer says the server does not take the request's structured-output form.

    True for a 400 or 422 whose error names ``response_format``/``json_schema`` (as message or
    ``param``), or says a schema is unsupported; and for llama-cpp-python's way of saying the same, a
    500 carrying a request *validation error* on ``response_format``. False for everything else, above
    all for a context-length error, which names the prompt's size and sometimes ``max_tokens``.
    ``body`` is the start of an untrusted error body.
    """
    fields = _refusal_candidate(status, body)
    if fields is None:
        return False
    text, param = fields
    if status == 500:
        # llama-cpp-python 0.3 answers any request-validation failure with a 500; only one about
        # response_format is a refusal of the form (a plain 500 stays a transient fault, retried).
        return "validation error" in text and "response_format" in text
    if param.startswith("response_format") or any(marker in text for marker in _FORMAT_MARKERS):
        return True
    return "schema" in text and any(marker in text for marker in _UNSUPPORTED_MARKERS)
