"""The start-up guard (streams.faust_compat.runtime): another Faust, mode or aiokafka is refused, or warned about.

The overrides in streams.faust_compat are verified on one set of versions (``VERIFIED_VERSIONS``); under
another, a renamed hook leaves an override silent and pairs can be lost. These tests fake the installed
versions (the lookup the guard takes), run the real CLI commands on them, and hold the verified versions,
pyproject.toml's pins and deploy/requirements.lock together.
"""

from __future__ import annotations

import logging
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from typer.testing import CliRunner

from pairjudge.streams.cli.main import app
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.faust_compat import VERIFIED_VERSIONS, runtime
from pairjudge.streams.faust_compat.runtime import (
    ALLOW_SETTING,
    Mismatch,
    UnverifiedRuntime,
    check_runtime,
    mismatches,
)
from pairjudge.streams.worker.faust_app import build_faust_app

ROOT = Path(__file__).resolve().parents[2]


def installed(**overrides: str | None) -> dict[str, str | None]:
    """The verified versions, with some replaced (``None``: not installed)."""
    versions: dict[str, str | None] = dict(VERIFIED_VERSIONS)
    versions.update({name.replace("_", "-"): version for name, version in overrides.items()})
    return versions


@pytest.fixture(autouse=True)
def fresh_warnings() -> Iterator[None]:
    # The guard warns once a process; each test starts from none.
    runtime._warned.clear()
    yield
    runtime._warned.clear()


def test_the_verified_runtime_passes_silently(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert check_runtime(allow=False, lookup=installed().get) == ()
    assert not caplog.records


def test_the_running_interpreter_is_on_the_verified_runtime() -> None:
    """The environment the tests run in is the verified one (else the integration hook test proves nothing)."""
    assert mismatches() == ()


@pytest.mark.parametrize(
    ("name", "version"),
    [("faust-streaming", "0.15.4"), ("mode-streaming", "0.8.0"), ("aiokafka", "0.11.0"), ("aiokafka", None)],
)
def test_another_version_of_any_of_the_three_is_refused(name: str, version: str | None) -> None:
    with pytest.raises(UnverifiedRuntime) as raised:
        check_runtime(allow=False, lookup=installed(**{name: version}).get)
    message = str(raised.value)
    assert raised.value.mismatches == (Mismatch(name, version, VERIFIED_VERSIONS[name]),)
    # The message names the setting, what is installed and what was verified.
    assert ALLOW_SETTING in message
    assert f"{name} {version or '(not installed)'} (verified: {VERIFIED_VERSIONS[name]})" in message


def test_every_mismatch_is_named_in_the_verified_order() -> None:
    found = mismatches(installed(aiokafka="0.13.0", faust_streaming="0.16.0").get)
    assert [m.name for m in found] == ["faust-streaming", "aiokafka"]


def test_allowed_it_warns_once_naming_the_versions(caplog: pytest.LogCaptureFixture) -> None:
    lookup = installed(faust_streaming="0.16.0").get
    with caplog.at_level(logging.WARNING, logger="pairjudge.streams.faust_compat"):
        found = check_runtime(allow=True, lookup=lookup)
        check_runtime(allow=True, lookup=lookup)
    assert found == (Mismatch("faust-streaming", "0.16.0", "0.15.3"),)
    (warning,) = caplog.records
    assert warning.levelno == logging.WARNING
    assert ALLOW_SETTING in warning.getMessage()
    assert "faust-streaming 0.16.0 (verified: 0.15.3)" in warning.getMessage()


def test_the_setting_is_off_by_default_and_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().worker.allow_unverified_runtime is False
    monkeypatch.setenv(ALLOW_SETTING, "true")
    assert Settings().worker.allow_unverified_runtime is True


@pytest.fixture
def newer_faust(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process sees faust-streaming 0.16.0: the guard's own lookup, the one every caller uses."""
    real = runtime._installed
    monkeypatch.setattr(runtime, "_installed", lambda name: "0.16.0" if name == "faust-streaming" else real(name))


@pytest.mark.usefixtures("newer_faust")
@pytest.mark.parametrize("command", [["worker"], ["worker", "--processes", "2"], ["demo"], ["demo", "--serve"]])
def test_the_cli_refuses_before_touching_a_broker(command: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # Port 9 (discard) on loopback: nothing answers, so getting past the guard would fail differently (or hang).
    monkeypatch.setenv("PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS", "127.0.0.1:9")
    monkeypatch.delenv(ALLOW_SETTING, raising=False)
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 2, result.output
    output = " ".join(result.output.split())  # rich wraps long lines
    assert "refusing to start" in output
    assert f"{ALLOW_SETTING}=true" in output
    assert "faust-streaming 0.16.0 (verified: 0.15.3)" in output


@pytest.mark.usefixtures("newer_faust")
def test_building_the_faust_app_refuses_too(tmp_path: Path) -> None:
    """Every other path to a Faust app (the benches' workers, the tests' create_app) goes through here."""
    with pytest.raises(UnverifiedRuntime):
        build_faust_app(Settings(worker={"data_dir": tmp_path}), breakers=())
    allowed = Settings(worker={"data_dir": tmp_path, "allow_unverified_runtime": True})
    assert build_faust_app(allowed, breakers=()).conf.id == allowed.worker.app_id


def _pins(requirements: list[str]) -> dict[str, str]:
    """``name: version`` of every requirement pinned with ``==`` (and nothing else)."""
    pins: dict[str, str] = {}
    for line in requirements:
        requirement = Requirement(line)
        specs = list(requirement.specifier)
        if len(specs) == 1 and specs[0].operator == "==":
            pins[canonicalize_name(requirement.name)] = specs[0].version
    return pins


def test_the_verified_versions_are_the_pins_and_the_lock() -> None:
    """One list of versions: VERIFIED_VERSIONS, pyproject.toml's pins and deploy/requirements.lock agree."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pinned = _pins(project)
    locked = dict(
        re.findall(r"(?m)^([A-Za-z0-9_.-]+)==([^\s;\\]+)", (ROOT / "deploy" / "requirements.lock").read_text())
    )
    locked = {canonicalize_name(name): version for name, version in locked.items()}
    for name, version in VERIFIED_VERSIONS.items():
        assert pinned.get(name) == version, f"pyproject.toml pins {name} at {pinned.get(name)}, verified: {version}"
        assert locked.get(name) == version, f"requirements.lock has {name} {locked.get(name)}, verified: {version}"
