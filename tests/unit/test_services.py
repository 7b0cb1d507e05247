"""``build_services(settings, mode)``: the parts the worker, the Python API and the review service judge with, built
one way (issue 36, item 4)."""

from __future__ import annotations

import pytest

from pairjudge.agents.judge import JudgeRequest
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.streams.app import create_app
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.services import SpendCapUnsupported, build_services
from pairjudge.streams.worker.pipeline import Origin
from tests.unit.factories import make_pair, tone_reply


def consistent(request: JudgeRequest) -> str:
    return tone_reply(winner="A" if request.order == "AB" else "B", confidence=0.9)


async def test_the_api_judges_in_process_at_once() -> None:
    services = build_services(Settings(), "api")
    judging = services.require_judging()
    # Nothing to wait for: no control topic, no spend topic, no start-up key check, no error budget to stop on.
    assert services.policy.ready.is_set()
    assert judging.spend.caught_up.is_set()
    assert judging.judges_checked.is_set()
    assert judging.errors is None
    assert services.pipeline().spend is judging.spend
    await services.aclose()


async def test_a_worker_waits_for_its_topics_and_its_judges_check() -> None:
    services = build_services(Settings(), "worker")
    judging = services.require_judging()
    assert not services.policy.ready.is_set()  # until pairjudge.control is read up to date
    assert not judging.spend.caught_up.is_set()  # until pairjudge.spend is
    assert not judging.judges_checked.is_set()  # until the configured judges' keys are checked
    assert judging.errors is not None
    pipeline = services.pipeline()
    assert pipeline.judges_checked is judging.judges_checked
    await services.aclose(telemetry=True)
    # A judge handed in has no key to check.
    handed = build_services(Settings(), "worker", judge=ScriptedJudge(consistent))
    assert handed.require_judging().judges_checked.is_set()
    await handed.aclose()


def test_the_review_service_follows_the_live_policy_and_judges_nothing() -> None:
    services = build_services(Settings(policy={"spend_hourly_cap_usd": 2}), "review")
    assert services.judging is None
    assert not services.policy.ready.is_set()
    assert services.policy.current.spend_caps().hourly_usd == 2
    with pytest.raises(RuntimeError, match="judge nothing"):
        services.pipeline()


def test_only_the_api_refuses_a_queued_cap() -> None:
    settings = Settings(policy={"spend_hourly_cap_usd": 1, "spend_action": "queue"})
    with pytest.raises(SpendCapUnsupported):
        build_services(settings, "api")
    assert build_services(settings, "worker", judge=ScriptedJudge(consistent)).require_judging().spend is not None


async def test_a_worker_without_the_topics_still_counts_and_caps_its_own_spend() -> None:
    # Before issue 36 the spend tracker was wired only when the worker followed the control topic.
    judge = ScriptedJudge(consistent, model="priced", cost_usd=0.3)
    wired = create_app(Settings(policy={"spend_hourly_cap_usd": 0.5}), judge=judge, follow_control=False)
    try:
        first = make_pair(pair_id="pair-1").model_dump_json().encode()
        second = make_pair(pair_id="pair-2").model_dump_json().encode()
        await wired.pipeline.handle("primary", first, None, Origin("pairs", 0, 1))
        capped = await wired.pipeline.handle("primary", second, None, Origin("pairs", 0, 2))
        assert capped.outgoing[0].kind == "review"
        assert judge.calls == 2
    finally:
        await wired.aclose()
        wired.telemetry.shutdown()
