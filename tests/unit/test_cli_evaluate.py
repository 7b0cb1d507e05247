"""``pairjudge evaluate`` and ``pairjudge schemas export``: the core over a file, no Kafka."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from pairjudge.agents.judge import JudgeRequest
from pairjudge.agents.sampling import drawn, inclusion_probability
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.schemas import KnownLabel
from pairjudge.schemas.export import EXPORTED
from pairjudge.streams.cli import app
from pairjudge.streams.cli.evaluate import run_evaluate
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.judges.panel import JudgePanel
from tests.unit.factories import make_pair, tone_reply

SAMPLE = Path(__file__).resolve().parents[2] / "streams" / "data" / "sample_pairs.jsonl"


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


async def test_agreement_and_kappa_against_human_labels(tmp_path: Path) -> None:
    pairs = [make_pair(pair_id=f"p{i}") for i in range(4)]
    first, second = (c.candidate_id for c in pairs[0].candidates)
    humans = [first, first, first, second]
    labelled = [p.model_copy(update={"human_label": KnownLabel(winner=h)}) for p, h in zip(pairs, humans, strict=True)]
    path = _write(tmp_path / "set.jsonl", [p.model_dump_json() for p in labelled])

    def always_first(req: JudgeRequest) -> str:  # consistent across orders: always the first candidate
        return tone_reply(winner="A" if req.order == "AB" else "B", confidence=0.9)

    report = await run_evaluate(
        Settings(), path, out_path=tmp_path / "out.jsonl", console=Console(file=None), judge=ScriptedJudge(always_first)
    )
    assert [r.outcome for r in report.results] == ["verdict"] * 4
    assert report.agreement == pytest.approx(0.75)
    # Judge says "first" every time: p_e = 1 * 0.75, p_o = 0.75, so kappa = 0 (no better than chance).
    assert report.kappa == pytest.approx(0.0)
    # A judge that never varies has kappa 0 whatever the sample, so its large-sample interval is [0, 0].
    est = report.kappa_estimate
    assert est is not None
    assert (est.kappa, est.n) == (report.kappa, 4)
    assert (est.low, est.high) == pytest.approx((0.0, 0.0))
    assert report.flip_rate == pytest.approx(0.0)
    # Rows are appended as pairs are decided, so in no set order: match them by pair id.
    rows = {r["pair_id"]: r for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    assert [rows[p.pair_id]["human"] for p in pairs] == humans


async def test_a_flipping_judge_shows_in_the_flip_rate(tmp_path: Path) -> None:
    pair = make_pair()
    path = _write(tmp_path / "set.jsonl", [pair.model_dump_json()])
    report = await run_evaluate(
        Settings(policy={"tiebreak_enabled": False}),
        path,
        out_path=None,
        console=Console(file=None),
        judge=ScriptedJudge(lambda req: tone_reply(winner="A")),
    )
    assert report.flip_rate == pytest.approx(1.0)
    assert report.results[0].outcome == "review"
    assert report.results[0].reason == "tiebreak_disabled"


def test_evaluate_command_runs_the_offline_judge_over_the_sample_set(tmp_path: Path) -> None:
    sample = Path(__file__).resolve().parents[2] / "streams" / "data" / "sample_pairs.jsonl"
    result = CliRunner().invoke(app, ["evaluate", str(sample), "--out", str(tmp_path / "o.jsonl")])
    # The sample set carries four malformed pairs on purpose: a pair not judged fails the command.
    assert result.exit_code == 1, result.output
    rows = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    outcomes = {r["pair_id"]: r["outcome"] for r in rows}
    reasons = {r["pair_id"]: r["reason"] for r in rows}
    assert outcomes["bad-oversized-output"] == "rejected"
    assert reasons["bad-oversized-output"] == "oversized_output"
    assert "4 pair(s) not judged" in result.output
    # A line per pair: the winner in plain words and why, the reason code after its sentence.
    lines = {line.split()[0]: line for line in result.output.splitlines() if line.strip()}
    assert "not judged" in lines["bad-oversized-output"]
    assert "the limit is 20000 (oversized_output)" in lines["bad-oversized-output"]
    assert "champion" in lines["email-card-delay"]
    assert "the judge picked it in both orders" in lines["email-card-delay"]
    assert "needs review" in lines["docs-pagination"]
    assert outcomes["email-card-delay"] == "verdict"
    assert "Cohen's kappa" in result.output
    assert "95% interval" in result.output


def test_schemas_export_writes_valid_json_schemas(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["schemas", "export", str(tmp_path)])
    assert result.exit_code == 0, result.output
    written = {p.name: json.loads(p.read_text()) for p in tmp_path.glob("*.schema.json")}
    assert "CandidatePair.schema.json" in written
    assert "PairVerdict.schema.json" in written
    assert written["CandidatePair.schema.json"]["additionalProperties"] is False
    assert "schema_version" in written["PairVerdict.schema.json"]["properties"]
    # The scoreboard's contracts too, with the human basis beside the judge's.
    assert len(written) == len(EXPORTED)
    assert {"ScoreEvent.schema.json", "ScoreSnapshot.schema.json", "GateUpdate.schema.json"} <= set(written)
    assert "human_basis" in written["ScoreSnapshot.schema.json"]["properties"]
    assert "human" in written["GateUpdate.schema.json"]["properties"]


async def test_a_jury_is_scored_per_juror_for_flips(tmp_path: Path) -> None:
    pairs = [make_pair(pair_id=f"p{i}") for i in range(3)]
    path = _write(tmp_path / "set.jsonl", [p.model_dump_json() for p in pairs])

    def consistent(req: JudgeRequest) -> str:
        return tone_reply(winner="A" if req.order == "AB" else "B", confidence=0.9)

    jurors = (ScriptedJudge(consistent, model="j1"), ScriptedJudge(consistent, model="j2"))
    flipper = ScriptedJudge(lambda req: tone_reply(winner="A"), model="j3")  # position A always: flips
    report = await run_evaluate(
        Settings(),
        path,
        out_path=None,
        console=Console(file=None),
        panel=JudgePanel(primary=(*jurors, flipper), tiebreak=jurors[0]),
    )
    # Two of three jurors agree on every pair: verdicts, and one juror in three flipped.
    assert [r.outcome for r in report.results] == ["verdict"] * 3
    assert report.flip_rate == pytest.approx(1 / 3)


def test_evaluate_exits_zero_when_every_pair_is_judged_and_empty_outputs_are_not_errors(tmp_path: Path) -> None:
    pairs = [
        make_pair(pair_id="p-empty", outputs=("", "A real answer.")),
        make_pair(pair_id="p-same", outputs=("Same text.", "Same  text.")),
        make_pair(pair_id="p-judged"),
    ]
    path = _write(tmp_path / "in.jsonl", [p.model_dump_json() for p in pairs])
    result = CliRunner().invoke(app, ["evaluate", str(path), "--out", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 0, result.output
    rows = {r["pair_id"]: r for r in map(json.loads, (tmp_path / "o.jsonl").read_text().splitlines())}
    assert (rows["p-empty"]["outcome"], rows["p-empty"]["decided_by"]) == ("verdict", "rule")
    assert rows["p-empty"]["winner"] == pairs[0].candidates[1].candidate_id
    assert (rows["p-same"]["winner"], rows["p-same"]["decided_by"]) == ("TIE", "rule")


async def test_evaluate_shows_a_progress_bar_on_a_terminal_only(tmp_path: Path) -> None:
    path = _write(tmp_path / "in.jsonl", [make_pair(pair_id=f"p{i}").model_dump_json() for i in range(3)])
    for terminal in (True, False):
        console = Console(record=True, force_terminal=terminal, width=120)
        await run_evaluate(Settings(), path, out_path=None, console=console, baselines=False)
        text = console.export_text()
        assert ("judging" in text and "3/3" in text) == terminal, text


async def test_out_rows_carry_how_the_audit_sampled_each_decided_pair(tmp_path: Path) -> None:
    """A replay reads each row's sampling class, inclusion probability and draw instead of rebuilding them: they
    are the decision record's, and agree with the sampling design (``agents.sampling``) recomputed here."""
    sample = SAMPLE
    settings = Settings(policy={"audit_share": 0.3})
    out = tmp_path / "o.jsonl"
    await run_evaluate(settings, sample, out_path=out, console=Console(file=None), baselines=False)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    policy = settings.policy.to_policy()
    seen = set()
    for row in rows:
        if row["outcome"] in ("rejected", "error"):
            assert (row["sampling_class"], row["inclusion_probability"], row["audit_sample"]) == (None, None, None)
            continue
        seen.add(row["sampling_class"])
        if row["outcome"] == "review":
            assert (row["sampling_class"], row["inclusion_probability"], row["audit_sample"]) == ("review", 1.0, True)
        elif row["sampling_class"] == "rule":
            assert (row["inclusion_probability"], row["audit_sample"]) == (1.0, False)
        else:
            assert row["sampling_class"] in ("confident", "uncertain")
            expected = inclusion_probability(policy, row["sampling_class"])
            assert row["inclusion_probability"] == pytest.approx(expected)
            assert row["audit_sample"] == drawn(row["pair_id"], expected, policy.audit_seed)
    assert {"review", "confident"} <= seen
