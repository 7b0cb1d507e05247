"""``pairjudge demo``: the whole path on embedded defaults, start to finish, in one command.

Tansu on a free loopback port (or any Kafka via ``--bootstrap``), one worker process, the built-in
sample pairs, and a wait until every pair has a final outcome.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pairjudge.schemas.audit import Alert, AuditSeries, AuditSnapshot
from pairjudge.schemas.outcomes import entry_for_topic
from pairjudge.streams.audit.label_files import Accepted, parse_labels
from pairjudge.streams.audit.label_import import publish as publish_labels
from pairjudge.streams.audit.report import latest_per_window, parse_audit_events
from pairjudge.streams.cli.base import output_console, pairjudge_command
from pairjudge.streams.cli.words import DECIDED_BY_WORDS, reason_words
from pairjudge.streams.config.settings import Settings, environ_for
from pairjudge.streams.kafka.admin import create_topics, wait_until_ready
from pairjudge.streams.kafka.collector import Outcomes, collect_outcomes, read_topic
from pairjudge.streams.kafka.embedded import RunningBroker, start_tansu
from pairjudge.streams.kafka.producer import key_of, read_lines, send_events
from pairjudge.streams.kafka.topics import FINAL_KINDS, topic_specs
from pairjudge.streams.security.files import open_private_append, open_private_write, private_dir
from pairjudge.streams.security.kafka_clients import PLAINTEXT_CLIENT, client_config
from pairjudge.streams.telemetry.tracing import Telemetry


@dataclass
class DemoResult:
    outcomes: Outcomes
    wall_seconds: float
    #: The drift audit's latest snapshot per series, and every alert, from this run.
    snapshots: list[AuditSnapshot] = field(default_factory=list)
    alerts: list[Alert] = field(default_factory=list)
    #: Lines sent with no readable pair id (1-based line number), each with the reason it was dead-lettered
    #: for, or None when its dead letter was not seen: they have no pair id to find their outcome by.
    keyless: dict[int, str | None] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Every pair has an outcome, and none has two different ones."""
        return self.outcomes.ok


def sample_pairs() -> list[bytes]:
    text = resources.files("pairjudge.streams").joinpath("data/sample_pairs.jsonl").read_bytes()
    return [line for line in text.splitlines() if line.strip()]


def sample_labels() -> list[bytes]:
    """Human labels for the sample pairs, written for the demo by the maintainers (not evidence)."""
    text = resources.files("pairjudge.streams").joinpath("data/sample_labels.jsonl").read_bytes()
    return [line for line in text.splitlines() if line.strip()]


#: The demo's audit: every snapshot soon, one window for the whole run, and rate alerts from 5 pairs a
#: series (production needs 20) so the sample's dozen pairs can show them. The kappa guard keeps its
#: production minimum of labels, so a demo never pauses automation on a shared cluster.
DEMO_AUDIT = {"snapshot_interval_s": 0.5, "window_s": 86_400.0, "min_pairs": 5}


