"""Drift statistics (docs/design.md §3) as pure functions: agreement, Cohen's kappa (with a confidence
interval), flips, position bias, calibration (reliability bins, ECE), and the confidence threshold for
automatic decisions that carries a finite-sample guarantee.

Every function returns ``None`` when it has nothing to measure (no items, or a statistic that is
undefined for the data) rather than a made-up 0 or 1, so a window without labels never looks like
perfect or failing agreement. Inputs of different lengths are a programming error (``ValueError``).

Labels must mean the same thing across pairs before they are compared: a candidate id does not
(each pair has its own), so map winners with :func:`relative_label` (or to roles) first.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

from pairjudge.schemas.pair import TIE


def _check_lengths(a: Sequence[object], b: Sequence[object]) -> None:
    if len(a) != len(b):
        raise ValueError(f"inputs differ in length: {len(a)} != {len(b)}")


def relative_label(candidate_ids: tuple[str, str], winner: str) -> Literal["first", "second", "TIE"]:
    """A pair-independent label for ``winner``: the first or second candidate of the pair, or TIE."""
    if winner == TIE:
        return "TIE"
    if winner == candidate_ids[0]:
        return "first"
    if winner == candidate_ids[1]:
        return "second"
    raise ValueError(f"{winner!r} is neither candidate of the pair nor TIE")


def agreement(pairs: Iterable[tuple[Hashable, Hashable]]) -> float | None:
    """Observed agreement: the share of (judge, human) label pairs that are equal."""
    items = list(pairs)
    if not items:
        return None
    return sum(1 for judge, human in items if judge == human) / len(items)


def cohen_kappa(judge_labels: Sequence[Hashable], human_labels: Sequence[Hashable]) -> float | None:
    """Cohen's kappa (1960): (p_o - p_e) / (1 - p_e), with p_e from each rater's own label frequencies.

    Undefined (``None``) when there are no items, or when p_e == 1: both raters gave one and the same
    label to every item, so there is no variation for kappa to measure (``agreement`` is then 1.0).
    """
    _check_lengths(judge_labels, human_labels)
    n = len(judge_labels)
    if n == 0:
        return None
    p_o = sum(1 for j, h in zip(judge_labels, human_labels, strict=True) if j == h) / n
    judge_counts, human_counts = Counter(judge_labels), Counter(human_labels)
    p_e = math.fsum(judge_counts[label] * human_counts[label] for label in judge_counts) / (n * n)
    if math.isclose(p_e, 1.0, rel_tol=0.0, abs_tol=1e-12):
        return None
    return (p_o - p_e) / (1.0 - p_e)


def flip_rate(winner_pairs: Iterable[tuple[str, str]]) -> float | None:
    """Share of pairs whose two orderings named different candidates, both decisive (not TIE).

    Input: (AB mapped winner, BA mapped winner) per pair with both orderings valid.
    """
    items = list(winner_pairs)
    if not items:
        return None
    flips = sum(1 for ab, ba in items if ab != ba and TIE not in (ab, ba))
    return flips / len(items)


def position_a_win_rate(raw_winners: Iterable[str]) -> float | None:
    """Share of decisive orderings won by whatever sat in position A (≈0.5 for an unbiased judge).

    Input: raw (position) winners "A", "B" or "TIE"; ties are left out.
    """
    decisive = [w for w in raw_winners if w in ("A", "B")]
    if not decisive:
        return None
    return sum(1 for w in decisive if w == "A") / len(decisive)


def wilson_interval(successes: float, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval for a proportion (95% by default); (0, 1) when ``n`` is 0.

    Unlike the normal approximation it stays inside [0, 1] and behaves near 0 and 1 and for small n.
    ``successes`` may be fractional (a coin counted as half right)."""
    if n <= 0:
        return 0.0, 1.0
    if not 0.0 <= successes <= n:
        raise ValueError(f"successes {successes!r} is outside [0, {n}]")
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _check_calibration(confidences: Sequence[float], corrects: Sequence[bool]) -> None:
    _check_lengths(confidences, corrects)
    for c in confidences:
        if not 0.0 <= c <= 1.0:
            raise ValueError(f"confidence {c!r} is outside [0, 1]")


