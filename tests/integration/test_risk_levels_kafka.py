"""Risk levels on real Kafka: a worker judges a high-risk pair and an identical normal one with a judge whose
confidence sits between the two levels' thresholds; the normal pair becomes a verdict and the high one a
review request "risk_review", each decision in its own drift series. Then the high threshold is lowered
live through ``pairjudge.control`` and the next high pair follows the new value."""

from __future__ import annotations

from pathlib import Path

import pytest

from pairjudge.agents.prompts import template_hash
from pairjudge.agents.untrusted import unmark
from pairjudge.schemas.pair import RiskLevel
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.live import publish_control
from pairjudge.streams.kafka.codecs import encode
from pairjudge.streams.kafka.collector import Outcomes, collect_outcomes
from pairjudge_dev.replies import tone_reply
from pairjudge_dev.workers import final_decision_records, kafka_run, produce_raw, running_worker
from tests.fixtures.fake_judge_server import Action, FakeJudgeServer, RecordedRequest, fake_judge_server, reply
from tests.unit.factories import FIRST_OUTPUT, SECOND_OUTPUT, make_pair

__all__ = ["fake_judge_server"]  # a fixture, imported for pytest
pytestmark = [pytest.mark.kafka]

#: Between the normal level's 0.7 and the high level's 0.85 (Policy defaults).
CONFIDENCE = 0.78


def _prefers_the_first_candidate(request: RecordedRequest) -> Action:
    # Whatever the order, name the position the first candidate's output was shown in: a consistent pick.
    prompt = unmark("\n".join(m["content"] for m in request.json()["messages"]))  # outputs come datamarked
    first_is_a = prompt.index(FIRST_OUTPUT) < prompt.index(SECOND_OUTPUT)
    return reply(tone_reply("A" if first_is_a else "B", CONFIDENCE))


async def _judged(settings: Settings, pair_id: str, risk: RiskLevel | None) -> Outcomes:
    pair = make_pair(pair_id=pair_id, risk_level=risk)
    await produce_raw(settings.kafka.bootstrap_servers, settings.topics.name("pairs"), [encode(pair)], keyed=True)
    return await collect_outcomes(settings, {pair_id}, timeout=60)


async def test_a_high_risk_pair_goes_to_a_person_where_a_normal_one_is_decided(
    kafka_bootstrap: str, tmp_path: Path, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.set_responder(_prefers_the_first_candidate)
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "risk",
        judge=fake_judge_server.judge_settings(),
        # No audit copies: every pair has exactly the outcome its risk level routes it to.
        policy={"audit_share": 0.0, "audit_uncertain_share": 0.0},
    )
    prefix = settings.topics.prefix
    log_path = tmp_path / "worker.log"
    with running_worker(settings, log_path):
        normal = await _judged(settings, f"{prefix}-normal", None)
        high = await _judged(settings, f"{prefix}-high-0", "high")

        await publish_control(settings, "high_primary_confidence_threshold", 0.75, "test: risk levels")
        # The running worker applies it; send fresh high pairs until one is decided under the new value.
        for n in range(1, 6):
            after = await _judged(settings, f"{prefix}-high-{n}", "high")
            if after.final[f"{prefix}-high-{n}"][0] == "verdicts":
                break
        records = await final_decision_records(settings, {f"{prefix}-normal", f"{prefix}-high-0"}, timeout=30)
    log = log_path.read_text(errors="replace")
    assert normal.complete, log[-3000:]
    kind, event = normal.final[f"{prefix}-normal"]
    assert (kind, event["decided_by"], event["confidence"]) == ("verdicts", "primary", CONFIDENCE)
    assert high.complete, log[-3000:]
    kind, event = high.final[f"{prefix}-high-0"]
    assert (kind, event["reason"], event["stage"]) == ("review", "risk_review", "primary")
    assert event["pair"]["risk_level"] == "high"
    # The judge's answers travel with the review: both orders named the first candidate at 0.78.
    assert [o["confidence"] for o in event["orderings"]] == [CONFIDENCE, CONFIDENCE]

    kind, event = after.final[f"{prefix}-high-{n}"]
    assert kind == "verdicts", f"the lowered high threshold never reached the worker: {event.get('reason')}"
    assert n <= 3, f"the change took {n} pairs to arrive"
    assert "control: high_primary_confidence_threshold = 0.75" in log

    # Each level is its own drift series: the normal pair keeps the series key it had before risk levels.
    normal_key = records[f"{prefix}-normal"].series.key
    high_key = records[f"{prefix}-high-0"].series.key
    normal_parts, high_parts = normal_key.split("|"), high_key.split("|")
    # The same series but for the level, and the template hash: the judge of a high pair was shown its risk
    # line (agents.prompts.pair_template_hash), so the prompt it answered is another template.
    assert high_parts[-1] == "risk=high"
    assert high_parts[0] == normal_parts[0]
    assert high_parts[2:-1] == normal_parts[2:]
    # The worker datamarks by default (Policy.datamark), so both are the datamarked template's hashes.
    marked = (template_hash("tone_style", datamark=True), template_hash("tone_style", risk=True, datamark=True))
    assert (normal_parts[1], high_parts[1]) == marked
    assert records[f"{prefix}-high-0"].series.risk_level == "high"
    assert "risk=" not in normal_key
    assert (records[f"{prefix}-high-0"].outcome, records[f"{prefix}-high-0"].reason) == ("review", "risk_review")
