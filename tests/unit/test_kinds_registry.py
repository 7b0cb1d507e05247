"""The kinds registry (``schemas.kinds``) reaches everything that lists a kind.

Each test walks a registry table, so a new entry (a topic kind, a stage, a live control key, a risk level's
threshold) is checked everywhere it must show up, and a place that still keeps its own list fails here instead
of drifting: topic creation, the Faust topics and agents, the events reference, the ACL table, the alert rules
and the autoscaler, the policy and its settings, the operators' form, the settings and live settings
references, and the wire format's enums.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any, get_args

import pytest
import typer
import yaml

from pairjudge.agents.policy import Policy
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.schemas import ControlUpdate, DeadLetter
from pairjudge.schemas.export import EXPORTED
from pairjudge.schemas.kinds import (
    CONTROLS,
    DEAD_LETTER_STAGES,
    RISK_THRESHOLD_KEYS,
    RISK_THRESHOLDS,
    STAGES,
    TOPICS,
    ControlKey,
    ControlSpec,
    TopicKind,
    WorkerStage,
)
from pairjudge.schemas.pair import RiskLevel
from pairjudge.streams.app import create_app
from pairjudge.streams.cli.deadletter import _selection
from pairjudge.streams.config.sections import PolicySettings
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.live import CONTROL_KEYS, parse_value
from pairjudge.streams.kafka.topics import FINAL_KINDS, changelog_topic, outcome_table_name, topic_specs
from pairjudge.streams.review import views
from pairjudge_dev.docs_reference import (
    LIVE_NOTE,
    expand,
    render_live_settings,
    render_risk_thresholds,
    render_settings,
    render_topics,
)

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "reg"
SETTINGS = Settings.model_validate({"kafka": {"partitions": 5}, "topics": {"prefix": PREFIX}})
POLICY_DEFAULTS = Policy()


def _row(table: str, first_cell: str) -> str:
    """The Markdown table row whose first cell is ``first_cell`` (fails when there is none)."""
    rows = [line for line in table.splitlines() if line.startswith(f"| {first_cell} |")]
    assert len(rows) == 1, f"{first_cell}: {len(rows)} rows"
    return rows[0]


# --- topic kinds ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", get_args(TopicKind))
def test_every_topic_kind_is_created_with_the_layout_the_registry_gives_it(kind: TopicKind) -> None:
    spec = topic_specs(SETTINGS)[f"{PREFIX}.{kind}"]
    if TOPICS[kind].single_partition:
        assert (spec.partitions, spec.compacted) == (1, True)
    else:
        assert (spec.partitions, spec.compacted) == (5, False)
    assert (kind in FINAL_KINDS) == TOPICS[kind].final


def test_topic_creation_holds_the_registry_s_topics_and_the_stage_tables_changelogs_only() -> None:
    app_id = SETTINGS.worker.app_id
    tables = {changelog_topic(app_id, outcome_table_name(stage)) for stage in STAGES}
    created = set(topic_specs(SETTINGS))
    assert {name for name in created if name.startswith(f"{PREFIX}.")} == {f"{PREFIX}.{k}" for k in TOPICS}
    assert tables <= created


@pytest.mark.parametrize("kind", get_args(TopicKind))
def test_every_topic_kind_has_a_row_in_the_events_reference_linking_exported_contracts(kind: TopicKind) -> None:
    table = render_topics()
    compacted = " (compacted)" if TOPICS[kind].single_partition else ""
    row = _row(table, f"`pairjudge.{kind}`{compacted}")
    exported = {model.__name__ for model in EXPORTED}
    linked = re.findall(r"\[(\w+)\]\(#(\w+)\)", row)
    assert linked, row
    assert {name for name, _ in linked} <= exported, row
    assert all(anchor == name.lower() for name, anchor in linked), row


@pytest.mark.parametrize("kind", get_args(TopicKind))
def test_every_topic_kind_is_granted_to_whoever_writes_it_in_the_acl_table(kind: TopicKind) -> None:
    # Workers READ every topic; WRITE is granted topic by topic, so a topic missing here cannot be written on a
    # secured cluster (the spend topic once was).
    text = expand((ROOT / "docs/operations/secured-kafka.md").read_text())  # the worker's WRITE list is generated
    acls = "\n".join(line for line in text.splitlines() if line.startswith("| ") and "WRITE" in line)
    assert f"`P.{kind}`" in acls


# --- stages --------------------------------------------------------------------------------------


def test_every_stage_has_its_agent_on_its_topic_and_a_table_of_its_outcomes(tmp_path: Path) -> None:
    wired = create_app(Settings(worker={"data_dir": tmp_path}), judge=ScriptedJudge([]), follow_control=False)
    agents = wired.faust_app.agents
    for stage, spec in STAGES.items():
        assert spec.source in TOPICS, stage
        assert not TOPICS[spec.source].final, stage
        agent = agents[spec.agent]
        assert [t for t in agent.channel.topics] == [f"pairjudge.{spec.source}"], stage
        assert outcome_table_name(stage) in wired.faust_app.tables, stage
    assert set(wired.outcomes.tables) == set(STAGES)


@pytest.mark.parametrize("stage", get_args(WorkerStage))
def test_every_stage_s_input_is_watched_for_lag_and_scaled_on(stage: WorkerStage) -> None:
    source = f"pairjudge.{STAGES[stage].source}"
    for rules in ("deploy/monitoring/pairjudge-rules.yaml", "deploy/k8s/monitoring/prometheusrule.yaml"):
        selector = re.search(r'topic=~"pairjudge\\\\\.\(([\w|-]+)\)"', (ROOT / rules).read_text())
        assert selector is not None, rules
        assert STAGES[stage].source in selector.group(1).split("|"), rules
    scaled = yaml.safe_load((ROOT / "deploy/k8s/base/worker-scaledobject.yaml").read_text())
    triggers = [t["metadata"]["topic"] for t in scaled["spec"]["triggers"] if t["type"] == "kafka"]
    assert source in triggers


def test_the_dead_letter_stages_are_the_contract_s_and_the_cli_s() -> None:
    schema = DeadLetter.model_json_schema()
    assert tuple(schema["properties"]["stage"]["enum"]) == DEAD_LETTER_STAGES
    # The stages that judge dead-letter under their own name, the primary stage as "judge".
    assert {"judge", *(s for s in STAGES if s != "primary")} <= set(DEAD_LETTER_STAGES)
    # ``pairjudge deadletter ... --stage`` takes each, and nothing else.
    assert _selection(None, DEAD_LETTER_STAGES, None, None, None).stages == frozenset(DEAD_LETTER_STAGES)
    with pytest.raises(typer.BadParameter):
        _selection(None, ["shadow-of-a-doubt"], None, None, None)


# --- live control keys ---------------------------------------------------------------------------


def _a_valid_other_value(key: ControlKey, spec: ControlSpec) -> float | bool | str:
    current = getattr(POLICY_DEFAULTS, key)
    if spec.value == "switch":
        return not current
    if spec.value == "choice":
        return next(word for word in spec.choices if word != current)
    if spec.value == "text":
        return "exp-a=0.5" if key == "shadow_shares" else "exp-a"
    return 0.42 if current != 0.42 else 0.43


@pytest.mark.parametrize("key", get_args(ControlKey))
def test_every_control_key_sets_its_policy_field_and_nothing_else(key: ControlKey) -> None:
    value = _a_valid_other_value(key, CONTROLS[key])
    changed = POLICY_DEFAULTS.apply(ControlUpdate(key=key, value=value))
    assert getattr(changed, key) == value
    assert dataclasses.replace(changed, **{key: getattr(POLICY_DEFAULTS, key)}) == POLICY_DEFAULTS
    assert parse_value(key, str(value).lower()) == value
    assert key in CONTROL_KEYS


@pytest.mark.parametrize("key", get_args(ControlKey))
def test_every_control_key_is_a_setting_with_the_policy_s_default_or_says_why_not(key: ControlKey) -> None:
    field = PolicySettings.model_fields.get(key)
    if field is None:
        # Only the kappa guard, which no deployment configures: the audit trips it and a person resumes it.
        assert CONTROLS[key].about
        assert not CONTROLS[key].on_form
        return
    assert field.default == getattr(POLICY_DEFAULTS, key)


def test_the_policy_settings_default_to_the_policy_s_defaults() -> None:
    shared = [f.name for f in dataclasses.fields(Policy) if f.name in PolicySettings.model_fields]
    assert {n: PolicySettings.model_fields[n].default for n in shared} == {
        n: getattr(POLICY_DEFAULTS, n) for n in shared
    }
    assert PolicySettings().to_policy() == POLICY_DEFAULTS


@pytest.mark.parametrize("key", get_args(ControlKey))
def test_every_control_key_has_its_field_on_the_operators_form(key: ControlKey) -> None:
    spec = CONTROLS[key]
    context = {
        "user": {"name": "olga", "role": "operator"},
        "csrf": "token",
        **views.controls_context(PolicySettings(), POLICY_DEFAULTS, {}),
        "paused": False,
        "guard_by": None,
        "message": None,
        "stats": {"waiting": 0, "second_opinion": 0, "claimed": 0, "done": 0},
        "guard": {"mode": "absolute", "kappa_min": 0.7, "ratio": 0.9, "min_human_pairs": 30},
        "series": [],
        "tiebreaks_off": [],
        "tiebreaks_on": [],
    }
    page = views.templates().env.get_template("operators.html").render(context)
    row = re.search(rf'<tr id="control-{key}">(.*?)</tr>', page, re.S)
    if not spec.on_form:
        assert row is None
        # The kappa guard has its own button, shown only while it has paused automatic decisions.
        assert 'action="/operators/resume"' not in page
        paused = views.templates().env.get_template("operators.html").render({**context, "paused": True})
        assert 'action="/operators/resume"' in paused
        return
    assert row is not None, key
    assert f'<input type="hidden" name="key" value="{key}">' in row.group(1)
    if spec.value == "number":
        assert '<input name="value" inputmode="decimal"' in row.group(1)
    else:
        options = re.findall(r'<option value="(\w+)">', row.group(1))
        assert options == (["true", "false"] if spec.value == "switch" else list(spec.choices))


@pytest.mark.parametrize("key", get_args(ControlKey))
def test_every_control_key_has_a_row_in_the_live_settings_reference(key: ControlKey) -> None:
    row = _row(render_live_settings(), f"`{key}`")
    spec = CONTROLS[key]
    if spec.value == "choice":
        assert all(f"`{word}`" in row for word in spec.choices)
    if key in PolicySettings.model_fields:
        assert f"`PAIRJUDGE_POLICY__{key.upper()}`" in row


def test_the_settings_reference_marks_exactly_the_control_keys_live() -> None:
    page = render_settings()
    marked = set(re.findall(r"^\| `PAIRJUDGE_POLICY__(\w+)` \|.*" + re.escape(LIVE_NOTE), page, re.M))
    assert marked == {key.upper() for key in CONTROLS if key in PolicySettings.model_fields}


def test_the_control_update_contract_takes_the_registry_s_keys_in_its_order() -> None:
    # The wire format: the exported schema's enum is the Literal's order (pairjudge schemas export).
    schema: dict[str, Any] = json.loads(json.dumps(ControlUpdate.model_json_schema()))
    assert tuple(schema["properties"]["key"]["enum"]) == tuple(CONTROLS)


# --- the risk levels' thresholds -----------------------------------------------------------------


def test_there_are_three_thresholds_per_level_each_a_distinct_live_key() -> None:
    assert len(RISK_THRESHOLD_KEYS) == 3 * len(get_args(RiskLevel)) == len(set(RISK_THRESHOLD_KEYS))
    assert set(RISK_THRESHOLD_KEYS) <= set(CONTROLS)


@pytest.mark.parametrize("key", RISK_THRESHOLD_KEYS)
def test_every_risk_threshold_is_a_unit_interval_setting_in_the_settings_and_the_docs(key: str) -> None:
    field = PolicySettings.model_fields[key]
    bounds = {type(m).__name__: m for m in field.metadata}
    assert bounds["Ge"].ge == 0, key
    assert bounds["Le"].le == 1, key
    assert f"`PAIRJUDGE_POLICY__{key.upper()}`" in render_settings()
    assert f"`{key}`" in render_risk_thresholds()
    out_of_range: dict[str, Any] = {key: 1.5}
    with pytest.raises(ValueError, match=key):
        Policy(**out_of_range)


@pytest.mark.parametrize(("level", "position"), [(lv, i) for lv in RISK_THRESHOLDS for i in range(3)])
def test_each_threshold_routes_its_own_level(level: RiskLevel, position: int) -> None:
    # Every threshold at 0 but one at 0.9: only its level (and, for the normal level, the high level, which is
    # never looser) sees 0.9 in its place.
    zeros: dict[str, Any] = dict.fromkeys(RISK_THRESHOLD_KEYS, 0.0)
    one: dict[str, Any] = {RISK_THRESHOLDS[level][position]: 0.9}
    policy = dataclasses.replace(Policy(**zeros), **one)
    for other in RISK_THRESHOLDS:
        values = dataclasses.astuple(policy.thresholds_for(other))
        expected = 0.9 if other == level or (level == "normal" and other == "high") else 0.0
        assert values[position] == expected, (other, values)
        assert sum(values) == expected, (other, values)
