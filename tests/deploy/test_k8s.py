"""deploy/k8s: the base and every overlay build with kustomize, validate against Kubernetes' schemas
(kubernetes-validate, strict: unknown fields fail) and KEDA's ScaledObject CRD, and agree with pairjudge's
settings, its health interface and each other (partitions vs. replicas, probes vs. ports, grace periods).
"""

from __future__ import annotations

import asyncio
import copy
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from pairjudge.streams.config.settings import HealthSettings, Settings
from pairjudge.streams.kafka.admin import topic_partitions
from pairjudge.streams.kafka.topics import FOLLOWED_KINDS, LATEST_KINDS, STAGE_SOURCES, table_names, topic_specs
from pairjudge.streams.worker.health_server import HealthServer, WorkerHealth
from pairjudge.streams.worker.supervisor import SHUTDOWN_MARGIN_S
from tests.deploy.support import setting_problem
from tests.fixtures.deploy import K8S_DIR, SCHEMAS_DIR, Manifest, k8s_targets, kustomize_build
from tests.fixtures.review import free_port, review_settings, serving

#: The oldest Kubernetes these manifests promise to work on (PodDisruptionBudget's
#: unhealthyPodEvictionPolicy is GA in 1.31); kubernetes-validate ships its schemas.
KUBERNETES_VERSION = "1.31"
KEDA_CRD = SCHEMAS_DIR / "keda.sh_scaledobjects.yaml"
#: The worker's health interface (streams.worker.health_server), agreed for issue 14.
HEALTH_PORT = 9465
#: The worker commits after this many acks (streams/worker/faust_app.py, broker_commit_every).
COMMIT_EVERY = 50
LIVENESS_PATH, READINESS_PATH = "/livez", "/readyz"
WORKER, REVIEW, TOPICS_JOB = "pairjudge-worker", "pairjudge-review", "pairjudge-topics"
GATEWAY = "pairjudge-gateway"
#: Settings whose values are secrets: only ever their ``_FILE`` variant (or a secretKeyRef) in a manifest.
SECRET_NAME = re.compile(r"(_KEY$|PASSWORD|SECRET|TOKEN|DATABASE_URL$|OTLP_HEADERS$|WEBHOOK_URL$|^PAIRJUDGE_JURY$)")

TARGETS = k8s_targets()


@dataclass(frozen=True)
class Built:
    """One ``kustomize build``'s documents, with the lookups the checks need."""

    name: str
    docs: list[Manifest]

    def all(self, kind: str) -> list[Manifest]:
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind: str, name: str) -> Manifest:
        found = [d for d in self.all(kind) if d["metadata"]["name"] == name]
        assert len(found) == 1, f"{self.name}: expected one {kind} {name}, found {len(found)}"
        return found[0]

    @property
    def settings(self) -> dict[str, str]:
        """The generated settings ConfigMap (its name carries kustomize's content hash)."""
        maps = [d for d in self.all("ConfigMap") if d["metadata"]["name"].startswith("pairjudge-settings-")]
        assert len(maps) == 1, f"{self.name}: expected one pairjudge-settings ConfigMap, found {len(maps)}"
        return dict(maps[0]["data"])

    @property
    def scaled_object(self) -> Manifest:
        return self.one("ScaledObject", WORKER)

    @property
    def processes(self) -> int:
        """Worker processes per pod (``pairjudge worker`` supervises them when more than one)."""
        return int(self.settings.get("PAIRJUDGE_WORKER__PROCESSES", Settings().worker.processes))

    def pod_spec(self, kind: str, name: str) -> Manifest:
        return dict(self.one(kind, name)["spec"]["template"]["spec"])

    def container(self, kind: str, name: str) -> Manifest:
        containers = self.pod_spec(kind, name)["containers"]
        assert len(containers) == 1, f"{self.name}: {name} should run one container"
        return dict(containers[0])

    def pairjudge_workloads(self) -> Iterator[tuple[str, str]]:
        yield from (("Deployment", WORKER), ("Deployment", REVIEW), ("Deployment", GATEWAY), ("Job", TOPICS_JOB))


@pytest.fixture(scope="module", params=TARGETS, ids=[str(t.relative_to(K8S_DIR)) for t in TARGETS])
def built(request: pytest.FixtureRequest) -> Built:
    target: Path = request.param
    return Built(str(target.relative_to(K8S_DIR)), kustomize_build(target))


