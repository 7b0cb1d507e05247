"""The anytime-valid constructions side by side with confseq's where they are not the same construction.

Run from the checkout root: ``python -m bench.confseq_crosscheck`` (seconds on one core). The exact agreements
(same boundary, same e-value) are unit tests: ``tests/unit/test_confseq_crosscheck.py``, which also runs these
simulations at the settings below and asserts their figures. What the tables mean: docs/guides/drift-audit.md
(the agreement guard), docs/guides/scoreboard.md (the judge gate), docs/guides/human-valid.md (the human gate).

**Lower-side e-processes** (the agreement guard at its floor 0.70; the judge gate's "reject" test, which is the
same e-value at floor 1/2 + min_effect = 0.55): the project mixes the likelihood ratio over agreement q uniform on
(0, floor). confseq's one-sided beta-binomial mixture (``confseq.boundaries.beta_binomial_log_mixture``, on the
disagreements, g = 1 - floor, h = floor) mixes over a Beta(r/h, r/g) prior on the disagreement rate, truncated
above 1 - floor: centred on the floor, with r tuned so its boundary is tightest at ``T_OPT`` labels. Both are
nonnegative supermartingales under the null, so both are valid under continuous monitoring; they spend their
evidence differently. Each run draws labels agreeing independently with probability ``agreement`` and reports
the labels until each process reaches 1/alpha (median, 90th percentile) and the share of runs paused within
``HORIZON`` labels.

**The human gate's confidence sequence on labels alone** (one stratum, every pair labelled, lambda = 0): the
project's asymptotic normal-mixture sequence with its plug-in standard error against confseq's nonasymptotic
sequences for a mean in [0, 1] on the same labels: the conjugate-mixture Hoeffding sequence
(``conjmix_hoeffding_twosided_cs``: the same normal-mixture boundary with the worst-case sigma 1/2) and the
predictable-mixture empirical-Bernstein sequence (``predmix_empbern_twosided_cs``). Per outcome mix: the share
of runs whose interval covers the true mean at every look from ``MIN_LABELS`` to ``LABELS`` labels, and the
mean width at the tuning point (500 labels).
"""

from __future__ import annotations

import argparse
import importlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pairjudge.agents.audit.agreement_guard import trip_boundary
from pairjudge.agents.scores.human import MIN_LABELS
from pairjudge.agents.scores.human.basis import DEFAULT_TARGET_LABELS
from pairjudge.agents.scores.human.estimator import SumsArray, estimate_arrays

ALPHA = 0.05
#: confseq's beta-binomial mixture is tuned to be tightest at this many labels (its v_opt = floor (1 - floor) T_OPT).
T_OPT = 100
HORIZON = 3000
RUNS = 1000
#: The human-gate comparison: labels per run, and outcome mixes (win, tie, loss) of the challenger.
LABELS = 1000
OUTCOME_MIXES: tuple[tuple[float, float, float], ...] = (
    (0.5, 0.0, 0.5),
    (0.55, 0.2, 0.25),
    (0.8, 0.1, 0.1),
    (0.93, 0.05, 0.02),
)


def confseq_module(name: str) -> ModuleType:
    """A confseq module, imported after giving numpy back ``float_`` (an alias of float64 that numpy 2
    removed): confseq 0.0.11's pure-Python modules name it in their annotations, and import fails without it.
    Nothing else changes; ``confseq.boundaries`` (its C++ part) needs no help."""
    if "float_" not in np.__dict__:
        vars(np)["float_"] = np.float64
    return importlib.import_module(name)


