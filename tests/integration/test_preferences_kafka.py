"""``pairjudge export preferences`` on real Kafka, as a training pipeline's nightly job would run it.

A scripted judge biased to the challenger decides every pair (the human-basis scenario of test_scores_kafka.py);
half the verdicts are drawn for a person's check, and people, who mostly prefer the champion, label some of them
through the labels topic. The export runs as its own process: the rows load with ``datasets`` and carry the
provenance columns, people's labels override the judge, checked verdicts still waiting for a label are held back.
More labels and more pairs come; the second run writes only what is new, and the union holds each pair once.
``--people-only`` writes exactly the labelled pairs.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import datasets
import pytest

from pairjudge.agents.preferences import COLUMNS
from pairjudge.schemas import CandidatePair, HumanLabel
from pairjudge.schemas.audit import DecisionRecord
from pairjudge.streams.kafka.codecs import encode
from pairjudge_dev.slow_judge_server import Behaviour, JudgeServer
from pairjudge_dev.workers import final_decision_records, kafka_run, produce_raw, running_worker
from tests.integration.test_scores_kafka import EXPERIMENT, _pair, _person_prefers_challenger

pytestmark = [pytest.mark.kafka]
ROOT = Path(__file__).resolve().parents[2]


async def _export(bootstrap: str, prefix: str, out: Path, *options: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pairjudge.streams.cli", "export", "preferences", "--out", str(out)]
    argv += ["--bootstrap", bootstrap, "--settle", "2", *options]
    env = {**os.environ, "PAIRJUDGE_TOPICS__PREFIX": prefix}
    done = await asyncio.to_thread(subprocess.run, argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_the_export_of_a_biased_judges_run_with_labels(kafka_bootstrap: str, tmp_path: Path) -> None:
    server = JudgeServer(Behaviour()).start()
    try:
        settings = await kafka_run(
            kafka_bootstrap,
            tmp_path,
            "prefs",
            judge={"kind": "openai", "base_url": server.base_url, "model": "sha-judge", "cache_enabled": False},
            policy={"audit_share": 0.5, "audit_uncertain_share": 0.5},
        )
        prefix = settings.topics.prefix
        pairs = [_pair(prefix, i, challenger_wins=i % 10 != 0) for i in range(24)]
        more = [_pair(prefix, i, challenger_wins=True) for i in range(24, 30)]
        number = {p.pair_id: i for i, p in enumerate(pairs + more)}
        out, people = tmp_path / "prefs.jsonl", tmp_path / "people.jsonl"

        def label(record: DecisionRecord) -> HumanLabel:
            champion, challenger = record.candidates  # the factory's first candidate is the champion
            winner = challenger if _person_prefers_challenger(number[record.pair_id]) else champion
            return HumanLabel(pair_id=record.pair_id, winner=winner, reviewer="ana", from_audit=True)

        async def send(kind: str, events: list[CandidatePair] | list[HumanLabel]) -> None:
            await produce_raw(kafka_bootstrap, settings.topics.name(kind), [encode(e) for e in events], keyed=True)

        with running_worker(settings, tmp_path / "worker.log"):
            await send("pairs", pairs)
            finals = await final_decision_records(settings, {p.pair_id for p in pairs}, timeout=90)
            sampled = sorted((r for r in finals.values() if r.audit_sample), key=lambda r: r.pair_id)
            assert len(sampled) >= 4, "too few verdicts drawn for a check at a share of 0.5"
            first_labels = [label(r) for r in sampled[: len(sampled) // 2]]
            await send("labels", first_labels)
            await asyncio.sleep(3)  # past --settle: every verdict's check is on the topic
            first = await _export(kafka_bootstrap, prefix, out)

            # Between the runs: the other checks are labelled, and more pairs are judged.
            later_labels = [label(r) for r in sampled[len(sampled) // 2 :]]
            await send("labels", later_labels)
            await send("pairs", more)
            finals |= await final_decision_records(settings, {p.pair_id for p in more}, timeout=90)
            await asyncio.sleep(3)
            second = await _export(kafka_bootstrap, prefix, out)
            third = await _export(kafka_bootstrap, prefix, out)
            await _export(kafka_bootstrap, prefix, people, "--people-only")
    finally:
        server.stop()

    labels = {lab.pair_id: lab.winner for lab in first_labels + later_labels}
    reviews = {pid for pid, r in finals.items() if r.outcome == "review"}
    new_checks = {pid for pid in number if pid not in labels and finals[pid].audit_sample}
    rows = _rows(out)
    ids = [row["pair_id"] for row in rows]
    # Every pair once; reviews (a judge call timed out on a loaded machine) wait for a person and are not written.
    assert len(ids) == len(set(ids))
    assert set(ids) == set(number) - reviews - new_checks
    assert "wrote 0 new rows" in third.stdout
    assert f"{len(sampled) - len(first_labels)} drawn for a person's check, waiting for the label" in first.stdout
    assert "new row" in second.stdout

    data = datasets.load_dataset("json", data_files=str(out), split="train")
    assert data.column_names == list(COLUMNS)
    for row in data:
        pid = row["pair_id"]
        assert row["experiment"] == EXPERIMENT
        assert row["judge_model"] == "sha-judge"
        assert row["chosen_source"]["role"] in ("champion", "challenger")
        assert {row["chosen_source"]["role"], row["rejected_source"]["role"]} == {"champion", "challenger"}
        assert isinstance(row["prompt"], str)
        if pid in labels:  # people's label overrides the judge
            assert (row["decided_by"], row["human_label"], row["chosen_candidate"]) == (
                "person",
                labels[pid],
                labels[pid],
            )
            assert row["judge_winner"] is not None
        else:
            assert row["decided_by"] in ("judge", "tie-break", "rule")
            assert row["chosen_candidate"] == row["judge_winner"]
            assert row["human_label"] is None
    overturned = {r["pair_id"] for r in data if r["human_label"] is not None and r["human_label"] != r["judge_winner"]}
    assert overturned == {pid for pid in labels if labels[pid] != finals[pid].judge_winner}
    assert overturned, "people prefer the champion mostly: some labels must overturn the biased judge"

    people_data = datasets.load_dataset("json", data_files=str(people), split="train")
    assert sorted(people_data["pair_id"]) == sorted(labels)
    assert set(people_data["decided_by"]) == {"person"}
