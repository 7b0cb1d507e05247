"""The human basis's counts: per sampling stratum, the sums an estimate needs, kept as score events arrive."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

#: Labels a stratum needs before its own estimate is used (below it, the stratum's whole range is taken).
MIN_STRATUM_LABELS = 2


#: Labels in all before the confidence sequence may decide (its validity is asymptotic).
MIN_LABELS = 30


#: The number of labels at which the confidence sequence's radius is tightest (its mixture's tuning).
DEFAULT_TARGET_LABELS = 500


#: The forecast of labels still needed stops here ("more than this").
MAX_FORECAST_LABELS = 10_000_000


HumanDecision = Literal["promote", "reject", "continue"]


@dataclass
class StratumSums:
    """One stratum's running sums: every pair's judge outcome, and the labelled pairs' weighted moments
    (``w = 1/pi``). Everything the estimator needs, in constant space; adding is commutative, so the
    order in which pairs and labels arrive does not matter."""

    pairs: int = 0
    f: float = 0.0
    ff: float = 0.0
    labels: int = 0
    w: float = 0.0
    w2: float = 0.0
    wy: float = 0.0
    wf: float = 0.0
    w2y: float = 0.0
    w2f: float = 0.0
    w2yy: float = 0.0
    w2ff: float = 0.0
    w2yf: float = 0.0

    def add_pair(self, f: float) -> None:
        self.pairs += 1
        self.f += f
        self.ff += f * f

    def add_label(self, f: float, y: float, weight: float) -> None:
        w, w2 = weight, weight * weight
        self.labels += 1
        self.w += w
        self.w2 += w2
        self.wy += w * y
        self.wf += w * f
        self.w2y += w2 * y
        self.w2f += w2 * f
        self.w2yy += w2 * y * y
        self.w2ff += w2 * f * f
        self.w2yf += w2 * y * f


@dataclass
class HumanBasis:
    """The human basis of one experiment (or one of its splits): sums per sampling stratum.

    Serialisable (``to_dict``/``from_dict``) for a changelog-backed table. ``pending`` and ``expired``
    count audit samples whose label has not come (yet, or within the label's time to live): under the
    missing-at-random assumption they are unlabelled pairs of their stratum, and they are shown so a
    reader can judge that assumption.
    """

    strata: dict[str, StratumSums] = field(default_factory=dict)
    sampled: int = 0
    expired: int = 0
    #: Pairs whose human outcome is known without asking (a rule settled them: an empty output loses,
    #: identical outputs tie), and the sum of those outcomes: a part of the estimand with no uncertainty,
    #: which is neither a label nor a pair of any sampled stratum.
    known_pairs: int = 0
    known_total: float = 0.0
    #: Per stratum, the drawn pairs (a label expected: audit samples, review pairs) in the label-side sums
    #: with the person's outcome left at 0: what is drawn but not labelled, :meth:`missing`, gives the bounds
    #: that assume nothing about the labels that have not come (:func:`worst_case`).
    drawn: dict[str, StratumSums] = field(default_factory=dict)

    def add_known(self, y: float) -> None:
        """A pair whose human outcome ``y`` is known by rule (the judge's outcome is the same)."""
        _check_outcome(y)
        self.known_pairs += 1
        self.known_total += float(y)

    def add_pair(
        self, f: float, stratum: str, sampled: bool = False, inclusion_probability: float | None = None
    ) -> None:
        """A pair's final outcome as the judge saw it; ``sampled``: a label is expected for it, drawn with
        ``inclusion_probability`` (given, its missing label enters :func:`worst_case`)."""
        _check_outcome(f)
        self.strata.setdefault(stratum, StratumSums()).add_pair(float(f))
        self.sampled += sampled
        if sampled and inclusion_probability is not None:
            _check_probability(inclusion_probability)
            self.drawn.setdefault(stratum, StratumSums()).add_label(float(f), 0.0, 1.0 / float(inclusion_probability))

    def missing(self, stratum: str) -> StratumSums:
        """The drawn pairs of ``stratum`` whose label has not come (pending or expired), label-side sums with
        the person's outcome at 0 (never below 0: a label whose draw was not recorded is not subtracted)."""
        drawn, got = self.drawn.get(stratum), self.strata.get(stratum)
        if drawn is None:
            return StratumSums()
        got = got or StratumSums()
        return StratumSums(
            labels=max(0, drawn.labels - got.labels),
            w=max(0.0, drawn.w - got.w),
            w2=max(0.0, drawn.w2 - got.w2),
            wf=max(0.0, drawn.wf - got.wf),
            w2f=max(0.0, drawn.w2f - got.w2f),
            w2ff=max(0.0, drawn.w2ff - got.w2ff),
        )

    def completed(self, y: float) -> HumanBasis:
        """This basis as if every missing label had come back ``y`` (0: the champion, 1: the challenger)."""
        strata = {}
        for name, sums in self.strata.items():
            gap = self.missing(name)
            done = StratumSums(**asdict(sums))
            done.labels += gap.labels
            for k in ("w", "w2", "wf", "w2f", "w2ff"):
                setattr(done, k, getattr(done, k) + getattr(gap, k))
            done.wy += y * gap.w
            done.w2y += y * gap.w2
            done.w2yy += y * y * gap.w2
            done.w2yf += y * gap.w2f
            strata[name] = done
        return HumanBasis(strata, self.sampled, self.expired, self.known_pairs, self.known_total, dict(self.drawn))

    def add_label(self, f: float, y: float, stratum: str, inclusion_probability: float) -> None:
        """A person's label ``y`` on a pair whose judge outcome was ``f``, drawn with ``inclusion_probability``."""
        _check_outcome(f)
        _check_outcome(y)
        _check_probability(inclusion_probability)
        self.strata.setdefault(stratum, StratumSums()).add_label(float(f), float(y), 1.0 / float(inclusion_probability))

    def add_expired(self) -> None:
        self.expired += 1

    @property
    def pairs(self) -> int:
        return sum(s.pairs for s in self.strata.values()) + self.known_pairs

    @property
    def labels(self) -> int:
        return sum(s.labels for s in self.strata.values())

    @property
    def pending(self) -> int:
        """Samples still waiting for a label (not expired)."""
        return max(0, self.sampled - self.labels - self.expired)

    def judge_rate(self) -> float | None:
        """The judge basis on the same estimand: the mean judge outcome over all pairs."""
        n = self.pairs
        return (sum(s.f for s in self.strata.values()) + self.known_total) / n if n else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "strata": {k: asdict(v) for k, v in self.strata.items()},
            "sampled": self.sampled,
            "expired": self.expired,
            "known_pairs": self.known_pairs,
            "known_total": self.known_total,
            "drawn": {k: asdict(v) for k, v in self.drawn.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HumanBasis:
        return cls(
            strata={str(k): StratumSums(**v) for k, v in data.get("strata", {}).items()},
            sampled=int(data.get("sampled", 0)),
            expired=int(data.get("expired", 0)),
            known_pairs=int(data.get("known_pairs", 0)),
            known_total=float(data.get("known_total", 0.0)),
            drawn={str(k): StratumSums(**v) for k, v in data.get("drawn", {}).items()},
        )


def _check_probability(value: float) -> None:
    if not 0.0 < value <= 1.0:
        raise ValueError(f"inclusion probability must be in (0, 1], got {value!r}")


def _check_outcome(value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"an outcome must be in [0, 1], got {value!r}")
