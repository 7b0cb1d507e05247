"""The human basis (agents/scores/human/): cross-checked against reference implementations, and its
edges. Its error rates and coverage are checked in simulation by bench/human_gate.py, not here."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate  # type: ignore[import-untyped]
from scipy import integrate, optimize, stats

from pairjudge.agents.scores import human
from pairjudge.agents.scores.human import (
    MIN_LABELS,
    MIN_STRATUM_LABELS,
    HumanBasis,
    StratumSums,
    SumsArray,
    confidence_sequence,
    cs_radius_factor,
    decide_human,
    estimate,
    labels_needed,
    stratum_estimate,
)

ALPHA = 0.05


def _stream(
    seed: int, pairs: int, *, accuracy: float = 0.8, p: float = 0.6, weighted: bool = False
) -> tuple[HumanBasis, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One stratum: every pair's f, and labels on a Bernoulli sample (pi 0.2, or varying in [0.05, 0.5])."""
    rng = np.random.default_rng(seed)
    y = (rng.random(pairs) < p).astype(float)
    f = np.where(rng.random(pairs) < accuracy, y, 1 - y)
    f[rng.random(pairs) < 0.1] = 0.5  # judge ties
    pi = rng.uniform(0.05, 0.5, pairs) if weighted else np.full(pairs, 0.2)
    sampled = rng.random(pairs) < pi
    basis = HumanBasis()
    for i in range(pairs):
        basis.add_pair(float(f[i]), "confident", bool(sampled[i]))
        if sampled[i]:
            basis.add_label(float(f[i]), float(y[i]), "confident", float(pi[i]))
    return basis, f, y[sampled], f[sampled], 1.0 / pi[sampled]


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_one_stratum_equals_ppi_py(seed: int, weighted: bool) -> None:
    basis, f_all, y_lab, f_lab, w = _stream(seed, 1500, weighted=weighted)
    for lam in (None, 0.0, 0.4, 1.0):
        ours = estimate(basis, ALPHA, lam=lam, pseudo=0.0)
        assert ours is not None
        point = float(ppi_mean_pointestimate(y_lab, f_lab, f_all, lam=lam, w=w)[0])
        low, high = ppi_mean_ci(y_lab, f_lab, f_all, alpha=ALPHA, lam=lam, w=w)
        assert ours.rate == pytest.approx(point, abs=1e-10)
        assert ours.low == pytest.approx(float(low[0]), abs=1e-10)
        assert ours.high == pytest.approx(float(high[0]), abs=1e-10)
    # The tuned lambda itself is the reference's: the interval is tightest there among [0, 1].
    tuned = stratum_estimate("confident", basis.strata["confident"]).lam
    assert 0.0 < tuned <= 1.0


def test_lambda_zero_is_the_classical_wald_interval() -> None:
    basis, _, y_lab, _, _ = _stream(7, 2000)
    got = estimate(basis, ALPHA, lam=0.0, pseudo=0.0)
    assert got is not None
    n = y_lab.size
    mean = y_lab.mean()
    half = stats.norm.ppf(1 - ALPHA / 2) * math.sqrt(mean * (1 - mean) / n)
    assert got.rate == pytest.approx(mean, abs=1e-12)
    assert got.low == pytest.approx(mean - half, abs=1e-12)
    assert got.high == pytest.approx(mean + half, abs=1e-12)
    assert got.labels == n


