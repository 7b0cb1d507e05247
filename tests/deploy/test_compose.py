"""deploy/compose.yaml, checked without a Docker engine (this machine has no Compose plugin).

The file is parsed as Compose does (YAML, merge keys, then ``${VAR:-default}`` interpolation of values)
and validated against the Compose Specification's JSON Schema (vendored in tests/fixtures/deploy_schemas).
Then what the schema cannot know: every ``PAIRJUDGE_*`` name is a real setting and each pairjudge
service's environment loads through ``Settings`` with the secret files ``make-secrets.sh`` writes; no
secret is written in the file; host ports are on 127.0.0.1; start-up order waits on health; the images
are pinned to the versions the rest of the repository tests; and the one-shot topics step, run as written
here against the real Apache Kafka, creates every topic a worker checks for.

Not proved: that the images pull and the containers start and pass their healthchecks (that needs
``docker compose up`` on a machine with an engine).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tomllib
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.admin import check_topics
from pairjudge.streams.kafka.topics import topic_specs
from tests.deploy.support import SETTING_NAME, setting_problem

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "deploy" / "compose.yaml"
MAKE_SECRETS = ROOT / "deploy" / "compose" / "make-secrets.sh"
SCHEMA = ROOT / "tests" / "fixtures" / "deploy_schemas" / "compose-spec.json"
#: The services that run the pairjudge image.
PAIRJUDGE_SERVICES = ("topics", "worker", "review", "gateway")
#: Setting names that hold a secret: only their _FILE variants may appear.
SECRET_SETTING = re.compile(r"PASSWORD|SECRET|API_KEY|DATABASE_URL|SIGNING_KEY|USERS|HEADERS|WEBHOOK_URL|TOKEN")

# --- Compose's interpolation ------------------------------------------------------------------------------

#: ``$$``, ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``${VAR:?err}``, ``${VAR:+alt}`` and
#: ``$VAR``, as the Compose Specification's "Interpolation" section lists them (nesting is not used here,
#: and a test says so).
_VARIABLE = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^{}]*))?\}"
    r"|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


def interpolate_text(text: str, env: Mapping[str, str]) -> str:
    def replace(m: re.Match[str]) -> str:
        if m["escaped"]:
            return "$"
        name = m["braced"] or m["bare"]
        value, op, arg = env.get(name), m["op"], m["arg"] or ""
        unset = value is None or (op is not None and op.startswith(":") and value == "")
        if op in (":-", "-"):
            return arg if unset else str(value)
        if op in (":?", "?"):
            if unset:
                raise ValueError(f"{name}: {arg}")
            return str(value)
        if op in (":+", "+"):
            return "" if unset else arg
        return "" if value is None else value

    return _VARIABLE.sub(replace, text)


def interpolate(node: Any, env: Mapping[str, str]) -> Any:
    """Values only, as Compose does (keys are never interpolated)."""
    if isinstance(node, dict):
        return {k: interpolate(v, env) for k, v in node.items()}
    if isinstance(node, list):
        return [interpolate(v, env) for v in node]
    if isinstance(node, str):
        return interpolate_text(node, env)
    return node


def load_compose(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    model: dict[str, Any] = interpolate(yaml.safe_load(COMPOSE.read_text()), env or {})
    return model


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load_compose()


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft7Validator:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def _errors(validator: jsonschema.Draft7Validator, model: dict[str, Any]) -> list[str]:
    return [f"{e.json_path}: {e.message}" for e in validator.iter_errors(model)]


# --- the schema ----------------------------------------------------------------------------------------------


def test_the_file_is_valid_against_the_compose_specification(
    compose: dict[str, Any], validator: jsonschema.Draft7Validator
) -> None:
    assert _errors(validator, compose) == []
    # Also with every knob set, and as written (the schema accepts strings where interpolation may go).
    knobs = {name: "7" for name in re.findall(r"\$\{(PJ_[A-Z_]+)", COMPOSE.read_text())}
    assert _errors(validator, load_compose(knobs)) == []
    assert _errors(validator, yaml.safe_load(COMPOSE.read_text())) == []


@pytest.mark.parametrize(
    ("where", "mutate"),
    [
        ("an unknown service key", lambda m: m["services"]["worker"].__setitem__("replicaz", 2)),
        ("ports not a list", lambda m: m["services"]["review"].__setitem__("ports", 8088)),
        (
            "an unknown depends_on condition",
            lambda m: m["services"]["worker"]["depends_on"]["kafka"].update(condition="service_ready"),
        ),
        ("an unknown top-level key", lambda m: m.__setitem__("service", {})),
        ("a secret with no source", lambda m: m["secrets"].__setitem__("judge_api_key", {"filename": "x"})),
    ],
)
def test_the_schema_rejects_a_broken_copy(
    compose: dict[str, Any], validator: jsonschema.Draft7Validator, where: str, mutate: Any
) -> None:
    broken = copy.deepcopy(compose)
    mutate(broken)
    assert _errors(validator, broken), where


def test_every_variable_has_a_default_and_none_is_a_setting() -> None:
    text = COMPOSE.read_text()
    assert "${" not in "".join(m.group("arg") or "" for m in _VARIABLE.finditer(text)), "nested interpolation"
    for m in _VARIABLE.finditer(text):
        if m["escaped"]:
            continue
        name = m["braced"] or m["bare"]
        # The stack starts with no .env at all; its own knobs are PJ_*, never a pairjudge setting's name.
        assert m["op"] == ":-", f"${{{name}}} has no default"
        assert name.startswith("PJ_"), name
    assert load_compose({"PJ_WORKERS": "5"})["services"]["worker"]["deploy"]["replicas"] == "5"


# --- pairjudge's settings ----------------------------------------------------------------------------------


def test_every_pairjudge_variable_is_a_setting() -> None:
    names = set(SETTING_NAME.findall(COMPOSE.read_text()))
    assert len(names) > 20
    assert [p for n in sorted(names) if (p := setting_problem(n))] == []


@pytest.fixture(scope="module")
def secrets_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("compose") / "secrets"
    subprocess.run(["bash", str(MAKE_SECRETS), str(target)], check=True, capture_output=True, timeout=60)
    return target


def _service_env(compose: dict[str, Any], service: str, secrets_dir: Path) -> dict[str, str]:
    """The service's environment, with /run/secrets/<name> pointing at make-secrets.sh's files."""
    env = {k: str(v) for k, v in compose["services"][service]["environment"].items()}
    return {
        k: v.replace("/run/secrets/", f"{secrets_dir}/") if v.startswith("/run/secrets/") else v for k, v in env.items()
    }


@pytest.fixture
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("PAIRJUDGE_"):
            monkeypatch.delenv(name)
    return monkeypatch


def _load(clean_environ: pytest.MonkeyPatch, env: dict[str, str]) -> Settings:
    for name, value in env.items():
        if name.startswith("PAIRJUDGE_"):
            clean_environ.setenv(name, value)
    return Settings()


def test_each_pairjudge_service_loads_its_settings(
    compose: dict[str, Any], secrets_dir: Path, clean_environ: pytest.MonkeyPatch
) -> None:
    loaded: dict[str, Settings] = {}
    for service in PAIRJUDGE_SERVICES:
        for name in list(os.environ):
            if name.startswith("PAIRJUDGE_"):
                clean_environ.delenv(name)
        settings = _load(clean_environ, _service_env(compose, service, secrets_dir))
        loaded[service] = settings
        assert settings.kafka.bootstrap_servers == "kafka:9092"
        signing = settings.control.resolved_signing_key()
        assert signing is not None
        assert len(signing.get_secret_value()) >= 16
    # One topic layout and one consumer group for all of them.
    assert len({(s.kafka.partitions, s.topics.prefix, s.worker.app_id) for s in loaded.values()}) == 1
    worker, review, gateway = loaded["worker"], loaded["review"], loaded["gateway"]
    assert (gateway.gateway.host, gateway.gateway.port, gateway.gateway.upstream) == (
        "0.0.0.0",
        8090,
        "http://champion:8000",
    )
    assert worker.judge.kind == "offline"
    assert (worker.health.host, worker.health.port) == ("0.0.0.0", 9465)
    assert (worker.telemetry.exporter, worker.telemetry.otlp_endpoint) == ("otlp", "http://phoenix:6006")
    assert (review.review.host, review.review.port) == ("0.0.0.0", 8088)
    assert review.review.resolved_database_url().startswith("postgresql+psycopg://pairjudge:")
    assert review.review.resolved_database_url().endswith("@postgres:5432/pairjudge")
    assert review.review.resolved_users() == ()
    assert review.review.resolved_session_secret() is not None


def test_the_judge_profile_needs_the_cleartext_opt_in(secrets_dir: Path, clean_environ: pytest.MonkeyPatch) -> None:
    judge = {"PJ_JUDGE_KIND": "openai", "PJ_JUDGE_MODEL": "local-judge"}
    refused = load_compose(judge)
    with pytest.raises(ValueError, match="ALLOW_CLEARTEXT_KEY"):
        _load(clean_environ, _service_env(refused, "worker", secrets_dir))
    allowed = load_compose({**judge, "PJ_JUDGE_ALLOW_CLEARTEXT_KEY": "true"})
    settings = _load(clean_environ, _service_env(allowed, "worker", secrets_dir))
    assert settings.judge.kind == "openai"
    assert settings.judge.base_url == "http://judge:8080/v1"
    key = settings.judge.resolved_api_key()
    assert key is not None
    assert key.get_secret_value() == (secrets_dir / "judge_api_key").read_text().strip()
    # The llama.cpp server serves the alias the workers ask for, and reads the same key file.
    command = allowed["services"]["judge"]["command"]
    assert command[command.index("--alias") + 1] == settings.judge.model
    assert command[command.index("--api-key-file") + 1] == "/run/secrets/judge_api_key"


# --- secrets -------------------------------------------------------------------------------------------------


def test_secrets_come_from_files_only(compose: dict[str, Any]) -> None:
    declared = compose["secrets"]
    for name, source in declared.items():
        assert set(source) == {"file"}, name
        assert source["file"] == f"./compose/secrets/{name}", name
    for service_name, service in compose["services"].items():
        mounted = set(service.get("secrets", []))
        assert mounted <= declared.keys(), service_name
        for key, value in service.get("environment", {}).items():
            if SECRET_SETTING.search(key):
                assert key.endswith("_FILE"), f"{service_name}: {key} is written in the file"
                assert str(value).removeprefix("/run/secrets/") in mounted, f"{service_name}: {key}={value}"


def test_make_secrets_writes_every_declared_secret_once(compose: dict[str, Any], secrets_dir: Path) -> None:
    written = {p.name for p in secrets_dir.iterdir()}
    assert written == compose["secrets"].keys()
    assert stat.S_IMODE(secrets_dir.stat().st_mode) == 0o700
    for path in secrets_dir.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path.name
    before = {p.name: p.read_text() for p in secrets_dir.iterdir()}
    subprocess.run(["bash", str(MAKE_SECRETS), str(secrets_dir)], check=True, capture_output=True, timeout=60)
    assert {p.name: p.read_text() for p in secrets_dir.iterdir()} == before
    password = before["postgres_password"].strip()
    assert len(password) >= 32
    assert f":{password}@" in before["review_database_url"]
    assert json.loads(before["review_users"]) == []
    # Never committed: git ignores the default directory.
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "deploy/compose/secrets/postgres_password"], cwd=ROOT, check=False
    )
    assert ignored.returncode == 0


# --- the stack's shape ----------------------------------------------------------------------------------------


def test_host_ports_are_on_loopback_only(compose: dict[str, Any]) -> None:
    published = [(name, p) for name, s in compose["services"].items() for p in s.get("ports", [])]
    assert {name for name, _ in published} == {"kafka", "review", "phoenix"}
    for name, port in published:
        assert isinstance(port, str), (name, port)
        assert port.startswith("127.0.0.1:"), (name, port)


def test_start_up_waits_on_health(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, service in services.items():
        one_shot = service.get("restart") == "no"
        check = service.get("healthcheck", {})
        assert one_shot == bool(check.get("disable")), name
        if not one_shot:
            assert check.get("test"), f"{name} has no healthcheck"
        for target, dependency in service.get("depends_on", {}).items():
            assert target in services, (name, target)
            wanted = "service_completed_successfully" if services[target].get("restart") == "no" else "service_healthy"
            assert dependency["condition"] == wanted, (name, target)
            # Only a profile's service may be missing.
            assert dependency.get("required", True) == ("profiles" not in services[target]), (name, target)
    assert services["worker"]["depends_on"].keys() >= {"kafka", "topics"}
    assert services["review"]["depends_on"].keys() >= {"kafka", "topics", "postgres"}
    assert services["judge"]["profiles"] == ["judge"]


def test_workers_scale_in_one_group_within_the_partitions(compose: dict[str, Any]) -> None:
    worker = compose["services"]["worker"]
    env = worker["environment"]
    replicas, partitions = int(worker["deploy"]["replicas"]), int(env["PAIRJUDGE_KAFKA__PARTITIONS"])
    processes = int(env["PAIRJUDGE_WORKER__PROCESSES"])  # worker processes per container
    assert replicas >= 2
    assert partitions >= replicas * processes
    two = load_compose({"PJ_WORKER_PROCESSES": "2"})["services"]["worker"]["environment"]
    assert two["PAIRJUDGE_WORKER__PROCESSES"] == "2"
    assert "container_name" not in worker  # replicas need generated names
    assert worker["command"] == ["worker", "--no-create-topics"]
    grace = worker["stop_grace_period"]
    assert grace.endswith("s")
    assert float(grace[:-1]) > float(env["PAIRJUDGE_WORKER__SHUTDOWN_GRACE_S"])


def test_images_are_pinned_to_the_versions_tested_here(compose: dict[str, Any]) -> None:
    images = {name: s["image"] for name, s in compose["services"].items()}
    for name, image in images.items():
        _, _, tag = image.rpartition(":")
        assert tag, f"{name}: {image} has no tag"
        assert "latest" not in tag, f"{name}: {image}"
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert {images[s] for s in PAIRJUDGE_SERVICES} == {f"pairjudge:{version}"}
    kafka = re.search(r"<kafka.version>([^<]+)</kafka.version>", (ROOT / "deploy/kafka/pom.xml").read_text())
    assert kafka
    assert images["kafka"] == f"apache/kafka:{kafka.group(1)}"
    phoenix = re.search(r'PHOENIX_VERSION="([^"]+)"', (ROOT / "deploy/phoenix/setup.sh").read_text())
    assert phoenix
    assert images["phoenix"] == f"arizephoenix/phoenix:version-{phoenix.group(1)}-nonroot"


# --- the topics step, for real -----------------------------------------------------------------------------


@pytest.mark.kafka
async def test_the_topics_step_creates_what_a_worker_checks_for(
    compose: dict[str, Any], secrets_dir: Path, kafka_bootstrap: str, tmp_path: Path
) -> None:
    topics = compose["services"]["topics"]
    # The image's entry point is `pairjudge`; the step is its `topics create` command.
    assert "entrypoint" not in topics
    pairjudge = shutil.which("pairjudge", path=str(Path(sys.executable).parent))
    assert pairjudge, "the pairjudge console script is not installed"
    argv = [pairjudge, *topics["command"]]
    assert topics["command"] == ["topics", "create"]
    prefix = f"compose-{uuid.uuid4().hex[:8]}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PAIRJUDGE_")},
        **_service_env(compose, "topics", secrets_dir),
        # This machine's broker, and names of this test's own.
        "PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS": kafka_bootstrap,
        "PAIRJUDGE_TOPICS__PREFIX": prefix,
        "PAIRJUDGE_WORKER__APP_ID": prefix,
    }
    for attempt in ("creates", "finds them"):
        done = await _run(argv, env, tmp_path)
        assert done[0] == 0, f"{attempt}: {done[1]}"
    settings = Settings(
        kafka={"bootstrap_servers": kafka_bootstrap, "partitions": int(env["PAIRJUDGE_KAFKA__PARTITIONS"])},
        topics={"prefix": prefix},
        worker={"app_id": prefix},
    )
    specs = topic_specs(settings)
    assert f"{len(specs)} topics ready on {kafka_bootstrap}" in done[1]
    await check_topics(kafka_bootstrap, specs, timeout=30)


async def _run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    import asyncio

    process = await asyncio.create_subprocess_exec(
        *argv, env=env, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout=120)
    return process.returncode or 0, out.decode()
