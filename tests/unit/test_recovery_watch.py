"""The stalled-recovery watch (streams.faust_compat.recovery_watch): progress arithmetic, the stall report, /livez."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from pairjudge.streams.config.settings import HealthSettings
from pairjudge.streams.faust_compat.recovery_watch import RecoveryProgress, RecoveryWatch, records_left
from pairjudge.streams.worker.health_server import HealthServer, WorkerHealth
from tests.fixtures.health import free_port


@dataclass(frozen=True)
class TP:
    topic: str
    partition: int


@dataclass
class Recovery:
    """The three members of faust's Recovery that the watch reads."""

    in_recovery: bool = False
    remaining: Counter[Any] = field(default_factory=Counter)

    def active_remaining(self) -> Counter[Any]:
        return self.remaining

    def active_remaining_total(self) -> int:
        return sum(self.remaining.values())


def test_progress_counts_only_while_recovering_with_records_left() -> None:
    progress = RecoveryProgress()
    assert progress.stalled_for(in_recovery=False, remaining=10, now=0) == 0
    assert progress.stalled_for(in_recovery=True, remaining=0, now=5) == 0
    assert progress.stalled_for(in_recovery=True, remaining=10, now=10) == 0  # first sight starts the clock
    assert progress.stalled_for(in_recovery=True, remaining=10, now=40) == 30
    assert progress.stalled_for(in_recovery=True, remaining=9, now=41) == 0  # a record read: progress
    assert progress.stalled_for(in_recovery=True, remaining=9, now=100) == 59
    # Recovery ended, then a new one (another rebalance) starts its own clock.
    assert progress.stalled_for(in_recovery=False, remaining=0, now=101) == 0
    assert progress.stalled_for(in_recovery=True, remaining=9, now=200) == 0
    assert progress.stalled_for(in_recovery=True, remaining=9, now=230) == 30


def test_the_watch_reports_a_stall_once_it_lasts_and_names_the_partitions() -> None:
    recovery = Recovery(in_recovery=True, remaining=Counter({TP("app-audit-join-changelog", 3): 12, TP("x", 1): 0}))
    watch = RecoveryWatch(recovery, stall_s=60)
    assert watch.check(0.0) is None
    assert watch.check(59.0) is None
    reason = watch.check(60.0)
    assert reason is not None
    assert "60 s" in reason
    assert "12 still to read" in reason
    assert "app-audit-join-changelog[3]" in reason
    assert "x[1]" not in reason  # nothing left there


def test_a_slow_but_moving_recovery_is_never_a_stall() -> None:
    tp = TP("app-outcomes-primary-changelog", 0)
    recovery = Recovery(in_recovery=True, remaining=Counter({tp: 100_000}))
    watch = RecoveryWatch(recovery, stall_s=60)
    for second in range(0, 600, 5):
        recovery.remaining[tp] -= 1  # one record every 5 s
        assert watch.check(float(second)) is None


def test_readiness_says_how_many_changelog_records_recovery_still_has_to_read() -> None:
    tp = TP("app-outcomes-primary-changelog", 0)
    recovery = Recovery()
    health = WorkerHealth(
        control_caught_up=asyncio.Event(), judges_checked=asyncio.Event(), recovering=lambda: records_left(recovery)
    )
    assert not any("recovering" in reason for reason in health.reasons())
    recovery.in_recovery = True  # started, offsets not fetched yet
    assert "recovering tables" in health.reasons()
    recovery.remaining[tp] = 41_234
    assert "recovering tables (41234 changelog records left)" in health.reasons()
    recovery.in_recovery = False
    assert not any("recovering" in reason for reason in health.reasons())


async def test_livez_fails_once_the_worker_gave_up_on_its_recovery() -> None:
    health = WorkerHealth(control_caught_up=asyncio.Event(), judges_checked=asyncio.Event())
    server = HealthServer(HealthSettings(port=free_port()), health, None)
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client:
            assert (await client.get("/livez")).status_code == 200
            health.mark_stalled("table recovery has read no changelog record for 120 s")
            answer = await client.get("/livez")
            assert answer.status_code == 503
            assert answer.json()["status"] == "stalled"
            assert "120 s" in answer.json()["reason"]
    finally:
        await server.stop()


@pytest.mark.parametrize("stall_s", [0.0, -1.0])
def test_the_setting_turns_the_watch_off_at_zero_and_refuses_negatives(stall_s: float) -> None:
    from pydantic import ValidationError

    from pairjudge.streams.config.settings import Settings

    if stall_s == 0:
        assert Settings.model_validate({"worker": {"recovery_stall_s": stall_s}}).worker.recovery_stall_s == 0
    else:
        with pytest.raises(ValidationError):
            Settings.model_validate({"worker": {"recovery_stall_s": stall_s}})


def test_the_stall_is_reported_even_when_the_consumer_cannot_be_read() -> None:
    class NotStarted(Exception):
        pass

    class Thread:
        def _ensure_consumer(self) -> None:
            raise NotStarted("Consumer thread not yet started")

    recovery = Recovery(in_recovery=True, remaining=Counter({TP("app-audit-join-changelog", 3): 12}))
    recovery.app = SimpleNamespace(consumer=SimpleNamespace(_thread=Thread()))  # type: ignore[attr-defined]
    watch = RecoveryWatch(recovery, stall_s=60)
    assert watch.check(0.0) is None
    reason = watch.check(60.0)
    assert reason is not None
    assert "app-audit-join-changelog[3]" in reason
    assert "consumer state unavailable (NotStarted: Consumer thread not yet started)" in reason
