"""Downstream events: verdicts, tie-break and review requests, labels, dead letters, audit."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, model_validator

from pairjudge.schemas._base import Contract, Event
from pairjudge.schemas.kinds import ControlKey, DeadLetterStage
from pairjudge.schemas.kinds import Stage as Stage  # re-exported: the contracts name it from here
from pairjudge.schemas.pair import TIE, CandidateId, CandidatePair, LabelWinner, PairId, Role, utc_now
from pairjudge.schemas.replies import Position, PositionOrTie

#: What ``pairjudge.schemas`` re-exports from here (the package's import surface: ``schemas/__init__.py`` takes
#: this list whole, so a new public contract is exported by adding it here).
__all__ = [
    "ConfidenceSource",
    "ControlUpdate",
    "DeadLetter",
    "ErrorKind",
    "HumanLabel",
    "InjectionFlag",
    "JudgeInfo",
    "JuryVote",
    "OrderingResult",
    "PairVerdict",
    "ReviewReason",
    "ReviewRequest",
    "SpendReport",
    "TieBreakReason",
    "TieBreakRequest",
]

Order = Literal["AB", "BA"]
#: Where a decision's confidence came from: the judge's stated number, or its token probabilities over both orders.
ConfidenceSource = Literal["stated", "token_probability"]
#: "rule": settled before any judge call (an empty output loses, identical outputs tie; ``agents.settle``).
DecidedBy = Literal["primary", "tiebreak", "human", "rule"]
TieBreakReason = Literal["tie", "low_confidence", "position_inconsistent", "invalid_verdict"]
ReviewReason = Literal[
    "ordering_invalid",  # a primary ordering stayed invalid after its re-asks
    "tiebreak_disagreement",  # the two tie-break orders chose different candidates
    "tiebreak_equal_scores",  # weighted scores exactly equal, or the judge triggered escalation
    "tiebreak_no_signal",  # valid replies, but the judge found nothing to decide on (below its threshold
    # after the forced-choice re-ask, or it escalated on unequal scores): e.g. criteria it cannot measure
    "tiebreak_invalid",  # the tie-break reply failed validation, or its winner contradicted its own scores
    "tiebreak_disabled",  # the tie-break resolver is switched off
    "judge_unavailable",  # the judge kept failing after retries
    "judge_rejected",  # the judge refused the request (a 4xx such as a bad key): never retried
    "audit_sample",  # an automatic verdict sampled for human audit
    "kappa_guard",  # auto-deciding is paused because agreement with humans fell
    "suspected_injection",  # an output carries text aimed at the judge (agents.injection): never auto-decided
    # the pair's risk level sends a confidence this low to a person, not to the tie-break (e.g. a high-risk
    # pair below 0.85: Policy.thresholds_for, docs/guides/risk-levels.md)
    "risk_review",
    "spend_capped",  # over a spending cap with spend_action "review" (agents.spend): a person decides, no judge call
]
#: Why an ordering carries an ``error``. The first three mean it has no usable reply; "unresolved" marks
#: a schema-valid tie-break reply that still did not settle the tie (its ``error`` says why).
ErrorKind = Literal["invalid_reply", "judge_unavailable", "judge_rejected", "unresolved"]


class JudgeInfo(Contract):
    """Which judge decided: enough to open a new drift series when any of it changes."""

    provider: str
    model: str
    version: str = ""
    prompt_template_hash: str
    temperature: float = 0.0
    #: True for the offline judge: its scores come from text features, not from a model's reading.
    heuristic: bool = False
    #: The judge cascade's tier that decided (``judge_tiers``), by its configured name; None without tiers. Part
    #: of the drift series, so each tier's agreement, flips and calibration are its own.
    tier: str | None = Field(default=None, max_length=64)


class OrderingResult(Contract):
    """One ordering's judgement, with the position letters already mapped back to candidates."""

    order_shown: Order
    swapped: bool
    shown_as_a: CandidateId
    shown_as_b: CandidateId
    valid: bool
    raw_winner: PositionOrTie | None = None
    mapped_winner: LabelWinner | None = None  # a candidate id, or "TIE"
    confidence: float | None = None
    #: dimension -> candidate id -> score, in the rubric's own scale.
    dimension_scores: dict[str, dict[str, float]] = Field(default_factory=dict)
    justification: str | None = None
    key_differentiators: tuple[str, ...] = ()
    retries: int = 0
    forced_choice: bool = False
    latency_ms: float = 0.0
    input_tokens: int | None = None
    output_tokens: int | None = None
    answered_by_model: str | None = None
    #: What went wrong, readable (a validation error, a scrubbed judge message); None when nothing did.
    error: str | None = None
    #: The kind of ``error``, for code to decide on; set exactly when ``error`` is, by this service.
    error_kind: ErrorKind | None = None
    #: US dollars over every call of this ordering, re-asks included; None when no call had a price.
    cost_usd: float | None = Field(default=None, ge=0.0)
    #: Calls of this ordering answered from the response cache instead of the judge.
    cache_hits: int = Field(default=0, ge=0)
    #: The judge's token probability for each choice at its verdict token, by candidate id (and "TIE" where the
    #: template has one), renormalised over the choices (``agents.logprobs``); None when the judge gave none
    #: (the offline judge, Anthropic, a server that refused ``logprobs``, a cached reply).
    token_probabilities: dict[str, Annotated[float, Field(ge=0.0, le=1.0)]] | None = None

    @property
    def token_confidence(self) -> float | None:
        """The token probability of this ordering's own winner: the counterpart of its stated ``confidence``."""
        if self.token_probabilities is None or self.mapped_winner is None:
            return None
        return self.token_probabilities.get(self.mapped_winner)


