"""A persistent response cache for judges (DESIGN §5): the same prompt to the same judge is paid for once.

``ResponseCache`` is a ``diskcache`` store (SQLite in WAL mode, plus files for large values) in one
directory. Every worker on a host that opens the same directory shares its entries, and they survive
restarts. It is bounded by ``size_limit_bytes``; past the bound, entries are evicted
**least-recently-stored** first. We chose that over least-recently-used on purpose: under LRU every
*read* is also a write (it stamps the access time), so workers sharing the SQLite file would serialise
on its write lock for every hit; under LRS a hit is a pure read. What repeats in this workload
(redeliveries after a rebalance, re-sent duplicates, re-judging after an outage) repeats soon after it
was stored, so the storing time is a good proxy for usefulness.

``CachingJudge`` wraps a judge:

* The key is sha256 over a canonical JSON of everything that shapes the reply: provider, model,
  version and temperature; the rendered messages; the response schema and its name; the forced-choice
  flag; and the judge's parameters (seed, max_tokens, response format, endpoint, ...) from the
  ``params`` given or the inner judge's optional ``cache_params()``. ``attempt`` is not in the key: a
  re-ask's messages already differ (they carry the validation error).
* Only successful replies whose text is one JSON object (optionally in one markdown fence, as the
  validator accepts) are stored. Exceptions are never cached, nor free text such as a refusal, so a
  later ask can get a different answer. A JSON object that later fails validation *is* cached: the
  re-ask that follows has its own key, so a replay follows the same path rather than a different one.
* A hit returns the stored reply with ``cached=True``, ``cost_usd=0.0``, the token counts it was first
  paid for (for information) and the lookup's own latency.
* Identical requests in flight in one process are coalesced (single flight): the first goes to the
  cache and the judge, the others wait for its result and get it as a cache hit (or its exception).
* The store is private to its owner: the directory is ``0o700`` and its files ``0o600`` whatever the
  umask, and an existing store with wider permissions is tightened (logged; see
  ``streams.judges.files``). Cached replies quote the outputs judged.
* Disk I/O runs in worker threads (``anyio.to_thread``), so the event loop never blocks on SQLite. A
  cache that fails (disk full, lock timeout, corrupt entry) degrades to a miss and is logged; it never
  fails the judge call.

At temperature > 0 the cache freezes one sample per prompt; that is the point (judge once), but worth
knowing when studying judge variance: switch the cache off for that.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import anyio
import anyio.to_thread
import diskcache
from diskcache.core import DBNAME, MODE_PICKLE, UNKNOWN

from agents.judge import Judge, JudgeRequest, JudgeResponse, JudgeWrapper, cache_params_of
from agents.validation import strip_fence
from streams.judges.files import private_dir, private_file, tighten_if_exists, tighten_tree

log = logging.getLogger(__name__)

#: Bumped whenever what goes into a key changes, so old entries simply stop matching.
KEY_FORMAT: Final = 1
#: Bumped whenever the stored value's shape changes; entries of another format read as misses.
VALUE_FORMAT: Final = 1

EvictionPolicy = Literal["least-recently-stored", "least-recently-used"]


def _canonical(material: Mapping[str, Any]) -> bytes:
    # ensure_ascii: the bytes hashed never depend on how (or whether) odd Unicode can be encoded.
    return json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def request_key(judge: Judge, request: JudgeRequest, params: Mapping[str, Any]) -> str:
    """The cache key of ``request`` to ``judge``: a sha256 hex digest (see the module docstring)."""
    who = judge.identity
    material = {
        "key_format": KEY_FORMAT,
        "provider": who.provider,
        "model": who.model,
        "version": who.version,
        "temperature": who.temperature,
        "messages": [[m.role, m.content] for m in request.messages],
        "response_schema": request.response_schema,
        "schema_name": request.schema_name,
        "forced_choice": request.forced_choice,
        "params": dict(params),
    }
    return hashlib.sha256(_canonical(material)).hexdigest()


def is_json_object(text: str) -> bool:
    """True when ``text`` is one JSON object, bare or in one markdown fence (what the validator reads)."""
    try:
        return isinstance(json.loads(strip_fence(text)), dict)
    except (ValueError, RecursionError):
        return False


@dataclass(frozen=True, slots=True)
class CachedReply:
    """What is stored per key: enough to rebuild the ``JudgeResponse`` it came from."""

    text: str
    model: str
    input_tokens: int | None
    output_tokens: int | None
    #: The original call's latency, for information.
    latency_s: float
    #: Wall-clock time of storing (seconds since the epoch).
    stored_at: float

    def encode(self) -> str:
        # JSON text, not pickle: diskcache stores a str as is, and ``_TextOnlyDisk`` refuses to
        # unpickle anything, whoever else could write to the directory.
        return json.dumps({"format": VALUE_FORMAT, **dataclasses.asdict(self)}, separators=(",", ":"))

    @classmethod
    def decode(cls, raw: object) -> CachedReply | None:
        """The stored reply, or None for anything not written by this version of this class."""
        if not isinstance(raw, str):
            return None
        try:
            data = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(data, dict) or data.get("format") != VALUE_FORMAT:
            return None
        text, model, stored_at, latency = (
            data.get("text"),
            data.get("model"),
            data.get("stored_at"),
            data.get("latency_s"),
        )
        tokens = data.get("input_tokens"), data.get("output_tokens")
        if not (isinstance(text, str) and isinstance(model, str)):
            return None
        if not all(t is None or (isinstance(t, int) and not isinstance(t, bool)) for t in tokens):
            return None
        if not (isinstance(stored_at, int | float) and isinstance(latency, int | float)):
            return None
        return cls(text, model, tokens[0], tokens[1], float(latency), float(stored_at))


class _TextOnlyDisk(diskcache.Disk):  # type: ignore[misc]  # diskcache is untyped
    """diskcache's serialiser, minus unpickling: a pickled value (not written by us) reads as None.

    Loading a pickle runs code chosen by whoever wrote it; a cache directory is not a place to trust
    that much. Our keys and values are str, which diskcache stores without pickling.
    """

    def fetch(self, mode: int, filename: str | None, value: object, read: bool) -> object:
        if mode == MODE_PICKLE:
            return None
        return super().fetch(mode, filename, value, read)

    def get(self, key: object, raw: bool) -> object:
        if not raw:
            raise ValueError("refusing to unpickle a cache key")
        return super().get(key, raw)

    def store(self, value: object, read: bool, key: object = UNKNOWN) -> tuple[Any, ...]:
        # A large value goes to a file in two levels of sub-directories, created by diskcache with the
        # umask's modes; the cache directory (0o700) already shuts others out, this keeps each part private.
        result: tuple[Any, ...] = super().store(value, read, key=key)
        filename = result[2]
        if isinstance(filename, str):
            full = Path(self._directory) / filename
            for part in (full, full.parent, full.parent.parent):
                tighten_if_exists(part, what="response cache file", quiet=True)
        return result


class ResponseCache:
    """A persistent, size-bounded store of judge replies in ``directory`` (see the module docstring).

    Thread-safe (diskcache keeps one SQLite connection per thread) and process-safe (SQLite locking),
    so several ``CachingJudge`` instances, in one process or in several workers, may share a directory.
    The methods here are blocking; ``CachingJudge`` calls them from worker threads.
    """

    def __init__(
        self,
        directory: Path | str,
        *,
        size_limit_bytes: int = 512 * 1024 * 1024,
        ttl_s: float | None = None,
        eviction_policy: EvictionPolicy = "least-recently-stored",
        timeout_s: float = 5.0,
    ) -> None:
        if size_limit_bytes < 1:
            raise ValueError("size_limit_bytes must be positive")
        if ttl_s is not None and ttl_s <= 0:
            raise ValueError("ttl_s must be positive or None")
        self._directory = Path(directory)
        self._ttl_s = ttl_s
        # Private before diskcache touches it: the directory 0o700, the database (which SQLite's -wal
        # and -shm files copy their mode from) created 0o600 here rather than by SQLite with the umask's.
        private_dir(self._directory)
        private_file(self._directory / DBNAME, what="response cache database")
        tighten_tree(self._directory, what="response cache directory")
        # ``timeout`` is SQLite's busy timeout: how long a writer waits for another process's lock
        # before diskcache raises Timeout (which we treat as a miss or a skipped store).
        self._store = diskcache.Cache(
            str(self._directory),
            timeout=timeout_s,
            size_limit=size_limit_bytes,
            eviction_policy=eviction_policy,
            disk=_TextOnlyDisk,
        )
        for suffix in ("-wal", "-shm"):
            tighten_if_exists(self._directory / (DBNAME + suffix), what="response cache database")

    @property
    def directory(self) -> Path:
        return self._directory

    def get(self, key: str) -> CachedReply | None:
        return CachedReply.decode(self._store.get(key, default=None))

    def put(self, key: str, reply: CachedReply) -> None:
        self._store.set(key, reply.encode(), expire=self._ttl_s)

    def delete(self, key: str) -> None:
        self._store.delete(key)

    def volume(self) -> int:
        """Estimated bytes on disk (SQLite pages plus value files), what the size limit bounds."""
        volume: int = self._store.volume()
        return volume

    def __len__(self) -> int:
        return len(self._store)

    def __contains__(self, key: object) -> bool:
        return key in self._store

    def close(self) -> None:
        self._store.close()


@dataclass(frozen=True, slots=True)
class CacheStats:
    #: Replies served from disk.
    hits: int = 0
    #: Lookups that went on to the judge.
    misses: int = 0
    #: Calls that shared the result of an identical call in flight (single flight).
    coalesced: int = 0
    #: Replies written to the cache.
    stored: int = 0
    #: Cache reads or writes that failed and were treated as a miss / skipped.
    errors: int = 0


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
        _canonical(self._params)  # fail now, not on the first call, if a param is not JSON-able
        self._inflight: dict[str, _Flight] = {}
        self._stats = CacheStats()

    # --- the Judge protocol -------------------------------------------------------------------

    # --- extras ---------------------------------------------------------------------------------

    @property
    def cache(self) -> ResponseCache:
        return self._cache

    @property
    def stats(self) -> CacheStats:
        return self._stats

    def cache_params(self) -> dict[str, Any]:
        return dict(self._params)

    def key_for(self, request: JudgeRequest) -> str:
        return request_key(self._inner, request, self._params)

    def _count(self, **deltas: int) -> None:
        self._stats = dataclasses.replace(
            self._stats, **{name: getattr(self._stats, name) + delta for name, delta in deltas.items()}
        )

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
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
        stored = await self._read(key)
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
            await self._write(key, reply)
        return dataclasses.replace(response, extra={**response.extra, "cache": "miss"})

    async def _read(self, key: str) -> CachedReply | None:
        try:
            return await anyio.to_thread.run_sync(self._cache.get, key)
        except Exception as exc:  # noqa: BLE001 - any cache fault is a miss, never a failed judge call
            self._count(errors=1)
            log.warning("response cache read failed (%s: %s); treating as a miss", type(exc).__name__, exc)
            return None

    async def _write(self, key: str, reply: CachedReply) -> None:
        try:
            await anyio.to_thread.run_sync(self._cache.put, key, reply)
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
