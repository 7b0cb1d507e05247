"""The judging core's entry points: one pair in, one ``Decision`` out (docs/design.md §2).

``judge_pair`` checks the pair, has every judge judge both orders concurrently, reconciles them and
applies the policy; ``resolve_tiebreak`` runs the seed 002 resolver on a ``TieBreakRequest``. Both are
pure apart from calling the ``Judge``: no I/O, no clocks that matter, no randomness. The Faust edge
turns the ``Decision`` into topic sends, and its typed ``facts`` and ``evaluation`` into spans and
metrics.

One judge is a jury of one: there is a single path for both (:func:`judge_pair`), and the jury's
arithmetic (``agents.jury``) reduces to docs/design.md §2.5's rule for one judge.

A pair walks the core one way, one room (module) per step, and nothing later calls back into an
earlier step::

    check      agents.pair_checks (check_pair, snapshot_pair, scan_for_injection), agents.injection,
               agents.settle
    render     agents.prompts, the candidates placed by agents.orderings.shown
    ask x 2    agents.validation: ask, validate strictly, re-ask; both orders at once
    un-swap    agents.orderings: the reply mapped back to candidate ids
    reconcile  agents.truth_table for each judge's two orders, agents.jury for the tally
    policy     agents.policy_overlay: the kappa guard and the tie-break switch
    outcome    agents.builders (the event), agents.sampling (the audit draw and its copy),
               agents.facts (``DecisionFacts``, ``EvaluationResult``)

The tie-break stage (``agents.tiebreak``) walks the same rooms with seed 002's template and rule.

Idempotency: for a given pair, policy and deterministic judge, the decision is the same every time
(audit sampling hashes the pair id), so a redelivery after a rebalance produces the same outcome.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

import anyio

from pairjudge.agents.builders import Outcome, primary_outcome, review, settled_verdict
from pairjudge.agents.cascade import Cascade, Tier, passes_on
from pairjudge.agents.cost import cost_of
from pairjudge.agents.disposition import PUBLISH, Disposition, disposition
from pairjudge.agents.facts import DecisionFacts, EvaluationResult, decision_facts, evaluation
from pairjudge.agents.injection_screen import InjectionScreen, screen_of, screen_pair
from pairjudge.agents.judge import Judge, JudgeCall, judge_info
from pairjudge.agents.jury import Juror, juror, jury_info, reconcile_jury, required_votes, tally, with_agreement
from pairjudge.agents.orderings import ORDERS, build_ordering
from pairjudge.agents.pair_checks import check_pair, scan_for_injection, snapshot_pair
from pairjudge.agents.policy import Policy
from pairjudge.agents.policy_overlay import apply_policy, overriding_reason
from pairjudge.agents.prompts import pair_template_hash, render_primary
from pairjudge.agents.sampling import audit, verdict_class
from pairjudge.agents.settle import Settlement, settle
from pairjudge.agents.tiebreak import (
    arithmetic_mismatches,
    decide_tiebreak,
    held_back_winner,
    judge_tiebreak_ordering,
    tiebreak_failure,
)
from pairjudge.agents.truth_table import Reconciliation
from pairjudge.agents.validation import AskResult, ask_validated, check_head_to_head, check_pairwise
from pairjudge.schemas.audit import AuditSeries
from pairjudge.schemas.events import (
    InjectionFlag,
    JudgeInfo,
    Order,
    OrderingResult,
    ReviewRequest,
    Stage,
    TieBreakRequest,
)
from pairjudge.schemas.pair import CandidatePair
from pairjudge.schemas.replies import HeadToHeadReply, PairwiseReply, ToneStyleReply
from pairjudge.schemas.rubric import HeadToHeadRubric, InlineRubric, PairwiseRubric, ToneStyleRubric

__all__ = [
    "Decision",
    "both_orders",
    "capped_decision",
    "gather_in_order",
    "judge_pair",
    "resolve_tiebreak",
]

T = TypeVar("T")

_NO_CATALOG: Mapping[str, InlineRubric] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Decision:
    """What a stage decided about one pair: the event to publish, and everything about how it came about."""

    stage: Stage
    outcome: Outcome
    #: Set when the verdict was sampled for audit (reason "audit_sample", audit=True).
    audit_copy: ReviewRequest | None
    calls: tuple[JudgeCall, ...]
    facts: DecisionFacts
    evaluation: EvaluationResult | None
    #: What the edge does with it: publish the outcome, judge the pair again later (the judge was down), or
    #: dead-letter it (the judge refused the request). The edge reads nothing else to choose.
    disposition: Disposition = PUBLISH


# --- concurrency ------------------------------------------------------------------------------


async def gather_in_order(jobs: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run every job concurrently in one task group; return the results in job order.

    If any job raises, the others are cancelled and a lone exception is re-raised on its own (not
    wrapped in an ExceptionGroup), so callers can catch ``InputRejected`` and the like directly.
    """
    results: dict[int, T] = {}

    async def one(index: int, job: Callable[[], Awaitable[T]]) -> None:
        results[index] = await job()

    try:
        if _on_asyncio():
            # asyncio's own task group where it runs (the worker, the CLI, the tests): the same contract as
            # anyio's (the others cancelled when one raises, errors in an exception group) at about a
            # quarter of its cost, which was a tenth of a pair's own CPU with an instant judge.
            async with asyncio.TaskGroup() as tasks:
                for index, job in enumerate(jobs):
                    tasks.create_task(one(index, job))
        else:
            async with anyio.create_task_group() as tg:
                for index, job in enumerate(jobs):
                    tg.start_soon(one, index, job)
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    return [results[index] for index in range(len(jobs))]


