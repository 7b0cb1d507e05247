"""The judge cascade's guarantee (``agents.stats.calibrate_cascade``, issue 28) in simulation, beside the strong
judge alone.

Run from the checkout root: ``python -m bench.cascade_sim`` (1,000 runs, about 5 s on 2 cores),
``--runs 200`` for a quick look, ``--seed N``, ``--target 0.85``. It prints one table.

**Model** (issue 28's two judges; probit units). Each pair j has a difficulty ``d_j ~ N(0, 1)`` shared by the
judges: hard pairs are hard for both. Judge k's skill on the pair is ``m_kj = alpha_k - gamma_k d_j + omega
e_kj`` (``e_kj ~ N(0, 1)``, its own per-pair luck; ``gamma_k`` = 1, ``omega`` = 0.5), it agrees with the human
with probability ``p_kj = Phi(m_kj)``, and it says confidence ``c_kj = Phi(m_kj + tau_k z_kj)``
(``z_kj ~ N(0, 1)``): a noisy reading of its own chance, informative but overconfident. ``alpha_k`` is set so
that the judge's agreement over all pairs, ``Phi(alpha_k / sqrt(1 + gamma_k^2 + omega^2))``, is the issue's:
0.72 for the cheap judge (``tau`` 1.2) and 0.85 for the strong one (``tau`` 0.8). The two judges' correctness
correlates through ``d`` (latent correlation ``gamma_1 gamma_2 / (1 + gamma^2 + omega^2)`` = 0.44).

**Prices**: a cheap call is the unit, a strong call costs 20, and a tier judges both orders (2 calls). Every
pair pays tier 1 (2 units), a pair that reaches tier 2 pays 40 more; the strong judge alone pays 40 a pair.
Cost per auto-decided pair is the cost of all pairs over the auto-decided ones.

**Per run**: ``--labels`` calibration pairs (1,500), each judged by both tiers, with a human label drawn from
``p_kj``; ``calibrate_cascade`` at target ``--target`` (0.8) and risk 0.05 per tier (total 0.1); the strong judge
alone by ``calibrate_threshold`` at the same target and the total risk (the same guarantee). The truth, what
the thresholds give over the pairs' whole distribution (an endless fresh test set), is computed, not sampled:
``TruthTable`` integrates the model by quadrature (it agrees with a sample of millions of fresh pairs to 1e-4,
see tests/unit/test_cascade_guarantee.py). A run's guarantee held when every tier that got a threshold
has true agreement >= its target on the pairs it decides (what ``calibrate_cascade`` claims, with
probability >= 0.9); "auto-decided >= target" is the weaker statement about all auto-decided pairs together.

Two more columns: tier 2 calibrated on a fresh calibration set's pairs that reach it (the drift audit's path:
labels not used to choose tier 1's threshold), to measure the same-data selection ``calibrate_cascade``'s
docstring discusses; and both tiers' thresholds set naively, the lowest grid threshold whose calibration
agreement is >= target (with at least 40 pairs), no binomial test: that is what the test is for.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from rich.table import Table
from scipy.special import ndtr, ndtri

from pairjudge.agents.stats import (
    DEFAULT_THRESHOLD_GRID,
    calibrate_cascade,
    calibrate_threshold,
    wilson_interval,
)
from pairjudge_dev.bench import console, percentile

#: The thresholds a tier may get, ascending.
GRID = np.array(sorted(DEFAULT_THRESHOLD_GRID))
#: The index standing for "no threshold": the tier decides nothing.
NONE = len(GRID)
#: Calls per tier and pair: a tier judges both orders.
CALLS = 2


@dataclass(frozen=True, slots=True)
class JudgeModel:
    """One judge of the model (see the module docstring): its agreement with humans over all pairs, how noisy
    its confidence is (``tau``), how much the shared difficulty weighs on it (``gamma``) and its price a call."""

    name: str
    agreement: float
    tau: float
    price: float
    gamma: float = 1.0

    def alpha(self, omega: float) -> float:
        """The skill's mean that gives the judge its agreement over all pairs."""
        return float(ndtri(self.agreement)) * math.sqrt(1.0 + self.gamma**2 + omega**2)


@dataclass(frozen=True, slots=True)
class Model:
    judges: tuple[JudgeModel, ...]
    omega: float = 0.5

    def draw(self, n: int, rng: np.random.Generator) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``n`` pairs: each judge's confidence and chance of agreeing with the human, arrays (judges, n)."""
        d = rng.standard_normal(n)
        conf = np.empty((len(self.judges), n))
        prob = np.empty((len(self.judges), n))
        for k, j in enumerate(self.judges):
            m = j.alpha(self.omega) - j.gamma * d + self.omega * rng.standard_normal(n)
            prob[k] = ndtr(m)
            conf[k] = ndtr(m + j.tau * rng.standard_normal(n))
        return conf, prob