# --- schema validation ----------------------------------------------------------------------------


def validate_builtin(doc: Manifest) -> None:
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def keda_schema() -> dict[str, Any]:
    """The v1alpha1 ScaledObject schema from KEDA's CRD, made strict like the API server's field validation.

    A CRD's structural schema leaves ``additionalProperties`` out: the API server prunes unknown fields, and
    rejects them under ``kubectl apply``'s default ``--validate=strict``. Closing every object that lists its
    properties does the same here, so a misspelt field (``maxReplicas``) fails instead of vanishing.
    """
    crd = yaml.safe_load(KEDA_CRD.read_text())
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


def validate_scaled_object(doc: Manifest) -> None:
    assert doc["apiVersion"] == "keda.sh/v1alpha1"
    assert doc["kind"] == "ScaledObject"
    jsonschema.Draft7Validator(keda_schema()).validate(doc)
    # The CRD's one CEL rule (x-kubernetes-validations), which JSON Schema cannot express.
    spec = doc["spec"]
    if "minReplicaCount" in spec:
        assert spec["minReplicaCount"] <= spec.get("maxReplicaCount", 100), "minReplicaCount > maxReplicaCount"


def test_every_document_validates(built: Built) -> None:
    problems = []
    for doc in built.docs:
        what = f"{doc.get('kind')} {doc.get('metadata', {}).get('name')}"
        try:
            if doc["apiVersion"].startswith("keda.sh/"):
                validate_scaled_object(doc)
            else:
                validate_builtin(doc)
        except (jsonschema.ValidationError, kubernetes_validate.SchemaNotFoundError, AssertionError) as exc:
            problems.append(f"{what}: {getattr(exc, 'message', exc)}")
    assert not problems, f"{built.name}:\n" + "\n".join(problems)
    kinds = {d["kind"] for d in built.docs}
    assert {"ConfigMap", "Deployment", "PodDisruptionBudget", "Job", "Service", "ScaledObject"} <= kinds


