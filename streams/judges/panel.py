"""Who judges, from settings: the judge panel, the policy and the rubric catalog.

The worker's composition root (``streams.app.create_app``) and the Python API (``streams.api``) build
these the same way, so a pair judged through either meets the same judges, policy and rubrics. Kept
apart from ``streams.app`` because that module imports Faust, which the API must not pay for.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import TypeAdapter

from pairjudge.agents import Decision, Judge, capped_decision, judge_pair
from pairjudge.agents.cascade import Cascade, Tier
from pairjudge.agents.injection_screen import ScreenedJudge
from pairjudge.agents.policy import Policy
from pairjudge.schemas import CandidatePair, InlineRubric
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.judges.breaker import CircuitBreaker
from pairjudge.streams.judges.factory import JudgeStack, build_judge_stack
from pairjudge.streams.judges.injection_screen import HttpInjectionScreen
from pairjudge.streams.telemetry.tracing import Telemetry, TracingJudge


@dataclass(frozen=True, slots=True)
class JudgePanel:
    """Who judges: one primary judge or a jury, the tie-break resolver, and their circuit breakers."""

    primary: tuple[Judge, ...]
    tiebreak: Judge
    breakers: tuple[CircuitBreaker, ...] = ()
    #: The judge cascade (``[[tiers]]``): when set, it judges the primary stage and ``primary`` is unused.
    cascade: Cascade | None = None

    @classmethod
    def single(cls, judge: Judge) -> JudgePanel:
        return cls(primary=(judge,), tiebreak=judge)

    async def judge_primary(self, pair: CandidatePair, policy: Policy, catalog: Mapping[str, InlineRubric]) -> Decision:
        """Both orders by the one judge, by every juror, or by the cascade's tiers in turn."""
        return await judge_pair(pair, self._primary_judges, policy, catalog)

    def capped(self, pair: CandidatePair, policy: Policy, catalog: Mapping[str, InlineRubric]) -> Decision:
        """Review "spend_capped", with no judge call (``agents.spend``'s ``review`` action)."""
        return capped_decision(pair, self._primary_judges, policy, catalog)

    @property
    def _primary_judges(self) -> Judge | tuple[Judge, ...] | Cascade:
        """Who judges the primary stage, as the core takes it: the cascade, the jury, or the one judge."""
        return self.cascade or (self.primary[0] if len(self.primary) == 1 else self.primary)

    def traced(self, telemetry: Telemetry) -> JudgePanel:
        """The same panel with every judge call recorded as a span (naming its tier in a cascade)."""
        cascade = None
        if self.cascade is not None:
            cascade = Cascade(
                tuple(
                    dataclasses.replace(
                        tier, judges=tuple(TracingJudge(j, telemetry, "primary", tier=tier.name) for j in tier.judges)
                    )
                    for tier in self.cascade.tiers
                )
            )
        return JudgePanel(
            primary=tuple(TracingJudge(j, telemetry, "primary") for j in self.primary),
            tiebreak=TracingJudge(self.tiebreak, telemetry, "tiebreak"),
            breakers=self.breakers,
            cascade=cascade,
        )


def load_catalog(settings: Settings) -> dict[str, InlineRubric]:
    """Named rubrics: those in the config file, plus a TOML file of ``[rubrics.<name>]`` tables."""
    catalog = dict(settings.rubrics)
    if settings.rubrics_file is not None:
        data = tomllib.loads(settings.rubrics_file.read_text(encoding="utf-8"))
        adapter: TypeAdapter[InlineRubric] = TypeAdapter(InlineRubric)
        catalog.update({name: adapter.validate_python(body) for name, body in data.get("rubrics", {}).items()})
    return catalog


def build_panel(settings: Settings) -> tuple[JudgePanel, tuple[JudgeStack, ...]]:
    """The configured judge, or jury, each wrapped for cost, resilience and caching; with an injection screen
    configured, the primary judges carry it (``agents.injection_screen.ScreenedJudge``), and the main stack
    closes its client."""
    main = build_judge_stack(settings.judge)
    jurors = tuple(build_judge_stack(juror) for juror in settings.jury)
    # A tier is one judge, or a jury of its own (``[[tiers.jury]]``): one stack per judge either way.
    tier_stacks = tuple(tuple(build_judge_stack(j) for j in (tier.jury or (tier,))) for tier in settings.tiers)
    primary = tuple(s.judge for s in jurors) or (main.judge,)
    tier_judges = tuple(tuple(s.judge for s in stacks) for stacks in tier_stacks)
    if settings.injection_screen.url is not None:
        screen = HttpInjectionScreen.from_settings(settings.injection_screen)
        main = dataclasses.replace(main, screen=screen)
        primary = tuple(ScreenedJudge(judge, screen) for judge in primary)
        tier_judges = tuple(tuple(ScreenedJudge(judge, screen) for judge in judges) for judges in tier_judges)
    cascade = None
    if settings.tiers:
        cascade = Cascade(
            tuple(
                Tier(name=tier.name, judges=judges, threshold=tier.threshold)
                for tier, judges in zip(settings.tiers, tier_judges, strict=True)
            )
        )
    stacks = (main, *jurors, *(s for stacks in tier_stacks for s in stacks))
    panel = JudgePanel(
        primary=primary,
        tiebreak=main.judge,
        breakers=tuple(s.breaker for s in stacks if s.breaker is not None),
        cascade=cascade,
    )
    return panel, stacks


def build_policy(settings: Settings) -> Policy:
    """The configured policy; ``jury_quorum``, when set, overrides the policy's own."""
    policy = dataclasses.replace(settings.policy.to_policy(), screen_on_failure=settings.injection_screen.on_failure)
    if settings.jury_quorum is not None:
        policy = dataclasses.replace(policy, jury_quorum=settings.jury_quorum)
    return policy
