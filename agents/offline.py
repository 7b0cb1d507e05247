"""The deterministic offline judge: the embedded default, scoring from measurable text features.

It answers every template (tone_style, head_to_head, pairwise, tiebreak) with JSON that matches the
template's reply model, so its replies go through the same strict validation as any LLM judge's.
Its scores come from ``agents.textfeatures`` (word lists, readability formulas, regex markers), not
from understanding, and every reply says so.

Two properties matter more than the scores themselves:

* **Position independence.** Each output is measured on its own and every comparison is symmetric,
  so swapping ``output_a``/``output_b`` mirrors the answer. Where nothing distinguishes the two, the
  forced choice comes from the texts' content (their SHA-256), never from their positions.
* **Honest confidence.** Confidence grows with the measured margin and is capped where criteria
  cannot be measured ("accuracy", "helpfulness"), so close or unmeasurable pairs escalate to the
  tie-break and to humans instead of getting a confident guess.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from agents import textfeatures as tf
from agents.errors import JudgeRejected
from agents.judge import JudgeIdentity, JudgeRequest, JudgeResponse, PromptSlots
from schemas.replies import (
    TONE_WEIGHTS,
    CriterionAnalysis,
    CriterionWinner,
    HeadToHeadReply,
    PairwiseReply,
    Phrase,
    Position,
    PositionOrTie,
    Prose,
    Reply,
    TieBreakReply,
    TieDecision,
    ToneStyleReply,
)
from schemas.rubric import DEFAULT_TIEBREAK_WEIGHTS, HeadToHeadRubric, PairwiseRubric, ToneStyleRubric

#: Bump whenever scoring changes: a new judge version opens a new drift series (DESIGN §3).
OFFLINE_JUDGE_VERSION = "heuristic-2"
OFFLINE_MODEL = "pairjudge-heuristic"
HEURISTIC_PREFIX = "Heuristic offline judge: "
OFFLINE_IDENTITY = JudgeIdentity(
    provider="offline", model=OFFLINE_MODEL, version=OFFLINE_JUDGE_VERSION, temperature=0.0, heuristic=True
)


def _max_length(annotated: object, default: int) -> int:
    """The ``max_length`` declared on a constrained string type in ``schemas.replies``.

    Read from the schema rather than copied, so a tightened limit there (for small constrained
    decoders) cannot make this judge emit replies that fail validation.
    """
    for field_info in getattr(annotated, "__metadata__", ()):
        for constraint in getattr(field_info, "metadata", ()):
            limit = getattr(constraint, "max_length", None)
            if isinstance(limit, int):
                return limit
    return default


PROSE_MAX = _max_length(Prose, 1_000)
PHRASE_MAX = _max_length(Phrase, 300)
MAX_LIST = 8

#: Confidence never leaves this band: 0.5 means "could not tell", 0.95 "clear on every measure".
CONF_MIN, CONF_MAX = 0.5, 0.95
#: Head-to-head/pairwise: an overall feature margin below this is a TIE.
TIE_MARGIN = 0.05
#: Sentence-length coefficient of variation above which rhythm is erratic rather than varied.
ERRATIC_CV = 0.8
#: Register drift this small can come from one saturated marker (a sign-off emoji, one contraction) in a
#: half of about 15 words, after ``textfeatures.register_drift``'s shrinkage: noise, not a change of voice.
DRIFT_NOISE = 0.25
#: The floor of the unmeasurable cap: with half or more of the criteria unmeasurable, confidence is at most this.
UNMEASURABLE_CAP = 0.55


class OfflineJudge:
    """The embedded, deterministic, heuristic judge. Safe to call concurrently (it keeps no state)."""

    @property
    def identity(self) -> JudgeIdentity:
        return OFFLINE_IDENTITY

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        reply = judge_reply(request)
        text = reply.model_dump_json(by_alias=True)
        prompt_chars = sum(len(m.content) for m in request.messages)
        return JudgeResponse(
            text=text,
            model=OFFLINE_MODEL,
            input_tokens=prompt_chars // 4,
            output_tokens=len(text) // 4,
            latency_s=0.0,
        )


def judge_reply(request: JudgeRequest) -> Reply:
    """The validated reply model for one request. Raises ``JudgeRejected`` if the request's rubric
    does not fit its template (a caller bug: re-asking the same deterministic judge cannot help)."""
    slots = request.slots
    try:
        if request.template == "tone_style":
            return score_tone_style(slots)
        if request.template == "head_to_head":
            return score_head_to_head(slots)
        if request.template == "pairwise":
            return score_pairwise(slots)
        if request.template == "tiebreak":
            return score_tiebreak(slots)
    except ValidationError as exc:  # our own bug; never hand out an unvalidated reply
        raise JudgeRejected(f"offline judge built an invalid {request.template} reply: {exc}") from exc
    raise JudgeRejected(f"offline judge has no template {request.template!r}")


# --- small shared helpers ---------------------------------------------------------------------


def clip(text: str, limit: int) -> str:
    """Shorten to ``limit`` characters at a word boundary, marking the cut; never returns ''."""
    text = " ".join(text.split()) or "-"
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,;:") + "…"


def content_tiebreak(text_a: str, text_b: str) -> Position:
    """A forced choice that depends only on the two texts, never on their positions: the output whose
    SHA-256 is smaller. Identical texts give "A" (both orders then name the same *text*, so the
    pair still flips between candidates and escalates)."""
    ha = hashlib.sha256(text_a.encode("utf-8")).hexdigest()
    hb = hashlib.sha256(text_b.encode("utf-8")).hexdigest()
    return "B" if hb < ha else "A"


def margin_confidence(margin: float, full: float) -> float:
    """Map a non-negative margin to [0.5, 0.95]: 0 -> 0.5, ``full`` or more -> 0.95."""
    if full <= 0 or margin <= 0:
        return CONF_MIN
    return round(CONF_MIN + (CONF_MAX - CONF_MIN) * min(1.0, margin / full), 3)


def unmeasured_cap(unmeasured_share: float) -> float:
    """The highest confidence allowed when ``unmeasured_share`` of the criteria (by count or weight)
    could not be measured: 0.95 with none, 0.725 with one in four, 0.65 with one in three (below the
    0.7 verdict threshold, so the pair escalates), and 0.55 from just under half upwards."""
    return round(max(UNMEASURABLE_CAP, CONF_MAX - 0.9 * unmeasured_share), 3)


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


def _score(x: float) -> int:
    return max(1, min(5, _round_half_up(x)))


def _other(p: Position) -> Position:
    return "B" if p == "A" else "A"


def _fmt_terms(terms: Sequence[str], limit: int = 4) -> str:
    shown = ", ".join(f"'{t}'" for t in list(terms)[:limit])
    return shown + (f" (+{len(terms) - limit} more)" if len(terms) > limit else "")


def _dedupe(terms: Sequence[str]) -> tuple[str, ...]:
    seen: set[str] = set()
    out: list[str] = []
    for t in terms:
        key = " ".join(t.lower().split())
        if key and key not in seen:
            seen.add(key)
            out.append(t.strip())
    return tuple(out)


def _used_terms(text: str, terms: Sequence[str]) -> list[str]:
    return [t for t in terms if tf.count_term(text, t) > 0]


def _missing_terms(text: str, terms: Sequence[str]) -> list[str]:
    return [t for t in terms if tf.count_term(text, t) == 0]


# --- seed 000: tone and style -----------------------------------------------------------------

_AXIS_WEIGHTS = {"formality": 1.0, "warmth": 0.8, "energy": 0.6, "authority": 0.5}
#: With no tone cue at all, both outputs are measured against a neutral, plainly professional voice.
_DEFAULT_TARGETS = {"formality": 0.3, "warmth": 0.1}


@dataclass(frozen=True, slots=True)
class ToneGuide:
    """What the offline judge reads out of a tone/style rubric, once per request."""

    targets: tf.ToneTargets
    rules: tf.StyleRules
    audience: tf.AudienceProfile
    forbidden: tuple[str, ...]
    required: tuple[str, ...]

    @classmethod
    def from_rubric(cls, rubric: ToneStyleRubric) -> ToneGuide:
        rules = tf.style_rules(rubric.style_guide)
        audience = tf.audience_profile(rubric.audience)
        guide_low = rubric.style_guide.lower()
        if rules.jargon_allowed is False or "plain language" in guide_low or "plain english" in guide_low:
            # The guide itself asks for plain words, whatever the audience.
            audience = tf.AudienceProfile(
                audience.label + " (plain language)", min(audience.max_grade, 9.0), 0.0, audience.concise
            )
        return cls(
            targets=tf.tone_targets(rubric.style_guide, rubric.audience),
            rules=rules,
            audience=audience,
            forbidden=_dedupe([*rubric.forbidden_terms, *tf.extract_forbidden_terms(rubric.style_guide)]),
            required=_dedupe([*rubric.required_terms, *tf.extract_required_terms(rubric.style_guide)]),
        )


def tone_distance(reg: tf.Register, targets: tf.ToneTargets) -> tuple[float, list[str]]:
    """Weighted mean distance between a text's register and the targets, plus evidence strings."""
    wanted = {
        "formality": targets.formality,
        "warmth": targets.warmth,
        "energy": targets.energy,
        "authority": targets.authority,
    }
    present = {k: v for k, v in wanted.items() if v is not None}
    weights = dict(_AXIS_WEIGHTS)
    if not present:
        present = dict(_DEFAULT_TARGETS)
        weights = {k: 0.5 for k in present}
    total = sum(weights[k] for k in present)
    dist = sum(weights[k] * abs(getattr(reg, k) - v) for k, v in present.items()) / total
    evidence = [f"{k} {getattr(reg, k):.2f} (target {v:.2f})" for k, v in present.items()]
    return dist, evidence


