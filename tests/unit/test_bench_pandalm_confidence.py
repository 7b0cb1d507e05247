"""bench/pandalm_confidence.py's analysis: labels, picks, coverage, calibration error and intervals.

The measurement itself needs the llama.cpp server and minutes per pair (bench/README.md); these check the
arithmetic its figures rest on, in milliseconds, and the interval against scipy's.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from scipy.stats import binomtest

from bench.pandalm_confidence import (
    FIRST,
    SECOND,
    Judged,
    Order,
    Scored,
    figures,
    majority,
    part_of,
    ranked_accuracy,
    read_results,
    sample_ids,
    scored_agreeing,
    scored_picks,
    share,
    to_pair,
)
from pairjudge.agents.stats import expected_calibration_error
from pairjudge.schemas import CandidatePair


def row(idx: int, labels: tuple[int, int, int], *, context: str = "") -> dict[str, Any]:
    return {
        "idx": idx,
        "motivation_app": "test",
        "cmp_key": "llama-7b_opt-7b",
        "instruction": f"Instruction {idx}",
        "input": context,
        "response1": f"first answer {idx}",
        "response2": f"second answer {idx}",
        "annotator1": labels[0],
        "annotator2": labels[1],
        "annotator3": labels[2],
    }


def ordering(winner: str, confidence: float, token: float | None, *, valid: bool = True) -> dict[str, Any]:
    other = SECOND if winner == FIRST else FIRST
    probabilities = None if token is None else {winner: token, other: 1 - token}
    return {"valid": valid, "mapped_winner": winner if valid else None, "confidence": confidence,
            "token_probabilities": probabilities}  # fmt: skip


def test_majority_of_three_and_a_split_is_a_tie() -> None:
    assert majority(["first", "first", "tie"]) == "first"
    assert majority(["second", "first", "second"]) == "second"
    assert majority(["tie", "tie", "first"]) == "tie"
    assert majority(["first", "second", "tie"]) == "tie"


def test_sample_is_the_test_part_in_hash_order_and_a_prefix_of_a_larger_one() -> None:
    rows = {f"pandalm-{i}": row(i, (1, 1, 1)) for i in range(200)}
    ten, all_test = sample_ids(rows, 10), sample_ids(rows, None)
    assert all(part_of(pid) == "test" for pid in all_test)
    assert ten == all_test[:10]
    assert 30 < len(all_test) < 70  # a quarter, give or take


def test_pair_event_is_a_valid_pair_with_the_input_as_context() -> None:
    pair = CandidatePair.model_validate(to_pair("pandalm-3", row(3, (1, 2, 1), context="some input")))
    assert pair.task.context == "some input"
    assert [c.candidate_id for c in pair.candidates] == [FIRST, SECOND]
    assert pair.human_label is None  # the label never reaches the judge's side
    assert CandidatePair.model_validate(to_pair("pandalm-4", row(4, (1, 1, 1)))).task.context is None


def test_pick_averages_each_orders_probability_for_the_first_response() -> None:
    def rounded(pick: tuple[str, float] | None) -> tuple[str, float] | None:
        return None if pick is None else (pick[0], round(pick[1], 9))

    agree = Judged("p", Order(FIRST, 0.8, 0.9), Order(FIRST, 0.6, 0.7))
    assert rounded(agree.pick("stated")) == (FIRST, 0.7)
    assert rounded(agree.pick("token")) == (FIRST, 0.8)
    assert agree.confidence("token") == pytest.approx(0.8)
    flip = Judged("p", Order(FIRST, 0.9, 0.6), Order(SECOND, 0.7, 0.9))
    # stated: (0.9 + 0.3) / 2 = 0.6 for the first; token: (0.6 + 0.1) / 2 = 0.35, so 0.65 for the second.
    assert rounded(flip.pick("stated")) == (FIRST, 0.6)
    assert rounded(flip.pick("token")) == (SECOND, 0.65)
    # A flip at equal confidences: the first-shown order's side, at 0.5.
    assert Judged("p", Order(SECOND, 0.5, None), Order(FIRST, 0.5, None)).pick("stated") == (SECOND, 0.5)
    assert Judged("p", Order("TIE", 0.5, 0.5), Order("TIE", 0.5, 0.5)).pick("stated") is None


def test_policy_default_takes_tokens_only_when_both_orders_have_them() -> None:
    both = Judged("p", Order(FIRST, 0.5, 0.9), Order(FIRST, 0.5, 0.7))
    one = Judged("p", Order(FIRST, 0.5, 0.9), Order(FIRST, 0.7, None))
    assert both.confidence("policy") == pytest.approx(0.8)
    assert one.confidence("policy") == pytest.approx(0.6)
    assert one.confidence("token") is None
    assert one.pick("token") is None


def test_accuracy_at_coverage_takes_the_most_confident_and_keeps_order_among_equals() -> None:
    conf = [0.9, 0.5, 0.8, 0.5, 0.6, 0.7, 0.55, 0.95]
    right = [True, False, True, True, False, True, False, False]
    assert ranked_accuracy(conf, right, 0.25) == (1, 2)  # 0.95 wrong, 0.9 right
    assert ranked_accuracy(conf, right, 0.5) == (3, 4)
    assert ranked_accuracy(conf, right, 1.0) == (4, 8)
    assert ranked_accuracy([0.5, 0.5, 0.5, 0.5], [True, False, False, False], 0.25) == (1, 1)


@pytest.mark.parametrize(("right", "total"), [(0, 5), (3, 7), (17, 40), (40, 40)])
def test_interval_is_wilsons_as_scipy_computes_it(right: int, total: int) -> None:
    printed = share(right, total)
    low, high = (float(x) for x in printed.split("[")[1].split("]")[0].split(", "))
    ci = binomtest(right, total).proportion_ci(confidence_level=0.95, method="wilson")
    assert abs(low - float(ci.low)) < 5e-4
    assert abs(high - float(ci.high)) < 5e-4
    assert printed.endswith(f"({right}/{total})")


def test_ece_by_hand_on_ten_bins() -> None:
    # Bin [0.5, 0.6): 0.5, 0.5 -> accuracy 0.5, gap 0. Bin [0.9, 1.0]: 0.9, 1.0 -> 0.95 against 0.5, gap 0.45.
    scored = Scored([0.5, 0.5, 0.9, 1.0], [True, False, True, False])
    assert expected_calibration_error(scored.confidences, scored.corrects) == pytest.approx(0.5 * 0.45)
    assert "| 0.225 | 3 |" in scored.row("x")
    reliability = scored.reliability("x")
    assert "| [0.5, 0.6) | 2 | 0.500 | 0.500 |" in reliability
    assert "| [0.9, 1.0] | 2 | 0.950 | 0.500 |" in reliability


def test_results_are_read_back_and_figures_leave_tie_labels_out(tmp_path: Path) -> None:
    rows = {f"pandalm-{i}": row(i, labels) for i, labels in enumerate([(1, 1, 2), (2, 2, 0), (0, 0, 1), (1, 2, 0)])}
    answers = [
        ("verdict", [ordering(FIRST, 0.9, 0.95), ordering(FIRST, 0.8, 0.85)]),
        ("review", [ordering(FIRST, 0.9, 0.55), ordering(SECOND, 0.9, 0.9)]),
        ("verdict", [ordering(FIRST, 0.7, 0.8), ordering(FIRST, 0.7, 0.8)]),
        ("review", [ordering(FIRST, 0.7, 0.8), ordering(FIRST, 0.7, None, valid=False)]),
    ]
    results = [{"pair_id": f"pandalm-{i}", "kind": kind, "orderings": o} for i, (kind, o) in enumerate(answers)]
    results[3]["reason"] = "ordering_invalid"
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in results))
    judged, other = read_results(path)
    assert [j.pair_id for j in judged] == ["pandalm-0", "pandalm-1", "pandalm-2"]
    assert other == Counter({"review (ordering_invalid)": 1})
    labelled = [(j, h) for j, h in zip(judged, ["first", "second"], strict=False)]  # pandalm-2's label is a tie
    # pandalm-1 flips: stated (0.9 + 0.1) / 2 = 0.5 -> the first-shown order's side (wrong) at 0.5; token
    # (0.55 + 0.1) / 2 -> second at 0.675 (right).
    assert scored_picks(labelled, "stated") == Scored([pytest.approx(0.85), 0.5], [True, False])  # type: ignore[list-item]
    assert scored_picks(labelled, "token") == Scored([pytest.approx(0.9), pytest.approx(0.675)], [True, True])  # type: ignore[list-item]
    assert scored_agreeing(labelled, "token") == Scored([pytest.approx(0.9)], [True])  # type: ignore[list-item]
    text = "\n".join(figures(rows, judged, other))
    assert "tie or split labels (left out of agreement): 1; with a majority for one response: 2" in text
    assert "| token probability | 2 | 1.000 [0.342, 1.000] (2/2) |" in text
