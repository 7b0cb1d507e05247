"""``pairjudge report``: one self-contained HTML file of the drift audit, per series.

Input: the ``AuditSnapshot``s and ``Alert``s of ``pairjudge.audit`` (read whole from the topic) or of a
JSONL export (the demo writes ``out/demo-audit.jsonl``). Output: one HTML file, plots embedded as
inline SVG, no script and no external resource, so it opens anywhere and can be mailed.

Per series (judge and version, template, rubric, experiment), over its windows: Cohen's kappa with
its interval against the seed 001 line at 0.7, beside the human ceiling (the kappa of reviewers against
each other on audit pairs labelled twice: a judge cannot be expected to agree with people more than
people agree with each other) and the floor the kappa guard applied, in the mode it ran in; the
tie-break rate against seed 002's 20% line, with the flip rate; the calibration curve (reliability
bins summed over the windows); how often the longer output wins for the judge and for the humans;
the auto-decision threshold in force and its coverage.
Each window counts once: its latest snapshot (a final one supersedes the running ones).

Each time plot's axis spans exactly the series' windows (a single window is one point over its own span,
labelled with its time); a plot with nothing to draw is replaced by the reason (no human labels joined
yet, ...), and so are missing alerts and scoreboards. Plot text stays text in the SVG, which keeps the
demo's page near 100 KB (text drawn as glyph paths made it 0.9 MB).

Text that came from events (series names, alert messages) is escaped with ``html.escape``; plot text is
fixed or formatted from numbers and dates here (and matplotlib's SVG writer escapes it too), so nothing
in an event can inject markup.
"""

from __future__ import annotations

import html
import io
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pairjudge.schemas.audit import Alert, AuditSnapshot
from pairjudge.schemas.scores import ScoreSnapshot
from pairjudge.streams.scores.charts import evidence_chart, strengths_chart, win_rate_chart
from pairjudge.streams.scores.view import BasisPanel, BoardView, board_view
from pairjudge.streams.security.files import write_private_text

KAPPA_LINE = 0.7
TIEBREAK_LINE = 0.2
NO_ALERTS = "no alerts raised"
#: Why a report has no scoreboard section: none in its input.
NO_SCOREBOARD = (
    "No champion-challenger scoreboard in this input: the worker publishes one on pairjudge.scores per "
    "experiment whose pairs name one champion and one challenger, and `pairjudge report` without --from reads "
    "that topic. An export of the audit alone, such as the demo's out/demo-audit.jsonl, has none."
)


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


def _panel(p: BasisPanel) -> str:
    """One basis, as ``streams.scores.view`` words it; every text escaped."""
    e = html.escape
    body = f"<div class='basis basis-{e(p.key)}'><h3>{e(p.title)}</h3><p class='meaning'>{e(p.meaning)}</p>"
    if p.missing:
        body += f"<p class='missing'>{e(p.missing)}</p>"
    else:
        body += f"<p class='headline'><strong>{e(p.headline)}</strong> {e(p.headline_note)}</p><table>"
        body += "".join(f"<tr><th>{e(f.label)}</th><td>{e(f.value)}</td></tr>" for f in p.figures) + "</table>"
    if p.gate:
        body += (
            f"<p class='gate gate-{e(p.gate.decision)}'>Gate: <strong>{e(p.gate.decision.upper())}</strong> "
            f"· {e(p.gate.reason)}</p><p class='meaning'>{e(p.gate.detail)}</p>"
        )
    else:
        body += "<p class='gate'>Gate: not in this snapshot.</p>"
    return body + "</div>"


