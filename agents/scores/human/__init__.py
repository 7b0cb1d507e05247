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

**Decisions that stick** (issue 41). The gate reads the running intersection of the sequence's intervals
(:class:`HeldInterval`: the highest low end and lowest high end so far), valid exactly because each is a
confidence sequence (all hold at once with probability 1 - alpha); it only narrows, so a decision once reached
stays. Looks are taken in only once the gate may decide: ``min_labels`` labels in all and
``min_stratum_labels`` (default the same) in every stratum with pairs, so review labels alone never make up the
minimum while the stratum holding most pairs has a handful. :func:`decide_human` is :func:`decide_arrays` on
one basis (:class:`BasisArrays`, rule-settled pairs included), so the simulations and the service read one
rule. ``python -m bench.human_stick``: before, 12.7-14.4% of null streams decided and went back; now none.

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

from pairjudge.agents.scores.human.basis import (
    DEFAULT_TARGET_LABELS,
    MAX_FORECAST_LABELS,
    MIN_LABELS,
    MIN_STRATUM_LABELS,
    HumanBasis,
    HumanDecision,
    StratumSums,
)
from pairjudge.agents.scores.human.estimator import (
    Array,
    BasisArrays,
    EstimateArrays,
    HumanEstimate,
    MissingLabels,
    StratumEstimate,
    SumsArray,
    confidence_sequence,
    cs_radius_factor,
    estimate,
    estimate_arrays,
    pseudo_disagreements,
    stratum_estimate,
)
from pairjudge.agents.scores.human.gate import (
    CONTINUE,
    PROMOTE,
    REJECT,
    SAMPLED_CLASSES,
    STRATUM_WORDS,
    GateArrays,
    HeldInterval,
    HumanGate,
    decide_arrays,
    decide_human,
    labels_needed,
    neyman_shares,
    rectifier_sd,
    short_stratum,
    strata_ready,
    stratum_words,
    worst_case,
)

__all__ = [
    "CONTINUE",
    "DEFAULT_TARGET_LABELS",
    "MAX_FORECAST_LABELS",
    "MIN_LABELS",
    "MIN_STRATUM_LABELS",
    "PROMOTE",
    "REJECT",
    "SAMPLED_CLASSES",
    "STRATUM_WORDS",
    "Array",
    "BasisArrays",
    "EstimateArrays",
    "GateArrays",
    "HeldInterval",
    "HumanBasis",
    "HumanDecision",
    "HumanEstimate",
    "HumanGate",
    "MissingLabels",
    "StratumEstimate",
    "StratumSums",
    "SumsArray",
    "confidence_sequence",
    "cs_radius_factor",
    "decide_arrays",
    "decide_human",
    "estimate",
    "estimate_arrays",
    "labels_needed",
    "neyman_shares",
    "pseudo_disagreements",
    "rectifier_sd",
    "short_stratum",
    "strata_ready",
    "stratum_estimate",
    "stratum_words",
    "worst_case",
]
