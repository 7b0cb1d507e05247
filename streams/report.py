"""``pairjudge report``: one self-contained HTML file of the drift audit, per series.

Input: the ``AuditSnapshot``s and ``Alert``s of ``pairjudge.audit`` (read whole from the topic) or of a
JSONL export (the demo writes ``out/demo-audit.jsonl``). Output: one HTML file, plots embedded as
inline SVG, no script and no external resource, so it opens anywhere and can be mailed.

Per series (judge and version, template, rubric, experiment), over its windows: Cohen's kappa with
its interval against the seed 001 line at 0.7; the tie-break rate against seed 002's 20% line, with the
flip rate; the calibration curve (reliability bins summed over the windows); how often the longer
output wins for the judge and for the humans; the auto-decision threshold in force and its coverage.
Each window counts once: its latest snapshot (a final one supersedes the running ones).

Text that came from events (series names, alert messages) is escaped, and matplotlib draws plot text
as paths, so nothing in an event can inject markup.
"""

from __future__ import annotations

import html
import io
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pairjudge.schemas.audit import Alert, AuditSnapshot
from pairjudge.schemas.scores import ScoreSnapshot, TallySnapshot
from pairjudge.streams.charts import evidence_chart, strengths_chart, win_rate_chart
from pairjudge.streams.judges.files import write_private_text

KAPPA_LINE = 0.7
TIEBREAK_LINE = 0.2


@dataclass(frozen=True, slots=True)
class AuditEvents:
    snapshots: list[AuditSnapshot]
    alerts: list[Alert]
    #: Lines that were neither a snapshot nor an alert (counted, shown in the report).
    skipped: int = 0
    #: Champion-challenger scoreboards (``pairjudge.scores``), when the input has them.
    scores: list[ScoreSnapshot] = field(default_factory=list)


def parse_audit_events(lines: Iterable[bytes | str]) -> AuditEvents:
    snapshots: list[AuditSnapshot] = []
    alerts: list[Alert] = []
    scores: list[ScoreSnapshot] = []
    skipped = 0
    for line in lines:
        if not line or not line.strip():
            continue
        try:
            body = json.loads(line)
            if isinstance(body, dict) and "window_end" in body:
                snapshots.append(AuditSnapshot.model_validate(body))
            elif isinstance(body, dict) and "gate" in body and "overall" in body:
                scores.append(ScoreSnapshot.model_validate(body))
            elif isinstance(body, dict) and "kind" in body:
                alerts.append(Alert.model_validate(body))
            else:
                skipped += 1
        except (ValueError, ValidationError):
            skipped += 1
    return AuditEvents(snapshots, alerts, skipped, scores)


def _tally_row(name: str, t: TallySnapshot) -> str:
    rate = (
        f"{100 * t.win_rate:.1f}% ({100 * (t.low or 0):.1f}-{100 * (t.high or 0):.1f}%)"
        if t.win_rate is not None
        else "-"
    )
    return f"<tr><td>{html.escape(name)}</td><td>{t.wins}</td><td>{t.losses}</td><td>{t.ties}</td><td>{rate}</td></tr>"


def scoreboard_section(snap: ScoreSnapshot) -> str:
    """One experiment's latest scoreboard: the gate, the tallies and the three charts (``streams.charts``)."""
    g = snap.gate
    gate = (
        f"<p>Gate: <strong>{html.escape(g.decision.upper())}</strong>"
        + (f" (refused: {html.escape(g.refused)})" if g.refused else "")
        + f"; evidence for promotion {g.e_promote:.3g}, for rejection {g.e_reject:.3g}; either decides at "
        f"{g.threshold:g} (alpha {g.alpha:g}, minimum effect {g.min_effect:g}, valid under continuous monitoring).</p>"
    )
    rows = [_tally_row("all automatic", snap.overall)]
    rows += [_tally_row(f"rubric {k}", t) for k, t in snap.by_rubric.items()]
    rows += [_tally_row(f"traffic {k}", t) for k, t in snap.by_traffic.items()]
    rows.append(_tally_row("decided by people", snap.human))
    table = "<table><tr><th></th><th>wins</th><th>losses</th><th>ties</th><th>win rate (95%)</th></tr>"
    table += "".join(rows) + "</table>"
    lc = (
        f"<p>Length-controlled win rate {100 * snap.length_controlled_win_rate:.1f}% "
        f"(log-odds per unit of log length ratio {snap.length_coefficient or 0:.2f}).</p>"
        if snap.length_controlled_win_rate is not None
        else "<p>Length-controlled win rate: not enough decisive pairs yet.</p>"
    )
    charts = win_rate_chart(snap.history) + evidence_chart(snap.history, g.threshold) + strengths_chart(snap.strengths)
    return (
        f"<h2>Champion and challenger: experiment {html.escape(snap.experiment)}</h2>"
        f"{gate}{table}{lc}<div class='plots'>{charts}</div>"
    )


