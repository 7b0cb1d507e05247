"""The window sums: counts and sums only, so every statistic of a snapshot is computed from them alone."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from pairjudge.agents.audit.ambiguity import AmbiguityCounts
from pairjudge.agents.stats import relative_label
from pairjudge.schemas.audit import (
    AuditObservation,
    DecisionRecord,
)
from pairjudge.schemas.events import HumanLabel
from pairjudge.schemas.outcomes import OUTCOMES
from pairjudge.schemas.pair import TIE

#: Equal-width reliability bins over [0, 1].
CALIBRATION_BINS = 10


@dataclass
class WindowStats:
    """Sums for one series over one tumbling window. Counts and sums only (see the module docstring)."""

    pairs: int = 0  # primary-stage decisions
    primary_verdicts: int = 0
    tiebreaks: int = 0  # primary decisions that sent the pair to the tie-break
    tiebreak_verdicts: int = 0
    reviews: int = 0  # final reviews, at either stage (audit copies are not outcomes)
    flips: int = 0
    both_valid: int = 0
    calls: int = 0
    invalid_replies: int = 0
    decisive_orderings: int = 0
    position_a_wins: int = 0
    model_mismatches: int = 0
    last_mismatched_model: str | None = None
    #: "judge|human" (relative labels) -> count, for human-labelled automatic decisions (not canaries).
    confusion: dict[str, int] = field(default_factory=dict)
    #: Per calibration bin: [count, sum of confidence, count agreeing].
    bins: list[list[float]] = field(default_factory=lambda: [[0, 0.0, 0] for _ in range(CALIBRATION_BINS)])
    brier_sum: float = 0.0
    judge_longer: int = 0
    human_longer: int = 0
    length_decided: int = 0  # labelled pairs of unequal length where neither side said TIE
    canary_labels: int = 0
    canary_correct: int = 0
    #: Labels on pairs the judge escalated without a winner (review): decided by a person, not compared.
    human_decided: int = 0
    #: The human ceiling: "first|second" (relative labels) -> count, over audit pairs labelled by two
    #: different reviewers (``second_label`` observations). The same statistics as the judge's, taken
    #: between people: a judge is held to agreeing with people about as well as they agree with each other.
    human_confusion: dict[str, int] = field(default_factory=dict)
    #: Which dimensions and guide rules the judge is ambiguous on (``agents.audit.ambiguity``): per dimension
    #: name [orders compared, orders disagreeing, human compared, human disagreeing]; per rule id [cited,
    #: cited in order-disagreeing pairs, cited in labelled pairs, cited where the human disagreed].
    dimension_counts: dict[str, list[int]] = field(default_factory=dict)
    rule_counts: dict[str, list[int]] = field(default_factory=dict)
    #: Decisions per outcome kind whose registry entry names an audit count (``OutcomeEntry.audit_count``); the
    #: first kinds have their own sums above. Left out of the JSON while empty, so a window or delta without such
    #: a kind is what it was before the field, and what an older worker reads.
    outcome_counts: dict[str, int] = field(default_factory=dict)
    #: Labels on primary verdicts whose two orders agreed (the pairs the judge decided alone), and how many of
    #: them the person agreed with: the agreement guard's counts (``agents.audit.agreement_guard``). Left out of
    #: the JSON while zero, like ``outcome_counts``.
    orders_agreed_labels: int = 0
    orders_agreed_correct: int = 0
    #: The reliability plot's two curves, over labelled verdicts whose record carries both confidences (token
    #: probabilities: docs/guides/judges.md): per calibration bin [count, sum of confidence, count agreeing], by
    #: the token probability and by the stated confidence. Left out of ``as_json`` while empty, like
    #: ``outcome_counts``, so an older worker still reads the windows of a deployment without token probabilities.
    token_bins: list[list[float]] = field(default_factory=lambda: [[0, 0.0, 0] for _ in range(CALIBRATION_BINS)])
    stated_bins: list[list[float]] = field(default_factory=lambda: [[0, 0.0, 0] for _ in range(CALIBRATION_BINS)])
    alerts_raised: list[str] = field(default_factory=list)
    final_published: bool = False

    # -- adding ---------------------------------------------------------------------------------------

    def add(self, observation: AuditObservation) -> None:
        record = observation.record
        if record.rule:
            return  # settled before any judge call: nothing about the judge to count
        if observation.kind == "decision":
            self._add_decision(record)
        elif observation.kind == "second_label":
            if observation.label is not None and observation.first_label is not None:
                self._add_second_opinion(record, observation.first_label, observation.label)
        elif observation.label is not None:
            self._add_labelled(record, observation.label)

    def _add_decision(self, record: DecisionRecord) -> None:
        if record.stage == "primary":
            self.pairs += 1
            self.primary_verdicts += record.outcome == "verdict"
            self.tiebreaks += record.outcome == "tiebreak"
            self.flips += record.flip
            self.both_valid += record.both_valid
            self.decisive_orderings += record.decisive_orderings
            self.position_a_wins += record.position_a_wins
            self.ambiguity.add_decision(record)  # the primary facts, once per pair (the tie-break record repeats them)
        else:
            self.tiebreak_verdicts += record.outcome == "verdict"
        self.reviews += record.outcome == "review"
        if OUTCOMES[record.outcome].audit_count is not None:
            self.outcome_counts[record.outcome] = self.outcome_counts.get(record.outcome, 0) + 1
        self.calls += record.calls
        self.invalid_replies += record.invalid_replies
        if record.model_mismatch is not None:
            self.model_mismatches += 1
            self.last_mismatched_model = record.model_mismatch

    def _add_labelled(self, record: DecisionRecord, label: HumanLabel) -> None:
        if not record.canary:
            # Escalated pairs too: a dimension's winner is compared with the person's, judge's winner or not.
            self.ambiguity.add_labelled(record, label.winner, relative_label(record.candidates, label.winner))
        if record.judge_winner is None:
            self.human_decided += not record.canary
            return
        agrees = record.judge_winner == label.winner
        if record.canary:
            # Canaries measure the judge against known answers, in their own series of figures.
            self.canary_labels += 1
            self.canary_correct += agrees
            return
        if record.stage == "primary" and record.auto_decided and not record.flip:
            self.orders_agreed_labels += 1
            self.orders_agreed_correct += agrees
        judge = relative_label(record.candidates, record.judge_winner)
        human = relative_label(record.candidates, label.winner)
        cell = f"{judge}|{human}"
        self.confusion[cell] = self.confusion.get(cell, 0) + 1
        if record.confidence is not None:
            row = self.bins[min(int(record.confidence * CALIBRATION_BINS), CALIBRATION_BINS - 1)]
            row[0] += 1
            row[1] += record.confidence
            row[2] += agrees
            self.brier_sum += (record.confidence - (1.0 if agrees else 0.0)) ** 2
        stated = record.stated
        if record.token_confidence is not None and stated is not None:
            for bins, value in ((self.token_bins, record.token_confidence), (self.stated_bins, stated)):
                row = bins[min(int(value * CALIBRATION_BINS), CALIBRATION_BINS - 1)]
                row[0] += 1
                row[1] += value
                row[2] += agrees
        if record.longer is not None and human != TIE:
            self.length_decided += 1
            self.judge_longer += judge == record.longer
            self.human_longer += human == record.longer

    def _add_second_opinion(self, record: DecisionRecord, first: HumanLabel, second: HumanLabel) -> None:
        """One audit pair's two human labels, as relative labels (so pairs of different candidates add up)."""
        cell = f"{relative_label(record.candidates, first.winner)}|{relative_label(record.candidates, second.winner)}"
        self.human_confusion[cell] = self.human_confusion.get(cell, 0) + 1

    def merge(self, other: WindowStats) -> None:
        """Add ``other``'s sums to these: the same sums as adding its observations here one by one.

        How a worker's observations reach their series (``agents.audit.deltas``): summed where they are
        joined, then merged here, one delta per series and flush instead of one event per pair. Floats add
        in another order, so a sum may differ from the one-by-one total in its last bits. The window's own
        bookkeeping (``alerts_raised``, ``final_published``) is the owner's, not added.
        """
        for f in fields(self):
            if f.name in _OWNER_FIELDS:
                continue
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if f.name == "last_mismatched_model":
                if theirs is not None:
                    self.last_mismatched_model = theirs
            elif isinstance(mine, dict):
                _merge_counts(mine, theirs)
            elif isinstance(mine, list):
                for row, more in zip(mine, theirs, strict=True):
                    for i, value in enumerate(more):
                        row[i] += value
            else:
                setattr(self, f.name, mine + theirs)

    # -- reading --------------------------------------------------------------------------------------

    @property
    def ambiguity(self) -> AmbiguityCounts:
        """The per-dimension and per-rule counts, as a view over this window's own dicts."""
        return AmbiguityCounts(self.dimension_counts, self.rule_counts)

    @property
    def labels(self) -> int:
        return sum(self.confusion.values())

    @property
    def verdicts(self) -> int:
        return self.primary_verdicts + self.tiebreak_verdicts

    def label_lists(self) -> tuple[list[str], list[str]]:
        """The (judge, human) relative labels the confusion counts stand for, for kappa."""
        return _lists(self.confusion)

    def agreement(self) -> float | None:
        return rate_of(_agreeing(self.confusion), self.labels)

    def orders_agreed_agreement(self) -> float | None:
        """Agreement with people on the labelled pairs the judge decided alone, its two orders agreeing."""
        return rate_of(self.orders_agreed_correct, self.orders_agreed_labels)

    @property
    def human_pairs(self) -> int:
        """Audit pairs with a second opinion counted in this window."""
        return sum(self.human_confusion.values())

    def human_label_lists(self) -> tuple[list[str], list[str]]:
        """The (first, second) human relative labels the human-human counts stand for, for kappa.

        Cohen's kappa treats "the first reviewer" and "the second reviewer" as the two raters, though
        they are different people from pair to pair: the same statistic as the judge's, so the two are
        comparable (and kappa is symmetric in its raters, so which one labelled first does not matter).
        """
        return _lists(self.human_confusion)

    def human_agreement(self) -> float | None:
        return rate_of(_agreeing(self.human_confusion), self.human_pairs)

    def calibrated_count(self) -> int:
        return int(sum(row[0] for row in self.bins))

    def ece(self) -> float | None:
        n = self.calibrated_count()
        if n == 0:
            return None
        return math.fsum(row[0] / n * abs(row[2] / row[0] - row[1] / row[0]) for row in self.bins if row[0])

    def brier(self) -> float | None:
        n = self.calibrated_count()
        return self.brier_sum / n if n else None

    def as_json(self) -> dict[str, object]:
        """The fields as JSON-ready values: what ``dataclasses.asdict`` gives (``outcome_counts`` only when it
        counts something), without its deep copy.

        Every field is a JSON value already (numbers, strings, a dict of counts, lists of lists), and
        the result is only ever encoded at once; asdict's recursive copy of the bins was most of the
        cost of storing a window, once per observation.
        """
        body = {f.name: getattr(self, f.name) for f in fields(self)}
        if not self.outcome_counts:
            del body["outcome_counts"]  # as before the field: what an older worker reads (the field's comment)
        if not self.orders_agreed_labels:
            del body["orders_agreed_labels"], body["orders_agreed_correct"]  # likewise
        if not any(row[0] for row in self.token_bins):
            del body["token_bins"], body["stated_bins"]  # likewise
        return body


#: What a window keeps about itself rather than sums: never added by ``WindowStats.merge``.
_OWNER_FIELDS = frozenset({"alerts_raised", "final_published"})


def _merge_counts(mine: dict[str, Any], theirs: dict[str, Any]) -> None:
    """Add count cells (``int``) or rows of counts (``list[int]``) of ``theirs`` into ``mine``."""
    for key, value in theirs.items():
        if isinstance(value, list):
            row = mine.setdefault(key, [0] * len(value))
            for i, count in enumerate(value):
                row[i] += count
        else:
            mine[key] = mine.get(key, 0) + value


def _lists(confusion: dict[str, int]) -> tuple[list[str], list[str]]:
    """The two raters' label lists that "a|b" -> count cells stand for."""
    first: list[str] = []
    second: list[str] = []
    for cell, count in sorted(confusion.items()):
        a, b = cell.split("|")
        first.extend([a] * count)
        second.extend([b] * count)
    return first, second


def _agreeing(confusion: dict[str, int]) -> int:
    return sum(count for cell, count in confusion.items() if len(set(cell.split("|"))) == 1)


def rate_of(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None
