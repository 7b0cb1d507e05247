"""Inline SVG charts of a scoreboard, for the review service's page and ``pairjudge report``: drawn here
from numbers, with no script and no CDN.

Every piece of text in a chart (a model name, an axis label) is escaped; everything else is a number this
module formats. That is why the web layer may mark the result safe for its templates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from pairjudge.schemas.scores import HistoryPoint, StrengthSnapshot

W, H = 560, 220
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 22, 30


def _frame(title: str, y_ticks: Sequence[tuple[float, str]], x_label: str, body: str) -> str:
    ticks = "".join(
        f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
        f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(label)}</text>'
        for y, label in y_ticks
    )
    return (
        f'<svg viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{escape(title)}" class="chart">'
        f"<title>{escape(title)}</title>"
        f'<text x="{LEFT}" y="14" class="chart-title">{escape(title)}</text>{ticks}{body}'
        f'<text x="{(LEFT + W - RIGHT) / 2:.0f}" y="{H - 6}" text-anchor="middle">{escape(x_label)}</text></svg>'
    )


def _x(value: float, low: float, high: float) -> float:
    return LEFT + (W - LEFT - RIGHT) * ((value - low) / (high - low) if high > low else 0.5)


def _y(value: float, low: float, high: float) -> float:
    return H - BOTTOM - (H - TOP - BOTTOM) * ((value - low) / (high - low) if high > low else 0.5)


def win_rate_chart(history: Sequence[HistoryPoint]) -> str:
    """The challenger's win rate over the pairs counted, with its Wilson 95% band and the 50% line."""
    points = [p for p in history if p.win_rate is not None and p.low is not None and p.high is not None]
    ticks = [(_y(v, 0, 1), f"{v:.0%}") for v in (0.0, 0.25, 0.5, 0.75, 1.0)]
    if not points:
        return _frame("Challenger win rate (no decisive pairs yet)", ticks, "pairs counted", "")
    x_hi = max(p.pairs for p in points)
    x_lo = min(p.pairs for p in points)
    band = " ".join(f"{_x(p.pairs, x_lo, x_hi):.1f},{_y(p.high or 0, 0, 1):.1f}" for p in points)
    band += " " + " ".join(f"{_x(p.pairs, x_lo, x_hi):.1f},{_y(p.low or 0, 0, 1):.1f}" for p in reversed(points))
    line = " ".join(f"{_x(p.pairs, x_lo, x_hi):.1f},{_y(p.win_rate or 0, 0, 1):.1f}" for p in points)
    half = _y(0.5, 0, 1)
    body = (
        f'<polygon points="{band}" class="band"/>'
        f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{half:.1f}" y2="{half:.1f}" class="even"/>'
        f'<polyline points="{line}" class="rate"/>'
        f'<text x="{W - RIGHT}" y="{H - BOTTOM + 14}" text-anchor="end">{x_hi}</text>'
        f'<text x="{LEFT}" y="{H - BOTTOM + 14}">{x_lo}</text>'
    )
    return _frame("Challenger win rate over decisive pairs, with its 95% interval", ticks, "pairs counted", body)


def evidence_chart(history: Sequence[HistoryPoint], threshold: float) -> str:
    """log e-values for promotion and rejection against the boundary log(1/alpha)."""
    points = [p for p in history if p.log_e_promote is not None or p.log_e_reject is not None]
    boundary = math.log(threshold)
    values = [v for p in points for v in (p.log_e_promote, p.log_e_reject) if v is not None and math.isfinite(v)]
    y_lo = min([-2.0, *values])
    y_hi = max([boundary * 1.5, *values])
    y_lo, y_hi = max(y_lo, -10.0), min(y_hi, 40.0)
    ticks = [(_y(v, y_lo, y_hi), f"{v:.0f}") for v in (y_lo, 0.0, boundary, y_hi)]
    if not points:
        return _frame("Gate evidence (none yet)", ticks, "pairs counted", "")
    x_lo, x_hi = min(p.pairs for p in points), max(p.pairs for p in points)

    def line(attr: str, css: str) -> str:
        pts = [
            (p.pairs, getattr(p, attr))
            for p in points
            if getattr(p, attr) is not None and math.isfinite(getattr(p, attr))
        ]
        coords = " ".join(f"{_x(x, x_lo, x_hi):.1f},{_y(max(y_lo, min(y_hi, y)), y_lo, y_hi):.1f}" for x, y in pts)
        return f'<polyline points="{coords}" class="{css}"/>' if pts else ""

    b = _y(boundary, y_lo, y_hi)
    body = (
        f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{b:.1f}" y2="{b:.1f}" class="boundary"/>'
        f'<text x="{W - RIGHT}" y="{b - 4:.1f}" text-anchor="end">decides at log(1/alpha) = {boundary:.2f}</text>'
        + line("log_e_promote", "promote")
        + line("log_e_reject", "reject")
        + f'<text x="{LEFT + 4}" y="{TOP + 12}" class="promote-label">promote</text>'
        f'<text x="{LEFT + 64}" y="{TOP + 12}" class="reject-label">reject</text>'
    )
    return _frame("Gate evidence: log e-value for promoting and for rejecting", ticks, "pairs counted", body)


def strengths_chart(strengths: Sequence[StrengthSnapshot]) -> str:
    """Bradley-Terry log-strengths with their bootstrap 95% intervals, one row per model."""
    if not strengths:
        return _frame("Bradley-Terry strengths (fewer than two models)", [], "log-strength", "")
    lo = min(s.low for s in strengths)
    hi = max(s.high for s in strengths)
    pad = max(0.1, (hi - lo) * 0.1)
    lo, hi = lo - pad, hi + pad
    row = (H - TOP - BOTTOM) / max(1, len(strengths))
    body = ""
    for i, s in enumerate(sorted(strengths, key=lambda s: -s.strength)):
        y = TOP + row * (i + 0.5)
        body += (
            f'<line x1="{_x(s.low, lo, hi):.1f}" x2="{_x(s.high, lo, hi):.1f}" y1="{y:.1f}" y2="{y:.1f}" class="bar"/>'
            f'<circle cx="{_x(s.strength, lo, hi):.1f}" cy="{y:.1f}" r="4" class="point"/>' + _bar_label(s, y, lo, hi)
        )
    zero = _x(0.0, lo, hi)
    body += f'<line x1="{zero:.1f}" x2="{zero:.1f}" y1="{TOP}" y2="{H - BOTTOM}" class="even"/>'
    return _frame("Bradley-Terry strengths with 95% bootstrap intervals", [], "log-strength (0 = average)", body)


def _bar_label(s: StrengthSnapshot, y: float, lo: float, hi: float) -> str:
    """The model's name beside its interval, on whichever side has room."""
    label = f"{escape(s.model)} ({s.comparisons})"
    right_end = _x(s.high, lo, hi)
    if right_end > LEFT + 0.6 * (W - LEFT - RIGHT):
        return f'<text x="{_x(s.low, lo, hi) - 6:.1f}" y="{y + 4:.1f}" text-anchor="end">{label}</text>'
    return f'<text x="{right_end + 6:.1f}" y="{y + 4:.1f}">{label}</text>'
