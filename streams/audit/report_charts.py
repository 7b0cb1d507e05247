"""The drift report's charts: one inline SVG per measure and window series, or why it has nothing to draw.

Axes fit the windows (a single window is a point labelled with its window), text stays text in the SVG and the
SVG is compacted, so a demo's report stays small."""

from __future__ import annotations

import html
import io
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any

from pairjudge.schemas.audit import AuditSnapshot, ReliabilityBinSnapshot

# --- plots ------------------------------------------------------------------------------------------
#
# Each chart returns an inline ``<svg>`` or, when its series has nothing to draw, :class:`Empty`: the
# page says why in the chart's place (``rates_plot`` always returns one, for the docs). Text stays text
# in the SVG (``svg.fonttype: none``): a glyph drawn as a path cost about 30 KB a chart. All plot text
# is fixed or formatted here from numbers and dates, but for the threshold's note (event text, drawn
# with maths parsing off); matplotlib's SVG writer escapes all of it.

#: No human label reached the audit: what the kappa, calibration and length plots need.
NO_LABELS = (
    "no human labels joined yet: label pairs in the review service or import them with `pairjudge labels import`"
)
#: Up to this many windows, each gets its own tick labelled with its time; above, a date locator picks them.
FEW_WINDOWS = 4
#: The kappa guard's floor and the tie-break alert's line, drawn as lines.
KAPPA_LINE = 0.7
TIEBREAK_LINE = 0.2
#: Figure sizes in inches: a time chart with a few windows, one with a single window, and their height.
WIDE = 5.6
NARROW = 3.4
HEIGHT = 2.7


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


#: The kappa guard's default minimum of labels (``audit.min_labels``): no kappa is drawn from fewer.
KAPPA_MIN_LABELS = 50


def kappa_chart(windows: Sequence[AuditSnapshot], min_labels: int = KAPPA_MIN_LABELS) -> str | Empty:
    title = "Judge agreement with people (kappa, 95% interval) and people agreeing with each other"
    points = [w for w in windows if w.cohen_kappa is not None and w.human_labels >= min_labels]
    ceiling = [w for w in windows if w.human_kappa is not None]
    if not points and not ceiling:
        labels = _labelled(windows)
        if not labels:
            return Empty(title, NO_LABELS)
        if max(w.human_labels for w in windows) < min_labels:
            most = max(w.human_labels for w in windows)
            return Empty(title, f"not enough labels yet: {most:,} of the {min_labels:,} needed in a window")
        agreement = [w.agreement for w in windows if w.agreement is not None]
        return Empty(
            title,
            f"kappa cannot be measured yet: on its {labels:,} labelled verdicts the judge and people always chose "
            "the same side, so there is no variation for kappa to measure"
            + (f" (agreement {min(agreement):.0%})" if agreement else ""),
        )
    figure, axes = _time_figure(title, windows)
    if points:
        xs = [centre(w) for w in points]
        ys = [w.cohen_kappa or 0.0 for w in points]
        low = [y - (w.kappa_low if w.kappa_low is not None else y) for w, y in zip(points, ys, strict=True)]
        high = [(w.kappa_high if w.kappa_high is not None else y) - y for w, y in zip(points, ys, strict=True)]
        axes.errorbar(
            xs, ys, yerr=[low, high], fmt="o-", capsize=3, color="C0", label="judge agreement with people (kappa)"
        )
        _values(axes, xs, ys, "{:.2f}", "C0")
    if ceiling:
        axes.plot(
            [centre(w) for w in ceiling],
            [w.human_kappa for w in ceiling],
            "^:",
            color="darkgreen",
            label="people agreeing with each other (ceiling)",
        )
    relative = [w for w in windows if w.guard_mode == "relative" and w.guard_kappa_min is not None]
    if relative:
        axes.plot(
            [centre(w) for w in relative],
            [w.guard_kappa_min for w in relative],
            "_-.",
            markersize=12,
            color="darkorange",
            label="the kappa guard's floor (relative)",
        )
    axes.axhline(KAPPA_LINE, color="crimson", linestyle="--", linewidth=1, label="the kappa guard's line: 0.7")
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
    axes.axhline(TIEBREAK_LINE, color="crimson", linestyle="--", linewidth=1, label="the tie-break alert's line: 20%")
    _percent(axes)
    axes.legend(fontsize=7, loc="upper left")
    return _svg(figure)


def _pooled(bins: Iterable[Sequence[ReliabilityBinSnapshot]]) -> list[tuple[float, list[float]]]:
    """Windows' reliability bins pooled: per bin's lower edge [count, sum of confidence, sum agreeing], sorted."""
    counts: dict[float, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for window in bins:
        for b in window:
            if b.count and b.mean_confidence is not None and b.accuracy is not None:
                row = counts[b.lower]
                row[0] += b.count
                row[1] += b.mean_confidence * b.count
                row[2] += b.accuracy * b.count
    return sorted(counts.items())


def calibration_chart(windows: Sequence[AuditSnapshot]) -> str | Empty:
    """The reliability curve of the confidence the series decides on; when the records carry both the judge's
    stated confidence and its token probability, one curve for each, over the verdicts that have both."""
    title = "Calibration: agreement with people by the judge's confidence"
    rows = _pooled(w.reliability for w in windows)
    if not rows:
        return Empty(title, NO_LABELS if not _labelled(windows) else "no labelled automatic verdict with a confidence")
    token = _pooled(w.token_reliability for w in windows)
    stated = _pooled(w.stated_reliability for w in windows)
    curves = (
        [("stated confidence", stated, "o-"), ("token probability", token, "s--")]
        if token
        else [("judge (labelled verdicts)", rows, "o-")]
    )
    figure, axes = _figure(title, NARROW if max(len(c[1]) for c in curves) <= 2 else WIDE)
    axes.plot([0, 1], [0, 1], color="grey", linestyle=":", label="perfect calibration")
    for label, curve, style in curves:
        axes.plot([r[1] / r[0] for _, r in curve], [r[2] / r[0] for _, r in curve], style, label=label)
        for _, r in curve:
            axes.annotate(
                f"{int(r[0])}", (r[1] / r[0], r[2] / r[0]), fontsize=7, xytext=(3, 3), textcoords="offset points"
            )
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1.05)
    axes.set_xlabel("mean confidence in the bin (labels per bin marked)", fontsize=8)
    axes.set_ylabel("agreement with people", fontsize=8)
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
        ("human_longer_win_rate", "s--", "C1", "people", 5),
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


def plots_html(windows: Sequence[AuditSnapshot], min_labels: int = KAPPA_MIN_LABELS) -> str:
    """The series' plots, each an inline SVG or, in its place, why it has nothing to draw."""
    out = []
    for chart in CHARTS:
        drawn = kappa_chart(windows, min_labels) if chart is kappa_chart else chart(windows)
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


def rates_plot(windows: Sequence[AuditSnapshot]) -> str:
    """The tie-break and flip rates as one SVG (``pairjudge_dev.report_sample`` writes it to the docs)."""
    return _always_svg(rates_chart(windows))
