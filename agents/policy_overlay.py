"""The policy overlay: what the live switches and the pair's risk level make of an outcome the judges reached.

``agents.policy`` holds the settings; this is the one rule that applies them, in every place a
decision is made, the first that applies winning:

- the **kappa guard** tripped: would-be verdicts *and* would-be tie-break requests go to review as
  "kappa_guard" (auto-deciding is paused, and the tie-break stage decides automatically too);
- the pair's **risk level** asks a person (primary stage): a would-be tie-break request whose mean
  confidence is below the level's ``review_below`` (``Policy.thresholds_for``; 0.85 for "high" by
  default) goes to review as "risk_review", so the tie-break's forced choice never decides it. A
  would-be verdict already met the level's own, stricter, primary threshold (``agents.core``);
- otherwise, the **tie-break switched off**: would-be tie-break requests go to review as
  "tiebreak_disabled", everywhere (``tiebreak_enabled``) or in one series whose tie-break the drift audit
  found unable to reach its target (``Policy.tiebreak_off_series``, ``agents.audit.stages``).

Reviews keep their own, more specific reason. The guard is named first wherever it applies, and the
risk level before the switch: such a pair would go to a person with the tie-break on too. The
primary stage overlays its reconciliation (:func:`apply_policy`); the tie-break stage asks
:func:`overriding_reason` before it judges (switched off since the request was sent) and before it
issues a verdict (the guard tripped meanwhile). Neither skips the judges while the guard is tripped:
their would-be answers travel with the review, so agreement with the humans can still be measured.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from pairjudge.agents.policy import Policy
from pairjudge.agents.truth_table import Reconciliation, at_least
from pairjudge.schemas.outcomes import DecidedKind
from pairjudge.schemas.pair import RiskLevel

__all__ = ["PolicyReason", "SwitchReason", "apply_policy", "overriding_reason", "wants_review"]

#: What the two live switches put in place of an outcome (both stages).
SwitchReason = Literal["kappa_guard", "tiebreak_disabled"]
#: Every review reason of the overlay: the switches', and the risk level's (primary stage only).
PolicyReason = SwitchReason | Literal["risk_review"]


def overriding_reason(policy: Policy, would_be: DecidedKind, series_key: str = "") -> SwitchReason | None:
    """The review reason ``policy``'s switches put in place of a would-be ``would_be`` of the series ``series_key``;
    None when they let it stand."""
    if policy.kappa_guard_tripped and would_be in ("verdict", "tiebreak"):
        return "kappa_guard"
    if not policy.tiebreak_on_for(series_key) and would_be == "tiebreak":
        return "tiebreak_disabled"
    return None


def wants_review(policy: Policy, risk: RiskLevel, confidence: float | None) -> bool:
    """Whether a would-be tie-break request of this risk level goes to a person instead.

    An unknown confidence (a jury whose jurors left none) counts as below any ``review_below`` above 0:
    nothing shows the judges were sure enough.
    """
    review_below = policy.thresholds_for(risk).review_below
    if review_below <= 0.0:
        return False
    return confidence is None or not at_least(confidence, review_below)


def apply_policy(
    rec: Reconciliation, policy: Policy, risk: RiskLevel = "normal", series_key: str = ""
) -> Reconciliation:
    """The kappa guard, the risk level and the tie-break switch (everywhere, or for the pair's series
    ``series_key``), applied to a primary reconciliation (``rec`` itself when none applies)."""
    reason: PolicyReason | None
    if policy.kappa_guard_tripped:
        reason = overriding_reason(policy, rec.outcome, series_key)
    elif rec.outcome == "tiebreak" and wants_review(policy, risk, rec.mean_confidence):
        reason = "risk_review"
    else:
        reason = overriding_reason(policy, rec.outcome, series_key)
    if reason is None:
        return rec
    return dataclasses.replace(rec, outcome="review", reason=reason, winner=None, failure=None)
