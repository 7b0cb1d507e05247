"""A judge's refusals on a real worker and real Kafka (issue 6: "judge errors by kind").

- A bad key stops the worker at start-up, before it takes a single pair.
- A refusal no retry fixes (a prompt over the context length) is not retried, does not go to human
  review, and ends in a ``judge_rejected`` dead letter with the original bytes, plus an alert.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.admin import topic_partitions
from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.producer import send_events
from pairjudge_dev.pairgen import many_pairs
from pairjudge_dev.workers import kafka_run, running_worker
from tests.fixtures.fake_judge_server import CONTEXT_LENGTH_EXCEEDED, FakeJudgeServer, model_list

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

KEY = "sk-test-correct-key-0123456789"


def _judge(server: FakeJudgeServer, key: str) -> dict[str, object]:
    return {
        "kind": "openai",
        "base_url": server.base_url,
        "model": "fake-model",
        "api_key": key,
        "response_format": "none",
        "cache_enabled": False,
        "max_retries": 3,
    }


async def _read_all(settings: Settings, kind: str) -> list[dict[str, object]]:
    topic = settings.topics.name(kind)
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka.bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    try:
        parts = (await topic_partitions(settings.kafka.bootstrap_servers, [topic]))[topic]
        tps = [TopicPartition(topic, p) for p in parts]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        events: list[dict[str, object]] = []
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                events.extend(json.loads(r.value or b"{}") for r in records)
        return events
    finally:
        await consumer.stop()


async def test_a_bad_key_stops_the_worker_before_it_takes_a_pair(kafka_bootstrap: str, tmp_path: Path) -> None:
    server = FakeJudgeServer().start()
    try:
        server.require_auth("Authorization", f"Bearer {KEY}")
        server.set_get_default(model_list("fake-model"))
        settings = await kafka_run(kafka_bootstrap, tmp_path, "badkey", judge=_judge(server, "sk-wrong-key-999999999"))
        await send_events(settings, many_pairs(4, settings.topics.prefix))
        log = tmp_path / "worker.log"
        with running_worker(settings, log) as worker:
            try:
                code: int | None = await asyncio.to_thread(worker.wait, 60)
            except subprocess.TimeoutExpired:
                code = None
        text = log.read_text(errors="replace")
        assert code is not None, f"the worker kept running with a refused key\n{text[-3000:]}"
        assert code != 0
        assert "PAIRJUDGE_JUDGE__API_KEY" in text, text[-3000:]
        assert "sk-wrong-key-999999999" not in text, "the key was logged"
        assert server.request_count == 0, "a pair was judged with a key the judge had refused"
        for kind in ("verdicts", "review", "deadletter", "tiebreak"):
            assert await _read_all(settings, kind) == [], f"something reached {kind}"
    finally:
        server.stop()


async def test_a_refused_request_is_dead_lettered_with_an_alert_not_sent_to_review(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    server = FakeJudgeServer().start()
    try:
        server.require_auth("Authorization", f"Bearer {KEY}")
        server.set_get_default(model_list("fake-model"))
        server.set_default(CONTEXT_LENGTH_EXCEEDED)
        settings = await kafka_run(kafka_bootstrap, tmp_path, "refused400", judge=_judge(server, KEY))
        pairs = many_pairs(6, settings.topics.prefix)
        expected = {json.loads(raw)["pair_id"] for raw in pairs}
        with running_worker(settings, tmp_path / "worker.log") as worker:
            await send_events(settings, pairs)
            outcomes = await collect_outcomes(settings, expected, timeout=90, settle=2)
            alive = worker.poll() is None
        text = (tmp_path / "worker.log").read_text(errors="replace")[-3000:]
        assert outcomes.complete, f"{sorted(outcomes.missing)}\n{text}"
        assert alive, text
        for pair_id, (kind, letter) in outcomes.final.items():
            assert kind == "deadletter", f"{pair_id} ended in {kind}, not a dead letter"
            assert letter["reason"] == "judge_rejected"
            assert "HTTP 400" in letter["error"]
            assert "context length" in letter["error"]
            assert letter["stage"] == "judge"
        by_id = {json.loads(raw)["pair_id"]: raw for raw in pairs}
        for pair_id, (_, letter) in outcomes.final.items():
            assert base64.b64decode(letter["original"]) == by_id[pair_id]
        # Not retried, not re-asked: one request per ordering.
        assert server.request_count == 2 * len(pairs)
        assert await _read_all(settings, "review") == []
        alerts = await _read_all(settings, "audit")
        # Rate-limited: the first refusal alerts, the rest within the minute are counted into the next one.
        assert [a["kind"] for a in alerts] == ["judge_rejected"]
        assert "fake-model" in str(alerts[0]["series"])
        # The judge's own status, carried typed from the HTTP client: this request, not the key.
        assert "(HTTP 400: this request refused)" in str(alerts[0]["message"]), alerts[0]["message"]
    finally:
        server.stop()
