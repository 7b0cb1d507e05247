"""The judging policy: every threshold and switch of docs/design.md §2, in one immutable value.

The Faust edge holds the current ``Policy`` and swaps it when ``pairjudge.control`` says so
(:meth:`Policy.apply`), so a decision always sees one consistent set of settings.

Risk levels (``CandidatePair.risk_level``, docs/guides/risk-levels.md): each level has its own three
thresholds (:class:`RiskThresholds`). The unprefixed ones are the ``normal`` level's, so a pair that
names no level is judged exactly as before; ``low_*`` and ``high_*`` are the other two levels'.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pairjudge.agents.spend import SpendAction, SpendCaps
from pairjudge.schemas.events import ConfidenceSource, ControlUpdate
from pairjudge.schemas.kinds import CONTROLS, RISK_THRESHOLD_KEYS, RISK_THRESHOLDS
from pairjudge.schemas.pair import RiskLevel
from pairjudge.schemas.rubric import DEFAULT_TIEBREAK_WEIGHTS, TieBreakWeights

__all__ = ["Policy", "RiskThresholds"]

#: Every threshold in [0, 1] that ``__post_init__`` checks, the risk levels' included.
_UNIT_INTERVAL_FIELDS = (
    *RISK_THRESHOLD_KEYS,
    "audit_share",
    "audit_uncertain_share",
    "audit_uncertain_margin",
    "audit_double_share",
)


@dataclass(frozen=True, slots=True)
class RiskThresholds:
    """The three confidences that route a pair of one risk level (docs/guides/risk-levels.md).

    At the primary stage, a would-be verdict whose mean confidence is at least ``primary`` is one; a
    would-be tie-break request whose confidence is below ``review_below`` (or unknown, while
    ``review_below`` is above 0) goes to review "risk_review" instead, skipping the tie-break; anything
    else goes to the tie-break, whose replies need ``tiebreak``. ``review_below`` 0 never reviews.
    """

    primary: float
    tiebreak: float
    review_below: float


#: What to do with a pair when the injection screen (``agents.injection_screen``) cannot answer.
ScreenFailure = Literal["review", "pass"]


@dataclass(frozen=True, slots=True)
class Policy:
    primary_confidence_threshold: float = 0.7  # docs/design.md §2.5
    tiebreak_enabled: bool = True  # live-switchable via control topic later
    tiebreak_confidence_threshold: float = 0.6  # seed 002 forced-choice re-ask threshold
    max_reasks: int = 2  # re-asks after the first ask, carrying the validation error
    #: Share of confident automatic verdicts also sent to review as an audit sample (seed 001: 5-10 %);
    #: 0 switches auditing off (``agents.sampling`` has the whole rule).
    audit_share: float = 0.05
    #: Mixed into the audit sample's hash (``agents.sampling.audit_fraction``): a new seed, a new sample.
    audit_seed: str = ""
    #: Share of *uncertain* verdicts audited instead (``agents.sampling``: from the tie-break stage, a split
    #: jury, or a confidence less than ``audit_uncertain_margin`` above its threshold).
    #: 2x the base: the Neyman allocation for typical judges (bench/human_gate.py, table 4; 5x cost labels).
    audit_uncertain_share: float = 0.10
    audit_uncertain_margin: float = 0.1
    #: No verdict's inclusion probability goes below this (while auditing is on): it bounds the 1/π weights.
    audit_floor: float = 0.01
    #: Share of drawn audit items that also go to a second, independent reviewer.
    audit_double_share: float = 0.1
    #: The label budget's factor on both shares, in (0, 1]; set at the edge from the measured verdict rate
    #: (``agents.sampling.budget_scale``), 1 without a budget.
    audit_scale: float = 1.0
    #: The normal level's "review below" confidence (``RiskThresholds.review_below``); 0: never (as before).
    review_below_confidence: float = 0.0
    #: The low level's thresholds: today's normal values, so "low" alone never loosens anything; an
    #: operator may lower them, and a series' calibrated threshold still raises the primary one.
    low_primary_confidence_threshold: float = 0.7
    low_tiebreak_confidence_threshold: float = 0.6
    low_review_below_confidence: float = 0.0
    #: The high level's: a verdict needs 0.85, and below 0.85 a person decides, not the tie-break's
    #: forced choice; the tie-break (a confident flip or tie) needs 0.8. Never looser than normal's
    #: (:meth:`thresholds_for` takes the stricter of the two).
    high_primary_confidence_threshold: float = 0.85
    high_tiebreak_confidence_threshold: float = 0.8
    high_review_below_confidence: float = 0.85
    max_output_chars: int = 20_000  # per candidate output; larger -> InputRejected("oversized_output", ...)
    max_prompt_chars: int = 20_000
    #: Send a pair to review "suspected_injection", before any judge call, when an output carries text
    #: aimed at its judge (``agents.injection``). Off only for outputs that quote such text on purpose.
    injection_guard: bool = True
    #: Datamark every untrusted text a judge is shown (outputs, turns, the task, its context) and tell the
    #: judge in the system message that marked text is data (``agents.untrusted.datamark``, spotlighting).
    #: A structural defence: it does not depend on recognising a disguise. Marked prompts hash apart.
    datamark: bool = True
    #: When the injection screen (``agents.injection_screen``) cannot answer after its retries: "review"
    #: holds the pair for a person (flag ``screen_unavailable``), "pass" judges it without the screen.
    screen_on_failure: ScreenFailure = "review"
    default_tiebreak: TieBreakWeights = DEFAULT_TIEBREAK_WEIGHTS
    kappa_guard_tripped: bool = False  # when True, every decision routes to review reason "kappa_guard"
    #: Which confidence the thresholds, the cascade's tiers and the risk levels read: "token_probability" (the
    #: judge's token probabilities, averaged over both orders, when both orders carry them; else the stated
    #: confidence) or "stated" (always the judge's stated number). docs/guides/judges.md.
    confidence_source: ConfidenceSource = "token_probability"
    #: Votes a jury's winner needs (agents.jury); None means a strict majority of all jurors.
    jury_quorum: int | None = None
    #: Calibrated auto-decision thresholds by drift series (``AuditSeries.key``), from the audit's
    #: ``pairjudge.thresholds`` topic; a pair of a series listed here needs at least that confidence.
    series_thresholds: Mapping[str, float] = field(default_factory=dict)
    #: The tie-break stage's own calibrated thresholds by drift series, from the same topic (keys
    #: ``<series>#tiebreak``): a tie-break verdict of a series listed here needs at least that mean confidence.
    tiebreak_series_thresholds: Mapping[str, float] = field(default_factory=dict)
    #: Series whose tie-break cannot reach its target (enough labels, no threshold reaches it): their flips
    #: go to review "tiebreak_disabled" instead of the tie-break (docs/guides/drift-audit.md#the-tie-break-stage).
    tiebreak_off_series: frozenset[str] = frozenset()
    #: The spending caps (``agents.spend``): US dollars per UTC clock hour for all pairs and for each
    #: experiment (0: no cap), what a pair over a cap meets, and the share the ``sample`` action still judges.
    spend_hourly_cap_usd: float = 0.0
    spend_experiment_hourly_cap_usd: float = 0.0
    spend_action: SpendAction = "review"
    spend_sample_share: float = 0.1
    #: The shadow experiments paused live, by id, comma-separated ("" none): they make no pairs until removed.
    shadow_paused: str = ""
    #: The shadow experiments' shares changed live: ``id=share`` pairs, comma-separated ("" none); a share is in
    #: [0, 1] and replaces the experiments file's.
    shadow_shares: str = ""

    def spend_caps(self) -> SpendCaps:
        return SpendCaps(
            self.spend_hourly_cap_usd, self.spend_experiment_hourly_cap_usd, self.spend_action, self.spend_sample_share
        )

    def __post_init__(self) -> None:
        # A bad control message must fail loudly here, not silently turn every pair into a verdict.
        for name in _UNIT_INTERVAL_FIELDS:
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {value!r}")
        # Both multiply into a recorded inclusion probability, which must stay > 0 while auditing is on.
        for name in ("audit_floor", "audit_scale"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must be within (0, 1], got {value!r}")
        if self.max_reasks < 0:
            raise ValueError(f"max_reasks must be >= 0, got {self.max_reasks!r}")
        if self.max_output_chars < 1 or self.max_prompt_chars < 1:
            raise ValueError("max_output_chars and max_prompt_chars must be positive")
        if self.jury_quorum is not None and self.jury_quorum < 1:
            raise ValueError(f"jury_quorum must be >= 1 or None, got {self.jury_quorum!r}")
        for series, value in (*self.series_thresholds.items(), *self.tiebreak_series_thresholds.items()):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"the threshold of series {series!r} must be within [0, 1], got {value!r}")
        self.spend_caps()  # raises for a negative cap, an unknown action or a share outside [0, 1]
        self.shadow_live()  # raises for a share that is not a number in [0, 1]

    def shadow_live(self) -> tuple[frozenset[str], dict[str, float]]:
        """The shadow experiments paused live, and the live shares by experiment id (``shadow_paused``,
        ``shadow_shares``)."""
        paused = frozenset(part.strip() for part in self.shadow_paused.split(",") if part.strip())
        shares: dict[str, float] = {}
        for part in (p.strip() for p in self.shadow_shares.split(",")):
            if not part:
                continue
            name, sep, value = part.partition("=")
            try:
                share = float(value) if sep else float("nan")
            except ValueError:
                share = float("nan")
            if not name.strip() or not 0.0 <= share <= 1.0:
                raise ValueError(f"shadow_shares takes id=share pairs with shares in [0, 1], got {part!r}")
            shares[name.strip()] = share
        return paused, shares

    def thresholds_for(self, risk: RiskLevel) -> RiskThresholds:
        """The thresholds a pair of this risk level is routed by.

        A high-risk pair never needs less than a normal one: raising a normal threshold above the
        high level's raises the high level's with it (each of the three, separately).
        """
        normal = self._level(RISK_THRESHOLDS["normal"])
        if risk == "high":
            high = self._level(RISK_THRESHOLDS["high"])
            return RiskThresholds(
                max(high.primary, normal.primary),
                max(high.tiebreak, normal.tiebreak),
                max(high.review_below, normal.review_below),
            )
        return normal if risk == "normal" else self._level(RISK_THRESHOLDS[risk])

    def _level(self, keys: tuple[str, str, str]) -> RiskThresholds:
        """One level's thresholds, read from the fields its registry entry names (``schemas.kinds``)."""
        return RiskThresholds(*(getattr(self, key) for key in keys))

    def primary_threshold_for(self, series_key: str, risk: RiskLevel = "normal") -> float:
        """The confidence a verdict needs in this series at this risk level: the level's threshold,
        raised (never lowered) by the series' calibrated one."""
        return max(self.thresholds_for(risk).primary, self.series_thresholds.get(series_key, 0.0))

    def tiebreak_threshold_for(self, risk: RiskLevel = "normal") -> float:
        """The confidence a tie-break reply needs at this risk level (below it: the forced-choice re-ask)."""
        return self.thresholds_for(risk).tiebreak

    def tiebreak_verdict_threshold_for(self, series_key: str, risk: RiskLevel = "normal") -> float:
        """The mean confidence a tie-break verdict needs in this series: the level's tie-break threshold, raised
        (never lowered) by the tie-break stage's own calibrated one when the audit has published one."""
        return max(self.thresholds_for(risk).tiebreak, self.tiebreak_series_thresholds.get(series_key, 0.0))

    def tiebreak_on_for(self, series_key: str) -> bool:
        """Whether flips of this series may go to the tie-break: it is switched on, and the audit has not
        switched it off for the series (its tie-break cannot reach its target)."""
        return self.tiebreak_enabled and series_key not in self.tiebreak_off_series

    def apply(self, update: ControlUpdate) -> Policy:
        """This policy with one live setting from ``pairjudge.control`` changed (validated like the rest)."""
        spec = CONTROLS[update.key]
        value = update.value
        if spec.value == "switch":
            if not isinstance(value, bool):
                raise ValueError(f"{update.key} needs a boolean, got {value!r}")
        elif spec.value == "choice":
            if value not in spec.choices:
                raise ValueError(f"{update.key} takes one of {', '.join(spec.choices)}, got {value!r}")
        elif spec.value == "text":
            if not isinstance(value, str):
                raise ValueError(f"{update.key} needs a text, got {value!r}")
        elif isinstance(value, str | bool):
            # bool is an int subclass; "threshold = true" is a mistake, not 1.0.
            raise ValueError(f"{update.key} needs a number, got {value!r}")
        else:
            value = float(value)
        # Every control key names the Policy field it sets; replace() validates the new value.
        changes: dict[str, Any] = {update.key: value}
        return dataclasses.replace(self, **changes)
