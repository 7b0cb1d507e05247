"""The kinds registry: stages, topic kinds, live control keys and the risk levels' thresholds, each declared once.

Everything that lists one of these derives from here: the Literals the code is typed with, topic creation
(``streams.kafka.topics``, ``pairjudge topics create``), the Faust topics and stage agents, the outcome
collector, the review page's control form, ``Policy.apply`` and the generated reference pages (topics, live
settings, risk thresholds: ``pairjudge_dev.docs_reference``). Adding a kind means adding its entry here
(a Literal member and its spec, side by side), and then its contract and its handler; the unit tests in
``tests/unit/test_kinds_registry.py`` find every place a new entry must reach.

Each Literal stays written out member by member, in its order, because it is also the wire format: the
JSON Schemas' enums (``pairjudge schemas export``) list them in that order. The spec tables beside them are
checked against the Literals when this module is imported, so the two cannot drift apart.

Pure: no pydantic model, no I/O; ``schemas.events`` and ``agents.policy`` import it, and ``streams`` derives
from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, NamedTuple, get_args

from pairjudge.schemas.pair import RiskLevel

__all__ = [
    "CHOICE_KEYS",
    "CONTROLS",
    "DEAD_LETTER_STAGES",
    "RISK_THRESHOLDS",
    "RISK_THRESHOLD_KEYS",
    "STAGES",
    "SWITCH_KEYS",
    "TEXT_KEYS",
    "TOPICS",
    "ControlKey",
    "ControlSpec",
    "DeadLetterStage",
    "RiskThresholdKeys",
    "SpendAction",
    "Stage",
    "StageSpec",
    "TopicKind",
    "TopicKindSpec",
    "WorkerStage",
]


# --- topic kinds -------------------------------------------------------------------------------------

#: Topics are named ``<PAIRJUDGE_TOPICS__PREFIX>.<kind>``.
TopicKind = Literal[
    "pairs",
    "verdicts",
    "tiebreak",
    "review",
    "labels",
    "deadletter",
    "audit",
    "control",
    "decisions",
    "observations",
    "thresholds",
    "score-events",
    "scores",
    "gate",
    "spend",
    "captures",
]
#: How a topic is laid out. ``partitioned``: ``PAIRJUDGE_KAFKA__PARTITIONS`` partitions, keyed so that a pair's
#: events share one. ``followed``: compacted, one partition, read whole by every worker (the live settings
#: and the spend). ``latest``: compacted, one partition, read whole by whoever asks (``pairjudge gate``).
TopicLayout = Literal["partitioned", "followed", "latest"]


@dataclass(frozen=True, slots=True)
class TopicKindSpec:
    """One topic kind: its layout, whether a pair's story ends there, and its row in the events reference."""

    #: What the records are keyed by (Markdown, for the reference table).
    key: str
    #: The contracts it carries, with ``{Model}`` for a link to an exported schema (Markdown).
    contract: str
    layout: TopicLayout = "partitioned"
    #: Where a pair's story ends (a verdict, a review request, a dead letter); the outcome collector reads these.
    final: bool = False
    #: A worker writes it: the secured-Kafka page's ACL table grants the workers WRITE on it (generated from this).
    worker_writes: bool = True

    @property
    def single_partition(self) -> bool:
        return self.layout != "partitioned"


