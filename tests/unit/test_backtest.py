"""``pairjudge backtest``: recorded answers replayed through the core (agents.backtest), the history rows
(agents.backtest_history) and the command; the same figures as ``pairjudge evaluate`` judging the same pairs live."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from pairjudge.agents.backtest import (
    FIRST,
    SECOND,
    majority_label,
    recorded_judge,
    recorded_pair,
    replay,
    replay_all,
    summarise,
)
from pairjudge.agents.backtest_history import History, recorded_answer
from pairjudge.agents.core import judge_pair, resolve_tiebreak
from pairjudge.agents.judge import JudgeRequest
from pairjudge.agents.policy import Policy
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.agents.tiebreak import RECOMPUTED_KEY
from pairjudge.schemas import DEFAULT_TIEBREAK_WEIGHTS, KnownLabel
from pairjudge.schemas.backtest import RecordedAnswer, RecordedPair
from pairjudge.schemas.events import HumanLabel as LabelEvent
from pairjudge.schemas.events import OrderingResult, PairVerdict, ReviewRequest, TieBreakRequest
from pairjudge.streams.cli import app
from pairjudge.streams.cli.backtest import load_policy
from pairjudge.streams.cli.evaluate import run_evaluate
from pairjudge.streams.config.settings import Settings
from pairjudge_dev.replies import pairwise_reply, tiebreak_reply
from tests.unit.factories import make_pair, pairwise_rubric

EXAMPLE = Path(__file__).parents[2] / "docs" / "guides" / "backtest"


def _row(pair_id: str, ab: Any, ba: Any, *, labels: tuple[str, ...] = ("first",), tiebreak: Any = None) -> RecordedPair:
    data: dict[str, Any] = {"pair_id": pair_id, "labels": list(labels), "primary": {"ab": ab, "ba": ba}}
    if tiebreak is not None:
        data["tiebreak"] = {"ab": tiebreak[0], "ba": tiebreak[1]}
    return RecordedPair.model_validate(data)


def _answer(winner: str, confidence: float) -> dict[str, Any]:
    return {"winner": winner, "confidence": confidence}


async def test_a_higher_threshold_decides_fewer_pairs() -> None:
    # Both orders name the first output; the mean confidence runs from 0.60 to 0.99.
    rows = [_row(f"c{i}", _answer("A", 0.6 + i / 100), _answer("B", 0.6 + i / 100)) for i in range(40)]
    low = summarise("0.7", await replay_all(rows, Policy(primary_confidence_threshold=0.7)))
    high = summarise("0.9", await replay_all(rows, Policy(primary_confidence_threshold=0.9)))
    assert low.decided_primary == 30  # 0.70 .. 0.99
    assert high.decided_primary == 10  # 0.90 .. 0.99
    assert high.coverage is not None
    assert low.coverage is not None
    assert high.coverage < low.coverage
    # Below the threshold a consistent pair goes to the tie-break ("low_confidence"); none recorded here.
    assert high.tiebreak_unrecorded == 30


async def test_a_flip_goes_to_the_tiebreak_or_to_people_as_the_policy_says() -> None:
    # AB names A (the first output), BA names A (the second output, shown first): a flip.
    row = _row("flip-1", _answer("A", 0.9), _answer("A", 0.9), tiebreak=(_answer("A", 0.9), _answer("B", 0.9)))
    on = await replay(row, Policy())
    assert (on.settled_by, on.winner) == ("tiebreak", FIRST)
    off = await replay(row, Policy(tiebreak_enabled=False))
    assert (off.settled_by, off.reason, off.winner) == ("people", "tiebreak_disabled", None)
    # The tie-break's own orders disagreeing: people decide.
    split = _row("flip-2", _answer("A", 0.9), _answer("A", 0.9), tiebreak=(_answer("A", 0.9), _answer("A", 0.9)))
    assert (await replay(split, Policy())).reason == "tiebreak_disagreement"
    # A high-risk pair's flip below its review_below confidence goes to people before the tie-break.
    unsure = _row("flip-3", _answer("A", 0.8), _answer("A", 0.8), tiebreak=(_answer("A", 0.9), _answer("B", 0.9)))
    assert (await replay(unsure, Policy())).settled_by == "tiebreak"
    risky = RecordedPair.model_validate(unsure.model_dump() | {"risk_level": "high"})
    assert (await replay(risky, Policy())).reason == "risk_review"


async def test_agreement_by_stage_counts_people_and_leaves_ties_out() -> None:
    rows = [
        _row("a1", _answer("A", 0.9), _answer("B", 0.9), labels=("first",)),  # primary, right
        _row("a2", _answer("B", 0.9), _answer("A", 0.9), labels=("first", "first", "second")),  # primary, wrong
        _row("a3", _answer("A", 0.9), _answer("B", 0.9), labels=("tie",)),  # primary, a tie label
        _row("a4", _answer("A", 0.9), _answer("A", 0.9), tiebreak=(_answer("B", 0.9), _answer("A", 0.9))),
    ]
    s = summarise("p", await replay_all(rows, Policy(audit_share=0.0, audit_uncertain_share=0.0)))
    assert (s.agreement_primary.pairs, s.agreement_primary.labelled, s.agreement_primary.agreed) == (3, 2, 1)
    assert s.agreement_primary.tie_labels == 1
    assert (s.agreement_tiebreak.labelled, s.agreement_tiebreak.agreed) == (1, 0)  # the tie-break chose "second"
    assert s.agreement_auto.labelled == 3
    low, high = s.agreement_primary.interval or (0, 0)
    assert low < 0.5 < high
    assert (s.audit_copies, s.people_load) == (0, 0)
    assert majority_label(("first", "second")) == "tie"
    assert majority_label(()) is None


async def test_cost_is_each_order_once_and_unknown_stays_unknown() -> None:
    priced = {"winner": "A", "confidence": 0.9, "cost_usd": 0.01}
    row = _row("k1", priced, priced | {"winner": "B"})
    assert (await replay(row, Policy())).cost_usd == pytest.approx(0.02)
    # An unreadable reply is re-asked by the core; its recorded cost is charged once.
    bad = _row("k2", {"valid": False, "cost_usd": 0.01}, priced)
    replayed = await replay(bad, Policy())
    assert (replayed.settled_by, replayed.reason) == ("people", "ordering_invalid")
    assert replayed.cost_usd == pytest.approx(0.02)
    assert (await replay(_row("k3", _answer("A", 0.9), priced), Policy())).cost_usd is None


def _recorded(n: int, seed: int) -> list[RecordedPair]:
    rng = random.Random(seed)
    letters = ("A", "B", "tie")
    rows = []
    for i in range(n):
        answers = [{"winner": rng.choice(letters), "confidence": round(rng.uniform(0.4, 1.0), 2)} for _ in range(4)]
        if rng.random() < 0.05:
            answers[1] = {"valid": False}
        rows.append(
            _row(
                f"bt-{i:03d}",
                answers[0],
                answers[1],
                labels=(rng.choice(("first", "second", "tie")),),
                tiebreak=(answers[2], answers[3]),
            )
        )
    return rows


def _live_answer(rows: dict[str, RecordedPair]) -> Any:
    """A scripted judge answering the live pairs (found by the ids in their texts) with the recorded answers,
    written with the test factories' reply builders, not the backtest's."""

    def answer(request: JudgeRequest) -> str:
        text = " ".join(str(m.content) for m in request.messages)
        pair_id = re.search(r"recorded-(bt-\d+)", text)
        assert pair_id is not None
        row = rows[pair_id.group(1)]
        tiebreak = request.template == "tiebreak"
        orders = row.tiebreak if tiebreak else row.primary
        assert orders is not None
        recorded = orders.ab if request.order == "AB" else orders.ba
        if not recorded.valid or recorded.winner is None:
            return "no JSON here"
        if tiebreak:
            letter = "A" if recorded.winner == "tie" else recorded.winner
            winners = {c.name: letter for c in DEFAULT_TIEBREAK_WEIGHTS.criteria}
            return tiebreak_reply(winners, confidence=recorded.confidence or 1.0, escalation=recorded.winner == "tie")
        return pairwise_reply(
            "TIE" if recorded.winner == "tie" else recorded.winner, confidence=recorded.confidence or 1.0
        )

    return answer


async def test_backtest_gives_the_same_figures_as_evaluate_judging_the_same_pairs_live(tmp_path: Path) -> None:
    rows = _recorded(60, seed=41)
    by_id = {row.pair_id: row for row in rows}
    ids = {"first": "out-1", "second": "out-2"}
    live = []
    for row in rows:
        pair = make_pair(
            pair_id=row.pair_id,
            outputs=(f"recorded-{row.pair_id} first", f"recorded-{row.pair_id} second"),
            rubric=pairwise_rubric(),
        )
        first, second = (c.candidate_id for c in pair.candidates)
        label = {"first": first, "second": second, "tie": "TIE"}[row.labels[0]]
        live.append(pair.model_copy(update={"human_label": KnownLabel(winner=label)}))
        ids = {"first": first, "second": second}
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(p.model_dump_json() + "\n" for p in live))
    report = await run_evaluate(
        Settings(), path, out_path=None, console=Console(file=None), judge=ScriptedJudge(_live_answer(by_id))
    )
    replayed = {r.pair_id: r for r in await replay_all(rows, Settings().policy.to_policy())}
    relative = {ids["first"]: "first", ids["second"]: "second", "TIE": "tie"}
    kinds = {"primary": "verdict", "tiebreak": "verdict", "people": "review"}
    for result in report.results:
        mine = replayed[result.pair_id]
        assert kinds[mine.settled_by] == result.outcome, result.pair_id
        if result.outcome == "review":
            assert mine.reason == result.reason, result.pair_id
        assert mine.winner == (relative[result.winner] if result.winner else None), result.pair_id
        if result.outcome == "verdict":
            assert mine.settled_by == result.decided_by
    # Every kind of route occurs, so the comparison above is not vacuous.
    assert {r.settled_by for r in replayed.values()} == {"primary", "tiebreak", "people"}
    summary = summarise("default", list(replayed.values()))
    decided = [r for r in report.results if r.outcome == "verdict"]
    assert summary.coverage == pytest.approx(len(decided) / len(report.results))
    named = [r for r in decided if r.human != "TIE"]
    assert summary.agreement_auto.labelled == len(named)
    assert summary.agreement_auto.agreed == sum(1 for r in named if r.winner == r.human)


def test_policy_files_and_the_command(tmp_path: Path) -> None:
    assert not load_policy(EXAMPLE / "flips-to-people.toml").tiebreak_enabled
    assert load_policy(EXAMPLE / "stricter.toml").primary_confidence_threshold == 0.85
    bad = tmp_path / "bad.toml"
    bad.write_text("[policy]\nprimary_confidence_threshold = 2\n")
    runner = CliRunner()
    result = runner.invoke(app, ["backtest", str(EXAMPLE / "example.jsonl"), "-p", str(bad)])
    assert result.exit_code == 2
    result = runner.invoke(
        app,
        ["backtest", str(EXAMPLE / "example.jsonl"), "-p", str(EXAMPLE / "stricter.toml"), "--json"],
    )
    assert result.exit_code == 0, result.output
    (figures,) = json.loads(result.stdout)
    assert figures["pairs"] == 8
    assert figures["policy"] == "stricter.toml"
    assert (
        figures["decided_primary"] + figures["decided_tiebreak"] + figures["to_people"] + figures["tiebreak_unrecorded"]
        == 8
    )
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"pair_id": "x"}\n')
    result = runner.invoke(app, ["backtest", str(broken)])
    assert result.exit_code == 2
    assert "broken.jsonl:1" in result.output


async def test_history_rows_are_what_the_outcomes_carry() -> None:
    rows = [
        _row("h1", _answer("A", 0.9), _answer("B", 0.8)),
        _row("h2", _answer("A", 0.9), _answer("A", 0.9), tiebreak=(_answer("B", 0.7), _answer("A", 0.95))),
        _row("h3", _answer("A", 0.9), _answer("A", 0.9), tiebreak=(_answer("A", 0.9), _answer("A", 0.9))),
    ]
    history = History()
    policy = Policy(audit_share=1.0, audit_uncertain_share=1.0)
    for row in rows:
        decision = await judge_pair(recorded_pair(row), recorded_judge(row.primary), policy)
        outcome = decision.outcome
        if isinstance(outcome, TieBreakRequest):
            assert row.tiebreak is not None
            second = await resolve_tiebreak(outcome, recorded_judge(row.tiebreak, tiebreak=True), policy)
            outcome, copy = second.outcome, second.audit_copy
        else:
            copy = decision.audit_copy
        if isinstance(outcome, PairVerdict):
            history.add_verdict(outcome)
        else:
            assert isinstance(outcome, ReviewRequest)
            history.add_review(outcome)
        if copy is not None:
            history.add_review(copy)  # an audit copy adds nothing
        history.add_label(
            LabelEvent(pair_id=row.pair_id, winner=FIRST if row.pair_id != "h2" else SECOND, reviewer="r")
        )
    back = {r.pair_id: r for r in history.rows()}
    assert history.skipped == 0
    for row in rows:
        got = back[row.pair_id]
        assert (got.primary, got.tiebreak) == (row.primary, row.tiebreak)
    assert back["h2"].labels == ("second",)


def test_a_tiebreak_reply_against_its_own_criteria_is_unreadable_and_equal_criteria_a_tie() -> None:
    def ordering(raw: str, a: float, b: float) -> OrderingResult:
        return OrderingResult(
            order_shown="BA",
            swapped=True,
            shown_as_a="y",
            shown_as_b="x",
            valid=True,
            raw_winner=raw,
            mapped_winner="y" if raw == "A" else "x",
            confidence=0.9,
            dimension_scores={RECOMPUTED_KEY: {"y": a, "x": b}},
        )

    assert recorded_answer(ordering("A", 0.7, 0.3)) == RecordedAnswer(winner="A", confidence=0.9)
    assert not recorded_answer(ordering("B", 0.7, 0.3)).valid
    assert recorded_answer(ordering("A", 0.5, 0.5)).winner == "tie"
