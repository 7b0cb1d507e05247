"""Fit the offline judge's tone/style confidence map on the dev split of the human-labelled data.

``python -m pairjudge_dev.fit_calibration`` prints the knots for ``agents.offline.calibration`` and,
with ``--write``, puts them there. Isotonic regression (pool adjacent violators) of "was the winner the
humans' choice" on the margin, pooled into blocks of at least ``MIN_BLOCK`` pairs so that no knot rests
on a handful of pairs. Only the dev split is read.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from pairjudge.agents.offline.tone import ToneGuide, compare_tone
from pairjudge.schemas.rubric import ToneStyleRubric
from pairjudge_dev.humaneval import PAIRS_PER_SET, build_pairs

MIN_BLOCK = 60
TARGET = Path(__file__).resolve().parents[1] / "agents" / "offline" / "calibration.py"


def margins(per_set: int = PAIRS_PER_SET) -> list[tuple[float, bool]]:
    out = []
    for lp in build_pairs("dev", per_set):
        rubric = lp.pair.rubric
        assert isinstance(rubric, ToneStyleRubric)
        a, b = (c.output for c in lp.pair.candidates)
        cmp = compare_tone(a, b, ToneGuide.from_rubric(rubric))
        out.append((cmp.margin, (0 if cmp.winner == "A" else 1) == lp.human))
    return out


def isotonic_blocks(points: Sequence[tuple[float, bool]], min_block: int = MIN_BLOCK) -> list[tuple[float, float, int]]:
    """(mean margin, share right, size) per block, non-decreasing in share right."""
    ordered = sorted(points, key=lambda p: p[0])  # by margin only: never order equal margins by outcome
    # Start from blocks of min_block consecutive points, then pool adjacent violators.
    blocks: list[list[float]] = []  # [sum margin, sum right, count]
    for i in range(0, len(ordered), min_block):
        chunk = ordered[i : i + min_block]
        blocks.append([sum(m for m, _ in chunk), float(sum(ok for _, ok in chunk)), float(len(chunk))])
    if len(blocks) > 1 and blocks[-1][2] < min_block:  # fold a short tail into its neighbour
        tail = blocks.pop()
        blocks[-1] = [x + y for x, y in zip(blocks[-1], tail, strict=True)]
    merged: list[list[float]] = []
    for block in blocks:
        merged.append(block)
        while len(merged) > 1 and merged[-2][1] / merged[-2][2] >= merged[-1][1] / merged[-1][2]:
            last = merged.pop()
            merged[-1] = [x + y for x, y in zip(merged[-1], last, strict=True)]
    return [(m / n, r / n, int(n)) for m, r, n in merged]


def knots_from(blocks: Sequence[tuple[float, float, int]]) -> tuple[tuple[float, float], ...]:
    knots = [(0.0, max(0.5, blocks[0][1]))] if blocks and blocks[0][0] > 0 else []
    knots += [(round(m, 4), round(max(0.5, r), 4)) for m, r, _ in blocks]
    return tuple(knots)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write the knots into agents/offline/calibration.py")
    args = parser.parse_args(argv)
    points = margins()
    # A zero margin is "could not tell" by rule (tone_confidence gives 0.5); it is not fitted.
    zero = [ok for m, ok in points if m <= 0]
    if zero:
        print(f"margin 0 (confidence 0.5 by rule): right {sum(zero) / len(zero):.3f} of {len(zero)}")
    points = [p for p in points if p[0] > 0]
    blocks = isotonic_blocks(points)
    for m, r, n in blocks:
        print(f"margin {m:6.3f}: right {r:.3f} of {n}")
    knots = knots_from(blocks)
    literal = (
        "TONE_KNOTS: tuple[tuple[float, float], ...] = (\n" + "".join(f"    ({m}, {r}),\n" for m, r in knots) + ")"
    )
    print(literal)
    if args.write:
        text = TARGET.read_text()
        text = re.sub(
            r"TONE_KNOTS: tuple\[tuple\[float, float\], \.\.\.\] = \(.*?\n\)", literal, text, count=1, flags=re.S
        )
        text = re.sub(
            r"TONE_KNOTS: tuple\[tuple\[float, float\], \.\.\.\] = \(\(0\.0, 0\.5\),\)", literal, text, count=1
        )
        TARGET.write_text(text)
        print(f"written to {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
