"""Stopping tasks whose code swallows a cancellation (streams.kafka.cancellation): pure asyncio, no broker."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from pairjudge.streams.kafka.cancellation import cancel_and_wait, stop_if_cancelled


async def _swallowing_once(started: asyncio.Event, ends: list[str]) -> None:
    """Swallows the first cancellation, as aiokafka 0.12's close() does, then serves until stopped."""
    started.set()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.sleep(3600)
    try:
        await asyncio.sleep(3600)
    finally:
        ends.append("stopped")


async def test_a_task_that_swallows_one_cancellation_is_stopped_all_the_same() -> None:
    started, ends = asyncio.Event(), list[str]()
    task = asyncio.create_task(_swallowing_once(started, ends))
    await started.wait()
    await asyncio.wait_for(cancel_and_wait(task, again_after_s=0.05), timeout=5)
    assert task.cancelled()
    assert ends == ["stopped"]


async def test_one_cancel_and_await_is_not_enough_for_such_a_task() -> None:
    """Why cancel_and_wait exists: the plain pattern waits for ever (here, until the test's own timeout)."""
    started, ends = asyncio.Event(), list[str]()
    task = asyncio.create_task(_swallowing_once(started, ends))
    await started.wait()
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=0.3)
    assert not done
    await cancel_and_wait(task, again_after_s=0.05)


async def test_a_task_that_ended_with_an_error_raises_it_once_all_are_stopped() -> None:
    async def fails() -> None:
        raise RuntimeError("feed broke")

    failed = asyncio.create_task(fails())
    running = asyncio.create_task(asyncio.sleep(3600))
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="feed broke"):
        await cancel_and_wait(failed, running)
    assert running.cancelled()


async def test_a_loop_notices_a_request_to_stop_that_was_swallowed() -> None:
    laps = 0

    async def follower() -> None:
        nonlocal laps
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(3600)  # the request is lost here
        while True:
            stop_if_cancelled()
            laps += 1
            await asyncio.sleep(0.01)

    task = asyncio.create_task(follower())
    await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.wait_for(asyncio.wait({task}), timeout=5)
    assert task.cancelled()
    assert laps == 0


def test_outside_a_cancelled_task_nothing_is_raised() -> None:
    async def plain() -> None:
        stop_if_cancelled()
        # asyncio.timeout takes back its own request: a loop after it goes on.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.01):
                await asyncio.sleep(1)
        stop_if_cancelled()

    asyncio.run(plain())
