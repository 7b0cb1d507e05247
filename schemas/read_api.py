"""The read API's responses (``/api/v1/…`` on the review service): what delivery tools, dashboards and scripts
read of the scoreboards, the gate and the drift audit.

These are contracts for other programs (an Argo Rollouts analysis, a CI job, a dashboard), so they are plain
fields in plain units: rates and interval ends as shares (0..1), counts as integers, times in UTC. The gate's
evidence is given as what it rests on (the rate, its interval, the labels, a share of the way to a decision);
the raw statistic is there too for machines, named for what it is (``log_e_promote``: the natural log of the
judge basis's e-value towards promoting), never as the headline. The OpenAPI document
(``docs/reference/openapi.json``) is generated from these models.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from pairjudge.schemas._base import Contract
from pairjudge.schemas.scores import GateDecision

#: The API's version, in every path (``/api/v1/…``): a change that breaks a reader gets a new one.
API_VERSION = "v1"
GateBasis = Literal["human", "judge"]
#: What ``pairjudge gate`` exits with for each decision (and what the API reports as ``exit_code``).
EXIT_CODES: dict[str, int] = {"promote": 0, "reject": 1, "continue": 2}


class Interval(Contract):
    """An interval on a share, with its confidence level and how it may be read."""

    low: float
    high: float
    #: 0.95 for a 95% interval.
    level: float
    #: ``anytime``: right however often it is read (the gates read these); ``single_look``: right for one read
    #: at a sample size fixed in advance; ``wilson``: the judge basis's interval on decisive verdicts;
    #: ``worst_case``: the anytime interval with every missing label read against and for the challenger.
    kind: Literal["anytime", "single_look", "wilson", "worst_case"]


class GateAnswer(Contract):
    """The gate's decision on one basis, with the evidence it rests on. The same answer ``pairjudge gate``
    prints and exits with, and the pages show."""

    experiment: str
    basis: GateBasis
    decision: GateDecision
    #: 0 promote, 1 reject, 2 continue: ``pairjudge gate``'s exit code for this answer.
    exit_code: int
    #: Why, in the pages' words ("people prefer the challenger", "12 more human labels expected to be needed").
    reason: str
    #: How this basis decides, in one paragraph.
    detail: str
    #: The challenger's win rate on this basis (human: as people would judge it, a tie counts half; judge: its
    #: share of the judge's decisive verdicts); None while there is not enough to estimate it.
    rate: float | None = None
    #: The interval the decision reads (human: anytime-valid); None below the minimum of labels.
    interval: Interval | None = None
    #: What the answer rests on: human labels (human basis) or the judge's decisive verdicts (judge basis).
    labels: int = 0
    #: Human basis: the labels below which it decides nothing.
    min_labels: int | None = None
    #: Human basis, continuing: further labels the current estimate implies are needed (None: unknown).
    labels_needed: int | None = None
    #: Human basis: labels still to come and labels that never came.
    pending: int | None = None
    expired: int | None = None
    #: Judge basis: how far its evidence has come towards the decision it leans to, 0..1 (1: decided).
    progress_share: float | None = None
    leaning: Literal["promote", "reject"] | None = None
    #: Judge basis, for machines: the natural logs of its two e-values and of the threshold they must reach
    #: (None when not finite). Read ``progress_share`` for a person.
    log_e_promote: float | None = None
    log_e_reject: float | None = None
    log_threshold: float | None = None
    #: Set when the gate will not decide now (the kappa guard holds automatic decisions): it says why.
    refused: str | None = None
    alpha: float | None = None
    min_effect: float | None = None
    #: When the scoreboard this answer comes from was computed; None before any was published.
    decided_at: datetime | None = None


class HumanBasis(Contract):
    """The challenger's win rate as people would judge it (a tie counts half), with the labels it rests on."""

    rate: float | None = None
    anytime: Interval | None = None
    single_look: Interval | None = None
    worst_case: Interval | None = None
    labels: int
    pairs: int
    pending: int
    expired: int
    min_labels: int
    #: Whether there are labels enough for the rate and intervals to be shown (the pages show none below).
    enough_labels: bool
    #: The judge's answer to the same question on the same pairs (ties half), for the side-by-side.
    judge_rate: float | None = None
    #: Labels not drawn by the random checks: left out, counted here.
    unweighted_labels: int = 0


class JudgeBasis(Contract):
    """The challenger's share of the judge's decisive verdicts: the judge's opinion, not people's."""

    rate: float | None = None
    interval: Interval | None = None
    wins: int
    losses: int
    ties: int
    length_controlled_rate: float | None = None


class Split(Contract):
    """One rubric kind or traffic split, both bases."""

    kind: Literal["rubric", "traffic"]
    name: str
    human: HumanBasis | None = None
    judge: JudgeBasis | None = None


class Scoreboard(Contract):
    experiment: str
    updated_at: datetime
    #: None on a scoreboard published before the human basis existed.
    human: HumanBasis | None = None
    judge: JudgeBasis
    gates: list[GateAnswer] = Field(description="The gate on each basis, human first.")
    splits: list[Split] = Field(default_factory=list)


class ExperimentSummary(Contract):
    experiment: str
    updated_at: datetime
    #: Pairs on the human basis (or the judge's decisive and tied verdicts on an old scoreboard), and labels.
    pairs: int
    labels: int
    human_decision: GateDecision | None = None
    judge_decision: GateDecision
    #: This API's paths for the experiment's scoreboard and gate.
    scoreboard: str
    gate: str


class Experiments(Contract):
    experiments: list[ExperimentSummary]


class AuditSeries(Contract):
    """A series' latest window of the drift audit: how far the judge agrees with people."""

    series: str
    #: The series in words ("tone and style, support replies").
    name: str
    window_start: datetime
    window_end: datetime
    #: False while the window is still open.
    final: bool
    pairs: int
    human_labels: int
    agreement: float | None = None
    cohen_kappa: float | None = None
    kappa_interval: Interval | None = None
    #: The human ceiling: people against each other on pairs labelled twice.
    human_pairs: int = 0
    human_kappa: float | None = None
    #: The kappa guard as it applied to the window.
    guard_mode: Literal["absolute", "relative"] | None = None
    guard_kappa_min: float | None = None
    #: Why the relative guard held the judge to the fixed floor instead ("judged against the fixed floor 0.70: no
    #: pair has two people's labels yet"); None when it did not fall back, or in the absolute mode.
    guard_note: str | None = None
    #: The agreement guard (docs/guides/drift-audit.md#the-agreement-guard): labels on pairs the judge decided
    #: alone, agreement with people on them, the floor it tests against and its evidence (an e-value; it pauses
    #: automatic decisions at 1/alpha).
    orders_agreed_labels: int = 0
    orders_agreed_agreement: float | None = None
    agreement_guard_floor: float | None = None
    agreement_guard_evidence: float | None = None
    flip_rate: float | None = None
    tiebreak_rate: float | None = None
    escalation_rate: float | None = None
    published_at: datetime


class AuditSeriesList(Contract):
    series: list[AuditSeries]


class ApiError(Contract):
    """What a request that cannot be answered gets (with its HTTP status)."""

    error: str
