"""The drift audit's contracts (docs/design.md §3): what each stage decided, joined with human labels, per series.

The flow: every stage publishes a ``DecisionRecord`` (keyed by pair id) beside its outcome; the audit
join agent pairs each record with the pair's human label and forwards ``AuditObservation``s keyed by
series; the series agent sums them into tumbling windows and publishes ``AuditSnapshot``s and
``Alert``s on ``pairjudge.audit``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import Field

from pairjudge.schemas._base import Contract, Event
from pairjudge.schemas.events import ConfidenceSource, HumanLabel, JudgeInfo, ReviewReason, Stage, TieBreakReason
from pairjudge.schemas.outcomes import DecidedKind
from pairjudge.schemas.pair import CandidateId, CandidatePair, LabelWinner, PairId, Role, utc_now
from pairjudge.schemas.rubric import RubricRef

#: A winner as the audit compares it across pairs: the pair's first or second candidate, or a tie.
RelativeWinner = Literal["first", "second", "TIE"]


class AuditSeries(Contract):
    """What must stay the same for statistics to be comparable: a change of any of it opens a new series."""

    judge_provider: str
    judge_model: str
    judge_version: str = ""
    prompt_template_hash: str
    #: The rubric's kind, or ``named:<name>`` for a catalog rubric.
    rubric: str
    experiment_id: str | None = None
    #: The pair's risk level when it is not "normal" (``CandidatePair.risk``): each level is judged against
    #: its own thresholds, so its drift and calibration are its own. None is normal, the series as it was
    #: before risk levels, with the same key.
    risk_level: Literal["low", "high"] | None = None
    #: The judge cascade's tier that decided (``JudgeInfo.tier``); None without tiers, the series as it was.
    judge_tier: str | None = None

    @classmethod
    def for_pair(cls, judge: JudgeInfo, pair: CandidatePair) -> AuditSeries:
        """The series a pair's decisions count in: the primary judge's identity and template, the
        rubric as the pair names it, the experiment, the risk level."""
        rubric = pair.rubric
        risk = pair.risk
        return cls(
            judge_provider=judge.provider,
            judge_model=judge.model,
            judge_version=judge.version,
            prompt_template_hash=judge.prompt_template_hash,
            rubric=f"named:{rubric.name}" if isinstance(rubric, RubricRef) else rubric.kind,
            experiment_id=pair.metadata.experiment_id,
            risk_level=None if risk == "normal" else risk,
            judge_tier=judge.tier,
        )

    @property
    def key(self) -> str:
        """A stable, readable key: the Kafka key of the series' observations and snapshots, and of its
        calibrated threshold. ``|risk=<level>`` is appended for a low or high series only, so a normal
        series keeps the key it had before risk levels (its history and stored threshold carry on);
        ``|tier=<name>`` likewise for a cascade's tier only."""
        judge = f"{self.judge_provider}:{self.judge_model}" + (f"@{self.judge_version}" if self.judge_version else "")
        key = f"{judge}|{self.prompt_template_hash}|{self.rubric}|{self.experiment_id or '-'}"
        if self.risk_level is not None:
            key += f"|risk={self.risk_level}"
        return key if self.judge_tier is None else f"{key}|tier={self.judge_tier}"

    @classmethod
    def from_key(cls, key: str) -> AuditSeries | None:
        """The series a :attr:`key` names, or None when ``key`` is not one (an alert of a judge or a spending cap
        names something else). Only a parse that gives the same key back counts: a name holding ``|`` is not
        guessed at."""
        judge, sep, rest = key.partition("|")
        provider, colon, model = judge.partition(":")
        parts = rest.split("|")
        if not sep or not colon or len(parts) < 3:
            return None
        template, rubric, experiment, *extras = parts
        model, _, version = model.rpartition("@") if "@" in model else (model, "", "")
        options = dict(extra.partition("=")[::2] for extra in extras)
        try:
            series = cls(
                judge_provider=provider,
                judge_model=model,
                judge_version=version,
                prompt_template_hash=template,
                rubric=rubric,
                experiment_id=None if experiment == "-" else experiment,
                risk_level=options.pop("risk", None),  # validated by the model: low or high
                judge_tier=options.pop("tier", None),
            )
        except ValueError:
            return None
        return series if series.key == key and not options else None


#: At most this many dimension facts and cited rule ids on one record (a rubric has at most 12 criteria).
MAX_DIMENSION_FACTS = 16
MAX_RULES_CITED = 16
#: A guide rule's id: the guide's 8 hex digits, a colon, the rule's number, section or hash (``agents.guide_rules``).
RuleId = Annotated[str, Field(min_length=1, max_length=60, pattern=r"^[0-9a-f]{8}:[^\s]+$")]