AbstainReason = Literal["position_inconsistent", "invalid", "tie"]


class JuryVote(Contract):
    """One juror's part in a jury decision: its vote (or abstention) and both of its orderings.

    A juror votes only when both its orders name the same candidate; otherwise it abstains, and why is
    recorded: its orders flipped ("position_inconsistent"), an ordering stayed invalid after its
    re-asks ("invalid"), or either order said TIE ("tie", with ``vote="TIE"``; a tie is not a vote).
    """

    judge: JudgeInfo
    #: The candidate id this juror voted for, "TIE" for a tie abstention, None for other abstentions.
    vote: LabelWinner | None = None
    abstained: bool
    abstain_reason: AbstainReason | None = None
    #: Mean confidence of the juror's two orders; None when either is invalid.
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    orderings: tuple[OrderingResult, ...]
    #: True/False for a juror that voted when the jury had a majority candidate; None otherwise.
    agreed_with_majority: bool | None = None
    #: "A"/"B" when both orders picked whatever sat in that position (position bias); None otherwise.
    lean: Position | None = None

    @model_validator(mode="after")
    def _abstention_has_a_reason(self) -> JuryVote:
        # An abstention without a reason (or a vote with one) would make the abstention counts lie.
        if self.abstained != (self.abstain_reason is not None):
            raise ValueError("abstain_reason must be set exactly when the juror abstained")
        return self


