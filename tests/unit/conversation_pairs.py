"""MT-Bench-style two-turn pairs for the conversation tests: a reply comparison and a transcript comparison.

The texts are written for these tests in MT-Bench's shape (a writing question, then a follow-up that
rewrites the first answer); the real MT-Bench sample is in evaldata/mt-bench/.
"""

from __future__ import annotations

from typing import Any

from pairjudge.schemas import Candidate, CandidatePair, Message, Task
from tests.unit.factories import FIRST_ID, SECOND_ID, make_pair

USER_1 = "Compose an engaging travel blog post about a recent trip to Hawaii, in about 100 words."
USER_2 = "Rewrite your previous response. Start every sentence with the letter A."
SYSTEM = "You are a helpful travel writer."
#: Each candidate's replies to user turn 1 and user turn 2 (the last: its output).
FIRST_REPLIES = (
    "Hawaii stole my heart: surf at Waikiki, a sunrise on Haleakala and poke by the harbour.",
    "Aloha greeted me at Waikiki. A sunrise on Haleakala followed. Afterwards, poke by the harbour.",
)
SECOND_REPLIES = (
    "My trip to Hawaii was nice. We went to some beaches and ate food.",
    "Hawaii was nice. We went to beaches. Food was good.",
)
#: The shared assistant turn of a reply comparison (what an assistant answered to user turn 1).
EARLIER_REPLY = FIRST_REPLIES[0]


def _with_candidates(
    pair: CandidatePair, outputs: tuple[str, str], turns: tuple[tuple[str, ...], ...]
) -> tuple[Candidate, Candidate]:
    first, second = pair.candidates
    return (
        first.model_copy(update={"output": outputs[0], "turns": turns[0]}),
        second.model_copy(update={"output": outputs[1], "turns": turns[1]}),
    )


def reply_pair(*, history: tuple[Message, ...] | None = None, **overrides: Any) -> CandidatePair:
    """Two candidate replies to the last user turn of a shared conversation (system, user, assistant, user)."""
    turns = history or (
        Message(role="system", content=SYSTEM),
        Message(role="user", content=USER_1),
        Message(role="assistant", content=EARLIER_REPLY),
    )
    base = make_pair()
    values: dict[str, Any] = {
        "task": Task(messages=(*turns, Message(role="user", content=USER_2))),
        "candidates": _with_candidates(base, (FIRST_REPLIES[1], SECOND_REPLIES[1]), ((), ())),
    }
    return make_pair(**(values | overrides))


def transcript_pair(
    *,
    first_turns: tuple[str, ...] = FIRST_REPLIES[:1],
    second_turns: tuple[str, ...] = SECOND_REPLIES[:1],
    **overrides: Any,
) -> CandidatePair:
    """Two whole two-turn transcripts: each candidate answered both user turns in its own conversation."""
    base = make_pair()
    values: dict[str, Any] = {
        "task": Task(
            messages=(
                Message(role="system", content=SYSTEM),
                Message(role="user", content=USER_1),
                Message(role="user", content=USER_2),
            )
        ),
        "candidates": _with_candidates(base, (FIRST_REPLIES[1], SECOND_REPLIES[1]), (first_turns, second_turns)),
    }
    return make_pair(**(values | overrides))


__all__ = ["FIRST_ID", "SECOND_ID", "reply_pair", "transcript_pair"]
