"""The decision span's ``pairjudge.*`` attributes, named at the edge from the core's typed facts."""

from __future__ import annotations

from pairjudge.agents import judge_pair
from pairjudge.agents.policy import Policy
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.streams.telemetry.tracing import decision_attributes
from tests.unit.factories import make_pair, per_order, tone_reply


async def test_a_verdict_names_its_winner_and_leaves_out_what_does_not_apply() -> None:
    pair = make_pair()
    judge = ScriptedJudge(per_order(pair, tone_reply("A", 0.9), tone_reply("B", 0.9)))
    attributes = decision_attributes((await judge_pair(pair, judge, Policy())).facts)
    assert attributes["pairjudge.outcome"] == "verdict"
    assert attributes["pairjudge.winner"] == pair.candidates[0].candidate_id
    assert attributes["pairjudge.decided_by"] == "primary"
    assert (attributes["pairjudge.consistent"], attributes["pairjudge.flip"]) == (True, False)
    # No reason for a verdict, no jury for one judge, no tie-break facts in the primary stage.
    absent = {"reason", "jury_size", "jury_abstentions", "tiebreak_reason", "forced_choice", "policy_overrode"}
    assert not {f"pairjudge.{name}" for name in absent} & attributes.keys()
    assert all(key.startswith("pairjudge.") for key in attributes)


async def test_a_jury_flip_and_a_policy_override_are_named() -> None:
    pair = make_pair()
    flips = ScriptedJudge(per_order(pair, tone_reply("A", 0.9), tone_reply("A", 0.9)))
    agrees = ScriptedJudge(per_order(pair, tone_reply("A", 0.9), tone_reply("B", 0.9)))
    decision = await judge_pair(pair, [flips, agrees], Policy(tiebreak_enabled=False))
    attributes = decision_attributes(decision.facts)
    assert (attributes["pairjudge.jury_size"], attributes["pairjudge.jury_abstentions"]) == (2, 1)
    assert attributes["pairjudge.flip"] is True
    assert attributes["pairjudge.outcome"] == "review"
    assert attributes["pairjudge.reason"] == "tiebreak_disabled"
    assert attributes["pairjudge.policy_overrode"] == "tiebreak"
    assert attributes["pairjudge.decided_by"] == "human"
