"""The layering of DESIGN §6, checked by import-linter, and the top-level names resolving to us."""

from __future__ import annotations

import importlib
import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_import_linter_contracts_are_kept() -> None:
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint_imports, "import-linter is not installed in this environment (pip install -e '.[dev]')"
    result = subprocess.run([lint_imports], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 kept, 0 broken" in result.stdout


def test_the_wheel_ships_only_the_runtime_packages() -> None:
    """The packages list names every runtime package and nothing of the checkout's development rooms."""
    import tomllib

    packages = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    runtime = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("schemas", "agents", "streams")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert packages == runtime
    assert not {p for p in packages if p.split(".")[0] in {"pairjudge_dev", "tests", "bench"}}


@pytest.mark.parametrize("package", ["agents", "schemas", "streams"])
def test_top_level_packages_resolve_to_this_distribution(package: str) -> None:
    # `agents` is also OpenAI's Agents SDK: make sure the one imported is ours.
    module = importlib.import_module(package)
    assert module.__file__ is not None
    assert Path(module.__file__).resolve().parent == ROOT / package
    assert set(importlib.metadata.packages_distributions().get(package, [])) == {"pairjudge"}


def test_core_source_never_imports_edge_libraries() -> None:
    """A second, import-linter-free guard: the pure core's source text names no edge library."""
    forbidden = ("faust", "aiokafka", "httpx", "aiohttp", "opentelemetry", "pydantic_settings", "streams")
    offenders = []
    for folder in ("agents", "schemas"):
        for path in (ROOT / folder).rglob("*.py"):
            for line in path.read_text().splitlines():
                stripped = line.strip()
                if stripped.startswith(("import ", "from ")):
                    module = stripped.split()[1].split(".")[0]
                    if module in forbidden:
                        offenders.append(f"{path.relative_to(ROOT)}: {stripped}")
    assert offenders == []
