"""Seed 002's ``tie_break(output_a, output_b, context, criteria_weights)``: the weighted-criteria resolver on
two outputs, through the configured judge stack, answering with a ``TieBreakResult``.

It is the worker's tie-break stage (``agents.tiebreak`` via ``Evaluator.resolve_tiebreak``) on a pair built
from the two outputs: both orders concurrently, the weighted scores recomputed from the configured
weights (the judge's own arithmetic is never trusted), one forced-choice re-ask for a low-confidence or
self-contradicting reply, and a human for exactly equal scores or orders that disagree. Before any
judge call the outputs get the worker's input checks (sizes, valid text: ``InputRejected``) and its
injection scan (text aimed at the judge escalates at once, reason ``suspected_injection``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pairjudge.agents import InputRejected, Judge, check_pair
from pairjudge.agents.injection_screen import screen_of, screen_pair
from pairjudge.agents.judge import judge_info
from pairjudge.agents.pair_checks import scan_for_injection
from pairjudge.agents.prompts import template_hash
from pairjudge.schemas import (
    DEFAULT_TIEBREAK_WEIGHTS,
    Candidate,
    CandidatePair,
    CandidateSource,
    InlineRubric,
    Message,
    PairMetadata,
    PairwiseRubric,
    ReviewRequest,
    Task,
    TieBreakRequest,
    TieBreakWeights,
    WeightedCriterion,
)
from pairjudge.streams.api.evaluator import Evaluator
from pairjudge.streams.api.outcomes import Outcome, Review
from pairjudge.streams.config.settings import Settings

Preferred = Literal["A", "B"]
#: Candidate ids of the two outputs in the pair built for them: the verdict's winner is then "A" or "B".
OUTPUT_IDS: tuple[Preferred, Preferred] = ("A", "B")
#: The context as ``tie_break`` takes it: the original prompt, a conversation (last turn the user's), or a Task.
Context = str | Task | Sequence[Message | Mapping[str, str]]


class EvaluationFailed(RuntimeError):
    """The judge refused the request (a 4xx no retry fixes) or an internal error: no result to give.
    ``outcome`` is the dead letter the worker would have written."""

    def __init__(self, outcome: Outcome) -> None:
        detail = getattr(outcome, "detail", "")
        super().__init__(f"{outcome.reason}: {detail}" if detail else str(outcome.reason))
        self.outcome = outcome


@dataclass(frozen=True, slots=True)
class TieBreakResult:
    """Seed 002's result. ``preferred_output`` is "A" (``output_a``) or "B" (``output_b``), None when
    ``escalation_required``; a human must then decide, and ``reason`` says why."""

    preferred_output: Preferred | None
    #: The judge's final justification (for an escalation: why, then the judge's last justification).
    justification: str
    #: The mean of the two orders' confidence; for an escalation, of those orders that had a valid reply
    #: (None when neither had).
    confidence: float | None
    escalation_required: bool
    #: Why a human must decide (``ReviewReason``: e.g. ``tiebreak_equal_scores``, ``tiebreak_disagreement``,
    #: ``judge_unavailable``, ``suspected_injection``); None for a preferred output.
    reason: str | None
    #: The recomputed weighted scores of "A" and "B" (the mean over both orders); None for an escalation.
    weighted_scores: dict[str, float] | None
    #: The whole outcome the worker would publish (a ``Verdict`` or a ``Review``), for its orderings and calls.
    outcome: Outcome


def criteria_from(criteria_weights: Mapping[str, float] | TieBreakWeights) -> TieBreakWeights:
    """``{criterion: weight}`` as seed 002's weights, validated as ``TieBreakWeights`` (1 to 12 unique
    names of letters, digits, ``_``, ``-`` and spaces; weights in (0, 100], relative). A criterion named
    like one of the defaults (safety, instruction_adherence, conciseness, readability) keeps its
    description; pass ``TieBreakWeights`` to describe your own."""
    if isinstance(criteria_weights, TieBreakWeights):
        return criteria_weights
    described = {c.name: c.description for c in DEFAULT_TIEBREAK_WEIGHTS.criteria}
    return TieBreakWeights(
        criteria=tuple(
            WeightedCriterion(name=name, weight=weight, description=described.get(name, ""))
            for name, weight in criteria_weights.items()
        )
    )


def task_from(context: Context) -> Task:
    if isinstance(context, Task):
        return context
    if isinstance(context, str):
        return Task(prompt=context)
    return Task(messages=tuple(m if isinstance(m, Message) else Message.model_validate(m) for m in context))


def tiebreak_pair(
    output_a: str, output_b: str, context: Context, weights: TieBreakWeights, rubric: InlineRubric | None
) -> CandidatePair:
    """The pair the resolver judges: candidates "A" and "B", and an id that is a hash of what it holds
    (the audit's sampling hashes the pair id, so the same question gets the same treatment)."""
    task = task_from(context)
    content = json.dumps([output_a, output_b, task.model_dump(mode="json"), weights.model_dump(mode="json")])
    return CandidatePair(
        pair_id="tiebreak-" + hashlib.sha256(content.encode()).hexdigest()[:32],
        task=task,
        candidates=(
            Candidate(candidate_id=OUTPUT_IDS[0], output=output_a, source=CandidateSource(model="output_a")),
            Candidate(candidate_id=OUTPUT_IDS[1], output=output_b, source=CandidateSource(model="output_b")),
        ),
        # The criteria double as the rubric the tie-break prompt quotes, unless one is given.
        rubric=rubric or PairwiseRubric(criteria=tuple(c.name for c in weights.criteria)),
        tiebreak=weights,
        metadata=PairMetadata(traffic="offline"),
    )


async def tie_break(
    output_a: str,
    output_b: str,
    context: Context,
    criteria_weights: Mapping[str, float] | TieBreakWeights | None = None,
    *,
    settings: Settings | None = None,
    evaluator: Evaluator | None = None,
    judge: Judge | None = None,
    rubric: InlineRubric | None = None,
) -> TieBreakResult:
    """Resolve ``output_a`` against ``output_b`` on weighted criteria (module docstring).

    ``criteria_weights`` None: the policy's default weights (seed 002's four). Runs through
    ``evaluator`` when given (its judges, settings and HTTP clients), else through a new one built from
    ``settings`` (or ``judge``) and closed before returning. Raises ``InputRejected`` for outputs or a
    context the worker would not judge, ``pydantic.ValidationError`` (a ``ValueError``) for bad weights or
    context, and ``EvaluationFailed`` when the judge refused the request.
    """
    if evaluator is None:
        async with Evaluator(settings, judge=judge) as own:
            return await tie_break(output_a, output_b, context, criteria_weights, evaluator=own, rubric=rubric)
    weights = criteria_from(criteria_weights) if criteria_weights is not None else evaluator.policy.default_tiebreak
    pair = tiebreak_pair(output_a, output_b, context, weights, rubric)
    check_pair(pair, evaluator.policy, evaluator.catalog)  # InputRejected, before any judge call
    hash_ = template_hash("tiebreak", datamark=evaluator.policy.datamark)
    judge_of = judge_info(evaluator.panel.tiebreak, hash_)
    flags = scan_for_injection(pair) if evaluator.policy.injection_guard else ()
    screen = screen_of(evaluator.panel.primary)
    if evaluator.policy.injection_guard and not flags and screen is not None:
        # The same second opinion the primary stage asks (agents.core.judge_pair), with the same failure rule.
        flags = await screen_pair(pair, screen, evaluator.policy.screen_on_failure)
    if flags:
        # As the primary stage does: a judge that obeys the text would obey it in both orders.
        event = ReviewRequest(
            pair_id=pair.pair_id, reason="suspected_injection", stage="tiebreak", pair=pair, judge=judge_of
        )
        return result_of(Review(pair, None, event.model_copy(update={"injection": flags})))
    request = TieBreakRequest(pair_id=pair.pair_id, reason="tie", pair=pair, primary=(), primary_judge=judge_of)
    return result_of(await evaluator.resolve_tiebreak(request))


def result_of(outcome: Outcome) -> TieBreakResult:
    """The ``TieBreakResult`` for the tie-break stage's outcome on a pair built by ``tiebreak_pair``."""
    if outcome.kind == "verdict":
        verdict = outcome.event
        preferred: Preferred = "A" if verdict.winner == OUTPUT_IDS[0] else "B"
        return TieBreakResult(
            preferred_output=preferred,
            justification=verdict.justification,
            confidence=verdict.confidence,
            escalation_required=False,
            reason=None,
            weighted_scores=verdict.weighted_scores,
            outcome=outcome,
        )
    if outcome.kind == "review":
        review = outcome.event
        confidences = [o.confidence for o in review.orderings if o.valid and o.confidence is not None]
        why = f"Escalated to a human ({review.reason})."
        return TieBreakResult(
            preferred_output=None,
            justification=f"{why} {review.last_justification}" if review.last_justification else why,
            confidence=sum(confidences) / len(confidences) if confidences else None,
            escalation_required=True,
            reason=review.reason,
            weighted_scores=None,
            outcome=outcome,
        )
    if outcome.kind == "rejected" and outcome.pair is None:
        raise InputRejected(outcome.reason, outcome.detail)
    raise EvaluationFailed(outcome)