def _splits_table(v: BoardView) -> str:
    e = html.escape
    head = (
        "<table class='splits'><tr><th rowspan='2'></th><th colspan='4'>human basis</th>"
        "<th colspan='2'>judge basis</th></tr><tr><th>rate (tie ½)</th><th>anytime-valid interval</th>"
        "<th>labels</th><th>judge, same question</th><th>win rate (Wilson 95%)</th><th>wins–losses–ties</th></tr>"
    )
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{e(c)}</td>"
            for c in (
                r.name,
                r.human_rate,
                r.human_anytime,
                r.human_labels,
                r.human_judge,
                r.judge_rate,
                r.judge_counts,
            )
        )
        + "</tr>"
        for r in v.splits
    )
    strata = ""
    if v.strata:
        strata = (
            "<p>Human basis by sampling stratum:</p><table class='splits'><tr><th>stratum</th><th>pairs</th>"
            "<th>labels</th><th>rate</th><th>weight on the judge (λ)</th><th>spread of person − judge</th>"
            "<th>recommended audit share</th></tr>"
        )
        strata += "".join(
            f"<tr><td>{e(s.stratum)}</td><td>{e(s.pairs)}</td><td>{e(s.labels)}</td><td>{e(s.rate)}</td>"
            f"<td>{e(s.lam)}</td><td>{e(s.spread)}</td><td>{e(s.recommended)}</td></tr>"
            for s in v.strata
        )
        strata += "</table>"
    return head + rows + "</table>" + strata


