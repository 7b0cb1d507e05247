"""The seed 002 tie-break resolver's logic: weighted scores, the forced-choice re-ask, the decision.

Per ordering:

1. Ask with the tie-break template; schema failures go through the usual re-ask path (``max_reasks``).
2. Recompute the weighted scores ourselves from the per-criterion winners and the *configured*
   weights. The judge's own arithmetic is recorded but never trusted.
3. Exactly equal recomputed scores, or a reply that applied seed 002's escalation rule, leave the
   ordering unresolved at once: seed 002 sends a true tie to a human, never to a forced pick.
4. A reply whose confidence is below the pair's risk level's tie-break threshold
   (``Policy.tiebreak_threshold_for``: ``tiebreak_confidence_threshold`` for a normal pair) or whose
   winner contradicts the recomputed scores is re-asked ONCE with the forced-choice instruction.
5. Still unsettled (or invalid) -> the ordering is unresolved.

Across the two orderings (first that applies wins): a judge that refused the request (a 4xx) -> review
"judge_rejected"; a judge that was down -> "judge_unavailable"; an invalid ordering -> "tiebreak_invalid";
an unresolved ordering ->
"tiebreak_equal_scores" if its recomputed scores were exactly equal, "tiebreak_no_signal" if the judge
found nothing to decide on (a valid reply still below the confidence threshold after the forced-choice
re-ask, or a judge that escalated on unequal scores), else "tiebreak_invalid" (a winner that contradicts
its own scores); the orders choosing different candidates -> "tiebreak_disagreement"; a mean confidence below the
tie-break stage's own calibrated threshold for the series (``Policy.tiebreak_verdict_threshold_for``, published by
the drift audit from the tie-break's labelled verdicts: ``agents.audit.stages``) -> "tiebreak_no_signal";
otherwise a verdict with ``decided_by="tiebreak"`` (or, with the kappa guard tripped, review "kappa_guard":
``agents.policy_overlay``).

The scores are worked out by position, as the judge gave them; ``agents.orderings`` maps them back to
candidate ids with the rest of the reply.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

from pairjudge.agents.builders import Outcome, review, verdict
from pairjudge.agents.judge import Judge, JudgeCall
from pairjudge.agents.orderings import build_ordering
from pairjudge.agents.policy import Policy
from pairjudge.agents.policy_overlay import overriding_reason
from pairjudge.agents.prompts import forced_choice, render_tiebreak
from pairjudge.agents.truth_table import FailureReason, at_least, failure_reason
from pairjudge.agents.validation import AskResult, ask_validated, check_tiebreak
from pairjudge.schemas.audit import AuditSeries
from pairjudge.schemas.events import ErrorKind, JudgeInfo, Order, OrderingResult, TieBreakRequest
from pairjudge.schemas.pair import CandidatePair
from pairjudge.schemas.replies import Position, TieBreakReply
from pairjudge.schemas.rubric import TieBreakWeights

#: Keys added to a tie-break ordering's ``dimension_scores``. A colon cannot occur in a criterion
#: name (``^[A-Za-z0-9_ \-]+$``), so these never collide with a criterion.
RECOMPUTED_KEY = "weighted_score:recomputed"
JUDGE_KEY = "weighted_score:judge"

_TOLERANCE = 1e-9


def _equal(x: float, y: float) -> bool:
    # "Exactly equal" up to float noise: 0.4 vs 0.3 + 0.1 must count as equal.
    return math.isclose(x, y, rel_tol=_TOLERANCE, abs_tol=_TOLERANCE)


def weighted_scores(reply: TieBreakReply, weights: TieBreakWeights) -> tuple[float, float]:
    """(score of position A, score of position B): the configured weights of the criteria each won.

    Assumes the reply passed :func:`agents.validation.check_tiebreak` (each criterion exactly once).
    """
    weight = {c.name: c.weight for c in weights.criteria}
    a = math.fsum(weight[c.criterion] for c in reply.criteria_analysis if c.winner == "A")
    b = math.fsum(weight[c.criterion] for c in reply.criteria_analysis if c.winner == "B")
    return a, b


@dataclass(frozen=True, slots=True)
class Assessment:
    """One valid tie-break reply, checked against our own arithmetic."""

    score_a: float
    score_b: float
    #: The position the recomputed scores prefer; None when they are equal.
    preferred: Position | None
    arithmetic_mismatch: bool
    #: Why the reply does not settle the tie; empty when it does.
    problems: tuple[str, ...]
    #: The judge applied seed 002's escalation rule (it found the outputs equal on the weighted criteria).
    escalated: bool = False
    #: The reply's winner is not the side its own criteria favour.
    contradicts: bool = False

    @property
    def equal(self) -> bool:
        return self.preferred is None

    @property
    def no_signal(self) -> bool:
        """Unsettled only because the judge found too little to go on: below the confidence threshold, or
        escalating on unequal scores, with nothing contradictory in the reply."""
        return bool(self.problems) and not self.equal and not self.contradicts


def assess(reply: TieBreakReply, weights: TieBreakWeights, threshold: float) -> Assessment:
    a, b = weighted_scores(reply, weights)
    preferred: Position | None = None if _equal(a, b) else ("A" if a > b else "B")
    mismatch = not (_equal(a, reply.weighted_score_a) and _equal(b, reply.weighted_score_b))
    problems: list[str] = []
    if reply.confidence < threshold:
        problems.append(f"confidence {reply.confidence:g} is below the required {threshold:g}")
    if reply.escalation_triggered:
        problems.append("escalation_triggered is true")
    if preferred is None:
        problems.append(f"the weighted scores are equal (A {a:g}, B {b:g}), so neither output is preferred")
    contradicts = preferred is not None and reply.winner != preferred
    if contradicts:
        problems.append(f'winner "{reply.winner}" contradicts the weighted scores (A {a:g}, B {b:g})')
    return Assessment(
        a, b, preferred, mismatch, tuple(problems), escalated=reply.escalation_triggered, contradicts=contradicts
    )


@dataclass(frozen=True, slots=True)
class TieBreakOrdering:
    """One tie-break ordering: its ``OrderingResult`` plus what the decision needs."""

    result: OrderingResult
    calls: tuple[JudgeCall, ...]
    status: Literal["resolved", "unresolved", "invalid"]
    error_kind: ErrorKind | None
    #: The final reply's assessment, when there was a valid reply.
    assessment: Assessment | None
    #: Recomputed weighted scores by candidate id, when there was a valid reply.
    scores: dict[str, float] | None


def _ordering(
    pair: CandidatePair,
    order: Order,
    weights: TieBreakWeights,
    ask: AskResult[TieBreakReply],
    assessment: Assessment | None,
    *,
    calls: tuple[JudgeCall, ...],
    retries: int,
    forced: bool,
) -> TieBreakOrdering:
    """The ordering for the last ask's reply: invalid without one, unresolved while it has problems."""
    reply = ask.reply
    extra: dict[str, tuple[float, float]] = {}
    differentiators: list[str] = []
    status: Literal["resolved", "unresolved", "invalid"]
    error_kind: ErrorKind | None
    if reply is None or assessment is None:
        status, error, error_kind = "invalid", ask.error, ask.error_kind
    else:
        # By position, (A, B): build_ordering keys them by candidate id like the reply's own scores.
        extra = {
            RECOMPUTED_KEY: (assessment.score_a, assessment.score_b),
            JUDGE_KEY: (reply.weighted_score_a, reply.weighted_score_b),
        }
        # Which dimensions broke the tie (seed 002 asks for this in the audit trail): the criteria
        # the chosen output won, heaviest first.
        weight = {c.name: c.weight for c in weights.criteria}
        won = sorted(
            (c for c in reply.criteria_analysis if c.winner == reply.winner),
            key=lambda c: -weight.get(c.criterion, 0.0),
        )
        differentiators = [f"{c.criterion} (weight {weight.get(c.criterion, 0.0):g})" for c in won]
        if assessment.problems:
            # A schema-valid reply that does not settle the tie: valid, but it carries why.
            status, error, error_kind = "unresolved", "; ".join(assessment.problems), "unresolved"
        else:
            status, error, error_kind = "resolved", None, None
    result = build_ordering(
        pair,
        order,
        reply=reply,
        calls=calls,
        retries=retries,
        answered_model=ask.answered_model,
        error=error,
        error_kind=error_kind,
        forced_choice=forced,
        extra_scores=extra,
        extra_differentiators=differentiators,
    )
    scores = dict(result.dimension_scores[RECOMPUTED_KEY]) if extra else None
    return TieBreakOrdering(result, calls, status, error_kind, assessment, scores)


