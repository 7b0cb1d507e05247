"""The demo's traces in a real observability backend: exported over OTLP/HTTP to Arize Phoenix and
read back through Phoenix's own API, decision spans, judge-call spans and evaluation results included."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.phoenix import PhoenixServer

pytestmark = [pytest.mark.slow, pytest.mark.phoenix]


def _spans(base_url: str) -> list[dict[str, Any]]:
    spans: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, str | int] = {"limit": 1000}
        if cursor:
            params["cursor"] = cursor
        page = httpx.get(f"{base_url}/v1/projects/default/spans", params=params, timeout=30).json()
        spans.extend(page["data"])
        cursor = page.get("next_cursor")
        if not cursor:
            return spans


def _listening_addresses(pid: int) -> set[str]:
    """Local addresses of every TCP socket ``pid`` listens on (from ``ss``)."""
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    return {line.split()[3].rsplit(":", 1)[0] for line in out.splitlines() if f"pid={pid}," in line}


def test_the_demo_traces_reach_phoenix_and_read_back_through_its_api(
    phoenix_server: PhoenixServer, tmp_path: Path
) -> None:
    # Every port Phoenix opened is on loopback, its OTLP/gRPC receiver included.
    addresses = _listening_addresses(phoenix_server.pid)
    assert len(addresses) >= 2, addresses
    assert addresses <= {"127.0.0.1", "[::ffff:127.0.0.1]"}, addresses

    pairjudge = shutil.which("pairjudge", path=str(Path(sys.executable).parent))
    assert pairjudge
    out = tmp_path / "out" / "outcomes.jsonl"
    env = {
        **os.environ,
        "PAIRJUDGE_TELEMETRY__EXPORTER": "otlp",
        "PAIRJUDGE_TELEMETRY__OTLP_ENDPOINT": phoenix_server.base_url,
    }
    demo = subprocess.run(
        [pairjudge, "demo", "--out", str(out), "--timeout", "120"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    outcomes = {row["pair_id"]: row for row in map(json.loads, out.read_text().splitlines())}
    judged = {pid for pid, row in outcomes.items() if row["outcome"] != "deadletter"}

    # The worker flushes its spans as it stops; Phoenix ingests them asynchronously.
    deadline = time.monotonic() + 60
    while True:
        spans = _spans(phoenix_server.base_url)
        primary = {s["attributes"].get("pairjudge.pair_id"): s for s in spans if s["name"] == "pairjudge.primary"}
        if judged <= primary.keys() or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert judged <= primary.keys(), sorted(judged - primary.keys())

    by_id = {s["context"]["span_id"]: s for s in spans}
    for pair_id in judged:
        decision = primary[pair_id]
        # One trace per pair: the judge calls are children of the decision span, with GenAI attributes.
        children = [s for s in spans if s.get("parent_id") == decision["context"]["span_id"]]
        # Judge calls are named "<operation> <model>" (GenAI conventions); other children are publishes.
        calls = [s for s in children if s["name"].startswith("chat ")]
        assert len(calls) >= 2, pair_id
        for call in calls:
            attributes = call["attributes"]
            assert attributes["gen_ai.operation.name"] == "chat"
            assert attributes["gen_ai.request.model"]
            assert attributes["pairjudge.order_shown"] in ("AB", "BA")
        assert {c["attributes"]["pairjudge.order_shown"] for c in calls} == {"AB", "BA"}
        # Output text is not recorded unless content capture is on.
        assert not any("output" in key and "text" in key for call in calls for key in call["attributes"])
    # The evaluation result of each verdict names the winner's role, as the published verdict does.
    for pair_id, row in outcomes.items():
        if row["outcome"] != "verdicts":
            continue
        stage = "pairjudge.primary" if row["event"]["decided_by"] == "primary" else "pairjudge.tiebreak"
        decision = next(s for s in spans if s["name"] == stage and s["attributes"].get("pairjudge.pair_id") == pair_id)
        (evaluation,) = [e for e in decision["events"] if e["name"] == "gen_ai.evaluation.result"]
        assert evaluation["attributes"]["gen_ai.evaluation.score.label"] == row["event"]["winner_role"]
        assert evaluation["attributes"]["gen_ai.evaluation.score.value"] == pytest.approx(row["event"]["confidence"])
        assert re.fullmatch(r"pairwise_\w+", evaluation["attributes"]["gen_ai.evaluation.name"])
        assert decision["context"]["trace_id"] == by_id[decision["context"]["span_id"]]["context"]["trace_id"]