def confseq_lower_boundary(floor: float, alpha: float, horizon: int, t_opt: int = T_OPT) -> NDArray[np.int64]:
    """For n = 1..``horizon`` labels, the most agreeing labels at which confseq's one-sided beta-binomial
    mixture, run on the disagreements against the null rate 1 - floor, reaches 1/alpha (-1: none can).
    The shape of :func:`pairjudge.agents.audit.agreement_guard.trip_boundary`."""
    boundaries: Any = confseq_module("confseq.boundaries")
    g, h = 1.0 - floor, floor
    n = np.arange(1, horizon + 1, dtype=np.float64)
    v, v_opt = g * h * n, g * h * t_opt

    def log_mixture(agreeing: NDArray[np.float64]) -> NDArray[np.float64]:
        s = (n - agreeing) - g * n  # the disagreements' sum, centred at the null rate
        return np.asarray(boundaries.beta_binomial_log_mixture(s, v, v_opt, g, h, alpha, True), dtype=np.float64)

    level = math.log(1.0 / alpha)
    # The bound on the centred sum gives the boundary up to rounding; the log mixture at the neighbouring
    # counts settles it (it falls as agreeing labels rise).
    bound = np.asarray(boundaries.beta_binomial_mixture_bound(v, alpha, v_opt, g, h, alpha, True), dtype=np.float64)
    guess = np.floor(floor * n - bound)
    out = np.full(horizon, -1, dtype=np.int64)
    for shift in (-1.0, 0.0, 1.0):
        candidate = np.clip(guess + shift, 0.0, n)
        trips = log_mixture(candidate) >= level
        out = np.where(trips & (candidate > out), candidate.astype(np.int64), out)
    return out


def labels_to_cross(boundary: NDArray[np.int64], agreement: float, runs: int, seed: int) -> NDArray[np.float64]:
    """Per run, the labels at which the agreeing count first falls to ``boundary`` (inf: never within it)."""
    rng = np.random.default_rng(seed)
    agreeing = np.cumsum(rng.random((runs, boundary.size)) < agreement, axis=1)
    crossed = agreeing <= boundary
    first: NDArray[np.float64] = np.argmax(crossed, axis=1).astype(np.float64) + 1.0
    first[~crossed.any(axis=1)] = math.inf
    return first


def quantile(labels: NDArray[np.float64], q: float) -> float:
    """The ``q`` quantile of labels-to-pause, inf when fewer than ``q`` of the runs paused (no interpolation
    between a finite count and a run that never paused)."""
    return float(np.sort(labels)[math.ceil(q * labels.size) - 1])


@dataclass(frozen=True, slots=True)
class PauseRow:
    floor: float
    agreement: float
    project_median: float
    project_p90: float
    project_paused: float
    confseq_median: float
    confseq_p90: float
    confseq_paused: float


def pause_table(
    floors: Sequence[float] = (0.7, 0.55),
    agreements: Sequence[float] = (0.3, 0.5, 0.6, 0.7, 0.85),
    *,
    runs: int = RUNS,
    horizon: int = HORIZON,
    alpha: float = ALPHA,
    seed: int = 41,
) -> list[PauseRow]:
    """The two lower-side e-processes on the same simulated label streams (common random numbers: one seed
    per row, both boundaries applied to the same draws), at each of ``agreements`` up to 0.2 above the floor and
    at the floor itself."""
    rows = []
    for floor in floors:
        ours = trip_boundary(floor, alpha, horizon)
        theirs = confseq_lower_boundary(floor, alpha, horizon)
        # The floor itself is always a row: there each process's false-alarm rate is at its bound.
        for i, agreement in enumerate(sorted({*agreements, floor})):
            if agreement > floor + 0.2:
                continue
            a = labels_to_cross(ours, agreement, runs, seed + i)
            b = labels_to_cross(theirs, agreement, runs, seed + i)
            rows.append(
                PauseRow(
                    floor,
                    agreement,
                    quantile(a, 0.5),
                    quantile(a, 0.9),
                    float(np.isfinite(a).mean()),
                    quantile(b, 0.5),
                    quantile(b, 0.9),
                    float(np.isfinite(b).mean()),
                )
            )
    return rows


def labels_only_sums(y: NDArray[np.float64]) -> SumsArray:
    """One stratum in which every pair is labelled (weight 1), after each label of each run: the human basis's
    sums over runs x labels. The judge's outcome is set to the label's; with lambda = 0 it is not read."""
    ones = np.ones_like(y)
    c = np.cumsum
    return SumsArray(
        pairs=c(ones, axis=1),
        f=c(y, axis=1),
        ff=c(y * y, axis=1),
        labels=c(ones, axis=1),
        w=c(ones, axis=1),
        w2=c(ones, axis=1),
        wy=c(y, axis=1),
        wf=c(y, axis=1),
        w2y=c(y, axis=1),
        w2f=c(y, axis=1),
        w2yy=c(y * y, axis=1),
        w2ff=c(y * y, axis=1),
        w2yf=c(y * y, axis=1),
    )


