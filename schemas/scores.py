"""The champion-challenger scoreboard's events: what is counted, what is published, and the gate.

Two bases, side by side, everywhere an answer is shown:

* the **judge basis** (``overall``, ``by_rubric``, ``by_traffic``, ``gate``): what the judge decided,
  the challenger's share of decisive automatic verdicts. It is the judge's opinion, not people's: a
  judge that prefers the challenger's style promotes it whatever people think.
* the **human basis** (``human_basis*``, ``human_gate``; ``agents.scores.human``): the challenger's win
  rate as people would judge it, estimated from every final outcome and the labels of the audit sample
  (prediction-powered inference per sampling stratum, each label weighted by ``1/inclusion_probability``).
  Its validity never rests on the judge agreeing with people: a poor judge only makes it need more labels.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Self

from pydantic import Field, model_validator

from pairjudge.schemas._base import Contract, Event
from pairjudge.schemas.pair import PairId, utc_now

Side = Literal["win", "loss", "tie"]
GateDecision = Literal["promote", "reject", "continue"]


#: What a score event counts (``agents.scores.events``):
#:
#: * ``judged``: a pair's final automatic verdict (a judge's, or a rule's): the judge basis's tallies
#:   (``side``) and, with ``judge_outcome``, a pair of the human basis's ``stratum``;
#: * ``outcome``: any other final outcome of a pair (an escalation to review): a pair of the human basis only;
#: * ``human``: a person's label on a pair that ended in review: the ``human`` tally (``side``, the
#:   person's decision) and a label of the human basis (stratum "review", probability 1);
#: * ``label``: a person's label on a pair the judge decided (an audit sample): a label of the human basis;
#: * ``expired``: an audit sample (or review pair) whose label never came within the join's retention.
ScoreEventKind = Literal["judged", "outcome", "human", "label", "expired"]


#: The most score events one batch carries (a flush splits larger ones): about 0.4 KB each, well inside one
#: record.
MAX_SCORE_BATCH = 1000


class ScoreEvent(Event):
    """One pair's final outcome or label, from the challenger's side, keyed by experiment (internal topic)."""

    experiment: str = Field(min_length=1, max_length=200)
    pair_id: PairId
    kind: ScoreEventKind
    #: The tallied side: the verdict's for ``judged``, the person's for ``human``; None for the other kinds.
    side: Side | None = None
    rubric_kind: str
    traffic: str
    #: (challenger, champion) output lengths in characters, and models.
    chars: tuple[int, int] | None = None
    models: tuple[str, str] | None = None
    #: The human basis's inputs (None on events published before it existed, which then move only the
    #: tallies). ``judge_outcome`` (``f``): what the judge decided, from the challenger's side: 1 the
    #: challenger, 0 the champion, 0.5 a tie or no judge answer. ``human_outcome`` (``y``): what the person
    #: decided, on the same scale (``human`` and ``label`` only).
    judge_outcome: float | None = Field(default=None, ge=0.0, le=1.0)
    human_outcome: float | None = Field(default=None, ge=0.0, le=1.0)
    #: The sampling stratum (``DecisionRecord.sampling_class``; "review" for an escalated pair).
    stratum: str | None = Field(default=None, max_length=40)
    #: The probability the pair was drawn into the human sample with; on a ``label``, None means the label
    #: was not drawn by the recorded design (no probability recorded, or not an audit sample) and is
    #: counted apart as unweighted, never weighted by a guess.
    inclusion_probability: float | None = Field(default=None, gt=0.0, le=1.0)
    #: On ``judged`` and ``outcome``: a label is expected for this pair (an audit sample, or a review).
    sampled: bool = False
    #: On ``judged`` and ``outcome``: what deciding the pair cost in US dollars (every tier's and stage's calls;
    #: None when a price was unknown), the cascade tier of its primary judgement, and how it ended
    #: (``spend_outcome``): the scoreboard's spend table.
    cost_usd: float | None = Field(default=None, ge=0)
    tier: str | None = Field(default=None, max_length=64)
    spend_outcome: str | None = Field(default=None, max_length=40)
    at: datetime = Field(default_factory=utc_now)

    @model_validator(mode="after")
    def _complete(self) -> Self:
        if self.kind in ("judged", "human") and self.side is None:
            raise ValueError(f"a {self.kind!r} score event needs its side")
        if self.kind in ("outcome", "label") and (self.judge_outcome is None or self.stratum is None):
            raise ValueError(f"a {self.kind!r} score event needs judge_outcome and stratum")
        if self.kind == "label" and self.human_outcome is None:
            raise ValueError("a 'label' score event needs human_outcome")
        return self


class ScoreEventBatch(Event):
    """One experiment's score events from one worker's join since its last flush (``pairjudge.score-events``,
    keyed by experiment): counted in order, as one input, by the scoreboard."""

    experiment: str = Field(min_length=1, max_length=200)
    events: list[ScoreEvent] = Field(min_length=1, max_length=MAX_SCORE_BATCH)

    @model_validator(mode="after")
    def _one_experiment(self) -> Self:
        if any(e.experiment != self.experiment for e in self.events):
            raise ValueError("every event of a batch is of the batch's experiment")
        return self


class TallySnapshot(Contract):
    wins: int
    losses: int
    ties: int
    #: The challenger's share of decisive pairs, and its Wilson 95% interval.
    win_rate: float | None = None
    low: float | None = None
    high: float | None = None


class SpendSnapshot(Contract):
    """What the experiment's decided pairs cost, for one cascade tier (None: no tiers) and one way of ending."""

    tier: str | None = None
    #: "verdict" (the primary stage's), "tiebreak verdict", or "review".
    outcome: str
    pairs: int
    #: US dollars over the priced pairs, and their mean; pairs with an unknown price are counted apart.
    usd: float
    usd_per_pair: float | None = None
    unpriced_pairs: int = 0