class DimensionFact(Contract):
    """One dimension of one pair as the primary judge's two orders scored it: facts, no text.

    A dimension's winner in one ordering is the higher-scored candidate ("TIE" on equal scores), as a
    relative label of the pair's candidates. Only orderings that are valid and score both candidates count.
    """

    #: The dimension's name: one of seed 000's four, or the rubric's criterion name.
    name: str = Field(min_length=1, max_length=60)
    #: Some judge's two orders named different winners for it (a tie against a candidate counts).
    orders_disagree: bool
    #: The winner every order named; None when they disagree (orders, or jurors of a jury).
    winner: RelativeWinner | None = None


class DecisionRecord(Event):
    """What one stage decided about one pair, in the terms the audit counts. Pure facts, no text.

    ``judge_winner`` is the candidate the judge's orders agreed on with enough confidence to decide:
    the verdict's winner, or, while the kappa guard holds every pair for review, the winner it would
    have had (so agreement with humans is still measured while automation is paused).
    """

    pair_id: PairId
    series: AuditSeries
    stage: Stage
    outcome: DecidedKind
    #: The tie-break or review reason; None for a verdict.
    reason: TieBreakReason | ReviewReason | None = None
    #: Decided without a human: a verdict of this stage.
    auto_decided: bool
    candidates: tuple[CandidateId, CandidateId]
    judge_winner: CandidateId | None = None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    #: Some judge's two orders were valid, decisive and named different candidates.
    flip: bool = False
    #: Both orders valid (the flip rate's denominator).
    both_valid: bool = False
    calls: int = Field(default=0, ge=0)
    invalid_replies: int = Field(default=0, ge=0)
    #: Decisive orderings, and those won by whatever sat in position A.
    decisive_orderings: int = Field(default=0, ge=0)
    position_a_wins: int = Field(default=0, ge=0)
    #: Which candidate's output is longer (characters); None when they are equally long.
    longer: RelativeWinner | None = None
    #: A model answered other than the one requested (``OrderingResult.answered_by_model``).
    model_mismatch: str | None = None
    canary: bool = False
    #: This stage's verdict was also sent to review as an audit sample (a human label is expected).
    audit_sample: bool = False
    #: The probability with which this pair was drawn into the audit sample (docs/design.md §3a): set on a final
    #: verdict (whether drawn or not; never below the policy's floor when sampling is active), 1.0 on a
    #: review outcome (every escalated pair is labelled), None on a way-station (a tie-break request).
    #: The human-basis estimates weight each label by its inverse.
    inclusion_probability: float | None = Field(default=None, gt=0.0, le=1.0)
    #: The stratum ``inclusion_probability`` was set for (``agents.sampling``): "confident" or "uncertain"
    #: for a judge's verdict, "review" for a review outcome; None where no probability is recorded.
    sampling_class: str | None = Field(default=None, max_length=40)
    #: A label the pair carried in (canaries, labelled evaluation sets).
    known_label: LabelWinner | None = None
    #: Settled by rule before any judge call (an empty output, identical outputs): not about the judge,
    #: so the drift statistics skip it; the scoreboard counts it.
    rule: bool = False
    #: For the champion-challenger scoreboard: the pair's experiment and traffic, and per candidate (in
    #: ``candidates`` order) its role, its model and its output's length in characters (a reply with tool
    #: calls: its text and each call as the judge is shown it, ``agents.tool_views.reply_length``).
    experiment: str | None = Field(default=None, max_length=200)
    traffic: str = "production"
    roles: tuple[Role, Role] | None = None
    models: tuple[str, str] | None = None
    chars: tuple[int, int] | None = None
    #: Per candidate, how many tool calls its reply makes (schema version 3); None for a pair without tools,
    #: so a tool-using pair's series can be told apart from a text-only one.
    tool_calls: tuple[int, int] | None = None
    #: Per dimension (seed 000's four, or the rubric's criteria) the primary judge scored in both orders:
    #: whether its orders disagree on the dimension's winner, and the winner they agree on. The same
    #: primary facts on the tie-break stage's record, so a label joined to either compares them.
    dimensions: tuple[DimensionFact, ...] = Field(default=(), max_length=MAX_DIMENSION_FACTS)
    #: Ids of the style guide's rules the primary judge's justifications cite (``agents.guide_rules``):
    #: ids only, never text.
    rules_cited: tuple[RuleId, ...] = Field(default=(), max_length=MAX_RULES_CITED)
    #: The judge cascade's tiers that judged the pair before the one that decided (named in ``series``) and
    #: passed it on, in order: their calls are in ``calls`` too. Empty without tiers.
    escalated_from: tuple[str, ...] = Field(default=(), max_length=16)
    #: US dollars: this stage's calls, and the pair's so far (the primary stage's too, on a tie-break stage's
    #: record). None when a call's price was unknown: never counted as free.
    cost_usd: float | None = Field(default=None, ge=0)
    pair_cost_usd: float | None = Field(default=None, ge=0)
    #: Where ``confidence`` came from (the policy's ``confidence_source``): the judge's stated confidence, or its
    #: token probabilities over both orders. When the orderings carried token probabilities, both means are
    #: here side by side whichever was used; None without them (``confidence`` is then the stated one).
    confidence_source: ConfidenceSource = "stated"
    token_confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    stated_confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    decided_at: datetime = Field(default_factory=utc_now)

    @property
    def stated(self) -> float | None:
        """The judge's stated confidence, whichever confidence decided (for the reliability plot's stated curve)."""
        if self.stated_confidence is not None:
            return self.stated_confidence
        return self.confidence if self.confidence_source == "stated" else None


