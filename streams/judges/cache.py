"""A judge wrapped with the persistent response cache (docs/design.md §5): the same prompt to the same
judge is paid for once. The key and the stored value are ``streams.judges.cache_codec``'s; the store,
two tiers over one directory shared by a host's workers, is ``streams.judges.cache_store``'s.

``CachingJudge`` wraps a judge:

* The key is ``cache_codec.request_key``: everything that shapes the reply, the judge's parameters
  taken from the ``params`` given or the inner judge's optional ``cache_params()``.
* Only successful replies whose text is one JSON object (optionally in one markdown fence, as the
  validator accepts) are stored. Exceptions are never cached, nor free text such as a refusal, so a
  later ask can get a different answer. A JSON object that later fails validation *is* cached: the
  re-ask that follows has its own key, so a replay follows the same path rather than a different one.
* A hit returns the stored reply with ``cached=True``, ``cost_usd=0.0``, the token counts it was first
  paid for (for information) and the lookup's own latency.
* Identical requests in flight in one process are coalesced (single flight): the first goes to the
  cache and the judge, the others wait for its result and get it as a cache hit (or its exception).
* A **fresh** request (``JudgeRequest.fresh``: a canary pair's, seed 000) bypasses all of this: it
  goes to the judge, is not coalesced, and its reply is **not stored**. A canary round re-sends the
  same prompts to see how the judge answers *now*; served from the cache, ``canary_accuracy`` could
  not move when a provider re-points a model alias. Not storing is deliberate too: the cache's
  contents stay production's (a redelivered pair is served the reply it was first judged with, not
  one a canary fetched later), and a canary round does not churn the store or evict production's
  entries. A canary that shows drift is the cue to clear the cache or set ``cache_ttl_s``.
* The store is private to its owner: the directory is ``0o700`` and its files ``0o600`` whatever the
  umask, and an existing store with wider permissions is tightened (logged; see
  ``streams.security.files``). Cached replies quote the outputs judged.
* A cache that fails (disk full, lock timeout, corrupt entry) degrades to a miss or an unsaved reply
  and is logged; it never fails the judge call. A reply that could not be written stays in memory.

At temperature > 0 the cache freezes one sample per prompt; that is the point (judge once), but worth
knowing when studying judge variance: switch the cache off for that.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import anyio.to_thread

from pairjudge.agents.judge import Judge, JudgeRequest, JudgeResponse, JudgeWrapper, cache_params_of
from pairjudge.streams.judges.cache_codec import CachedReply, canonical, is_json_object, request_key
from pairjudge.streams.judges.cache_store import ResponseCache

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CacheStats:
    #: Replies served from the cache (memory or disk).
    hits: int = 0
    #: Lookups that went on to the judge.
    misses: int = 0
    #: Calls that shared the result of an identical call in flight (single flight).
    coalesced: int = 0
    #: Replies handed to the cache to store (in memory at once, on disk once the writer commits).
    stored: int = 0
    #: Cache reads or writes that failed and were treated as a miss / skipped, including the
    #: writer's failed writes (of the ``ResponseCache``, shared by every judge sharing that object).
    errors: int = 0
    #: Lookups that read the disk in a worker thread (the only lookups that hop threads).
    disk_reads: int = 0
    #: Fresh requests (canaries) sent to the judge without looking in the cache or storing the reply.
    bypassed: int = 0


@dataclass(slots=True)
class _Flight:
    """One leader's call that identical requests wait for."""

    done: anyio.Event
    response: JudgeResponse | None = None
    error: Exception | None = None


