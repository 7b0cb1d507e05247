"""GAIR-NLP/auto-j's recorded pairwise verdicts in the backtest's import format (docs/guides/backtest.md).

Source: github.com/GAIR-NLP/auto-j (no licence file: measured with, never shipped), three files of its ``data/``:
``test/testdata_pairwise.jsonl`` (1,392 pairs, ``label`` 0: response 1 is better, 1: response 2, 2: a tie),
``outputs/pairwise_example_output.jsonl`` (Auto-J's verdict with response 1 shown first, same codes) and
``outputs/pairwise_exchange_example_output.jsonl`` (with response 2 shown first: 0 is then the response shown
first). Auto-J states no confidence, so each answer is replayed at 1.0 and the threshold holds none back.

Each pair is named ``autoj-<line>`` and put in the test part when the last hex digit of sha256(name) is below 4
(a quarter), in the development part otherwise, before anything is measured:

    python bench/autoj_to_backtest.py /path/to/auto-j/data --part test > autoj-test.jsonl
    pairjudge backtest autoj-test.jsonl -p default.toml -p flips-to-people.toml
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Literal

#: Auto-J's codes as the position the judge named, and as the people's relative label.
POSITION = {0: "A", 1: "B", 2: "tie"}
HUMAN = {0: "first", 1: "second", 2: "tie"}


def part_of(pair_id: str) -> Literal["test", "dev"]:
    return "test" if int(hashlib.sha256(pair_id.encode()).hexdigest()[-1], 16) < 4 else "dev"


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def rows(data: Path) -> list[dict[str, Any]]:
    pairs = _lines(data / "test" / "testdata_pairwise.jsonl")
    shown = _lines(data / "outputs" / "pairwise_example_output.jsonl")
    swapped = _lines(data / "outputs" / "pairwise_exchange_example_output.jsonl")
    if not len(pairs) == len(shown) == len(swapped):
        raise SystemExit(f"the three files differ in length: {len(pairs)}, {len(shown)}, {len(swapped)}")
    out: list[dict[str, Any]] = []
    for index, (pair, ab, ba) in enumerate(zip(pairs, shown, swapped, strict=True)):
        out.append(
            {
                "pair_id": f"autoj-{index:04d}",
                "experiment": str(pair["scenario"]),
                "labels": [HUMAN[int(str(pair["label"]))]],
                "primary": {
                    "ab": {"winner": POSITION[int(str(ab["output"]))]},
                    "ba": {"winner": POSITION[int(str(ba["output"]))]},
                },
            }
        )
    return out


def plain_rule(chosen: list[dict[str, Any]]) -> str:
    """The plain both-orders rule, worked out from the rows without the core (the issue's baseline): a pair is
    decided when both orders name the same response (a tie is undecided), and scored against the people's label
    where they named a winner."""
    decided = labelled = agreed = 0
    for row in chosen:
        ab, ba = row["primary"]["ab"]["winner"], row["primary"]["ba"]["winner"]
        first = {"A": "first", "B": "second"}.get(ab)
        if first is None or {"A": "second", "B": "first"}.get(ba) != first:
            continue
        decided += 1
        human = row["labels"][0]
        if human != "tie":
            labelled += 1
            agreed += human == first
    share = agreed / labelled if labelled else float("nan")
    return (
        f"plain both-orders rule: {decided} of {len(chosen)} decided ({decided / len(chosen):.1%}), "
        f"{agreed}/{labelled} = {share:.1%} agreement where people named a winner"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="auto-j's data/ directory")
    parser.add_argument("--part", choices=("test", "dev", "all"), default="dev")
    parser.add_argument("--baseline", action="store_true", help="print the plain both-orders rule's figures instead")
    args = parser.parse_args(argv)
    chosen = [row for row in rows(args.data) if args.part == "all" or part_of(str(row["pair_id"])) == args.part]
    if args.baseline:
        print(plain_rule(chosen))
        return
    for row in chosen:
        sys.stdout.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
