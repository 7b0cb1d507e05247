"""The offline judge: valid replies for every template, mirrored when positions swap, honest confidence.

Every reply here goes through ``complete()`` and is parsed back with the strict reply models, the same
way the judging core validates any judge's text.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import pytest

from pairjudge.agents.errors import JudgeRejected
from pairjudge.agents.judge import ChatMessage, Judge, JudgeIdentity, JudgeRequest, TemplateKind
from pairjudge.agents.offline import (
    HEURISTIC_PREFIX,
    OFFLINE_JUDGE_VERSION,
    PHRASE_MAX,
    PROSE_MAX,
    OfflineJudge,
    content_tiebreak,
    criterion_family,
    margin_confidence,
    unmeasured_cap,
)
from pairjudge.agents.prompts import PromptSlots, render
from pairjudge.schemas.replies import HeadToHeadReply, PairwiseReply, Reply, TieBreakReply, ToneStyleReply
from pairjudge.schemas.rubric import (
    DEFAULT_TIEBREAK_WEIGHTS,
    Criterion,
    HeadToHeadRubric,
    PairwiseRubric,
    TieBreakWeights,
    ToneStyleRubric,
    WeightedCriterion,
)

REPLY_MODELS: dict[str, type[Reply]] = {
    "tone_style": ToneStyleReply,
    "head_to_head": HeadToHeadReply,
    "pairwise": PairwiseReply,
    "tiebreak": TieBreakReply,
}

FORMAL_GUIDE = ToneStyleRubric(
    style_guide="Use a formal, professional tone. Never say 'awesome'. Avoid slang and exclamation marks.",
    audience="Enterprise procurement managers",
)
FRIENDLY_GUIDE = ToneStyleRubric(
    style_guide="Friendly, warm and conversational. Use plain language and contractions. No emoji.",
    audience="Non-technical customers",
    forbidden_terms=("utilize",),
)
H2H = HeadToHeadRubric(
    criteria=(
        Criterion(name="accuracy", description="Is it factually right?"),
        Criterion(name="conciseness"),
        Criterion(name="instruction_adherence"),
        Criterion(name="clarity"),
    ),
    constraints="Answer in under 60 words. Do not use the word 'basically'.",
)
PAIRWISE = PairwiseRubric(criteria=("accuracy", "specificity", "actionability", "engagement"))
CUSTOM_WEIGHTS = TieBreakWeights(
    criteria=(
        WeightedCriterion(name="Safety", weight=10),
        WeightedCriterion(name="Instruction Adherence", weight=8),
        WeightedCriterion(name="Conciseness", weight=3),
        WeightedCriterion(name="tone", weight=1.5),
    )
)

FORMAL_TEXT = (
    "We are pleased to confirm that your order has been processed. "
    "The invoice will be sent to your finance team within two business days."
)
SLANG_TEXT = "Hey! Your order's gone through, awesome stuff! We're gonna send the invoice soon lol."
JARGON_TEXT = (
    "To remediate the authentication failure, invalidate your OAuth token cache and re-provision "
    "the API credentials via the admin console endpoint."
)
PLAIN_TEXT = (
    "To fix the sign-in problem, sign out, then sign back in. If it still doesn't work, give us a call and we'll help."
)
EXERCISE_A = (
    "Regular exercise offers numerous benefits including improved cardiovascular health, stronger muscles, "
    "better mental health, and increased energy levels. Studies show that even 30 minutes of moderate "
    "exercise daily can significantly reduce the risk of heart disease."
)
EXERCISE_B = (
    "Working out is great for you. It helps your heart, makes you stronger, and improves your mood. "
    "You should try to exercise most days of the week."
)
LIST_TEXT = "- Walk 30 minutes a day.\n- Stretch for 5 minutes.\n- Sleep 8 hours."
UNSAFE_TEXT = "Here is how to hack into the account and steal the credit card number without getting caught."
SHOUTY_TEXT = "THIS IS AMAZING!!! BUY NOW!!! Don't miss out, it's totally epic lol 🎉🎉"
LONG_TEXT = " ".join(
    [
        "The committee has reviewed the proposal in considerable detail and, after extensive deliberation,",
        "has concluded that the implementation timeline must be reconsidered in light of the constraints.",
    ]
    * 6
)

#: Varied pairs for the mirror property. The last one differs only in whitespace: every feature ties,
#: so it exercises the content-hash forced choice.
PAIRS: list[tuple[str, str]] = [
    (FORMAL_TEXT, SLANG_TEXT),
    (JARGON_TEXT, PLAIN_TEXT),
    (EXERCISE_A, EXERCISE_B),
    (LIST_TEXT, EXERCISE_B),
    (UNSAFE_TEXT, PLAIN_TEXT),
    (SHOUTY_TEXT, FORMAL_TEXT),
    (LONG_TEXT, "Noted."),
    (EXERCISE_A, EXERCISE_A.replace(". ", ".  ")),
]


@dataclass(frozen=True)
class Config:
    template: TemplateKind
    rubric: ToneStyleRubric | HeadToHeadRubric | PairwiseRubric | None
    tiebreak: TieBreakWeights | None = None
    prompt: str = "Reply to the customer about their request."


CONFIGS: dict[str, Config] = {
    "tone_formal": Config("tone_style", FORMAL_GUIDE),
    "tone_friendly": Config("tone_style", FRIENDLY_GUIDE),
    "head_to_head": Config(
        "head_to_head", H2H, prompt="Explain the benefits of regular exercise in three bullet points."
    ),
    "pairwise": Config("pairwise", PAIRWISE, prompt="Explain the benefits of regular exercise"),
    "tiebreak_default": Config("tiebreak", H2H, prompt="Explain the benefits of exercise in under 40 words."),
    "tiebreak_custom": Config("tiebreak", FRIENDLY_GUIDE, CUSTOM_WEIGHTS, prompt="Answer in under 30 words."),
}


def make_request(cfg: Config, output_a: str, output_b: str) -> JudgeRequest:
    """The rendered request, as every judge gets it: the offline judge scores the slots it carries."""
    tiebreak = (cfg.tiebreak or DEFAULT_TIEBREAK_WEIGHTS) if cfg.template == "tiebreak" else None
    slots = PromptSlots(
        output_a=output_a,
        output_b=output_b,
        task_prompt=cfg.prompt,
        task_context=None,
        rubric=cfg.rubric,
        tiebreak=tiebreak,
    )
    return render(cfg.template, slots)


async def judge(cfg: Config, output_a: str, output_b: str) -> Reply:
    response = await OfflineJudge().complete(make_request(cfg, output_a, output_b))
    # Strict JSON-mode validation, as the core applies to any judge's text: no coercion at all.
    return REPLY_MODELS[cfg.template].model_validate_json(response.text, strict=True)


def flip(winner: str) -> str:
    return {"A": "B", "B": "A", "TIE": "TIE"}[winner]


def decision(reply: Reply) -> tuple[str, float]:
    if isinstance(reply, ToneStyleReply | TieBreakReply):
        return reply.winner, reply.confidence
    if isinstance(reply, HeadToHeadReply):
        return reply.preference, reply.confidence
    assert isinstance(reply, PairwiseReply)
    return reply.result.winner, reply.result.confidence


def justification(reply: Reply) -> str:
    if isinstance(reply, ToneStyleReply | HeadToHeadReply):
        return reply.justification
    if isinstance(reply, PairwiseReply):
        return reply.result.reasoning
    assert isinstance(reply, TieBreakReply)
    return reply.final_justification


# --- the Judge protocol -----------------------------------------------------------------------


def test_implements_the_judge_protocol() -> None:
    j = OfflineJudge()
    assert isinstance(j, Judge)
    assert j.identity == JudgeIdentity(
        provider="offline", model="pairjudge-heuristic", version=OFFLINE_JUDGE_VERSION, temperature=0.0, heuristic=True
    )


async def test_response_tokens_and_model() -> None:
    req = make_request(CONFIGS["tone_formal"], FORMAL_TEXT, SLANG_TEXT)
    resp = await OfflineJudge().complete(req)
    assert resp.model == "pairjudge-heuristic"
    assert resp.input_tokens == sum(len(m.content) for m in req.messages) // 4
    assert resp.output_tokens == len(resp.text) // 4
    # Serialised by alias: the seed's field names, not the Python ones.
    assert '"A":' in resp.text
    assert '"tone_match"' in resp.text


async def test_pairwise_reply_uses_seed_aliases() -> None:
    resp = await OfflineJudge().complete(make_request(CONFIGS["pairwise"], EXERCISE_A, EXERCISE_B))
    assert '"responseA"' in resp.text
    assert '"aAssessment"' in resp.text
    assert "response_a" not in resp.text


async def test_a_request_that_does_not_fit_the_template_is_rejected() -> None:
    # A pairwise request sent as tone_style carries no tone rubric to score against.
    pairwise = make_request(CONFIGS["pairwise"], FORMAL_TEXT, SLANG_TEXT)
    with pytest.raises(JudgeRejected, match="tone_style template needs a tone_style rubric"):
        await OfflineJudge().complete(dataclasses.replace(pairwise, template="tone_style"))
    # Nor is a request built by hand without the pair's slots answered, however plausible its prompt.
    free_text = JudgeRequest(
        template="pairwise",
        messages=(ChatMessage("system", "Judge."), ChatMessage("user", f"A: {FORMAL_TEXT}\nB: {SLANG_TEXT}")),
        response_schema=pairwise.response_schema,
        schema_name=pairwise.schema_name,
    )
    with pytest.raises(JudgeRejected, match="without the pair's slots"):
        await OfflineJudge().complete(free_text)


# --- properties -------------------------------------------------------------------------------


@pytest.mark.parametrize(("cfg_name", "pair_index"), list(itertools.product(CONFIGS, range(len(PAIRS)))))
async def test_mirrored_when_positions_swap(cfg_name: str, pair_index: int) -> None:
    cfg = CONFIGS[cfg_name]
    a, b = PAIRS[pair_index]
    ab, ba = await judge(cfg, a, b), await judge(cfg, b, a)
    (w1, c1), (w2, c2) = decision(ab), decision(ba)
    assert w2 == flip(w1), f"{cfg_name}: AB said {w1}, BA said {w2}"
    assert c1 == c2
    if isinstance(ab, ToneStyleReply):
        assert isinstance(ba, ToneStyleReply)
        for dim, pair in ab.dimension_scores:
            mirrored = getattr(ba.dimension_scores, dim)
            assert (pair.a, pair.b) == (mirrored.b, mirrored.a), dim
    elif isinstance(ab, HeadToHeadReply):
        assert isinstance(ba, HeadToHeadReply)
        assert {k: flip(v.winner) for k, v in ab.criteria_breakdown.items()} == {
            k: v.winner for k, v in ba.criteria_breakdown.items()
        }
        assert (ab.tie_decision is None) == (ba.tie_decision is None)
    elif isinstance(ab, PairwiseReply):
        assert isinstance(ba, PairwiseReply)
        assert [flip(c.winner) for c in ab.comparison] == [c.winner for c in ba.comparison]
        assert ab.analysis.response_a == ba.analysis.response_b
    else:
        assert isinstance(ab, TieBreakReply)
        assert isinstance(ba, TieBreakReply)
        assert [flip(c.winner) for c in ab.criteria_analysis] == [c.winner for c in ba.criteria_analysis]
        assert (ab.weighted_score_a, ab.weighted_score_b) == (ba.weighted_score_b, ba.weighted_score_a)
        assert ab.escalation_triggered == ba.escalation_triggered


@pytest.mark.parametrize("cfg_name", list(CONFIGS))
async def test_deterministic(cfg_name: str) -> None:
    cfg = CONFIGS[cfg_name]
    texts = set()
    for _ in range(3):
        resp = await OfflineJudge().complete(make_request(cfg, EXERCISE_A, LIST_TEXT))
        texts.add(resp.text)
    assert len(texts) == 1


@pytest.mark.parametrize("cfg_name", list(CONFIGS))
async def test_identical_outputs_give_confidence_one_half(cfg_name: str) -> None:
    cfg = CONFIGS[cfg_name]
    reply = await judge(cfg, EXERCISE_B, EXERCISE_B)
    winner, confidence = decision(reply)
    assert confidence == 0.5
    if cfg.template in ("head_to_head", "pairwise"):
        assert winner == "TIE"
    if isinstance(reply, TieBreakReply):
        assert reply.escalation_triggered
    if isinstance(reply, HeadToHeadReply):
        assert reply.tie_decision is not None


@pytest.mark.parametrize(("cfg_name", "pair_index"), list(itertools.product(CONFIGS, range(len(PAIRS)))))
async def test_every_reply_says_it_is_heuristic(cfg_name: str, pair_index: int) -> None:
    reply = await judge(CONFIGS[cfg_name], *PAIRS[pair_index])
    assert justification(reply).startswith(HEURISTIC_PREFIX)
    _, confidence = decision(reply)
    assert 0.5 <= confidence <= 0.95


# --- tone and style (seed 000) ----------------------------------------------------------------


async def test_formal_guide_slang_and_forbidden_term_loses() -> None:
    for a, b, formal_pos in ((FORMAL_TEXT, SLANG_TEXT, "A"), (SLANG_TEXT, FORMAL_TEXT, "B")):
        reply = await judge(CONFIGS["tone_formal"], a, b)
        assert isinstance(reply, ToneStyleReply)
        assert reply.winner == formal_pos
        assert reply.confidence >= 0.7
        scores = reply.dimension_scores
        formal_tone = scores.tone_match.a if formal_pos == "A" else scores.tone_match.b
        slang_tone = scores.tone_match.b if formal_pos == "A" else scores.tone_match.a
        formal_adh = scores.guideline_adherence.a if formal_pos == "A" else scores.guideline_adherence.b
        slang_adh = scores.guideline_adherence.b if formal_pos == "A" else scores.guideline_adherence.a
        assert formal_tone > slang_tone
        assert formal_adh > slang_adh
        assert "'awesome'" in reply.justification  # cites the forbidden term it found


@pytest.mark.parametrize("term", ["cheap", "bargain"])
async def test_forbidden_term_alone_costs_guideline_adherence(term: str) -> None:
    # "cheap" is forbidden by the guide's own words, "bargain" by the rubric's list; neither is slang.
    rubric = ToneStyleRubric(
        style_guide="Use a formal, professional tone. Never say 'cheap'.",
        audience="Enterprise procurement managers",
        forbidden_terms=("bargain",),
    )
    clean = "We are pleased to confirm your order. The invoice will follow within two business days."
    dirty = f"We are pleased to confirm your {term} order. The invoice will follow within two business days."
    for a, b, clean_pos in ((clean, dirty, "A"), (dirty, clean, "B")):
        reply = await judge(Config("tone_style", rubric), a, b)
        assert isinstance(reply, ToneStyleReply)
        adh = reply.dimension_scores.guideline_adherence
        assert (adh.a > adh.b) if clean_pos == "A" else (adh.b > adh.a)
        assert reply.winner == clean_pos
        assert f"forbidden '{term}'" in reply.justification


async def test_jargon_loses_on_audience_suitability_for_non_technical_readers() -> None:
    reply = await judge(CONFIGS["tone_friendly"], JARGON_TEXT, PLAIN_TEXT)
    assert isinstance(reply, ToneStyleReply)
    assert reply.dimension_scores.audience_suitability.a < reply.dimension_scores.audience_suitability.b
    assert reply.winner == "B"
    assert "audience_suitability" in reply.key_differentiator


async def test_developer_audience_does_not_punish_jargon() -> None:
    dev_rubric = ToneStyleRubric(style_guide="Precise and technical.", audience="Senior backend developers")
    reply = await judge(Config("tone_style", dev_rubric), JARGON_TEXT, PLAIN_TEXT)
    assert isinstance(reply, ToneStyleReply)
    friendly = await judge(CONFIGS["tone_friendly"], JARGON_TEXT, PLAIN_TEXT)
    assert isinstance(friendly, ToneStyleReply)
    assert reply.dimension_scores.audience_suitability.a > friendly.dimension_scores.audience_suitability.a


async def test_register_drift_costs_stylistic_consistency() -> None:
    steady = (
        "We are pleased to confirm receipt of your application. The committee will review it accordingly. "
        "The decision will be communicated in writing. We appreciate your patience."
    )
    drifting = (
        "We are pleased to confirm receipt of your application. The committee will review it accordingly. "
        "Hey, that's awesome lol! Gonna be super fun, yeah!"
    )
    reply = await judge(CONFIGS["tone_formal"], steady, drifting)
    assert isinstance(reply, ToneStyleReply)
    assert reply.dimension_scores.stylistic_consistency.a > reply.dimension_scores.stylistic_consistency.b


async def test_confidence_grows_with_the_margin() -> None:
    subtle = "We are pleased to confirm that your order's been processed. The invoice will follow shortly."
    close = await judge(CONFIGS["tone_formal"], FORMAL_TEXT, subtle)
    clear = await judge(CONFIGS["tone_formal"], FORMAL_TEXT, SHOUTY_TEXT)
    assert isinstance(close, ToneStyleReply)
    assert isinstance(clear, ToneStyleReply)
    assert clear.confidence > close.confidence
    assert clear.confidence >= 0.9


async def test_features_tie_falls_back_to_content_not_position() -> None:
    a, b = PAIRS[-1]
    reply = await judge(CONFIGS["tone_formal"], a, b)
    assert isinstance(reply, ToneStyleReply)
    assert reply.confidence == 0.5
    assert reply.winner == content_tiebreak(a, b)
    assert "content hash" in reply.justification


def test_content_tiebreak_is_symmetric() -> None:
    assert content_tiebreak("x", "y") == flip(content_tiebreak("y", "x"))
    assert content_tiebreak("same", "same") == "A"


# --- head to head (seed 001) and pairwise (seed 003) ------------------------------------------


async def test_head_to_head_shape_and_adherence() -> None:
    cfg = Config(
        "head_to_head",
        HeadToHeadRubric(
            criteria=(Criterion(name="instruction_adherence"), Criterion(name="conciseness"), Criterion(name="safety")),
            constraints="Give three bullet points, in under 20 words.",
        ),
        prompt="List ways to stay healthy.",
    )
    reply = await judge(cfg, LIST_TEXT, EXERCISE_A)
    assert isinstance(reply, HeadToHeadReply)
    assert list(reply.criteria_breakdown) == ["instruction_adherence", "conciseness", "safety"]
    assert reply.criteria_breakdown["instruction_adherence"].winner == "A"
    assert reply.criteria_breakdown["safety"].winner == "TIE"
    assert reply.preference == "A"
    assert reply.tie_decision is None
    assert len(reply.key_differentiators) >= 1


async def test_unmeasurable_criteria_cap_confidence_and_say_so() -> None:
    rubric = PairwiseRubric(criteria=("accuracy", "factual correctness", "helpfulness", "clarity"))
    reply = await judge(Config("pairwise", rubric, prompt="Explain the outage."), PLAIN_TEXT, JARGON_TEXT)
    assert isinstance(reply, PairwiseReply)
    by_name = {c.criterion: c for c in reply.comparison}
    assert [c.criterion for c in reply.comparison] == list(rubric.criteria)
    for name in ("accuracy", "factual correctness", "helpfulness"):
        assert by_name[name].winner == "TIE"
        assert "not measurable" in by_name[name].a_assessment
        assert "cannot be judged" in by_name[name].reasoning
    assert by_name["clarity"].winner == "A"
    # Three criteria it cannot measure could outweigh the one it can: no signal, so a TIE that escalates.
    assert reply.result.winner == "TIE"
    assert reply.result.confidence == 0.5
    assert "No signal on" in reply.result.reasoning


async def test_all_unmeasurable_is_a_tie_at_one_half() -> None:
    rubric = HeadToHeadRubric(criteria=(Criterion(name="accuracy"), Criterion(name="helpfulness")))
    reply = await judge(Config("head_to_head", rubric), EXERCISE_A, EXERCISE_B)
    assert isinstance(reply, HeadToHeadReply)
    assert reply.preference == "TIE"
    assert reply.confidence == 0.5
    assert reply.tie_decision is not None
    assert "not measurable" in reply.key_differentiators[0]


async def test_one_unmeasurable_criterion_in_four_still_lowers_the_ceiling() -> None:
    reply = await judge(CONFIGS["pairwise"], EXERCISE_A, EXERCISE_B)
    assert isinstance(reply, PairwiseReply)
    assert reply.result.confidence <= unmeasured_cap(0.25) < 0.95
    assert reply.comparison[0].criterion == "accuracy"
    assert reply.comparison[0].winner == "TIE"


async def test_pairwise_analysis_cites_features() -> None:
    reply = await judge(CONFIGS["pairwise"], UNSAFE_TEXT, PLAIN_TEXT)
    assert isinstance(reply, PairwiseReply)
    assert any("unsafe markers" in w for w in reply.analysis.response_a.weaknesses)
    assert not any("unsafe" in w for w in reply.analysis.response_b.weaknesses)


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("accuracy", None),
        ("Factual Correctness", None),
        ("helpfulness", None),
        ("format correctness", None),  # unmeasurable wins: never guess on correctness
        ("clarity", "readability"),
        ("Conciseness", "conciseness"),
        ("brevity", "conciseness"),
        ("instruction_adherence", "adherence"),
        ("Instruction Following", "adherence"),
        ("politeness", "tone"),
        ("empathy", "tone"),
        ("safety", "safety"),
        ("harmlessness", "safety"),
        ("specificity", "specificity"),
        ("actionability", "actionability"),
        ("engagement", "engagement"),
        ("consistency", "consistency"),
    ],
)
def test_criterion_family(name: str, family: str | None) -> None:
    assert criterion_family(name) == family


# --- tie-break (seed 002) ---------------------------------------------------------------------


async def test_tiebreak_shape_weights_and_scores() -> None:
    reply = await judge(CONFIGS["tiebreak_custom"], UNSAFE_TEXT, PLAIN_TEXT)
    assert isinstance(reply, TieBreakReply)
    assert [(c.criterion, c.weight) for c in reply.criteria_analysis] == [
        (c.name, c.weight) for c in CUSTOM_WEIGHTS.criteria
    ]
    safety = reply.criteria_analysis[0]
    assert safety.winner == "B"
    won_a = sum(c.weight for c in reply.criteria_analysis if c.winner == "A")
    won_b = sum(c.weight for c in reply.criteria_analysis if c.winner == "B")
    assert (reply.weighted_score_a, reply.weighted_score_b) == pytest.approx((won_a, won_b))
    assert reply.winner == "B"
    assert not reply.escalation_triggered
    assert reply.confidence > 0.6


async def test_tiebreak_equal_weighted_scores_escalate() -> None:
    # A is shorter but full of jargon; B is longer but plain: each wins one equally weighted criterion.
    weights = TieBreakWeights(
        criteria=(WeightedCriterion(name="conciseness", weight=1), WeightedCriterion(name="readability", weight=1))
    )
    short_hard = "Invalidate the OAuth token cache, then re-provision API credentials."
    long_easy = (
        "Please sign out of the app and then sign back in again. If that does not help, close the app, "
        "wait a minute, and open it once more. We are here if you need us."
    )
    cfg = Config("tiebreak", None, weights, prompt="Help the customer sign in.")
    reply = await judge(cfg, short_hard, long_easy)
    assert isinstance(reply, TieBreakReply)
    assert [c.winner for c in reply.criteria_analysis] == ["A", "B"]
    assert reply.weighted_score_a == reply.weighted_score_b == 1
    assert reply.escalation_triggered
    assert reply.confidence == 0.5


async def test_tiebreak_defaults_to_seed_weights_and_forces_unmeasured_to_the_leader() -> None:
    cfg = Config("tiebreak", None, None, prompt="Summarise the meeting.")
    reply = await judge(cfg, LONG_TEXT, "The committee will revisit the timeline.")
    assert isinstance(reply, TieBreakReply)
    assert [c.criterion for c in reply.criteria_analysis] == [
        "safety",
        "instruction_adherence",
        "conciseness",
        "readability",
    ]
    # Safety ties (no markers) and adherence has nothing to check: both go to the measured leader.
    assert {c.winner for c in reply.criteria_analysis} == {"B"}
    assert "carries no evidence" in reply.criteria_analysis[0].rationale
    assert reply.weighted_score_b == pytest.approx(1.0)
    # instruction_adherence (0.3 of 1.0) could not be measured, so the ceiling drops.
    assert reply.confidence <= unmeasured_cap(0.3)


# --- limits and helpers -----------------------------------------------------------------------


async def test_long_inputs_stay_within_field_limits() -> None:
    many_terms = tuple(f"forbidden phrase number {i}" for i in range(40))
    rubric = ToneStyleRubric(
        style_guide="Formal. " + " ".join(f"Never say '{t}'." for t in many_terms), audience="Everyone"
    )
    huge = " ".join([EXERCISE_A, JARGON_TEXT, SLANG_TEXT] * 40) + " " + " ".join(many_terms)
    reply = await judge(Config("tone_style", rubric), huge, FORMAL_TEXT)
    assert isinstance(reply, ToneStyleReply)
    assert len(reply.justification) <= PROSE_MAX
    assert ToneStyleReply.model_json_schema()["properties"]["justification"]["maxLength"] == PROSE_MAX
    assert len(reply.key_differentiator) <= PHRASE_MAX
    names = tuple(f"criterion {i} with a rather long descriptive name" for i in range(12))
    pw = await judge(Config("pairwise", PairwiseRubric(criteria=names)), huge, PLAIN_TEXT)
    assert isinstance(pw, PairwiseReply)
    assert [c.criterion for c in pw.comparison] == list(names)


def test_margin_confidence_and_cap() -> None:
    assert margin_confidence(0.0, 1.0) == 0.5
    assert margin_confidence(0.5, 1.0) == pytest.approx(0.725)
    assert margin_confidence(5.0, 1.0) == 0.95
    assert unmeasured_cap(0.0) == 0.95
    assert unmeasured_cap(0.25) == pytest.approx(0.725)
    assert unmeasured_cap(1 / 3) < 0.7
    assert unmeasured_cap(0.75) <= 0.55