TOPICS: Mapping[TopicKind, TopicKindSpec] = MappingProxyType(
    {
        "pairs": TopicKindSpec("`pair_id`", "{CandidatePair}", worker_writes=False),
        "verdicts": TopicKindSpec("`pair_id`", "{PairVerdict}", final=True),
        # A way-station, not an outcome: the tie-break stage reads it.
        "tiebreak": TopicKindSpec("`pair_id`", "{TieBreakRequest}"),
        "review": TopicKindSpec("`pair_id`", "{ReviewRequest}", final=True),
        "labels": TopicKindSpec("`pair_id`", "{HumanLabel}", worker_writes=False),
        "deadletter": TopicKindSpec("`pair_id` when it can be read, else the input's key", "{DeadLetter}", final=True),
        "audit": TopicKindSpec("series", "{AuditSnapshot} and {Alert}"),
        "control": TopicKindSpec("setting", "{ControlUpdate}", layout="followed", worker_writes=False),
        # The drift audit's internal topics (streams.audit.handlers): each stage's decision records, keyed by
        # pair id beside the outcomes, and the joined observations keyed by series.
        "decisions": TopicKindSpec(
            "`pair_id`",
            "{DecisionRecord} (only records the worker that decided cannot join itself: its producer keyed the "
            "pair by something else)",
        ),
        "observations": TopicKindSpec(
            "series",
            "{AuditDelta}, one per series, window and flush (workers before issue 27 sent one "
            "{AuditObservation} per observation; both are read)",
        ),
        # The calibrated auto-decision thresholds by series, compacted like control: every worker follows it.
        "thresholds": TopicKindSpec("series", "{ThresholdUpdate}", layout="followed"),
        # The champion-challenger scoreboard (streams.scores.handlers): its input keyed by experiment, its
        # snapshots, and the gate's latest decision per experiment.
        "score-events": TopicKindSpec(
            "experiment",
            "{ScoreEventBatch}, one per experiment and flush, and a single {ScoreEvent} for an expired audit sample",
        ),
        "scores": TopicKindSpec("experiment", "{ScoreSnapshot}"),
        "gate": TopicKindSpec("experiment", "{GateUpdate}", layout="latest"),
        # What each worker spent on judge calls per clock hour, latest per worker and hour: every worker follows
        # it for the spending caps (streams.worker.spend).
        "spend": TopicKindSpec(
            "`<worker>|<hour>`",
            "{SpendReport}: a worker's spend so far in a clock hour, for the "
            "[spending caps](../guides/cascade.md#the-spending-cap); an empty value once the hour is two hours past",
            layout="followed",
        ),
        # Production exchanges (the producer SDK, ``pairjudge.streams.capture``), for the shadow stage to turn into
        # pairs: keyed by capture id, so a capture's redeliveries share a partition.
        "captures": TopicKindSpec("`capture_id`", "{Capture}: one production exchange, in OpenAI's chat shape"),
    }
)


# --- stages ------------------------------------------------------------------------------------------

#: The stages that judge a pair. The contracts name them (a decision record's and a verdict's ``stage``), so
#: their enums list exactly these.
Stage = Literal["primary", "tiebreak"]
#: Every stage a worker runs: each consumes one topic with one Faust agent and records what it published per
#: input (``streams.worker.published``), so a redelivered input publishes the same outcome again. The judging
#: stages, and the shadow stage, which judges nothing (captures in, pairs out: ``streams.shadow``) and so stays
#: out of ``Stage`` and the judging contracts' enums.
WorkerStage = Literal[Stage, "shadow"]


@dataclass(frozen=True, slots=True)
class StageSpec:
    """One stage: the topic it consumes and its Faust agent's name (the consumer group's member name)."""

    source: TopicKind
    agent: str


STAGES: Mapping[WorkerStage, StageSpec] = MappingProxyType(
    {
        "primary": StageSpec(source="pairs", agent="pairjudge.judge"),
        "tiebreak": StageSpec(source="tiebreak", agent="pairjudge.tiebreak"),
        "shadow": StageSpec(source="captures", agent="pairjudge.shadow"),
    }
)
#: Where an input can fail, as a dead letter records it: reading its bytes, checking the pair, the primary
#: stage's judging, the tie-break stage, the shadow stage (a capture: unreadable, set aside, or its challenger
#: failed).
DeadLetterStage = Literal["decode", "validate", "judge", "tiebreak", "shadow"]
DEAD_LETTER_STAGES: tuple[DeadLetterStage, ...] = get_args(DeadLetterStage)


# --- live control keys -------------------------------------------------------------------------------

#: A key of the compacted control topic. Each names the ``Policy`` field it sets (and the ``policy`` setting
#: that configures it: ``PAIRJUDGE_POLICY__<KEY>``).
ControlKey = Literal[
    "tiebreak_enabled",
    "tiebreak_confidence_threshold",
    "primary_confidence_threshold",
    "audit_share",
    "audit_uncertain_share",
    "audit_floor",
    "kappa_guard_tripped",
    "review_below_confidence",
    "low_primary_confidence_threshold",
    "low_tiebreak_confidence_threshold",
    "low_review_below_confidence",
    "high_primary_confidence_threshold",
    "high_tiebreak_confidence_threshold",
    "high_review_below_confidence",
    "spend_hourly_cap_usd",
    "spend_experiment_hourly_cap_usd",
    "spend_action",
    "spend_sample_share",
    "shadow_paused",
    "shadow_shares",
]
#: ``text``: a short list the key's ``Policy`` field parses (the shadow experiments' live changes).
ControlValueKind = Literal["switch", "number", "choice", "text"]