def latest_per_window(snapshots: Iterable[AuditSnapshot]) -> dict[str, list[AuditSnapshot]]:
    """Series key -> one snapshot per window (final first, then the latest published), in window order."""
    best: dict[tuple[str, Any], AuditSnapshot] = {}
    for snapshot in snapshots:
        key = (snapshot.series, snapshot.window_start)
        held = best.get(key)
        if held is None or (snapshot.final, snapshot.published_at) >= (held.final, held.published_at):
            best[key] = snapshot
    by_series: dict[str, list[AuditSnapshot]] = defaultdict(list)
    for (series, _), snapshot in sorted(best.items(), key=lambda item: (item[0][0], item[0][1])):
        by_series[series].append(snapshot)
    return dict(by_series)


# --- plots ------------------------------------------------------------------------------------------


def _svg(figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and doctype: inline SVG in HTML


def _figure(title: str) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "path"  # text as paths: no font needed, nothing to inject
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 3.2))
    axes.set_title(title, fontsize=10)
    axes.grid(alpha=0.3)
    return figure, axes


def kappa_plot(windows: Sequence[AuditSnapshot]) -> str:
    figure, axes = _figure("Cohen's kappa against humans, with its interval")
    points = [w for w in windows if w.cohen_kappa is not None]
    if points:
        xs = [w.window_start for w in points]
        ys = [w.cohen_kappa for w in points]
        low = [(w.cohen_kappa or 0) - (w.kappa_low if w.kappa_low is not None else w.cohen_kappa or 0) for w in points]
        high = [
            (w.kappa_high if w.kappa_high is not None else w.cohen_kappa or 0) - (w.cohen_kappa or 0) for w in points
        ]
        axes.errorbar(xs, ys, yerr=[low, high], fmt="o-", capsize=3, label="kappa (95% CI)")
    axes.axhline(KAPPA_LINE, color="crimson", linestyle="--", label="seed 001 guard: 0.7")
    axes.set_ylim(-0.2, 1.05)
    axes.set_ylabel("kappa")
    axes.legend(fontsize=8, loc="lower left")
    figure.autofmt_xdate()
    return _svg(figure)


def rates_plot(windows: Sequence[AuditSnapshot]) -> str:
    figure, axes = _figure("Tie-break and flip rates per window")
    xs = [w.window_start for w in windows]
    axes.plot(xs, [w.tiebreak_rate for w in windows], "o-", label="tie-break rate")
    axes.plot(xs, [w.flip_rate for w in windows], "s-", label="position-flip rate")
    axes.axhline(TIEBREAK_LINE, color="crimson", linestyle="--", label="seed 002 alert: 20%")
    axes.set_ylim(0, 1.05)
    axes.legend(fontsize=8, loc="upper left")
    figure.autofmt_xdate()
    return _svg(figure)


def calibration_plot(windows: Sequence[AuditSnapshot]) -> str:
    figure, axes = _figure("Calibration: agreement with humans by confidence")
    counts: dict[float, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])  # count, sum conf, sum agree
    for window in windows:
        for b in window.reliability:
            if b.count and b.mean_confidence is not None and b.accuracy is not None:
                row = counts[b.lower]
                row[0] += b.count
                row[1] += b.mean_confidence * b.count
                row[2] += b.accuracy * b.count
    axes.plot([0, 1], [0, 1], color="grey", linestyle=":", label="perfect calibration")
    if counts:
        rows = sorted(counts.items())
        axes.plot(
            [r[1] / r[0] for _, r in rows], [r[2] / r[0] for _, r in rows], "o-", label="judge (labelled verdicts)"
        )
        for _, r in rows:
            axes.annotate(
                f"{int(r[0])}", (r[1] / r[0], r[2] / r[0]), fontsize=7, xytext=(3, 3), textcoords="offset points"
            )
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1.05)
    axes.set_xlabel("mean confidence in the bin (labels per bin marked)")
    axes.set_ylabel("agreement with humans")
    axes.legend(fontsize=8, loc="upper left")
    return _svg(figure)


def length_plot(windows: Sequence[AuditSnapshot]) -> str:
    figure, axes = _figure("How often the longer output wins (labelled pairs)")
    judge = [w.judge_longer_win_rate for w in windows if w.judge_longer_win_rate is not None]
    human = [w.human_longer_win_rate for w in windows if w.human_longer_win_rate is not None]
    xs = [w.window_start for w in windows if w.judge_longer_win_rate is not None]
    if xs:
        axes.plot(xs, judge, "o-", label="judge")
        axes.plot(xs, human, "s-", label="humans")
        axes.legend(fontsize=8, loc="upper left")
    axes.axhline(0.5, color="grey", linestyle=":")
    axes.set_ylim(0, 1.05)
    figure.autofmt_xdate()
    return _svg(figure)