#: Issue 28's judges: a cheap one at 0.72 agreement with informative confidence, and a strong one at 0.85, 20x
#: the price.
ISSUE_MODEL = Model((JudgeModel("cheap", 0.72, tau=1.2, price=1.0), JudgeModel("strong", 0.85, tau=0.8, price=20.0)))


def index(threshold: float | None) -> int:
    """A threshold's index in ``GRID`` (``NONE`` for no threshold)."""
    if threshold is None:
        return NONE
    i = int(np.searchsorted(GRID, threshold))
    if i == NONE or GRID[i] != threshold:
        raise ValueError(f"{threshold!r} is not a threshold of the grid")
    return i


@dataclass(frozen=True, slots=True)
class Truth:
    """What one pair of thresholds gives over the pairs' whole distribution: the agreement of each tier's
    decisions and of all, each tier's share of the pairs, and the share reaching tier 2."""

    tier_agreement: tuple[float | None, float | None]
    agreement: float | None
    decided: tuple[float, float]  # share of all pairs each tier decides
    reach2: float

    @property
    def coverage(self) -> float:
        return self.decided[0] + self.decided[1]


class TruthTable:
    """The true figures of a two-judge model for every pair of grid thresholds, computed exactly (up to
    quadrature error, below 1e-12 here) rather than sampled, so no run's verdict hangs on sampling noise.

    Given the two judges' skills ``(m_1, m_2)`` (jointly normal: correlated through the difficulty), a pair is
    decided by judge k at t with probability ``F_k = Phi((m_k - Phi^-1(t)) / tau_k)`` and agrees with
    probability ``Phi(m_k)``, independently; every figure is an expectation of products of these over
    ``(m_1, m_2)``, taken by Gauss-Hermite quadrature on a ``nodes`` x ``nodes`` grid.
    """

    def __init__(self, model: Model, nodes: int = 60) -> None:
        if len(model.judges) != 2:
            raise ValueError("the truth table is for two-tier models")
        j1, j2 = model.judges
        x, w = np.polynomial.hermite_e.hermegauss(nodes)
        w = w / math.sqrt(2.0 * math.pi)
        xs, ys = (a.ravel() for a in np.meshgrid(x, x, indexing="ij"))
        weight = np.outer(w, w).ravel()
        s1, s2 = math.hypot(j1.gamma, model.omega), math.hypot(j2.gamma, model.omega)
        rho = j1.gamma * j2.gamma / (s1 * s2)
        m1 = j1.alpha(model.omega) + s1 * xs
        m2 = j2.alpha(model.omega) + s2 * (rho * xs + math.sqrt(1.0 - rho * rho) * ys)
        q = np.append(ndtri(GRID), np.inf)  # per threshold index; the last is "no threshold"
        f1 = ndtr((m1[None, :] - q[:, None]) / j1.tau)  # (thresholds, nodes): P(c_1 >= t | m)
        f2 = ndtr((m2[None, :] - q[:, None]) / j2.tau)
        p1, p2 = ndtr(m1), ndtr(m2)
        reach = (1.0 - f1) * weight
        self._n1, self._s1 = f1 @ weight, f1 @ (weight * p1)
        self._n2, self._s2 = reach @ f2.T, reach @ (f2 * p2).T  # (i1, i2)
        self._reach2 = reach.sum(axis=1)
        self._alone_n, self._alone_s = f2 @ weight, f2 @ (weight * p2)

    def cascade(self, t1: float | None, t2: float | None) -> Truth:
        i1, i2 = index(t1), index(t2)
        n1, s1 = float(self._n1[i1]), float(self._s1[i1])
        n2, s2 = float(self._n2[i1, i2]), float(self._s2[i1, i2])
        return Truth(
            tier_agreement=(s1 / n1 if n1 > 0 else None, s2 / n2 if n2 > 0 else None),
            agreement=(s1 + s2) / (n1 + n2) if n1 + n2 > 0 else None,
            decided=(n1, n2),
            reach2=float(self._reach2[i1]),
        )

    def strong_alone(self, t: float | None) -> tuple[float | None, float]:
        """The second judge alone at ``t``: its agreement on the pairs it decides, and their share."""
        i = index(t)
        n = float(self._alone_n[i])
        return (float(self._alone_s[i]) / n if n > 0 else None), n


