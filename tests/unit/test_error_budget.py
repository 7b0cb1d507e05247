"""The error budget (streams.worker.error_budget): isolated bugs are tolerated, a run of them is not."""

from __future__ import annotations

import pytest

from pairjudge.streams.worker.error_budget import ErrorBudget


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_up_to_the_limit_within_the_window_may_be_dead_lettered_and_the_next_stops() -> None:
    clock = Clock()
    budget = ErrorBudget(3, 60.0, clock=clock)
    assert [budget.charge("KeyError: 'x'") for _ in range(3)] == [True, True, True]
    assert budget.spent is None
    clock.now += 1
    assert budget.charge("KeyError: 'x'") is False
    assert budget.spent is not None
    assert "4 unexpected errors within 60 s" in budget.spent
    assert "KeyError: 'x'" in budget.spent
    assert "PAIRJUDGE_WORKER__INTERNAL_ERROR_LIMIT" in budget.spent


def test_errors_older_than_the_window_no_longer_count() -> None:
    clock = Clock()
    budget = ErrorBudget(2, 60.0, clock=clock)
    for _ in range(10):  # one every 61 s: never two within a 60 s window
        assert budget.charge("bug") is True
        clock.now += 61
    assert budget.spent is None


def test_once_spent_it_stays_spent_whatever_the_clock() -> None:
    clock = Clock()
    budget = ErrorBudget(1, 10.0, clock=clock)
    assert budget.charge("a") is True
    assert budget.charge("b") is False
    clock.now += 3600
    assert budget.charge("c") is False  # a half-stopped worker must not go back to dead-lettering


def test_a_limit_of_zero_stops_on_the_first_error() -> None:
    budget = ErrorBudget(0, 60.0)
    assert budget.charge("bug") is False


@pytest.mark.parametrize(("limit", "window"), [(-1, 60.0), (3, 0.0), (3, -1.0)])
def test_nonsense_is_refused(limit: int, window: float) -> None:
    with pytest.raises(ValueError, match="limit"):
        ErrorBudget(limit, window)