def threshold_plot(windows: Sequence[AuditSnapshot]) -> str:
    figure, axes = _figure("Auto-decision threshold in force, and its coverage")
    with_threshold = [w for w in windows if w.threshold is not None and w.threshold.threshold is not None]
    xs = [w.window_start for w in with_threshold]
    if xs:
        values = [w.threshold.threshold for w in with_threshold if w.threshold]
        axes.step(xs, values, "o-", where="post", label="threshold")
    covered = [(w.window_start, w.threshold.coverage) for w in with_threshold if w.threshold and w.threshold.coverage]
    if covered:
        axes.plot([x for x, _ in covered], [c for _, c in covered], "s--", label="coverage (calibrated)")
    if xs:
        axes.legend(fontsize=8, loc="lower left")
    axes.set_ylim(0, 1.05)
    figure.autofmt_xdate()
    return _svg(figure)


PLOTS = (kappa_plot, rates_plot, calibration_plot, length_plot, threshold_plot)


# --- the page ---------------------------------------------------------------------------------------

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 2em; border-top: 1px solid #ccc; padding-top: 1em; }
table { border-collapse: collapse; font-size: 0.9em; } td, th { border: 1px solid #ddd; padding: 0.2em 0.5em; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; } .plots svg { max-width: 100%; height: auto; }
.alert { color: #a00; }
"""


def _fmt(value: float | None, pattern: str = "{:.2f}") -> str:
    return "n/a" if value is None else pattern.format(value)


def _summary_table(windows: Sequence[AuditSnapshot]) -> str:
    rows = []
    for w in windows:
        kappa = _fmt(w.cohen_kappa)
        if w.kappa_low is not None and w.kappa_high is not None:
            kappa += f" ({w.kappa_low:.2f}..{w.kappa_high:.2f})"
        threshold = w.threshold
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{html.escape(cell)}</td>"
                for cell in (
                    w.window_start.isoformat(timespec="seconds"),
                    "final" if w.final else "open",
                    str(w.pairs),
                    _fmt(w.tiebreak_rate, "{:.0%}"),
                    _fmt(w.flip_rate, "{:.0%}"),
                    str(w.human_labels),
                    _fmt(w.agreement, "{:.0%}"),
                    kappa,
                    _fmt(w.ece),
                    f"{_fmt(threshold.threshold)} ({threshold.source})" if threshold else "n/a",
                )
            )
            + "</tr>"
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "window",
            "",
            "pairs",
            "tie-break",
            "flips",
            "labels",
            "agreement",
            "kappa (95% CI)",
            "ECE",
            "threshold",
        )
    )
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def render_report(events: AuditEvents, *, title: str = "pairjudge drift audit") -> str:
    by_series = latest_per_window(events.snapshots)
    alerts_by_series: dict[str, list[Alert]] = defaultdict(list)
    for alert in events.alerts:
        alerts_by_series[alert.series].append(alert)
    sections = []
    for series, windows in by_series.items():
        info = windows[-1].series_info
        heading = (
            f"{info.judge_provider}:{info.judge_model} {info.judge_version} | template {info.prompt_template_hash} "
            f"| {info.rubric} | experiment {info.experiment_id or '-'}"
            if info
            else series
        )
        alerts = "".join(
            f"<li class='alert'>{html.escape(a.raised_at.isoformat(timespec='minutes'))} "
            f"{html.escape(a.kind)}: {html.escape(a.message)}</li>"
            for a in alerts_by_series.get(series, [])
        )
        plots = "".join(f"<figure>{plot(windows)}</figure>" for plot in PLOTS)
        sections.append(
            f"<h2>{html.escape(heading)}</h2>{_summary_table(windows)}"
            + (f"<ul>{alerts}</ul>" if alerts else "<p>No alert.</p>")
            + f"<div class='plots'>{plots}</div>"
        )
    latest: dict[str, ScoreSnapshot] = {}
    for snap in events.scores:
        if snap.experiment not in latest or snap.updated_at >= latest[snap.experiment].updated_at:
            latest[snap.experiment] = snap
    sections += [scoreboard_section(snap) for _, snap in sorted(latest.items())]
    skipped = f"<p>{events.skipped} line(s) were neither a snapshot nor an alert.</p>" if events.skipped else ""
    body = "".join(sections) or "<p>No audit snapshot found.</p>"
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p>{len(by_series)} series, {len(events.snapshots)} snapshots, "
        f"{len(events.alerts)} alerts.</p>{skipped}{body}</body></html>"
    )


def write_report(events: AuditEvents, out: Path, *, title: str = "pairjudge drift audit") -> Path:
    # Owner-only (0o600, a created parent 0o700), like every file that describes pairs.
    return write_private_text(out, render_report(events, title=title), what="report")
