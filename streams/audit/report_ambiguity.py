"""The report's "ambiguous dimensions and rules" section: the series' windows added up, ranked.

Each window's ``AuditSnapshot.ambiguity`` carries counts (not only rates), so a series' windows are
added (``agents.audit.ambiguity.AmbiguityCounts.merge``) and the rates and Wilson intervals computed once
over the sum. Every text from events (dimension names, rule ids) is escaped with ``html.escape``.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from pairjudge.agents.audit.ambiguity import AmbiguityCounts, counts_of
from pairjudge.schemas.audit import AmbiguitySnapshot, AuditSnapshot, DimensionAmbiguity

#: Why a series has no ambiguity section.
NO_AMBIGUITY = (
    "No per-dimension facts in these snapshots: they come from judges whose replies score dimensions or "
    "criteria in both orders (tone and style's four, a head-to-head or pairwise rubric's criteria)."
)


def series_ambiguity(windows: Sequence[AuditSnapshot]) -> AmbiguitySnapshot | None:
    """The series' windows' counts added up and ranked; None when no window had any."""
    total = AmbiguityCounts()
    confidence = 0.95
    for window in windows:
        if window.ambiguity is not None:
            total = total.merge(counts_of(window.ambiguity))
            confidence = window.ambiguity.confidence
    return total.snapshot(confidence)


def _rate(rate: float | None, low: float | None, high: float | None, k: int, n: int) -> str:
    """The count first, so a rate from two pairs reads as two pairs: "2 of 2 pairs: 100% (34% to 100%)"."""
    if rate is None or low is None or high is None or n == 0:
        return "no pairs yet"
    return f"{k:,} of {n:,} {'pair' if n == 1 else 'pairs'}: {rate:.0%} ({low:.0%} to {high:.0%})"


def _dimension_row(d: DimensionAmbiguity) -> str:
    cells = (
        d.name,
        _rate(d.order_disagreement_rate, d.order_low, d.order_high, d.orders_disagree, d.orders_compared),
        _rate(d.human_disagreement_rate, d.human_low, d.human_high, d.human_disagree, d.human_compared),
    )
    return "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"


def ambiguity_section(windows: Sequence[AuditSnapshot]) -> str:
    """The section's HTML: the dimensions ranked by order disagreement then human disagreement, and the
    guide rules most cited in disagreeing pairs."""
    found = series_ambiguity(windows)
    if found is None:
        return f"<h3>Ambiguous dimensions and rules</h3><p class='none'>{html.escape(NO_AMBIGUITY)}</p>"
    level = f"{found.confidence:.0%}"
    body = (
        "<h3>Ambiguous dimensions and rules</h3><p class='meaning'>Order disagreement: pairs whose two orders "
        "named different winners for the dimension, of the pairs both orders scored it. Human disagreement: "
        "labelled pairs where the orders agreed on a candidate for the dimension and the person chose the other "
        f"one (ties left out). Counts over every window of the series (so they may exceed one window's labels), "
        f"rates with {level} intervals; "
        "pairs assumed independent with one common rate.</p>"
    )
    if found.dimensions:
        body += (
            "<table class='ambiguity'><tr><th>dimension</th><th>order disagreement</th>"
            f"<th>human disagreement</th></tr>{''.join(_dimension_row(d) for d in found.dimensions)}</table>"
        )
    if found.rules:
        rows = "".join(
            "<tr>"
            + "".join(
                f"<td>{html.escape(str(c))}</td>"
                for c in (r.rule_id, r.cited_order_disagreeing, r.cited, r.cited_human_disagreeing, r.cited_labelled)
            )
            + "</tr>"
            for r in found.rules
        )
        body += (
            "<p class='meaning'>Style-guide rules cited in the judge's justifications (ids: guide id, then the rule's "
            "number, <code>sec-</code> and its section heading, or <code>b</code> and a hash of a bulleted rule), "
            "most cited in disagreeing pairs first.</p><table class='rules'><tr><th>rule</th>"
            "<th>cited, orders disagreeing</th><th>cited</th><th>cited, human disagreeing with the judge</th>"
            f"<th>cited, labelled</th></tr>{rows}</table>"
        )
    else:
        body += "<p class='none'>No style-guide rule cited in these windows.</p>"
    return body
