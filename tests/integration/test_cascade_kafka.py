"""The judge cascade on real Kafka (issue 28): the llama.cpp server as the cheap tier, a scripted strong judge.

A worker runs two tiers: "local", the real llama.cpp server (SmolLM2-135M) at a tier threshold it rarely
clears, and "frontier", the scripted judge server on 127.0.0.1 (consistent verdicts, token usage on every
reply), both priced. Pairs flow through both tiers: the decision records, the verdicts and the call spans name
the tier. Then the scripted judge's price is raised live (it bills many times the tokens): one pair's calls
pass the hourly spending cap, and the pairs after it go to review "spend_capped" without a judge call, with a
"spend_cap" alert; the cap raised through ``pairjudge.control`` lets the next pair be judged again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pairjudge.schemas import DecisionRecord, SpendReport
from pairjudge.streams.control.live import publish_control
from pairjudge.streams.kafka.collector import collect_outcomes, read_topic
from pairjudge.streams.kafka.producer import send_events
from pairjudge_dev.pairgen import sample_dicts
from pairjudge_dev.slow_judge_server import Behaviour, JudgeServer
from pairjudge_dev.workers import final_decision_records, kafka_run, read_log, running_worker
from tests.fixtures.clock import within_one_clock_hour
from tests.fixtures.llama import LlamaServer

# Every llama test on one worker (one llama.cpp server, a session fixture) and alone (serial): the server is
# CPU-bound, and on a machine busy with other tests its replies outlast the judge's read timeout.
pytestmark = [
    pytest.mark.kafka,
    pytest.mark.llama,
    pytest.mark.slow,
    pytest.mark.xdist_group("llama"),
    pytest.mark.serial,
]

#: US dollars per million tokens: the strong judge costs 20 times the cheap one.
LOCAL_PRICE = {"input_per_mtok": 0.05, "output_per_mtok": 0.1}
FRONTIER_PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
#: The hourly cap: far above what the first pairs cost (well under a cent each), far below a pair at the
#: raised price (the scripted judge then bills 100,000 times the tokens: tens of dollars a call).
CAP_USD = 1.0


@pytest.fixture
def strong_judge() -> Iterator[JudgeServer]:
    server = JudgeServer(Behaviour(hold_marker=None)).start()
    try:
        yield server
    finally:
        server.stop()


def _pairs(prefix: str, names: list[str]) -> list[dict[str, Any]]:
    samples = [p for p in sample_dicts() if isinstance(p["rubric"], dict) and p["rubric"]["kind"] == "tone_style"]
    pairs = []
    for i, name in enumerate(names):
        pair = dict(samples[i % len(samples)])
        pair["pair_id"] = f"{prefix}-{name}"
        pairs.append(pair)
    return pairs


async def _send_and_wait(settings: Any, pairs: list[dict[str, Any]], log: Path) -> dict[str, tuple[str, Any]]:
    await send_events(settings, [json.dumps(p).encode() for p in pairs])
    outcomes = await collect_outcomes(settings, {p["pair_id"] for p in pairs}, timeout=420)
    assert outcomes.complete, read_log(log)[-4000:]
    return {p["pair_id"]: outcomes.final[p["pair_id"]] for p in pairs}


async def test_pairs_flow_through_both_tiers_and_the_cap_trips_when_the_price_is_raised_live(
    kafka_bootstrap: str, llama_server: LlamaServer, strong_judge: JudgeServer, tmp_path: Path
) -> None:
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "tiers",
        worker={"concurrency": 2},
        policy={"spend_hourly_cap_usd": CAP_USD, "spend_action": "review", "audit_share": 0.0},
        tiers=[
            {
                "name": "local",
                **llama_server.judge_settings(),
                "cache_enabled": False,
                # SmolLM2 rarely clears it: most pairs go on to the strong tier.
                "threshold": 0.95,
                "prices": {llama_server.model: LOCAL_PRICE},
            },
            {
                "name": "frontier",
                "kind": "openai",
                "base_url": strong_judge.base_url,
                "model": "strong-judge",
                "response_format": "json_schema",
                "cache_enabled": False,
                "prices": {"strong-judge": FRONTIER_PRICE},
            },
        ],
        telemetry={"exporter": "file", "file_path": tmp_path / "traces.jsonl"},
    )
    log = tmp_path / "worker.log"
    prefix = settings.topics.prefix
    with running_worker(settings, log):
        # 1. Pairs flow through both tiers. (SmolLM2 may clear the cheap tier's threshold now and then: a
        # pair it decides costs no strong call, so batches go on until the strong tier has decided some.)
        records: dict[str, DecisionRecord] = {}
        for batch in range(3):
            pairs = _pairs(prefix, [f"a{batch}", f"b{batch}", f"c{batch}"])
            finals = await _send_and_wait(settings, pairs, log)
            found = await final_decision_records(settings, {p["pair_id"] for p in pairs}, timeout=60)
            for pid, record in found.items():
                # Every pair met the cheap tier first: decided there, or passed on from it.
                assert record.series.judge_tier == "local" or record.escalated_from == ("local",), record
                assert record.pair_cost_usd is not None
                assert record.pair_cost_usd > 0
                kind, event = finals[pid]
                if kind == "verdicts" and event["decided_by"] == "primary":
                    assert event["judge"]["tier"] == record.series.judge_tier
            records |= found
            if any(r.series.judge_tier == "frontier" for r in records.values()):
                break
        tiers = {pid: r.series.judge_tier for pid, r in records.items()}
        assert "frontier" in tiers.values(), tiers
        assert strong_judge.stats().requests >= 2

        # 2. The scripted judge's price is raised live: the next pair the strong tier judges passes the cap.
        # Steps 2 and 3 must fall in one UTC hour, the cap's window (up to five pairs, then two capped ones).
        await within_one_clock_hour(240.0)
        strong_judge.set_usage_scale(100_000)
        spent = 0.0
        for attempt in range(5):
            expensive = _pairs(prefix, [f"d{attempt}"])
            await _send_and_wait(settings, expensive, log)
            (record,) = (await final_decision_records(settings, {expensive[0]["pair_id"]}, timeout=60)).values()
            assert record.pair_cost_usd is not None
            spent += record.pair_cost_usd
            if record.series.judge_tier == "frontier":
                break
        assert spent > CAP_USD, record

        # 3. Over the cap: review "spend_capped", no judge call, and the alert.
        requests_before = strong_judge.stats().requests
        capped = _pairs(prefix, ["e", "f"])
        finals = await _send_and_wait(settings, capped, log)
        for pid, (kind, event) in finals.items():
            assert (kind, event["reason"]) == ("review", "spend_capped"), (pid, kind, event)
        assert strong_judge.stats().requests == requests_before
        alerts = [json.loads(v) for _, v in await read_topic(settings, "audit", timeout=5) if v]
        spend_alerts = [a for a in alerts if a.get("kind") == "spend_cap"]
        assert spend_alerts
        assert spend_alerts[0]["series"] == "spend:all"
        # The worker reported its hour's spend for the others to follow.
        reports = [SpendReport.model_validate_json(v) for _, v in await read_topic(settings, "spend", timeout=5) if v]
        assert reports
        assert max(sum(r.by_experiment.values()) for r in reports) > CAP_USD

        # 4. The cap raised live: judged again.
        await publish_control(settings, "spend_hourly_cap_usd", 1_000_000.0, "test")
        again = _pairs(prefix, ["g"])
        for attempt in range(20):
            finals = await _send_and_wait(settings, again, log)
            ((kind, event),) = finals.values()
            if not (kind == "review" and event["reason"] == "spend_capped"):
                break
            # The worker had not read the update yet: a new pair id, sent again.
            again = _pairs(prefix, [f"g{attempt}"])
        assert not (kind == "review" and event["reason"] == "spend_capped"), event
        assert strong_judge.stats().requests > requests_before

    # The call spans name their tier.
    spans = [json.loads(line) for line in (tmp_path / "traces.jsonl").read_text().splitlines()]
    chats = [s for s in spans if s["name"].startswith("chat ")]
    by_tier = {s["attributes"].get("pairjudge.tier") for s in chats}
    assert by_tier == {"local", "frontier"}, by_tier
    decided = [s for s in spans if s["name"] == "pairjudge.primary" and "pairjudge.tier" in s["attributes"]]
    assert {s["attributes"]["pairjudge.tier"] for s in decided} >= {"frontier"}
