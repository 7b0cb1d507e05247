"""The human loop end to end on real Kafka: a position flip becomes a tie-break, the tie-break's orders
disagree and the pair becomes a review item, a reviewer labels it in the review service, and the label
joins the pair's decision record in the trust loop (the audit's observations topic)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import httpx
import pytest

from pairjudge.schemas.audit import AuditDelta
from pairjudge.streams.kafka.codecs import encode
from pairjudge.streams.review.auth import hash_password
from pairjudge_dev.replies import tiebreak_reply, tone_reply
from pairjudge_dev.workers import kafka_run, produce_raw, running_worker
from tests.fixtures.fake_judge_server import FakeJudgeServer, RecordedRequest, fake_judge_server, reply
from tests.fixtures.review import PASSWORDS, ROLES, free_port, read_labels, read_topic, serving, signed_in, wait_stored
from tests.unit.factories import make_pair

__all__ = ["fake_judge_server"]  # a fixture, imported for pytest
pytestmark = [pytest.mark.kafka]


def _always_position_a(request: RecordedRequest) -> object:
    # Position bias: both orders pick whatever is shown first, so the orders name different candidates.
    return reply(tiebreak_reply() if b"tiebreak_verdict" in request.body else tone_reply("A"))


async def test_a_flip_reaches_a_reviewer_and_the_label_joins_the_trust_loop(
    kafka_bootstrap: str, tmp_path: Path, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.set_responder(_always_position_a)  # type: ignore[arg-type]
    users = [{"name": n, "password_hash": hash_password(p), "role": ROLES[n]} for n, p in PASSWORDS.items()]
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "loop",
        judge=fake_judge_server.judge_settings(),
        policy={"audit_share": 0.0},
        audit={"snapshot_interval_s": 0.5, "window_s": 10_000_000.0},
        review={"database_url": f"sqlite+aiosqlite:///{tmp_path}/review.db", "port": free_port(), "users": users},
    )
    pair = make_pair(pair_id=f"{settings.topics.prefix}-flip")
    with running_worker(settings, tmp_path / "worker.log"):
        await produce_raw(kafka_bootstrap, settings.topics.name("pairs"), [encode(pair)], keyed=True)
        async with serving(settings) as server:
            await wait_stored(server, 1, timeout=120)
            async with httpx.AsyncClient(base_url=server.url) as client:
                session = await signed_in(client, "ana")
                page = await client.get("/", headers=session)
                assert page.status_code == 200
                assert "tiebreak_disagreement" in page.text
                item_id = re.search(r'data-item-id="(\d+)"', page.text)
                csrf = re.search(r'<meta name="csrf-token" content="([^"]+)"', page.text)
                assert item_id is not None
                assert csrf is not None
                labelled = await client.post(
                    f"/items/{item_id.group(1)}/label",
                    data={"choice": "right", "rationale": "B is warmer.", "csrf_token": csrf.group(1)},
                    headers={**session, "accept": "application/json"},
                )
                assert labelled.status_code == 200, labelled.text
            (label,) = await read_labels(settings, 1)
            assert (label.pair_id, label.reviewer, label.rationale) == (pair.pair_id, "ana", "B is warmer.")

            # The join sends its sums per series and flush (AuditDelta); this run's topics carry this pair only.
            deadline = time.monotonic() + 90
            deltas: list[AuditDelta] = []
            while time.monotonic() < deadline:
                raw = await read_topic(settings, "observations", 100_000, timeout=3)
                deltas = [AuditDelta.model_validate(json.loads(v)) for v in raw]
                if sum(d.stats["human_decided"] for d in deltas):
                    break
                await asyncio.sleep(0.5)
    # The label joined the pair's review outcome: a person decided it, and it is counted as such, once.
    assert sum(d.stats["human_decided"] for d in deltas) == 1, "the label never joined the pair's record in the audit"
    assert sum(d.stats["reviews"] for d in deltas) == 1
    # The judge's primary orders flipped, and the trust loop counted that flip.
    assert sum(d.stats["pairs"] for d in deltas) == 1
    assert sum(d.stats["flips"] for d in deltas) == 1


async def test_the_feed_dead_letters_an_unreadable_request_and_stores_a_redelivery_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    from pairjudge.schemas import DeadLetter, ReviewRequest
    from tests.fixtures.review import review_settings, send_reviews

    settings = review_settings(kafka_bootstrap, f"feed-{time.monotonic_ns()}", tmp_path)
    pair = make_pair(pair_id="feed-1")
    request = ReviewRequest(pair_id="feed-1", reason="tiebreak_disagreement", stage="tiebreak", pair=pair)
    await send_reviews(settings, [request, request])  # delivered twice
    await produce_raw(
        kafka_bootstrap, settings.topics.name("review"), [b'{"pair_id": "feed-bad", "reason": '], keyed=False
    )
    async with serving(settings) as server:
        await wait_stored(server, 1)
        deadline = time.monotonic() + 30
        while server.running.feed.dead_lettered < 1 or server.running.feed.duplicates < 1:
            assert time.monotonic() < deadline, "the feed did not see all three records"
            await asyncio.sleep(0.1)
        (letter_raw,) = await read_topic(settings, "deadletter", 1)
    letter = DeadLetter.model_validate_json(letter_raw)
    assert (letter.reason, letter.original) == ("malformed_json", b'{"pair_id": "feed-bad", "reason": ')
    assert server.running.feed.stored == 1
    assert (await server.running.store.stats()).waiting == 1
