"""The group never commits past a pair that is still being judged (issue 6, finding 1).

faust-streaming 0.15.3 computes the offset to commit from the acked offsets alone
(``Consumer._new_offset``). Its guard against a gap at the head of the acked offsets is off by one, and
it is skipped while nothing has been committed yet (faust-streaming#606). With concurrency above 1 and a
judge that answers one pair slowly and the next at once, later pairs are acked first and the commit
moves past the slow pair while it is in flight. A crash then loses that pair for good.

One real Apache Kafka, one worker with concurrency 16, and a real OpenAI-compatible judge on 127.0.0.1
(``pairjudge_dev/slow_judge_server.py``) that holds every call showing a marked output and answers the
rest at once. Each scenario has a partition of the pairs topic to itself:

- **(a)** partition 0: the slow pair is at offset 0 of a fresh partition, ahead of 15 fast ones. The first
  commit of a fresh group is the one made with no committed offset to guard against.
- **(b)** partition 1: 10 fast pairs are committed first. Then 5 fast pairs, the slow pair at offset 15,
  and 10 more fast ones. Commits reach 15 and must stop there.
- **(c)** partition 2: 10 fast pairs are committed (committed offset 10). Then the slow pair lands at
  offset 10, exactly the committed offset (one past the last processed record), ahead of 15 fast ones:
  the off-by-one itself.

While that runs, the group's committed offsets are polled every 100 ms (admin
``list_consumer_group_offsets``), and every final outcome is read with its broker timestamp. Once all fast
pairs are decided and the worker has had several commit intervals (1 s) to commit, the worker is
SIGKILLed while the slow pairs are still held by the judge. The judge then answers everything at once, a
new worker starts, and each scenario asserts two things:

1. the committed offset was never seen beyond the offset of a pair with no published outcome at that
   moment. A commit is seen only after it was made, and an outcome's timestamp comes before the offset
   that covers it can be committed, so a reported violation is a real one;
2. the slow pair gets a final outcome after the restart.

The experiment runs once for the module (about 15 s, or 20 s when a pair is lost); the three tests read its
record.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from pairjudge.streams.cli.demo import start_worker, stop_process
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.topics import FINAL_KINDS
from pairjudge_dev.slow_judge_server import HOLD_MARKER, Behaviour, JudgeServer
from pairjudge_dev.workers import kafka_run
from tests.unit.factories import FIRST_OUTPUT, SECOND_OUTPUT, make_pair

# One worker runs the experiment (a module fixture) once for every scenario checked here.
pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.xdist_group("commit-safety")]

PARTITIONS = 3
CONCURRENCY = 16
#: faust's ``broker_commit_interval`` in streams/worker/faust_app.py. A worker that has not moved its commit within
#: several intervals after its last ack will not move it.
COMMIT_INTERVAL_S = 1.0
COMMIT_GRACE_S = 4 * COMMIT_INTERVAL_S
POLL_S = 0.1
#: Kafka's minimum: the restarted worker waits this long for the dead member to leave the group.
SESSION_TIMEOUT_S = 6.0


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    partition: int
    what: str


SCENARIOS = {
    "a": Scenario("a", 0, "slow pair at the head of a fresh partition (first commit of a fresh group)"),
    "b": Scenario("b", 1, "slow pair in the middle, after earlier commits"),
    "c": Scenario("c", 2, "slow pair at exactly the committed offset (the off-by-one)"),
}


@dataclass(frozen=True, slots=True)
class Sent:
    pair_id: str
    partition: int
    offset: int
    slow: bool


@dataclass(frozen=True, slots=True)
class Seen:
    """The group's committed offset for a partition, as an observer saw it at ``at`` (epoch seconds,
    taken after the answer arrived, so the commit was made no later than this)."""

    at: float
    partition: int
    committed: int


@dataclass
class Record:
    """Everything the experiment saw; the tests judge it."""

    started: float = field(default_factory=time.time)
    sent: list[Sent] = field(default_factory=list)
    commits: list[Seen] = field(default_factory=list)
    #: pair id -> broker timestamp (epoch s) of its first final outcome.
    first_outcome: dict[str, float] = field(default_factory=dict)
    killed_at: float | None = None
    held_at_kill: int = 0
    worker_logs: list[Path] = field(default_factory=list)
    #: Errors the committed-offset watcher retried.
    watch_errors: list[str] = field(default_factory=list)
    #: slow pair id -> the kind of its final outcome, per streams.kafka.collector, after the restart.
    slow_outcomes: dict[str, str] = field(default_factory=dict)

    def slow_pair(self, partition: int) -> Sent:
        return next(s for s in self.sent if s.slow and s.partition == partition)

    def fast_ids(self) -> set[str]:
        return {s.pair_id for s in self.sent if not s.slow}

    def committed(self, partition: int) -> int:
        seen = [c.committed for c in self.commits if c.partition == partition]
        return seen[-1] if seen else -1

    def violations(self, partition: int) -> list[str]:
        """Every sighting of a committed offset beyond a pair that had no published outcome then."""
        found: list[str] = []
        for seen in (c for c in self.commits if c.partition == partition):
            for sent in self.sent:
                if sent.partition != partition or sent.offset >= seen.committed:
                    continue
                outcome_at = self.first_outcome.get(sent.pair_id)
                if outcome_at is None or outcome_at > seen.at:
                    when = "never" if outcome_at is None else f"at +{outcome_at - self.started:.2f}s"
                    found.append(
                        f"committed offset {seen.committed} seen at +{seen.at - self.started:.2f}s on partition "
                        f"{partition}, past {sent.pair_id} (offset {sent.offset}{', slow' if sent.slow else ''}), "
                        f"whose first outcome came {when}"
                    )
        return found

    def timeline(self, partition: int) -> str:
        steps = [
            f"+{c.at - self.started:.2f}s committed={c.committed}" for c in self.commits if c.partition == partition
        ]
        killed = f"; worker SIGKILLed at +{self.killed_at - self.started:.2f}s" if self.killed_at else ""
        return ", ".join(steps) + killed


# --------------------------------------------------------------------------------------------------
# Observers: the group's committed offsets, and the final outcomes with their timestamps
# --------------------------------------------------------------------------------------------------


async def watch_commits(bootstrap: str, group: str, topic: str, record: Record, stop: asyncio.Event) -> None:
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        last: dict[int, int] = {}
        while not stop.is_set():
            try:
                offsets = await admin.list_consumer_group_offsets(group, partitions=tps)
            except KafkaError as exc:  # a coordinator moving or loading: ask again, but keep a note
                record.watch_errors.append(f"+{time.time() - record.started:.2f}s {exc!r}")
                offsets = {}
            at = time.time()
            for tp, meta in offsets.items():
                if meta is not None and meta.offset >= 0 and last.get(tp.partition) != meta.offset:
                    last[tp.partition] = meta.offset
                    record.commits.append(Seen(at, tp.partition, meta.offset))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), POLL_S)
    finally:
        await admin.close()


async def watch_outcomes(settings: Settings, record: Record, stop: asyncio.Event) -> None:
    # No group: an observer must neither take partitions from the worker nor commit.
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka.bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(settings.topics.name(k), p) for k in FINAL_KINDS for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=100, max_records=1000)
            for records in batches.values():
                for message in records:
                    event = json.loads(message.value or b"{}")
                    if event.get("audit"):
                        continue  # an audit copy of a verdict is not the pair's outcome
                    pair_id = str(event.get("pair_id") or (message.key or b"").decode())
                    at = message.timestamp / 1000
                    record.first_outcome[pair_id] = min(at, record.first_outcome.get(pair_id, at))
    finally:
        await consumer.stop()


async def until(
    condition: str, check: Callable[[], bool], timeout: float, record: Record, watchers: list[asyncio.Task[None]]
) -> None:
    """Poll ``check()`` until true; fail the experiment (not a scenario), saying what was seen, if never."""
    deadline = time.monotonic() + timeout
    while not check():
        for task in watchers:
            if task.done():
                task.result()  # an observer that died must not look like a worker that never commits
                pytest.fail(f"experiment broken: an observer stopped early: {task.get_name()}", pytrace=False)
        if time.monotonic() > deadline:
            seen = "; ".join(f"p{p}: {record.timeline(p)}" for p in range(PARTITIONS))
            logs = ", ".join(str(p) for p in record.worker_logs)
            pytest.fail(
                f"experiment broken: {condition} not within {timeout:.0f}s\n"
                f"commits seen: {seen}\nwatcher errors: {record.watch_errors[-5:]}\n"
                f"outcomes: {len(record.first_outcome)} of {len(record.sent)} pairs\nworker logs: {logs}",
                pytrace=False,
            )
        await asyncio.sleep(POLL_S)


# --------------------------------------------------------------------------------------------------
# The experiment
# --------------------------------------------------------------------------------------------------


def pair_bytes(pair_id: str, *, slow: bool) -> bytes:
    # Distinct texts per pair; the marker makes the judge hold every call that shows this pair.
    first = f"{FIRST_OUTPUT} Ref {pair_id}." + (f" {HOLD_MARKER}" if slow else "")
    pair = make_pair(pair_id=pair_id, outputs=(first, f"{SECOND_OUTPUT} Ref {pair_id}."))
    return pair.model_dump_json().encode()


async def send(
    producer: AIOKafkaProducer, topic: str, prefix: str, record: Record, plan: list[tuple[int, list[bool]]]
) -> None:
    """Send, per partition, pairs in the given order (True = slow), and note where each landed."""
    for partition, slows in plan:
        for slow in slows:
            pair_id = f"{prefix}-p{partition}-{sum(1 for s in record.sent if s.partition == partition):03d}"
            meta = await producer.send_and_wait(
                topic, pair_bytes(pair_id, slow=slow), key=pair_id.encode(), partition=partition
            )
            record.sent.append(Sent(pair_id, partition, meta.offset, slow))


def kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # the worker runs in a session of its own
    proc.wait(10)


async def run_experiment(bootstrap: str, tmp: Path) -> Record:
    record = Record()
    server = JudgeServer(Behaviour(hold_max_s=60.0)).start()
    try:
        return await _with_judge(bootstrap, tmp, server, record)
    finally:
        server.stop()


async def _with_judge(bootstrap: str, tmp: Path, server: JudgeServer, record: Record) -> Record:
    settings = await kafka_run(
        bootstrap,
        tmp,
        "cs",
        kafka={"partitions": PARTITIONS, "session_timeout_s": SESSION_TIMEOUT_S, "heartbeat_interval_s": 1.0},
        worker={"concurrency": CONCURRENCY, "log_level": "INFO"},
        judge={
            "kind": "openai",
            "base_url": server.base_url,
            "model": "slow-judge",
            "read_timeout_s": 120.0,  # longer than any hold: the slow pair must still be in flight at the kill
            "cache_enabled": False,
        },
    )
    topic, prefix = settings.topics.name("pairs"), settings.topics.prefix
    stop = asyncio.Event()
    watchers = [
        asyncio.create_task(watch_commits(bootstrap, settings.worker.app_id, topic, record, stop), name="commits"),
        asyncio.create_task(watch_outcomes(settings, record, stop), name="outcomes"),
    ]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    workers: list[subprocess.Popen[bytes]] = []
    try:
        record.worker_logs.append(tmp / "worker-1.log")
        workers.append(start_worker(_on_host(settings, tmp, 1), record.worker_logs[-1]))
        a, b, c = (SCENARIOS[n].partition for n in "abc")
        # Phase 1: (a) gets its slow pair at offset 0; (b) and (c) get commits to stand on.
        await send(producer, topic, prefix, record, [(a, [True] + [False] * 15), (b, [False] * 10), (c, [False] * 10)])
        await until(
            "commits at offset 10 on (b) and (c)",
            lambda: min(record.committed(b), record.committed(c)) >= 10,
            90,
            record,
            watchers,
        )
        # Phase 2: (b) slow in the middle; (c) slow at exactly the committed offset.
        await send(
            producer, topic, prefix, record, [(b, [False] * 5 + [True] + [False] * 10), (c, [True] + [False] * 15)]
        )
        await until(
            "outcomes for every fast pair",
            lambda: record.fast_ids() <= record.first_outcome.keys(),
            60,
            record,
            watchers,
        )
        await _let_it_commit(record)
        record.held_at_kill = server.stats().held_now
        kill(workers[0])
        record.killed_at = time.time()
        server.release()  # from now on the judge is fast for every pair
        record.worker_logs.append(tmp / "worker-2.log")
        workers.append(start_worker(_on_host(settings, tmp, 2), record.worker_logs[-1]))
        await _until_settled(record)
        # The verdict on "did it get an outcome" is the project's own reader's (de-duplicated, audit-aware).
        slow_ids = {s.pair_id for s in record.sent if s.slow}
        collected = await collect_outcomes(settings, slow_ids, timeout=5)
        record.slow_outcomes = {pid: kind for pid, (kind, _) in collected.final.items()}
    finally:
        for proc in workers:
            stop_process(proc)
        stop.set()
        await asyncio.gather(*watchers, return_exceptions=True)
        await producer.stop()
    return record


def _on_host(settings: Settings, tmp: Path, number: int) -> Settings:
    """The worker's own data dir, as if on a host of its own."""
    return settings.model_copy(
        update={"worker": settings.worker.model_copy(update={"data_dir": tmp / f"worker-{number}-data"})}
    )