@pytest.mark.parametrize(("labels", "alpha", "target"), [(1, 0.05, 500), (30, 0.05, 500), (2000, 0.01, 100)])
def test_cs_radius_factor_is_the_normal_mixture_boundary(labels: int, alpha: float, target: int) -> None:
    # Robbins' normal mixture over a unit-variance random walk S_t: int exp(l s - l^2 t / 2) N(0, rho^2)(dl)
    # equals 1/alpha exactly at the boundary s = factor * sqrt(t), evaluated by quadrature.
    rho2 = (-2 * math.log(alpha) + math.log(-2 * math.log(alpha) + 1)) / target
    t = float(labels)

    def mixture(s: float) -> float:
        def integrand(lam: float) -> float:
            return math.exp(lam * s - lam * lam * t / 2 - lam * lam / (2 * rho2)) / math.sqrt(2 * math.pi * rho2)

        precision = t + 1 / rho2  # the integrand is a Gaussian bump: integrate where it lives
        centre, width = s / precision, 1 / math.sqrt(precision)
        value, _ = integrate.quad(integrand, centre - 40 * width, centre + 40 * width, points=[centre], limit=200)
        return float(value)

    boundary = cs_radius_factor(labels, alpha, target) * math.sqrt(t)
    assert mixture(boundary) == pytest.approx(1 / alpha, rel=1e-6)
    root = optimize.brentq(lambda s: mixture(s) - 1 / alpha, 0.0, 3 * boundary)
    assert root == pytest.approx(boundary, rel=1e-6)


def test_cs_radius_factor_is_tightest_near_its_target_and_wider_than_fixed_n() -> None:
    at = [cs_radius_factor(n, ALPHA, 500) for n in (50, 500, 5000)]
    assert all(x > stats.norm.ppf(1 - ALPHA / 2) for x in at)
    # rho tuned for 500 labels: the radius in sigma/sqrt(n) units is nearly the smallest there.
    best = optimize.minimize_scalar(
        lambda tgt: cs_radius_factor(500, ALPHA, max(1, round(tgt))), bounds=(10, 50_000), method="bounded"
    )
    assert at[1] <= best.fun * 1.01
    arr = cs_radius_factor(np.array([50.0, 500.0, 5000.0]), ALPHA, 500)
    assert isinstance(cs_radius_factor(50, ALPHA), float)
    np.testing.assert_allclose(arr, at, rtol=1e-15)


def test_the_sequence_counts_agresti_coull_pseudo_disagreements() -> None:
    # With the labels alone the rectifier is y: z^2/2 more labels at y = 1 and as many at y = 0
    # (Agresti-Coull's centre) in the variance, divided by the labels actually seen; the centre is untouched.
    basis, _, y_lab, _, _ = _stream(8, 400)
    n, k = y_lab.size, y_lab.sum()
    cs = confidence_sequence(basis, ALPHA, lam=0.0)
    assert cs is not None
    c = stats.norm.ppf(1 - ALPHA / 2) ** 2 / 2
    assert human.pseudo_disagreements(ALPHA) == pytest.approx(c)
    tilde = (k + c) / (n + 2 * c)
    assert cs.rate == pytest.approx(k / n, abs=1e-12)
    assert cs.std_error == pytest.approx(math.sqrt(tilde * (1 - tilde) / n), abs=1e-12)
    assert cs.radius == pytest.approx(cs.std_error * cs_radius_factor(n, ALPHA), abs=1e-12)
    # A judge that agreed on every label so far: the uncorrected variance of y - lam f is nearly 0.
    agreeing = HumanBasis()
    for i in range(2000):
        f = float(i % 2)
        agreeing.add_pair(f, "confident", i % 20 == 0)
        if i % 20 == 0:
            agreeing.add_label(f, f, "confident", 0.05)
    fixed = estimate(agreeing, ALPHA, pseudo=0.0)
    seq = confidence_sequence(agreeing, ALPHA)
    assert fixed is not None
    assert seq is not None
    uncorrected = human.estimate_arrays(
        {"confident": SumsArray.of(agreeing.strata["confident"])}, ALPHA, sequence=True, pseudo=0.0
    )
    assert float(uncorrected.std_error) == pytest.approx(fixed.std_error, abs=1e-15)
    assert seq.std_error > 3 * fixed.std_error
    assert seq.rate == fixed.rate