@dataclass(frozen=True, slots=True)
class ControlSpec:
    """What one control key takes: a number, a switch, or one of ``choices``."""

    value: ControlValueKind = "number"
    choices: tuple[str, ...] = ()
    #: Set from the operators' form. The kappa guard is not: a person resumes it with its own button, and only
    #: the audit (or ``pairjudge control pause``) trips it.
    on_form: bool = True
    #: What the key does, for the live settings reference, when no ``policy`` setting of its name says it.
    about: str = ""
    #: For the operators' page, in plain words: the control's name, what it does, and the unit of its value (the
    #: allowed range is the ``policy`` setting's own, read from its field).
    label: str = ""
    meaning: str = ""
    unit: str = ""


#: What a new pair over a spending cap meets (``agents.spend`` says what each does): the ``policy.spend_action``
#: setting, the live key's choices and the policy's field all take this one list.
SpendAction = Literal["review", "sample", "queue"]

CONTROLS: Mapping[ControlKey, ControlSpec] = MappingProxyType(
    {
        "tiebreak_enabled": ControlSpec(
            "switch",
            label="Second look by the tie-break judge",
            meaning="When the judge is unsure or its two orders disagree, ask the tie-break judge before a person. "
            "Off: those pairs go straight to review.",
            unit="on or off",
        ),
        "tiebreak_confidence_threshold": ControlSpec(
            label="Confidence the tie-break needs",
            meaning="How sure the tie-break judge must be. Below it, it is asked once more for a forced choice; still"
            " below, a person decides.",
            unit="confidence",
        ),
        "primary_confidence_threshold": ControlSpec(
            label="Confidence a verdict needs",
            meaning="How sure the judge must be, on average over both orders, for its verdict to be published. Below "
            "it, the pair gets a second look.",
            unit="confidence",
        ),
        # The active sampling shares (agents.sampling): the audit share of confident and of uncertain verdicts,
        # and the floor under every inclusion probability.
        "audit_share": ControlSpec(
            label="Confident verdicts checked by people",
            meaning="The share of confident verdicts also sent to people as audit samples, to measure how often the "
            "judge agrees with them. 0 turns auditing off.",
            unit="share of pairs (0.05 is 5%)",
        ),
        "audit_uncertain_share": ControlSpec(
            label="Uncertain verdicts checked by people",
            meaning="The same for uncertain verdicts: decided at the tie-break, by a split jury, or only just above "
            "the confidence needed.",
            unit="share of pairs (0.05 is 5%)",
        ),
        "audit_floor": ControlSpec(
            label="Smallest chance of being checked",
            meaning="While auditing is on, no verdict's chance of going to people falls below this, whatever the "
            "label budget does. It keeps the estimates steady.",
            unit="probability",
        ),
        "kappa_guard_tripped": ControlSpec(
            "switch",
            on_form=False,
            label="Automatic decisions paused",
            meaning="On: every pair goes to a person. Set by the drift audit when the judge agrees too little with "
            "people.",
            unit="on or off",
            about="Seed 001's kappa guard: true pauses automatic decisions on every worker (every pair goes to "
            'review "kappa_guard"). Set by the drift audit when kappa against humans falls below its floor, or by '
            "``pairjudge control pause``; only a person sets it back (``pairjudge control resume --by NAME``).",
        ),
        # The risk levels' thresholds (RISK_THRESHOLDS below).
        "review_below_confidence": ControlSpec(
            label="Straight to a person below (normal risk)",
            meaning="A pair of normal risk that would get a second look with a confidence below this goes to a person"
            " instead. 0: never.",
            unit="confidence",
        ),
        "low_primary_confidence_threshold": ControlSpec(
            label="Confidence a verdict needs (low risk)",
            meaning='As "Confidence a verdict needs", for pairs marked low risk.',
            unit="confidence",
        ),
        "low_tiebreak_confidence_threshold": ControlSpec(
            label="Confidence the tie-break needs (low risk)",
            meaning='As "Confidence the tie-break needs", for pairs marked low risk.',
            unit="confidence",
        ),
        "low_review_below_confidence": ControlSpec(
            label="Straight to a person below (low risk)",
            meaning='As "Straight to a person below", for pairs marked low risk. 0: never.',
            unit="confidence",
        ),
        "high_primary_confidence_threshold": ControlSpec(
            label="Confidence a verdict needs (high risk)",
            meaning='As "Confidence a verdict needs", for pairs marked high risk; never looser than for normal risk.',
            unit="confidence",
        ),
        "high_tiebreak_confidence_threshold": ControlSpec(
            label="Confidence the tie-break needs (high risk)",
            meaning='As "Confidence the tie-break needs", for pairs marked high risk; never looser than for normal '
            "risk.",
            unit="confidence",
        ),
        "high_review_below_confidence": ControlSpec(
            label="Straight to a person below (high risk)",
            meaning="A pair marked high risk with a confidence below this goes to a person without a second look. 0: "
            "never.",
            unit="confidence",
        ),
        # The spending caps (agents.spend): US dollars per UTC clock hour for all pairs and for each experiment
        # (0: no cap), what a pair over a cap meets, and the share "sample" still judges.
        "spend_hourly_cap_usd": ControlSpec(
            label="Spending cap per hour, all pairs",
            meaning="What all workers together may spend on judge calls in one clock hour (UTC). Past it, new pairs "
            "meet the action below. 0: no cap.",
            unit="US dollars per hour",
        ),
        "spend_experiment_hourly_cap_usd": ControlSpec(
            label="Spending cap per hour, each experiment",
            meaning="The same cap for each experiment's pairs on their own. 0: no cap.",
            unit="US dollars per hour",
        ),
        "spend_action": ControlSpec(
            "choice",
            choices=get_args(SpendAction),
            label="What happens past a spending cap",
            meaning="review: a person decides, with no judge call; sample: only a share of the pairs is judged; "
            "queue: pairs wait until the hour turns. No pair is dropped.",
            unit="an action",
        ),
        "spend_sample_share": ControlSpec(
            label="Share still judged past a cap",
            meaning="With the sample action: the share of pairs past a cap that the judge still decides (chosen by "
            "pair id).",
            unit="share of pairs (0.05 is 5%)",
        ),
        # The shadow stage's experiments (streams.shadow): paused ones, and shares changed live, by experiment id.
        # Set with ``pairjudge control set``, not on the form (a list of ids is not a form field).
        "shadow_paused": ControlSpec(
            "text", on_form=False, label="Paused shadow experiments", unit="experiment ids, comma-separated"
        ),
        "shadow_shares": ControlSpec(
            "text", on_form=False, label="Shadow experiments' shares", unit="id=share pairs, comma-separated"
        ),
    }
)
#: The control keys whose value is a switch rather than a number.
SWITCH_KEYS: tuple[ControlKey, ...] = tuple(k for k, spec in CONTROLS.items() if spec.value == "switch")
#: The control keys whose value is a short text their ``Policy`` field parses.
TEXT_KEYS: tuple[ControlKey, ...] = tuple(k for k, spec in CONTROLS.items() if spec.value == "text")
#: The control keys whose value is one of a few words.
CHOICE_KEYS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {k: spec.choices for k, spec in CONTROLS.items() if spec.value == "choice"}
)


