"""The policy overlay: what the live switches make of an outcome the judges reached.

``agents.policy`` holds the settings; this is the one rule that applies its two switches, in every
place a decision is made:

- the **kappa guard** tripped: would-be verdicts *and* would-be tie-break requests go to review as
  "kappa_guard" (auto-deciding is paused, and the tie-break stage decides automatically too);
- otherwise, the **tie-break switched off**: would-be tie-break requests go to review as
  "tiebreak_disabled".

Reviews keep their own, more specific reason. The guard is named first wherever both apply. The
primary stage overlays its reconciliation (:func:`apply_policy`); the tie-break stage asks
:func:`overriding_reason` before it judges (switched off since the request was sent) and before it
issues a verdict (the guard tripped meanwhile). Neither skips the judges while the guard is tripped:
their would-be answers travel with the review, so agreement with the humans can still be measured.
"""

from __future__ import annotations

from typing import Literal

from pairjudge.agents.policy import Policy
from pairjudge.agents.truth_table import OutcomeKind, Reconciliation

__all__ = ["PolicyReason", "apply_policy", "overriding_reason"]

PolicyReason = Literal["kappa_guard", "tiebreak_disabled"]


def overriding_reason(policy: Policy, would_be: OutcomeKind) -> PolicyReason | None:
    """The review reason ``policy`` puts in place of a would-be ``would_be``; None when it lets it stand."""
    if policy.kappa_guard_tripped and would_be in ("verdict", "tiebreak"):
        return "kappa_guard"
    if not policy.tiebreak_enabled and would_be == "tiebreak":
        return "tiebreak_disabled"
    return None


def apply_policy(rec: Reconciliation, policy: Policy) -> Reconciliation:
    """The kappa guard and the tie-break switch, applied to a reconciliation (``rec`` itself when neither applies)."""
    reason = overriding_reason(policy, rec.outcome)
    if reason is None:
        return rec
    return Reconciliation("review", reason, None, rec.mean_confidence, rec.consistent, rec.flip)
