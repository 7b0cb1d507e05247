"""Plain words for what the command line prints: the reason codes the events carry, as sentences.

The codes stay in the files and events (they are the contracts); a person reading a terminal gets the
sentence, with the code after it for searching the docs and logs.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

#: Why a pair went to a person (``schemas.events.ReviewReason``; a test keeps this whole).
REVIEW_WORDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "ordering_invalid": "the judge's reply stayed invalid after two re-asks",
        "tiebreak_disagreement": "the tie-break picked a different winner in each order",
        "tiebreak_equal_scores": "the tie-break scored both outputs exactly the same",
        "tiebreak_no_signal": "the judge could not decide: nothing told the two outputs apart",
        "tiebreak_invalid": "the tie-break's reply was invalid or contradicted its own scores",
        "tiebreak_disabled": "the orders disagreed and the tie-break is switched off",
        "judge_unavailable": "the judge kept failing after retries",
        "judge_rejected": "the judge refused the request (for example a bad key)",
        "audit_sample": "a verdict drawn at random for people to check the judge",
        "kappa_guard": "automatic decisions are paused: the judge's agreement with people fell",
        "suspected_injection": "an output carries text aimed at the judge",
        "risk_review": "the pair's risk level needs more confidence than the judge had",
        "spend_capped": "a spending cap was reached, so no judge was asked",
    }
)

#: Why a pair went to the tie-break (``schemas.events.TieBreakReason``).
TIEBREAK_WORDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "tie": "the judge called a tie",
        "low_confidence": "the judge was not confident enough",
        "position_inconsistent": "the judge picked a different winner when the order was swapped",
        "invalid_verdict": "the judge's reply was invalid",
    }
)

#: Why an input was not judged (the input checks' and decoder's codes; the row's detail says more).
INPUT_WORDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "malformed_json": "not JSON",
        "empty_event": "an empty line",
        "oversized_event": "a line over the size limit",
        "too_deep": "JSON nested too deep",
        "number_too_large": "a number too large to read",
        "unknown_field": "a field pairjudge does not know",
        "missing_field": "a required field missing",
        "invalid_field": "a field with a wrong value",
        "invalid_event": "not a valid pair",
        "malformed_text": "text that is not valid Unicode",
        "oversized_output": "an output over the size limit",
        "oversized_prompt": "a prompt over the size limit",
        "unknown_rubric": "a rubric not in the catalog",
        "unsupported_schema_version": "a schema version this pairjudge cannot read",
        "empty_output": "an output that shows nothing",
    }
)

#: Who settled a verdict (``schemas.events.DecidedBy``).
DECIDED_BY_WORDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "primary": "the judge picked it in both orders",
        "tiebreak": "the tie-break picked it in both orders",
        "human": "a person decided",
        "rule": "settled without a judge (an empty output loses, identical outputs tie)",
    }
)


def words_for(code: str) -> str | None:
    """The sentence for a reason code, or None for a code without one."""
    return REVIEW_WORDS.get(code) or TIEBREAK_WORDS.get(code) or INPUT_WORDS.get(code)


def reason_words(code: str | None) -> str:
    """A reason code as a sentence with the code after it; an unknown code as it is."""
    if not code:
        return ""
    words = words_for(code)
    return f"{words} ({code})" if words else code


def shorten(text: str, limit: int) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters, with an ellipsis when cut."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] if " " in text[: limit - 1] else text[: limit - 1]
    return cut.rstrip(" ,;:") + "…"


__all__ = ["DECIDED_BY_WORDS", "INPUT_WORDS", "REVIEW_WORDS", "TIEBREAK_WORDS", "reason_words", "shorten", "words_for"]
