"""Pricing, the settings for the judge wrappers, and the stack the factory builds from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pairjudge.agents.core import judge_pair
from pairjudge.agents.judge import JudgeResponse
from pairjudge.agents.offline import OfflineJudge
from pairjudge.agents.policy import Policy
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.schemas import PairVerdict
from pairjudge.streams.config.settings import JudgeSettings, Settings, environ_for
from pairjudge.streams.judges.breaker import BreakerJudge
from pairjudge.streams.judges.cache import CachingJudge
from pairjudge.streams.judges.cost import CACHED_INPUT_TOKENS, ModelPrice, PricedJudge, PriceTable
from pairjudge.streams.judges.factory import build_judge_stack, cache_params, judge_answered
from pairjudge.streams.judges.http import ProbeResult
from pairjudge.streams.judges.openai import OpenAICompatibleJudge
from tests.unit.factories import make_pair, tone_reply

GPT = ModelPrice(input_per_mtok=2.5, output_per_mtok=10.0, cached_input_per_mtok=1.25)
TABLE = PriceTable.of({"judge-m": GPT, "judge-m-2024-08-06": ModelPrice(input_per_mtok=5.0, output_per_mtok=20.0)})


def response(model: str = "judge-m", *, inp: int | None = 1000, out: int | None = 500, **kw: object) -> JudgeResponse:
    return JudgeResponse(text="{}", model=model, input_tokens=inp, output_tokens=out, **kw)  # type: ignore[arg-type]


# --- prices -----------------------------------------------------------------------------------


def test_cost_from_tokens_and_prices() -> None:
    # 1000 in at $2.50/M + 500 out at $10/M
    assert TABLE.cost(response(), "judge-m") == pytest.approx(0.0025 + 0.005)


def test_provider_cache_reads_are_billed_at_the_cached_rate() -> None:
    with_reads = response(extra={CACHED_INPUT_TOKENS: 800})
    assert TABLE.cost(with_reads, "judge-m") == pytest.approx((200 * 2.5 + 800 * 1.25 + 500 * 10.0) / 1e6)
    no_cached_rate = PriceTable.of({"m": ModelPrice(input_per_mtok=2.0, output_per_mtok=0.0)})
    assert no_cached_rate.cost(response("m", extra={CACHED_INPUT_TOKENS: 800}), "m") == pytest.approx(0.002)


def test_anthropic_cache_reads_and_writes_are_billed_at_their_own_rates() -> None:
    claude = PriceTable.of(
        {
            "claude": ModelPrice(
                input_per_mtok=3.0, output_per_mtok=15.0, cached_input_per_mtok=0.3, cache_write_input_per_mtok=3.75
            )
        }
    )
    # input_tokens counts all input: 100 plain + 700 read + 200 written (the Anthropic judge's split).
    reply = response(
        "claude", inp=1000, out=100, extra={"cache_read_input_tokens": 700, "cache_creation_input_tokens": 200}
    )
    assert claude.cost(reply, "claude") == pytest.approx((100 * 3.0 + 700 * 0.3 + 200 * 3.75 + 100 * 15.0) / 1e6)


def test_the_answering_model_is_priced_first_then_the_requested_one() -> None:
    assert TABLE.cost(response("judge-m-2024-08-06"), "judge-m") == pytest.approx(0.005 + 0.01)
    assert TABLE.cost(response("judge-m-2099-01-01"), "judge-m") == pytest.approx(0.0075)  # falls back to the alias


def test_unknown_is_none_and_a_cache_hit_is_free() -> None:
    assert TABLE.cost(response("other"), "other") is None  # not in the table: unknown, not zero
    assert TABLE.cost(response(inp=None), "judge-m") is None  # no usage reported
    assert TABLE.cost(response(out=None), "judge-m") is None
    assert TABLE.cost(response("other", cached=True), "other") == 0.0


def test_prices_must_be_non_negative() -> None:
    with pytest.raises(ValueError, match="greater than or equal"):
        ModelPrice(input_per_mtok=-1, output_per_mtok=1)


async def test_priced_judge_puts_the_cost_on_every_reply_and_the_verdict_sums_them() -> None:
    pair = make_pair()
    inner = ScriptedJudge(
        lambda r: tone_reply("A" if r.order == "AB" else "B"),
        model="judge-m",
        input_tokens=1000,
        output_tokens=500,
    )
    out = (await judge_pair(pair, PricedJudge(inner, TABLE), Policy())).outcome
    assert isinstance(out, PairVerdict)
    assert [o.cost_usd for o in out.orderings] == [pytest.approx(0.0075)] * 2
    assert out.cost_usd == pytest.approx(0.015)


# --- settings ---------------------------------------------------------------------------------


def test_judge_settings_defaults() -> None:
    s = JudgeSettings()
    assert (s.cache_enabled, s.cache_dir, s.cache_size_mb, s.cache_ttl_s) == (
        True,
        Path(".pairjudge-cache"),
        512,
        None,
    )
    assert (s.breaker_failures, s.breaker_cooldown_s, s.breaker_max_cooldown_s, s.prices) == (5, 5.0, 60.0, {})
    assert s.breaker_probe_interval_s == 2.0


def test_prices_come_from_the_environment_as_json_and_travel_to_child_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "PAIRJUDGE_JUDGE__PRICES", json.dumps({"gpt-4o": {"input_per_mtok": 2.5, "output_per_mtok": 10}})
    )
    monkeypatch.setenv("PAIRJUDGE_JUDGE__BREAKER_FAILURES", "7")
    settings = Settings()
    assert settings.judge.prices == {"gpt-4o": ModelPrice(input_per_mtok=2.5, output_per_mtok=10)}
    assert settings.judge.breaker_failures == 7
    env = environ_for(settings)
    assert json.loads(env["PAIRJUDGE_JUDGE__PRICES"]) == {
        "gpt-4o": {
            "input_per_mtok": 2.5,
            "output_per_mtok": 10.0,
            "cached_input_per_mtok": None,
            "cache_write_input_per_mtok": None,
        }
    }
    for name, value in env.items():
        if name.startswith("PAIRJUDGE_"):
            monkeypatch.setenv(name, value)
    assert Settings() == settings


# --- the factory's stack ----------------------------------------------------------------------


async def test_offline_stack_has_a_breaker_and_pricing_but_no_cache(tmp_path: Path) -> None:
    stack = build_judge_stack(JudgeSettings(cache_dir=tmp_path / "c"))
    assert stack.cache is None
    assert stack.caching is None
    assert stack.breaker is not None
    assert isinstance(stack.judge, BreakerJudge)
    assert isinstance(stack.judge.inner, PricedJudge)
    assert isinstance(stack.inner, OfflineJudge)
    assert not (tmp_path / "c").exists()
    decision = await judge_pair(make_pair(), stack.judge, Policy())
    assert all(c.cost_usd is None for c in decision.calls)  # no price for the heuristic judge
    await stack.aclose()


async def test_http_stack_is_cache_over_breaker_over_pricing_over_the_adapter(tmp_path: Path) -> None:
    settings = JudgeSettings(
        kind="openai",
        base_url="https://user:secret@judge.example:8443/v1/?token=abc",
        model="gpt-4o",
        seed=7,
        cache_dir=tmp_path / "c",
        cache_size_mb=8,
        breaker_failures=4,
        prices={"gpt-4o": ModelPrice(input_per_mtok=2.5, output_per_mtok=10)},
    )
    stack = build_judge_stack(settings)
    try:
        assert isinstance(stack.judge, CachingJudge)
        assert stack.caching is stack.judge
        breaker_judge = stack.judge.inner
        assert isinstance(breaker_judge, BreakerJudge)
        assert breaker_judge.breaker is stack.breaker
        priced = breaker_judge.inner
        assert isinstance(priced, PricedJudge)
        assert priced.table.prices == settings.prices
        assert isinstance(stack.inner, OpenAICompatibleJudge)
        assert priced.inner is stack.inner
        assert stack.cache is not None
        assert stack.cache.directory == tmp_path / "c"
        assert (tmp_path / "c").is_dir()
        assert (stack.judge.identity.model, stack.judge.identity.provider) == ("gpt-4o", "openai-compatible")
        # The endpoint is in the key, without its credentials or query.
        params = stack.judge.cache_params()
        assert params["endpoint"] == "https://judge.example:8443/v1"
        assert (params["seed"], params["max_tokens"], params["kind"]) == (7, 1024, "openai")
        assert "secret" not in json.dumps(params)
        assert "abc" not in json.dumps(params)
    finally:
        await stack.aclose()


def test_two_endpoints_under_one_model_name_do_not_share_keys() -> None:
    a = cache_params(JudgeSettings(kind="openai", base_url="http://127.0.0.1:8080/v1"))
    b = cache_params(JudgeSettings(kind="openai", base_url="http://127.0.0.1:8081/v1"))
    assert a != b


async def test_cache_can_be_switched_off(tmp_path: Path) -> None:
    stack = build_judge_stack(JudgeSettings(kind="openai", cache_enabled=False, cache_dir=tmp_path / "c"))
    try:
        assert isinstance(stack.judge, BreakerJudge)
        assert stack.cache is None
        assert not (tmp_path / "c").exists()
    finally:
        await stack.aclose()


def test_the_stack_exposes_the_outermost_judge() -> None:
    judge = build_judge_stack(JudgeSettings()).judge
    assert isinstance(judge, BreakerJudge)
    assert judge.identity == OfflineJudge().identity


# --- the breaker's check --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "up"),
    [
        (ProbeResult(200), True),
        (ProbeResult(404, "no model list"), True),  # llama.cpp builds without /models still answer
        (ProbeResult(401, "bad key"), True),  # the server answered; a bad key is not an outage
        (ProbeResult(None, failure="connection refused"), False),
        (ProbeResult(None, failure="no answer within 2 s"), False),
        (ProbeResult(503, "overloaded"), False),
        (ProbeResult(502), False),
        (ProbeResult(429, "slow down"), False),
        (ProbeResult(408), False),
    ],
)
def test_a_check_counts_as_up_what_the_adapter_would_not_retry(result: ProbeResult, up: bool) -> None:
    assert judge_answered(result) is up


async def test_http_judges_get_a_checking_breaker_the_offline_judge_and_interval_0_do_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAIRJUDGE_JUDGE__BREAKER_PROBE_INTERVAL_S", "0.5")
    assert Settings().judge.breaker_probe_interval_s == 0.5
    offline = build_judge_stack(JudgeSettings())
    assert offline.breaker is not None
    assert not offline.breaker.checks_enabled
    for interval, enabled in ((2.0, True), (0.0, False)):
        settings = JudgeSettings(kind="openai", breaker_probe_interval_s=interval, cache_dir=tmp_path / "c")
        stack = build_judge_stack(settings)
        try:
            assert stack.breaker is not None
            assert stack.breaker.checks_enabled is enabled
        finally:
            await stack.aclose()
