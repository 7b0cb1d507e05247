"""Signed control updates on real Kafka: a worker with a signing key ignores a forged, unsigned
``primary_confidence_threshold=0`` and applies the same kind of update once it is signed."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from pairjudge.streams.config.settings import ControlSettings
from pairjudge.streams.control.live import publish_control
from pairjudge_dev.workers import kafka_run, running_worker, wait_for_log

pytestmark = [pytest.mark.kafka]


async def test_a_worker_with_a_key_ignores_unsigned_updates_and_applies_signed_ones(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    key = secrets.token_urlsafe(32)
    settings = await kafka_run(kafka_bootstrap, tmp_path, "sig", control={"signing_key": key, "key_id": "ops-test"})
    # Anyone who may write the topic but holds no key: the same tool, without the key.
    forger = settings.model_copy(update={"control": ControlSettings()})
    log_path = tmp_path / "worker.log"
    with running_worker(settings, log_path):
        await publish_control(forger, "primary_confidence_threshold", 0.0, "alice (really mallory)")
        ignored = await wait_for_log(log_path, "ignored an update for key b'primary_confidence_threshold'", 60)
        await publish_control(settings, "primary_confidence_threshold", 0.95, "olga")
        log = await wait_for_log(log_path, "control: primary_confidence_threshold = 0.95", 60)
    assert "ignored an update for key b'primary_confidence_threshold'" in ignored, ignored[-3000:]
    assert "unsigned" in ignored
    assert "control: primary_confidence_threshold = 0.95 (by key ops-test: olga)" in log, log[-3000:]
    assert "primary_confidence_threshold = 0.0" not in log
    assert "not authenticated" not in log  # the start-up warning is for workers without a key
    assert key not in log


async def test_a_worker_without_a_key_says_so_once_and_applies_updates(kafka_bootstrap: str, tmp_path: Path) -> None:
    settings = await kafka_run(kafka_bootstrap, tmp_path, "nosig")
    log_path = tmp_path / "worker.log"
    with running_worker(settings, log_path):
        await publish_control(settings, "audit_share", 0.2, "bob")
        log = await wait_for_log(log_path, "control: audit_share = 0.2 (by bob)", 60)
    assert "control: audit_share = 0.2 (by bob)" in log, log[-3000:]
    assert log.count("are not authenticated (PAIRJUDGE_CONTROL__SIGNING_KEY is not set)") == 1
