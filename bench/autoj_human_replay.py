"""The human gate on a real judge's recorded verdicts (issue 41 item 3, re-run): GAIR-NLP/auto-j's pairs, its
judge's answers in both orders and the people's labels, streamed through the gate as it was before issue 41 and
as it is now, side by side.

Run from the checkout root (DIR: a checkout of github.com/GAIR-NLP/auto-j; the repository has no licence, so its
data is read from DIR and never copied into this project)::

    python -m bench.autoj_human_replay DIR              # the test part: 1,000 streams per case, 3,000 pairs each
    python -m bench.autoj_human_replay DIR --part dev

**The pairs.** ``bench.autoj_to_backtest`` reads the three files and splits them by ``sha256("autoj-<line>")``
(its ``part_of``: last hex digit below 4 is the test part, 346 pairs). Each pair goes once through the core's own
``judge_pair`` with the recorded answer for each order (``agents.backtest``'s scripted judge) under the policy
``tiebreak_enabled = false``: Auto-J recorded no tie-break answers, so under the default policy its flips would
wait for one, and a human basis needs every pair to end. The core's decision facts give each pair its stratum and
inclusion probability (both orders named the same response: a verdict at the stated 1.0, stratum ``confident``,
audited at 5%; a flip or a tie in both orders: ``review``, always labelled) and the judge's outcome as the board
counts it (``judged_winner``: the response both orders named, else 1/2).

**The streams.** An experiment needs a champion and a challenger; a recorded pair has two responses and a label.
Each case fixes which response plays the challenger and how the pairs are drawn:

* *random sides*: every pair in both orientations; the judge's outcome ``f`` and the person's ``y`` (1: the
  challenger, 0: the champion, 1/2: a tie) follow. People prefer the challenger exactly half the time, and the
  judge is no kinder to it than people are.
* *judge's pick*: the challenger is the response the judge named in both orders (both orientations at half weight
  where it named none): the judge is as kind to the challenger as it can be, the issue's dangerous case.

Then the items are drawn with replacement, weighted by the person's outcome (``y = 1`` items by one factor, the
rest by 1) so that the mean of ``y`` over the draw is exactly the case's true win rate ``theta``: at 0.5 the
challenger is no better (a null), below it the experts reject it, at 0.6 it is better. A stream is ``--pairs``
such draws; each is a new pair of its stratum, labelled with its inclusion probability (a fresh draw per stream,
as a new pair id would be), its label arriving at once. The gate is read every ``--every`` pairs through the
project's own ``agents.scores.human.decide_arrays`` (``decide_human`` is that function on one basis):

* *before*: each look reads only its own confidence sequence, deciding once there are 30 labels in all, wherever
  they come from (``min_stratum_labels=0``, no running intersection): the gate the issue replayed;
* *now*: the shipped gate, the running intersection of every look's sequence, taken in once every stratum with
  pairs also has its 30 labels (``PAIRJUDGE_SCORES__HUMAN_MIN_STRATUM_LABELS``).

**Per case and gate**: streams promoted (false promotions where ``theta`` is 0.5, promotions of a challenger the
experts reject below it), rejected, decided and later read another answer, promotions made while a stratum had
fewer than 30 labels, and the median pairs and labels to the first decision.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from bench.autoj_to_backtest import part_of, rows
from bench.human_gate import label_sums
from bench.human_stick import Figures, figures
from pairjudge.agents.backtest import FIRST, SECOND, recorded_judge, recorded_pair
from pairjudge.agents.core import judge_pair
from pairjudge.agents.policy import Policy
from pairjudge.agents.scores import human
from pairjudge.agents.scores.human import MIN_LABELS, SumsArray
from pairjudge.agents.stats import wilson_interval
from pairjudge.schemas.backtest import RecordedPair

ALPHA = 0.05
MIN_EFFECT = 0.05
#: Auto-J ran no tie-break: its flips go to people, as under docs/guides/backtest/flips-to-people.toml.
POLICY = Policy(tiebreak_enabled=False)
STRATA = ("confident", "review")
#: Streams simulated at once (memory: a few (chunk x pairs) arrays).
CHUNK = 250


@dataclass(frozen=True, slots=True)
class Judged:
    """A recorded pair as the core decided it: stratum, inclusion probability, the judge's outcome and the
    people's label, both relative to the pair (``first``, ``second``, ``tie``; the judge None: no response)."""

    stratum: str
    pi: float
    judge: str | None
    human: str


