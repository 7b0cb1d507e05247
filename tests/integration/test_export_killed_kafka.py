"""``pairjudge export preferences`` and ``export backtest`` killed with SIGKILL at seeded moments, then run again.

A few hundred decided pairs (with people's labels on some) are put on real Kafka topics as a worker would have
published them. Each export runs as its own process, first once uninterrupted (the reference), then again into
a fresh output under ``tests.integration.kill_switch``, which kills it at a seeded point of its writing (any
prefix of a row, between the rows and the state file, between writing a file and renaming it), and once killed
from outside at a seeded moment of its run (mostly while it reads the topics). After every kill the files must be
something a rerun can continue from; the last, uninterrupted rerun's output must equal the reference: every pair
once, none missing, no torn line.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import pytest

from pairjudge.schemas import CandidatePair, HumanLabel
from pairjudge.schemas.events import JudgeInfo, OrderingResult, PairVerdict
from pairjudge.schemas.pair import PairMetadata
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.codecs import encode
from pairjudge_dev.workers import kafka_run, produce_raw
from tests.unit.factories import FIRST_ID, SECOND_ID, make_pair

pytestmark = [pytest.mark.kafka]
ROOT = Path(__file__).resolve().parents[2]
PAIRS = 300
JUDGE = JudgeInfo(provider="openai", model="sha-judge", version="2026-11", prompt_template_hash="abc123")
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _ordering(order: Literal["AB", "BA"], winner: str, confidence: float) -> OrderingResult:
    a, b = (FIRST_ID, SECOND_ID) if order == "AB" else (SECOND_ID, FIRST_ID)
    return OrderingResult(
        order_shown=order,
        swapped=order == "BA",
        shown_as_a=a,
        shown_as_b=b,
        valid=True,
        raw_winner="A" if winner == a else "B",
        mapped_winner=winner,
        confidence=confidence,
    )


def _history(prefix: str) -> tuple[list[CandidatePair], list[PairVerdict], list[HumanLabel]]:
    """Pairs decided by the primary in both orders; every fifth labelled by a person, who disagrees now and then."""
    rng = random.Random(41)
    pairs, verdicts, labels = [], [], []
    for i in range(PAIRS):
        pair_id = f"{prefix}-p{i:04d}"
        words = " ".join(rng.choice(["refund", "order", "thanks", "days", "credited", "sorry"]) for _ in range(60))
        pair = make_pair(
            pair_id=pair_id,
            outputs=(f"Champion reply {i}: {words}", f"Challenger reply {i}: {words[::-1]}"),
            metadata=PairMetadata(traffic="shadow", experiment_id="exp-killed"),
        )
        winner = SECOND_ID if rng.random() < 0.6 else FIRST_ID
        confidence = round(rng.uniform(0.6, 0.99), 3)
        verdicts.append(
            PairVerdict(
                pair_id=pair_id,
                winner=winner,
                winner_role="challenger" if winner == SECOND_ID else "champion",
                loser=FIRST_ID if winner == SECOND_ID else SECOND_ID,
                confidence=confidence,
                decided_by="primary",
                consistent=True,
                orderings=(_ordering("AB", winner, confidence), _ordering("BA", winner, confidence)),
                justification="clearer",
                rubric_kind="tone_style",
                judge=JUDGE,
                experiment_id="exp-killed",
                decided_at=T0 + timedelta(seconds=i),
            )
        )
        pairs.append(pair)
        if i % 5 == 0:
            person = winner if rng.random() < 0.7 else (FIRST_ID if winner == SECOND_ID else SECOND_ID)
            labels.append(HumanLabel(pair_id=pair_id, winner=person, reviewer="ana", labelled_at=T0 + timedelta(1)))
    return pairs, verdicts, labels


async def _put_history(bootstrap: str, tmp_path: Path, tag: str) -> Settings:
    settings = await kafka_run(bootstrap, tmp_path, tag)
    pairs, verdicts, labels = _history(settings.topics.prefix)
    for kind, events in (("pairs", pairs), ("verdicts", verdicts), ("labels", labels)):
        await produce_raw(bootstrap, settings.topics.name(kind), [encode(e) for e in events], keyed=True)
    return settings


def _run(
    settings: Settings, argv: list[str], *, budget: tuple[Path, int] | None = None, kill_after: float | None = None
) -> subprocess.CompletedProcess[str]:
    """One export process: uninterrupted, killed by its own writing (``budget``), or killed from here."""
    bootstrap = settings.kafka.bootstrap_servers
    entry = ["-m", "pairjudge.streams.cli"]
    if budget is not None:
        entry = ["-m", "tests.integration.kill_switch", str(budget[0]), str(budget[1])]
    env = {**os.environ, "PAIRJUDGE_TOPICS__PREFIX": settings.topics.prefix}
    command = [sys.executable, *entry, "export", *argv, "--bootstrap", bootstrap]
    if kill_after is None:
        return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as p:
        try:
            out, err = p.communicate(timeout=kill_after)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            out, err = p.communicate()
        return subprocess.CompletedProcess(command, p.returncode, out, err)


def _ended(done: subprocess.CompletedProcess[str]) -> None:
    """Finished, or killed: never an error exit (a rerun that refuses its own leftovers is the bug)."""
    assert done.returncode in (0, -signal.SIGKILL), done.stdout + done.stderr


def _whole_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of the complete lines; a torn tail (no newline yet) is what the next run must cut away."""
    if not path.exists():
        return []
    data = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in data[: data.rfind("\n") + 1].splitlines()]


