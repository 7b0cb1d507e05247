"""A bug on one pair is dead-lettered with an alert; a run of them, or a bug on a pair that already stopped a
worker, raises ``WorkerBroken`` (streams.worker.pipeline with streams.worker.error_budget)."""

from __future__ import annotations

import json

import pytest

from pairjudge.agents import Policy
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.live import PolicyHolder
from pairjudge.streams.judges.panel import JudgePanel
from pairjudge.streams.telemetry.tracing import Telemetry
from pairjudge.streams.worker.error_budget import ErrorBudget, WorkerBroken
from pairjudge.streams.worker.pipeline import Origin, Pipeline
from tests.unit.factories import make_pair


def broken_judge() -> ScriptedJudge:
    """A judge whose every call hits a bug (not a judge failure: an exception no judge port would raise)."""
    return ScriptedJudge(lambda _: KeyError("criteria_weights"))


def pipeline(errors: ErrorBudget | None) -> Pipeline:
    settings = Settings()
    holder = PolicyHolder(Policy(), follows_control=False)
    holder.ready.set()
    return Pipeline(
        JudgePanel.single(broken_judge()),
        holder,
        Telemetry(settings.telemetry),
        {},
        settings.max_event_bytes,
        errors=errors,
    )


def raw(i: int) -> bytes:
    return make_pair(pair_id=f"pair-{i:04d}").model_dump_json().encode()


ORIGIN = Origin(topic="p.pairs", partition=1, offset=42)


async def test_an_isolated_bug_is_dead_lettered_with_its_error_and_an_alert() -> None:
    result = await pipeline(ErrorBudget(5, 60)).on_pair(raw(1), None, ORIGIN)
    [letter] = result.outgoing
    body = json.loads(letter.value)
    assert (letter.kind, body["reason"], body["pair_id"]) == ("deadletter", "internal_error", "pair-0001")
    assert "KeyError: 'criteria_weights'" in body["error"]
    [alert] = result.alerts
    assert json.loads(alert.value)["kind"] == "internal_error"


async def test_alerts_are_throttled_but_every_bug_is_dead_lettered() -> None:
    p = pipeline(ErrorBudget(10, 60))
    results = [await p.on_pair(raw(i), None, ORIGIN) for i in range(4)]
    assert [len(r.outgoing) for r in results] == [1, 1, 1, 1]
    assert [len(r.alerts) for r in results] == [1, 0, 0, 0]


async def test_the_bug_past_the_limit_raises_and_so_does_every_later_one() -> None:
    p = pipeline(ErrorBudget(2, 60))
    for i in range(2):
        await p.on_pair(raw(i), None, ORIGIN)
    with pytest.raises(WorkerBroken, match="a run of unexpected errors: 3 unexpected errors within 60 s"):
        await p.on_pair(raw(2), None, ORIGIN)
    with pytest.raises(WorkerBroken):
        await p.on_pair(raw(3), None, ORIGIN)


async def test_a_pair_that_stopped_a_worker_before_stops_this_one_on_its_first_bug() -> None:
    with pytest.raises(WorkerBroken, match=r"p.pairs\[1\]@42 stopped a worker before and raised again"):
        await pipeline(ErrorBudget(5, 60)).handle("primary", raw(1), None, ORIGIN, after_crash=True)


async def test_without_a_budget_every_bug_is_an_outcome() -> None:
    """The in-process API (pairjudge.api) has no worker to stop: every failure is an outcome."""
    p = pipeline(None)
    results = [await p.on_pair(raw(i), None, ORIGIN) for i in range(20)]
    assert all(json.loads(r.outgoing[0].value)["reason"] == "internal_error" for r in results)


async def test_bad_input_is_never_charged_to_the_budget() -> None:
    p = pipeline(ErrorBudget(0, 60))  # the first bug would stop the worker
    result = await p.on_pair(b"{not json", None, ORIGIN)
    assert json.loads(result.outgoing[0].value)["reason"] == "malformed_json"
