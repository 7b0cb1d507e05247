"""The response cache's store (docs/design.md §5): replies by key, in memory and on disk.

``ResponseCache`` is two tiers over one directory:

* **In memory**, a bounded map of recent replies (``memory_limit_bytes``, by default the smaller of
  32 MiB and the disk bound), checked first on the event loop with no thread hop. It evicts in the
  same order as the disk store (below), so it never keeps what the disk policy would drop first.
* **On disk**, a ``diskcache`` store (SQLite in WAL mode, plus files for large values). Every worker
  on a host that opens the same directory shares its entries, and they survive restarts. It is
  bounded by ``size_limit_bytes``; past the bound, entries are evicted **least-recently-stored**
  first. We chose that over least-recently-used on purpose: under LRU every *read* is also a write
  (it stamps the access time), so workers sharing the SQLite file would serialise on its write lock
  for every hit; under LRS a hit is a pure read. What repeats in this workload (redeliveries after a
  rebalance, re-sent duplicates, re-judging after an outage) repeats soon after it was stored, so the
  storing time is a good proxy for usefulness.

Why two tiers and one writer: a hop to a worker thread costs a few hundred microseconds of CPU, and
the old cache paid it for every lookup and every store, so with all lookups missing the worker was
*slower* with the cache on than off; and every store was its own SQLite transaction, contending with
the other workers' for the write lock (they timed out under load). Now:

* A **lookup** checks memory (and the writes still queued), then a **set of the keys on disk**: a
  key in neither is a miss that costs no thread hop and no I/O. Only a key on disk and not in memory
  (stored by an earlier run, by another worker, or evicted from memory) is read in a worker thread.
  The key set is loaded once at open, by the writer thread (until it is loaded, every miss is looked
  up on disk, as before), and kept up to date by our own writes. Keys are held as their 64-bit
  ``hash()`` in a sorted ``array`` (8 bytes a key) plus a set of this run's additions; a collision
  only costs one needless disk read.
* **Keys another worker stores after we loaded the set are not seen** until the set is reloaded:
  every ``key_refresh_s`` (default 5 minutes) and whenever our own additions outgrow it. Missing one
  costs a judge call that a shared directory could have saved, never a wrong answer: we accept that
  rather than look on disk for every miss. A disk-evicted or expired key still in the set costs one
  disk read that misses.
* A **store** puts the reply in memory and queues it; one writer thread per cache drains the queue
  in batches, each batch one SQLite transaction, so the event loop never waits on SQLite and this
  process's writes never contend with each other. A few milliseconds' delay (``batch_delay_s``)
  lets a batch fill under load. At most ``max_pending`` writes wait; beyond that a reply is kept in
  memory only (counted and logged as a write failure). ``close()`` (and ``flush()``) write what is
  queued; a cache left open is flushed at interpreter exit.

Why one module over 500 lines: a sixth of it is this description, and the memory tier, the key set and
the writer thread share one consistency argument (what a lookup may miss, when a write is visible) that
is checked more easily in one place than across files.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import threading
import time
from array import array
from bisect import bisect_left
from collections import OrderedDict
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Final, Literal

import diskcache
from diskcache.core import DBNAME, MODE_PICKLE, UNKNOWN

from pairjudge.streams.judges.cache_codec import CachedReply
from pairjudge.streams.security.files import private_dir, private_file, tighten_if_exists, tighten_tree

log = logging.getLogger(__name__)

EvictionPolicy = Literal["least-recently-stored", "least-recently-used"]


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


#: A rough per-entry cost in memory beyond the reply's text (the objects, the map's node, the key).
_ENTRY_OVERHEAD: Final = 400
#: Writes per SQLite transaction at most: a batch holds the write lock that other workers wait for.
_MAX_BATCH: Final = 256
#: Warn about a writer that cannot keep up at most this often (seconds).
_DROP_WARNING_EVERY_S: Final = 60.0


@dataclass(frozen=True, slots=True)
class _Entry:
    reply: CachedReply
    #: ``time.time()`` after which the entry is gone (diskcache's clock), or None.
    expire_at: float | None
    #: Approximate bytes it holds in memory, what ``memory_limit_bytes`` bounds.
    size: int


class _KeySet:
    """Which keys are on disk, without a thread hop: a sorted array of hashes plus this run's additions.

    ``hash()`` of a str is stable within a process (that is all we need: the set is never persisted)
    and cached on the str object, so a membership test is one hash lookup and a bisect. Only the
    writer thread builds or adds; readers on other threads only test membership.
    """

    __slots__ = ("_added", "_sorted")

    def __init__(self, hashes: list[int]) -> None:
        hashes.sort()
        self._sorted = array("q", hashes)
        self._added: set[int] = set()

    def __contains__(self, key: str) -> bool:
        h = hash(key)
        if h in self._added:
            return True
        loaded = self._sorted
        i = bisect_left(loaded, h)
        return i < len(loaded) and loaded[i] == h

    def add(self, key: str) -> None:
        self._added.add(hash(key))

    @property
    def loaded(self) -> int:
        return len(self._sorted)

    @property
    def additions(self) -> int:
        return len(self._added)


@dataclass(frozen=True, slots=True)
class WriterStats:
    """What the background writer did since the cache was opened."""

    #: Replies committed to disk.
    written: int = 0
    #: Replies not written: a failed batch (lock timeout, read-only or full disk) or a full queue.
    failed: int = 0
    #: Batches committed (one SQLite transaction each).
    batches: int = 0
    #: Times the set of keys on disk was (re)loaded.
    key_loads: int = 0


class ResponseCache:
    """A persistent, size-bounded store of judge replies in ``directory`` (see the module docstring).

    Thread-safe and process-safe (SQLite locking): several ``CachingJudge`` instances, in one process
    or in several workers, may share a directory. ``recall``, ``might_be_on_disk`` and ``put`` never
    block on I/O (the event loop calls them); ``get`` may read the disk (``CachingJudge`` calls it
    from a worker thread); ``flush``, ``close``, ``delete``, ``volume``, ``len`` and ``in`` block
    until the queued writes are on disk.
    """

    def __init__(
        self,
        directory: Path | str,
        *,
        size_limit_bytes: int = 512 * 1024 * 1024,
        ttl_s: float | None = None,
        eviction_policy: EvictionPolicy = "least-recently-stored",
        timeout_s: float = 5.0,
        memory_limit_bytes: int | None = None,
        max_pending: int = 10_000,
        batch_delay_s: float = 0.005,
        key_refresh_s: float | None = 300.0,
    ) -> None:
        if size_limit_bytes < 1:
            raise ValueError("size_limit_bytes must be positive")
        if ttl_s is not None and ttl_s <= 0:
            raise ValueError("ttl_s must be positive or None")
        if memory_limit_bytes is not None and memory_limit_bytes < 0:
            raise ValueError("memory_limit_bytes must be >= 0 (0: no memory tier)")
        if max_pending < 1 or batch_delay_s < 0 or (key_refresh_s is not None and key_refresh_s <= 0):
            raise ValueError("max_pending must be >= 1, batch_delay_s >= 0, key_refresh_s positive or None")
        self._directory = Path(directory)
        self._ttl_s = ttl_s
        # Private before diskcache touches it: the directory 0o700, the database (which SQLite's -wal
        # and -shm files copy their mode from) created 0o600 here rather than by SQLite with the umask's.
        private_dir(self._directory)
        private_file(self._directory / DBNAME, what="response cache database")
        tighten_tree(self._directory, what="response cache directory")
        # ``timeout`` is SQLite's busy timeout: how long a writer waits for another process's lock
        # before diskcache raises Timeout (which we treat as a miss or a skipped batch).
        self._store = diskcache.Cache(
            str(self._directory),
            timeout=timeout_s,
            size_limit=size_limit_bytes,
            eviction_policy=eviction_policy,
            disk=_TextOnlyDisk,
        )
        for suffix in ("-wal", "-shm"):
            tighten_if_exists(self._directory / (DBNAME + suffix), what="response cache database")

        # The memory tier never holds more than the disk may: the disk bound is the cache's bound.
        default_memory = min(size_limit_bytes, 32 * 1024 * 1024)
        self._memory_limit = default_memory if memory_limit_bytes is None else memory_limit_bytes
        # Under LRU a hit refreshes the entry's place in memory too; under LRS (the default) it does not.
        self._refresh_on_hit = eviction_policy == "least-recently-used"
        self._max_pending = max_pending
        # diskcache culls against the database's page count, which grows inside a transaction until
        # its commit: a batch much larger than the bound would evict most of itself (and of the rest).
        # A batch stays a small share of the bound.
        self._max_batch_bytes = max(1, size_limit_bytes // 16)
        self._batch_delay_s = batch_delay_s
        self._key_refresh_s = key_refresh_s
        # One lock for the memory map, the queue and the counters; held for dict operations only,
        # never across I/O, so the event loop never waits for the writer's disk work.
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._memory: OrderedDict[str, _Entry] = OrderedDict()
        self._memory_bytes = 0
        # Queued writes, oldest first. An entry leaves only after it is committed (or failed), and
        # only after its key is in ``_keys``, so a lookup always finds it in one or the other.
        self._pending: dict[str, _Entry] = {}
        # Set by flush/close: write now, without waiting for the batch to fill.
        self._hurry = threading.Event()
        self._closing = False
        self._closed = False
        self._writer_done = False
        self._last_drop_warning = -_DROP_WARNING_EVERY_S
        self._writer_stats = WriterStats()
        # None until the writer thread has loaded it: meanwhile every miss may be on disk.
        self._keys: _KeySet | None = None
        self._keys_loaded_at = 0.0
        self._writer = threading.Thread(
            target=self._run_writer, name=f"response-cache-writer:{self._directory.name}", daemon=True
        )
        self._writer.start()
        _OPEN.add(self)

    @property
    def directory(self) -> Path:
        return self._directory

    @property
    def writer_stats(self) -> WriterStats:
        return self._writer_stats

    @property
    def memory_usage(self) -> tuple[int, int]:
        """(entries, approximate bytes) held in memory, what ``memory_limit_bytes`` bounds."""
        with self._lock:
            return len(self._memory), self._memory_bytes

    @property
    def keys_loaded(self) -> bool:
        """Whether the set of keys on disk is known (until then every miss is looked up on disk)."""
        return self._keys is not None

    # --- non-blocking: the event loop's side ----------------------------------------------------

    def recall(self, key: str) -> CachedReply | None:
        """The reply for ``key`` if it is in memory or queued for the disk; never touches the disk."""
        with self._lock:
            entry = self._memory.get(key)
            if entry is not None and self._refresh_on_hit:
                self._memory.move_to_end(key)
            if entry is None:
                entry = self._pending.get(key)
            if entry is None:
                return None
            if entry.expire_at is not None and entry.expire_at <= time.time():
                self._forget(key, entry)
                return None
            return entry.reply

    def might_be_on_disk(self, key: str) -> bool:
        """False when ``key`` is surely not on disk as far as this process knows (see the module
        docstring); True when it is, or may be (the key set is not loaded yet)."""
        keys = self._keys
        return keys is None or key in keys

    def put(self, key: str, reply: CachedReply) -> None:
        """Keep ``reply`` in memory and queue it for the writer thread; returns at once."""
        expire_at = None if self._ttl_s is None else time.time() + self._ttl_s
        entry = _Entry(reply, expire_at, len(reply.text) + len(reply.model) + len(key) + _ENTRY_OVERHEAD)
        with self._lock:
            if self._closing:
                raise RuntimeError(f"response cache {self._directory} is closed")
            self._remember(key, entry)
            if len(self._pending) >= self._max_pending and key not in self._pending:
                self._count(failed=1)
                warn = time.monotonic() - self._last_drop_warning >= _DROP_WARNING_EVERY_S
                if warn:
                    self._last_drop_warning = time.monotonic()
            else:
                self._pending[key] = entry
                self._wake.notify()
                return
        if warn:
            log.warning(
                "response cache writer is %d replies behind; new replies are kept in memory only for now",
                self._max_pending,
            )

    # --- blocking -------------------------------------------------------------------------------

    def get(self, key: str) -> CachedReply | None:
        """The reply for ``key`` from memory, or else from disk (then kept in memory if there is room)."""
        reply = self.recall(key)
        if reply is not None:
            return reply
        raw, expire_time = self._store.get(key, default=None, expire_time=True)
        reply = CachedReply.decode(raw)
        if reply is not None:
            size = len(reply.text) + len(reply.model) + len(key) + _ENTRY_OVERHEAD
            with self._lock:
                if key not in self._memory and key not in self._pending:  # never over a newer put
                    # Under LRS a read does not make an entry newer: it goes in as the oldest, kept
                    # only while memory has room to spare, so what this run stored is never evicted
                    # for it and the memory tier keeps the disk's eviction order.
                    self._remember(key, _Entry(reply, expire_time, size), newest=self._refresh_on_hit)
        return reply

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until every queued write is committed or has failed; False if ``timeout_s`` ran out."""
        with self._lock:
            self._hurry.set()
            self._wake.notify_all()
            return self._wake.wait_for(lambda: not self._pending or self._writer_done, timeout_s)

    def volume(self) -> int:
        """Estimated bytes on disk (SQLite pages plus value files), what the size limit bounds."""
        self.flush()
        volume: int = self._store.volume()
        return volume

    def __len__(self) -> int:
        """Entries on disk (queued writes flushed first)."""
        self.flush()
        return len(self._store)

    def __contains__(self, key: object) -> bool:
        """Whether ``get`` would find ``key``, in memory or on disk (queued writes flushed first)."""
        if not isinstance(key, str):
            return False
        self.flush()
        return self.recall(key) is not None or key in self._store

    def close(self) -> None:
        """Write what is queued, stop the writer thread and close this thread's database connection."""
        with self._lock:
            if self._closed:
                return
            self._closed = self._closing = True
            self._hurry.set()
            self._wake.notify_all()
        self._writer.join()
        self._store.close()
        _OPEN.discard(self)

    # --- under the lock -------------------------------------------------------------------------

    def _remember(self, key: str, entry: _Entry, *, newest: bool = True) -> None:
        old = self._memory.pop(key, None)
        if old is not None:
            self._memory_bytes -= old.size
        if entry.size > self._memory_limit:
            return  # bigger than the whole tier: disk only
        self._memory[key] = entry
        if not newest:
            self._memory.move_to_end(key, last=False)  # first in line for eviction
        self._memory_bytes += entry.size
        while self._memory_bytes > self._memory_limit:
            _, evicted = self._memory.popitem(last=False)
            self._memory_bytes -= evicted.size

    def _forget(self, key: str, entry: _Entry) -> None:
        if self._memory.get(key) is entry:
            del self._memory[key]
            self._memory_bytes -= entry.size

    def _count(self, **deltas: int) -> None:
        current = self._writer_stats
        self._writer_stats = dataclasses.replace(
            current, **{name: getattr(current, name) + delta for name, delta in deltas.items()}
        )

    # --- the writer thread ----------------------------------------------------------------------

    def _run_writer(self) -> None:
        try:
            self._load_keys()
            while (batch := self._next_batch()) is not None:
                if batch:
                    self._write(batch)
                keys = self._keys
                refresh_due = (
                    self._key_refresh_s is not None and time.monotonic() - self._keys_loaded_at >= self._key_refresh_s
                )
                # Reload when our additions outgrow what was loaded: bounds the set (evicted keys
                # drop out) and picks up the other workers' keys.
                if refresh_due or (keys is not None and keys.additions > max(4096, keys.loaded)):
                    self._load_keys()
        except Exception:  # a bug here must not leave close() and flush() waiting forever
            log.exception("response cache writer stopped; replies are kept in memory only from now on")
        finally:
            with self._lock:
                self._writer_done = True
                self._pending.clear()
                self._wake.notify_all()
            self._store.close()  # diskcache keeps one connection per thread: this one is ours

    def _next_batch(self) -> list[tuple[str, _Entry]] | None:
        """The next writes to commit (oldest first), [] when the key set is due a reload, None to stop."""
        with self._lock:
            while not self._pending:
                if self._closing:
                    return None
                self._hurry.clear()
                wait = None
                if self._key_refresh_s is not None:
                    wait = max(0.0, self._keys_loaded_at + self._key_refresh_s - time.monotonic())
                if not self._wake.wait(wait) and not self._pending:
                    return []
        # Let the batch fill: under load more writes arrive within a few milliseconds, and one
        # transaction for all of them takes the database's write lock once.
        if self._batch_delay_s and not self._hurry.is_set():
            self._hurry.wait(self._batch_delay_s)
        with self._lock:
            batch: list[tuple[str, _Entry]] = []
            size = 0
            for key, entry in islice(self._pending.items(), _MAX_BATCH):
                if batch and size + entry.size > self._max_batch_bytes:
                    break
                batch.append((key, entry))
                size += entry.size
            return batch

    def _write(self, batch: list[tuple[str, _Entry]]) -> None:
        now = time.time()
        try:
            with self._store.transact():
                for key, entry in batch:
                    # diskcache's expiry is relative: what is left of the TTL given at put().
                    expire = None if entry.expire_at is None else entry.expire_at - now
                    if expire is None or expire > 0:
                        self._store.set(key, entry.reply.encode(), expire=expire)
        except Exception as exc:  # noqa: BLE001 - a reply we could not store is still a good reply
            log.warning(
                "response cache could not store %d replies (%s: %s); they are kept in memory only",
                len(batch),
                type(exc).__name__,
                exc,
            )
            written = False
        else:
            written = True
            keys = self._keys
            if keys is not None:
                for key, _ in batch:
                    keys.add(key)
        with self._lock:
            for key, entry in batch:
                if self._pending.get(key) is entry:  # not if put again meanwhile: that one is still due
                    del self._pending[key]
            self._count(**({"written": len(batch), "batches": 1} if written else {"failed": len(batch)}))
            self._wake.notify_all()

    def _load_keys(self) -> None:
        """(Re)load the set of keys on disk; on failure keep what we had (at first: look on disk)."""
        now = time.time()
        try:
            # diskcache has no public way to list raw keys without also unpickling foreign ones, so
            # this reads its table (``Cache``: one row per entry; str keys are stored raw, as TEXT).
            rows = self._store._sql(
                "SELECT key FROM Cache WHERE raw = 1 AND (expire_time IS NULL OR expire_time > ?)", (now,)
            )
            keys = _KeySet([hash(key) for (key,) in rows if isinstance(key, str)])
        except Exception as exc:  # noqa: BLE001 - without the set, lookups look on disk: slower, correct
            log.warning("response cache could not list its keys (%s: %s)", type(exc).__name__, exc)
            self._keys_loaded_at = time.monotonic()
            return
        self._keys = keys
        self._keys_loaded_at = time.monotonic()
        self._count(key_loads=1)


#: Caches not closed yet, flushed at interpreter exit (their writer threads are daemons).
_OPEN: set[ResponseCache] = set()


@atexit.register
def _close_open_caches() -> None:
    for cache in list(_OPEN):
        try:
            cache.close()
        except Exception:  # exiting anyway: one cache must not stop the others from flushing
            log.exception("response cache %s could not be closed at exit", cache.directory)
