"""Does a human-basis decision stick, and does it rest on every stratum? Simulated null streams, vectorised.

Run from the checkout root: ``python -m bench.human_stick`` (1,000 streams per setting, seconds on one core).
``tests/unit/test_human_gate_sticks.py`` runs the same simulation and asserts the figures.

**Model.** Each stream is ``pairs`` pairs in order. A pair falls in a sampling stratum (``confident``,
``uncertain``, ``review``) with the stratum's share; a person prefers the challenger with probability ``p``
(0.5: the null, the challenger is not better); the judge names the challenger with probability ``a1`` when
the person does and ``a0`` when the person does not (``a0`` > 1 - ``a1``: a judge that leans to the
challenger); the pair is labelled with the stratum's inclusion probability ``pi`` (review: 1), its label
arriving at once. The gate is read every ``every`` pairs.

**Two gates over the same streams** (``agents.scores.human.decide_arrays``):

* *before* (the gate up to issue 41): each look reads only its own confidence sequence, and decides once there
  are ``min_labels`` labels in all, wherever they come from;
* *after* (the shipped gate): each look reads the running intersection of every interval so far, taken in
  only once every stratum with pairs also has ``min_labels`` labels.

**Per setting**: the share of streams that promote at some look (false promotions: ``p`` is 0.5), the share
that reach a decision and later read "continue" again (or the other decision), and the false promotions made
while some stratum had fewer than ``min_labels`` labels.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from bench.human_gate import label_sums
from pairjudge.agents.scores import human
from pairjudge.agents.scores.human import CONTINUE, MIN_LABELS, PROMOTE, SumsArray
from pairjudge.agents.stats import wilson_interval

ALPHA = 0.05
MIN_EFFECT = 0.05


@dataclass(frozen=True, slots=True)
class Stratum:
    name: str
    share: float
    pi: float
    #: P(judge names the challenger | the person does), and | the person does not.
    a1: float
    a0: float


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    strata: tuple[Stratum, ...]
    p: float = 0.5
    pairs: int = 3000
    every: int = 20


#: The shape the issue's replay saw: the confident stratum holds about 65% of pairs, labelled at 5%; a fifth of
#: the pairs go to review (all labelled), so review labels reach the minimum long before confident ones do.
REPLAY_LIKE = Setting(
    "replay-like: judge 0.95 right where sure, leaning +5 points",
    (
        Stratum("confident", 0.65, 0.05, 0.97, 0.07),
        Stratum("uncertain", 0.15, 0.10, 0.70, 0.40),
        Stratum("review", 0.20, 1.0, 0.55, 0.45),
    ),
)
WEAK_JUDGE = Setting(
    "weak judge: 0.70 right, leaning +10 points",
    (
        Stratum("confident", 0.60, 0.05, 0.80, 0.40),
        Stratum("uncertain", 0.20, 0.10, 0.60, 0.50),
        Stratum("review", 0.20, 1.0, 0.50, 0.50),
    ),
)
#: Not a null: what the per-stratum minimum costs in pairs to a decision when the challenger is better.
BETTER = Setting("better challenger (p = 0.60), the replay-like judge", REPLAY_LIKE.strata, p=0.6)
SETTINGS = (REPLAY_LIKE, WEAK_JUDGE)


def stream_sums(setting: Setting, streams: int, seed: int) -> dict[str, SumsArray]:
    """Every stratum's sums at every look, shape (streams, looks)."""
    rng = np.random.default_rng(seed)
    t, every = setting.pairs, setting.every
    looks = t // every
    shares = np.cumsum([s.share for s in setting.strata])
    which = np.minimum(np.searchsorted(shares, rng.random((streams, t)) * shares[-1], side="right"), len(shares) - 1)
    y = rng.random((streams, t)) < setting.p
    a1 = np.array([s.a1 for s in setting.strata])[which]
    a0 = np.array([s.a0 for s in setting.strata])[which]
    f = (rng.random((streams, t)) < np.where(y, a1, a0)).astype(np.float64)
    pi = np.array([s.pi for s in setting.strata])[which]
    sampled = rng.random((streams, t)) < pi
    yf = y.astype(np.float64)

    def at_looks(values: NDArray[np.float64]) -> NDArray[np.float64]:
        blocks = values[:, : looks * every].reshape(streams, looks, every).sum(axis=2)
        return np.cumsum(blocks, axis=1)

    out: dict[str, SumsArray] = {}
    for k, s in enumerate(setting.strata):
        mine = (which == k).astype(np.float64)
        lab = mine * sampled
        w = lab / s.pi
        w2 = w / s.pi
        fields = {"pairs": mine, "f": mine * f, "ff": mine * f * f, **label_sums(lab, w, w2, yf, f)}
        out[s.name] = SumsArray(**{name: at_looks(v) for name, v in fields.items()})
    return out


