"""Smoke test of the main job: ``pairjudge demo`` on the embedded Tansu broker, as a user runs it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pairjudge.streams.cli.demo import sample_labels, sample_pairs
from tests.fixtures.samples import sample_pair_ids

pytestmark = [pytest.mark.slow]


def test_demo_decides_or_routes_every_sample_pair(tmp_path: Path) -> None:
    pairjudge = shutil.which("pairjudge", path=str(Path(sys.executable).parent))
    assert pairjudge, "the pairjudge console script is not installed"
    out = tmp_path / "out" / "outcomes.jsonl"
    result = subprocess.run(
        [pairjudge, "demo", "--out", str(out), "--timeout", "120"],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    sample_ids = sample_pair_ids()
    # Every sample pair with an id has exactly one final outcome (ids carry a run prefix).
    seen = {row["pair_id"].split("-", 1)[1] for row in rows}
    assert seen == sample_ids
    assert len(rows) == len(sample_ids)
    kinds = {row["pair_id"].split("-", 1)[1]: row["outcome"] for row in rows}
    assert {pid for pid, kind in kinds.items() if kind == "deadletter"} == {
        pid for pid in sample_ids if pid.startswith("bad-")
    }
    assert "verdicts" in kinds.values()
    # Near-identical outputs must never get a confident first-pass verdict.
    by_id = {row["pair_id"].split("-", 1)[1]: row for row in rows}
    for near_identical in ("support-password", "product-jacket-close", "docs-pagination", "pairwise-onboarding"):
        row = by_id[near_identical]
        assert not (row["outcome"] == "verdicts" and row["event"]["decided_by"] == "primary"), near_identical
    # The demo writes readable traces next to its outcomes.
    traces = (out.parent / "demo-traces.jsonl").read_text().splitlines()
    assert any(json.loads(line)["name"] == "pairjudge.primary" for line in traces)
    # Every line sent has an outcome, the line with no pair id (not JSON) included: as many dead letters as the
    # README says the sample has malformed lines.
    assert f"{len(sample_pairs())} of {len(sample_pairs())} lines sent have an outcome" in result.stdout
    assert "dead letters 4" in result.stdout
    assert "four of them malformed on purpose" in (Path(__file__).parents[2] / "README.md").read_text()
    assert "line 16 (no pair id)" in result.stdout
    # It ends on the next step, in commands that can be pasted.
    assert "pairjudge demo --serve" in result.stdout.split("next")[-1]
    # The loop: the sample labels joined the automatic verdicts, and the audit counted each exactly once.
    audit = [json.loads(line) for line in (out.parent / "demo-audit.jsonl").read_text().splitlines()]
    snapshots = [a for a in audit if "window_end" in a]
    alerts = [a for a in audit if "window_end" not in a]
    labels = {json.loads(raw)["pair_id"]: json.loads(raw)["winner"] for raw in sample_labels()}
    verdicts = {pid: row["event"]["winner"] for pid, row in by_id.items() if row["outcome"] == "verdicts"}
    labelled = {pid: (verdicts[pid], labels[pid]) for pid in verdicts if pid in labels}
    assert sum(s["human_labels"] for s in snapshots) == len(labelled)
    agreeing = sum(1 for judge, human in labelled.values() if judge == human)
    assert sum(round(s["agreement"] * s["human_labels"]) for s in snapshots if s["human_labels"]) == agreeing
    # heuristic-3 and heuristic-4 agree with every sample label they decide (both decide the same six
    # sample pairs the same way; heuristic-4 moved only confidences on them. heuristic-2's one disagreement
    # was a tie-break verdict on length, which now escalates); the counting above is checked either way.
    assert 0 < agreeing <= len(labelled)
    assert len(labelled) >= 4, "the loop should join several of the sample labels"
    judged = sum(1 for row in rows if row["outcome"] != "deadletter")
    assert sum(s["pairs"] for s in snapshots) == judged
    # Today's sample sends most brand-voice pairs through the tie-break: seed 002's 20% alert fires.
    assert "tiebreak_rate_high" in {a["kind"] for a in alerts}
    assert "drift audit" in result.stdout
