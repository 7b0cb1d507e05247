"""The spending caps in the Python API and ``pairjudge evaluate`` (issue 36): applied as the worker applies them,
within this run's own spend per clock hour, or refused, saying why, where they cannot be honoured offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from pairjudge.agents.judge import JudgeRequest
from pairjudge.agents.sampling import still_sampled
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.api import Evaluator, Failed, Review, SpendCapUnsupported, Verdict
from pairjudge.schemas import PairMetadata
from pairjudge.streams.cli import app
from pairjudge.streams.cli.evaluate import run_evaluate
from pairjudge.streams.config.settings import Settings
from tests.unit.factories import make_pair, tone_reply

#: Each judge call costs this much: a pair (two orderings) costs twice it.
PER_CALL_USD = 0.3


def consistent(request: JudgeRequest) -> str:
    """Always the first candidate, in both orders: a verdict from the primary stage, two calls."""
    return tone_reply(winner="A" if request.order == "AB" else "B", confidence=0.9)


def priced() -> ScriptedJudge:
    return ScriptedJudge(consistent, model="priced-judge", cost_usd=PER_CALL_USD)


def capped(**policy: object) -> Settings:
    return Settings(policy={"spend_hourly_cap_usd": 0.5, **policy})


async def test_past_the_hourly_cap_the_evaluator_sends_pairs_to_review_without_a_judge_call() -> None:
    judge = priced()
    pairs = [make_pair(pair_id=f"pair-{i}") for i in range(4)]
    async with Evaluator(capped(), judge=judge) as ev:
        # One at a time: the first pair's 0.6 USD is counted before the next one meets the gate.
        outcomes = {o.pair_id: o async for o in ev.compare_many(pairs, concurrency=1)}
    assert isinstance(outcomes["pair-0"], Verdict)
    for pair_id in ("pair-1", "pair-2", "pair-3"):
        outcome = outcomes[pair_id]
        assert isinstance(outcome, Review)
        assert outcome.reason == "spend_capped"
    assert judge.calls == 2  # the first pair's two orderings, nothing past the cap


async def test_the_experiment_cap_holds_back_only_that_experiments_pairs() -> None:
    judge = priced()
    settings = Settings(policy={"spend_experiment_hourly_cap_usd": 0.5})
    exp_a = [make_pair(pair_id=f"a-{i}", metadata=PairMetadata(experiment_id="exp-a")) for i in range(2)]
    exp_b = [make_pair(pair_id="b-0", metadata=PairMetadata(experiment_id="exp-b"))]
    async with Evaluator(settings, judge=judge) as ev:
        outcomes = {o.pair_id: o.kind async for o in ev.compare_many([*exp_a, *exp_b], concurrency=1)}
    assert outcomes == {"a-0": "verdict", "a-1": "review", "b-0": "verdict"}


async def test_the_sample_action_judges_a_stable_share_and_sets_the_rest_aside_as_failed() -> None:
    judge = priced()
    pairs = [make_pair(pair_id=f"pair-{i:03d}") for i in range(30)]
    async with Evaluator(capped(spend_action="sample", spend_sample_share=0.25), judge=judge) as ev:
        outcomes = {o.pair_id: o async for o in ev.compare_many(pairs, concurrency=1)}
    # The first pair spends past the cap; from then on only the sampled share is judged.
    past_cap = [p.pair_id for p in pairs[1:]]
    for pair_id in past_cap:
        outcome = outcomes[pair_id]
        if still_sampled(pair_id, 0.25):
            assert isinstance(outcome, Verdict), pair_id
        else:
            assert isinstance(outcome, Failed), pair_id
            assert outcome.reason == "spend_capped"
            assert "spend_action 'sample'" in outcome.detail
    judged = 1 + sum(1 for p in past_cap if still_sampled(p, 0.25))
    assert 1 < judged < 30
    assert judge.calls == 2 * judged


async def test_the_queue_action_is_refused_offline_saying_why() -> None:
    with pytest.raises(SpendCapUnsupported, match="spend_action 'queue'") as refused:
        Evaluator(capped(spend_action="queue"), judge=priced())
    assert "review" in str(refused.value)
    assert "sample" in str(refused.value)
    # Without a cap the action never applies: nothing to refuse.
    async with Evaluator(Settings(policy={"spend_action": "queue"}), judge=priced()) as ev:
        assert (await ev.compare(make_pair())).kind == "verdict"


async def test_run_evaluate_reports_the_pairs_a_cap_held_back(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(make_pair(pair_id=f"p{i}").model_dump_json() + "\n" for i in range(3)))
    console = Console(file=None, record=True, width=200)
    report = await run_evaluate(
        capped(), path, out_path=tmp_path / "out.jsonl", console=console, judge=priced(), concurrency=1
    )
    rows = {r.pair_id: (r.outcome, r.reason) for r in report.results}
    assert sorted(rows.values()) == [("review", "spend_capped"), ("review", "spend_capped"), ("verdict", None)]
    assert not report.failed  # held for a person, as the worker does: not an error
    assert "2 pair(s) met a spending cap" in console.export_text()


def test_the_evaluate_command_refuses_a_queue_cap_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(make_pair().model_dump_json() + "\n")
    env = {"PAIRJUDGE_POLICY__SPEND_HOURLY_CAP_USD": "1", "PAIRJUDGE_POLICY__SPEND_ACTION": "queue"}
    result = CliRunner().invoke(app, ["evaluate", str(path), "--out", str(tmp_path / "o.jsonl")], env=env)
    assert result.exit_code == 2, result.output
    assert "spend_action 'queue'" in result.output
    assert not (tmp_path / "o.jsonl").exists()  # refused before judging anything
    # The same cap with an action an offline run can honour: the command runs.
    env["PAIRJUDGE_POLICY__SPEND_ACTION"] = "review"
    result = CliRunner().invoke(app, ["evaluate", str(path), "--out", str(tmp_path / "o.jsonl")], env=env)
    assert result.exit_code == 0, result.output
    # The offline judge is unpriced: the cap never trips.
    (row,) = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert row["reason"] != "spend_capped"
