"""The backtest: recorded judge answers replayed through the judging core under a policy.

Each recorded pair (``schemas.backtest.RecordedPair``) becomes a pair with placeholder texts and a judge
that answers each order with what was recorded for it. The pair then goes through :func:`agents.core.judge_pair`
and, when the primary stage asks for it, :func:`agents.core.resolve_tiebreak`: the checks, the re-asks, the
reconciliation of the two orders, the risk level, the tie-break switch and the audit draw are the core's own,
so the outcome is the one the worker would have published given those answers. No decision rule is written
here; this module only reads the outcome and counts.

What a replay cannot know: a pair that reaches the tie-break without a recorded tie-break answer is counted as
"tie-break not recorded", not guessed. An answer recorded without a confidence is replayed as 1.0 (the judge
stated no doubt), so the threshold never holds it back; :class:`PolicySummary` counts them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pairjudge.agents.core import judge_pair, resolve_tiebreak
from pairjudge.agents.cost import cost_of, total_usd
from pairjudge.agents.judge import JudgeRequest, JudgeResponse
from pairjudge.agents.policy import Policy
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.agents.stats import wilson_interval
from pairjudge.schemas.backtest import HumanLabel, RecordedAnswer, RecordedOrders, RecordedPair
from pairjudge.schemas.events import OrderingResult, PairVerdict, ReviewRequest, TieBreakRequest
from pairjudge.schemas.pair import TIE, Candidate, CandidatePair, CandidateSource, PairMetadata, Task
from pairjudge.schemas.rubric import DEFAULT_TIEBREAK_WEIGHTS, PairwiseRubric

__all__ = [
    "FIRST",
    "SECOND",
    "PolicySummary",
    "Replayed",
    "StageAgreement",
    "majority_label",
    "recorded_judge",
    "recorded_pair",
    "replay",
    "replay_all",
    "summarise",
]

#: The candidate ids of a replayed pair: a verdict's winner is then already the relative label.
FIRST, SECOND = "first", "second"
#: Who settled a replayed pair.
Settled = Literal["primary", "tiebreak", "people", "tiebreak_unrecorded"]
_CRITERION = "overall"
_SOURCE = CandidateSource(model="recorded")


def recorded_pair(row: RecordedPair) -> CandidatePair:
    """The pair the core judges for ``row``: placeholder texts (the answers are recorded, the texts are not
    needed), the row's id (the audit draw hashes it, as live), its experiment and risk level."""
    return CandidatePair(
        pair_id=row.pair_id,
        task=Task(prompt="A recorded pair, replayed from its recorded answers.", context=None),
        candidates=(
            Candidate(candidate_id=FIRST, output="The first output (recorded).", source=_SOURCE),
            Candidate(candidate_id=SECOND, output="The second output (recorded).", source=_SOURCE),
        ),
        rubric=PairwiseRubric(criteria=(_CRITERION,)),
        metadata=PairMetadata(experiment_id=row.experiment),
        risk_level=row.risk_level,
    )


def _pairwise_text(answer: RecordedAnswer) -> str:
    if not answer.valid or answer.winner is None:
        return "the recorded reply could not be read"
    winner = TIE if answer.winner == "tie" else answer.winner
    confidence = 1.0 if answer.confidence is None else answer.confidence
    return json.dumps(
        {
            "analysis": {
                "responseA": {"strengths": ["recorded"], "weaknesses": []},
                "responseB": {"strengths": ["recorded"], "weaknesses": []},
            },
            "comparison": [
                {
                    "criterion": _CRITERION,
                    "aAssessment": "recorded",
                    "bAssessment": "recorded",
                    "winner": winner,
                    "reasoning": "recorded answer",
                }
            ],
            "result": {
                "winner": winner,
                "confidence": confidence,
                "reasoning": "recorded answer",
                "differentiators": [],
            },
        }
    )


