"""The judge cascade at the stage edge: configured from ``[[tiers]]``, named in events, spans and metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pairjudge.agents.cascade import Cascade, Tier
from pairjudge.agents.policy import Policy
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.schemas import DecisionRecord, PairVerdict
from pairjudge.streams.app import build_panel
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.live import PolicyHolder
from pairjudge.streams.judges.panel import JudgePanel
from pairjudge.streams.telemetry.tracing import Telemetry, make_tracer_provider
from pairjudge.streams.worker.pipeline import Origin, Pipeline
from tests.unit.factories import FIRST_ID, SECOND_ID, h2h_reply, h2h_rubric, make_pair, per_order

CONFIG = """
[judge]
kind = "offline"

[[tiers]]
name = "local"
kind = "openai"
base_url = "http://127.0.0.1:8080/v1"
model = "qwen-small"
threshold = 0.9
calibration_target = 0.85
calibration_risk = 0.05

[[tiers]]
name = "frontier"
kind = "openai"
base_url = "http://127.0.0.1:8081/v1"
model = "big-model"
"""


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "pairjudge.toml"
    path.write_text(CONFIG)
    monkeypatch.setenv("PAIRJUDGE_CONFIG", str(path))
    monkeypatch.setenv("PAIRJUDGE_JUDGE__CACHE_DIR", str(tmp_path / "cache"))
    return path


def test_tiers_from_the_config_file_build_a_cascade_with_a_stack_each(config: Path) -> None:
    settings = Settings()
    panel, stacks = build_panel(settings)
    assert panel.cascade is not None
    assert [(t.name, t.threshold) for t in panel.cascade.tiers] == [("local", 0.9), ("frontier", 0.0)]
    assert [t.judges[0].identity.model for t in panel.cascade.tiers] == ["qwen-small", "big-model"]
    # The [judge] stays the tie-break resolver; every tier has its own breaker (a tier's outage holds pairs back).
    assert panel.tiebreak.identity.model == "pairjudge-heuristic"
    assert len(stacks) == 3
    assert len(panel.breakers) == 3
    assert (settings.tiers[0].calibration_target, settings.tiers[0].calibration_risk) == (0.85, 0.05)


JURY_TIER = """
[[tiers]]
name = "panel"
threshold = 0.8

[[tiers.jury]]
kind = "openai"
base_url = "http://127.0.0.1:8082/v1"
model = "juror-one"

[[tiers.jury]]
kind = "openai"
base_url = "http://127.0.0.1:8083/v1"
model = "juror-two"

