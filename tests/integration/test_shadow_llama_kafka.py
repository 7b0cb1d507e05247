"""The shadow stage's real wire path: the challenger is the real llama.cpp server (SmolLM2, OpenAI-compatible, on
127.0.0.1), asked through the same HTTP client as the scripted challengers in test_shadow_kafka.py.

What SmolLM2-135M answers does not matter; what this proves is that a capture from production becomes a pair whose
challenger side is what a real OpenAI-compatible server said (its text, its model name, its token counts as the
price's basis), and that the pair then reaches a final outcome on Kafka (the offline judge).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pairjudge.agents.capture.build import make_capture
from pairjudge.agents.shadow import shadow_pair_id
from pairjudge.schemas.captures import Capture
from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge_dev.workers import kafka_run, running_worker
from tests.fixtures.llama import LlamaServer
from tests.integration.test_shadow_kafka import _produce, _read_all
from tests.unit.factories import tone_rubric

# With the other llama tests: one llama.cpp server (a session fixture) on one worker, alone (it is CPU-bound).
pytestmark = [
    pytest.mark.kafka,
    pytest.mark.llama,
    pytest.mark.slow,
    pytest.mark.xdist_group("llama"),
    pytest.mark.serial,
]

EXPERIMENT = "llama-challenger"


def _capture(capture_id: str) -> Capture:
    request: dict[str, Any] = {
        "model": "gpt-champion",
        "messages": [
            {"role": "system", "content": "You are a friendly assistant. Answer in one short sentence."},
            {"role": "user", "content": "Say hello to a new customer."},
        ],
    }
    response = {
        "id": "r",
        "object": "chat.completion",
        "model": "gpt-champion-1",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello, and welcome! We're glad you're here."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42},
    }
    return make_capture("chat_completions", request, response, capture_id=capture_id, route="/welcome")


async def test_a_capture_is_shadowed_to_the_llama_cpp_server_and_its_pair_is_judged(
    kafka_bootstrap: str, llama_server: LlamaServer, tmp_path: Path
) -> None:
    experiments = tmp_path / "experiments.json"
    experiments.write_text(
        json.dumps(
            {
                "experiments": [
                    {
                        "id": EXPERIMENT,
                        "select": {"routes": ["/welcome"]},
                        "challenger": {
                            "base_url": llama_server.base_url,
                            "model": llama_server.model,
                            # Room for a greeting to end on its own: a reply cut off by max_tokens on the
                            # challenger's side only would be set aside, not judged.
                            "params": {"max_tokens": 256, "temperature": 0},
                            "usd_per_million_input": 0.1,
                            "usd_per_million_output": 0.2,
                        },
                        "rubric": json.loads(tone_rubric().model_dump_json()),
                    }
                ]
            }
        )
    )
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "shllama",
        policy={"audit_share": 0.0},
        shadow={"experiments_file": str(experiments), "timeout_s": 180.0, "attempts": 2},
    )
    capture = _capture(f"{settings.topics.prefix}-cap-1")
    pair_id = shadow_pair_id(capture.capture_id, EXPERIMENT)
    log = tmp_path / "worker.log"
    with running_worker(settings, log):
        await _produce(settings, [capture])
        outcomes = await collect_outcomes(settings, {pair_id}, timeout=420)
        letters = await _read_all(settings, "deadletter", want=1, timeout=1)
    assert not letters, [(x["reason"], x["error"]) for x in letters]
    assert outcomes.complete, log.read_text(errors="replace")[-3000:]
    kind, _ = outcomes.final[pair_id]
    assert kind in {"verdicts", "tiebreak", "review"}, kind

    pairs = await _read_all(settings, "pairs", want=1, timeout=30)
    assert [p["pair_id"] for p in pairs] == [pair_id]
    champion, challenger = pairs[0]["candidates"]
    assert champion["output"] == "Hello, and welcome! We're glad you're here."
    # The challenger's side is what the llama.cpp server wrote: non-empty text, never a call (none was offered).
    assert challenger["output"].strip()
    assert not challenger.get("tool_calls")
    # The model the server says answered (llama.cpp names the model it serves), and the role each side played.
    assert challenger["source"]["model"]
    assert (champion["source"]["role"], challenger["source"]["role"]) == ("champion", "challenger")
    assert pairs[0]["metadata"]["experiment_id"] == EXPERIMENT
