"""The ``OfflineJudge`` and the dispatch from a request's template to its scorer."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from pydantic import ValidationError

from pairjudge.agents.errors import JudgeRejected
from pairjudge.agents.judge import JudgeIdentity, JudgeRequest, JudgeResponse
from pairjudge.agents.offline.common import OFFLINE_IDENTITY, OFFLINE_MODEL
from pairjudge.agents.offline.criteria_replies import score_head_to_head, score_pairwise
from pairjudge.agents.offline.tiebreak import score_tiebreak
from pairjudge.agents.offline.tone import score_tone_style
from pairjudge.agents.prompt_slots import PromptSlots
from pairjudge.schemas.replies import Reply


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
    """The validated reply model for one request, scored from what its prompt shows.

    The pair comes as the slots the request carries (``JudgeRequest.slots``: the texts its prompt shows, in
    the positions shown); a re-ask carries its first ask's. Raises ``JudgeRejected`` for a request without
    slots or whose rubric does not fit its template (a caller bug: re-asking the same deterministic judge
    cannot help).
    """
    scorer = SCORERS.get(request.template)
    if scorer is None:
        raise JudgeRejected(f"offline judge has no template {request.template!r}")
    if request.slots is None:
        raise JudgeRejected(f"offline judge got a {request.template} request without the pair's slots")
    try:
        return scorer(_with_calls_as_text(request.slots))
    except ValidationError as exc:  # our own bug; never hand out an unvalidated reply
        raise JudgeRejected(f"offline judge built an invalid {request.template} reply: {exc}") from exc


def _with_calls_as_text(slots: PromptSlots) -> PromptSlots:
    """The slots with each output's tool calls appended to its text, one JSON line a call (as the prompt shows
    them, ``agents.tool_views``): the offline judge's scorers read texts, so the calls are compared as data,
    text against text (the same calls read alike, and a reply that says nothing but calls is not blank).
    Slots without calls are returned as they are, so every pinned reply stays as it was."""
    if not slots.calls_a and not slots.calls_b:
        return slots
    return dataclasses.replace(
        slots,
        output_a="\n".join((slots.output_a, *slots.calls_a)).strip(),
        output_b="\n".join((slots.output_b, *slots.calls_b)).strip(),
    )


#: For tests and docs: which scorer answers which template.
SCORERS: dict[str, Callable[[PromptSlots], Reply]] = {
    "tone_style": score_tone_style,
    "head_to_head": score_head_to_head,
    "pairwise": score_pairwise,
    "tiebreak": score_tiebreak,
}
