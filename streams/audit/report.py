"""``pairjudge report``: one self-contained HTML file of the drift audit, per series.

Input: the ``AuditSnapshot``s and ``Alert``s of ``pairjudge.audit`` (read whole from the topic) or of a
JSONL export (the demo writes ``out/demo-audit.jsonl``). Output: one HTML file, plots embedded as
inline SVG, no script and no external resource, so it opens anywhere and can be mailed.

Per series (judge and version, template, rubric, experiment), over its windows: Cohen's kappa with
its interval against the kappa guard's line at 0.7 (from the guard's minimum of labels on; fewer are
shown as "not enough labels yet"), beside the human ceiling (the kappa of reviewers against
each other on audit pairs labelled twice: a judge cannot be expected to agree with people more than
people agree with each other) and the floor the kappa guard applied, in the mode it ran in; the
tie-break rate against the tie-break alert's 20% line, with the flip rate; the calibration curve (reliability
bins summed over the windows; the stated and the token-probability curves when the records carry both);
how often the longer output wins for the judge and for the humans;
the auto-decision threshold in force and its coverage; the dimensions ranked by how often the judge's
two orders, or the judge and the humans, disagree on them, and the style-guide rules cited in those pairs
(``streams.audit.report_ambiguity``).
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
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pairjudge.schemas.audit import ALERT_TITLES, Alert, AuditSnapshot
from pairjudge.schemas.scores import ScoreSnapshot
from pairjudge.streams.audit.report_ambiguity import ambiguity_section
from pairjudge.streams.audit.report_charts import plots_html, window_label
from pairjudge.streams.audit.report_stages import stages_section
from pairjudge.streams.config.oversight import AuditSettings
from pairjudge.streams.scores.charts import evidence_chart, strengths_chart, win_rate_chart
from pairjudge.streams.scores.plain import GLOSSARY, agreement_guard_text, anchor, kappa, plural, series_name
from pairjudge.streams.scores.view import BasisPanel, BoardView, board_view, min_labels_of
from pairjudge.streams.security.files import write_private_text

NO_ALERTS = "no alerts raised"
#: The kappa guard's minimum of labels (``audit.min_labels``): a kappa from fewer is shown as not enough labels.
DEFAULT_MIN_LABELS: int = AuditSettings().min_labels
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
        "<table class='splits'><tr><th rowspan='2'></th><th colspan='4'>measured against people</th>"
        "<th colspan='2'>measured against the judge</th></tr><tr><th>win rate (tie ½)</th><th>95% interval</th>"
        "<th>labels</th><th>the judge, same pairs</th><th>win rate (95% interval)</th><th>wins–losses–ties</th></tr>"
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
            "<p>Measured against people, by sampling group:</p><table class='splits'><tr><th>group</th><th>pairs</th>"
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
        win_rate_chart(snap.history, min_labels_of(snap))
        + evidence_chart(snap.history, snap.gate.threshold)
        + strengths_chart(snap.strengths)
    )
    return (
        f"<h2>Champion and challenger: experiment {html.escape(snap.experiment)}</h2>"
        f"<p class='as-of'>{html.escape(v.as_of)}</p>"
        f"<div class='bases'>{_panel(v.human)}{_panel(v.judge)}</div>{_splits_table(v)}{spend_table(snap)}"
        f"<div class='plots'>{charts}</div>"
    )


def spend_table(snap: ScoreSnapshot) -> str:
    """What deciding the experiment's pairs cost, by cascade tier and outcome; nothing before any was counted."""
    if not snap.spend:
        return ""
    rows = "".join(
        f"<tr><td>{html.escape(s.tier or '(no tiers)')}</td><td>{html.escape(s.outcome)}</td><td>{s.pairs}</td>"
        f"<td>{s.usd:.4f}</td><td>{_fmt(s.usd_per_pair, '{:.5f}')}</td><td>{s.unpriced_pairs}</td></tr>"
        for s in snap.spend
    )
    priced = sum(s.pairs - s.unpriced_pairs for s in snap.spend)
    total = sum(s.usd for s in snap.spend)
    mean = _fmt(total / priced if priced else None, "{:.5f}")
    return (
        "<table class='splits spend'><caption>Cost of deciding the pairs (US dollars)</caption>"
        "<tr><th>tier</th><th>outcome</th><th>pairs</th><th>spent</th><th>per pair</th><th>unpriced pairs</th></tr>"
        f"{rows}<tr><td>all</td><td></td><td>{sum(s.pairs for s in snap.spend)}</td><td>{total:.4f}</td>"
        f"<td>{mean}</td><td>{sum(s.unpriced_pairs for s in snap.spend)}</td></tr></table>"
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


# --- the page ---------------------------------------------------------------------------------------


def stylesheet() -> str:
    """The review pages' stylesheet (streams/review/static/review.css), embedded so the report is one standalone
    file that looks like the pages. Read as package data, not imported: the review service sits above the audit
    in the layers, and this is its file, not its code."""
    return (resources.files("pairjudge.streams") / "review" / "static" / "review.css").read_text(encoding="utf-8")


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


def kappa_cell(w: AuditSnapshot, min_labels: int = DEFAULT_MIN_LABELS) -> str:
    """A window's kappa as every page shows it (``plain.kappa``)."""
    return kappa(w.cohen_kappa, w.kappa_low, w.kappa_high, w.human_labels, min_labels)


def guard_summary(windows: Sequence[AuditSnapshot], min_labels: int = DEFAULT_MIN_LABELS) -> str:
    """One paragraph: the judge's agreement with people in the latest window beside people's agreement with
    each other, and the guard."""
    latest = windows[-1]
    ceiling = (
        f"people agreeing with each other: kappa {_fmt(latest.human_kappa)}, agreement "
        f"{_fmt(latest.human_agreement, '{:.0%}')}, over {plural(latest.human_pairs, 'pair')} two reviewers labelled"
        if latest.human_pairs
        else "no pair labelled by two reviewers yet"
    )
    if latest.guard_mode is None:
        guard = "guard mode not recorded in these snapshots"
    elif latest.guard_mode == "relative":
        guard = f"kappa guard: relative to the human ceiling, floor {_fmt(latest.guard_kappa_min, '{:.3f}')}"
    else:
        guard = f"kappa guard: absolute, floor {_fmt(latest.guard_kappa_min, '{:g}')}"
    beside = f"beside the {ceiling}" if latest.human_pairs else f"({ceiling})"
    text = f"Latest window: judge agreement with people (kappa) {kappa_cell(latest, min_labels)} {beside}; {guard}."
    if latest.guard_note:
        text += f" The kappa guard was {latest.guard_note}."
    text += f" {agreement_guard_text(latest)[0].upper()}{agreement_guard_text(latest)[1:]}."
    return f"<p class='guard'>{html.escape(text)}</p>"


def _summary_table(windows: Sequence[AuditSnapshot], min_labels: int = DEFAULT_MIN_LABELS) -> str:
    rows = []
    for w in windows:
        kappa = kappa_cell(w, min_labels)
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
            "kappa (95% interval)",
            "pairs two reviewers labelled",
            "people agreeing with each other",
            "their kappa (the ceiling)",
            "kappa guard",
            "calibration error (ECE)",
            "auto-decision threshold",
        )
    )
    return f"<table class='windows'><tr>{head}</tr>{''.join(rows)}</table>"


