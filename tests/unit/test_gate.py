"""The deployment gate stays within its error level under continuous monitoring, and has power."""

from __future__ import annotations

import math

import pytest

from pairjudge.agents.scores.gate import GateConfig, decide, log_e_promote, log_e_reject
from pairjudge_dev.gate_sim import simulate

ALPHA = 0.05


def test_equal_candidates_are_promoted_at_most_alpha_of_the_time_checked_after_every_pair() -> None:
    result = simulate(0.5, streams=1000, horizon=2000, seed=11)
    assert result.promote_rate <= ALPHA, result
    # And the futility side does its job: most equal streams end rejected (not 5% better) in time.
    assert result.reject_rate > 0.5


def test_a_challenger_exactly_min_effect_better_is_rejected_at_most_alpha_of_the_time() -> None:
    result = simulate(0.5 + GateConfig().min_effect, streams=1000, horizon=2000, seed=12)
    assert result.reject_rate <= ALPHA, result


def test_a_real_effect_is_promoted() -> None:
    result = simulate(0.6, streams=1000, horizon=2000, seed=13)
    assert result.promote_rate >= 0.95
    assert result.median_sample_size is not None
    assert result.median_sample_size < 600


def test_a_fixed_sample_test_peeked_at_every_pair_would_not_be_valid() -> None:
    # The reason for e-values: a one-sided z-test at 5%, checked after every comparison, promotes an equal
    # challenger far more often than 5%. (Shown on the same simulated streams.)
    import numpy as np

    rng = np.random.default_rng(11)
    draws = rng.random((1000, 2000)) < 0.5
    wins = np.cumsum(draws, axis=1)
    n = np.arange(1, 2001)
    z = (wins - n / 2) / np.sqrt(n / 4)
    peeking_rate = float(((z > 1.645) & (n >= 20)).any(axis=1).mean())
    assert peeking_rate > 3 * ALPHA


def test_decide_reads_the_evidence() -> None:
    assert decide(0, 0).decision == "continue"
    assert decide(80, 20).decision == "promote"
    assert decide(500, 500).decision == "continue"  # about even, not yet sure it is not 5% better
    assert decide(800, 800).decision == "reject"
    state = decide(10, 10)
    assert state.decision == "continue"
    assert state.threshold == pytest.approx(1 / ALPHA)
    # Evidence grows with wins and shrinks with losses.
    assert log_e_promote(30, 10) > log_e_promote(20, 10) > log_e_promote(20, 20)
    assert log_e_reject(10, 30, 0.05) > log_e_reject(20, 20, 0.05)
    assert math.isfinite(float(log_e_promote(0, 5000))) or float(log_e_promote(0, 5000)) == -math.inf


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match="alpha"):
        GateConfig(alpha=0)
    with pytest.raises(ValueError, match="min_effect"):
        GateConfig(min_effect=0.6)
