"""The champion-challenger scoreboard as pure logic: tallies, intervals, length control, strengths.

Everything is counted from the challenger's side: a *win* is a pair whose verdict named the challenger,
a *loss* one that named the champion, a *tie* one settled as a tie. The win rate is over decisive pairs
(ties say nothing about which is better; their share is reported beside it), with a Wilson interval.

* **Length-controlled win rate**: a logistic model of "challenger won" on the log length ratio of the
  two outputs, read at equal length, as AlpacaEval's length-controlled win rate and Arena's style control
  do. A judge that likes longer answers makes a longer challenger look better than it is; this takes that
  part out. Outcomes are kept in bins of the log ratio, so the state stays small however long it runs.
* **Bradley-Terry strengths** over every model that met another in the experiment (``choix``), with
  bootstrap percentile intervals, for experiments with more than two candidates.

All of the above is the *judge basis*: what the judge decided. Beside it the board keeps the *human
basis* (``agents.scores.human.HumanBasis``: every final outcome and the audit sample's labels, per
sampling stratum), overall, per rubric and per traffic split.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import choix
import numpy as np
from scipy.optimize import minimize

from pairjudge.agents.scores.human import HumanBasis
from pairjudge.agents.stats import wilson_interval

#: The human basis's stratum of rule-settled verdicts (``agents.scores.events``).
RULE_STRATUM = "rule"

Side = Literal["win", "loss", "tie"]
#: Bins of log(length of the challenger's output / the champion's), clipped to +-LOG_RATIO_MAX.
LOG_RATIO_MAX = 2.0
LENGTH_BINS = 41


@dataclass
class Tally:
    wins: int = 0
    losses: int = 0
    ties: int = 0

    def add(self, side: Side) -> None:
        if side == "win":
            self.wins += 1
        elif side == "loss":
            self.losses += 1
        else:
            self.ties += 1

    @property
    def pairs(self) -> int:
        return self.wins + self.losses + self.ties

    @property
    def decisive(self) -> int:
        return self.wins + self.losses

    def win_rate(self) -> tuple[float, float, float] | None:
        """(rate, low, high): the challenger's share of decisive pairs with its Wilson 95% interval."""
        if not self.decisive:
            return None
        low, high = wilson_interval(self.wins, self.decisive)
        return self.wins / self.decisive, low, high


def length_bin(challenger_chars: int, champion_chars: int) -> int:
    ratio = math.log((1 + challenger_chars) / (1 + champion_chars))
    ratio = max(-LOG_RATIO_MAX, min(LOG_RATIO_MAX, ratio))
    return round((ratio + LOG_RATIO_MAX) / (2 * LOG_RATIO_MAX) * (LENGTH_BINS - 1))


def bin_centre(index: int) -> float:
    return -LOG_RATIO_MAX + index * (2 * LOG_RATIO_MAX) / (LENGTH_BINS - 1)


@dataclass(frozen=True, slots=True)
class LengthControlled:
    """The win rate at equal length, and how much one unit of log length ratio moves the log-odds."""

    rate: float
    length_coefficient: float
    decisive: int


def length_controlled(
    wins_by_bin: list[int], losses_by_bin: list[int], min_decisive: int = 20
) -> LengthControlled | None:
    """Fit P(win) = sigmoid(a + b * log_ratio) on the binned outcomes; the rate is sigmoid(a).

    A small ridge on both coefficients keeps the fit finite when one length side always wins."""
    n = sum(wins_by_bin) + sum(losses_by_bin)
    if n < min_decisive:
        return None
    x = np.array([bin_centre(i) for i in range(LENGTH_BINS)])
    w = np.array(wins_by_bin, dtype=float)
    lo = np.array(losses_by_bin, dtype=float)

    def loss(theta: np.ndarray) -> float:
        z = theta[0] + theta[1] * x
        # -log-likelihood: wins contribute log sigmoid(z), losses log sigmoid(-z).
        return float(np.sum(w * np.logaddexp(0.0, -z) + lo * np.logaddexp(0.0, z)) + 0.5 * 0.01 * np.sum(theta**2))

    fit = minimize(loss, np.zeros(2), method="BFGS")
    a, b = (float(v) for v in fit.x)
    return LengthControlled(rate=1.0 / (1.0 + math.exp(-a)), length_coefficient=b, decisive=n)


