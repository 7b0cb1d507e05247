"""Un-swapping the two orderings and reconciling them (DESIGN §2.3, §2.5, §2.7, §2.8).

Everything here is pure: replies in, ``OrderingResult``/events out. The rule, with its precedence
written down (the first that applies wins):

1. either ordering invalid after its re-asks      -> review  "judge_rejected" (the judge refused the
                                                     request: a 4xx such as a bad key), else
                                                     "judge_unavailable" (the judge was down), else
                                                     "ordering_invalid" (bad replies)
2. the orders name different candidates (a flip)  -> tie-break "position_inconsistent"
3. either order says TIE (both TIE included)      -> tie-break "tie"
4. same winner, mean confidence < threshold       -> tie-break "low_confidence"
5. same winner, mean confidence >= threshold      -> verdict, decided_by="primary", consistent=True

Invalid comes first because nothing else about an invalid ordering can be trusted. Among failures, a
rejection outranks an outage and an outage outranks bad replies (:func:`failure_reason`): a refusal is
a configuration fault that no retry fixes, so the edge must not re-judge the pair as it does for an
outage, and a judge that was down says nothing about its replies. A flip outranks a
tie because it is the stronger evidence of position bias, and both outrank low confidence, which is
only meaningful when the orders agree. The threshold comparison tolerates float noise of 1e-9 so
that a mean of exactly 0.7 (e.g. 0.65 and 0.75) is a verdict however the sum rounds.

Then the policy (:func:`apply_policy`): when the kappa guard is tripped, would-be verdicts *and*
would-be tie-break requests go to review as "kappa_guard" (auto-deciding is paused, and the tie-break
stage decides automatically too); otherwise, with the tie-break switched off, would-be tie-break
requests go to review as "tiebreak_disabled". Reviews keep their own, more specific reason.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard, get_args

from pairjudge.agents.policy import Policy
from pairjudge.agents.prompts import shown
from pairjudge.agents.sampling import audit_fraction as audit_fraction  # re-exported: it lived here first
from pairjudge.agents.sampling import drawn
from pairjudge.agents.validation import AskResult, JudgeCall
from pairjudge.schemas.events import (
    ErrorKind,
    JudgeInfo,
    JuryVote,
    Order,
    OrderingResult,
    PairVerdict,
    ReviewReason,
    ReviewRequest,
    Stage,
    TieBreakReason,
    TieBreakRequest,
)
from pairjudge.schemas.pair import TIE, CandidatePair
from pairjudge.schemas.replies import (
    HeadToHeadReply,
    PairwiseReply,
    PositionOrTie,
    Reply,
    TieBreakReply,
    ToneStyleReply,
)
from pairjudge.schemas.rubric import InlineRubric

Outcome = PairVerdict | TieBreakRequest | ReviewRequest
OutcomeKind = Literal["verdict", "tiebreak", "review"]

_FLOAT_TOLERANCE = 1e-9
_MAX_DIFFERENTIATORS = 16


# --- un-swapping ------------------------------------------------------------------------------


def map_winner(letter: PositionOrTie, shown_as_a: str, shown_as_b: str) -> str:
    """A position letter as a candidate id (or "TIE")."""
    if letter == "A":
        return shown_as_a
    if letter == "B":
        return shown_as_b
    return TIE


def _win_scores(letter: PositionOrTie, a_id: str, b_id: str) -> dict[str, float]:
    # A per-criterion winner as scores: 1.0 to the winner, 0.0 to the loser, 0.5 each for a tie.
    if letter == "A":
        return {a_id: 1.0, b_id: 0.0}
    if letter == "B":
        return {a_id: 0.0, b_id: 1.0}
    return {a_id: 0.5, b_id: 0.5}


@dataclass(frozen=True, slots=True)
class _Read:
    raw_winner: PositionOrTie
    confidence: float
    dimension_scores: dict[str, dict[str, float]]
    justification: str
    key_differentiators: tuple[str, ...]


def _read(reply: Reply, a_id: str, b_id: str) -> _Read:
    """The reply's facts, with every per-position score keyed by candidate id."""
    if isinstance(reply, ToneStyleReply):
        dims = reply.dimension_scores
        scores = {
            name: {a_id: float(pair.a), b_id: float(pair.b)}
            for name, pair in (
                ("tone_match", dims.tone_match),
                ("audience_suitability", dims.audience_suitability),
                ("stylistic_consistency", dims.stylistic_consistency),
                ("guideline_adherence", dims.guideline_adherence),
            )
        }
        return _Read(reply.winner, reply.confidence, scores, reply.justification, (reply.key_differentiator,))
    if isinstance(reply, HeadToHeadReply):
        scores = {name: _win_scores(c.winner, a_id, b_id) for name, c in reply.criteria_breakdown.items()}
        return _Read(reply.preference, reply.confidence, scores, reply.justification, reply.key_differentiators)
    if isinstance(reply, PairwiseReply):
        scores = {c.criterion: _win_scores(c.winner, a_id, b_id) for c in reply.comparison}
        result = reply.result
        return _Read(result.winner, result.confidence, scores, result.reasoning, result.differentiators)
    if isinstance(reply, TieBreakReply):
        scores = {c.criterion: _win_scores(c.winner, a_id, b_id) for c in reply.criteria_analysis}
        return _Read(reply.winner, reply.confidence, scores, reply.final_justification, ())
    raise TypeError(f"unknown reply type {type(reply).__name__}")