def scoreboard_section(snap: ScoreSnapshot) -> str:
    """One experiment's latest scoreboard: the human basis and the judge basis side by side (human first:
    the default basis of ``pairjudge gate``), both gates, the splits, and the three charts
    (``streams.scores.charts``)."""
    v = board_view(snap)
    charts = (
        win_rate_chart(snap.history)
        + evidence_chart(snap.history, snap.gate.threshold)
        + strengths_chart(snap.strengths)
    )
    return (
        f"<h2>Champion and challenger: experiment {html.escape(snap.experiment)}</h2>"
        f"<div class='bases'>{_panel(v.human)}{_panel(v.judge)}</div>{_splits_table(v)}"
        f"<div class='plots'>{charts}</div>"
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
#
# Each chart returns an inline ``<svg>`` or, when its series has nothing to draw, :class:`Empty`: the
# page says why in the chart's place (the ``*_plot`` functions always return an SVG). Text stays text
# in the SVG (``svg.fonttype: none``): a glyph drawn as a path cost about 30 KB a chart. All plot text
# is fixed or formatted here from numbers and dates, but for the threshold's note (event text, drawn
# with maths parsing off); matplotlib's SVG writer escapes all of it.

#: No human label reached the audit: what the kappa, calibration and length plots need.
NO_LABELS = (
    "no human labels joined yet: label pairs in the review service or import them with `pairjudge labels import`"
)
#: Up to this many windows, each gets its own tick labelled with its time; above, a date locator picks them.
FEW_WINDOWS = 4
WIDE, NARROW, HEIGHT = 5.6, 3.4, 2.7


@dataclass(frozen=True, slots=True)
class Empty:
    """A plot with nothing to draw: its title and why."""

    title: str
    why: str

    def html(self) -> str:
        return (
            f"<figure class='empty'><figcaption>{html.escape(self.title)}</figcaption>"
            f"<p>{html.escape(self.why)}</p></figure>"
        )


@dataclass(frozen=True, slots=True)
class TimeAxis:
    """The x axis of a series' time plots: exactly its windows, from the first start to the last end.

    ``ticks`` and ``labels`` are one per window (at its centre, where its point is drawn) for a few
    windows; empty when there are more, and a date locator and formatter place them from the span."""

    low: datetime
    high: datetime
    ticks: tuple[datetime, ...]
    labels: tuple[str, ...]
    label: str


def centre(w: AuditSnapshot) -> datetime:
    """Where a window's point is drawn: the middle of the window."""
    return w.window_start + (w.window_end - w.window_start) / 2


def _clock(t: datetime, seconds: bool) -> str:
    return t.strftime("%H:%M:%S" if seconds else "%H:%M")


def window_label(start: datetime, end: datetime, *, date: bool = True) -> str:
    """A window as a person reads it, in UTC: ``2026-12-02 10:00–11:00``, ``2026-12-02 00:00–24:00``,
    ``2026-12-01 22:00 – 12-02 02:00``; seconds only when a bound has them; without the date when
    ``date`` is False (the axis label carries it)."""
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    seconds = bool(start.second or end.second)
    day = start.strftime("%Y-%m-%d ") if date else ""
    if end.date() == start.date():
        return f"{day}{_clock(start, seconds)}–{_clock(end, seconds)}"
    if end == datetime.combine(start.date() + timedelta(days=1), time(), UTC):
        return f"{day}{_clock(start, seconds)}–24:00" + (":00" if seconds else "")
    return f"{day}{_clock(start, seconds)} – {end.strftime('%m-%d')} {_clock(end, seconds)}"


def time_axis(windows: Sequence[AuditSnapshot]) -> TimeAxis:
    """The x axis fitted to ``windows`` (at least one, in window order)."""
    low, high = windows[0].window_start, windows[-1].window_end
    if high <= low:
        high = low + timedelta(seconds=1)
    if len(windows) > FEW_WINDOWS:
        return TimeAxis(low, high, (), (), "window (UTC)")
    days = {w.window_start.astimezone(UTC).date() for w in windows}
    if len(windows) == 1 or len(days) > 1:
        labels = tuple(window_label(w.window_start, w.window_end) for w in windows)
        return TimeAxis(low, high, tuple(centre(w) for w in windows), labels, "window (UTC)")
    labels = tuple(window_label(w.window_start, w.window_end, date=False) for w in windows)
    return TimeAxis(low, high, tuple(centre(w) for w in windows), labels, f"window (UTC), {days.pop():%Y-%m-%d}")


def _svg(figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    import matplotlib.pyplot as plt

    plt.close(figure)
    text = buffer.getvalue()
    return compact_svg(text[text.index("<svg") :])  # the XML prolog and doctype dropped: inline SVG in HTML


_FONT = re.compile(r"font-family: [^;\"]*;? ?")
_ID = re.compile(r' id="([^"]+)"')


def _drop_bare_groups(svg: str) -> str:
    """``<g>`` without attributes groups nothing that matters: drop it and its ``</g>``."""
    out: list[str] = []
    bare: list[bool] = []
    for part in re.split(r"(<g>|<g [^>]*>|</g>)", svg):
        if part == "<g>":
            bare.append(True)
        elif part.startswith("<g "):
            bare.append(False)
            out.append(part)
        elif part == "</g>":
            if not bare.pop():
                out.append(part)
        else:
            out.append(part)
    return "".join(out)


def compact_svg(svg: str) -> str:
    """matplotlib's SVG, smaller and drawn the same: no metadata, no indentation, no id nothing refers to,
    no no-op rotation, coordinates to 0.01 pt, and the font named once on the root instead of on every text."""
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    svg = re.sub(r">\s+<", "><", svg)
    svg = re.sub(r"\s*\n\s*", " ", svg)
    svg = _FONT.sub("", svg).replace(' style=""', "")
    svg = re.sub(r' transform="rotate\(-?0 [^)]*\)"', "", svg)
    used = set(re.findall(r"#([\w.-]+)", svg))
    svg = _ID.sub(lambda m: m.group() if m.group(1) in used else "", svg)
    svg = re.sub(r'="[^"]*"', lambda m: re.sub(r"(\d+\.\d\d)\d+", r"\1", m.group()), svg)
    svg = _drop_bare_groups(svg)
    return svg.replace("<svg ", '<svg font-family="DejaVu Sans, Verdana, sans-serif" ', 1)


def _figure(title: str, width: float = WIDE) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text as text: a few bytes a label, not a path a glyph
    matplotlib.rcParams["svg.hashsalt"] = "pairjudge"  # stable ids: the same input, the same page
    matplotlib.rcParams["font.family"] = "sans-serif"
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(width, HEIGHT))
    axes.set_title(title, fontsize=9)
    axes.grid(alpha=0.3)
    axes.tick_params(labelsize=8)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    return figure, axes


def _time_figure(title: str, windows: Sequence[AuditSnapshot]) -> tuple[Any, Any]:
    """A figure whose x axis spans exactly ``windows``: one labelled tick per window for a few (a single
    window is one point over its own span, labelled with its time), a date locator for more."""
    import matplotlib.dates as mdates

    axis = time_axis(windows)
    figure, axes = _figure(title, NARROW if len(windows) == 1 else WIDE)
    axes.set_xlim(axis.low, axis.high)
    if axis.ticks:
        axes.set_xticks(list(axis.ticks), list(axis.labels))
    else:
        locator = mdates.AutoDateLocator(minticks=3, maxticks=7)  # type: ignore[no-untyped-call]
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    axes.set_xlabel(axis.label, fontsize=8)
    return figure, axes


def _percent(axes: Any) -> None:
    from matplotlib.ticker import PercentFormatter

    axes.set_ylim(0, 1.05)
    axes.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))