[[tiers.jury]]
kind = "offline"
"""


def test_a_tier_may_be_a_jury_with_a_stack_per_juror(config: Path) -> None:
    config.write_text(CONFIG + JURY_TIER)
    panel, stacks = build_panel(Settings())
    assert panel.cascade is not None
    *_, jury = panel.cascade.tiers
    assert (jury.name, jury.threshold, jury.is_jury) == ("panel", 0.8, True)
    assert [j.identity.model for j in jury.judges] == ["juror-one", "juror-two", "pairjudge-heuristic"]
    assert len(stacks) == 6


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        ('[[jury]]\nkind = "offline"\n', "not both"),
        ('[[tiers]]\nname = "local"\nkind = "offline"\n', "unique"),
        ('[[tiers]]\nname = "bad name"\nkind = "offline"\n', "name"),
        (JURY_TIER.replace("threshold = 0.8", 'threshold = 0.8\nmodel = "x"'), "leave out model"),
        ('[[tiers]]\nname = "solo"\n[[tiers.jury]]\nkind = "offline"\n', "at least two"),
        (JURY_TIER, "cannot come from tier 'panel'"),
    ],
)
def test_a_cascade_config_is_checked_at_start(
    config: Path, extra: str, error: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A top-level setting must come before the first table.
    top = "jury_quorum = 4\n" if "cannot come from" in error else ""
    config.write_text(top + CONFIG + "\n" + extra)
    with pytest.raises(ValueError, match=error):
        Settings()


def _pipeline(cascade: Cascade) -> tuple[Pipeline, InMemorySpanExporter, InMemoryMetricReader]:
    settings = Settings()
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    telemetry = Telemetry(
        settings.telemetry,
        tracer_provider=make_tracer_provider(settings.telemetry, exporter),
        meter_provider=MeterProvider(metric_readers=[reader]),
    )
    resolver = ScriptedJudge([])
    panel = JudgePanel(primary=(resolver,), tiebreak=resolver, cascade=cascade)
    pipeline = Pipeline(panel, PolicyHolder(Policy()), telemetry, {}, settings.max_event_bytes)
    return pipeline, exporter, reader


def _points(reader: InMemoryMetricReader, name: str) -> list[tuple[dict[str, Any], float]]:
    data = reader.get_metrics_data()
    assert data is not None
    points = [
        point
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == name
        for point in metric.data.data_points
    ]
    return [(dict(p.attributes or {}), float(p.value)) for p in points if isinstance(p, NumberDataPoint)]


async def test_an_escalated_pair_names_its_tiers_in_the_verdict_the_record_the_spans_and_the_cost() -> None:
    pair = make_pair(rubric=h2h_rubric())
    # The cheap tier flips (position A wins in both orders); the strong one is sure of the second candidate.
    cheap = ScriptedJudge(per_order(pair, h2h_reply("A", 0.9), h2h_reply("A", 0.9)), model="small", cost_usd=0.001)
    strong = ScriptedJudge(per_order(pair, h2h_reply("B", 0.9), h2h_reply("A", 0.9)), model="big", cost_usd=0.02)
    pipeline, exporter, reader = _pipeline(Cascade((Tier("local", (cheap,)), Tier("frontier", (strong,)))))
    result = await pipeline.handle("primary", pair.model_dump_json().encode(), None, Origin("pairs", 0, 7))
    by_kind = {m.kind: m for m in result.outgoing}
    verdict = PairVerdict.model_validate_json(by_kind["verdicts"].value)
    assert (verdict.winner, verdict.judge.tier, verdict.judge.model) == (SECOND_ID, "frontier", "big")
    record = DecisionRecord.model_validate_json(by_kind["decisions"].value)
    assert (record.series.judge_tier, record.escalated_from, record.calls) == ("frontier", ("local",), 4)
    pipeline.telemetry.tracer_provider.force_flush()
    spans = exporter.get_finished_spans()
    calls = [dict(s.attributes or {}) for s in spans if s.name.startswith("chat ")]
    assert sorted((c["pairjudge.tier"], c["gen_ai.request.model"]) for c in calls) == [
        ("frontier", "big"),
        ("frontier", "big"),
        ("local", "small"),
        ("local", "small"),
    ]
    stage = next(dict(s.attributes or {}) for s in spans if s.name == "pairjudge.primary")
    assert (stage["pairjudge.tier"], stage["pairjudge.escalated_from"]) == ("frontier", "local")
    # The decision's spend, both tiers' calls, under the deciding tier and the outcome.
    spend = _points(reader, "pairjudge.decision.cost")
    assert len(spend) == 1
    labels, value = spend[0]
    assert labels == {"pairjudge.stage": "primary", "pairjudge.outcome": "verdict", "pairjudge.tier": "frontier"}
    assert value == pytest.approx(2 * 0.001 + 2 * 0.02)
    per_call = {a["pairjudge.tier"]: v for a, v in _points(reader, "pairjudge.judge.cost")}
    assert per_call == {"local": pytest.approx(0.002), "frontier": pytest.approx(0.04)}
    outcomes = [a for a, _ in _points(reader, "pairjudge.outcomes")]
    assert outcomes == [labels]
    assert verdict.winner != FIRST_ID