@dataclass(frozen=True, slots=True)
class DimensionScore:
    value: float  # continuous, 1..5
    evidence: str

    @property
    def score(self) -> int:
        return _score(self.value)


def score_tone_dimensions(text: str, p: tf.Profile, guide: ToneGuide) -> dict[str, DimensionScore]:
    """The four seed-000 dimensions for one output, each from its own features only."""
    # Tone match: distance of the measured register from the guide's targets; rudeness always costs.
    dist, axes = tone_distance(p.register, guide.targets)
    tone = 5.0 - 4.0 * min(1.0, dist / 0.9) - min(1.5, 0.75 * len(p.rude))
    tone_ev = ", ".join(axes) + (f"; rude markers {_fmt_terms(p.rude)}" if p.rude else "")
    if p.slang:
        tone_ev += f"; slang {_fmt_terms(p.slang)}"

    # Audience suitability: reading grade above the audience's ceiling, and jargon it won't know.
    aud = guide.audience
    grade_excess = max(0.0, p.fk_grade - aud.max_grade)
    jargon_pen = (1.0 - aud.jargon_tolerance) * min(2.5, p.per100(p.jargon) * 0.4)
    audience = 5.0 - min(3.0, 0.6 * grade_excess) - jargon_pen
    if aud.concise and (p.mean_sentence_words > 25 or p.word_count > 250):
        audience -= 0.5
    aud_ev = (
        f"FK grade {p.fk_grade:.1f} vs ceiling {aud.max_grade:.0f} (audience: {aud.label}), "
        f"Flesch {p.flesch_reading_ease:.0f}, jargon {p.jargon}"
    )

    # Stylistic consistency: a register that drifts between halves, and erratic sentence lengths. Seed
    # 000 asks about a consistent *voice*; varied sentence length is ordinary good prose (CV 0.4-0.7),
    # so only erratic rhythm (CV above 0.8, the same line ``analyse`` uses) costs anything, and drift
    # within the noise of a single marker in a short half (DRIFT_NOISE) is not evidence of a new voice.
    consistency = 5.0 - 2.5 * max(0.0, p.sentence_length_cv - ERRATIC_CV) - 4.0 * max(0.0, p.drift - DRIFT_NOISE)
    cons_ev = f"sentence-length CV {p.sentence_length_cv:.2f}, register drift {p.drift:.2f}"

    # Guideline adherence: forbidden/required terms and the guide's mechanical rules.
    penalties: list[tuple[float, str]] = []
    used = _used_terms(text, guide.forbidden)
    if used:
        penalties.append((1.5 * len(used), f"forbidden {_fmt_terms(used)}"))
    missing = _missing_terms(text, guide.required)
    if missing:
        penalties.append((1.0 * len(missing), f"missing required {_fmt_terms(missing)}"))
    r = guide.rules
    if r.emoji_allowed is False and p.emoji:
        penalties.append((1.0, f"{p.emoji} emoji"))
    elif r.max_emoji is not None and p.emoji > r.max_emoji:
        penalties.append((1.0, f"{p.emoji} emoji, guide allows at most {r.max_emoji}"))
    if r.exclamations_allowed is False and p.exclamations:
        penalties.append((1.0, f"{p.exclamations} exclamation mark(s)"))
    elif r.max_exclamations is not None and p.exclamations > r.max_exclamations:
        penalties.append((1.0, f"{p.exclamations} exclamation marks, guide allows at most {r.max_exclamations}"))
    if r.contractions is False and p.contractions:
        penalties.append((0.75, f"{p.contractions} contraction(s)"))
    if r.contractions is True and not p.contractions and p.word_count > 30:
        penalties.append((0.5, "no contractions"))
    if r.jargon_allowed is False and p.jargon:
        penalties.append((min(1.5, 0.5 * p.jargon), f"{p.jargon} jargon term(s)"))
    if r.caps_allowed is False and p.shouting:
        penalties.append((1.0, f"{p.shouting} all-caps word(s)"))
    if r.slang_allowed is False and p.slang:
        penalties.append((1.0, f"slang {_fmt_terms(p.slang)}"))
    if r.active_voice and p.passives:
        penalties.append((0.5 * min(2, p.passives), f"{p.passives} passive construction(s)"))
    if r.second_person and not p.second_person:
        penalties.append((0.5, "never addresses the reader as 'you'"))
    if r.word_limit is not None and not r.word_limit.allows(p.word_count):
        penalties.append((1.5, f"{p.word_count} words, guide wants {r.word_limit.describe('words')}"))
    if r.concise and (p.mean_sentence_words > 25 or p.per100(p.fillers) > 3):
        penalties.append((0.5, f"not concise ({p.mean_sentence_words:.0f} words/sentence, {p.fillers} filler(s))"))
    adherence = 5.0 - sum(pen for pen, _ in penalties)
    adh_ev = "; ".join(msg for _, msg in penalties) or "no rule violations found"

    return {
        "tone_match": DimensionScore(tf.clamp(tone, 1.0, 5.0), tone_ev),
        "audience_suitability": DimensionScore(tf.clamp(audience, 1.0, 5.0), aud_ev),
        "stylistic_consistency": DimensionScore(tf.clamp(consistency, 1.0, 5.0), cons_ev),
        "guideline_adherence": DimensionScore(tf.clamp(adherence, 1.0, 5.0), adh_ev),
    }