def _on_asyncio() -> bool:
    """True inside a running asyncio event loop (anyio's other backend, trio, runs none)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def both_orders(run: Callable[[Order], Awaitable[T]]) -> tuple[T, T]:
    """Run ``run("AB")`` and ``run("BA")`` concurrently (:func:`gather_in_order`); return (ab, ba)."""
    ab, ba = await gather_in_order([lambda: run("AB"), lambda: run("BA")])
    return ab, ba


# --- the primary stage ------------------------------------------------------------------------


async def _primary_ordering(
    pair: CandidatePair, rubric: InlineRubric, order: Order, judge: Judge, policy: Policy
) -> tuple[OrderingResult, tuple[JudgeCall, ...]]:
    request = render_primary(pair, rubric, order, datamark=policy.datamark)
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
    ordering = build_ordering(
        pair,
        order,
        reply=ask.reply,
        calls=ask.calls,
        retries=ask.retries,
        answered_model=ask.answered_model,
        error=ask.error,
        error_kind=ask.error_kind,
        probabilities=ask.probabilities,
    )
    return ordering, ask.calls


async def _judge_jurors(
    pair: CandidatePair,
    rubric: InlineRubric,
    judges: Sequence[Judge],
    policy: Policy,
    prompt_hash: str,
    threshold: float,
) -> list[Juror]:
    # Per pair, per judge, per ordering: one call chain each, all concurrent, never batched with
    # other pairs (docs/design.md §2.9).
    def job(judge: Judge, order: Order) -> Callable[[], Awaitable[tuple[OrderingResult, tuple[JudgeCall, ...]]]]:
        return lambda: _primary_ordering(pair, rubric, order, judge, policy)

    results = await gather_in_order([job(judge, order) for judge in judges for order in ORDERS])
    jurors = []
    for index, judge in enumerate(judges):
        (ab, ab_calls), (ba, ba_calls) = results[2 * index], results[2 * index + 1]
        tokens = policy.confidence_source == "token_probability"
        jurors.append(
            juror(judge_info(judge, prompt_hash), ab, ba, ab_calls + ba_calls, threshold, token_probability=tokens)
        )
    return jurors


@dataclass(frozen=True, slots=True)
class _TierJudgement:
    """One tier's judgement of a pair: its jurors, their reconciliation, and the threshold it was held to."""

    tier: Tier
    info: JudgeInfo
    jurors: list[Juror]
    #: Judged as a jury (its votes are worked out and recorded), and the votes its winner needed.
    jury: bool
    needed: int
    threshold: float
    raw: Reconciliation

    @property
    def calls(self) -> tuple[JudgeCall, ...]:
        calls = tuple(c for j in self.jurors for c in j.calls)
        return calls if not self.tier.name else tuple(dataclasses.replace(c, tier=self.tier.name) for c in calls)


