"""``pairjudge evaluate`` baselines: "longer wins", a seeded coin flip and "always TIE", scored on the
same labelled pairs as the judge."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pairjudge.schemas import TIE, KnownLabel
from pairjudge.streams.cli import app
from pairjudge.streams.cli.evaluate import (
    FIRST,
    SECOND,
    EvaluateReport,
    PairResult,
    longer_wins,
    random_baseline,
    score_labels,
)
from tests.unit.factories import make_pair

IDS = ("a", "b")


def _result(human: str, winner: str | None, lengths: tuple[int, int], outcome: str = "verdict") -> PairResult:
    return PairResult(pair_id="p", outcome=outcome, winner=winner, human=human, candidate_ids=IDS, lengths=lengths)


def test_longer_wins_picks_the_longer_output_and_ties_on_equal_length() -> None:
    assert longer_wins((10, 3)) == FIRST
    assert longer_wins((3, 10)) == SECOND
    assert longer_wins((7, 7)) == TIE


def test_score_labels_counts_coverage_and_accuracy_when_decided() -> None:
    score = score_labels("m", [FIRST, TIE, SECOND, FIRST], [FIRST, FIRST, FIRST, TIE])
    assert score.agreement == pytest.approx(0.25)
    assert score.coverage == pytest.approx(0.75)
    # Decided and human-decided: pairs 0 (right) and 2 (wrong); pair 3 was a human tie, left out.
    assert score.decided_accuracy == pytest.approx(0.5)


def test_random_baseline_is_reproducible_never_ties_and_averages_near_zero_kappa() -> None:
    human = [FIRST, SECOND] * 30 + [TIE] * 10
    one, two = random_baseline(human, seeds=50), random_baseline(human, seeds=50)
    assert one == two
    assert one.coverage == 1.0
    assert one.kappa is not None
    assert abs(one.kappa) < 0.05


def test_report_scores_the_judge_and_baselines_on_the_same_pairs() -> None:
    report = EvaluateReport(
        results=[
            _result("a", "a", (50, 10)),  # judge right, longer right
            _result("b", "b", (50, 10)),  # judge right, longer wrong
            _result(TIE, None, (20, 20), outcome="review"),  # judge escalated a human tie; longer says TIE
            _result("a", "b", (10, 50)),  # judge wrong, longer wrong
        ]
    )
    judge = report.judge_score()
    assert judge.agreement == pytest.approx(0.75)
    assert judge.coverage == pytest.approx(0.75)
    assert judge.escalated == pytest.approx(0.25)
    assert judge.decided_accuracy == pytest.approx(2 / 3)
    longer, rand, always_tie = report.baseline_scores(seeds=20)
    assert longer.agreement == pytest.approx(0.5)
    assert longer.pairs == rand.pairs == always_tie.pairs == 4
    assert always_tie.agreement == pytest.approx(0.25)
    assert always_tie.coverage == 0.0
    assert always_tie.decided_accuracy is None


def _labelled_file(tmp_path: Path) -> Path:
    pair = make_pair()
    first = pair.candidates[0].candidate_id
    labelled = pair.model_copy(update={"human_label": KnownLabel(winner=first)})
    path = tmp_path / "labelled.jsonl"
    path.write_text(labelled.model_dump_json() + "\n")
    return path


def test_cli_prints_the_baseline_table_for_labelled_files_unless_told_not_to(tmp_path: Path) -> None:
    path = _labelled_file(tmp_path)
    shown = CliRunner().invoke(app, ["evaluate", str(path)], env={"COLUMNS": "160"})
    assert shown.exit_code == 0, shown.output
    assert "judge vs baselines" in shown.output
    assert "longer wins" in shown.output
    hidden = CliRunner().invoke(app, ["evaluate", str(path), "--no-baselines"], env={"COLUMNS": "160"})
    assert hidden.exit_code == 0, hidden.output
    assert "judge vs baselines" not in hidden.output
    assert "Cohen's kappa" in hidden.output


def test_cli_shows_no_baselines_without_human_labels() -> None:
    sample = Path(__file__).resolve().parents[2] / "streams" / "data" / "sample_pairs.jsonl"
    result = CliRunner().invoke(app, ["evaluate", str(sample)], env={"COLUMNS": "160"})
    assert result.exit_code == 1, result.output  # the sample's four malformed pairs
    assert "judge vs baselines" not in result.output
