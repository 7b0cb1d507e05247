"""``pairjudge evaluate`` with a priced HTTP judge (a real OpenAI-compatible server on 127.0.0.1) and an hourly
spending cap small enough to trip: the pairs past it are not sent to the judge and end as the cap's action says."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from pairjudge.agents.untrusted import unmark
from pairjudge.streams.cli import app
from tests.fixtures.fake_judge_server import Action, FakeJudgeServer, RecordedRequest, fake_judge_server, reply
from tests.unit.factories import FIRST_OUTPUT, SECOND_OUTPUT, make_pair, tone_reply

__all__ = ["fake_judge_server"]

ANSWERED = "fake-model-2024-01-01"  # what the fake server says answered
#: 1,000 prompt tokens at 2 USD and 250 completion tokens at 8 USD per million: 0.004 USD a call, 0.008 a pair.
PRICES = {ANSWERED: {"input_per_mtok": 2.0, "output_per_mtok": 8.0}}


def consistent(request: RecordedRequest) -> Action:
    """Both orders prefer the pair's first candidate, wherever it is shown: a verdict in two calls."""
    user = unmark(request.json()["messages"][-1]["content"])  # the outputs are datamarked (Policy.datamark)
    first_shown_first = user.index(FIRST_OUTPUT) < user.index(SECOND_OUTPUT)
    return reply(tone_reply("A" if first_shown_first else "B"), prompt_tokens=1000, completion_tokens=250)


def _env(server: FakeJudgeServer, **policy: str) -> dict[str, str]:
    env = {
        "PAIRJUDGE_JUDGE__KIND": "openai",
        "PAIRJUDGE_JUDGE__BASE_URL": server.base_url,
        "PAIRJUDGE_JUDGE__MODEL": "fake-model",
        "PAIRJUDGE_JUDGE__RESPONSE_FORMAT": "none",
        "PAIRJUDGE_JUDGE__CACHE_ENABLED": "false",
        "PAIRJUDGE_JUDGE__PRICES": json.dumps(PRICES),
        # Two pairs' spend (0.016 USD) is at or over it; one pair's (0.008) is not.
        "PAIRJUDGE_POLICY__SPEND_HOURLY_CAP_USD": "0.01",
    }
    env.update({f"PAIRJUDGE_POLICY__{key.upper()}": value for key, value in policy.items()})
    return env


def _run(tmp_path: Path, env: dict[str, str]) -> tuple[int, str, dict[str, dict[str, object]]]:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(make_pair(pair_id=f"p{i}").model_dump_json() + "\n" for i in range(5)))
    out = tmp_path / "out.jsonl"
    # One pair at a time, so each pair's spend is counted before the next one meets the gate.
    result = CliRunner().invoke(app, ["evaluate", str(path), "--out", str(out), "--concurrency", "1"], env=env)
    rows = {r["pair_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    return result.exit_code, result.output, rows


def test_past_the_cap_evaluate_sends_no_request_and_the_pairs_go_to_review(
    fake_judge_server: FakeJudgeServer, tmp_path: Path
) -> None:
    fake_judge_server.set_responder(consistent)
    code, output, rows = _run(tmp_path, _env(fake_judge_server))
    assert code == 0, output  # held for a person, as the worker does: no pair failed
    outcomes = sorted((r["outcome"], r["reason"]) for r in rows.values())
    assert outcomes == [("review", "spend_capped")] * 3 + [("verdict", None)] * 2
    assert fake_judge_server.request_count == 4  # two pairs, two orderings each; nothing past the cap
    assert "3 pair(s) met a spending cap" in output


def test_the_sample_action_sets_the_unsampled_pairs_aside_and_fails_the_command(
    fake_judge_server: FakeJudgeServer, tmp_path: Path
) -> None:
    fake_judge_server.set_responder(consistent)
    code, output, rows = _run(tmp_path, _env(fake_judge_server, spend_action="sample", spend_sample_share="0"))
    assert code == 1, output  # pairs not judged fail the command, each named with its reason
    outcomes = sorted((r["outcome"], r["reason"]) for r in rows.values())
    assert outcomes == [("error", "spend_capped")] * 3 + [("verdict", None)] * 2
    assert fake_judge_server.request_count == 4
    # Counted by reason, in words with the code after them.
    assert "3 a spending cap was reached, so no judge was asked (spend_capped)" in " ".join(output.split())
