"""Active audit sampling: which automatic verdicts also go to a human, and with what probability.

The rule, for every verdict a judge decided (primary or tie-break stage):

- Its *sampling class* is ``"uncertain"`` when the verdict came out of the tie-break stage (the primary
  orders flipped, tied or were not confident enough), when a jury's jurors were not unanimous (a juror
  voted for the other candidate or abstained), or when its mean confidence is less than
  ``audit_uncertain_margin`` above the threshold it needed; otherwise ``"confident"``.
- Its *inclusion probability* is ``π = min(1, max(audit_floor, share × audit_scale))``, ``share`` being
  ``audit_share`` for a confident verdict and ``max(audit_uncertain_share, audit_share)`` for an
  uncertain one (an uncertain verdict is never audited less often than a confident one: raising
  ``audit_share`` to 1 still audits every verdict).
- The pair is drawn iff ``audit_fraction(pair_id, audit_seed) < π``, and a drawn pair wants a second,
  independent reviewer iff another hash of it (``audit_fraction(pair_id, seed + "\\x1fdouble")``) is below
  ``audit_double_share``.

Other outcomes: a review request has ``π = 1`` and class ``"review"`` (every escalated pair gets a
label); a tie-break request has none (a way-station: the pair's verdict, and its π, come from the
tie-break stage); a verdict settled by rule before any judge call has none either (it says nothing about
the judge and is never sampled). ``audit_share = 0`` switches auditing off: nothing is drawn and no π is
recorded (the record's field must be > 0, and a probability of 0 has no inverse to weight by).

Why it is built this way:

- The human-basis estimates (prediction-powered inference over an active sample, Zrnic & Candès 2024)
  weight each audit label by ``1/π``. That is unbiased only with the *exact* probability the pair was
  drawn with, so π is recorded with every verdict, drawn or not, as it was used, whatever scale or
  control update was in force at the time.
- Uncertain verdicts are where the judge and the humans disagree most, so labelling them more often
  spends the same labels where they reduce the estimate's variance most, up to a point: the variance is
  least when each class's probability is proportional to the spread of ``person - judge`` in it (Neyman
  allocation), about 1.5-2.5x for judges 55-65% right on uncertain verdicts and 90-95% on the rest. The
  default ratio is 2x (10% against 5%); the first default, 5x (25%), needed 174 labels to a decision
  where uniform 9% needed 140 (bench/human_gate.py, table 4). The scoreboard recommends the shares its
  own labels imply (``agents.scores.human.neyman_shares``).
- The floor bounds every weight by ``1/audit_floor``: however hard the budget squeezes, no class goes
  unlabelled and no single label can dominate the estimate.
- The budget scale (:func:`budget_scale`, measured and applied at the edge) keeps the labels affordable
  at production rates: it shrinks every share in proportion until the expected labels per period fit.
- Hashing the pair id (never a random draw) keeps a redelivered pair's draw the same under the same
  policy, on every worker.

Pure: no I/O, no clocks. The edge measures the verdict rates and sets ``Policy.audit_scale``.

A drawn verdict's review copy (:func:`audit_copy`, reason "audit_sample") is built here too, where it
is drawn: :func:`audit` is the whole step for a stage's outcome.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from pairjudge.agents.builders import Outcome
from pairjudge.agents.policy import Policy
from pairjudge.schemas.events import JuryVote, PairVerdict, ReviewRequest, Stage
from pairjudge.schemas.pair import CandidatePair

__all__ = [
    "CONFIDENT",
    "REVIEW",
    "UNCERTAIN",
    "AuditDraw",
    "SamplingClass",
    "VerdictClass",
    "audit",
    "audit_copy",
    "audit_fraction",
    "budget_scale",
    "class_share",
    "draw",
    "drawn",
    "expected_labels",
    "inclusion_probability",
    "reviews_wanted",
    "verdict_class",
]

VerdictClass = Literal["confident", "uncertain"]
SamplingClass = Literal["confident", "uncertain", "review"]
CONFIDENT: Final = "confident"
UNCERTAIN: Final = "uncertain"
REVIEW: Final = "review"
#: Mixed into the seed for the second-reviewer hash, so it is independent of the draw itself.
_DOUBLE_SALT = "\x1fdouble"
#: The float tolerance of ``agents.truth_table.at_least``: a mean exactly at threshold + margin is confident.
_TOLERANCE = 1e-9


def audit_fraction(pair_id: str, seed: str = "") -> float:
    """A stable number in [0, 1) per pair: sha256 of the seed and the pair id, first 8 bytes, over 2**64.

    Deterministic so every worker, and a pair redelivered after a rebalance, samples it (or not) the
    same way. The seed lets an operator draw a fresh sample (say, per audit campaign) without anyone
    being able to tell from a pair id alone whether it will be audited.
    """
    key = f"{seed}\x1f{pair_id}" if seed else pair_id
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


#: The seed of the spending cap's ``sample`` action (``agents.spend``): its own stable fraction, so which pairs
#: it keeps says nothing about which are audited.
SPEND_SAMPLE_SEED = "spend-cap"


def still_sampled(pair_id: str, share: float) -> bool:
    """Whether a pair is among the ``share`` still judged under the spending cap's ``sample`` action: by its id
    alone, so a redelivered pair is sampled the same way."""
    return share >= 1.0 or audit_fraction(pair_id, seed=SPEND_SAMPLE_SEED) < share


def verdict_class(
    *,
    stage: Stage,
    mean_confidence: float | None,
    threshold: float | None,
    margin: float,
    votes: Sequence[JuryVote] = (),
    winner: str | None = None,
) -> VerdictClass:
    """The sampling class of a judge's verdict (see the module docstring).

    ``votes`` are a jury's votes (empty for a single judge) and ``winner`` the verdict's candidate. A
    primary verdict without a known confidence or threshold counts as uncertain: nothing shows it is not.
    """
    if stage == "tiebreak":
        return UNCERTAIN
    if votes and not all(not v.abstained and v.vote == winner for v in votes):
        return UNCERTAIN
    if mean_confidence is None or threshold is None:
        return UNCERTAIN
    if mean_confidence + _TOLERANCE < threshold + margin:
        return UNCERTAIN
    return CONFIDENT


def class_share(policy: Policy, sampling_class: VerdictClass) -> float:
    """The base share of a class, before the budget scale and the floor."""
    if sampling_class == UNCERTAIN:
        return max(policy.audit_uncertain_share, policy.audit_share)
    return policy.audit_share


def inclusion_probability(policy: Policy, sampling_class: VerdictClass, scale: float | None = None) -> float | None:
    """``min(1, max(floor, share × scale))`` for a verdict of this class; None while auditing is off.

    ``scale`` defaults to the policy's ``audit_scale`` (the budget's); :func:`budget_scale` passes others.
    """
    if policy.audit_share <= 0.0:
        return None
    used = policy.audit_scale if scale is None else scale
    return min(1.0, max(policy.audit_floor, class_share(policy, sampling_class) * used))


def drawn(pair_id: str, probability: float | None, seed: str = "") -> bool:
    """Whether the pair falls in the sample drawn with ``probability`` (None or 0: never)."""
    return probability is not None and audit_fraction(pair_id, seed) < probability


def reviews_wanted(pair_id: str, seed: str, double_share: float) -> int:
    """2 for the ``double_share`` of drawn pairs that also get a second, independent reviewer; else 1."""
    return 2 if audit_fraction(pair_id, seed + _DOUBLE_SALT) < double_share else 1


@dataclass(frozen=True, slots=True)
class AuditDraw:
    """What sampling made of one verdict: its class, the probability used, and whether it was drawn."""

    sampling_class: VerdictClass
    #: None when auditing is off (``audit_share`` 0).
    inclusion_probability: float | None
    drawn: bool
    #: Reviewers a drawn pair wants (1 or 2); 1 for a pair not drawn.
    reviews_wanted: int = 1


def draw(pair_id: str, policy: Policy, sampling_class: VerdictClass) -> AuditDraw:
    """The audit draw of a verdict of ``sampling_class`` on ``pair_id`` under ``policy``."""
    probability = inclusion_probability(policy, sampling_class)
    taken = drawn(pair_id, probability, policy.audit_seed)
    wanted = reviews_wanted(pair_id, policy.audit_seed, policy.audit_double_share) if taken else 1
    return AuditDraw(sampling_class, probability, taken, wanted)


# --- the audit copy ---------------------------------------------------------------------------


def audit_copy(
    outcome: Outcome,
    pair: CandidatePair,
    stage: Stage,
    probability: float | None,
    seed: str = "",
    *,
    reviews_wanted: int = 1,
) -> ReviewRequest | None:
    """A review copy of an automatic verdict when the pair falls in the audit sample drawn with
    ``probability`` (None or 0 draws nothing); otherwise None.

    ``reviews_wanted`` is 2 for a copy that also goes to a second, independent reviewer.
    """
    if not isinstance(outcome, PairVerdict) or not drawn(pair.pair_id, probability, seed):
        return None
    return ReviewRequest(
        pair_id=pair.pair_id,
        reason="audit_sample",
        stage=stage,
        pair=pair,
        orderings=outcome.orderings,
        last_justification=outcome.justification,
        audit=True,
        judge=outcome.judge,
        trace_id=outcome.trace_id,
        reviews_wanted=reviews_wanted,
    )


def audit(
    outcome: Outcome, pair: CandidatePair, stage: Stage, policy: Policy, sampling_class: VerdictClass
) -> tuple[AuditDraw | None, ReviewRequest | None]:
    """A judge verdict's audit draw and, when drawn, its review copy; (None, None) for anything else."""
    if not isinstance(outcome, PairVerdict):
        return None, None
    sampled = draw(pair.pair_id, policy, sampling_class)
    if not sampled.drawn:  # audit_copy would hash the pair id again to find the same
        return sampled, None
    copy = audit_copy(
        outcome,
        pair,
        stage,
        sampled.inclusion_probability,
        policy.audit_seed,
        reviews_wanted=sampled.reviews_wanted,
    )
    return sampled, copy