def _tiebreak_text(answer: RecordedAnswer) -> str:
    """Seed 002's reply with every criterion won by the recorded winner; a recorded tie is the judge applying
    the seed's escalation rule (the core sends it to a person, "tiebreak_no_signal")."""
    if not answer.valid or answer.winner is None:
        return "the recorded reply could not be read"
    letter = "A" if answer.winner == "tie" else answer.winner
    criteria = DEFAULT_TIEBREAK_WEIGHTS.criteria
    total = sum(c.weight for c in criteria)
    return json.dumps(
        {
            "winner": letter,
            "criteria_analysis": [
                {"criterion": c.name, "weight": c.weight, "winner": letter, "rationale": "recorded"} for c in criteria
            ],
            "weighted_score_a": total if letter == "A" else 0.0,
            "weighted_score_b": total if letter == "B" else 0.0,
            "escalation_triggered": answer.winner == "tie",
            "final_justification": "recorded answer",
            "confidence": 1.0 if answer.confidence is None else answer.confidence,
        }
    )


def recorded_judge(orders: RecordedOrders, *, tiebreak: bool = False) -> ScriptedJudge:
    """A judge answering each order with its recorded answer; the cost is charged on the first ask only."""
    render = _tiebreak_text if tiebreak else _pairwise_text

    def answer(request: JudgeRequest) -> JudgeResponse:
        recorded = orders.ab if request.order == "AB" else orders.ba
        cost = recorded.cost_usd if request.attempt == 0 else (None if recorded.cost_usd is None else 0.0)
        return JudgeResponse(render(recorded), "recorded", cost_usd=cost)

    return ScriptedJudge(answer, model="recorded", provider="recorded")


@dataclass(frozen=True, slots=True)
class Replayed:
    """One recorded pair as the core decided it under one policy."""

    pair_id: str
    settled_by: Settled
    #: The decided winner (a verdict's), relative to the pair; None when not decided automatically.
    winner: HumanLabel | None
    #: The review's reason (a pair sent to people), or "tiebreak_unrecorded".
    reason: str | None
    #: The verdict was also drawn for the audit sample (a person labels it too).
    audited: bool
    #: For a pair sent to people: the output both of the last stage's orders named, if they named the same one.
    lean: HumanLabel | None
    cost_usd: float | None
    human: HumanLabel | None
    #: Answers replayed without a recorded confidence (counted as 1.0).
    no_confidence: int = 0


def majority_label(labels: Sequence[HumanLabel]) -> HumanLabel | None:
    """The people's answer: the label most gave; a split between the top two is a tie; None without labels."""
    if not labels:
        return None
    ranked = Counter(labels).most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return "tie"
    return ranked[0][0]


def _relative(winner: str | None) -> HumanLabel | None:
    if winner is None:
        return None
    return "tie" if winner == TIE else winner  # type: ignore[return-value]  # the ids are FIRST and SECOND


def _lean(orderings: Sequence[OrderingResult]) -> HumanLabel | None:
    last = [o for o in orderings[-2:] if o.valid]
    if len(last) == 2 and last[0].mapped_winner == last[1].mapped_winner and last[0].mapped_winner != TIE:
        return _relative(last[0].mapped_winner)
    return None


async def replay(row: RecordedPair, policy: Policy) -> Replayed:
    """``row`` through the core under ``policy``: the primary stage, then the tie-break if it asks for one."""
    pair = recorded_pair(row)
    answers = [row.primary.ab, row.primary.ba]
    decision = await judge_pair(pair, recorded_judge(row.primary), policy)
    outcome = decision.outcome
    audited = decision.audit_copy is not None
    costs = [cost_of(decision.calls)]
    if isinstance(outcome, TieBreakRequest):
        if row.tiebreak is None:
            return Replayed(
                row.pair_id,
                "tiebreak_unrecorded",
                None,
                "tiebreak_unrecorded",
                False,
                None,
                total_usd(costs),
                majority_label(row.labels),
                _unstated(answers),
            )
        answers += [row.tiebreak.ab, row.tiebreak.ba]
        second = await resolve_tiebreak(outcome, recorded_judge(row.tiebreak, tiebreak=True), policy)
        outcome, audited = second.outcome, second.audit_copy is not None
        costs.append(cost_of(second.calls))
    cost = total_usd(costs)
    human = majority_label(row.labels)
    if isinstance(outcome, PairVerdict):
        stage: Settled = "tiebreak" if outcome.decided_by == "tiebreak" else "primary"
        return Replayed(
            row.pair_id, stage, _relative(outcome.winner), None, audited, None, cost, human, _unstated(answers)
        )
    if isinstance(outcome, ReviewRequest):
        lean = _lean(outcome.orderings)
        return Replayed(row.pair_id, "people", None, outcome.reason, False, lean, cost, human, _unstated(answers))
    raise TypeError(f"a recorded pair cannot end as {type(outcome).__name__}")


