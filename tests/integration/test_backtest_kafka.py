"""``pairjudge export backtest`` and the backtest on a Kafka run's own history: the same outcomes as the live run.

A worker judges pairs on real Kafka with a judge server that answers a share of calls at random (flips, low
confidences, ties: so pairs reach the tie-break and review, not only verdicts); people label some pairs. The
history export runs as its own process; replaying its rows under the run's own policy gives every pair the
outcome the live run's decision records hold: the same stage, winner and review reason.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pairjudge.agents.backtest import replay_all, summarise
from pairjudge.schemas import HumanLabel
from pairjudge.schemas.backtest import RecordedPair
from pairjudge.streams.kafka.codecs import encode
from pairjudge_dev.slow_judge_server import Behaviour, JudgeServer
from pairjudge_dev.workers import final_decision_records, kafka_run, produce_raw, running_worker
from tests.integration.test_scores_kafka import _pair

pytestmark = [pytest.mark.kafka]
ROOT = Path(__file__).resolve().parents[2]


async def test_the_history_replayed_gives_the_live_runs_outcomes(kafka_bootstrap: str, tmp_path: Path) -> None:
    server = JudgeServer(Behaviour(flip_share=0.5, seed=41)).start()
    try:
        settings = await kafka_run(
            kafka_bootstrap,
            tmp_path,
            "backtest",
            judge={"kind": "openai", "base_url": server.base_url, "model": "sha-judge", "cache_enabled": False},
            policy={"audit_share": 0.3},
        )
        prefix = settings.topics.prefix
        pairs = [_pair(prefix, i, challenger_wins=i % 3 != 0) for i in range(30)]
        labels = [
            HumanLabel(pair_id=p.pair_id, winner=p.candidates[i % 2].candidate_id, reviewer="ana")
            for i, p in enumerate(pairs[:12])
        ]
        with running_worker(settings, tmp_path / "worker.log"):
            await produce_raw(kafka_bootstrap, settings.topics.name("pairs"), [encode(p) for p in pairs], keyed=True)
            finals = await final_decision_records(settings, {p.pair_id for p in pairs}, timeout=120)
            await produce_raw(kafka_bootstrap, settings.topics.name("labels"), [encode(x) for x in labels], keyed=True)
            out = tmp_path / "history.jsonl"
            argv = [sys.executable, "-m", "pairjudge.streams.cli", "export", "backtest", str(out)]
            argv += ["--bootstrap", kafka_bootstrap, "--timeout", "60"]
            env = {**os.environ, "PAIRJUDGE_TOPICS__PREFIX": prefix}
            done = await asyncio.to_thread(
                subprocess.run, argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 0, done.stdout + done.stderr
    finally:
        server.stop()

    rows = [RecordedPair.model_validate_json(line) for line in out.read_text().splitlines()]
    assert {r.pair_id for r in rows} == {p.pair_id for p in pairs}
    replayed = {r.pair_id: r for r in await replay_all(rows, settings.policy.to_policy())}
    kinds = {"primary": ("verdict", "primary"), "tiebreak": ("verdict", "tiebreak"), "people": ("review", None)}
    for pair in pairs:
        live, mine = finals[pair.pair_id], replayed[pair.pair_id]
        first, second = pair.candidates[0].candidate_id, pair.candidates[1].candidate_id
        kind, stage = kinds[mine.settled_by]
        assert live.outcome == kind, (pair.pair_id, live, mine)
        if kind == "verdict":
            assert live.stage == stage, (pair.pair_id, live, mine)
            assert {first: "first", second: "second"}.get(live.judge_winner or "", "tie") == mine.winner
        else:
            assert live.reason == mine.reason, (pair.pair_id, live, mine)
        assert live.audit_sample == mine.audited, pair.pair_id
    # The run went every way, so the comparison is not vacuous.
    assert {r.settled_by for r in replayed.values()} >= {"primary", "people"}
    summary = summarise("the run's policy", list(replayed.values()))
    assert summary.agreement_auto.labelled + summary.agreement_people_lean.pairs >= 1
    labelled = {r.pair_id: r.labels for r in rows if r.labels}
    assert set(labelled) == {x.pair_id for x in labels}