async def _judge(row: RecordedPair) -> Judged:
    decision = await judge_pair(recorded_pair(row), recorded_judge(row.primary), POLICY)
    facts = decision.facts
    if facts.sampling_class is None or facts.inclusion_probability is None:
        raise SystemExit(f"{row.pair_id}: the core drew no sampling stratum ({type(decision.outcome).__name__})")
    winner = facts.judged_winner if facts.judged_winner in (FIRST, SECOND) else None
    return Judged(facts.sampling_class, facts.inclusion_probability, winner, row.labels[0])


def judged(data: Path, part: str) -> list[Judged]:
    chosen = [RecordedPair.model_validate(r) for r in rows(data) if part_of(str(r["pair_id"])) == part]

    async def all_of() -> list[Judged]:
        return [await _judge(r) for r in chosen]

    return asyncio.run(all_of())


@dataclass(frozen=True, slots=True)
class Items:
    """The oriented pairs a case draws from: stratum index, inclusion probability, judge and person outcomes on
    the challenger's scale, and each item's weight."""

    stratum: NDArray[np.int64]
    pi: NDArray[np.float64]
    f: NDArray[np.float64]
    y: NDArray[np.float64]
    weight: NDArray[np.float64]

    def at(self, theta: float) -> Items:
        """The same items reweighted (``y = 1`` items by one factor) so the weighted mean of ``y`` is ``theta``."""
        one, half, zero = (self.weight * (self.y == v) for v in (1.0, 0.5, 0.0))
        factor = (theta * zero.sum() + (theta - 0.5) * half.sum()) / ((1 - theta) * one.sum())
        weight = self.weight * np.where(self.y == 1.0, factor, 1.0)
        return Items(self.stratum, self.pi, self.f, self.y, weight / weight.sum())

    def describe(self) -> str:
        w = self.weight / self.weight.sum()
        sure = self.stratum == 0
        decided = sure & (self.f != 0.5) & (self.y != 0.5)
        agree = float(np.sum(w * decided * (self.f == self.y)) / np.sum(w * decided))
        return (
            f"theta {np.sum(w * self.y):.3f}, judge basis {np.sum(w * self.f):.3f}, "
            f"confident share {np.sum(w * sure):.1%}, judge agrees with people where it decided {agree:.1%}"
        )


def _outcome(label: str | None, challenger: str) -> float:
    if label is None or label == "tie":
        return 0.5
    return 1.0 if label == challenger else 0.0


def items(pairs: Sequence[Judged], sides: str) -> Items:
    cols: list[tuple[int, float, float, float, float]] = []
    for p in pairs:
        s = STRATA.index(p.stratum)
        if sides == "judge's pick" and p.judge is not None:
            cols.append((s, p.pi, 1.0, _outcome(p.human, p.judge), 1.0))
            continue
        for challenger in (FIRST, SECOND):
            cols.append((s, p.pi, _outcome(p.judge, challenger), _outcome(p.human, challenger), 0.5))
    a = np.array(cols)
    return Items(a[:, 0].astype(np.int64), a[:, 1], a[:, 2], a[:, 3], a[:, 4] / a[:, 4].sum())