def test_builtin_validation_catches_unknown_fields_and_wrong_types(built: Built) -> None:
    worker = built.one("Deployment", WORKER)
    validate_builtin(worker)
    typo = copy.deepcopy(worker)
    typo["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["pathh"] = "/livez"
    with pytest.raises(jsonschema.ValidationError, match="pathh"):
        validate_builtin(typo)
    wrong_type = copy.deepcopy(worker)
    wrong_type["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "45s"
    with pytest.raises(jsonschema.ValidationError):
        validate_builtin(wrong_type)
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        validate_builtin({**worker, "kind": "Deploymnet"})


def test_keda_validation_catches_wrong_types_and_unknown_fields(built: Built) -> None:
    scaled = built.scaled_object
    validate_scaled_object(scaled)
    numeric = copy.deepcopy(scaled)
    numeric["spec"]["triggers"][0]["metadata"]["lagThreshold"] = 1000  # KEDA's metadata values are strings
    with pytest.raises(jsonschema.ValidationError, match="1000"):
        validate_scaled_object(numeric)
    typo = copy.deepcopy(scaled)
    typo["spec"]["maxReplicas"] = typo["spec"].pop("maxReplicaCount")
    with pytest.raises(jsonschema.ValidationError, match="maxReplicas"):
        validate_scaled_object(typo)
    no_target = copy.deepcopy(scaled)
    del no_target["spec"]["scaleTargetRef"]
    with pytest.raises(jsonschema.ValidationError, match="scaleTargetRef"):
        validate_scaled_object(no_target)
    inverted = copy.deepcopy(scaled)
    inverted["spec"]["minReplicaCount"] = inverted["spec"]["maxReplicaCount"] + 1
    with pytest.raises(AssertionError, match="minReplicaCount"):
        validate_scaled_object(inverted)


# --- scaling ----------------------------------------------------------------------------------------


def test_workers_are_capped_at_the_partition_count(built: Built) -> None:
    spec = built.scaled_object["spec"]
    partitions = int(built.settings["PAIRJUDGE_KAFKA__PARTITIONS"])
    # Each pod runs `processes` workers: the pods times the processes is the partition count, no more.
    assert partitions % built.processes == 0, f"{built.name}: {partitions} partitions do not split over the pods"
    assert spec["maxReplicaCount"] * built.processes == partitions, (
        f"{built.name}: more workers than partitions would sit idle, fewer would leave partitions to few"
    )
    assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]
    # The HPA owns the count: a `replicas` here would be re-applied (and the group rebalanced) on every apply.
    assert "replicas" not in built.one("Deployment", WORKER)["spec"]


#: docs/operations/sizing.md, "Memory": on the RocksDB table store (the default) a worker's memory does not grow
#: with retention: its baseline (resident memory measured by bench/table_store.py with 1M pairs kept) plus, at
#: most, every open database's block cache and memtables (streams.worker.tables.ROCKSDB_OPTIONS), one database
#: per table and partition it holds (active or standby: at most every partition). The tables are on disk: bytes
#: per pair and second of retention there (a primary outcome 3.7 KB, a tie-break outcome 4.7 KB on 57 % of
#: pairs, measured on disk at 6.5 KB a pair; a join entry about 1 KB), twice over with Faust's standby copy,
#: and room for RocksDB's compactions (which rewrite files before deleting the old ones).
BASELINE_BYTES, PER_DATABASE_BYTES = 300 * 2**20, 16 * 2**20
OUTCOME_DISK_BYTES, JOIN_DISK_BYTES, COPIES, COMPACTION_ROOM = 6_500, 1_000, 2, 1.5
UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


def _bytes(quantity: str) -> int:
    for suffix, factor in UNITS.items():
        if quantity.endswith(suffix):
            return int(float(quantity.removesuffix(suffix)) * factor)
    return int(quantity)


def test_worker_memory_limit_holds_its_tables(built: Built) -> None:
    """Memory: the baseline and every table database's caches; disk (the data volume): the tables at the
    declared rate and retention. On the memory store the tables would be in memory: the deploy files use RocksDB."""
    worker = built.one("Deployment", WORKER)
    rate = float(worker["metadata"]["annotations"]["pairjudge.dev/sized-for-pairs-per-second"])
    defaults = Settings()
    settings = built.settings
    assert settings.get("PAIRJUDGE_WORKER__TABLE_STORE", defaults.worker.table_store) == "rocksdb"
    partitions = int(settings.get("PAIRJUDGE_KAFKA__PARTITIONS", defaults.kafka.partitions))
    # Per worker process, and a pod runs `processes` of them.
    needed = built.processes * (BASELINE_BYTES + len(table_names()) * partitions * PER_DATABASE_BYTES)
    limit = _bytes(built.container("Deployment", WORKER)["resources"]["limits"]["memory"])
    assert limit >= needed, f"{built.name}: {limit / 2**30:.2f} GiB < {needed / 2**30:.2f} GiB for the tables' caches"
    # And not wildly above it: memory no longer grows with retention.
    assert limit <= 3 * needed, f"{built.name}: {limit / 2**30:.2f} GiB for {needed / 2**30:.2f} GiB"

    outcome_s = float(settings.get("PAIRJUDGE_WORKER__OUTCOME_RETENTION_S", defaults.worker.outcome_retention_s))
    join_s = float(settings.get("PAIRJUDGE_AUDIT__JOIN_RETENTION_S", defaults.audit.join_retention_s))
    on_disk = COMPACTION_ROOM * COPIES * rate * (outcome_s * OUTCOME_DISK_BYTES + join_s * JOIN_DISK_BYTES)
    data = next(v for v in built.pod_spec("Deployment", WORKER)["volumes"] if v["name"] == "data")
    size = _bytes(data["emptyDir"]["sizeLimit"])
    assert size >= on_disk, f"{built.name}: data volume {size / 2**30:.2f} GiB < {on_disk / 2**30:.2f} GiB of tables"


def test_scaled_object_measures_the_workers_group(built: Built) -> None:
    spec, settings = built.scaled_object["spec"], built.settings
    target = spec["scaleTargetRef"]
    worker = built.one("Deployment", WORKER)
    assert (target.get("apiVersion", "apps/v1"), target.get("kind", "Deployment")) == ("apps/v1", "Deployment")
    assert target["name"] == worker["metadata"]["name"]
    assert target["envSourceContainerName"] == built.container("Deployment", WORKER)["name"]
    prefix = settings["PAIRJUDGE_TOPICS__PREFIX"]
    topics = []
    for trigger in spec["triggers"]:
        meta = trigger["metadata"]
        assert trigger["type"] == "kafka"
        assert meta["consumerGroup"] == settings["PAIRJUDGE_WORKER__APP_ID"]
        # Read by KEDA from the worker container's environment: the same ConfigMap the worker reads.
        assert meta["bootstrapServersFromEnv"] == "PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS"
        assert "bootstrapServers" not in meta
        assert meta["allowIdleConsumers"] == "false"
        assert meta["offsetResetPolicy"] == "earliest"  # as the Faust app starts a new group
        # Lag counts from the committed offset: a keeping-up worker carries its pairs in flight plus up to
        # 50 acks before a commit (streams/worker/faust_app.py broker_commit_every). A threshold at or below that would
        # scale out a group that keeps up; one far above it would leave a backlog waiting.
        # Per pod: each of its worker processes carries its own.
        keep_up = built.processes * (int(settings["PAIRJUDGE_WORKER__CONCURRENCY"]) + COMMIT_EVERY)
        assert 2 * keep_up <= int(meta["lagThreshold"]) <= 6 * keep_up, (built.name, meta["lagThreshold"], keep_up)
        topics.append(meta["topic"])
    # One trigger per stage a worker runs, on the topic it reads (schemas.kinds.STAGES).
    assert topics == [f"{prefix}.{kind}" for kind in STAGE_SOURCES]
    for topic in topics:  # partitioned like the cap assumes, not a single-partition followed topic
        kind = topic.removeprefix(f"{prefix}.")
        assert kind not in FOLLOWED_KINDS + LATEST_KINDS
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] >= 300, "scale-down would flap"
    env_from = built.container("Deployment", WORKER)["envFrom"]
    assert any(e["configMapRef"]["name"].startswith("pairjudge-settings-") for e in env_from)


