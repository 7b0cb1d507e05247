"""A scripted ``Judge`` for tests: it answers from a list or a function and records every request.

    ScriptedJudge([reply_1, reply_2, ...])                 # consumed in call order, across orderings
    ScriptedJudge(lambda request: ...)                     # per request: return text or an exception
    ScriptedJudge([JudgeResponse(text, model, cost_usd=0.01), ...])   # full replies, e.g. priced ones

The callable form lets a test answer AB and BA differently (``request.order`` tells them
apart) and simulate failures (return or raise ``JudgeUnavailable``). ``on_request`` is awaited before
each answer, e.g. to hold both orderings at an ``anyio.Event`` and prove they run concurrently.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from pairjudge.agents.judge import JudgeIdentity, JudgeRequest, JudgeResponse

Answer = str | JudgeResponse | Exception
Script = Sequence[Answer] | Callable[[JudgeRequest], Answer]


class ScriptedJudge:
    """Implements the ``Judge`` protocol without any model. Safe to call concurrently."""

    def __init__(
        self,
        replies: Script,
        model: str = "scripted",
        *,
        answered_model: str | None = None,
        version: str = "",
        provider: str = "scripted",
        heuristic: bool = False,
        temperature: float = 0.0,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        latency_s: float = 0.0,
        on_request: Callable[[JudgeRequest], Awaitable[None]] | None = None,
        cost_usd: float | None = None,
    ) -> None:
        self._script = replies if callable(replies) else list(replies)
        self._identity = JudgeIdentity(
            provider=provider, model=model, version=version, temperature=temperature, heuristic=heuristic
        )
        #: The model the "server" says answered: differs from ``model`` to simulate a silent reroute.
        self._answered_model = answered_model or model
        self._input_tokens = input_tokens
        self._output_tokens = output_tokens
        self._latency_s = latency_s
        self._on_request = on_request
        #: The cost put on every text answer (a ``JudgeResponse`` answer carries its own).
        self._cost_usd = cost_usd
        self._next = 0
        #: Every request received, in arrival order.
        self.requests: list[JudgeRequest] = []

    @property
    def identity(self) -> JudgeIdentity:
        return self._identity

    @property
    def calls(self) -> int:
        return len(self.requests)

    def _answer(self, request: JudgeRequest) -> Answer:
        if callable(self._script):
            return self._script(request)
        if self._next >= len(self._script):
            raise AssertionError(f"ScriptedJudge ran out of replies after {self._next} calls")
        answer = self._script[self._next]
        self._next += 1
        return answer

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        self.requests.append(request)
        # Take the scripted answer before awaiting, so list order follows arrival order.
        answer = self._answer(request)
        if self._on_request is not None:
            await self._on_request(request)
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, JudgeResponse):
            return answer
        return JudgeResponse(
            text=answer,
            model=self._answered_model,
            input_tokens=self._input_tokens,
            output_tokens=self._output_tokens,
            latency_s=self._latency_s,
            cost_usd=self._cost_usd,
        )
