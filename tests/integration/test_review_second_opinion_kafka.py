"""Second opinions in the review service on real Kafka and SQLite, over HTTP: an audit item that wants two
labels goes to a second, different reviewer after the first labels it (never back to the first), both
labels reach the labels topic, and the operators' page shows what waits for a second opinion and each
series' judge-human kappa beside the human ceiling, with the kappa guard's mode.

(The browser tests drive Chromium; this one speaks HTTP, as the page's script does, so it runs where
Chromium is not installed.)"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from aiokafka import AIOKafkaProducer

from pairjudge.schemas import ReviewRequest
from pairjudge.schemas.audit import AuditSnapshot
from pairjudge.streams.config.settings import AuditSettings
from pairjudge.streams.kafka.codecs import encode
from tests.fixtures.review import read_labels, review_settings, send_reviews, serving, signed_in, wait_stored
from tests.unit.factories import make_pair

pytestmark = [pytest.mark.kafka]


async def _current_item(client: httpx.AsyncClient, session: dict[str, str]) -> tuple[str | None, str]:
    page = await client.get("/", headers=session)
    assert page.status_code == 200
    item = re.search(r'data-item-id="(\d+)"', page.text)
    csrf = re.search(r'<meta name="csrf-token" content="([^"]+)"', page.text)
    assert csrf is not None
    return (item.group(1) if item else None), csrf.group(1)


async def _label(client: httpx.AsyncClient, session: dict[str, str], item_id: str, csrf: str, choice: str) -> None:
    response = await client.post(
        f"/items/{item_id}/label",
        data={"choice": choice, "csrf_token": csrf},
        headers={**session, "accept": "application/json"},
    )
    assert response.status_code == 200, response.text


async def test_a_second_opinion_goes_to_another_reviewer_and_the_operators_see_the_ceiling(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    prefix = f"second-{uuid.uuid4().hex[:8]}"
    settings = review_settings(kafka_bootstrap, prefix, tmp_path)
    settings = settings.model_copy(update={"audit": AuditSettings(guard_mode="relative", relative_kappa_ratio=0.9)})
    pair = make_pair(pair_id=f"{prefix}-audit")
    request = ReviewRequest(
        pair_id=pair.pair_id, reason="audit_sample", stage="primary", pair=pair, audit=True, reviews_wanted=2
    )
    await send_reviews(settings, [request])
    series_key = "openai:gpt-x|h1|tone_style|<b>exp</b>"
    snapshot = AuditSnapshot(
        series=series_key,
        window_start=datetime(2026, 12, 1, 10, tzinfo=UTC),
        window_end=datetime(2026, 12, 1, 11, tzinfo=UTC),
        pairs=200,
        verdicts=180,
        flips=3,
        tiebreaks=10,
        reviews=5,
        invalid_replies=0,
        position_a_wins=90,
        human_labels=120,
        cohen_kappa=0.612,
        human_pairs=45,
        human_agreement=0.8,
        human_kappa=0.655,
        guard_mode="relative",
        guard_kappa_min=0.5895,
    )
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(settings.topics.name("audit"), encode(snapshot), key=series_key.encode())
    finally:
        await producer.stop()

    async with serving(settings) as server, httpx.AsyncClient(base_url=server.url) as client:
        await wait_stored(server, 1)
        ana, bo, olga = [await signed_in(client, n) for n in ("ana", "bo", "olga")]
        item_id, csrf = await _current_item(client, ana)
        assert item_id is not None
        await _label(client, ana, item_id, csrf, "left")
        assert (await _current_item(client, ana))[0] is None, "the first reviewer was handed the item again"

        operators = await client.get("/operators", headers=olga)
        assert operators.status_code == 200
        assert re.search(
            r'1 waiting \(<span id="second-opinion">1</span> of them for a second opinion\)', operators.text
        )

        bo_item, bo_csrf = await _current_item(client, bo)
        assert bo_item == item_id
        await _label(client, bo, bo_item, bo_csrf, "right")
        assert (await _current_item(client, bo))[0] is None
        assert (await _current_item(client, ana))[0] is None

        labels = await read_labels(settings, 2)
        assert sorted((label.reviewer, label.from_audit) for label in labels) == [("ana", True), ("bo", True)]
        assert {label.pair_id for label in labels} == {pair.pair_id}

        deadline = time.monotonic() + 30
        while series_key not in (server.running.review.audit.latest if server.running.review.audit else {}):
            assert time.monotonic() < deadline, "the audit snapshot was never read"
            await asyncio.sleep(0.1)
        page = (await client.get("/operators", headers=olga)).text
    assert '<span id="second-opinion">0</span>' in page
    assert "0 waiting" in page
    assert "1 done" in page
    assert "<strong>relative</strong>" in page
    assert "0.9 × the kappa of people against each other" in page
    # The judge's kappa with the labels it rests on (120, above the audit's minimum of 50), beside the ceiling.
    assert '<td class="kappa num">0.61, from 120 labels</td>' in page
    assert '<td class="human-kappa num">0.66</td>' in page
    assert "relative: floor 0.590" in page
    assert "&lt;b&gt;exp&lt;/b&gt;" in page  # the series key is escaped
    assert "<b>exp</b>" not in page
