"""Numbers and names as users read them (``streams.scores.plain``): no raw e-value, no scientific notation, no
estimate from fewer labels than its minimum, a plain sentence for every review reason, one glossary."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import get_args

from pairjudge.schemas.audit import AuditSeries
from pairjudge.schemas.events import ReviewReason
from pairjudge.schemas.scores import GateSnapshot, HistoryPoint, HumanGateSnapshot
from pairjudge.streams.scores.charts import evidence_chart
from pairjudge.streams.scores.plain import (
    GLOSSARY,
    REASONS,
    anchor,
    kappa,
    labels_forecast,
    progress,
    progress_text,
    reason_text,
    series_name,
)
from pairjudge.streams.scores.view import human_gate_view, judge_gate_view

ROOT = Path(__file__).resolve().parents[2]
SCIENTIFIC = re.compile(r"\d[eE][+-]?\d")


def test_evidence_is_a_share_of_the_way_to_a_decision_and_never_past_it() -> None:
    threshold = 20.0  # 1 / alpha
    assert progress(0.0, threshold) == 0.0  # an e-value of 1: no evidence
    assert progress(-3.0, threshold) == 0.0  # evidence against counts as none
    assert math.isclose(progress(math.log(20) / 2, threshold), 0.5)
    assert progress(math.log(1.33e14), threshold) == 1.0  # far past the threshold: decided, not 1,100%
    assert progress(None, threshold) == 0.0
    assert progress_text(0.5) == "50% of the way to a decision"
    assert progress_text(0.999) == "99% of the way to a decision"  # never rounded up to a decision
    assert progress_text(1.0) == "enough evidence to decide"


def test_the_judge_gate_shows_no_e_value_however_large() -> None:
    for e_promote, e_reject, decision in ((1.0, 5.52e6, "reject"), (1.33e14, 0.0, "promote"), (3.0, 0.5, "continue")):
        gate = GateSnapshot(
            decision=decision,
            wins=10,
            losses=3,
            e_promote=e_promote,
            e_reject=e_reject,
            threshold=20.0,
            alpha=0.05,
            min_effect=0.05,
        )
        view = judge_gate_view(gate)
        for text in (view.text, view.detail):
            assert not SCIENTIFIC.search(text), text
            assert "e-value" not in text
            assert "e+" not in text
    gate = GateSnapshot(
        decision="continue",
        wins=3,
        losses=1,
        e_promote=math.sqrt(20),
        e_reject=1.0,
        threshold=20,
        alpha=0.05,
        min_effect=0.05,
    )
    assert judge_gate_view(gate).text == "continue: towards promoting: 50% of the way to a decision"


def test_the_evidence_chart_draws_progress_not_log_e_values() -> None:
    history = [
        HistoryPoint(at="2026-12-06T19:00:00Z", pairs=n, log_e_promote=-1.0, log_e_reject=float(n))
        for n in (10, 20, 40)
    ]
    svg = evidence_chart(history, 20.0)
    texts = re.findall(r">([^<>]+)<", svg)
    assert "decides at 100%" in texts
    assert not any("log" in t or "e-value" in t for t in texts), texts
    assert {"0%", "50%", "100%"} <= set(texts)


def test_a_forecast_past_any_realistic_count_says_no_decision_is_in_sight() -> None:
    assert labels_forecast(None) == "no decision in sight: at the current estimate the two are too close to tell apart"
    assert labels_forecast(10_000_001).startswith("no decision in sight")
    assert labels_forecast(140) == "about 140 more labels expected to be needed"
    assert labels_forecast(12_345) == "about 12,345 more labels expected to be needed"
    gate = HumanGateSnapshot(
        decision="continue",
        reason="more than 10,000,000 more human labels would be needed at the current estimate",
        labels_needed=None,
        labels=45,
        alpha=0.05,
        min_effect=0.05,
        min_labels=30,
        target_labels=500,
    )
    assert human_gate_view(gate).text == (
        "continue: no decision in sight: at the current estimate the two are too close to tell apart"
    )
    few = gate.model_copy(update={"labels": 4})
    assert human_gate_view(few).text == "continue: not enough labels yet: 4 of the 30 needed"


def test_kappa_needs_its_minimum_of_labels_and_an_interval_with_width() -> None:
    assert kappa(1.0, 1.0, 1.0, 4, 50) == "not enough labels yet: 4 of the 50 needed"
    assert kappa(0.62, 0.41, 0.8, 57, 50) == "0.62 (0.41 to 0.80), from 57 labels"
    assert kappa(1.0, 1.0, 1.0, 60, 50) == "1.00 (its interval cannot be measured), from 60 labels"
    assert kappa(None, None, None, 60, 50).startswith("not measurable yet")


def test_every_review_reason_has_a_plain_sentence() -> None:
    assert set(REASONS) == set(get_args(ReviewReason))
    assert reason_text("tiebreak_no_signal").startswith("the judge could not decide")
    assert all("_" not in text for text in REASONS.values())


def test_a_series_is_named_by_experiment_rubric_and_judge() -> None:
    info = AuditSeries(
        judge_provider="offline",
        judge_model="pairjudge-heuristic",
        judge_version="heuristic-4",
        prompt_template_hash="7e0945bc" * 8,
        rubric="tone_style",
        experiment_id="brand-voice-q4",
    )
    assert series_name(info, info.key) == "brand-voice-q4 · tone and style · pairjudge-heuristic"
    named = info.model_copy(update={"rubric": "named:acme-voice", "experiment_id": None})
    assert series_name(named, named.key) == "no experiment · acme-voice · pairjudge-heuristic"


def test_the_docs_glossary_has_every_term_the_pages_link_to() -> None:
    """docs/glossary.md and the review service's /glossary carry the same terms (the pages link to the
    service's; the docs' is for readers of the docs)."""
    text = (ROOT / "docs" / "glossary.md").read_text()
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert headings == list(GLOSSARY)
    for term, meaning in GLOSSARY.items():
        assert " ".join(meaning.split()) in " ".join(text.split()), term
    templates = ROOT / "streams" / "review" / "templates"
    linked = {m for f in templates.glob("*.html") for m in re.findall(r'href="/glossary#([a-z-]+)"', f.read_text())}
    assert linked
    assert linked <= {anchor(t) for t in GLOSSARY}
