"""Confidence from token probabilities, measured on independent data: the Trust-or-Escalate judgements.

Run from the checkout root: ``python -m bench.confidence_calibration DIR`` where ``DIR`` holds the files
``*.calibration.jsonl`` of jaehunjung1/cascaded-selective-evaluation's ``result/`` folder (or name the files
themselves). Nothing of that data is in this project (the repository has no licence: measure only).

**What the files carry.** 500 pairs with a human label (``preferences.human``: 1 or 2) and, per judge
(GPT-4-turbo, GPT-3.5-turbo, Mistral-7B-instruct), ``probs``: the judge's probability of "[[A]]" and "[[B]]"
read from ``top_logprobs`` at the verdict token, mapped back to the original sides and averaged over both
orders and three few-shot prompts. They carry **no stated (verbalised) confidence**, so stated confidence
cannot be measured here; what is compared instead:

* ``renormalised``: pairjudge's reading (``agents.logprobs``), p(side) / (p(A) + p(B)), the winner's share;
* ``raw``: the paper's reading, the winner's probability as is (mass on other tokens left out);

**Split.** By ``sha256(instruction + both outputs)``: last hex digit below 4 is the test part (about a
quarter), the rest the calibration part. Everything is fitted on the calibration part; the test part is
read once, for the figures.

**Figures, on the test part**: accuracy (the judge's top side agrees with the label), expected calibration
error (10 equal bins, ``agents.stats.expected_calibration_error``), and accuracy at fixed coverages (the
most confident 50/70/90% of pairs). Then the project's calibrated threshold (``agents.stats.
calibrate_threshold``, Learn-then-Test, target and risk as the audit's defaults and the paper's 0.85) on the
calibration part, and its agreement and coverage on the test part.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

from pairjudge.agents.stats import calibrate_threshold, expected_calibration_error

COVERAGES = (0.5, 0.7, 0.9)


@dataclass(frozen=True, slots=True)
class Pair:
    key: str
    human: int
    #: The judge's probabilities for side 1 and side 2, as the file has them.
    p1: float
    p2: float

    @property
    def judge(self) -> int:
        return 1 if self.p1 >= self.p2 else 2

    @property
    def correct(self) -> bool:
        return self.judge == self.human

    @property
    def raw(self) -> float:
        return max(self.p1, self.p2)

    @property
    def renormalised(self) -> float:
        return max(self.p1, self.p2) / (self.p1 + self.p2)


def pair_key(row: dict[str, object]) -> str:
    outputs = row["outputs"]
    assert isinstance(outputs, list)
    text = "\x1e".join([str(row["instruction"]), *map(str, outputs)])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def is_test(key: str) -> bool:
    return int(key[-1], 16) < 4


def load(path: Path) -> list[Pair]:
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        p1, p2 = (float(p) for p in row["probs"])
        if not (math.isfinite(p1) and math.isfinite(p2)) or p1 + p2 <= 0:
            continue
        pairs.append(Pair(pair_key(row), int(row["preferences"]["human"]), p1, p2))
    return pairs


def accuracy_at_coverage(confidences: list[float], corrects: list[bool], coverage: float) -> float:
    ranked = sorted(zip(confidences, corrects, strict=True), key=lambda item: item[0], reverse=True)
    take = max(1, round(coverage * len(ranked)))
    return sum(ok for _, ok in ranked[:take]) / take


def report(name: str, calibration: list[Pair], test: list[Pair]) -> list[str]:
    lines = [f"## {name}: {len(calibration)} calibration pairs, {len(test)} test pairs"]
    corrects = [p.correct for p in test]
    lines.append(f"test accuracy (all pairs): {sum(corrects) / len(corrects):.3f}")
    header = "| reading | ECE | " + " | ".join(f"acc@{round(c * 100)}%" for c in COVERAGES) + " |"
    lines += [header, "|" + " --- |" * (2 + len(COVERAGES))]
    for reading in ("renormalised", "raw"):
        conf = [getattr(p, reading) for p in test]
        ece = expected_calibration_error(conf, corrects)
        at = " | ".join(f"{accuracy_at_coverage(conf, corrects, c):.3f}" for c in COVERAGES)
        lines.append(f"| {reading} | {ece:.3f} | {at} |")
    lines.append("")
    columns = ("target", "risk", "threshold", "cal. coverage", "test coverage", "test agreement")
    lines.append("| calibrated threshold (renormalised) | " + " | ".join(columns) + " |")
    lines.append("| --- | --- | --- | --- | --- | --- | --- |")
    for target in (0.9, 0.85, 0.8):
        g = calibrate_threshold(
            [p.renormalised for p in calibration], [p.correct for p in calibration], target=target, risk=0.1
        )
        if g.threshold is None:
            lines.append(f"| | {target} | 0.1 | none ({g.reason}) | 0 | 0 | - |")
            continue
        decided = [p for p in test if p.renormalised >= g.threshold]
        agree = sum(p.correct for p in decided) / len(decided) if decided else float("nan")
        lines.append(
            f"| | {target} | 0.1 | {g.threshold:.2f} | {g.coverage:.3f} | {len(decided) / len(test):.3f} "
            f"| {agree:.3f} (n={len(decided)}) |"
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("data", nargs="+", type=Path, help="the result/ folder, or *.calibration.jsonl files")
    args = parser.parse_args(argv)
    files: list[Path] = []
    for path in args.data:
        files += sorted(path.glob("*.calibration.jsonl")) if path.is_dir() else [path]
    if not files:
        parser.error("no *.calibration.jsonl files found")
    for path in files:
        pairs = load(path)
        test = [p for p in pairs if is_test(p.key)]
        calibration = [p for p in pairs if not is_test(p.key)]
        print("\n".join(report(path.name.removesuffix(".calibration.jsonl"), calibration, test)))
        print()


if __name__ == "__main__":
    main()