async def judge_pair(
    pair: CandidatePair,
    judges: Judge | Sequence[Judge] | Cascade,
    policy: Policy,
    catalog: Mapping[str, InlineRubric] = _NO_CATALOG,
    *,
    screen: InjectionScreen | None = None,
) -> Decision:
    """The primary stage for one pair, by one judge, by a jury (a list, in a fixed, meaningful order), or by
    a judge cascade (``agents.cascade``: each tier in turn, until one decides).

    With the injection guard on, ``agents.injection``'s rules read the pair first, then, when they find
    nothing, the injection ``screen`` (``agents.injection_screen``): ``screen``, or the one the first judge
    carries (``ScreenedJudge``). Either one's flags send the pair to review "suspected_injection".

    Raises ``InputRejected`` (dead-letter it) for an unjudgeable pair, and ``ValueError`` for an empty
    jury or an unreachable ``policy.jury_quorum``, both before any judge call. A jury's outcome carries
    every juror's orderings (juror by juror, AB then BA) and, for a verdict or a tie-break request, the
    votes; ``Decision.calls`` lists the calls in the same order. In a cascade the outcome is the deciding
    tier's (or the last tier's), named by ``JudgeInfo.tier``; ``Decision.calls`` lists every tier's calls,
    the tiers that passed the pair on first.

    The kappa guard does not skip the judges: their would-be answers travel with the review so
    agreement with the humans' labels can still be measured while auto-deciding is paused.
    """
    tiers, is_jury = _tiers_of(judges)
    # A list of judges is a jury even of one; a cascade's tier is one when it has several judges.
    juries = [is_jury or tier.is_jury for tier in tiers]
    # Before any call: an unreachable quorum raises. A single judge needs its one vote whatever quorum is
    # configured for juries.
    needed = [
        required_votes(len(tier.judges), policy.jury_quorum if jury else None)
        for tier, jury in zip(tiers, juries, strict=True)
    ]
    rubric = check_pair(pair, policy, catalog)
    judged_pair = snapshot_pair(pair, rubric)
    flags = scan_for_injection(judged_pair) if policy.injection_guard else ()
    screen = screen if screen is not None else screen_of(tiers[0].judges)
    if policy.injection_guard and not flags and screen is not None:
        # Only when the rules found nothing: the pair goes to review either way, and a second opinion
        # on an already-held pair would cost a call for no decision.
        flags = await screen_pair(judged_pair, screen, policy.screen_on_failure)
    prompt_hash = pair_template_hash(rubric.kind, pair, datamark=policy.datamark)
    if flags:
        return _suspected_injection(judged_pair, rubric, flags, _tier_info(tiers[0], prompt_hash), prompt_hash)
    settled = settle(judged_pair)
    if settled is not None:
        return _settled_decision(judged_pair, rubric, settled, _tier_info(tiers[0], prompt_hash), prompt_hash)
    passed: list[_TierJudgement] = []
    for index, tier in enumerate(tiers):
        judged = await _judge_tier(
            judged_pair, rubric, tier, policy, prompt_hash, jury=juries[index], needed=needed[index]
        )
        if index == len(tiers) - 1 or not passes_on(judged.raw):
            break
        passed.append(judged)
    return _primary_decision(judged_pair, rubric, policy, prompt_hash, judged, passed)


def capped_decision(
    pair: CandidatePair,
    judges: Judge | Sequence[Judge] | Cascade,
    policy: Policy,
    catalog: Mapping[str, InlineRubric] = _NO_CATALOG,
) -> Decision:
    """Review "spend_capped" before any judge call: the pair is over a spending cap whose action is
    ``review`` (``agents.spend``). Checked like any pair first: an unjudgeable one is still dead-lettered."""
    rubric = check_pair(pair, policy, catalog)
    judged_pair = snapshot_pair(pair, rubric)
    prompt_hash = pair_template_hash(rubric.kind, pair, datamark=policy.datamark)
    tiers, _ = _tiers_of(judges)
    outcome = review(
        judged_pair, "spend_capped", stage="primary", orderings=(), judge=_tier_info(tiers[0], prompt_hash)
    )
    return _unjudged(judged_pair, rubric, outcome, prompt_hash, consistent=False)


def _tiers_of(judges: Judge | Sequence[Judge] | Cascade) -> tuple[tuple[Tier, ...], bool]:
    """The tiers to walk, and whether the primary judging is a jury's. A judge or a jury outside a cascade is
    one nameless tier, and its events name no tier."""
    if isinstance(judges, Cascade):
        return judges.tiers, False
    if isinstance(judges, Sequence):
        return (Tier("", tuple(judges)),), True
    return (Tier("", (judges,)),), False


def _tier_info(tier: Tier, prompt_hash: str) -> JudgeInfo:
    info = jury_info(tier.judges, prompt_hash)
    return info if not tier.name else info.model_copy(update={"tier": tier.name})