def naive_threshold(conf: Sequence[float], agrees: Sequence[bool], target: float, min_pairs: int = 40) -> float | None:
    """The lowest grid threshold whose calibration pairs above it agree at ``target`` or better, with at least
    ``min_pairs`` of them: the point estimate without the binomial test (what not to do)."""
    c, a = np.asarray(conf), np.asarray(agrees, dtype=np.float64)
    order = np.argsort(-c, kind="stable")
    c_sorted, agree_prefix = c[order], np.concatenate(([0.0], np.cumsum(a[order])))
    m = np.searchsorted(-c_sorted, -GRID, side="right")  # pairs with c >= t, per grid threshold
    ok = (m >= min_pairs) & (agree_prefix[m] >= target * m)
    return float(GRID[np.argmax(ok)]) if ok.any() else None


def held(agreement: float | None, target: float) -> bool:
    """The guarantee's event for one tier or the whole: nothing decided, or the truth at the target or above."""
    return agreement is None or agreement >= target


@dataclass(frozen=True, slots=True)
class Run:
    """One calibration draw's thresholds and their true figures."""

    thresholds: tuple[float | None, float | None]
    truth: Truth
    strong_threshold: float | None
    strong_agreement: float | None
    strong_coverage: float
    fresh_threshold2: float | None  # tier 2 calibrated on a fresh set's pairs reaching it
    fresh_agreement2: float | None
    naive: Truth
    # Tier 2's agreement over all the calibration pairs reaching it, minus the truth (P(tier 2 agrees | the pair
    # reaches it under t1)): on the same calibration set, and on a fresh one. The same-data selection of
    # calibrate_cascade's docstring would show as a difference.
    reach_bias: float | None
    fresh_reach_bias: float | None


@dataclass(frozen=True, slots=True)
class Setting:
    model: Model = ISSUE_MODEL
    targets: tuple[float, float] = (0.8, 0.8)
    risks: tuple[float, float] = (0.05, 0.05)
    labels: int = 1500

    @property
    def target(self) -> float:
        return min(self.targets)

    @property
    def risk(self) -> float:
        return math.fsum(self.risks)

    def cost_per_pair(self, reach2: float) -> float:
        """Units a pair costs in the cascade: tier 1 always, tier 2 when the pair reaches it."""
        cheap, strong = self.model.judges
        return CALLS * (cheap.price + strong.price * reach2)

    @property
    def strong_cost_per_pair(self) -> float:
        return CALLS * self.model.judges[1].price


def simulate(setting: Setting, runs: int, seed: int) -> list[Run]:
    """``runs`` calibrations of the cascade, the strong judge alone and the two comparison variants."""
    rng = np.random.default_rng(seed)
    truth = TruthTable(setting.model)
    out = []
    for _ in range(runs):
        conf, prob = setting.model.draw(setting.labels, rng)
        agrees = rng.random(prob.shape) < prob
        g = calibrate_cascade(conf.tolist(), agrees.tolist(), setting.targets, setting.risks)
        t1, t2 = g.thresholds
        alone = calibrate_threshold(conf[1].tolist(), agrees[1].tolist(), setting.target, setting.risk)
        strong_agreement, strong_coverage = truth.strong_alone(alone.threshold)
        # The audit's path for tier 2: labels of pairs reaching it under t1, not used to choose t1.
        f_conf, f_prob = setting.model.draw(setting.labels, rng)
        f_agrees = rng.random(f_prob.shape) < f_prob
        f_reach = f_conf[0] < t1 if t1 is not None else np.ones(setting.labels, dtype=bool)
        fresh = calibrate_threshold(
            f_conf[1][f_reach].tolist(), f_agrees[1][f_reach].tolist(), setting.targets[1], setting.risks[1]
        )
        fresh_truth = truth.cascade(t1, fresh.threshold)
        reach = conf[0] < t1 if t1 is not None else np.ones(setting.labels, dtype=bool)
        reach_truth = truth.cascade(t1, 0.0).tier_agreement[1]  # threshold 0: every pair reaching tier 2
        # Naive thresholds, the same reach rule.
        n1 = naive_threshold(conf[0].tolist(), agrees[0].tolist(), setting.targets[0])
        n_reach = conf[0] < n1 if n1 is not None else np.ones(setting.labels, dtype=bool)
        n2 = naive_threshold(conf[1][n_reach].tolist(), agrees[1][n_reach].tolist(), setting.targets[1])
        out.append(
            Run(
                thresholds=(t1, t2),
                truth=truth.cascade(t1, t2),
                strong_threshold=alone.threshold,
                strong_agreement=strong_agreement,
                strong_coverage=strong_coverage,
                fresh_threshold2=fresh.threshold,
                fresh_agreement2=fresh_truth.tier_agreement[1],
                naive=truth.cascade(n1, n2),
                reach_bias=_bias(agrees[1][reach], reach_truth),
                fresh_reach_bias=_bias(f_agrees[1][f_reach], reach_truth),
            )
        )
    return out