@dataclass(frozen=True, slots=True)
class ReliabilityBin:
    lower: float
    upper: float
    count: int
    mean_confidence: float | None
    accuracy: float | None


def reliability_bins(confidences: Sequence[float], corrects: Sequence[bool], bins: int = 10) -> list[ReliabilityBin]:
    """Equal-width bins over [0, 1]; bin i holds [i/bins, (i+1)/bins), the last one also holds 1.0."""
    if bins < 1:
        raise ValueError("bins must be >= 1")
    _check_calibration(confidences, corrects)
    members: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
    for c, ok in zip(confidences, corrects, strict=True):
        members[min(int(c * bins), bins - 1)].append((c, ok))
    out = []
    for i, m in enumerate(members):
        mean_c = math.fsum(c for c, _ in m) / len(m) if m else None
        acc = sum(1 for _, ok in m if ok) / len(m) if m else None
        out.append(ReliabilityBin(i / bins, (i + 1) / bins, len(m), mean_c, acc))
    return out


def expected_calibration_error(confidences: Sequence[float], corrects: Sequence[bool], bins: int = 10) -> float | None:
    """ECE = sum over bins of (bin size / n) * |accuracy - mean confidence| (Naeini et al. 2015)."""
    n = len(confidences)
    table = reliability_bins(confidences, corrects, bins)
    if n == 0:
        return None
    return math.fsum(
        b.count / n * abs(b.accuracy - b.mean_confidence)
        for b in table
        if b.accuracy is not None and b.mean_confidence is not None
    )


# --- Cohen's kappa with a confidence interval ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class KappaEstimate:
    """Cohen's kappa over ``n`` items, its large-sample standard error and a two-sided interval."""

    kappa: float
    se: float
    low: float
    high: float
    n: int
    confidence: float


