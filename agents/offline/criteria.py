"""Named criteria -> measurable feature families; seed 001 (head-to-head) and seed 003 (pairwise)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from pairjudge.agents.offline.common import (
    dedupe_terms,
    fmt_terms,
)
from pairjudge.agents.offline.features import Profile, clamp
from pairjudge.agents.offline.markers import count_term
from pairjudge.agents.offline.reading import (
    AudienceProfile,
    Limit,
    ToneTargets,
    asks_for_json,
    audience_profile,
    extract_forbidden_terms,
    extract_required_terms,
    parse_bullet_requirement,
    parse_sentence_limit,
    parse_word_limit,
    tone_targets,
)
from pairjudge.agents.offline.tone import tone_distance
from pairjudge.agents.prompt_slots import PromptSlots
from pairjudge.schemas.replies import (
    PositionOrTie,
)
from pairjudge.schemas.rubric import HeadToHeadRubric

# --- criteria: names -> measurable feature families -------------------------------------------

#: Criteria text features cannot judge. Checked first, so "factual correctness" is never "format".
_UNMEASURABLE_STEMS = (
    "accura",
    "fact",
    "correct",
    "truth",
    "halluc",
    "ground",
    "faithful",
    "helpful",
    "useful",
    "relevan",
    "complete",
    "comprehensiv",
    "reason",
    "logic",
    "insight",
    "creativ",
    "original",
    "depth",
    "coheren",
    "quality",
    "overall",
    "honest",
    "bias",
    "fair",
    "novel",
    "persuas",
    "organi",
    "structur",
)
_FAMILY_STEMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("safety", ("safe", "harm", "toxic", "risk")),
    ("adherence", ("instruction", "adheren", "follow", "format", "constraint", "complian", "requirement")),
    ("conciseness", ("concis", "brevity", "brief", "succinct", "length", "verbos", "wordiness", "terse")),
    ("readability", ("clar", "clear", "readab", "understandab", "plain", "simpl", "accessib", "jargon", "legib")),
    (
        "tone",
        (
            "tone",
            "polite",
            "courte",
            "empath",
            "warm",
            "friendl",
            "kind",
            "respect",
            "professional",
            "voice",
            "register",
            "style",
            "brand",
            "sentiment",
            "positiv",
        ),
    ),
    ("specificity", ("specific", "concrete", "detail", "precis", "exact")),
    ("actionability", ("action", "practical", "step", "guidance", "next")),
    ("engagement", ("engag", "interest", "interactiv", "conversational")),
    ("consistency", ("consisten", "uniform")),
)


def criterion_family(name: str) -> str | None:
    """Which measurable feature family a criterion name maps to, or ``None`` if text features
    cannot judge it. Matching is on word stems of the name ("Instruction_Adherence" -> adherence)."""
    tokens = name.lower().replace("_", " ").replace("-", " ").split()
    if any(t.startswith(s) for t in tokens for s in _UNMEASURABLE_STEMS):
        return None
    for family, stems in _FAMILY_STEMS:
        if any(t.startswith(s) for t in tokens for s in stems):
            return family
    return None


@dataclass(frozen=True, slots=True)
class CriteriaContext:
    """What the criteria are judged against, read once per request from prompt, rubric and context."""

    instructions: str
    audience: AudienceProfile
    targets: ToneTargets
    forbidden: tuple[str, ...]
    required: tuple[str, ...]
    word_limit: Limit | None
    sentence_limit: Limit | None
    bullets: Limit | None
    wants_json: bool

    @classmethod
    def build(
        cls,
        instructions: str,
        audience_text: str,
        tone_text: str,
        forbidden: Sequence[str] = (),
        required: Sequence[str] = (),
        audience: AudienceProfile | None = None,
    ) -> CriteriaContext:
        return cls(
            instructions=instructions,
            audience=audience or audience_profile(audience_text),
            targets=tone_targets(tone_text, audience_text),
            forbidden=dedupe_terms([*forbidden, *extract_forbidden_terms(instructions)]),
            required=dedupe_terms([*required, *extract_required_terms(instructions)]),
            word_limit=parse_word_limit(instructions),
            sentence_limit=parse_sentence_limit(instructions),
            bullets=parse_bullet_requirement(instructions),
            wants_json=asks_for_json(instructions),
        )


@dataclass(frozen=True, slots=True)
class Measure:
    """One criterion compared on both outputs. ``diff`` in [-1, 1]: positive favours A."""

    family: str | None
    measured: bool
    winner: PositionOrTie
    diff: float
    a_note: str
    b_note: str
    explanation: str
    #: The difference is only one of length (conciseness with no stated limit): never evidence enough
    #: for a verdict, since "shorter" is no better in general (issue 9: it picked the shorter output on
    #: helpfulness sets 98-100% of the time).
    length_only: bool = False

    @property
    def evidence(self) -> bool:
        """Measured, and more than a length difference: something a verdict may rest on."""
        return self.measured and not self.length_only


def robust_lead(measures: dict[str, Measure], weights: dict[str, float]) -> tuple[float, float]:
    """(lead of A over B on evidence, weight of criteria that are not evidence) in weight units.

    A verdict rests only on what was measured when the lead is larger than everything unmeasured (or
    length-only) could take back: even if all of those went to the other side, the leader would win.
    """
    lead = sum(
        weights[k] * (1 if m.winner == "A" else -1) for k, m in measures.items() if m.evidence and m.winner != "TIE"
    )
    open_weight = sum(weights[k] for k, m in measures.items() if not m.evidence)
    return lead, open_weight


def _compare(
    family: str, va: float, vb: float, tie_below: float, scale: float, a_note: str, b_note: str, what: str
) -> Measure:
    """Symmetric comparison of two feature values where higher is better."""
    delta = va - vb
    if abs(delta) < tie_below or math.isclose(va, vb, abs_tol=1e-9):
        return Measure(
            family, True, "TIE", 0.0, a_note, b_note, f"{what}: no meaningful difference (A {a_note}; B {b_note})."
        )
    winner: PositionOrTie = "A" if delta > 0 else "B"
    diff = clamp(delta / scale, -1.0, 1.0)
    return Measure(
        family, True, winner, round(diff, 4), a_note, b_note, f"{what}: {winner} better (A {a_note}; B {b_note})."
    )


def _unmeasured(name: str, why: str | None = None) -> Measure:
    note = why or f"'{name}' cannot be judged from text features (it needs understanding of content)"
    return Measure(
        None,
        False,
        "TIE",
        0.0,
        "not measurable by the heuristic judge",
        "not measurable by the heuristic judge",
        f"Not measured: {note}; called TIE so the pair escalates.",
    )


def _adherence_checks(text: str, p: Profile, ctx: CriteriaContext) -> list[tuple[str, bool]]:
    checks: list[tuple[str, bool]] = []
    if ctx.word_limit is not None:
        checks.append(
            (f"{p.word_count} words ({ctx.word_limit.describe('words')})", ctx.word_limit.allows(p.word_count))
        )
    if ctx.sentence_limit is not None:
        ok = ctx.sentence_limit.allows(p.sentence_count)
        checks.append((f"{p.sentence_count} sentences ({ctx.sentence_limit.describe('sentences')})", ok))
    if ctx.bullets is not None:
        checks.append((f"{p.bullets} list items ({ctx.bullets.describe('items')})", ctx.bullets.allows(p.bullets)))
    if ctx.wants_json:
        try:
            json.loads(text)
            checks.append(("valid JSON", True))
        except (ValueError, RecursionError):  # an output is untrusted: deep nesting is just "not valid"
            checks.append(("not valid JSON", False))
    for term in ctx.required:
        present = count_term(text, term) > 0
        checks.append((f"{'has' if present else 'lacks'} required '{term}'", present))
    for term in ctx.forbidden:
        used = count_term(text, term) > 0
        checks.append((f"{'uses' if used else 'avoids'} forbidden '{term}'", not used))
    return checks


def measure_criterion(name: str, text_a: str, text_b: str, pa: Profile, pb: Profile, ctx: CriteriaContext) -> Measure:
    """Compare both outputs on one named criterion, or say it cannot be measured."""
    family = criterion_family(name)
    if family is None:
        return _unmeasured(name)
    if family == "safety":
        ua, ub = len(pa.unsafe), len(pb.unsafe)
        note_a = f"unsafe markers {fmt_terms(pa.unsafe)}" if ua else "no unsafe markers"
        note_b = f"unsafe markers {fmt_terms(pb.unsafe)}" if ub else "no unsafe markers"
        return _compare(family, -ua, -ub, 0.5, 2.0, note_a, note_b, f"{name} (unsafe-marker list)")
    if family == "adherence":
        ca, cb = _adherence_checks(text_a, pa, ctx), _adherence_checks(text_b, pb, ctx)
        if not ca:
            return _unmeasured(
                name, "no checkable constraint (word/sentence/list limits, JSON, quoted terms) in the prompt"
            )
        sa = sum(ok for _, ok in ca) / len(ca)
        sb = sum(ok for _, ok in cb) / len(cb)
        note_a = f"{sum(ok for _, ok in ca)}/{len(ca)} checks: " + ", ".join(c for c, _ in ca)
        note_b = f"{sum(ok for _, ok in cb)}/{len(cb)} checks: " + ", ".join(c for c, _ in cb)
        return _compare(family, sa, sb, 1e-6, 1.0, note_a, note_b, f"{name} (checkable constraints)")
    if family == "conciseness":
        if ctx.word_limit is not None:
            oka, okb = ctx.word_limit.allows(pa.word_count), ctx.word_limit.allows(pb.word_count)
            if oka != okb:
                lim = ctx.word_limit.describe("words")
                return _compare(
                    family,
                    float(oka),
                    float(okb),
                    0.5,
                    1.0,
                    f"{pa.word_count} words ({lim})",
                    f"{pb.word_count} words ({lim})",
                    f"{name} (word limit)",
                )
        wa, wb = pa.word_count, pb.word_count
        # Shorter is better, relative to the longer one; fillers count as extra words.
        longest = max(wa, wb, 1)
        va = -(wa + 2 * pa.fillers) / longest
        vb = -(wb + 2 * pb.fillers) / longest
        tie = 0.1 if abs(wa - wb) >= 5 else 1.0
        measure = _compare(
            family,
            va,
            vb,
            tie,
            0.5,
            f"{wa} words, {pa.fillers} filler(s)",
            f"{wb} words, {pb.fillers} filler(s)",
            f"{name} (length)",
        )
        # With no stated limit, a shorter answer is not a better one by itself: shown, not decisive.
        return dataclasses.replace(
            measure,
            length_only=True,
            explanation=measure.explanation + " Length alone (no limit was stated), so it cannot decide the pair.",
        )
    if family == "readability":
        aud = ctx.audience

        def read_value(p: Profile) -> float:
            jargon = (1.0 - aud.jargon_tolerance) * min(3.0, p.per100(p.jargon) * 0.3)
            return p.flesch_reading_ease / 10.0 - max(0.0, p.fk_grade - aud.max_grade) - jargon

        def read_note(p: Profile) -> str:
            return f"Flesch {p.flesch_reading_ease:.0f}, grade {p.fk_grade:.1f}, jargon {p.jargon}"

        return _compare(
            family,
            read_value(pa),
            read_value(pb),
            0.5,
            4.0,
            read_note(pa),
            read_note(pb),
            f"{name} (readability for {aud.label} readers)",
        )
    if family == "tone":
        t = ctx.targets
        has_targets = any(v is not None for v in (t.formality, t.warmth, t.energy, t.authority))

        def tone_value(p: Profile) -> float:
            rude = 1.0 * bool(p.rude)
            if has_targets:
                return -tone_distance(p.register, t)[0] - rude
            # No stated voice: courtesy. Warmth up, shouting and rudeness down.
            return p.register.warmth - 0.5 * min(1.0, p.per100(p.shouting) / 2) - rude

        def tone_note(p: Profile) -> str:
            r = p.register
            note = f"formality {r.formality:.2f}, warmth {r.warmth:.2f}"
            return note + (f", rude {fmt_terms(p.rude)}" if p.rude else "")

        what = f"{name} (register vs cues {', '.join(t.cues)})" if has_targets else f"{name} (warmth/courtesy)"
        return _compare(family, tone_value(pa), tone_value(pb), 0.1, 0.6, tone_note(pa), tone_note(pb), what)
    if family == "specificity":

        def spec(p: Profile) -> float:
            return p.per100(p.numbers + p.proper_nouns) - 0.5 * p.per100(p.vague)

        return _compare(
            family,
            spec(pa),
            spec(pb),
            1.5,
            8.0,
            f"{pa.numbers} numbers, {pa.proper_nouns} names, {pa.vague} vague words",
            f"{pb.numbers} numbers, {pb.proper_nouns} names, {pb.vague} vague words",
            f"{name} (concrete details per 100 words)",
        )
    if family == "actionability":

        def act(p: Profile) -> float:
            return (p.imperatives + p.advice + p.numbered) / max(1, p.sentence_count)

        return _compare(
            family,
            act(pa),
            act(pb),
            0.15,
            0.6,
            f"{pa.imperatives} imperative(s), {pa.advice} advice phrase(s), {pa.numbered} numbered step(s)",
            f"{pb.imperatives} imperative(s), {pb.advice} advice phrase(s), {pb.numbered} numbered step(s)",
            f"{name} (instructions per sentence)",
        )
    if family == "engagement":

        def eng(p: Profile) -> float:
            n = max(1, p.sentence_count)
            return (
                0.5 * min(1.0, 2 * p.questions / n)
                + 0.4 * min(1.0, p.per100(p.second_person) / 5)
                + 0.1 * min(1.0, 2 * p.exclamations / n)
            )

        return _compare(
            family,
            eng(pa),
            eng(pb),
            0.1,
            0.5,
            f"{pa.questions} question(s), {pa.second_person} 'you'",
            f"{pb.questions} question(s), {pb.second_person} 'you'",
            f"{name} (reader address)",
        )

    # consistency
    def cons(p: Profile) -> float:
        return -max(0.0, p.sentence_length_cv - 0.4) - p.drift

    return _compare(
        family,
        cons(pa),
        cons(pb),
        0.1,
        0.6,
        f"sentence-length CV {pa.sentence_length_cv:.2f}, drift {pa.drift:.2f}",
        f"sentence-length CV {pb.sentence_length_cv:.2f}, drift {pb.drift:.2f}",
        f"{name} (consistency)",
    )


def criteria_context_h2h(slots: PromptSlots, rubric: HeadToHeadRubric) -> CriteriaContext:
    descriptions = " ".join(c.description for c in rubric.criteria)
    instructions = "\n".join(x for x in (slots.task_prompt, rubric.constraints) if x)
    return CriteriaContext.build(
        instructions=instructions,
        audience_text=" ".join(x for x in (slots.task_prompt, rubric.constraints, slots.task_context or "") if x),
        tone_text=" ".join(x for x in (rubric.constraints, descriptions) if x),
    )
