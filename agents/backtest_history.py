"""A deployment's own history as backtest rows (``schemas.backtest.RecordedPair``).

Every outcome pairjudge publishes carries the orderings that led to it (``OrderingResult``: the position the
judge named, its confidence, whether the reply was valid, what the calls cost). A verdict of the primary stage
carries the primary's two orders; a verdict of the tie-break, and a review from it, carry the primary's two and
then the tie-break's two. People's labels come from the labels topic. This module turns those events into rows;
reading the topics is the edge's (``streams.cli.backtest``).

What history cannot give back: a jury's or a cascade's answers (more than one judge per order; such pairs are
left out and counted), a pair sent to review before any judge call (an injection suspect, a rule, a spending cap:
no orders to replay), and, for a pair whose tie-break was never asked, the tie-break's answer. A tie-break reply
whose winner goes against its own criteria is recorded as unreadable (the core could not use it either), and one
whose criteria come out equal as a tie.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pairjudge.agents.tiebreak import RECOMPUTED_KEY
from pairjudge.schemas.backtest import HumanLabel, RecordedAnswer, RecordedOrders, RecordedPair
from pairjudge.schemas.events import HumanLabel as LabelEvent
from pairjudge.schemas.events import OrderingResult, PairVerdict, ReviewRequest
from pairjudge.schemas.pair import TIE, CandidatePair, RiskLevel

__all__ = ["History", "recorded_answer"]


def recorded_answer(o: OrderingResult) -> RecordedAnswer:
    if not o.valid or o.raw_winner is None:
        return RecordedAnswer(valid=False, cost_usd=o.cost_usd)
    winner: Literal["A", "B", "tie"] = "tie" if o.raw_winner == "TIE" else o.raw_winner
    recomputed = o.dimension_scores.get(RECOMPUTED_KEY)
    if recomputed is not None:
        # A tie-break reply: its own criteria decide, as the core recomputes them. Equal scores are the judge
        # finding no difference (a tie); a winner against its own criteria is a reply the core could not use.
        a, b = recomputed[o.shown_as_a], recomputed[o.shown_as_b]
        if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9):
            winner = "tie"
        elif winner != ("A" if a > b else "B"):
            return RecordedAnswer(valid=False, cost_usd=o.cost_usd)
    return RecordedAnswer(winner=winner, confidence=o.confidence, cost_usd=o.cost_usd)


def _orders(orderings: Sequence[OrderingResult]) -> RecordedOrders | None:
    if len(orderings) != 2 or [o.order_shown for o in orderings] != ["AB", "BA"]:
        return None
    return RecordedOrders(ab=recorded_answer(orderings[0]), ba=recorded_answer(orderings[1]))


@dataclass
class _Seen:
    orderings: tuple[OrderingResult, ...]
    first: str
    second: str
    experiment: str | None
    jury: bool


@dataclass
class History:
    """The events of a deployment, added in any order; :meth:`rows` gives the backtest rows."""

    _outcomes: dict[str, _Seen] = field(default_factory=dict)
    _risk: dict[str, RiskLevel | None] = field(default_factory=dict)
    _labels: dict[str, list[str]] = field(default_factory=dict)
    #: Outcomes left out: a jury's or a cascade's (several judges per order), or one with no judge call.
    skipped: int = 0

    def add_pair(self, pair: CandidatePair) -> None:
        self._risk[pair.pair_id] = pair.risk_level

    def add_verdict(self, verdict: PairVerdict) -> None:
        if verdict.decided_by in ("rule", "human"):
            return  # no judge's answers to replay
        self._add(verdict.pair_id, verdict.orderings, verdict.experiment_id, bool(verdict.jury))

    def add_review(self, review: ReviewRequest) -> None:
        if review.audit:
            return  # a copy of a verdict, which carries the same orderings
        self._risk.setdefault(review.pair_id, review.pair.risk_level)
        self._add(review.pair_id, review.orderings, review.pair.metadata.experiment_id, False)

    def add_label(self, label: LabelEvent) -> None:
        self._labels.setdefault(label.pair_id, []).append(label.winner)

    def _add(self, pair_id: str, orderings: tuple[OrderingResult, ...], experiment: str | None, jury: bool) -> None:
        if not orderings:
            self.skipped += 1  # decided before any judge call: nothing to replay
            return
        first, second = orderings[0].shown_as_a, orderings[0].shown_as_b
        self._outcomes[pair_id] = _Seen(orderings, first, second, experiment, jury or len(orderings) not in (2, 4))

    def rows(self) -> list[RecordedPair]:
        out: list[RecordedPair] = []
        for pair_id, seen in self._outcomes.items():
            primary = _orders(seen.orderings[:2])
            tiebreak = _orders(seen.orderings[2:4]) if len(seen.orderings) == 4 else None
            if seen.jury or primary is None or (len(seen.orderings) == 4 and tiebreak is None):
                self.skipped += 1
                continue
            labels = tuple(self._relative(w, seen) for w in self._labels.get(pair_id, ()))
            out.append(
                RecordedPair(
                    pair_id=pair_id,
                    experiment=seen.experiment,
                    risk_level=self._risk.get(pair_id),
                    labels=tuple(label for label in labels if label is not None),
                    primary=primary,
                    tiebreak=tiebreak,
                )
            )
        return out

    @staticmethod
    def _relative(winner: str, seen: _Seen) -> HumanLabel | None:
        if winner == TIE:
            return "tie"
        if winner == seen.first:
            return "first"
        return "second" if winner == seen.second else None