async def judge_tiebreak_ordering(
    pair: CandidatePair,
    weights: TieBreakWeights,
    order: Order,
    judge: Judge,
    policy: Policy,
) -> TieBreakOrdering:
    """Judge one ordering with the tie-break template, with at most one forced-choice re-ask."""
    request = render_tiebreak(pair, weights, order, datamark=policy.datamark)
    check = check_tiebreak(weights)
    threshold = policy.tiebreak_threshold_for(pair.risk)
    first = await ask_validated(judge, request, TieBreakReply, check, policy.max_reasks, order=order)
    assessment = assess(first.reply, weights, threshold) if first.reply is not None else None
    # Settled, invalid, or a true tie: seed 002 sends exactly equal weighted scores (or a judge that
    # applied its escalation rule) to a human; forcing a pick there would be the arbitrary choice it
    # rules out.
    if assessment is None or not assessment.problems or assessment.equal or assessment.escalated:
        return _ordering(
            pair, order, weights, first, assessment, calls=first.calls, retries=first.retries, forced=False
        )

    # Exactly one forced-choice re-ask (low confidence, a winner against its own scores); its own
    # schema failures still get the normal re-asks.
    forced_request = forced_choice(
        request, first.text or "", assessment.problems, attempt=request.attempt + first.retries + 1
    )
    second = await ask_validated(judge, forced_request, TieBreakReply, check, policy.max_reasks, order=order)
    if second.answered_model is None and first.answered_model is not None:
        second = dataclasses.replace(second, answered_model=first.answered_model)
    final = assess(second.reply, weights, threshold) if second.reply is not None else None
    return _ordering(
        pair,
        order,
        weights,
        second,
        final,
        calls=first.calls + second.calls,
        retries=first.retries + 1 + second.retries,
        forced=True,
    )


