"""The benchmarks with tiny counts, so they cannot rot: each runs as a user would run it, as a subprocess.

Figures are mostly not checked (CI's machine is shared and the counts are tiny); what is checked is that
each bench finishes with exit 0, which means its own correctness checks passed (no pair lost or wrongly
judged, no request refused), that ``bench.speed --quick`` printed a figure for every row of issue 13's
table, and that ``bench.scaleout --quick`` shows 2 workers clearly faster than 1 (its workers are bound by
the judge's latency, not the CPU: see its test) and fails, as it must, on pairs it counts as lost.
``bench.speed`` builds FastChat's venv (~/.cache/pairjudge/fastchat-venv) on its first run, by package
name with pip, so this test exercises that too.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# Alone under xdist: the scale-out ratios and row 6's floor are measured, and the benches want the CPU.
pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.serial]

ROOT = Path(__file__).resolve().parents[2]
#: Row titles of bench.speed's table, one or more lines each (rows 1-4 and 5 have two).
SPEED_ROWS = {1: 2, 2: 2, 3: 2, 4: 2, 5: 2, 6: 1, 7: 1, 8: 1, 9: 1, 10: 1}


def run_bench(args: list[str], timeout: float, *, status: int = 0) -> str:
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
    assert done.returncode == status, f"{' '.join(args)} exited {done.returncode}, not {status}:\n{output[-6000:]}"
    return output


def test_bench_speed_quick_prints_every_row(kafka_bootstrap: str) -> None:
    output = run_bench(["bench.speed", "--quick", "--bootstrap", kafka_bootstrap], timeout=420)
    for row, lines in SPEED_ROWS.items():
        found = re.findall(rf"^│ {row}\. .*│ +(\S.*?) +│ +[≥≤f].*│ +(ok|miss) +│$", output, re.MULTILINE)
        assert len(found) == lines, f"row {row}: {found} in\n{output[-6000:]}"
        assert all(figure != "—" for figure, _ in found), f"row {row} has no figure:\n{output[-6000:]}"
    # Row 6's floor (the pass-through with pairjudge's broker writes) is printed beside it, with no goal.
    floor = re.search(r"^│ 6\. \(floor\) .*│ +(\d+\.\d+) +│", output, re.MULTILINE)
    assert floor is not None, f"row 6's floor is missing:\n{output[-6000:]}"
    assert 0 < float(floor.group(1)) < 1.5, f"row 6's floor:\n{output[-6000:]}"


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


def scaleout_summary(output: str) -> dict[str, float]:
    """The figures of bench.scaleout's last line, ``SCALEOUT ratio1=1.000 ratio2=1.95 ... lost=0 ...``."""
    lines = re.findall(r"^SCALEOUT (.*)$", output, re.MULTILINE)
    assert len(lines) == 1, f"no SCALEOUT line:\n{output[-6000:]}"
    return {name: float(value) for name, value in (item.split("=") for item in lines[0].split())}


def test_bench_scaleout_quick(kafka_bootstrap: str) -> None:
    """1, 2 and 4 workers and the rebalance leg. Exit 0 already means no pair lost or conflicting, every
    throughput pair a right verdict, and each worker holding 8/N partitions; the line is checked as well.

    The ratio is asserted with a wide margin: a worker here needs about a fifth of a core at its bound
    (16 pairs/s with a 1 s judge), so two of them stay latency-bound even on a busy 2-core machine; in
    quick runs on such a machine the 2-worker ratio was 1.9-2.0. Once, with the suite's other load and a
    memory probe beside it on 2 cores (load average 2.6) and 4 s windows, it was 1.37; quick runs now
    measure 8 s windows, and at least 1.3 still fails when the second worker adds nothing (ratio ~1: both
    wait on one shared limit).
    """
    output = run_bench(["bench.scaleout", "--quick", "--bootstrap", kafka_bootstrap], timeout=420)
    figures = scaleout_summary(output)
    assert figures["lost"] == 0, output[-6000:]
    assert figures["conflicting"] == 0, output[-6000:]
    assert figures["sent"] >= 50, output[-6000:]
    assert figures["ratio2"] > 1.3, f"2 workers ÷ 1 = {figures['ratio2']}:\n{output[-6000:]}"
    assert figures["ratio4"] > figures["ratio2"], f"4 workers no faster than 2:\n{output[-6000:]}"


def test_bench_scaleout_reports_loss(kafka_bootstrap: str) -> None:
    """The negative control: 2 pairs counted as sent but never produced must fail the run as 2 lost."""
    output = run_bench(
        [
            *("bench.scaleout", "--quick", "--workers", "1", "--backlog-s", "1", "--churn-s", "6"),
            *("--self-test-lost", "2", "--bootstrap", kafka_bootstrap),
        ],
        timeout=300,
        status=1,
    )
    assert "BENCH FAILED" in output, output[-6000:]
    assert "2 pairs LOST" in output, output[-6000:]
    assert scaleout_summary(output)["lost"] == 2, output[-6000:]


def test_bench_table_store_tiny(kafka_bootstrap: str) -> None:
    """Both stores at two sizes: full starts at the first, the shortened run (RocksDB seeded) at the second."""
    output = run_bench(
        ["bench.table_store", "--bootstrap", kafka_bootstrap, "--sizes", "1000,2000", "--full-starts-up-to", "1500"],
        timeout=600,
    )
    runs = {
        (m["store"], int(m["pairs"])): {k: float(v) for k, v in re.findall(r"(\w+_(?:mb|s))=([\d.]+|nan)", m[0])}
        for m in re.finditer(r"^TABLESTORE store=(?P<store>\w+) pairs=(?P<pairs>\d+) .*$", output, re.MULTILINE)
    }
    assert set(runs) == {("memory", 1000), ("rocksdb", 1000), ("memory", 2000), ("rocksdb", 2000)}, output[-3000:]
    for (store, pairs), figures in runs.items():
        assert figures["restart_s"] > 0, (store, pairs)
        assert figures["restart_rss_mb"] > 50, (store, pairs)
        # A worker on RocksDB keeps its tables on disk: about 6.5 KB a pair of the outcome tables.
        if store == "rocksdb":
            assert figures["disk_mb"] * 2**20 > 3_000 * pairs, (pairs, figures)


def test_bench_processes_quick(kafka_bootstrap: str) -> None:
    """``pairjudge worker --processes 1`` and ``--processes 2`` through a small backlog each. Exit 0 already means
    every pair a right verdict, the group spread evenly over the workers, no worker restarted, and each command
    exiting 0 on SIGTERM. The ratio is not judged: the workers are CPU-bound here, on the 2 cores the broker and
    the judge server use too."""
    output = run_bench(["bench.processes", "--quick", "--backlog-s", "1", "--bootstrap", kafka_bootstrap], timeout=420)
    lines = re.findall(r"^PROCESSES (.*)$", output, re.MULTILINE)
    assert len(lines) == 1, f"no PROCESSES line:\n{output[-6000:]}"
    figures = {name: float(value) for name, value in (item.split("=") for item in lines[0].split())}
    assert set(figures) == {"rate1", "rate2", "ratio2"}, lines[0]
    assert figures["rate1"] > 0, lines[0]
    assert figures["rate2"] > 0, lines[0]


def test_bench_read_api_tiny() -> None:
    output = run_bench(["bench.read_api", "--requests", "30"], timeout=120)
    assert re.search(r"^gate \(human basis\) .* \d+\.\d\d$", output, re.MULTILINE), output[-3000:]
    assert "of one core" in output, output[-3000:]
