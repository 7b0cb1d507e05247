"""What every benchmark sets up: its console, failure, work dir, broker and run settings.

The benchmarks (``python -m bench.<name>`` from the checkout root) differ in what they measure, not in
how they start: each takes ``--bootstrap`` (a running Kafka) or starts Apache Kafka in its work dir (or
Tansu, the demo's broker), gives its run a topic prefix, consumer group and worker data dir of its own,
keeps the work dir when the run fails (or ``--keep``), and exits 1 with one ``BENCH FAILED`` line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NoReturn

from rich.console import Console

from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.admin import wait_until_ready
from pairjudge.streams.kafka.embedded import RunningBroker, start_tansu
from pairjudge_dev import workers
from pairjudge_dev.kafka import KAFKA_VERSION, start_kafka

BrokerKind = Literal["kafka", "tansu"]

#: Wide enough for the tables when the output is piped to a file.
console = Console(width=None if sys.stdout.isatty() else 140)


def fail(message: str) -> NoReturn:
    console.print(f"[bold red]BENCH FAILED:[/bold red] {message}")
    raise SystemExit(1)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1), nearest rank; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def parse_counts(text: str) -> list[int]:
    """``1,2,4``: sorted distinct positive counts (of workers, processes), for an ``argparse`` type."""
    counts = sorted({int(part) for part in text.split(",") if part.strip()})
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError("counts are positive integers, comma-separated")
    return counts


def add_broker_args(parser: argparse.ArgumentParser, *, tansu: bool = False) -> None:
    """``--bootstrap`` (and ``--broker`` where Tansu makes sense) and ``--keep``, the same in every bench."""
    if tansu:
        parser.add_argument(
            "--broker", choices=("kafka", "tansu"), default="kafka", help="broker to start (default kafka)"
        )
    parser.add_argument("--bootstrap", help="use this running Kafka instead of starting one")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (broker data, worker logs)")


def quiet_kafka_client() -> None:
    # aiokafka logs retried NotLeaderForPartition warnings while fresh topics settle; they are harmless.
    logging.getLogger("aiokafka").setLevel(logging.ERROR)


# --------------------------------------------------------------------------------------------------
# Work dir and broker
# --------------------------------------------------------------------------------------------------


@dataclass
class WorkDir:
    path: Path
    #: Set once the run succeeded: only then is the dir removed (unless kept).
    ok: bool = False


@contextlib.contextmanager
def work_dir(prefix: str, *, keep: bool) -> Iterator[WorkDir]:
    """A fresh temp dir, removed after a run that set ``ok`` unless ``keep``; kept and named otherwise."""
    wd = WorkDir(Path(tempfile.mkdtemp(prefix=prefix)))
    try:
        yield wd
    finally:
        if wd.ok and not keep:
            shutil.rmtree(wd.path, ignore_errors=True)
        else:
            console.print(f"logs kept in {wd.path}")


@dataclass(frozen=True)
class BenchBroker:
    bootstrap: str
    #: For the report: which broker the figures were taken on.
    name: str
    kind: BrokerKind | None  # None: a running cluster we did not start
    running: RunningBroker | None


@contextlib.asynccontextmanager
async def bench_broker(
    work: Path, *, bootstrap: str | None, kind: BrokerKind = "kafka", ready_timeout: float = 60
) -> AsyncIterator[BenchBroker]:
    """``bootstrap`` when given (waited for), else a broker started in ``work`` and stopped afterwards.

    Broker start and stop block (a JVM takes seconds), so they run in a thread: a bench's own tasks
    (a judge server, a SIGTERM handler) keep running meanwhile.
    """
    if bootstrap:
        await wait_until_ready(bootstrap, timeout=ready_timeout)
        yield BenchBroker(bootstrap, "Kafka (already running)", None, None)
        return
    if kind == "tansu":
        running = await asyncio.to_thread(start_tansu, log_dir=work)
        name = "Tansu (in memory)"
    else:
        running = await asyncio.to_thread(start_kafka, work / "kafka")
        name = f"Apache Kafka {KAFKA_VERSION} (KRaft, 1 node)"
    try:
        yield BenchBroker(running.bootstrap, name, kind, running)
    finally:
        await asyncio.to_thread(running.stop)


def run_settings(base: Settings, broker: BenchBroker, work: Path, *, tag: str, **sections: dict[str, Any]) -> Settings:
    """``base`` for one bench run on ``broker`` (see ``pairjudge_dev.workers.run_settings``), telemetry off."""
    if broker.kind == "tansu":
        # Tansu holds a group join for half the session timeout (streams/kafka/embedded.py): keep it short.
        sections["kafka"] = {"session_timeout_s": 5.0, "heartbeat_interval_s": 1.0, **sections.get("kafka", {})}
    sections["telemetry"] = {"exporter": "none", **sections.get("telemetry", {})}
    return workers.run_settings(base, broker.bootstrap, work, tag=tag, **sections)
