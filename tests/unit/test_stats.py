"""Drift statistics against textbook values and hand-computed examples."""

from __future__ import annotations

import pytest

from pairjudge.agents.stats import (
    agreement,
    cohen_kappa,
    expected_calibration_error,
    flip_rate,
    position_a_win_rate,
    relative_label,
    reliability_bins,
)


def _raters(yy: int, yn: int, ny: int, nn: int) -> tuple[list[str], list[str]]:
    """Two raters' labels from a 2x2 table (rows: rater 1 yes/no; columns: rater 2 yes/no)."""
    r1 = ["yes"] * (yy + yn) + ["no"] * (ny + nn)
    r2 = ["yes"] * yy + ["no"] * yn + ["yes"] * ny + ["no"] * nn
    return r1, r2


@pytest.mark.parametrize(
    ("table", "p_o", "kappa"),
    [
        # Wikipedia, "Cohen's kappa", simple example: 50 grant proposals; p_o = 0.7, p_e = 0.5.
        ((20, 5, 10, 15), 0.7, 0.4),
        # Wikipedia, "same percentages but different numbers": p_o = 0.6 in both, p_e = 0.54 / 0.46.
        ((45, 15, 25, 15), 0.6, 0.1304),
        ((25, 35, 5, 35), 0.6, 0.2593),
    ],
)
def test_cohen_kappa_textbook_examples(table: tuple[int, int, int, int], p_o: float, kappa: float) -> None:
    judge, human = _raters(*table)
    assert agreement(zip(judge, human, strict=True)) == pytest.approx(p_o)
    assert cohen_kappa(judge, human) == pytest.approx(kappa, abs=5e-5)


def test_cohen_kappa_three_categories() -> None:
    # p_o = 4/6; judge marginals (2,2,2)/6, human (3,2,1)/6 -> p_e = (6+4+2)/36 = 1/3; kappa = (2/3-1/3)/(2/3) = 0.5
    judge = ["x", "x", "y", "y", "TIE", "TIE"]
    human = ["x", "x", "y", "y", "x", "y"]
    assert cohen_kappa(judge, human) == pytest.approx(0.5)


def test_cohen_kappa_extremes() -> None:
    assert cohen_kappa(["a", "b", "a", "b"], ["a", "b", "a", "b"]) == pytest.approx(1.0)
    assert cohen_kappa(["a", "b", "a", "b"], ["b", "a", "b", "a"]) == pytest.approx(-1.0)
    # Agreement no better than chance.
    assert cohen_kappa(["a", "a", "b", "b"], ["a", "b", "a", "b"]) == pytest.approx(0.0)


def test_cohen_kappa_undefined_when_chance_agreement_is_certain() -> None:
    # p_e == 1: both raters used one and the same label throughout.
    assert cohen_kappa(["a"] * 5, ["a"] * 5) is None
    assert agreement(zip(["a"] * 5, ["a"] * 5, strict=True)) == 1.0
    # One rater constant, the other not: p_e < 1, kappa is defined (0).
    assert cohen_kappa(["a"] * 4, ["a", "a", "b", "b"]) == pytest.approx(0.0)


def test_empty_and_mismatched_inputs() -> None:
    assert cohen_kappa([], []) is None
    assert agreement([]) is None
    with pytest.raises(ValueError, match="length"):
        cohen_kappa(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="length"):
        expected_calibration_error([0.5], [True, False])


def test_flip_rate() -> None:
    pairs = [("x", "x"), ("x", "y"), ("y", "x"), ("x", "TIE"), ("TIE", "TIE")]
    assert flip_rate(pairs) == pytest.approx(2 / 5)
    assert flip_rate([]) is None


def test_position_a_win_rate() -> None:
    assert position_a_win_rate(["A", "A", "B", "TIE", "A"]) == pytest.approx(3 / 4)
    assert position_a_win_rate(["TIE"]) is None


def test_expected_calibration_error_by_hand() -> None:
    confidences = [0.95, 0.95, 0.85, 0.75, 0.75, 0.55]
    corrects = [True, False, True, True, True, False]
    # bin 9 [0.9,1): conf 0.95, acc 0.5 -> 2/6 * 0.45
    # bin 8 [0.8,0.9): conf 0.85, acc 1 -> 1/6 * 0.15
    # bin 7 [0.7,0.8): conf 0.75, acc 1 -> 2/6 * 0.25
    # bin 5 [0.5,0.6): conf 0.55, acc 0 -> 1/6 * 0.55
    expected = (2 * 0.45 + 0.15 + 2 * 0.25 + 0.55) / 6
    assert expected_calibration_error(confidences, corrects) == pytest.approx(expected)
    assert expected_calibration_error([0.8] * 5, [True] * 4 + [False]) == pytest.approx(0.0)
    assert expected_calibration_error([], []) is None


def test_reliability_bins_edges() -> None:
    bins = reliability_bins([0.0, 0.1, 0.99, 1.0], [False, True, True, True], bins=10)
    assert [b.count for b in bins] == [1, 1, 0, 0, 0, 0, 0, 0, 0, 2]  # 1.0 lands in the last bin
    assert (bins[0].lower, bins[0].upper) == (0.0, 0.1)
    assert bins[2].accuracy is None
    assert bins[2].mean_confidence is None
    assert bins[9].mean_confidence == pytest.approx(0.995)
    assert bins[9].accuracy == 1.0
    with pytest.raises(ValueError, match="outside"):
        reliability_bins([1.2], [True])
    with pytest.raises(ValueError, match="bins"):
        reliability_bins([0.5], [True], bins=0)


def test_relative_label() -> None:
    ids = ("cand-1", "cand-2")
    assert [relative_label(ids, w) for w in ("cand-1", "cand-2", "TIE")] == ["first", "second", "TIE"]
    with pytest.raises(ValueError, match="neither"):
        relative_label(ids, "cand-3")
