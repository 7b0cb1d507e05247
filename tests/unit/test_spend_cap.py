"""The spending caps (agents.spend, streams.worker.spend): the ledger, the live settings and the gate."""

from __future__ import annotations

import asyncio
import statistics
import time

import pytest

from pairjudge.agents.policy import Policy
from pairjudge.agents.sampling import still_sampled
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.agents.spend import SpendCaps, SpendLedger, hour_of
from pairjudge.schemas import ControlUpdate, DeadLetter, PairVerdict, ReviewRequest
from pairjudge.schemas.audit import Alert
from pairjudge.schemas.events import SpendReport
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.live import PolicyHolder, parse_value
from pairjudge.streams.judges.panel import JudgePanel
from pairjudge.streams.kafka.codecs import encode
from pairjudge.streams.telemetry.tracing import Telemetry
from pairjudge.streams.worker import spend as spend_module
from pairjudge.streams.worker.pipeline import Origin, Pipeline, StageResult
from pairjudge.streams.worker.spend import SpendTracker
from tests.unit.factories import make_pair, per_order, tone_reply

HOUR = 490_000  # some hour since the epoch


def test_the_ledger_sums_every_worker_and_never_counts_a_report_twice() -> None:
    ledger = SpendLedger()
    ledger.add("me", HOUR, "exp-a", 1.0)
    ledger.add("me", HOUR, None, 0.5)
    ledger.set_worker("other", HOUR, {"exp-a": 2.0})
    ledger.set_worker("other", HOUR, {"exp-a": 3.0})  # its later total replaces the earlier one
    assert ledger.spent(HOUR) == pytest.approx(4.5)
    assert ledger.spent(HOUR, "exp-a") == pytest.approx(4.0)
    assert ledger.spent(HOUR + 1) == 0.0
    # Two hours on, the old hour is forgotten.
    ledger.add("me", HOUR + 2, "exp-a", 0.1)
    assert HOUR not in ledger.hours


def test_the_overall_cap_is_checked_first_then_the_experiments() -> None:
    ledger = SpendLedger()
    ledger.add("me", HOUR, "exp-a", 6.0)
    ledger.add("me", HOUR, "exp-b", 1.0)
    caps = SpendCaps(hourly_usd=10.0, experiment_hourly_usd=5.0)
    over = ledger.reached(caps, HOUR, "exp-a")
    assert over is not None
    assert (over.scope, over.spent_usd, over.cap_usd) == ("exp-a", 6.0, 5.0)
    assert ledger.reached(caps, HOUR, "exp-b") is None
    assert ledger.reached(caps, HOUR, None) is None  # no experiment: only the overall cap applies
    ledger.add("me", HOUR, "exp-b", 3.0)
    over = ledger.reached(caps, HOUR, "exp-b")
    assert over is not None
    assert over.scope == "all"
    assert ledger.reached(caps, HOUR + 1, "exp-a") is None  # a new hour, a new budget
    assert ledger.reached(SpendCaps(), HOUR, "exp-a") is None  # no caps


def test_the_sample_share_is_stable_per_pair_and_close_to_the_share() -> None:
    ids = [f"pair-{i}" for i in range(20_000)]
    kept = [still_sampled(i, 0.1) for i in ids]
    share = statistics.fmean(kept)
    # Binomial(20,000, 0.1): sd 0.0021; 5 sd either side.
    assert 0.0894 < share < 0.1106
    assert kept == [still_sampled(i, 0.1) for i in ids]
    assert all(still_sampled(i, 1.0) for i in ids[:100])
    assert not any(still_sampled(i, 0.0) for i in ids[:100])


def test_the_caps_are_live_settings_checked_like_the_rest() -> None:
    policy = Policy()
    policy = policy.apply(ControlUpdate(key="spend_hourly_cap_usd", value=12.5))
    policy = policy.apply(ControlUpdate(key="spend_action", value="queue"))
    assert policy.spend_caps() == SpendCaps(hourly_usd=12.5, action="queue")
    with pytest.raises(ValueError, match="one of"):
        policy.apply(ControlUpdate(key="spend_action", value="drop"))
    with pytest.raises(ValueError, match="negative"):
        policy.apply(ControlUpdate(key="spend_hourly_cap_usd", value=-1))
    with pytest.raises(ValueError, match="number"):
        policy.apply(ControlUpdate(key="spend_hourly_cap_usd", value="ten"))
    with pytest.raises(ValueError, match="spend_sample_share"):
        policy.apply(ControlUpdate(key="spend_sample_share", value=1.5))
    assert parse_value("spend_action", " Sample ") == "sample"
    with pytest.raises(ValueError, match="one of"):
        parse_value("spend_action", "later")
    # The configured caps come from [policy].
    settings = Settings(policy={"spend_experiment_hourly_cap_usd": 3, "spend_action": "sample"})
    assert settings.policy.to_policy().spend_caps() == SpendCaps(experiment_hourly_usd=3.0, action="sample")


