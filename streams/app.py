"""The composition root: settings in, a wired Faust app out.

``create_app(settings)`` builds the judge, the policy, telemetry, the topics and the agents. Nothing
else reads settings or builds these parts, so a test can hand in a scripted judge and an in-memory
span exporter and get the same wiring the worker runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import tomllib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import faust
from aiokafka.errors import MessageSizeTooLargeError, RecordTooLargeError
from faust.exceptions import ConsumerNotStarted
from pydantic import TypeAdapter

from pairjudge.agents.judge import Judge
from pairjudge.schemas import InlineRubric
from pairjudge.streams.audit.budget import UPDATE_EVERY_S, AuditBudget, observe_scale, owned_input_partitions
from pairjudge.streams.audit.handlers import Audit, wire_audit
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.live import PolicyHolder
from pairjudge.streams.control.live import follow_control as follow_control_topic
from pairjudge.streams.control.signing import signer_from_settings
from pairjudge.streams.faust_compat.offsets import install_commit_ledger, mark_done
from pairjudge.streams.faust_compat.recovery_watch import records_left
from pairjudge.streams.faust_compat.shutdown import GracefulApp
from pairjudge.streams.judges.factory import JudgeStack, build_judge_stack
from pairjudge.streams.judges.preflight import JudgeAuthError, preflight_all
from pairjudge.streams.kafka.topics import KINDS
from pairjudge.streams.scores.handlers import Scores, observe_scores, wire_scores
from pairjudge.streams.security.kafka_clients import faust_credentials
from pairjudge.streams.security.redaction_hook import build_redactor
from pairjudge.streams.telemetry.alerts import AlertWebhook
from pairjudge.streams.telemetry.tracing import Telemetry
from pairjudge.streams.worker.health_server import PrometheusMetrics, WorkerHealth
from pairjudge.streams.worker.pipeline import JudgePanel, Origin, Outgoing, Pipeline, Stage, StageResult
from pairjudge.streams.worker.published import OutcomeTables
from pairjudge.streams.worker.shutdown import HandedBack

log = logging.getLogger(__name__)


@dataclass
class PairjudgeApp:
    faust_app: faust.App
    pipeline: Pipeline
    topics: dict[str, faust.TopicT]
    judge_agent: Any
    tiebreak_agent: Any
    telemetry: Telemetry
    settings: Settings
    outcomes: OutcomeTables
    stacks: tuple[JudgeStack, ...] = ()
    #: The drift audit's tables and handlers; None when ``settings.audit.enabled`` is off.
    audit: Audit | None = None
    #: The champion-challenger scoreboard; None when it or the audit is off.
    scores: Scores | None = None
    webhook: AlertWebhook | None = None
    #: What /readyz reports (streams.worker.health_server); the server itself is started by the worker command.
    health: WorkerHealth | None = None
    #: The Prometheus reader behind /metrics; None when the health server is off (no-op instruments).
    metrics: PrometheusMetrics | None = None

    async def aclose(self) -> None:
        for stack in self.stacks:
            await stack.aclose()
        if self.webhook is not None:
            await self.webhook.aclose()
        if self.metrics is not None:
            self.metrics.shutdown()


def _broker_url(bootstrap_servers: str) -> str:
    hosts = [h.strip() for h in bootstrap_servers.split(",") if h.strip()]
    return ";".join(f"kafka://{h}" for h in hosts)


def load_catalog(settings: Settings) -> dict[str, InlineRubric]:
    """Named rubrics: those in the config file, plus a TOML file of ``[rubrics.<name>]`` tables."""
    catalog = dict(settings.rubrics)
    if settings.rubrics_file is not None:
        data = tomllib.loads(settings.rubrics_file.read_text(encoding="utf-8"))
        adapter: TypeAdapter[InlineRubric] = TypeAdapter(InlineRubric)
        catalog.update({name: adapter.validate_python(body) for name, body in data.get("rubrics", {}).items()})
    return catalog


def build_panel(settings: Settings) -> tuple[JudgePanel, tuple[JudgeStack, ...]]:
    """The configured judge, or jury, each wrapped for cost, resilience and caching."""
    main = build_judge_stack(settings.judge)
    jurors = tuple(build_judge_stack(juror) for juror in settings.jury)
    stacks = (main, *jurors)
    panel = JudgePanel(
        primary=tuple(s.judge for s in jurors) or (main.judge,),
        tiebreak=main.judge,
        breakers=tuple(s.breaker for s in stacks if s.breaker is not None),
    )
    return panel, stacks


def create_app(
    settings: Settings,
    *,
    judge: Judge | None = None,
    telemetry: Telemetry | None = None,
    catalog: Mapping[str, InlineRubric] | None = None,
    follow_control: bool = True,
) -> PairjudgeApp:
    """Wire the app. ``follow_control`` makes every worker read ``pairjudge.control`` for live settings
    (tests that drive agents through ``test_context()`` turn it off: no broker, no control topic)."""
    # Metrics cost something per judge call only when something reads them: the health server's /metrics.
    metrics = PrometheusMetrics(settings.telemetry.service_name) if settings.health.port and telemetry is None else None
    telemetry = telemetry or Telemetry(settings.telemetry, meter_provider=metrics.provider if metrics else None)
    stacks: tuple[JudgeStack, ...] = ()
    if judge is not None:
        panel = JudgePanel.single(judge)
    else:
        panel, stacks = build_panel(settings)
    policy = settings.policy.to_policy()
    if settings.jury_quorum is not None:
        policy = dataclasses.replace(policy, jury_quorum=settings.jury_quorum)
    holder = PolicyHolder(policy, follows_control=follow_control)
    # Off by default; when on, dead letters and review requests are redacted before they leave.
    redactor = build_redactor(settings.redaction)
    pipeline = Pipeline(
        judges=panel,
        policy=holder,
        telemetry=telemetry,
        catalog=catalog if catalog is not None else load_catalog(settings),
        max_event_bytes=settings.max_event_bytes,
        redactor=redactor,
    )
    kafka = settings.kafka
    # A faust.App whose shutdown on SIGTERM is bounded by the grace (streams.worker.shutdown).
    app = GracefulApp(
        settings.worker.app_id,
        broker=_broker_url(kafka.bootstrap_servers),
        # TLS/SASL (streams.security.kafka_clients): Faust hands these to its consumer
        # (streams.faust_compat.offsets' subclass too), producer and every other client it creates.
        broker_credentials=faust_credentials(kafka),
        datadir=str(settings.worker.data_dir),
        # Topics are created explicitly (streams.kafka.topics); faust must not declare anything itself,
        # and the leader topic is not used.
        topic_allow_declare=False,
        topic_disable_leader=True,
        topic_partitions=kafka.partitions,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=kafka.session_timeout_s,
        broker_heartbeat_interval=kafka.heartbeat_interval_s,
        broker_commit_every=50,
        broker_commit_interval=1.0,
        web_enabled=settings.worker.web_enabled,
        web_bind=settings.worker.web_host,
        web_host=settings.worker.web_host,
        web_port=settings.worker.web_port,
        # Bounded per-partition buffers: when judges are slow the worker stops fetching, it does not queue.
        stream_buffer_maxsize=max(64, settings.worker.concurrency * 4),
        producer_acks=-1,
    )

    # Before anything builds the consumer: commits follow the project's offset ledger (streams.faust_compat.offsets).
    install_commit_ledger(app)
    app.shutdown_grace_s = settings.worker.shutdown_grace_s
    app.breakers = panel.breakers
    inflight = app.inflight
    health = WorkerHealth(
        control_caught_up=holder.ready,
        judges_checked=pipeline.judges_checked,
        breakers=panel.breakers,
        inflight=inflight,
        recovering=lambda: records_left(app.tables.recovery),  # type: ignore[attr-defined]  # TableManager has it
    )
    # Readiness goes 503 the moment the app starts stopping, before it waits for anything.
    app.on_stopping = health.mark_stopping
    if metrics is not None:
        metrics.observe(health)
    outcomes = OutcomeTables(app, partitions=kafka.partitions, retention_s=settings.worker.outcome_retention_s)
    pipeline.outcomes = outcomes

    def raw_topic(kind: str) -> faust.TopicT:
        return app.topic(
            settings.topics.name(kind),
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            partitions=kafka.partitions,
        )

    topics = {kind: raw_topic(kind) for kind in KINDS}

    async def publish(messages: list[Outgoing]) -> None:
        # Wait for the broker's ack of every output before the input may count as done: at-least-once.
        # All of an input's outputs are handed to the producer first and their acks awaited together,
        # so they share produce requests instead of costing one broker round trip each. Every future
        # is awaited even when one fails (gather without return_exceptions would leave the others
        # unawaited); the first failure is then raised, as a sequential loop would have.
        futures = [await topics[m.kind].send(key=m.key, value=m.value, headers=m.headers) for m in messages]
        if not futures:
            return
        results = await asyncio.gather(*futures, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def deliver(stage: Stage, result: StageResult, raw: bytes | None, origin: Origin) -> None:
        """Record the outcome, then publish it; an outcome the broker refuses becomes a dead letter.

        Raises when neither can be delivered: the caller then stops the worker without acking.
        """
        partition = origin.partition or 0
        if result.pair_id is not None and not result.replayed:
            await outcomes.record(stage, result.pair_id, partition, result.outgoing)
        try:
            await publish(result.outgoing + result.alerts)
        except (MessageSizeTooLargeError, RecordTooLargeError) as exc:
            detail = f"the broker refused the {stage} outcome ({type(exc).__name__}: {exc})"
            # Not recorded: a redelivery replays the recorded outcome, which is refused (and
            # dead-lettered) again, or delivered once the topic accepts it.
            await publish([pipeline.undeliverable(stage, raw, origin, detail)])

    def release(stage: Stage, result: StageResult) -> None:
        if result.pair_id is not None and not result.replayed:
            outcomes.release(stage, result.pair_id)

    async def consume(stream: Any, what: str, process: Callable[[Any, Origin], Awaitable[None]]) -> AsyncIterator[None]:
        # Manual acks: Faust acks in a ``finally`` when the body raises, which would make an input
        # committable with no outcome. Here an input is acked only after its outputs are on the broker.
        async for event in stream.noack().events():
            msg = event.message
            origin = Origin(topic=msg.topic, partition=msg.partition, offset=msg.offset, key=msg.key)
            try:
                await process(event, origin)
            except HandedBack:
                # Cut off by the shutdown's grace (streams.worker.shutdown): acked for Faust's bookkeeping, never
                # marked done, so the offset ledger keeps the commit below it and its next owner judges it.
                await stream.ack(event)
                continue
            except Exception as exc:
                log.critical(
                    "could not deliver the %s outcome for %s[%s]@%s; stopping without committing it",
                    what,
                    msg.topic,
                    msg.partition,
                    msg.offset,
                    exc_info=True,
                )
                await app.crash(exc)
                return
            mark_done(app, msg)
            await stream.ack(event)
            yield None

    def stage_processor(stage: Stage) -> Callable[[Any, Origin], Awaitable[None]]:
        async def process(event: Any, origin: Origin) -> None:
            with inflight.pair():
                await decide_and_deliver(event, origin)

        async def decide_and_deliver(event: Any, origin: Origin) -> None:
            result: StageResult | None = None
            try:
                # Only the judging may be cut off by the shutdown (HandedBack); a delivery, once begun, finishes.
                result = await inflight.judging(pipeline.handle(stage, event.value, event.headers, origin))
                if event.message.generation_id != app.consumer_generation_id:
                    # The partition was reassigned while this input was judged. Its new owner judges
                    # it again (or replays what was recorded); publishing now could race that.
                    log.info("dropping a stale %s result for %s:%s", stage, origin.topic, origin.offset)
                    release(stage, result)
                else:
                    await deliver(stage, result, event.value, origin)
            except Exception:
                if result is not None:
                    release(stage, result)
                raise

        return process

    @app.agent(topics["pairs"], name="pairjudge.judge", concurrency=settings.worker.concurrency)
    async def judge_agent(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for _ in consume(stream, "primary", stage_processor("primary")):
            yield None

    @app.agent(topics["tiebreak"], name="pairjudge.tiebreak", concurrency=settings.worker.concurrency)
    async def tiebreak_agent(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for _ in consume(stream, "tiebreak", stage_processor("tiebreak")):
            yield None

    audit: Audit | None = None
    webhook_url = settings.audit.resolved_webhook_url()
    webhook = (
        AlertWebhook(
            webhook_url,
            attempts=settings.audit.webhook_attempts,
            allow_cleartext=settings.audit.webhook_allow_cleartext,
        )
        if webhook_url
        else None
    )
    if webhook is not None:
        pipeline.alert_sink = webhook.submit
        log.info("alerts also go to the webhook at %s", webhook.where)
    if settings.audit.enabled:
        audit = Audit(
            app,
            settings=settings.audit,
            partitions=kafka.partitions,
            policy=holder,
            telemetry=telemetry,
            publish=publish,
            topic_names={
                kind: settings.topics.name(kind) for kind in ("decisions", "labels", "observations", "control")
            },
            alert_sink=webhook.submit if webhook is not None else None,
            feed_scores=settings.scores.enabled,
            control_signer=signer_from_settings(settings.control),
        )
        audit.redactor = redactor
        wire_audit(app, audit, topics, consume)
    scores: Scores | None = None
    if audit is not None and settings.scores.enabled:
        # The scoreboard reads what the audit's join forwards: it needs the audit on.
        scores = Scores(
            app,
            settings=settings.scores,
            partitions=kafka.partitions,
            policy=holder,
            telemetry=telemetry,
            publish=publish,
            topic_name=settings.topics.name("score-events"),
        )
        scores.redactor = redactor
        wire_scores(app, scores, topics, consume)
        if metrics is not None:
            # Per experiment: the human basis's rate and interval beside the judge's rate (streams.scores.handlers).
            observe_scores(metrics.provider, scores.gauges)

    async def expire_outcomes() -> None:
        await outcomes.sweep()

    app.timer(interval=max(1.0, min(600.0, settings.worker.outcome_retention_s / 10)))(expire_outcomes)

    if settings.policy.audit_label_budget > 0:
        # The label budget (streams.audit.budget): this worker's verdict rate, extrapolated to the fleet by
        # its share of the input partitions, sets the scale on the audit shares.
        budget = AuditBudget(
            holder, budget=settings.policy.audit_label_budget, period=settings.policy.audit_budget_period
        )
        pipeline.on_decision = budget.observe
        inputs = (settings.topics.name("pairs"), settings.topics.name("tiebreak"))

        async def rescale_audit() -> None:
            try:
                assignment = app.consumer.assignment()
            except ConsumerNotStarted:
                return  # not consuming yet: nothing measured to extrapolate from; a timer must not crash the app
            owned = owned_input_partitions(((tp.topic, tp.partition) for tp in assignment), inputs)
            budget.update(owned, kafka.partitions * len(inputs))

        app.timer(interval=UPDATE_EVERY_S)(rescale_audit)
    if metrics is not None:
        observe_scale(metrics.provider, holder)

    async def control_follower() -> None:
        try:
            await follow_control_topic(settings, holder)
        except Exception as exc:
            # Without its control state the worker must not judge: stop it loudly instead of stalling.
            log.exception("following %s failed", settings.topics.name("control"))
            await app.crash(exc)

    if follow_control:
        app.task(control_follower)

    async def check_judges() -> None:
        # A bad key must stop the worker before it judges anything, not dead-letter every pair.
        try:
            await preflight_all(stacks)
        except JudgeAuthError as exc:
            log.critical("%s; stopping the worker", exc)
            await app.crash(exc)
            return
        pipeline.judges_checked.set()

    if stacks:
        pipeline.judges_checked.clear()
        app.task(check_judges)

    return PairjudgeApp(
        faust_app=app,
        pipeline=pipeline,
        topics=topics,
        judge_agent=judge_agent,
        tiebreak_agent=tiebreak_agent,
        telemetry=telemetry,
        settings=settings,
        outcomes=outcomes,
        stacks=stacks,
        audit=audit,
        scores=scores,
        webhook=webhook,
        health=health,
        metrics=metrics,
    )