class StrengthSnapshot(Contract):
    model: str
    strength: float
    low: float
    high: float
    comparisons: int


class GateSnapshot(Contract):
    """The judge basis's gate: the judge's opinion, not people's. Two e-processes on the challenger's wins
    and losses over decisive automatic verdicts (``agents.scores.gate``)."""

    decision: GateDecision
    wins: int
    losses: int
    e_promote: float
    e_reject: float
    threshold: float
    alpha: float
    min_effect: float
    #: Set when the gate will not decide (the kappa guard has paused automatic decisions): it says why.
    refused: str | None = None


class StratumSnapshot(Contract):
    """One sampling stratum of a human basis."""

    stratum: str
    pairs: int
    labels: int
    #: PPI++'s power-tuning weight on the judge (0: the labels alone); None while the stratum has too few
    #: labels to be estimated (its whole range is then taken by the interval).
    lam: float | None = None
    rate: float | None = None
    #: The spread of ``person - lambda * judge`` over its labels, and the audit share that would make the
    #: interval narrowest for the same labels (Neyman allocation, ``agents.scores.human.neyman_shares``):
    #: for the sampled classes only, once every one of them has labels enough to measure it.
    rectifier_sd: float | None = None
    recommended_share: float | None = None


class HumanBasisSnapshot(Contract):
    """The human basis of an experiment (or one split): the challenger's win rate as people would judge it.

    The estimand is ``P(a person prefers the challenger) + 1/2 P(a person calls it a tie)`` over the pairs
    that reached a final outcome; ``judge_rate`` is the judge's answer to the same question (ties as 1/2,
    review pairs included), for the side-by-side. The rate and the intervals are None until a stratum has
    enough labels to be estimated.
    """

    rate: float | None = None
    #: The fixed-sample (CLT) interval at ``1 - alpha``: right once, at a sample size fixed in advance.
    low: float | None = None
    high: float | None = None
    #: The anytime-valid interval (confidence sequence) at ``1 - alpha``: right however often it is read.
    #: The human gate reads this one.
    anytime_low: float | None = None
    anytime_high: float | None = None
    std_error: float | None = None
    #: Labels used, pairs, audit samples still waiting for a label, samples whose label never came.
    labels: int = 0
    pairs: int = 0
    pending: int = 0
    expired: int = 0
    judge_rate: float | None = None
    #: The share of pairs in strata with too few labels (taken at their whole range by the intervals).
    unlabelled_share: float | None = None
    #: The anytime interval assuming nothing about the labels that have not come: its low end with every
    #: missing label against the challenger, its high end with every one for it (``human.worst_case``).
    worst_low: float | None = None
    worst_high: float | None = None
    strata: tuple[StratumSnapshot, ...] = ()
    alpha: float = 0.05