#: ``second_label``: a second, independent human label of an audit pair (by a reviewer other than the
#: first), compared with the first label for the human-human ceiling, never with the judge.
ObservationKind = Literal["decision", "labelled", "second_label"]


class AuditObservation(Event):
    """One thing the series agent counts: a stage's decision, an automatic decision joined with its label,
    or a second reviewer's label of an audit pair beside the first one."""

    kind: ObservationKind
    series: AuditSeries
    record: DecisionRecord
    #: Set for ``labelled``: the human label (or the pair's known label, as a label by "known_label").
    #: Set for ``second_label``: the second reviewer's label.
    label: HumanLabel | None = None
    #: Set for ``second_label``: the pair's first label (the one compared with the judge).
    first_label: HumanLabel | None = None
    observed_at: datetime = Field(default_factory=utc_now)


class AuditDelta(Event):
    """One worker's sums for one series and window since its last flush (``pairjudge.observations``, keyed by
    series): what the join counted, summed where it was joined, for the series agent to add to its window.

    ``stats`` holds the window sums (``agents.audit.sums.WindowStats``: counts, count cells, per-bin rows);
    ``calibration_*`` the labelled decisions per confidence bin of width 0.01 (``ConfidenceHistogram``),
    absent when the delta has none. ``observations`` is how many observations it sums.
    """

    series: AuditSeries
    #: The window's start (Unix seconds, aligned to ``window_s``) and size.
    window_start: float
    window_s: float = Field(gt=0)
    observations: int = Field(ge=1)
    stats: dict[str, Any]
    calibration_counts: list[int] | None = None
    calibration_agrees: list[int] | None = None
    #: The same for the tie-break stage's labelled decisions: its own calibration (``agents.audit.stages``).
    tiebreak_counts: list[int] | None = None
    tiebreak_agrees: list[int] | None = None


class ReliabilityBinSnapshot(Contract):
    lower: float
    upper: float
    count: int
    mean_confidence: float | None = None
    accuracy: float | None = None


class ThresholdSnapshot(Contract):
    """The auto-decision threshold in force for the series, and where it came from."""

    source: Literal["configured", "calibrated"]
    threshold: float | None
    coverage: float | None = None
    target: float | None = None
    risk: float | None = None
    labels: int = 0
    note: str | None = None


class StageAgreement(Contract):
    """How often one deciding stage's decisions of a series agreed with people's audit labels, all windows
    together (``agents.audit.stages``): the primary judge's (orders agreed; a cascade tier names itself in
    ``tier``) or the tie-break's. ``low`` and ``high`` are the Wilson score interval at ``confidence``, set only
    from ``min_labels`` labels; the rate assumes the labelled decisions are independent draws with one common rate.
    """

    stage: Stage
    tier: str | None = None
    labels: int = Field(ge=0)
    agreeing: int = Field(ge=0)
    min_labels: int = Field(ge=1)
    agreement: float | None = None
    low: float | None = None
    high: float | None = None
    confidence: float = Field(gt=0.0, lt=1.0)


class DimensionAmbiguity(Contract):
    """One dimension's disagreement counts over a window, and their rates with Wilson intervals.

    ``orders_*``: pairs whose two orders both scored the dimension (the denominator) and those whose
    orders named different winners for it. ``human_*``: labelled pairs (no canaries) where the orders
    agreed on a candidate for the dimension and the human chose a candidate (ties on either side left
    out), and those where they were not the same candidate. Intervals are Wilson score intervals at
    ``AmbiguitySnapshot.confidence``, assuming pairs are independent draws with one common rate.
    """

    name: str
    orders_compared: int = Field(ge=0)
    orders_disagree: int = Field(ge=0)
    order_disagreement_rate: float | None = None
    order_low: float | None = None
    order_high: float | None = None
    human_compared: int = Field(ge=0)
    human_disagree: int = Field(ge=0)
    human_disagreement_rate: float | None = None
    human_low: float | None = None
    human_high: float | None = None


