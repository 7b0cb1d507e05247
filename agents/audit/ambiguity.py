"""Which dimensions and style-guide rules the judge is ambiguous on (docs/guides/drift-audit.md).

Two halves, both pure:

- **Facts per pair** (:func:`dimension_facts`, :func:`rules_cited`), put on the ``DecisionRecord``: per
  dimension the primary judge scored in both orders, whether the orders named different winners and
  the winner they agree on; the ids of the guide's rules the justifications cite. No text.
- **Counts per window** (:class:`AmbiguityCounts`): plain ``name -> [counts]`` dicts inside ``WindowStats``,
  added once per observation (the primary stage's decision, the labelled final decision), merged by
  adding (:meth:`AmbiguityCounts.merge`, associative and commutative), ranked into the snapshot's
  ``AmbiguitySnapshot`` with Wilson intervals.

Names come from the rubric (validated replies name exactly the rubric's criteria), and a series may see
many rubrics, so a window keeps at most ``MAX_KEYS`` names per table: beyond that the names that sort last
are folded into ``OTHER``. Which names are kept depends only on the set of names seen, never on the
order they came in, so the fold keeps the merge associative.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

from pairjudge.agents.guide_rules import parse_guide
from pairjudge.agents.stats import wilson_interval
from pairjudge.schemas.audit import (
    MAX_DIMENSION_FACTS,
    MAX_RANKED,
    AmbiguitySnapshot,
    DecisionRecord,
    DimensionAmbiguity,
    DimensionFact,
    RelativeWinner,
    RuleCitations,
)
from pairjudge.schemas.events import OrderingResult
from pairjudge.schemas.pair import TIE, CandidateId, LabelWinner
from pairjudge.schemas.rubric import InlineRubric, ToneStyleRubric

#: Distinct dimension names, and distinct rule ids, one window keeps before folding the rest into ``OTHER``.
MAX_KEYS = 128
OTHER = "(other)"

# Index of each count in a dimension's list, and in a rule's.
ORDERS_COMPARED, ORDERS_DISAGREE, HUMAN_COMPARED, HUMAN_DISAGREE = range(4)
CITED, CITED_ORDER_DISAGREEING, CITED_LABELLED, CITED_HUMAN_DISAGREEING = range(4)


# --- facts per pair ---------------------------------------------------------------------------------


def _relative(scores: dict[str, float], candidates: tuple[CandidateId, CandidateId]) -> RelativeWinner | None:
    """The dimension's winner in one ordering: the higher-scored candidate, "TIE" on equal scores."""
    first, second = (scores.get(c) for c in candidates)
    if first is None or second is None:
        return None
    if first == second:
        return "TIE"
    return "first" if first > second else "second"


def _order_pairs(orderings: Sequence[OrderingResult]) -> list[tuple[OrderingResult, OrderingResult]]:
    """Each judge's (AB, BA) orderings: a stage records them judge by judge, AB then BA."""
    pairs = []
    for ab, ba in zip(orderings[::2], orderings[1::2], strict=False):
        if ab.order_shown == "AB" and ba.order_shown == "BA":
            pairs.append((ab, ba))
    return pairs


def dimension_facts(
    orderings: Sequence[OrderingResult], candidates: tuple[CandidateId, CandidateId]
) -> tuple[DimensionFact, ...]:
    """Per dimension scored by both valid orders of some judge: do the orders disagree on its winner, and
    the winner they all agree on (for a jury, every juror's two orders; one juror's flip is a disagreement).

    Dimensions are kept in the order the first judge reported them, at most ``MAX_DIMENSION_FACTS``.
    """
    winners: dict[str, list[tuple[RelativeWinner, RelativeWinner]]] = {}
    for ab, ba in _order_pairs(orderings):
        if not (ab.valid and ba.valid):
            continue
        for name, scores in ab.dimension_scores.items():
            other = ba.dimension_scores.get(name)
            if other is None or not 0 < len(name) <= 60:
                continue
            one, two = _relative(scores, candidates), _relative(other, candidates)
            if one is not None and two is not None:
                winners.setdefault(name, []).append((one, two))
    facts = []
    for name, seen in list(winners.items())[:MAX_DIMENSION_FACTS]:
        disagree = any(one != two for one, two in seen)
        named = {w for pair in seen for w in pair}
        facts.append(
            DimensionFact(name=name, orders_disagree=disagree, winner=named.pop() if len(named) == 1 else None)
        )
    return tuple(facts)


def rules_cited(rubric: InlineRubric | None, orderings: Iterable[OrderingResult]) -> tuple[str, ...]:
    """Ids of the tone rubric's style-guide rules the valid orderings' justifications cite (``agents.guide_rules``);
    empty for other rubrics, an unknown rubric, or a guide without explicit rules."""
    if not isinstance(rubric, ToneStyleRubric):
        return ()
    return parse_guide(rubric.style_guide).cited(o.justification for o in orderings if o.valid)


# --- counts per window ------------------------------------------------------------------------------


def _bump(table: dict[str, list[int]], key: str, index: int, by: int = 1) -> None:
    table.setdefault(key, [0, 0, 0, 0])[index] += by


def _fold(table: dict[str, list[int]]) -> None:
    """Keep the ``MAX_KEYS`` names that sort first (``OTHER`` aside); fold the rest into ``OTHER``."""
    names = sorted(k for k in table if k != OTHER)
    if len(names) <= MAX_KEYS:
        return
    for name in names[MAX_KEYS:]:
        for index, count in enumerate(table.pop(name)):
            _bump(table, OTHER, index, count)


