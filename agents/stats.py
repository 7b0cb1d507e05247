"""Drift statistics (DESIGN §3) as pure functions: agreement, Cohen's kappa, flips, position bias,
calibration (reliability bins, ECE, Brier) and length preference.

Every function returns ``None`` when it has nothing to measure (no items, or a statistic that is
undefined for the data) rather than a made-up 0 or 1, so a window without labels never looks like
perfect or failing agreement. Inputs of different lengths are a programming error (``ValueError``).

Labels must mean the same thing across pairs before they are compared: a candidate id does not
(each pair has its own), so map winners with :func:`relative_label` (or to roles) first.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from schemas.pair import TIE


def _check_lengths(a: Sequence[object], b: Sequence[object]) -> None:
    if len(a) != len(b):
        raise ValueError(f"inputs differ in length: {len(a)} != {len(b)}")


def relative_label(candidate_ids: tuple[str, str], winner: str) -> Literal["first", "second", "TIE"]:
    """A pair-independent label for ``winner``: the first or second candidate of the pair, or TIE."""
    if winner == TIE:
        return "TIE"
    if winner == candidate_ids[0]:
        return "first"
    if winner == candidate_ids[1]:
        return "second"
    raise ValueError(f"{winner!r} is neither candidate of the pair nor TIE")


def agreement(pairs: Iterable[tuple[Hashable, Hashable]]) -> float | None:
    """Observed agreement: the share of (judge, human) label pairs that are equal."""
    items = list(pairs)
    if not items:
        return None
    return sum(1 for judge, human in items if judge == human) / len(items)


def cohen_kappa(judge_labels: Sequence[Hashable], human_labels: Sequence[Hashable]) -> float | None:
    """Cohen's kappa (1960): (p_o - p_e) / (1 - p_e), with p_e from each rater's own label frequencies.

    Undefined (``None``) when there are no items, or when p_e == 1: both raters gave one and the same
    label to every item, so there is no variation for kappa to measure (``agreement`` is then 1.0).
    """
    _check_lengths(judge_labels, human_labels)
    n = len(judge_labels)
    if n == 0:
        return None
    p_o = sum(1 for j, h in zip(judge_labels, human_labels, strict=True) if j == h) / n
    judge_counts, human_counts = Counter(judge_labels), Counter(human_labels)
    p_e = math.fsum(judge_counts[label] * human_counts[label] for label in judge_counts) / (n * n)
    if math.isclose(p_e, 1.0, rel_tol=0.0, abs_tol=1e-12):
        return None
    return (p_o - p_e) / (1.0 - p_e)


def flip_rate(winner_pairs: Iterable[tuple[str, str]]) -> float | None:
    """Share of pairs whose two orderings named different candidates, both decisive (not TIE).

    Input: (AB mapped winner, BA mapped winner) per pair with both orderings valid.
    """
    items = list(winner_pairs)
    if not items:
        return None
    flips = sum(1 for ab, ba in items if ab != ba and TIE not in (ab, ba))
    return flips / len(items)


def position_a_win_rate(raw_winners: Iterable[str]) -> float | None:
    """Share of decisive orderings won by whatever sat in position A (≈0.5 for an unbiased judge).

    Input: raw (position) winners "A", "B" or "TIE"; ties are left out.
    """
    decisive = [w for w in raw_winners if w in ("A", "B")]
    if not decisive:
        return None
    return sum(1 for w in decisive if w == "A") / len(decisive)


def longer_output_win_rate(lengths: Iterable[tuple[int, int]]) -> float | None:
    """Share of decided pairs won by the longer output. Input: (winner length, loser length); equal
    lengths are left out. Compare the judge's rate with the humans' on the same pairs."""
    items = [(w, loser) for w, loser in lengths if w != loser]
    if not items:
        return None
    return sum(1 for w, loser in items if w > loser) / len(items)


def _check_calibration(confidences: Sequence[float], corrects: Sequence[bool]) -> None:
    _check_lengths(confidences, corrects)
    for c in confidences:
        if not 0.0 <= c <= 1.0:
            raise ValueError(f"confidence {c!r} is outside [0, 1]")


@dataclass(frozen=True, slots=True)
class ReliabilityBin:
    lower: float
    upper: float
    count: int
    mean_confidence: float | None
    accuracy: float | None


def reliability_bins(confidences: Sequence[float], corrects: Sequence[bool], bins: int = 10) -> list[ReliabilityBin]:
    """Equal-width bins over [0, 1]; bin i holds [i/bins, (i+1)/bins), the last one also holds 1.0."""
    if bins < 1:
        raise ValueError("bins must be >= 1")
    _check_calibration(confidences, corrects)
    members: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
    for c, ok in zip(confidences, corrects, strict=True):
        members[min(int(c * bins), bins - 1)].append((c, ok))
    out = []
    for i, m in enumerate(members):
        mean_c = math.fsum(c for c, _ in m) / len(m) if m else None
        acc = sum(1 for _, ok in m if ok) / len(m) if m else None
        out.append(ReliabilityBin(i / bins, (i + 1) / bins, len(m), mean_c, acc))
    return out


def expected_calibration_error(confidences: Sequence[float], corrects: Sequence[bool], bins: int = 10) -> float | None:
    """ECE = sum over bins of (bin size / n) * |accuracy - mean confidence| (Naeini et al. 2015)."""
    n = len(confidences)
    table = reliability_bins(confidences, corrects, bins)
    if n == 0:
        return None
    return math.fsum(
        b.count / n * abs(b.accuracy - b.mean_confidence)
        for b in table
        if b.accuracy is not None and b.mean_confidence is not None
    )


def brier_score(confidences: Sequence[float], corrects: Sequence[bool]) -> float | None:
    """Mean squared difference between the confidence and the outcome (1 correct, 0 wrong)."""
    _check_calibration(confidences, corrects)
    if not confidences:
        return None
    return math.fsum((c - (1.0 if ok else 0.0)) ** 2 for c, ok in zip(confidences, corrects, strict=True)) / len(
        confidences
    )
