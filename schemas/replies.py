"""Strict reply models: each seed template's JSON output, field for field.

The judge's reply is validated against these before anything is trusted. Letters "A"/"B" here mean
*positions in the prompt*, never candidates; the judging core maps them back.

Free-text fields carry ``max_length`` because some constrained-decoding servers (llama.cpp) ignore
numeric bounds but do honour string lengths, which keeps a small model from rambling forever.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from pairjudge.schemas._base import Contract

Position = Literal["A", "B"]
PositionOrTie = Literal["A", "B", "TIE"]
Confidence = Annotated[float, Field(ge=0.0, le=1.0)]
Score = Annotated[int, Field(ge=1, le=5)]
Prose = Annotated[str, Field(min_length=1, max_length=1_000)]
Phrase = Annotated[str, Field(min_length=1, max_length=300)]


class Reply(Contract):
    """Base of every reply model."""


# --- seed 000: tone and style -----------------------------------------------------------------


class ScorePair(Reply):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    a: Score = Field(alias="A")
    b: Score = Field(alias="B")


class ToneDimensionScores(Reply):
    tone_match: ScorePair
    audience_suitability: ScorePair
    stylistic_consistency: ScorePair
    guideline_adherence: ScorePair


#: Seed 000's weights for its four dimensions.
TONE_WEIGHTS: dict[str, float] = {
    "tone_match": 0.4,
    "audience_suitability": 0.3,
    "stylistic_consistency": 0.2,
    "guideline_adherence": 0.1,
}


class ToneStyleReply(Reply):
    winner: Position
    confidence: Confidence
    justification: Prose
    dimension_scores: ToneDimensionScores
    key_differentiator: Phrase


# --- seed 001: head to head -------------------------------------------------------------------


class CriterionWinner(Reply):
    winner: PositionOrTie
    explanation: Prose


class TieDecision(Reply):
    reason: Prose
    tie_breaker_applied: Phrase


class HeadToHeadReply(Reply):
    preference: PositionOrTie
    confidence: Confidence
    justification: Prose
    key_differentiators: tuple[Phrase, ...] = Field(min_length=1, max_length=8)
    criteria_breakdown: dict[str, CriterionWinner]
    tie_decision: TieDecision | None


# --- seed 003: pairwise with criteria list ----------------------------------------------------


class ResponseAnalysis(Reply):
    strengths: tuple[Phrase, ...] = Field(max_length=8)
    weaknesses: tuple[Phrase, ...] = Field(max_length=8)


class PairwiseAnalysis(Reply):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    response_a: ResponseAnalysis = Field(alias="responseA")
    response_b: ResponseAnalysis = Field(alias="responseB")


class CriterionComparison(Reply):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    criterion: Phrase
    a_assessment: Prose = Field(alias="aAssessment")
    b_assessment: Prose = Field(alias="bAssessment")
    winner: PositionOrTie
    reasoning: Prose


class PairwiseResult(Reply):
    winner: PositionOrTie
    confidence: Confidence
    reasoning: Prose
    differentiators: tuple[Phrase, ...] = Field(max_length=8)


class PairwiseReply(Reply):
    analysis: PairwiseAnalysis
    comparison: tuple[CriterionComparison, ...] = Field(min_length=1, max_length=12)
    result: PairwiseResult


# --- seed 002: tie-break ----------------------------------------------------------------------


class CriterionAnalysis(Reply):
    criterion: Phrase
    weight: float
    winner: Position
    rationale: Prose


class TieBreakReply(Reply):
    """Seed 002's output format, plus ``confidence``.

    The seed's template omits confidence but its harness section requires one ("a confidence score
    between 0 and 1", re-ask below 0.6), so the rendered template asks for it and this model requires it.
    """

    winner: Position
    criteria_analysis: tuple[CriterionAnalysis, ...] = Field(min_length=1, max_length=12)
    weighted_score_a: float
    weighted_score_b: float
    escalation_triggered: bool
    final_justification: Prose
    confidence: Confidence