def order_disagreeing(record: DecisionRecord) -> bool:
    """The pair's orders disagreed: a flip, or some dimension's winner differing between the orders."""
    return record.flip or any(f.orders_disagree for f in record.dimensions)


@dataclass
class AmbiguityCounts:
    """View over ``WindowStats.dimension_counts`` and ``rule_counts`` (the same dict objects): each name's
    four counts, indexed by the constants above."""

    dimensions: dict[str, list[int]] = field(default_factory=dict)
    rules: dict[str, list[int]] = field(default_factory=dict)

    def add_decision(self, record: DecisionRecord) -> None:
        """A primary-stage decision (counted once per pair): the orders' disagreement per dimension, and
        the rules its justifications cite."""
        for fact in record.dimensions:
            _bump(self.dimensions, fact.name, ORDERS_COMPARED)
            if fact.orders_disagree:
                _bump(self.dimensions, fact.name, ORDERS_DISAGREE)
        disagreeing = order_disagreeing(record)
        for rule in record.rules_cited:
            _bump(self.rules, rule, CITED)
            if disagreeing:
                _bump(self.rules, rule, CITED_ORDER_DISAGREEING)
        _fold(self.dimensions)
        _fold(self.rules)

    def add_labelled(self, record: DecisionRecord, human: LabelWinner, relative_human: str) -> None:
        """A labelled final decision (counted once per pair; not a canary): each dimension's agreed
        winner against the human's, and the cited rules against the judge's disagreement with the human."""
        if relative_human != TIE:
            for fact in record.dimensions:
                if fact.winner in ("first", "second"):
                    _bump(self.dimensions, fact.name, HUMAN_COMPARED)
                    if fact.winner != relative_human:
                        _bump(self.dimensions, fact.name, HUMAN_DISAGREE)
        if record.judge_winner is not None:
            for rule in record.rules_cited:
                _bump(self.rules, rule, CITED_LABELLED)
                if record.judge_winner != human:
                    _bump(self.rules, rule, CITED_HUMAN_DISAGREEING)
        _fold(self.dimensions)
        _fold(self.rules)

    def merge(self, other: AmbiguityCounts) -> AmbiguityCounts:
        """The sum of two windows' counts (a new value): associative and commutative, like adding numbers."""
        merged = AmbiguityCounts(
            {k: list(v) for k, v in self.dimensions.items()}, {k: list(v) for k, v in self.rules.items()}
        )
        for mine, theirs in ((merged.dimensions, other.dimensions), (merged.rules, other.rules)):
            for key, counts in theirs.items():
                for index, count in enumerate(counts):
                    _bump(mine, key, index, count)
            _fold(mine)
        return merged

    def snapshot(self, confidence: float = 0.95) -> AmbiguitySnapshot | None:
        """The ranked figures (``AmbiguitySnapshot``); None while no record had dimension facts or cited rules."""
        if not self.dimensions and not self.rules:
            return None
        z = NormalDist().inv_cdf(0.5 + confidence / 2)
        dimensions = [_dimension(name, counts, z) for name, counts in self.dimensions.items()]
        dimensions.sort(key=_dimension_rank)
        rules = [
            RuleCitations(rule_id=name, **dict(zip(_RULE_FIELDS, counts, strict=True)))
            for name, counts in self.rules.items()
        ]
        rules.sort(key=lambda r: (-r.cited_order_disagreeing - r.cited_human_disagreeing, -r.cited, r.rule_id))
        return AmbiguitySnapshot(
            confidence=confidence, dimensions=tuple(dimensions[:MAX_RANKED]), rules=tuple(rules[:MAX_RANKED])
        )


_RULE_FIELDS = ("cited", "cited_order_disagreeing", "cited_labelled", "cited_human_disagreeing")


def _rate(successes: int, n: int, z: float) -> tuple[float | None, float | None, float | None]:
    if n <= 0:
        return None, None, None
    low, high = wilson_interval(successes, n, z)
    return successes / n, low, high


def _dimension(name: str, counts: list[int], z: float) -> DimensionAmbiguity:
    order_rate, order_low, order_high = _rate(counts[ORDERS_DISAGREE], counts[ORDERS_COMPARED], z)
    human_rate, human_low, human_high = _rate(counts[HUMAN_DISAGREE], counts[HUMAN_COMPARED], z)
    return DimensionAmbiguity(
        name=name,
        orders_compared=counts[ORDERS_COMPARED],
        orders_disagree=counts[ORDERS_DISAGREE],
        order_disagreement_rate=order_rate,
        order_low=order_low,
        order_high=order_high,
        human_compared=counts[HUMAN_COMPARED],
        human_disagree=counts[HUMAN_DISAGREE],
        human_disagreement_rate=human_rate,
        human_low=human_low,
        human_high=human_high,
    )


def _dimension_rank(d: DimensionAmbiguity) -> tuple[float, float, float, float, str]:
    """Most ambiguous first: by the order-disagreement interval's lower end, then its rate, then the same
    for the human disagreement (a missing rate ranks last), then by name."""
    return (
        -(d.order_low or 0.0),
        -(d.order_disagreement_rate or 0.0),
        -(d.human_low or 0.0),
        -(d.human_disagreement_rate or 0.0),
        d.name,
    )


def counts_of(snapshot: AmbiguitySnapshot) -> AmbiguityCounts:
    """The counts a published ``AmbiguitySnapshot`` carries (its ranked entries), to add windows up in a report."""
    return AmbiguityCounts(
        {
            d.name: [d.orders_compared, d.orders_disagree, d.human_compared, d.human_disagree]
            for d in snapshot.dimensions
        },
        {r.rule_id: [getattr(r, f) for f in _RULE_FIELDS] for r in snapshot.rules},
    )