def _bias(agrees: NDArray[np.bool_], truth: float | None) -> float | None:
    return float(agrees.mean()) - truth if agrees.size and truth is not None else None


@dataclass(frozen=True, slots=True)
class Summary:
    """Shares of runs and figures over runs, for one way of choosing thresholds."""

    runs: int
    with_threshold: int  # runs where some tier (or the judge alone) got a threshold
    every_tier_held: int  # the guaranteed event
    tier_held: tuple[int, ...]
    overall_held: int  # auto-decided pairs as a whole >= target
    agreements: tuple[float, ...]  # true agreement of the auto-decided pairs, runs with any
    coverages: tuple[float, ...]
    tier1_shares: tuple[float, ...]
    costs_per_pair: tuple[float, ...]
    costs_per_decided: tuple[float, ...]  # runs with coverage > 0


def summarise_cascade(setting: Setting, truths: Sequence[Truth]) -> Summary:
    targets = setting.targets
    tier_held = tuple(sum(held(t.tier_agreement[k], targets[k]) for t in truths) for k in range(2))
    costs = [setting.cost_per_pair(t.reach2) for t in truths]
    return Summary(
        runs=len(truths),
        with_threshold=sum(t.coverage > 0 for t in truths),
        every_tier_held=sum(all(held(t.tier_agreement[k], targets[k]) for k in range(2)) for t in truths),
        tier_held=tier_held,
        overall_held=sum(held(t.agreement, setting.target) for t in truths),
        agreements=tuple(t.agreement for t in truths if t.agreement is not None),
        coverages=tuple(t.coverage for t in truths),
        tier1_shares=tuple(t.decided[0] for t in truths),
        costs_per_pair=tuple(costs),
        costs_per_decided=tuple(c / t.coverage for c, t in zip(costs, truths, strict=True) if t.coverage > 0),
    )


def summarise_strong(setting: Setting, runs: Sequence[Run]) -> Summary:
    cost = setting.strong_cost_per_pair
    ok = sum(held(r.strong_agreement, setting.target) for r in runs)
    return Summary(
        runs=len(runs),
        with_threshold=sum(r.strong_threshold is not None for r in runs),
        every_tier_held=ok,
        tier_held=(ok,),
        overall_held=ok,
        agreements=tuple(r.strong_agreement for r in runs if r.strong_agreement is not None),
        coverages=tuple(r.strong_coverage for r in runs),
        tier1_shares=(),
        costs_per_pair=tuple(cost for _ in runs),
        costs_per_decided=tuple(cost / r.strong_coverage for r in runs if r.strong_coverage > 0),
    )


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def mean_se(values: Sequence[float | None]) -> str:
    xs = [v for v in values if v is not None]
    if len(xs) < 2:
        return "—"
    m = mean(xs)
    se = math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs))
    return f"{m:+.5f} ± {se:.5f}"


def share(count: int, runs: int) -> str:
    lo, hi = wilson_interval(count, runs)
    return f"{count / runs:.3f} [{lo:.3f}, {hi:.3f}]" if runs else "—"


def spread(values: Sequence[float], digits: int = 3) -> str:
    """Mean, and the 5th percentile after a slash."""
    if not values:
        return "—"
    return f"{mean(values):.{digits}f} / {percentile(values, 0.05):.{digits}f}"


