"""What one stage decided about one pair, as the audit counts it: a ``DecisionRecord``, facts and no text.

A record is derived from the decision's ``DecisionFacts`` (what it decided, why, how confidently, what it cost)
and from the pair (who competed, in which series); only the per-ordering statistics (positions, dimensions,
cited rules) and the answered models are read from the orderings and calls themselves."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pairjudge.agents.audit.ambiguity import dimension_facts, rules_cited
from pairjudge.agents.core import Decision
from pairjudge.agents.tool_views import reply_length
from pairjudge.agents.validation import JudgeCall
from pairjudge.schemas import JudgeInfo, TieBreakRequest
from pairjudge.schemas.audit import (
    AuditSeries,
    DecisionRecord,
    RelativeWinner,
)
from pairjudge.schemas.events import OrderingResult
from pairjudge.schemas.pair import Candidate, CandidatePair
from pairjudge.schemas.rubric import InlineRubric, RubricRef


def series_of(judge: JudgeInfo, pair: CandidatePair) -> AuditSeries:
    """The series a pair's decisions count in (``AuditSeries.for_pair``)."""
    return AuditSeries.for_pair(judge, pair)


def record_for(
    decision: Decision,
    judged: CandidatePair | TieBreakRequest,
    catalog: Mapping[str, InlineRubric] | None = None,
) -> DecisionRecord | None:
    """The record of a stage's decision on ``judged`` (a pair, or a tie-break request), in the series
    of the pair's primary judge; None when no judge was involved (nothing for the audit to follow). A pair
    a rule settled before any judge call gets a record marked ``rule``: the scoreboard counts it, the drift
    statistics do not.

    ``catalog`` resolves a named rubric's style guide, for the rules its justifications cite; a tie-break
    request carries the inline rubric and the primary orderings itself."""
    if isinstance(judged, TieBreakRequest):
        series = series_of(judged.primary_judge, judged.pair)
        return decision_record(decision, judged.pair, series, primary_orderings=judged.primary)
    outcome = decision.outcome
    judge = outcome.primary_judge if isinstance(outcome, TieBreakRequest) else outcome.judge
    if judge is None:
        return None
    return decision_record(decision, judged, series_of(judge, judged), catalog=catalog)


def _orderings(decision: Decision) -> tuple[OrderingResult, ...]:
    return decision.outcome.judged_orderings


def _model_mismatch(calls: Iterable[JudgeCall]) -> str | None:
    """A model a judge answered with other than the one requested; None when every answer matches.

    Providers answer with a dated snapshot of the requested alias ("gpt-4o" -> "gpt-4o-2024-08-06"),
    so an answer that starts with the requested name counts as that model.
    """
    for call in calls:
        if call.answered_model and not call.answered_model.startswith(call.requested_model):
            return call.answered_model
    return None


def output_chars(candidate: Candidate) -> int:
    """A reply's length for the drift series: its text, and each tool call as the judge is shown it
    (``agents.tool_views.reply_length``; schema version 3). A reply without calls is its text's length, as before."""
    return reply_length(candidate.output, candidate.tool_calls) if candidate.tool_calls else len(candidate.output)


def longer_candidate(pair: CandidatePair) -> RelativeWinner | None:
    first, second = (output_chars(c) for c in pair.candidates)
    if first == second:
        return None
    return "first" if first > second else "second"


def _inline_rubric(pair: CandidatePair, catalog: Mapping[str, InlineRubric] | None) -> InlineRubric | None:
    rubric = pair.rubric
    if isinstance(rubric, RubricRef):
        return (catalog or {}).get(rubric.name)
    return rubric


def decision_record(
    decision: Decision,
    pair: CandidatePair,
    series: AuditSeries,
    *,
    primary_orderings: Sequence[OrderingResult] | None = None,
    catalog: Mapping[str, InlineRubric] | None = None,
) -> DecisionRecord:
    """What the audit counts about one stage's decision on ``pair``.

    Position statistics (decisive orderings, position-A wins) come from the primary stage only: they
    describe the primary judge. ``judge_winner`` is the candidate the orderings decided on, even when
    the kappa guard held the pair for review.

    The per-dimension facts and the cited rules (``agents.audit.ambiguity``) are the primary judge's:
    from this decision's orderings at the primary stage, from ``primary_orderings`` (the tie-break request's
    primary orderings) at the tie-break stage, so the final record a label joins always carries them.
    """
    facts = decision.facts
    primary = decision.stage == "primary"
    orderings = _orderings(decision) if primary else ()
    decisive = [o for o in orderings if o.valid and o.raw_winner in ("A", "B")]
    judged_primary = orderings if primary_orderings is None else tuple(primary_orderings)
    candidates = (pair.candidates[0].candidate_id, pair.candidates[1].candidate_id)
    first, second = pair.candidates
    return DecisionRecord(
        pair_id=pair.pair_id,
        series=series,
        stage=decision.stage,
        outcome=facts.outcome,
        reason=facts.reason,
        auto_decided=facts.outcome == "verdict",
        candidates=candidates,
        judge_winner=facts.judged_winner,
        confidence=facts.judged_confidence,
        flip=facts.flip,
        both_valid=facts.consistent or facts.flip,
        calls=facts.calls,
        invalid_replies=facts.invalid_replies,
        decisive_orderings=len(decisive),
        position_a_wins=sum(1 for o in decisive if o.raw_winner == "A"),
        longer=longer_candidate(pair),
        model_mismatch=_model_mismatch(decision.calls),
        canary=pair.metadata.traffic == "canary",
        audit_sample=facts.audit_sample,
        inclusion_probability=facts.inclusion_probability,
        sampling_class=facts.sampling_class,
        known_label=pair.human_label.winner if pair.human_label is not None else None,
        rule=facts.decided_by == "rule",
        experiment=pair.metadata.experiment_id,
        traffic=pair.metadata.traffic,
        roles=(first.source.role, second.source.role),
        models=(first.source.model, second.source.model),
        chars=(output_chars(first), output_chars(second)),
        tool_calls=(len(first.tool_calls), len(second.tool_calls)) if pair.uses_tools else None,
        dimensions=dimension_facts(judged_primary, candidates),
        rules_cited=rules_cited(_inline_rubric(pair, catalog), judged_primary),
        escalated_from=facts.escalated_from if primary else (),
        cost_usd=facts.cost_usd,
        pair_cost_usd=facts.pair_cost_usd,
        confidence_source=facts.confidence_source,
        token_confidence=facts.token_confidence,
        stated_confidence=facts.stated_confidence,
    )
