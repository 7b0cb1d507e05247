"""The Python API (``pairjudge.api``) with scripted judges: every outcome kind, files, concurrency, outages."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import aclosing
from pathlib import Path

import anyio
import pytest

from pairjudge.agents import JudgeRejected, JudgeUnavailable
from pairjudge.agents.judge import JudgeRequest
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.api import Evaluator, Failed, Rejected, Review, TieBreakPending, Verdict, compare
from pairjudge.schemas import TIE
from pairjudge.streams.api.results import PairResult, ResultsFile
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.judges.breaker import BreakerJudge, CircuitBreaker
from pairjudge.streams.judges.panel import JudgePanel
from pairjudge.streams.worker.pipeline import OUTAGE_RETRIES
from tests.unit.factories import FIRST_ID, SECOND_ID, make_pair, tiebreak_reply, tone_reply


def consistent(request: JudgeRequest) -> str:
    """Always the first candidate, in both orders; the tie-break too."""
    first_shown_as = "A" if request.order == "AB" else "B"
    if request.template == "tiebreak":
        return tiebreak_reply({}, winner=None) if first_shown_as == "A" else _all_b()
    return tone_reply(winner=first_shown_as, confidence=0.9)


def _all_b() -> str:
    return tiebreak_reply(
        {"safety": "B", "instruction_adherence": "B", "conciseness": "B", "readability": "B"}, winner="B"
    )


def position_a(request: JudgeRequest) -> str:
    """Whatever is shown first wins the primary: the two orders disagree (a flip), so a tie-break is needed."""
    if request.template == "tiebreak":
        return consistent(request)
    return tone_reply(winner="A", confidence=0.9)


async def test_one_pair_per_outcome_kind() -> None:
    pair = make_pair()
    async with Evaluator(judge=ScriptedJudge(consistent)) as ev:
        verdict = await ev.compare(pair)
        assert isinstance(verdict, Verdict)
        assert (verdict.kind, verdict.winner, verdict.event.decided_by) == ("verdict", FIRST_ID, "primary")
        assert verdict.confidence == pytest.approx(0.9)
        assert verdict.tiebreak_request is None
        # A dict and JSON text are validated into the same pair, and decided alike.
        assert (await ev.compare(pair.model_dump(mode="json"))).winner == FIRST_ID
        assert (await ev.compare(pair.model_dump_json())).winner == FIRST_ID

        rejected = await ev.compare(b'{"pair_id": "p-bad", "task": ')
        assert isinstance(rejected, Rejected)
        assert (rejected.kind, rejected.reason, rejected.pair_id, rejected.pair) == (
            "rejected",
            "malformed_json",
            "p-bad",
            None,
        )
        # Nothing is lost: the dead letter keeps the original bytes.
        assert rejected.event.original == b'{"pair_id": "p-bad", "task": '
        oversized = await ev.compare(make_pair(outputs=("x" * 200_000, "short")))
        assert (oversized.kind, oversized.reason) == ("rejected", "oversized_output")

    async with Evaluator(judge=ScriptedJudge(position_a)) as ev:
        broken = await ev.compare(pair)
        assert isinstance(broken, Verdict)
        assert (broken.winner, broken.event.decided_by, broken.reason) == (
            FIRST_ID,
            "tiebreak",
            "position_inconsistent",
        )
        assert broken.tiebreak_request is not None
        # The primary orderings are those the tie-break request carried; the tie-break's are extra.
        assert len(broken.primary_orderings) == 2
        assert len(broken.event.orderings) == 4
        pending = await ev.compare(pair, tiebreak=False)
        assert isinstance(pending, TieBreakPending)
        assert (pending.kind, pending.reason, pending.winner) == ("tiebreak", "position_inconsistent", None)

    async with Evaluator(Settings(policy={"tiebreak_enabled": False}), judge=ScriptedJudge(position_a)) as ev:
        review = await ev.compare(pair)
        assert isinstance(review, Review)
        assert (review.kind, review.reason, review.winner, review.confidence) == (
            "review",
            "tiebreak_disabled",
            None,
            None,
        )

    refusing = ScriptedJudge(lambda r: JudgeRejected("401 invalid key", status=401))
    async with Evaluator(judge=refusing) as ev:
        failed = await ev.compare(pair)
        assert isinstance(failed, Failed)
        assert (failed.kind, failed.reason, failed.pair_id) == ("failed", "judge_rejected", pair.pair_id)
        assert failed.pair == pair


async def test_compare_with_the_configured_judge_needs_no_evaluator() -> None:
    # The default settings judge with the offline judge: a real stack, built and closed by compare.
    same = make_pair(outputs=("Same text.", "Same text."))
    outcome = await compare(same)
    assert (outcome.kind, outcome.winner) == ("verdict", TIE)


def _with_breaker(judge: ScriptedJudge) -> JudgePanel:
    """The judge behind a breaker that never opens here, as the configured stacks are."""
    breaker = CircuitBreaker(failure_threshold=1_000)
    wrapped = BreakerJudge(judge, breaker)
    return JudgePanel(primary=(wrapped,), tiebreak=wrapped, breakers=(breaker,))


async def test_a_judge_outage_is_retried_then_escalated_not_a_tie() -> None:
    pair = make_pair()
    # A breaker that never opens in this test: the pipeline retries OUTAGE_RETRIES more times, then escalates.
    down = ScriptedJudge(lambda r: JudgeUnavailable("connection refused"))
    breaker = CircuitBreaker(failure_threshold=1_000)
    panel = JudgePanel(
        primary=(BreakerJudge(down, breaker),), tiebreak=BreakerJudge(down, breaker), breakers=(breaker,)
    )
    async with Evaluator(panel=panel) as ev:
        outcome = await ev.compare(pair)
    assert (outcome.kind, outcome.reason, outcome.winner) == ("review", "judge_unavailable", None)
    assert down.calls == 2 * (1 + OUTAGE_RETRIES)  # both orders, each attempt

    # Down for the first attempt only: the retry decides it.
    calls = {"n": 0}

    def flaky(request: JudgeRequest) -> str | Exception:
        calls["n"] += 1
        return JudgeUnavailable("503") if calls["n"] <= 2 else consistent(request)

    back = ScriptedJudge(flaky)
    breaker = CircuitBreaker(failure_threshold=1_000)
    panel = JudgePanel(
        primary=(BreakerJudge(back, breaker),), tiebreak=BreakerJudge(back, breaker), breakers=(breaker,)
    )
    async with Evaluator(panel=panel) as ev:
        outcome = await ev.compare(pair)
    assert (outcome.kind, outcome.winner) == ("verdict", FIRST_ID)
    assert back.calls == 4


async def test_many_pairs_run_concurrently_up_to_the_bound() -> None:
    in_flight = 0
    peak = 0
    release = anyio.Event()

    async def hold(request: JudgeRequest) -> None:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if peak >= 6:  # three pairs, both orders each: the bound reached
            release.set()
        with anyio.fail_after(5):
            await release.wait()
        in_flight -= 1

    pairs = [make_pair(pair_id=f"p{i}") for i in range(7)]
    async with Evaluator(judge=ScriptedJudge(consistent, on_request=hold)) as ev:
        outcomes = [o async for o in ev.compare_many(pairs, concurrency=3)]
    assert sorted(o.pair_id or "" for o in outcomes) == sorted(p.pair_id for p in pairs)
    assert {o.winner for o in outcomes} == {FIRST_ID}
    assert peak == 6  # never more than 3 pairs (2 calls each) at once


async def test_a_file_is_written_as_decided_and_resumed(tmp_path: Path) -> None:
    pairs = [make_pair(pair_id=f"p{i}") for i in range(5)]
    source = tmp_path / "pairs.jsonl"
    source.write_text("".join(p.model_dump_json() + "\n" for p in pairs) + "not json at all\n")
    out = tmp_path / "out.jsonl"
    judge = ScriptedJudge(consistent)
    async with Evaluator(judge=judge) as ev:
        seen = 0
        async with aclosing(aiter(ev.compare_file(source, out=out, concurrency=2))) as outcomes:
            async for _ in outcomes:
                seen += 1
                # Each outcome's row is on disk by the time it is yielded.
                assert len(out.read_text().splitlines()) == seen
                if seen == 3:
                    break  # stop early: the rest are left for a resume
    assert len(out.read_text().splitlines()) == 3  # pairs still in flight were cancelled, not written

    # A run killed mid-write leaves a torn last line: it is dropped and the pair judged again.
    with out.open("a") as fh:
        fh.write('{"pair_id": "p4", "outc')
    async with Evaluator(judge=ScriptedJudge(consistent)) as ev:
        run = ev.compare_file(source, out=out, concurrency=2)
        await run.prepare()
        assert (run.total, run.already, run.dropped_bytes) == (6, 3, len('{"pair_id": "p4", "outc'))
        rest = [o async for o in run]
    assert len(rest) == 3
    assert {o.kind for o in rest} >= {"rejected"}
    rows = [PairResult.from_json(line) for line in out.read_text().splitlines()]
    assert sorted(r.key for r in rows) == sorted({r.key for r in rows})  # each pair exactly once
    assert len(rows) == 6
    assert [r.pair_id for r in run.results()] == [*(p.pair_id for p in pairs), "?"]
    assert run.results()[-1].outcome == "rejected"


def test_a_line_that_is_not_a_row_is_a_clear_error(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text('{"pair_id": "p1", "outcome": "verdict"}\n[1, 2]\n')
    with pytest.raises(ValueError, match="line 2: not a pairjudge evaluate result"):
        ResultsFile.load(out)
    assert out.read_text().endswith("[1, 2]\n")  # nothing truncated or rewritten


def test_importing_the_api_does_not_import_faust() -> None:
    code = "import sys, pairjudge.api; print(sorted(m for m in sys.modules if m.split('.')[0] in ('faust', 'mode')))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_rows_round_trip_through_json() -> None:
    row = PairResult(
        pair_id="p",
        outcome="verdict",
        winner=SECOND_ID,
        candidate_ids=(FIRST_ID, SECOND_ID),
        primary_winners=((SECOND_ID, SECOND_ID),),
        raw_winners=("A", "B"),
        lengths=(3, 4),
        input_sha256="0" * 64,
    )
    assert PairResult.from_json(row.to_json()) == row
    assert json.loads(row.to_json())["candidate_ids"] == [FIRST_ID, SECOND_ID]


async def test_a_pair_object_is_decided_without_decoding_any_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """``compare`` calls the worker's typed stage (``Pipeline.decide``) with the pair itself, and hands back the
    events the stages built: no stage input and no outcome is parsed from bytes on the way."""
    from pairjudge.schemas import PairVerdict, TieBreakRequest
    from pairjudge.streams.api import evaluator as evaluator_module
    from pairjudge.streams.worker import pipeline as pipeline_module

    def no_decoding(*args: object, **kwargs: object) -> None:
        raise AssertionError("decoded bytes")

    monkeypatch.setattr(pipeline_module, "decode", no_decoding)
    monkeypatch.setattr(evaluator_module, "decode", no_decoding)
    for model in (PairVerdict, TieBreakRequest):
        monkeypatch.setattr(model, "model_validate_json", no_decoding)
    async with Evaluator(judge=ScriptedJudge(position_a)) as ev:
        outcome = await ev.compare(make_pair())  # a flip: the primary stage, then the tie-break stage
    assert isinstance(outcome, Verdict)
    assert (outcome.event.decided_by, outcome.reason) == ("tiebreak", "position_inconsistent")
