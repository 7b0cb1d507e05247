"""The human basis's claims (``agents/scores/human/``) in simulation, beside the judge-basis gate.

Run from the checkout root: ``python -m bench.human_gate`` (1,000 streams per setting, a few minutes on 2
cores), ``--streams 200`` for a quick look, ``--only null,power`` for some tables. It prints Markdown tables.

**Model.** A stream is ``--pairs`` decisive pairs (20,000; 40,000 for the power table). Each pair's human
outcome is ``y ~ Bernoulli(p)``; the judge agrees with the person with accuracy ``a`` and leans towards the
challenger by ``b`` on its marginal rate: ``P(f=1|y=1) = a1``, ``P(f=1|y=0) = a0`` with
``p a1 + (1-p)(1-a0) = a`` and ``p a1 + (1-p) a0 = p + b``; combinations with no such ``a1, a0`` in [0, 1]
are n/a. A pair is sampled for a label with its stratum's inclusion probability (independent Bernoulli
draws, as ``agents.sampling`` draws by hash); the label arrives at once, or after an exponential delay
(``delay``, in pairs) and not at all if that is past the stream's end (pending). The sums are cumulative
sums over (streams x pairs) arrays and every state is evaluated by the shipped code
(``human.decide_arrays`` / ``human.estimate_arrays``, elementwise over the same formulas as
``decide_human``), after every label (``check="label"``) or after every pair (``check="pair"``).

**Per stream**: the first decision of the gate (``decide_human``'s rule; promote / reject / none within the
stream), the labels and pairs it took; whether the confidence sequence held the true ``p`` at every
checkpoint with at least ``MIN_LABELS`` labels (the gate's range) and at every checkpoint at all; whether
the fixed-n interval held it at the end. Rates carry a 95% Wilson interval over the streams.

**The judge basis** is ``agents.scores.gate`` on the judge's decisive verdicts, through
``pairjudge_dev.gate_sim.simulate`` (its verdicts are Bernoulli(p + b) whatever the human does).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from pairjudge.agents.scores import human
from pairjudge.agents.scores.human import MIN_LABELS, PROMOTE, REJECT, SumsArray
from pairjudge.agents.stats import wilson_interval
from pairjudge_dev.gate_sim import simulate

ALPHA = 0.05
MIN_EFFECT = 0.05
ACCURACIES = (0.65, 0.80, 0.95)
BIASES = (0.0, 0.05, 0.10)
#: Streams are simulated this many at a time (memory: a few (chunk x pairs) arrays).
CHUNK = 100


def judge_rates(p: float, accuracy: float, bias: float) -> tuple[float, float] | None:
    """``(P(f=1|y=1), P(f=1|y=0))`` for a judge of this accuracy and bias, or None if there is none."""
    a1 = (accuracy + 2 * p + bias - 1) / (2 * p)
    a0 = (1 - accuracy + bias) / (2 * (1 - p))
    tol = 1e-12
    if not (-tol <= a1 <= 1 + tol and -tol <= a0 <= 1 + tol):
        return None
    return min(1.0, max(0.0, a1)), min(1.0, max(0.0, a0))


@dataclass(frozen=True, slots=True)
class Stratum:
    name: str
    share: float  # of pairs
    accuracy: float
    bias: float
    pi: float  # inclusion probability


@dataclass(frozen=True, slots=True)
class Setting:
    p: float
    strata: tuple[Stratum, ...]
    pairs: int = 20_000
    delay: float = 0.0  # mean label delay in pairs (0: at once)
    check: str = "label"  # "label" or "pair"

    def feasible(self) -> bool:
        return all(judge_rates(self.p, s.accuracy, s.bias) is not None for s in self.strata)


def uniform(p: float, accuracy: float, bias: float, pi: float, **kw: float | int | str) -> Setting:
    return Setting(p, (Stratum("confident", 1.0, accuracy, bias, pi),), **kw)  # type: ignore[arg-type]


@dataclass
class Outcome:
    """One setting and one estimator (``lam``) over its streams."""

    streams: int = 0
    promoted: int = 0
    rejected: int = 0
    labels_at_decision: list[float] = field(default_factory=list)  # inf: no decision within the stream
    labels_at_promotion: list[float] = field(default_factory=list)
    cs_covered: int = 0  # at every checkpoint with >= MIN_LABELS labels
    cs_covered_any: int = 0  # at every checkpoint with an estimate
    fixed_covered: int = 0
    labels: int = 0  # at the end, summed over streams
    pending: int = 0  # samples whose label had not come by the end, summed

    def add(self, other: Outcome) -> None:
        for name in ("streams", "promoted", "rejected", "cs_covered", "cs_covered_any", "fixed_covered", "labels"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.pending += other.pending
        self.labels_at_decision += other.labels_at_decision
        self.labels_at_promotion += other.labels_at_promotion

    def median_labels(self) -> float:
        return float(np.median(self.labels_at_decision)) if self.labels_at_decision else math.inf


@dataclass(frozen=True, slots=True)
class Variant:
    """One way of reading the same streams: ``decide_human``'s knobs (None: the module's defaults)."""

    lam: float | None = None
    pseudo: float | None = None
    min_labels: int = MIN_LABELS
    #: 0: no minimum per stratum. These tables measure one look's interval as the gate read it before
    #: issue 41 (no running intersection, no per-stratum minimum); ``bench.human_stick`` measures both.
    min_stratum_labels: int | None = 0


PPI = Variant()
ALONE = Variant(lam=0.0)

_LABEL_SUMS = ("labels", "w", "w2", "wy", "wf", "w2y", "w2f", "w2yy", "w2ff", "w2yf")


def label_sums(
    labels: NDArray[np.float64],
    w: NDArray[np.float64],
    w2: NDArray[np.float64],
    y: NDArray[np.float64],
    f: NDArray[np.float64],
) -> dict[str, NDArray[np.float64]]:
    """What each label adds to each of ``_LABEL_SUMS`` (``agents.scores.human.basis`` adds the same, one label at a
    time): ``w`` its weight (1/pi), ``w2`` the weight squared, ``y`` people's outcome, ``f`` the judge's."""
    return {
        "labels": labels, "w": w, "w2": w2, "wy": w * y, "wf": w * f, "w2y": w2 * y, "w2f": w2 * f,
        "w2yy": w2 * y * y, "w2ff": w2 * f * f, "w2yf": w2 * y * f,
    }  # fmt: skip


def _chunk(setting: Setting, streams: int, rng: np.random.Generator, variants: Sequence[Variant]) -> list[Outcome]:
    big_t = setting.pairs
    shares = np.cumsum([s.share for s in setting.strata])
    which = np.searchsorted(shares, rng.random((streams, big_t)) * shares[-1], side="right")
    which = np.minimum(which, len(setting.strata) - 1)
    rates = [judge_rates(setting.p, s.accuracy, s.bias) for s in setting.strata]
    if any(r is None for r in rates):
        raise ValueError(f"infeasible judge in {setting}")
    a1 = np.array([r[0] for r in rates if r is not None])
    a0 = np.array([r[1] for r in rates if r is not None])
    pis = np.array([s.pi for s in setting.strata])
    y = rng.random((streams, big_t)) < setting.p
    f = (rng.random((streams, big_t)) < np.where(y, a1[which], a0[which])).astype(np.float64)
    y_f = y.astype(np.float64)
    sampled = rng.random((streams, big_t)) < pis[which]
    rows, cols = np.nonzero(sampled)
    arrival = cols.astype(np.float64)
    if setting.delay > 0:
        arrival = arrival + rng.exponential(setting.delay, size=arrival.shape)
    arrived = arrival < big_t
    pending = int((~arrived).sum())
    rows, cols, arrival = rows[arrived], cols[arrived], arrival[arrived]
    order = np.lexsort((arrival, rows))
    rows, cols, arrival = rows[order], cols[order], arrival[order]
    per_row = np.bincount(rows, minlength=streams)
    width = max(int(per_row.max()), 1)
    starts = np.concatenate(([0], np.cumsum(per_row)[:-1]))
    slot = np.arange(rows.size) - starts[rows]

    def padded(values: NDArray[np.float64]) -> NDArray[np.float64]:
        out = np.zeros((streams, width))
        out[rows, slot] = values
        return out

    lab_which = which[rows, cols]
    lab_f, lab_y, lab_w = f[rows, cols], y_f[rows, cols], 1.0 / pis[lab_which]
    # Checkpoints: (pair index seen, labels arrived) per stream, after every label or every pair.
    if setting.check == "label":
        seen = np.zeros((streams, width), dtype=np.int64)
        seen[rows, slot] = np.floor(arrival).astype(np.int64)
        count = np.tile(np.arange(1, width + 1), (streams, 1))
        valid = count <= per_row[:, None]
    else:
        seen = np.tile(np.arange(big_t), (streams, 1))
        hist = np.zeros((streams, big_t), dtype=np.int64)
        np.add.at(hist, (rows, np.floor(arrival).astype(np.int64)), 1)
        count = np.cumsum(hist, axis=1)
        valid = np.ones((streams, big_t), dtype=bool)
    final_seen = np.full((streams, 1), big_t - 1)
    final_count = per_row[:, None]

    def sums_at(idx_seen: NDArray[np.int64], idx_count: NDArray[np.int64]) -> dict[str, SumsArray]:
        out: dict[str, SumsArray] = {}
        for k, s in enumerate(setting.strata):
            mine = which == k
            pair_cum = {
                "pairs": np.cumsum(mine, axis=1, dtype=np.float64),
                "f": np.cumsum(mine * f, axis=1),
                "ff": np.cumsum(mine * f * f, axis=1),
            }
            at = {name: np.take_along_axis(c, idx_seen, axis=1) for name, c in pair_cum.items()}
            lab = (lab_which == k).astype(np.float64)
            w, w2 = lab * lab_w, lab * lab_w * lab_w
            raw = label_sums(lab, w, w2, lab_y, lab_f)
            for name in _LABEL_SUMS:
                c = np.concatenate((np.zeros((streams, 1)), np.cumsum(padded(raw[name]), axis=1)), axis=1)
                at[name] = np.take_along_axis(c, idx_count, axis=1)
            out[s.name] = SumsArray(**at)
        return out

    strata = sums_at(seen, count)
    final = sums_at(final_seen, final_count)
    results = []
    for v in variants:
        gate = human.decide_arrays(
            human.BasisArrays(strata),
            alpha=ALPHA,
            min_effect=MIN_EFFECT,
            lam=v.lam,
            pseudo=v.pseudo,
            min_labels=v.min_labels,
            min_stratum_labels=v.min_stratum_labels,
        )
        decision, cs = gate.decision, gate.interval
        decided = (decision != 0) & valid
        first = np.argmax(decided, axis=1)
        any_decided = decided.any(axis=1)
        code = np.where(any_decided, decision[np.arange(streams), first], 0)
        labels_then = np.where(any_decided, cs.labels[np.arange(streams), first], np.inf)
        holds = (cs.low <= setting.p) & (setting.p <= cs.high)
        in_range = valid & cs.defined
        cover = np.all(holds | ~(in_range & (cs.labels >= v.min_labels)), axis=1)
        cover_any = np.all(holds | ~in_range, axis=1)
        fixed = human.estimate_arrays(final, ALPHA, lam=v.lam)
        fixed_holds = fixed.defined & (fixed.low <= setting.p) & (setting.p <= fixed.high)
        results.append(
            Outcome(
                streams=streams,
                promoted=int((code == PROMOTE).sum()),
                rejected=int((code == REJECT).sum()),
                labels_at_decision=labels_then.tolist(),
                labels_at_promotion=labels_then[code == PROMOTE].tolist(),
                cs_covered=int(cover.sum()),
                cs_covered_any=int(cover_any.sum()),
                fixed_covered=int(fixed_holds.sum()),
                labels=int(per_row.sum()),
                pending=pending,
            )
        )
    return results


def run(setting: Setting, streams: int, seed: int, variants: Sequence[Variant] = (PPI,)) -> list[Outcome]:
    """Every variant over the same ``streams`` simulated streams of ``setting``."""
    rng = np.random.default_rng(seed)
    total = [Outcome() for _ in variants]
    chunk = CHUNK if setting.check == "label" else 25
    done = 0
    while done < streams:
        size = min(chunk, streams - done)
        for acc, part in zip(total, _chunk(setting, size, rng, variants), strict=True):
            acc.add(part)
        done += size
    return total


def rate(k: int, n: int) -> str:
    lo, hi = wilson_interval(k, n)
    return f"{k / n:.3f} [{lo:.3f}, {hi:.3f}]"


def labels_text(x: float) -> str:
    return "never" if math.isinf(x) else f"{x:,.0f}"


_judge_cache: dict[float, tuple[int, int]] = {}


def judge_basis(judge_rate: float, streams: int, seed: int) -> tuple[int, int]:
    """(promoted, streams) for the judge-basis gate on verdicts with this win rate."""
    key = round(judge_rate, 6)
    if key not in _judge_cache:
        res = simulate(judge_rate, streams=streams, horizon=20_000, seed=seed)
        _judge_cache[key] = (res.promoted, res.streams)
    return _judge_cache[key]


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def null_table(streams: int, seed: int) -> str:
    """1 and 3: false promotion at p = 0.5, and coverage, for every judge."""
    rows = []
    for a in ACCURACIES:
        for b in BIASES:
            if judge_rates(0.5, a, b) is None:
                rows.append([f"{a:.2f}", f"{b:+.2f}", "n/a", "", "", "", "", ""])
                continue
            cells = [f"{a:.2f}", f"{b:+.2f}"]
            cov = []
            for pi in (0.05, 0.10):
                (o,) = run(uniform(0.5, a, b, pi), streams, seed)
                cells.append(rate(o.promoted, o.streams))
                if pi == 0.05:
                    med = float(np.median(o.labels_at_promotion)) if o.labels_at_promotion else math.inf
                    cells.append(labels_text(med))
                    cov = [rate(o.cs_covered, o.streams), rate(o.fixed_covered, o.streams)]
            promoted, n = judge_basis(0.5 + b, streams, seed)
            cells.append(rate(promoted, n))
            rows.append(cells + cov)
    header = [
        "judge accuracy",
        "judge bias",
        "human basis, 5% labelled: false promotion",
        "labels at a false promotion (median)",
        "human basis, 10%",
        "judge basis",
        "CS coverage, all checkpoints (5%)",
        "fixed-n coverage at the end (5%)",
    ]
    return table(header, rows)


def power_table(streams: int, seed: int) -> str:
    """2: power and labels to a decision, PPI++ against the labels alone."""
    rows = []
    for p in (0.55, 0.60):
        for a in ACCURACIES:
            for b in (0.0, 0.05):
                if judge_rates(p, a, b) is None:
                    continue
                ppi, alone = run(uniform(p, a, b, 0.05, pairs=40_000), streams, seed, (PPI, ALONE))
                ratio = ppi.median_labels() / alone.median_labels()
                rows.append(
                    [
                        f"{p:.2f}",
                        f"{a:.2f}",
                        f"{b:+.2f}",
                        rate(ppi.promoted, ppi.streams),
                        rate(alone.promoted, alone.streams),
                        labels_text(ppi.median_labels()),
                        labels_text(alone.median_labels()),
                        "" if math.isnan(ratio) else f"{ratio:.2f}",
                        rate(ppi.rejected, ppi.streams),
                        rate(ppi.cs_covered, ppi.streams),
                        rate(ppi.fixed_covered, ppi.streams),
                    ]
                )
    header = [
        "p",
        "judge accuracy",
        "bias",
        "promoted, PPI++",
        "promoted, labels alone",
        "median labels to a decision, PPI++",
        "labels alone",
        "PPI++ / alone",
        "rejected, PPI++",
        "CS coverage, PPI++",
        "fixed-n coverage, PPI++",
    ]
    return table(header, rows)


def delay_table(streams: int, seed: int) -> str:
    """Labels with a random delay (missing at random) against labels at once; and checking every pair."""
    rows = []
    for p in (0.5, 0.6):
        for name, kw in (
            ("at once, checked after every label", {}),
            ("delay ~ Exp(mean 1,000 pairs)", {"delay": 1000.0}),
            ("at once, checked after every pair", {"check": "pair"}),
        ):
            setting = uniform(p, 0.8, 0.05, 0.05, **kw)
            (o,) = run(setting, streams, seed)
            rows.append(
                [
                    f"{p:.2f}",
                    name,
                    rate(o.promoted, o.streams),
                    labels_text(o.median_labels()),
                    rate(o.cs_covered, o.streams),
                    rate(o.fixed_covered, o.streams),
                    f"{o.pending / o.streams:.0f}",
                ]
            )
    header = [
        "p",
        "labels",
        "promoted",
        "median labels to a decision",
        "CS coverage",
        "fixed-n coverage",
        "pending at the end",
    ]
    return table(header, rows)


def neyman(budget: float, strata: Sequence[tuple[float, float]]) -> list[float]:
    """Inclusion probabilities in proportion to each stratum's rectifier sd (Neyman allocation) for a
    judge of this accuracy on a balanced stratum (corr(f, y) = 2a - 1, lambda at its optimum): ``strata``
    is (share of pairs, judge accuracy); the expected labels per pair are ``budget``."""
    sds = [0.5 * math.sqrt(1 - (2 * a - 1) ** 2) for _, a in strata]
    scale = budget / sum(share * sd for (share, _), sd in zip(strata, sds, strict=True))
    return [min(1.0, scale * sd) for sd in sds]


def active_table(streams: int, seed: int) -> str:
    """4: active against uniform allocation at the same expected labels, for two judges: one middling on
    its confident verdicts (0.90) and one nearly always right there (0.99), where skewing pays."""
    # 0.06: the policy's defaults (10% / 5%); 0.09: the 25% / 5% first shipped, which the table retired.
    notes = {0.06: " (policy defaults)", 0.09: " (first defaults)"}
    judges = (
        (((0.2, 0.55), (0.8, 0.90)), ((0.05, (0.20, 0.0125)), (0.06, (0.10, 0.05)), (0.09, (0.25, 0.05)))),
        (((0.2, 0.60), (0.8, 0.99)), ((0.06, (0.10, 0.05)), (0.09, (0.25, 0.05)))),
    )
    rows = []
    for classes, budgets in judges:
        designs: list[tuple[str, float, float]] = []
        for budget, active in budgets:
            nu, nc = neyman(budget, classes)
            designs += [
                (f"uniform {budget:.0%}", budget, budget),
                (f"active {active[0]:.0%} / {active[1]:.2%}" + notes.get(budget, ""), *active),
                (f"Neyman {nu:.1%} / {nc:.1%}", nu, nc),
            ]
        (u_share, u_acc), (c_share, c_acc) = classes
        for p in (0.5, 0.6):
            for name, pu, pc in designs:
                setting = Setting(
                    p, (Stratum("uncertain", u_share, u_acc, 0.0, pu), Stratum("confident", c_share, c_acc, 0.0, pc))
                )
                (o,) = run(setting, streams, seed)
                rows.append(
                    [
                        f"{u_acc:.2f} / {c_acc:.2f}",
                        f"{p:.2f}",
                        name,
                        f"{o.labels / o.streams / setting.pairs:.3f}",
                        rate(o.promoted, o.streams),
                        rate(o.rejected, o.streams),
                        labels_text(o.median_labels()),
                        rate(o.cs_covered, o.streams),
                        rate(o.fixed_covered, o.streams),
                    ]
                )
    header = [
        "judge accuracy (uncertain / confident)",
        "p",
        "design (uncertain / confident)",
        "labels per pair",
        "promoted",
        "rejected",
        "median labels to a decision",
        "CS coverage",
        "fixed-n coverage",
    ]
    return table(header, rows)


def mnar_table(streams: int, seed: int) -> str:
    """5: labels missing not at random. A reviewer who skips the pairs where the champion is better (a
    label the person would give against the challenger never comes, with probability ``skip``) breaks
    assumption 2. The shipped ``decide_human`` reads the same bases both ways: ``at_random`` (the default)
    and ``worst_case`` (every missing label at its worst). Scalar path, every 250 pairs."""
    p, accuracy, bias, share, pairs, every = 0.5, 0.80, 0.05, 0.10, 6_000, 250
    rates = judge_rates(p, accuracy, bias)
    assert rates is not None
    a1, a0 = rates
    rows = []
    for skip in (0.0, 0.3):
        promoted = {"at_random": 0, "worst_case": 0}
        decided_labels: dict[str, list[float]] = {"at_random": [], "worst_case": []}
        rng = np.random.default_rng(seed)
        for _ in range(streams):
            y = rng.random(pairs) < p
            f = (rng.random(pairs) < np.where(y, a1, a0)).astype(float)
            drawn = rng.random(pairs) < share
            comes = drawn & (y | (rng.random(pairs) >= skip))
            basis = human.HumanBasis()
            first: dict[str, str | None] = {"at_random": None, "worst_case": None}
            for i in range(pairs):
                basis.add_pair(float(f[i]), "confident", bool(drawn[i]), share)
                if comes[i]:
                    basis.add_label(float(f[i]), float(y[i]), "confident", share)
                if (i + 1) % every:
                    continue
                for mode in first:
                    if first[mode] is None:
                        gate = human.decide_human(basis, missing=mode)  # type: ignore[arg-type]
                        if gate.decision != "continue":
                            first[mode] = gate.decision
                            decided_labels[mode].append(basis.labels)
            for mode, decision in first.items():
                promoted[mode] += decision == "promote"
        for mode in ("at_random", "worst_case"):
            done = decided_labels[mode]
            rows.append(
                [
                    f"{skip:.0%}",
                    mode,
                    rate(promoted[mode], streams),
                    f"{len(done) / streams:.3f}",
                    labels_text(float(np.median(done)) if done else math.inf),
                ]
            )
    header = [
        "labels against the challenger that never come",
        "missing labels read",
        "false promotion",
        "decided",
        "median labels at a decision",
    ]
    return table(header, rows)


def stress_table(streams: int, seed: int) -> str:
    """The finite-sample correction: judges on the feasibility edge (b = 1 - a: every disagreement is a
    challenger win the people did not give), where the rectifier is most skewed."""
    variants = (
        ("no correction", Variant(pseudo=0.0)),
        ("no correction, min_labels 100", Variant(pseudo=0.0, min_labels=100)),
        ("pseudo = 1 of each kind", Variant(pseudo=1.0)),
        ("shipped: z^2/2 = 1.92 of each kind", PPI),
    )
    rows = []
    for p in (0.5, 0.6):
        for a, b in ((0.80, 0.20), (0.90, 0.10), (0.95, 0.05), (0.97, 0.03), (0.99, 0.01)):
            outs = run(uniform(p, a, b, 0.05), streams, seed, [v for _, v in variants])
            for (name, _), o in zip(variants, outs, strict=True):
                rows.append(
                    [
                        f"{p:.2f}",
                        f"{a:.2f}",
                        f"{b:+.2f}",
                        name,
                        rate(o.promoted, o.streams),
                        labels_text(o.median_labels()),
                        rate(o.cs_covered, o.streams),
                    ]
                )
    header = [
        "p",
        "judge accuracy",
        "bias",
        "confidence sequence",
        "promoted",
        "median labels to a decision",
        "CS coverage",
    ]
    return table(header, rows)


TABLES: dict[str, tuple[str, Callable[[int, int], str]]] = {
    "null": (
        "False promotion at p = 0.50 and coverage (one stratum, labels at once, checked after every label)",
        null_table,
    ),
    "power": ("Power and labels to a decision, 5% labelled, 40,000 pairs", power_table),
    "stress": (
        "The finite-sample correction, judges whose every error favours the challenger (5% labelled)",
        stress_table,
    ),
    "delay": ("Delayed labels and checking after every pair (a = 0.80, b = +0.05, 5%)", delay_table),
    "active": ("Active against uniform allocation (20% of pairs uncertain, two judges)", active_table),
    "mnar": (
        "Labels missing not at random (p = 0.50, a = 0.80, b = +0.05, 10% drawn, 6,000 pairs, checked every 250)",
        mnar_table,
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", default=",".join(TABLES), help="comma-separated: " + ", ".join(TABLES))
    args = parser.parse_args(argv)
    started = time.monotonic()
    for key in args.only.split(","):
        title, make = TABLES[key]
        t0 = time.monotonic()
        body = make(args.streams, args.seed)
        print(f"### {title}\n\n{body}\n\n({args.streams} streams, {time.monotonic() - t0:.0f} s)\n", flush=True)
    print(f"total {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
