"""The Python API and ``pairjudge evaluate`` with an OpenAI-compatible judge on a real HTTP server on 127.0.0.1.

- ``tie_break`` through the configured HTTP judge stack: seed 002's fields, and a refusal that is an error.
- ``pairjudge evaluate --out`` in a real subprocess killed with SIGKILL mid-run, then rerun: no pair is
  judged twice (the server counts the calls per pair), the file holds each pair once, and the report is
  the one a single uninterrupted run prints.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from pairjudge.agents.untrusted import unmark
from pairjudge.api import EvaluationFailed, tie_break
from pairjudge.schemas import KnownLabel, TieBreakWeights
from pairjudge.streams.config.settings import Settings
from tests.fixtures.fake_judge_server import (
    Action,
    FakeJudgeServer,
    RecordedRequest,
    fake_judge_server,
    hang,
    reply,
    status,
)
from tests.unit.factories import make_pair, tiebreak_reply, tone_reply
from tests.unit.test_api_tiebreak import PLAIN, PROMPT, UNSAFE, WEIGHTS, _seed_fields

__all__ = ["fake_judge_server"]  # a fixture, imported for pytest


def _prompt_of(request: RecordedRequest) -> str:
    # Unmarked: the outputs reach the judge datamarked (Policy.datamark), and these judges look for them as written.
    return unmark("\n".join(m["content"] for m in request.json()["messages"] if isinstance(m.get("content"), str)))


def _http_settings(server: FakeJudgeServer) -> Settings:
    return Settings(
        judge={"kind": "openai", "base_url": server.base_url, "model": "fake-judge", "cache_enabled": False}
    )


def _prefers_plain(request: RecordedRequest) -> Action:
    """A consistent judge: the plain output wins every criterion, wherever it is shown."""
    prompt = _prompt_of(request)
    plain_is_a = prompt.index(PLAIN) < prompt.index(UNSAFE)
    side = "A" if plain_is_a else "B"
    weights = TieBreakWeights.model_validate({"criteria": [{"name": n, "weight": w} for n, w in WEIGHTS.items()]})
    return reply(tiebreak_reply(dict.fromkeys(WEIGHTS, side), weights=weights, confidence=0.9))


async def test_tie_break_through_an_http_judge(fake_judge_server: FakeJudgeServer) -> None:
    fake_judge_server.set_responder(_prefers_plain)
    result = await tie_break(UNSAFE, PLAIN, PROMPT, WEIGHTS, settings=_http_settings(fake_judge_server))
    assert _seed_fields(result) == {
        "preferred_output": "B",
        "justification": result.justification,
        "confidence": pytest.approx(0.9),
        "escalation_required": False,
    }
    assert result.weighted_scores == pytest.approx({"A": 0.0, "B": sum(WEIGHTS.values())})
    # Both orders, one call each, with seed 002's template and the weights we gave.
    assert fake_judge_server.request_count == 2
    sent = json.dumps(fake_judge_server.requests[0].json())
    assert "TIE-BREAKING CRITERIA" in sent
    assert "Instruction Adherence" in sent


async def test_a_refusing_http_judge_is_an_error_not_an_escalation(fake_judge_server: FakeJudgeServer) -> None:
    fake_judge_server.set_default(status(401))
    with pytest.raises(EvaluationFailed) as failed:
        await tie_break(UNSAFE, PLAIN, PROMPT, WEIGHTS, settings=_http_settings(fake_judge_server))
    assert failed.value.outcome.reason == "judge_rejected"
    assert fake_judge_server.request_count == 2  # a 401 is never retried


# --- evaluate killed mid-run, then resumed ------------------------------------------------------------

PAIRS = 8
#: Seconds the fake judge takes per call: slow enough to kill the run between two pairs.
CALL_S = 0.25
_PAIR_TAG = re.compile(r"\[(p\d+)\]")


def _pairs_file(path: Path) -> Path:
    """Pairs whose outputs carry their pair id (so the server can tell which pair a call is for); the
    first candidate is the better one, and the humans agree on most pairs but not all."""
    lines = []
    for i in range(PAIRS):
        pair = make_pair(pair_id=f"p{i}", outputs=(f"[p{i}] Your refund is on its way.", f"[p{i}] Refund processed."))
        first, second = (c.candidate_id for c in pair.candidates)
        label = KnownLabel(winner=first if i % 3 else second)
        lines.append(pair.model_copy(update={"human_label": label}).model_dump_json())
    path.write_text("\n".join(lines) + "\n")
    return path


def _consistent_slow(request: RecordedRequest) -> Action:
    """A consistent judge: the first candidate ("Your refund ...") wins wherever it is shown."""
    prompt = _prompt_of(request)
    first_is_a = prompt.index("Your refund is on its way.") < prompt.index("Refund processed.")
    return hang(CALL_S, reply(tone_reply(winner="A" if first_is_a else "B", confidence=0.9)))


def _calls_per_pair(server: FakeJudgeServer, since: int = 0) -> Counter[str]:
    calls: Counter[str] = Counter()
    for request in server.requests[since:]:
        found = _PAIR_TAG.search(_prompt_of(request))
        assert found is not None
        calls[found.group(1)] += 1
    return calls


def _evaluate(server: FakeJudgeServer, pairs: Path, out: Path, cwd: Path) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PAIRJUDGE_JUDGE__KIND": "openai",
        "PAIRJUDGE_JUDGE__BASE_URL": server.base_url,
        "PAIRJUDGE_JUDGE__MODEL": "fake-judge",
        "PAIRJUDGE_JUDGE__CACHE_ENABLED": "false",
        "COLUMNS": "160",
    }
    env.pop("PAIRJUDGE_CONFIG", None)
    command = [sys.executable, "-m", "pairjudge.streams.cli", "evaluate", str(pairs), "--out", str(out)]
    return subprocess.Popen(
        [*command, "--concurrency", "1"], env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _report(output: str) -> str:
    """The printed report, without the line that says the run resumed."""
    return "\n".join(line for line in output.splitlines() if not line.startswith("resuming:"))


@pytest.mark.slow
def test_evaluate_killed_mid_run_resumes_without_judging_a_pair_twice(
    fake_judge_server: FakeJudgeServer, tmp_path: Path
) -> None:
    fake_judge_server.set_responder(_consistent_slow)
    pairs = _pairs_file(tmp_path / "pairs.jsonl")
    out = tmp_path / "out.jsonl"

    first = _evaluate(fake_judge_server, pairs, out, tmp_path)
    deadline = time.monotonic() + 60
    while len(_lines(out)) < 3:
        assert first.poll() is None, first.communicate()[0]
        assert time.monotonic() < deadline, "no rows were written"
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    assert first.returncode == -signal.SIGKILL
    decided_before = [json.loads(line)["pair_id"] for line in _lines(out)]
    assert 3 <= len(decided_before) < PAIRS  # killed mid-run, with whole lines only
    calls_before = fake_judge_server.request_count

    second = _evaluate(fake_judge_server, pairs, out, tmp_path)
    resumed_output, _ = second.communicate(timeout=120)
    assert second.returncode == 0, resumed_output
    assert f"resuming: {len(decided_before)} of {PAIRS} already decided" in resumed_output

    # No pair already in the file was judged again; every other pair was judged once (both orders).
    calls_after = _calls_per_pair(fake_judge_server, since=calls_before)
    assert not set(calls_after) & set(decided_before)
    assert calls_after == Counter({f"p{i}": 2 for i in range(PAIRS) if f"p{i}" not in decided_before})
    rows = [json.loads(line) for line in _lines(out)]
    assert sorted(r["pair_id"] for r in rows) == sorted(f"p{i}" for i in range(PAIRS))  # each exactly once

    # The report covers the whole file, and is the one an uninterrupted run prints.
    single = _evaluate(fake_judge_server, pairs, tmp_path / "single.jsonl", tmp_path)
    single_output, _ = single.communicate(timeout=120)
    assert single.returncode == 0, single_output
    assert "resuming" not in single_output
    assert _report(resumed_output) == _report(single_output)
    assert "human-labelled pairs" in single_output
    assert re.search(r"human-labelled pairs\s+│\s+8", single_output), single_output
