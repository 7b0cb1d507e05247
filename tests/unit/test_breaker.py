"""The circuit breaker with a scripted failing judge and a fake clock: no sleeping on cooldowns."""

from __future__ import annotations

from typing import Literal

import anyio
import pytest

from pairjudge.agents.errors import InvalidReply, JudgeRejected, JudgeUnavailable
from pairjudge.agents.judge import Judge, JudgeRequest
from pairjudge.agents.prompts import render_primary
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.schemas import RubricRef
from pairjudge.streams.judges.breaker import BreakerJudge, CircuitBreaker, CircuitOpen
from tests.unit.factories import make_pair, tone_reply

REPLY = tone_reply("A")
DOWN = JudgeUnavailable("HTTP 503 after 4 attempts")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def a_request(order: Literal["AB", "BA"] = "AB") -> JudgeRequest:
    pair = make_pair()
    assert not isinstance(pair.rubric, RubricRef)
    return render_primary(pair, pair.rubric, order)


def make(
    *answers: str | Exception, threshold: int = 3, cooldown: float = 5.0, max_cooldown: float = 60.0
) -> tuple[BreakerJudge, ScriptedJudge, CircuitBreaker, FakeClock]:
    clock = FakeClock()
    breaker = CircuitBreaker(
        failure_threshold=threshold,
        cooldown_s=cooldown,
        max_cooldown_s=max_cooldown,
        clock=clock,
        max_wait_poll_s=0.01,
        probe_lease_s=0.5,
    )
    inner = ScriptedJudge(list(answers), model="judge-m")
    return BreakerJudge(inner, breaker), inner, breaker, clock


async def fail_times(judge: Judge, n: int, error: type[Exception] = JudgeUnavailable) -> None:
    for _ in range(n):
        with pytest.raises(error):
            await judge.complete(a_request())


async def test_opens_after_n_consecutive_outages_then_refuses_without_calling() -> None:
    judge, inner, breaker, _ = make(DOWN, DOWN, DOWN, threshold=3)
    await fail_times(judge, 2)
    assert (breaker.state, breaker.is_open, breaker.consecutive_failures) == ("closed", False, 2)
    await fail_times(judge, 1)
    assert (breaker.state, breaker.is_open) == ("open", True)
    assert inner.calls == 3
    with pytest.raises(CircuitOpen, match="circuit open"):
        await judge.complete(a_request())
    assert isinstance(CircuitOpen("x"), JudgeUnavailable)  # the core sees an unavailable judge
    assert inner.calls == 3  # refused without touching the judge
    assert breaker.opened_count == 1


async def test_a_success_ends_the_run_of_outages() -> None:
    judge, inner, breaker, _ = make(DOWN, DOWN, REPLY, DOWN, DOWN, threshold=3)
    await fail_times(judge, 2)
    assert (await judge.complete(a_request())).text == REPLY
    await fail_times(judge, 2)
    assert breaker.state == "closed"
    assert inner.calls == 5


@pytest.mark.parametrize("error", [JudgeRejected("HTTP 401: bad key"), InvalidReply("no text", "")])
async def test_rejections_and_bad_replies_are_not_outages(error: Exception) -> None:
    judge, _, breaker, _ = make(*[error] * 5, threshold=3)
    await fail_times(judge, 5, type(error))
    assert breaker.state == "closed"
    # ...and they end a run of outages: the endpoint answered.
    judge2, _, breaker2, _ = make(DOWN, DOWN, error, DOWN, DOWN, threshold=3)
    await fail_times(judge2, 2)
    await fail_times(judge2, 1, type(error))
    await fail_times(judge2, 2)
    assert breaker2.state == "closed"


async def test_half_open_lets_exactly_one_probe_through_and_its_success_closes() -> None:
    judge, _, breaker, clock = make(DOWN, DOWN, threshold=2, cooldown=5.0)
    await fail_times(judge, 2)
    clock.advance(4.9)
    with pytest.raises(CircuitOpen):
        await judge.complete(a_request())
    clock.advance(0.1)
    assert (breaker.state, breaker.is_open) == ("half_open", False)

    release = anyio.Event()
    probe_started = anyio.Event()

    async def hold(_: JudgeRequest) -> None:
        probe_started.set()
        await release.wait()

    probe_inner = ScriptedJudge([REPLY, REPLY], model="judge-m", on_request=hold)
    judge = BreakerJudge(probe_inner, breaker)
    results: list[str] = []

    async def probe() -> None:
        results.append((await judge.complete(a_request())).text)

    async with anyio.create_task_group() as tg:
        tg.start_soon(probe)
        await probe_started.wait()
        assert breaker.is_open  # a call now would be refused: the probe is out
        with pytest.raises(CircuitOpen, match="probe"):
            await judge.complete(a_request("BA"))
        assert probe_inner.calls == 1
        release.set()
    assert results == [REPLY]
    assert (breaker.state, breaker.consecutive_failures, breaker.cooldown_s) == ("closed", 0, 5.0)
    assert (await judge.complete(a_request())).text == REPLY