# --- health, probes, shutdown --------------------------------------------------------------------------


def _port(container: Manifest, port: int | str) -> int:
    if isinstance(port, int):
        return port
    (found,) = [p["containerPort"] for p in container["ports"] if p["name"] == port]
    return int(found)


def test_worker_probes_match_the_health_interface(built: Built) -> None:
    settings, worker = built.settings, built.container("Deployment", WORKER)
    assert settings["PAIRJUDGE_HEALTH__HOST"] == "0.0.0.0"  # the kubelet probes the pod's address
    assert int(settings["PAIRJUDGE_HEALTH__PORT"]) == HEALTH_PORT
    assert [p["containerPort"] for p in worker["ports"]] == [HEALTH_PORT]
    expected = {"startupProbe": LIVENESS_PATH, "livenessProbe": LIVENESS_PATH, "readinessProbe": READINESS_PATH}
    for probe, path in expected.items():
        get = worker[probe]["httpGet"]
        assert get["path"] == path, probe
        assert _port(worker, get["port"]) == HEALTH_PORT, probe
    for policy in built.all("NetworkPolicy"):
        if policy["metadata"]["name"] == WORKER:
            assert [p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]] == [HEALTH_PORT]
    annotations = built.one("Deployment", WORKER)["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(HEALTH_PORT)


@pytest.fixture
def worker_probe_paths() -> dict[str, str]:
    worker = Built("base", kustomize_build(K8S_DIR / "base")).container("Deployment", WORKER)
    return {p: worker[p]["httpGet"]["path"] for p in ("startupProbe", "livenessProbe", "readinessProbe")}


async def test_worker_probes_mean_what_kubernetes_does_with_them(
    worker_probe_paths: dict[str, str], unused_tcp_port: int
) -> None:
    """Against the real health server: a worker that cannot judge (control not caught up, or shutting down)
    fails only the readiness probe; the startup and liveness probes, which restart the pod, still pass."""
    health = WorkerHealth(control_caught_up=asyncio.Event(), judges_checked=asyncio.Event())
    server = HealthServer(HealthSettings(host="127.0.0.1", port=unused_tcp_port), health, None)
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{unused_tcp_port}") as client:

            async def statuses() -> dict[str, int]:
                return {probe: (await client.get(path)).status_code for probe, path in worker_probe_paths.items()}

            unready = {"startupProbe": 200, "livenessProbe": 200, "readinessProbe": 503}
            assert await statuses() == unready
            health.control_caught_up.set()
            health.judges_checked.set()
            assert await statuses() == dict.fromkeys(worker_probe_paths, 200)
            health.mark_stopping()
            assert await statuses() == unready
    finally:
        await server.stop()


def test_termination_grace_outlasts_the_shutdown_grace(built: Built) -> None:
    grace = float(built.settings["PAIRJUDGE_WORKER__SHUTDOWN_GRACE_S"])
    termination = built.pod_spec("Deployment", WORKER)["terminationGracePeriodSeconds"]
    assert termination > grace + 5
    if built.processes > 1:
        # The supervisor kills its workers this long after SIGTERM: before the kubelet kills the pod, so it
        # exits by itself and says which worker did not stop.
        assert termination > grace + SHUTDOWN_MARGIN_S


def _cores(quantity: str) -> float:
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def test_worker_pods_request_a_core_per_worker_process(built: Built) -> None:
    """A worker judges on one core: a pod of N worker processes that asks for less runs them on less."""
    resources = built.container("Deployment", WORKER)["resources"]
    requested, limit = _cores(resources["requests"]["cpu"]), _cores(resources["limits"]["cpu"])
    assert 1 <= built.processes <= 64
    if built.processes > 1:
        assert requested >= built.processes, f"{built.name}: {requested} cores for {built.processes} workers"
    assert limit >= requested


def test_review_service_reaches_its_probed_port(built: Built) -> None:
    review = built.container("Deployment", REVIEW)
    env = {e["name"]: e.get("value") for e in review["env"]}
    assert env["PAIRJUDGE_REVIEW__HOST"] == "0.0.0.0"
    port = int(env["PAIRJUDGE_REVIEW__PORT"])
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert _port(review, review[probe]["httpGet"]["port"]) == port
    service = built.one("Service", REVIEW)["spec"]
    labels = built.one("Deployment", REVIEW)["spec"]["template"]["metadata"]["labels"]
    assert service["selector"].items() <= labels.items()
    assert [_port(review, p["targetPort"]) for p in service["ports"]] == [port]


def test_gateway_serves_its_probes_and_service_on_the_port_it_listens_on(built: Built) -> None:
    gateway = built.container("Deployment", GATEWAY)
    env = {e["name"]: e.get("value") for e in gateway["env"]}
    port = int(env["PAIRJUDGE_GATEWAY__PORT"])
    assert env["PAIRJUDGE_GATEWAY__HOST"] == "0.0.0.0"
    assert env["PAIRJUDGE_GATEWAY__UPSTREAM"].startswith("http")
    assert gateway["args"] == ["gateway"]
    probes = {p: gateway[p]["httpGet"] for p in ("livenessProbe", "readinessProbe")}
    assert {p["path"] for p in probes.values()} == {"/healthz", "/readyz"}
    assert all(_port(gateway, p["port"]) == port for p in probes.values())
    labels = built.one("Deployment", GATEWAY)["spec"]["template"]["metadata"]["labels"]
    service = built.one("Service", GATEWAY)
    assert service["spec"]["selector"].items() <= labels.items()
    assert [_port(gateway, p["targetPort"]) for p in service["spec"]["ports"]] == [port]
    policy = built.one("NetworkPolicy", GATEWAY)
    assert [p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]] == [port]


