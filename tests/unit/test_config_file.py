"""Judges, juries and rubrics declared in a TOML config file, with environment overrides, and key checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from pairjudge.streams.app import build_panel, load_catalog
from pairjudge.streams.config.settings import Settings, environ_for

CONFIG = """
[kafka]
bootstrap_servers = "kafka-a:9092"

[judge]
kind = "openai"
base_url = "http://127.0.0.1:8080/v1"
model = "resolver-model"

[[jury]]
kind = "openai"
base_url = "http://127.0.0.1:8081/v1"
model = "juror-one"

[[jury]]
kind = "openai"
base_url = "http://127.0.0.1:8082/v1"
model = "juror-two"

[[jury]]
kind = "offline"

[policy]
primary_confidence_threshold = 0.75

[rubrics.acme-email]
kind = "tone_style"
style_guide = "Warm, plain and professional. Never say 'per our records'."
audience = "Retail banking customers."
forbidden_terms = ["per our records"]
"""


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "pairjudge.toml"
    path.write_text(CONFIG)
    monkeypatch.setenv("PAIRJUDGE_CONFIG", str(path))
    monkeypatch.setenv("PAIRJUDGE_JUDGE__CACHE_DIR", str(tmp_path / "cache"))
    return path


def test_the_config_file_declares_judges_jury_and_rubrics(config: Path) -> None:
    settings = Settings()
    assert settings.kafka.bootstrap_servers == "kafka-a:9092"
    assert settings.judge.model == "resolver-model"
    assert [j.model for j in settings.jury] == ["juror-one", "juror-two", "pairjudge-heuristic"]
    assert settings.policy.primary_confidence_threshold == 0.75
    assert load_catalog(settings)["acme-email"].kind == "tone_style"


def test_the_environment_overrides_the_file(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS", "kafka-b:9092")
    monkeypatch.setenv("PAIRJUDGE_JUDGE__MODEL", "other-model")
    settings = Settings()
    assert settings.kafka.bootstrap_servers == "kafka-b:9092"
    assert settings.judge.model == "other-model"
    # The rest of the [judge] table still comes from the file.
    assert settings.judge.kind == "openai"


def test_a_jury_config_builds_one_stack_per_juror(config: Path) -> None:
    panel, stacks = build_panel(Settings())
    assert [j.identity.model for j in panel.primary] == ["juror-one", "juror-two", "pairjudge-heuristic"]
    assert panel.tiebreak.identity.model == "resolver-model"
    assert len(stacks) == 4
    assert len(panel.breakers) == 4


def test_a_worker_child_reads_the_same_jury(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(jury=[{"kind": "openai", "model": "j", "api_key": "sk-juror-key-1"}])
    for key, value in environ_for(settings).items():
        if key.startswith("PAIRJUDGE_"):
            monkeypatch.setenv(key, value)
    child = Settings()
    assert child == settings
    assert child.jury[0].api_key is not None
    assert child.jury[0].api_key.get_secret_value() == "sk-juror-key-1"


def test_a_missing_config_file_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PAIRJUDGE_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ValueError, match="PAIRJUDGE_CONFIG"):
        Settings()


@pytest.mark.parametrize(
    ("judge", "variable", "problem"),
    [
        ({"kind": "anthropic", "model": "claude"}, "PAIRJUDGE_JUDGE__API_KEY", "is not set"),
        ({"kind": "openai", "base_url": "https://api.example.com/v1"}, "PAIRJUDGE_JUDGE__API_KEY", "is not set"),
        (
            {"kind": "openai", "base_url": "https://api.example.com/v1", "api_key": "sk-has space-9999"},
            "API_KEY",
            "malformed",
        ),
        ({"kind": "anthropic", "api_key": "zq-9x"}, "PAIRJUDGE_JUDGE__API_KEY", "malformed"),
    ],
)
def test_bad_or_missing_keys_fail_at_start_up_naming_the_variable(
    judge: dict[str, str], variable: str, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem) as info:
        Settings(judge=judge)
    message = str(info.value)
    assert variable in message
    secret = judge.get("api_key")
    if secret:
        assert secret not in message
        assert "space-9999" not in message


def test_a_local_judge_needs_no_key() -> None:
    assert Settings(judge={"kind": "openai", "base_url": "http://127.0.0.1:8080/v1"}).judge.api_key is None


def test_a_jury_quorum_the_jury_cannot_reach_is_rejected() -> None:
    with pytest.raises(ValueError, match="PAIRJUDGE_JURY_QUORUM"):
        Settings(jury=[{"kind": "offline"}], jury_quorum=2)