async def _judge_tier(
    pair: CandidatePair,
    rubric: InlineRubric,
    tier: Tier,
    policy: Policy,
    prompt_hash: str,
    *,
    jury: bool,
    needed: int,
) -> _TierJudgement:
    """One tier's judgement: both orders by its judge, or by each of its jurors, reconciled at its threshold."""
    info = _tier_info(tier, prompt_hash)
    # The risk level's threshold, raised by its series' calibrated one when the audit has published one,
    # and by the tier's own floor.
    threshold = max(policy.primary_threshold_for(AuditSeries.for_pair(info, pair).key, pair.risk), tier.threshold)
    jurors = await _judge_jurors(pair, rubric, tier.judges, policy, prompt_hash, threshold)
    return _TierJudgement(tier, info, jurors, jury, needed, threshold, reconcile_jury(jurors, needed, threshold))


def _primary_decision(
    pair: CandidatePair,
    rubric: InlineRubric,
    policy: Policy,
    prompt_hash: str,
    judged: _TierJudgement,
    passed: Sequence[_TierJudgement],
) -> Decision:
    """The decision from the tier that decided (or the last one), with the calls of the tiers it passed."""
    jurors, info, threshold, raw = judged.jurors, judged.info, judged.threshold, judged.raw
    # Agreement is with the majority candidate, even when low confidence keeps it from deciding. Only a
    # jury's events carry votes: one judge's are not worked out.
    tallied = [j.vote for j in jurors]
    votes = with_agreement(tallied, tally(tallied, judged.needed)) if judged.jury else ()
    rec = apply_policy(raw, policy, pair.risk, AuditSeries.for_pair(info, pair).key)
    orderings = tuple(o for j in jurors for o in (j.ab, j.ba))
    # A jury's verdict is explained by its majority's justifications; one judge's by its own two.
    majority = tuple(o for j in jurors if not j.vote.abstained and j.vote.vote == rec.winner for o in (j.ab, j.ba))
    outcome = primary_outcome(
        pair,
        rubric,
        rec,
        info,
        orderings=orderings,
        judged=majority,
        votes=votes,
    )
    sampling_class = verdict_class(
        stage="primary",
        mean_confidence=rec.mean_confidence,
        threshold=threshold,
        margin=policy.audit_uncertain_margin,
        votes=votes,
        winner=rec.winner,
    )
    sampled, copy = audit(outcome, pair, "primary", policy, sampling_class)
    calls = tuple(c for step in passed for c in step.calls) + judged.calls
    if isinstance(outcome, TieBreakRequest):
        # The tie-break stage's record then has the pair's whole spend (``DecisionFacts.pair_cost_usd``).
        outcome = outcome.model_copy(update={"primary_cost_usd": cost_of(calls)})
    facts = decision_facts(
        pair,
        "primary",
        outcome,
        rec,
        prompt_hash=prompt_hash,
        rubric_kind=rubric.kind,
        calls=calls,
        audit=copy is not None,
        sampled=sampled,
        policy_overrode=raw.outcome if rec is not raw else None,
        judged=raw,
        primary_threshold=threshold,
        jury=votes if judged.jury else None,
        tier=judged.tier.name or None,
        escalated_from=[step.tier.name for step in passed],
    )
    return Decision(
        stage="primary",
        outcome=outcome,
        audit_copy=copy,
        calls=calls,
        facts=facts,
        evaluation=evaluation(f"pairwise_{rubric.kind}", outcome, orderings, rec.mean_confidence),
        disposition=disposition(rec.failure, orderings, calls),
    )


def _suspected_injection(
    pair: CandidatePair, rubric: InlineRubric, flags: tuple[InjectionFlag, ...], info: JudgeInfo, prompt_hash: str
) -> Decision:
    """Review "suspected_injection", before any judge call: a judge that obeys the text would obey it in
    both orders, so neither the swap nor the confidence threshold would catch it, and its verdict
    would be worth nothing. Checked before the rules of ``agents.settle``, so even an injector facing
    an empty output is looked at by a person."""
    outcome = review(pair, "suspected_injection", stage="primary", orderings=(), judge=info)
    outcome = outcome.model_copy(update={"injection": flags})
    return _unjudged(pair, rubric, outcome, prompt_hash, consistent=False, injection=flags)


def _settled_decision(
    pair: CandidatePair, rubric: InlineRubric, settled: Settlement, info: JudgeInfo, prompt_hash: str
) -> Decision:
    """The primary stage's decision for a pair settled by rule: a verdict, no judge call, no audit copy
    (it says nothing about the judge, so the drift audit does not count it either)."""
    outcome = settled_verdict(pair, rubric.kind, settled, info)
    result = EvaluationResult(f"pairwise_{rubric.kind}", outcome.winner_role or "tie", 1.0, settled.explanation)
    return _unjudged(pair, rubric, outcome, prompt_hash, consistent=True, result=result)