def project_sequence(y: NDArray[np.float64], alpha: float = ALPHA) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The human gate's confidence sequence (its defaults: finite-sample correction, tuned at 500 labels) on
    labels alone, after each label: (low, high), runs x labels."""
    e = estimate_arrays({"labels": labels_only_sums(y)}, alpha, lam=0.0, sequence=True)
    return e.low, e.high


@dataclass(frozen=True, slots=True)
class CoverageRow:
    mix: tuple[float, float, float]
    mean: float
    #: Per sequence (project, confseq Hoeffding, confseq empirical Bernstein): covered at every look, width at 500.
    covered: tuple[float, float, float]
    width: tuple[float, float, float]


def coverage_table(
    mixes: Sequence[tuple[float, float, float]] = OUTCOME_MIXES,
    *,
    runs: int = RUNS,
    labels: int = LABELS,
    alpha: float = ALPHA,
    seed: int = 7,
) -> list[CoverageRow]:
    predmix: Any = confseq_module("confseq.predmix")
    conjmix: Any = confseq_module("confseq.conjmix_bounded")
    looks = slice(MIN_LABELS - 1, labels)
    at = DEFAULT_TARGET_LABELS - 1
    rows = []
    for i, (win, tie, loss) in enumerate(mixes):
        rng = np.random.default_rng(seed + i)
        u = rng.random((runs, labels))
        y = np.where(u < win, 1.0, np.where(u < win + tie, 0.5, 0.0))
        mean = win + tie / 2
        low, high = project_sequence(y, alpha)
        sequences = [(low, high)]

        def hoeffding(x: NDArray[np.float64]) -> Any:
            return conjmix.conjmix_hoeffding_twosided_cs(x, t_opt=DEFAULT_TARGET_LABELS, alpha=alpha)

        def bernstein(x: NDArray[np.float64]) -> Any:
            return predmix.predmix_empbern_twosided_cs(x, alpha=alpha)

        for make in (hoeffding, bernstein):
            pairs = [make(row) for row in y]
            sequences.append((np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])))
        covered = []
        width = []
        for lo, hi in sequences:
            inside = (lo[:, looks] <= mean) & (mean <= hi[:, looks])
            covered.append(float(inside.all(axis=1).mean()))
            width.append(float((hi[:, at] - lo[:, at]).mean()))
        rows.append(
            CoverageRow((win, tie, loss), mean, (covered[0], covered[1], covered[2]), (width[0], width[1], width[2]))
        )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args(argv)
    print(f"Lower-side e-processes, alpha {ALPHA}, {args.runs} runs, {HORIZON} labels; confseq tuned at {T_OPT}")
    print("floor  agreement | project: median  p90  paused | confseq beta-binomial: median  p90  paused")
    for r in pause_table(runs=args.runs):
        print(
            f"{r.floor:5.2f}  {r.agreement:9.2f} | {r.project_median:15.0f} {r.project_p90:5.0f}"
            f" {r.project_paused:7.3f} | {r.confseq_median:29.0f} {r.confseq_p90:5.0f} {r.confseq_paused:7.3f}"
        )
    print()
    print(f"Confidence sequences on labels alone, alpha {ALPHA}, {args.runs} runs, looks {MIN_LABELS}..{LABELS} labels")
    print("(win, tie, loss)     mean | covered at every look: project  hoeffding  emp.bernstein | width at 500: same")
    for c in coverage_table(runs=args.runs):
        print(
            f"{c.mix!s:18} {c.mean:6.3f} | {c.covered[0]:30.3f} {c.covered[1]:10.3f} {c.covered[2]:14.3f}"
            f" | {c.width[0]:13.3f} {c.width[1]:6.3f} {c.width[2]:6.3f}"
        )


if __name__ == "__main__":
    main()
