"""Inline SVG charts of a scoreboard, for the review service's page and ``pairjudge report``: drawn here
from numbers, with no script and no CDN.

Every piece of text in a chart (a model name, an axis label) is escaped; everything else is a number this
module formats. That is why the web layer may mark the result safe for its templates.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from pairjudge.schemas.scores import HistoryPoint, StrengthSnapshot
from pairjudge.streams.scores.plain import progress

W, H = 560, 220
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 22, 30


def _frame(title: str, y_ticks: Sequence[tuple[float, str]], x_label: str, body: str) -> str:
    ticks = "".join(
        f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid" stroke="#eceef2"/>'
        f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(label)}</text>'
        for y, label in y_ticks
    )
    return (
        f'<svg viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{escape(title)}" class="chart"'
        ' font-size="11" font-family="system-ui, sans-serif">'
        f"<title>{escape(title)}</title>"
        f'<text x="{LEFT}" y="14" class="chart-title" font-size="12" font-weight="600">{escape(title)}</text>'
        f"{ticks}{body}"
        f'<text x="{(LEFT + W - RIGHT) / 2:.0f}" y="{H - 6}" text-anchor="middle">{escape(x_label)}</text></svg>'
    )


def _why(text: str) -> str:
    """An empty chart's reason, in its middle."""
    return (
        f'<text x="{(LEFT + W - RIGHT) / 2:.0f}" y="{(TOP + H - BOTTOM) / 2:.0f}" text-anchor="middle"'
        f' class="why" fill="#5b6270">{escape(text)}</text>'
    )


def _x(value: float, low: float, high: float) -> float:
    return LEFT + (W - LEFT - RIGHT) * ((value - low) / (high - low) if high > low else 0.5)


def _y(value: float, low: float, high: float) -> float:
    return H - BOTTOM - (H - TOP - BOTTOM) * ((value - low) / (high - low) if high > low else 0.5)


#: Colours as presentation attributes, so a chart reads the same wherever it is inlined (the report has no
#: chart CSS); the review page's stylesheet overrides them by class.
JUDGE_COLOUR, JUDGE_BAND = "#2f6fde", "#cfe0ff"
HUMAN_COLOUR, HUMAN_BAND = "#c2410c", "#fbd5bd"
PROMOTE_COLOUR, REJECT_COLOUR = "#1b8a4b", "#b3261e"
DASHED = 'stroke="#8a93a6" stroke-dasharray="4 3"'


def _series(
    points: Sequence[tuple[int, float, float, float]], x_lo: int, x_hi: int, css: str, colours: tuple[str, str]
) -> str:
    """One rate with its band: (pairs, rate, low, high) per point."""
    line_colour, band_colour = colours
    band = " ".join(f"{_x(n, x_lo, x_hi):.1f},{_y(hi, 0, 1):.1f}" for n, _, _, hi in points)
    band += " " + " ".join(f"{_x(n, x_lo, x_hi):.1f},{_y(lo, 0, 1):.1f}" for n, _, lo, _ in reversed(points))
    line = " ".join(f"{_x(n, x_lo, x_hi):.1f},{_y(rate, 0, 1):.1f}" for n, rate, _, _ in points)
    out = (
        f'<polygon points="{band}" class="{css}band" fill="{band_colour}" fill-opacity="0.55"/>'
        f'<polyline points="{line}" class="{css}rate" fill="none" stroke="{line_colour}" stroke-width="2"/>'
    )
    if len({n for n, *_ in points}) == 1:  # one point: a line and a band of no width would not show
        n, rate, lo, hi = points[-1]
        x = _x(n, x_lo, x_hi)
        out += (
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{_y(lo, 0, 1):.1f}" y2="{_y(hi, 0, 1):.1f}" class="{css}dot"'
            f' stroke="{band_colour}" stroke-width="8"/>'
            f'<circle cx="{x:.1f}" cy="{_y(rate, 0, 1):.1f}" r="4" class="{css}dot" fill="{line_colour}"/>'
        )
    return out