def _unstated(answers: Iterable[RecordedAnswer]) -> int:
    return sum(1 for a in answers if a.valid and a.winner is not None and a.confidence is None)


async def replay_all(rows: Iterable[RecordedPair], policy: Policy) -> list[Replayed]:
    return [await replay(row, policy) for row in rows]


@dataclass(frozen=True, slots=True)
class StageAgreement:
    """Agreement with people over the pairs of one stage whose people named a winner (a tie label has no
    right answer, so it is left out and counted in ``tie_labels``)."""

    pairs: int
    labelled: int
    agreed: int
    tie_labels: int

    @property
    def rate(self) -> float | None:
        return self.agreed / self.labelled if self.labelled else None

    @property
    def interval(self) -> tuple[float, float] | None:
        """The 95% Wilson interval (``agents.stats.wilson_interval``): the labelled pairs taken as independent
        draws from the pairs this stage decides."""
        return wilson_interval(self.agreed, self.labelled) if self.labelled else None


def _agreement(items: Sequence[tuple[HumanLabel | None, HumanLabel | None]]) -> StageAgreement:
    labelled = [(said, human) for said, human in items if human in (FIRST, SECOND) and said is not None]
    ties = sum(1 for said, human in items if human == "tie" and said is not None)
    return StageAgreement(len(items), len(labelled), sum(1 for s, h in labelled if s == h), ties)


@dataclass(frozen=True, slots=True)
class PolicySummary:
    """One policy's figures over the recorded pairs."""

    policy: str
    pairs: int
    decided_primary: int
    decided_tiebreak: int
    to_people: int
    audit_copies: int
    tiebreak_unrecorded: int
    agreement_primary: StageAgreement
    agreement_tiebreak: StageAgreement
    #: The judge alone and the tie-break together: every pair decided without a person.
    agreement_auto: StageAgreement
    #: Pairs sent to people, scored by the judge's lean (both of the last stage's orders naming one output).
    agreement_people_lean: StageAgreement
    cost_usd: float | None
    costed_pairs: int
    no_confidence: int
    review_reasons: dict[str, int] = field(default_factory=dict)

    @property
    def coverage(self) -> float | None:
        return (self.decided_primary + self.decided_tiebreak) / self.pairs if self.pairs else None

    @property
    def people_load(self) -> int:
        """Labels people are asked for: the pairs sent to them, and the audit copies of verdicts."""
        return self.to_people + self.audit_copies


def summarise(name: str, replayed: Sequence[Replayed]) -> PolicySummary:
    by = {stage: [r for r in replayed if r.settled_by == stage] for stage in ("primary", "tiebreak", "people")}
    costs = [r.cost_usd for r in replayed if r.cost_usd is not None]
    return PolicySummary(
        policy=name,
        pairs=len(replayed),
        decided_primary=len(by["primary"]),
        decided_tiebreak=len(by["tiebreak"]),
        to_people=len(by["people"]),
        audit_copies=sum(1 for r in replayed if r.audited),
        tiebreak_unrecorded=sum(1 for r in replayed if r.settled_by == "tiebreak_unrecorded"),
        agreement_primary=_agreement([(r.winner, r.human) for r in by["primary"]]),
        agreement_tiebreak=_agreement([(r.winner, r.human) for r in by["tiebreak"]]),
        agreement_auto=_agreement([(r.winner, r.human) for r in (*by["primary"], *by["tiebreak"])]),
        agreement_people_lean=_agreement([(r.lean, r.human) for r in by["people"]]),
        cost_usd=total_usd(costs) if costs else None,
        costed_pairs=len(costs),
        no_confidence=sum(r.no_confidence for r in replayed),
        review_reasons=dict(Counter(r.reason for r in by["people"] if r.reason is not None).most_common()),
    )