def test_the_tracker_reports_its_own_totals_and_takes_in_the_others() -> None:
    now = [HOUR * 3600.0 + 10]
    me, other = SpendTracker(clock=lambda: now[0], worker="me"), SpendTracker(clock=lambda: now[0], worker="other")
    me.record("exp-a", 0.25)
    me.record("exp-a", 0.25)
    me.record(None, None)  # unpriced: nothing to add
    (report,) = me.reports()
    assert report.kind == "spend"
    assert report.key == f"me|{HOUR}".encode()
    assert me.reports() == []  # nothing changed since
    other.take_in(report.value)
    other.take_in(report.value)  # read twice (a restart): still counted once
    me.take_in(report.value)  # its own: already counted
    assert other.ledger.spent(HOUR) == me.ledger.spent(HOUR) == pytest.approx(0.5)
    # A failed report is sent again.
    me.record("exp-a", 1.0)
    failed = me.reports()
    me.not_reported(failed)
    assert [r.key for r in me.reports()] == [f"me|{HOUR}".encode()]
    # Two hours on, the old hour's key is emptied (compaction keeps only that); the followers skip it.
    now[0] += 2 * 3600
    me.record("exp-a", 0.1)
    keys = {r.key: r.value for r in me.reports()}
    assert keys[f"me|{HOUR}".encode()] == b""
    other.take_in(None)
    assert other.ledger.spent(HOUR) == pytest.approx(0.5)
    assert SpendReport.model_validate_json(keys[f"me|{HOUR + 2}".encode()]).by_experiment == {"exp-a": 0.1}


# --- the gate, in the primary stage -----------------------------------------------------------------


def _pipeline(policy: Policy, judge: ScriptedJudge, tracker: SpendTracker) -> Pipeline:
    settings = Settings()
    return Pipeline(
        JudgePanel.single(judge), PolicyHolder(policy), Telemetry(settings.telemetry), {}, 256_000, spend=tracker
    )


def _consistent(pair_id: str = "pair-0001-factory") -> tuple[bytes, ScriptedJudge]:
    pair = make_pair(pair_id=pair_id)
    judge = ScriptedJudge(per_order(pair, tone_reply(winner="A"), tone_reply(winner="B")), model="judge", cost_usd=0.3)
    return pair.model_dump_json().encode(), judge


def _kinds(result: StageResult) -> list[str]:
    return [m.kind for m in result.outgoing]


async def test_under_the_cap_pairs_are_judged_and_their_spend_counted_until_the_cap_is_met() -> None:
    raw, judge = _consistent()
    tracker = SpendTracker(worker="me")
    pipeline = _pipeline(Policy(spend_hourly_cap_usd=0.5), judge, tracker)
    first = await pipeline.handle("primary", raw, None, Origin("pairs", 0, 1))
    assert "verdicts" in _kinds(first)
    assert tracker.ledger.spent(hour_of(time.time())) == pytest.approx(0.6)
    # 0.6 spent, over 0.5: the next pair meets the action ("review" by default), with no judge call.
    raw2, judge2 = _consistent("pair-0002-factory")
    pipeline._panel = JudgePanel.single(judge2).traced(pipeline.telemetry)
    second = await pipeline.handle("primary", raw2, None, Origin("pairs", 0, 2))
    review = ReviewRequest.model_validate_json(next(m.value for m in second.outgoing if m.kind == "review"))
    assert review.reason == "spend_capped"
    assert judge2.calls == 0
    (alert,) = [Alert.model_validate_json(a.value) for a in second.alerts]
    assert (alert.kind, alert.series) == ("spend_cap", "spend:all")
    assert "0.6000 USD" in alert.message