def _legend(items: Sequence[tuple[str, str, str]]) -> str:
    """Swatches and labels in the top right, right-aligned: (css, colour, label) per item."""
    out, x = "", float(W - RIGHT)
    for css, colour, label in reversed(items):
        width = 6.2 * len(label)
        out += (
            f'<text x="{x:.1f}" y="14" text-anchor="end" class="legend">{escape(label)}</text>'
            f'<rect x="{x - width - 16:.1f}" y="6" width="12" height="8" class="{css}swatch" fill="{colour}"/>'
        )
        x -= width + 26
    return out


def win_rate_chart(history: Sequence[HistoryPoint], min_labels: int = 30) -> str:
    """The challenger's win rate over the pairs counted, on both bases: the judge's share of decisive
    verdicts with its Wilson 95% band, and the human basis's rate with its anytime-valid band (the one
    the human gate reads), against the 50% line, from ``min_labels`` labels on (an interval from fewer only
    looks exact). Older points without the human basis draw the judge's only."""
    judge = [(p.pairs, p.win_rate, p.low, p.high) for p in history]
    judge_pts = [(n, r, lo, hi) for n, r, lo, hi in judge if r is not None and lo is not None and hi is not None]
    human = [
        (p.pairs, p.human_rate, p.human_low, p.human_high)
        for p in history
        if p.human_labels is not None and p.human_labels >= min_labels
    ]
    human_pts = [(n, r, lo, hi) for n, r, lo, hi in human if r is not None and lo is not None and hi is not None]
    ticks = [(_y(v, 0, 1), f"{v:.0%}") for v in (0.0, 0.25, 0.5, 0.75, 1.0)]
    if not judge_pts and not human_pts:
        return _frame(
            "Challenger win rate (no decisive pairs yet)",
            ticks,
            "pairs counted",
            _why("the rate appears once the judge has decided a pair between champion and challenger"),
        )
    xs = [n for n, *_ in (*judge_pts, *human_pts)]
    x_lo, x_hi = min(xs), max(xs)
    half = _y(0.5, 0, 1)
    legend: list[tuple[str, str, str]] = []
    body = ""
    if human_pts:
        body += _series(human_pts, x_lo, x_hi, "human-", (HUMAN_COLOUR, HUMAN_BAND))
        legend.append(("human-", HUMAN_COLOUR, "measured against people (95%)"))
    elif any(p.human_labels is not None for p in history):
        legend.append(("human-", HUMAN_BAND, "against people: not enough labels yet"))
    if judge_pts:
        body += _series(judge_pts, x_lo, x_hi, "", (JUDGE_COLOUR, JUDGE_BAND))
        legend.append(("", JUDGE_COLOUR, "measured against the judge (95%)"))
    body += f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{half:.1f}" y2="{half:.1f}" class="even" {DASHED}/>'
    body += _x_labels(x_lo, x_hi)
    return _frame("Challenger win rate", ticks, "pairs counted", body + _legend(legend))


def _x_labels(x_lo: int, x_hi: int) -> str:
    """The pair counts at the ends of the x axis; one count, under its point, when there is one point."""
    if x_lo == x_hi:
        return f'<text x="{_x(x_lo, x_lo, x_hi):.1f}" y="{H - BOTTOM + 14}" text-anchor="middle">{x_lo}</text>'
    return (
        f'<text x="{W - RIGHT}" y="{H - BOTTOM + 14}" text-anchor="end">{x_hi}</text>'
        f'<text x="{LEFT}" y="{H - BOTTOM + 14}">{x_lo}</text>'
    )