@dataclass(frozen=True, slots=True)
class Strength:
    model: str
    strength: float  # Bradley-Terry log-strength, centred on 0 over the models
    low: float
    high: float
    comparisons: int


def bradley_terry(
    wins: Mapping[tuple[str, str], int], *, bootstrap: int = 200, seed: int = 0, regularisation: float = 0.01
) -> list[Strength]:
    """Strengths from (winner, loser) -> count, with bootstrap percentile 95% intervals (comparisons
    resampled with replacement). Empty when fewer than two models have met."""
    models = sorted({m for pair in wins for m in pair})
    if len(models) < 2:
        return []
    index = {m: i for i, m in enumerate(models)}
    matrix = np.zeros((len(models), len(models)))
    for (winner, loser), count in wins.items():
        matrix[index[winner], index[loser]] += count

    def fit(counts: np.ndarray) -> np.ndarray:
        params = np.asarray(choix.ilsr_pairwise_dense(counts, alpha=regularisation), dtype=float)
        centred: np.ndarray = params - params.mean()
        return centred

    point = fit(matrix)
    total = int(matrix.sum())
    flat = matrix.ravel() / total
    rng = np.random.default_rng(seed)
    samples = np.array(
        [fit(rng.multinomial(total, flat).reshape(matrix.shape).astype(float)) for _ in range(bootstrap)]
    )
    low, high = np.percentile(samples, [2.5, 97.5], axis=0)
    played = matrix.sum(axis=0) + matrix.sum(axis=1)
    return [Strength(m, float(point[i]), float(low[i]), float(high[i]), int(played[i])) for m, i in index.items()]


