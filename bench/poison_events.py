"""Poison events against a real worker on Kafka: is every one dead-lettered, and does the worker survive?

Run from the checkout root (the poison kinds are ``pairjudge_dev.poison``'s, shared with the tests)::

    python -m bench.poison_events                         # Apache Kafka in a temp dir
    python -m bench.poison_events --bootstrap host:9092   # a running cluster (topics get a unique prefix)
    python -m bench.poison_events --per-kind 500 --large-per-kind 40

What it does:

1. **Codec cost, in process.** ``streams.kafka.codecs.parse_object`` (size, UTF-8, the depth pre-scan, the
   number hooks, ``json.loads``) against plain ``json.loads`` on the same bytes, best of 5: an ordinary
   pair, a pair whose outputs are full of brackets (the pre-scan's slow path), a 1 MB pair, and the
   poison shapes. It shows what bounding the parse costs valid traffic.
2. **Bursts.** One ``pairjudge worker`` (offline judge) on fresh topics, warmed up by judging one valid
   pair. For each poison kind, one burst of ``--per-kind`` distinct events (``--large-per-kind`` for the
   events of 600 KB to 1 MB) is produced as fast as the producer goes: half raw with no key, half through
   ``send_events`` (``key_of`` keys those that parse), then 2 valid pairs. The bench waits until every
   event of the burst has its dead letter (matched by ``original_sha256``), then checks the worker
   process. A worker that exited is counted and restarted, so one crash does not hide the next kind.
3. **Table.** Per kind: events sent, events with a dead letter, the share, letters with the expected
   reason, letters whose original is right (the whole event, or for events too large to carry a head of
   it flagged ``original_truncated``, with the whole event's size), duplicate letters, the burst's dead
   letters per second (first send to last letter), and worker exits during the burst. Then it waits for
   the valid pairs' outcomes.

It exits 1 if any poison event has no dead letter or the wrong reason, if a letter is larger than the
bound, if the worker exited, or if a valid pair has no outcome.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from rich.table import Table

from pairjudge.streams.cli.demo import start_worker, stop_process
from pairjudge.streams.config.settings import Settings, load_settings
from pairjudge.streams.kafka.admin import create_topics
from pairjudge.streams.kafka.codecs import parse_object
from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.dead_letters import DEFAULT_MAX_LETTER_BYTES
from pairjudge.streams.kafka.producer import send_events
from pairjudge.streams.kafka.topics import topic_specs
from pairjudge_dev.bench import (
    add_broker_args,
    bench_broker,
    console,
    quiet_kafka_client,
    run_settings,
    work_dir,
)
from pairjudge_dev.pairgen import many_pairs
from pairjudge_dev.poison import KINDS, DeadLetterReader, Poison, expect_truncated, poison_events, send_raw

#: Kinds whose events are 600 KB to 1 MB: fewer of them, so a run stays within a few hundred MB.
LARGE_KINDS = frozenset({"deep_300k_oversized", "event_800kb", "event_1mb"})
VALID_PER_BURST = 2
TIMING_ROUNDS = 5


# --------------------------------------------------------------------------------------------------
# 1. Codec cost
# --------------------------------------------------------------------------------------------------


def _best_us(run: Callable[[], object], raw_len: int) -> float:
    repeats = max(1, min(2_000, 4_000_000 // max(raw_len, 1)))
    best = float("inf")
    for _ in range(TIMING_ROUNDS):
        started = time.perf_counter()
        for _ in range(repeats):
            run()
        best = min(best, (time.perf_counter() - started) / repeats)
    return best * 1e6


def _try(run: Callable[[], object]) -> Callable[[], object]:
    def guarded() -> object:
        try:
            return run()
        except Exception as exc:  # noqa: BLE001 - the poison rows time the rejection itself
            return exc

    return guarded


def codec_cost() -> Table:
    pair = many_pairs(1, "bench")[0]
    data = json.loads(pair)
    data["candidates"][0]["output"] = 'Use `{"a": [1, [2, {}]]}` or [x] in {y}. ' * 500
    brackets = json.dumps(data).encode()
    data = json.loads(pair)
    data["candidates"][0]["output"] = "x" * 1_000_000
    big = json.dumps(data).encode()
    rows = [
        ("ordinary pair", pair),
        ("pair with 20k brackets in its output", brackets),
        ("1 MB pair", big),
        ("deep_1000 (poison)", poison_events("b", "deep_1000", 1)[0].raw),
        ("deep_100k (poison)", poison_events("b", "deep_100k", 1)[0].raw),
        ("huge_int (poison)", poison_events("b", "huge_int", 1)[0].raw),
    ]
    table = Table(title="Codec cost in process (best of 5; µs per event)")
    for column in ("event", "bytes", "json.loads", "parse_object (bounded)", "extra", "outcome"):
        table.add_column(column, justify="left" if column in ("event", "outcome") else "right")
    for name, raw in rows:
        plain_run = _try(partial(json.loads, raw))
        bounded_run = _try(partial(parse_object, raw, max_bytes=2_000_000))
        plain, bounded = _best_us(plain_run, len(raw)), _best_us(bounded_run, len(raw))
        outcome, plain_outcome = bounded_run(), plain_run()
        said = "parsed" if isinstance(outcome, dict) else getattr(outcome, "reason", type(outcome).__name__)
        if isinstance(plain_outcome, Exception):
            said += f" (json.loads: {type(plain_outcome).__name__})"
        table.add_row(name, f"{len(raw):,}", f"{plain:,.1f}", f"{bounded:,.1f}", f"{bounded / plain:.2f}×", said)
    return table


# --------------------------------------------------------------------------------------------------
# 2. Bursts
# --------------------------------------------------------------------------------------------------


@dataclass
class Burst:
    """One kind's burst: what was sent, how long until its last dead letter, and worker exits meanwhile."""

    kind: str
    events: list[Poison]
    seconds: float = 0.0
    worker_exits: int = 0