def _tag_run(raw: bytes, run_id: str) -> bytes:
    """Prefix pair ids with the run id, so a demo against a shared Kafka never counts old outcomes."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # a deliberately malformed sample line: sent as it is
        return raw
    if isinstance(data, dict) and isinstance(data.get("pair_id"), str):
        data["pair_id"] = f"{run_id}-{data['pair_id']}"
        return json.dumps(data).encode()
    return raw


def start_worker(settings: Settings, log_path: Path) -> subprocess.Popen[bytes]:
    """A ``pairjudge worker`` process logging to ``log_path``, with a data directory of its own: the one
    named after its log under ``settings.worker.data_dir``. Workers started together from one ``settings``
    (tests, benchmarks) must not share one: with the RocksDB table store each holds its databases' locks,
    and a second worker on them blocks its rebalance for 30 s per partition, then crashes. A worker
    started again with the same log finds its tables there, as a restarted pod finds its volume."""
    private_dir(settings.worker.data_dir)
    own = settings.worker.model_copy(update={"data_dir": settings.worker.data_dir / log_path.stem})
    log = open_private_append(log_path, what="worker log")
    return subprocess.Popen(
        [sys.executable, "-m", "pairjudge.streams.cli", "worker", "--no-create-topics"],
        env=environ_for(settings.model_copy(update={"worker": own})),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, 15)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait(5)


async def run_demo(
    settings: Settings,
    *,
    bootstrap: str | None,
    out_path: Path,
    pairs_path: Path | None,
    timeout: float,
    console: Console | None = None,
) -> DemoResult:
    console = console or output_console()
    started = time.monotonic()
    started_at = datetime.now(UTC)
    run_id = uuid.uuid4().hex[:8]
    out_dir = out_path.parent
    if not out_dir.exists():
        private_dir(out_dir)  # it will hold outcomes, audit events and traces: owner-only
    broker: RunningBroker | None = None
    worker: subprocess.Popen[bytes] | None = None
    try:
        if bootstrap is None:
            broker = start_tansu(log_dir=out_dir)
            bootstrap = broker.bootstrap
            # Tansu holds group joins for half the session timeout: keep it short.
            # (And plaintext: the embedded broker has no TLS or SASL, whatever the environment says.)
            kafka = settings.kafka.model_copy(
                update={"session_timeout_s": 5.0, "heartbeat_interval_s": 1.0, **PLAINTEXT_CLIENT}
            )
            console.print(f"[bold]broker[/bold] Tansu on {bootstrap} (in memory)")
        else:
            kafka = settings.kafka
            console.print(f"[bold]broker[/bold] Kafka at {bootstrap}")
        telemetry_settings = settings.telemetry
        if telemetry_settings.exporter == "none":
            telemetry_settings = telemetry_settings.model_copy(
                update={"exporter": "file", "file_path": out_dir / "demo-traces.jsonl"}
            )
        settings = settings.model_copy(
            update={
                "kafka": kafka.model_copy(update={"bootstrap_servers": bootstrap}),
                "worker": settings.worker.model_copy(
                    update={"data_dir": out_dir / f"worker-{run_id}", "app_id": f"pairjudge-demo-{run_id}"}
                ),
                "telemetry": telemetry_settings,
                "audit": settings.audit.model_copy(update=DEMO_AUDIT),
            }
        )
        await wait_until_ready(client_config(settings.kafka), timeout=30)
        await create_topics(client_config(settings.kafka), topic_specs(settings))
        worker = start_worker(settings, out_dir / "demo-worker.log")
        events = [_tag_run(raw, run_id) for raw in (read_lines(pairs_path) if pairs_path else sample_pairs())]
        expected = {pid.decode() for pid in (key_of(raw) for raw in events) if pid}
        telemetry = Telemetry(settings.telemetry)
        try:
            sent = await send_events(settings, events, tracer=telemetry.tracer)
        finally:
            telemetry.shutdown()
        console.print(f"[bold]sent[/bold] {sent} events ({len(expected)} with a pair id); waiting for outcomes")
        outcomes = await collect_outcomes(settings, expected, timeout=timeout)
        keyless = await _keyless_letters(settings, events, started_at)
        if worker.poll() is not None:
            console.print(f"[red]the worker exited with {worker.returncode}; see {out_dir / 'demo-worker.log'}[/red]")
        snapshots, alerts = await _audit_loop(settings, run_id, outcomes, started_at, console)
        result = DemoResult(
            outcomes=outcomes,
            wall_seconds=time.monotonic() - started,
            snapshots=snapshots,
            alerts=alerts,
            keyless=keyless,
        )
        _write_outcomes(out_path, outcomes)
        _write_audit(out_dir / "demo-audit.jsonl", snapshots, alerts)
        _print_summary(console, result, out_path, settings)
        _print_audit(console, result, settings)
        _print_next(console, result, pairs_path is None)
        return result
    finally:
        if worker is not None:
            stop_process(worker)
        if broker is not None:
            broker.stop()


async def _keyless_letters(settings: Settings, events: list[bytes], since: datetime) -> dict[int, str | None]:
    """The dead letters of the lines sent without a readable pair id, found by their bytes' SHA-256 (a dead
    letter carries it), so a line that is not JSON shows in the summary as the dead letter it became."""
    wanted = {hashlib.sha256(raw).hexdigest(): n for n, raw in enumerate(events, start=1) if key_of(raw) is None}
    found: dict[int, str | None] = dict.fromkeys(wanted.values())
    if not wanted:
        return found

    def all_found(records: list[tuple[bytes | None, bytes | None]]) -> bool:
        for _, value in records:
            try:
                letter = json.loads(value or b"{}")
            except ValueError:
                continue
            line = wanted.get(str(letter.get("original_sha256")))
            if line is not None and _at_or_after(letter.get("failed_at"), since):
                found[line] = str(letter.get("reason"))
        return all(reason is not None for reason in found.values())

    await read_topic(settings, "deadletter", timeout=10, until=all_found)
    return found


def _at_or_after(stamp: object, since: datetime) -> bool:
    """A letter from this run (on a shared cluster, an earlier run may have sent the same bytes)."""
    try:
        return isinstance(stamp, str) and datetime.fromisoformat(stamp) >= since
    except ValueError:
        return False


async def _audit_loop(
    settings: Settings, run_id: str, outcomes: Outcomes, started_at: datetime, console: Console
) -> tuple[list[AuditSnapshot], list[Alert]]:
    """Publish the sample labels, then read the audit until every label that can join has been counted."""
    parsed = parse_labels(b"\n".join(_tag_run(raw, run_id) for raw in sample_labels()), "jsonl")
    report = await publish_labels(settings, parsed, source="sample_labels.jsonl")
    labelled = {item.label.pair_id for item in parsed.items if isinstance(item, Accepted)}
    # Only automatic verdicts are compared with humans; escalated pairs are the humans' to decide.
    joinable = sum(1 for pid in labelled if outcomes.final.get(pid, ("", {}))[0] == "verdicts")
    console.print(
        f"[bold]labels[/bold] {report.published} human labels sent; {joinable} of them are for automatic verdicts, "
        "which the drift audit compares with the judge's"
    )
    latest: dict[str, AuditSnapshot] = {}
    alerts: list[Alert] = []

    def counted(records: list[tuple[bytes | None, bytes | None]]) -> bool:
        events = parse_audit_events(value for _, value in records if value)
        recent = (s for s in events.snapshots if s.published_at >= started_at)
        latest.clear()
        latest.update({series: windows[-1] for series, windows in latest_per_window(recent).items()})
        alerts[:] = [a for a in events.alerts if a.raised_at >= started_at]
        # Every judged decision leaves a record the audit counts; dead letters leave none (schemas.outcomes).
        decided = sum(1 for _, (kind, event) in outcomes.final.items() if _decided(kind))
        return (
            sum(s.human_labels for s in latest.values()) >= joinable
            and sum(s.pairs for s in latest.values()) >= decided
        )

    await read_topic(settings, "audit", timeout=30, until=counted)
    return sorted(latest.values(), key=lambda s: s.series), alerts


def _write_audit(path: Path, snapshots: list[AuditSnapshot], alerts: list[Alert]) -> None:
    with open_private_write(path, what="demo audit file") as fh:
        for event in (*snapshots, *alerts):
            fh.write(event.model_dump_json() + "\n")


def _series_name(info: AuditSeries | None, key: str) -> str:
    """A series as a person names it: judge, rubric and experiment (the key, with its template hash, is in
    the audit file)."""
    if info is None:
        return key
    rubric = info.rubric.removeprefix("named:")
    return f"{info.judge_model}, rubric {rubric}, experiment {info.experiment_id or 'none'}"


def _print_audit(console: Console, result: DemoResult, settings: Settings) -> None:
    audit = settings.audit
    table = Table(title="drift audit: how the judge did in this run, per series", box=box.SIMPLE_HEAD)
    for column in ("judge, rubric and experiment", "pairs", "tie-break rate", "human labels", "agreement", "kappa"):
        table.add_column(column, overflow="fold")
    names = {s.series: _series_name(s.series_info, s.series) for s in result.snapshots}
    for snapshot in result.snapshots:
        table.add_row(
            names[snapshot.series],
            str(snapshot.pairs),
            f"{snapshot.tiebreak_rate:.0%}" if snapshot.tiebreak_rate is not None else "n/a",
            str(snapshot.human_labels),
            f"{snapshot.agreement:.0%}" if snapshot.agreement is not None else "n/a",
            _kappa_text(snapshot, audit.min_labels),
        )
    console.print(table)
    for alert in result.alerts:
        console.print(
            f"[yellow]alert[/yellow] {escape(names.get(alert.series, alert.series))}: {escape(alert.message)}"
        )
    if not result.alerts:
        console.print("no audit alert fired")
    console.print(
        f"kappa is the judge's agreement with people beyond chance; it is shown from {audit.min_labels} labels in a "
        f"series, and the guard that pauses automatic decisions acts from there too. Rate alerts fire here from "
        f"{audit.min_pairs} pairs a series (a demo setting; 20 by default)."
    )


def _kappa_text(snapshot: AuditSnapshot, needed: int) -> str:
    """Kappa with its interval, or, on too few labels for it to mean anything, how many there are."""
    if snapshot.human_labels < needed:
        return f"too few labels ({snapshot.human_labels} of {needed})"
    if snapshot.cohen_kappa is None or snapshot.kappa_low is None or snapshot.kappa_high is None:
        return "n/a"
    return f"{snapshot.cohen_kappa:.2f} ({snapshot.kappa_low:.2f} to {snapshot.kappa_high:.2f})"


def _write_outcomes(path: Path, outcomes: Outcomes) -> None:
    with open_private_write(path, what="demo outcomes file") as fh:
        for pair_id in sorted(outcomes.final):
            kind, event = outcomes.final[pair_id]
            fh.write(json.dumps({"pair_id": pair_id, "outcome": kind, "event": event}) + "\n")


def _summary_row(kind: str, event: dict[str, object]) -> tuple[str, str, str]:
    """(outcome, winner with the judge's confidence, why) in words."""
    if kind == "verdicts":
        conf = event.get("confidence")
        winner, role = str(event.get("winner")), event.get("winner_role")
        # A tie settled by rule (identical or both empty outputs) has no role.
        shown = "tie" if role is None and winner == "TIE" else winner
        shown = shown if role is None or winner == role else f"{role} ({winner})"
        return (
            "verdict",
            f"{shown} ({conf:.2f})" if isinstance(conf, float) else shown,
            DECIDED_BY_WORDS.get(str(event.get("decided_by")), str(event.get("decided_by"))),
        )
    entry = entry_for_topic(kind)
    label = entry.label if entry is not None else kind
    return (label, "", reason_words(str(event.get("reason") or "")))


def _decided(topic: str) -> bool:
    entry = entry_for_topic(topic)
    return entry is not None and entry.decided


def _counted(counts: Counter[str]) -> str:
    """How many pairs ended on each topic where a pair's story can end, in the topics' order: "verdicts 5, ..."."""
    words = {topic: entry.count_label for topic in FINAL_KINDS if (entry := entry_for_topic(topic)) is not None}
    return ", ".join(f"{label} {counts[topic]}" for topic, label in words.items())


def _print_summary(console: Console, result: DemoResult, out_path: Path, settings: Settings) -> None:
    outcomes = result.outcomes
    # A light box: the ruled one spends six columns on lines, which an 80-column terminal cannot spare.
    table = Table(title="pairjudge demo: what happened to each pair", box=box.SIMPLE_HEAD)
    shown_ids = [pid.split("-", 1)[-1] for pid in outcomes.expected]
    # Fold, never crop: on a narrow terminal a cell takes two lines rather than losing its end; a pair id
    # keeps its width where it can, being what a reader looks a pair up by.
    table.add_column("pair", overflow="fold", min_width=min(20, max((len(p) for p in shown_ids), default=4)))
    for column in ("outcome", "winner (confidence)", "why"):
        table.add_column(column, overflow="fold")
    for pair_id in sorted(outcomes.final):
        kind, event = outcomes.final[pair_id]
        table.add_row(escape(pair_id.split("-", 1)[-1]), *map(escape, _summary_row(kind, event)))
    for pair_id in sorted(outcomes.missing):
        table.add_row(escape(pair_id.split("-", 1)[-1]), "[red]missing[/red]", "", "")
    for line, reason in sorted(result.keyless.items()):
        why = reason_words(reason) if reason is not None else "[red]its dead letter was not seen[/red]"
        table.add_row(f"line {line} (no pair id)", "dead letter", "", why)
    console.print(table)
    counts = Counter(kind for kind, _ in outcomes.final.values())
    counts["deadletter"] += sum(1 for reason in result.keyless.values() if reason is not None)
    sent = len(outcomes.expected) + len(result.keyless)
    console.print(
        f"{sum(counts.values())} of {sent} lines sent have an outcome ({_counted(counts)}) in "
        f"{result.wall_seconds:.1f} s; verdicts also sent to people to check the judge: {outcomes.audits}"
    )
    for pair_id, seen in sorted(outcomes.conflicting.items()):
        console.print(f"[red]conflicting outcomes for {escape(pair_id)}: {escape(', '.join(sorted(seen)))}[/red]")
    console.print(f"outcomes: {out_path}")
    if settings.telemetry.exporter == "file":
        console.print(f"traces:   {settings.telemetry.file_path}")


def _print_next(console: Console, result: DemoResult, sample: bool) -> None:
    """Where to go from here, in commands that can be pasted as they are."""
    cmd = pairjudge_command()
    pip = cmd.removesuffix("pairjudge") + "pip" if cmd.endswith("pairjudge") else "pip"
    console.print("[bold]next[/bold]")
    if sample:
        console.print(
            "  The dead letters are the sample's malformed lines, there on purpose: each kept with its reason and "
            "original bytes."
        )
    console.print(
        f"  See it live and answer the review queue yourself (from the checkout, with the review extra: {pip} "
        f"install -e '.[review,report]'):  {cmd} demo --serve",
        markup=False,
        soft_wrap=True,
    )
    console.print(
        f"  Judge your own pairs, no Kafka needed:  {cmd} evaluate your-pairs.jsonl", markup=False, soft_wrap=True
    )
    console.print("  Read on: docs/getting-started/index.md", soft_wrap=True)
    if not result.complete:
        console.print("[red]  Some pairs have no outcome: see the worker's log beside the outcomes file.[/red]")
