"""A second, pluggable injection detector: the port the judging core calls, and how its answers join the rules'.

``agents.injection`` is a list of patterns, and a list of patterns trails the next disguise. An
:class:`InjectionScreen` is anything else that can read one untrusted text and say whether it addresses
the evaluator: a classifier served over HTTP (``streams.judges.injection_screen`` speaks the JSON
contract in docs/guides/prompt-injection.md), or a second, cheap judge asked only that question. The
core sees only this port; the HTTP client, its retries and its timeouts live in ``streams/``.

**How its answer joins the rules'** (:func:`screen_pair`): it reads the same texts as
``agents.pair_checks.scan_for_injection`` (each output, each candidate's earlier replies, the task's earlier
turns), and each text it flags becomes an ``InjectionFlag`` with rule :data:`SCREEN_RULE`. A pair with
any flag goes to review ``suspected_injection`` before any judge call, exactly as a rule match does.

**When it cannot answer** (:class:`ScreenUnavailable`, raised after the adapter's own retries), the
policy decides (``Policy.screen_on_failure``), and neither choice is silent: ``"review"`` (the default,
fail-closed) flags the pair with rule :data:`SCREEN_FAILED_RULE`, so a person sees why it was held;
``"pass"`` judges the pair without the screen's opinion, and the adapter has logged the failure. A
screen that is down therefore never lets a pair through unread by default, and never quietly holds one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

import anyio

from pairjudge.agents.judge import Judge, JudgeRequest, JudgeResponse, JudgeWrapper
from pairjudge.agents.pair_checks import candidate_texts, task_texts
from pairjudge.agents.policy import ScreenFailure
from pairjudge.schemas.events import InjectionFlag
from pairjudge.schemas.pair import CandidatePair

__all__ = [
    "SCREEN_FAILED_RULE",
    "SCREEN_RULE",
    "InjectionScreen",
    "ScreenFailure",
    "ScreenUnavailable",
    "ScreenVerdict",
    "ScreenedJudge",
    "screen_of",
    "screen_pair",
]

#: The rule name a flag from the screen carries (beside the pattern rules' names).
SCREEN_RULE: Final = "screen"
#: The rule name of the flag a failed screen leaves when the policy fails closed.
SCREEN_FAILED_RULE: Final = "screen_unavailable"
_EXCERPT: Final = 80


@dataclass(frozen=True, slots=True)
class ScreenVerdict:
    """One text's answer: flagged or not, the screen's score when it has one, and a short label (its reason)."""

    flagged: bool
    score: float | None = None
    label: str = ""


class ScreenUnavailable(Exception):
    """The screen gave no usable answer after its retries (a timeout, a 5xx, a malformed body)."""


@runtime_checkable
class InjectionScreen(Protocol):
    """Reads one untrusted text; says whether it addresses the evaluator. Safe to call concurrently."""

    @property
    def name(self) -> str:
        """A short name for flags and logs (never a URL with credentials)."""
        ...

    async def screen(self, text: str) -> ScreenVerdict:
        """The verdict on ``text``; raises :class:`ScreenUnavailable` when there is none to give."""
        ...


class ScreenedJudge(JudgeWrapper):
    """A judge carrying the screen its pairs are read by first (:func:`screen_of` finds it).

    The worker's panel is built from settings (``streams.judges.panel``) and wrapped again on its way to
    the core (tracing, breakers): carrying the screen on the judge lets it reach ``agents.core.judge_pair``
    through every wrapper without another argument on each layer. Calls pass straight through."""

    def __init__(self, inner: Judge, screen: InjectionScreen) -> None:
        super().__init__(inner)
        self.screen = screen

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        return await self._inner.complete(request)


def screen_of(judges: Sequence[Judge]) -> InjectionScreen | None:
    """The screen the first of ``judges`` carries through its wrappers (``JudgeWrapper.inner``), if any."""
    for judge in judges:
        current: object = judge
        while current is not None:
            if isinstance(current, ScreenedJudge):
                return current.screen
            current = getattr(current, "inner", None)
    return None


def _texts(pair: CandidatePair) -> list[tuple[str | None, str, str]]:
    """(candidate id, where, text) for every text ``scan_for_injection`` reads, in its order."""
    texts: list[tuple[str | None, str, str]] = [(None, where, text) for where, text in task_texts(pair)]
    for c in pair.candidates:
        texts += [(c.candidate_id, where, text) for where, text in candidate_texts(c)]
    return [t for t in texts if t[2].strip()]


async def screen_pair(
    pair: CandidatePair, screen: InjectionScreen, on_failure: ScreenFailure
) -> tuple[InjectionFlag, ...]:
    """The flags ``screen`` raises on ``pair``'s texts, all asked concurrently.

    A text it cannot read (:class:`ScreenUnavailable`) leaves a :data:`SCREEN_FAILED_RULE` flag when
    ``on_failure`` is ``"review"``, and nothing when it is ``"pass"``.
    """
    texts = _texts(pair)
    answers: list[ScreenVerdict | ScreenUnavailable | None] = [None] * len(texts)

    async def one(index: int, text: str) -> None:
        try:
            answers[index] = await screen.screen(text)
        except ScreenUnavailable as exc:
            answers[index] = exc

    async with anyio.create_task_group() as tg:
        for index, (_, _, text) in enumerate(texts):
            tg.start_soon(one, index, text)
    flags: list[InjectionFlag] = []
    for (candidate_id, where, _), answer in zip(texts, answers, strict=True):
        if isinstance(answer, ScreenUnavailable):
            if on_failure == "review":
                detail = f"{screen.name}: {answer}"[:_EXCERPT]
                flag = InjectionFlag(candidate_id=candidate_id, rule=SCREEN_FAILED_RULE, excerpt=detail, where=where)
                flags.append(flag)
        elif answer is not None and answer.flagged:
            score = "" if answer.score is None else f" {answer.score:.2f}"
            detail = f"{screen.name}{score} {answer.label}".strip()[:_EXCERPT]
            flags.append(InjectionFlag(candidate_id=candidate_id, rule=SCREEN_RULE, excerpt=detail, where=where))
    return tuple(flags)
