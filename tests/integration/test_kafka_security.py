"""Kafka security end to end, on a secured Apache Kafka this session starts (pairjudge_dev.kafka_secure):
SASL_SSL with SCRAM and PLAIN, mutual TLS, and ACLs under StandardAuthorizer.

A platform team pre-creates the topics (here the super user ``admin`` does) and grants each principal
what it needs: the worker reads its inputs, group and changelogs and writes its outcomes, never the
control topic, which only the ``operator`` principal writes.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pairjudge.schemas.kinds import TOPICS
from pairjudge.streams.config.settings import KafkaSettings, Settings, environ_for
from pairjudge.streams.kafka.admin import BrokerError, create_topics
from pairjudge.streams.kafka.collector import collect_outcomes, read_topic
from pairjudge.streams.kafka.producer import send_events
from pairjudge.streams.kafka.topics import KINDS, changelog_topic, table_names, topic_specs
from pairjudge.streams.security.kafka_clients import ClientConfig, client_config, explain
from pairjudge_dev.kafka_secure import SecureKafka, start_secure_kafka
from pairjudge_dev.pairgen import sample_dicts
from pairjudge_dev.workers import running_worker, wait_for_log

# One worker starts the secured broker (a session fixture) once for every test here.
pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("secure-kafka")]

#: The runs whose topics and ACLs the fixture sets up (fresh broker per session: fixed names are fine).
E2E, CTL, RT = "sec-e2e", "sec-ctl", "sec-rt"
#: What a worker writes (the kinds registry's ``worker_writes``); it reads every pairjudge topic.
WORKER_WRITES = tuple(kind for kind, spec in TOPICS.items() if spec.worker_writes)


def _app_id(prefix: str) -> str:
    return f"pairjudge-{prefix}"


def _changelogs(prefix: str) -> list[str]:
    return [changelog_topic(_app_id(prefix), table) for table in table_names()]


def _topic_args(names: list[str]) -> list[str]:
    return [arg for name in names for arg in ("--topic", name)]


@pytest.fixture(scope="session")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafka]:
    """The secured broker, its topics (created by the super user) and the ACLs of every test below."""
    problem: str | None = None
    try:
        kafka = start_secure_kafka(tmp_path_factory.mktemp("secure-kafka"))
    except BrokerError as exc:
        problem = f"could not start the secured Apache Kafka: {exc}"
    if problem:
        pytest.fail(problem, pytrace=False)
    try:
        admin = kafka.admin_client()
        for prefix in (E2E, CTL, RT):
            asyncio.run(create_topics(admin, topic_specs(_settings(kafka, "admin", prefix, Path("/nonexistent")))))
        worker_runs = (E2E, CTL)
        reads = [f"{p}.{kind}" for p in worker_runs for kind in KINDS]
        reads += [t for p in worker_runs for t in _changelogs(p)]
        writes = [f"{p}.{kind}" for p in worker_runs for kind in WORKER_WRITES]
        writes += [t for p in worker_runs for t in _changelogs(p)]
        groups = [arg for p in worker_runs for arg in ("--group", _app_id(p))]
        allow_worker = ["--add", "--force", "--allow-principal", "User:worker"]
        kafka.acl(*allow_worker, "--operation", "Read", "--operation", "Describe", *_topic_args(reads), *groups)
        kafka.acl(*allow_worker, "--operation", "Write", *_topic_args(writes))
        kafka.acl(
            "--add", "--force", "--allow-principal", "User:operator", "--operation", "Write", "--operation", "Describe",
            *_topic_args([f"{p}.control" for p in worker_runs]),
        )  # fmt: skip
        # The round trip: a PLAIN user, a SCRAM-SHA-256 user and a client certificate's CN.
        principals = [
            arg for who in ("plainuser", "sha256user", "tlsclient") for arg in ("--allow-principal", f"User:{who}")
        ]
        kafka.acl(
            "--add", "--force", *principals, "--operation", "Read", "--operation", "Write", "--operation", "Describe",
            "--topic", f"{RT}.pairs",
        )  # fmt: skip
    except BaseException:
        kafka.stop()
        raise
    try:
        yield kafka
    finally:
        kafka.stop()


def _settings(
    kafka: SecureKafka, user: str, prefix: str, work: Path, *, tls: bool = False, **kafka_fields: Any
) -> Settings:
    fields = kafka.tls_settings(user) if tls else kafka.sasl_settings(user)
    return Settings.model_validate(
        {
            "kafka": {**fields, "partitions": 4, **kafka_fields},
            "topics": {"prefix": prefix},
            "worker": {"app_id": _app_id(prefix), "data_dir": work / "data"},
        }
    )


def _cli(settings: Settings, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    """``pairjudge ARGS`` with exactly these settings in its environment (as a worker gets them)."""
    return subprocess.run(
        [sys.executable, "-m", "pairjudge.streams.cli", *args],
        env=environ_for(settings),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _decisive(prefix: str, n: int) -> bytes:
    pair = next(p for p in sample_dicts() if p["pair_id"] == "email-card-delay")
    pair["pair_id"] = f"{prefix}-{n}"
    return json.dumps(pair).encode()


async def test_a_worker_judges_a_pair_over_sasl_ssl_with_scram(secure_kafka: SecureKafka, tmp_path: Path) -> None:
    worker = _settings(secure_kafka, "worker", E2E, tmp_path)
    admin = _settings(secure_kafka, "admin", E2E, tmp_path)
    log_path = tmp_path / "worker.log"
    with running_worker(worker, log_path):
        await send_events(admin, [_decisive(E2E, 1)])
        outcomes = await collect_outcomes(admin, {f"{E2E}-1"}, timeout=90)
    log = log_path.read_text(errors="replace")
    assert outcomes.complete, log[-3000:]
    kind, event = outcomes.final[f"{E2E}-1"]
    assert kind == "verdicts", event
    assert secure_kafka.passwords["worker"] not in log


async def test_only_the_operator_may_write_control(secure_kafka: SecureKafka, tmp_path: Path) -> None:
    worker = _settings(secure_kafka, "worker", CTL, tmp_path)
    operator = _settings(secure_kafka, "operator", CTL, tmp_path)
    log_path = tmp_path / "worker.log"
    with running_worker(worker, log_path):
        refused = _cli(worker, "control", "set", "primary_confidence_threshold", "0", "--by", "worker")
        allowed = _cli(operator, "control", "set", "tiebreak_enabled", "false", "--by", "olga")
        log = await wait_for_log(log_path, "control: tiebreak_enabled = False", timeout=60)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    message = " ".join(refused.stderr.split())
    assert "not authorised" in message, message
    assert "TOPIC_AUTHORIZATION_FAILED" in message, message
    assert f"{CTL}.control" in message, message
    assert secure_kafka.passwords["worker"] not in refused.stdout + refused.stderr
    assert allowed.returncode == 0, allowed.stderr
    assert "control: tiebreak_enabled = False (by olga)" in log, log[-3000:]
    assert "primary_confidence_threshold" not in log  # the worker principal's update never reached the topic


def test_a_worker_without_rights_stops_at_start_up_saying_what_was_refused(
    secure_kafka: SecureKafka, tmp_path: Path
) -> None:
    nobody = _settings(secure_kafka, "nobody", E2E, tmp_path)
    started = time.monotonic()
    done = _cli(nobody, "worker", timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output[-3000:]
    assert time.monotonic() - started < 60, "the worker should stop at once, not retry"
    flat = " ".join(output.split())
    assert "not authorised to DESCRIBE topic(s)" in flat, flat[-2000:]
    assert f"{E2E}.pairs" in flat
    assert secure_kafka.passwords["nobody"] not in output


def test_a_wrong_password_fails_clearly_and_is_never_printed(secure_kafka: SecureKafka, tmp_path: Path) -> None:
    wrong = "Wr0ng-" + secure_kafka.passwords["worker"][::-1]
    settings = _settings(secure_kafka, "worker", E2E, tmp_path, sasl_password=wrong)
    worker = _cli(settings, "worker", timeout=120)
    output = worker.stdout + worker.stderr
    assert worker.returncode == 2, output[-3000:]
    flat = " ".join(output.split())
    assert "authentication failed for user 'worker' with SCRAM-SHA-512" in flat, flat[-2000:]
    assert wrong not in output
    # The operators' tool too.
    control = _cli(settings, "control", "set", "audit_share", "0.1")
    output = control.stdout + control.stderr
    assert control.returncode == 3, output[-3000:]
    assert "authentication failed" in " ".join(output.split())
    assert wrong not in output
    assert "Traceback" not in output


async def test_plain_scram_sha_256_and_mutual_tls_clients_round_trip(secure_kafka: SecureKafka, tmp_path: Path) -> None:
    plain = _settings(secure_kafka, "plainuser", RT, tmp_path)
    sha256 = _settings(secure_kafka, "sha256user", RT, tmp_path)
    assert (plain.kafka.sasl_mechanism, sha256.kafka.sasl_mechanism) == ("PLAIN", "SCRAM-SHA-256")
    tls = _settings(secure_kafka, "tlsclient", RT, tmp_path, tls=True)
    await send_events(plain, [_decisive(RT, 1)])
    await send_events(sha256, [_decisive(RT, 2)])
    await send_events(tls, [_decisive(RT, 3)])
    records = await read_topic(tls, "pairs", timeout=30, until=lambda got: len(got) >= 3)
    assert sorted(key or b"" for key, _ in records) == [f"{RT}-{n}".encode() for n in (1, 2, 3)]
    again = await read_topic(plain, "pairs", timeout=30, until=lambda got: len(got) >= 3)
    assert len(again) == 3


async def test_refused_certificates_are_explained(secure_kafka: SecureKafka, tmp_path: Path) -> None:
    # The mutual-TLS listener without a client certificate, and the SASL listener without its CA.
    no_cert = KafkaSettings(
        bootstrap_servers=secure_kafka.ssl_bootstrap, security_protocol="SSL", ssl_cafile=secure_kafka.certs.ca
    )
    reason = await explain(ConnectionError("closed"), client_config(no_cert))
    assert "client certificate" in reason or "closed" in reason, reason
    system_cas = KafkaSettings.model_validate({**secure_kafka.sasl_settings("worker"), "ssl_cafile": None})
    reason = await explain(ConnectionError("closed"), client_config(system_cas))
    assert "certificate was not accepted" in reason, reason
    assert secure_kafka.passwords["worker"] not in reason
    assert isinstance(client_config(system_cas), ClientConfig)