@dataclass
class Scoreboard:
    """One experiment's counts. Serialisable (``to_dict``/``from_dict``) for a changelog-backed table."""

    overall: Tally = field(default_factory=Tally)
    by_rubric: dict[str, Tally] = field(default_factory=dict)
    by_traffic: dict[str, Tally] = field(default_factory=dict)
    #: Pairs a person decided (review), counted apart from the judge's.
    human: Tally = field(default_factory=Tally)
    wins_by_length: list[int] = field(default_factory=lambda: [0] * LENGTH_BINS)
    losses_by_length: list[int] = field(default_factory=lambda: [0] * LENGTH_BINS)
    #: "winner model|loser model" -> count, for Bradley-Terry.
    model_wins: dict[str, int] = field(default_factory=dict)
    #: The human basis, overall and per split.
    human_basis: HumanBasis = field(default_factory=HumanBasis)
    human_basis_by_rubric: dict[str, HumanBasis] = field(default_factory=dict)
    human_basis_by_traffic: dict[str, HumanBasis] = field(default_factory=dict)
    #: Labels left out of the human basis: not drawn by the recorded sampling design (``agents.scores.events``).
    unweighted_labels: int = 0
    #: "<tier or ->|<outcome>" -> [pairs, US dollars over the priced ones, pairs with an unknown price].
    spend: dict[str, list[float]] = field(default_factory=dict)

    def add_spend(self, tier: str | None, outcome: str, cost_usd: float | None) -> None:
        """One decided pair's cost (None: a price was unknown; counted, never as free)."""
        row = self.spend.setdefault(f"{tier or '-'}|{outcome}", [0, 0.0, 0])
        row[0] += 1
        if cost_usd is None:
            row[2] += 1
        else:
            row[1] += cost_usd

    def add_judged(
        self,
        side: Side,
        *,
        rubric: str,
        traffic: str,
        lengths: tuple[int, int] | None = None,
        models: tuple[str, str] | None = None,
    ) -> None:
        """One automatic outcome. ``lengths`` and ``models`` are (challenger, champion)."""
        self.overall.add(side)
        self.by_rubric.setdefault(rubric, Tally()).add(side)
        self.by_traffic.setdefault(traffic, Tally()).add(side)
        if side != "tie" and lengths is not None:
            b = length_bin(*lengths)
            (self.wins_by_length if side == "win" else self.losses_by_length)[b] += 1
        if side != "tie" and models is not None:
            challenger, champion = models
            key = f"{challenger}|{champion}" if side == "win" else f"{champion}|{challenger}"
            self.model_wins[key] = self.model_wins.get(key, 0) + 1

    def add_human(self, side: Side) -> None:
        self.human.add(side)

    def _bases(self, rubric: str, traffic: str) -> tuple[HumanBasis, ...]:
        return (
            self.human_basis,
            self.human_basis_by_rubric.setdefault(rubric, HumanBasis()),
            self.human_basis_by_traffic.setdefault(traffic, HumanBasis()),
        )

    def add_outcome(
        self,
        f: float,
        *,
        stratum: str,
        sampled: bool,
        rubric: str,
        traffic: str,
        inclusion_probability: float | None = None,
    ) -> None:
        """A pair's final outcome in the human basis: ``f`` the judge's, ``sampled`` a label is expected
        (drawn with ``inclusion_probability``, which the worst-case bounds for missing labels need).

        A rule's verdict (stratum ``rule``) is a pair whose human outcome is known: the seeds' rules (an
        empty output loses, identical outputs tie) are what a person would answer, and nobody is asked. It
        counts in the estimand with no uncertainty, and is not a label (so no rule pair ever counts towards
        the labels a decision needs)."""
        for basis in self._bases(rubric, traffic):
            if stratum == RULE_STRATUM:
                basis.add_known(f)
            else:
                basis.add_pair(f, stratum, sampled, inclusion_probability)

    def add_label(
        self, f: float, y: float, *, stratum: str, inclusion_probability: float | None, rubric: str, traffic: str
    ) -> None:
        """A person's label ``y`` in the human basis; without a probability it is only counted (unweighted)."""
        if inclusion_probability is None:
            self.unweighted_labels += 1
            return
        for basis in self._bases(rubric, traffic):
            basis.add_label(f, y, stratum, inclusion_probability)

    def add_expired(self, *, rubric: str, traffic: str) -> None:
        """An audit sample whose label never came."""
        for basis in self._bases(rubric, traffic):
            basis.add_expired()

    def length_controlled(self) -> LengthControlled | None:
        return length_controlled(self.wins_by_length, self.losses_by_length)

    def strengths(self, bootstrap: int = 200) -> list[Strength]:
        pairs = {tuple(k.split("|", 1)): v for k, v in self.model_wins.items()}
        return bradley_terry({(a, b): n for (a, b), n in pairs.items()}, bootstrap=bootstrap)

    def to_dict(self) -> dict[str, object]:
        def tally(t: Tally) -> list[int]:
            return [t.wins, t.losses, t.ties]

        return {
            "overall": tally(self.overall),
            "by_rubric": {k: tally(v) for k, v in self.by_rubric.items()},
            "by_traffic": {k: tally(v) for k, v in self.by_traffic.items()},
            "human": tally(self.human),
            "wins_by_length": self.wins_by_length,
            "losses_by_length": self.losses_by_length,
            "model_wins": self.model_wins,
            "human_basis": {
                "overall": self.human_basis.to_dict(),
                "by_rubric": {k: v.to_dict() for k, v in self.human_basis_by_rubric.items()},
                "by_traffic": {k: v.to_dict() for k, v in self.human_basis_by_traffic.items()},
                "unweighted_labels": self.unweighted_labels,
            },
            "spend": self.spend,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scoreboard:
        def tally(v: Sequence[int]) -> Tally:
            return Tally(int(v[0]), int(v[1]), int(v[2]))

        human: Mapping[str, Any] = data.get("human_basis") or {}
        return cls(
            overall=tally(data["overall"]),
            by_rubric={str(k): tally(v) for k, v in data["by_rubric"].items()},
            by_traffic={str(k): tally(v) for k, v in data["by_traffic"].items()},
            human=tally(data["human"]),
            wins_by_length=[int(x) for x in data["wins_by_length"]],
            losses_by_length=[int(x) for x in data["losses_by_length"]],
            model_wins={str(k): int(v) for k, v in data["model_wins"].items()},
            # A board stored before the human basis existed loads with empty bases.
            human_basis=HumanBasis.from_dict(human.get("overall", {})),
            human_basis_by_rubric={str(k): HumanBasis.from_dict(v) for k, v in human.get("by_rubric", {}).items()},
            human_basis_by_traffic={str(k): HumanBasis.from_dict(v) for k, v in human.get("by_traffic", {}).items()},
            unweighted_labels=int(human.get("unweighted_labels", 0)),
            # A board stored before the spend table existed loads with an empty one.
            spend={str(k): [int(v[0]), float(v[1]), int(v[2])] for k, v in data.get("spend", {}).items()},
        )
