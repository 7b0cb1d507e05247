"""The drift report: one self-contained HTML page, one section per series, event text escaped."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from pairjudge.agents.audit import SeriesWindow, WindowStats
from pairjudge.schemas.audit import (
    Alert,
    AuditObservation,
    AuditSeries,
    AuditSnapshot,
    DecisionRecord,
    ThresholdSnapshot,
)
from pairjudge.schemas.events import HumanLabel
from pairjudge.streams.audit.report import latest_per_window, parse_audit_events, render_report
from pairjudge.streams.cli import app

HOSTILE = "<script>alert(1)</script>"
START = datetime(2026, 12, 1, 10, tzinfo=UTC)


def series(experiment: str) -> AuditSeries:
    return AuditSeries(
        judge_provider="openai",
        judge_model="gpt-x",
        judge_version="2026-11",
        prompt_template_hash="h1",
        rubric="tone_style",
        experiment_id=experiment,
    )


def window(
    s: AuditSeries, hour: int, agree: int, disagree: int, *, final: bool = True, hours: float = 1.0
) -> AuditSnapshot:
    stats = WindowStats()
    for n in range(agree + disagree):
        record = DecisionRecord(
            pair_id=f"p{n}",
            series=s,
            stage="primary",
            outcome="verdict",
            auto_decided=True,
            candidates=("a", "b"),
            judge_winner="a" if n % 3 else "b",
            confidence=0.75 + (n % 5) / 20,
            longer="first" if n % 2 else "second",
        )
        human = record.judge_winner if n < agree else ("b" if record.judge_winner == "a" else "a")
        assert human is not None
        label = HumanLabel(pair_id=f"p{n}", winner=human, reviewer="r")
        stats.add(AuditObservation(kind="decision", series=s, record=record))
        stats.add(AuditObservation(kind="labelled", series=s, record=record, label=label))
    start = (START + timedelta(hours=hour * hours)).timestamp()
    threshold = ThresholdSnapshot(source="configured", threshold=0.7, labels=agree + disagree)
    return SeriesWindow(s, start, 3600.0 * hours, 0, stats).snapshot(final=final, threshold=threshold)


def test_one_section_per_series_with_every_plot_inline_and_nothing_external() -> None:
    calm, drifting = series("calm"), series(HOSTILE)
    snapshots = [window(calm, h, 40, 5) for h in range(3)] + [
        window(drifting, h, 25 - 5 * h, 5 + 5 * h) for h in range(3)
    ]
    alert = Alert(
        kind="kappa_below_threshold", series=drifting.key, message=f"kappa fell {HOSTILE}", value=0.3, threshold=0.7
    )
    events = parse_audit_events([s.model_dump_json() for s in snapshots] + [alert.model_dump_json()])
    # At the kappa guard's default minimum (50 labels a window) these windows (30 and 45 labels) show no kappa.
    page = render_report(events)
    assert page.count("<svg") == 8
    assert "not enough labels yet: 30 of the 50 needed" in page
    page = render_report(events, min_labels=30)
    assert page.count("<h2>") == 2
    assert page.count("<svg") == 10  # five plots per series
    assert "<script" not in page  # the hostile experiment name and message are escaped
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert not re.search(r"""(src|href)=["']https?:""", page)  # self-contained
    # The table shows each window's kappa with its interval, as the snapshot computed it.
    first = snapshots[3]
    assert first.cohen_kappa is not None
    assert first.kappa_low is not None
    assert first.kappa_high is not None
    assert f"{first.cohen_kappa:.2f} ({first.kappa_low:.2f} to {first.kappa_high:.2f}), from 30 labels" in page


def test_a_window_counts_once_its_final_snapshot_over_running_ones() -> None:
    s = series("x")
    running = window(s, 0, 10, 0, final=False)
    final = window(s, 0, 20, 0, final=True)
    later_running = running.model_copy(update={"published_at": final.published_at + timedelta(seconds=5)})
    (kept,) = latest_per_window([running, final, later_running])[s.key]
    assert kept.final
    assert kept.human_labels == 20


def test_lines_that_are_neither_snapshots_nor_alerts_are_counted_not_fatal() -> None:
    events = parse_audit_events(
        [b"not json", b'{"unrelated": 1}', b"", window(series("x"), 0, 3, 1).model_dump_json().encode()]
    )
    assert (len(events.snapshots), len(events.alerts), events.skipped) == (1, 0, 2)
    assert "2 line(s) were neither" in render_report(events)


