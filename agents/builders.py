"""The event builders: the outcome events a stage publishes, from what its orderings reached.

Pure: orderings, a reconciliation and the judge's identity in; a ``PairVerdict``, ``TieBreakRequest``
or ``ReviewRequest`` out. A verdict's justification labels each ordering's text with who sat where
(a justification says "Output A" about a position), its differentiators are the orderings' own,
de-duplicated, and its cost is the sum over every ordering that led to it.

The audit's review copy of a verdict is built where it is drawn (``agents.sampling.audit_copy``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal, TypeGuard, get_args

from pairjudge.agents.cost import event_cost
from pairjudge.agents.settle import Settlement
from pairjudge.agents.truth_table import Reconciliation
from pairjudge.schemas.events import (
    JudgeInfo,
    JuryVote,
    OrderingResult,
    PairVerdict,
    ReviewReason,
    ReviewRequest,
    Stage,
    TieBreakReason,
    TieBreakRequest,
)
from pairjudge.schemas.outcomes import DecidedEvent
from pairjudge.schemas.pair import TIE, CandidatePair
from pairjudge.schemas.rubric import InlineRubric

__all__ = [
    "Outcome",
    "primary_outcome",
    "review",
    "settled_verdict",
    "verdict",
]

#: What a stage publishes for a pair: where it goes next.
Outcome = DecidedEvent  # the registry's union (schemas.outcomes): a new decided kind joins it there

_MAX_DIFFERENTIATORS: Final = 16


def _clamp01(value: float) -> float:
    return min(1.0, max(0.0, value))


def _last_justification(orderings: Sequence[OrderingResult]) -> str | None:
    """The latest model justification among ``orderings`` (later entries are later stages/orders)."""
    for result in reversed(orderings):
        if result.justification:
            return result.justification
    return None


def _combined_justification(orderings: Sequence[OrderingResult]) -> str:
    """Each ordering's justification, labelled with who sat where.

    A justification says "Output A" about a position; without the label a reader of the verdict could
    not tell which candidate it meant in the swapped order.
    """
    parts = [
        f"[{r.order_shown}: A={r.shown_as_a}, B={r.shown_as_b}] {r.justification}"
        for r in orderings
        if r.valid and r.justification
    ]
    return "\n".join(parts)


def _combined_differentiators(orderings: Sequence[OrderingResult]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for r in orderings:
        for d in r.key_differentiators:
            seen.setdefault(d, None)
    return tuple(seen)[:_MAX_DIFFERENTIATORS]


def verdict(
    pair: CandidatePair,
    winner: str,
    *,
    confidence: float,
    decided_by: Literal["primary", "tiebreak"],
    orderings: Sequence[OrderingResult],
    judged: Sequence[OrderingResult],
    rubric_kind: str,
    judge: JudgeInfo,
    tiebreak_reason: TieBreakReason | None = None,
    weighted_scores: dict[str, float] | None = None,
    justification_note: str = "",
    trace_id: str | None = None,
) -> PairVerdict:
    """A verdict for ``winner``; ``judged`` are the orderings whose justifications explain it."""
    loser = next(c.candidate_id for c in pair.candidates if c.candidate_id != winner)
    justification = _combined_justification(judged)
    if justification_note:
        justification = f"{justification}\n{justification_note}" if justification else justification_note
    return PairVerdict(
        pair_id=pair.pair_id,
        winner=winner,
        winner_role=pair.candidate(winner).source.role,
        loser=loser,
        confidence=_clamp01(confidence),
        decided_by=decided_by,
        consistent=True,
        orderings=tuple(orderings),
        justification=justification,
        key_differentiators=_combined_differentiators(judged),
        rubric_kind=rubric_kind,
        judge=judge,
        tiebreak_reason=tiebreak_reason,
        weighted_scores=weighted_scores,
        # Every ordering that led here (for a tie-break verdict: the primary ones too), re-asks included.
        cost_usd=event_cost([o.cost_usd for o in orderings if o.answered_by_model is not None]),
        experiment_id=pair.metadata.experiment_id,
        traffic=pair.metadata.traffic,
        trace_id=trace_id,
    )


def settled_verdict(pair: CandidatePair, rubric_kind: str, settled: Settlement, judge: JudgeInfo) -> PairVerdict:
    """The verdict for a pair settled by rule (``agents.settle``): certain, no orderings, ``decided_by="rule"``."""
    tie = settled.winner == TIE
    return PairVerdict(
        pair_id=pair.pair_id,
        winner=settled.winner,
        winner_role=None if tie else pair.candidate(settled.winner).source.role,
        loser=None if tie else next(c.candidate_id for c in pair.candidates if c.candidate_id != settled.winner),
        confidence=1.0,
        decided_by="rule",
        consistent=True,
        orderings=(),
        justification=settled.explanation,
        key_differentiators=(settled.rule,),
        rubric_kind=rubric_kind,
        judge=judge,
        experiment_id=pair.metadata.experiment_id,
        traffic=pair.metadata.traffic,
    )


def review(
    pair: CandidatePair,
    reason: ReviewReason,
    *,
    stage: Stage,
    orderings: Sequence[OrderingResult],
    judge: JudgeInfo | None,
    trace_id: str | None = None,
) -> ReviewRequest:
    return ReviewRequest(
        pair_id=pair.pair_id,
        reason=reason,
        stage=stage,
        pair=pair,
        orderings=tuple(orderings),
        last_justification=_last_justification(orderings),
        judge=judge,
        trace_id=trace_id,
    )


def _is_tiebreak_reason(reason: object) -> TypeGuard[TieBreakReason]:
    return reason in get_args(TieBreakReason)


def _is_review_reason(reason: object) -> TypeGuard[ReviewReason]:
    return reason in get_args(ReviewReason)


def primary_outcome(
    pair: CandidatePair,
    rubric: InlineRubric,
    rec: Reconciliation,
    judge: JudgeInfo,
    *,
    orderings: Sequence[OrderingResult],
    judged: Sequence[OrderingResult],
    votes: Sequence[JuryVote] = (),
) -> Outcome:
    """The primary stage's event for a reconciliation. ``pair`` should already carry ``rubric``.

    ``orderings`` are every ordering judged (juror by juror, AB then BA), ``judged`` those whose
    justifications explain a verdict (a jury's majority), and ``votes`` a jury's votes (empty for a
    single judge, whose events carry no ``jury``).
    """
    if rec.outcome == "verdict":
        if rec.winner is None or rec.mean_confidence is None:
            raise ValueError("a verdict reconciliation needs a winner and a confidence")
        decided = verdict(
            pair,
            rec.winner,
            confidence=rec.mean_confidence,
            decided_by="primary",
            orderings=orderings,
            judged=judged,
            rubric_kind=rubric.kind,
            judge=judge,
        )
        if rec.token_confidence is not None:
            decided = decided.model_copy(
                update={
                    "confidence_source": rec.confidence_source,
                    "token_confidence": _clamp01(rec.token_confidence),
                    "stated_confidence": None if rec.stated_confidence is None else _clamp01(rec.stated_confidence),
                }
            )
        if not votes:
            return decided
        return decided.model_copy(update={"consistent": not any(v.abstained for v in votes), "jury": tuple(votes)})
    if rec.outcome == "tiebreak":
        if not _is_tiebreak_reason(rec.reason):
            raise ValueError(f"not a tie-break reason: {rec.reason!r}")
        return TieBreakRequest(
            pair_id=pair.pair_id,
            reason=rec.reason,
            pair=pair,
            primary=tuple(orderings),
            primary_judge=judge,
            jury=tuple(votes),
        )
    if not _is_review_reason(rec.reason):
        raise ValueError(f"not a review reason: {rec.reason!r}")
    return review(pair, rec.reason, stage="primary", orderings=orderings, judge=judge)