async def test_a_preference_export_killed_while_writing_resumes_to_the_uninterrupted_output(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await _put_history(kafka_bootstrap, tmp_path, "killprefs")
    reference, out = tmp_path / "reference" / "prefs.jsonl", tmp_path / "killed" / "prefs.jsonl"
    options = ["--settle", "0", "--timeout", "60"]
    started = time.monotonic()
    done = await asyncio.to_thread(_run, settings, ["preferences", "--out", str(reference), *options])
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    expected = {row["pair_id"]: row for row in _whole_rows(reference)}
    assert len(expected) == PAIRS  # every pair decided, none waiting
    state_size = len(reference.with_name("prefs.jsonl.state.json").read_text())

    rng = random.Random(20261207)
    out.parent.mkdir()
    kills = 0
    for phase in ("rows", "rows", "state"):
        # A moment in what is left to write: inside the rows not yet whole in the file, or past them (the state
        # file and its rename).
        left = reference.stat().st_size - sum(len(json.dumps(r, ensure_ascii=False)) + 1 for r in _whole_rows(out))
        budget = rng.randint(0, left - 1) if phase == "rows" else left + rng.randint(0, state_size + 1)
        run = await asyncio.to_thread(
            _run, settings, ["preferences", "--out", str(out), *options], budget=(out.parent, budget)
        )
        _ended(run)
        kills += run.returncode != 0
        rows = _whole_rows(out)
        assert len({row["pair_id"] for row in rows}) == len(rows), "a pair written twice"
        state = out.with_name("prefs.jsonl.state.json")
        if state.exists():  # never half a state file: it is renamed into place whole
            assert set(json.loads(state.read_text())["written"]) <= {row["pair_id"] for row in rows}
    assert kills == 3, "every seeded budget lands inside the writing"
    timed = await asyncio.to_thread(
        _run, settings, ["preferences", "--out", str(out), *options], kill_after=rng.uniform(0.3, took)
    )
    _ended(timed)

    final = await asyncio.to_thread(_run, settings, ["preferences", "--out", str(out), *options])
    assert final.returncode == 0, final.stdout + final.stderr
    assert out.read_text(encoding="utf-8").endswith("\n")
    rows = _whole_rows(out)
    assert sorted(row["pair_id"] for row in rows) == sorted(expected), "a pair missing or written twice"
    assert all(row == expected[row["pair_id"]] for row in rows)


async def test_a_backtest_export_killed_while_writing_leaves_the_previous_file_whole(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await _put_history(kafka_bootstrap, tmp_path, "killbacktest")
    reference, out = tmp_path / "reference" / "history.jsonl", tmp_path / "killed" / "history.jsonl"
    reference.parent.mkdir()
    done = await asyncio.to_thread(_run, settings, ["backtest", str(reference), "--timeout", "60"])
    assert done.returncode == 0, done.stdout + done.stderr
    expected = reference.read_bytes()
    assert expected.count(b"\n") == PAIRS

    rng = random.Random(41)
    out.parent.mkdir()
    out.write_bytes(expected)  # last night's export: a killed run must not leave less than it
    kills = 0
    for _ in range(2):
        budget = rng.randint(0, len(expected))
        run = await asyncio.to_thread(
            _run, settings, ["backtest", str(out), "--timeout", "60"], budget=(out.parent, budget)
        )
        _ended(run)
        kills += run.returncode != 0
        assert out.read_bytes() == expected, "a killed export left a torn or short history where a whole one was"
    assert kills == 2
    final = await asyncio.to_thread(_run, settings, ["backtest", str(out), "--timeout", "60"])
    assert final.returncode == 0, final.stdout + final.stderr
    assert sorted(out.read_bytes().splitlines()) == sorted(expected.splitlines())
