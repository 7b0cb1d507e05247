"""The decision facts: what a decision was and how it came about, typed, for telemetry and the drift audit.

A stage's ``Decision`` carries its outcome event and these facts beside it: ``DecisionFacts`` (the
edge names them as ``pairjudge.*`` span attributes, and the drift audit records them) and an
``EvaluationResult`` (the edge's ``gen_ai.evaluation.result`` event). They are derived once, from the
outcome and what led to it (:func:`decision_facts`, :func:`evaluation`), so no consumer re-reads the
event to find out what happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pairjudge.agents.builders import Outcome
from pairjudge.agents.cost import cost_of
from pairjudge.agents.judge import JudgeCall
from pairjudge.agents.sampling import REVIEW, AuditDraw
from pairjudge.agents.truth_table import Reconciliation
from pairjudge.schemas.events import (
    ConfidenceSource,
    DecidedBy,
    InjectionFlag,
    JuryVote,
    OrderingResult,
    PairVerdict,
    ReviewReason,
    ReviewRequest,
    Stage,
    TieBreakReason,
)
from pairjudge.schemas.outcomes import DecidedKind, decided_kind
from pairjudge.schemas.pair import CandidatePair

__all__ = ["DecisionFacts", "EvaluationResult", "decision_facts", "evaluation"]


@dataclass(frozen=True, slots=True)
class EvaluationResult:
    """What the edge records as a ``gen_ai.evaluation.result`` event.

    ``explanation`` is the model's justification for verdicts (output-derived text: record it only when
    content capture is on) and the routing reason otherwise.
    """

    name: str
    score_label: str
    score_value: float | None
    explanation: str | None


@dataclass(frozen=True, slots=True)
class DecisionFacts:
    """What a decision was and how it came about, typed, for telemetry and drift statistics.

    The edge names these as ``pairjudge.*`` span attributes (``streams.telemetry.tracing``). None means "does
    not apply": a winner only for a verdict, jury counts only for a jury, tie-break facts only there.
    """

    pair_id: str
    stage: Stage
    #: Where the pair goes next: a verdict, a tie-break request or a review request.
    outcome: DecidedKind
    #: Who decides the pair from here: the stage itself for a verdict, "tiebreak" for a tie-break
    #: request, "human" for a review.
    decided_by: DecidedBy
    #: Every judge's two orders were valid and named the same candidate (or both TIE).
    consistent: bool
    #: Some judge's two orders were valid, decisive and named different candidates.
    flip: bool
    prompt_hash: str
    rubric_kind: str
    audit_sample: bool
    calls: int
    invalid_replies: int
    winner: str | None = None
    confidence: float | None = None
    #: The tie-break or review reason; None for a verdict.
    reason: TieBreakReason | ReviewReason | None = None
    #: What the orderings alone led to, when the policy (kappa guard, tie-break switch) overrode it.
    policy_overrode: DecidedKind | None = None
    #: The winner and mean confidence the orderings reached with enough confidence to decide, even
    #: when the policy overrode the verdict (the kappa guard): the drift audit still compares them.
    judged_winner: str | None = None
    judged_confidence: float | None = None
    #: The confidence a verdict needed (primary stage): the configured threshold, or the series' calibrated one.
    primary_threshold: float | None = None
    jury_size: int | None = None
    jury_abstentions: int | None = None
    #: Tie-break stage only: why the pair came, whether a forced choice was asked, and how many
    #: replies' own weighted arithmetic disagreed with the recomputed scores.
    tiebreak_reason: TieBreakReason | None = None
    forced_choice: bool | None = None
    arithmetic_mismatch: int | None = None
    #: Review "suspected_injection": the detector's rules that matched, and the candidates they matched
    #: in, each comma-separated (names and ids only, never text: safe in spans without content capture).
    injection_rules: str | None = None
    injection_candidates: str | None = None
    #: The audit sampling (``agents.sampling``): the probability this outcome was drawn with and its
    #: stratum; "review" with 1.0 for a review, None for a tie-break request, a rule's verdict, or a
    #: verdict while auditing is off (``audit_share`` 0).
    inclusion_probability: float | None = None
    sampling_class: str | None = None
    #: The judge cascade (``agents.cascade``): the tier whose judgement this is, and the tiers that judged the
    #: pair before it and passed it on, in order. None and () without tiers.
    tier: str | None = None
    escalated_from: tuple[str, ...] = ()
    #: US dollars: this stage's calls (every tier's), and the pair's so far (with the primary stage's, carried
    #: by the tie-break request). None when a call's price was unknown: never counted as free.
    cost_usd: float | None = None
    pair_cost_usd: float | None = None
    #: Where ``judged_confidence`` came from, and, when the orderings carried token probabilities, the token
    #: and stated means side by side (``PairVerdict``'s fields of the same names; None without them).
    confidence_source: ConfidenceSource = "stated"
    token_confidence: float | None = None
    stated_confidence: float | None = None


def decision_facts(
    pair: CandidatePair,
    stage: Stage,
    outcome: Outcome,
    rec: Reconciliation | None,
    *,
    prompt_hash: str,
    rubric_kind: str,
    calls: Sequence[JudgeCall],
    audit: bool,
    sampled: AuditDraw | None = None,
    consistent: bool | None = None,
    flip: bool | None = None,
    policy_overrode: DecidedKind | None = None,
    judged: Reconciliation | None = None,
    primary_threshold: float | None = None,
    jury: Sequence[JuryVote] | None = None,
    tiebreak_reason: TieBreakReason | None = None,
    forced_choice: bool | None = None,
    arithmetic_mismatch: int | None = None,
    injection: Sequence[InjectionFlag] = (),
    tier: str | None = None,
    escalated_from: Sequence[str] = (),
    earlier_cost_usd: float | None = 0.0,
) -> DecisionFacts:
    """The decision's facts; ``consistent``/``flip`` come from ``rec`` unless given; ``judged`` is what
    the orderings reached before the policy was applied (the primary stage); ``sampled`` is a judge
    verdict's audit draw."""
    decided_by: DecidedBy
    reason: TieBreakReason | ReviewReason | None
    probability: float | None = None
    sampling_class: str | None = None
    if isinstance(outcome, ReviewRequest):
        # Every escalated pair gets a human label: it is in the human sample for certain.
        probability, sampling_class = 1.0, REVIEW
    elif isinstance(outcome, PairVerdict) and sampled is not None and sampled.inclusion_probability is not None:
        probability, sampling_class = sampled.inclusion_probability, sampled.sampling_class
    # Only a verdict names a winner; who decided and why, every outcome event says itself (schemas.outcomes).
    winner, confidence = (outcome.winner, outcome.confidence) if isinstance(outcome, PairVerdict) else (None, None)
    decided_by, reason = outcome.decider, outcome.outcome_reason
    # The confidences beside the judged one: a verdict's own, or what the orderings reached under the policy.
    side: tuple[ConfidenceSource, float | None, float | None] = ("stated", None, None)
    if judged is not None and judged.outcome == "verdict":
        side = (judged.confidence_source, judged.token_confidence, judged.stated_confidence)
    elif isinstance(outcome, PairVerdict):
        side = (outcome.confidence_source, outcome.token_confidence, outcome.stated_confidence)
    return DecisionFacts(
        pair_id=pair.pair_id,
        stage=stage,
        outcome=decided_kind(outcome),
        decided_by=decided_by,
        consistent=consistent if consistent is not None else (rec is not None and rec.consistent),
        flip=flip if flip is not None else (rec is not None and rec.flip),
        prompt_hash=prompt_hash,
        rubric_kind=rubric_kind,
        audit_sample=audit,
        calls=len(calls),
        invalid_replies=sum(1 for c in calls if not c.valid),
        winner=winner,
        confidence=confidence,
        reason=reason,
        policy_overrode=policy_overrode,
        judged_winner=judged.winner if judged is not None and judged.outcome == "verdict" else winner,
        judged_confidence=judged.mean_confidence if judged is not None and judged.outcome == "verdict" else confidence,
        primary_threshold=primary_threshold,
        jury_size=len(jury) if jury is not None else None,
        jury_abstentions=sum(1 for v in jury if v.abstained) if jury is not None else None,
        tiebreak_reason=tiebreak_reason,
        forced_choice=forced_choice,
        arithmetic_mismatch=arithmetic_mismatch,
        injection_rules=",".join(sorted({f.rule for f in injection})) or None,
        injection_candidates=",".join(sorted({f.candidate_id for f in injection if f.candidate_id})) or None,
        inclusion_probability=probability,
        sampling_class=sampling_class,
        tier=tier,
        escalated_from=tuple(escalated_from),
        cost_usd=(cost := cost_of(calls)),
        pair_cost_usd=None if cost is None or earlier_cost_usd is None else earlier_cost_usd + cost,
        confidence_source=side[0],
        token_confidence=side[1],
        stated_confidence=side[2],
    )


def evaluation(
    name: str, outcome: Outcome, judged: Sequence[OrderingResult], mean_confidence: float | None
) -> EvaluationResult | None:
    """The ``gen_ai.evaluation.result`` facts; None when no ordering produced a valid reply."""
    if not any(r.valid for r in judged):
        return None
    if isinstance(outcome, PairVerdict):
        return EvaluationResult(name, outcome.winner_role or "tie", outcome.confidence, outcome.justification)
    return EvaluationResult(name, decided_kind(outcome), mean_confidence, outcome.outcome_reason)
