"""The scoreboard as users read it: the review service's /scores page and the report's section show the
human basis and the judge basis side by side, with their numbers formatted and every text escaped."""

from __future__ import annotations

import re
from functools import cache
from html import unescape

import pytest

from pairjudge.schemas.scores import ScoreSnapshot
from pairjudge.streams.audit.report import parse_audit_events, render_report, scoreboard_section
from pairjudge.streams.review.auth import User
from pairjudge.streams.review.views import score_boards, templates
from pairjudge.streams.scores.charts import win_rate_chart
from pairjudge.streams.scores.view import NO_HUMAN_BASIS, board_view
from tests.fixtures.scoreboard import biased_judge_snapshots, old_snapshot

HOSTILE = '<script>alert(1)</script><img src=x onerror="alert(2)">'


@cache
def _biased() -> ScoreSnapshot:
    return biased_judge_snapshots("exp-bias", steps=12)[-1]


def _page(*snaps: ScoreSnapshot) -> str:
    template = templates().env.get_template("scores.html")
    return template.render(
        user=User("ana", "reviewer", "x"), csrf="token", boards=score_boards({s.experiment: s for s in snaps})
    )


def _text(page: str) -> str:
    """The page's text, roughly as a reader sees it (tags dropped, whitespace folded)."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_the_realistic_experiment_has_the_judge_promoting_and_people_continuing() -> None:
    snap = _biased()
    assert snap.gate.decision == "promote"
    assert snap.human_gate is not None
    assert snap.human_gate.decision == "continue"
    assert snap.human_basis is not None
    assert snap.human_basis.pending > 0
    assert snap.human_basis.expired > 0


def test_the_view_formats_both_bases_and_puts_the_human_basis_first() -> None:
    snap = _biased()
    h, g = snap.human_basis, snap.human_gate
    assert h is not None
    assert g is not None
    assert h.rate is not None
    v = board_view(snap)
    assert v.human.headline == f"{100 * h.rate:.1f}%"
    assert h.labels >= g.min_labels
    figures = {f.label: f.value for f in v.human.figures}
    assert figures["95% interval, right whenever it is read (the gate reads it)"] == (
        f"{100 * (h.anytime_low or 0):.1f}% to {100 * (h.anytime_high or 0):.1f}%"
    )
    assert figures["95% interval for a single look"] == f"{100 * (h.low or 0):.1f}% to {100 * (h.high or 0):.1f}%"
    assert figures["labels it rests on"] == f"{h.labels:,} labels from people, over {h.pairs:,} pairs"
    assert figures["labels still to come"] == (
        f"{h.pending} random checks waiting, {h.expired} random checks never labelled"
    )
    assert figures["the judge on the same pairs"].startswith(f"{100 * (h.judge_rate or 0):.1f}%")
    assert v.human.gate is not None
    assert g.labels_needed is not None
    assert v.human.gate.text == f"continue: about {g.labels_needed:,} more labels expected to be needed"
    assert v.judge.gate is not None
    assert v.judge.gate.text == ("promote: the judge's verdicts give enough evidence that the challenger is better")
    assert v.judge.headline == f"{100 * (snap.overall.win_rate or 0):.1f}%"
    names = [r.name for r in v.splits]
    assert names == ["all pairs", "rubric head_to_head", "rubric tone_style", "traffic live", "traffic shadow"]
    assert v.as_of == f"as of {snap.updated_at:%H:%M:%S} UTC, {h.labels:,} labels from people"
    assert all(r.human_rate.endswith("%") and r.judge_rate.endswith("%)") for r in v.splits)
    assert [s.stratum for s in v.strata] == ["confident", "review", "uncertain"]


def test_the_page_shows_both_bases_side_by_side_with_the_human_basis_first() -> None:
    page = _page(_biased())
    text = _text(page)
    assert page.index('id="human-basis"') < page.index('id="judge-basis"')
    assert "Measured against people" in text
    assert "Measured against the judge" in text
    assert "what pairjudge gate decides on by default" in text
    assert "a tie counts half" in text
    assert re.search(r"Gate: CONTINUE · about [\d,]+ more labels expected to be needed", text)
    assert "Gate: PROMOTE · the judge's verdicts give enough evidence" in text
    assert re.search(r"right whenever it is read \(the gate reads it\) \d+\.\d% to \d+\.\d%", text)
    assert re.search(r"labels still to come \d+ random checks waiting", text)
    assert 'href="/glossary#measured-against-people"' in page
    # No raw e-value, nothing in scientific notation.
    assert not re.search(r"\d[eE][+-]?\d", text)
    assert "e-value" not in text
    assert "rubric tone_style" in text
    assert "traffic shadow" in text
    # The chart draws both bases, with a legend.
    assert page.count('class="human-rate"') == 1
    assert page.count('class="rate"') == 1
    assert "measured against people (95%)" in page
    assert "measured against the judge (95%)" in page
    assert "<script>" not in page.split("</head>")[1]


def test_a_hostile_experiment_name_is_text_on_the_page_and_in_the_report() -> None:
    snap = _biased().model_copy(update={"experiment": HOSTILE})
    for html in (_page(snap), scoreboard_section(snap)):
        assert HOSTILE not in html
        assert "<img" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_an_old_snapshot_without_the_human_basis_renders_the_judge_basis_and_says_so() -> None:
    old = old_snapshot(_biased())
    assert old.human_basis is None
    assert old.human_gate is None
    assert all(p.human_rate is None for p in old.history)
    v = board_view(old)
    assert v.human.missing == NO_HUMAN_BASIS
    assert v.splits[0].human_rate == "–"
    text = _text(_page(old))
    assert "published before this measure existed" in text
    assert "Gate: not in this snapshot." in text
    assert "Gate: PROMOTE" in text
    chart = win_rate_chart(old.history)
    assert 'class="human-rate"' not in chart
    assert "against people" not in chart
    section = _text(scoreboard_section(old))
    assert "published before this measure existed" in section
    assert "Gate: PROMOTE" in section


def test_a_new_experiment_without_labels_says_what_the_human_gate_needs() -> None:
    snap = biased_judge_snapshots("exp-new", steps=1, pairs_per_step=20)[0]
    v = board_view(snap)
    assert snap.human_gate is not None
    assert v.human.headline == "–"
    assert v.human.headline_note == f"not enough labels yet: 0 of the {snap.human_gate.min_labels} needed"
    assert v.human.gate is not None
    assert v.human.gate.text == f"continue: not enough labels yet: 0 of the {snap.human_gate.min_labels} needed"
    assert "against people: not enough labels yet" in win_rate_chart(snap.history)
    _page(snap)  # renders


def test_the_report_shows_both_bases_side_by_side() -> None:
    snaps = biased_judge_snapshots("exp-report", steps=6)
    page = render_report(parse_audit_events(s.model_dump_json() for s in snaps))
    text = _text(page)
    assert page.count("Champion and challenger: experiment exp-report") == 1
    assert page.index("basis-human") < page.index("basis-judge")
    assert re.search(r"Gate: CONTINUE · (about [\d,]+ more labels expected|not enough labels yet)", text)
    assert "Gate: PROMOTE" in text
    assert "the judge, same pairs" in text
    assert "95% interval" in text
    assert "win rate (95% interval)" in text
    assert 'class="human-rate"' in page
    assert "<script" not in page


@pytest.mark.parametrize("steps", [1, 12])
def test_the_page_and_the_report_agree_on_the_headline_numbers(steps: int) -> None:
    snap = biased_judge_snapshots("exp-agree", steps=steps)[-1]
    v = board_view(snap)
    page, section = _text(_page(snap)), _text(scoreboard_section(snap))
    for value in (v.human.headline, v.judge.headline, *(f.value for f in v.human.figures)):
        assert value in page
        assert value in section
