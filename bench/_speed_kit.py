"""The parts of ``bench.speed`` that are not a measurement: pairs, processes, samplers, outcome reading.

* ``SpeedPairs``: tone-and-style pairs (``bench.judge.make_pairs``: distinct texts, one output marked),
  as JSON dicts, stamped with ``metadata.created_at`` just before they are produced.
* ``worker_env`` / ``start_process``: a worker's environment, built from nothing but variables that
  existed on commit 93099e9, so the same bench drives an older tree (``--tree``); the import path and
  working directory point at that tree, and ``check_tree`` proves the child imports from it.
* ``Sampler``: CPU seconds and RSS of child processes from /proc, every 0.1 s, with wall-clock times,
  so a phase can take the CPU over exactly its steady window.
* ``OutcomeWatcher``: reads output topics from the beginning in the background, keeping each key's
  first record with its broker timestamp and sizes, and every distinct outcome it got (for conflicts).
* ``ensure_fastchat_venv``: FastChat in a venv of its own, built on demand by package name.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import itertools
import json
import logging
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from bench.judge import MARKER, make_pairs
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.admin import topic_partitions
from pairjudge_dev.bench import fail, quiet_kafka_client

# --------------------------------------------------------------------------------------------------
# Pairs
# --------------------------------------------------------------------------------------------------


@dataclass
class SpeedPairs:
    """Pairs as JSON dicts, each with the candidate id its marked output must win for."""

    dicts: list[dict[str, Any]]
    expected: dict[str, str]

    @classmethod
    def make(cls, n: int, prefix: str) -> SpeedPairs:
        dicts, expected = [], {}
        for pair in make_pairs(n, prefix):
            dicts.append(pair.model_dump(mode="json", exclude_none=True))
            expected[pair.pair_id] = next(c.candidate_id for c in pair.candidates if MARKER in c.output)
        return cls(dicts, expected)

    @property
    def ids(self) -> list[str]:
        return [d["pair_id"] for d in self.dicts]

    @staticmethod
    def stamp(data: dict[str, Any]) -> tuple[bytes, float]:
        """The event's bytes with ``created_at`` = now, and now as epoch seconds."""
        now = datetime.now(UTC)
        data.setdefault("metadata", {})["created_at"] = now.isoformat()
        return json.dumps(data).encode(), now.timestamp()


async def produce_backlog(bootstrap: str, topic: str, pairs: SpeedPairs) -> dict[str, float]:
    """Every pair, stamped and sent as fast as the producer goes; pair id -> created_at (epoch s)."""
    return await produce_paced(bootstrap, topic, pairs.dicts, None)


async def produce_paced(
    bootstrap: str, topic: str, dicts: Sequence[dict[str, Any]], rate: float | None, *, spread: int | None = None
) -> dict[str, float]:
    """One pair every 1/rate s on a fixed schedule (late ones go at once), each stamped as it is sent;
    with no rate, all at once. Pair id -> created_at (epoch s).

    ``spread``: pair i goes to partition i % spread instead of its key's hash, so that every partition
    (and so every worker of a group) gets the same share of a backlog, and none drains early."""
    created: dict[str, float] = {}
    # A backlog is batched as a producer would batch it; a paced pair goes out on its own, at once.
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5 if rate is None else 0)
    await producer.start()
    loop = asyncio.get_running_loop()
    try:
        futures = []
        start = loop.time()
        for i, data in enumerate(dicts):
            delay = 0.0 if rate is None else start + i / rate - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            raw, at = SpeedPairs.stamp(data)
            created[data["pair_id"]] = at
            partition = None if spread is None else i % spread
            futures.append(await producer.send(topic, value=raw, key=data["pair_id"].encode(), partition=partition))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return created


