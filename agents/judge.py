"""The ``Judge`` port: what the judging core asks of any judge, HTTP or offline.

A judge receives one rendered prompt for one ordering of one pair and returns the reply text. The
core validates that text itself, so every judge (including the offline one) goes through the same
strict validation and re-ask path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from pairjudge.agents.prompt_slots import PromptSlots
from pairjudge.schemas import JudgeInfo
from pairjudge.schemas.events import ErrorKind
from pairjudge.schemas.kinds import Stage

TemplateKind = Literal["tone_style", "head_to_head", "pairwise", "tiebreak"]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True, slots=True)
class JudgeRequest:
    """One prompt for one ordering of one pair: what every judge gets, HTTP or offline.

    A model reads the pair in ``messages``; ``slots`` carries the same texts as data, for a judge that
    scores the parts rather than reading the prose (the offline judge).
    """

    template: TemplateKind
    messages: tuple[ChatMessage, ...]
    #: JSON Schema of the expected reply, for structured-output modes.
    response_schema: dict[str, Any]
    schema_name: str
    #: 0 for the first ask; re-asks carry the validation error in ``messages`` and count up.
    attempt: int = 0
    #: True on the tie-break's forced-choice re-ask.
    forced_choice: bool = False
    #: Which ordering this prompt shows: "AB" shows the pair's first candidate as A.
    order: Literal["AB", "BA"] = "AB"
    #: The reply must come from the judge itself: never from a response cache, never shared with an
    #: identical call in flight, and not stored for later calls. Set for canary pairs
    #: (``agents.prompts.needs_fresh_reply``), whose rounds measure the judge as it answers today.
    fresh: bool = False
    #: What ``messages`` show, as typed data in the positions shown (``agents.prompts.render`` sets it; None
    #: on a request built by hand). Only a judge that scores the parts reads it: an HTTP judge sends, and
    #: the response cache keys on, ``messages`` alone.
    slots: PromptSlots | None = None


@dataclass(frozen=True, slots=True)
class JudgeResponse:
    text: str
    #: The model the server says answered; may differ from the one requested (a silent reroute).
    model: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    #: What this call cost in US dollars, set by a pricing wrapper (``streams.judges.cost``). None means
    #: unknown (no price for the model, or no token counts), never "free"; a cache hit costs 0.0.
    cost_usd: float | None = None
    #: True when the reply was served from a response cache (or shared with an identical call in
    #: flight) instead of a fresh judge call.
    cached: bool = False


@dataclass(frozen=True, slots=True)
class JudgeCall:
    """The core's record of one call to a judge, for the orderings' sums and telemetry at the edge."""

    stage: Stage
    order: Literal["AB", "BA"]
    attempt: int
    forced_choice: bool
    latency_s: float
    input_tokens: int | None
    output_tokens: int | None
    requested_model: str
    answered_model: str | None
    valid: bool
    #: Why the call gave no accepted reply (readable), and its kind; both None for an accepted reply.
    error: str | None
    error_kind: ErrorKind | None
    #: US dollars, when a pricing wrapper knew the price; 0.0 for a cache hit; None when unknown.
    cost_usd: float | None = None
    #: Served from the response cache (or shared with an identical call in flight).
    cached: bool = False
    #: The HTTP status the judge answered a failed call with (``JudgeError.status``: 401, 400, ...);
    #: None for an accepted reply, an invalid one, or a failure without an answer.
    status: int | None = None
    #: The judge cascade's tier the call was made for (``agents.cascade``); None without tiers.
    tier: str | None = None


@dataclass(frozen=True, slots=True)
class JudgeIdentity:
    """Who answers: what a verdict, a drift series and a cache key name the judge by.

    Not ``schemas.JudgeInfo``: that is the wire contract and adds the prompt-template hash, which
    belongs to the request, not the judge (:func:`judge_info` joins the two). Wrappers (tracing,
    breaker, prices, cache) pass their inner judge's identity through unchanged, so wrapping opens no
    new drift series.
    """

    provider: str
    model: str
    version: str = ""
    temperature: float = 0.0
    #: True for a judge that scores from text features rather than reading (the offline judge).
    heuristic: bool = False


@runtime_checkable
class Judge(Protocol):
    """One judge endpoint. Implementations must be safe to call concurrently."""

    @property
    def identity(self) -> JudgeIdentity: ...

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        """Answer one prompt. Raise ``JudgeUnavailable``/``JudgeRejected`` on failure, never return junk."""
        ...


def judge_info(judge: Judge, prompt_template_hash: str) -> JudgeInfo:
    """The identity a verdict records: the judge's, plus the hash of the template it was shown."""
    who = judge.identity
    return JudgeInfo(
        provider=who.provider,
        model=who.model,
        version=who.version,
        prompt_template_hash=prompt_template_hash,
        temperature=who.temperature,
        heuristic=who.heuristic,
    )


def cache_params_of(judge: Judge) -> dict[str, Any]:
    """``judge.cache_params()`` when the judge has it (wrappers pass it through), else ``{}``."""
    method = getattr(judge, "cache_params", None)
    if method is None:
        return {}
    params = method()
    if not isinstance(params, dict):
        raise TypeError(f"{type(judge).__name__}.cache_params() must return a dict")
    return params


class JudgeWrapper:
    """Base for a judge that wraps another (tracing, breaker, prices, cache).

    Its identity is the inner judge's, so a wrapped judge opens no new drift series and shares its
    cache keys; subclasses only add behaviour around ``complete``.
    """

    def __init__(self, inner: Judge) -> None:
        self._inner = inner

    @property
    def inner(self) -> Judge:
        return self._inner

    @property
    def identity(self) -> JudgeIdentity:
        return self._inner.identity

    def cache_params(self) -> dict[str, Any]:
        return cache_params_of(self._inner)

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        return await self._inner.complete(request)