def kappa_interval(
    judge_labels: Sequence[Hashable], human_labels: Sequence[Hashable], confidence: float = 0.95
) -> KappaEstimate | None:
    """Cohen's kappa with a Wald interval from the large-sample (non-null) standard error of Fleiss,
    Cohen & Everitt (1969), as given in Fleiss, Levin & Paik (2003, §18.1) and used by SAS PROC FREQ:

        var(kappa) = (A + B - C) / (n (1 - p_e)^2)
        A = sum_i p_ii (1 - (p_i. + p_.i)(1 - kappa))^2
        B = (1 - kappa)^2 sum_{i != j} p_ij (p_.i + p_j.)^2
        C = (kappa - p_e (1 - kappa))^2

    Why this method: it is deterministic (an audit snapshot must not change when recomputed), it
    costs one pass over the table, it is the textbook interval that reviewers can check against SAS
    or R, and in simulation (tests/unit/test_stats_inference.py) its coverage is close to nominal at
    the window sizes the audit uses (n = 100 and more).

    Its limits, stated so nobody leans on it harder than it bears:
    - It is asymptotic. Simulated 95% coverage (2,000 windows each, three agreement tables, see the
      tests): 0.932-0.941 at n = 100 and 0.948-0.952 at n = 400, but 0.84 at n = 30 (and about 0.91
      at n = 50) when one category holds 85% of the labels: a Wald interval undercovers small
      samples. Below about 100 labels, or with a category almost never used, treat the interval as
      indicative, and require a minimum label count before acting on it.
    - When the two raters agree on every item the estimated variance is 0 and the interval collapses
      to [1, 1]: that is the formula's verdict, not certainty. A perfect small window is weak evidence.
      Likewise a rater that gives one label throughout has kappa 0 on every sample, so [0, 0].
    - Bounds are clipped to [-1, 1], the range of kappa.

    ``None`` when kappa is undefined (no items, or chance agreement p_e == 1, see :func:`cohen_kappa`).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence {confidence!r} is outside (0, 1)")
    kappa = cohen_kappa(judge_labels, human_labels)
    if kappa is None:
        return None
    n = len(judge_labels)
    cells = Counter(zip(judge_labels, human_labels, strict=True))
    judge_p = {label: count / n for label, count in Counter(judge_labels).items()}
    human_p = {label: count / n for label, count in Counter(human_labels).items()}
    p_e = math.fsum(judge_p[label] * human_p.get(label, 0.0) for label in judge_p)
    # Rows are the judge (p_i.), columns the human (p_.j); the formula is symmetric under transposition.
    a = math.fsum(
        count / n * (1.0 - (judge_p[j] + human_p[h]) * (1.0 - kappa)) ** 2 for (j, h), count in cells.items() if j == h
    )
    b = (1.0 - kappa) ** 2 * math.fsum(
        count / n * (human_p.get(j, 0.0) + judge_p.get(h, 0.0)) ** 2 for (j, h), count in cells.items() if j != h
    )
    c = (kappa - p_e * (1.0 - kappa)) ** 2
    # A + B - C is a variance: non-negative in exact arithmetic, a hair below 0 by rounding at kappa = 1.
    se = math.sqrt(max(a + b - c, 0.0) / n) / (1.0 - p_e)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    return KappaEstimate(
        kappa=kappa,
        se=se,
        low=max(-1.0, kappa - z * se),
        high=min(1.0, kappa + z * se),
        n=n,
        confidence=confidence,
    )


# --- Auto-decisions with a guarantee ---------------------------------------------------------------


def binomial_upper_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), summed exactly term by term in log space.

    Log space because C(n, j) p^j overflows a float from n of about a thousand. The terms of a
    binomial are unimodal, so the sum starts at its largest term on the summed side and stops once
    the terms fall below 1e-17 of the total: the cost is O(sqrt(n)) terms, not O(n), which keeps a
    threshold search over thousands of labels cheap. The complementary tail is used when k is below
    the mean, where the upper tail is close to 1 and summed directly would lose nothing but time.
    """
    if n < 0 or not 0.0 <= p <= 1.0:
        raise ValueError(f"invalid binomial: n={n}, p={p}")
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    if p == 0.0:
        return 0.0
    if p == 1.0:
        return 1.0
    if k > n * p:
        return _tail_sum(range(k, n + 1), n, p)
    return max(0.0, 1.0 - _tail_sum(range(k - 1, -1, -1), n, p))


def _tail_sum(indices: range, n: int, p: float) -> float:
    """Sum of binomial pmf terms over ``indices``, which run away from the mode (terms decrease)."""
    log_p, log_q = math.log(p), math.log1p(-p)
    log_n_fact = math.lgamma(n + 1)
    total = 0.0
    for j in indices:
        term = math.exp(log_n_fact - math.lgamma(j + 1) - math.lgamma(n - j + 1) + j * log_p + (n - j) * log_q)
        total += term
        # <= so that a first term that underflows to 0 (a tail far below 1e-300) ends the sum too.
        if term <= 1e-17 * total:
            break
    return min(total, 1.0)


#: Thresholds tried by default: 1.00, 0.99, ..., 0.00. Fixed in advance (not read off the data),
#: as fixed-sequence testing requires.
DEFAULT_THRESHOLD_GRID: tuple[float, ...] = tuple(i / 100 for i in range(100, -1, -1))


@dataclass(frozen=True, slots=True)
class Guarantee:
    """The calibrated confidence threshold for automatic decisions, and what it guarantees.

    ``threshold`` None means no threshold carries the guarantee: nothing may be auto-decided on it
    (``reason`` says why). ``coverage`` is the share of calibration pairs with confidence >= threshold
    (the share that would be auto-decided), ``n_used`` their count, ``realised_agreement`` their
    agreement with the humans; ``n_labels`` is the size of the calibration set.
    """

    threshold: float | None
    coverage: float
    n_used: int
    n_labels: int
    realised_agreement: float | None
    target: float
    risk: float
    method: str
    reason: str | None = None


