"""The real path: a worker on real Kafka asks the real llama.cpp server (SmolLM2) to judge a pair.

SmolLM2-135M's verdicts are not meaningful; what this proves is the wire path end to end: constrained
JSON over the OpenAI-compatible judge, strict validation and re-asks, reconciliation, possibly the
tie-break, the final outcome on its topic, and the judge's model, tokens and cost on the record.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.producer import send_events
from pairjudge_dev.pairgen import sample_dicts
from pairjudge_dev.workers import kafka_run, running_worker
from tests.fixtures.llama import LlamaServer

# Every llama test on one worker (one llama.cpp server, a session fixture) and alone (serial): the server is
# CPU-bound, and on a machine busy with other tests its replies outlast the judge's read timeout.
pytestmark = [
    pytest.mark.kafka,
    pytest.mark.llama,
    pytest.mark.slow,
    pytest.mark.xdist_group("llama"),
    pytest.mark.serial,
]


async def test_a_pair_judged_by_llama_cpp_reaches_a_final_outcome(
    kafka_bootstrap: str, llama_server: LlamaServer, tmp_path: Path
) -> None:
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "ll",
        worker={"concurrency": 1},
        judge={
            **llama_server.judge_settings(),
            "cache_dir": tmp_path / "cache",
            "prices": {llama_server.model: {"input_per_mtok": 0.1, "output_per_mtok": 0.2}},
        },
        telemetry={"exporter": "file", "file_path": tmp_path / "traces.jsonl"},
    )
    pair = next(p for p in sample_dicts() if p["pair_id"] == "email-card-delay")
    pair_id = pair["pair_id"] = f"{settings.topics.prefix}-llama-1"
    with running_worker(settings, tmp_path / "worker.log"):
        await send_events(settings, [json.dumps(pair).encode()])
        outcomes = await collect_outcomes(settings, {pair_id}, timeout=420)
    assert outcomes.complete, (tmp_path / "worker.log").read_text(errors="replace")[-3000:]
    kind, event = outcomes.final[pair_id]
    assert kind in ("verdicts", "review"), (kind, event.get("reason"))
    orderings: list[dict[str, Any]] = list(event.get("orderings", []))
    assert {o["order_shown"] for o in orderings} >= {"AB", "BA"}
    answered = [o for o in orderings if o["answered_by_model"]]
    assert answered, "no ordering recorded which model answered"
    for o in answered:
        # The requested model and the one the server says answered are both on the record.
        assert o["answered_by_model"]
        assert o["input_tokens"] > 0
        assert o["output_tokens"] > 0
        assert o["cost_usd"] is not None
        assert o["cost_usd"] > 0
    judge = event["judge"]
    assert judge["provider"] == "openai-compatible"
    assert judge["model"] == llama_server.model
    assert judge["heuristic"] is False
    spans = [json.loads(line) for line in (tmp_path / "traces.jsonl").read_text().splitlines()]
    chats = [s for s in spans if s["name"].startswith("chat ")]
    assert chats
    assert all(s["attributes"]["gen_ai.usage.input_tokens"] > 0 for s in chats if s["status"]["status_code"] != "ERROR")
