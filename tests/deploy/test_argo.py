"""deploy/argo: the AnalysisTemplate and the worked canary Rollout validate against Argo Rollouts' published CRDs
(tests/fixtures/deploy_schemas/README-argo-rollouts.md), the template maps the gate's three answers onto
Argo's three outcomes, and an analysis run (``tests.fixtures.argo``'s model of Argo's web metric) against the
read API ends as a rollout controller's would."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, get_args

import jsonschema
import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from pairjudge.schemas.scores import GateDecision
from tests.fixtures.argo import MetricRun, measurement_phase, run_analysis, template_args
from tests.fixtures.deploy import SCHEMAS_DIR, Manifest
from tests.fixtures.read_api import EXPERIMENT, serving_api

ARGO_DIR = Path(__file__).resolve().parents[2] / "deploy" / "argo"
TEMPLATE = ARGO_DIR / "analysis-template.yaml"
ROLLOUT = ARGO_DIR / "rollout-example.yaml"
KUBERNETES_VERSION = "1.31"  # as test_k8s


def _load(path: Path) -> Manifest:
    doc: Manifest = yaml.safe_load(path.read_text())
    return doc


def crd_schema(file: str) -> dict[str, Any]:
    """The CRD's v1alpha1 schema, closed like the API server's strict field validation (as test_k8s does KEDA's)."""
    crd = yaml.safe_load((SCHEMAS_DIR / file).read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    schema: dict[str, Any] = copy.deepcopy(version["schema"]["openAPIV3Schema"])

    def close(node: Any) -> None:
        if isinstance(node, dict):
            if (
                "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
            ):
                node["additionalProperties"] = False
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    close(schema)
    return schema


def validate(doc: Manifest) -> None:
    assert doc["apiVersion"] == "argoproj.io/v1alpha1"
    file = {"AnalysisTemplate": "argoproj.io_analysistemplates.yaml", "Rollout": "argoproj.io_rollouts.yaml"}
    jsonschema.Draft7Validator(crd_schema(file[doc["kind"]])).validate(doc)


def test_the_template_and_the_rollout_validate_against_argo_rollouts_crds() -> None:
    validate(_load(TEMPLATE))
    validate(_load(ROLLOUT))


def test_the_crd_validation_catches_misspelt_fields_and_wrong_types() -> None:
    template = _load(TEMPLATE)
    template["spec"]["metrics"][0]["successCondtion"] = template["spec"]["metrics"][0].pop("successCondition")
    with pytest.raises(jsonschema.ValidationError, match="successCondtion"):
        validate(template)
    template = _load(TEMPLATE)
    template["spec"]["metrics"][0]["provider"]["web"]["timeoutSeconds"] = "ten"
    with pytest.raises(jsonschema.ValidationError):
        validate(template)
    rollout = _load(ROLLOUT)
    rollout["spec"]["strategy"]["canary"]["steps"][1]["analysis"]["template"] = "pairjudge-gate"
    with pytest.raises(jsonschema.ValidationError):
        validate(rollout)


def test_the_rollouts_pod_template_is_a_valid_kubernetes_pod_template() -> None:
    """The CRD leaves the pod template to Kubernetes' own schema: checked as the Deployment it would be."""
    spec = _load(ROLLOUT)["spec"]
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "support-assistant"},
        "spec": {"selector": spec["selector"], "template": spec["template"]},
    }
    kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def test_the_rollout_asks_the_template_with_its_arguments() -> None:
    template, rollout = _load(TEMPLATE), _load(ROLLOUT)
    steps = rollout["spec"]["strategy"]["canary"]["steps"]
    (analysis,) = [s["analysis"] for s in steps if "analysis" in s]
    assert [t["templateName"] for t in analysis["templates"]] == [template["metadata"]["name"]]
    given = {a["name"] for a in analysis["args"]}
    declared = {a["name"]: a for a in template["spec"]["args"]}
    assert given <= set(declared)
    # Every argument without a default or a secret is given by the rollout.
    assert {n for n, a in declared.items() if "value" not in a and "valueFrom" not in a} <= given
    # The token comes from a Secret, never a literal.
    assert declared["api-token"]["valueFrom"]["secretKeyRef"] == {"name": "pairjudge-api-token", "key": "token"}
    web = template["spec"]["metrics"][0]["provider"]["web"]
    assert {"key": "Authorization", "value": "Bearer {{args.api-token}}"} in web["headers"]


def test_promote_reject_and_continue_map_onto_success_failure_and_inconclusive() -> None:
    (metric,) = _load(TEMPLATE)["spec"]["metrics"]
    phases = {decision: measurement_phase(metric, decision) for decision in get_args(GateDecision)}
    assert phases == {"promote": "Successful", "reject": "Failed", "continue": "Inconclusive"}


@pytest.mark.parametrize(
    ("answers", "ended"),
    [
        (["continue"] * 5 + ["promote"], "Successful"),
        (["continue"] * 5 + ["reject"], "Failed"),
        (["continue"] * 120, "Inconclusive"),  # the deadline: the rollout pauses for a person
        (["promote"], "Successful"),
    ],
)
def test_the_metric_ends_at_the_first_decision_or_at_its_deadline(answers: list[str], ended: str) -> None:
    (metric,) = _load(TEMPLATE)["spec"]["metrics"]
    run = MetricRun(metric)
    for i, answer in enumerate(answers):
        assert run.assess() is None, f"ended early, after {i} measurements"
        run.record(measurement_phase(metric, answer), answer)
    assert run.assess() == ended
    assert int(metric["count"]) * 30 == 3600  # one hour at 30 s, as the template's comment says


async def _no_wait(seconds: float) -> None:
    assert seconds in (30.0, 10.0)  # the template's interval; Argo's retry after an error


async def test_an_analysis_run_against_the_read_api_follows_each_basis(tmp_path: Path) -> None:
    """The realistic biased judge (tests.fixtures.scoreboard): on the judge's basis the analysis would promote; on
    people's it keeps asking (continue) until its deadline, and ends Inconclusive."""
    template = _load(TEMPLATE)
    async with serving_api(tmp_path) as api:
        args = {"pairjudge-url": api.url, "api-token": api.read, "experiment": EXPERIMENT.replace("/", "%2F")}
        judge = await run_analysis(template, template_args(template, {**args, "basis": "judge"}), wait=_no_wait)
        human = await run_analysis(template, template_args(template, args), wait=_no_wait)
        refused = await run_analysis(
            template, template_args(template, {**args, "api-token": api.write_only}), wait=_no_wait
        )
    assert (judge.ended, judge.results) == ("Successful", ["promote"])
    assert human.ended == "Inconclusive"
    assert set(human.results) == {"continue"}
    assert len(human.results) == 120
    # A token without the read role: every call errs (403), and the analysis ends in Error (the rollout aborts).
    assert refused.ended == "Error"
    assert refused.phases == ["Error"] * 31
