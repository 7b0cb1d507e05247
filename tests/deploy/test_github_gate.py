"""deploy/github/wait-for-gate.yml: its wait step, run by bash as the runner would, against a stand-in
``pairjudge`` that exits with the gate's codes in turn (0 promote, 1 reject, 2 continue) and a ``sleep`` that
returns at once."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

WORKFLOW = Path(__file__).resolve().parents[2] / "deploy" / "github" / "wait-for-gate.yml"


def _workflow() -> dict[Any, Any]:
    doc: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text())
    return doc


def _wait_step() -> str:
    (step,) = [s for s in _workflow()["jobs"]["gate"]["steps"] if s.get("name") == "Wait for the gate"]
    assert step["shell"] == "bash"
    script: str = step["run"]
    return script


def _run(tmp_path: Path, codes: list[int], deadline_minutes: int = 60) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "codes").write_text("\n".join(map(str, codes)) + "\n")
    fake = bin_dir / "pairjudge"
    fake.write_text(
        "#!/bin/bash\n"
        f'echo "$@" >> {tmp_path}/calls\n'
        f"code=$(head -n1 {tmp_path}/codes); sed -i 1d {tmp_path}/codes\n"
        'exit "${code:-2}"\n'
    )
    (bin_dir / "sleep").write_text("#!/bin/bash\nexit 0\n")
    for tool in (fake, bin_dir / "sleep"):
        tool.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "EXPERIMENT": "support-assistant-v2",
        "BASIS": "human",
        "DEADLINE_MINUTES": str(deadline_minutes),
    }
    # GitHub runs a bash step as `bash --noprofile --norc -eo pipefail {0}`.
    script = tmp_path / "step.sh"
    script.write_text(_wait_step())
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize(
    ("codes", "exit_code", "says"),
    [
        ([2, 2, 0], 0, "promote"),
        ([2, 1], 1, "reject"),
        ([0], 0, "promote"),
        ([2, 3], 3, "could not answer"),
    ],
)
def test_the_wait_step_ends_with_the_gates_decision(
    tmp_path: Path, codes: list[int], exit_code: int, says: str
) -> None:
    done = _run(tmp_path, codes)
    assert done.returncode == exit_code, done.stdout + done.stderr
    assert says in done.stdout
    calls = (tmp_path / "calls").read_text().splitlines()
    assert len(calls) == len(codes)
    assert set(calls) == {"gate --experiment support-assistant-v2 --basis human"}


def test_the_wait_step_fails_at_its_deadline_saying_no_decision_came(tmp_path: Path) -> None:
    done = _run(tmp_path, [2, 2, 2], deadline_minutes=0)
    assert done.returncode == 1
    assert "no decision within 0 minutes" in done.stdout


def test_the_workflow_gives_the_step_what_it_reads() -> None:
    workflow = _workflow()
    # yaml reads the key `on` as True.
    triggers = workflow[True]
    job = workflow["jobs"]["gate"]
    for trigger in ("workflow_call", "workflow_dispatch"):
        assert set(triggers[trigger]["inputs"]) == {"experiment", "basis", "deadline-minutes"}
    used = set(re.findall(r"\$\{?([A-Z_]+)\}?", _wait_step())) - {"EXPERIMENT", "BASIS", "DEADLINE_MINUTES"}
    assert used == set(), used  # no environment variable besides the three inputs
    assert {"EXPERIMENT", "BASIS", "DEADLINE_MINUTES"} <= set(job["env"])
    assert "PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS" in job["env"]
    # Secrets only from the secrets context, never literal.
    secret_vars = [k for k in job["env"] if "PASSWORD" in k or "USERNAME" in k]
    assert all(job["env"][k].startswith("${{ secrets.") for k in secret_vars)
    assert workflow["permissions"] == {"contents": "read"}
    # The job's backstop outlasts the default deadline.
    assert job["timeout-minutes"] > triggers["workflow_call"]["inputs"]["deadline-minutes"]["default"]