def evidence_chart(history: Sequence[HistoryPoint], threshold: float) -> str:
    """How far the judge's gate has come towards promoting and towards rejecting, 0-100% of the way to a
    decision (``plain.progress``: the log e-value over log(1/alpha)), never a raw e-value."""
    points = [p for p in history if p.log_e_promote is not None or p.log_e_reject is not None]
    ticks = [(_y(v, 0, 1), f"{v:.0%}") for v in (0.0, 0.5, 1.0)]
    title = "The judge's gate: how far towards a decision"
    if not points:
        return _frame(title + " (no evidence yet)", ticks, "pairs counted", _why("no decisive pair counted yet"))
    x_lo, x_hi = min(p.pairs for p in points), max(p.pairs for p in points)

    def line(attr: str, css: str) -> str:
        pts = [(p.pairs, progress(getattr(p, attr), threshold)) for p in points if getattr(p, attr) is not None]
        colour = PROMOTE_COLOUR if css == "promote" else REJECT_COLOUR
        if not pts:
            return ""
        coords = " ".join(f"{_x(x, x_lo, x_hi):.1f},{_y(y, 0, 1):.1f}" for x, y in pts)
        out = f'<polyline points="{coords}" class="{css}" fill="none" stroke="{colour}" stroke-width="2"/>'
        if len(pts) == 1:  # one point: a polyline of one vertex would not show
            x, y = pts[0]
            out += (
                f'<circle cx="{_x(x, x_lo, x_hi):.1f}" cy="{_y(y, 0, 1):.1f}" r="4" class="{css}-dot" fill="{colour}"/>'
            )
        return out

    b = _y(1.0, 0, 1)
    body = (
        f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{b:.1f}" y2="{b:.1f}" class="boundary" {DASHED}/>'
        f'<text x="{W - RIGHT}" y="{b + 14:.1f}" text-anchor="end">decides at 100%</text>'
        + line("log_e_promote", "promote")
        + line("log_e_reject", "reject")
        + f'<text x="{LEFT + 4}" y="{TOP + 12}" class="promote-label" fill="{PROMOTE_COLOUR}">towards promoting</text>'
        f'<text x="{LEFT + 124}" y="{TOP + 12}" class="reject-label" fill="{REJECT_COLOUR}">towards rejecting</text>'
        + _x_labels(x_lo, x_hi)
    )
    return _frame(title, ticks, "pairs counted", body)


def strengths_chart(strengths: Sequence[StrengthSnapshot]) -> str:
    """Bradley-Terry log-strengths with their bootstrap 95% intervals, one row per model."""
    if not strengths:
        return _frame(
            "Bradley-Terry strengths (fewer than two models)",
            [],
            "log-strength",
            _why("strengths need comparisons between at least two models"),
        )
    lo = min(s.low for s in strengths)
    hi = max(s.high for s in strengths)
    pad = max(0.1, (hi - lo) * 0.1)
    lo, hi = lo - pad, hi + pad
    row = (H - TOP - BOTTOM) / max(1, len(strengths))
    body = ""
    for i, s in enumerate(sorted(strengths, key=lambda s: -s.strength)):
        y = TOP + row * (i + 0.5)
        body += (
            f'<line x1="{_x(s.low, lo, hi):.1f}" x2="{_x(s.high, lo, hi):.1f}" y1="{y:.1f}" y2="{y:.1f}" class="bar"'
            f' stroke="{JUDGE_COLOUR}" stroke-width="2"/>'
            f'<circle cx="{_x(s.strength, lo, hi):.1f}" cy="{y:.1f}" r="4" class="point" fill="#1d2330"/>'
            + _bar_label(s, y, lo, hi)
        )
    zero = _x(0.0, lo, hi)
    body += f'<line x1="{zero:.1f}" x2="{zero:.1f}" y1="{TOP}" y2="{H - BOTTOM}" class="even" {DASHED}/>'
    return _frame("Bradley-Terry strengths with 95% bootstrap intervals", [], "log-strength (0 = average)", body)


def _bar_label(s: StrengthSnapshot, y: float, lo: float, hi: float) -> str:
    """The model's name beside its interval, on whichever side has room."""
    label = f"{escape(s.model)} ({s.comparisons})"
    right_end = _x(s.high, lo, hi)
    if right_end > LEFT + 0.6 * (W - LEFT - RIGHT):
        return f'<text x="{_x(s.low, lo, hi) - 6:.1f}" y="{y + 4:.1f}" text-anchor="end">{label}</text>'
    return f'<text x="{right_end + 6:.1f}" y="{y + 4:.1f}">{label}</text>'
