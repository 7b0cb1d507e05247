"""The scoreboard's arithmetic: tallies and Wilson intervals, length control, Bradley-Terry strengths."""

from __future__ import annotations

import math
import random

import pytest

from pairjudge.agents.scores.board import Scoreboard, Tally, bradley_terry, length_bin, length_controlled


def test_tally_win_rate_is_over_decisive_pairs_with_a_wilson_interval() -> None:
    t = Tally()
    for side in ["win"] * 30 + ["loss"] * 10 + ["tie"] * 5:
        t.add(side)  # type: ignore[arg-type]
    rate = t.win_rate()
    assert rate is not None
    assert rate[0] == pytest.approx(0.75)
    assert 0.59 < rate[1] < 0.75 < rate[2] < 0.87
    assert (t.pairs, t.decisive) == (45, 40)
    assert Tally().win_rate() is None


def _judged_by_length(n: int, true_logit: float, length_effect: float, seed: int) -> Scoreboard:
    """A judge whose preference grows with the challenger's length: P(win) = sigmoid(a + b * log ratio)."""
    rng = random.Random(seed)
    board = Scoreboard()
    for _ in range(n):
        champion = rng.randint(200, 800)
        challenger = int(champion * math.exp(rng.gauss(0.4, 0.5)))  # the challenger tends to run longer
        x = math.log((1 + challenger) / (1 + champion))
        p = 1 / (1 + math.exp(-(true_logit + length_effect * x)))
        side = "win" if rng.random() < p else "loss"
        board.add_judged(side, rubric="tone_style", traffic="shadow", lengths=(challenger, champion))  # type: ignore[arg-type]
    return board


def test_length_control_takes_out_a_judge_that_likes_longer_answers() -> None:
    board = _judged_by_length(4000, true_logit=0.0, length_effect=1.5, seed=3)
    raw = board.overall.win_rate()
    assert raw is not None
    assert raw[0] > 0.6  # the longer challenger looks better than it is
    lc = board.length_controlled()
    assert lc is not None
    assert lc.rate == pytest.approx(0.5, abs=0.04)
    assert lc.length_coefficient == pytest.approx(1.5, abs=0.3)


def test_length_control_needs_enough_pairs() -> None:
    assert length_controlled([0] * 41, [0] * 41) is None
    assert length_bin(100, 100) == 20
    assert length_bin(10_000, 1) == 40
    assert length_bin(1, 10_000) == 0


def test_bradley_terry_orders_models_and_brackets_them() -> None:
    rng = random.Random(5)
    truth = {"small": -1.0, "medium": 0.0, "large": 1.0}
    wins: dict[tuple[str, str], int] = {}
    models = list(truth)
    for _ in range(3000):
        a, b = rng.sample(models, 2)
        p = 1 / (1 + math.exp(truth[b] - truth[a]))
        key = (a, b) if rng.random() < p else (b, a)
        wins[key] = wins.get(key, 0) + 1
    strengths = {s.model: s for s in bradley_terry(wins, bootstrap=100)}
    assert strengths["small"].strength < strengths["medium"].strength < strengths["large"].strength
    for model, s in strengths.items():
        assert s.low <= s.strength <= s.high
        assert s.low - 0.15 <= truth[model] <= s.high + 0.15
    assert bradley_terry({("a", "a"): 3}) == []


def test_scoreboard_splits_and_survives_a_round_trip() -> None:
    board = Scoreboard()
    board.add_judged("win", rubric="tone_style", traffic="shadow", lengths=(10, 20), models=("m2", "m1"))
    board.add_judged("loss", rubric="head_to_head", traffic="production", lengths=(30, 20), models=("m2", "m1"))
    board.add_judged("tie", rubric="tone_style", traffic="production")
    board.add_human("win")
    again = Scoreboard.from_dict(board.to_dict())
    assert again == board
    assert (again.by_rubric["tone_style"].wins, again.by_rubric["tone_style"].ties) == (1, 1)
    assert again.by_traffic["production"].losses == 1
    assert again.human.wins == 1
    assert again.model_wins == {"m2|m1": 1, "m1|m2": 1}