def test_the_report_command_writes_the_file(tmp_path: Path) -> None:
    export = tmp_path / "audit.jsonl"
    export.write_text("\n".join(window(series("x"), h, 45, 10).model_dump_json() for h in range(2)) + "\n")
    out = tmp_path / "r" / "report.html"
    result = CliRunner().invoke(app, ["report", "--from", str(export), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "2 snapshots, 0 alerts" in " ".join(result.output.split())
    assert out.read_text().count("<svg") == 5


def test_the_report_shows_each_experiments_latest_scoreboard_with_escaped_text() -> None:
    from datetime import UTC, datetime, timedelta

    from pairjudge.agents.scores.board import Scoreboard
    from pairjudge.streams.config.settings import ScoreSettings
    from pairjudge.streams.scores.handlers import Entry, snapshot

    entry = Entry(Scoreboard(), partition=0)
    lines = []
    for step in range(3):
        for i in range(30):
            side = "win" if (i + step) % 3 else "loss"
            entry.board.add_judged(side, rubric="tone_style", traffic="shadow", models=("<i>new</i>", "old"))  # type: ignore[arg-type]
        now = datetime(2026, 12, 1, tzinfo=UTC) + timedelta(minutes=step)
        lines.append(snapshot("exp-<x>", entry, ScoreSettings(bootstrap=20), False, now).model_dump_json())
    events = parse_audit_events(lines)
    assert len(events.scores) == 3
    page = render_report(events)
    assert page.count("Champion and challenger: experiment exp-&lt;x&gt;") == 1  # the latest only
    assert page.count("<svg") >= 3
    assert "&lt;i&gt;new&lt;/i&gt;" in page
    assert "<i>new</i>" not in page
    assert "<script" not in page


def test_the_report_shows_the_judge_beside_the_human_ceiling_and_the_guard_mode() -> None:
    from pairjudge.agents.audit import GuardBounds

    s = series("ceiling")
    stats = WindowStats()
    for n in range(40):
        record = DecisionRecord(
            pair_id=f"h{n}",
            series=s,
            stage="primary",
            outcome="verdict",
            auto_decided=True,
            candidates=("a", "b"),
            judge_winner="a" if n % 2 else "b",
            confidence=0.9,
            audit_sample=True,
        )
        first = HumanLabel(pair_id=f"h{n}", winner=record.judge_winner or "a", reviewer="ana", from_audit=True)
        second_winner = first.winner if n < 36 else ("b" if first.winner == "a" else "a")  # 90% agree: kappa 0.8
        second = first.model_copy(update={"winner": second_winner, "reviewer": "bo"})
        stats.add(AuditObservation(kind="labelled", series=s, record=record, label=first))
        stats.add(AuditObservation(kind="second_label", series=s, record=record, label=second, first_label=first))
    start = START.timestamp()
    relative = GuardBounds(guard_mode="relative", min_human_pairs=30)
    snap = SeriesWindow(s, start, 3600.0, 0, stats).snapshot(final=True, bounds=relative)
    early = SeriesWindow(s, start - 3600, 3600.0, 0, WindowStats()).snapshot(
        final=True, bounds=GuardBounds(guard_mode="relative", min_human_pairs=30)
    )
    page = render_report(parse_audit_events([early.model_dump_json(), snap.model_dump_json()]))
    assert "their kappa (the ceiling)" in page
    assert (
        "judge agreement with people (kappa) not enough labels yet: 40 of the 50 needed beside the people agreeing"
        " with each other: kappa 0.80, agreement 90%, over 40 pairs two reviewers labelled"
    ) in page
    assert (
        "judge agreement with people (kappa) 1.00 (its interval cannot be measured), from 40 labels beside"
        in render_report(parse_audit_events([early.model_dump_json(), snap.model_dump_json()]), min_labels=40)
    )
    assert "kappa guard: relative to the human ceiling, floor 0.720" in page
    assert "relative, fell back to 0.70" in page  # the empty window before: too few human pairs
    assert "<td>relative 0.72</td>" in page
    assert "<td>40</td><td>90%</td><td>0.80</td>" in page
