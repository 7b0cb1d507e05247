"""The distribution as a user gets it: built, checked, installed beside OpenAI's Agents SDK, run outside the checkout.

``pip install pairjudge`` would install an unrelated project (PyPI's ``pairjudge`` is a preference-model
trainer), so the distribution is ``pairjudge-stream``; and ``agents`` is the Agents SDK's import name, so
everything installs under one ``pairjudge`` namespace. These tests build the wheel and sdist with
``python -m build`` (isolated, as a release would), run ``twine check --strict``, read what each archive
holds, then make a fresh virtualenv in a directory with no checkout in sight, install the wheel and
``openai-agents`` into it, import both, and run ``pairjudge demo`` from it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

from tests.fixtures.samples import sample_pair_ids

# One worker builds the distribution and its venv once (module fixtures) for every test here.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("packaging")]

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION = "pairjudge-stream"
#: The Agents SDK's distribution; its import name is ``agents``.
AGENTS_SDK = "openai-agents"


def _run(argv: list[str], cwd: Path, timeout: float = 600, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False, env=env)
    assert result.returncode == 0, f"{argv}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], cwd=out)
    return out


def _wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("pairjudge_stream-*-py3-none-any.whl")
    return wheel


def _sdist(dist: Path) -> Path:
    (sdist,) = dist.glob("pairjudge_stream-*.tar.gz")
    return sdist


def test_twine_check_passes_both_archives(dist: Path) -> None:
    archives = sorted(str(p) for p in dist.iterdir())
    assert len(archives) == 2
    stdout = _run([sys.executable, "-m", "twine", "check", "--strict", *archives], cwd=dist)
    assert stdout.count("PASSED") == 2, stdout


def test_the_wheel_holds_one_namespace_with_its_data(dist: Path) -> None:
    with zipfile.ZipFile(_wheel(dist)) as wheel:
        names = wheel.namelist()
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        headers = wheel.read(metadata).decode()
        entry_points = wheel.read(metadata.replace("METADATA", "entry_points.txt")).decode()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"pairjudge", next(t for t in tops if t.endswith(".dist-info"))}
    assert f"Name: {DISTRIBUTION}" in headers
    assert "pairjudge = pairjudge.streams.cli:main" in entry_points
    # Every file a judge is shown, the offline judge's word lists, the sample data and the review UI's
    # own assets ship: the same files as the checkout's folders.
    for folder, pattern in (
        ("agents/templates", "*.txt"),
        ("agents/offline/words", "*.txt"),
        ("streams/data", "*"),
        ("streams/review/templates", "*.html"),
        ("streams/review/static", "*"),
    ):
        expected = {f"pairjudge/{folder}/{p.name}" for p in (ROOT / folder).glob(pattern)}
        assert expected, folder
        assert expected <= set(names), folder
    for package in ("pairjudge", "pairjudge/agents", "pairjudge/schemas", "pairjudge/streams"):
        assert f"{package}/py.typed" in names
    assert not [n for n in names if n.startswith(("pairjudge/tests", "pairjudge/bench", "pairjudge_dev"))]


def test_the_sdist_holds_the_folders_and_no_links(dist: Path) -> None:
    with tarfile.open(_sdist(dist)) as sdist:
        members = sdist.getmembers()
    assert not [m.name for m in members if m.issym() or m.islnk()]
    paths = {m.name.split("/", 1)[1] for m in members if "/" in m.name}
    for folder in ("agents", "schemas", "streams"):
        assert f"{folder}/__init__.py" in paths
    assert "pairjudge/__init__.py" in paths
    # Every source file of the three folders, so a wheel built from the sdist is the same wheel.
    sources = {str(p.relative_to(ROOT)) for top in ("agents", "schemas", "streams") for p in (ROOT / top).rglob("*.py")}
    assert sources <= paths
    assert not [p for p in paths if p.split("/")[0] in {"tests", "bench", "pairjudge_dev", "deploy", ".venv"}]


@pytest.fixture(scope="module")
def fresh_venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtualenv, outside the checkout, with the wheel and the Agents SDK side by side."""
    home = tmp_path_factory.mktemp("elsewhere")
    env_dir = home / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    _run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(_wheel(dist)), AGENTS_SDK],
        cwd=home,
        timeout=900,
    )
    return env_dir


def _clean_env(env_dir: Path) -> dict[str, str]:
    # Nothing of the checkout on the path, no settings from the test run.
    keep = {"HOME", "LANG", "LC_ALL", "TMPDIR", "PIP_CACHE_DIR"}
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["PATH"] = f"{env_dir / 'bin'}:/usr/bin:/bin"
    return env


def test_both_install_side_by_side_and_import_their_own(fresh_venv: Path) -> None:
    home = fresh_venv.parent
    probe = """
import json, importlib.metadata as md
import agents, pairjudge, pairjudge.agents.core, pairjudge.streams.cli, pairjudge.schemas.events
Agent, Runner = agents.Agent, agents.Runner
print(json.dumps({
    "agents": agents.__file__,
    "sdk_dist": md.packages_distributions().get("agents"),
    "ours": pairjudge.agents.core.__file__,
    "ours_dist": md.packages_distributions().get("pairjudge"),
    "agent_class": Agent.__module__,
    "runner": Runner.__name__,
}))
"""
    found = json.loads(_run([str(fresh_venv / "bin" / "python"), "-c", probe], cwd=home, env=_clean_env(fresh_venv)))
    site = str(fresh_venv)
    assert found["agents"].startswith(site)
    assert found["ours"].startswith(site)
    assert found["sdk_dist"] == [AGENTS_SDK]
    assert found["ours_dist"] == [DISTRIBUTION]
    assert found["agent_class"].startswith("agents.")
    assert str(ROOT) not in found["agents"] + found["ours"]


def test_the_demo_runs_from_the_wheel_outside_the_checkout(fresh_venv: Path) -> None:
    home = fresh_venv.parent
    out = home / "run" / "outcomes.jsonl"
    stdout = _run(
        [str(fresh_venv / "bin" / "pairjudge"), "demo", "--out", str(out), "--timeout", "120"],
        cwd=home,
        timeout=300,
        env=_clean_env(fresh_venv),
    )
    # Every line sent has its outcome (the demo's summary since issue 39: "16 of 16 lines sent have an outcome").
    assert re.search(r"\b(\d+) of \1 lines sent have an outcome", stdout), stdout
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {row["pair_id"].split("-", 1)[1] for row in rows} == sample_pair_ids()
    assert "verdicts" in {row["outcome"] for row in rows}
