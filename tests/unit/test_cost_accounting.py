"""Cost and cache-hit accounting through the core: calls -> orderings -> verdicts, re-asks included.

Every scripted reply carries a distinct power-of-two cost, so a total that left out (or counted twice)
any one call cannot come out right by accident.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from pairjudge.agents.core import judge_pair, resolve_tiebreak
from pairjudge.agents.cost import event_cost, total_usd
from pairjudge.agents.errors import JudgeUnavailable
from pairjudge.agents.judge import JudgeRequest, JudgeResponse
from pairjudge.agents.policy import Policy
from pairjudge.agents.scripted import Answer, ScriptedJudge
from pairjudge.schemas import CandidatePair, PairVerdict, ReviewRequest, TieBreakRequest
from tests.unit.factories import FIRST_ID, SECOND_ID, make_pair, tiebreak_reply, tone_reply

ALL_A = {"safety": "A", "instruction_adherence": "A", "conciseness": "A", "readability": "A"}
ALL_B = {"safety": "B", "instruction_adherence": "B", "conciseness": "B", "readability": "B"}


def priced(text: str, cost: float | None, *, cached: bool = False) -> JudgeResponse:
    return JudgeResponse(text=text, model="judge-m", input_tokens=100, output_tokens=20, cost_usd=cost, cached=cached)


def by_order(pair: CandidatePair, ab: Sequence[Answer], ba: Sequence[Answer]) -> Callable[[JudgeRequest], Answer]:
    queues = {"AB": list(ab), "BA": list(ba)}

    def answer(request: JudgeRequest) -> Answer:
        queue = queues[request.order]
        assert queue, f"no scripted answer left for {request.order}"
        return queue.pop(0)

    return answer


def test_a_total_is_the_exact_sum_or_unknown() -> None:
    assert total_usd([0.25, 0.5]) == 0.75
    assert total_usd([0.0]) == 0.0  # known and free (a cache hit), not unknown
    assert total_usd([]) == 0.0  # nothing billed costs nothing
    assert event_cost([]) is None  # an event records no cost when nothing was billed
    # A partial sum is never passed off as the total.
    assert total_usd([0.25, None]) is None
    assert event_cost([0.25, None]) is None
    assert total_usd([0.1] * 10) == 1.0  # exact: a running sum would give 0.9999999999999999


async def test_reasks_are_included_in_the_ordering_and_verdict_cost() -> None:
    pair = make_pair()
    judge = ScriptedJudge(
        by_order(
            pair,
            # AB: an invalid reply, re-asked, then a valid one; both were billed.
            [priced("Sure! here it is", 0.5), priced(tone_reply("A"), 0.25)],
            [priced(tone_reply("B"), 0.125)],
        )
    )
    decision = await judge_pair(pair, judge, Policy())
    out = decision.outcome
    assert isinstance(out, PairVerdict)
    ab, ba = out.orderings
    assert ab.retries == 1
    assert ab.cost_usd == pytest.approx(0.75)
    assert ba.cost_usd == pytest.approx(0.125)
    assert out.cost_usd == pytest.approx(0.875)
    assert sorted(c.cost_usd or 0.0 for c in decision.calls) == [0.125, 0.25, 0.5]
    assert (ab.cache_hits, ba.cache_hits) == (0, 0)


async def test_tiebreak_verdict_sums_primary_and_tiebreak_calls_with_forced_choice() -> None:
    pair = make_pair()
    # Primary: both orders pick position A -> a flip -> tie-break request.
    primary_judge = ScriptedJudge(
        by_order(pair, [priced(tone_reply("A"), 1.0)], [priced(tone_reply("A"), 2.0)]),
    )
    primary = await judge_pair(pair, primary_judge, Policy())
    request = primary.outcome
    assert isinstance(request, TieBreakRequest)
    assert [o.cost_usd for o in request.primary] == [1.0, 2.0]

    # Tie-break, AB: a low-confidence reply (forced-choice re-ask) whose re-ask is first off-schema
    # (a schema re-ask) and then settles. BA settles at once. Both choose the second candidate.
    tiebreak_judge = ScriptedJudge(
        by_order(
            pair,
            [
                priced(tiebreak_reply(ALL_B, confidence=0.4), 0.5),
                priced('{"winner": "B"}', 0.25),
                priced(tiebreak_reply(ALL_B, confidence=0.9), 0.125),
            ],
            [priced(tiebreak_reply(ALL_A, confidence=0.9), 0.0625)],
        )
    )
    final = await resolve_tiebreak(request, tiebreak_judge, Policy())
    out = final.outcome
    assert isinstance(out, PairVerdict)
    assert (out.decided_by, out.winner) == ("tiebreak", SECOND_ID)
    tb_ab, tb_ba = out.orderings[2:]
    assert tb_ab.forced_choice
    assert tb_ab.retries == 2  # the forced-choice re-ask and one schema re-ask
    assert tb_ab.cost_usd == pytest.approx(0.875)
    assert tb_ba.cost_usd == pytest.approx(0.0625)
    assert out.cost_usd == pytest.approx(1.0 + 2.0 + 0.875 + 0.0625)


async def test_unpriced_model_gives_unknown_cost_not_zero() -> None:
    pair = make_pair()
    judge = ScriptedJudge(by_order(pair, [tone_reply("A")], [tone_reply("B")]))  # no cost on any reply
    out = (await judge_pair(pair, judge, Policy())).outcome
    assert isinstance(out, PairVerdict)
    assert out.cost_usd is None
    assert all(o.cost_usd is None for o in out.orderings)


async def test_cache_hits_are_counted_and_cost_zero_but_do_not_hide_an_unknown_price() -> None:
    pair = make_pair()
    judge = ScriptedJudge(
        by_order(pair, [priced(tone_reply("A"), 0.0, cached=True)], [priced(tone_reply("B"), None)]),
    )
    out = (await judge_pair(pair, judge, Policy())).outcome
    assert isinstance(out, PairVerdict)
    ab, ba = out.orderings
    assert (ab.cache_hits, ab.cost_usd) == (1, 0.0)
    assert (ba.cache_hits, ba.cost_usd) == (0, None)
    # One fresh call had no price, so the verdict's cost is unknown, not the cached 0.0.
    assert out.cost_usd is None


async def test_a_call_that_raised_is_not_billed() -> None:
    pair = make_pair()
    judge = ScriptedJudge(by_order(pair, [JudgeUnavailable("connect refused")], [priced(tone_reply("B"), 0.5)]))
    decision = await judge_pair(pair, judge, Policy())
    out = decision.outcome
    assert isinstance(out, ReviewRequest)
    ab, ba = out.orderings
    assert ab.cost_usd is None  # no reply, nothing to price
    assert ba.cost_usd == 0.5
    failed = next(c for c in decision.calls if c.order == "AB")
    assert (failed.cost_usd, failed.cached) == (None, False)


async def test_scripted_cost_applies_to_text_answers() -> None:
    pair = make_pair()
    judge = ScriptedJudge(by_order(pair, [tone_reply("A")], [tone_reply("B")]), cost_usd=0.5)
    out = (await judge_pair(pair, judge, Policy())).outcome
    assert isinstance(out, PairVerdict)
    assert out.winner == FIRST_ID
    assert out.cost_usd == 1.0
