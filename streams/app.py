"""The composition root: settings in, a wired Faust app out.

``create_app(settings)`` builds the judge, the policy, telemetry, the topics and the agents, each part
by a function of its own: the Faust app and its topics (``streams.worker.faust_app``), at-least-once
delivery and the stages' agents (``streams.worker.delivery``), the audit and the scoreboard, the label
budget, the control follower and the judges' key check (below). Nothing else reads settings or builds
these parts, so a test can hand in a scripted judge and an in-memory span exporter and get the same
wiring the worker runs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import faust
from faust.exceptions import ConsumerNotStarted

from pairjudge.agents.audit import TierCalibration
from pairjudge.agents.judge import Judge
from pairjudge.schemas import InlineRubric
from pairjudge.streams.audit.budget import UPDATE_EVERY_S, AuditBudget, observe_scale
from pairjudge.streams.audit.handlers import Audit, wire_audit
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
from pairjudge.streams.judges.preflight import JudgeAuthError, preflight_all
from pairjudge.streams.kafka.topics import STAGE_SOURCES
from pairjudge.streams.scores.handlers import Scores, observe_scores, wire_scores
from pairjudge.streams.security.redaction_hook import EventRedactor, build_redactor
from pairjudge.streams.telemetry.alerts import AlertWebhook
from pairjudge.streams.telemetry.tracing import Telemetry
from pairjudge.streams.worker.delivery import Delivery, wire_stages
from pairjudge.streams.worker.error_budget import ErrorBudget
from pairjudge.streams.worker.faust_app import build_faust_app, raw_topics
from pairjudge.streams.worker.health_server import PrometheusMetrics, WorkerHealth
from pairjudge.streams.worker.pipeline import JudgePanel, Pipeline
from pairjudge.streams.worker.published import OutcomeTables
from pairjudge.streams.worker.spend import REPORT_EVERY_S, SpendTracker, follow_spend
from pairjudge.streams.worker.tables import owned_partitions

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

    async def aclose(self) -> None:
        for stack in self.stacks:
            await stack.aclose()
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
    holder = PolicyHolder(build_policy(settings), follows_control=follow_control)
    # Off by default; when on, dead letters and review requests are redacted before they leave.
    redactor = build_redactor(settings.redaction)
    pipeline = Pipeline(
        judges=panel,
        policy=holder,
        telemetry=telemetry,
        catalog=catalog if catalog is not None else load_catalog(settings),
        max_event_bytes=settings.max_event_bytes,
        redactor=redactor,
        errors=ErrorBudget(settings.worker.internal_error_limit, settings.worker.internal_error_window_s),
    )
    app = build_faust_app(settings, breakers=panel.breakers)
    health = _worker_health(app, holder, pipeline, metrics)
    outcomes = OutcomeTables(app, partitions=settings.kafka.partitions, retention_s=settings.worker.outcome_retention_s)
    pipeline.outcomes = outcomes
    topics = raw_topics(app, settings)
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
    )
    # Deliveries finish before partitions are handed over (and before the audit join's flush, which counts them).
    app.before_handover.append(delivery.settle)
    stage_agents = wire_stages(app, delivery, topics, concurrency=settings.worker.concurrency)

    webhook = _alert_webhook(settings, pipeline)
    audit: Audit | None = None
    if settings.audit.enabled:
        audit = _wire_audit(app, settings, holder, telemetry, delivery, topics, webhook, redactor)
        # Decision records go straight to the join on this worker (streams.worker.delivery.LocalJoin), and what
        # it holds is flushed before partitions are handed over (a rebalance, a shutdown).
        delivery.join = audit
        app.before_handover.append(audit.flush)
    scores: Scores | None = None
    if audit is not None and settings.scores.enabled:
        # The scoreboard reads what the audit's join forwards: it needs the audit on.
        scores = _wire_scores(app, settings, holder, telemetry, delivery, topics, redactor, metrics)
    _expire_outcomes(app, outcomes)
    if settings.policy.audit_label_budget > 0:
        _keep_label_budget(app, settings, holder, pipeline)
    if metrics is not None:
        observe_scale(metrics.provider, holder)
    if follow_control:
        _follow_control(app, settings, holder)
        _keep_spend(app, settings, pipeline, delivery)
    if stacks:
        _check_judges(app, pipeline, stacks)

    return PairjudgeApp(
        faust_app=app,
        pipeline=pipeline,
        topics=topics,
        judge_agent=stage_agents["primary"],
        tiebreak_agent=stage_agents["tiebreak"],
        telemetry=telemetry,
        settings=settings,
        outcomes=outcomes,
        stacks=stacks,
        audit=audit,
        scores=scores,
        webhook=webhook,
        health=health,
        metrics=metrics,
        delivery=delivery,
    )


def _worker_health(
    app: GracefulApp, holder: PolicyHolder, pipeline: Pipeline, metrics: PrometheusMetrics | None
) -> WorkerHealth:
    """What /readyz reports, told when the app starts stopping; on /metrics too when that is on."""
    health = WorkerHealth(
        control_caught_up=holder.ready,
        judges_checked=pipeline.judges_checked,
        breakers=app.breakers,
        inflight=app.inflight,
        recovering=lambda: records_left(app.tables.recovery),  # type: ignore[attr-defined]  # TableManager has it
    )
    # Readiness goes 503 the moment the app starts stopping, before it waits for anything.
    app.on_stopping = health.mark_stopping
    if metrics is not None:
        metrics.observe(health)
    return health


def _alert_webhook(settings: Settings, pipeline: Pipeline) -> AlertWebhook | None:
    """The alert webhook, when one is configured; the pipeline's alerts go to it too."""
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
    return webhook


