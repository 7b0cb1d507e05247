"""Canary rounds through a worker whose HTTP judge has a response cache, on real Kafka (seed 000).

Production pairs with the same prompt are judged once and then served from the cache; every canary
round, the same prompts again under fresh ids, still reaches the judge (counted at the judge server).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from pairjudge.agents.untrusted import unmark
from pairjudge.schemas import CandidatePair, KnownLabel, PairMetadata
from pairjudge.streams.audit.canary import round_events, round_stamp
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.codecs import encode
from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.producer import send_events
from pairjudge_dev.replies import tone_reply
from pairjudge_dev.workers import kafka_run, running_worker
from tests.fixtures.fake_judge_server import Action, FakeJudgeServer, RecordedRequest, fake_judge_server, reply
from tests.unit.factories import FIRST_ID, FIRST_OUTPUT, SECOND_OUTPUT, make_pair

__all__ = ["fake_judge_server"]  # a fixture, imported for pytest
pytestmark = [pytest.mark.kafka]

ROUNDS = 3


def _prefers_the_first_candidate(request: RecordedRequest) -> Action:
    prompt = unmark("\n".join(m["content"] for m in request.json()["messages"]))  # outputs come datamarked
    return reply(tone_reply("A" if prompt.index(FIRST_OUTPUT) < prompt.index(SECOND_OUTPUT) else "B"))


async def _judged(settings: Settings, events: list[bytes]) -> None:
    ids = {CandidatePair.model_validate_json(event).pair_id for event in events}
    await send_events(settings, events)
    outcomes = await collect_outcomes(settings, ids, timeout=60)
    assert outcomes.complete, outcomes.missing
    assert {kind for kind, _ in outcomes.final.values()} == {"verdicts"}


async def test_a_worker_with_a_response_cache_sends_every_canary_round_to_the_judge(
    kafka_bootstrap: str, tmp_path: Path, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.set_responder(_prefers_the_first_candidate)
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "canarycache",
        judge={**fake_judge_server.judge_settings(), "cache_enabled": True, "cache_dir": str(tmp_path / "cache")},
        policy={"audit_share": 0.0, "audit_uncertain_share": 0.0},
    )
    prefix = settings.topics.prefix
    production = make_pair(pair_id=f"{prefix}-p0", metadata=PairMetadata(traffic="production"))
    canaries = [production.model_copy(update={"human_label": KnownLabel(winner=FIRST_ID)})]
    with running_worker(settings, tmp_path / "worker.log"):
        # The cache is on: the same production prompt under a second id is not paid for twice.
        await _judged(settings, [encode(production)])
        await _judged(settings, [encode(production.model_copy(update={"pair_id": f"{prefix}-p1"}))])
        assert fake_judge_server.request_count == 2

        for n in range(ROUNDS):
            await _judged(settings, round_events(canaries, round_stamp(datetime(2026, 12, 6, 10 + n, tzinfo=UTC))))
            assert fake_judge_server.request_count == 2 + 2 * (n + 1), f"canary round {n + 1} was not judged anew"