def test_pod_disruption_budget_covers_the_workers(built: Built) -> None:
    pdb = built.one("PodDisruptionBudget", WORKER)["spec"]
    assert pdb["maxUnavailable"] == 1
    labels = built.one("Deployment", WORKER)["spec"]["template"]["metadata"]["labels"]
    assert pdb["selector"]["matchLabels"].items() <= labels.items()


def test_review_liveness_does_not_depend_on_the_database(built: Built) -> None:
    """A database outage must take the pods out of the Service, not restart them (streams.review.probes)."""
    review = built.container("Deployment", REVIEW)
    paths = {p: review[p]["httpGet"]["path"] for p in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert paths == {"startupProbe": "/livez", "livenessProbe": "/livez", "readinessProbe": "/readyz"}


@pytest.fixture
def review_probe_paths() -> set[str]:
    review = Built("base", kustomize_build(K8S_DIR / "base")).container("Deployment", REVIEW)
    return {review[p]["httpGet"]["path"] for p in ("startupProbe", "livenessProbe", "readinessProbe")}


@pytest.mark.kafka
async def test_review_probe_path_answers_without_signing_in(
    review_probe_paths: set[str], kafka_bootstrap: str, unique_topic_prefix: str, tmp_path: Path
) -> None:
    """The review probes' path is served, unauthenticated, by the real review service (others are 401)."""
    settings = review_settings(kafka_bootstrap, unique_topic_prefix.rstrip("."), tmp_path, port=free_port())
    async with serving(settings) as server, httpx.AsyncClient(base_url=server.url) as anonymous:
        for path in review_probe_paths:
            answer = await anonymous.get(path)
            assert answer.status_code == 200, path
        assert (await anonymous.get("/")).status_code == 401


# --- secrets and settings ----------------------------------------------------------------------------


def _secret_mounts(pod: Manifest, container: Manifest) -> dict[str, Manifest]:
    """mountPath -> its Secret volume, for this container's Secret mounts."""
    secrets = {v["name"]: v["secret"] for v in pod.get("volumes", []) if "secret" in v}
    return {m["mountPath"]: m for m in container.get("volumeMounts", []) if m["name"] in secrets}


def test_no_secret_objects_and_no_secret_values(built: Built) -> None:
    assert not built.all("Secret"), f"{built.name}: Secrets are created with kubectl, never shipped"
    leaks = [k for k in built.settings if SECRET_NAME.search(k) and not k.endswith("_FILE")]
    for kind, name in built.pairjudge_workloads():
        pod = built.pod_spec(kind, name)
        container = built.container(kind, name)
        mounts = _secret_mounts(pod, container)
        for entry in container.get("env", []):
            var = entry["name"]
            if var.endswith("_FILE"):
                # A secret file must come from a read-only Secret volume.
                owner = [m for path, m in mounts.items() if entry["value"].startswith(path.rstrip("/") + "/")]
                assert owner, f"{name}: {var} is not in a Secret volume"
                assert owner[0].get("readOnly"), f"{name}: {var}'s Secret volume is mounted writable"
            elif SECRET_NAME.search(var) and "secretKeyRef" not in entry.get("valueFrom", {}):
                leaks.append(f"{name}: {var}")
    assert not leaks, f"{built.name}: secret settings with literal values: {leaks}"


def _is_setting(name: str) -> bool:
    """``PAIRJUDGE_SECTION__FIELD`` or ``PAIRJUDGE_FIELD`` names one value of pairjudge's Settings."""
    return setting_problem(name) is None


def test_setting_name_check_rejects_unknown_names() -> None:
    assert _is_setting("PAIRJUDGE_KAFKA__PARTITIONS")
    assert _is_setting("PAIRJUDGE_MAX_EVENT_BYTES")
    assert not _is_setting("PAIRJUDGE_KAFKA__PARTITION")
    assert not _is_setting("PAIRJUDGE_KAFKA")  # a section, not a value
    assert not _is_setting("PAIRJUDGE_MAX_EVENT_BYTES__X")
    assert not _is_setting("PAIRJUDGE_WORKERS__CONCURRENCY")


def test_every_pairjudge_variable_is_a_setting(built: Built) -> None:
    names = set(built.settings)
    for kind, name in built.pairjudge_workloads():
        names |= {e["name"] for e in built.container(kind, name).get("env", [])}
    unknown = sorted(n for n in names if n.startswith("PAIRJUDGE_") and not _is_setting(n))
    assert not unknown, f"{built.name}: not pairjudge settings: {unknown}"


def _container_environment(built: Built, kind: str, name: str, secret_dir: Path) -> dict[str, str]:
    """The environment the container starts with: the ConfigMap, then its own env, with each secret file
    path moved into ``secret_dir`` (holding a made-up secret of the right shape)."""
    container = built.container(kind, name)
    env = dict(built.settings) if container.get("envFrom") else {}
    for entry in container.get("env", []):
        value = entry["value"]
        if entry["name"].endswith("_FILE"):
            local = secret_dir / Path(value).name
            local.write_text("[]" if local.suffix == ".json" else f"made-up-{uuid.uuid4().hex}")
            value = str(local)
        env[entry["name"]] = value
    return env


def test_each_workloads_settings_load(built: Built, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """pairjudge accepts each container's environment as it starts: e.g. a remote judge without its key
    file, or an unknown field in a settings section, would stop it here."""
    for kind, name in built.pairjudge_workloads():
        for var in [v for v in os.environ if v.startswith("PAIRJUDGE_")]:
            monkeypatch.delenv(var)
        secret_dir = tmp_path / name
        secret_dir.mkdir()
        for var, value in _container_environment(built, kind, name, secret_dir).items():
            monkeypatch.setenv(var, value)
        settings = Settings()
        assert settings.kafka.partitions == int(built.settings["PAIRJUDGE_KAFKA__PARTITIONS"])
        if name == WORKER and settings.judge.kind != "offline":
            assert settings.judge.resolved_api_key() is not None


# --- pod hardening ------------------------------------------------------------------------------------


def test_pods_run_unprivileged(built: Built) -> None:
    for workload in built.all("Deployment") + built.all("Job"):
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, workload["metadata"]["name"]
        assert pod["automountServiceAccountToken"] is False, workload["metadata"]["name"]
    for kind, name in built.pairjudge_workloads():
        pod, container = built.pod_spec(kind, name), built.container(kind, name)
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        assert pod["securityContext"]["runAsUser"] == 10001  # deploy/Dockerfile's user
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["readOnlyRootFilesystem"] is True
        assert context["capabilities"]["drop"] == ["ALL"]
        requests, limits = container["resources"]["requests"], container["resources"]["limits"]
        assert {"cpu", "memory"} <= requests.keys(), name
        assert {"cpu", "memory"} <= limits.keys(), name
        # Whatever pairjudge writes lands in an emptyDir: /tmp, and the data and cache directories.
        writable = {m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")}
        assert "/tmp" in writable, name
        if name == WORKER:
            settings = built.settings
            for var in ("PAIRJUDGE_WORKER__DATA_DIR", "PAIRJUDGE_JUDGE__CACHE_DIR"):
                assert any(Path(settings[var]).is_relative_to(m) for m in writable), var


# --- the topic-creation Job, run for real -------------------------------------------------------------


@pytest.mark.kafka
@pytest.mark.parametrize("target", TARGETS, ids=[str(t.relative_to(K8S_DIR)) for t in TARGETS])
def test_topics_job_creates_the_topics(
    target: Path, kafka_bootstrap: str, unique_topic_prefix: str, tmp_path: Path
) -> None:
    """The Job's own command, with its own environment, creates every topic with the configured partitions
    (only the broker, the names and the replication factor are changed, for the one test broker)."""
    built = Built(str(target), kustomize_build(target))
    container = built.container("Job", TOPICS_JOB)
    # The image's entry point is `pairjudge`; the Job runs its `topics create` command.
    assert "command" not in container
    assert container["args"] == ["topics", "create"]
    pairjudge = shutil.which("pairjudge", path=str(Path(sys.executable).parent))
    assert pairjudge, "the pairjudge console script is not installed"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAIRJUDGE_")}
    env |= _container_environment(built, "Job", TOPICS_JOB, tmp_path)
    prefix = unique_topic_prefix.rstrip(".")
    env |= {
        "PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS": kafka_bootstrap,
        "PAIRJUDGE_TOPICS__PREFIX": prefix,
        "PAIRJUDGE_WORKER__APP_ID": prefix,
        "PAIRJUDGE_KAFKA__REPLICATION_FACTOR": "1",
    }
    done = subprocess.run([pairjudge, *container["args"]], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    settings = Settings.model_validate(
        {"kafka": {"bootstrap_servers": kafka_bootstrap, "partitions": int(env["PAIRJUDGE_KAFKA__PARTITIONS"])}}
        | {"topics": {"prefix": prefix}, "worker": {"app_id": prefix}}
    )
    specs = topic_specs(settings)
    found = asyncio.run(topic_partitions(kafka_bootstrap, list(specs)))
    assert {name: len(parts) for name, parts in found.items()} == {n: s.partitions for n, s in specs.items()}
    assert len(found[f"{prefix}.pairs"]) == built.scaled_object["spec"]["maxReplicaCount"] * built.processes
