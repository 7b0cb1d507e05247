"""What a LiteLLM success event holds, read as one exchange for the capture sink; and the experiments' draw.

No ``litellm`` import here (the callback class, ``litellm_callback``, is the only module that needs it), so this
part is tested, and type-checked, without LiteLLM installed.

LiteLLM hands its callbacks the call's whole state (``kwargs``): the client's request as the proxy received it
(``litellm_params.proxy_server_request``: url, method, headers, body), the provider's key, the virtual key's
hash, the request LiteLLM sent upstream. Only two things are read from it: the client's request **body** and
the header values the operator lists in ``hint_headers`` (never a credential's). The response is the one the
client got: for a streamed call, LiteLLM's own join of the chunks (``complete_streaming_response``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from pairjudge.agents.shadow import admits, drawn
from pairjudge.schemas.captures import CapturedApi
from pairjudge.schemas.experiments import Experiment

#: The callback's own variables, besides pairjudge's settings (docs/guides/litellm.md): the request header names
#: whose values may be hints (comma-separated; never a credential's), the sink's bound, and the seconds between two
#: log lines of the counts.
HINT_HEADERS_ENV: Final = "PAIRJUDGE_LITELLM_HINT_HEADERS"
MAX_BUFFERED_ENV: Final = "PAIRJUDGE_LITELLM_MAX_BUFFERED"
REPORT_EVERY_ENV: Final = "PAIRJUDGE_LITELLM_REPORT_EVERY_S"
CALLBACK_VARIABLES: Final = frozenset({HINT_HEADERS_ENV, MAX_BUFFERED_ENV, REPORT_EVERY_ENV})
#: LiteLLM's call types, by the API the client called.
CALL_TYPES: Final[Mapping[str, CapturedApi]] = {
    "completion": "chat_completions",
    "acompletion": "chat_completions",
    "anthropic_messages": "anthropic_messages",
    "responses": "responses",
    "aresponses": "responses",
}
#: Header names that carry credentials: never taken as hints, whatever ``hint_headers`` lists.
CREDENTIAL_HEADER: Final = re.compile(r"auth|key|token|secret|cookie|password|session", re.IGNORECASE)
#: LiteLLM marks the calls it makes itself (its shadow eval's shadow and judge calls, a router's classifier) with
#: this metadata key; they are not the app's traffic.
INTERNAL_ORIGIN_KEY: Final = "internal_call_origin"
#: The request body's ``metadata`` keys the app may set to describe the call (LiteLLM forwards ``metadata``).
ROUTE_KEY: Final = "pairjudge_route"
PROMPT_VERSION_KEY: Final = "pairjudge_prompt_version"
#: Body fields that are the proxy's business, not the request's: never handed to the sink.
_NOT_REQUEST: Final = frozenset({"metadata", "litellm_metadata", "tags", "api_key", "user", "mock_response"})


@dataclass(frozen=True, slots=True)
class Exchange:
    """One successful call, as the sink takes it."""

    api: CapturedApi
    #: The client's request body, as sent to the proxy.
    request: Mapping[str, Any]
    #: The response the client got (a streamed one joined by LiteLLM): a dict or LiteLLM's response object.
    response: Any
    streamed: bool
    latency_ms: float | None
    model: str
    route: str
    prompt_version: str
    tags: tuple[str, ...]
    headers: Mapping[str, str]


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _metadata(kwargs: Mapping[str, Any]) -> Mapping[str, Any]:
    params = _mapping(kwargs.get("litellm_params"))
    # LiteLLM keeps the proxy's metadata under "metadata" for chat calls and "litellm_metadata" for the others.
    return _mapping(params.get("metadata")) or _mapping(params.get("litellm_metadata"))


def internal_call(kwargs: Mapping[str, Any]) -> bool:
    """Whether LiteLLM made this call itself (its shadow eval's shadow or judge call): never captured."""
    return bool(_metadata(kwargs).get(INTERNAL_ORIGIN_KEY) or _mapping(kwargs.get("metadata")).get(INTERNAL_ORIGIN_KEY))


def _latency_ms(start: object, end: object) -> float | None:
    if isinstance(start, datetime) and isinstance(end, datetime):
        return max((end - start).total_seconds() * 1000.0, 0.0)
    return None


def _tags(body: Mapping[str, Any], metadata: Mapping[str, Any]) -> tuple[str, ...]:
    # LiteLLM's request tags: a top-level "tags", or "tags" in the metadata the client sent.
    raw = body.get("tags") or metadata.get("tags") or ()
    if isinstance(raw, str):
        return (raw,)
    return tuple(str(t) for t in raw if isinstance(t, str)) if isinstance(raw, Sequence) else ()


def read_exchange(
    kwargs: Mapping[str, Any],
    response: Any,
    start_time: object = None,
    end_time: object = None,
    *,
    hint_headers: Collection[str] = (),
) -> Exchange | None:
    """The exchange of a proxied call, or None when it is not one to capture: a call type with no normaliser, a
    call LiteLLM made itself, or a call the proxy did not receive (no request body)."""
    api = CALL_TYPES.get(str(kwargs.get("call_type") or ""))
    if api is None or internal_call(kwargs):
        return None
    proxied = _mapping(_mapping(kwargs.get("litellm_params")).get("proxy_server_request"))
    body = _mapping(proxied.get("body"))
    if not body:
        return None
    # The proxy writes its own entries (the virtual key's hash, the request's headers) into the body's metadata;
    # what the client sent there is kept apart, under requester_metadata.
    sent_metadata = _mapping(body.get("metadata"))
    metadata = _mapping(sent_metadata.get("requester_metadata")) or sent_metadata
    headers_in = {str(k).lower(): v for k, v in _mapping(proxied.get("headers")).items()}
    headers = {
        name: str(headers_in[name])
        for name in (h.lower() for h in hint_headers)
        if name in headers_in and not CREDENTIAL_HEADER.search(name)
    }
    streamed = bool(body.get("stream"))
    if streamed and kwargs.get("complete_streaming_response") is not None:
        response = kwargs["complete_streaming_response"]
    model = body.get("model")
    return Exchange(
        api=api,
        # The request's own fields only: the metadata (the proxy's additions included) is never captured.
        request={k: v for k, v in body.items() if k not in _NOT_REQUEST},
        response=response,
        streamed=streamed,
        latency_ms=_latency_ms(start_time, end_time),
        model=model if isinstance(model, str) and model else "unknown",
        route=str(metadata.get(ROUTE_KEY) or ""),
        prompt_version=str(metadata.get(PROMPT_VERSION_KEY) or ""),
        tags=_tags(body, metadata),
        headers=headers,
    )


def draw(
    exchange: Exchange,
    experiments: Sequence[Experiment],
    new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
) -> str | None:
    """The capture id to send ``exchange`` under, or None when no experiment takes it.

    The same rule as the shadow stage's (``agents.shadow.joins``): an experiment takes an exchange that its selector
    admits and whose capture id is drawn into its share. The id is drawn here, before the capture is sent, so the
    stage, drawing again from the same id, makes the same choice: the share is applied once, not twice. Without
    experiments every exchange is captured. Paused experiments take nothing; the live changes sent on
    ``pairjudge.control`` (``shadow_paused``, ``shadow_shares``) are the stage's, not read here.
    """
    capture_id = new_id()
    if not experiments:
        return capture_id
    for experiment in experiments:
        if experiment.paused or not admits(
            experiment.select,
            model=exchange.model,
            route=exchange.route,
            tags=exchange.tags,
            headers=exchange.headers,
        ):
            continue
        if drawn(capture_id, experiment.id, experiment.share):
            return capture_id
    return None


__all__ = [
    "CALLBACK_VARIABLES",
    "CALL_TYPES",
    "HINT_HEADERS_ENV",
    "MAX_BUFFERED_ENV",
    "REPORT_EVERY_ENV",
    "Exchange",
    "draw",
    "internal_call",
    "read_exchange",
]
