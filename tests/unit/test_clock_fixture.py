"""The spending tests' hour guard: how much of the UTC hour is left, and when it waits."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.fixtures import clock


def test_seconds_left_counts_to_the_turn_of_the_utc_hour() -> None:
    turn = 1_796_616_000.0  # 2026-12-07 04:00:00 UTC
    assert clock.seconds_left_in_the_hour(turn - 1.0) == 1.0
    assert clock.seconds_left_in_the_hour(turn) == 3600.0
    assert clock.seconds_left_in_the_hour(turn + 59.5) == 3540.5


def test_it_waits_past_the_turn_only_when_the_hour_is_short(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    monkeypatch.setattr(time, "time", lambda: 1_796_616_000.0 - 100.0)
    asyncio.run(clock.within_one_clock_hour(240.0))
    assert slept == [101.0]
    monkeypatch.setattr(time, "time", lambda: 1_796_616_000.0 - 300.0)
    asyncio.run(clock.within_one_clock_hour(240.0))
    assert slept == [101.0]