# --- the label budget -------------------------------------------------------------------------


def expected_labels(policy: Policy, verdicts: Mapping[VerdictClass, float], scale: float | None = None) -> float:
    """Audit labels expected from ``verdicts`` (verdicts per period, by class) at ``scale``.

    A drawn pair marked for a second reviewer costs two labels, so each draw counts ``1 + double_share``.
    Escalated pairs are not counted: they are labelled whatever the audit does.
    """
    per_draw = 1.0 + policy.audit_double_share
    total = 0.0
    for sampling_class, count in verdicts.items():
        probability = inclusion_probability(policy, sampling_class, scale)
        if probability is not None and count > 0:
            total += count * probability * per_draw
    return total


def budget_scale(policy: Policy, verdicts: Mapping[VerdictClass, float], budget: float) -> float:
    """The largest scale in (0, 1] at which the expected audit labels per period fit ``budget``.

    ``verdicts`` are the (estimated) automatic verdicts per period by class. 1 when there is no budget
    (``budget <= 0``), auditing is off, or the base shares already fit. The floor makes the expected
    labels piecewise linear in the scale, so the answer is exact rather than ``budget / expected``
    (which would overspend once some class sits at the floor). When even the floor alone exceeds the
    budget, the floor wins: the scale is then the one at which every class has reached the floor
    (smaller would change nothing), and the labels exceed the budget.
    """
    if budget <= 0 or policy.audit_share <= 0.0 or expected_labels(policy, verdicts, 1.0) <= budget:
        return 1.0
    shares = [class_share(policy, c) for c, n in verdicts.items() if n > 0 and class_share(policy, c) > 0]
    # Below the smallest of these, every class's probability is the floor: the scale changes nothing there.
    lowest = min(1.0, policy.audit_floor / max(shares)) if shares else 1.0
    if expected_labels(policy, verdicts, lowest) >= budget:
        return lowest
    # Each class turns from the floor to share × scale at floor / share: between two such points, and
    # below any share × scale reaching 1 (impossible for scale <= 1 with shares <= 1), it is linear.
    points = sorted({lowest, 1.0, *(policy.audit_floor / s for s in shares if lowest < policy.audit_floor / s < 1.0)})
    for low, high in itertools.pairwise(points):
        at_low, at_high = expected_labels(policy, verdicts, low), expected_labels(policy, verdicts, high)
        if at_high >= budget:
            if at_high == at_low:  # pragma: no cover - a flat piece cannot cross the budget from below
                return low
            return low + (high - low) * (budget - at_low) / (at_high - at_low)
    return 1.0  # pragma: no cover - expected(1.0) > budget was checked above