# --- the risk levels' thresholds ---------------------------------------------------------------------


class RiskThresholdKeys(NamedTuple):
    """The control keys (and ``Policy`` fields) of one risk level's three thresholds
    (docs/guides/risk-levels.md): what a primary verdict needs, what a tie-break reply needs, and the
    confidence below which a would-be tie-break goes to review "risk_review" instead."""

    primary: ControlKey
    tiebreak: ControlKey
    review_below: ControlKey


#: The unprefixed thresholds are the normal level's, so a pair that names no level is judged as before.
RISK_THRESHOLDS: Mapping[RiskLevel, RiskThresholdKeys] = MappingProxyType(
    {
        "normal": RiskThresholdKeys(
            "primary_confidence_threshold", "tiebreak_confidence_threshold", "review_below_confidence"
        ),
        "low": RiskThresholdKeys(
            "low_primary_confidence_threshold", "low_tiebreak_confidence_threshold", "low_review_below_confidence"
        ),
        "high": RiskThresholdKeys(
            "high_primary_confidence_threshold", "high_tiebreak_confidence_threshold", "high_review_below_confidence"
        ),
    }
)
#: All nine, level by level: each a number in [0, 1].
RISK_THRESHOLD_KEYS: tuple[ControlKey, ...] = tuple(key for keys in RISK_THRESHOLDS.values() for key in keys)


def _same(what: str, literal: tuple[str, ...], table: Iterable[str]) -> None:
    if tuple(table) != literal:
        raise AssertionError(f"{what}: the table's entries {tuple(table)} must be the Literal's {literal}, in order")


# Checked on import, so a Literal member without its entry (or the reverse) fails every test at once.
_same("TOPICS", get_args(TopicKind), TOPICS)
_same("STAGES", get_args(WorkerStage), STAGES)
_same("CONTROLS", get_args(ControlKey), CONTROLS)
if set(RISK_THRESHOLDS) != set(get_args(RiskLevel)):
    raise AssertionError(f"RISK_THRESHOLDS needs one entry per risk level {get_args(RiskLevel)}")