def report(setting: Setting, runs: Sequence[Run], seconds: float) -> None:
    cascade = summarise_cascade(setting, [r.truth for r in runs])
    strong = summarise_strong(setting, runs)
    naive = summarise_cascade(setting, [r.naive for r in runs])
    n = len(runs)
    cheap_judge, strong_judge = setting.model.judges
    console.print(
        f"\n[bold]Judge cascade[/bold]: {cheap_judge.name} (agreement {cheap_judge.agreement:g}, "
        f"{cheap_judge.price:g} unit a call) then {strong_judge.name} ({strong_judge.agreement:g}, "
        f"{strong_judge.price:g} units), both orders per tier; {n} runs of {setting.labels} calibration pairs, "
        f"true agreement over the model's distribution; shares with a 95% Wilson interval; "
        f"'mean / p5' is the mean and the 5th percentile over runs"
    )
    table = Table()
    table.add_column("", justify="left")
    table.add_column("cascade", justify="right")
    table.add_column(f"{strong_judge.name} alone", justify="right")
    table.add_column("cascade, naive thresholds", justify="right")
    targets = "/".join(f"{t:g}" for t in setting.targets)
    risks = " + ".join(f"{r:g}" for r in setting.risks)
    table.add_row("target (per tier)", targets, f"{setting.target:g}", targets)
    table.add_row("total risk", f"{risks} = {setting.risk:g}", f"{setting.risk:g}", "(none: no test)")
    table.add_row("runs with a threshold", share(cascade.with_threshold, n), share(strong.with_threshold, n),
                  share(naive.with_threshold, n))  # fmt: skip
    table.add_row(
        f"guarantee held (every tier >= target; claim >= {1 - setting.risk:g})",
        share(cascade.every_tier_held, n),
        share(strong.every_tier_held, n),
        share(naive.every_tier_held, n),
    )
    for k in range(2):
        table.add_row(
            f"tier {k + 1} >= target (claim >= {1 - setting.risks[k]:g})",
            share(cascade.tier_held[k], n),
            share(strong.tier_held[0], n) if k == 1 else "",
            share(naive.tier_held[k], n),
        )
    table.add_row(
        "auto-decided as a whole >= target", share(cascade.overall_held, n), share(strong.overall_held, n),
        share(naive.overall_held, n),
    )  # fmt: skip
    table.add_row("true agreement, auto-decided (mean / p5)", spread(cascade.agreements), spread(strong.agreements),
                  spread(naive.agreements))  # fmt: skip
    table.add_row("coverage (mean / p5)", spread(cascade.coverages), spread(strong.coverages),
                  spread(naive.coverages))  # fmt: skip
    table.add_row("decided by tier 1 (mean / p5)", spread(cascade.tier1_shares), "", spread(naive.tier1_shares))
    table.add_row("cost a pair, units (mean)", f"{mean(cascade.costs_per_pair):.1f}",
                  f"{mean(strong.costs_per_pair):.1f}", f"{mean(naive.costs_per_pair):.1f}")  # fmt: skip
    table.add_row("cost an auto-decided pair (mean)", f"{mean(cascade.costs_per_decided):.1f}",
                  f"{mean(strong.costs_per_decided):.1f}", f"{mean(naive.costs_per_decided):.1f}")  # fmt: skip
    console.print(table)
    fresh_held = sum(held(r.fresh_agreement2, setting.targets[1]) for r in runs)
    ratio = mean(cascade.costs_per_decided) / mean(strong.costs_per_decided)
    console.print(
        f"tier 2 calibrated on fresh pairs (the audit's path) >= target: {share(fresh_held, n)}, "
        f"against {share(cascade.tier_held[1], n)} on the same calibration set"
    )
    console.print(
        "tier 2's agreement on the calibration pairs reaching it, minus the truth (mean ± standard error): "
        f"same set {mean_se([r.reach_bias for r in runs])}, fresh set {mean_se([r.fresh_reach_bias for r in runs])}"
    )
    console.print(
        f"cost an auto-decided pair, cascade ÷ {strong_judge.name} alone: {ratio:.2f}; run time {seconds:.0f} s"
    )
    console.print(
        f"CASCADE held={cascade.every_tier_held / n:.3f} overall={cascade.overall_held / n:.3f} "
        f"coverage={mean(cascade.coverages):.3f} strong_coverage={mean(strong.coverages):.3f} cost_ratio={ratio:.3f}"
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=1000, help="calibration draws (1000)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (1)")
    parser.add_argument("--labels", type=int, default=1500, help="calibration pairs per run (1500)")
    parser.add_argument("--target", type=float, default=0.8, help="each tier's target agreement (0.8)")
    parser.add_argument("--risk", type=float, default=0.05, help="each tier's risk (0.05; total twice that)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.labels < 1 or not 0 < args.target < 1 or not 0 < args.risk < 0.5:
        parser.error("--runs and --labels must be positive, --target in (0, 1), --risk in (0, 0.5)")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    setting = Setting(
        targets=(args.target, args.target),
        risks=(args.risk, args.risk),
        labels=args.labels,
    )
    started = time.monotonic()
    runs = simulate(setting, args.runs, args.seed)
    report(setting, runs, time.monotonic() - started)


if __name__ == "__main__":
    main()
