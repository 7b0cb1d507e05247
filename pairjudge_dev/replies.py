"""Valid judge replies for each seed template, as the JSON text a judge would send.

Shared by the unit tests' scripted judges (through ``tests/unit/factories.py``), the LLM-like judge
server (``pairjudge_dev.slow_judge_server``) and the benchmarks' simulated judges. Reply builders take
plain strings for letters: tests also build deliberately invalid replies.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pairjudge.schemas import DEFAULT_TIEBREAK_WEIGHTS, TieBreakWeights

H2H_CRITERIA = ("accuracy", "clarity", "safety")
PAIRWISE_CRITERIA = ("accuracy", "specificity", "actionability")


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
