"""The offline judge's replies for named criteria: the decision over the measured criteria, its
justification, and the head-to-head (seed 001) and pairwise (seed 003) replies."""

from __future__ import annotations

from dataclasses import dataclass

from pairjudge.agents.errors import JudgeRejected
from pairjudge.agents.offline.common import (
    CONF_MIN,
    ERRATIC_CV,
    HEURISTIC_PREFIX,
    MAX_LIST,
    PHRASE_MAX,
    PROSE_MAX,
    TIE_MARGIN,
    clip,
    fmt_terms,
    margin_confidence,
    unmeasured_cap,
)
from pairjudge.agents.offline.criteria import (
    CriteriaContext,
    Measure,
    _adherence_checks,
    criteria_context_h2h,
    measure_criterion,
    robust_lead,
)
from pairjudge.agents.offline.features import Profile, profile
from pairjudge.agents.prompt_slots import PromptSlots
from pairjudge.schemas.replies import (
    CriterionWinner,
    HeadToHeadReply,
    PairwiseReply,
    PositionOrTie,
    TieDecision,
)
from pairjudge.schemas.rubric import HeadToHeadRubric, PairwiseRubric


@dataclass(frozen=True, slots=True)
class CriteriaOutcome:
    winner: PositionOrTie
    confidence: float
    margin: float
    measures: dict[str, Measure]
    unmeasured: tuple[str, ...]


def decide_criteria(measures: dict[str, Measure]) -> CriteriaOutcome:
    """Combine per-criterion measures (equal weight) into a winner and a capped confidence.

    TIE (the pair escalates) when the margin is small, and whenever the criteria that were not measured
    (or differ only in length) could outweigh the measured lead: the verdict may rest only on what the
    heuristic measured (``robust_lead``)."""
    n = max(1, len(measures))
    unmeasured = tuple(k for k, m in measures.items() if not m.evidence)
    margin = sum(m.diff for m in measures.values() if m.evidence) / n
    lead, open_weight = robust_lead(measures, dict.fromkeys(measures, 1.0))
    if abs(margin) < TIE_MARGIN or abs(lead) <= open_weight:
        return CriteriaOutcome("TIE", CONF_MIN, round(margin, 4), measures, unmeasured)
    winner: PositionOrTie = "A" if margin > 0 else "B"
    confidence = min(margin_confidence(abs(margin), 0.5), unmeasured_cap(len(unmeasured) / n))
    return CriteriaOutcome(winner, confidence, round(margin, 4), measures, unmeasured)


def _differentiators(outcome: CriteriaOutcome) -> list[str]:
    """Criteria that favoured the winner, biggest first (for a TIE, every measured difference)."""
    ranked = sorted(outcome.measures.items(), key=lambda kv: (-abs(kv[1].diff), kv[0]))
    out: list[str] = []
    for name, m in ranked:
        if m.winner == "TIE" or (outcome.winner != "TIE" and m.winner != outcome.winner):
            continue
        out.append(clip(f"{name}: {m.winner} better (A {m.a_note}; B {m.b_note})", PHRASE_MAX))
    return out[:MAX_LIST]


def _criteria_justification(outcome: CriteriaOutcome) -> str:
    # Verdict first, then the deciding criteria, then the ties: clipping to the schema's limit
    # drops only the least informative tail.
    verdict = "no clear winner (TIE)" if outcome.winner == "TIE" else f"{outcome.winner} preferred"
    parts = [
        HEURISTIC_PREFIX + "compared measurable text features only, not meaning or correctness.",
        f"Overall feature margin {outcome.margin:+.2f} (positive favours A): {verdict}.",
    ]
    if outcome.unmeasured:
        cap = unmeasured_cap(len(outcome.unmeasured) / max(1, len(outcome.measures)))
        parts.append(
            f"No signal on {fmt_terms(outcome.unmeasured, 6)}: not measurable from text features (or only"
            f" a length difference), so they cannot decide; "
            + (
                "they could outweigh the measured criteria, so this is a TIE for the tie-break and humans."
                if outcome.winner == "TIE"
                else f"confidence is capped at {cap:.2f}."
            )
        )
    ranked = sorted(outcome.measures.values(), key=lambda m: (m.winner == "TIE", -abs(m.diff)))
    parts.extend(m.explanation for m in ranked if m.measured)
    return clip(" ".join(parts), PROSE_MAX)


def score_head_to_head(slots: PromptSlots) -> HeadToHeadReply:
    rubric = slots.rubric
    if not isinstance(rubric, HeadToHeadRubric):
        raise JudgeRejected("head_to_head template needs a head_to_head rubric")
    ctx = criteria_context_h2h(slots, rubric)
    pa, pb = profile(slots.output_a), profile(slots.output_b)
    measures = {c.name: measure_criterion(c.name, slots.output_a, slots.output_b, pa, pb, ctx) for c in rubric.criteria}
    outcome = decide_criteria(measures)
    diffs = _differentiators(outcome) or [
        clip(
            "No measurable difference on "
            + ("any criterion" if not outcome.unmeasured else "the measurable criteria")
            + (f"; not measurable: {', '.join(outcome.unmeasured)}" if outcome.unmeasured else ""),
            PHRASE_MAX,
        )
    ]
    tie_decision = None
    if outcome.winner == "TIE":
        tie_decision = TieDecision(
            reason=clip(
                (
                    f"No signal: the heuristic cannot measure {fmt_terms(outcome.unmeasured, 6)} (or they differ"
                    " only in length), and they could outweigh the measured criteria."
                    if outcome.unmeasured
                    else f"Heuristic feature margin {outcome.margin:+.2f} is below {TIE_MARGIN}."
                ),
                PROSE_MAX,
            ),
            tie_breaker_applied="none: the heuristic judge does not guess; the pair escalates to the tie-break",
        )
    return HeadToHeadReply(
        preference=outcome.winner,
        confidence=outcome.confidence,
        justification=_criteria_justification(outcome),
        key_differentiators=tuple(diffs),
        criteria_breakdown={
            name: CriterionWinner(winner=m.winner, explanation=clip(m.explanation, PROSE_MAX))
            for name, m in measures.items()
        },
        tie_decision=tie_decision,
    )