class CachingJudge(JudgeWrapper):
    """Wraps any judge with a ``ResponseCache`` and single-flight coalescing (see the module docstring)."""

    def __init__(self, inner: Judge, cache: ResponseCache, *, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(inner)
        self._cache = cache
        # Merge: explicit params (the factory's view of the settings) over what the judge reports.
        self._params = {**cache_params_of(inner), **dict(params or {})}
        canonical(self._params)  # fail now, not on the first call, if a param is not JSON-able
        self._inflight: dict[str, _Flight] = {}
        self._stats = CacheStats()

    @property
    def cache(self) -> ResponseCache:
        return self._cache

    @property
    def stats(self) -> CacheStats:
        return dataclasses.replace(self._stats, errors=self._stats.errors + self._cache.writer_stats.failed)

    def cache_params(self) -> dict[str, Any]:
        return dict(self._params)

    def key_for(self, request: JudgeRequest) -> str:
        return request_key(self._inner, request, self._params)

    def _count(self, **deltas: int) -> None:
        self._stats = dataclasses.replace(
            self._stats, **{name: getattr(self._stats, name) + delta for name, delta in deltas.items()}
        )

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        if request.fresh:
            self._count(bypassed=1)
            response = await self._inner.complete(request)
            return dataclasses.replace(response, extra={**response.extra, "cache": "bypassed"})
        key = self.key_for(request)
        started = time.perf_counter()
        while (flight := self._inflight.get(key)) is not None:
            await flight.done.wait()
            if flight.response is not None:
                self._count(coalesced=1)
                return _as_hit(flight.response, time.perf_counter() - started, "coalesced")
            if flight.error is not None:
                raise flight.error  # the same failure the identical call got, as an awaited future would
            # The leader was cancelled without a result: loop, and lead if nobody else does.
        flight = _Flight(anyio.Event())
        self._inflight[key] = flight
        try:
            flight.response = await self._lead(key, request, started)
            return flight.response
        except Exception as exc:
            flight.error = exc
            raise
        finally:
            del self._inflight[key]
            flight.done.set()

    async def _lead(self, key: str, request: JudgeRequest, started: float) -> JudgeResponse:
        stored = await self._lookup(key)
        if stored is not None:
            self._count(hits=1)
            response = JudgeResponse(
                text=stored.text,
                model=stored.model,
                input_tokens=stored.input_tokens,
                output_tokens=stored.output_tokens,
                extra={"original_latency_s": stored.latency_s, "stored_at": stored.stored_at},
            )
            return _as_hit(response, time.perf_counter() - started, "hit")
        self._count(misses=1)
        response = await self._inner.complete(request)
        if is_json_object(response.text):
            reply = CachedReply(
                text=response.text,
                model=response.model,
                input_tokens=response.input_tokens,
                output_tokens=response.output_tokens,
                latency_s=response.latency_s,
                stored_at=time.time(),
            )
            self._store(key, reply)
        return dataclasses.replace(response, extra={**response.extra, "cache": "miss"})

    async def _lookup(self, key: str) -> CachedReply | None:
        # Memory and the key set first, on the loop: a miss that is not on disk never leaves it.
        try:
            stored = self._cache.recall(key)
            if stored is not None or not self._cache.might_be_on_disk(key):
                return stored
        except Exception as exc:  # noqa: BLE001 - any cache fault is a miss, never a failed judge call
            self._count(errors=1)
            log.warning("response cache lookup failed (%s: %s); treating as a miss", type(exc).__name__, exc)
            return None
        self._count(disk_reads=1)
        try:
            return await anyio.to_thread.run_sync(self._cache.get, key)
        except Exception as exc:  # noqa: BLE001 - any cache fault is a miss, never a failed judge call
            self._count(errors=1)
            log.warning("response cache read failed (%s: %s); treating as a miss", type(exc).__name__, exc)
            return None

    def _store(self, key: str, reply: CachedReply) -> None:
        try:
            self._cache.put(key, reply)  # memory and a queue: no I/O, no thread hop
        except Exception as exc:  # noqa: BLE001 - a reply we could not store is still a good reply
            self._count(errors=1)
            log.warning("response cache write failed (%s: %s); reply not cached", type(exc).__name__, exc)
            return
        self._count(stored=1)


def _as_hit(response: JudgeResponse, latency_s: float, how: Literal["hit", "coalesced"]) -> JudgeResponse:
    """``response`` as served without a judge call of its own: cached, free, with its own latency."""
    return dataclasses.replace(
        response,
        cached=True,
        cost_usd=0.0,
        latency_s=latency_s,
        extra={**response.extra, "cache": how},
    )