def _unjudged(
    pair: CandidatePair,
    rubric: InlineRubric,
    outcome: Outcome,
    prompt_hash: str,
    *,
    consistent: bool,
    injection: tuple[InjectionFlag, ...] = (),
    result: EvaluationResult | None = None,
) -> Decision:
    """A primary decision made before any judge call: no calls, no flip, no audit copy."""
    facts = decision_facts(
        pair,
        "primary",
        outcome,
        None,
        prompt_hash=prompt_hash,
        rubric_kind=rubric.kind,
        calls=(),
        audit=False,
        consistent=consistent,
        flip=False,
        injection=injection,
    )
    return Decision(stage="primary", outcome=outcome, audit_copy=None, calls=(), facts=facts, evaluation=result)


# --- the tie-break stage ----------------------------------------------------------------------


async def resolve_tiebreak(request: TieBreakRequest, judge: Judge, policy: Policy) -> Decision:
    """The seed 002 resolver for one ``TieBreakRequest``, both orders concurrently.

    With the tie-break switched off (it may have been switched off after the request was sent), the
    pair goes straight to review "tiebreak_disabled" without a judge call.
    """
    pair = request.pair
    rubric_kind = pair.rubric.kind
    series_key = AuditSeries.for_pair(request.primary_judge, pair).key
    switched_off = None if policy.tiebreak_on_for(series_key) else overriding_reason(policy, "tiebreak", series_key)
    if switched_off is not None:
        # Same precedence as the primary stage: a tripped kappa guard names the reason first.
        outcome: Outcome = review(
            pair,
            switched_off,
            stage="tiebreak",
            orderings=request.primary,
            judge=request.primary_judge,
            trace_id=request.trace_id,
        )
        facts = decision_facts(
            pair,
            "tiebreak",
            outcome,
            None,
            prompt_hash=pair_template_hash("tiebreak", pair, datamark=policy.datamark),
            rubric_kind=rubric_kind,
            calls=(),
            audit=False,
            tiebreak_reason=request.reason,
            earlier_cost_usd=request.primary_cost_usd,
        )
        return Decision("tiebreak", outcome, None, (), facts, None)

    weights = pair.tiebreak or policy.default_tiebreak
    ab, ba = await both_orders(lambda order: judge_tiebreak_ordering(pair, weights, order, judge, policy))
    prompt_hash = pair_template_hash("tiebreak", pair, datamark=policy.datamark)
    info = judge_info(judge, prompt_hash)
    mismatches = arithmetic_mismatches(ab, ba)
    outcome = decide_tiebreak(request, ab, ba, policy, info)
    calls = ab.calls + ba.calls
    # A verdict of the tie-break stage is uncertain by construction: the primary could not decide.
    sampled, copy = audit(outcome, pair, "tiebreak", policy, "uncertain")
    both_valid = ab.result.valid and ba.result.valid
    winners = (ab.result.mapped_winner, ba.result.mapped_winner)
    mean = (
        (ab.result.confidence + ba.result.confidence) / 2
        if ab.result.confidence is not None and ba.result.confidence is not None
        else None
    )
    held = held_back_winner(ab, ba)
    # A would-be verdict held back below the stage's calibrated threshold keeps its winner on the record: its
    # human label measures the tie-break there too (``agents.audit.stages``).
    would_be = (
        Reconciliation("verdict", None, held[0], held[1], consistent=True, flip=False)
        if held is not None and outcome.outcome_reason == "tiebreak_no_signal"
        else None
    )
    facts = decision_facts(
        pair,
        "tiebreak",
        outcome,
        None,
        judged=would_be,
        prompt_hash=prompt_hash,
        rubric_kind=rubric_kind,
        calls=calls,
        audit=copy is not None,
        sampled=sampled,
        consistent=both_valid and winners[0] == winners[1],
        flip=both_valid and winners[0] != winners[1],
        tiebreak_reason=request.reason,
        forced_choice=ab.result.forced_choice or ba.result.forced_choice,
        arithmetic_mismatch=mismatches,
        earlier_cost_usd=request.primary_cost_usd,
    )
    return Decision(
        stage="tiebreak",
        outcome=outcome,
        audit_copy=copy,
        calls=calls,
        facts=facts,
        evaluation=evaluation("pairwise_tiebreak", outcome, (ab.result, ba.result), mean),
        disposition=disposition(tiebreak_failure(ab, ba), (ab.result, ba.result), calls),
    )
