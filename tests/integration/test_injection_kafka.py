"""Hostile outputs through a real worker on Apache Kafka: review "suspected_injection", on the pair's span.

The hostile outputs are the corpus's (tests/data/hostile_outputs.jsonl), paired with the demo pairs'
better outputs; ordinary demo pairs go through the same worker and must not be flagged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.producer import send_events
from pairjudge_dev.injection_eval import Corpus, demo_pairs, hostile_pair
from pairjudge_dev.workers import kafka_run, running_worker

pytestmark = [pytest.mark.kafka]


async def test_hostile_pairs_go_to_review_with_the_detection_on_their_span(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    trace_file = tmp_path / "traces.jsonl"
    settings = await kafka_run(
        kafka_bootstrap, tmp_path, "inj", telemetry={"exporter": "file", "file_path": trace_file}
    )
    bases = demo_pairs()
    rows = Corpus.load().rows[::12]  # one in twelve: every kind of the corpus, ten pairs
    hostile = [hostile_pair(bases[i % len(bases)], r["output"], i % 2, f"inj-{r['id']}") for i, r in enumerate(rows)]
    ordinary = [p.model_copy(update={"pair_id": f"ok-{p.pair_id}"}) for p in bases]
    events = [p.model_dump_json().encode() for p in (*hostile, *ordinary)]
    with running_worker(settings, tmp_path / "worker.log"):
        await send_events(settings, events)
        outcomes = await collect_outcomes(settings, {p.pair_id for p in (*hostile, *ordinary)}, timeout=120)
    assert outcomes.complete, (tmp_path / "worker.log").read_text()[-3000:]

    for position, pair in enumerate(hostile):
        kind, event = outcomes.final[pair.pair_id]
        assert kind == "review", (pair.pair_id, kind)
        assert event["reason"] == "suspected_injection", (pair.pair_id, event["reason"])
        injector = pair.candidates[position % 2].candidate_id  # hostile_pair put it there
        assert injector in {f["candidate_id"] for f in event["injection"]}
    for pair in ordinary:
        kind, event = outcomes.final[pair.pair_id]
        assert not (kind == "review" and event["reason"] == "suspected_injection"), pair.pair_id

    spans: list[dict[str, Any]] = [json.loads(line) for line in trace_file.read_text().splitlines() if line.strip()]
    primary = {s["attributes"]["pairjudge.pair_id"]: s["attributes"] for s in spans if s["name"] == "pairjudge.primary"}
    for pair in hostile:
        attributes = primary[pair.pair_id]
        assert attributes["pairjudge.reason"] == "suspected_injection"
        assert attributes["pairjudge.injection_rules"]
        assert attributes["pairjudge.injection_candidates"]
        assert attributes["pairjudge.calls"] == 0  # no judge call for a pair that is not judged
    # Without content capture no output text reaches the spans, excerpts included.
    text = trace_file.read_text()
    for pair in hostile:
        assert pair.candidates[0].output[:40] not in text
        assert pair.candidates[1].output[:40] not in text