async def test_the_sample_action_judges_a_stable_share_and_sets_the_rest_aside_with_their_bytes() -> None:
    tracker = SpendTracker(worker="me")
    tracker.ledger.add("other", hour_of(time.time()), "exp-tone-42", 10.0)
    outcomes: dict[str, list[str]] = {}
    for i in range(40):
        raw, judge = _consistent(f"pair-{i:04d}-sampled")
        policy = Policy(spend_experiment_hourly_cap_usd=5.0, spend_action="sample", spend_sample_share=0.25)
        result = await _pipeline(policy, judge, tracker).handle("primary", raw, None, Origin("pairs", 0, i))
        outcomes[f"pair-{i:04d}-sampled"] = _kinds(result)
        if "deadletter" in _kinds(result):
            letter = DeadLetter.model_validate_json(result.outgoing[0].value)
            assert letter.reason == "spend_capped"
            assert letter.original == raw
            assert judge.calls == 0
    judged = [p for p, kinds in outcomes.items() if "verdicts" in kinds]
    assert judged == [p for p in outcomes if still_sampled(p, 0.25)]
    assert 0 < len(judged) < 40


async def test_the_queue_action_waits_until_the_cap_is_raised_live() -> None:
    raw, judge = _consistent()
    tracker = SpendTracker(worker="me")
    tracker.ledger.add("other", hour_of(time.time()), None, 2.0)
    holder = PolicyHolder(Policy(spend_hourly_cap_usd=1.0, spend_action="queue"))
    pipeline = _pipeline(holder.current, judge, tracker)
    pipeline.policy = holder
    spend_module.RECHECK_S = 0.01
    try:
        waiting = asyncio.create_task(pipeline.handle("primary", raw, None, Origin("pairs", 0, 1)))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        assert judge.calls == 0
        holder.apply(ControlUpdate(key="spend_hourly_cap_usd", value=100.0))
        result = await asyncio.wait_for(waiting, 5)
    finally:
        spend_module.RECHECK_S = 1.0
    verdict = PairVerdict.model_validate_json(next(m.value for m in result.outgoing if m.kind == "verdicts"))
    assert verdict.decided_by == "primary"
    assert [Alert.model_validate_json(a.value).kind for a in result.alerts] == ["spend_cap"]


def test_a_spend_report_round_trips() -> None:
    report = SpendReport(worker="w", hour=HOUR, by_experiment={"-": 1.5})
    assert SpendReport.model_validate_json(encode(report)) == report


async def test_a_starting_worker_gates_no_pair_before_it_has_read_the_spend_topic() -> None:
    raw, judge = _consistent()
    tracker = SpendTracker(worker="me", follows_topic=True)
    pipeline = _pipeline(Policy(spend_hourly_cap_usd=1.0), judge, tracker)
    waiting = asyncio.create_task(pipeline.handle("primary", raw, None, Origin("pairs", 0, 1)))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    assert judge.calls == 0
    # The topic, read up to date: an earlier run of this worker had spent the hour's budget.
    earlier = SpendReport(worker="me-before-a-crash", hour=hour_of(time.time()), by_experiment={"-": 5.0})
    tracker.take_in(encode(earlier))
    tracker.caught_up.set()
    result = await asyncio.wait_for(waiting, 5)
    review = ReviewRequest.model_validate_json(next(m.value for m in result.outgoing if m.kind == "review"))
    assert review.reason == "spend_capped"
    assert judge.calls == 0


async def test_a_decision_with_an_unpriced_call_still_counts_its_priced_calls() -> None:
    # A jury of a priced judge (0.3 a call) and an unpriced one: the decision's cost is unknown (None on its
    # record, never a partial sum), but the cap counts what is known to be spent (0.6), never less.
    pair = make_pair()
    priced = ScriptedJudge(per_order(pair, tone_reply(winner="A"), tone_reply(winner="B")), model="p", cost_usd=0.3)
    unpriced = ScriptedJudge(per_order(pair, tone_reply(winner="A"), tone_reply(winner="B")), model="u")
    tracker = SpendTracker(worker="me")
    settings = Settings()
    pipeline = Pipeline(
        JudgePanel(primary=(priced, unpriced), tiebreak=priced),
        PolicyHolder(Policy(spend_hourly_cap_usd=100.0)),
        Telemetry(settings.telemetry),
        {},
        256_000,
    )
    pipeline.spend = tracker
    result = await pipeline.handle("primary", pair.model_dump_json().encode(), None, Origin("pairs", 0, 1))
    verdict = PairVerdict.model_validate_json(next(m.value for m in result.outgoing if m.kind == "verdicts"))
    assert verdict.cost_usd is None
    assert tracker.ledger.spent(hour_of(time.time())) == pytest.approx(0.6)
