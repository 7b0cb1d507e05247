"""Optional juries: several judge models per rubric, each judging both orders (docs/design.md §2.5).

Every juror judges AB and BA exactly like a single judge (same prompts, validation, re-asks), and all
jurors x both orders run concurrently in one task group. Each juror's two orderings are reconciled
with :func:`agents.truth_table.reconcile`, which turns them into one vote or one recorded abstention:

- both orders name the same candidate (confident or not)   -> a vote for that candidate
- the orders name different candidates (a flip)            -> abstains "position_inconsistent"
- either order says TIE                                    -> abstains "tie" (vote "TIE", not counted)
- an ordering stayed invalid after its re-asks (or failed) -> abstains "invalid"

Then the jury (first that applies wins):

0. any juror's judge refused a request   -> review "judge_rejected", whatever the others said: a
   (a 4xx such as a bad key)                verdict would name a jury (``jury_info``) of which one
                                            member never judged, and a refusal is a configuration
                                            fault to surface, not an abstention to absorb
1. every juror abstained "invalid"       -> review "judge_unavailable" if any juror's judge was down,
                                            else "ordering_invalid" (as for one judge)
2. a candidate has the quorum of votes   -> verdict when the mean confidence of *its* voters is >=
   and strictly more than the other one     ``primary_confidence_threshold``, else tie-break
                                            "low_confidence"
3. no quorum                             -> tie-break, with the reason that explains it best: "tie" if
                                            tie abstentions outnumber flips, "position_inconsistent"
                                            if any juror flipped, "invalid_verdict" if the only
                                            abstentions were invalid orderings, and "tie" when nobody
                                            abstained and the jurors simply split.

The quorum is ``policy.jury_quorum`` votes, or a strict majority of *all* jurors (abstainers
included) when it is None, so abstentions cannot shrink the jury into a small "majority". A winner
must also beat the other candidate outright, so a low quorum cannot elect both.

This module is the jury's arithmetic only. :func:`agents.core.judge_pair` runs it for every primary
decision: one judge is a jury of one, so both take one path (same prompts, the same policy, the same
audit sampling). Passed as a list, even a jury of one reports its vote in ``jury`` and the
``jury_size``/``jury_abstentions`` facts; a single judge's events carry no votes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pairjudge.agents.judge import Judge, JudgeCall, judge_info
from pairjudge.agents.truth_table import Reconciliation, at_least, failure_reason, reconcile
from pairjudge.schemas.events import AbstainReason, JudgeInfo, JuryVote, OrderingResult, ReviewReason, TieBreakReason
from pairjudge.schemas.pair import TIE
from pairjudge.schemas.replies import Position

__all__ = [
    "JUROR_PROVIDER",
    "Juror",
    "juror",
    "jury_info",
    "position_lean",
    "reconcile_jury",
    "required_votes",
    "tally",
    "with_agreement",
]

#: ``JudgeInfo.provider`` of a verdict decided by a jury of two or more.
JUROR_PROVIDER = "jury"


@dataclass(frozen=True, slots=True)
class Juror:
    """One juror's judged orderings and what they reconcile to (before the jury's tally)."""

    info: JudgeInfo
    ab: OrderingResult
    ba: OrderingResult
    calls: tuple[JudgeCall, ...]
    rec: Reconciliation
    vote: JuryVote


# --- pure pieces ------------------------------------------------------------------------------


def required_votes(jurors: int, quorum: int | None) -> int:
    """Votes a winner needs: ``quorum``, or a strict majority of all ``jurors`` when it is None."""
    if jurors < 1:
        raise ValueError("a jury needs at least one judge")
    if quorum is None:
        return jurors // 2 + 1
    if not 1 <= quorum <= jurors:
        # A quorum no jury of this size can reach would silently send every pair to tie-break.
        raise ValueError(f"jury_quorum {quorum} cannot be reached by a jury of {jurors}")
    return quorum


def position_lean(ab: OrderingResult, ba: OrderingResult) -> Position | None:
    """ "A"/"B" when both orders picked whatever sat in that position, whoever it was; else None.

    Only a flip can lean: a consistent juror picks A in one order and B in the other.
    """
    if ab.valid and ba.valid and ab.raw_winner == ba.raw_winner and ab.raw_winner in ("A", "B"):
        return "A" if ab.raw_winner == "A" else "B"
    return None


def jury_info(judges: Sequence[Judge], prompt_template_hash: str) -> JudgeInfo:
    """The ``JudgeInfo`` of a jury: the judge itself for a jury of one, else provider "jury".

    The model (and version) strings join every juror's in jury order, so a change of any juror opens
    a new drift series. The temperature is the highest juror's; ``heuristic`` is set if any juror is
    heuristic, so no verdict that leans on text features passes for a model's reading.
    """
    if len(judges) == 1:
        return judge_info(judges[0], prompt_template_hash)
    jurors = [j.identity for j in judges]
    versions = [j.version for j in jurors]
    return JudgeInfo(
        provider=JUROR_PROVIDER,
        model="+".join(j.model for j in jurors),
        version="+".join(versions) if any(versions) else "",
        prompt_template_hash=prompt_template_hash,
        temperature=max(j.temperature for j in jurors),
        heuristic=any(j.heuristic for j in jurors),
    )


def _vote(info: JudgeInfo, ab: OrderingResult, ba: OrderingResult, rec: Reconciliation) -> JuryVote:
    """A juror's vote from its own reconciliation (``agreed_with_majority`` is filled in later)."""
    reason: AbstainReason | None
    vote: str | None
    if rec.outcome == "review":
        reason, vote = "invalid", None
    elif rec.flip:
        reason, vote = "position_inconsistent", None
    elif rec.reason == "tie":
        reason, vote = "tie", TIE
    else:  # a verdict, or a consistent but unconfident pick: both are votes
        reason, vote = None, ab.mapped_winner
    return JuryVote(
        judge=info,
        vote=vote,
        abstained=reason is not None,
        abstain_reason=reason,
        confidence=rec.mean_confidence,
        orderings=(ab, ba),
        lean=position_lean(ab, ba),
    )


