"""The real path: a worker on real Kafka asks the real llama.cpp server (SmolLM2) to judge a pair.

SmolLM2-135M's verdicts are not meaningful; what this proves is the wire path end to end: constrained
JSON over the OpenAI-compatible judge, strict validation and re-asks, reconciliation, possibly the
tie-break, the final outcome on its topic, and the judge's model, tokens and cost on the record.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from streams.brokers import create_topics
from streams.collector import collect_outcomes
from streams.demo import start_worker, stop_process
from streams.producer import send_events
from streams.settings import Settings
from streams.topics import topic_specs
from tests.fixtures.llama import LlamaServer
from tests.integration.pairgen import sample_dicts

pytestmark = [pytest.mark.kafka, pytest.mark.llama, pytest.mark.slow]


async def test_a_pair_judged_by_llama_cpp_reaches_a_final_outcome(
    kafka_bootstrap: str, llama_server: LlamaServer, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    settings = Settings(
        kafka={"bootstrap_servers": kafka_bootstrap, "partitions": 4},
        topics={"prefix": f"ll-{run}"},
        worker={"app_id": f"pairjudge-ll-{run}", "data_dir": tmp_path / "data", "concurrency": 1},
        judge={
            "kind": "openai",
            "base_url": llama_server.base_url,
            "model": llama_server.model,
            "response_format": "json_object_schema",  # llama.cpp rejects the json_schema form
            "max_tokens": 400,
            "read_timeout_s": 120,
            "max_retries": 1,
            "cache_dir": tmp_path / "cache",
            "prices": {llama_server.model: {"input_per_mtok": 0.1, "output_per_mtok": 0.2}},
        },
        telemetry={"exporter": "file", "file_path": tmp_path / "traces.jsonl"},
    )
    await create_topics(kafka_bootstrap, topic_specs(settings))
    pair = next(p for p in sample_dicts() if p["pair_id"] == "email-card-delay")
    pair["pair_id"] = f"{settings.topics.prefix}-llama-1"
    worker: subprocess.Popen[bytes] | None = None
    try:
        worker = start_worker(settings, tmp_path / "worker.log")
        await send_events(settings, [json.dumps(pair).encode()])
        outcomes = await collect_outcomes(settings, {pair["pair_id"]}, timeout=420)
    finally:
        if worker is not None:
            stop_process(worker)
    assert outcomes.complete, (tmp_path / "worker.log").read_text(errors="replace")[-3000:]
    kind, event = outcomes.final[pair["pair_id"]]
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
