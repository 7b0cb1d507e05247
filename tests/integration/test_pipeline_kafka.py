"""The whole pipeline on real Apache Kafka: 4 partitions, 2 workers in one group, a few hundred pairs.

The second worker joins while pairs are flowing, so the group rebalances mid-stream: the case where
faust re-delivers work (faust#502) and where aiokafka 0.14 was seen skipping offsets.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.producer import send_events
from pairjudge_dev.pairgen import malformed_events, many_pairs
from pairjudge_dev.workers import kafka_run, running_worker

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

N_PAIRS = 300


async def _send_keyed(settings: Settings, events: dict[str, bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers, acks="all")
    await producer.start()
    try:
        for key, value in events.items():
            await producer.send_and_wait(settings.topics.name("pairs"), value=value, key=key.encode())
    finally:
        await producer.stop()


async def test_two_workers_every_pair_gets_exactly_one_final_outcome(kafka_bootstrap: str, tmp_path: Path) -> None:
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "it",
        kafka={"session_timeout_s": 10, "heartbeat_interval_s": 1},
        worker={"concurrency": 8},
        telemetry={"exporter": "file", "file_path": tmp_path / "traces.jsonl"},
    )
    good = many_pairs(N_PAIRS, settings.topics.prefix)
    bad = malformed_events(settings.topics.prefix)
    expected = {json.loads(raw)["pair_id"] for raw in good} | set(bad)

    with running_worker(settings, tmp_path / "worker-1.log") as first:
        await send_events(settings, good[: N_PAIRS // 2])
        await _send_keyed(settings, bad)
        # The second worker joins while the first half is being judged: a mid-stream rebalance.
        with running_worker(settings, tmp_path / "worker-2.log") as second:
            await asyncio.sleep(2)
            await send_events(settings, good[N_PAIRS // 2 :])
            outcomes = await collect_outcomes(settings, expected, timeout=300, settle=3)
            alive = [w.poll() is None for w in (first, second)]

    logs = "\n".join((tmp_path / f"worker-{i}.log").read_text(errors="replace")[-3000:] for i in (1, 2))
    assert outcomes.complete, (
        f"{len(outcomes.missing)} pairs have no outcome, e.g. {sorted(outcomes.missing)[:5]}\n{logs}"
    )
    assert all(alive), f"a worker died during the run\n{logs}"
    assert outcomes.conflicting == {}, f"pairs with more than one kind of final outcome: {outcomes.conflicting}"

    kinds = {pid: kind for pid, (kind, _) in outcomes.final.items()}
    for pair_id, raw in bad.items():
        assert kinds[pair_id] == "deadletter", f"{pair_id} was not dead-lettered"
        letter = outcomes.final[pair_id][1]
        # The original bytes travel with the reason, unchanged.
        assert base64.b64decode(letter["original"]) == raw
        assert letter["reason"]
        assert letter["error"]
    reasons = {pid: outcomes.final[pid][1]["reason"] for pid in bad}
    assert reasons[f"{settings.topics.prefix}-bad-unknown"] == "unknown_field"
    assert reasons[f"{settings.topics.prefix}-bad-missing"] == "missing_field"
    assert reasons[f"{settings.topics.prefix}-bad-oversized"] == "oversized_output"
    assert reasons[f"{settings.topics.prefix}-bad-truncated"] == "malformed_json"

    good_kinds = {kinds[json.loads(raw)["pair_id"]] for raw in good}
    # The sample set holds clear wins and near-identical outputs, so both routes must be exercised.
    assert "verdicts" in good_kinds
    assert good_kinds <= {"verdicts", "review"}, good_kinds
    tiebroken = [e for k, e in outcomes.final.values() if k == "verdicts" and e["decided_by"] == "tiebreak"]
    primary = [e for k, e in outcomes.final.values() if k == "verdicts" and e["decided_by"] == "primary"]
    assert primary, "no pair was decided by the primary judge"
    for verdict in primary + tiebroken:
        assert verdict["winner"] in ("champion", "challenger")
        assert verdict["trace_id"]
        assert len(verdict["trace_id"]) == 32
        assert {o["order_shown"] for o in verdict["orderings"]} == {"AB", "BA"}
