"""Builders for pairs, rubrics and judge replies (as the JSON text a judge would send).

The candidates' metadata is deliberately distinctive (see ``MODEL_METADATA``) so tests can assert
that none of it ever reaches a prompt.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agents.judge import JudgeRequest
from schemas import (
    DEFAULT_TIEBREAK_WEIGHTS,
    Candidate,
    CandidatePair,
    CandidateSource,
    Criterion,
    HeadToHeadRubric,
    PairMetadata,
    PairwiseRubric,
    Task,
    TieBreakWeights,
    ToneStyleRubric,
)

FIRST_ID = "cand-champ-7f3a"
SECOND_ID = "cand-chall-91bc"
FIRST_OUTPUT = "Hi there! Thanks for reaching out - we have refunded your order and it should land in 3 days."
SECOND_OUTPUT = "Dear customer, your refund request has been processed. Funds will be credited within 3 business days."

#: Everything about the candidates and the pair that a judge must never see.
MODEL_METADATA: tuple[str, ...] = (
    FIRST_ID,
    SECOND_ID,
    "acme-frontier-xl",
    "2031-04-01-preview",
    "prompt-v17-champ",
    "zeta-small-chat",
    "2030-12-24",
    "prompt-v18-chall",
    "champion",
    "challenger",
    "pair-0001-factory",
    "exp-tone-42",
    "tenant-secret-co",
)

H2H_CRITERIA = ("accuracy", "clarity", "safety")
PAIRWISE_CRITERIA = ("accuracy", "specificity", "actionability")

# Reply builders take plain strings for letters: tests also build deliberately invalid replies.


def tone_rubric(**overrides: Any) -> ToneStyleRubric:
    values: dict[str, Any] = {
        "style_guide": "Warm, plain and direct. Use 'you'. Never say 'unfortunately'. Sign off with 'Cheers'.",
        "audience": "Retail customers on a mobile app; general reading level.",
        "forbidden_terms": ("unfortunately",),
        "required_terms": ("Cheers",),
    }
    return ToneStyleRubric(**(values | overrides))


def h2h_rubric(criteria: Sequence[str] = H2H_CRITERIA, **overrides: Any) -> HeadToHeadRubric:
    values: dict[str, Any] = {
        "criteria": tuple(Criterion(name=n, description=f"Which output is better on {n}?") for n in criteria),
        "constraints": "At most 80 words.",
        "examples": "",
    }
    return HeadToHeadRubric(**(values | overrides))


def pairwise_rubric(criteria: Sequence[str] = PAIRWISE_CRITERIA) -> PairwiseRubric:
    return PairwiseRubric(criteria=tuple(criteria))


def make_pair(*, outputs: tuple[str, str] | None = None, **overrides: Any) -> CandidatePair:
    """A valid pair (tone_style rubric by default). ``outputs`` replaces both output texts; any
    ``CandidatePair`` field can be overridden by keyword."""
    first_output, second_output = outputs or (FIRST_OUTPUT, SECOND_OUTPUT)
    values: dict[str, Any] = {
        "pair_id": "pair-0001-factory",
        "task": Task(prompt="Tell the customer their refund was processed.", context=None),
        "candidates": (
            Candidate(
                candidate_id=FIRST_ID,
                output=first_output,
                source=CandidateSource(
                    model="acme-frontier-xl",
                    version="2031-04-01-preview",
                    prompt_version="prompt-v17-champ",
                    role="champion",
                ),
            ),
            Candidate(
                candidate_id=SECOND_ID,
                output=second_output,
                source=CandidateSource(
                    model="zeta-small-chat",
                    version="2030-12-24",
                    prompt_version="prompt-v18-chall",
                    role="challenger",
                ),
            ),
        ),
        "rubric": tone_rubric(),
        "metadata": PairMetadata(traffic="shadow", experiment_id="exp-tone-42", tenant="tenant-secret-co"),
    }
    return CandidatePair(**(values | overrides))


# --- replies ----------------------------------------------------------------------------------


def _dump(obj: Mapping[str, Any], overrides: Mapping[str, Any]) -> str:
    return json.dumps(dict(obj) | dict(overrides))


def tone_reply(winner: str = "A", confidence: float = 0.9, **overrides: Any) -> str:
    scores = {"A": 4, "B": 3} if winner == "A" else {"A": 3, "B": 4}
    return _dump(
        {
            "winner": winner,
            "confidence": confidence,
            "justification": f"Output {winner} follows the style guide more closely.",
            "dimension_scores": {
                "tone_match": scores,
                "audience_suitability": scores,
                "stylistic_consistency": {"A": 5, "B": 2},
                "guideline_adherence": {"A": 3, "B": 3},
            },
            "key_differentiator": f"warmer register in {winner}",
        },
        overrides,
    )


def h2h_reply(
    preference: str = "A",
    confidence: float = 0.9,
    criteria: Sequence[str] = H2H_CRITERIA,
    criteria_winners: Mapping[str, str] | None = None,
    **overrides: Any,
) -> str:
    winners = criteria_winners or {}
    return _dump(
        {
            "preference": preference,
            "confidence": confidence,
            "justification": f"Preference {preference} on the stated criteria.",
            "key_differentiators": [f"{preference} is more precise"],
            "criteria_breakdown": {
                n: {"winner": winners.get(n, preference), "explanation": f"{n} judged"} for n in criteria
            },
            "tie_decision": None,
        },
        overrides,
    )


def pairwise_reply(
    winner: str = "A",
    confidence: float = 0.9,
    criteria: Sequence[str] = PAIRWISE_CRITERIA,
    criteria_winners: Mapping[str, str] | None = None,
    **overrides: Any,
) -> str:
    winners = criteria_winners or {}
    return _dump(
        {
            "analysis": {
                "responseA": {"strengths": ["clear"], "weaknesses": []},
                "responseB": {"strengths": ["short"], "weaknesses": ["vague"]},
            },
            "comparison": [
                {
                    "criterion": n,
                    "aAssessment": "fine",
                    "bAssessment": "weaker",
                    "winner": winners.get(n, winner),
                    "reasoning": f"{n} compared",
                }
                for n in criteria
            ],
            "result": {
                "winner": winner,
                "confidence": confidence,
                "reasoning": "overall",
                "differentiators": ["detail"],
            },
        },
        overrides,
    )


def tiebreak_reply(
    criteria_winners: Mapping[str, str] | None = None,
    *,
    winner: str | None = None,
    confidence: float = 0.9,
    weights: TieBreakWeights = DEFAULT_TIEBREAK_WEIGHTS,
    escalation: bool = False,
    score_a: float | None = None,
    score_b: float | None = None,
    justification: str = "A wins on the heavier criteria.",
    **overrides: Any,
) -> str:
    """A seed 002 reply. Criteria default to all "A"; the judge's scores default to the correct
    arithmetic and its winner to the higher score (A on equal scores)."""
    winners = {c.name: (criteria_winners or {}).get(c.name, "A") for c in weights.criteria}
    a = sum(c.weight for c in weights.criteria if winners[c.name] == "A")
    b = sum(c.weight for c in weights.criteria if winners[c.name] == "B")
    return _dump(
        {
            "winner": winner or ("A" if a >= b else "B"),
            "criteria_analysis": [
                {"criterion": c.name, "weight": c.weight, "winner": winners[c.name], "rationale": f"{c.name} judged"}
                for c in weights.criteria
            ],
            "weighted_score_a": a if score_a is None else score_a,
            "weighted_score_b": b if score_b is None else score_b,
            "escalation_triggered": escalation,
            "final_justification": justification,
            "confidence": confidence,
        },
        overrides,
    )


# --- scripting a judge by ordering ------------------------------------------------------------

Answer = str | Exception


def per_order(
    pair: CandidatePair, ab: Answer | Sequence[Answer], ba: Answer | Sequence[Answer]
) -> Callable[[JudgeRequest], Answer]:
    """A ``ScriptedJudge`` script answering each ordering from its own queue (a single answer repeats)."""
    queues: dict[str, list[Answer] | Answer] = {
        "AB": ab if isinstance(ab, str | Exception) else list(ab),
        "BA": ba if isinstance(ba, str | Exception) else list(ba),
    }

    def answer(request: JudgeRequest) -> Answer:
        queue = queues[request.order]
        if isinstance(queue, str | Exception):
            return queue
        if not queue:
            raise AssertionError(f"no scripted answer left for {request.order}")
        return queue.pop(0)

    return answer