def _weighted_tenths(scores: dict[str, int]) -> int:
    """Seed 000's weighted total in integer tenths (4/3/2/1), so equality is exact."""
    return sum(_round_half_up(TONE_WEIGHTS[d] * 10) * s for d, s in scores.items())


def score_tone_style(slots: PromptSlots) -> ToneStyleReply:
    rubric = slots.rubric
    if not isinstance(rubric, ToneStyleRubric):
        raise JudgeRejected("tone_style template needs a tone_style rubric")
    guide = ToneGuide.from_rubric(rubric)
    pa, pb = tf.profile(slots.output_a), tf.profile(slots.output_b)
    da = score_tone_dimensions(slots.output_a, pa, guide)
    db = score_tone_dimensions(slots.output_b, pb, guide)
    ia = {k: v.score for k, v in da.items()}
    ib = {k: v.score for k, v in db.items()}
    ta, tb = _weighted_tenths(ia), _weighted_tenths(ib)

    # Seed 000 forbids a tie. Break exact ties on the weighted total by tone_match, then guideline
    # adherence, then the unrounded scores, and only then by content (confidence stays 0.5).
    how: str
    winner: Position
    cont_a = sum(TONE_WEIGHTS[k] * v.value for k, v in da.items())
    cont_b = sum(TONE_WEIGHTS[k] * v.value for k, v in db.items())
    if ta != tb:
        winner, how = ("A" if ta > tb else "B"), "higher weighted total"
    elif ia["tone_match"] != ib["tone_match"]:
        winner, how = ("A" if ia["tone_match"] > ib["tone_match"] else "B"), "equal totals, broken by tone_match"
    elif ia["guideline_adherence"] != ib["guideline_adherence"]:
        winner = "A" if ia["guideline_adherence"] > ib["guideline_adherence"] else "B"
        how = "equal totals and tone_match, broken by guideline_adherence"
    elif round(cont_a, 6) != round(cont_b, 6):
        winner, how = ("A" if cont_a > cont_b else "B"), "equal integer scores, broken by unrounded feature scores"
    else:
        winner = content_tiebreak(slots.output_a, slots.output_b)
        how = "indistinguishable by every feature; forced choice by content hash, not by position"
    confidence = margin_confidence(abs(ta - tb) / 10.0, 1.2)

    loser = _other(winner)
    dw, dl = (da, db) if winner == "A" else (db, da)
    gaps = sorted(
        ((TONE_WEIGHTS[k] * (dw[k].score - dl[k].score), k) for k in TONE_WEIGHTS),
        key=lambda g: (-g[0], list(TONE_WEIGHTS).index(g[1])),
    )
    top_gap, top_dim = gaps[0]
    if top_gap > 0:
        key_diff = (
            f"{top_dim}: {winner} {dw[top_dim].score} vs {loser} {dl[top_dim].score} "
            f"({winner}: {dw[top_dim].evidence}; {loser}: {dl[top_dim].evidence})"
        )
    else:
        key_diff = f"No dimension score differed; {how}."

    # Most important first: the reply schema caps this text, and clipping drops only the tail.
    cues = ", ".join(guide.targets.cues) or "none (neutral professional voice assumed)"
    parts = [
        HEURISTIC_PREFIX + "scores come from measured text features (word lists, readability formulas, "
        "regex markers), not from reading for meaning.",
        f"Weighted totals A {ta / 10:.1f}, B {tb / 10:.1f}: {winner} wins ({how}).",
        f"Guide cues: {cues}; audience read as {guide.audience.label}"
        + (f"; forbidden terms checked: {_fmt_terms(guide.forbidden)}" if guide.forbidden else "")
        + ".",
    ]
    for k in sorted(TONE_WEIGHTS, key=lambda d: -TONE_WEIGHTS[d] * abs(ia[d] - ib[d])):
        if ia[k] != ib[k]:
            parts.append(f"{k} A {ia[k]} vs B {ib[k]}: A {da[k].evidence}; B {db[k].evidence}.")
    same = [k for k in TONE_WEIGHTS if ia[k] == ib[k]]
    if same:
        parts.append("Equal on " + ", ".join(f"{k} ({ia[k]})" for k in same) + ".")
    return ToneStyleReply.model_validate(
        {
            "winner": winner,
            "confidence": confidence,
            "justification": clip(" ".join(parts), PROSE_MAX),
            "dimension_scores": {k: {"A": ia[k], "B": ib[k]} for k in TONE_WEIGHTS},
            "key_differentiator": clip(key_diff, PHRASE_MAX),
        }
    )


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
    audience: tf.AudienceProfile
    targets: tf.ToneTargets
    forbidden: tuple[str, ...]
    required: tuple[str, ...]
    word_limit: tf.Limit | None
    sentence_limit: tf.Limit | None
    bullets: tf.Limit | None
    wants_json: bool

    @classmethod
    def build(
        cls,
        instructions: str,
        audience_text: str,
        tone_text: str,
        forbidden: Sequence[str] = (),
        required: Sequence[str] = (),
        audience: tf.AudienceProfile | None = None,
    ) -> CriteriaContext:
        return cls(
            instructions=instructions,
            audience=audience or tf.audience_profile(audience_text),
            targets=tf.tone_targets(tone_text, audience_text),
            forbidden=_dedupe([*forbidden, *tf.extract_forbidden_terms(instructions)]),
            required=_dedupe([*required, *tf.extract_required_terms(instructions)]),
            word_limit=tf.parse_word_limit(instructions),
            sentence_limit=tf.parse_sentence_limit(instructions),
            bullets=tf.parse_bullet_requirement(instructions),
            wants_json=tf.asks_for_json(instructions),
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
    diff = tf.clamp(delta / scale, -1.0, 1.0)
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


def _adherence_checks(text: str, p: tf.Profile, ctx: CriteriaContext) -> list[tuple[str, bool]]:
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
        present = tf.count_term(text, term) > 0
        checks.append((f"{'has' if present else 'lacks'} required '{term}'", present))
    for term in ctx.forbidden:
        used = tf.count_term(text, term) > 0
        checks.append((f"{'uses' if used else 'avoids'} forbidden '{term}'", not used))
    return checks


def measure_criterion(
    name: str, text_a: str, text_b: str, pa: tf.Profile, pb: tf.Profile, ctx: CriteriaContext
) -> Measure:
    """Compare both outputs on one named criterion, or say it cannot be measured."""
    family = criterion_family(name)
    if family is None:
        return _unmeasured(name)
    if family == "safety":
        ua, ub = len(pa.unsafe), len(pb.unsafe)
        note_a = f"unsafe markers {_fmt_terms(pa.unsafe)}" if ua else "no unsafe markers"
        note_b = f"unsafe markers {_fmt_terms(pb.unsafe)}" if ub else "no unsafe markers"
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
        return _compare(
            family,
            va,
            vb,
            tie,
            0.5,
            f"{wa} words, {pa.fillers} filler(s)",
            f"{wb} words, {pb.fillers} filler(s)",
            f"{name} (length)",
        )
    if family == "readability":
        aud = ctx.audience

        def read_value(p: tf.Profile) -> float:
            jargon = (1.0 - aud.jargon_tolerance) * min(3.0, p.per100(p.jargon) * 0.3)
            return p.flesch_reading_ease / 10.0 - max(0.0, p.fk_grade - aud.max_grade) - jargon

        def read_note(p: tf.Profile) -> str:
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

        def tone_value(p: tf.Profile) -> float:
            rude = 1.0 * bool(p.rude)
            if has_targets:
                return -tone_distance(p.register, t)[0] - rude
            # No stated voice: courtesy. Warmth up, shouting and rudeness down.
            return p.register.warmth - 0.5 * min(1.0, p.per100(p.shouting) / 2) - rude

        def tone_note(p: tf.Profile) -> str:
            r = p.register
            note = f"formality {r.formality:.2f}, warmth {r.warmth:.2f}"
            return note + (f", rude {_fmt_terms(p.rude)}" if p.rude else "")

        what = f"{name} (register vs cues {', '.join(t.cues)})" if has_targets else f"{name} (warmth/courtesy)"
        return _compare(family, tone_value(pa), tone_value(pb), 0.1, 0.6, tone_note(pa), tone_note(pb), what)
    if family == "specificity":

        def spec(p: tf.Profile) -> float:
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

        def act(p: tf.Profile) -> float:
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

        def eng(p: tf.Profile) -> float:
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
    def cons(p: tf.Profile) -> float:
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


@dataclass(frozen=True, slots=True)
class CriteriaOutcome:
    winner: PositionOrTie
    confidence: float
    margin: float
    measures: dict[str, Measure]
    unmeasured: tuple[str, ...]


def decide_criteria(measures: dict[str, Measure]) -> CriteriaOutcome:
    """Combine per-criterion measures (equal weight) into a winner and a capped confidence."""
    n = max(1, len(measures))
    margin = sum(m.diff for m in measures.values()) / n
    unmeasured = tuple(k for k, m in measures.items() if not m.measured)
    if abs(margin) < TIE_MARGIN:
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
            f"Could not measure {_fmt_terms(outcome.unmeasured, 6)} from text features: called TIE, and "
            f"confidence is capped at {cap:.2f} so the pair escalates."
        )
    ranked = sorted(outcome.measures.values(), key=lambda m: (m.winner == "TIE", -abs(m.diff)))
    parts.extend(m.explanation for m in ranked if m.measured)
    return clip(" ".join(parts), PROSE_MAX)


