"""The audit label budget at the edge (streams.audit.budget): the verdict rate, the fleet estimate, the scale."""

from __future__ import annotations

from typing import Any

import pytest

from pairjudge.agents.core import Decision, judge_pair
from pairjudge.agents.policy import Policy
from pairjudge.agents.sampling import budget_scale, expected_labels
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.streams.audit.budget import AuditBudget, VerdictRate
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.live import PolicyHolder
from pairjudge.streams.judges.panel import JudgePanel
from pairjudge.streams.telemetry.tracing import Telemetry
from pairjudge.streams.worker.pipeline import Origin, Pipeline
from tests.unit.factories import make_pair, per_order, tone_reply


def _policy(**overrides: Any) -> Policy:
    """A policy with the uncertain share these tests' arithmetic was written for (25%), whatever the default."""
    return Policy(**{"audit_uncertain_share": 0.25, **overrides})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_steady_stream_reads_as_its_rate_even_while_warming_up() -> None:
    meter = VerdictRate(600.0, now=0.0)
    for second in range(1, 121):  # 2 per second for two minutes: well inside the 10-minute window
        meter.add(float(second), 2.0)
    assert meter.rate(120.0) == pytest.approx(2.0, rel=0.02)
    for second in range(121, 3601):
        meter.add(float(second), 2.0)
    assert meter.rate(3600.0) == pytest.approx(2.0, rel=0.01)
    # Nothing more: the rate decays with the window (e^-1 after one time constant).
    assert meter.rate(4200.0) == pytest.approx(2.0 / 2.718281828, rel=0.02)


async def _verdicts(n: int, confidence: float) -> list[Decision]:
    pair = make_pair()
    judge = ScriptedJudge(per_order(pair, tone_reply("A", confidence), tone_reply("B", confidence)))
    decision = await judge_pair(pair, judge, _policy())
    return [decision] * n


async def test_the_budget_scales_the_shares_from_the_fleets_estimated_rate() -> None:
    clock = Clock()
    holder = PolicyHolder(_policy())
    budget = AuditBudget(holder, budget=400, period="hour", clock=clock)
    confident = (await _verdicts(1, 0.9))[0]
    uncertain = (await _verdicts(1, 0.75))[0]
    assert (confident.facts.sampling_class, uncertain.facts.sampling_class) == ("confident", "uncertain")
    for _ in range(600):  # ten minutes, one confident verdict a second and one uncertain every 5 s
        clock.now += 1.0
        budget.observe(confident)
        if int(clock.now) % 5 == 0:
            budget.observe(uncertain)
    # This worker owns 2 of 8 input partitions: the fleet decides about four times as much.
    verdicts = budget.fleet_verdicts_per_period(2, 8)
    assert verdicts["confident"] == pytest.approx(4 * 3600, rel=0.05)
    assert verdicts["uncertain"] == pytest.approx(4 * 720, rel=0.05)
    scale = budget.update(2, 8)
    assert scale == pytest.approx(budget_scale(_policy(), verdicts, 400))
    assert holder.current.audit_scale == scale
    # About (14400 x 0.05 + 2880 x 0.25) x 1.1 = 1584 labels an hour at full shares: the scale cuts it to 400.
    assert expected_labels(holder.current, verdicts) == pytest.approx(400)
    assert scale == pytest.approx(400 / 1584, rel=0.05)


async def test_no_owned_partition_keeps_the_scale_and_other_outcomes_are_not_counted() -> None:
    clock = Clock()
    holder = PolicyHolder(_policy())
    budget = AuditBudget(holder, budget=1, period="day", clock=clock)
    pair = make_pair()
    tiebreak = await judge_pair(pair, ScriptedJudge(per_order(pair, tone_reply("A"), tone_reply("A"))), _policy())
    for _ in range(100):
        clock.now += 1.0
        budget.observe(tiebreak)  # a tie-break request costs no audit label
    assert budget.fleet_verdicts_per_period(1, 1) == {"confident": 0.0, "uncertain": 0.0}
    assert budget.update(1, 1) == 1.0
    holder.set_audit_scale(0.5)
    assert budget.update(0, 8) == 0.5


async def test_the_pipeline_tells_the_budget_of_each_fresh_decision() -> None:
    pair = make_pair()
    judge = ScriptedJudge(per_order(pair, tone_reply("A", 0.9), tone_reply("B", 0.9)))
    settings = Settings()
    seen: list[Decision] = []
    pipeline = Pipeline(
        JudgePanel.single(judge),
        PolicyHolder(_policy()),
        Telemetry(settings.telemetry),
        {},
        1 << 20,
        on_decision=seen.append,
    )
    await pipeline.on_pair(pair.model_dump_json().encode(), None, Origin())
    assert [d.facts.sampling_class for d in seen] == ["confident"]
