"""Build the configured judge. The offline judge is the embedded default; it needs no network.

``build_judge_stack`` wraps the adapter, innermost first::

    adapter -> PricedJudge -> BreakerJudge -> CachingJudge (outermost)

Pricing sits next to the adapter so it prices exactly the replies that were paid for. The cache is
outermost so a hit never touches the breaker (cached replies are served even while the judge is down)
and is never priced (it costs 0.0). The breaker sits between them, so it sees only real calls. The
offline judge gets no cache (it is cheap and deterministic) but the same breaker and pricing, so the
edges need no special case.

An open breaker over an HTTP judge checks it with a GET of its model list (``breaker_check``) every
``breaker_probe_interval_s`` once its cooldown has grown, so a judge back from a long outage is used
again within seconds; see ``streams.judges.breaker``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
import httpx

from pairjudge.agents.judge import Judge
from pairjudge.agents.offline import OfflineJudge
from pairjudge.streams.config.settings import JudgeSettings
from pairjudge.streams.judges.breaker import BreakerJudge, Check, CircuitBreaker
from pairjudge.streams.judges.cache import CachingJudge
from pairjudge.streams.judges.cache_store import ResponseCache
from pairjudge.streams.judges.cost import PricedJudge, PriceTable
from pairjudge.streams.judges.http import EndpointJudge, ProbeResult
from pairjudge.streams.judges.injection_screen import HttpInjectionScreen
from pairjudge.streams.judges.wire import RETRIABLE_STATUSES, public_url


def build_inner_judge(settings: JudgeSettings) -> Judge:
    """The bare judge adapter for ``settings.kind``, without the resilience and cost wrappers."""
    if settings.kind == "offline":
        return OfflineJudge()
    if settings.kind == "anthropic":
        from pairjudge.streams.judges.anthropic import AnthropicJudge

        # response_format and seed do not apply: the Messages API has no seed, and the reply schema
        # always goes out as a forced tool.
        return AnthropicJudge(
            base_url=settings.base_url,
            model=settings.model,
            version=settings.version,
            api_key=settings.resolved_api_key(),
            anthropic_version=settings.anthropic_version,
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
            connect_timeout=settings.connect_timeout_s,
            read_timeout=settings.read_timeout_s,
            max_retries=settings.max_retries,
            max_concurrency=settings.max_concurrency,
            allow_cleartext_key=settings.allow_cleartext_key,
        )
    from pairjudge.streams.judges.openai import OpenAICompatibleJudge

    return OpenAICompatibleJudge(
        base_url=settings.base_url,
        model=settings.model,
        version=settings.version,
        api_key=settings.resolved_api_key(),
        response_format=settings.response_format,
        logprobs=settings.logprobs,
        top_logprobs=settings.top_logprobs,
        temperature=settings.temperature,
        seed=settings.seed,
        max_tokens=settings.max_tokens,
        connect_timeout=settings.connect_timeout_s,
        read_timeout=settings.read_timeout_s,
        max_retries=settings.max_retries,
        max_concurrency=settings.max_concurrency,
        allow_cleartext_key=settings.allow_cleartext_key,
    )


@dataclass(frozen=True, slots=True)
class JudgeStack:
    """The built judge and the parts the stream edge needs to reach."""

    #: The outermost judge: what the pipeline calls.
    judge: Judge
    #: The bare adapter (closed by ``aclose``).
    inner: Judge
    #: For backpressure: the worker stops taking pairs while it is open.
    breaker: CircuitBreaker | None
    #: The response cache's store, when caching is on.
    cache: ResponseCache | None
    #: The caching wrapper, for its hit/miss statistics.
    caching: CachingJudge | None
    #: The injection screen's HTTP client, when one is configured (``streams.judges.panel.build_panel``).
    screen: HttpInjectionScreen | None = None

    async def aclose(self) -> None:
        """Close the adapter's HTTP client (when it has one), the screen's, and the cache's database connection."""
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()
        if self.screen is not None:
            await self.screen.aclose()
        if self.cache is not None:
            await anyio.to_thread.run_sync(self.cache.close)


def cache_params(settings: JudgeSettings) -> dict[str, Any]:
    """The settings that shape a reply beyond model, version, temperature and prompt (see ``request_key``).

    The endpoint is included because local servers (llama.cpp, Ollama) answer with whatever model they
    loaded, whatever name is asked for: two servers under one model name must not share replies.
    """
    return {
        "kind": settings.kind,
        # The adapters' own cleaner (no userinfo, query, fragment or trailing slash; IPv6 kept in brackets).
        "endpoint": public_url(httpx.URL(settings.base_url)),
        "response_format": settings.response_format,
        "seed": settings.seed,
        "max_tokens": settings.max_tokens,
    }


#: The shortest wait for a breaker check's answer (below).
MIN_CHECK_TIMEOUT_S = 1.0


def judge_answered(result: ProbeResult) -> bool:
    """Whether a GET of the model list says the judge is up: any answer but a 5xx, 408 or 429.

    A 404 (a server without a model list) or a 401 still proves the server answers; what the adapter
    would retry as an outage (no answer, a 5xx, 408, 429) does not.
    """
    status = result.status
    return status is not None and status < 500 and status not in RETRIABLE_STATUSES


def breaker_check(inner: Judge, settings: JudgeSettings) -> Check | None:
    """The open breaker's cheap check of ``inner`` (a GET of its model list); None for a judge without one.

    It waits at most the check interval (at least ``MIN_CHECK_TIMEOUT_S``): a check slower than that
    only delays the next one, and a judge that cannot list its models that fast is not answering well.
    """
    if not isinstance(inner, EndpointJudge) or settings.breaker_probe_interval_s <= 0:
        return None
    endpoint = inner
    timeout_s = max(settings.breaker_probe_interval_s, MIN_CHECK_TIMEOUT_S)

    async def check() -> bool:
        return judge_answered(await endpoint.probe_models(timeout_s=timeout_s))

    return check


def build_judge_stack(settings: JudgeSettings, *, clock: Callable[[], float] | None = None) -> JudgeStack:
    """The configured judge wrapped for cost, resilience and caching (order in the module docstring)."""
    inner = build_inner_judge(settings)
    check = breaker_check(inner, settings)
    breaker = CircuitBreaker(
        failure_threshold=settings.breaker_failures,
        cooldown_s=settings.breaker_cooldown_s,
        max_cooldown_s=max(settings.breaker_max_cooldown_s, settings.breaker_cooldown_s),
        check=check,
        check_interval_s=settings.breaker_probe_interval_s,
        name=inner.identity.model,
        clock=clock or time.monotonic,
    )
    judge: Judge = BreakerJudge(PricedJudge(inner, PriceTable.of(settings.prices)), breaker)
    cache: ResponseCache | None = None
    caching: CachingJudge | None = None
    if settings.cache_enabled and settings.kind != "offline" and not inner.identity.heuristic:
        cache = ResponseCache(
            settings.cache_dir,
            size_limit_bytes=settings.cache_size_mb * 1024 * 1024,
            ttl_s=settings.cache_ttl_s,
        )
        caching = CachingJudge(judge, cache, params=cache_params(settings))
        judge = caching
    return JudgeStack(judge=judge, inner=inner, breaker=breaker, cache=cache, caching=caching)
