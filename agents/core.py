"""The judging core's entry points: one pair in, one ``Decision`` out (DESIGN §2).

``judge_pair`` checks the pair, judges both orders concurrently, reconciles them and applies the
policy; ``resolve_tiebreak`` runs the seed 002 resolver on a ``TieBreakRequest``. Both are pure apart
from calling the ``Judge``: no I/O, no clocks that matter, no randomness. The Faust edge turns the
``Decision`` into topic sends, spans (``calls``, ``attributes``, ``evaluation``) and metrics.

Idempotency: for a given pair, policy and deterministic judge, the decision is the same every time
(audit sampling hashes the pair id), so a redelivery after a rebalance produces the same outcome.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, TypeVar

import anyio

from agents.errors import InputRejected
from agents.invisible import is_blank
from agents.judge import Judge, judge_info
from agents.policy import Policy
from agents.prompts import render_primary, template_hash
from agents.reconcile import (
    Outcome,
    apply_policy,
    audit_copy,
    ordering_from_ask,
    primary_outcome,
    reconcile,
    review,
    snapshot_pair,
)
from agents.tiebreak import TieBreakOrdering, decide_tiebreak, judge_tiebreak_ordering
from agents.validation import AskResult, JudgeCall, ask_validated, check_head_to_head, check_pairwise
from schemas.events import Order, OrderingResult, PairVerdict, ReviewRequest, TieBreakRequest
from schemas.pair import CandidatePair
from schemas.replies import HeadToHeadReply, PairwiseReply, ToneStyleReply
from schemas.rubric import HeadToHeadRubric, InlineRubric, PairwiseRubric, RubricRef, ToneStyleRubric

__all__ = [
    "Decision",
    "EvaluationResult",
    "JudgeCall",
    "Orderings",
    "Outcome",
    "both_orders",
    "check_pair",
    "judge_orderings",
    "judge_pair",
    "resolve_rubric",
    "resolve_tiebreak",
]

T = TypeVar("T")

AttributeValue = str | int | float | bool

_NO_CATALOG: Mapping[str, InlineRubric] = MappingProxyType({})


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
class Decision:
    stage: Literal["primary", "tiebreak"]
    outcome: Outcome
    #: Set when the verdict was sampled for audit (reason "audit_sample", audit=True).
    audit_copy: ReviewRequest | None
    calls: tuple[JudgeCall, ...]
    #: ``pairjudge.*`` trace attributes (see :func:`_attributes`).
    attributes: dict[str, AttributeValue]
    evaluation: EvaluationResult | None


class Orderings(NamedTuple):
    ab: OrderingResult
    ba: OrderingResult


# --- input checks -----------------------------------------------------------------------------


def resolve_rubric(pair: CandidatePair, catalog: Mapping[str, InlineRubric]) -> InlineRubric:
    """The pair's inline rubric, or the catalog's rubric of that name."""
    rubric = pair.rubric
    if not isinstance(rubric, RubricRef):
        return rubric
    try:
        return catalog[rubric.name]
    except KeyError:
        known = ", ".join(sorted(catalog)) or "none"
        raise InputRejected(
            "unknown_rubric", f"rubric {rubric.name!r} is not in the catalog (known: {known})"
        ) from None


def _check_text(what: str, text: str, limit: int, reason: str, *, may_be_empty: bool = False) -> None:
    if not may_be_empty and not text.strip():
        raise InputRejected(f"empty_{reason}", f"{what} is empty or only whitespace")
    if len(text) > limit:
        raise InputRejected(f"oversized_{reason}", f"{what} has {len(text)} characters; the limit is {limit}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates cannot be sent to any judge as UTF-8; reject the pair rather than mangle it.
        raise InputRejected("malformed_text", f"{what} is not valid Unicode text (lone surrogate)") from None


def check_pair(pair: CandidatePair, policy: Policy, catalog: Mapping[str, InlineRubric]) -> InlineRubric:
    """Check that ``pair`` can be judged (DESIGN §2.1) and return its rubric; raise ``InputRejected``.

    Reasons: ``unknown_rubric``, ``empty_output``, ``oversized_output``, ``empty_prompt``,
    ``oversized_prompt``, ``oversized_context``, ``malformed_text``. Details name the candidate id and
    sizes, never the text itself. Every rubric's template needs the task (the tie-break shows it even
    when the primary template does not), so a blank task prompt is rejected for all kinds.
    """
    rubric = resolve_rubric(pair, catalog)
    for candidate in pair.candidates:
        what = f"candidate {candidate.candidate_id!r} output"
        _check_text(what, candidate.output, policy.max_output_chars, "output")
        # Zero-width and other invisible characters pass strip(), yet show a reader nothing: an empty
        # output by another name. Checked after the size bound, so the scan is bounded too.
        if is_blank(candidate.output):
            raise InputRejected("empty_output", f"{what} has only invisible characters (zero-width, format, spaces)")
    _check_text("task prompt", pair.task.prompt, policy.max_prompt_chars, "prompt")
    if pair.task.context is not None:
        _check_text("task context", pair.task.context, policy.max_prompt_chars, "context", may_be_empty=True)
    return rubric


# --- concurrency ------------------------------------------------------------------------------


async def both_orders(run: Callable[[Order], Awaitable[T]]) -> tuple[T, T]:
    """Run ``run("AB")`` and ``run("BA")`` concurrently in one task group; return (ab, ba).

    If either raises, the other is cancelled and the exception is re-raised on its own (not wrapped
    in an ExceptionGroup), so callers can catch ``InputRejected`` and the like directly.
    """
    results: dict[Order, T] = {}

    async def one(order: Order) -> None:
        results[order] = await run(order)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "AB")
            tg.start_soon(one, "BA")
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    return results["AB"], results["BA"]


# --- the primary stage ------------------------------------------------------------------------


async def _primary_ordering(
    pair: CandidatePair, rubric: InlineRubric, order: Order, judge: Judge, policy: Policy
) -> tuple[OrderingResult, tuple[JudgeCall, ...]]:
    request = render_primary(pair, rubric, order)
    ask: AskResult[Any]
    if isinstance(rubric, ToneStyleRubric):
        ask = await ask_validated(judge, request, ToneStyleReply, None, policy.max_reasks, order=order)
    elif isinstance(rubric, HeadToHeadRubric):
        ask = await ask_validated(
            judge, request, HeadToHeadReply, check_head_to_head(rubric), policy.max_reasks, order=order
        )
    elif isinstance(rubric, PairwiseRubric):
        ask = await ask_validated(judge, request, PairwiseReply, check_pairwise(rubric), policy.max_reasks, order=order)
    else:  # pragma: no cover - the union is closed
        raise TypeError(f"unknown rubric {type(rubric).__name__}")
    return ordering_from_ask(pair, order, ask), ask.calls


async def judge_orderings(
    pair: CandidatePair, rubric: InlineRubric, judge: Judge, policy: Policy
) -> tuple[Orderings, tuple[JudgeCall, ...]]:
    """Judge AB and BA concurrently (one call chain per ordering, never batched with other pairs)."""
    (ab, ab_calls), (ba, ba_calls) = await both_orders(
        lambda order: _primary_ordering(pair, rubric, order, judge, policy)
    )
    return Orderings(ab, ba), ab_calls + ba_calls


async def judge_pair(
    pair: CandidatePair,
    judge: Judge,
    policy: Policy,
    catalog: Mapping[str, InlineRubric] = _NO_CATALOG,
) -> Decision:
    """The primary stage for one pair. Raises ``InputRejected`` (dead-letter it) before any judge call.

    The kappa guard does not skip the judge: the judge's would-be answers travel with the review so
    agreement with the humans' labels can still be measured while auto-deciding is paused.
    """
    rubric = check_pair(pair, policy, catalog)
    judged_pair = snapshot_pair(pair, rubric)
    (ab, ba), calls = await judge_orderings(judged_pair, rubric, judge, policy)
    prompt_hash = template_hash(rubric.kind)
    info = judge_info(judge, prompt_hash)
    raw = reconcile(ab, ba, policy.primary_confidence_threshold)
    rec = apply_policy(raw, policy)
    outcome = primary_outcome(judged_pair, rubric, ab, ba, rec, info)
    audit = audit_copy(outcome, judged_pair, "primary", policy.audit_share)
    attributes = _attributes(
        judged_pair,
        "primary",
        outcome,
        prompt_hash=prompt_hash,
        rubric_kind=rubric.kind,
        consistent=rec.consistent,
        flip=rec.flip,
        calls=calls,
        audit=audit is not None,
    )
    if rec is not raw:
        attributes["pairjudge.policy_overrode"] = raw.outcome  # what the orderings alone would have led to
    return Decision(
        stage="primary",
        outcome=outcome,
        audit_copy=audit,
        calls=calls,
        attributes=attributes,
        evaluation=_evaluation(f"pairwise_{rubric.kind}", outcome, (ab, ba), rec.mean_confidence),
    )


# --- the tie-break stage ----------------------------------------------------------------------


async def resolve_tiebreak(request: TieBreakRequest, judge: Judge, policy: Policy) -> Decision:
    """The seed 002 resolver for one ``TieBreakRequest``, both orders concurrently.

    With the tie-break switched off (it may have been switched off after the request was sent), the
    pair goes straight to review "tiebreak_disabled" without a judge call.
    """
    pair = request.pair
    prompt_hash = template_hash("tiebreak")
    rubric_kind = pair.rubric.kind
    if not policy.tiebreak_enabled:
        # Same precedence as the primary stage: a tripped kappa guard names the reason first.
        outcome: Outcome = review(
            pair,
            "kappa_guard" if policy.kappa_guard_tripped else "tiebreak_disabled",
            stage="tiebreak",
            orderings=request.primary,
            judge=request.primary_judge,
            trace_id=request.trace_id,
        )
        attributes = _attributes(
            pair,
            "tiebreak",
            outcome,
            prompt_hash=prompt_hash,
            rubric_kind=rubric_kind,
            consistent=False,
            flip=False,
            calls=(),
            audit=False,
        )
        attributes["pairjudge.tiebreak_reason"] = request.reason
        return Decision("tiebreak", outcome, None, (), attributes, None)

    weights = pair.tiebreak or policy.default_tiebreak
    ab, ba = await both_orders(lambda order: judge_tiebreak_ordering(pair, weights, order, judge, policy))
    info = judge_info(judge, prompt_hash)
    outcome = decide_tiebreak(request, ab, ba, policy, info)
    calls = ab.calls + ba.calls
    audit = audit_copy(outcome, pair, "tiebreak", policy.audit_share)
    both_valid = ab.result.valid and ba.result.valid
    winners = (ab.result.mapped_winner, ba.result.mapped_winner)
    attributes = _attributes(
        pair,
        "tiebreak",
        outcome,
        prompt_hash=prompt_hash,
        rubric_kind=rubric_kind,
        consistent=both_valid and winners[0] == winners[1],
        flip=both_valid and winners[0] != winners[1],
        calls=calls,
        audit=audit is not None,
    )
    attributes["pairjudge.tiebreak_reason"] = request.reason
    attributes["pairjudge.forced_choice"] = ab.result.forced_choice or ba.result.forced_choice
    attributes["pairjudge.arithmetic_mismatch"] = _mismatches(ab, ba)
    mean = (
        (ab.result.confidence + ba.result.confidence) / 2
        if ab.result.confidence is not None and ba.result.confidence is not None
        else None
    )
    return Decision(
        stage="tiebreak",
        outcome=outcome,
        audit_copy=audit,
        calls=calls,
        attributes=attributes,
        evaluation=_evaluation("pairwise_tiebreak", outcome, (ab.result, ba.result), mean),
    )


def _mismatches(*orderings: TieBreakOrdering) -> int:
    return sum(1 for o in orderings if o.assessment is not None and o.assessment.arithmetic_mismatch)


# --- telemetry facts --------------------------------------------------------------------------


def _outcome_kind(outcome: Outcome) -> Literal["verdict", "tiebreak", "review"]:
    if isinstance(outcome, PairVerdict):
        return "verdict"
    if isinstance(outcome, TieBreakRequest):
        return "tiebreak"
    return "review"


def _attributes(
    pair: CandidatePair,
    stage: Literal["primary", "tiebreak"],
    outcome: Outcome,
    *,
    prompt_hash: str,
    rubric_kind: str,
    consistent: bool,
    flip: bool,
    calls: Sequence[JudgeCall],
    audit: bool,
) -> dict[str, AttributeValue]:
    """``pairjudge.*`` attributes for the stage's decision span.

    ``decided_by`` is who decides the pair from here: the stage itself for a verdict, "tiebreak" for
    a tie-break request, "human" for a review.
    """
    kind = _outcome_kind(outcome)
    attributes: dict[str, AttributeValue] = {
        "pairjudge.pair_id": pair.pair_id,
        "pairjudge.stage": stage,
        "pairjudge.outcome": kind,
        "pairjudge.consistent": consistent,
        "pairjudge.flip": flip,
        "pairjudge.prompt_hash": prompt_hash,
        "pairjudge.rubric_kind": rubric_kind,
        "pairjudge.audit_sample": audit,
        "pairjudge.calls": len(calls),
        "pairjudge.invalid_replies": sum(1 for c in calls if not c.valid),
    }
    if isinstance(outcome, PairVerdict):
        attributes["pairjudge.decided_by"] = outcome.decided_by
        attributes["pairjudge.winner"] = outcome.winner
        attributes["pairjudge.confidence"] = outcome.confidence
    elif isinstance(outcome, TieBreakRequest):
        attributes["pairjudge.decided_by"] = "tiebreak"
        attributes["pairjudge.reason"] = outcome.reason
    else:
        attributes["pairjudge.decided_by"] = "human"
        attributes["pairjudge.reason"] = outcome.reason
    return attributes


def _evaluation(
    name: str, outcome: Outcome, judged: Sequence[OrderingResult], mean_confidence: float | None
) -> EvaluationResult | None:
    """The ``gen_ai.evaluation.result`` facts; None when no ordering produced a valid reply."""
    if not any(r.valid for r in judged):
        return None
    if isinstance(outcome, PairVerdict):
        return EvaluationResult(name, outcome.winner_role, outcome.confidence, outcome.justification)
    explanation = outcome.reason
    return EvaluationResult(name, _outcome_kind(outcome), mean_confidence, explanation)