class HumanGateSnapshot(Contract):
    """The human basis's gate (``agents.scores.human.decide_human``): promote when the anytime-valid interval
    lies above 1/2, reject when it lies below 1/2 + ``min_effect``, otherwise continue with the labels still
    expected to be needed. It never falls back to the judge, and it keeps deciding while the kappa guard
    holds automatic decisions (its validity never rested on the judge)."""

    decision: GateDecision
    #: Why, in words a user can act on ("N more human labels expected to be needed" for continue).
    reason: str
    #: For "continue": the further labels the current estimate and variance imply; None when unknown.
    labels_needed: int | None = None
    #: The interval the decision read, and the current estimate (None without enough labels): the running
    #: intersection of every anytime-valid interval since the gate could first decide (so a decision stays),
    #: or before that the current one.
    rate: float | None = None
    low: float | None = None
    high: float | None = None
    #: This look's own anytime-valid interval, and how many looks the running intersection has taken in.
    current_low: float | None = None
    current_high: float | None = None
    looks: int = 0
    #: The stratum with pairs but fewer than ``min_stratum_labels`` labels holding the most pairs, and its
    #: labels; None when every stratum has its minimum (the gate decides only then).
    short_stratum: str | None = None
    short_stratum_labels: int | None = None
    min_stratum_labels: int | None = None
    labels: int = 0
    pending: int = 0
    expired: int = 0
    alpha: float
    min_effect: float
    min_labels: int
    target_labels: int
    #: How missing labels were treated: "at_random" (as unlabelled pairs) or "worst_case" (assume nothing).
    missing_labels: Literal["at_random", "worst_case"] = "at_random"


class HistoryPoint(Contract):
    at: datetime
    pairs: int
    #: The judge basis.
    win_rate: float | None = None
    low: float | None = None
    high: float | None = None
    log_e_promote: float | None = None
    log_e_reject: float | None = None
    #: The human basis: its rate and anytime-valid interval, and its labels.
    human_rate: float | None = None
    human_low: float | None = None
    human_high: float | None = None
    human_labels: int | None = None


class ScoreSnapshot(Event):
    """An experiment's scoreboard, published on ``pairjudge.scores`` (keyed by experiment).

    ``overall``/``by_rubric``/``by_traffic``/``gate`` are the judge basis; ``human_basis*``/``human_gate``
    the human basis beside it (None/empty on snapshots published before it existed)."""

    experiment: str
    #: The judge basis: automatic verdicts only.
    overall: TallySnapshot
    by_rubric: dict[str, TallySnapshot] = Field(default_factory=dict)
    by_traffic: dict[str, TallySnapshot] = Field(default_factory=dict)
    #: Escalated pairs a person decided, counted apart from the judge's.
    human: TallySnapshot
    length_controlled_win_rate: float | None = None
    length_coefficient: float | None = None
    strengths: tuple[StrengthSnapshot, ...] = ()
    #: The judge basis's gate (the judge's opinion, not people's).
    gate: GateSnapshot
    #: The human basis, overall and per split, and its gate.
    human_basis: HumanBasisSnapshot | None = None
    human_basis_by_rubric: dict[str, HumanBasisSnapshot] = Field(default_factory=dict)
    human_basis_by_traffic: dict[str, HumanBasisSnapshot] = Field(default_factory=dict)
    human_gate: HumanGateSnapshot | None = None
    #: Labels on pairs not drawn by the recorded sampling design (no inclusion probability recorded, or
    #: not an audit sample, e.g. a label a pair carried in): left out of the human basis, counted here.
    unweighted_labels: int = 0
    #: What deciding the pairs cost, by cascade tier and outcome (empty on snapshots from before it existed).
    spend: tuple[SpendSnapshot, ...] = ()
    history: tuple[HistoryPoint, ...] = ()
    updated_at: datetime = Field(default_factory=utc_now)


class GateUpdate(Event):
    """The gate's latest decision for an experiment, on the compacted ``pairjudge.gate`` topic."""

    experiment: str
    #: The judge basis's gate (the judge's opinion, not people's).
    gate: GateSnapshot
    #: The human basis's gate; None on updates published before it existed.
    human: HumanGateSnapshot | None = None
    decided_at: datetime = Field(default_factory=utc_now)