@dataclass
class KindResult:
    kind: str
    sent: int
    seconds: float
    worker_exits: int
    lettered: int = 0
    right_reason: int = 0
    original_ok: int = 0
    duplicates: int = 0
    oversized_letters: int = 0
    wrong: list[str] = field(default_factory=list)


class Worker:
    """The worker process, restarted (and counted) whenever it exits."""

    def __init__(self, settings: Settings, log_dir: Path) -> None:
        self.settings = settings
        self.log_dir = log_dir
        self.exits = 0
        self.proc = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        return start_worker(self.settings, self.log_dir / f"worker-{self.exits + 1}.log")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def restart_if_exited(self) -> int:
        if self.alive():
            return 0
        self.exits += 1
        console.print(f"[red]worker exited with code {self.proc.returncode}; restarting it[/red]")
        self.proc = self._start()
        return 1

    def stop(self) -> None:
        stop_process(self.proc)

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.log_dir.glob("worker-*.log")))


async def burst(
    settings: Settings, n: int, kind: str, count: int, reader: DeadLetterReader, worker: Worker, timeout: float
) -> tuple[Burst, list[bytes]]:
    run = Burst(kind, poison_events(settings.topics.prefix, kind, count))
    valid = many_pairs(VALID_PER_BURST, f"{settings.topics.prefix}-ok-{n:02d}")
    shas = {e.sha256 for e in run.events}
    started = time.monotonic()
    # Half with no key at all, half through pairjudge's own producer (key_of reads what it can).
    half = len(run.events) // 2
    await send_raw(settings, [e.raw for e in run.events[:half]])
    await send_events(settings, [e.raw for e in run.events[half:]])
    await send_events(settings, valid)
    await reader.until(shas, timeout, worker.alive)
    run.seconds = time.monotonic() - started
    run.worker_exits = worker.restart_if_exited()
    if run.worker_exits:
        # What the restarted worker still dead-letters counts, but the exit is charged to this kind.
        await reader.until(shas, timeout, worker.alive)
    return run, valid


def score(run: Burst, reader: DeadLetterReader) -> KindResult:
    result = KindResult(run.kind, len(run.events), run.seconds, run.worker_exits)
    for event in run.events:
        got = reader.letters.get(event.sha256, [])
        if not got:
            continue
        result.lettered += 1
        result.duplicates += len(got) - 1
        result.oversized_letters += sum(1 for _, size in got if size > DEFAULT_MAX_LETTER_BYTES)
        letter = got[0][0]
        if letter.reason == event.reason:
            result.right_reason += 1
        elif len(result.wrong) < 3:
            result.wrong.append(f"{letter.reason}: {letter.error[:120]}")
        sized = letter.original_size == len(event.raw)
        if expect_truncated(event):
            result.original_ok += sized and letter.original_truncated and event.raw.startswith(letter.original)
        else:
            result.original_ok += sized and not letter.original_truncated and letter.original == event.raw
    return result


def report(results: Sequence[KindResult]) -> Table:
    table = Table(title="Poison events against one pairjudge worker on Kafka")
    columns = ("kind", "sent", "dead-lettered", "share", "right reason", "original ok", "duplicates", "letters/s")
    for column in (*columns, "worker exits"):
        table.add_column(column, justify="left" if column == "kind" else "right")
    for r in results:
        table.add_row(
            r.kind,
            f"{r.sent:,}",
            f"{r.lettered:,}",
            f"{r.lettered / r.sent:.1%}",
            f"{r.right_reason:,}",
            f"{r.original_ok:,}",
            f"{r.duplicates:,}",
            f"{r.lettered / r.seconds:,.0f}" if r.seconds else "-",
            str(r.worker_exits),
        )
    sent = sum(r.sent for r in results)
    lettered = sum(r.lettered for r in results)
    table.add_row(
        "[bold]all[/bold]",
        f"{sent:,}",
        f"{lettered:,}",
        f"{lettered / sent:.1%}",
        f"{sum(r.right_reason for r in results):,}",
        f"{sum(r.original_ok for r in results):,}",
        f"{sum(r.duplicates for r in results):,}",
        f"{lettered / sum(r.seconds for r in results):,.0f}",
        str(sum(r.worker_exits for r in results)),
    )
    return table


