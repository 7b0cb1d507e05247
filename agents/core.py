"""The judging core's entry points: one pair in, one ``Decision`` out (DESIGN §2).

``judge_pair`` checks the pair, has every judge judge both orders concurrently, reconciles them and
applies the policy; ``resolve_tiebreak`` runs the seed 002 resolver on a ``TieBreakRequest``. Both are
pure apart from calling the ``Judge``: no I/O, no clocks that matter, no randomness. The Faust edge
turns the ``Decision`` into topic sends, and its typed ``facts`` and ``evaluation`` into spans and
metrics.

One judge is a jury of one: there is a single path for both (:func:`judge_pair`), and the jury's
arithmetic (``agents.jury``) reduces to DESIGN §2.5's rule for one judge.

Idempotency: for a given pair, policy and deterministic judge, the decision is the same every time
(audit sampling hashes the pair id), so a redelivery after a rebalance produces the same outcome.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

import anyio

from pairjudge.agents.errors import InputRejected
from pairjudge.agents.injection import detect
from pairjudge.agents.judge import Judge, judge_info
from pairjudge.agents.jury import Juror, juror, jury_info, reconcile_jury, required_votes, tally, with_agreement
from pairjudge.agents.policy import Policy
from pairjudge.agents.prompts import render_primary, template_hash
from pairjudge.agents.reconcile import (
    Outcome,
    OutcomeKind,
    Reconciliation,
    apply_policy,
    audit_copy,
    ordering_from_ask,
    primary_outcome,
    review,
    snapshot_pair,
)
from pairjudge.agents.sampling import REVIEW, AuditDraw, VerdictClass, draw, verdict_class
from pairjudge.agents.settle import Settlement, settle
from pairjudge.agents.tiebreak import TieBreakOrdering, decide_tiebreak, judge_tiebreak_ordering
from pairjudge.agents.validation import AskResult, JudgeCall, ask_validated, check_head_to_head, check_pairwise
from pairjudge.schemas.audit import AuditSeries
from pairjudge.schemas.events import (
    DecidedBy,
    InjectionFlag,
    JudgeInfo,
    JuryVote,
    Order,
    OrderingResult,
    PairVerdict,
    ReviewRequest,
    Stage,
    TieBreakReason,
    TieBreakRequest,
)
from pairjudge.schemas.pair import TIE, CandidatePair
from pairjudge.schemas.replies import HeadToHeadReply, PairwiseReply, ToneStyleReply
from pairjudge.schemas.rubric import HeadToHeadRubric, InlineRubric, PairwiseRubric, RubricRef, ToneStyleRubric

__all__ = [
    "Decision",
    "DecisionFacts",
    "EvaluationResult",
    "Orderings",
    "both_orders",
    "check_pair",
    "gather_in_order",
    "judge_pair",
    "resolve_rubric",
    "resolve_tiebreak",
    "scan_for_injection",
]

T = TypeVar("T")

_NO_CATALOG: Mapping[str, InlineRubric] = MappingProxyType({})
_ORDERS: tuple[Order, Order] = ("AB", "BA")


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
    outcome: OutcomeKind
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
    reason: str | None = None
    #: What the orderings alone led to, when the policy (kappa guard, tie-break switch) overrode it.
    policy_overrode: OutcomeKind | None = None
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


@dataclass(frozen=True, slots=True)
class Decision:
    stage: Stage
    outcome: Outcome
    #: Set when the verdict was sampled for audit (reason "audit_sample", audit=True).
    audit_copy: ReviewRequest | None
    calls: tuple[JudgeCall, ...]
    facts: DecisionFacts
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

    Reasons: ``unknown_rubric``, ``oversized_output``, ``empty_prompt``,
    ``oversized_prompt``, ``oversized_context``, ``malformed_text``. Details name the candidate id and
    sizes, never the text itself. Every rubric's template needs the task (the tie-break shows it even
    when the primary template does not), so a blank task prompt is rejected for all kinds.
    """
    rubric = resolve_rubric(pair, catalog)
    for candidate in pair.candidates:
        # An empty output is an ordinary (losing) answer, settled by ``agents.settle``, not an error.
        what = f"candidate {candidate.candidate_id!r} output"
        _check_text(what, candidate.output, policy.max_output_chars, "output", may_be_empty=True)
    _check_text("task prompt", pair.task.prompt, policy.max_prompt_chars, "prompt")
    if pair.task.context is not None:
        _check_text("task context", pair.task.context, policy.max_prompt_chars, "context", may_be_empty=True)
    return rubric


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
        async with anyio.create_task_group() as tg:
            for index, job in enumerate(jobs):
                tg.start_soon(one, index, job)
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    return [results[index] for index in range(len(jobs))]


