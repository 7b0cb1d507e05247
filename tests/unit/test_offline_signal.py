"""The offline judge decides only on what it measures, and its new measures behave as documented."""

from __future__ import annotations

import itertools

import pytest

from pairjudge.agents.core import judge_pair, resolve_tiebreak
from pairjudge.agents.offline import OfflineJudge
from pairjudge.agents.offline.calibration import TONE_KNOTS, interpolate, tone_confidence
from pairjudge.agents.offline.features import careless_orthography, deixis_balance, politeness, profile, register
from pairjudge.agents.policy import Policy
from pairjudge.schemas import Criterion, HeadToHeadRubric, ReviewRequest, TieBreakRequest
from tests.unit.factories import make_pair

SHORT = "Yes. Reset it from the settings page."
LONG = (
    "Yes, you can reset it. Open the settings page, choose the security tab, and press the reset button. "
    "You will receive an email with a link; follow it within an hour and choose a new password."
)


async def test_helpfulness_pairs_escalate_with_no_signal_in_primary_and_tiebreak() -> None:
    rubric = HeadToHeadRubric(
        criteria=(Criterion(name="helpfulness"), Criterion(name="correctness"), Criterion(name="conciseness"))
    )
    for outputs in ((SHORT, LONG), (LONG, SHORT)):
        pair = make_pair(outputs=outputs, rubric=rubric)
        decision = await judge_pair(pair, OfflineJudge(), Policy())
        request = decision.outcome
        assert isinstance(request, TieBreakRequest)
        assert request.reason == "tie"
        assert all("No signal" in (o.justification or "") for o in request.primary)
        final = (await resolve_tiebreak(request, OfflineJudge(), Policy())).outcome
        assert isinstance(final, ReviewRequest)
        assert final.reason == "tiebreak_no_signal"
        assert "no signal" in (final.orderings[-1].justification or "")
        assert "Only a length difference" in (final.orderings[-1].justification or "")


async def test_a_stated_word_limit_makes_length_evidence() -> None:
    rubric = HeadToHeadRubric(criteria=(Criterion(name="conciseness"),), constraints="Answer in at most 10 words.")
    pair = make_pair(outputs=(SHORT, LONG), rubric=rubric)
    decision = await judge_pair(pair, OfflineJudge(), Policy())
    assert decision.facts.outcome == "verdict"
    assert decision.facts.winner == pair.candidates[0].candidate_id


def test_careless_orthography_reads_case_and_punctuation() -> None:
    assert careless_orthography("In that case, you should take some defense classes.") == 0.0
    assert careless_orthography("in that case something mark") > 0.5
    assert careless_orthography("i dunno!!! maybe") > 0.5
    garbled, fluent = (
        register("in that case something mark."),
        register("In that case, you should take some defense classes."),
    )
    assert garbled.formality < fluent.formality


def test_deixis_does_not_grow_with_length() -> None:
    one = "The report of the committee on the budget was published in March."
    assert deixis_balance(one) > 0.3
    assert deixis_balance("oh yeah I know, you and me, we did it there") < -0.3
    assert deixis_balance(" ".join([one] * 5)) == pytest.approx(deixis_balance(one), abs=0.35)


def test_politeness_follows_the_published_strategies() -> None:
    polite = "Hi, thanks for the edit! Could you perhaps add a source when you have a moment?"
    blunt = "Why did you delete it? You obviously didn't read the talk page."
    assert politeness(polite) > 0.5
    assert politeness(blunt) < -0.5


def test_calibration_is_monotone_and_within_the_band() -> None:
    assert all(a[0] <= b[0] and a[1] <= b[1] for a, b in itertools.pairwise(TONE_KNOTS))
    values = [tone_confidence(m / 10) for m in range(0, 41)]
    assert values == sorted(values)
    assert values[0] == 0.5
    assert all(0.5 <= v <= 0.95 for v in values)
    assert interpolate(((0.0, 0.5), (1.0, 0.9)), 0.5) == pytest.approx(0.7)


def test_a_profile_is_measured_once_per_text() -> None:
    text = "A sentence measured once. " * 30
    assert profile(text) is profile(text)
    assert profile(text + " ") is not profile(text)