async def test_a_failed_probe_reopens_with_a_longer_cooldown_up_to_the_maximum() -> None:
    judge, inner, breaker, clock = make(*[DOWN] * 6, threshold=2, cooldown=5.0, max_cooldown=12.0)
    await fail_times(judge, 2)
    expected = [10.0, 12.0, 12.0]
    for cooldown in expected:
        clock.advance(breaker.cooldown_s)
        await fail_times(judge, 1)  # the probe
        assert (breaker.state, breaker.cooldown_s) == ("open", cooldown)
        clock.advance(cooldown - 0.01)
        with pytest.raises(CircuitOpen):
            await judge.complete(a_request())
    assert inner.calls == 5
    assert breaker.opened_count == 4


async def test_after_a_successful_probe_the_cooldown_starts_from_the_base_again() -> None:
    judge, _, breaker, clock = make(DOWN, DOWN, DOWN, REPLY, DOWN, DOWN, threshold=2, cooldown=5.0)
    await fail_times(judge, 2)
    clock.advance(5.0)
    await fail_times(judge, 1)  # failed probe: 10 s
    clock.advance(10.0)
    assert (await judge.complete(a_request())).text == REPLY
    await fail_times(judge, 2)
    assert (breaker.state, breaker.cooldown_s) == ("open", 5.0)


def test_outcomes_of_calls_admitted_before_a_state_change_are_ignored() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=2, cooldown_s=5.0, clock=clock)
    slow = breaker.admit()  # admitted while closed, still in flight when the breaker opens
    breaker.record_failure(breaker.admit())
    breaker.record_failure(breaker.admit())
    states = [breaker.state]
    breaker.record_failure(slow)  # a late failure does not extend the cooldown
    assert breaker.retry_in() == 5.0
    clock.advance(5.0)
    states.append(breaker.state)
    probe = breaker.admit()
    assert probe.probe
    breaker.record_success(slow)  # nor does a late success close the breaker: only the probe does
    states.append(breaker.state)
    breaker.record_success(probe)
    states.append(breaker.state)
    assert states == ["open", "half_open", "half_open", "closed"]


async def test_a_cancelled_probe_frees_the_slot_for_the_next_call() -> None:
    judge, _, breaker, clock = make(DOWN, DOWN, threshold=2)
    await fail_times(judge, 2)
    clock.advance(5.0)

    async def hang(_: JudgeRequest) -> None:
        await anyio.sleep_forever()

    hanging = BreakerJudge(ScriptedJudge([REPLY], model="judge-m", on_request=hang), breaker)
    with anyio.move_on_after(0.05):
        await hanging.complete(a_request())
    assert (breaker.state, breaker.is_open) == ("half_open", False)
    ok = BreakerJudge(ScriptedJudge([REPLY], model="judge-m"), breaker)
    assert (await ok.complete(a_request())).text == REPLY
    assert breaker.state == "closed"


# --- backpressure -----------------------------------------------------------------------------


async def test_wait_until_closed_returns_at_once_when_closed() -> None:
    _, _, breaker, _ = make()
    with anyio.fail_after(1):
        await breaker.wait_until_closed()


async def test_waiters_are_held_while_open_and_released_one_at_a_time_for_the_probe() -> None:
    judge, _, breaker, clock = make(DOWN, DOWN, threshold=2, cooldown=5.0)
    await fail_times(judge, 2)
    released: list[int] = []

    async def waiter(i: int) -> None:
        await breaker.wait_until_closed()
        released.append(i)

    async with anyio.create_task_group() as tg:
        for i in range(3):
            tg.start_soon(waiter, i)
        await anyio.sleep(0.05)
        assert released == []  # open: everyone waits
        clock.advance(5.0)  # ready for a probe
        await anyio.sleep(0.05)
        assert len(released) == 1  # one waiter gets to probe; the rest keep waiting
        probe = breaker.admit()  # the released waiter's call
        await anyio.sleep(0.05)
        assert len(released) == 1
        breaker.record_success(probe)  # closed: everyone goes
    assert sorted(released) == [0, 1, 2]