def glossary_section() -> str:
    """What the report's words mean (the same terms as the review service's /glossary and docs/glossary.md)."""
    e = html.escape
    terms = "".join(f"<dt id='{e(anchor(t))}'>{e(t)}</dt><dd>{e(m)}</dd>" for t, m in GLOSSARY.items())
    return f"<details class='glossary'><summary>What the words in this report mean</summary><dl>{terms}</dl></details>"


def render_report(
    events: AuditEvents, *, title: str = "pairjudge drift audit", min_labels: int = DEFAULT_MIN_LABELS
) -> str:
    """The report's page; ``min_labels`` is the kappa guard's minimum (``audit.min_labels``), below which a
    window's kappa is shown as not enough labels."""
    by_series = latest_per_window(events.snapshots)
    alerts_by_series: dict[str, list[Alert]] = defaultdict(list)
    for alert in events.alerts:
        alerts_by_series[alert.series].append(alert)
    sections = []
    for series, windows in by_series.items():
        info = windows[-1].series_info
        heading = series_name(info, series)
        alerts = "".join(
            f"<li class='alert'>{html.escape(a.raised_at.astimezone(UTC).strftime('%Y-%m-%d %H:%M UTC'))} "
            f"<span title='{html.escape(a.kind)}'>{html.escape(ALERT_TITLES.get(a.kind, a.kind))}</span>: "
            f"{html.escape(a.message)}</li>"
            for a in alerts_by_series.get(series, [])
        )
        sections.append(
            f"<h2>{html.escape(heading)}</h2><details class='series-key'><summary>series key</summary>"
            f"<code>{html.escape(series)}</code></details>"
            f"{guard_summary(windows, min_labels)}{_summary_table(windows, min_labels)}"
            + (f"<ul>{alerts}</ul>" if alerts else f"<p class='none'>{NO_ALERTS}</p>")
            + f"<div class='plots'>{plots_html(windows, min_labels)}</div>"
            + stages_section(windows)
            + ambiguity_section(windows)
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
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        "<meta name='color-scheme' content='light dark'>"
        f"<title>{html.escape(title)}</title><style>{stylesheet()}</style></head><body class='report'>"
        "<header class='top'><span class='brand'>pairjudge report</span></header><main>"
        f"<h1>{html.escape(title)}</h1><p class='stats'>{len(by_series)} series, {len(events.snapshots)} snapshots, "
        f"{len(events.alerts)} alerts.</p>{skipped}{body}{glossary_section()}</main></body></html>"
    )


def write_report(
    events: AuditEvents, out: Path, *, title: str = "pairjudge drift audit", min_labels: int = DEFAULT_MIN_LABELS
) -> Path:
    # Owner-only (0o600, a created parent 0o700), like every file that describes pairs.
    return write_private_text(out, render_report(events, title=title, min_labels=min_labels), what="report")