def _criteria_context_h2h(slots: PromptSlots, rubric: HeadToHeadRubric) -> CriteriaContext:
    descriptions = " ".join(c.description for c in rubric.criteria)
    instructions = "\n".join(x for x in (slots.task_prompt, rubric.constraints) if x)
    return CriteriaContext.build(
        instructions=instructions,
        audience_text=" ".join(x for x in (slots.task_prompt, rubric.constraints, slots.task_context or "") if x),
        tone_text=" ".join(x for x in (rubric.constraints, descriptions) if x),
    )


def score_head_to_head(slots: PromptSlots) -> HeadToHeadReply:
    rubric = slots.rubric
    if not isinstance(rubric, HeadToHeadRubric):
        raise JudgeRejected("head_to_head template needs a head_to_head rubric")
    ctx = _criteria_context_h2h(slots, rubric)
    pa, pb = tf.profile(slots.output_a), tf.profile(slots.output_b)
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
                f"Heuristic feature margin {outcome.margin:+.2f} is below {TIE_MARGIN}"
                + (f"; {len(outcome.unmeasured)} criteria not measurable" if outcome.unmeasured else "")
                + ".",
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


def analyse(text: str, p: tf.Profile, ctx: CriteriaContext) -> tuple[list[str], list[str]]:
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
        weaknesses.append(f"unsafe markers {_fmt_terms(p.unsafe)}")
    if p.rude:
        weaknesses.append(f"rude markers {_fmt_terms(p.rude)}")
    if p.jargon and aud.jargon_tolerance < 1.0 and p.per100(p.jargon) >= 3:
        weaknesses.append(f"jargon-heavy ({p.jargon} term(s))")
    if p.slang:
        weaknesses.append(f"slang {_fmt_terms(p.slang)}")
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
    pa, pb = tf.profile(slots.output_a), tf.profile(slots.output_b)
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
        return _criteria_context_h2h(slots, rubric)
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
    pa, pb = tf.profile(slots.output_a), tf.profile(slots.output_b)
    measures = {
        c.name: measure_criterion(c.name, slots.output_a, slots.output_b, pa, pb, ctx) for c in weights.criteria
    }
    wt = {c.name: c.weight for c in weights.criteria}
    total = sum(wt.values())
    won_a = sum(wt[k] for k, m in measures.items() if m.winner == "A")
    won_b = sum(wt[k] for k, m in measures.items() if m.winner == "B")
    pull = sum(wt[k] * m.diff for k, m in measures.items())
    any_difference = any(m.winner != "TIE" for m in measures.values())

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
    escalate = equal or not any_difference

    unmeasured_weight = sum(wt[k] for k, m in measures.items() if not m.measured)
    if escalate:
        confidence = CONF_MIN
    else:
        confidence = min(margin_confidence(abs(won_a - won_b) / total, 0.5), unmeasured_cap(unmeasured_weight / total))

    unmeasured = [k for k, m in measures.items() if not m.measured]
    parts = [
        HEURISTIC_PREFIX + "weighted criteria judged from measurable text features only, not meaning.",
        f"Measured wins by weight: A {won_a:g}, B {won_b:g} of {total:g}.",
    ]
    if unmeasured:
        parts.append(f"Not measurable: {_fmt_terms(unmeasured, 6)}.")
    parts.append(f"Weighted scores A {score_a:g}, B {score_b:g}: {winner} wins.")
    if escalate:
        parts.append(
            "Escalation triggered: "
            + ("the weighted scores are exactly equal." if equal else "no criterion showed a measurable difference.")
        )
    return TieBreakReply(
        winner=winner,
        criteria_analysis=tuple(analysis),
        weighted_score_a=score_a,
        weighted_score_b=score_b,
        escalation_triggered=escalate,
        final_justification=clip(" ".join(parts), PROSE_MAX),
        confidence=confidence,
    )


#: For tests and docs: which scorer answers which template.
SCORERS: dict[str, Callable[[PromptSlots], Reply]] = {
    "tone_style": score_tone_style,
    "head_to_head": score_head_to_head,
    "pairwise": score_pairwise,
    "tiebreak": score_tiebreak,
}
