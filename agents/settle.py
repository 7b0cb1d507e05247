"""Pairs that need no judge: an empty output loses, and identical outputs tie.

An empty (or whitespace-only, or invisible-only) output is an ordinary answer in production traffic,
a model that said nothing, and it loses to any output with content. Two empty outputs, or two outputs
that are the same text once whitespace is normalised, are a tie. Asking a judge about these would only
measure how it reacts to an empty box or to a coin it cannot see, and a judge that picks a side for
identical texts reads as a position flip. So they are settled here, before any call, the same way for
every judge.

A reply with tool calls (schema version 3) is never empty, whatever its text: its calls are its answer. Two
replies are identical when their texts are (whitespace aside) and they make the same calls, compared as data
(``agents.tool_views.calls_equal``: same functions, same arguments, ids aside).
"""

from __future__ import annotations

from dataclasses import dataclass

from pairjudge.agents.invisible import is_blank
from pairjudge.agents.tool_views import calls_equal
from pairjudge.schemas.pair import TIE, CandidatePair


@dataclass(frozen=True, slots=True)
class Settlement:
    """How a pair was settled by rule: the winner (a candidate id, or "TIE") and why, in words."""

    winner: str
    rule: str
    explanation: str


def normalized(text: str) -> str:
    """``text`` with every run of whitespace as one space and none at either end."""
    return " ".join(text.split())


def settle(pair: CandidatePair) -> Settlement | None:
    """The rule that settles ``pair`` without a judge, or None when a judge must compare the outputs."""
    first, second = pair.candidates
    blank_first = is_blank(first.output) and not first.tool_calls
    blank_second = is_blank(second.output) and not second.tool_calls
    if blank_first and blank_second:
        return Settlement(TIE, "both_empty", "Both outputs are empty: a tie, settled without a judge call.")
    if blank_first or blank_second:
        winner, empty = (second, first) if blank_first else (first, second)
        return Settlement(
            winner.candidate_id,
            "empty_output",
            f"Candidate {empty.candidate_id!r} gave an empty output and loses to one with content;"
            " settled without a judge call.",
        )
    if normalized(first.output) == normalized(second.output) and calls_equal(first.tool_calls, second.tool_calls):
        return Settlement(
            TIE,
            "identical_outputs",
            "The outputs are identical once whitespace is normalised: a tie, settled without a judge call.",
        )
    return None
