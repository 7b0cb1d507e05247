"""The read API of a real ``pairjudge review serve`` process under many uneven pollers while the answer changes.

Thirty clients (httpx, async) poll the experiments list, the scoreboard and the gate at seeded, heavy-tailed
intervals, each sending ``If-None-Match`` with the last ETag it got, while scoreboard snapshots arrive on the real
Kafka topic as a worker publishes them (spread over the topic's partitions, so they can be read out of order, and
an old one published again midway). Every answer is a 200 or a 304: no 5xx. A 200's ETag is the hash of its body
and the body validates against the OpenAPI document; a 304 comes only for the ETag the client sent (the answer it
holds is the current one). One client's answers never go backwards: the snapshot behind a later answer is never
older than the one behind an earlier answer. Once the last snapshot is in, every client converges on it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import jsonschema
import pytest

from pairjudge.streams.config.settings import Settings, environ_for
from pairjudge.streams.kafka.codecs import encode
from pairjudge.streams.review.openapi import openapi_document
from pairjudge.streams.review.tokens import new_token
from pairjudge_dev.workers import kafka_run, produce_raw
from tests.fixtures.review import free_port
from tests.fixtures.scoreboard import biased_judge_snapshots

pytestmark = [pytest.mark.kafka]
EXPERIMENT = "support-assistant/v2"
CLIENTS = 30
BASE = f"/api/v1/experiments/{quote(EXPERIMENT, safe='')}"
# path -> the OpenAPI schema of its 200
ROUTES = {
    "/api/v1/experiments": "Experiments",
    f"{BASE}/scoreboard": "Scoreboard",
    f"{BASE}/gate?basis=human": "GateAnswer",
    f"{BASE}/gate?basis=judge": "GateAnswer",
}


def _validator(model: str) -> jsonschema.Draft202012Validator:
    doc = json.loads(openapi_document())
    return jsonschema.Draft202012Validator({"$ref": f"#/components/schemas/{model}", "components": doc["components"]})


def _updated_at(path: str, body: dict[str, Any]) -> datetime | None:
    """The time of the snapshot behind an answer (the gate's answer does not say)."""
    if path.endswith("/scoreboard"):
        return datetime.fromisoformat(body["updated_at"])
    if path == "/api/v1/experiments":
        mine = [e for e in body["experiments"] if e["experiment"] == EXPERIMENT]
        return datetime.fromisoformat(mine[0]["updated_at"]) if mine else None
    return None


async def _poll(
    url: str, token: str, seed: int, stop: asyncio.Event, seen: Counter[str], failures: list[str]
) -> dict[str, datetime | None]:
    """One client: its own paths, its own rhythm (mostly quick, now and then a long pause)."""
    rng = random.Random(seed)
    validators = {path: _validator(model) for path, model in ROUTES.items()}
    held: dict[str, tuple[str, bytes]] = {}  # path -> (etag, body) of the last 200
    newest: dict[str, datetime | None] = {}
    async with httpx.AsyncClient(base_url=url, headers={"authorization": f"Bearer {token}"}, timeout=30) as client:
        while not stop.is_set():
            path = rng.choice(list(ROUTES))
            headers = {"if-none-match": held[path][0]} if path in held and rng.random() < 0.9 else {}
            answer = await client.get(path, headers=headers)
            seen[str(answer.status_code)] += 1
            if answer.status_code == 304:
                if answer.headers.get("etag") != headers.get("if-none-match"):
                    failures.append(f"304 for {path} with ETag {answer.headers.get('etag')}, not the one sent")
                body = held[path][1]
            elif answer.status_code == 200:
                body = answer.content
                etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
                if answer.headers.get("etag") != etag:
                    failures.append(f"200 for {path}: ETag {answer.headers.get('etag')} is not its body's {etag}")
                try:
                    validators[path].validate(answer.json())
                except jsonschema.ValidationError as exc:
                    failures.append(f"200 for {path} does not match the OpenAPI document: {exc.message}")
                held[path] = (etag, body)
            else:
                failures.append(f"{answer.status_code} for {path}: {answer.text[:200]}")
                continue
            at = _updated_at(path, json.loads(body))
            last = newest.get(path)
            if at is not None and last is not None and at < last:
                failures.append(f"{path} went back from {last} to {at}")
            newest[path] = at if at is not None else last
            # Heavy-tailed: Pareto pauses of at least 100 ms, 300 ms on average, a few of a second or two.
            await asyncio.sleep(min(2.0, 0.1 * rng.paretovariate(1.5)))
    return newest


def _start_review(settings: Settings, log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "pairjudge.streams.cli", "review", "serve"],
            env=environ_for(settings),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


async def _ready(url: str, token: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(base_url=url, headers={"authorization": f"Bearer {token}"}) as client:
        while True:
            try:
                if (await client.get("/api/v1/experiments")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the review service never answered"
            await asyncio.sleep(0.3)


async def test_many_uneven_pollers_never_see_an_error_a_wrong_304_or_an_answer_go_back(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    token, line = new_token("dashboards", ("read",))
    tokens = tmp_path / "api-tokens"
    tokens.write_text(line + "\n")
    port = free_port()
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "polling",
        review={
            "port": port,
            "database_url": f"sqlite+aiosqlite:///{tmp_path}/review.db",
            "group_id": f"{tmp_path.name}-review",
            "api_tokens_file": str(tokens),
            "session_secret": "s" * 48,
        },
    )
    snapshots = biased_judge_snapshots(EXPERIMENT)
    topic = settings.topics.name("scores")
    url = f"http://127.0.0.1:{port}"
    review = _start_review(settings, tmp_path / "review.log")
    try:
        await produce_raw(kafka_bootstrap, topic, [encode(snapshots[0])], keyed=False)
        await _ready(url, token)
        stop = asyncio.Event()
        seen: Counter[str] = Counter()
        failures: list[str] = []
        clients = [asyncio.create_task(_poll(url, token, seed, stop, seen, failures)) for seed in range(CLIENTS)]
        rng = random.Random(40)
        for i, snap in enumerate(snapshots[1:], start=1):
            await asyncio.sleep(rng.uniform(0.1, 0.6))
            await produce_raw(kafka_bootstrap, topic, [encode(snap)], keyed=False)
            if i == len(snapshots) // 2:  # a worker publishing an old snapshot again (a retry, a lagging replica)
                await produce_raw(kafka_bootstrap, topic, [encode(snapshots[2])], keyed=False)
        last = snapshots[-1].updated_at
        deadline = time.monotonic() + 30
        async with httpx.AsyncClient(base_url=url, headers={"authorization": f"Bearer {token}"}) as client:
            while datetime.fromisoformat((await client.get(f"{BASE}/scoreboard")).json()["updated_at"]) < last:
                assert time.monotonic() < deadline, "the last snapshot never reached the read API"
                await asyncio.sleep(0.2)
        await asyncio.sleep(2.5)  # past the longest pause (2 s): every client asks once more
        stop.set()
        newest = await asyncio.gather(*clients)
    finally:
        review.terminate()
        review.wait(timeout=30)

    assert not failures, failures[:10]
    assert seen.keys() <= {"200", "304"}
    # Both kinds of answer were exercised, under load.
    assert seen["304"] > 100, seen
    assert seen["200"] > 100, seen
    scoreboard = f"{BASE}/scoreboard"
    assert sum(n.get(scoreboard) == last for n in newest) >= CLIENTS // 2, "the clients did not see the last snapshot"