async def _let_it_commit(record: Record) -> None:
    """Wait until every slow partition is seen committed past its slow pair (the bug, seen), or the
    worker has had ``COMMIT_GRACE_S`` since its last outcome to commit whatever it would commit."""
    slow = [record.slow_pair(s.partition) for s in SCENARIOS.values()]
    while True:
        last_outcome = max(record.first_outcome.values())
        if all(record.committed(s.partition) > s.offset for s in slow) or time.time() - last_outcome > COMMIT_GRACE_S:
            return
        await asyncio.sleep(POLL_S)


async def _until_settled(record: Record, timeout: float = 45.0) -> None:
    """After the restart: until every slow pair has an outcome, or the group has been committed to the
    end of every partition for a while with some still missing (no worker will ever read them again)."""
    slow_ids = {s.pair_id for s in record.sent if s.slow}
    ends = {p: 1 + max(s.offset for s in record.sent if s.partition == p) for p in range(PARTITIONS)}
    deadline = time.monotonic() + timeout
    at_end_since: float | None = None
    while time.monotonic() < deadline and not slow_ids <= record.first_outcome.keys():
        if all(record.committed(p) >= end for p, end in ends.items()):
            at_end_since = at_end_since or time.monotonic()
            if time.monotonic() - at_end_since > 2 * COMMIT_GRACE_S:
                return
        await asyncio.sleep(POLL_S)