def _values(axes: Any, xs: Sequence[datetime], ys: Sequence[float], pattern: str, colour: str) -> None:
    """Each point's value beside it, when there are few enough to read."""
    if len(xs) > FEW_WINDOWS:
        return
    for x, y in zip(xs, ys, strict=True):
        axes.annotate(pattern.format(y), (x, y), fontsize=8, color=colour, xytext=(6, 2), textcoords="offset points")


def _labelled(windows: Sequence[AuditSnapshot]) -> int:
    return sum(w.human_labels for w in windows)


def kappa_chart(windows: Sequence[AuditSnapshot]) -> str | Empty:
    title = "Cohen's kappa against humans (95% CI) and the human ceiling"
    points = [w for w in windows if w.cohen_kappa is not None]
    ceiling = [w for w in windows if w.human_kappa is not None]
    if not points and not ceiling:
        labels = _labelled(windows)
        if not labels:
            return Empty(title, NO_LABELS)
        agreement = [w.agreement for w in windows if w.agreement is not None]
        return Empty(
            title,
            f"kappa undefined so far: on its {labels} labelled verdict(s) the judge and the humans always chose "
            "the same side, so there is no variation for kappa to measure"
            + (f" (agreement {min(agreement):.0%})" if agreement else ""),
        )
    figure, axes = _time_figure(title, windows)
    if points:
        xs = [centre(w) for w in points]
        ys = [w.cohen_kappa or 0.0 for w in points]
        low = [y - (w.kappa_low if w.kappa_low is not None else y) for w, y in zip(points, ys, strict=True)]
        high = [(w.kappa_high if w.kappa_high is not None else y) - y for w, y in zip(points, ys, strict=True)]
        axes.errorbar(xs, ys, yerr=[low, high], fmt="o-", capsize=3, color="C0", label="judge-human kappa (95% CI)")
        _values(axes, xs, ys, "{:.2f}", "C0")
    if ceiling:
        axes.plot(
            [centre(w) for w in ceiling],
            [w.human_kappa for w in ceiling],
            "^:",
            color="darkgreen",
            label="human-human kappa (ceiling)",
        )
    relative = [w for w in windows if w.guard_mode == "relative" and w.guard_kappa_min is not None]
    if relative:
        axes.plot(
            [centre(w) for w in relative],
            [w.guard_kappa_min for w in relative],
            "_-.",
            markersize=12,
            color="darkorange",
            label="relative guard floor",
        )
    axes.axhline(KAPPA_LINE, color="crimson", linestyle="--", linewidth=1, label="seed 001 guard: 0.7")
    axes.set_ylim(-0.2, 1.05)
    axes.set_ylabel("kappa", fontsize=8)
    axes.legend(fontsize=7, loc="lower left")
    return _svg(figure)