async def both_orders(run: Callable[[Order], Awaitable[T]]) -> tuple[T, T]:
    """Run ``run("AB")`` and ``run("BA")`` concurrently (:func:`gather_in_order`); return (ab, ba)."""
    ab, ba = await gather_in_order([lambda: run("AB"), lambda: run("BA")])
    return ab, ba


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


async def _judge_jurors(
    pair: CandidatePair,
    rubric: InlineRubric,
    judges: Sequence[Judge],
    policy: Policy,
    prompt_hash: str,
    threshold: float,
) -> list[Juror]:
    # Per pair, per judge, per ordering: one call chain each, all concurrent, never batched with
    # other pairs (DESIGN §2.9).
    def job(judge: Judge, order: Order) -> Callable[[], Awaitable[tuple[OrderingResult, tuple[JudgeCall, ...]]]]:
        return lambda: _primary_ordering(pair, rubric, order, judge, policy)

    results = await gather_in_order([job(judge, order) for judge in judges for order in _ORDERS])
    jurors = []
    for index, judge in enumerate(judges):
        (ab, ab_calls), (ba, ba_calls) = results[2 * index], results[2 * index + 1]
        jurors.append(juror(judge_info(judge, prompt_hash), ab, ba, ab_calls + ba_calls, threshold))
    return jurors


async def judge_pair(
    pair: CandidatePair,
    judges: Judge | Sequence[Judge],
    policy: Policy,
    catalog: Mapping[str, InlineRubric] = _NO_CATALOG,
) -> Decision:
    """The primary stage for one pair, by one judge or by a jury (a list, in a fixed, meaningful order).

    Raises ``InputRejected`` (dead-letter it) for an unjudgeable pair, and ``ValueError`` for an empty
    jury or an unreachable ``policy.jury_quorum``, both before any judge call. A jury's outcome carries
    every juror's orderings (juror by juror, AB then BA) and, for a verdict or a tie-break request, the
    votes; ``Decision.calls`` lists the calls in the same order.

    The kappa guard does not skip the judges: their would-be answers travel with the review so
    agreement with the humans' labels can still be measured while auto-deciding is paused.
    """
    is_jury = isinstance(judges, Sequence)
    panel: tuple[Judge, ...] = tuple(judges) if isinstance(judges, Sequence) else (judges,)
    # A single judge needs its one vote whatever quorum is configured for juries.
    needed = required_votes(len(panel), policy.jury_quorum if is_jury else None)
    rubric = check_pair(pair, policy, catalog)
    judged_pair = snapshot_pair(pair, rubric)
    prompt_hash = template_hash(rubric.kind)
    info = jury_info(panel, prompt_hash)
    # The series' calibrated threshold, when the audit has published one (never below the configured).
    threshold = policy.primary_threshold_for(AuditSeries.for_pair(info, pair).key)
    flags = scan_for_injection(judged_pair) if policy.injection_guard else ()
    if flags:
        return _suspected_injection(judged_pair, rubric, flags, info, prompt_hash)
    settled = settle(judged_pair)
    if settled is not None:
        return _settled_decision(judged_pair, rubric, settled, info, prompt_hash)
    jurors = await _judge_jurors(judged_pair, rubric, panel, policy, prompt_hash, threshold)
    raw = reconcile_jury(jurors, needed, threshold)
    rec = apply_policy(raw, policy)
    # Agreement is with the majority candidate, even when low confidence keeps it from deciding.
    votes = with_agreement([j.vote for j in jurors], tally([j.vote for j in jurors], needed))
    orderings = tuple(o for j in jurors for o in (j.ab, j.ba))
    # A jury's verdict is explained by its majority's justifications; one judge's by its own two.
    majority = tuple(o for j in jurors if not j.vote.abstained and j.vote.vote == rec.winner for o in (j.ab, j.ba))
    outcome = primary_outcome(
        judged_pair,
        rubric,
        rec,
        info,
        orderings=orderings,
        judged=majority,
        votes=votes if is_jury else (),
    )
    sampled, audit = _audit(
        outcome,
        judged_pair,
        "primary",
        policy,
        verdict_class(
            stage="primary",
            mean_confidence=rec.mean_confidence,
            threshold=threshold,
            margin=policy.audit_uncertain_margin,
            votes=votes if is_jury else (),
            winner=rec.winner,
        ),
    )
    calls = tuple(c for j in jurors for c in j.calls)
    facts = _facts(
        judged_pair,
        "primary",
        outcome,
        rec,
        prompt_hash=prompt_hash,
        rubric_kind=rubric.kind,
        calls=calls,
        audit=audit is not None,
        sampled=sampled,
        policy_overrode=raw.outcome if rec is not raw else None,
        judged=raw,
        primary_threshold=threshold,
        jury=votes if is_jury else None,
    )
    return Decision(
        stage="primary",
        outcome=outcome,
        audit_copy=audit,
        calls=calls,
        facts=facts,
        evaluation=_evaluation(f"pairwise_{rubric.kind}", outcome, orderings, rec.mean_confidence),
    )


