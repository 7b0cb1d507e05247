"""The judge's API key never leaves the HTTP header it belongs in.

A worker runs on real Kafka against a local judge server that misbehaves in the ways that tend to
leak secrets: it echoes the key back in 401 and 500 bodies and even inside a reply's content. With
content capture on and DEBUG logging, the key must not appear in the worker's log, its spans, any
event on any topic (values and headers), or the error text of dead letters and review requests.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.admin import topic_partitions
from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.producer import send_events
from pairjudge.streams.kafka.topics import KINDS
from pairjudge_dev.workers import kafka_run, running_worker
from tests.fixtures.fake_judge_server import DEFAULT_CONTENT, Action, FakeJudgeServer, RecordedRequest, reply, status

pytestmark = [pytest.mark.kafka]


class LeakyJudge:
    """Echoes whatever key it is sent, in every way a careless server might."""

    def __init__(self) -> None:
        self.seen_keys: set[str] = set()
        self.attempts: Counter[str] = Counter()

    def __call__(self, request: RecordedRequest) -> Action:
        headers = {k.lower(): v for k, v in request.headers.items()}
        key = headers.get("authorization", "").removeprefix("Bearer ")
        self.seen_keys.add(key)
        prompt = " ".join(m["content"] for m in json.loads(request.body)["messages"])
        case = next(c for c in ("CASE0", "CASE1", "CASE2", "CASE3") if c in prompt)
        self.attempts[case] += 1
        if case == "CASE0":
            return status(401, body=json.dumps({"error": {"message": f"Incorrect API key provided: {key}"}}).encode())
        if case == "CASE1" and self.attempts[case] % 2 == 1:
            return status(500, body=f"upstream failed for Authorization: Bearer {key}".encode())
        content = json.loads(DEFAULT_CONTENT)
        if case == "CASE3":
            content["justification"] = f"My key is {key}."
        return reply(json.dumps(content))


def _pairs(prefix: str) -> list[bytes]:
    return [
        json.dumps(
            {
                "pair_id": f"{prefix}-{i}",
                "task": {"prompt": "Write a welcome line."},
                "candidates": [
                    {"candidate_id": "a", "output": f"Welcome aboard. CASE{i % 4}", "source": {"model": "m1"}},
                    {"candidate_id": "b", "output": "Hello and welcome to the team.", "source": {"model": "m2"}},
                ],
                "rubric": {"kind": "tone_style", "style_guide": "Warm, plain.", "audience": "New users."},
            }
        ).encode()
        for i in range(8)
    ]


async def _all_records(settings: Settings) -> list[bytes]:
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka.bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    blobs: list[bytes] = []
    try:
        by_topic = await topic_partitions(settings.kafka.bootstrap_servers, [settings.topics.name(k) for k in KINDS])
        parts = [TopicPartition(topic, p) for topic, ids in by_topic.items() for p in ids]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        while batch := await consumer.getmany(timeout_ms=1500):
            for records in batch.values():
                for r in records:
                    blobs.append((r.key or b"") + (r.value or b""))
                    blobs.extend(k.encode() + v for k, v in (r.headers or ()))
    finally:
        await consumer.stop()
    return blobs


async def test_the_api_key_appears_in_no_log_span_or_event(kafka_bootstrap: str, tmp_path: Path) -> None:
    key = f"sk-scan-{uuid.uuid4().hex}"
    server = FakeJudgeServer().start()
    judge = LeakyJudge()
    server.set_responder(judge)
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "sec",
        worker={"log_level": "DEBUG"},
        judge={
            "kind": "openai",
            "base_url": server.base_url,
            "model": "fake-model",
            "api_key": key,
            "max_retries": 1,
            "cache_dir": tmp_path / "cache",
        },
        telemetry={"exporter": "file", "file_path": tmp_path / "traces.jsonl", "capture_content": True},
    )
    events = _pairs(settings.topics.prefix)
    try:
        with running_worker(settings, tmp_path / "worker.log"):
            await send_events(settings, events)
            outcomes = await collect_outcomes(settings, {json.loads(e)["pair_id"] for e in events}, timeout=120)
    finally:
        server.stop()
    log = (tmp_path / "worker.log").read_text(errors="replace")
    assert outcomes.complete, log[-3000:]
    # The test is live: the key really was sent, and echoed back in bodies and content.
    assert judge.seen_keys == {key}
    assert {"CASE0", "CASE1", "CASE3"} <= set(judge.attempts)

    needle = key.encode()
    assert needle not in log.encode(), "the key is in the worker log"
    assert needle not in (tmp_path / "traces.jsonl").read_bytes(), "the key is in a span"
    leaked = [blob[:200] for blob in await _all_records(settings) if needle in blob]
    assert leaked == [], f"the key is in {len(leaked)} event(s)"
