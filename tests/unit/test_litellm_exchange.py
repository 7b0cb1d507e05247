"""The LiteLLM callback's pure part: a success event's ``kwargs`` read as one exchange (the client's body, never the
proxy's metadata or a credential), and the experiments' draw, which must choose as the shadow stage does."""

from __future__ import annotations

import functools
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pairjudge.agents.capture import make_capture
from pairjudge.agents.shadow import joins
from pairjudge.schemas.experiments import Challenger, Experiment, Selector
from pairjudge.schemas.rubric import RubricRef
from pairjudge.streams.capture.litellm_exchange import Exchange, draw, read_exchange

MASTER_KEY = "sk-master-9c1d"
KEY_HASH = "88c0ffee5a1t"
BODY: dict[str, Any] = {
    "model": "support",
    "messages": [{"role": "user", "content": "Weather in Paris?"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
    "temperature": 0.2,
    # As the proxy leaves it: the client's metadata under requester_metadata, the proxy's own entries beside it.
    "metadata": {
        "pairjudge_route": "/support/chat",
        "user_api_key_hash": KEY_HASH,
        "user_api_key": KEY_HASH,
        "headers": {"authorization": f"Bearer {MASTER_KEY}"},
        "requester_metadata": {
            "pairjudge_route": "/support/chat",
            "pairjudge_prompt_version": "v7",
            "tags": ["beta"],
        },
    },
}
RESPONSE: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "support",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "12 °C, rain."}}],
}
START = datetime(2026, 12, 6, 17, 0, tzinfo=UTC)


def kwargs_for(
    body: dict[str, Any] | None = None,
    *,
    call_type: str = "acompletion",
    headers: dict[str, str] | None = None,
    origin: str | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"user_api_key_hash": KEY_HASH, "user_api_key": KEY_HASH}
    if origin is not None:
        metadata["internal_call_origin"] = origin
    return {
        "call_type": call_type,
        "api_key": "sk-upstream-51aa",
        "litellm_params": {
            "api_key": "sk-upstream-51aa",
            "metadata": metadata,
            "proxy_server_request": {
                "url": "http://127.0.0.1:4000/v1/chat/completions",
                "method": "POST",
                "headers": headers or {"content-type": "application/json", "x-team": "support"},
                "body": BODY if body is None else body,
            },
        },
    }


def test_a_chat_call_is_read_from_the_clients_body_without_the_proxys_metadata() -> None:
    exchange = read_exchange(kwargs_for(), RESPONSE, START, START + timedelta(milliseconds=250))
    assert exchange is not None
    assert exchange.api == "chat_completions"
    assert exchange.request == {k: v for k, v in BODY.items() if k != "metadata"}
    assert exchange.response is RESPONSE
    assert (exchange.model, exchange.route, exchange.prompt_version, exchange.tags) == (
        "support",
        "/support/chat",
        "v7",
        ("beta",),
    )
    assert exchange.latency_ms == pytest.approx(250.0)
    assert not exchange.streamed
    assert MASTER_KEY not in repr(exchange)
    assert KEY_HASH not in repr(exchange)
    assert "sk-upstream" not in repr(exchange)


def test_only_listed_headers_are_hints_and_never_a_credential() -> None:
    headers = {"X-Team": "support", "Authorization": f"Bearer {MASTER_KEY}", "X-Api-Key": MASTER_KEY, "x-other": "1"}
    exchange = read_exchange(
        kwargs_for(headers=headers), RESPONSE, hint_headers=("x-team", "authorization", "x-api-key")
    )
    assert exchange is not None
    assert exchange.headers == {"x-team": "support"}


@pytest.mark.parametrize(
    ("call_type", "api"),
    [("acompletion", "chat_completions"), ("anthropic_messages", "anthropic_messages"), ("aresponses", "responses")],
)
def test_each_api_the_proxy_serves_is_named(call_type: str, api: str) -> None:
    exchange = read_exchange(kwargs_for(call_type=call_type), RESPONSE)
    assert exchange is not None
    assert exchange.api == api


def test_calls_that_are_not_the_apps_are_not_read() -> None:
    # LiteLLM's shadow eval calls its shadow and judge models itself: those are not production exchanges.
    assert read_exchange(kwargs_for(origin="shadow_eval_router"), RESPONSE) is None
    assert read_exchange(kwargs_for(origin="shadow_eval_judge"), RESPONSE) is None
    assert read_exchange(kwargs_for(call_type="aembedding"), RESPONSE) is None
    assert read_exchange(kwargs_for(body={}), RESPONSE) is None  # not a proxied call


def test_a_streamed_call_is_marked_streamed() -> None:
    exchange = read_exchange(kwargs_for(body={**BODY, "stream": True}), RESPONSE)
    assert exchange is not None
    assert exchange.streamed


def _experiment(eid: str, share: float, **select: Any) -> Experiment:
    return Experiment(
        id=eid,
        share=share,
        select=Selector(**select),
        challenger=Challenger(base_url="http://127.0.0.1:1/v1", model="m"),
        rubric=RubricRef(name="helpfulness"),
    )


def _exchange() -> Exchange:
    exchange = read_exchange(kwargs_for(), RESPONSE)
    assert exchange is not None
    return exchange


def test_the_draw_chooses_as_the_shadow_stage_does() -> None:
    experiments = [
        _experiment("a", 0.2, routes=("/support/chat",)),
        _experiment("b", 0.1, tags=("beta",)),
        _experiment("c", 1.0, models=("other",)),  # never admits this exchange
    ]
    exchange = _exchange()
    ids = (f"cap-{i}" for i in itertools.count())
    taken = 0
    for _ in range(2000):
        capture_id = next(ids)
        drawn_id = draw(exchange, experiments, new_id=functools.partial(str, capture_id))
        capture = make_capture(
            exchange.api,
            dict(exchange.request),
            RESPONSE,
            capture_id=capture_id,
            route=exchange.route,
            tags=exchange.tags,
        )
        # Sent exactly when the stage, drawing again from the same id, makes at least one pair of it.
        assert (drawn_id is not None) == bool(joins(capture, experiments)), capture_id
        taken += drawn_id is not None
    # 1 - 0.8 * 0.9 = 28% of the exchanges are sent: each experiment's share applied once, not twice.
    assert 0.24 < taken / 2000 < 0.32


def test_without_experiments_every_call_is_sent_and_a_paused_one_takes_none() -> None:
    exchange = _exchange()
    assert draw(exchange, []) is not None
    paused = _experiment("p", 1.0).model_copy(update={"paused": True})
    assert draw(exchange, [paused]) is None