def scan_for_injection(pair: CandidatePair) -> tuple[InjectionFlag, ...]:
    """What ``agents.injection`` finds in each output: text aimed at the judge."""
    return tuple(
        InjectionFlag(candidate_id=c.candidate_id, rule=f.rule, excerpt=f.excerpt)
        for c in pair.candidates
        for f in detect(c.output)
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
    facts = _facts(
        pair,
        "primary",
        outcome,
        None,
        prompt_hash=prompt_hash,
        rubric_kind=rubric.kind,
        calls=(),
        audit=False,
        consistent=False,
        flip=False,
        injection=flags,
    )
    return Decision(stage="primary", outcome=outcome, audit_copy=None, calls=(), facts=facts, evaluation=None)


def _settled_decision(
    pair: CandidatePair, rubric: InlineRubric, settled: Settlement, info: JudgeInfo, prompt_hash: str
) -> Decision:
    """The primary stage's decision for a pair settled by rule: a verdict, no judge call, no audit copy
    (it says nothing about the judge, so the drift audit does not count it either)."""
    tie = settled.winner == TIE
    outcome = PairVerdict(
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
        rubric_kind=rubric.kind,
        judge=info,
        experiment_id=pair.metadata.experiment_id,
        traffic=pair.metadata.traffic,
    )
    facts = _facts(
        pair,
        "primary",
        outcome,
        None,
        prompt_hash=prompt_hash,
        rubric_kind=rubric.kind,
        calls=(),
        audit=False,
        consistent=True,
        flip=False,
    )
    evaluation = EvaluationResult(f"pairwise_{rubric.kind}", outcome.winner_role or "tie", 1.0, settled.explanation)
    return Decision(stage="primary", outcome=outcome, audit_copy=None, calls=(), facts=facts, evaluation=evaluation)


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
        facts = _facts(
            pair,
            "tiebreak",
            outcome,
            None,
            prompt_hash=prompt_hash,
            rubric_kind=rubric_kind,
            calls=(),
            audit=False,
            tiebreak_reason=request.reason,
        )
        return Decision("tiebreak", outcome, None, (), facts, None)

    weights = pair.tiebreak or policy.default_tiebreak
    ab, ba = await both_orders(lambda order: judge_tiebreak_ordering(pair, weights, order, judge, policy))
    outcome = decide_tiebreak(request, ab, ba, policy, judge_info(judge, prompt_hash))
    calls = ab.calls + ba.calls
    # A verdict of the tie-break stage is uncertain by construction: the primary could not decide.
    sampled, audit = _audit(outcome, pair, "tiebreak", policy, "uncertain")
    both_valid = ab.result.valid and ba.result.valid
    winners = (ab.result.mapped_winner, ba.result.mapped_winner)
    mean = (
        (ab.result.confidence + ba.result.confidence) / 2
        if ab.result.confidence is not None and ba.result.confidence is not None
        else None
    )
    facts = _facts(
        pair,
        "tiebreak",
        outcome,
        None,
        prompt_hash=prompt_hash,
        rubric_kind=rubric_kind,
        calls=calls,
        audit=audit is not None,
        sampled=sampled,
        consistent=both_valid and winners[0] == winners[1],
        flip=both_valid and winners[0] != winners[1],
        tiebreak_reason=request.reason,
        forced_choice=ab.result.forced_choice or ba.result.forced_choice,
        arithmetic_mismatch=_mismatches(ab, ba),
    )
    return Decision(
        stage="tiebreak",
        outcome=outcome,
        audit_copy=audit,
        calls=calls,
        facts=facts,
        evaluation=_evaluation("pairwise_tiebreak", outcome, (ab.result, ba.result), mean),
    )


def _audit(
    outcome: Outcome, pair: CandidatePair, stage: Stage, policy: Policy, sampling_class: VerdictClass
) -> tuple[AuditDraw | None, ReviewRequest | None]:
    """A judge verdict's audit draw and, when drawn, its review copy; (None, None) for anything else."""
    if not isinstance(outcome, PairVerdict):
        return None, None
    sampled = draw(pair.pair_id, policy, sampling_class)
    copy = audit_copy(
        outcome,
        pair,
        stage,
        sampled.inclusion_probability,
        policy.audit_seed,
        reviews_wanted=sampled.reviews_wanted,
    )
    return sampled, copy


def _mismatches(*orderings: TieBreakOrdering) -> int:
    return sum(1 for o in orderings if o.assessment is not None and o.assessment.arithmetic_mismatch)


# --- facts ------------------------------------------------------------------------------------


def outcome_kind(outcome: Outcome) -> OutcomeKind:
    if isinstance(outcome, PairVerdict):
        return "verdict"
    if isinstance(outcome, TieBreakRequest):
        return "tiebreak"
    return "review"


def _facts(
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
    policy_overrode: OutcomeKind | None = None,
    judged: Reconciliation | None = None,
    primary_threshold: float | None = None,
    jury: Sequence[JuryVote] | None = None,
    tiebreak_reason: TieBreakReason | None = None,
    forced_choice: bool | None = None,
    arithmetic_mismatch: int | None = None,
    injection: Sequence[InjectionFlag] = (),
) -> DecisionFacts:
    """The decision's facts; ``consistent``/``flip`` come from ``rec`` unless given; ``judged`` is what
    the orderings reached before the policy was applied (the primary stage); ``sampled`` is a judge
    verdict's audit draw."""
    decided_by: DecidedBy
    reason: str | None
    probability: float | None = None
    sampling_class: str | None = None
    if isinstance(outcome, ReviewRequest):
        # Every escalated pair gets a human label: it is in the human sample for certain.
        probability, sampling_class = 1.0, REVIEW
    elif isinstance(outcome, PairVerdict) and sampled is not None and sampled.inclusion_probability is not None:
        probability, sampling_class = sampled.inclusion_probability, sampled.sampling_class
    if isinstance(outcome, PairVerdict):
        decided_by, winner, confidence, reason = outcome.decided_by, outcome.winner, outcome.confidence, None
    elif isinstance(outcome, TieBreakRequest):
        decided_by, winner, confidence, reason = "tiebreak", None, None, outcome.reason
    else:
        decided_by, winner, confidence, reason = "human", None, None, outcome.reason
    return DecisionFacts(
        pair_id=pair.pair_id,
        stage=stage,
        outcome=outcome_kind(outcome),
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
        injection_candidates=",".join(sorted({f.candidate_id for f in injection})) or None,
        inclusion_probability=probability,
        sampling_class=sampling_class,
    )


def _evaluation(
    name: str, outcome: Outcome, judged: Sequence[OrderingResult], mean_confidence: float | None
) -> EvaluationResult | None:
    """The ``gen_ai.evaluation.result`` facts; None when no ordering produced a valid reply."""
    if not any(r.valid for r in judged):
        return None
    if isinstance(outcome, PairVerdict):
        return EvaluationResult(name, outcome.winner_role or "tie", outcome.confidence, outcome.justification)
    return EvaluationResult(name, outcome_kind(outcome), mean_confidence, outcome.reason)
