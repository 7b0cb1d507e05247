"""Pairs settled before any judge call: an empty output loses, identical or both-empty outputs tie."""

from __future__ import annotations

import pytest

from pairjudge.agents.audit import WindowStats
from pairjudge.agents.audit.records import record_for
from pairjudge.agents.core import judge_pair
from pairjudge.agents.offline import OfflineJudge
from pairjudge.agents.policy import Policy
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.agents.settle import normalized, settle
from pairjudge.schemas import TIE, PairVerdict
from pairjudge.schemas.audit import AuditObservation
from tests.unit.factories import FIRST_OUTPUT, h2h_rubric, make_pair

X, Y = make_pair().candidates[0].candidate_id, make_pair().candidates[1].candidate_id


@pytest.mark.parametrize(
    ("outputs", "winner", "rule"),
    [
        (("", FIRST_OUTPUT), Y, "empty_output"),
        ((FIRST_OUTPUT, "  \n\t "), X, "empty_output"),
        (("", "\u200b\u200b"), TIE, "both_empty"),
        ((FIRST_OUTPUT, FIRST_OUTPUT), TIE, "identical_outputs"),
        (("Same   words,\nsame order. ", " Same words, same\torder."), TIE, "identical_outputs"),
    ],
)
async def test_rule_settled_pairs_get_a_verdict_without_a_judge_call(
    outputs: tuple[str, str], winner: str, rule: str
) -> None:
    judge = ScriptedJudge([])  # any call would fail: the script is empty
    for rubric in (None, h2h_rubric()):
        pair = make_pair(outputs=outputs) if rubric is None else make_pair(outputs=outputs, rubric=rubric)
        decision = await judge_pair(pair, judge, Policy(audit_share=1.0))
        verdict = decision.outcome
        assert isinstance(verdict, PairVerdict)
        assert (verdict.winner, verdict.decided_by, verdict.confidence) == (winner, "rule", 1.0)
        assert verdict.key_differentiators == (rule,)
        assert verdict.orderings == ()
        assert (decision.calls, decision.audit_copy) == ((), None)
        assert (decision.facts.flip, decision.facts.consistent) == (False, True)
        assert judge.calls == 0
        # Says nothing about the judge: the drift audit's record is marked, and its statistics skip it.
        record = record_for(decision, pair)
        assert record is not None
        assert record.rule
        stats = WindowStats()
        stats.add(AuditObservation(kind="decision", series=record.series, record=record))
        assert stats.pairs == 0
        if winner == TIE:
            assert (verdict.loser, verdict.winner_role) == (None, None)
        else:
            assert verdict.loser is not None
            assert verdict.winner_role == pair.candidate(winner).source.role


async def test_different_texts_still_go_to_the_judge() -> None:
    pair = make_pair(outputs=("Same words.", "Same words!"))
    assert settle(pair) is None
    decision = await judge_pair(pair, OfflineJudge(), Policy())
    assert decision.facts.calls == 2


def test_normalized_collapses_whitespace_only() -> None:
    assert normalized("  a \n\n b\t") == "a b"
    assert normalized("A b") != normalized("a b")


def test_a_tie_names_no_side_and_only_a_rule_settles_one() -> None:
    base = {
        "pair_id": "p1",
        "winner": TIE,
        "winner_role": None,
        "loser": None,
        "confidence": 1.0,
        "decided_by": "rule",
        "consistent": True,
        "orderings": (),
        "justification": "identical",
        "rubric_kind": "tone_style",
        "judge": {"provider": "p", "model": "m", "prompt_template_hash": "h"},
    }
    PairVerdict.model_validate(base)
    with pytest.raises(ValueError, match="only a rule"):
        PairVerdict.model_validate({**base, "decided_by": "primary"})
    with pytest.raises(ValueError, match="no loser"):
        PairVerdict.model_validate({**base, "loser": "c2"})
    with pytest.raises(ValueError, match="needs its loser"):
        PairVerdict.model_validate({**base, "winner": "c1"})
