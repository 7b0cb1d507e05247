"""The champion-challenger scoreboard and the deployment gates on real Kafka, end to end.

A judge that prefers the output with the smaller SHA-256 (consistent in both orders) decides every pair;
the challenger is given that output in most pairs, so the gate has something to find. Rule-settled pairs
(an empty output, identical outputs) count too. Pairs sent again are counted once, and the judge gate
refuses while the kappa guard holds automatic decisions.

The human basis: the same judge, biased towards the challenger against people who mostly prefer the
champion; the audit sample's labels are published to the labels topic as a review service would, and the
human gate must not follow the judge's promotion.
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

from pairjudge.schemas import CandidatePair, HumanLabel
from pairjudge.schemas.audit import DecisionRecord
from pairjudge.schemas.pair import PairMetadata
from pairjudge.schemas.scores import GateUpdate, ScoreSnapshot
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.live import publish_control
from pairjudge.streams.kafka.codecs import encode
from pairjudge.streams.kafka.collector import collect_outcomes, read_topic
from pairjudge.streams.scores.gate_reader import gate_status
from pairjudge_dev.slow_judge_server import Behaviour, JudgeServer
from pairjudge_dev.workers import final_decision_records, kafka_run, produce_raw, running_worker
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


async def _gate_cli(bootstrap: str, prefix: str, *basis: str) -> subprocess.CompletedProcess[str]:
    """``pairjudge gate`` as a CI step runs it: a process of its own, judged by its exit code."""
    argv = [sys.executable, "-m", "pairjudge.streams.cli", "gate", "--experiment", EXPERIMENT, "--bootstrap", bootstrap]
    argv += basis
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
            result = await _gate_cli(kafka_bootstrap, prefix, "--basis", "judge")
            human = await _gate_cli(kafka_bootstrap, prefix)  # the default basis: people's
            await publish_control(settings, "kappa_guard_tripped", True, "test: a person paused")
            paused = await _gate_cli(kafka_bootstrap, prefix, "--basis", "judge")
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
    assert "judge basis (the judge's opinion, not people's)" in result.stdout
    # Auditing is off here: no labels, so the human basis continues and never falls back to the judge.
    assert human.returncode == 2, human.stdout + human.stderr
    assert "human basis" in human.stdout
    assert "not enough labels yet: 0 of the 30 needed" in human.stdout
    assert paused.returncode == 2, paused.stdout + paused.stderr
    assert "refused" in paused.stdout


#: What people decide, by pair number: the challenger only where ``i % 10`` is 1, 2 or 3 (30%), while
#: the judge names it in 90% of the pairs (``_pair(..., challenger_wins=i % 10 != 0)``).
def _person_prefers_challenger(i: int) -> bool:
    return i % 10 in (1, 2, 3)


async def _final_records(settings: Settings, pair_ids: set[str]) -> dict[str, DecisionRecord]:
    """Each pair's final decision record (a verdict or a review), as the audit's join keeps it."""
    return await final_decision_records(settings, pair_ids, timeout=60)


async def _latest_gate(settings: Settings) -> GateUpdate:
    records = await read_topic(settings, "gate", timeout=3)
    mine = [GateUpdate.model_validate_json(v) for k, v in records if v and k == EXPERIMENT.encode()]
    assert mine, "no gate update published"
    return mine[-1]


async def test_a_judge_biased_to_the_challenger_promotes_on_its_basis_but_not_on_peoples(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    server = JudgeServer(Behaviour()).start()
    try:
        settings = await kafka_run(
            kafka_bootstrap,
            tmp_path,
            "human",
            judge={"kind": "openai", "base_url": server.base_url, "model": "sha-judge", "cache_enabled": False},
            policy={"audit_share": 0.5, "audit_uncertain_share": 0.5},
            scores={"snapshot_interval_s": 0.5, "bootstrap": 20},
        )
        prefix = settings.topics.prefix
        pairs = [_pair(prefix, i, challenger_wins=i % 10 != 0) for i in range(40)]
        number = {p.pair_id: i for i, p in enumerate(pairs)}
        with running_worker(settings, tmp_path / "worker.log"):
            await produce_raw(kafka_bootstrap, settings.topics.name("pairs"), [encode(p) for p in pairs], keyed=True)
            finals = await _final_records(settings, set(number))
            sampled = [r for r in finals.values() if r.outcome == "verdict" and r.audit_sample]
            reviews = [r for r in finals.values() if r.outcome == "review"]
            stray = next(r for r in finals.values() if r.outcome == "verdict" and not r.audit_sample)
            assert sampled, "nothing was drawn into the audit sample at a share of 0.5"
            assert all(r.inclusion_probability == 0.5 for r in sampled), [r.inclusion_probability for r in sampled]

            def label(record: DecisionRecord) -> bytes:
                champion, challenger = record.candidates  # the factory's first candidate is the champion
                winner = challenger if _person_prefers_challenger(number[record.pair_id]) else champion
                return encode(HumanLabel(pair_id=record.pair_id, winner=winner, reviewer="ana", from_audit=True))

            # The audit sample's labels, and one label on a pair that was not drawn (left out, counted apart).
            labels = [label(r) for r in sampled] + [label(stray)]
            await produce_raw(kafka_bootstrap, settings.topics.name("labels"), labels, keyed=True)
            deadline = time.monotonic() + 60
            while True:
                snap = await _latest_snapshot(settings, 1)
                basis = snap.human_basis
                if basis is not None and basis.labels == len(sampled) and snap.unweighted_labels == 1:
                    break
                assert time.monotonic() < deadline, f"the labels never reached the human basis: {basis}"
                await asyncio.sleep(0.5)
            update = await _latest_gate(settings)
            code, text = await gate_status(settings, EXPERIMENT, basis="human")
            judge_code, judge_text = await gate_status(settings, EXPERIMENT, basis="judge")
    finally:
        server.stop()
    assert basis.pairs == len(finals)
    assert basis.pending == len(reviews)  # a review pair (a judge call timed out) is waiting for its label
    assert basis.expired == 0
    assert basis.judge_rate is not None
    assert basis.judge_rate > 0.8
    # People prefer the challenger in 30% of the pairs: the human basis says so, the judge does not.
    assert basis.rate is not None
    assert basis.rate < 0.6
    assert basis.high is not None
    assert basis.high < basis.judge_rate
    assert {s.stratum for s in basis.strata} >= {"confident"}
    assert update.gate.decision == "promote", update.gate
    assert update.human is not None
    assert update.human.decision in ("continue", "reject"), update.human
    assert update.human.labels == len(sampled)
    assert code in (1, 2), text
    assert "human basis" in text
    assert f"human labels used {len(sampled)}, pending {len(reviews)}, expired 0" in text
    if code == 2:
        assert "continue:" in text
        assert "human labels" in text
    assert "the judge basis says promote" in text or code == 1
    assert judge_code == 0, judge_text
    assert "judge basis (the judge's opinion, not people's)" in judge_text