class RuleCitations(Contract):
    """How often one style-guide rule is cited, and in how many disagreeing pairs.

    ``cited``: primary decisions whose justifications cite the rule; ``cited_order_disagreeing``: those whose
    orders disagreed (a flip, or a dimension's winner differing between the orders). ``cited_labelled``:
    labelled pairs (no canaries) with a judge's winner citing it; ``cited_human_disagreeing``: those whose
    human label was not the judge's winner.
    """

    rule_id: str
    cited: int = Field(ge=0)
    cited_order_disagreeing: int = Field(ge=0)
    cited_labelled: int = Field(ge=0)
    cited_human_disagreeing: int = Field(ge=0)


class AmbiguitySnapshot(Contract):
    """The window's dimensions ranked by order-disagreement rate, then human-disagreement rate (each by
    the lower end of its interval first, so a rate on few pairs does not outrank a well-measured one), and
    its rules ranked by the disagreeing pairs citing them. At most ``MAX_RANKED`` of each; a series that
    saw more distinct names than the window keeps (``agents.audit.ambiguity``) shows the rest as "(other)".
    """

    confidence: float = Field(gt=0.0, lt=1.0)
    dimensions: tuple[DimensionAmbiguity, ...] = ()
    rules: tuple[RuleCitations, ...] = ()


#: Entries of each ranking an ``AmbiguitySnapshot`` carries.
MAX_RANKED = 20


class AuditSnapshot(Event):
    """Windowed drift statistics for one series. Rates are None when their denominator is 0."""

    series: str
    series_info: AuditSeries | None = None
    window_start: datetime
    window_end: datetime
    #: False while the window is still open (a running snapshot); True once it has closed.
    final: bool = False
    pairs: int
    verdicts: int
    flips: int
    tiebreaks: int
    reviews: int
    invalid_replies: int
    position_a_wins: int
    human_labels: int
    #: Labels on pairs the judge escalated without a winner: decided by a person (not in kappa).
    human_decided: int = 0
    calls: int = 0
    decisive_orderings: int = 0
    flip_rate: float | None = None
    tiebreak_rate: float | None = None
    escalation_rate: float | None = None
    invalid_reply_rate: float | None = None
    position_a_win_rate: float | None = None
    agreement: float | None = None
    cohen_kappa: float | None = None
    kappa_low: float | None = None
    kappa_high: float | None = None
    kappa_confidence: float | None = None
    ece: float | None = None
    brier: float | None = None
    reliability: tuple[ReliabilityBinSnapshot, ...] = ()
    #: The same bins over the labelled verdicts whose records carry both confidences, by the judge's token
    #: probability and by its stated confidence (the reliability plot's two curves); empty without them.
    token_reliability: tuple[ReliabilityBinSnapshot, ...] = ()
    stated_reliability: tuple[ReliabilityBinSnapshot, ...] = ()
    #: How often the judge's winner was the longer output, and how often the humans' was, on labelled pairs.
    judge_longer_win_rate: float | None = None
    human_longer_win_rate: float | None = None
    canary_labels: int = 0
    canary_accuracy: float | None = None
    #: The human ceiling: audit pairs labelled by two different reviewers, how often they agreed, and
    #: Cohen's kappa between the first and the second label. A judge cannot be expected to agree with
    #: people more than people agree with each other (MT-Bench: GPT-4 vs experts 66%, experts vs experts 63%).
    human_pairs: int = 0
    human_agreement: float | None = None
    human_kappa: float | None = None
    #: The kappa guard as it applied to this window: its mode ("absolute" or "relative", as configured),
    #: the kappa floor in force (the absolute one, or ratio x the human-human kappa) and, when the
    #: relative mode fell back to the absolute floor, why.
    guard_mode: Literal["absolute", "relative"] | None = None
    guard_kappa_min: float | None = None
    guard_note: str | None = None
    #: The agreement guard (docs/guides/drift-audit.md#the-agreement-guard): labels on pairs the judge decided
    #: alone (its two orders agreeing), how often people agreed with it there, the agreement floor it tests
    #: against, and the evidence (an e-value) that the judge is below it; it trips at ``1 / agreement_guard_alpha``.
    #: None where the guard is off or the snapshot predates it.
    orders_agreed_labels: int = 0
    orders_agreed_agreement: float | None = None
    agreement_guard_floor: float | None = None
    agreement_guard_alpha: float | None = None
    agreement_guard_evidence: float | None = None
    threshold: ThresholdSnapshot | None = None
    #: Which dimensions and style-guide rules the judge is ambiguous on in this window, ranked
    #: (docs/guides/drift-audit.md#ambiguous-dimensions-and-rules); None when no record had dimension facts.
    ambiguity: AmbiguitySnapshot | None = None
    #: Agreement with people by deciding stage (primary, tie-break), over the series' labels so far.
    stages: tuple[StageAgreement, ...] = ()
    #: The tie-break stage's own threshold: calibrated on its own labels, or the configured one, saying why.
    tiebreak_threshold: ThresholdSnapshot | None = None
    #: The series' tie-break cannot reach its target with enough labels: its flips go to review instead.
    tiebreak_off: bool = False
    published_at: datetime = Field(default_factory=utc_now)