class PairVerdict(Event):
    """An automatic decision. ``winner`` is a candidate id, or "TIE" for a pair settled as a tie by rule
    (identical or both empty outputs); a tie has no ``loser`` and no ``winner_role``, and only a rule
    decides one (a judge's tie goes to the tie-break)."""

    pair_id: PairId
    winner: LabelWinner
    winner_role: Role | None
    loser: CandidateId | None
    confidence: float = Field(ge=0.0, le=1.0)
    decided_by: DecidedBy
    consistent: bool
    orderings: tuple[OrderingResult, ...]
    justification: str
    key_differentiators: tuple[str, ...] = ()
    rubric_kind: str
    judge: JudgeInfo
    #: Set when this verdict came out of the tie-break resolver.
    tiebreak_reason: TieBreakReason | None = None
    weighted_scores: dict[str, float] | None = None
    #: US dollars over every judge call that led to this verdict (primary, tie-break and re-asks);
    #: None when no call had a price. Cache hits count 0.
    cost_usd: float | None = Field(default=None, ge=0.0)
    experiment_id: str | None = None
    traffic: str = "production"
    trace_id: str | None = None
    #: One vote per juror when a jury decided (agents.jury); empty for a single judge.
    jury: tuple[JuryVote, ...] = ()
    #: Where ``confidence`` comes from: the judge's stated confidence, or its token probability (both orders
    #: had one and the policy's ``confidence_source`` takes it; docs/guides/judges.md).
    confidence_source: ConfidenceSource = "stated"
    #: The two confidences side by side whenever the orderings carried token probabilities: the mean token
    #: probability of the winner over both orders, and the mean stated confidence. None without them (then
    #: ``confidence`` is the stated one).
    token_confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    stated_confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    decided_at: datetime = Field(default_factory=utc_now)

    @property
    def tie(self) -> bool:
        return self.winner == TIE

    # The decided-outcome properties (``schemas.outcomes.DecidedEvent``): what the core's facts and records read
    # from any judged decision's event without asking which one it is.
    @property
    def judged_orderings(self) -> tuple[OrderingResult, ...]:
        """The orderings that led here."""
        return self.orderings

    @property
    def decider(self) -> DecidedBy:
        return self.decided_by

    @property
    def outcome_reason(self) -> None:
        return None

    @model_validator(mode="after")
    def _a_tie_is_settled_by_rule(self) -> PairVerdict:
        # A consumer counting wins must be able to trust that a tie never names a side, and a win always does.
        if self.tie:
            if self.loser is not None or self.winner_role is not None:
                raise ValueError("a tie has no loser and no winner_role")
            if self.decided_by != "rule":
                raise ValueError("only a rule settles a tie; a judge's tie goes to the tie-break")
        elif self.loser is None or self.winner_role is None:
            raise ValueError("a verdict for a candidate needs its loser and winner_role")
        return self


class TieBreakRequest(Event):
    pair_id: PairId
    reason: TieBreakReason
    pair: CandidatePair
    primary: tuple[OrderingResult, ...]
    primary_judge: JudgeInfo
    trace_id: str | None = None
    #: The primary jury's votes, so the resolver and auditors see them; empty for a single judge.
    jury: tuple[JuryVote, ...] = ()
    #: US dollars the primary stage spent on the pair (every tier's calls), so the tie-break stage's record has
    #: the pair's whole spend; None when unknown (an unpriced judge, or a request from before it existed).
    primary_cost_usd: float | None = Field(default=None, ge=0)
    requested_at: datetime = Field(default_factory=utc_now)

    # The decided-outcome properties (``schemas.outcomes.DecidedEvent``).
    @property
    def judged_orderings(self) -> tuple[OrderingResult, ...]:
        """The primary stage's orderings that sent the pair here."""
        return self.primary

    @property
    def decider(self) -> DecidedBy:
        return "tiebreak"

    @property
    def outcome_reason(self) -> TieBreakReason:
        return self.reason


class InjectionFlag(Contract):
    """One detector rule that matched one candidate's output, one of its turns, or a turn of the task's
    conversation (``agents.injection``)."""

    #: The candidate whose text it was found in; None for a turn of the task's conversation, which both
    #: candidates reply to (schema version 2).
    candidate_id: CandidateId | None
    #: verdict_json, override, verdict_claim, judge_address, role_marker, pair_awareness, delimiter or hidden_text.
    rule: str = Field(min_length=1, max_length=40)
    #: The matched text, normalised (lower case, look-alikes folded), at most 80 characters: output text.
    excerpt: str = Field(default="", max_length=80)
    #: Where it was found (schema version 2): ``output``; ``turn N``, the candidate's reply to user turn N of
    #: a transcript; or ``task turn N (role)``, turn N of the task's conversation (docs/guides/conversations.md).
    #: Schema version 3 adds ``tool call N`` (a candidate's call N) and ``task turn N (assistant) tool call M``
    #: (docs/guides/tool-calls.md); a tool's result is its turn, ``task turn N (tool)``.
    where: str = Field(default="output", min_length=1, max_length=40)