def rates_chart(windows: Sequence[AuditSnapshot]) -> str | Empty:
    title = "Tie-break and flip rates per window"
    tiebreak = [(centre(w), w.tiebreak_rate) for w in windows if w.tiebreak_rate is not None]
    flips = [(centre(w), w.flip_rate) for w in windows if w.flip_rate is not None]
    if not tiebreak and not flips:
        return Empty(title, "no pairs judged in these windows")
    figure, axes = _time_figure(title, windows)
    for points, style, colour, label in (
        (tiebreak, "o-", "C0", "tie-break rate"),
        (flips, "s-", "C1", "position-flip rate"),
    ):
        if points:
            xs, ys = [x for x, _ in points], [y for _, y in points]
            axes.plot(xs, ys, style, color=colour, label=label)
            _values(axes, xs, ys, "{:.0%}", colour)
    axes.axhline(TIEBREAK_LINE, color="crimson", linestyle="--", linewidth=1, label="seed 002 alert: 20%")
    _percent(axes)
    axes.legend(fontsize=7, loc="upper left")
    return _svg(figure)


def calibration_chart(windows: Sequence[AuditSnapshot]) -> str | Empty:
    title = "Calibration: agreement with humans by confidence"
    counts: dict[float, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])  # count, sum conf, sum agree
    for window in windows:
        for b in window.reliability:
            if b.count and b.mean_confidence is not None and b.accuracy is not None:
                row = counts[b.lower]
                row[0] += b.count
                row[1] += b.mean_confidence * b.count
                row[2] += b.accuracy * b.count
    if not counts:
        return Empty(title, NO_LABELS if not _labelled(windows) else "no labelled automatic verdict with a confidence")
    figure, axes = _figure(title, NARROW if len(counts) <= 2 else WIDE)
    axes.plot([0, 1], [0, 1], color="grey", linestyle=":", label="perfect calibration")
    rows = sorted(counts.items())
    axes.plot([r[1] / r[0] for _, r in rows], [r[2] / r[0] for _, r in rows], "o-", label="judge (labelled verdicts)")
    for _, r in rows:
        axes.annotate(f"{int(r[0])}", (r[1] / r[0], r[2] / r[0]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1.05)
    axes.set_xlabel("mean confidence in the bin (labels per bin marked)", fontsize=8)
    axes.set_ylabel("agreement with humans", fontsize=8)
    axes.legend(fontsize=7, loc="upper left")
    return _svg(figure)


def length_chart(windows: Sequence[AuditSnapshot]) -> str | Empty:
    title = "How often the longer output wins (labelled pairs)"
    rated = [w for w in windows if w.judge_longer_win_rate is not None or w.human_longer_win_rate is not None]
    if not rated:
        return Empty(
            title, NO_LABELS if not _labelled(windows) else "no labelled pair whose outputs differ in length yet"
        )
    figure, axes = _time_figure(title, windows)
    for attr, style, colour, label, offset in (
        ("judge_longer_win_rate", "o-", "C0", "judge", 9),
        ("human_longer_win_rate", "s--", "C1", "humans", 5),
    ):
        points = [(centre(w), getattr(w, attr)) for w in rated if getattr(w, attr) is not None]
        xs, ys = [x for x, _ in points], [y for _, y in points]
        axes.plot(xs, ys, style, color=colour, markersize=offset, label=label)
    axes.axhline(0.5, color="grey", linestyle=":", linewidth=1)
    _percent(axes)
    axes.legend(fontsize=7, loc="upper left")
    return _svg(figure)


def threshold_chart(windows: Sequence[AuditSnapshot]) -> str | Empty:
    title = "Auto-decision threshold in force, and its coverage"
    with_threshold = [w for w in windows if w.threshold is not None and w.threshold.threshold is not None]
    if not with_threshold:
        return Empty(title, "these snapshots do not record the threshold in force")
    figure, axes = _time_figure(title, windows)
    xs = [centre(w) for w in with_threshold]
    values = [w.threshold.threshold or 0.0 for w in with_threshold if w.threshold]
    axes.plot(xs, values, "o-", drawstyle="steps-mid", color="C0", label="threshold")
    _values(axes, xs, values, "{:.2f}", "C0")
    covered = [(centre(w), w.threshold.coverage) for w in with_threshold if w.threshold and w.threshold.coverage]
    if covered:
        axes.plot([x for x, _ in covered], [c for _, c in covered], "s--", color="C1", label="coverage (calibrated)")
    latest = with_threshold[-1].threshold
    if latest is not None and latest.source == "configured" and latest.note:
        axes.text(0.02, 0.04, latest.note, transform=axes.transAxes, fontsize=7, color="#555", parse_math=False)
    axes.set_ylim(0, 1.05)
    axes.legend(fontsize=7, loc="upper left")
    return _svg(figure)


CHARTS = (kappa_chart, rates_chart, calibration_chart, length_chart, threshold_chart)


def plots_html(windows: Sequence[AuditSnapshot]) -> str:
    """The series' plots, each an inline SVG or, in its place, why it has nothing to draw."""
    out = []
    for chart in CHARTS:
        drawn = chart(windows)
        out.append(drawn.html() if isinstance(drawn, Empty) else f"<figure>{drawn}</figure>")
    return "".join(out)


def _always_svg(drawn: str | Empty) -> str:
    """A chart as an SVG whatever it holds: an empty one is its title and why, as SVG text."""
    if isinstance(drawn, str):
        return drawn
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 560 60" width="560" height="60" font-size="12"'
        ' font-family="DejaVu Sans, Verdana, sans-serif">'
        f'<text x="4" y="20" font-weight="600">{html.escape(drawn.title)}</text>'
        f'<text x="4" y="44" fill="#555">{html.escape(drawn.why)}</text></svg>'
    )


