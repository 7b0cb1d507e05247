"""The report's "agreement by deciding stage" section: the primary judge's and the tie-break's agreement with
people, the tie-break's own threshold or switch-off, and the review load the switch-off costs.

The figures come from the series' latest snapshot (``AuditSnapshot.stages``, ``tiebreak_threshold``,
``tiebreak_off``: all windows together, ``agents.audit.stages``); the load from its windows' flip counts over
the time they covered. Every number follows ``streams.scores.plain``'s rules (shown with its labels, and only
from the audit's minimum); every text from events is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from pairjudge.schemas.audit import AuditSnapshot, StageAgreement
from pairjudge.streams.scores.plain import estimate, interval, pct, plural

#: Stages in plain words.
STAGE_NAMES = {"primary": "the judge, both orders agreeing", "tiebreak": "the tie-break (flips, ties, low confidence)"}


def flips_per_hour(windows: Sequence[AuditSnapshot]) -> float | None:
    """Flips per hour over the time the windows covered (an open window up to its snapshot); None without time."""
    hours = 0.0
    flips = 0
    for w in windows:
        end = min(w.window_end, max(w.published_at, w.window_start))
        hours += (end - w.window_start).total_seconds() / 3600
        flips += w.flips
    return flips / hours if hours > 0 else None


def _stage_row(row: StageAgreement) -> str:
    name = STAGE_NAMES.get(row.stage, row.stage) + (f", tier {row.tier}" if row.tier else "")
    value = f"{pct(row.agreement)} ({interval(row.low, row.high)})"
    figure = estimate(value, row.labels, row.min_labels)
    return f"<tr><td>{html.escape(name)}</td><td>{html.escape(figure)}</td></tr>"


def review_load(windows: Sequence[AuditSnapshot]) -> str:
    """What sending the series' flips to people costs (or would cost), in review items per hour and per day."""
    rate = flips_per_hour(windows)
    off = windows[-1].tiebreak_off
    if rate is None:
        return "No flips measured yet, so no review load to state."
    per_day = rate * 24
    verb = "adds" if off else "would add"
    return (
        f"At the current flip rate ({rate:,.1f} per hour), sending flips to people instead of the tie-break {verb} up "
        f"to {rate:,.1f} review items per hour ({per_day:,.0f} per day)."
    )


def stages_section(windows: Sequence[AuditSnapshot]) -> str:
    """The section, or "" when the snapshots carry no by-stage figures (written before they existed)."""
    latest = windows[-1]
    if not latest.stages:
        return ""
    rows = "".join(_stage_row(r) for r in latest.stages)
    t = latest.tiebreak_threshold
    if latest.tiebreak_off:
        state = (
            "The tie-break is switched off for this series: with "
            f"{plural(t.labels if t else 0, 'label')}, no confidence level shows its decisions agreeing with "
            f"people at least {pct(t.target if t else None, 0)} of the time, so its flips go to people."
        )
    elif t is not None and t.source == "calibrated":
        state = (
            f"The tie-break decides from confidence {t.threshold:.2f}: its decisions there agree with people at "
            f"least {pct(t.target, 0)} of the time, with {pct(1 - (t.risk or 0.0), 0)} certainty."
        )
    else:
        state = "The tie-break decides at its configured threshold" + (f" ({t.note})." if t and t.note else ".")
    return (
        "<h3>Agreement with people by deciding stage</h3>"
        "<table class='stages'><tr><th scope='col'>decided by</th>"
        "<th scope='col'>agreement with people (95% interval)</th></tr>"
        f"{rows}</table><p class='tiebreak-state'>{html.escape(state)}</p>"
        f"<p class='review-load'>{html.escape(review_load(windows))}</p>"
    )