# --- seed 003: pairwise with a criteria list --------------------------------------------------


def analyse(text: str, p: Profile, ctx: CriteriaContext) -> tuple[list[str], list[str]]:
    """Strengths and weaknesses of one output from its own features (seed 003 step 1)."""
    strengths: list[str] = []
    weaknesses: list[str] = []
    aud = ctx.audience
    if p.fk_grade <= aud.max_grade and p.flesch_reading_ease >= 50:
        strengths.append(
            f"readable for {aud.label} readers (Flesch {p.flesch_reading_ease:.0f}, grade {p.fk_grade:.1f})"
        )
    elif p.fk_grade > aud.max_grade + 2:
        weaknesses.append(
            f"hard to read for {aud.label} readers (grade {p.fk_grade:.1f}, Flesch {p.flesch_reading_ease:.0f})"
        )
    if p.numbers + p.proper_nouns >= 2:
        strengths.append(f"concrete: {p.numbers} number(s), {p.proper_nouns} name(s)")
    if p.imperatives + p.advice + p.numbered >= 1:
        strengths.append(f"actionable: {p.imperatives + p.advice + p.numbered} instruction(s)/step(s)")
    if p.second_person >= 2 or p.questions:
        strengths.append(f"addresses the reader ({p.second_person} 'you', {p.questions} question(s))")
    if p.register.warmth >= 0.3:
        strengths.append(f"warm register (warmth {p.register.warmth:.2f})")
    if p.sentence_count >= 3 and p.sentence_length_cv < 0.35:
        strengths.append(f"even sentence lengths (CV {p.sentence_length_cv:.2f})")
    if p.unsafe:
        weaknesses.append(f"unsafe markers {fmt_terms(p.unsafe)}")
    if p.rude:
        weaknesses.append(f"rude markers {fmt_terms(p.rude)}")
    if p.jargon and aud.jargon_tolerance < 1.0 and p.per100(p.jargon) >= 3:
        weaknesses.append(f"jargon-heavy ({p.jargon} term(s))")
    if p.slang:
        weaknesses.append(f"slang {fmt_terms(p.slang)}")
    if p.shouting:
        weaknesses.append(f"{p.shouting} all-caps word(s)")
    if p.hedges >= 3:
        weaknesses.append(f"hedging ({p.hedges} hedge(s))")
    if p.vague >= 3 and p.per100(p.vague) >= 5:
        weaknesses.append(f"vague wording ({p.vague} vague word(s))")
    if p.sentence_length_cv > ERRATIC_CV:
        weaknesses.append(f"erratic sentence lengths (CV {p.sentence_length_cv:.2f})")
    if p.drift >= 0.3:
        weaknesses.append(f"register drifts between halves ({p.drift:.2f})")
    for check, ok in _adherence_checks(text, p, ctx):
        (strengths if ok else weaknesses).append(check)
    return [clip(s, PHRASE_MAX) for s in strengths[:MAX_LIST]], [clip(w, PHRASE_MAX) for w in weaknesses[:MAX_LIST]]


def score_pairwise(slots: PromptSlots) -> PairwiseReply:
    rubric = slots.rubric
    if not isinstance(rubric, PairwiseRubric):
        raise JudgeRejected("pairwise template needs a pairwise rubric")
    ctx = CriteriaContext.build(
        instructions=slots.task_prompt,
        audience_text=" ".join(x for x in (slots.task_prompt, slots.task_context or "") if x),
        tone_text=slots.task_prompt,
    )
    pa, pb = profile(slots.output_a), profile(slots.output_b)
    measures = {name: measure_criterion(name, slots.output_a, slots.output_b, pa, pb, ctx) for name in rubric.criteria}
    outcome = decide_criteria(measures)
    sa, wa = analyse(slots.output_a, pa, ctx)
    sb, wb = analyse(slots.output_b, pb, ctx)
    comparison = [
        {
            "criterion": name,
            "aAssessment": clip(m.a_note, PROSE_MAX),
            "bAssessment": clip(m.b_note, PROSE_MAX),
            "winner": m.winner,
            "reasoning": clip(m.explanation, PROSE_MAX),
        }
        for name, m in measures.items()
    ]
    return PairwiseReply.model_validate(
        {
            "analysis": {
                "responseA": {"strengths": sa, "weaknesses": wa},
                "responseB": {"strengths": sb, "weaknesses": wb},
            },
            "comparison": comparison,
            "result": {
                "winner": outcome.winner,
                "confidence": outcome.confidence,
                "reasoning": _criteria_justification(outcome),
                "differentiators": _differentiators(outcome),
            },
        }
    )