@dataclass(frozen=True, slots=True)
class Figures:
    streams: int
    promoted: int
    rejected: int
    #: Streams that reached a decision and read another answer ("continue" or the other decision) later.
    went_back: int
    #: Streams whose first promotion came while some stratum with pairs had fewer than the minimum labels.
    promoted_short: int
    #: The median number of pairs seen at a stream's first decision (inf when fewer than half decide).
    median_pairs: float

    def line(self, name: str) -> str:
        def rate(k: int) -> str:
            low, high = wilson_interval(k, self.streams)
            return f"{k / self.streams:.1%} [{low:.1%}, {high:.1%}]"

        return (
            f"{name:<7} promoted {rate(self.promoted)}  rejected {self.rejected / self.streams:.1%}  "
            f"decided then went back {rate(self.went_back)}  promoted with a stratum short {self.promoted_short}  "
            f"median pairs to a decision {self.median_pairs:,.0f}"
        )


def figures(codes: NDArray[np.int8], short: NDArray[np.bool_], every: int) -> Figures:
    """The figures of a (streams, looks) array of decisions; ``short`` marks the looks at which some stratum
    with pairs had fewer than the minimum labels."""
    streams = codes.shape[0]
    decided = codes != CONTINUE
    first = np.argmax(decided, axis=1)
    any_decided = decided.any(axis=1)
    first_code = codes[np.arange(streams), first]
    later = np.arange(codes.shape[1])[None, :] > first[:, None]
    went_back = any_decided & np.any(later & (codes != first_code[:, None]), axis=1)
    promoted = np.any(codes == PROMOTE, axis=1)
    first_promotion = np.argmax(codes == PROMOTE, axis=1)
    promoted_short = promoted & short[np.arange(streams), first_promotion]
    pairs_then = np.where(any_decided, (first + 1) * every, np.inf)
    return Figures(
        streams=streams,
        promoted=int(promoted.sum()),
        rejected=int(np.any(codes == human.REJECT, axis=1).sum()),
        went_back=int(went_back.sum()),
        promoted_short=int(promoted_short.sum()),
        median_pairs=float(np.median(pairs_then)),
    )


def run(setting: Setting, streams: int, seed: int, min_labels: int = MIN_LABELS) -> tuple[Figures, Figures]:
    """(before, after) over the same streams."""
    sums = stream_sums(setting, streams, seed)
    basis = human.BasisArrays(sums)
    short = ~human.strata_ready(sums, min_labels)
    common = {"alpha": ALPHA, "min_effect": MIN_EFFECT, "min_labels": min_labels}
    before = human.decide_arrays(basis, min_stratum_labels=0, **common)  # type: ignore[arg-type]
    after = human.decide_arrays(basis, hold_axis=1, **common)  # type: ignore[arg-type]
    return figures(before.decision, short, setting.every), figures(after.decision, short, setting.every)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=41)
    args = parser.parse_args(argv)
    for i, setting in enumerate((*SETTINGS, BETTER)):
        before, after = run(setting, args.streams, args.seed + i)
        print(f"{setting.name} ({args.streams:,} streams, {setting.pairs:,} pairs, a look every {setting.every})")
        print("  " + before.line("before"))
        print("  " + after.line("after"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