class ThresholdUpdate(Event):
    """A series' calibrated auto-decision threshold, on the compacted ``pairjudge.thresholds`` topic keyed by
    series. Every worker follows it and judges that series' pairs with it; ``threshold`` None means the
    series has no calibrated threshold (any more): the configured one applies."""

    series: str
    threshold: float | None = Field(ge=0.0, le=1.0)
    coverage: float | None = Field(default=None, ge=0.0, le=1.0)
    target: float = Field(gt=0.0, lt=1.0)
    risk: float = Field(gt=0.0, lt=1.0)
    labels: int = Field(ge=0)
    #: Whose threshold: the primary judge's (the key is the series) or the tie-break stage's (key
    #: ``<series>#tiebreak``, ``agents.audit.stages.tiebreak_threshold_key``).
    stage: Stage = "primary"
    #: Tie-break stage only: its decisions cannot reach ``target`` with ``labels`` labels, so the series' flips go
    #: to review instead of the tie-break until this is cleared.
    switched_off: bool = False
    #: Tie-break stage only: the person who switched the series' tie-break back on, and why
    #: (``pairjudge control tiebreak-on``); empty on the audit's own records.
    switched_on_by: str = Field(default="", max_length=200)
    #: Tie-break stage only: the audit judges the tie-break on labels of its decisions from this moment on; what
    #: it held from before (the old tie-break's labels) is dropped. Set by the command that switches it back on,
    #: and carried on the audit's later records of the series, so the compacted topic keeps it.
    fresh_since: datetime | None = None
    updated_at: datetime = Field(default_factory=utc_now)


AlertKind = Literal[
    "kappa_below_threshold",
    #: The agreement guard (agents.audit.agreement_guard): the sequential test on the pairs whose orders agreed.
    "agreement_below_floor",
    "tiebreak_rate_high",
    "flip_rate_high",
    "invalid_reply_rate_high",
    "ece_high",
    "judge_model_mismatch",
    "canary_accuracy_low",
    "judge_unavailable",
    "judge_rejected",
    "internal_error",
    #: New pairs met a spending cap (agents.spend); the series is ``spend:all`` or ``spend:<experiment>``.
    "spend_cap",
    #: A series' tie-break verdicts cannot reach their agreement target; its flips go to review (agents.audit.stages).
    "tiebreak_below_target",
]


#: What each alert kind means, in the words its readers use (pages, reports, chat); the kind stays the machine name.
ALERT_TITLES: dict[str, str] = {
    "kappa_below_threshold": "the judge agrees too little with people",
    "agreement_below_floor": "the judge disagrees with people on pairs it decided alone",
    "tiebreak_rate_high": "too many pairs need the tie-break",
    "flip_rate_high": "the judge often changes its mind when the replies are swapped",
    "invalid_reply_rate_high": "too many of the judge's replies could not be read",
    "ece_high": "the judge's confidence does not match how often it is right",
    "judge_model_mismatch": "the judge's service answers with a different model than configured",
    "canary_accuracy_low": "the judge gets too many known-answer pairs wrong",
    "judge_unavailable": "the judge could not be reached",
    "judge_rejected": "the judge's service refused requests",
    "internal_error": "pairjudge hit an internal error",
    "spend_cap": "a spending limit was reached",
    "tiebreak_below_target": "the tie-break agrees too little with people, so its pairs go to people instead",
}
assert set(ALERT_TITLES) == set(get_args(AlertKind)), "every alert kind needs a plain title"


class Alert(Event):
    kind: AlertKind
    series: str
    message: str
    value: float
    threshold: float
    window_start: datetime | None = None
    raised_at: datetime = Field(default_factory=utc_now)
