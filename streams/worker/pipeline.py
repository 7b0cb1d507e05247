"""The stage handlers, free of Faust: bytes and headers in, messages to publish out.

``Pipeline.handle`` takes bytes (the worker); ``Pipeline.decide`` takes the decoded input (the Python API)
and is the same stage after decoding. Both act on the core's ``Decision`` by its disposition alone: publish
its outcome, judge again while the judge is down, or dead-letter a refusal.

The Faust agents (``streams.worker.delivery``) are thin loops around these, so the same handlers serve the
worker, ``agent.test_context()`` tests, and anything else that moves bytes. Every input ends in at
least one outgoing message: a verdict, a tie-break request, a review request or a dead letter; a
redelivered one whose outcome the broker already has ends in none.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from pairjudge.agents import (
    Decision,
    InputRejected,
    resolve_tiebreak,
)
from pairjudge.agents.audit import record_for
from pairjudge.agents.cost import known_usd
from pairjudge.agents.disposition import DeadLetterPair, RetryLater
from pairjudge.agents.sampling import still_sampled
from pairjudge.schemas import Alert, AlertKind, CandidatePair, InlineRubric, ReviewRequest, TieBreakRequest
from pairjudge.schemas.kinds import DeadLetterStage as DeadLetterStage  # re-exported, with the two below
from pairjudge.schemas.kinds import Stage as Stage
from pairjudge.schemas.kinds import TopicKind as TopicKind
from pairjudge.schemas.kinds import WorkerStage
from pairjudge.schemas.outcomes import OUTCOMES, decided_kind
from pairjudge.streams.control.live import PolicyHolder
from pairjudge.streams.judges.panel import JudgePanel
from pairjudge.streams.kafka.codecs import decode, encode
from pairjudge.streams.kafka.dead_letters import build_dead_letter
from pairjudge.streams.security.redaction_hook import EventRedactor
from pairjudge.streams.telemetry.tracing import Telemetry, extract_context, inject_headers, trace_id_of
from pairjudge.streams.worker.error_budget import ErrorBudget, WorkerBroken

if TYPE_CHECKING:
    from pairjudge.streams.worker.spend import SpendTracker

log = logging.getLogger(__name__)

#: Extra attempts for a pair that failed for lack of a judge while no breaker was open yet.
OUTAGE_RETRIES = 2

#: At most one alert per judge series this often while its requests keep being refused.
ALERT_EVERY_S = 60.0
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
    #: The event ``value`` encodes, when the stage built it (never stored, never compared): a consumer on this
    #: worker (the audit's join, ``Delivery``) takes it as it is instead of decoding the bytes again.
    event: object = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class StageResult:
    """What a stage will publish for one input, and whether it must be recorded first.

    ``pair_id`` is set once the input decoded: the outcome is then recorded under it before it is
    published (``streams.worker.published``). ``replayed`` marks an outcome recalled for a redelivered input.
    """

    outgoing: list[Outgoing]
    pair_id: str | None = None
    replayed: bool = False
    #: Published with the outcome but never recorded or replayed: alerts are about the system, not the pair.
    alerts: list[Outgoing] = field(default_factory=list)


class OutcomeStore(Protocol):
    """Where a stage finds what it already published for a pair (``streams.worker.published.OutcomeTables``).

    ``claim`` returns the recorded outcome, or None when this delivery is to decide; the edge then
    records the outcome (or releases the claim) once it is published or abandoned."""

    async def claim(self, stage: Stage, pair_id: str) -> list[Outgoing] | None: ...

    def release(self, stage: Stage, pair_id: str) -> None: ...


class Pipeline:
    def __init__(
        self,
        judges: JudgePanel,
        policy: PolicyHolder,
        telemetry: Telemetry,
        catalog: Mapping[str, InlineRubric],
        max_event_bytes: int,
        outcomes: OutcomeStore | None = None,
        redactor: EventRedactor | None = None,
        errors: ErrorBudget | None = None,
        spend: SpendTracker | None = None,
        alert_sink: Callable[[Alert], None] | None = None,
        on_decision: Callable[[Decision], None] | None = None,
        judges_checked: asyncio.Event | None = None,
    ) -> None:
        self.outcomes = outcomes
        #: Unexpected errors tolerated before the worker stops (``streams.worker.error_budget``); None: never stop
        #: (the in-process API, whose every failure is an outcome).
        self.errors = errors
        #: Redacts dead letters and review requests before they are published (``streams.security.redaction_hook``).
        self.redactor = redactor
        #: Set once every judge's credentials were checked at start-up (``streams.judges.preflight``); None: nothing
        #: to check, set from the start.
        if judges_checked is None:
            judges_checked = asyncio.Event()
            judges_checked.set()
        self.judges_checked = judges_checked
        #: (alert kind, series) -> (count since the last alert, when it was raised): alerts are throttled.
        self._alerted: dict[tuple[str, str], tuple[int, float]] = {}
        #: Also told of every alert the stages raise (the alert webhook), without waiting.
        self.alert_sink = alert_sink
        #: Told of every freshly decided outcome before it is published (never of a replay): the audit
        #: label budget's rate meter (``streams.audit.budget``).
        self.on_decision = on_decision
        #: The spending caps' ledger and gate (``streams.worker.spend``); None: spend is neither counted nor capped.
        self.spend = spend
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
            if not isinstance(decision.disposition, RetryLater) or not self._breakers:
                return decision
            if not any(b.is_open for b in self._breakers):
                if retries_left == 0:
                    return decision
                retries_left -= 1
            log.warning("judge unavailable while judging %s; judging it again when the judge is back", pair_id)

    async def handle(
        self, stage: Stage, raw: bytes | None, headers: HeadersIn, origin: Origin, *, after_crash: bool = False
    ) -> StageResult:
        """One input of ``stage`` ("primary": a candidate pair; "tiebreak": a tie-break request), as bytes: decoded,
        then decided as :meth:`decide` decides it. Never raises for an input that does not decode: it ends in a
        dead letter.

        ``after_crash``: this input already stopped a worker once; an unexpected error on it stops this one
        too (``WorkerBroken``) instead of counting as an isolated bug.
        """
        model: type[CandidatePair | TieBreakRequest] = CandidatePair if stage == "primary" else TieBreakRequest
        letter_stage: DeadLetterStage = "decode" if stage == "primary" else "tiebreak"
        with self._stage_span(stage, headers) as span:
            await self._ready()
            try:
                item = decode(model, raw, max_bytes=self._max_bytes(stage))
            except InputRejected as exc:
                return StageResult([self._dead_letter(span, letter_stage, exc.reason, exc.detail, raw, origin)])
            # Blind on purpose: whatever a bug raises is counted and logged in _unexpected (the error budget).
            except Exception as exc:  # noqa: BLE001
                return self._unexpected(stage, span, exc, raw, origin, None, after_crash)
            return await self._decided(stage, span, item, raw, origin, after_crash)

    async def decide(
        self,
        stage: Stage,
        item: CandidatePair | TieBreakRequest,
        raw: bytes,
        headers: HeadersIn = None,
        origin: Origin = Origin(),
    ) -> StageResult:
        """The stage for an input already decoded (the Python API's path): the same checks, judging, spending
        caps, dispositions and events as :meth:`handle`, whose outgoing messages carry their events typed
        (``Outgoing.event``) beside their bytes. ``raw`` is the input as it would travel: its size is bounded as
        the worker bounds it, and it is the original a dead letter keeps."""
        if len(raw) > self._max_bytes(stage):
            return await self.handle(stage, raw, headers, origin)  # dead-lettered as the worker would
        with self._stage_span(stage, headers) as span:
            await self._ready()
            return await self._decided(stage, span, item, raw, origin, after_crash=False)

    async def on_pair(self, raw: bytes | None, headers: HeadersIn, origin: Origin) -> StageResult:
        return await self.handle("primary", raw, headers, origin)

    async def on_tiebreak(self, raw: bytes | None, headers: HeadersIn, origin: Origin) -> StageResult:
        return await self.handle("tiebreak", raw, headers, origin)

    def _max_bytes(self, stage: Stage) -> int:
        # A tie-break request carries the pair and both primary orderings, so it may be larger.
        return self.max_event_bytes if stage == "primary" else self.max_event_bytes * 4

    @contextlib.contextmanager
    def _stage_span(self, stage: Stage, headers: HeadersIn) -> Iterator[Span]:
        with self.telemetry.tracer.start_as_current_span(
            f"pairjudge.{stage}", context=extract_context(headers), kind=SpanKind.CONSUMER
        ) as span:
            span.set_attribute("pairjudge.stage", stage)
            yield span

    async def _ready(self) -> None:
        await self.policy.ready.wait()
        await self.judges_checked.wait()

    async def _judge(self, pair: CandidatePair) -> Decision:
        # The core checks the pair (InputRejected) before any judge call; nothing to check here.
        return await self._with_backpressure(
            lambda: self._panel.judge_primary(pair, self.policy.current, self.catalog), pair.pair_id
        )

    async def _resolve(self, request: TieBreakRequest) -> Decision:
        return await self._with_backpressure(
            lambda: resolve_tiebreak(request, self._panel.tiebreak, self.policy.current), request.pair_id
        )

    async def _decided(
        self,
        stage: Stage,
        span: Span,
        item: CandidatePair | TieBreakRequest,
        raw: bytes | None,
        origin: Origin,
        after_crash: bool,
    ) -> StageResult:
        """One decoded input, the same for both stages: replay a recorded outcome, or decide and act on the
        decision's disposition.

        Never raises for a bad input or a failing judge: those end in a dead letter. An unexpected error
        (a bug) on one pair dead-letters it as ``internal_error`` with an alert; in a run, it raises
        ``WorkerBroken`` and the edge stops the worker without committing the input.
        """
        #: Where a pair that decoded but could not be judged is dead-lettered.
        where: DeadLetterStage = "judge" if stage == "primary" else "tiebreak"
        pair_id = item.pair_id
        span.set_attribute("pairjudge.pair_id", pair_id)
        recorded = await self.outcomes.claim(stage, pair_id) if self.outcomes is not None else None
        if recorded is not None:
            # Redelivered (a rebalance, a crash, a producer retry): the same outcome again, unjudged; or
            # nothing at all when the broker already has it all (streams.worker.published).
            span.set_attributes(
                {
                    "pairjudge.outcome": "replayed",
                    "pairjudge.replayed": True,
                    "pairjudge.already_published": not recorded,
                }
            )
            self.telemetry.instruments.replays.add(1, {"pairjudge.stage": stage})
            return StageResult(recorded, pair_id=pair_id, replayed=True)
        #: Alerts raised on the way, published with the outcome (a spending cap's).
        alerts: list[Outgoing] = []
        try:
            if self.spend is not None and isinstance(item, CandidatePair):
                capped, alerts = await self._over_budget(span, item, raw, origin)
                if capped is not None:
                    return capped
            decision = await (self._judge(item) if isinstance(item, CandidatePair) else self._resolve(item))
            if self.spend is not None:
                self.spend.record(_experiment_of(item), known_usd(decision.calls))
            refused = decision.disposition
            if isinstance(refused, DeadLetterPair):
                # A 4xx no retry fixes (a bad key, a prompt over the context length): not a reviewer's
                # problem. The pair waits in the dead-letter topic, unrecorded (streams.worker.delivery),
                # until `pairjudge deadletter replay` re-publishes it once the cause is fixed.
                letter = self._dead_letter(span, where, refused.kind, refused.detail, raw, origin)
                rejected = self._rejection_alert(decision, refused)
                return StageResult([letter], pair_id=pair_id, alerts=alerts + rejected)
            return StageResult(self._publish(span, decision, item), pair_id=pair_id, alerts=alerts)
        except asyncio.CancelledError:
            if self.outcomes is not None:
                self.outcomes.release(stage, pair_id)
            raise
        except InputRejected as exc:
            letter = self._dead_letter(span, "validate", exc.reason, exc.detail, raw, origin)
            return StageResult([letter], pair_id=pair_id)
        except Exception as exc:  # noqa: BLE001  # a bug: counted and logged in _unexpected
            try:
                return self._unexpected(stage, span, exc, raw, origin, pair_id, after_crash)
            except WorkerBroken:
                if self.outcomes is not None:
                    self.outcomes.release(stage, pair_id)
                raise

    async def _over_budget(
        self, span: Span, pair: CandidatePair, raw: bytes | None, origin: Origin
    ) -> tuple[StageResult | None, list[Outgoing]]:
        """What a new pair over a spending cap meets (``agents.spend``): its outcome (the "spend_cap" alert in it),
        or None to judge it with the alerts to publish beside its outcome. The alert comes at most once a
        minute per scope, on every worker.

        ``queue`` waits here, holding the judging slot, until the cap no longer holds the pair back; ``review``
        and ``sample`` (for the pairs it does not keep) end the pair without a judge call."""
        assert self.spend is not None
        caps = self.policy.current.spend_caps()
        reached = await self.spend.reached_now(caps, pair.metadata.experiment_id)
        if reached is None:
            return None, []
        alerts = self._alert("spend_cap", f"spend:{reached.scope}", "pair(s) over a spending cap", reached.describe)
        if alerts:
            # On /metrics too (pairjudge_alerts_total), for the PairjudgeSpendCapReached rule.
            self.telemetry.instruments.alerts.add(1, {"pairjudge.alert": "spend_cap"})
        span.set_attribute("pairjudge.spend_capped", reached.scope)
        if caps.action == "queue":
            log.warning("spend: %s; pair %s waits for budget", reached.describe, pair.pair_id)
            await self.spend.wait_for_budget(lambda: self.policy.current.spend_caps(), pair.metadata.experiment_id)
            return None, alerts
        if caps.action == "sample":
            if still_sampled(pair.pair_id, caps.sample_share):
                return None, alerts
            detail = f"{reached.describe}; set aside by spend_action 'sample' (replay it once there is budget)"
            letter = self._dead_letter(span, "judge", "spend_capped", detail, raw, origin)
            return StageResult([letter], pair_id=pair.pair_id, alerts=alerts), []
        decision = self._panel.capped(pair, self.policy.current, self.catalog)
        return StageResult(self._publish(span, decision, pair), pair_id=pair.pair_id, alerts=alerts), []

    def _unexpected(
        self,
        stage: Stage,
        span: Span,
        exc: Exception,
        raw: bytes | None,
        origin: Origin,
        pair_id: str | None,
        after_crash: bool,
    ) -> StageResult:
        """A bug met on one input: its ``internal_error`` dead letter and an alert, or ``WorkerBroken`` when
        the error budget is spent or this input already stopped a worker."""
        span.record_exception(exc)
        what = describe_error(exc)
        at = f"{origin.topic}[{origin.partition}]@{origin.offset}"
        self.telemetry.instruments.internal_errors.add(1, {"pairjudge.stage": stage})
        if after_crash:
            raise WorkerBroken(f"{at} stopped a worker before and raised again ({what})") from exc
        if self.errors is not None and not self.errors.charge(what):
            raise WorkerBroken(f"a run of unexpected errors: {self.errors.spent}") from exc
        log.error(
            "%s stage failed on %s (%s); dead-lettered as internal_error", stage, pair_id or at, what, exc_info=exc
        )
        where: DeadLetterStage = "judge" if stage == "primary" else "tiebreak"
        letter = self._dead_letter(span, where, "internal_error", what, raw, origin)
        alert = self._alert("internal_error", f"worker:{stage}", f"unexpected error(s) in the {stage} stage", what)
        return StageResult([letter], pair_id=pair_id, alerts=alert)

    def _rejection_alert(self, decision: Decision, refused: DeadLetterPair) -> list[Outgoing]:
        """An ``Alert`` for a refused judge request, at most one per judge per ``ALERT_EVERY_S``."""
        judge = decision.outcome.judge if isinstance(decision.outcome, ReviewRequest) else None
        series = f"{judge.provider}:{judge.model}:{judge.version}" if judge is not None else "judge"
        latest = f"latest{_status_note(refused.status)}: {refused.detail}"
        alerts = self._alert(refused.kind, series, "request(s) refused by the judge", latest)
        if alerts:
            log.error("judge %s refused a request: %s", series, refused.detail)
        return alerts

    def _alert(self, kind: AlertKind, series: str, counted: str, latest: str) -> list[Outgoing]:
        """An ``Alert`` of ``kind`` for ``series``, at most one per ``ALERT_EVERY_S``: how many ``counted`` since
        the last one, and the ``latest``."""
        now = time.monotonic()
        count, last = self._alerted.get((kind, series), (0, -ALERT_EVERY_S))
        count += 1
        if now - last < ALERT_EVERY_S:
            self._alerted[(kind, series)] = (count, last)
            return []
        self._alerted[(kind, series)] = (0, now)
        alert = Alert(
            kind=kind,
            series=series,
            message=f"{count} {counted} since the last alert; {latest}"[:2_000],
            value=float(count),
            threshold=0.0,
        )
        if self.alert_sink is not None:
            self.alert_sink(alert)
        return [Outgoing("audit", series.encode(), encode(alert), inject_headers())]

    def undeliverable(self, stage: WorkerStage, raw: bytes | None, origin: Origin, detail: str) -> Outgoing:
        """A dead letter for an input whose outcome the broker refused (too large, say)."""
        return self._edge_letter(stage, "outcome_undeliverable", raw, origin, detail)

    def crashed_worker(self, stage: WorkerStage, raw: bytes | None, origin: Origin, detail: str) -> Outgoing:
        """A dead letter for an input that stopped a worker ``crash_loop_limit`` times (a poison pill)."""
        return self._edge_letter(stage, "crashed_worker", raw, origin, detail)

    def _edge_letter(self, stage: WorkerStage, reason: str, raw: bytes | None, origin: Origin, detail: str) -> Outgoing:
        with self.telemetry.tracer.start_as_current_span(f"pairjudge.{stage}.{reason}") as span:
            where: DeadLetterStage = "judge" if stage == "primary" else stage
            return self._dead_letter(span, where, reason, detail, raw, origin)

    def _publish(self, span: Span, decision: Decision, judged: CandidatePair | TieBreakRequest) -> list[Outgoing]:
        """The outcome, its audit copy if sampled, and the decision's record for the drift audit.

        The record travels with the outcome (recorded and replayed with it): the audit join counts
        each pair's stage once, so a replay is harmless and a crash loses no record.
        """
        trace_id = trace_id_of(span)
        # The risk level whose thresholds routed the pair (docs/guides/risk-levels.md).
        pair = judged if isinstance(judged, CandidatePair) else judged.pair
        span.set_attribute("pairjudge.risk_level", pair.risk)
        self.telemetry.record_decision(span, decision)
        if self.on_decision is not None:
            self.on_decision(decision)
        headers = inject_headers()
        outcome = decision.outcome.model_copy(update={"trace_id": trace_id})
        if self.redactor is not None and isinstance(outcome, ReviewRequest):
            outcome = self.redactor.review_request(outcome)
        topic = OUTCOMES[decided_kind(outcome)].topic
        out = [Outgoing(topic, outcome.pair_id.encode(), encode(outcome), headers, event=outcome)]
        if decision.audit_copy is not None:
            audit = decision.audit_copy.model_copy(update={"trace_id": trace_id})
            if self.redactor is not None:
                audit = self.redactor.review_request(audit)
            out.append(Outgoing("review", audit.pair_id.encode(), encode(audit), headers, event=audit))
        record = record_for(decision, judged, self.catalog)
        if record is not None:
            out.append(Outgoing("decisions", record.pair_id.encode(), encode(record), headers, event=record))
        return out

    def _dead_letter(
        self,
        span: Span,
        stage: DeadLetterStage,
        reason: str,
        detail: str,
        raw: bytes | None,
        origin: Origin,
    ) -> Outgoing:
        span.set_status(Status(StatusCode.ERROR, reason))
        span.set_attributes({"pairjudge.outcome": "deadletter", "pairjudge.reason": reason})
        return dead_letter(self.telemetry, stage, reason, detail, raw, origin, redactor=self.redactor)


def dead_letter(
    telemetry: Telemetry,
    stage: DeadLetterStage,
    reason: str,
    detail: str,
    raw: bytes | None,
    origin: Origin,
    *,
    redactor: EventRedactor | None = None,
) -> Outgoing:
    """The dead letter for ``raw`` read at ``origin``, counted and logged, ready to publish (redacted first
    when a ``redactor`` is given)."""
    telemetry.instruments.dead_letters.add(1, {"pairjudge.stage": stage, "pairjudge.reason": reason})
    # Bounded whatever the input: the pair-id guess cannot recurse or raise, and the letter (a head
    # of the original when the whole would not fit) stays under the producer's request limit.
    letter = build_dead_letter(
        stage=stage,
        reason=reason,
        detail=detail,
        raw=raw,
        topic=origin.topic,
        partition=origin.partition,
        offset=origin.offset,
        key=origin.key,
        redactor=redactor,
    )
    log.warning("dead-lettered %s at %s from %s: %s", letter.pair_id or "an event", stage, origin.topic, reason)
    return Outgoing("deadletter", letter.key, letter.value, inject_headers(), event=letter.event)


def describe_error(exc: BaseException) -> str:
    """``KeyError: 'x'``: the error an operator needs, also from inside the task group that judges both orders
    (whose own message only says it had sub-exceptions)."""
    leaves: list[BaseException] = []

    def walk(e: BaseException) -> None:
        if isinstance(e, BaseExceptionGroup):
            for inner in e.exceptions:
                walk(inner)
        else:
            leaves.append(e)

    walk(exc)
    first = leaves[0] if leaves else exc
    more = f" (and {len(leaves) - 1} more)" if len(leaves) > 1 else ""
    return f"{type(first).__name__}: {first}{more}"


def _experiment_of(item: CandidatePair | TieBreakRequest) -> str | None:
    pair = item if isinstance(item, CandidatePair) else item.pair
    return pair.metadata.experiment_id


def _status_note(status: int | None) -> str:
    """`` (HTTP 401: authentication; every pair fails alike until it is fixed)`` and the like, from the
    judge's own status (``JudgeError.status``): what an operator needs to know first about a refusal."""
    if status is None:
        return ""
    if status in (401, 403):
        return f" (HTTP {status}: authentication; every pair fails alike until it is fixed)"
    return f" (HTTP {status}: this request refused)"
