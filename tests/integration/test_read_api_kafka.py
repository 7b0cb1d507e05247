"""An Argo Rollouts analysis (deploy/argo's AnalysisTemplate, run by ``tests.fixtures.argo``'s model of Argo's web
metric) against the read API of a real ``pairjudge review serve`` process, on real Kafka.

The scenario of test_scores_kafka's "biased to the challenger": a judge that prefers the output with the smaller
SHA-256 is given the challenger's side in 90% of the pairs, and people prefer the challenger in only a few; every
pair the judge decides is drawn for a label, and a reviewer labels each one in the review service's queue (signed
in, over HTTP, as a person would). The analysis on the judge's basis succeeds (the rollout would be promoted); on
people's it fails (the rollout aborts), and ``pairjudge gate`` says the same.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from html import unescape
from pathlib import Path

import datasets
import httpx
import pytest
import yaml

from pairjudge.agents.preferences import COLUMNS
from pairjudge.schemas.pair import CandidatePair
from pairjudge.streams.config.settings import Settings, environ_for
from pairjudge.streams.kafka.codecs import encode
from pairjudge.streams.review.auth import hash_password
from pairjudge.streams.review.tokens import new_token
from pairjudge.streams.scores.gate_reader import gate_status
from pairjudge_dev.slow_judge_server import Behaviour, JudgeServer
from pairjudge_dev.workers import final_decision_records, kafka_run, produce_raw, running_worker
from tests.fixtures.argo import run_analysis, template_args
from tests.fixtures.review import PASSWORDS, free_port, signed_in
from tests.integration.test_scores_kafka import EXPERIMENT, _pair

pytestmark = [pytest.mark.kafka]
TEMPLATE = Path(__file__).resolve().parents[2] / "deploy" / "argo" / "analysis-template.yaml"
PAIRS = 60


def _person_prefers_challenger(i: int) -> bool:
    return i % 10 == 1


def _start_review(settings: Settings, log_path: Path) -> subprocess.Popen[bytes]:
    """``pairjudge review serve`` in a process of its own, as deployed (its read API is what Argo would call)."""
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "pairjudge.streams.cli", "review", "serve"],
            env=environ_for(settings),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


async def _label_the_queue(
    url: str, challenger_outputs: dict[str, str], number: dict[str, int], at_least: int, timeout: float = 120
) -> set[str]:
    """Sign in as a reviewer and label every item the queue hands out, as the person of this scenario would:
    the challenger's output (told apart by its text: the page never says which side is which) only for the few
    pairs people prefer it on. Returns the pairs labelled once the queue is empty and ``at_least`` are done."""
    done: set[str] = set()
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(base_url=url, timeout=15) as client:
        while True:
            try:
                session = await signed_in(client, "ana")
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the review service never answered"
                await asyncio.sleep(0.5)
        while True:
            page = (await client.get("/", headers=session)).text
            item = re.search(r'data-item-id="(\d+)"', page)
            if item is None:
                if len(done) >= at_least:
                    return done
                assert time.monotonic() < deadline, f"only {len(done)} of {at_least} items reached the queue"
                await asyncio.sleep(0.5)
                continue
            pair_id = re.search(r"Pair <code>([^<]+)</code>", page)
            left = re.search(r'<pre class="text" id="output-a">([^<]*)</pre>', page)
            csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
            assert pair_id is not None
            assert left is not None
            assert csrf is not None
            pid = unescape(pair_id.group(1))
            left_is_challenger = unescape(left.group(1)) == challenger_outputs[pid]
            wants_challenger = _person_prefers_challenger(number[pid])
            choice = "left" if left_is_challenger == wants_challenger else "right"
            answer = await client.post(
                f"/items/{item.group(1)}/label",
                data={"choice": choice, "csrf_token": csrf.group(1)},
                headers={**session, "accept": "application/json"},
            )
            assert answer.status_code == 200, answer.text
            done.add(pid)


async def _no_wait(seconds: float) -> None:
    await asyncio.sleep(0)


async def _wait_for_labels(url: str, token: str, labels: int, timeout: float = 90) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(base_url=url, headers={"authorization": f"Bearer {token}"}) as client:
        while True:
            try:
                listed = (await client.get("/api/v1/experiments")).json()["experiments"]
            except httpx.TransportError:
                listed = []
            mine = [e for e in listed if e["experiment"] == EXPERIMENT]
            if mine and mine[0]["labels"] >= labels:
                return dict(mine[0])
            assert time.monotonic() < deadline, f"the labels never reached the read API: {mine}"
            await asyncio.sleep(0.5)


async def _export(settings: Settings, *argv: str) -> None:
    command = [sys.executable, "-m", "pairjudge.streams.cli", "export", "preferences", "--settle", "0", *argv]
    done = await asyncio.to_thread(
        subprocess.run, command, env=environ_for(settings), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _check_the_export(people: Path, everything: Path, pairs: list[CandidatePair], labelled: set[str]) -> None:
    """People-only holds exactly the pairs a person labelled in the queue, each chosen as the person chose (over
    the judge); the full export (Parquet) loads with ``datasets`` with every provenance column."""
    by_id = {p.pair_id: p for p in pairs}
    people_rows = datasets.load_dataset("json", data_files=str(people), split="train")
    assert people_rows.column_names == list(COLUMNS)
    assert sorted(people_rows["pair_id"]) == sorted(labelled)
    for row in people_rows:
        pair = by_id[row["pair_id"]]
        champion, challenger = (c.candidate_id for c in pair.candidates)
        wanted = challenger if _person_prefers_challenger(pairs.index(pair)) else champion
        assert (row["decided_by"], row["human_label"], row["chosen_candidate"]) == ("person", wanted, wanted), row
        assert row["judge_model"] == "sha-judge"
    overturned = [row for row in people_rows if row["judge_winner"] not in (None, row["chosen_candidate"])]
    assert overturned, "the biased judge was never overturned by a person: the scenario did not run"
    everything_rows = datasets.load_dataset("parquet", data_files=str(everything / "part-*.parquet"), split="train")
    assert everything_rows.column_names == list(COLUMNS)
    assert set(labelled) <= set(everything_rows["pair_id"]) <= set(by_id)
    assert len(set(everything_rows["pair_id"])) == everything_rows.num_rows
    decided_by = dict(zip(everything_rows["pair_id"], everything_rows["decided_by"], strict=True))
    assert {decided_by[pid] for pid in labelled} == {"person"}


async def test_an_argo_analysis_fails_on_peoples_basis_where_the_judges_would_promote(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    token, line = new_token("argo-rollouts", ("read",))
    tokens = tmp_path / "api-tokens"
    tokens.write_text(line + "\n")
    port = free_port()
    server = JudgeServer(Behaviour()).start()
    review: subprocess.Popen[bytes] | None = None
    try:
        settings = await kafka_run(
            kafka_bootstrap,
            tmp_path,
            "argo",
            judge={"kind": "openai", "base_url": server.base_url, "model": "sha-judge", "cache_enabled": False},
            policy={"audit_share": 1.0, "audit_uncertain_share": 1.0},
            scores={"snapshot_interval_s": 0.5, "bootstrap": 20, "human_min_labels": 20},
            # The kappa guard and the agreement guard would catch this judge too (60 labels that disagree with it),
            # and the judge basis would then refuse: both held back here, so the judge basis shows what it would
            # do on its own.
            audit={"min_labels": 1000, "agreement_guard": False},
            review={
                "port": port,
                "database_url": f"sqlite+aiosqlite:///{tmp_path}/review.db",
                "group_id": f"{tmp_path.name}-review",
                "api_tokens_file": str(tokens),
                "users": [{"name": "ana", "password_hash": hash_password(PASSWORDS["ana"]), "role": "reviewer"}],
                "session_secret": "s" * 48,
            },
        )
        prefix = settings.topics.prefix
        pairs = [_pair(prefix, i, challenger_wins=i % 10 != 0) for i in range(PAIRS)]
        number = {p.pair_id: i for i, p in enumerate(pairs)}
        review = _start_review(settings, tmp_path / "review.log")
        url = f"http://127.0.0.1:{port}"
        with running_worker(settings, tmp_path / "worker.log"):
            await produce_raw(kafka_bootstrap, settings.topics.name("pairs"), [encode(p) for p in pairs], keyed=True)
            finals = await final_decision_records(settings, set(number), timeout=90)
            sampled = [r for r in finals.values() if r.outcome == "verdict" and r.audit_sample]
            assert len(sampled) >= 40, f"only {len(sampled)} of {PAIRS} pairs drawn at an audit share of 1"

            challenger_outputs = {p.pair_id: p.candidates[1].output for p in pairs}
            labelled = await _label_the_queue(url, challenger_outputs, number, len(sampled))
            seen = await _wait_for_labels(url, token, len(sampled))
            template = yaml.safe_load(TEMPLATE.read_text())
            args = {"pairjudge-url": url, "api-token": token, "experiment": EXPERIMENT}
            judge = await run_analysis(template, template_args(template, {**args, "basis": "judge"}), wait=_no_wait)
            human = await run_analysis(template, template_args(template, args), wait=_no_wait)
            code, text = await gate_status(settings, EXPERIMENT, basis="human")
            judge_code, _ = await gate_status(settings, EXPERIMENT, basis="judge")
            # The same run's preference data, as a training pipeline would take it: people's pairs only, and all.
            people = tmp_path / "people.jsonl"
            everything = tmp_path / "preferences.parquet"
            for argv in (["--people-only", "--out", str(people)], ["--out", str(everything)]):
                await _export(settings, *argv)
    finally:
        server.stop()
        if review is not None:
            review.terminate()
            review.wait(30)
    assert len(labelled) >= len(sampled)
    _check_the_export(people, everything, pairs, labelled)
    assert seen["judge_decision"] == "promote", seen
    assert (judge.ended, judge.results) == ("Successful", ["promote"])
    assert (human.ended, human.results) == ("Failed", ["reject"]), (tmp_path / "review.log").read_text()[-2000:]
    # The token is never logged, even by a process that checked it on every request.
    assert token not in (tmp_path / "review.log").read_text()
    # pairjudge gate reads the gate topic, the API the scoreboard: the same answer.
    assert (code, judge_code) == (1, 0), text
