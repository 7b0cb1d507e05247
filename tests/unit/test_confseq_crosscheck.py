"""The anytime-valid constructions checked against confseq (Howard, Ramdas, Waudby-Smith et al.'s reference library).

Where the project's construction is one confseq offers, the numbers must be the same: the human gate's boundary
(``confseq.boundaries.normal_mixture_bound``, two-sided), the judge gate's promote e-value
(``beta_binomial_log_mixture``, one-sided, g = h = 1/2), the tie-break switch-off's e-value
(``confseq.betting.diversified_betting_mart``, constant bets) and the gate's running intersection
(``confseq.misc.get_running_intersection``). Where it is not (the agreement guard's and the reject test's uniform
prior below a floor other than 1/2; the human gate's asymptotic sequence), both are run on the same simulated
streams (1,000 runs, vectorised) and their validity and speed compared side by side (bench/confseq_crosscheck.py
prints the full tables; docs/guides/*.md record them).

confseq is a dev dependency and these tests import it unconditionally: without it they fail, they never skip.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from confseq import boundaries

from bench.confseq_crosscheck import (
    confseq_lower_boundary,
    confseq_module,
    coverage_table,
    labels_only_sums,
    labels_to_cross,
    pause_table,
    project_sequence,
)
from pairjudge.agents.audit.agreement_guard import log_e_below, trip_boundary
from pairjudge.agents.audit.stages import ALTERNATIVE_GAPS, below_target, below_target_evalue
from pairjudge.agents.scores.gate import GateConfig, decide, log_e_promote, log_e_reject
from pairjudge.agents.scores.human import BasisArrays, decide_arrays
from pairjudge.agents.scores.human.estimator import cs_radius_factor

betting: Any = confseq_module("confseq.betting")
misc: Any = confseq_module("confseq.misc")


def v_opt_for_uniform_prior(alpha_opt: float = 0.05) -> float:
    """The v_opt at which confseq's one-sided beta-binomial mixture with g = h = 1/2 mixes over a uniform prior.

    confseq's prior on the success rate is Beta(r/h, r/g) (uniform at g = h = 1/2 when r = 1/2), with
    r = rho - g h and rho the one-sided normal mixture's best rho at v_opt: v_opt / (2 log(1/(2 alpha_opt)) +
    log(1 + 2 log(1/(2 alpha_opt)))) (uniform_boundaries.h, OneSidedNormalMixture::best_rho). So rho = 3/4."""
    c = 2 * math.log(1 / (2 * alpha_opt)) + math.log(1 + 2 * math.log(1 / (2 * alpha_opt)))
    return 0.75 * c


# --- exact: the same construction --------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.1, 0.2])
@pytest.mark.parametrize("target_labels", [30, 100, 500, 2000])
def test_human_sequence_boundary_is_confseqs_two_sided_normal_mixture(alpha: float, target_labels: int) -> None:
    # The project's radius in standard errors at t labels is confseq's bound on a sum of t unit-variance
    # observations (intrinsic time v = t) over sqrt(t), with v_opt = target_labels and alpha_opt = alpha: the same
    # rho (Waudby-Smith et al. eq. 2.8 is confseq's TwoSidedNormalMixture::best_rho). Both are closed forms in
    # double precision: equal to rounding (measured 4e-16), 1e-12 leaves room for another libm.
    labels = np.array([1, 2, 5, 10, 30, 100, 499, 500, 1000, 2000, 10_000, 100_000], dtype=np.float64)
    ours = cs_radius_factor(labels, alpha, target_labels)
    theirs = boundaries.normal_mixture_bound(labels, alpha, float(target_labels), alpha, False) / np.sqrt(labels)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=0)


def test_judge_gate_promote_evalue_is_confseqs_one_sided_beta_binomial_mixture() -> None:
    # Decisive comparisons as Bernoulli(p) against p0 = 1/2: centred sum s = W - n/2, intrinsic time
    # v = g h n = n/4 (confseq.conjmix_bounded.bernoulli_supermartingale's parametrisation).
    wins, losses = np.meshgrid(np.arange(0, 400, 7), np.arange(0, 400, 11))
    n = wins + losses
    ours = log_e_promote(wins, losses)
    theirs = boundaries.beta_binomial_log_mixture(wins - n / 2, n / 4, v_opt_for_uniform_prior(), 0.5, 0.5, 0.05, True)
    # Incomplete beta functions from two libraries (scipy's, Boost's): measured 1e-12 apart on the log scale.
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9)
    threshold = math.log(GateConfig().threshold)
    promote = np.vectorize(lambda w, lo: decide(int(w), int(lo)).decision == "promote")(wins, losses)
    assert np.array_equal(promote, theirs >= threshold)
    assert promote.any()
    assert not promote.all()


def test_lower_side_evalue_at_floor_one_half_is_confseqs_mixture_on_the_disagreements() -> None:
    # The agreement guard and the gate's reject test mix over agreement q uniform on (0, floor). At floor 1/2
    # that is confseq's one-sided mixture (uniform prior) run on the disagreements: s = F - n/2.
    agreeing, disagreeing = np.meshgrid(np.arange(0, 300, 5), np.arange(0, 300, 3))
    n = agreeing + disagreeing
    theirs = boundaries.beta_binomial_log_mixture(
        disagreeing - n / 2, n / 4, v_opt_for_uniform_prior(), 0.5, 0.5, 0.05, True
    )
    np.testing.assert_allclose(log_e_below(agreeing, n, 0.5), theirs, rtol=0, atol=1e-9)
    np.testing.assert_allclose(log_e_reject(agreeing, disagreeing, 0.0), theirs, rtol=0, atol=1e-9)


@pytest.mark.parametrize("min_effect", [0.01, 0.05, 0.2])
def test_reject_evalue_is_the_guards_evalue_at_floor_one_half_plus_the_effect(min_effect: float) -> None:
    # So the simulations of the guard's e-process below (floor 0.55) speak for the gate's reject test too.
    wins, losses = np.meshgrid(np.arange(0, 200, 3), np.arange(0, 200, 7))
    np.testing.assert_allclose(
        log_e_reject(wins, losses, min_effect), log_e_below(wins, wins + losses, 0.5 + min_effect), rtol=1e-12
    )


@pytest.mark.parametrize("target", [0.6, 0.75, 0.9, 0.95])
@pytest.mark.parametrize("agreement", [0.4, 0.8, 0.97])
def test_tiebreak_switch_off_evalue_is_confseqs_diversified_constant_bets(target: float, agreement: float) -> None:
    # Each alternative q = target - gap's likelihood ratio is the capital of a constant bet against the mean:
    # prod (1 - lam (x - target)) with lam = gap / (target (1 - target)) (x = 1: q / target; x = 0:
    # (1 - q) / (1 - target)). confseq's negative capital process with those bets, weighted equally, truncation
    # at 1 / (1 - target) (trunc_scale 1: every lam here is below it, since q > 0).
    gaps = [g for g in ALTERNATIVE_GAPS if target - g > 0]
    bets = [(lambda lam: lambda x, m: np.full(len(x), lam))(g / (target * (1 - target))) for g in gaps]
    rng = np.random.default_rng(int(target * 100) + int(agreement * 1000))
    x = (rng.random(300) < agreement).astype(np.float64)
    theirs = betting.diversified_betting_mart(
        x, target, lambdas_fns_positive=bets, lambdas_fns_negative=bets, theta=0, trunc_scale=1.0
    )
    agreeing = np.cumsum(x).astype(int)
    ours = np.array([below_target_evalue(int(agreeing[i]), i + 1, target=target) for i in range(x.size)])
    # A product of 300 factors each way: measured 3e-14 apart.
    np.testing.assert_allclose(ours, theirs, rtol=1e-10)
    for risk in (0.05, 0.1):
        switched = [below_target(int(agreeing[i]), i + 1, target=target, risk=risk) for i in range(x.size)]
        assert switched == list(theirs >= 1 / risk)


def test_gate_running_intersection_is_confseqs() -> None:
    rng = np.random.default_rng(3)
    y = np.where(rng.random((50, 400)) < 0.55, 1.0, 0.0)
    basis = BasisArrays({"labels": labels_only_sums(y)})
    gate = decide_arrays(basis, lam=0.0, hold_axis=1)
    low, high = project_sequence(y)
    ready = gate.ready
    for run in range(y.shape[0]):
        lo, hi = misc.get_running_intersection(
            np.where(ready[run], low[run], 0.0), np.where(ready[run], high[run], 1.0)
        )
        np.testing.assert_array_equal(gate.low[run], lo)
        np.testing.assert_array_equal(gate.high[run], hi)
    assert (gate.high - gate.low)[:, -1].max() < (high - low)[:, -1].max()  # the intersection did narrow some


# --- distributional: different constructions, both valid ---------------------------------------------------


def test_confseq_boundary_helper_agrees_with_its_log_mixture() -> None:
    # The helper turns confseq's bound into an integer boundary; checked here against the log mixture on a grid.
    floor, alpha, horizon = 0.7, 0.05, 300
    boundary = confseq_lower_boundary(floor, alpha, horizon)
    g, h = 1 - floor, floor
    for n in range(1, horizon + 1):
        s = np.arange(0, n + 1, dtype=np.float64)
        logs = boundaries.beta_binomial_log_mixture((n - s) - g * n, g * h * n, g * h * 100, g, h, alpha, True)
        trips = np.flatnonzero(logs >= math.log(1 / alpha))
        assert boundary[n - 1] == (int(trips[-1]) if trips.size else -1), n


def test_guard_against_confseqs_beta_binomial_mixture_in_simulation() -> None:
    # 1,000 runs of 3,000 labels at the guard's floor 0.70 (alpha 0.05), the same draws for both processes.
    rows = {r.agreement: r for r in pause_table(floors=(0.7,), agreements=(0.3, 0.5, 0.7))}
    at_floor = rows[0.7]
    # Both valid: at the floor, paused in at most alpha of runs (3 standard errors of 1,000 runs above it).
    # Measured: 2.8% and 2.9%.
    assert at_floor.project_paused <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 1000)
    assert at_floor.confseq_paused <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 1000)
    # A consistently wrong judge is caught about as fast by either (measured medians 9 and 15 labels at 30%,
    # 35 and 38 at 50%): the project's prior spends more of its weight far below the floor, so it is faster there.
    assert rows[0.3].project_median <= rows[0.3].confseq_median
    assert rows[0.5].project_median <= 1.25 * rows[0.5].confseq_median
    assert rows[0.3].project_paused == rows[0.3].confseq_paused == 1.0


def test_trip_boundary_drives_the_same_crossings_as_the_evalue() -> None:
    # labels_to_cross reads the boundary, not the e-value: the two must say the same on one run.
    floor, alpha = 0.7, 0.05
    boundary = trip_boundary(floor, alpha, 200)
    crossing = labels_to_cross(boundary, 0.4, 1, seed=5)[0]
    rng = np.random.default_rng(5)
    agreeing = np.cumsum(rng.random((1, 200)) < 0.4, axis=1)[0]
    first = next(n for n in range(1, 201) if log_e_below(agreeing[n - 1], n, floor) >= math.log(1 / alpha))
    assert crossing == first


def test_human_sequence_against_confseqs_sequences_in_simulation() -> None:
    # Labels alone (one stratum, lambda 0): the project's asymptotic sequence with its finite-sample correction
    # against confseq's nonasymptotic ones on the same labels, 1,000 runs of 1,000 labels, every look from 30.
    rows = coverage_table(mixes=((0.5, 0.0, 0.5), (0.93, 0.05, 0.02)))
    for row in rows:
        project, hoeffding, bernstein = row.covered
        # confseq's are valid at every t by construction; the project's only asymptotically, yet it must hold
        # its 95% too (3 standard errors of 1,000 runs). Measured 0.968 and 0.969.
        assert min(hoeffding, bernstein) >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / 1000)
        assert project >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / 1000)
    balanced, lopsided = rows
    # At a mean of 1/2 the project's plug-in sigma is Hoeffding's worst case: the same width (0.136 at 500 labels).
    assert balanced.width[0] == pytest.approx(balanced.width[1], rel=0.02)
    # With little variance it is narrower than both (measured 0.050 against 0.113 and 0.057).
    assert lopsided.width[0] < lopsided.width[2] < lopsided.width[1]
