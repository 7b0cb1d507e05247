"""The composition root: settings in, a wired Faust app out. It only wires.

``create_app(settings)`` asks ``streams.services.build_services(settings, "worker")`` for what the worker judges
with (the judges, the policy, telemetry, the rubrics, redaction, the spend ledger: the same parts the Python API
gets in its own mode), then builds the parts that need a Faust app, each by the function or class that owns it:
the Faust app and its topics (``streams.worker.faust_app``), the recorded outcomes (``streams.worker.published``),
at-least-once delivery and the stages' agents (``streams.worker.delivery``), the audit and the scoreboard, the
label budget (``streams.audit.budget``), the control and spend followers and the judges' key check. Each part is
built in an order where what it needs already exists, gets it as constructor arguments, and installs its own
timers, tasks and hand-over steps: nothing is set on a part after it is built. A test can hand in a scripted
judge and an in-memory span exporter and get the same wiring the worker runs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import faust
from opentelemetry.metrics import MeterProvider

from pairjudge.agents.audit import TierCalibration
from pairjudge.agents.judge import Judge
from pairjudge.schemas import InlineRubric
from pairjudge.streams.audit.budget import AuditBudget, keep_label_budget, observe_scale
from pairjudge.streams.audit.handlers import Audit
from pairjudge.streams.audit.wiring import wire_audit
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.live import PolicyHolder
from pairjudge.streams.control.live import follow_control as follow_control_topic
from pairjudge.streams.control.signing import signer_from_settings
from pairjudge.streams.faust_compat.recovery_watch import records_left
from pairjudge.streams.faust_compat.shutdown import GracefulApp
from pairjudge.streams.judges.factory import JudgeStack
from pairjudge.streams.judges.panel import build_panel as build_panel  # defined away from Faust, for the API
from pairjudge.streams.judges.panel import build_policy as build_policy
from pairjudge.streams.judges.panel import load_catalog as load_catalog
from pairjudge.streams.judges.preflight import check_at_start
from pairjudge.streams.kafka.topics import STAGE_SOURCES
from pairjudge.streams.scores.handlers import Scores, observe_scores, wire_scores
from pairjudge.streams.scores.plain import alert_series_name
from pairjudge.streams.services import Judging, build_services
from pairjudge.streams.shadow import ShadowStage, build_shadow_stage
from pairjudge.streams.telemetry.alert_views import AlertLinks
from pairjudge.streams.telemetry.alerts import AlertWebhook
from pairjudge.streams.telemetry.tracing import Telemetry
from pairjudge.streams.worker.delivery import Delivery, Publisher, wire_stages
from pairjudge.streams.worker.faust_app import build_faust_app, raw_topics
from pairjudge.streams.worker.health_server import PrometheusMetrics, WorkerHealth
from pairjudge.streams.worker.pipeline import Pipeline
from pairjudge.streams.worker.published import OutcomeTables
from pairjudge.streams.worker.spend import keep_spend
from pairjudge.streams.worker.tasks import keep_following

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
    #: The at-least-once path; ``delivery.stopped`` says why the worker stopped itself, once it has.
    delivery: Delivery | None = None
    #: The shadow stage (captures in, pairs out) and its agent.
    shadow: ShadowStage | None = None
    shadow_agent: Any = None

    async def aclose(self) -> None:
        for stack in self.stacks:
            await stack.aclose()
        if self.shadow is not None:
            await self.shadow.aclose()
        if self.webhook is not None:
            await self.webhook.aclose()
        if self.metrics is not None:
            self.metrics.shutdown()


def create_app(
    settings: Settings,
    *,
    judge: Judge | None = None,
    telemetry: Telemetry | None = None,
    catalog: Mapping[str, InlineRubric] | None = None,
    follow_control: bool = True,
) -> PairjudgeApp:
    """Wire the app. ``follow_control`` makes every worker read ``pairjudge.control`` for live settings and
    ``pairjudge.spend`` for the fleet's spend (tests that drive agents through ``test_context()`` turn it off:
    no broker, no control topic; the caps then hold on this worker's own spend).

    Every part gets what it needs when it is built, and installs its own timers and hand-over steps: nothing
    here is set on a part afterwards."""
    # Metrics cost something per judge call only when something reads them: the health server's /metrics.
    metrics = PrometheusMetrics(settings.telemetry.service_name) if settings.health.port and telemetry is None else None
    services = build_services(
        settings,
        "worker",
        judge=judge,
        catalog=catalog,
        telemetry=telemetry,
        meter_provider=metrics.provider if metrics else None,
        follow_topics=follow_control,
    )
    judging = services.require_judging()
    holder = services.policy
    app = build_faust_app(settings, breakers=judging.panel.breakers)
    outcomes = OutcomeTables(app, partitions=settings.kafka.partitions, retention_s=settings.worker.outcome_retention_s)
    webhook = _alert_webhook(settings, judging.telemetry.meter_provider)
    budget = (
        AuditBudget(holder, budget=settings.policy.audit_label_budget, period=settings.policy.audit_budget_period)
        if settings.policy.audit_label_budget > 0
        else None
    )
    pipeline = services.pipeline(
        outcomes=outcomes,
        alert_sink=webhook.submit if webhook is not None else None,
        on_decision=budget.observe if budget is not None else None,
    )
    health = _worker_health(app, holder, pipeline, metrics)
    topics = raw_topics(app, settings)
    publisher = Publisher(topics, max_record_bytes=int(app.conf.producer_max_request_size))
    audit = _audit(app, settings, holder, judging, publisher, webhook) if settings.audit.enabled else None
    delivery = Delivery(
        app,
        topics=topics,
        pipeline=pipeline,
        outcomes=outcomes,
        inflight=app.inflight,
        crash_loop_limit=settings.worker.crash_loop_limit,
        on_stop=health.mark_broken,
        # One delivery behind each judging slot of each stage: outcomes never pile up in memory.
        max_deliveries=2 * settings.worker.concurrency,
        publisher=publisher,
        # Decision records go straight to the audit's join on this worker (streams.worker.delivery.LocalJoin).
        join=audit,
    )
    # Captures in, pairs out (streams.shadow): through the same delivery, its outcomes in the shadow stage's table.
    shadow = build_shadow_stage(
        settings,
        delivery=delivery,
        outcomes=outcomes,
        inflight=app.inflight,
        policy=holder,
        telemetry=judging.telemetry,
        spend=judging.spend,
        redactor=judging.redactor,
    )
    stage_agents = wire_stages(
        app, delivery, topics, concurrency=settings.worker.concurrency, processors={"shadow": shadow.process}
    )
    if audit is not None:
        wire_audit(app, audit, topics, delivery.consume)
    scores: Scores | None = None
    if audit is not None and settings.scores.enabled:
        # The scoreboard reads what the audit's join forwards: it needs the audit on.
        scores = _scores(app, settings, holder, judging, publisher)
        wire_scores(app, scores, topics, delivery.consume)
        if metrics is not None:
            # Per experiment: the human basis's rate and interval beside the judge's rate (streams.scores.handlers).
            observe_scores(metrics.provider, scores.gauges)
    if budget is not None:
        inputs = tuple(settings.topics.name(kind) for kind in STAGE_SOURCES)
        keep_label_budget(app, budget, inputs, settings.kafka.partitions)
    if metrics is not None:
        observe_scale(metrics.provider, holder)
    if follow_control:
        # Without its control state the worker must not judge (PolicyHolder.ready).
        keep_following(app, settings.topics.name("control"), lambda: follow_control_topic(settings, holder))
        keep_spend(app, settings, judging.spend, publisher.publish)
    if judging.stacks:
        # The stages wait for this check (judges_checked), set once it passes.
        check_at_start(app, judging.stacks, judging.judges_checked)

    return PairjudgeApp(
        faust_app=app,
        pipeline=pipeline,
        topics=topics,
        judge_agent=stage_agents["primary"],
        tiebreak_agent=stage_agents["tiebreak"],
        telemetry=judging.telemetry,
        settings=settings,
        outcomes=outcomes,
        stacks=judging.stacks,
        audit=audit,
        scores=scores,
        webhook=webhook,
        health=health,
        metrics=metrics,
        delivery=delivery,
        shadow=shadow,
        shadow_agent=stage_agents["shadow"],
    )


def _worker_health(
    app: GracefulApp, holder: PolicyHolder, pipeline: Pipeline, metrics: PrometheusMetrics | None
) -> WorkerHealth:
    """What /readyz reports, read from the parts that know; on /metrics too when that is on."""
    health = WorkerHealth(
        control_caught_up=holder.ready,
        judges_checked=pipeline.judges_checked,
        breakers=app.breakers,
        inflight=app.inflight,
        recovering=lambda: records_left(app.tables.recovery),  # type: ignore[attr-defined]  # TableManager has it
        # Readiness goes 503 the moment the app starts stopping, before it waits for anything.
        app_stopping=lambda: app.stopping,
    )
    if metrics is not None:
        metrics.observe(health)
    return health


def _alert_webhook(settings: Settings, meter_provider: MeterProvider | None = None) -> AlertWebhook | None:
    """The alert webhook, when one is configured (the pipeline's and the audit's alerts go to it too)."""
    webhook_url = settings.audit.resolved_webhook_url()
    if not webhook_url:
        return None
    audit = settings.audit
    webhook = AlertWebhook(
        webhook_url,
        attempts=audit.webhook_attempts,
        allow_cleartext=audit.webhook_allow_cleartext,
        body_format=audit.webhook_format,
        rate_window_s=audit.webhook_rate_window_s,
        links=AlertLinks(review_url=audit.webhook_review_url, runbook_url=audit.webhook_runbook_url),
        series_name=alert_series_name,
        meter_provider=meter_provider,
    )
    log.info("alerts also go to the webhook at %s", webhook.where)
    return webhook


def _audit(
    app: faust.App,
    settings: Settings,
    holder: PolicyHolder,
    judging: Judging,
    publisher: Publisher,
    webhook: AlertWebhook | None,
) -> Audit:
    """The drift audit's tables and handlers (streams.audit.handlers); ``wire_audit`` puts its agents on the app."""
    return Audit(
        app,
        settings=settings.audit,
        partitions=settings.kafka.partitions,
        policy=holder,
        telemetry=judging.telemetry,
        publish=publisher.publish,
        topic_names={kind: settings.topics.name(kind) for kind in ("decisions", "labels", "observations", "control")},
        alert_sink=webhook.submit if webhook is not None else None,
        feed_scores=settings.scores.enabled,
        control_signer=signer_from_settings(settings.control),
        tiers={
            tier.name: TierCalibration(tier.threshold, tier.calibration_target, tier.calibration_risk)
            for tier in settings.tiers
        },
        redactor=judging.redactor,
    )


def _scores(app: faust.App, settings: Settings, holder: PolicyHolder, judging: Judging, publisher: Publisher) -> Scores:
    """The champion-challenger scoreboard's table and handler (streams.scores.handlers)."""
    return Scores(
        app,
        settings=settings.scores,
        partitions=settings.kafka.partitions,
        policy=holder,
        telemetry=judging.telemetry,
        publish=publisher.publish,
        topic_name=settings.topics.name("score-events"),
        redactor=judging.redactor,
    )