@pytest.fixture(scope="module")
def experiment(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Record:
    tmp = tmp_path_factory.mktemp("commit-safety")
    return asyncio.run(run_experiment(kafka_bootstrap, tmp))


# --------------------------------------------------------------------------------------------------
# The scenarios
# --------------------------------------------------------------------------------------------------


def check(record: Record, scenario: Scenario) -> None:
    slow = record.slow_pair(scenario.partition)
    # The premise: both orderings of every slow pair were held by the judge when the worker died.
    assert record.held_at_kill == 2 * len(SCENARIOS), (
        f"experiment broken: {record.held_at_kill} judge calls held at the kill, expected {2 * len(SCENARIOS)}"
    )
    problems = record.violations(scenario.partition)
    if slow.pair_id not in record.slow_outcomes:
        problems.append(
            f"{slow.pair_id} (offset {slow.offset}) never got an outcome after the worker was killed and replaced"
        )
    assert not problems, (
        f"({scenario.name}) {scenario.what}: the group committed past a pair still being judged\n  "
        + "\n  ".join(problems[:8])
        + f"\n  commits seen on partition {scenario.partition}: {record.timeline(scenario.partition)}"
    )


def test_a_slow_pair_at_the_head_of_a_fresh_partition_is_never_committed_past(experiment: Record) -> None:
    check(experiment, SCENARIOS["a"])


def test_a_slow_pair_after_earlier_commits_is_never_committed_past(experiment: Record) -> None:
    check(experiment, SCENARIOS["b"])


def test_a_slow_pair_at_exactly_the_committed_offset_is_never_committed_past(experiment: Record) -> None:
    check(experiment, SCENARIOS["c"])
