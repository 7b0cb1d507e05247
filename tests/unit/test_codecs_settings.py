"""The Kafka codec's dead-letter reasons, settings from the environment, and secret handling."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pydantic import SecretStr

from pairjudge.agents.errors import InputRejected
from pairjudge.schemas import CandidatePair
from pairjudge.streams.config.settings import JudgeSettings, Settings, environ_for
from pairjudge.streams.kafka.codecs import decode, encode
from tests.unit.factories import make_pair


def _reason(raw: bytes, max_bytes: int = 100_000) -> str:
    with pytest.raises(InputRejected) as info:
        decode(CandidatePair, raw, max_bytes=max_bytes)
    return info.value.reason


def test_round_trip() -> None:
    pair = make_pair()
    assert decode(CandidatePair, encode(pair), max_bytes=100_000) == pair


def test_decode_reasons() -> None:
    good = json.loads(make_pair().model_dump_json())
    assert _reason(b"") == "empty_event"
    assert _reason(b"{" + b" " * 200, max_bytes=100) == "oversized_event"
    assert _reason(b"\xff\xfe") == "not_utf8"
    assert _reason(b'{"pair_id": ') == "malformed_json"
    assert _reason(b'"a string"') == "malformed_json"
    assert _reason(json.dumps({**good, "extra": 1}).encode()) == "unknown_field"
    assert _reason(json.dumps({k: v for k, v in good.items() if k != "task"}).encode()) == "missing_field"
    assert _reason(json.dumps({**good, "pair_id": "has spaces"}).encode()) == "invalid_field"


def test_decode_error_never_echoes_the_output_text() -> None:
    good = json.loads(make_pair().model_dump_json())
    secret_text = "VERY-PRIVATE-OUTPUT-" * 5
    good["candidates"][0]["output"] = 12345  # wrong type, the message must still not quote other outputs
    good["candidates"][1]["output"] = secret_text
    with pytest.raises(InputRejected) as info:
        decode(CandidatePair, json.dumps(good).encode(), max_bytes=100_000)
    assert "VERY-PRIVATE" not in str(info.value)
    assert "candidates.0.output" in info.value.detail


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS", "k1:9092,k2:9092")
    monkeypatch.setenv("PAIRJUDGE_POLICY__PRIMARY_CONFIDENCE_THRESHOLD", "0.8")
    monkeypatch.setenv("PAIRJUDGE_WORKER__CONCURRENCY", "3")
    settings = Settings()
    assert settings.kafka.bootstrap_servers == "k1:9092,k2:9092"
    assert settings.policy.to_policy().primary_confidence_threshold == 0.8
    assert settings.worker.concurrency == 3
    # Servers bind to loopback unless told otherwise.
    assert settings.worker.web_host == "127.0.0.1"


def test_environ_for_hands_a_worker_exactly_these_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    settings = Settings(
        worker={"concurrency": 7, "data_dir": tmp_path},
        policy={"audit_share": 0.25, "tiebreak_enabled": False},
        judge={"kind": "openai", "api_key": "sk-test-123"},
    )
    env = environ_for(settings)
    for key in [k for k in os.environ if k.startswith("PAIRJUDGE_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        if key.startswith("PAIRJUDGE_"):
            monkeypatch.setenv(key, value)
    assert Settings() == settings


def test_api_key_file_is_read_and_never_shown(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("sk-from-file-999\n")
    judge = JudgeSettings(kind="openai", api_key_file=key_file)
    resolved = judge.resolved_api_key()
    assert isinstance(resolved, SecretStr)
    assert resolved.get_secret_value() == "sk-from-file-999"
    assert "sk-from-file-999" not in repr(judge) + str(resolved) + repr(Settings(judge={"api_key": "sk-from-file-999"}))


def test_unreadable_key_file_names_the_variable_not_a_value(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="PAIRJUDGE_JUDGE__API_KEY_FILE") as info:
        Settings(judge={"kind": "openai", "api_key_file": tmp_path / "missing"})
    assert "sk-" not in str(info.value)
