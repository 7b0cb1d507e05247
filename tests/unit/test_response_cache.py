"""The persistent response cache: keys, hits, restarts, sharing between workers, single flight, bounds.

Everything runs against a real ``diskcache`` directory under ``tmp_path``; the "second worker" test
uses a second process.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import anyio
import diskcache
import pytest

from pairjudge.agents.core import judge_pair
from pairjudge.agents.errors import JudgeRejected, JudgeUnavailable
from pairjudge.agents.judge import ChatMessage, JudgeRequest, JudgeResponse
from pairjudge.agents.policy import Policy
from pairjudge.agents.prompts import render_primary
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.schemas import PairVerdict, RubricRef
from pairjudge.streams.judges.cache import CachingJudge
from pairjudge.streams.judges.cache_codec import CachedReply, is_json_object, request_key
from pairjudge.streams.judges.cache_store import ResponseCache, WriterStats
from tests.unit.factories import make_pair, tone_reply

ROOT = Path(__file__).resolve().parents[2]
REPLY = tone_reply("A")


def a_request(order: Literal["AB", "BA"] = "AB") -> JudgeRequest:
    pair = make_pair()
    assert not isinstance(pair.rubric, RubricRef)
    return render_primary(pair, pair.rubric, order)


def scripted(*answers: str | Exception, **kwargs: Any) -> ScriptedJudge:
    return ScriptedJudge(list(answers), model="judge-m", input_tokens=300, output_tokens=80, latency_s=1.5, **kwargs)


async def until_keys_loaded(store: ResponseCache) -> None:
    """Wait for the writer thread to load the set of keys on disk (until then every miss reads the disk)."""
    with anyio.fail_after(10):
        while not store.keys_loaded:  # noqa: ASYNC110 - polling a thread's state
            await anyio.sleep(0.01)


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[ResponseCache]:
    store = ResponseCache(tmp_path / "cache")
    yield store
    store.close()


# --- hits and misses --------------------------------------------------------------------------


async def test_miss_then_hit_serves_the_stored_reply_without_calling_the_judge(cache: ResponseCache) -> None:
    inner = scripted(REPLY)
    judge = CachingJudge(inner, cache)
    first = await judge.complete(a_request())
    assert (first.cached, first.extra["cache"], first.latency_s) == (False, "miss", 1.5)
    second = await judge.complete(a_request())
    assert inner.calls == 1
    assert second.cached
    assert second.extra["cache"] == "hit"
    assert second.cost_usd == 0.0
    assert (second.text, second.model, second.input_tokens, second.output_tokens) == (REPLY, "judge-m", 300, 80)
    assert second.latency_s < 1.0  # the lookup's own latency, not the original call's
    assert second.extra["original_latency_s"] == 1.5
    assert judge.stats.hits == 1
    assert judge.stats.misses == 1
    assert judge.stats.stored == 1


async def test_different_requests_do_not_share_a_reply(cache: ResponseCache) -> None:
    inner = scripted(REPLY, tone_reply("B"))
    judge = CachingJudge(inner, cache)
    ab = await judge.complete(a_request("AB"))
    ba = await judge.complete(a_request("BA"))
    assert inner.calls == 2
    assert (ab.text, ba.text) == (REPLY, tone_reply("B"))
    assert not ba.cached


async def test_a_whole_pair_is_judged_once_then_served_from_the_cache(cache: ResponseCache) -> None:
    pair = make_pair()
    inner = ScriptedJudge(lambda r: tone_reply("A" if r.order == "AB" else "B"), model="judge-m")
    judge = CachingJudge(inner, cache)
    first = (await judge_pair(pair, judge, Policy())).outcome
    again = (await judge_pair(pair, judge, Policy())).outcome
    assert inner.calls == 2
    assert isinstance(first, PairVerdict)
    assert isinstance(again, PairVerdict)
    assert again.winner == first.winner
    assert [o.cache_hits for o in again.orderings] == [1, 1]
    assert [o.cache_hits for o in first.orderings] == [0, 0]


# --- persistence and sharing ------------------------------------------------------------------


async def test_entries_survive_closing_and_reopening_the_cache(tmp_path: Path) -> None:
    first_store = ResponseCache(tmp_path / "c")
    await CachingJudge(scripted(REPLY), first_store).complete(a_request())
    first_store.close()

    reopened = ResponseCache(tmp_path / "c")
    inner = scripted()  # would fail the test if called: it has no replies
    response = await CachingJudge(inner, reopened).complete(a_request())
    reopened.close()
    assert (response.cached, response.text, inner.calls) == (True, REPLY, 0)


async def test_a_worker_opened_later_reads_what_another_stored_and_closed(tmp_path: Path) -> None:
    # Two workers on one host: one stores and closes (its writes flushed), the other opens afterwards.
    store_1 = ResponseCache(tmp_path / "shared")
    await CachingJudge(scripted(REPLY), store_1).complete(a_request())
    store_1.close()
    store_2 = ResponseCache(tmp_path / "shared")
    await until_keys_loaded(store_2)
    worker_2 = CachingJudge(scripted(), store_2)  # would fail the test if called: it has no replies
    response = await worker_2.complete(a_request())
    store_2.close()
    assert (response.cached, response.text) == (True, REPLY)
    assert worker_2.stats.disk_reads == 1  # a genuine disk hit: the one lookup that hops to a thread


async def test_a_key_stored_by_another_worker_after_opening_is_seen_once_the_key_set_reloads(tmp_path: Path) -> None:
    # The trade-off in the module docstring: keys another worker writes after we loaded the key set
    # cost a judge call until the set is reloaded, never a wrong answer.
    directory = tmp_path / "shared"
    never = ResponseCache(directory, key_refresh_s=None)
    soon = ResponseCache(directory, key_refresh_s=0.2)
    await until_keys_loaded(never)
    await until_keys_loaded(soon)
    writer = ResponseCache(directory)
    await CachingJudge(scripted(REPLY), writer).complete(a_request())
    writer.close()

    loads = soon.writer_stats.key_loads  # any reload from now on comes after the write
    not_seen = scripted(tone_reply("B"))
    assert not (await CachingJudge(not_seen, never).complete(a_request())).cached
    assert not_seen.calls == 1
    with anyio.fail_after(10):
        while soon.writer_stats.key_loads == loads:  # noqa: ASYNC110 - polling a thread's counter
            await anyio.sleep(0.05)
    # What ``never`` stored on its miss is queued behind its batch delay, not on disk yet; either way
    # the reply read is one of the two stored under this key, from disk.
    seen = CachingJudge(scripted(), soon)
    assert (await seen.complete(a_request())).text in {REPLY, tone_reply("B")}
    assert seen.stats.disk_reads == 1
    never.close()
    soon.close()


async def test_another_process_reads_what_this_one_stored(tmp_path: Path) -> None:
    directory = tmp_path / "shared"
    store = ResponseCache(directory)
    await CachingJudge(scripted(REPLY), store).complete(a_request())
    key = CachingJudge(scripted(), store).key_for(a_request())
    store.close()
    code = textwrap.dedent(
        f"""
        import anyio
        from pairjudge.agents.scripted import ScriptedJudge
        from pairjudge.streams.judges.cache import CachingJudge
        from pairjudge.streams.judges.cache_store import ResponseCache
        from tests.unit.test_response_cache import a_request

        async def main():
            store = ResponseCache({str(directory)!r})
            judge = CachingJudge(ScriptedJudge([], model="judge-m"), store)
            assert judge.key_for(a_request()) == {key!r}, "keys differ between processes"
            response = await judge.complete(a_request())
            print(response.cached, len(response.text))
            store.close()

        anyio.run(main)
        """
    )
    with anyio.fail_after(60):
        result = await anyio.run_process([sys.executable, "-c", code], cwd=ROOT, check=False)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().split() == ["True", str(len(REPLY))]


# --- keys -------------------------------------------------------------------------------------


def _key(judge: ScriptedJudge | CachingJudge, request: JudgeRequest, **params: Any) -> str:
    return request_key(judge, request, params)


def test_the_key_changes_with_everything_that_shapes_the_reply() -> None:
    base_request = a_request()
    base_judge = ScriptedJudge([], model="m", version="v1", provider="p")
    base = _key(base_judge, base_request, seed=1, max_tokens=512)
    assert base == _key(ScriptedJudge([], model="m", version="v1", provider="p"), base_request, max_tokens=512, seed=1)
    last = base_request.messages[-1]
    variants = {
        "model": _key(ScriptedJudge([], model="m2", version="v1", provider="p"), base_request, seed=1, max_tokens=512),
        "version": _key(ScriptedJudge([], model="m", version="v2", provider="p"), base_request, seed=1, max_tokens=512),
        "provider": _key(
            ScriptedJudge([], model="m", version="v1", provider="q"), base_request, seed=1, max_tokens=512
        ),
        "prompt": _key(
            base_judge,
            dataclasses.replace(
                base_request, messages=(*base_request.messages[:-1], ChatMessage(last.role, last.content + " "))
            ),
            seed=1,
            max_tokens=512,
        ),
        "order": _key(base_judge, a_request("BA"), seed=1, max_tokens=512),
        "schema": _key(
            base_judge,
            dataclasses.replace(base_request, response_schema={**base_request.response_schema, "title": "x"}),
            seed=1,
            max_tokens=512,
        ),
        "schema_name": _key(base_judge, dataclasses.replace(base_request, schema_name="other"), seed=1, max_tokens=512),
        "forced_choice": _key(
            base_judge, dataclasses.replace(base_request, forced_choice=True), seed=1, max_tokens=512
        ),
        "seed": _key(base_judge, base_request, seed=2, max_tokens=512),
        "max_tokens": _key(base_judge, base_request, seed=1, max_tokens=1024),
        "no params": _key(base_judge, base_request),
    }
    assert base not in variants.values()
    assert len(set(variants.values())) == len(variants), variants


def test_the_key_follows_temperature() -> None:
    request = a_request()
    assert _key(ScriptedJudge([], model="m", temperature=0.7), request) != _key(ScriptedJudge([], model="m"), request)


async def test_a_new_model_version_on_the_same_directory_misses(cache: ResponseCache) -> None:
    await CachingJudge(scripted(REPLY), cache).complete(a_request())
    upgraded = ScriptedJudge([tone_reply("B")], model="judge-m", version="2")
    response = await CachingJudge(upgraded, cache).complete(a_request())
    assert (response.cached, response.text, upgraded.calls) == (False, tone_reply("B"), 1)


async def test_judge_cache_params_are_part_of_the_key(cache: ResponseCache) -> None:
    class Seeded(ScriptedJudge):
        def __init__(self, seed: int, *answers: str) -> None:
            super().__init__(list(answers), model="judge-m")
            self.seed = seed

        def cache_params(self) -> dict[str, Any]:
            return {"seed": self.seed}

    await CachingJudge(Seeded(1, REPLY), cache).complete(a_request())
    other_seed = Seeded(2, tone_reply("B"))
    assert not (await CachingJudge(other_seed, cache).complete(a_request())).cached
    assert (await CachingJudge(Seeded(1), cache).complete(a_request())).text == REPLY
    # Explicit params are merged over the judge's own.
    assert CachingJudge(Seeded(1), cache, params={"max_tokens": 9}).cache_params() == {"seed": 1, "max_tokens": 9}


def test_params_that_are_not_json_fail_at_construction(cache: ResponseCache) -> None:
    with pytest.raises(TypeError):
        CachingJudge(scripted(), cache, params={"when": object()})


# --- what is (not) cached ---------------------------------------------------------------------


@pytest.mark.parametrize("error", [JudgeUnavailable("HTTP 503"), JudgeRejected("HTTP 401")])
async def test_exceptions_are_never_cached(cache: ResponseCache, error: Exception) -> None:
    inner = scripted(error, REPLY)
    judge = CachingJudge(inner, cache)
    with pytest.raises(type(error)):
        await judge.complete(a_request())
    assert len(cache) == 0
    response = await judge.complete(a_request())
    assert (response.cached, response.text, inner.calls) == (False, REPLY, 2)
    assert (await judge.complete(a_request())).cached


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        (REPLY, True),
        ("```json\n" + REPLY + "\n```", True),
        ("I cannot compare these outputs.", False),
        ("", False),
        ("[1, 2]", False),
        ('{"winner": "A"', False),
    ],
)
async def test_only_json_object_replies_are_stored(cache: ResponseCache, text: str, stored: bool) -> None:
    inner = scripted(text, text)
    judge = CachingJudge(inner, cache)
    await judge.complete(a_request())
    second = await judge.complete(a_request())
    assert second.cached is stored
    assert inner.calls == (1 if stored else 2)
    assert is_json_object(text) is stored


def test_a_stored_value_holds_every_field_of_the_reply() -> None:
    reply = CachedReply("{}", "m", 3, None, 0.25, 12.5)
    assert json.loads(reply.encode()) == {"format": 1, **dataclasses.asdict(reply)}
    assert CachedReply.decode(reply.encode()) == reply


class Boom:
    """Unpickling this raises: proof that the cache never loads a pickle."""

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (_explode, ("a planted pickle was loaded",))


LOADED: list[str] = []


def _explode(message: str) -> None:
    LOADED.append(message)
    raise AssertionError(message)


@pytest.mark.parametrize("planted", ["not json at all", Boom()], ids=["not-json", "pickle"])
async def test_a_corrupt_or_foreign_entry_reads_as_a_miss(tmp_path: Path, planted: object) -> None:
    directory = tmp_path / "cache"
    key = CachingJudge(scripted(), ResponseCache(directory)).key_for(a_request())
    raw = diskcache.Cache(str(directory))
    raw.set(key, planted)  # planted before this worker opens the directory, so it knows the key is there
    raw.close()
    store = ResponseCache(directory)
    await until_keys_loaded(store)
    judge = CachingJudge(scripted(REPLY), store)
    assert not (await judge.complete(a_request())).cached
    store.close()
    assert judge.stats.disk_reads == 1  # it did read the planted entry
    assert LOADED == []  # a pickle planted in the directory is never loaded
    assert judge.stats.errors == 0  # read as "no entry", not as a failed read
    assert CachedReply.decode(json.dumps({"format": 999, "text": "x"})) is None


async def test_a_failing_cache_degrades_to_misses_and_never_fails_the_call(tmp_path: Path) -> None:
    class Broken(ResponseCache):
        def might_be_on_disk(self, key: str) -> bool:
            return True  # as if stored by an earlier run, so the lookup reads the (failing) disk

        def get(self, key: str) -> CachedReply | None:
            raise OSError(28, "No space left on device")

        def put(self, key: str, reply: CachedReply) -> None:
            raise diskcache.Timeout("database is locked")

    store = Broken(tmp_path / "broken")
    inner = scripted(REPLY, REPLY)
    judge = CachingJudge(inner, store)
    assert (await judge.complete(a_request())).text == REPLY
    assert (await judge.complete(a_request())).text == REPLY
    assert inner.calls == 2
    assert judge.stats.errors == 4
    store.close()


async def test_writes_that_fail_on_disk_are_logged_kept_in_memory_and_never_fail_the_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Another process holds the database's write lock longer than our busy timeout (what timed out
    # under load before): the writer's batch fails, the judge call does not.
    directory = tmp_path / "locked"
    store = ResponseCache(directory, timeout_s=0.1)
    await until_keys_loaded(store)
    holder = sqlite3.connect(directory / "cache.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        inner = scripted(REPLY)
        judge = CachingJudge(inner, store)
        with caplog.at_level(logging.WARNING, logger="pairjudge.streams.judges.cache_store"):
            assert (await judge.complete(a_request())).text == REPLY
            assert store.flush(timeout_s=10)
        assert store.writer_stats.failed == 1
        assert judge.stats.errors == 1
        assert any(
            "could not store 1 replies" in r.getMessage() and "Timeout" in r.getMessage() for r in caplog.records
        )
        # Still served from memory, without another judge call.
        assert (await judge.complete(a_request())).cached
        assert inner.calls == 1
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    store.close()
    reopened = ResponseCache(directory)
    assert len(reopened) == 0  # nothing half-written
    reopened.close()


async def test_a_full_write_queue_keeps_replies_in_memory_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = ResponseCache(tmp_path / "q", max_pending=2, batch_delay_s=30.0)  # the writer waits for a batch
    with caplog.at_level(logging.WARNING, logger="pairjudge.streams.judges.cache_store"):
        for i in range(3):
            store.put(f"k{i}", CachedReply(REPLY, "m", 1, 1, 0.1, 0.0))
    assert store.writer_stats.failed == 1
    assert any("behind" in r.getMessage() for r in caplog.records)
    assert store.recall("k2") is not None
    store.close()
    assert store.writer_stats.written == 2


async def test_entries_expire_after_the_ttl(tmp_path: Path) -> None:
    store = ResponseCache(tmp_path / "ttl", ttl_s=0.3)
    inner = scripted(REPLY, REPLY)
    judge = CachingJudge(inner, store)
    await judge.complete(a_request())
    assert (await judge.complete(a_request())).cached  # from memory
    store.close()
    reopened = ResponseCache(tmp_path / "ttl", ttl_s=0.3)
    judge = CachingJudge(inner, reopened)
    assert (await judge.complete(a_request())).cached  # from disk, within the TTL
    await anyio.sleep(0.4)
    assert not (await judge.complete(a_request())).cached  # expired in memory (read back from disk)
    assert inner.calls == 2
    reopened.close()
    # ... and on disk: what the second call stored has expired there too.
    await anyio.sleep(0.4)
    last = ResponseCache(tmp_path / "ttl")
    assert not (await CachingJudge(scripted(REPLY), last).complete(a_request())).cached
    last.close()


# --- fresh requests (canaries) ----------------------------------------------------------------


async def test_a_fresh_request_calls_the_judge_over_a_cached_reply_and_stores_nothing(cache: ResponseCache) -> None:
    inner = scripted(REPLY, tone_reply("B"), tone_reply("B"))
    judge = CachingJudge(inner, cache)
    await judge.complete(a_request())  # production's reply, stored
    fresh = dataclasses.replace(a_request(), fresh=True)
    assert judge.key_for(fresh) == judge.key_for(a_request())  # the same prompt: only ``fresh`` differs
    for _ in range(2):
        reply = await judge.complete(fresh)
        assert (reply.text, reply.cached, reply.extra["cache"]) == (tone_reply("B"), False, "bypassed")
    assert inner.calls == 3
    served = await judge.complete(a_request())  # production still gets the reply it was first given
    assert (served.text, served.cached) == (REPLY, True)
    assert (judge.stats.bypassed, judge.stats.stored, judge.stats.hits, judge.stats.misses) == (2, 1, 1, 1)
    assert len(cache) == 1


async def test_identical_fresh_requests_in_flight_each_call_the_judge(cache: ResponseCache) -> None:
    release = anyio.Event()

    async def hold(_: JudgeRequest) -> None:
        await release.wait()

    inner = scripted(REPLY, REPLY, REPLY, on_request=hold)
    judge = CachingJudge(inner, cache)
    fresh = dataclasses.replace(a_request(), fresh=True)
    async with anyio.create_task_group() as tg:
        for _ in range(2):
            tg.start_soon(judge.complete, fresh)
        tg.start_soon(judge.complete, a_request())  # an ordinary call never waits on a canary's either
        await anyio.wait_all_tasks_blocked()
        assert inner.calls == 3
        release.set()
    assert (judge.stats.bypassed, judge.stats.coalesced, judge.stats.stored) == (2, 0, 1)


# --- single flight ----------------------------------------------------------------------------


async def test_identical_calls_in_flight_are_coalesced_into_one_judge_call(cache: ResponseCache) -> None:
    release = anyio.Event()

    async def hold(_: JudgeRequest) -> None:
        await release.wait()

    inner = scripted(REPLY, on_request=hold)
    judge = CachingJudge(inner, cache)
    results: list[JudgeResponse] = []

    async def call() -> None:
        results.append(await judge.complete(a_request()))

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(call)
        await anyio.wait_all_tasks_blocked()
        assert inner.calls == 1  # the followers are waiting for the leader, not the judge
        release.set()
    assert inner.calls == 1
    assert [r.text for r in results] == [REPLY] * 3
    assert sorted(r.extra["cache"] for r in results) == ["coalesced", "coalesced", "miss"]
    assert sum(1 for r in results if r.cached) == 2
    assert judge.stats.coalesced == 2


async def test_a_coalesced_failure_reaches_every_waiter_once(cache: ResponseCache) -> None:
    release = anyio.Event()

    async def hold(_: JudgeRequest) -> None:
        await release.wait()

    inner = scripted(JudgeUnavailable("HTTP 503"), on_request=hold)
    judge = CachingJudge(inner, cache)
    failures: list[BaseException] = []

    async def call() -> None:
        try:
            await judge.complete(a_request())
        except JudgeUnavailable as exc:
            failures.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        tg.start_soon(call)
        await anyio.wait_all_tasks_blocked()
        release.set()
    assert len(failures) == 2
    assert inner.calls == 1


async def test_a_cancelled_leader_hands_over_to_a_waiting_follower(cache: ResponseCache) -> None:
    calls = 0
    leader_started = anyio.Event()

    async def first_call_hangs(_: JudgeRequest) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            leader_started.set()
            await anyio.sleep_forever()

    inner = ScriptedJudge(lambda _: REPLY, model="judge-m", on_request=first_call_hangs)
    judge = CachingJudge(inner, cache)
    got: list[JudgeResponse] = []
    leader = anyio.CancelScope()

    async def lead() -> None:
        with leader:
            await judge.complete(a_request())

    async def follow() -> None:
        got.append(await judge.complete(a_request()))

    async with anyio.create_task_group() as tg:
        tg.start_soon(lead)
        await leader_started.wait()
        tg.start_soon(follow)
        await anyio.wait_all_tasks_blocked()
        assert calls == 1  # the follower waits for the leader
        leader.cancel()
    assert [r.text for r in got] == [REPLY]
    assert not got[0].cached  # the follower made the call itself once the leader was gone
    assert calls == 2


# --- the size bound ---------------------------------------------------------------------------


# 30 s: the writer waits for a full batch, so every write goes in the largest batches it makes (a
# batch far over the bound used to evict nearly everything, itself included); 0: one write at a time.
@pytest.mark.parametrize("batch_delay_s", [0.0, 30.0])
async def test_the_size_limit_evicts_the_least_recently_stored_entries(tmp_path: Path, batch_delay_s: float) -> None:
    limit = 256 * 1024
    store = ResponseCache(tmp_path / "small", size_limit_bytes=limit, batch_delay_s=batch_delay_s)
    big = "x" * 4000
    keys = [f"k{i:04d}" for i in range(300)]  # ~1.2 MB offered to a 256 KB cache
    for i, key in enumerate(keys):
        store.put(key, CachedReply(big, "m", 1, 1, 0.1, float(i)))
        if i >= 1:
            store.get(keys[0])  # read the oldest over and over: under LRS that does not save it
    assert store.volume() <= limit * 1.25
    assert keys[0] not in store
    assert keys[-1] in store
    assert 10 < len(store) < len(keys)
    survivors = [k for k in keys if k in store]
    assert survivors == keys[-len(survivors) :]  # what is left is the newest, in one run
    store.close()


def test_the_memory_tier_is_bounded_and_evicts_the_oldest_stored_first(tmp_path: Path) -> None:
    store = ResponseCache(tmp_path / "mem", memory_limit_bytes=20_000, batch_delay_s=0.0)
    keys = [f"k{i:03d}" for i in range(60)]
    for i, key in enumerate(keys):
        store.put(key, CachedReply("x" * 1000, "m", 1, 1, 0.1, float(i)))
        store.recall(keys[0])  # reading the oldest does not keep it (least-recently-stored)
    entries, size = store.memory_usage
    assert 0 < size <= 20_000
    assert entries < len(keys)
    in_memory = [k for k in keys if store.recall(k) is not None or k in store._pending]
    assert in_memory == keys[-len(in_memory) :]  # the newest, in one run
    assert store.flush(timeout_s=10)
    assert store.recall(keys[0]) is None  # gone from memory ...
    assert store.get(keys[0]) is not None  # ... but on disk, and read back
    store.close()


async def test_close_writes_what_is_still_queued(tmp_path: Path) -> None:
    directory = tmp_path / "queued"
    store = ResponseCache(directory, batch_delay_s=30.0)  # left alone, the writer would wait 30 s for a batch
    judge = CachingJudge(scripted(REPLY), store)
    await judge.complete(a_request())
    key = judge.key_for(a_request())
    raw = diskcache.Cache(str(directory))
    assert raw.get(key) is None  # still queued
    with anyio.fail_after(10):
        await anyio.to_thread.run_sync(store.close)  # as JudgeStack.aclose closes it
    assert CachedReply.decode(raw.get(key)) is not None
    raw.close()
    assert store.writer_stats == WriterStats(written=1, batches=1, key_loads=1)


async def test_a_miss_and_a_store_never_hop_threads_only_a_disk_hit_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hops: list[object] = []
    real_run_sync = anyio.to_thread.run_sync

    async def counting_run_sync(func: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(func)
        return await real_run_sync(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting_run_sync)
    loop_thread = threading.current_thread()
    touched_from: set[threading.Thread] = set()

    class Watched(ResponseCache):
        def get(self, key: str) -> CachedReply | None:
            touched_from.add(threading.current_thread())
            return super().get(key)

    directory = tmp_path / "hops"
    store = Watched(directory)
    await until_keys_loaded(store)
    judge = CachingJudge(ScriptedJudge(lambda r: tone_reply("A" if r.order == "AB" else "B"), model="m"), store)
    orders: tuple[Literal["AB", "BA"], ...] = ("AB", "BA")
    for order in orders:  # two misses (each stored), then two memory hits
        assert not (await judge.complete(a_request(order))).cached
    for order in orders:
        assert (await judge.complete(a_request(order))).cached
    assert hops == []
    assert touched_from == set()
    assert (judge.stats.misses, judge.stats.hits, judge.stats.stored, judge.stats.disk_reads) == (2, 2, 2, 0)
    store.close()

    restarted = Watched(directory)
    await until_keys_loaded(restarted)
    judge = CachingJudge(ScriptedJudge([], model="m"), restarted)  # would fail the test if called
    assert (await judge.complete(a_request("AB"))).cached  # on disk, not in this run's memory: one hop
    assert (await judge.complete(a_request("AB"))).cached  # now in memory: none
    assert len(hops) == 1
    assert touched_from
    assert loop_thread not in touched_from
    assert judge.stats.disk_reads == 1
    restarted.close()
