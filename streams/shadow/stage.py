"""The shadow stage's handler: one capture in, one pair per experiment it joins out, exactly once per experiment.

Each (capture, experiment) is one outcome of the ``shadow`` stage in the outcome tables
(``streams.worker.published``), keyed by the pair id it makes (``agents.shadow.shadow_pair_id``), and goes
through ``Delivery.deliver`` like a judging stage's outcome: the pair is recorded (and the broker has the record)
before it is published, then marked published. So a redelivered capture whose pair was recorded publishes the
recorded bytes again, or nothing, and never asks the challenger again.

Before the challenger is asked, an asking mark is recorded (``OutcomeTables.mark_asking``): a redelivery that finds
it knows the first ask was cut off by a crash or a rebalance, asks again (nothing was recorded, so nothing can be
replayed) and counts it in ``pairjudge.shadow.repeated_asks``. Those are the only repeated asks.

Every capture ends in a pair or a dead letter per experiment (stage ``shadow``, the capture's original bytes,
the experiment named in the detail):

* the capture does not decode: ``decode``'s reasons;
* the judge cannot see it whole, or one side's reply was cut off by its token limit: ``capture_unseen_<kind>``,
  ``capture_not_a_question``, ``champion_cut_off``, ``challenger_cut_off``, ``champion_empty``,
  ``capture_not_a_pair`` (set aside, counted in ``pairjudge.shadow.set_aside``; never judged blind);
* the challenger refused, was filtered, answered nothing or could not be read after every ask:
  ``challenger_refused``, ``challenger_filtered``, ``challenger_empty``, ``challenger_unreadable``; stayed down:
  ``challenger_unavailable``; refused the request outright (a 4xx): ``challenger_rejected``;
* the experiment is over a spending cap and ``spend_action`` is not ``queue``: ``spend_capped``.

A dead letter is not recorded (as in the judging stages): ``pairjudge deadletter replay`` re-publishes the capture
to ``pairjudge.captures``, and only the experiments without a recorded pair ask again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pairjudge.agents import InputRejected
from pairjudge.agents.shadow import (
    SetAside,
    build_pair,
    challenger_request,
    challenger_usd,
    cut_off,
    joins,
    set_aside,
    shadow_pair_id,
)
from pairjudge.schemas.captures import Capture
from pairjudge.schemas.experiments import Experiment
from pairjudge.streams.config.experiments import load_experiments
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.live import PolicyHolder
from pairjudge.streams.faust_compat.inflight import InFlight
from pairjudge.streams.kafka.codecs import decode, encode
from pairjudge.streams.security.redaction_hook import EventRedactor
from pairjudge.streams.shadow.challenger import ChallengerClient, ChallengerFailed
from pairjudge.streams.telemetry.tracing import Telemetry, extract_context, inject_headers
from pairjudge.streams.worker.delivery import Delivery
from pairjudge.streams.worker.pipeline import Origin, Outgoing, StageResult, dead_letter
from pairjudge.streams.worker.published import OutcomeTables
from pairjudge.streams.worker.spend import SpendTracker

log = logging.getLogger(__name__)

STAGE: Final = "shadow"


class ShadowStage:
    """The shadow stage's handler (``process``, for ``Delivery.consume``) and its challengers."""

    def __init__(
        self,
        *,
        experiments: Sequence[Experiment],
        challengers: Mapping[str, ChallengerClient],
        delivery: Delivery,
        outcomes: OutcomeTables,
        inflight: InFlight,
        policy: PolicyHolder,
        telemetry: Telemetry,
        max_event_bytes: int,
        crash_loop_limit: int,
        spend: SpendTracker | None = None,
        redactor: EventRedactor | None = None,
    ) -> None:
        self.experiments = tuple(experiments)
        self.challengers = dict(challengers)
        self._delivery = delivery
        self._outcomes = outcomes
        self._inflight = inflight
        self._policy = policy
        self._telemetry = telemetry
        self._max_event_bytes = max_event_bytes
        self._crash_loop_limit = crash_loop_limit
        self._spend = spend
        self._redactor = redactor

    async def aclose(self) -> None:
        for client in self.challengers.values():
            await client.aclose()

    async def process(self, event: Any, origin: Origin) -> bool:
        """One capture: a pair or a dead letter for each experiment it joins, each delivered before the next."""
        raw: bytes | None = event.value
        with self._inflight.pair():
            await self._policy.ready.wait()
            marks = self._outcomes.crashes(STAGE, origin)
            if marks >= self._crash_loop_limit:
                detail = f"this capture stopped a worker {marks} times (crash_loop_limit {self._crash_loop_limit})"
                await self._delivery.publish([self._letter("crashed_worker", detail, raw, origin)])
                return False
            try:
                capture = decode(Capture, raw, max_bytes=self._max_event_bytes)
            except InputRejected as exc:
                await self._delivery.publish([self._letter(exc.reason, exc.detail, raw, origin)])
                return False
            tracer = self._telemetry.tracer
            paused, shares = self._policy.current.shadow_live()
            # The app's own trace, when the capture carries it: the challenger's call and the judging join it.
            parent = extract_context(_trace_headers(capture) or event.headers)
            for experiment in joins(capture, self.experiments, paused=paused, shares=shares):
                with tracer.start_as_current_span("pairjudge.shadow", context=parent) as span:
                    span.set_attributes(
                        {
                            "pairjudge.stage": STAGE,
                            "pairjudge.experiment": experiment.id,
                            "pairjudge.capture_id": capture.capture_id,
                        }
                    )
                    await self._one(capture, experiment, raw, origin)
        return False

    async def _one(self, capture: Capture, experiment: Experiment, raw: bytes | None, origin: Origin) -> None:
        pair_id = shadow_pair_id(capture.capture_id, experiment.id)
        recorded = await self._outcomes.claim(STAGE, pair_id)
        if recorded is not None:
            # Redelivered: the recorded pair again (or nothing, when the broker has it), the challenger unasked.
            self._telemetry.instruments.replays.add(1, {"pairjudge.stage": STAGE})
            await self._delivery.deliver(STAGE, StageResult(recorded, pair_id=pair_id, replayed=True), raw, origin)
            return
        try:
            outgoing = await self._inflight.judging(self._decide(capture, experiment, pair_id, raw, origin))
        except BaseException:
            self._outcomes.release(STAGE, pair_id)
            raise
        await self._delivery.deliver(STAGE, StageResult([outgoing], pair_id=pair_id), raw, origin)
        if outgoing.kind == "deadletter":
            # Not an outcome: a replay of the letter asks again, and that is no repeat after a crash.
            await self._outcomes.clear_asking(STAGE, pair_id, origin.partition or 0)

    async def _decide(
        self, capture: Capture, experiment: Experiment, pair_id: str, raw: bytes | None, origin: Origin
    ) -> Outgoing:
        """The pair of (capture, experiment), or its dead letter."""
        about = f"experiment {experiment.id}, capture {capture.capture_id}"
        unseen = set_aside(capture)
        if unseen is not None:
            return self._set_aside(unseen, about, experiment, raw, origin)
        capped = await self._over_budget(experiment)
        if capped is not None:
            return self._letter("spend_capped", f"{about}: {capped}", raw, origin)
        partition = origin.partition or 0
        if self._outcomes.was_asking(STAGE, pair_id):
            # The first ask was in flight at a crash or a rebalance: at-least-once, counted.
            self._telemetry.instruments.shadow_repeats.add(1, {"pairjudge.experiment": experiment.id})
        await self._outcomes.mark_asking(STAGE, pair_id, partition)
        client = self.challengers[experiment.id]
        try:
            reply, asks = await client.ask(challenger_request(capture, experiment))
        except ChallengerFailed as exc:
            self._count_asks(experiment, exc.asks, exc.reason)
            return self._letter(exc.reason, f"{about}: {exc.detail}", raw, origin)
        self._count_asks(experiment, asks, "ok")
        if self._spend is not None:
            self._spend.record(experiment.id, challenger_usd(experiment, reply))
        try:
            uneven = cut_off(capture.response.finish_reason, reply.finish_reason)
            if uneven is not None:
                raise uneven
            pair = build_pair(capture, experiment, reply)
        except SetAside as exc:
            return self._set_aside(exc, about, experiment, raw, origin)
        return Outgoing("pairs", pair.pair_id.encode(), encode(pair), inject_headers(), event=pair)

    def _count_asks(self, experiment: Experiment, asks: int, result: str) -> None:
        self._telemetry.instruments.shadow_asks.add(
            asks, {"pairjudge.experiment": experiment.id, "pairjudge.result": result}
        )

    async def _over_budget(self, experiment: Experiment) -> str | None:
        """Why the experiment's challenger may not be asked now (a spending cap), or None; ``queue`` waits here."""
        if self._spend is None:
            return None
        caps = self._policy.current.spend_caps()
        reached = await self._spend.reached_now(caps, experiment.id)
        if reached is None:
            return None
        if caps.action == "queue":
            await self._spend.wait_for_budget(lambda: self._policy.current.spend_caps(), experiment.id)
            return None
        return f"{reached.describe}; the challenger was not asked (replay the capture once there is budget)"

    def _set_aside(
        self, why: SetAside, about: str, experiment: Experiment, raw: bytes | None, origin: Origin
    ) -> Outgoing:
        self._telemetry.instruments.shadow_set_aside.add(
            1, {"pairjudge.experiment": experiment.id, "pairjudge.reason": why.reason}
        )
        return self._letter(why.reason, f"{about}: {why.detail}", raw, origin)

    def _letter(self, reason: str, detail: str, raw: bytes | None, origin: Origin) -> Outgoing:
        return dead_letter(self._telemetry, STAGE, reason, detail, raw, origin, redactor=self._redactor)