async def test_a_released_waiter_that_does_not_probe_hands_over_after_its_lease() -> None:
    judge, _, breaker, clock = make(DOWN, DOWN, threshold=2, cooldown=5.0)
    await fail_times(judge, 2)
    clock.advance(5.0)
    with anyio.fail_after(1):
        await breaker.wait_until_closed()  # released, but makes no call
    with anyio.move_on_after(0.05) as scope:
        await breaker.wait_until_closed()
    assert scope.cancelled_caught  # the lease still holds the others back
    clock.advance(0.5)
    with anyio.fail_after(1):
        await breaker.wait_until_closed()


def test_nonsense_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="failure_threshold"):
        CircuitBreaker(failure_threshold=0)
    with pytest.raises(ValueError, match="cooldown"):
        CircuitBreaker(cooldown_s=10.0, max_cooldown_s=5.0)


# --- checks: a cheap request lets the probe go early once the cooldown has grown ----------------


def grown(
    *, cooldown: float = 5.0, max_cooldown: float = 60.0, interval: float = 2.0
) -> tuple[CircuitBreaker, FakeClock]:
    """A breaker with a check, opened and with one failed cooldown probe behind it (cooldown doubled).

    The check itself is never awaited here: the tests drive ``begin_check``/``record_check`` by hand.
    """
    clock = FakeClock()

    async def unused() -> bool:
        raise AssertionError("the state machine tests run no check")

    breaker = CircuitBreaker(
        failure_threshold=2,
        cooldown_s=cooldown,
        max_cooldown_s=max_cooldown,
        check=unused,
        check_interval_s=interval,
        clock=clock,
    )
    breaker.record_failure(breaker.admit())
    breaker.record_failure(breaker.admit())
    assert breaker.begin_check() is None  # no checks while the cooldown is at its base
    assert breaker.check_due_in() is None
    clock.advance(cooldown)
    probe = breaker.admit()
    breaker.record_failure(probe)
    assert (breaker.state, breaker.cooldown_s) == ("open", 2 * cooldown)
    return breaker, clock


def test_no_checks_without_a_check_or_while_the_cooldown_is_at_its_base() -> None:
    clock = FakeClock()
    plain = CircuitBreaker(failure_threshold=1, cooldown_s=1.0, clock=clock)
    plain.record_failure(plain.admit())
    clock.advance(1.0)
    plain.record_failure(plain.admit())
    assert (plain.cooldown_s, plain.checks_enabled, plain.begin_check()) == (2.0, False, None)


def test_a_check_that_finds_the_judge_up_lets_one_probe_through_at_once() -> None:
    breaker, clock = grown(interval=2.0)
    first = breaker.begin_check()
    assert first is not None  # due as soon as the breaker re-opened
    assert breaker.begin_check() is None  # one check at a time
    breaker.record_check(first, up=False)
    assert breaker.begin_check() is None  # the next one is due an interval later
    assert breaker.check_due_in() == 2.0
    clock.advance(2.0)
    second = breaker.begin_check()
    assert second is not None
    breaker.record_check(second, up=True)
    # 2 s into a 10 s cooldown: ready for the half-open probe, not closed.
    assert (breaker.state, breaker.is_open, breaker.retry_in()) == ("half_open", False, 0.0)
    probe = breaker.admit()
    assert (probe.probe, probe.early) == (True, True)
    with pytest.raises(CircuitOpen, match="probe"):
        breaker.admit()  # still exactly one probe
    breaker.record_success(probe)
    assert (breaker.state, breaker.cooldown_s, breaker.early_probes, breaker.checks_count) == ("closed", 5.0, 1, 2)


def test_a_model_list_that_answers_while_completions_fail_costs_one_extra_probe_not_one_per_interval() -> None:
    # A load balancer in front of crashed workers: GET /models answers, every completion fails.
    breaker, clock = grown(cooldown=5.0, max_cooldown=60.0, interval=2.0)
    real_calls = 0
    elapsed = 0.0
    while elapsed < 300.0:
        check = breaker.begin_check()
        if check is not None:
            breaker.record_check(check, up=True)
        if breaker.state == "half_open":
            real_calls += 1
            breaker.record_failure(breaker.admit())
        clock.advance(0.5)
        elapsed += 0.5
    # The first check is believed once (an early probe at 0 s); then only the cooldown lets probes
    # through, 20, 40, 60, 60, 60 s apart: at 20, 60, 120, 180 and 240 s. One per 2 s interval would be 150.
    assert breaker.early_probes == 1
    assert real_calls == 6
    assert breaker.cooldown_s == 60.0