def min_pairs_to_certify(target: float, risk: float) -> int:
    """The fewest pairs above a threshold that could pass the test at all: with m pairs all agreeing,
    the p-value is target^m, so m must reach log(risk) / log(target) (22 for target 0.9, risk 0.1)."""
    return math.ceil(math.log(risk) / math.log(target) - 1e-12)


def calibrate_threshold(
    confidences: Sequence[float],
    agrees: Sequence[bool],
    target: float = 0.9,
    risk: float = 0.1,
    grid: Sequence[float] = DEFAULT_THRESHOLD_GRID,
    min_labels: int = 100,
    min_pairs: int = 40,
) -> Guarantee:
    """The lowest confidence threshold at which auto-decided pairs agree with humans at ``target`` or
    better, with probability at least 1 - ``risk``: Learn-then-Test (Angelopoulos et al. 2021) with
    fixed-sequence testing and an exact binomial p-value, as in "Trust or Escalate" (Jung et al. 2024).

    Inputs: one calibration pair each, the judge's confidence and whether its verdict agreed with the
    human label (map winners with :func:`relative_label` first).

    For each threshold t, let A(t) = P(human agrees | confidence >= t) over the pairs' distribution.
    H0(t): A(t) < target. Given the m pairs with confidence >= t, k of them agreeing, the p-value is
    P(Binomial(m, target) >= k): under H0 the k agreements are Binomial(m, A(t)) with A(t) < target, so
    the p-value is valid (it is the one-sided Clopper-Pearson test: p <= risk exactly when the
    (1 - risk) lower confidence bound on A(t) reaches target). Thresholds are tested from the highest
    down; each is accepted while p <= risk and the walk stops at the first that fails. Because the walk
    stops at the first failure, one test at level ``risk`` controls the chance of accepting any t with
    A(t) < target (the fixed-sequence procedure); no multiplicity correction is needed.

    What is guaranteed: if calibration pairs and future pairs are exchangeable (drawn from the same
    distribution; in particular the same judge version, template and rubric: one series), then with
    probability at least 1 - risk over the draw of the calibration set, the returned threshold t has
    A(t) >= target: the long-run agreement of future pairs auto-decided at t is at least ``target``.
    Returning None counts as no error: the 1 - risk is over all calibration draws, not only those
    where a threshold came back (conditionally on one coming back it is not guaranteed, though the
    simulations found it held there too). It is a statement about the rate, not about any one pair or
    any one finite batch: a batch of future pairs fluctuates around A(t) by binomial noise. It says
    nothing once the distribution moves (a new judge version, drifting inputs): that is what the audit
    and the kappa guard watch.

    One practical departure from a sequence fixed in advance: the walk starts at the highest threshold
    with at least ``min_pairs`` pairs above it (and at least :func:`min_pairs_to_certify`, below which
    no record could pass); the thresholds above it are skipped rather than counted as failures.
    Otherwise a judge that never says 1.0 could never be calibrated, and a walk starting on a handful
    of pairs fails at once on a single disagreement (with 22 pairs and target 0.9 every one must agree):
    in simulation, starting at 22 pairs instead of 40 left a well-calibrated judge with no threshold
    in 17% of runs instead of 8% (1,000 labels). Where the walk starts depends on the confidences only,
    never on the agreements; when agreement does not depend on confidence the procedure stays exact,
    and the simulation tests (tests/unit/test_stats_inference.py) check the informative case.

    ``threshold`` is None when there are fewer than ``min_labels`` labels (the configured thresholds
    should apply meanwhile), or when no threshold passes (nothing may be auto-decided under the
    guarantee: escalate, or collect more labels).
    """
    _check_calibration(confidences, agrees)
    if not 0.0 < target < 1.0 or not 0.0 < risk < 1.0:
        raise ValueError(f"target and risk must be inside (0, 1): target={target!r}, risk={risk!r}")
    n = len(confidences)
    method = f"fixed-sequence binomial test (Learn-then-Test): A(t) >= {target:g} with risk {risk:g}"

    def none(reason: str) -> Guarantee:
        return Guarantee(None, 0.0, 0, n, None, target, risk, method, reason)

    if n < max(min_labels, 1):
        return none(f"too few labels: {n} < {min_labels}")
    # Sorting once lets each threshold's count and agreements be read by bisection, not a full pass.
    ranked = sorted(zip(confidences, agrees, strict=True), key=lambda item: item[0], reverse=True)
    agree_prefix = [0]
    for _, ok in ranked:
        agree_prefix.append(agree_prefix[-1] + (1 if ok else 0))
    needed = max(min_pairs_to_certify(target, risk), min_pairs)
    accepted: tuple[float, int] | None = None
    for t in sorted(set(grid), reverse=True):
        m = _count_at_least(ranked, t)
        if m < needed:
            # Not certifiable whatever the agreements; m only grows as t falls, so this is a prefix
            # of the sequence, skipped rather than failed (see the docstring).
            continue
        if binomial_upper_tail(agree_prefix[m], m, target) > risk:
            break
        accepted = (t, m)
    if accepted is None:
        if n < needed:
            return none(f"too few labels: even {n} agreeing pairs cannot show {target:g} at risk {risk:g}")
        return none(f"no threshold shows agreement >= {target:g} at risk {risk:g}")
    t, m = accepted
    return Guarantee(t, m / n, m, n, agree_prefix[m] / m, target, risk, method)