def test_the_array_path_is_the_scalar_path() -> None:
    bases = [_stream(seed, 600, weighted=seed % 2 == 0)[0] for seed in range(6)]
    for b, seed in zip(bases, range(6), strict=True):  # a second stratum, sometimes with too few labels
        for i in range(200):
            b.add_pair(float(i % 2), "uncertain")
        for i in range(seed):
            b.add_label(1.0, float(i % 3 == 0), "uncertain", 0.25)
    names = ["confident", "uncertain"]
    stacked = {
        name: SumsArray(
            **{
                k: np.array([float(getattr(b.strata[name], k)) for b in bases])
                for k in StratumSums.__dataclass_fields__
            }
        )
        for name in names
    }
    for sequence in (False, True):
        arrays = human.estimate_arrays(stacked, ALPHA, sequence=sequence)
        for i, b in enumerate(bases):
            one = confidence_sequence(b, ALPHA) if sequence else estimate(b, ALPHA)
            assert one is not None
            assert arrays.low[i] == pytest.approx(one.low, abs=1e-14)
            assert arrays.high[i] == pytest.approx(one.high, abs=1e-14)
            assert arrays.rate[i] == pytest.approx(one.rate, abs=1e-14)
    codes = human.decide_arrays(human.BasisArrays(stacked), alpha=ALPHA).decision
    names_of = {human.PROMOTE: "promote", human.REJECT: "reject", human.CONTINUE: "continue"}
    assert [names_of[int(c)] for c in codes] == [decide_human(b, alpha=ALPHA).decision for b in bases]


def test_serialisation_round_trip() -> None:
    basis, *_ = _stream(3, 400, weighted=True)
    basis.add_pair(0.5, "review", sampled=True)
    basis.add_expired()
    again = HumanBasis.from_dict(json.loads(json.dumps(basis.to_dict())))
    assert again == basis
    assert (again.pending, again.expired, again.sampled) == (basis.pending, 1, basis.sampled)
    assert estimate(again) == estimate(basis)


def test_a_stratum_with_too_few_labels_takes_its_whole_range() -> None:
    basis = HumanBasis()
    for i in range(300):
        f = y = float(i % 5 < 3)
        basis.add_pair(f, "confident", True)
        basis.add_label(f, y, "confident", 1.0)
    for _ in range(100):
        basis.add_pair(1.0, "uncertain", True)  # the judge says challenger; no person has said anything
    basis.add_label(1.0, 0.0, "uncertain", 1.0)  # one label: below MIN_STRATUM_LABELS
    assert MIN_STRATUM_LABELS > 1
    got = estimate(basis)
    assert got is not None
    share = 100 / 400
    assert got.unlabelled_share == pytest.approx(share)
    labelled = 0.75 * 0.6
    # The interval spans the unlabelled quarter at 0 (low) and at 1 (high); the point reads it at the judge's.
    assert got.low <= labelled <= got.low + got.radius + 1e-12
    assert got.high >= labelled + share
    assert got.rate == pytest.approx(labelled + share * 1.0)
    assert [s.stratum for s in got.strata] == ["confident"]
    gate = decide_human(basis)
    assert gate.decision == "continue"
    assert "25% of pairs are in strata with too few labels" in gate.reason


#: A block of 20 labels: people prefer the challenger on 11; the judge is wrong on three of them.
_BLOCK_Y = [1.0] * 11 + [0.0] * 9
_BLOCK_F = [0.0 if j in (0, 12, 19) else y for j, y in enumerate(_BLOCK_Y)]


def _repeated(blocks: int, per_label: int = 20) -> HumanBasis:
    """``blocks`` copies of the block, each label standing for ``per_label`` pairs with its judge outcome
    (pi = 1/per_label): the estimate and its per-label variance are the same at every size."""
    basis = HumanBasis()
    for _ in range(blocks):
        for f, y in zip(_BLOCK_F, _BLOCK_Y, strict=True):
            basis.add_pair(f, "confident", sampled=True)
            basis.add_label(f, y, "confident", 1 / per_label)
            for _ in range(per_label - 1):
                basis.add_pair(f, "confident")
    return basis