def test_after_a_check_sees_the_judge_down_again_its_up_is_believed_again() -> None:
    breaker, clock = grown(interval=2.0)
    states: list[str] = []

    def check_says(up: bool) -> None:
        check = breaker.begin_check()
        assert check is not None
        breaker.record_check(check, up=up)
        states.append(breaker.state)
        clock.advance(2.0)

    check_says(True)
    breaker.record_failure(breaker.admit())  # the early probe failed: checks are no longer believed
    check_says(True)
    check_says(False)  # the judge went down for real...
    check_says(True)  # ...and came back: that is news
    assert states == ["half_open", "open", "open", "half_open"]


def test_a_failed_cooldown_probe_does_not_stop_believing_checks() -> None:
    # The judge comes back just after a probe the cooldown let through failed: the next check must
    # still count, or the judge would wait out the whole doubled cooldown.
    breaker, clock = grown(cooldown=5.0, interval=2.0)
    clock.advance(10.0)
    breaker.record_failure(breaker.admit())  # a cooldown probe, not an early one
    assert breaker.cooldown_s == 20.0
    check = breaker.begin_check()
    assert check is not None
    breaker.record_check(check, up=True)
    assert breaker.state == "half_open"


def test_a_check_from_before_a_state_change_is_ignored_and_a_cancelled_one_frees_its_slot() -> None:
    breaker, clock = grown(cooldown=5.0, interval=2.0)
    stale = breaker.begin_check()
    assert stale is not None
    clock.advance(10.0)
    breaker.record_failure(breaker.admit())  # re-opened while the check was out
    breaker.record_check(stale, up=True)
    assert breaker.state == "open"
    cancelled = breaker.begin_check()
    assert cancelled is not None
    breaker.record_check(cancelled, up=None)
    assert breaker.state == "open"
    clock.advance(2.0)
    assert breaker.begin_check() is not None


def test_a_check_without_an_interval_is_refused() -> None:
    async def check() -> bool:
        return True

    with pytest.raises(ValueError, match="check_interval_s"):
        CircuitBreaker(check=check, check_interval_s=0)


async def test_waiters_run_one_check_at_a_time_and_go_once_it_finds_the_judge_up() -> None:
    clock = FakeClock()
    answers = [False, True]
    started = 0
    in_flight = 0
    most_in_flight = 0

    async def check() -> bool:
        nonlocal started, in_flight, most_in_flight
        started += 1
        in_flight += 1
        most_in_flight = max(most_in_flight, in_flight)
        await anyio.sleep(0.02)  # a network round trip: the other waiters must not start their own
        in_flight -= 1
        return answers.pop(0)

    breaker = CircuitBreaker(
        failure_threshold=2,
        cooldown_s=5.0,
        check=check,
        check_interval_s=2.0,
        clock=clock,
        max_wait_poll_s=0.01,
        probe_lease_s=0.5,
    )
    judge = BreakerJudge(ScriptedJudge([DOWN, DOWN, DOWN, REPLY], model="judge-m"), breaker)
    await fail_times(judge, 2)
    clock.advance(5.0)
    await fail_times(judge, 1)  # a failed cooldown probe: 10 s now
    released: list[int] = []

    async def waiter(i: int) -> None:
        await breaker.wait_until_closed()
        released.append(i)

    async with anyio.create_task_group() as tg:
        for i in range(3):
            tg.start_soon(waiter, i)
        await anyio.sleep(0.1)
        assert (started, released) == (1, [])  # checked at once: down
        clock.advance(2.0)
        await anyio.sleep(0.1)
        assert (started, most_in_flight, len(released)) == (2, 1, 1)  # up: one waiter goes to probe
        assert (await judge.complete(a_request())).text == REPLY  # that waiter's call closes the breaker
    assert sorted(released) == [0, 1, 2]
    assert (breaker.state, breaker.early_probes) == ("closed", 1)


async def test_a_check_that_raises_is_no_answer_and_the_cooldown_still_rules() -> None:
    clock = FakeClock()

    async def broken() -> bool:
        raise RuntimeError("judge closed")

    breaker = CircuitBreaker(
        failure_threshold=1, cooldown_s=1.0, check=broken, check_interval_s=0.5, clock=clock, max_wait_poll_s=0.01
    )
    breaker.record_failure(breaker.admit())
    clock.advance(1.0)
    breaker.record_failure(breaker.admit())
    with anyio.move_on_after(0.1) as scope:
        await breaker.wait_until_closed()
    assert scope.cancelled_caught
    assert breaker.checks_count == 1
    clock.advance(2.0)  # the cooldown ends
    with anyio.fail_after(1):
        await breaker.wait_until_closed()
