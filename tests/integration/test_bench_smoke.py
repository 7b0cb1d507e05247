"""The benchmarks with tiny counts, so they cannot rot: each runs as a user would run it, as a subprocess.

Figures are not checked (CI's machine is shared and the counts are tiny); what is checked is that each
bench finishes with exit 0, which means its own correctness checks passed (no pair lost or wrongly
judged, no request refused), and that ``bench.speed --quick`` printed a figure for every row of issue
13's table. ``bench.speed`` builds FastChat's venv (~/.cache/pairjudge/fastchat-venv) on its first run,
by package name with pip, so this test exercises that too.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
#: Row titles of bench.speed's table, one or more lines each (rows 1-4 and 5 have two).
SPEED_ROWS = {1: 2, 2: 2, 3: 2, 4: 2, 5: 2, 6: 1, 7: 1, 8: 1, 9: 1, 10: 1}


def run_bench(args: list[str], timeout: float) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAIRJUDGE_")}
    env["COLUMNS"] = "200"  # rich wraps at the terminal width: one table row per line
    done = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{output[-6000:]}"
    return output


def test_bench_speed_quick_prints_every_row(kafka_bootstrap: str) -> None:
    output = run_bench(["bench.speed", "--quick", "--bootstrap", kafka_bootstrap], timeout=420)
    for row, lines in SPEED_ROWS.items():
        found = re.findall(rf"^│ {row}\. .*│ +(\S.*?) +│ +[≥≤f].*│ +(ok|miss) +│$", output, re.MULTILINE)
        assert len(found) == lines, f"row {row}: {found} in\n{output[-6000:]}"
        assert all(figure != "—" for figure, _ in found), f"row {row} has no figure:\n{output[-6000:]}"


def test_bench_judge_smallest() -> None:
    run_bench(
        [
            *("bench.judge", "--quick", "--levels", "8", "--window", "0.5", "--warmup", "0.3"),
            *("--samples", "2", "--cache-pairs", "30", "--cache-concurrency", "8"),
        ],
        timeout=180,
    )


def test_bench_pipeline_tiny(kafka_bootstrap: str) -> None:
    run_bench(
        [
            *("bench.pipeline", "--bootstrap", kafka_bootstrap, "--pairs", "24", "--judge-sample", "12"),
            *("--no-audit-compare", "--timeout", "180"),
        ],
        timeout=300,
    )
