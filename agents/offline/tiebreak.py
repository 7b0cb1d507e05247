"""Seed 002, the tie-break: weighted criteria, each forced to a side, escalating on a true tie."""

from __future__ import annotations

import math

from pairjudge.agents.offline.common import (
    CONF_MIN,
    HEURISTIC_PREFIX,
    PROSE_MAX,
    clip,
    content_tiebreak,
    fmt_terms,
    margin_confidence,
    unmeasured_cap,
)
from pairjudge.agents.offline.criteria import CriteriaContext, criteria_context_h2h, measure_criterion, robust_lead
from pairjudge.agents.offline.features import profile
from pairjudge.agents.offline.tone import ToneGuide
from pairjudge.agents.prompt_slots import PromptSlots
from pairjudge.schemas.replies import (
    CriterionAnalysis,
    Position,
    TieBreakReply,
)
from pairjudge.schemas.rubric import DEFAULT_TIEBREAK_WEIGHTS, HeadToHeadRubric, ToneStyleRubric

# --- seed 002: tie-break ----------------------------------------------------------------------


def _tiebreak_context(slots: PromptSlots) -> CriteriaContext:
    rubric = slots.rubric
    if isinstance(rubric, ToneStyleRubric):
        guide = ToneGuide.from_rubric(rubric)
        return CriteriaContext.build(
            instructions=slots.task_prompt,
            audience_text=rubric.audience,
            tone_text=rubric.style_guide,
            forbidden=guide.forbidden,
            required=guide.required,
            audience=guide.audience,
        )
    if isinstance(rubric, HeadToHeadRubric):
        return criteria_context_h2h(slots, rubric)
    return CriteriaContext.build(
        instructions=slots.task_prompt,
        audience_text=" ".join(x for x in (slots.task_prompt, slots.task_context or "") if x),
        tone_text=slots.task_prompt,
    )


def score_tiebreak(slots: PromptSlots) -> TieBreakReply:
    """Seed 002: every configured criterion gets a winner; weighted scores are the weights won.

    A criterion with no measured difference (or none measurable) is still forced to a side, as the
    seed's schema demands: it goes to the leader on the measured criteria, so it never flips the
    outcome, and confidence counts measured wins only. If nothing differs at all, or the weighted
    scores come out exactly equal, ``escalation_triggered`` is set: the seed says to escalate to
    humans rather than force an arbitrary choice.
    """
    weights = slots.tiebreak or DEFAULT_TIEBREAK_WEIGHTS
    ctx = _tiebreak_context(slots)
    pa, pb = profile(slots.output_a), profile(slots.output_b)
    measures = {
        c.name: measure_criterion(c.name, slots.output_a, slots.output_b, pa, pb, ctx) for c in weights.criteria
    }
    wt = {c.name: c.weight for c in weights.criteria}
    total = sum(wt.values())
    won_a = sum(wt[k] for k, m in measures.items() if m.evidence and m.winner == "A")
    won_b = sum(wt[k] for k, m in measures.items() if m.evidence and m.winner == "B")
    pull = sum(wt[k] * m.diff for k, m in measures.items() if m.evidence)
    any_difference = any(m.evidence and m.winner != "TIE" for m in measures.values())
    # A verdict may rest only on what was measured: the criteria it cannot measure, and differences of
    # length alone, must not be able to overturn the measured lead (``robust_lead``).
    lead, open_weight = robust_lead(measures, wt)
    no_signal = any_difference and abs(lead) <= open_weight

    leader: Position
    if not math.isclose(won_a, won_b, abs_tol=1e-9):
        leader, lead_how = ("A" if won_a > won_b else "B"), "more weight won on measured criteria"
    elif not math.isclose(pull, 0.0, abs_tol=1e-9):
        leader, lead_how = ("A" if pull > 0 else "B"), "larger weighted feature differences"
    else:
        leader = content_tiebreak(slots.output_a, slots.output_b)
        lead_how = "no measured difference; content hash, not position"

    analysis = []
    score = {"A": 0.0, "B": 0.0}
    for c in weights.criteria:
        m = measures[c.name]
        if m.winner in ("A", "B"):
            side: Position = "A" if m.winner == "A" else "B"
            rationale = m.explanation
        else:
            side = leader
            rationale = (
                m.explanation
                + f" Forced to {leader} (the overall leader: {lead_how}); this carries no evidence of its own."
            )
        score[side] += c.weight
        analysis.append(
            CriterionAnalysis(criterion=c.name, weight=c.weight, winner=side, rationale=clip(rationale, PROSE_MAX))
        )
    # Not rounded: summed in criteria order, exactly as a checker summing the analysis would.
    score_a, score_b = score["A"], score["B"]
    equal = math.isclose(score_a, score_b, abs_tol=1e-9)
    winner: Position = leader if equal else ("A" if score_a > score_b else "B")
    escalate = equal or not any_difference or no_signal

    unmeasured_weight = sum(wt[k] for k, m in measures.items() if not m.evidence)
    if escalate:
        confidence = CONF_MIN
    else:
        confidence = min(margin_confidence(abs(won_a - won_b) / total, 0.5), unmeasured_cap(unmeasured_weight / total))

    unmeasured = [k for k, m in measures.items() if not m.measured]
    length_only = [k for k, m in measures.items() if m.length_only and m.winner != "TIE"]
    parts = [
        HEURISTIC_PREFIX + "weighted criteria judged from measurable text features only, not meaning.",
        f"Measured wins by weight: A {won_a:g}, B {won_b:g} of {total:g}.",
    ]
    if unmeasured:
        parts.append(f"Not measurable: {fmt_terms(unmeasured, 6)}.")
    if length_only:
        parts.append(f"Only a length difference, not evidence: {fmt_terms(length_only, 6)}.")
    parts.append(f"Weighted scores A {score_a:g}, B {score_b:g}: {winner} wins.")
    if escalate:
        if equal:
            why = "the weighted scores are exactly equal."
        elif not any_difference:
            why = "no signal: no measurable criterion showed a difference beyond length."
        else:
            why = (
                f"no signal: the measured lead ({abs(lead):g}) is no larger than the weight it could not measure"
                f" or that differs only in length ({open_weight:g}), so the verdict would not rest on what was"
                " measured."
            )
        parts.append("Escalation triggered: " + why)
    return TieBreakReply(
        winner=winner,
        criteria_analysis=tuple(analysis),
        weighted_score_a=score_a,
        weighted_score_b=score_b,
        escalation_triggered=escalate,
        final_justification=clip(" ".join(parts), PROSE_MAX),
        confidence=confidence,
    )
