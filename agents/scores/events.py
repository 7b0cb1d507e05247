"""Which audit observations move a scoreboard, and from which side (pure).

Two bases are fed from the same observations (``schemas.scores``):

* the **judge basis** counts a pair's final automatic verdict once (``judged``), and, apart, the label
  of a pair that ended in review (``human``: a person decided it);
* the **human basis** (``agents.scores.human``) counts every final outcome of a pair as a pair of its
  sampling stratum (``judged`` for a verdict, ``outcome`` for an escalation to review), with the judge's
  outcome ``f``, and every joined label on a pair drawn into the human sample (an audit sample of a
  verdict, ``label``; any review pair, ``human``) with the person's outcome ``y`` and the pair's
  inclusion probability. An audit sample whose label never came before its join entry expired is an
  ``expired`` event (:func:`expired_event`, from the join's sweep).

Strata and probabilities: a verdict's are its record's ``sampling_class`` and ``inclusion_probability``;
a rule's verdict (an empty output, identical outputs) is the stratum "rule", its outcome taken as the
human one; a verdict recorded without a probability (records written before the sampling was recorded,
auditing off) is a pair of the stratum "confident", and a label on it cannot be weighted: it is
sent with ``inclusion_probability=None`` and counted apart as unweighted (a guess of 1 would bias the
estimate towards the labelled pairs). So is a label on a verdict that was not an audit sample (a label
the pair carried in, a stray label): it was not drawn by the recorded design. A review outcome is stratum
"review" with probability 1 (every escalated pair is labelled).

Not counted anywhere: way-stations (tie-break requests), second opinions (they measure people against
each other), canaries, and pairs without an experiment or without one champion and one challenger.
"""

from __future__ import annotations

from pairjudge.agents.scores.board import RULE_STRATUM
from pairjudge.schemas.audit import AuditObservation, DecisionRecord
from pairjudge.schemas.events import HumanLabel
from pairjudge.schemas.outcomes import OUTCOMES
from pairjudge.schemas.pair import TIE
from pairjudge.schemas.scores import ScoreEvent, ScoreEventKind, Side

#: The stratum of a verdict recorded without a sampling class, and of every review outcome.
DEFAULT_STRATUM = "confident"
REVIEW_STRATUM = "review"


def _experiment_pair(record: DecisionRecord) -> int | None:
    """The challenger's index in ``record.candidates``, or None when the record is not an experiment's pair."""
    if record.experiment is None or record.roles is None or record.canary:
        return None
    if sorted(record.roles) != ["challenger", "champion"]:
        return None
    return record.roles.index("challenger")


def _outcome(winner: str | None, challenger_id: str) -> float:
    """A winner on the challenger's scale: 1 the challenger, 0 the champion, 0.5 a tie or no answer."""
    if winner is None or winner == TIE:
        return 0.5
    return 1.0 if winner == challenger_id else 0.0


def _side(winner: str, challenger_id: str) -> Side:
    return "tie" if winner == TIE else "win" if winner == challenger_id else "loss"


def stratum_of(record: DecisionRecord) -> tuple[str, float | None, bool]:
    """(stratum, inclusion probability, a label is expected) of a final record: how the human basis counts the
    pair (also the sampling columns of ``pairjudge evaluate --out``'s rows)."""
    if record.outcome == "review":
        return REVIEW_STRATUM, 1.0, True
    if record.rule:
        # Settled by a rule before any judge call (an empty output loses, identical outputs tie): its own
        # stratum, whose outcome the board takes as the human one (``Scoreboard.add_outcome``).
        return RULE_STRATUM, 1.0, False
    pi = record.inclusion_probability
    return record.sampling_class or DEFAULT_STRATUM, pi, record.audit_sample and pi is not None


def _event(record: DecisionRecord, challenger: int, kind: ScoreEventKind, **fields: object) -> ScoreEvent:
    champion = 1 - challenger
    return ScoreEvent.model_validate(
        {
            "experiment": record.experiment,
            "pair_id": record.pair_id,
            "kind": kind,
            "rubric_kind": record.series.rubric,
            "traffic": record.traffic,
            "chars": (record.chars[challenger], record.chars[champion]) if record.chars else None,
            "models": (record.models[challenger], record.models[champion]) if record.models else None,
            **fields,
        }
    )


def _spend(record: DecisionRecord) -> dict[str, object]:
    """A final record's spend fields: the pair's whole cost, its primary tier, and how it ended."""
    ended = (
        "review" if record.outcome == "review" else ("tiebreak verdict" if record.stage == "tiebreak" else "verdict")
    )
    return {"cost_usd": record.pair_cost_usd, "tier": record.series.judge_tier, "spend_outcome": ended}


def score_event(observation: AuditObservation) -> ScoreEvent | None:
    """The scoreboard's view of one audit observation, or None when it moves no scoreboard."""
    record = observation.record
    challenger = _experiment_pair(record)
    if challenger is None or not OUTCOMES[record.outcome].ends_story:  # a way-station, not how the pair ended
        return None
    challenger_id = record.candidates[challenger]
    f = _outcome(record.judge_winner, challenger_id)
    stratum, pi, sampled = stratum_of(record)
    if observation.kind == "decision":
        spend = _spend(record)
        if record.outcome == "verdict" and record.judge_winner is not None:
            side = _side(record.judge_winner, challenger_id)
            return _event(
                record, challenger, "judged", side=side, judge_outcome=f, stratum=stratum, inclusion_probability=pi,
                sampled=sampled, **spend,
            )  # fmt: skip
        # An escalation to review (or, never in practice, a verdict without a winner): the human basis only.
        return _event(
            record, challenger, "outcome", judge_outcome=f, stratum=stratum, inclusion_probability=pi, sampled=sampled,
            **spend,
        )  # fmt: skip
    if observation.kind == "labelled" and observation.label is not None:
        return _label_event(record, challenger, observation.label, f, stratum, pi)
    return None  # a second opinion: people against each other, not the candidates


def _label_event(
    record: DecisionRecord, challenger: int, label: HumanLabel, f: float, stratum: str, pi: float | None
) -> ScoreEvent:
    challenger_id = record.candidates[challenger]
    y = _outcome(label.winner, challenger_id)
    if record.outcome == "review":
        # A person decided the pair: the ``human`` tally, and a label of the review stratum.
        side = _side(label.winner, challenger_id)
        return _event(
            record, challenger, "human", side=side, judge_outcome=f, human_outcome=y, stratum=stratum,
            inclusion_probability=1.0,
        )  # fmt: skip
    weight = pi if record.audit_sample else None  # not drawn by the recorded design: unweighted
    return _event(
        record, challenger, "label", judge_outcome=f, human_outcome=y, stratum=stratum, inclusion_probability=weight
    )


def expired_event(final: DecisionRecord | None, label: HumanLabel | None) -> ScoreEvent | None:
    """The ``expired`` event of a join entry forgotten by the sweep: its pair was drawn into the human
    sample (an audit sample, or a review) and no label joined it; None otherwise."""
    if final is None or label is not None or not OUTCOMES[final.outcome].ends_story:
        return None
    challenger = _experiment_pair(final)
    if challenger is None:
        return None
    stratum, pi, sampled = stratum_of(final)
    if not sampled:
        return None
    return _event(final, challenger, "expired", stratum=stratum, inclusion_probability=pi)