def _count_at_least(ranked: Sequence[tuple[float, bool]], threshold: float) -> int:
    """How many of ``ranked`` (sorted by confidence, descending) have confidence >= threshold."""
    lo, hi = 0, len(ranked)
    while lo < hi:
        mid = (lo + hi) // 2
        if ranked[mid][0] >= threshold:
            lo = mid + 1
        else:
            hi = mid
    return lo


# --- A cascade of judges with a guarantee ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CascadeGuarantee:
    """The calibrated thresholds of a judge cascade (judge tiers, cheap to strong) and what they guarantee.

    ``tiers[k]`` is tier k's :class:`Guarantee`, calibrated on the ``reaching[k]`` calibration pairs that no
    earlier tier auto-decided; its ``coverage`` and ``n_labels`` are relative to those pairs, not to all.
    ``decided[k]`` of them tier k auto-decided (its ``n_used``). ``coverage`` is the share of all ``n_labels``
    calibration pairs auto-decided by some tier, ``realised_agreement`` the agreement with humans of the
    deciding tiers' verdicts on them (None when none was decided): a description of the calibration set, a
    little optimistic as an estimate since the thresholds were chosen on it; ``target`` is what is claimed.

    ``target`` is the agreement guaranteed for the auto-decided pairs as a whole: the lowest target among the
    tiers that got a threshold (None when no tier got one: nothing is auto-decided, nothing is claimed). A tier
    without a threshold decides nothing, so its target bounds nothing. ``risk`` is the sum of the tiers' risks:
    the chance, over the draw of the calibration set, that any tier's guarantee fails (see
    :func:`calibrate_cascade`).
    """

    tiers: tuple[Guarantee, ...]
    reaching: tuple[int, ...]
    decided: tuple[int, ...]
    n_labels: int
    coverage: float
    realised_agreement: float | None
    target: float | None
    risk: float
    method: str

    @property
    def thresholds(self) -> tuple[float | None, ...]:
        """Each tier's threshold (None: the tier decides nothing, every pair passes to the next)."""
        return tuple(g.threshold for g in self.tiers)


def deciding_tier(thresholds: Sequence[float | None], confidences: Sequence[float]) -> int | None:
    """The index of the tier that auto-decides a pair with these per-tier confidences under these thresholds:
    the first tier whose confidence reaches its threshold; None when the pair passes every tier (then it goes
    to the tie-break and humans). A tier whose threshold is None decides nothing.

    The same rule :func:`calibrate_cascade` applies to its calibration pairs, so a guarantee computed there
    speaks about the pairs this function sends to each tier.
    """
    _check_lengths(thresholds, confidences)
    for tier, (t, c) in enumerate(zip(thresholds, confidences, strict=True)):
        if t is not None and c >= t:
            return tier
    return None


