"""The two orderings: who sits where, and a reply un-swapped back to candidate ids.

Every pair is judged twice, once in each order. :func:`shown` is the one definition of an order: AB
puts the pair's first candidate at position A, BA puts its second there. The renderer places the
outputs with it (``agents.prompts.slots_for``), and :func:`build_ordering` maps a reply's positions
back to candidate ids with it, so the two can never disagree about who sat where.

What comes out is an ``OrderingResult``: the winner, the confidence and every per-position score keyed
by candidate id, with who sat where, and the latency, tokens and cost of every call the ordering made.

This module sits below the renderer and imports only the contracts and the ``Judge`` port.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pairjudge.agents.cost import billed, event_cost
from pairjudge.agents.judge import JudgeCall
from pairjudge.schemas.events import ErrorKind, Order, OrderingResult
from pairjudge.schemas.pair import TIE, Candidate, CandidatePair
from pairjudge.schemas.replies import (
    HeadToHeadReply,
    PairwiseReply,
    PositionOrTie,
    Reply,
    TieBreakReply,
    ToneStyleReply,
)

__all__ = ["ORDERS", "build_ordering", "map_winner", "shown"]

#: Both orders, in the order every stage judges and records them.
ORDERS: Final[tuple[Order, Order]] = ("AB", "BA")


def shown(pair: CandidatePair, order: Order) -> tuple[Candidate, Candidate]:
    """The candidates in the positions shown: AB puts ``candidates[0]`` at A, BA puts ``candidates[1]`` at A."""
    first, second = pair.candidates
    return (first, second) if order == "AB" else (second, first)


def map_winner(letter: PositionOrTie, shown_as_a: str, shown_as_b: str) -> str:
    """A position letter as a candidate id (or "TIE")."""
    if letter == "A":
        return shown_as_a
    if letter == "B":
        return shown_as_b
    return TIE


def _win_scores(letter: PositionOrTie) -> tuple[float, float]:
    # A per-criterion winner as (A, B) scores: 1.0 to the winner, 0.0 to the loser, 0.5 each for a tie.
    if letter == "A":
        return 1.0, 0.0
    if letter == "B":
        return 0.0, 1.0
    return 0.5, 0.5


@dataclass(frozen=True, slots=True)
class _Read:
    raw_winner: PositionOrTie
    confidence: float
    #: Per dimension: (score of position A, score of position B).
    dimension_scores: dict[str, tuple[float, float]]
    justification: str
    key_differentiators: tuple[str, ...]


def _read(reply: Reply) -> _Read:
    """The reply's facts, every score still by position."""
    if isinstance(reply, ToneStyleReply):
        dims = reply.dimension_scores
        scores = {
            name: (float(pair.a), float(pair.b))
            for name, pair in (
                ("tone_match", dims.tone_match),
                ("audience_suitability", dims.audience_suitability),
                ("stylistic_consistency", dims.stylistic_consistency),
                ("guideline_adherence", dims.guideline_adherence),
            )
        }
        return _Read(reply.winner, reply.confidence, scores, reply.justification, (reply.key_differentiator,))
    if isinstance(reply, HeadToHeadReply):
        scores = {name: _win_scores(c.winner) for name, c in reply.criteria_breakdown.items()}
        return _Read(reply.preference, reply.confidence, scores, reply.justification, reply.key_differentiators)
    if isinstance(reply, PairwiseReply):
        scores = {c.criterion: _win_scores(c.winner) for c in reply.comparison}
        result = reply.result
        return _Read(result.winner, result.confidence, scores, result.reasoning, result.differentiators)
    if isinstance(reply, TieBreakReply):
        scores = {c.criterion: _win_scores(c.winner) for c in reply.criteria_analysis}
        return _Read(reply.winner, reply.confidence, scores, reply.final_justification, ())
    raise TypeError(f"unknown reply type {type(reply).__name__}")


def _by_candidate(probabilities: Mapping[str, float] | None, a_id: str, b_id: str) -> dict[str, float] | None:
    """Token probabilities by position letter, keyed by the candidate (or TIE) each letter stands for."""
    if probabilities is None:
        return None
    who = {"A": a_id, "B": b_id, TIE: TIE}
    return {who[letter]: p for letter, p in probabilities.items() if letter in who}


def _token_sum(values: Sequence[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def build_ordering(
    pair: CandidatePair,
    order: Order,
    *,
    reply: Reply | None,
    calls: Sequence[JudgeCall],
    retries: int,
    answered_model: str | None,
    error: str | None,
    error_kind: ErrorKind | None,
    forced_choice: bool = False,
    extra_scores: Mapping[str, tuple[float, float]] | None = None,
    extra_differentiators: Sequence[str] = (),
    probabilities: Mapping[str, float] | None = None,
) -> OrderingResult:
    """One ordering's ``OrderingResult``: who sat where, and the reply mapped back to candidate ids.

    ``extra_scores`` are more dimension scores by position, (A, B), un-swapped like the reply's own.
    Latency, tokens and cost are summed over every call the ordering made, re-asks included.
    ``probabilities`` are the reply's token probabilities by position letter (``agents.logprobs``), keyed
    here by candidate id like everything else: the swapped order's "A" becomes the pair's second candidate.
    """
    a, b = shown(pair, order)
    a_id, b_id = a.candidate_id, b.candidate_id
    common: dict[str, Any] = {
        "order_shown": order,
        "swapped": order == "BA",
        "shown_as_a": a_id,
        "shown_as_b": b_id,
        "retries": retries,
        "forced_choice": forced_choice,
        "latency_ms": 1000.0 * sum(c.latency_s for c in calls),
        "input_tokens": _token_sum([c.input_tokens for c in calls]),
        "output_tokens": _token_sum([c.output_tokens for c in calls]),
        "answered_by_model": answered_model,
        "error": error,
        "error_kind": error_kind,
        "cost_usd": event_cost(billed(calls)),
        "cache_hits": sum(1 for c in calls if c.cached),
    }
    if reply is None:
        return OrderingResult(valid=False, **common)
    read = _read(reply)
    by_position = read.dimension_scores | dict(extra_scores or {})
    scores = {name: {a_id: score_a, b_id: score_b} for name, (score_a, score_b) in by_position.items()}
    return OrderingResult(
        valid=True,
        raw_winner=read.raw_winner,
        mapped_winner=map_winner(read.raw_winner, a_id, b_id),
        confidence=read.confidence,
        dimension_scores=scores,
        justification=read.justification,
        key_differentiators=(*read.key_differentiators, *extra_differentiators),
        token_probabilities=_by_candidate(probabilities, a_id, b_id),
        **common,
    )