async def produce_bytes(bootstrap: str, topic: str, messages: Sequence[tuple[bytes, bytes]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        futures = [await producer.send(topic, value=value, key=key) for key, value in messages]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


# --------------------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------------------

#: The checkout this bench runs from.
REPO = Path(__file__).resolve().parents[1]


def worker_env(
    settings: Settings,
    tree: Path,
    *,
    pairs_in_flight: int,
    data_dir: Path,
    judge_url: str | None = None,
    calls_in_flight: int | None = None,
    cache_dir: Path | None = None,
) -> dict[str, str]:
    """A worker's environment. Only variables that exist on commit 93099e9 (streams/settings.py there):
    an older tree must read the same run. Any PAIRJUDGE_ variable of the caller is dropped."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAIRJUDGE_")}
    env.update(
        {
            "PYTHONPATH": str(tree),
            "PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS": settings.kafka.bootstrap_servers,
            "PAIRJUDGE_KAFKA__PARTITIONS": str(settings.kafka.partitions),
            "PAIRJUDGE_TOPICS__PREFIX": settings.topics.prefix,
            "PAIRJUDGE_WORKER__APP_ID": settings.worker.app_id,
            "PAIRJUDGE_WORKER__DATA_DIR": str(data_dir),
            "PAIRJUDGE_WORKER__CONCURRENCY": str(pairs_in_flight),
            "PAIRJUDGE_WORKER__LOG_LEVEL": "WARNING",
            "PAIRJUDGE_TELEMETRY__EXPORTER": "none",
        }
    )
    if judge_url is not None:
        env.update(
            {
                "PAIRJUDGE_JUDGE__KIND": "openai",
                "PAIRJUDGE_JUDGE__BASE_URL": judge_url,
                "PAIRJUDGE_JUDGE__MODEL": "bench-judge",
                "PAIRJUDGE_JUDGE__MAX_CONCURRENCY": str(calls_in_flight or 2 * pairs_in_flight),
                "PAIRJUDGE_JUDGE__CACHE_ENABLED": "true" if cache_dir is not None else "false",
            }
        )
        if cache_dir is not None:
            env["PAIRJUDGE_JUDGE__CACHE_DIR"] = str(cache_dir)
    return env


def run_bench(main: Coroutine[Any, Any, None]) -> None:
    """Run a Kafka bench's main coroutine with quiet clients; a harness failure ends it through ``fail``."""
    quiet_kafka_client()
    # The outcome readers start on fresh topics whose leaders may still be moving; aiokafka logs the
    # retried NotLeaderForPartition at ERROR. A reader that really fails raises in wait_for instead.
    logging.getLogger("aiokafka.consumer.fetcher").setLevel(logging.CRITICAL)
    try:
        asyncio.run(main)
    except (RuntimeError, subprocess.CalledProcessError, OSError) as exc:
        fail(f"the harness failed: {exc}")


def start_process(argv: Sequence[str], env: dict[str, str], cwd: Path, log_path: Path) -> subprocess.Popen[bytes]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:  # the child keeps its own descriptor
        return subprocess.Popen(
            list(argv), env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def check_tree(tree: Path) -> str:
    """Where a child with ``worker_env``'s import path finds the layers; raises unless in ``tree``."""
    if not (tree / "pairjudge" / "__init__.py").is_file():
        # Before 942e181 the layers were bare top-level packages (`streams.cli`, not `pairjudge.streams.cli`),
        # which this bench's worker command and in-tree helpers no longer name.
        raise RuntimeError(
            f"{tree} predates the pairjudge namespace (942e181): run that tree's own bench, or compare a later commit"
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAIRJUDGE_")}
    env["PYTHONPATH"] = str(tree)
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import pairjudge.agents as a, pairjudge.streams as s; print(a.__file__); print(s.__file__)",
        ],
        env=env,
        cwd=tree,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    if not all(Path(p).resolve().is_relative_to(tree) for p in out):
        raise RuntimeError(f"a child with PYTHONPATH={tree} imports {out}, not that tree")
    commit = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return f"{tree} at {commit or '?'}{' (with uncommitted changes)' if dirty else ''}"


def log_tail(paths: Sequence[Path], chars: int = 2500) -> str:
    return "\n".join(f"--- {p} ---\n{p.read_text(errors='replace')[-chars:]}" for p in paths if p.exists())


# --------------------------------------------------------------------------------------------------
# CPU and memory from /proc
# --------------------------------------------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def read_proc(pid: int) -> tuple[float, float] | None:
    """(CPU seconds, user + system, of the process and its threads; RSS in MB), or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": field 3 (state) is index 0
    cpu = (int(fields[11]) + int(fields[12])) / _TICK
    rss_mb = int(fields[21]) * _PAGE / 2**20
    return cpu, rss_mb


@dataclass
class Samples:
    """One process's samples: (wall time, CPU seconds, RSS MB)."""

    points: list[tuple[float, float, float]] = field(default_factory=list)

    def cpu_at(self, at: float) -> float:
        """CPU seconds at wall time ``at``, interpolated between the samples around it."""
        pts = self.points
        if not pts:
            return float("nan")
        if at <= pts[0][0]:
            return pts[0][1]
        for (t0, c0, _), (t1, c1, _) in itertools.pairwise(pts):
            if t0 <= at <= t1:
                return c0 + (c1 - c0) * ((at - t0) / (t1 - t0) if t1 > t0 else 0.0)
        return pts[-1][1]

    def cpu_between(self, start: float, end: float) -> float:
        return self.cpu_at(end) - self.cpu_at(start)

    def rss_between(self, start: float, end: float) -> list[float]:
        return [rss for t, _, rss in self.points if start <= t <= end]

    async def wait_idle(self, *, below: float = 0.05, span_s: float = 2.0, timeout_s: float = 180.0) -> float:
        """Wait until the process used less than ``below`` of a core over the last ``span_s`` seconds;
        the seconds waited (``timeout_s`` at most).

        A worker whose outcomes are all out may still be busy: its audit agents (one at a time each)
        work through the decision records and observations a backlog left behind. A phase measured
        right after would be charged for that work, so phases that measure CPU start from idle.
        """
        started = time.time()
        await asyncio.sleep(span_s)
        while time.time() - started < timeout_s:
            now = time.time()
            if self.cpu_between(now - span_s, now) < below * span_s:
                break
            await asyncio.sleep(0.5)
        return time.time() - started


class Sampler:
    """Samples every registered process every ``interval`` s in a background task."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.by_pid: dict[int, Samples] = {}
        self._task: asyncio.Task[None] | None = None

    def watch(self, pid: int) -> Samples:
        samples = self.by_pid.setdefault(pid, Samples())
        self._take(pid, samples)
        if self._task is None:
            self._task = asyncio.create_task(self._run())
        return samples

    def _take(self, pid: int, samples: Samples) -> None:
        got = read_proc(pid)
        if got is not None:
            samples.points.append((time.time(), *got))

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            for pid, samples in self.by_pid.items():
                self._take(pid, samples)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


# --------------------------------------------------------------------------------------------------
# Outcomes
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """The first record seen for one key on the watched topics."""

    topic: str
    timestamp: float  # broker timestamp (the producer's CreateTime), epoch seconds
    event: dict[str, Any] | None  # the JSON value (None when the watcher reads raw bytes)
    value_bytes: int
    header_bytes: int


class OutcomeWatcher:
    """Reads ``topics`` from the beginning in the background; keeps the first record per key.

    With ``json_values`` (pairjudge's outcome topics) an audit copy of a verdict on the review topic
    (``audit: true``) is skipped, as ``streams.kafka.collector`` does, and the key is the event's pair id.
    """

    def __init__(self, bootstrap: str, topics: Sequence[str], *, json_values: bool = True) -> None:
        self.bootstrap = bootstrap
        self.topics = list(topics)
        self.json_values = json_values
        self.first: dict[str, Seen] = {}
        self.duplicates = 0
        #: key -> its distinct outcomes ("verdicts:<winner>", "review", "deadletter"); JSON values only.
        self.distinct: dict[str, set[str]] = {}
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> OutcomeWatcher:
        parts = await topic_partitions(self.bootstrap, self.topics)
        partitions = [TopicPartition(t, p) for t, ps in parts.items() for p in ps]
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await self._consumer.start()
        self._consumer.assign(partitions)
        await self._consumer.seek_to_beginning(*partitions)
        self._task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        assert self._consumer is not None
        while True:
            batches = await self._consumer.getmany(timeout_ms=200, max_records=5000)
            for tp, records in batches.items():
                for rec in records:
                    self._add(tp.topic, rec)

    def _add(self, topic: str, rec: Any) -> None:
        value: bytes = rec.value or b""
        key = rec.key.decode() if rec.key else ""
        event: dict[str, Any] | None = None
        if self.json_values:
            try:
                event = json.loads(value)
            except ValueError:
                event = {}
            if not isinstance(event, dict):
                event = {}
            if topic.endswith(".review") and event.get("audit"):
                return
            key = str(event.get("pair_id") or key)
        if self.json_values:
            # Every distinct outcome a key got (kind, and the winner of a verdict): more than one is a
            # pair judged again and published differently after a redelivery, not a harmless duplicate.
            kind = topic.rsplit(".", 1)[-1]
            winner = event.get("winner") if event is not None and kind == "verdicts" else None
            self.distinct.setdefault(key, set()).add(f"{kind}:{winner}" if winner else kind)
        if key in self.first:
            self.duplicates += 1
            return
        headers = sum(len(k) + len(v or b"") for k, v in rec.headers or ())
        self.first[key] = Seen(topic, rec.timestamp / 1000, event, len(value), headers)

    async def wait_for(self, keys: Sequence[str], timeout: float, *, idle: float | None = None) -> set[str]:
        """Wait until every key has a record, for at most ``timeout`` s (or ``idle`` s without a new one).
        Returns the keys still missing."""
        deadline = time.monotonic() + timeout
        last_count, last_change = -1, time.monotonic()
        while True:
            missing = {k for k in keys if k not in self.first}
            if not missing or time.monotonic() > deadline:
                return missing
            if len(missing) != last_count:
                last_count, last_change = len(missing), time.monotonic()
            elif idle is not None and time.monotonic() - last_change > idle:
                return missing
            if self._task is not None and self._task.done():
                self._task.result()  # the reader failed: raise its error
            await asyncio.sleep(0.1)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._consumer is not None:
            await self._consumer.stop()


def steady_window(times: Sequence[float], trim: float = 0.1) -> tuple[float, float, int]:
    """(start, end, completions inside) over the middle of ``times``: the first and last ``trim`` of
    completions are dropped (start-up and the drain). Needs at least 3 times."""
    ordered = sorted(times)
    cut = math.floor(len(ordered) * trim)
    lo, hi = cut, len(ordered) - 1 - cut
    if hi - lo < 2:
        lo, hi = 0, len(ordered) - 1
    return ordered[lo], ordered[hi], hi - lo


# --------------------------------------------------------------------------------------------------
# FastChat's venv
# --------------------------------------------------------------------------------------------------

FASTCHAT_VENV = Path.home() / ".cache" / "pairjudge" / "fastchat-venv"
#: fschat 0.2.36 (its last release) was written for the legacy openai API (``openai.ChatCompletion``),
#: removed in openai 1.0. psutil: imported by FastChat's model code at module level (small, and real).
FASTCHAT_REQUIREMENTS = ("fschat==0.2.36", "openai==0.28.1", "psutil")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # two benches at once (a smoke test and a manual run)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_fastchat_venv(venv: Path = FASTCHAT_VENV) -> Path:
    """The FastChat venv's interpreter, building the venv first (``python -m venv`` + pip) when missing."""
    python = venv / "bin" / "python"
    ready = venv / ".pairjudge-ready"
    wanted = "\n".join(FASTCHAT_REQUIREMENTS)
    with _locked(venv.parent / ".fastchat-venv.lock"):
        if ready.exists() and ready.read_text() == wanted and python.exists():
            return python
        shutil.rmtree(venv, ignore_errors=True)  # half-built or other versions: start over
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", *FASTCHAT_REQUIREMENTS], capture_output=True, text=True
        )
        if done.returncode != 0:
            raise RuntimeError(f"pip could not install {' '.join(FASTCHAT_REQUIREMENTS)}:\n{done.stderr[-3000:]}")
        subprocess.run([str(python), "-c", "import fastchat, openai"], check=True, capture_output=True)
        ready.write_text(wanted)
    return python
