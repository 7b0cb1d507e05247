"""The champion-challenger scoreboard and the deployment gate on real Kafka, end to end.

A judge that prefers the output with the smaller SHA-256 (consistent in both orders) decides every pair;
the challenger is given that output in most pairs, so the gate has something to find. Rule-settled pairs
(an empty output, identical outputs) count too. Pairs sent again are counted once, and the gate refuses
while the kappa guard holds automatic decisions.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pairjudge.schemas import CandidatePair
from pairjudge.schemas.pair import PairMetadata
from pairjudge.schemas.scores import ScoreSnapshot
from pairjudge.streams.codecs import encode
from pairjudge.streams.collector import collect_outcomes, read_topic
from pairjudge.streams.control import publish_control
from pairjudge.streams.settings import Settings
from pairjudge_dev.slow_judge_server import Behaviour, JudgeServer
from pairjudge_dev.workers import kafka_run, produce_raw, running_worker
from tests.unit.factories import make_pair

pytestmark = [pytest.mark.kafka]
EXPERIMENT = "exp-gate"
ROOT = Path(__file__).resolve().parents[2]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _pair(prefix: str, i: int, challenger_wins: bool) -> CandidatePair:
    a, b = f"Your refund {i} is on its way, thanks for waiting.", f"Refund {i} processed. Regards."
    better, worse = (a, b) if _digest(a) <= _digest(b) else (b, a)  # the judge picks the smaller digest
    champion, challenger = (worse, better) if challenger_wins else (better, worse)
    return make_pair(
        pair_id=f"{prefix}-p{i}",
        outputs=(champion, challenger),  # the factory's first candidate is the champion
        metadata=PairMetadata(experiment_id=EXPERIMENT, traffic="shadow"),
    )


async def _latest_snapshot(settings: Settings, until: int, timeout: float = 120, note: str = "") -> ScoreSnapshot:
    deadline = time.monotonic() + timeout
    while True:
        records = await read_topic(settings, "scores", timeout=3)
        snaps = [ScoreSnapshot.model_validate(json.loads(v)) for _, v in records if v]
        mine = [s for s in snaps if s.experiment == EXPERIMENT]
        if mine and mine[-1].overall.wins + mine[-1].overall.losses + mine[-1].overall.ties >= until:
            return mine[-1]
        assert time.monotonic() < deadline, f"the scoreboard never reached {until} pairs ({note}): {mine[-1:]}"
        await asyncio.sleep(0.5)


async def _gate_cli(bootstrap: str, prefix: str) -> subprocess.CompletedProcess[str]:
    """``pairjudge gate`` as a CI step runs it: a process of its own, judged by its exit code."""
    argv = [sys.executable, "-m", "pairjudge.streams.cli", "gate", "--experiment", EXPERIMENT, "--bootstrap", bootstrap]
    env = {**os.environ, "PAIRJUDGE_TOPICS__PREFIX": prefix}
    return await asyncio.to_thread(subprocess.run, argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


async def test_verdicts_move_the_scoreboard_and_the_gate_and_a_resent_pair_counts_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    server = JudgeServer(Behaviour()).start()
    try:
        settings = await kafka_run(
            kafka_bootstrap,
            tmp_path,
            "scores",
            judge={"kind": "openai", "base_url": server.base_url, "model": "sha-judge", "cache_enabled": False},
            policy={"audit_share": 0.0},
            scores={"snapshot_interval_s": 0.5, "bootstrap": 20},
        )
        prefix = settings.topics.prefix
        pairs = [_pair(prefix, i, challenger_wins=i % 10 != 0) for i in range(30)]  # 27 wins, 3 losses
        pairs.append(make_pair(pair_id=f"{prefix}-same", outputs=("Same text.", "Same  text."),
                               metadata=PairMetadata(experiment_id=EXPERIMENT, traffic="shadow")))  # fmt: skip
        pairs.append(make_pair(pair_id=f"{prefix}-empty", outputs=("A real answer.", ""),
                               metadata=PairMetadata(experiment_id=EXPERIMENT, traffic="production")))  # fmt: skip
        raws = [encode(p) for p in pairs]
        with running_worker(settings, tmp_path / "worker.log"):
            await produce_raw(kafka_bootstrap, settings.topics.name("pairs"), raws, keyed=True)
            outcomes = await collect_outcomes(settings, {p.pair_id for p in pairs}, timeout=120)
            assert outcomes.complete
            # What the board must show follows from the final outcomes themselves: a verdict counts, from
            # the challenger's side; a pair the judge could not decide (a slow machine can time a call out)
            # goes to review and counts only once a person labels it.
            expected = {"win": 0, "loss": 0, "tie": 0}
            for pair in pairs:
                kind, event = outcomes.final[pair.pair_id]
                if kind == "verdicts":
                    challenger = pair.candidates[1].candidate_id
                    winner = event["winner"]
                    expected["tie" if winner == "TIE" else "win" if winner == challenger else "loss"] += 1
            undecided = {
                pid: (kind, event.get("reason")) for pid, (kind, event) in outcomes.final.items() if kind != "verdicts"
            }
            first = await _latest_snapshot(settings, sum(expected.values()), note=f"not verdicts: {undecided}")
            # The same pairs again (a producer's retry): replayed, never counted twice.
            await produce_raw(kafka_bootstrap, settings.topics.name("pairs"), raws, keyed=True)
            await asyncio.sleep(8)
            again = await _latest_snapshot(settings, sum(expected.values()))
            result = await _gate_cli(kafka_bootstrap, prefix)
            await publish_control(settings, "kappa_guard_tripped", True, "test: a person paused")
            paused = await _gate_cli(kafka_bootstrap, prefix)
    finally:
        server.stop()
    overall = first.overall
    assert (overall.wins, overall.losses, overall.ties) == (expected["win"], expected["loss"], expected["tie"])
    # Nearly always 27 challenger wins, 3 losses, a tie by rule (identical) and a loss by rule (the
    # challenger said nothing); a judge call timed out on a loaded machine leaves one in review.
    assert overall.wins >= 24
    assert overall.ties == 1
    assert overall.losses >= 4
    assert again.overall == overall, "a pair sent twice was counted twice"
    assert first.by_traffic["production"].losses == 1
    assert overall.win_rate == pytest.approx(overall.wins / (overall.wins + overall.losses))
    assert overall.low is not None
    assert overall.low < (overall.win_rate or 0) < (overall.high or 0)
    assert first.gate.decision == "promote"
    assert first.history
    assert {s.model for s in first.strengths} == {"acme-frontier-xl", "zeta-small-chat"}
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PROMOTE" in result.stdout
    assert paused.returncode == 2, paused.stdout + paused.stderr
    assert "refused" in paused.stdout
