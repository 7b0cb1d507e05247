"""The tone/style development set: its balance, and the offline judge measured on it against baselines.

``streams/data/devset_tone.jsonl`` holds hand-labelled tone pairs (labels written from each style guide
before the judge was run). The judge is only worth shipping if it beats "the longer output wins" and a
coin flip on Cohen's kappa; these tests pin the measured margins, minus a small tolerance, so a scoring
change that quietly makes the judge no better than a baseline fails here.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from pairjudge.agents.offline import OfflineJudge
from pairjudge.schemas import TIE, CandidatePair, ToneStyleRubric
from pairjudge.streams.cli.evaluate import EvaluateReport, MethodScore, run_evaluate
from pairjudge.streams.config.settings import Settings

DEVSET = Path(__file__).resolve().parents[2] / "streams" / "data" / "devset_tone.jsonl"

#: Measured with OFFLINE_JUDGE_VERSION "heuristic-3", and again with "heuristic-4" (the same to three decimals:
#: five pairs crossed the 0.7 threshold, three down and two up, and 45 primary and 3 tie-break verdicts became
#: 44 and 4): judge kappa 0.453, longer-wins 0.028, random (200 seeds) -0.002; accuracy when decided 0.896;
#: coverage 0.516. ("heuristic-2" had kappa 0.597 at coverage
#: 0.667 and 0.871 when decided: heuristic-3's confidence is calibrated on independent human judgements, so
#: it decides fewer of these pairs and is right more often when it does.) This set was written by the same
#: hands as the judge: a smoke test. The evidence is pairjudge_dev/humaneval.py (tests/unit/test_humaneval.py).
TOLERANCE = 0.03
JUDGE_KAPPA = 0.453
MARGIN_OVER_LONGER = 0.453 - 0.028
MARGIN_OVER_RANDOM = 0.453 - (-0.002)
DECIDED_ACCURACY = 0.896
COVERAGE = 0.516


def _pairs() -> list[CandidatePair]:
    return [CandidatePair.model_validate_json(line) for line in DEVSET.read_text("utf-8").splitlines() if line.strip()]


def _better_and_worse(pair: CandidatePair) -> tuple[str, str]:
    assert pair.human_label is not None
    first, second = pair.candidates
    if pair.human_label.winner == first.candidate_id:
        return first.output, second.output
    return second.output, first.output


def test_every_pair_is_a_labelled_tone_pair_with_a_rationale() -> None:
    pairs = _pairs()
    assert len({p.pair_id for p in pairs}) == len(pairs)
    for p in pairs:
        assert isinstance(p.rubric, ToneStyleRubric), p.pair_id
        assert p.human_label is not None, p.pair_id
        assert len(p.human_label.rationale) >= 30, p.pair_id
    # Varied guides, not one brand's voice.
    assert len({p.metadata.tenant for p in pairs}) >= 10


def test_the_devset_is_balanced_so_no_trivial_rule_scores_well() -> None:
    pairs = _pairs()
    decided = [p for p in pairs if p.human_label is not None and p.human_label.winner != TIE]
    ties = [p for p in pairs if p.human_label is not None and p.human_label.winner == TIE]
    assert len(decided) >= 60
    assert len(ties) >= 10
    longer_better = sum(
        1 for p in decided if len(_better_and_worse(p)[0].strip()) > len(_better_and_worse(p)[1].strip())
    )
    assert 0.35 <= longer_better / len(decided) <= 0.65
    better_first = sum(
        1 for p in decided if p.human_label is not None and p.human_label.winner == p.candidates[0].candidate_id
    )
    assert 0.35 <= better_first / len(decided) <= 0.65


@pytest.fixture(scope="module")
def report() -> EvaluateReport:
    import anyio

    console = Console(file=io.StringIO(), width=120)

    async def run() -> EvaluateReport:
        return await run_evaluate(Settings(), DEVSET, out_path=None, console=console, judge=OfflineJudge())

    result = anyio.run(run)
    assert "judge vs baselines" in console.file.getvalue()  # type: ignore[attr-defined]
    return result


def _by_name(report: EvaluateReport) -> dict[str, MethodScore]:
    scores = [report.judge_score(), *report.baseline_scores()]
    return {s.name.split(" (")[0]: s for s in scores}


def test_every_pair_is_judged_without_errors(report: EvaluateReport) -> None:
    assert report.errors == 0
    assert {r.outcome for r in report.results} <= {"verdict", "review"}
    assert len(report.labelled) == len(_pairs())


def test_offline_judge_beats_longer_wins_and_random_on_kappa(report: EvaluateReport) -> None:
    scores = _by_name(report)
    judge, longer, rand = scores["judge"], scores["longer wins"], scores["random"]
    assert judge.kappa is not None
    assert longer.kappa is not None
    assert rand.kappa is not None
    assert judge.kappa >= JUDGE_KAPPA - TOLERANCE
    assert judge.kappa - longer.kappa >= MARGIN_OVER_LONGER - TOLERANCE
    assert judge.kappa - rand.kappa >= MARGIN_OVER_RANDOM - TOLERANCE


def test_the_judge_does_not_win_by_escalating_everything(report: EvaluateReport) -> None:
    judge = report.judge_score()
    assert judge.coverage is not None
    assert judge.coverage >= COVERAGE - TOLERANCE
    assert judge.decided_accuracy is not None
    assert judge.decided_accuracy >= DECIDED_ACCURACY - TOLERANCE
    assert judge.escalated == pytest.approx(1.0 - judge.coverage)
    # Each output is scored on its own, so swapping positions can never flip the offline judge.
    assert judge.flip_rate == 0.0


def test_baselines_are_near_chance_on_a_balanced_set(report: EvaluateReport) -> None:
    scores = _by_name(report)
    for name in ("longer wins", "random", "always TIE"):
        kappa = scores[name].kappa
        assert kappa is not None, name
        assert abs(kappa) < 0.15, (name, kappa)
