"""The judge cascade (agents.cascade, issue 28): tiers cheap to strong, each deciding only where it is sure."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from pairjudge.agents.audit import record_for
from pairjudge.agents.audit.join import JoinEntry, on_record
from pairjudge.agents.cascade import Cascade, Tier, passes_on
from pairjudge.agents.core import judge_pair, resolve_tiebreak
from pairjudge.agents.errors import JudgeUnavailable
from pairjudge.agents.policy import Policy
from pairjudge.agents.scores.board import Scoreboard
from pairjudge.agents.scores.events import score_event
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.agents.truth_table import Reconciliation
from pairjudge.schemas import AuditSeries, CandidatePair, PairVerdict, ReviewRequest, TieBreakRequest
from pairjudge.schemas.scores import ScoreSnapshot
from pairjudge.streams.audit.report import spend_table
from pairjudge.streams.config.oversight import ScoreSettings
from pairjudge.streams.scores.handlers import Entry, count, snapshot
from tests.unit.factories import (
    FIRST_ID,
    SECOND_ID,
    Answer,
    h2h_reply,
    h2h_rubric,
    make_pair,
    per_order,
    tiebreak_reply,
)

X, Y = FIRST_ID, SECOND_ID
BAD = '{"winner": "A"'  # never validates


def _pair(**overrides: Any) -> CandidatePair:
    return make_pair(rubric=h2h_rubric(), **overrides)


def _judge(pair: CandidatePair, ab: Answer, ba: Answer, model: str, cost: float = 0.001) -> ScriptedJudge:
    return ScriptedJudge(per_order(pair, ab, ba), model=model, latency_s=0.01, cost_usd=cost)


def sure(pair: CandidatePair, model: str, who: str = X, conf: float = 0.95, cost: float = 0.001) -> ScriptedJudge:
    """Consistent for ``who`` in both orders with confidence ``conf``."""
    ab, ba = ("A", "B") if who == X else ("B", "A")
    return _judge(pair, h2h_reply(ab, conf), h2h_reply(ba, conf), model, cost)


def flipping(pair: CandidatePair, model: str) -> ScriptedJudge:
    return _judge(pair, h2h_reply("A", 0.9), h2h_reply("A", 0.9), model)


def cascade(*tiers: tuple[str, ScriptedJudge] | tuple[str, ScriptedJudge, float]) -> Cascade:
    return Cascade(tuple(Tier(t[0], (t[1],), *(t[2:])) for t in tiers))


async def test_a_confident_cheap_tier_decides_and_the_strong_one_is_never_asked() -> None:
    pair = _pair()
    cheap, strong = sure(pair, "small"), sure(pair, "frontier", who=Y)
    decision = await judge_pair(pair, cascade(("cheap", cheap), ("strong", strong)), Policy())
    assert isinstance(decision.outcome, PairVerdict)
    assert decision.outcome.winner == X
    assert decision.outcome.judge.tier == "cheap"
    assert decision.outcome.judge.model == "small"
    assert (cheap.calls, strong.calls) == (2, 0)
    assert decision.facts.tier == "cheap"
    assert decision.facts.escalated_from == ()
    assert {c.tier for c in decision.calls} == {"cheap"}


async def test_a_flip_passes_the_pair_on_and_the_strong_tier_decides_with_every_call_counted() -> None:
    pair = _pair()
    cheap, strong = flipping(pair, "small"), sure(pair, "frontier", who=Y, cost=0.02)
    decision = await judge_pair(pair, cascade(("cheap", cheap), ("strong", strong)), Policy())
    assert isinstance(decision.outcome, PairVerdict)
    assert (decision.outcome.winner, decision.outcome.judge.tier) == (Y, "strong")
    assert (cheap.calls, strong.calls) == (2, 2)
    # Every call the pair cost, the passing tier's first, each naming its tier.
    assert [c.tier for c in decision.calls] == ["cheap", "cheap", "strong", "strong"]
    assert sum(c.cost_usd or 0 for c in decision.calls) == pytest.approx(2 * 0.001 + 2 * 0.02)
    assert decision.facts.escalated_from == ("cheap",)
    assert decision.facts.calls == 4
    # The verdict is explained by the deciding tier's orderings only.
    assert len(decision.outcome.orderings) == 2
    record = record_for(decision, pair)
    assert record is not None
    assert record.series.judge_tier == "strong"
    assert record.series.key.endswith("|tier=strong")
    assert record.escalated_from == ("cheap",)
    # The cheap tier's flip is not the strong tier's: the record is about the judgement that decided.
    assert (record.flip, record.calls) == (False, 4)


async def test_a_tier_threshold_sends_low_confidence_on_and_the_last_tier_falls_back_to_the_tiebreak() -> None:
    pair = _pair()
    cheap = sure(pair, "small", conf=0.8)  # would decide at the policy's threshold, not at its tier's 0.9
    strong = sure(pair, "frontier", conf=0.6)  # below the policy's threshold: a tie-break request
    decision = await judge_pair(pair, cascade(("cheap", cheap, 0.9), ("strong", strong)), Policy())
    assert isinstance(decision.outcome, TieBreakRequest)
    assert decision.outcome.reason == "low_confidence"
    assert decision.outcome.primary_judge.tier == "strong"
    assert decision.facts.escalated_from == ("cheap",)
    assert decision.facts.primary_threshold == Policy().primary_threshold_for("", "normal")


async def test_a_tier_threshold_only_raises_the_policys() -> None:
    pair = _pair()
    policy = Policy()
    low = policy.primary_threshold_for("", "normal") - 0.05
    cheap = sure(pair, "small", conf=low)
    strong = sure(pair, "frontier", who=Y)
    decision = await judge_pair(pair, cascade(("cheap", cheap, 0.0), ("strong", strong)), policy)
    assert decision.facts.tier == "strong", "a tier floor of 0 must not lower the policy's threshold"


async def test_each_tier_has_its_own_calibrated_threshold() -> None:
    pair = _pair()
    probe = await judge_pair(
        pair, cascade(("cheap", sure(pair, "small")), ("strong", sure(pair, "frontier"))), Policy()
    )
    assert isinstance(probe.outcome, PairVerdict)
    cheap_series = AuditSeries.for_pair(probe.outcome.judge, pair).key
    # The audit calibrated the cheap tier's series to 0.97: its 0.95 is no longer enough there.
    policy = Policy(series_thresholds={cheap_series: 0.97})
    cheap, strong = sure(pair, "small"), sure(pair, "frontier", who=Y)
    decision = await judge_pair(pair, cascade(("cheap", cheap), ("strong", strong)), policy)
    assert decision.facts.tier == "strong"
    assert decision.facts.escalated_from == ("cheap",)
    # The strong tier's series is another key: the cheap tier's calibration does not hold it back.
    assert isinstance(decision.outcome, PairVerdict)


async def test_invalid_replies_and_refusals_pass_on_but_an_outage_does_not() -> None:
    pair = _pair()
    cheap, strong = _judge(pair, BAD, BAD, "small"), sure(pair, "frontier")
    decision = await judge_pair(pair, cascade(("cheap", cheap), ("strong", strong)), Policy())
    assert decision.facts.tier == "strong"
    down = _judge(pair, JudgeUnavailable("down"), JudgeUnavailable("down"), "small")
    strong = sure(pair, "frontier")
    decision = await judge_pair(pair, cascade(("cheap", down), ("strong", strong)), Policy())
    # A cheap judge's outage must not send all its traffic to the expensive one: the edge waits and retries.
    assert isinstance(decision.outcome, ReviewRequest)
    assert decision.outcome.reason == "judge_unavailable"
    assert strong.calls == 0
    assert decision.facts.tier == "cheap"


async def test_three_tiers_walk_in_order_until_one_decides() -> None:
    pair = _pair()
    a, b, c = flipping(pair, "tiny"), sure(pair, "small", conf=0.5), sure(pair, "frontier", who=Y)
    decision = await judge_pair(pair, cascade(("t1", a), ("t2", b), ("t3", c)), Policy())
    assert decision.facts.tier == "t3"
    assert decision.facts.escalated_from == ("t1", "t2")
    assert (a.calls, b.calls, c.calls) == (2, 2, 2)


async def test_a_jury_tier_decides_by_majority_and_records_its_votes() -> None:
    pair = _pair()
    cheap = flipping(pair, "small")
    jurors = (sure(pair, "j1"), sure(pair, "j2"), flipping(pair, "j3"))
    tiers = Cascade((Tier("cheap", (cheap,)), Tier("panel", jurors)))
    decision = await judge_pair(pair, tiers, Policy())
    assert isinstance(decision.outcome, PairVerdict)
    assert decision.outcome.winner == X
    assert decision.outcome.judge.tier == "panel"
    assert decision.outcome.judge.provider == "jury"
    assert [v.abstained for v in decision.outcome.jury] == [False, False, True]
    assert decision.facts.jury_size == 3
    assert decision.facts.calls == 2 + 6
    assert decision.facts.escalated_from == ("cheap",)


async def test_rules_settle_a_pair_before_any_tier_is_asked() -> None:
    pair = _pair()
    same = pair.model_copy(
        update={
            "candidates": (
                pair.candidates[0],
                pair.candidates[1].model_copy(update={"output": pair.candidates[0].output}),
            )
        }
    )
    cheap, strong = sure(same, "small"), sure(same, "frontier")
    decision = await judge_pair(same, cascade(("cheap", cheap), ("strong", strong)), Policy())
    assert (cheap.calls, strong.calls) == (0, 0)
    assert decision.facts.decided_by == "rule"


def test_passes_on_everything_but_a_verdict_and_an_outage() -> None:
    def rec(outcome: Any, reason: Any) -> Reconciliation:
        failure = reason if reason in ("judge_rejected", "judge_unavailable") else None
        return Reconciliation(outcome, reason, None, None, consistent=False, flip=False, failure=failure)

    assert not passes_on(Reconciliation("verdict", None, X, 0.9, consistent=True, flip=False))
    assert not passes_on(rec("review", "judge_unavailable"))
    for outcome, reason in [
        ("tiebreak", "tie"),
        ("tiebreak", "low_confidence"),
        ("tiebreak", "position_inconsistent"),
        ("review", "ordering_invalid"),
        ("review", "judge_rejected"),
    ]:
        assert passes_on(rec(outcome, reason)), (outcome, reason)


def test_a_cascade_checks_its_tiers() -> None:
    judge = ScriptedJudge([])
    with pytest.raises(ValueError, match="unique"):
        Cascade((Tier("a", (judge,)), Tier("a", (judge,))))
    with pytest.raises(ValueError, match="name"):
        Tier("has space", (judge,))
    with pytest.raises(ValueError, match="needs a name"):
        Cascade((Tier("", (judge,)),))
    with pytest.raises(ValueError, match="no judge"):
        Tier("a", ())
    with pytest.raises(ValueError, match="threshold"):
        Tier("a", (judge,), 1.5)
    with pytest.raises(ValueError, match="at least one tier"):
        Cascade(())


# --- what deciding a pair cost: record, score event, scoreboard, report ----------------------------


def _spend_of(decisions: list[tuple[Any, Any]]) -> ScoreSnapshot:
    """The scoreboard snapshot after the final records of ``decisions`` ((decision, judged) pairs) are joined."""

    board, entry = Scoreboard(), JoinEntry()
    for decision, judged in decisions:
        record = record_for(decision, judged)
        assert record is not None
        entry, observations = on_record(entry, record, 0.0)
        for observation in observations:
            event = score_event(observation)
            if event is not None:
                count(board, event)
    return snapshot("exp-tone-42", Entry(board, 0), ScoreSettings(), False, datetime.now(UTC))


async def test_the_scoreboard_counts_what_each_decided_pair_cost_by_tier_and_outcome() -> None:
    pair = _pair()
    # Escalated, then decided by the strong tier: 2 cheap calls and 2 strong ones.
    cheap, strong = flipping(pair, "small"), sure(pair, "frontier", who=Y, cost=0.02)
    escalated = await judge_pair(pair, cascade(("cheap", cheap), ("strong", strong)), Policy())
    snap = _spend_of([(escalated, pair)])
    assert [(s.tier, s.outcome, s.pairs) for s in snap.spend] == [("strong", "verdict", 1)]
    assert snap.spend[0].usd == pytest.approx(0.042)
    # Undecided by both tiers: the tie-break stage's record carries the primary's spend too.
    other = _pair(pair_id="pair-0002-factory")
    cheap, strong = flipping(other, "small"), flipping(other, "frontier")
    primary = await judge_pair(other, cascade(("cheap", cheap), ("strong", strong)), Policy())
    assert isinstance(primary.outcome, TieBreakRequest)
    assert primary.outcome.primary_cost_usd == pytest.approx(0.004)
    side = {c.name: "B" for c in primary.outcome.pair.tiebreak.criteria} if primary.outcome.pair.tiebreak else None
    resolver = ScriptedJudge(
        per_order(other, tiebreak_reply(side or {"correctness": "A"}), tiebreak_reply(side or {"correctness": "B"})),
        model="resolver",
        cost_usd=0.01,
    )
    final = await resolve_tiebreak(primary.outcome, resolver, Policy())
    assert final.facts.pair_cost_usd == pytest.approx(0.004 + 0.02)
    snap = _spend_of([(primary, other), (final, primary.outcome)])
    rows = {(s.tier, s.outcome): s for s in snap.spend}
    assert len(rows) == 1
    (((tier, ended), row),) = rows.items()
    assert tier == "strong"
    assert ended in ("tiebreak verdict", "review")
    assert (row.pairs, row.unpriced_pairs) == (1, 0)
    assert row.usd == pytest.approx(0.024)
    # An unpriced judge's pair is counted apart, never as free.
    unpriced = _pair(pair_id="pair-0003-factory")
    free = ScriptedJudge(per_order(unpriced, h2h_reply("A", 0.95), h2h_reply("B", 0.95)), model="small")
    decision = await judge_pair(unpriced, cascade(("cheap", free), ("strong", sure(unpriced, "frontier"))), Policy())
    snap = _spend_of([(decision, unpriced)])
    assert [(s.pairs, s.unpriced_pairs, s.usd_per_pair) for s in snap.spend] == [(1, 1, None)]
    html_table = spend_table(snap)
    assert "cheap" in html_table
    assert "n/a" in html_table
