"""The ``OfflineJudge`` and the dispatch from a request's template to its scorer."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import ValidationError

from agents.errors import JudgeRejected
from agents.judge import JudgeIdentity, JudgeRequest, JudgeResponse, PromptSlots
from agents.offline.common import OFFLINE_IDENTITY, OFFLINE_MODEL
from agents.offline.criteria import score_head_to_head, score_pairwise
from agents.offline.tiebreak import score_tiebreak
from agents.offline.tone import score_tone_style
from schemas.replies import (
    Reply,
)


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


#: For tests and docs: which scorer answers which template.
SCORERS: dict[str, Callable[[PromptSlots], Reply]] = {
    "tone_style": score_tone_style,
    "head_to_head": score_head_to_head,
    "pairwise": score_pairwise,
    "tiebreak": score_tiebreak,
}