def kappa_plot(windows: Sequence[AuditSnapshot]) -> str:
    return _always_svg(kappa_chart(windows))


def rates_plot(windows: Sequence[AuditSnapshot]) -> str:
    """The tie-break and flip rates as one SVG (``pairjudge_dev.report_sample`` writes it to the docs)."""
    return _always_svg(rates_chart(windows))


def calibration_plot(windows: Sequence[AuditSnapshot]) -> str:
    return _always_svg(calibration_chart(windows))


def length_plot(windows: Sequence[AuditSnapshot]) -> str:
    return _always_svg(length_chart(windows))


def threshold_plot(windows: Sequence[AuditSnapshot]) -> str:
    return _always_svg(threshold_chart(windows))


PLOTS = (kappa_plot, rates_plot, calibration_plot, length_plot, threshold_plot)


# --- the page ---------------------------------------------------------------------------------------

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 2em; border-top: 1px solid #ccc; padding-top: 1em; }
table { border-collapse: collapse; font-size: 0.9em; } td, th { border: 1px solid #ddd; padding: 0.2em 0.5em; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; margin-top: 1em; }
.plots figure { margin: 0; } .plots svg { max-width: 100%; height: auto; }
.plots figure.empty { width: 18em; border: 1px dashed #bbb; padding: 0.6em 0.8em; color: #555; font-size: 0.85em; }
.plots figure.empty figcaption { font-weight: 600; color: #222; margin-bottom: 0.4em; }
.alert { color: #a00; } .none { color: #555; } table.windows td:first-child { white-space: nowrap; }
.scoreboard-none { margin-top: 2em; border-top: 1px solid #ccc; padding-top: 1em; }
.bases { display: grid; grid-template-columns: 1fr 1fr; gap: 1em; margin: 1em 0; }
.basis { border: 1px solid #ccc; border-top: 4px solid #2f6fde; padding: 0.4em 0.8em; }
.basis-human { border-top-color: #c2410c; } .basis h3 { font-size: 1em; margin: 0.2em 0; }
.basis .meaning, .basis .missing { color: #555; font-size: 0.85em; } .basis .headline strong { font-size: 1.6em; }
.basis th { text-align: left; font-weight: normal; color: #555; } table.splits td { text-align: right; }
table.splits td:first-child { text-align: left; } .splits { margin: 0.6em 0; }
"""


def _fmt(value: float | None, pattern: str = "{:.2f}") -> str:
    return "n/a" if value is None else pattern.format(value)


def _guard_cell(w: AuditSnapshot) -> str:
    """The kappa guard's mode and floor for a window ("n/a" for snapshots from before they were recorded)."""
    if w.guard_mode is None:
        return "n/a"
    floor = _fmt(w.guard_kappa_min)
    if w.guard_mode == "relative" and w.guard_note is not None:
        return f"relative, fell back to {floor}"
    return f"{w.guard_mode} {floor}"


def guard_summary(windows: Sequence[AuditSnapshot]) -> str:
    """One paragraph: the judge-human kappa of the latest window beside the human ceiling, and the guard."""
    latest = windows[-1]
    ceiling = (
        f"human-human kappa {_fmt(latest.human_kappa)} and agreement {_fmt(latest.human_agreement, '{:.0%}')} "
        f"over {latest.human_pairs} doubly labelled audit pair(s)"
        if latest.human_pairs
        else "no audit pair labelled by two reviewers yet"
    )
    if latest.guard_mode is None:
        guard = "guard mode not recorded in these snapshots"
    elif latest.guard_mode == "relative":
        guard = f"kappa guard: relative to the human ceiling, floor {_fmt(latest.guard_kappa_min, '{:.3f}')}"
    else:
        guard = f"kappa guard: absolute, floor {_fmt(latest.guard_kappa_min, '{:g}')}"
    beside = f"beside the {ceiling}" if latest.human_pairs else f"({ceiling})"
    text = f"Latest window: judge-human kappa {_fmt(latest.cohen_kappa)} {beside}; {guard}."
    if latest.guard_note:
        text += f" {latest.guard_note}."
    return f"<p class='guard'>{html.escape(text)}</p>"


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
                    window_label(w.window_start, w.window_end),
                    "final" if w.final else "open",
                    str(w.pairs),
                    _fmt(w.tiebreak_rate, "{:.0%}"),
                    _fmt(w.flip_rate, "{:.0%}"),
                    str(w.human_labels),
                    _fmt(w.agreement, "{:.0%}"),
                    kappa,
                    str(w.human_pairs),
                    _fmt(w.human_agreement, "{:.0%}"),
                    _fmt(w.human_kappa),
                    _guard_cell(w),
                    _fmt(w.ece),
                    f"{_fmt(threshold.threshold)} ({threshold.source})" if threshold else "n/a",
                )
            )
            + "</tr>"
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "window (UTC)",
            "",
            "pairs",
            "tie-break",
            "flips",
            "labels",
            "agreement",
            "kappa (95% CI)",
            "human pairs",
            "human-human agreement",
            "human-human kappa (ceiling)",
            "kappa guard",
            "ECE",
            "threshold",
        )
    )
    return f"<table class='windows'><tr>{head}</tr>{''.join(rows)}</table>"


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
            f"<li class='alert'>{html.escape(a.raised_at.astimezone(UTC).strftime('%Y-%m-%d %H:%M UTC'))} "
            f"{html.escape(a.kind)}: {html.escape(a.message)}</li>"
            for a in alerts_by_series.get(series, [])
        )
        sections.append(
            f"<h2>{html.escape(heading)}</h2>{guard_summary(windows)}{_summary_table(windows)}"
            + (f"<ul>{alerts}</ul>" if alerts else f"<p class='none'>{NO_ALERTS}</p>")
            + f"<div class='plots'>{plots_html(windows)}</div>"
        )
    latest: dict[str, ScoreSnapshot] = {}
    for snap in events.scores:
        if snap.experiment not in latest or snap.updated_at >= latest[snap.experiment].updated_at:
            latest[snap.experiment] = snap
    sections += [scoreboard_section(snap) for _, snap in sorted(latest.items())]
    if by_series and not latest:
        sections.append(f"<p class='none scoreboard-none'>{html.escape(NO_SCOREBOARD)}</p>")
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