def _wire_audit(
    app: faust.App,
    settings: Settings,
    holder: PolicyHolder,
    telemetry: Telemetry,
    delivery: Delivery,
    topics: dict[str, faust.TopicT],
    webhook: AlertWebhook | None,
    redactor: EventRedactor | None,
) -> Audit:
    """The drift audit's tables, agents and timers (streams.audit.handlers)."""
    audit = Audit(
        app,
        settings=settings.audit,
        partitions=settings.kafka.partitions,
        policy=holder,
        telemetry=telemetry,
        publish=delivery.publish,
        topic_names={kind: settings.topics.name(kind) for kind in ("decisions", "labels", "observations", "control")},
        alert_sink=webhook.submit if webhook is not None else None,
        feed_scores=settings.scores.enabled,
        control_signer=signer_from_settings(settings.control),
        tiers={
            tier.name: TierCalibration(tier.threshold, tier.calibration_target, tier.calibration_risk)
            for tier in settings.tiers
        },
    )
    audit.redactor = redactor
    wire_audit(app, audit, topics, delivery.consume)
    return audit


def _wire_scores(
    app: faust.App,
    settings: Settings,
    holder: PolicyHolder,
    telemetry: Telemetry,
    delivery: Delivery,
    topics: dict[str, faust.TopicT],
    redactor: EventRedactor | None,
    metrics: PrometheusMetrics | None,
) -> Scores:
    """The champion-challenger scoreboard's table, agent and timer (streams.scores.handlers)."""
    scores = Scores(
        app,
        settings=settings.scores,
        partitions=settings.kafka.partitions,
        policy=holder,
        telemetry=telemetry,
        publish=delivery.publish,
        topic_name=settings.topics.name("score-events"),
    )
    scores.redactor = redactor
    wire_scores(app, scores, topics, delivery.consume)
    if metrics is not None:
        # Per experiment: the human basis's rate and interval beside the judge's rate (streams.scores.handlers).
        observe_scores(metrics.provider, scores.gauges)
    return scores


def _expire_outcomes(app: faust.App, outcomes: OutcomeTables) -> None:
    """A timer that expires recorded outcomes past their retention (streams.worker.published)."""

    async def expire_outcomes() -> None:
        await outcomes.sweep()

    app.timer(interval=max(1.0, min(600.0, outcomes.retention_s / 10)))(expire_outcomes)


def _keep_label_budget(app: faust.App, settings: Settings, holder: PolicyHolder, pipeline: Pipeline) -> None:
    """The label budget (streams.audit.budget): this worker's verdict rate, extrapolated to the fleet by
    its share of the input partitions, sets the scale on the audit shares."""
    budget = AuditBudget(holder, budget=settings.policy.audit_label_budget, period=settings.policy.audit_budget_period)
    pipeline.on_decision = budget.observe
    inputs = tuple(settings.topics.name(kind) for kind in STAGE_SOURCES)

    async def rescale_audit() -> None:
        try:
            owned = sum(len(owned_partitions(app, topic)) for topic in inputs)
        except ConsumerNotStarted:
            return  # not consuming yet: nothing measured to extrapolate from; a timer must not crash the app
        budget.update(owned, settings.kafka.partitions * len(inputs))

    app.timer(interval=UPDATE_EVERY_S)(rescale_audit)


def _follow_control(app: faust.App, settings: Settings, holder: PolicyHolder) -> None:
    """A task that follows ``pairjudge.control`` into ``holder`` for as long as the worker runs. Without its
    control state the worker must not judge."""
    _keep_following(app, settings.topics.name("control"), lambda: follow_control_topic(settings, holder))


def _keep_following(app: faust.App, topic: str, follow: Callable[[], Awaitable[None]]) -> None:
    """A task that runs ``follow`` (reading ``topic`` for as long as the worker runs); its failure stops the
    worker loudly instead of leaving it judging on stale state."""

    async def follower() -> None:
        try:
            await follow()
        except Exception as exc:
            log.exception("following %s failed", topic)
            await app.crash(exc)

    app.task(follower)


def _keep_spend(app: faust.App, settings: Settings, pipeline: Pipeline, delivery: Delivery) -> None:
    """The spending caps' ledger (streams.worker.spend): this worker's spend reported every second, every
    worker's followed (without the others' spend the caps would let through what they should hold). Always on,
    so a cap set live finds the hour's spend already counted."""
    tracker = SpendTracker(follows_topic=True)
    pipeline.spend = tracker
    _keep_following(app, settings.topics.name("spend"), lambda: follow_spend(settings, tracker))

    async def report_spend() -> None:
        reports = tracker.reports()
        if not reports:
            return
        try:
            await delivery.publish(reports)
        except Exception as exc:  # noqa: BLE001  # a broker hiccup: reported again on the next tick
            tracker.not_reported(reports)
            log.warning("could not report this worker's spend (%s); trying again in %g s", exc, REPORT_EVERY_S)

    app.timer(interval=REPORT_EVERY_S)(report_spend)


def _check_judges(app: faust.App, pipeline: Pipeline, stacks: tuple[JudgeStack, ...]) -> None:
    """Hold the judging until a start-up task has checked the judges' keys (streams.judges.preflight)."""

    async def check_judges() -> None:
        # A bad key must stop the worker before it judges anything, not dead-letter every pair.
        try:
            await preflight_all(stacks)
        except JudgeAuthError as exc:
            log.critical("%s; stopping the worker", exc)
            await app.crash(exc)
            return
        pipeline.judges_checked.set()

    pipeline.judges_checked.clear()
    app.task(check_judges)