def _mean_scores(ab: TieBreakOrdering, ba: TieBreakOrdering) -> dict[str, float]:
    if ab.scores is None or ba.scores is None:
        raise ValueError("both orderings need scores")
    return {cid: (ab.scores[cid] + ba.scores[cid]) / 2 for cid in ab.scores}


def tiebreak_failure(ab: TieBreakOrdering, ba: TieBreakOrdering) -> FailureReason | None:
    """Why the tie-break's judge gave no answer, when an ordering is invalid because of it (a refusal or an
    outage: the review's reason, and the decision's disposition); None otherwise."""
    both = (ab, ba)
    return failure_reason(o.error_kind for o in both) if any(o.status == "invalid" for o in both) else None


def decide_tiebreak(
    request: TieBreakRequest,
    ab: TieBreakOrdering,
    ba: TieBreakOrdering,
    policy: Policy,
    judge: JudgeInfo,
) -> Outcome:
    """The tie-break stage's event for two judged orderings (precedence in the module docstring)."""
    pair = request.pair
    both = (ab, ba)
    orderings = (*request.primary, ab.result, ba.result)

    def to_review(
        reason: Literal[
            "judge_rejected",
            "judge_unavailable",
            "tiebreak_invalid",
            "tiebreak_no_signal",
            "tiebreak_equal_scores",
            "tiebreak_disagreement",
            "kappa_guard",
            "tiebreak_disabled",
        ],
    ) -> Outcome:
        return review(pair, reason, stage="tiebreak", orderings=orderings, judge=judge, trace_id=request.trace_id)

    if any(o.status == "invalid" for o in both):
        return to_review(tiebreak_failure(ab, ba) or "tiebreak_invalid")
    unresolved = [o for o in both if o.status == "unresolved"]
    if unresolved:
        # Equal scores are a true tie for a human; a judge that found nothing to decide on (it stayed
        # below the threshold, or escalated) is "no signal"; a winner against its own scores is a failed reply.
        assessed = [o.assessment for o in unresolved if o.assessment is not None]
        if any(a.equal for a in assessed):
            return to_review("tiebreak_equal_scores")
        if assessed and all(a.no_signal for a in assessed):
            return to_review("tiebreak_no_signal")
        return to_review("tiebreak_invalid")
    if ab.result.mapped_winner != ba.result.mapped_winner:
        return to_review("tiebreak_disagreement")
    winner = ab.result.mapped_winner
    if winner is None or ab.result.confidence is None or ba.result.confidence is None:
        raise ValueError("resolved tie-break orderings must carry a winner and a confidence")
    notes = []
    for o in both:
        if o.assessment is not None and o.assessment.arithmetic_mismatch:
            judge_a, judge_b = _judge_scores(o)
            notes.append(
                f"[{o.result.order_shown}] the judge's weighted scores (A {judge_a:g}, B {judge_b:g}) differ from the"
                f" recomputed scores (A {o.assessment.score_a:g}, B {o.assessment.score_b:g});"
                " the recomputed scores were used."
            )
    weighted = _mean_scores(ab, ba)
    # The would-be verdict is complete; the policy has the last word (the kappa guard).
    paused = overriding_reason(policy, "verdict")
    if paused is not None:
        return to_review(paused)
    confidence = (ab.result.confidence + ba.result.confidence) / 2
    series_key = AuditSeries.for_pair(request.primary_judge, pair).key
    if not at_least(confidence, policy.tiebreak_verdict_threshold_for(series_key, pair.risk)):
        # Below the confidence at which this series' tie-break verdicts were shown to reach their target.
        return to_review("tiebreak_no_signal")
    return verdict(
        pair,
        winner,
        confidence=confidence,
        decided_by="tiebreak",
        orderings=orderings,
        judged=(ab.result, ba.result),
        rubric_kind=pair.rubric.kind,
        judge=judge,
        tiebreak_reason=request.reason,
        weighted_scores=weighted,
        justification_note="\n".join(notes),
        trace_id=request.trace_id,
    )


def held_back_winner(ab: TieBreakOrdering, ba: TieBreakOrdering) -> tuple[str, float] | None:
    """The winner and mean confidence of a would-be tie-break verdict: both orderings resolved on the same
    candidate. A review that held such a verdict back still records it, so its label measures the tie-break."""
    a, b = ab.result, ba.result
    if ab.status != "resolved" or ba.status != "resolved" or a.mapped_winner != b.mapped_winner:
        return None
    if a.mapped_winner is None or a.confidence is None or b.confidence is None:
        return None
    return a.mapped_winner, (a.confidence + b.confidence) / 2


def arithmetic_mismatches(*orderings: TieBreakOrdering) -> int:
    """How many of ``orderings`` had a reply whose own weighted scores differ from the recomputed ones."""
    return sum(1 for o in orderings if o.assessment is not None and o.assessment.arithmetic_mismatch)


def _judge_scores(o: TieBreakOrdering) -> tuple[float, float]:
    scores = o.result.dimension_scores[JUDGE_KEY]
    return scores[o.result.shown_as_a], scores[o.result.shown_as_b]
