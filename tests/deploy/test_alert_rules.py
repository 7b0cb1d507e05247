"""deploy/monitoring's Prometheus rules: promtool accepts them, their unit tests pass and really test every
alert, every metric they read is one a real worker exports, and the PrometheusRule carries the same groups.

- ``promtool check rules`` (promtool v0.316.0, Prometheus 3.16, as .ci/run installs it) passes on the rules
  file and fails on broken copies of it.
- ``promtool test rules deploy/monitoring/pairjudge-rules.test.yaml`` passes; every alert of the rules file has
  a case there expecting it to fire and one expecting silence, and each alert is mutated twice (never fires,
  always fires) to show those cases fail when the alert is wrong.
- Every metric name an expression reads is in a real worker's /metrics (``pairjudge worker`` on Apache Kafka,
  judged through the OpenAI-compatible adapter against a local fake judge that is down, then back answering
  with another model than requested; one malformed pair). Seen live in that scrape: ``pairjudge_worker_ready``,
  ``pairjudge_worker_pairs_in_flight``, ``pairjudge_judge_breaker_open``, ``pairjudge_judge_breaker_openings_total``
  (present from the first scrape), ``pairjudge_judge_calls_total`` (outcome ok and error),
  ``pairjudge_outcomes_total``, ``gen_ai_client_operation_duration_seconds_bucket``,
  ``pairjudge_dead_letters_total`` (decode/malformed_json) and ``pairjudge_alerts_total`` (the drift audit's
  judge_model_mismatch), with the label names the rules group by. Not seen live: the kind
  ``kappa_below_threshold`` (checked against ``AlertKind`` instead). Not exported by the worker, so exempt and
  listed in ``EXTERNAL_METRICS``: ``kafka_consumergroup_lag`` (kafka-exporter). The names are found in the
  expressions with regular expressions (``metric_names``, itself tested), not a PromQL parser; each is also
  checked against the metrics table of docs/operations/health.md.
- Every alert's ``runbook_url`` is its section of docs/operations/alerts.md, and that page has one section
  (with that anchor) per alert and no other.
- deploy/k8s/monitoring/prometheusrule.yaml is the text ``tests.fixtures.promtool.render_prometheus_rule`` makes
  of the rules file, kustomize builds deploy/k8s/monitoring, and its PodMonitor scrapes the worker pods' health
  port; base/ does not include it (the CRDs may be missing on a cluster).
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import time
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from pairjudge.schemas.audit import ALERT_TITLES, AlertKind
from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.producer import send_events
from pairjudge_dev.workers import kafka_run, produce_raw, read_log, running_worker
from tests.fixtures.deploy import K8S_DIR, kustomize_build
from tests.fixtures.fake_judge_server import DEFAULT_CONTENT, Action, FakeJudgeServer, RecordedRequest, reply, status
from tests.fixtures.health import breaker_judge_settings, free_port, get
from tests.fixtures.marked import BAD, GOOD, marked_pair, prompt_of
from tests.fixtures.promtool import (
    MONITORING_K8S_DIR,
    PROMETHEUS_RULE,
    RULE_TESTS,
    RULES,
    promtool,
    render_prometheus_rule,
)

Rule = dict[str, Any]

#: Metrics the rules read that the worker does not export, and where they come from.
EXTERNAL_METRICS = {
    "kafka_consumergroup_lag": "kafka-exporter (danielqsj/kafka_exporter), group pairjudge.kafka-exporter"
}
SEVERITIES = {"critical", "warning", "info"}
#: Each alert's runbook: its own section of the alerts page, anchored by the alert's name in lower case.
RUNBOOK_URL = "docs/operations/alerts.md#{anchor}"
DOCS = Path(__file__).resolve().parents[2] / "docs"

#: The fields prometheus-operator's PrometheusRule takes (pkg/apis/monitoring/v1 RuleGroup and Rule, v0.95.2).
OPERATOR_GROUP_FIELDS = {"name", "labels", "interval", "query_offset", "rules", "partial_response_strategy", "limit"}
OPERATOR_RULE_FIELDS = {"record", "alert", "expr", "for", "keep_firing_for", "labels", "annotations"}


def _rules_doc() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(RULES.read_text())
    return doc


def _all_rules(doc: dict[str, Any]) -> list[Rule]:
    return [rule for group in doc["groups"] for rule in group["rules"]]


def _alerts(doc: dict[str, Any]) -> dict[str, Rule]:
    return {rule["alert"]: rule for rule in _all_rules(doc) if "alert" in rule}


ALERT_NAMES = sorted(_alerts(_rules_doc()))


def _write_suite(tmp_path: Path, rules: dict[str, Any]) -> Path:
    """A copy of the unit tests that reads ``rules`` (written beside it) instead of the real file."""
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    suite = yaml.safe_load(RULE_TESTS.read_text())
    suite["rule_files"] = ["rules.yaml"]
    path = tmp_path / "rules.test.yaml"
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    return path


# --- promtool check rules ----------------------------------------------------------------------------


def test_promtool_accepts_the_rules_file() -> None:
    done = promtool("check", "rules", RULES)
    assert done.returncode == 0, done.stdout + done.stderr
    count = len(_all_rules(_rules_doc()))
    assert f"SUCCESS: {count} rules found" in done.stdout, done.stdout


BREAKAGES = {
    # An unbalanced parenthesis in an expression.
    "promql": lambda text: text.replace("[5m]))", "[5m])", 1),
    # An annotation template that does not parse.
    "template": lambda text: text.replace("{{ $labels.judge }}:", "{{ $labels.judge :", 1),
    # A duration promtool cannot read.
    "duration": lambda text: text.replace("for: 10m", "for: ten minutes", 1),
    # A field rule files do not have.
    "field": lambda text: text.replace("        for: 5m\n", "        for: 5m\n        fore: 5m\n", 1),
}


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_promtool_rejects_a_broken_copy(breakage: str, tmp_path: Path) -> None:
    text = RULES.read_text()
    broken = BREAKAGES[breakage](text)
    assert broken != text, f"the {breakage} breakage no longer applies to {RULES.name}"
    path = tmp_path / "broken.yaml"
    path.write_text(broken)
    done = promtool("check", "rules", path)
    assert done.returncode != 0, done.stdout + done.stderr
    assert "FAILED" in done.stdout + done.stderr, done.stdout + done.stderr


# --- promtool test rules -----------------------------------------------------------------------------


# promtool's rule tests once gave another count under a loaded 4-worker run (expected 2 pair(s), got 1) and
# pass alone: they run alone, as the timing tests do (tests/fixtures/concurrency.py).
@pytest.mark.serial
def test_the_rules_unit_tests_pass() -> None:
    done = promtool("test", "rules", RULE_TESTS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout, done.stdout


def test_every_alert_has_a_firing_case_and_a_silent_case() -> None:
    suite = yaml.safe_load(RULE_TESTS.read_text())
    assert suite["rule_files"] == [RULES.name]
    firing: set[str] = set()
    silent: set[str] = set()
    for group in suite["tests"]:
        for case in group.get("alert_rule_test", []):
            (firing if case["exp_alerts"] else silent).add(case["alertname"])
    tested = firing | silent
    # A misspelt name would "pass" its silent case against an alert that does not exist.
    assert tested <= set(ALERT_NAMES), f"cases for alerts the rules do not define: {sorted(tested - set(ALERT_NAMES))}"
    assert set(ALERT_NAMES) - firing == set(), "alerts no case expects to fire"
    assert set(ALERT_NAMES) - silent == set(), "alerts no case expects to stay silent"


@pytest.mark.serial
@pytest.mark.parametrize("mutation", ["never fires", "always fires"])
@pytest.mark.parametrize("alert", ALERT_NAMES)
def test_the_unit_tests_catch_a_wrong_alert(alert: str, mutation: str, tmp_path: Path) -> None:
    rules = copy.deepcopy(_rules_doc())
    _alerts(rules)[alert]["expr"] = "vector(1) > 2" if mutation == "never fires" else "vector(1)"
    done = promtool("test", "rules", _write_suite(tmp_path, rules))
    assert done.returncode != 0, f"the unit tests still pass when {alert} {mutation}:\n{done.stdout}"
    assert f"alertname: {alert}," in done.stdout + done.stderr, done.stdout + done.stderr


@pytest.mark.serial
def test_the_mutation_harness_runs_the_unchanged_rules(tmp_path: Path) -> None:
    done = promtool("test", "rules", _write_suite(tmp_path, _rules_doc()))
    assert done.returncode == 0, done.stdout + done.stderr


# --- what the alerts say ------------------------------------------------------------------------------


@pytest.mark.parametrize("alert", ALERT_NAMES)
def test_every_alert_has_a_severity_summary_description_and_runbook(alert: str) -> None:
    rule = _alerts(_rules_doc())[alert]
    assert alert.startswith("Pairjudge"), alert
    assert rule.get("labels", {}).get("severity") in SEVERITIES, rule.get("labels")
    annotations = rule.get("annotations", {})
    assert set(annotations) == {"summary", "description", "runbook_url"}, annotations
    assert all(isinstance(v, str) and v.strip() for v in annotations.values()), annotations
    assert annotations["runbook_url"] == RUNBOOK_URL.format(anchor=alert.lower())


def test_the_audit_alert_says_each_kind_in_plain_words() -> None:
    """PairjudgeAuditAlert's summary names the kind it fired for by its plain title (the pages' and reports'
    words, ``ALERT_TITLES``), the machine name after it; a kind added without a title there falls back to the name."""
    rule = _alerts(_rules_doc())["PairjudgeAuditAlert"]
    summary = rule["annotations"]["summary"]
    excluded = set(re.search(r'pairjudge_alert!~"([^"]+)"', rule["expr"]).group(1).split("|"))  # type: ignore[union-attr]
    for kind in set(get_args(AlertKind)) - excluded:
        assert f'eq $labels.pairjudge_alert "{kind}" }}}}{ALERT_TITLES[kind]}{{{{' in summary, kind
    assert "{{ else }}{{ $labels.pairjudge_alert }}{{ end }} ({{ $labels.pairjudge_alert }})" in summary


def test_every_runbook_url_is_a_section_of_the_alerts_page() -> None:
    """Each runbook_url names a file in the repository and an anchor of it; the page has a section per alert.

    The sections are ``## <Alert> {#<alert>}`` headings (an explicit anchor, which mkdocs build --strict
    also resolves for every link to it); one for an alert that no longer exists fails too.
    """
    repo = DOCS.parent
    anchors: dict[str, set[str]] = {}
    for alert, rule in _alerts(_rules_doc()).items():
        path, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        page = repo / path
        assert page.is_file(), f"{alert}: {path} does not exist"
        if path not in anchors:
            anchors[path] = set(re.findall(r"^#+ .*\{#([\w.-]+)\}\s*$", page.read_text(), re.M))
        assert anchor in anchors[path], f"{alert}: {path} has no section #{anchor}"
    page = (DOCS / "operations" / "alerts.md").read_text()
    sections = dict(re.findall(r"^## (Pairjudge\w+) \{#([\w.-]+)\}\s*$", page, re.M))
    assert set(sections) == set(ALERT_NAMES), (
        sorted(set(ALERT_NAMES) - set(sections)),
        sorted(set(sections) - set(ALERT_NAMES)),
    )
    assert all(anchor == name.lower() for name, anchor in sections.items()), sections


def test_rule_names_are_unique() -> None:
    doc = _rules_doc()
    names = [rule.get("alert") or rule.get("record") for rule in _all_rules(doc)]
    assert len(names) == len(set(names)), names
    groups = [group["name"] for group in doc["groups"]]
    assert len(groups) == len(set(groups)), groups


# --- the metric names the rules read ------------------------------------------------------------------

PROMQL_KEYWORDS = {
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "inf",
    "nan",
}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_NUMBER = re.compile(r"(?<![A-Za-z0-9_:])\d[\w.]*")
_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` selects: identifiers that are not functions or aggregations (followed by
    ``(``), keywords, label names (inside ``{}`` or grouping clauses), strings, numbers or durations."""
    text = _STRING.sub('""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = _GROUPING.sub(" ", text)
    text = _NUMBER.sub(" ", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        name = match.group()
        if name.lower() in PROMQL_KEYWORDS or re.match(r"\s*\(", text[match.end() :]):
            continue
        names.add(name)
    return names


def test_metric_names_are_found_in_expressions() -> None:
    expr = (
        'sum by (job, le) (rate(foo_bucket{a="b", c=~"x|y"}[5m])) / ignoring(z) bar_total offset 10m '
        "unless on (job) histogram_quantile(0.95, baz) > 0.1 and qux and on(job) job:rec:rate5m > bool 3"
    )
    assert metric_names(expr) == {"foo_bucket", "bar_total", "baz", "qux", "job:rec:rate5m"}


def rule_metric_names() -> set[str]:
    """Every metric the rules read, but for the series they record themselves."""
    rules = _all_rules(_rules_doc())
    recorded = {rule["record"] for rule in rules if "record" in rule}
    used: set[str] = set()
    for rule in rules:
        names = metric_names(rule["expr"])
        assert names, f"no metric found in {rule.get('alert') or rule.get('record')}: {rule['expr']}"
        used |= names
    return used - recorded


def test_the_rules_read_the_documented_metrics() -> None:
    # docs/operations/health.md's metrics table names the worker's series; the live test below checks them on a
    # real worker.
    page = (DOCS / "operations" / "health.md").read_text()
    table = page[page.index("\n## Metrics\n") :]
    table = table[: table.index("\n## ", 1)]
    documented = set(re.findall(r"`([a-z_]+)`", table))
    for name in rule_metric_names() - set(EXTERNAL_METRICS):
        family = name.removesuffix("_bucket")
        assert family in documented, f"{name} is not in the metrics table of docs/operations/health.md"


def _judge(state: dict[str, bool]) -> Any:
    """Down (503) while ``state["down"]``; then prefers the GOOD output, answering as another model than asked."""

    def respond(request: RecordedRequest) -> Action:
        if state["down"]:
            return status(503)
        prompt = prompt_of(request)
        content = json.loads(DEFAULT_CONTENT)
        content["winner"] = "A" if prompt.index(GOOD) < prompt.index(BAD) else "B"
        content["confidence"] = 0.9
        return reply(json.dumps(content), model="another-model")

    return respond


Labels = set[tuple[str, str]]


def _scrape(port: int) -> dict[str, Labels]:
    """Every sample name on the worker's /metrics, with the (label, value) pairs its samples carry."""
    status_code, text = get(port, "/metrics")
    assert status_code == 200, text
    seen: dict[str, Labels] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            seen.setdefault(sample.name, set()).update(sample.labels.items())
    return seen


async def _readyz_says(port: int, text: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = await asyncio.to_thread(get, port, "/readyz", 1.0)
        if answer[0] is not None and text in answer[1]:
            return True
        await asyncio.sleep(0.05)
    return False


async def _metrics_until(port: int, name: str, timeout: float) -> dict[str, Labels]:
    deadline = time.monotonic() + timeout
    while True:
        seen = await asyncio.to_thread(_scrape, port)
        if name in seen or time.monotonic() > deadline:
            return seen
        await asyncio.sleep(0.5)


@pytest.mark.kafka
@pytest.mark.slow
async def test_every_metric_the_rules_read_is_exported_by_a_real_worker(kafka_bootstrap: str, tmp_path: Path) -> None:
    used = rule_metric_names()
    assert set(EXTERNAL_METRICS) <= used, "an exemption for a metric the rules no longer read"
    state = {"down": True}
    server = FakeJudgeServer().start()
    server.set_responder(_judge(state))
    port = free_port()
    judge_settings = breaker_judge_settings(server.base_url)
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "alerts",
        health={"port": port},
        judge=judge_settings,
        worker={"shutdown_grace_s": 2},
        # One window for the whole test; snapshots (and so the audit's alerts) every half second.
        audit={"snapshot_interval_s": 0.5, "window_s": 10_000_000.0},
    )
    prefix = settings.topics.prefix
    log_path = tmp_path / "worker.log"
    ids = {f"{prefix}-000", f"{prefix}-001"}
    try:
        with running_worker(settings, log_path) as worker:
            assert await _readyz_says(port, '"ready"', timeout=90), read_log(log_path)[-3000:]
            first = await asyncio.to_thread(_scrape, port)
            # The gauges are there before any pair: the readiness, in-flight and breaker series.
            always = {
                "pairjudge_worker_ready",
                "pairjudge_worker_pairs_in_flight",
                "pairjudge_judge_breaker_open",
                "pairjudge_judge_breaker_openings_total",
            }
            assert always <= set(first), sorted(first)

            # The judge is down: calls fail until the breaker opens. A malformed pair is dead-lettered.
            await send_events(settings, [marked_pair(f"{prefix}-000", "0"), marked_pair(f"{prefix}-001", "1")])
            await produce_raw(kafka_bootstrap, settings.topics.name("pairs"), [b"{not json"], keyed=False)
            assert await _readyz_says(port, "judge fake-model: circuit", timeout=60), read_log(log_path)[-3000:]
            during = await asyncio.to_thread(_scrape, port)

            # Back, answering as another model: verdicts, latencies, and the audit's judge_model_mismatch.
            state["down"] = False
            outcomes = await collect_outcomes(settings, ids, timeout=60)
            assert outcomes.complete, read_log(log_path)[-3000:]
            after = await _metrics_until(port, "pairjudge_alerts_total", timeout=60)
            assert worker.poll() is None, read_log(log_path)[-3000:]
    finally:
        server.stop()

    seen: dict[str, Labels] = {}
    for scrape in (first, during, after):
        for name, pairs in scrape.items():
            seen.setdefault(name, set()).update(pairs)
    missing = used - set(EXTERNAL_METRICS) - set(seen)
    assert not missing, f"read by the rules, not on a real worker's /metrics: {sorted(missing)}; seen: {sorted(seen)}"
    # The OpenTelemetry labels are the ones the rules aggregate away (`without (otel_scope_name, ...)`).
    otel = {label for name in used - set(EXTERNAL_METRICS) for label, _ in seen[name] if label.startswith("otel_")}
    assert "otel_scope_name" in otel
    assert otel <= {"otel_scope_name", "otel_scope_version", "otel_scope_schema_url"}, otel
    # The labels the rules group and select by are the ones the worker puts on those series.
    expected_labels = {
        "pairjudge_judge_calls_total": {"pairjudge_stage", "outcome"},
        "pairjudge_outcomes_total": {"pairjudge_stage", "pairjudge_outcome"},
        "gen_ai_client_operation_duration_seconds_bucket": {"gen_ai_request_model", "pairjudge_stage", "le"},
        "pairjudge_dead_letters_total": {"pairjudge_stage", "pairjudge_reason"},
        "pairjudge_alerts_total": {"pairjudge_alert"},
        "pairjudge_judge_breaker_open": {"judge"},
        "pairjudge_judge_breaker_openings_total": {"judge"},
        "pairjudge_worker_ready": set(),
        "pairjudge_worker_pairs_in_flight": set(),
    }
    assert set(expected_labels) == used - set(EXTERNAL_METRICS)
    for name, label_names in expected_labels.items():
        assert {label for label, _ in seen[name] if not label.startswith("otel_")} == label_names, (name, seen[name])
    # The label values the rules select on: judge calls' outcomes, and the audit's alert kinds.
    assert {("outcome", "ok"), ("outcome", "error")} <= seen["pairjudge_judge_calls_total"]
    assert ("pairjudge_alert", "judge_model_mismatch") in seen["pairjudge_alerts_total"]
    assert ("pairjudge_reason", "malformed_json") in seen["pairjudge_dead_letters_total"]
    assert "kappa_below_threshold" in get_args(AlertKind)  # the kind PairjudgeKappaGuardTripped selects


# --- the PrometheusRule and the optional kustomization --------------------------------------------------


def test_the_prometheus_rule_is_generated_from_the_rules_file() -> None:
    assert PROMETHEUS_RULE.read_text() == render_prometheus_rule(RULES.read_text()), (
        f"{PROMETHEUS_RULE.name} differs from {RULES.name}: run `.venv/bin/python -m tests.fixtures.promtool`"
    )
    rule = yaml.safe_load(PROMETHEUS_RULE.read_text())
    assert rule["spec"]["groups"] == _rules_doc()["groups"]


def test_the_rule_groups_use_only_fields_the_prometheus_operator_takes() -> None:
    for group in _rules_doc()["groups"]:
        assert set(group) <= OPERATOR_GROUP_FIELDS, group["name"]
        for rule in group["rules"]:
            assert set(rule) <= OPERATOR_RULE_FIELDS, rule


def test_the_monitoring_kustomization_builds_and_scrapes_the_workers() -> None:
    built = kustomize_build(MONITORING_K8S_DIR)
    kinds = {(doc["apiVersion"], doc["kind"]): doc for doc in built}
    assert set(kinds) == {("monitoring.coreos.com/v1", "PrometheusRule"), ("monitoring.coreos.com/v1", "PodMonitor")}
    assert kinds["monitoring.coreos.com/v1", "PrometheusRule"]["spec"]["groups"] == _rules_doc()["groups"]

    # The PodMonitor selects the worker pods and scrapes their health port's /metrics.
    base = kustomize_build(K8S_DIR / "base")
    (worker,) = [d for d in base if d["kind"] == "Deployment" and d["metadata"]["name"] == "pairjudge-worker"]
    pod_labels = worker["spec"]["template"]["metadata"]["labels"]
    (container,) = worker["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    monitor = kinds["monitoring.coreos.com/v1", "PodMonitor"]
    selector = monitor["spec"]["selector"]
    assert set(selector) == {"matchLabels"}
    assert selector["matchLabels"].items() <= pod_labels.items(), (selector, pod_labels)
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["path"] == "/metrics"
    assert ports[endpoint["port"]] == int(_settings_port(base))

    # Optional: neither the base nor any overlay pulls the CRD kinds in.
    assert not any(d["apiVersion"].startswith("monitoring.coreos.com/") for d in base)
    assert "monitoring" not in (K8S_DIR / "base" / "kustomization.yaml").read_text()


def _settings_port(base: list[dict[str, Any]]) -> str:
    """PAIRJUDGE_HEALTH__PORT from the base's settings ConfigMap."""
    (settings,) = [
        d for d in base if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("pairjudge-settings")
    ]
    port: str = settings["data"]["PAIRJUDGE_HEALTH__PORT"]
    return port