class ReviewRequest(Event):
    """Everything a human needs. ``last_justification`` is kept for audit; the review UI hides it."""

    pair_id: PairId
    reason: ReviewReason
    stage: Stage
    pair: CandidatePair
    orderings: tuple[OrderingResult, ...] = ()
    last_justification: str | None = None
    audit: bool = False
    judge: JudgeInfo | None = None
    trace_id: str | None = None
    #: Reason "suspected_injection": what was found, in which output.
    injection: tuple[InjectionFlag, ...] = ()
    requested_at: datetime = Field(default_factory=utc_now)
    #: True when the task, the outputs and the judge's texts were passed through the redaction hook
    #: (``PAIRJUDGE_REDACTION__ENABLED``) before publishing: they are not what the judge saw.
    redacted: bool = False
    #: Reviewers this item wants: 2 for the share of audit samples also labelled by a second, independent
    #: reviewer (``Policy.audit_double_share``), for the human-human agreement; 1 otherwise.
    reviews_wanted: int = Field(default=1, ge=1, le=2)

    # The decided-outcome properties (``schemas.outcomes.DecidedEvent``).
    @property
    def judged_orderings(self) -> tuple[OrderingResult, ...]:
        return self.orderings

    @property
    def decider(self) -> DecidedBy:
        return "human"

    @property
    def outcome_reason(self) -> ReviewReason:
        return self.reason


class HumanLabel(Event):
    pair_id: PairId
    winner: LabelWinner  # a candidate id, or "TIE"
    rationale: str = Field(default="", max_length=5_000)
    reviewer: str = Field(min_length=1, max_length=200)
    from_audit: bool = False
    labelled_at: datetime = Field(default_factory=utc_now)


class DeadLetter(Event):
    """An input that could not be judged, with why, and its bytes (whole, or a head when too large).

    A dead letter must fit the producer's request limit, so an original too large to carry whole
    (base64 adds a third) is cut to its first bytes: ``original_truncated`` is then true, and
    ``original_size`` and ``original_sha256`` still describe the whole event, so it can be matched to
    what a producer sent. ``streams.kafka.dead_letters`` builds them within that bound.
    """

    stage: DeadLetterStage
    reason: str  # a short machine-readable code, e.g. "malformed_json", "oversized_output"
    error: str  # the human-readable detail
    original: bytes
    pair_id: str | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    failed_at: datetime = Field(default_factory=utc_now)
    #: Bytes of the whole original event (None in letters written before it was recorded).
    original_size: int | None = Field(default=None, ge=0)
    #: Hex SHA-256 of the whole original event.
    original_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    #: True when ``original`` holds only the first bytes of the event.
    original_truncated: bool = False
    #: True when ``original`` (and ``error``) were passed through the redaction hook
    #: (``PAIRJUDGE_REDACTION__ENABLED``): it is then not the exact bytes that were sent, and cannot be
    #: replayed as it is; ``original_size`` and ``original_sha256`` still describe the event as received,
    #: and ``original_truncated`` says whether the redacted text was cut to fit.
    original_redacted: bool = False

    @model_validator(mode="after")
    def _size_matches_original(self) -> DeadLetter:
        # A consumer comparing sizes must be able to trust the flag: whole means whole. A redacted
        # original is another text than the one measured, so only its flag can say it was cut.
        if self.original_redacted:
            return self
        if self.original_size is None:
            if self.original_truncated:
                raise ValueError("a truncated original needs original_size")
        elif self.original_truncated != (len(self.original) < self.original_size):
            raise ValueError("original_truncated must say whether original is shorter than original_size")
        elif len(self.original) > self.original_size:
            raise ValueError("original is longer than original_size")
        return self


class SpendReport(Event):
    """One worker's spend on judge calls so far in one UTC clock hour, by experiment (``-``: none), on the
    compacted ``pairjudge.spend`` topic keyed ``<worker>|<hour>``: every worker follows it and sums the latest
    report of each worker for its spending caps (``agents.spend``)."""

    worker: str = Field(min_length=1, max_length=100)
    #: Hours since the epoch (UTC).
    hour: int = Field(ge=0)
    by_experiment: dict[str, float] = Field(default_factory=dict, max_length=10_000)
    reported_at: datetime = Field(default_factory=utc_now)


class ControlUpdate(Event):
    """A live setting on the compacted control topic, keyed by ``key``."""

    key: ControlKey
    #: A number, a switch, or for ``CHOICE_KEYS`` one of their words (``schemas.kinds.CONTROLS``).
    value: float | bool | str
    updated_by: str = ""
    updated_at: datetime = Field(default_factory=utc_now)