def stream_sums(source: Items, streams: int, pairs: int, every: int, rng: np.random.Generator) -> dict[str, SumsArray]:
    """Every stratum's sums at every look, shape (streams, looks)."""
    looks = pairs // every
    drawn = rng.choice(len(source.weight), size=(streams, looks * every), p=source.weight)
    which, pi, f, y = source.stratum[drawn], source.pi[drawn], source.f[drawn], source.y[drawn]
    labelled = rng.random(drawn.shape) < pi

    def at_looks(values: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.cumsum(values.reshape(streams, looks, every).sum(axis=2), axis=1)

    out: dict[str, SumsArray] = {}
    for k, name in enumerate(STRATA):
        mine = (which == k).astype(np.float64)
        lab = mine * labelled
        w = lab / pi
        fields = {"pairs": mine, "f": mine * f, "ff": mine * f * f, **label_sums(lab, w, w / pi, y, f)}
        out[name] = SumsArray(**{n: at_looks(v) for n, v in fields.items()})
    return out


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    sides: str
    theta: float


CASES = (
    Case("null, random sides", "random sides", 0.5),
    Case("null, judge's pick is the challenger", "judge's pick", 0.5),
    Case("worse (experts reject), random sides", "random sides", 0.45),
    Case("worse (experts reject), judge's pick", "judge's pick", 0.45),
    Case("much worse, judge's pick", "judge's pick", 0.40),
    Case("better, random sides", "random sides", 0.6),
    Case("better, judge's pick", "judge's pick", 0.6),
)


def run(source: Items, streams: int, pairs: int, every: int, seed: int) -> tuple[list[Figures], list[float]]:
    """(before, now) figures over the same streams, and each gate's median labels to its first decision."""
    rng = np.random.default_rng(seed)
    codes: dict[str, list[NDArray[np.int8]]] = {"before": [], "now": []}
    shorts, labels = [], []
    for start in range(0, streams, CHUNK):
        sums = stream_sums(source, min(CHUNK, streams - start), pairs, every, rng)
        basis = human.BasisArrays(sums)
        common = {"alpha": ALPHA, "min_effect": MIN_EFFECT, "min_labels": MIN_LABELS}
        codes["before"].append(human.decide_arrays(basis, min_stratum_labels=0, **common).decision)  # type: ignore[arg-type]
        codes["now"].append(human.decide_arrays(basis, hold_axis=1, **common).decision)  # type: ignore[arg-type]
        shorts.append(~human.strata_ready(sums, MIN_LABELS))
        labels.append(sum(s.labels for s in sums.values()))
    short, total = np.concatenate(shorts), np.concatenate(labels)
    out, medians = [], []
    for got in codes.values():
        c = np.concatenate(got)
        out.append(figures(c, short, every))
        decided = c != human.CONTINUE
        first = np.argmax(decided, axis=1)
        at = np.where(decided.any(axis=1), total[np.arange(len(c)), first], np.inf)
        medians.append(float(np.median(at)))
    return out, medians


def rate(k: int, n: int) -> str:
    low, high = wilson_interval(k, n)
    return f"{k / n:.1%} [{low:.1%}, {high:.1%}]"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", type=Path, help="a checkout of github.com/GAIR-NLP/auto-j")
    parser.add_argument("--part", choices=("test", "dev"), default="test")
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=3000, help="pairs per stream")
    parser.add_argument("--every", type=int, default=20, help="pairs between looks at the gate")
    parser.add_argument("--seed", type=int, default=41)
    args = parser.parse_args(argv)
    started = time.process_time()
    pairs = judged(args.root / "data", args.part)
    counts = {s: sum(p.stratum == s for p in pairs) for s in STRATA}
    print(
        f"Auto-J pairwise, {args.part} part: {len(pairs)} pairs through the core (tie-break off): "
        + ", ".join(f"{s} {n}" for s, n in counts.items())
        + f"; {args.streams:,} streams per case, {args.pairs:,} pairs each, a look every {args.every}"
    )
    print(
        "\n| case | gate | promoted | rejected | decided, then read another answer | promotions with a stratum "
        "under 30 labels | median pairs to a decision | median labels to a decision |"
    )
    print("|---|---|---|---|---|---|---|---|")
    notes = []
    for i, case in enumerate(CASES):
        source = items(pairs, case.sides).at(case.theta)
        notes.append(f"- {case.name}: {source.describe()}")
        got, medians = run(source, args.streams, args.pairs, args.every, args.seed + i)
        for name, fig, labels in zip(("before", "now"), got, medians, strict=True):
            n = fig.streams
            print(
                f"| {case.name if name == 'before' else ''} | {name} | {rate(fig.promoted, n)} | "
                f"{fig.rejected / n:.1%} | {rate(fig.went_back, n)} | {fig.promoted_short} of {fig.promoted} | "
                f"{fig.median_pairs:,.0f} | {labels:,.0f} |"
            )
    print("\nThe draws (weighted):\n" + "\n".join(notes))
    print(f"\n{time.process_time() - started:.0f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
