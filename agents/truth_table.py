"""The truth table: what two mapped orderings add up to.

Pure: two ``OrderingResult`` in, one ``Reconciliation`` out, before any policy or event. The rule,
with its precedence written down (the first that applies wins):

1. either ordering invalid after its re-asks      -> review  "judge_rejected" (the judge refused the
                                                     request: a 4xx such as a bad key), else
                                                     "judge_unavailable" (the judge was down), else
                                                     "ordering_invalid" (bad replies)
2. the orders name different candidates (a flip)  -> tie-break "position_inconsistent"
3. either order says TIE (both TIE included)      -> tie-break "tie"
4. same winner, mean confidence < threshold       -> tie-break "low_confidence" (the mean stated confidence,
                                                     or the mean token probability: :func:`reconcile`)
5. same winner, mean confidence >= threshold      -> verdict, decided_by="primary", consistent=True

Invalid comes first because nothing else about an invalid ordering can be trusted. Among failures, a
rejection outranks an outage and an outage outranks bad replies (:func:`failure_reason`): a refusal is
a configuration fault that no retry fixes, so the edge must not re-judge the pair as it does for an
outage, and a judge that was down says nothing about its replies. A flip outranks a
tie because it is the stronger evidence of position bias, and both outrank low confidence, which is
only meaningful when the orders agree. The threshold comparison tolerates float noise of 1e-9 so
that a mean of exactly 0.7 (e.g. 0.65 and 0.75) is a verdict however the sum rounds.

What the policy makes of a reconciliation (the kappa guard, the tie-break switch) is
``agents.policy_overlay``; a jury's tally over its jurors' reconciliations is ``agents.jury``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal

from pairjudge.schemas.events import ConfidenceSource, ErrorKind, OrderingResult, ReviewReason, TieBreakReason
from pairjudge.schemas.outcomes import DecidedKind
from pairjudge.schemas.pair import TIE

__all__ = ["FailureReason", "Reconciliation", "at_least", "failure_reason", "reconcile", "token_mean"]

FailureReason = Literal["judge_rejected", "judge_unavailable"]

_FLOAT_TOLERANCE: Final = 1e-9


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """What the two orderings add up to, before any event is built."""

    outcome: DecidedKind
    reason: TieBreakReason | ReviewReason | None
    #: The verdict's winner (a candidate id); None unless ``outcome == "verdict"``.
    winner: str | None
    #: Mean of the two confidences when both orderings are valid.
    mean_confidence: float | None
    #: Both orderings valid and naming the same candidate (or both TIE).
    consistent: bool
    #: Both orderings valid, decisive, and naming different candidates.
    flip: bool
    #: Why the judge gave no answer, when that is what this review is for (``reason`` says the same): the
    #: core's typed cause for the decision's disposition (``agents.disposition``), never read back from text.
    failure: FailureReason | None = None
    #: Which confidence ``mean_confidence`` is (:func:`reconcile`); and, when both orders carried token
    #: probabilities, both means side by side (None otherwise: ``mean_confidence`` is then the stated one).
    confidence_source: ConfidenceSource = "stated"
    token_confidence: float | None = None
    stated_confidence: float | None = None


def at_least(value: float, threshold: float) -> bool:
    """``value >= threshold``, tolerating float noise (a mean of 0.65 and 0.75 is 0.7)."""
    return value >= threshold or math.isclose(value, threshold, rel_tol=0.0, abs_tol=_FLOAT_TOLERANCE)


def failure_reason(kinds: Iterable[ErrorKind | None]) -> FailureReason | None:
    """The review reason for orderings that ended with these error kinds, when the judge failed.

    "judge_rejected" if any was refused (a 4xx: a bad key, a prompt over the context length; never
    retried), else "judge_unavailable" if any found the judge down (the edge may judge the pair again
    later), else None: the judge answered, only badly, and the caller names that its own way.
    """
    seen = set(kinds)
    if "judge_rejected" in seen:
        return "judge_rejected"
    if "judge_unavailable" in seen:
        return "judge_unavailable"
    return None


def token_mean(ab: OrderingResult, ba: OrderingResult) -> float | None:
    """The mean over both orders of each order's token probability for its own winner; None unless both have one.

    For orders that agree this is the average of the two probabilities for the same candidate (the swapped
    order's "A" already mapped back to the original "B" in ``token_probabilities``): an average, not a product
    or a renormalised product, because the two readings are of one judge on one pair and strongly dependent, so
    multiplying them as if independent would be overconfident; the average is what the stated confidences get,
    and what Trust or Escalate (Jung et al., ICLR 2025) calibrated its thresholds on.
    """
    a, b = ab.token_confidence, ba.token_confidence
    return (a + b) / 2 if a is not None and b is not None else None


def reconcile(
    ab: OrderingResult, ba: OrderingResult, threshold: float, *, token_probability: bool = False
) -> Reconciliation:
    """The truth table over two mapped orderings; see the module docstring for the precedence.

    The confidence it compares with ``threshold`` (and hands on, as ``mean_confidence``, to the risk levels'
    "review below" and the audit sampling) is the mean stated confidence, or, with ``token_probability`` and
    token probabilities in both orders, their mean (:func:`token_mean`).
    """
    if not (ab.valid and ba.valid):
        failed = failure_reason(r.error_kind for r in (ab, ba) if not r.valid)
        reason: ReviewReason = failed or "ordering_invalid"
        return Reconciliation("review", reason, None, None, consistent=False, flip=False, failure=failed)
    if ab.mapped_winner is None or ba.mapped_winner is None or ab.confidence is None or ba.confidence is None:
        raise ValueError("a valid OrderingResult must carry mapped_winner and confidence")
    stated = (ab.confidence + ba.confidence) / 2
    tokens = token_mean(ab, ba)
    chosen = token_probability and tokens is not None
    mean = tokens if chosen and tokens is not None else stated
    side: dict[str, Any] = {}
    if tokens is not None:
        side = {"token_confidence": tokens, "stated_confidence": stated}
        if chosen:
            side["confidence_source"] = "token_probability"
    consistent = ab.mapped_winner == ba.mapped_winner
    flip = not consistent and TIE not in (ab.mapped_winner, ba.mapped_winner)
    if flip:
        return Reconciliation("tiebreak", "position_inconsistent", None, mean, consistent=False, flip=True, **side)
    if TIE in (ab.mapped_winner, ba.mapped_winner):
        return Reconciliation("tiebreak", "tie", None, mean, consistent=consistent, flip=False, **side)
    if not at_least(mean, threshold):
        return Reconciliation("tiebreak", "low_confidence", None, mean, consistent=True, flip=False, **side)
    return Reconciliation("verdict", None, ab.mapped_winner, mean, consistent=True, flip=False, **side)
