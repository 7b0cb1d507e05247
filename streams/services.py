"""What a pairjudge process judges with, built once from settings: ``build_services(settings, mode)``.

Three kinds of process read settings into the same parts: the worker (``streams.app.create_app``), the in-process
API (``streams.api.Evaluator``, so ``pairjudge evaluate`` too) and the review service (``streams.review.service``).
Each asks for its ``mode`` here instead of building the parts its own way, so a pair judged by the API meets the
judges, policy, rubrics, redaction and spending caps a worker would:

========  ==========================================  ===============================================
mode      policy                                      judging
========  ==========================================  ===============================================
worker    follows ``pairjudge.control`` (live)        its spend shared on ``pairjudge.spend``; judges
                                                      checked at start-up; an error budget
api       the configured one                          its own spend only; ``queue`` refused
review    follows ``pairjudge.control`` (shown)       none: it judges nothing
========  ==========================================  ===============================================

``follow_topics=False`` (tests driving a worker's agents without a broker) keeps the worker's policy and spend in
process, as the API's. Kept apart from ``streams.app`` because that module imports Faust, which the API must not
pay for. The parts that need a Faust app (tables, topics, agents, timers) are the worker root's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from opentelemetry.metrics import MeterProvider

from pairjudge.agents import Decision, Judge
from pairjudge.schemas import Alert, InlineRubric
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.live import PolicyHolder
from pairjudge.streams.judges.factory import JudgeStack
from pairjudge.streams.judges.panel import JudgePanel, build_panel, build_policy, load_catalog
from pairjudge.streams.security.redaction_hook import EventRedactor, build_redactor
from pairjudge.streams.telemetry.tracing import Telemetry
from pairjudge.streams.worker.error_budget import ErrorBudget
from pairjudge.streams.worker.pipeline import OutcomeStore, Pipeline
from pairjudge.streams.worker.spend import SpendCapUnsupported, SpendTracker, in_process_tracker

__all__ = ["Judging", "Mode", "Services", "SpendCapUnsupported", "build_services"]

Mode = Literal["worker", "api", "review"]


@dataclass(frozen=True, slots=True)
class Judging:
    """Who judges and under which rules: everything ``Pipeline`` needs that settings decide."""

    panel: JudgePanel
    #: The configured judges' stacks (HTTP clients, caches), closed by ``Services.aclose``; empty for a judge
    #: or panel handed in.
    stacks: tuple[JudgeStack, ...]
    telemetry: Telemetry
    catalog: Mapping[str, InlineRubric]
    redactor: EventRedactor | None
    spend: SpendTracker
    #: Unexpected errors tolerated before a worker stops; None in the API, whose every failure is an outcome.
    errors: ErrorBudget | None
    #: Set once the judges' keys were checked (``streams.judges.preflight``): unset in a worker with configured
    #: judges until its start-up check passes; set from the start otherwise.
    judges_checked: asyncio.Event


@dataclass(frozen=True, slots=True)
class Services:
    settings: Settings
    mode: Mode
    policy: PolicyHolder
    #: None in the review service, which judges nothing.
    judging: Judging | None
    #: This process made the telemetry (and shuts it down in ``aclose``); False when it was handed in.
    owns_telemetry: bool

    def pipeline(
        self,
        *,
        outcomes: OutcomeStore | None = None,
        alert_sink: Callable[[Alert], None] | None = None,
        on_decision: Callable[[Decision], None] | None = None,
    ) -> Pipeline:
        """The stage handlers over these parts; the worker adds its edges (recorded outcomes, the alert webhook,
        the label budget's meter)."""
        judging = self.require_judging()
        return Pipeline(
            judges=judging.panel,
            policy=self.policy,
            telemetry=judging.telemetry,
            catalog=judging.catalog,
            max_event_bytes=self.settings.max_event_bytes,
            outcomes=outcomes,
            redactor=judging.redactor,
            errors=judging.errors,
            spend=judging.spend,
            alert_sink=alert_sink,
            on_decision=on_decision,
            judges_checked=judging.judges_checked,
        )

    def require_judging(self) -> Judging:
        if self.judging is None:
            raise RuntimeError(f"services built for {self.mode!r} judge nothing")
        return self.judging

    async def aclose(self, *, telemetry: bool = True) -> None:
        """Close the judges' HTTP clients and caches, and (``telemetry``) a telemetry these services made."""
        if self.judging is None:
            return
        for stack in self.judging.stacks:
            await stack.aclose()
        if telemetry and self.owns_telemetry:
            self.judging.telemetry.shutdown()


def build_services(
    settings: Settings,
    mode: Mode,
    *,
    judge: Judge | None = None,
    panel: JudgePanel | None = None,
    catalog: Mapping[str, InlineRubric] | None = None,
    telemetry: Telemetry | None = None,
    meter_provider: MeterProvider | None = None,
    follow_topics: bool = True,
) -> Services:
    """The parts a process of ``mode`` judges with (module doc). ``judge`` or ``panel`` replace the configured
    judges and are used as given (tests, a custom ``Judge``); ``catalog`` the configured named rubrics;
    ``telemetry`` the one built from settings (``meter_provider``: where its metrics go, the worker's /metrics).

    Raises ``SpendCapUnsupported`` in the API for a spending cap whose action it cannot carry out (``queue``)."""
    shared = mode != "api" and follow_topics
    policy = PolicyHolder(build_policy(settings), follows_control=shared)
    if mode == "review":
        return Services(settings, mode, policy, judging=None, owns_telemetry=False)
    # Checked before anything is built: a refused configuration leaves nothing to close.
    spend = SpendTracker(follows_topic=shared) if mode == "worker" else in_process_tracker(policy.current.spend_caps())
    stacks: tuple[JudgeStack, ...] = ()
    if panel is None and judge is not None:
        panel = JudgePanel.single(judge)
    elif panel is None:
        panel, stacks = build_panel(settings)
    judges_checked = asyncio.Event()
    # A worker's configured judges are checked at start-up (streams.app) before it judges; nothing else waits.
    if mode != "worker" or not stacks:
        judges_checked.set()
    owns_telemetry = telemetry is None
    judging = Judging(
        panel=panel,
        stacks=stacks,
        telemetry=telemetry or Telemetry(settings.telemetry, meter_provider=meter_provider),
        catalog=dict(catalog) if catalog is not None else load_catalog(settings),
        # Off by default; when on, dead letters and review requests are redacted before they leave.
        redactor=build_redactor(settings.redaction),
        spend=spend,
        errors=(
            ErrorBudget(settings.worker.internal_error_limit, settings.worker.internal_error_window_s)
            if mode == "worker"
            else None
        ),
        judges_checked=judges_checked,
    )
    return Services(settings, mode, policy, judging, owns_telemetry)