def _trace_headers(capture: Capture) -> list[tuple[str, bytes]]:
    """The capture's W3C trace context as headers (none when it carries none)."""
    if capture.trace is None:
        return []
    headers = [("traceparent", capture.trace.traceparent.encode("ascii"))]
    if capture.trace.tracestate:
        headers.append(("tracestate", capture.trace.tracestate.encode("latin-1")))
    return headers


def build_shadow_stage(
    settings: Settings,
    *,
    delivery: Delivery,
    outcomes: OutcomeTables,
    inflight: InFlight,
    policy: PolicyHolder,
    telemetry: Telemetry,
    spend: SpendTracker | None,
    redactor: EventRedactor | None,
) -> ShadowStage:
    """The stage with the experiments of ``settings.shadow.experiments_file`` and a client per challenger."""
    experiments = load_experiments(settings.shadow.experiments_file)
    challengers = {e.id: ChallengerClient(e.challenger, settings.shadow) for e in experiments}
    if experiments:
        log.info("shadow stage: experiments %s", ", ".join(e.id for e in experiments))
    return ShadowStage(
        experiments=experiments,
        challengers=challengers,
        delivery=delivery,
        outcomes=outcomes,
        inflight=inflight,
        policy=policy,
        telemetry=telemetry,
        max_event_bytes=settings.max_event_bytes,
        crash_loop_limit=settings.worker.crash_loop_limit,
        spend=spend,
        redactor=redactor,
    )