async def run_bursts(settings: Settings, args: argparse.Namespace, work_dir: Path) -> bool:
    reader = DeadLetterReader(settings)
    await reader.start()
    worker = Worker(settings, work_dir)
    bursts: list[Burst] = []
    valid: list[bytes] = []
    try:
        # One valid pair first, so the first burst's rate does not include the worker's start-up.
        warmup = many_pairs(1, f"{settings.topics.prefix}-warmup")
        await send_events(settings, warmup)
        ready = await collect_outcomes(settings, {json.loads(warmup[0])["pair_id"]}, timeout=args.timeout)
        if not ready.complete:
            console.print(f"[red]the worker judged no pair within {args.timeout:g}s[/red]\n{worker.logs()[-3000:]}")
            return False
        for n, kind in enumerate(KINDS):
            count = args.large_per_kind if kind in LARGE_KINDS else args.per_kind
            run, sent_valid = await burst(settings, n, kind, count, reader, worker, args.timeout)
            bursts.append(run)
            valid += sent_valid
            lettered = sum(1 for e in run.events if e.sha256 in reader.letters)
            exits = f", [red]worker exits {run.worker_exits}[/red]" if run.worker_exits else ""
            console.print(f"  {kind}: {lettered}/{len(run.events)} dead-lettered in {run.seconds:.1f}s{exits}")
        await reader.settle(3)  # so late duplicates are counted too
        valid_ids = {json.loads(raw)["pair_id"] for raw in valid}
        outcomes = await collect_outcomes(settings, valid_ids, timeout=args.timeout)
        final_alive = worker.alive()
        logs = worker.logs()
    finally:
        worker.stop()
        await reader.stop()

    results = [score(run, reader) for run in bursts]
    console.print(report(results))
    judged = sum(1 for kind, _ in outcomes.final.values() if kind in ("verdicts", "review"))
    console.print(
        f"valid pairs sent between bursts: {len(valid_ids)}; judged (verdict or review): {judged}; "
        f"worker alive at the end: {final_alive}; worker exits: {worker.exits}"
    )
    for marker in ("RecursionError", "MessageSizeTooLarge", "MaxRestartsExceeded"):
        console.print(f"worker log lines with {marker}: {logs.count(marker)}")

    failures = []
    for r in results:
        if r.lettered < r.sent:
            failures.append(f"{r.kind}: {r.sent - r.lettered} of {r.sent} not dead-lettered")
        if r.right_reason < r.lettered:
            failures.append(f"{r.kind}: {r.lettered - r.right_reason} with the wrong reason, e.g. {r.wrong}")
        if r.original_ok < r.lettered:
            failures.append(f"{r.kind}: {r.lettered - r.original_ok} letters with a wrong original or size")
        if r.oversized_letters:
            failures.append(f"{r.kind}: {r.oversized_letters} letters over {DEFAULT_MAX_LETTER_BYTES:,} bytes")
    if worker.exits or not final_alive:
        failures.append(f"the worker exited {worker.exits} time(s)")
    if judged < len(valid_ids):
        failures.append(f"{len(valid_ids) - judged} valid pairs without a verdict or review")
    for failure in failures:
        console.print(f"[red]FAIL[/red] {failure}")
    return not failures


# --------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> bool:
    console.print(codec_cost())
    with work_dir("pairjudge-poison-", keep=args.keep) as work:
        async with bench_broker(work.path, bootstrap=args.bootstrap) as broker:
            settings = run_settings(load_settings(), broker, work.path, tag="poison", judge={"kind": "offline"})
            await create_topics(broker.bootstrap, topic_specs(settings))
            total = sum(args.large_per_kind if k in LARGE_KINDS else args.per_kind for k in KINDS)
            console.print(
                f"[bold]bursts[/bold]: {len(KINDS)} poison kinds, {total:,} events, on {broker.name} "
                f"(topics {settings.topics.prefix}.*); work dir {work.path}"
            )
            work.ok = await run_bursts(settings, args, work.path)
        return work.ok


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    add_broker_args(parser)
    parser.add_argument("--per-kind", type=int, default=200, help="events per poison kind (default 200)")
    parser.add_argument(
        "--large-per-kind", type=int, default=20, help="events per kind of 600 KB to 1 MB events (default 20)"
    )
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for each burst's letters")
    args = parser.parse_args(argv)
    if args.per_kind < 10 or args.large_per_kind < 10:
        parser.error("--per-kind and --large-per-kind must be at least 10")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    quiet_kafka_client()
    sys.exit(0 if asyncio.run(run(args)) else 1)


if __name__ == "__main__":
    main()