def tally(votes: Sequence[JuryVote], needed: int) -> str | None:
    """The candidate with at least ``needed`` votes and strictly more than any other; else None."""
    counts = Counter(v.vote for v in votes if not v.abstained and v.vote is not None)
    ranked = counts.most_common()
    if not ranked:
        return None
    top, top_count = ranked[0]
    runner_up = ranked[1][1] if len(ranked) > 1 else 0
    return top if top_count >= needed and top_count > runner_up else None


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _no_quorum_reason(votes: Sequence[JuryVote]) -> TieBreakReason:
    reasons = Counter(v.abstain_reason for v in votes if v.abstained)
    ties, flips = reasons["tie"], reasons["position_inconsistent"]
    if ties > flips:
        return "tie"
    if flips:
        # As for one judge, a flip outranks a tie: it is the stronger evidence of position bias.
        return "position_inconsistent"
    if reasons["invalid"]:
        return "invalid_verdict"
    return "tie"  # nobody abstained: the jurors split between the two candidates


def reconcile_jury(jurors: Sequence[Juror], needed: int, threshold: float) -> Reconciliation:
    """What the jurors add up to, as one ``Reconciliation`` (rules 0-3 of the module docstring).

    ``consistent`` is True when every juror's two orders agreed (TIE/TIE included, as for one judge)
    and ``flip`` when any juror flipped; these feed the ``pairjudge.consistent``/``flip`` attributes.
    """
    votes = [j.vote for j in jurors]
    consistent = all(j.rec.consistent for j in jurors)
    flip = any(j.rec.flip for j in jurors)
    # The tally first, then the rules over it: the truth table's precedence of failures and its threshold.
    winner = tally(votes, needed)
    # The winner's voters' mean confidence; without a winner, every juror's that has one.
    counted = [j for j in jurors if winner is None or (not j.vote.abstained and j.vote.vote == winner)]
    mean = _mean([j.vote.confidence for j in counted])
    side = _both_confidences([j.rec for j in counted if j.vote.confidence is not None])
    failed = failure_reason(o.error_kind for j in jurors for o in (j.ab, j.ba) if not o.valid)
    if failed == "judge_rejected":
        return Reconciliation("review", failed, None, None, consistent=False, flip=flip, failure=failed)
    if all(v.abstain_reason == "invalid" for v in votes):
        reason: ReviewReason = failed or "ordering_invalid"
        return Reconciliation("review", reason, None, None, consistent=False, flip=False, failure=failed)
    if winner is not None:
        if mean is None:  # pragma: no cover - a vote always comes from two valid orderings
            raise ValueError("majority voters must carry a confidence")
        if at_least(mean, threshold):
            return Reconciliation("verdict", None, winner, mean, consistent=consistent, flip=flip, **side)
        return Reconciliation("tiebreak", "low_confidence", None, mean, consistent=consistent, flip=flip, **side)
    split = _no_quorum_reason(votes)
    return Reconciliation("tiebreak", split, None, mean, consistent=consistent, flip=flip, **side)


def _both_confidences(recs: Sequence[Reconciliation]) -> dict[str, Any]:
    """The counted jurors' token and stated means side by side, when every one of them had both; and the
    source, token probability when every one of them decided on it (one judge: its own, unchanged)."""
    if not recs or any(r.token_confidence is None or r.stated_confidence is None for r in recs):
        return {}
    side: dict[str, Any] = {
        "token_confidence": _mean([r.token_confidence for r in recs]),
        "stated_confidence": _mean([r.stated_confidence for r in recs]),
    }
    if all(r.confidence_source == "token_probability" for r in recs):
        side["confidence_source"] = "token_probability"
    return side


def with_agreement(votes: Sequence[JuryVote], winner: str | None) -> tuple[JuryVote, ...]:
    """Votes with ``agreed_with_majority`` set for every juror that voted, when there is a majority."""
    if winner is None:
        return tuple(votes)
    return tuple(v if v.abstained else v.model_copy(update={"agreed_with_majority": v.vote == winner}) for v in votes)


def juror(
    info: JudgeInfo,
    ab: OrderingResult,
    ba: OrderingResult,
    calls: tuple[JudgeCall, ...],
    threshold: float,
    *,
    token_probability: bool = False,
) -> Juror:
    """One juror from its two judged orderings: reconciled as one judge would be, then its vote
    (``token_probability``: on token probabilities where both orders have them, ``agents.truth_table.reconcile``)."""
    rec = reconcile(ab, ba, threshold, token_probability=token_probability)
    return Juror(info, ab, ba, calls, rec, _vote(info, ab, ba, rec))