def _token_sum(values: Sequence[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def cost_sum(values: Sequence[float | None]) -> float | None:
    """The total of ``values``; None when there are none or any of them is unknown.

    A partial sum is never reported as the total: one unpriced reply (a model missing from the price
    table, a reply without token counts) makes the whole figure unknown. Callers pass only the costs
    of calls that got a reply: a call that raised (judge down) got no reply and is not billed.
    """
    if not values:
        return None
    known = [v for v in values if v is not None]
    return math.fsum(known) if len(known) == len(values) else None


def build_ordering(
    pair: CandidatePair,
    order: Order,
    *,
    reply: Reply | None,
    calls: Sequence[JudgeCall],
    retries: int,
    answered_model: str | None,
    error: str | None,
    error_kind: ErrorKind | None,
    forced_choice: bool = False,
    extra_scores: Mapping[str, Mapping[str, float]] | None = None,
    extra_differentiators: Sequence[str] = (),
) -> OrderingResult:
    """One ordering's ``OrderingResult``: who sat where, and the reply mapped back to candidate ids.

    Latency, tokens and cost are summed over every call the ordering made, re-asks included.
    """
    a, b = shown(pair, order)
    common: dict[str, Any] = {
        "order_shown": order,
        "swapped": order == "BA",
        "shown_as_a": a.candidate_id,
        "shown_as_b": b.candidate_id,
        "retries": retries,
        "forced_choice": forced_choice,
        "latency_ms": 1000.0 * sum(c.latency_s for c in calls),
        "input_tokens": _token_sum([c.input_tokens for c in calls]),
        "output_tokens": _token_sum([c.output_tokens for c in calls]),
        "answered_by_model": answered_model,
        "error": error,
        "error_kind": error_kind,
        "cost_usd": cost_sum([c.cost_usd for c in calls if c.answered_model is not None]),
        "cache_hits": sum(1 for c in calls if c.cached),
    }
    if reply is None:
        return OrderingResult(valid=False, **common)
    read = _read(reply, a.candidate_id, b.candidate_id)
    scores = read.dimension_scores | {k: dict(v) for k, v in (extra_scores or {}).items()}
    return OrderingResult(
        valid=True,
        raw_winner=read.raw_winner,
        mapped_winner=map_winner(read.raw_winner, a.candidate_id, b.candidate_id),
        confidence=read.confidence,
        dimension_scores=scores,
        justification=read.justification,
        key_differentiators=(*read.key_differentiators, *extra_differentiators),
        **common,
    )


def ordering_from_ask(pair: CandidatePair, order: Order, ask: AskResult[Any]) -> OrderingResult:
    return build_ordering(
        pair,
        order,
        reply=ask.reply,
        calls=ask.calls,
        retries=ask.retries,
        answered_model=ask.answered_model,
        error=ask.error,
        error_kind=ask.error_kind,
    )


# --- reconciliation ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """What the two orderings add up to, before any event is built."""

    outcome: OutcomeKind
    reason: TieBreakReason | ReviewReason | None
    #: The verdict's winner (a candidate id); None unless ``outcome == "verdict"``.
    winner: str | None
    #: Mean of the two confidences when both orderings are valid.
    mean_confidence: float | None
    #: Both orderings valid and naming the same candidate (or both TIE).
    consistent: bool
    #: Both orderings valid, decisive, and naming different candidates.
    flip: bool


def at_least(value: float, threshold: float) -> bool:
    """``value >= threshold``, tolerating float noise (a mean of 0.65 and 0.75 is 0.7)."""
    return value >= threshold or math.isclose(value, threshold, rel_tol=0.0, abs_tol=_FLOAT_TOLERANCE)


FailureReason = Literal["judge_rejected", "judge_unavailable"]


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


def reconcile(ab: OrderingResult, ba: OrderingResult, threshold: float) -> Reconciliation:
    """DESIGN §2.5 over two mapped orderings; see the module docstring for the precedence."""
    if not (ab.valid and ba.valid):
        failed = failure_reason(r.error_kind for r in (ab, ba) if not r.valid)
        reason: ReviewReason = failed or "ordering_invalid"
        return Reconciliation("review", reason, None, None, consistent=False, flip=False)
    if ab.mapped_winner is None or ba.mapped_winner is None or ab.confidence is None or ba.confidence is None:
        raise ValueError("a valid OrderingResult must carry mapped_winner and confidence")
    mean = (ab.confidence + ba.confidence) / 2
    consistent = ab.mapped_winner == ba.mapped_winner
    flip = not consistent and TIE not in (ab.mapped_winner, ba.mapped_winner)
    if flip:
        return Reconciliation("tiebreak", "position_inconsistent", None, mean, consistent=False, flip=True)
    if TIE in (ab.mapped_winner, ba.mapped_winner):
        return Reconciliation("tiebreak", "tie", None, mean, consistent=consistent, flip=False)
    if not at_least(mean, threshold):
        return Reconciliation("tiebreak", "low_confidence", None, mean, consistent=True, flip=False)
    return Reconciliation("verdict", None, ab.mapped_winner, mean, consistent=True, flip=False)


def apply_policy(rec: Reconciliation, policy: Policy) -> Reconciliation:
    """The kappa guard and the tie-break switch, applied to a reconciliation."""
    if policy.kappa_guard_tripped and rec.outcome in ("verdict", "tiebreak"):
        return Reconciliation("review", "kappa_guard", None, rec.mean_confidence, rec.consistent, rec.flip)
    if not policy.tiebreak_enabled and rec.outcome == "tiebreak":
        return Reconciliation("review", "tiebreak_disabled", None, rec.mean_confidence, rec.consistent, rec.flip)
    return rec


def is_tiebreak_reason(reason: object) -> TypeGuard[TieBreakReason]:
    return reason in get_args(TieBreakReason)


def is_review_reason(reason: object) -> TypeGuard[ReviewReason]:
    return reason in get_args(ReviewReason)


# --- building events --------------------------------------------------------------------------


def clamp01(value: float) -> float:
    return min(1.0, max(0.0, value))


def last_justification(orderings: Sequence[OrderingResult]) -> str | None:
    """The latest model justification among ``orderings`` (later entries are later stages/orders)."""
    for result in reversed(orderings):
        if result.justification:
            return result.justification
    return None


def combined_justification(orderings: Sequence[OrderingResult]) -> str:
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


def combined_differentiators(orderings: Sequence[OrderingResult]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for r in orderings:
        for d in r.key_differentiators:
            seen.setdefault(d, None)
    return tuple(seen)[:_MAX_DIFFERENTIATORS]


def snapshot_pair(pair: CandidatePair, rubric: InlineRubric) -> CandidatePair:
    """``pair`` carrying the inline rubric it was judged against.

    A pair that named a catalog rubric is forwarded to tie-break and review with the rubric itself, so
    later stages and human reviewers see what the judge saw even if the catalog changes meanwhile.
    """
    return pair if pair.rubric == rubric else pair.model_copy(update={"rubric": rubric})


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
    justification = combined_justification(judged)
    if justification_note:
        justification = f"{justification}\n{justification_note}" if justification else justification_note
    return PairVerdict(
        pair_id=pair.pair_id,
        winner=winner,
        winner_role=pair.candidate(winner).source.role,
        loser=loser,
        confidence=clamp01(confidence),
        decided_by=decided_by,
        consistent=True,
        orderings=tuple(orderings),
        justification=justification,
        key_differentiators=combined_differentiators(judged),
        rubric_kind=rubric_kind,
        judge=judge,
        tiebreak_reason=tiebreak_reason,
        weighted_scores=weighted_scores,
        # Every ordering that led here (for a tie-break verdict: the primary ones too), re-asks included.
        cost_usd=cost_sum([o.cost_usd for o in orderings if o.answered_by_model is not None]),
        experiment_id=pair.metadata.experiment_id,
        traffic=pair.metadata.traffic,
        trace_id=trace_id,
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
        last_justification=last_justification(orderings),
        judge=judge,
        trace_id=trace_id,
    )


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
        if not votes:
            return decided
        return decided.model_copy(update={"consistent": not any(v.abstained for v in votes), "jury": tuple(votes)})
    if rec.outcome == "tiebreak":
        if not is_tiebreak_reason(rec.reason):
            raise ValueError(f"not a tie-break reason: {rec.reason!r}")
        return TieBreakRequest(
            pair_id=pair.pair_id,
            reason=rec.reason,
            pair=pair,
            primary=tuple(orderings),
            primary_judge=judge,
            jury=tuple(votes),
        )
    if not is_review_reason(rec.reason):
        raise ValueError(f"not a review reason: {rec.reason!r}")
    return review(pair, rec.reason, stage="primary", orderings=orderings, judge=judge)


# --- audit sampling ---------------------------------------------------------------------------


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
    ``probability`` (``agents.sampling``: None or 0 draws nothing); otherwise None.

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
