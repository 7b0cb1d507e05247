"""The stage handlers, free of Faust: bytes and headers in, messages to publish out.

The Faust agents in ``streams.app`` are thin loops around these, so the same handlers serve the
worker, ``agent.test_context()`` tests, and anything else that moves bytes. Every input ends in at
least one outgoing message: a verdict, a tie-break request, a review request or a dead letter.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from agents.core import Decision, check_pair, judge_pair, resolve_tiebreak
from agents.errors import InputRejected
from agents.judge import Judge
from agents.jury import judge_pair_jury
from agents.policy import Policy
from schemas import CandidatePair, ControlUpdate, DeadLetter, InlineRubric, PairVerdict, ReviewRequest, TieBreakRequest
from streams.codecs import decode, encode
from streams.judges.breaker import CircuitBreaker
from streams.telemetry import Telemetry, TracingJudge, extract_context, inject_headers, trace_id_of

log = logging.getLogger(__name__)

#: Extra attempts for a pair that failed for lack of a judge while no breaker was open yet.
OUTAGE_RETRIES = 2

TopicKind = Literal["verdicts", "tiebreak", "review", "deadletter"]
HeadersIn = Iterable[tuple[str, bytes]] | Mapping[str, bytes] | None


@dataclass(frozen=True, slots=True)
class Origin:
    """Where an input event was read, for the dead-letter record."""

    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    key: bytes | None = None


@dataclass(frozen=True, slots=True)
class Outgoing:
    kind: TopicKind
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]


@dataclass(frozen=True, slots=True)
class JudgePanel:
    """Who judges: one primary judge or a jury, the tie-break resolver, and their circuit breakers."""

    primary: tuple[Judge, ...]
    tiebreak: Judge
    breakers: tuple[CircuitBreaker, ...] = ()

    @classmethod
    def single(cls, judge: Judge) -> JudgePanel:
        return cls(primary=(judge,), tiebreak=judge)

    async def judge_primary(self, pair: CandidatePair, policy: Policy, catalog: Mapping[str, InlineRubric]) -> Decision:
        """Both orders by the one judge, or by every juror."""
        if len(self.primary) == 1:
            return await judge_pair(pair, self.primary[0], policy, catalog)
        return await judge_pair_jury(pair, self.primary, policy, catalog)

    def traced(self, telemetry: Telemetry) -> JudgePanel:
        """The same panel with every judge call recorded as a span."""
        return JudgePanel(
            primary=tuple(TracingJudge(j, telemetry, "primary") for j in self.primary),
            tiebreak=TracingJudge(self.tiebreak, telemetry, "tiebreak"),
            breakers=self.breakers,
        )


class PolicyHolder:
    """The live policy: the configured one with the control topic's overrides on top.

    Overrides are kept per key, as the compacted control topic keeps them, so a tombstone (an
    update deleted from the topic) returns that one setting to its configured value.
    """

    def __init__(self, policy: Policy, *, follows_control: bool = False) -> None:
        self.base = policy
        self.current = policy
        self._overrides: dict[str, ControlUpdate] = {}
        #: Set once the control topic has been read up to date; stages wait for it, so no pair is
        #: judged under settings that were already changed before this worker started.
        self.ready = asyncio.Event()
        if not follows_control:
            self.ready.set()

    def apply(self, update: ControlUpdate) -> None:
        """Apply one update; a bad value raises ``ValueError`` and changes nothing."""
        self.current = self.current.apply(update)
        self._overrides[update.key] = update

    def clear(self, key: str) -> None:
        self._overrides.pop(key, None)
        policy = self.base
        for update in self._overrides.values():
            policy = policy.apply(update)
        self.current = policy


def _guess_pair_id(raw: bytes | None) -> str | None:
    """Best effort, so a dead letter can still be matched to its pair."""
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    pair_id = data.get("pair_id") if isinstance(data, dict) else None
    return pair_id if isinstance(pair_id, str) and len(pair_id) <= 128 else None


class Pipeline:
    def __init__(
        self,
        judges: JudgePanel,
        policy: PolicyHolder,
        telemetry: Telemetry,
        catalog: Mapping[str, InlineRubric],
        max_event_bytes: int,
    ) -> None:
        self.policy = policy
        self.telemetry = telemetry
        self.catalog = catalog
        self.max_event_bytes = max_event_bytes
        self._panel = judges.traced(telemetry)
        self._breakers = judges.breakers

    async def _with_backpressure(self, decide: Callable[[], Awaitable[Decision]], pair_id: str) -> Decision:
        """Decide, but never escalate a pair only because the judge is down.

        While a breaker is open this coroutine waits, so the agent stops pulling pairs from Kafka
        (its buffers are bounded) instead of queueing them in memory or flooding review. A pair whose
        judge calls failed for lack of a judge is judged again: indefinitely while a breaker says the
        judge is out, and ``OUTAGE_RETRIES`` more times otherwise (the first pairs of an outage fail
        before the breaker has seen enough failures to open). Only then does it escalate.
        """
        retries_left = OUTAGE_RETRIES
        while True:
            for breaker in self._breakers:
                await breaker.wait_until_closed()
            decision = await decide()
            outage = isinstance(decision.outcome, ReviewRequest) and decision.outcome.reason == "judge_unavailable"
            if not outage or not self._breakers:
                return decision
            if not any(b.is_open for b in self._breakers):
                if retries_left == 0:
                    return decision
                retries_left -= 1
            log.warning("judge unavailable while judging %s; judging it again when the judge is back", pair_id)

    async def on_pair(self, raw: bytes | None, headers: HeadersIn, origin: Origin) -> list[Outgoing]:
        tracer = self.telemetry.tracer
        with tracer.start_as_current_span(
            "pairjudge.primary", context=extract_context(headers), kind=SpanKind.CONSUMER
        ) as span:
            span.set_attribute("pairjudge.stage", "primary")
            await self.policy.ready.wait()
            try:
                pair = decode(CandidatePair, raw, max_bytes=self.max_event_bytes)
            except InputRejected as exc:
                return [self._dead_letter(span, "decode", exc.reason, exc.detail, raw, origin)]
            span.set_attribute("pairjudge.pair_id", pair.pair_id)
            try:
                check_pair(pair, self.policy.current, self.catalog)
            except InputRejected as exc:
                return [self._dead_letter(span, "validate", exc.reason, exc.detail, raw, origin)]
            try:
                decision = await self._with_backpressure(
                    lambda: self._panel.judge_primary(pair, self.policy.current, self.catalog), pair.pair_id
                )
            except Exception as exc:
                log.exception("judging pair %s failed", pair.pair_id)
                span.record_exception(exc)
                return [self._dead_letter(span, "judge", "internal_error", f"{type(exc).__name__}: {exc}", raw, origin)]
            return self._publish(span, decision)

    async def on_tiebreak(self, raw: bytes | None, headers: HeadersIn, origin: Origin) -> list[Outgoing]:
        tracer = self.telemetry.tracer
        with tracer.start_as_current_span(
            "pairjudge.tiebreak", context=extract_context(headers), kind=SpanKind.CONSUMER
        ) as span:
            span.set_attribute("pairjudge.stage", "tiebreak")
            await self.policy.ready.wait()
            try:
                request = decode(TieBreakRequest, raw, max_bytes=self.max_event_bytes * 4)
            except InputRejected as exc:
                return [self._dead_letter(span, "tiebreak", exc.reason, exc.detail, raw, origin)]
            span.set_attribute("pairjudge.pair_id", request.pair_id)
            try:
                decision = await self._with_backpressure(
                    lambda: resolve_tiebreak(request, self._panel.tiebreak, self.policy.current), request.pair_id
                )
            except Exception as exc:
                log.exception("tie-break of pair %s failed", request.pair_id)
                span.record_exception(exc)
                return [
                    self._dead_letter(span, "tiebreak", "internal_error", f"{type(exc).__name__}: {exc}", raw, origin)
                ]
            return self._publish(span, decision)

    def _publish(self, span: Span, decision: Decision) -> list[Outgoing]:
        trace_id = trace_id_of(span)
        self.telemetry.record_decision(span, decision)
        headers = inject_headers()
        outcome = decision.outcome.model_copy(update={"trace_id": trace_id})
        out = [Outgoing(_kind_of(outcome), outcome.pair_id.encode(), encode(outcome), headers)]
        if decision.audit_copy is not None:
            audit = decision.audit_copy.model_copy(update={"trace_id": trace_id})
            out.append(Outgoing("review", audit.pair_id.encode(), encode(audit), headers))
        return out

    def _dead_letter(
        self,
        span: Span,
        stage: Literal["decode", "validate", "judge", "tiebreak"],
        reason: str,
        detail: str,
        raw: bytes | None,
        origin: Origin,
    ) -> Outgoing:
        span.set_status(Status(StatusCode.ERROR, reason))
        span.set_attributes({"pairjudge.outcome": "deadletter", "pairjudge.reason": reason})
        self.telemetry.instruments.dead_letters.add(1, {"pairjudge.stage": stage, "pairjudge.reason": reason})
        pair_id = _guess_pair_id(raw)
        letter = DeadLetter(
            stage=stage,
            reason=reason,
            error=detail,
            original=raw or b"",
            pair_id=pair_id,
            topic=origin.topic,
            partition=origin.partition,
            offset=origin.offset,
        )
        log.warning("dead-lettered %s at %s: %s", pair_id or "an event", stage, reason)
        key = pair_id.encode() if pair_id else (origin.key or b"")
        return Outgoing("deadletter", key, encode(letter), inject_headers())


def _kind_of(outcome: PairVerdict | TieBreakRequest | ReviewRequest) -> TopicKind:
    if isinstance(outcome, PairVerdict):
        return "verdicts"
    if isinstance(outcome, TieBreakRequest):
        return "tiebreak"
    return "review"