def calibrate_cascade(
    confidences: Sequence[Sequence[float]],
    agrees: Sequence[Sequence[bool]],
    targets: Sequence[float],
    risks: Sequence[float],
    *,
    grid: Sequence[float] = DEFAULT_THRESHOLD_GRID,
    min_labels: int = 100,
    min_pairs: int = 40,
) -> CascadeGuarantee:
    """Thresholds for a cascade of judge tiers (cheap to strong) such that the pairs each tier auto-decides
    agree with humans at its target, with probability at least 1 - sum(``risks``): each tier calibrated by
    :func:`calibrate_threshold` (fixed-sequence binomial testing) at its own target and risk, on the pairs
    that would reach it, and the tiers combined by Bonferroni ("Trust or Escalate", Jung et al., ICLR 2025,
    Cascaded Selective Evaluation).

    Inputs: ``confidences[k][j]`` and ``agrees[k][j]`` are tier k's confidence on calibration pair j and
    whether its verdict agreed with the human label; every calibration pair was judged by every tier.
    ``targets[k]``, ``risks[k]``: tier k's. The first tier is calibrated on every pair, each later one on the
    pairs that no earlier tier auto-decided under the thresholds already chosen (confidence below the threshold, or the
    tier has none), which are the pairs that would reach it (:func:`deciding_tier` is the same rule).
    ``min_labels`` and ``min_pairs`` are :func:`calibrate_threshold`'s, applied per tier to the pairs
    reaching it.

    What is guaranteed. Let A_k(t) = P(tier k agrees with the human | the pair reaches tier k, c_k >= t),
    with "reaches" under the thresholds chosen for the earlier tiers. If calibration pairs and future pairs
    are exchangeable (the same distribution: the same judges, versions, templates and rubric, one series
    per tier), then with probability at least 1 - sum(risks) over the draw of the calibration set, every
    tier k that got a threshold t_k has A_k(t_k) >= targets[k]: each tier's share of the auto-decided pairs
    agrees at its target in the long run. The auto-decided pairs as a whole are a mixture over the deciding
    tiers, A = sum_k w_k A_k(t_k) with w_k the share that tier k decides, so A >= min over those tiers of
    targets[k]: that minimum is ``target``. (A weighted bound sum_k w_k targets[k] is tighter, but w_k is a
    population share only estimated here; the minimum needs no estimate.) Like :func:`calibrate_threshold`,
    it bounds rates, not any one pair or any finite batch, and says nothing once the distribution moves.

    The risks add (Bonferroni) because the guarantee needs every tier's test to be right at once: the
    union bound gives P(some tier wrong) <= sum_k P(tier k wrong) <= sum(risks), whatever the dependence
    between the tiers (the judges are correlated: hard pairs are hard for both). Chaining every tier's
    thresholds into one fixed sequence at one risk would not help: that sequence stops at its first
    failure, so it would test tier 1's grid to its end before any of tier 2's thresholds, and tier 1's walk
    only runs to the end of its grid when tier 1 may decide every pair, leaving tier 2 nothing. Interleaving
    the tiers' grids fails too, since tier k's hypotheses are about the pairs reaching it, which depend on
    the earlier thresholds not yet chosen; and passing a tier's risk on to the next (graphical procedures)
    happens only when that tier's whole grid passes, the same dead end. A valid alternative at a single
    risk is one fixed sequence along a path of joint thresholds fixed in advance, testing the pooled
    agreement of all auto-decided pairs; it guarantees the mixture only, not each tier, and ties the tiers'
    calibrations together. Per-tier guarantees are what the drift audit can keep (each tier is its own
    series), so the risks are split.

    The subtlety of tiers after the first: tier k's calibration pairs are selected by thresholds chosen
    from the same calibration set, so they are not an independent sample of the pairs reaching tier k under
    those thresholds. The p-value of tier k's test is exact when the earlier thresholds do not depend on the
    calibration data (fixed in advance, or calibrated on other pairs); here they do, a little. The walk that
    chose t_{k-1} looked only at the pairs at or above the threshold where it stopped (the first that failed:
    the next grid threshold below t_{k-1}, or the first tested when the tier got no threshold). The pairs below that are
    an ordinary sample; the pairs between it and t_{k-1} (one grid cell, or the few dozen pairs of a first
    test that failed) are selected, since the walk stopped because they disagreed with the humans more than
    their share, and they reach tier k. If tier k's correctness is correlated with tier k-1's, they are a
    little harder (positive correlation: conservative) or easier (negative: anti-conservative) for tier k
    than the population. They are a few pairs among the hundreds reaching tier k, so the effect is small: the
    simulation (tests/unit/test_cascade_guarantee.py, bench/cascade_sim.py), with judges whose correctness is
    correlated through a shared per-pair difficulty in either direction, finds tier 2's agreement on its
    calibration pairs within a tenth of a point (0.001) of the truth on average, as on fresh pairs, and tier 2's
    guarantee holding as often as when it is calibrated on fresh pairs. The drift audit's path does not have
    the selection: it calibrates each tier from the labels of pairs that reached it under the thresholds in
    force, labels not used to choose the earlier tiers' thresholds (those came from the pairs the earlier
    tiers decided); its caveat is another: when an earlier threshold moves, tier k's older labels describe
    pairs it no longer sees (docs/guides/cascade.md).

    Raises ValueError when the tiers' inputs differ in length, there is no tier, or the risks sum to 1 or
    more (the statement would be empty).
    """
    tiers = len(confidences)
    if tiers == 0:
        raise ValueError("a cascade needs at least one tier")
    if not len(agrees) == len(targets) == len(risks) == tiers:
        raise ValueError(
            f"one confidence list, agreement list, target and risk per tier: {tiers}, {len(agrees)}, "
            f"{len(targets)}, {len(risks)}"
        )
    n = len(confidences[0])
    for k in range(tiers):
        _check_calibration(confidences[k], agrees[k])
        if len(confidences[k]) != n:
            raise ValueError(f"every tier judges every calibration pair: tier {k} has {len(confidences[k])}, not {n}")
    total_risk = math.fsum(risks)
    if not total_risk < 1.0:
        raise ValueError(f"the tiers' risks sum to {total_risk:g}: the guarantee needs a total below 1")
    reach = list(range(n))
    guarantees: list[Guarantee] = []
    reaching: list[int] = []
    decided: list[int] = []
    agreeing = 0
    for k in range(tiers):
        c_k, a_k = confidences[k], agrees[k]
        g = calibrate_threshold(
            [c_k[j] for j in reach],
            [a_k[j] for j in reach],
            target=targets[k],
            risk=risks[k],
            grid=grid,
            min_labels=min_labels,
            min_pairs=min_pairs,
        )
        guarantees.append(g)
        reaching.append(len(reach))
        decided.append(g.n_used)
        t = g.threshold
        if t is not None:
            agreeing += sum(1 for j in reach if c_k[j] >= t and a_k[j])
            reach = [j for j in reach if c_k[j] < t]
    total_decided = sum(decided)
    certified = [g.target for g in guarantees if g.threshold is not None]
    return CascadeGuarantee(
        tiers=tuple(guarantees),
        reaching=tuple(reaching),
        decided=tuple(decided),
        n_labels=n,
        coverage=total_decided / n if n else 0.0,
        realised_agreement=agreeing / total_decided if total_decided else None,
        target=min(certified) if certified else None,
        risk=total_risk,
        method=(
            f"per-tier fixed-sequence binomial tests (Learn-then-Test) on the pairs reaching each tier, "
            f"Bonferroni over {tiers} tiers: total risk {total_risk:g}"
        ),
    )
