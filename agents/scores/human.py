"""The human basis: the challenger's win rate as people would judge it, from every judge verdict and the
labels of the audit sample (docs/design.md §3a), as pure logic over running sums.

**The estimand**, one definition for both bases: ``theta = P(a person prefers the challenger) + 1/2 P(a
person calls it a tie)``, over the experiment's pairs that reached a final outcome (an automatic
verdict, or an escalation to review). Each pair contributes an outcome on the same 0 / 0.5 / 1 scale:
``f`` what the judge decided (1 challenger, 0 champion, 0.5 a tie or no judge answer), ``y`` what the
person decided. The judge basis reads ``mean(f)``; the human basis estimates ``E[y]``.

**The estimator** is prediction-powered inference with power tuning (PPI++, Angelopoulos, Duchi and Zrnic
2023) per sampling stratum, with each label weighted by the inverse of its recorded inclusion
probability (active inference, Zrnic and Candès 2024):

* In stratum ``s`` (how the pair was sampled: ``confident``, ``uncertain``, ``review``), with every pair's
  ``f`` and the labelled pairs' ``(f, y, w = 1/pi)``::

      theta_s = lam_s * mean_all(f) + sum_L w (y - lam_s f) / sum_L w

  ``lam_s`` in [0, 1] is chosen to minimise the variance, exactly as the reference implementation
  ``ppi_py.ppi_mean_ci`` chooses it (with every pair's ``f`` as the unlabelled set and ``w = 1/pi``; the
  tests check that point and interval agree to 1e-10, tuned or fixed lambda, weighted and not).
  ``lam = 0`` is the labels alone (then the fixed-n interval is the classical Wald interval). Its variance
  is ``lam^2 var(f) / N + var(w^ (y - lam f)) / n`` (ppi_py's; it leaves out the labelled pairs'
  covariance with the all-pairs mean, a term O(pi) times the first, negligible at audit shares).
* Strata combine by their share of pairs, ``theta = sum_s (N_s/N) theta_s``, with the shares' own
  sampling variance added.
* A stratum with pairs but fewer than ``MIN_STRATUM_LABELS`` labels is not guessed at: the interval
  takes its whole range (its share times [0, 1]), so an unlabelled corner widens the answer instead of
  borrowing the judge's opinion. (Every review pair is labelled eventually, so this is temporary.)

**Two intervals.** ``estimate`` gives the fixed-sample (CLT) interval: right once, at a sample size fixed
in advance. ``confidence_sequence`` gives an asymptotic confidence sequence (Waudby-Smith, Arnold, Wu,
Howard and Ramdas, "Time-uniform central limit theory and asymptotic confidence sequences", Ann. Stat.
2024): the same centre with a wider, normal-mixture radius that holds simultaneously at every number of
labels, so a gate may look after every label or every pair. The clock is the number of labels: with the
sampling design fixed, the estimate is (nearly) a mean over pairs of ``lam f + (sampled / pi)(y - lam f)``,
i.i.d. in pair order, whose information grows with the labels. Its variance carries a **finite-sample
correction**: ``pseudo_disagreements(alpha)`` = z^2/2 (Agresti-Coull's) more disagreements of each kind
per stratum. Without it, a judge whose rare errors all favour the challenger (accuracy 0.95, bias +0.05)
gives a skewed rectifier whose variance is underestimated while few errors have been seen: 9% false
promotions, coverage 0.89; with it, 2% and 0.97 (bench/human_gate.py, "stress"). The gate promotes when
the whole sequence lies above 1/2, rejects when it lies below 1/2 + min_effect, and otherwise says how many
more labels the current estimate and variance imply (pessimistic early: the correction, fading as 1/n, is
held at its current size). It reads a two-sided sequence one side at a time, so its error rates are about
alpha/2 where the normal approximation is good.

**What the guarantee assumes** (docs/guides/human-valid.md#what-the-guarantee-assumes), and what was checked
in simulation (``python -m bench.human_gate``, 1,000 streams per setting, bench/README.md):

1. The experiment's pairs are exchangeable draws from its traffic (no trend within the experiment).
   Not tested: a drifting judge or population breaks it.
2. A label is a draw of a person's preference; within a stratum, whether and when a sampled pair's label
   arrives does not depend on the label (missing at random given the stratum). Pending and expired
   samples are then simply unlabelled pairs of their stratum; they are counted and shown. Checked: labels
   with an exponential delay (mean 1,000 pairs) change neither the error rate nor the coverage. Not
   tested: labels whose arrival depends on their value.
3. The inclusion probability recorded with each pair is the one its draw used, and never below a floor
   (bounded weights). Checked: the weighted estimate equals ppi_py's; two strata at different shares
   (uniform, active, Neyman) keep their coverage.
4. Asymptotics: below ``min_labels`` labels there is no decision; above, with the correction, an equal
   challenger was promoted at most 3.1% of the time (Wilson upper bound 4.4%) for every judge accuracy
   0.65-0.99 and bias 0-0.20 tried, including judges whose every error favours the challenger, checked
   after every label and after every pair; the sequence covered the true rate at every checkpoint in at
   least 95% of streams, and the fixed-n interval at the end in 95% (0.947-0.956 over 4,000 streams).
   The judge basis on the same streams promotes 95% of equal challengers at bias +0.05.
5. The sampling design is the caller's: at equal labels, labelling the uncertain class more only pays when
   the judge's rectifier varies more there, in proportion to its standard deviation (Neyman); with a judge
   at 0.9 on confident pairs, 25% / 5% needed more labels than uniform (bench, "active").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from statistics import NormalDist
from typing import Any, Literal, overload

import numpy as np
from numpy.typing import NDArray

#: Labels a stratum needs before its own estimate is used (below it, the stratum's whole range is taken).
MIN_STRATUM_LABELS = 2
#: Labels in all before the confidence sequence may decide (its validity is asymptotic).
MIN_LABELS = 30
#: The number of labels at which the confidence sequence's radius is tightest (its mixture's tuning).
DEFAULT_TARGET_LABELS = 500
#: The forecast of labels still needed stops here ("more than this").
MAX_FORECAST_LABELS = 10_000_000

HumanDecision = Literal["promote", "reject", "continue"]


@dataclass
class StratumSums:
    """One stratum's running sums: every pair's judge outcome, and the labelled pairs' weighted moments
    (``w = 1/pi``). Everything the estimator needs, in constant space; adding is commutative, so the
    order in which pairs and labels arrive does not matter."""

    pairs: int = 0
    f: float = 0.0
    ff: float = 0.0
    labels: int = 0
    w: float = 0.0
    w2: float = 0.0
    wy: float = 0.0
    wf: float = 0.0
    w2y: float = 0.0
    w2f: float = 0.0
    w2yy: float = 0.0
    w2ff: float = 0.0
    w2yf: float = 0.0

    def add_pair(self, f: float) -> None:
        self.pairs += 1
        self.f += f
        self.ff += f * f

    def add_label(self, f: float, y: float, weight: float) -> None:
        w, w2 = weight, weight * weight
        self.labels += 1
        self.w += w
        self.w2 += w2
        self.wy += w * y
        self.wf += w * f
        self.w2y += w2 * y
        self.w2f += w2 * f
        self.w2yy += w2 * y * y
        self.w2ff += w2 * f * f
        self.w2yf += w2 * y * f


@dataclass
class HumanBasis:
    """The human basis of one experiment (or one of its splits): sums per sampling stratum.

    Serialisable (``to_dict``/``from_dict``) for a changelog-backed table. ``pending`` and ``expired``
    count audit samples whose label has not come (yet, or within the label's time to live): under the
    missing-at-random assumption they are unlabelled pairs of their stratum, and they are shown so a
    reader can judge that assumption.
    """

    strata: dict[str, StratumSums] = field(default_factory=dict)
    sampled: int = 0
    expired: int = 0
    #: Pairs whose human outcome is known without asking (a rule settled them: an empty output loses,
    #: identical outputs tie), and the sum of those outcomes: a part of the estimand with no uncertainty,
    #: which is neither a label nor a pair of any sampled stratum.
    known_pairs: int = 0
    known_total: float = 0.0
    #: Per stratum, the drawn pairs (a label expected: audit samples, review pairs) in the label-side sums
    #: with the person's outcome left at 0: what is drawn but not labelled, :meth:`missing`, gives the bounds
    #: that assume nothing about the labels that have not come (:func:`worst_case`).
    drawn: dict[str, StratumSums] = field(default_factory=dict)

    def add_known(self, y: float) -> None:
        """A pair whose human outcome ``y`` is known by rule (the judge's outcome is the same)."""
        _check_outcome(y)
        self.known_pairs += 1
        self.known_total += float(y)

    def add_pair(
        self, f: float, stratum: str, sampled: bool = False, inclusion_probability: float | None = None
    ) -> None:
        """A pair's final outcome as the judge saw it; ``sampled``: a label is expected for it, drawn with
        ``inclusion_probability`` (given, its missing label enters :func:`worst_case`)."""
        _check_outcome(f)
        self.strata.setdefault(stratum, StratumSums()).add_pair(float(f))
        self.sampled += sampled
        if sampled and inclusion_probability is not None:
            _check_probability(inclusion_probability)
            self.drawn.setdefault(stratum, StratumSums()).add_label(float(f), 0.0, 1.0 / float(inclusion_probability))

    def missing(self, stratum: str) -> StratumSums:
        """The drawn pairs of ``stratum`` whose label has not come (pending or expired), label-side sums with
        the person's outcome at 0 (never below 0: a label whose draw was not recorded is not subtracted)."""
        drawn, got = self.drawn.get(stratum), self.strata.get(stratum)
        if drawn is None:
            return StratumSums()
        got = got or StratumSums()
        return StratumSums(
            labels=max(0, drawn.labels - got.labels),
            w=max(0.0, drawn.w - got.w),
            w2=max(0.0, drawn.w2 - got.w2),
            wf=max(0.0, drawn.wf - got.wf),
            w2f=max(0.0, drawn.w2f - got.w2f),
            w2ff=max(0.0, drawn.w2ff - got.w2ff),
        )

    def completed(self, y: float) -> HumanBasis:
        """This basis as if every missing label had come back ``y`` (0: the champion, 1: the challenger)."""
        strata = {}
        for name, sums in self.strata.items():
            gap = self.missing(name)
            done = StratumSums(**asdict(sums))
            done.labels += gap.labels
            for k in ("w", "w2", "wf", "w2f", "w2ff"):
                setattr(done, k, getattr(done, k) + getattr(gap, k))
            done.wy += y * gap.w
            done.w2y += y * gap.w2
            done.w2yy += y * y * gap.w2
            done.w2yf += y * gap.w2f
            strata[name] = done
        return HumanBasis(strata, self.sampled, self.expired, self.known_pairs, self.known_total, dict(self.drawn))

    def add_label(self, f: float, y: float, stratum: str, inclusion_probability: float) -> None:
        """A person's label ``y`` on a pair whose judge outcome was ``f``, drawn with ``inclusion_probability``."""
        _check_outcome(f)
        _check_outcome(y)
        _check_probability(inclusion_probability)
        self.strata.setdefault(stratum, StratumSums()).add_label(float(f), float(y), 1.0 / float(inclusion_probability))

    def add_expired(self) -> None:
        self.expired += 1

    @property
    def pairs(self) -> int:
        return sum(s.pairs for s in self.strata.values()) + self.known_pairs

    @property
    def labels(self) -> int:
        return sum(s.labels for s in self.strata.values())

    @property
    def pending(self) -> int:
        """Samples still waiting for a label (not expired)."""
        return max(0, self.sampled - self.labels - self.expired)

    def judge_rate(self) -> float | None:
        """The judge basis on the same estimand: the mean judge outcome over all pairs."""
        n = self.pairs
        return (sum(s.f for s in self.strata.values()) + self.known_total) / n if n else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "strata": {k: asdict(v) for k, v in self.strata.items()},
            "sampled": self.sampled,
            "expired": self.expired,
            "known_pairs": self.known_pairs,
            "known_total": self.known_total,
            "drawn": {k: asdict(v) for k, v in self.drawn.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HumanBasis:
        return cls(
            strata={str(k): StratumSums(**v) for k, v in data.get("strata", {}).items()},
            sampled=int(data.get("sampled", 0)),
            expired=int(data.get("expired", 0)),
            known_pairs=int(data.get("known_pairs", 0)),
            known_total=float(data.get("known_total", 0.0)),
            drawn={str(k): StratumSums(**v) for k, v in data.get("drawn", {}).items()},
        )


def _check_probability(value: float) -> None:
    if not 0.0 < value <= 1.0:
        raise ValueError(f"inclusion probability must be in (0, 1], got {value!r}")


def _check_outcome(value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"an outcome must be in [0, 1], got {value!r}")


Array = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class SumsArray:
    """A stratum's sums (:class:`StratumSums`) over many states at once, each field an array of one shape:
    a simulation's streams and checkpoints, evaluated by the same code that serves one basis."""

    pairs: Array
    f: Array
    ff: Array
    labels: Array
    w: Array
    w2: Array
    wy: Array
    wf: Array
    w2y: Array
    w2f: Array
    w2yy: Array
    w2ff: Array
    w2yf: Array

    @classmethod
    def of(cls, s: StratumSums) -> SumsArray:
        return cls(**{k: np.asarray(v, dtype=np.float64) for k, v in asdict(s).items()})


@dataclass(frozen=True, slots=True)
class StratumEstimate:
    stratum: str
    pairs: int
    labels: int
    lam: float
    rate: float
    variance: float


def _power_tuning(s: SumsArray) -> Array:
    """PPI++'s lambda for one stratum, as ``ppi_py`` computes it for a mean (``_calc_lam_glm``, clipped to
    [0, 1]), from the sums alone: the labels' weights normalised to mean 1, gradients taken at the
    lambda = 1 estimate, the unlabelled set being every pair of the stratum. Elementwise."""
    n, big_n = s.labels, s.pairs
    with np.errstate(divide="ignore", invalid="ignore"):
        k = n / s.w  # normalises w to mean 1 (ppi_py's construct_weight_vector)
        k2 = k * k
        theta1 = s.f / big_n + (s.wy - s.wf) * k / n
        # gradients g = w^(y - theta1) and g^ = w^(f - theta1) on the labels, g^_u = f - theta1 on all pairs.
        sum_g = (s.wy - theta1 * s.w) * k
        sum_gh = (s.wf - theta1 * s.w) * k
        sum_g_gh = (s.w2yf - theta1 * (s.w2y + s.w2f) + theta1 * theta1 * s.w2) * k2
        cov_grads = 2.0 * (sum_g_gh - sum_g * sum_gh / n) / n
        sum_gh2 = (s.w2ff - 2 * theta1 * s.w2f + theta1 * theta1 * s.w2) * k2
        sum_ghu = s.f - theta1 * big_n
        sum_ghu2 = s.ff - 2 * theta1 * s.f + theta1 * theta1 * big_n
        m = n + big_n
        pooled_mean = (sum_gh + sum_ghu) / m
        var_pooled = (sum_gh2 + sum_ghu2 - m * pooled_mean * pooled_mean) / (m - 1)
        lam = cov_grads / (2.0 * (1.0 + n / big_n) * var_pooled)
    # var_pooled ~ 0: the judge said the same thing everywhere, so it carries no information.
    informative = (n >= 2) & (big_n >= 2) & (var_pooled > _NO_VARIANCE)
    return np.where(informative, np.clip(np.nan_to_num(lam), 0.0, 1.0), 0.0)


#: Below this the judge's outcomes are taken as constant (sums of equal values leave rounding residue).
_NO_VARIANCE = 1e-12


def _stratum(s: SumsArray, lam: float | None, pseudo: float = 0.0) -> tuple[Array, Array, Array, Array]:
    """(lambda, rate, variance, the rectifier's variance per label) of one stratum, elementwise; NaN where it
    has no labels or no pairs.

    ``pseudo``: the rectifier's variance is taken as if ``pseudo`` more labels of each disagreement, (f 0,
    y 1) and (f 1, y 0), at mean weight, had been seen (not the rate, nor lambda; 0: exactly ppi_py's)."""
    n, big_n = s.labels, s.pairs
    tuned = _power_tuning(s) if lam is None else np.full(np.shape(n), float(lam))
    with np.errstate(divide="ignore", invalid="ignore"):
        k = n / s.w
        f_mean = s.f / big_n
        rectifier = (s.wy - tuned * s.wf) / s.w
        rate = tuned * f_mean + rectifier
        var_f = np.maximum(0.0, s.ff / big_n - f_mean * f_mean)
        # ppi_py: std (ddof 0) of w^ (y - lam f) over the labels, over sqrt(n).
        second = (s.w2yy - 2 * tuned * s.w2yf + tuned * tuned * s.w2ff) * k * k / n
        if pseudo:
            second = (n * second + pseudo * (1.0 + tuned * tuned)) / (n + 2 * pseudo)
            centre = (n * rectifier + pseudo * (1.0 - tuned)) / (n + 2 * pseudo)
        else:
            centre = rectifier
        var_r = np.maximum(0.0, second - centre * centre)
        variance = tuned * tuned * var_f / big_n + var_r / n
    return tuned, rate, variance, var_r


def stratum_estimate(name: str, s: StratumSums, lam: float | None = None) -> StratumEstimate:
    """The PPI++ estimate of one stratum's mean human outcome (``lam=None``: tuned; 0: labels alone)."""
    if s.labels == 0 or s.pairs == 0:
        raise ValueError(f"stratum {name!r} has no labels or no pairs")
    tuned, rate, variance, _ = _stratum(SumsArray.of(s), lam)
    return StratumEstimate(name, s.pairs, s.labels, float(tuned), float(rate), float(variance))


@dataclass(frozen=True, slots=True)
class HumanEstimate:
    """The human-basis win rate and an interval around it (fixed-sample or anytime, by who made it)."""

    rate: float
    low: float
    high: float
    #: The estimate's standard error, and the half-width the interval used beside the unlabelled strata.
    std_error: float
    radius: float
    labels: int
    pairs: int
    pending: int
    expired: int
    #: The judge basis on the same estimand, for the side-by-side.
    judge_rate: float
    #: Strata with pairs but too few labels: their share of pairs, taken at its whole range.
    unlabelled_share: float
    strata: tuple[StratumEstimate, ...]


@dataclass(frozen=True, slots=True)
class EstimateArrays:
    """What :class:`HumanEstimate` holds, elementwise over many states (``defined``: some stratum has
    enough labels; elsewhere the other fields are meaningless)."""

    rate: Array
    low: Array
    high: Array
    std_error: Array
    radius: Array
    labels: Array
    unlabelled_share: Array
    defined: NDArray[np.bool_]


def estimate_arrays(
    strata: Mapping[str, SumsArray],
    alpha: float = 0.05,
    *,
    lam: float | None = None,
    sequence: bool = False,
    target_labels: int = DEFAULT_TARGET_LABELS,
    pseudo: float | None = None,
    known_pairs: float | Array = 0.0,
    known_total: float | Array = 0.0,
) -> EstimateArrays:
    """:func:`estimate` (``sequence=False``) or :func:`confidence_sequence` (True), elementwise."""
    _check_alpha(alpha)
    if not strata:
        raise ValueError("no strata")
    # Both intervals carry the finite-sample correction by default: the fixed-sample one too, since on the
    # public-data replay (pairjudge_dev/human_replay.py) a stratum of 15-35 labels left it covering 0.90.
    pseudo_labels = pseudo_disagreements(alpha) if pseudo is None else pseudo
    sums = list(strata.values())
    # Pairs known by rule count in N (the estimand is over every final pair) with no variance of their own.
    big_n = sum((s.pairs for s in sums), start=np.zeros(np.shape(sums[0].pairs))) + known_pairs
    labels = sum((s.labels for s in sums), start=np.zeros(np.shape(sums[0].labels)))
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_n = np.where(big_n > 0, 1.0 / big_n, 0.0)
    rate = np.zeros_like(big_n)
    variance = np.zeros_like(big_n)
    squares = np.zeros_like(big_n)
    labelled = np.zeros_like(big_n)
    unlabelled = np.zeros_like(big_n)
    judge_only = np.zeros_like(big_n)
    for _, s in sorted(strata.items()):
        share = s.pairs * inv_n
        # A stratum with pairs but too few labels is not guessed at (its whole range is taken below).
        used = (s.labels >= MIN_STRATUM_LABELS) & (s.pairs > 0)
        _, rate_s, var_s, _ = _stratum(s, lam, pseudo_labels)
        rate += np.where(used, share * rate_s, 0.0)
        variance += np.where(used, share * share * var_s, 0.0)
        squares += np.where(used, share * rate_s * rate_s, 0.0)
        labelled += np.where(used, share, 0.0)
        unlabelled += np.where(used, 0.0, share)
        judge_only += np.where(used, 0.0, s.f * inv_n)
    with np.errstate(divide="ignore", invalid="ignore"):
        known_share = np.asarray(known_pairs * inv_n, dtype=np.float64)
        known_mean = np.where(known_pairs > 0, np.asarray(known_total, dtype=np.float64) / known_pairs, 0.0)
    rate += known_share * known_mean
    squares += known_share * known_mean * known_mean
    defined = labelled > 0
    labelled = labelled + known_share
    with np.errstate(divide="ignore", invalid="ignore"):
        # The strata's shares are estimated too (multinomial): sum share (rate_s - mean)^2 / N.
        between = np.where(defined, np.maximum(0.0, squares - rate * rate / labelled) * inv_n, 0.0)
    se = np.sqrt(variance + between)
    if sequence:
        factor = cs_radius_factor(np.maximum(labels, 1.0), alpha, target_labels)
    else:
        factor = np.full_like(se, NormalDist().inv_cdf(1 - alpha / 2))
    radius = factor * se
    return EstimateArrays(
        # The point reads a stratum without labels at the judge's mean; the interval does not trust it.
        rate=np.clip(rate + judge_only, 0.0, 1.0),
        low=np.maximum(0.0, rate - radius),
        high=np.minimum(1.0, rate + unlabelled + radius),
        std_error=se,
        radius=radius,
        labels=labels,
        unlabelled_share=unlabelled,
        defined=defined,
    )


def pseudo_disagreements(alpha: float) -> float:
    """The confidence sequence's finite-sample correction: its rectifier variance counts this many more
    disagreements of each kind, (f 0, y 1) and (f 1, y 0), per stratum: Agresti and Coull's ``z^2 / 2``
    (1.92 at alpha = 0.05), which for the labels alone is their interval's centre. Without it a judge whose
    rare errors all favour the challenger gets an interval far too narrow while few errors have been seen
    (bench/human_gate.py, "stress": 9% false promotions at a = 0.95, b = +0.05)."""
    z = NormalDist().inv_cdf(1 - alpha / 2)
    return z * z / 2


def _interval(
    basis: HumanBasis,
    alpha: float,
    lam: float | None,
    sequence: bool,
    target_labels: int,
    pseudo: float | None = None,
) -> HumanEstimate | None:
    strata = {k: SumsArray.of(v) for k, v in basis.strata.items()}
    if not strata or basis.pairs == 0:
        return None
    e = estimate_arrays(
        strata,
        alpha,
        lam=lam,
        sequence=sequence,
        target_labels=target_labels,
        pseudo=pseudo,
        known_pairs=float(basis.known_pairs),
        known_total=basis.known_total,
    )
    if not e.defined:
        return None
    judge = basis.judge_rate()
    return HumanEstimate(
        rate=float(e.rate),
        low=float(e.low),
        high=float(e.high),
        std_error=float(e.std_error),
        radius=float(e.radius),
        labels=basis.labels,
        pairs=basis.pairs,
        pending=basis.pending,
        expired=basis.expired,
        judge_rate=judge if judge is not None else float("nan"),
        unlabelled_share=float(e.unlabelled_share),
        strata=tuple(
            stratum_estimate(name, s, lam)
            for name, s in sorted(basis.strata.items())
            if s.pairs > 0 and s.labels >= MIN_STRATUM_LABELS
        ),
    )


def estimate(
    basis: HumanBasis, alpha: float = 0.05, *, lam: float | None = None, pseudo: float | None = None
) -> HumanEstimate | None:
    """The fixed-sample (CLT) interval at level ``1 - alpha``; ``lam=0`` for the labels alone.

    ``pseudo``: the finite-sample correction of the variance (:func:`pseudo_disagreements`, the default);
    ``pseudo=0`` is exactly ``ppi_py.ppi_mean_ci``."""
    _check_alpha(alpha)
    return _interval(basis, alpha, lam, False, DEFAULT_TARGET_LABELS, pseudo)


@overload
def cs_radius_factor(labels: float, alpha: float, target_labels: int = DEFAULT_TARGET_LABELS) -> float: ...
@overload
def cs_radius_factor(labels: Array, alpha: float, target_labels: int = DEFAULT_TARGET_LABELS) -> Array: ...
def cs_radius_factor(labels: float | Array, alpha: float, target_labels: int = DEFAULT_TARGET_LABELS) -> float | Array:
    """The two-sided normal-mixture boundary of an asymptotic confidence sequence, in standard errors.

    For a mean of ``t`` observations with standard deviation ``sigma`` the radius is
    ``sigma * sqrt(2 (t rho^2 + 1) / (t^2 rho^2) * log(sqrt(t rho^2 + 1) / alpha))`` (Robbins' normal
    mixture; Waudby-Smith et al. 2024, eq. 2.7); with ``se = sigma / sqrt(t)`` that is ``se`` times the
    value returned here. ``rho`` makes it tightest at ``target_labels`` (their eq. 2.8). Elementwise on
    an array of label counts.
    """
    _check_alpha(alpha)
    if target_labels < 1:
        raise ValueError("target_labels must be >= 1")
    t_labels = np.asarray(labels, dtype=np.float64)
    if np.any(t_labels < 1):
        raise ValueError("labels must be >= 1")
    rho2 = (-2 * math.log(alpha) + math.log(-2 * math.log(alpha) + 1)) / target_labels
    t = t_labels * rho2
    factor = np.sqrt(2 * (t + 1) / t * np.log(np.sqrt(t + 1) / alpha))
    return float(factor) if np.ndim(labels) == 0 else factor


def confidence_sequence(
    basis: HumanBasis,
    alpha: float = 0.05,
    *,
    lam: float | None = None,
    target_labels: int = DEFAULT_TARGET_LABELS,
) -> HumanEstimate | None:
    """The anytime-valid interval at level ``1 - alpha``: holds at every number of labels at once."""
    _check_alpha(alpha)
    if basis.labels < 1:
        return None
    return _interval(basis, alpha, lam, True, target_labels)


#: decide_arrays' codes.
PROMOTE, REJECT, CONTINUE = 1, -1, 0


def _decision(
    low: Array, high: Array, labels: Array, defined: NDArray[np.bool_], min_effect: float, min_labels: int
) -> NDArray[np.int8]:
    ready = defined & (labels >= min_labels)
    promote = ready & (low > 0.5)
    reject = ready & ~promote & (high < 0.5 + min_effect)
    return np.where(promote, PROMOTE, np.where(reject, REJECT, CONTINUE)).astype(np.int8)


def decide_arrays(
    strata: Mapping[str, SumsArray],
    *,
    alpha: float = 0.05,
    min_effect: float = 0.05,
    min_labels: int = MIN_LABELS,
    target_labels: int = DEFAULT_TARGET_LABELS,
    lam: float | None = None,
    pseudo: float | None = None,
) -> tuple[NDArray[np.int8], EstimateArrays]:
    """:func:`decide_human`'s decision elementwise (``PROMOTE``, ``REJECT``, ``CONTINUE``), and the
    confidence sequence it read."""
    cs = estimate_arrays(strata, alpha, lam=lam, sequence=True, target_labels=target_labels, pseudo=pseudo)
    return _decision(cs.low, cs.high, cs.labels, cs.defined, min_effect, min_labels), cs


MissingLabels = Literal["at_random", "worst_case"]


def worst_case(
    basis: HumanBasis,
    alpha: float = 0.05,
    *,
    sequence: bool = True,
    lam: float | None = None,
    target_labels: int = DEFAULT_TARGET_LABELS,
) -> tuple[float, float] | None:
    """(low, high): the interval's low end with every missing label (pending or expired) set against the
    challenger, and its high end with every one set for it. It assumes nothing about why labels are
    missing (a team that skips the hard items included), only the other three assumptions; the gap to
    :func:`confidence_sequence` shows how much the answer leans on "missing at random". None without labels."""
    if basis.labels < 1:
        return None
    make = confidence_sequence if sequence else estimate
    kwargs: dict[str, Any] = {"lam": lam, "target_labels": target_labels} if sequence else {"lam": lam}
    low, high = make(basis.completed(0.0), alpha, **kwargs), make(basis.completed(1.0), alpha, **kwargs)
    if low is None or high is None:
        return None
    return low.low, high.high


@dataclass(frozen=True, slots=True)
class HumanGate:
    decision: HumanDecision
    #: The anytime-valid interval the decision read; None when there are no labels at all.
    interval: HumanEstimate | None
    #: Why it continues, in words a user can act on.
    reason: str
    #: For "continue": the further labels the current estimate and variance imply; None when unknown.
    labels_needed: int | None


def decide_human(
    basis: HumanBasis,
    *,
    alpha: float = 0.05,
    min_effect: float = 0.05,
    min_labels: int = MIN_LABELS,
    target_labels: int = DEFAULT_TARGET_LABELS,
    lam: float | None = None,
    missing: MissingLabels = "at_random",
) -> HumanGate:
    """Promote when the confidence sequence lies above 1/2, reject when it lies below 1/2 + min_effect.

    An equal challenger (theta <= 1/2) is promoted, and one better by min_effect rejected, at most
    ``alpha`` of the time under the module's assumptions, however often this is called. Never falls back
    to the judge: without enough labels the answer is "continue" with the labels still needed.

    ``missing="worst_case"`` drops the missing-at-random assumption: it promotes only if the sequence lies
    above 1/2 with every missing label set against the challenger, and rejects only if it lies below the
    boundary with every one set for it (:func:`worst_case`). Pending labels then only delay decisions.
    """
    interval = confidence_sequence(basis, alpha, lam=lam, target_labels=target_labels)
    labels = basis.labels
    if interval is None:
        first = max(min_labels - labels, 1)
        return HumanGate("continue", None, f"no human labels yet; at least {first} expected to be needed", None)
    low, high = interval.low, interval.high
    if missing == "worst_case":
        bounds = worst_case(basis, alpha, lam=lam, target_labels=target_labels)
        if bounds is not None:
            low, high = bounds
    code = _decision(
        np.asarray(low),
        np.asarray(high),
        np.asarray(float(labels)),
        np.asarray(True),
        min_effect,
        min_labels,
    )
    if code == PROMOTE:
        return HumanGate("promote", interval, "people prefer the challenger", None)
    if code == REJECT:
        return HumanGate("reject", interval, "people do not prefer the challenger by the minimum effect", None)
    forecast = labels_needed(interval, alpha=alpha, min_effect=min_effect, target_labels=target_labels)
    needed = max(forecast, min_labels - labels) if forecast is not None else None
    text = (
        f"{needed} more human labels expected to be needed"
        if needed is not None
        else f"more than {MAX_FORECAST_LABELS} more human labels would be needed at the current estimate"
    )
    if interval.unlabelled_share > 0:
        text += f"; {interval.unlabelled_share:.0%} of pairs are in strata with too few labels"
    if missing == "worst_case" and (low, high) != (interval.low, interval.high):
        text += f"; read at the worst case of {basis.pending + basis.expired} missing labels"
    return HumanGate("continue", interval, text, needed)


def labels_needed(
    interval: HumanEstimate, *, alpha: float, min_effect: float, target_labels: int = DEFAULT_TARGET_LABELS
) -> int | None:
    """Further labels until the sequence would clear the nearer decision boundary, if the estimate held
    and the variance fell as 1/labels (the rectifier's share); None above ``MAX_FORECAST_LABELS``."""
    n = interval.labels
    margin = max(interval.rate - 0.5, 0.5 + min_effect - interval.rate) - interval.unlabelled_share
    if margin <= 0 or n < 1:
        return None
    unit = interval.std_error * math.sqrt(n)  # the standard deviation per label

    def clears(m: int) -> bool:
        return unit / math.sqrt(m) * cs_radius_factor(m, alpha, target_labels) < margin

    if clears(n):
        return 0
    high = max(2 * n, 2)
    while not clears(high):
        if high > MAX_FORECAST_LABELS:
            return None
        high *= 2
    low = high // 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if clears(mid) else (mid, high)
    return high - n


#: The sampling classes whose shares an operator sets (``Policy.audit_share``, ``audit_uncertain_share``);
#: review pairs are always labelled and rule pairs never.
SAMPLED_CLASSES = ("confident", "uncertain")


def rectifier_sd(s: StratumSums, alpha: float = 0.05) -> float | None:
    """The spread of ``person - lambda * judge`` over one stratum's labels (weighted, with the
    finite-sample correction, so a stratum whose few labels all agree is not taken as certain); None with
    fewer than ``MIN_STRATUM_LABELS`` labels."""
    if s.labels < MIN_STRATUM_LABELS or s.pairs == 0:
        return None
    *_, var_r = _stratum(SumsArray.of(s), None, pseudo_disagreements(alpha))
    return math.sqrt(float(var_r))


def neyman_shares(
    basis: HumanBasis, *, floor: float = 0.01, alpha: float = 0.05, classes: tuple[str, ...] = SAMPLED_CLASSES
) -> dict[str, float] | None:
    """The audit shares that would give the narrowest human-basis interval for the labels the current
    shares cost (Neyman allocation: each class's probability in proportion to its rectifier's spread;
    Zrnic and Candès 2024, the optimal sampling rule for active inference), clipped to [floor, 1]; None until
    every class with pairs has enough labels to measure its spread.

    The labels the current design costs per pair are read off the data (a class's mean inclusion probability
    is its labels over their summed weights), so following the recommendation keeps the label bill the same.
    """
    present = {c: basis.strata[c] for c in classes if c in basis.strata and basis.strata[c].pairs > 0}
    if not present:
        return None
    spreads: dict[str, float] = {}
    for name, sums in present.items():
        sd = rectifier_sd(sums, alpha)
        if sd is None:
            return None
        spreads[name] = sd
    pairs = sum(c.pairs for c in present.values())
    labels_per_pair = sum(c.pairs * (c.labels / c.w) for c in present.values()) / pairs
    weighted = sum(present[c].pairs / pairs * spreads[c] for c in present)
    if weighted <= 0.0:
        return {c: min(1.0, max(floor, labels_per_pair)) for c in present}  # no spread anywhere: uniform
    return {c: min(1.0, max(floor, labels_per_pair * spreads[c] / weighted)) for c in present}


def _check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise ValueError("alpha must be in (0, 1)")