def test_below_min_labels_it_continues_and_says_how_many_more() -> None:
    basis = HumanBasis()
    for _ in range(20):
        basis.add_pair(1.0, "confident", True)
        basis.add_label(1.0, 1.0, "confident", 1.0)  # 20 of 20 for the challenger: the interval is [1, 1]
    gate = decide_human(basis)
    cs = confidence_sequence(basis)
    assert cs is not None
    assert cs.low > 0.5
    assert gate.decision == "continue"
    assert gate.labels_needed == MIN_LABELS - 20
    assert str(MIN_LABELS - 20) in gate.reason
    empty = decide_human(HumanBasis())
    assert (empty.decision, empty.interval, empty.labels_needed) == ("continue", None, None)


def test_labels_needed_falls_as_labels_come_in() -> None:
    needed, rates = [], []
    for blocks in (2, 4, 8):
        gate = decide_human(_repeated(blocks))
        assert gate.decision == "continue", (blocks, gate)
        assert gate.interval is not None
        assert gate.labels_needed is not None
        needed.append(gate.labels_needed)
        rates.append(gate.interval.rate)
    assert rates == pytest.approx([0.55] * 3)
    assert needed[0] > needed[1] > needed[2] > 0, needed
    # Labels so far plus labels still needed: the pseudo-labels' inflation, held at its current size,
    # makes early forecasts pessimistic; it fades, and the forecast end point is reached.
    totals = [n + 20 * blocks for n, blocks in zip(needed, (2, 4, 8), strict=True)]
    assert totals[0] >= totals[1] >= totals[2], totals
    assert decide_human(_repeated(totals[2] // 20 + 1)).decision == "promote"
    # Where more labels of the labelled strata cannot clear a boundary, it says so instead of guessing.
    stuck = _repeated(2)
    for _ in range(1000):
        stuck.add_pair(1.0, "uncertain", sampled=True)  # more than half the pairs, none labelled yet
    gate = decide_human(stuck)
    assert gate.interval is not None
    assert gate.interval.unlabelled_share > 0.5
    assert labels_needed(gate.interval, alpha=ALPHA, min_effect=0.05) is None
    assert (gate.decision, gate.labels_needed) == ("continue", None)
    assert "more than" in gate.reason


@pytest.mark.parametrize(
    "call",
    [
        lambda: HumanBasis().add_pair(1.5, "confident"),
        lambda: HumanBasis().add_pair(-0.1, "confident"),
        lambda: HumanBasis().add_label(1.0, 2.0, "confident", 0.5),
        lambda: HumanBasis().add_label(1.0, 1.0, "confident", 0.0),
        lambda: HumanBasis().add_label(1.0, 1.0, "confident", 1.5),
        lambda: estimate(HumanBasis(), alpha=0.0),
        lambda: confidence_sequence(HumanBasis(), alpha=1.0),
        lambda: decide_human(HumanBasis(), alpha=-1.0),
        lambda: cs_radius_factor(0, ALPHA),
        lambda: cs_radius_factor(10, ALPHA, target_labels=0),
        lambda: stratum_estimate("empty", StratumSums()),
    ],
)
def test_bad_inputs_raise_value_error(call: object) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - each message is the input's own
        call()  # type: ignore[operator]


def _two_classes(seed: int, pairs: int = 40_000) -> HumanBasis:
    """20% uncertain pairs (judge right 55% of the time) audited at 10%, 80% confident (90%) at 5%."""
    rng = np.random.default_rng(seed)
    basis = HumanBasis()
    for stratum, share, accuracy, pi in (("uncertain", 0.2, 0.55, 0.10), ("confident", 0.8, 0.90, 0.05)):
        n = int(pairs * share)
        y = (rng.random(n) < 0.5).astype(float)
        f = np.where(rng.random(n) < accuracy, y, 1.0 - y)
        drawn = rng.random(n) < pi
        for i in range(n):
            basis.add_pair(float(f[i]), stratum, bool(drawn[i]))
            if drawn[i]:
                basis.add_label(float(f[i]), float(y[i]), stratum, pi)
    return basis


def test_neyman_shares_follow_each_class_spread_at_the_same_label_cost() -> None:
    basis = _two_classes(3)
    shares = human.neyman_shares(basis)
    assert shares is not None
    # Analytically (balanced classes, lambda at its optimum): spread 0.5 sqrt(1 - (2a - 1)^2).
    spread = {"uncertain": 0.5 * math.sqrt(1 - 0.1**2), "confident": 0.5 * math.sqrt(1 - 0.8**2)}
    cost = 0.2 * 0.10 + 0.8 * 0.05
    scale = cost / (0.2 * spread["uncertain"] + 0.8 * spread["confident"])
    for name, sd in spread.items():
        assert shares[name] == pytest.approx(scale * sd, rel=0.08)
    assert 0.2 * shares["uncertain"] + 0.8 * shares["confident"] == pytest.approx(cost, rel=0.05)
    # A class without labels enough to measure its spread: no recommendation rather than a guess.
    sparse = HumanBasis()
    sparse.add_pair(1.0, "uncertain", True)
    sparse.add_pair(1.0, "confident", False)
    assert human.neyman_shares(sparse) is None


def test_the_fixed_sample_interval_carries_the_finite_sample_correction_by_default() -> None:
    agreeing = HumanBasis()
    for i in range(2000):
        f = float(i % 2)
        agreeing.add_pair(f, "confident", i % 40 == 0)
        if i % 40 == 0:
            agreeing.add_label(f, f, "confident", 0.025)
    shipped, exact = estimate(agreeing, ALPHA), estimate(agreeing, ALPHA, pseudo=0.0)
    assert shipped is not None
    assert exact is not None
    assert shipped.rate == exact.rate
    assert shipped.std_error > 3 * exact.std_error  # 50 agreeing labels are not certainty


def _drawn_basis(labelled: int, pending: int, *, y_rate: float = 0.7, seed: int = 5) -> HumanBasis:
    """A stream where every tenth pair is drawn (pi 0.1); the first ``labelled`` draws are labelled and the
    next ``pending`` are not (yet)."""
    rng = np.random.default_rng(seed)
    basis = HumanBasis()
    draws = 0
    i = 0
    while draws < labelled + pending:
        f = float(rng.random() < 0.7)
        drawn = i % 10 == 0
        basis.add_pair(f, "confident", drawn, 0.1 if drawn else None)
        if drawn:
            if draws < labelled:
                y = f if rng.random() < 0.8 else float(rng.random() < y_rate)
                basis.add_label(f, y, "confident", 0.1)
            draws += 1
        i += 1
    return basis


def test_worst_case_completes_the_missing_labels_both_ways() -> None:
    complete = _drawn_basis(200, 0)
    cs = confidence_sequence(complete, ALPHA)
    assert cs is not None
    assert human.worst_case(complete, ALPHA) == (cs.low, cs.high)  # nothing missing: the same interval
    partial = _drawn_basis(200, 60)
    assert partial.pending == 60
    assert partial.missing("confident").labels == 60
    at_random = confidence_sequence(partial, ALPHA)
    bounds = human.worst_case(partial, ALPHA)
    assert at_random is not None
    assert bounds is not None
    assert bounds[0] < at_random.low
    assert bounds[1] > at_random.high
    # Completing with 0 is the same as those 60 labels having come back "champion".
    by_hand = HumanBasis.from_dict(partial.to_dict())
    done = partial.completed(0.0).strata["confident"]
    gap = partial.missing("confident")
    assert done.labels == partial.strata["confident"].labels + 60
    assert done.wy == pytest.approx(partial.strata["confident"].wy)
    assert done.w == pytest.approx(partial.strata["confident"].w + gap.w)
    assert partial.completed(1.0).strata["confident"].wy == pytest.approx(partial.strata["confident"].wy + gap.w)
    assert HumanBasis.from_dict(by_hand.to_dict()) == partial


def test_the_worst_case_gate_waits_for_missing_labels_the_default_does_not() -> None:
    basis = _drawn_basis(400, 300, y_rate=1.0)  # people clearly prefer the challenger
    assert human.decide_human(basis).decision == "promote"
    waiting = human.decide_human(basis, missing="worst_case")
    assert waiting.decision == "continue"
    assert "worst case of 300 missing labels" in waiting.reason
