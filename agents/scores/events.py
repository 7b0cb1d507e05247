"""Which audit observations move a scoreboard, and from which side (pure)."""

from __future__ import annotations

from pairjudge.schemas.audit import AuditObservation
from pairjudge.schemas.pair import TIE
from pairjudge.schemas.scores import ScoreEvent, Side


def score_event(observation: AuditObservation) -> ScoreEvent | None:
    """The scoreboard's view of one audit observation, or None when it is not an experiment's outcome.

    Counted: a pair's final automatic verdict (a judge's or a rule's), once, as "judged"; and the label
    on a pair that ended in review, once, as "human" (a person decided it). Not counted: way-stations
    (tie-break requests), labels on pairs the judge decided (those measure the judge, not the
    candidates), canaries, and pairs without an experiment or without one champion and one challenger.
    """
    record = observation.record
    if record.experiment is None or record.roles is None or record.canary:
        return None
    if sorted(record.roles) != ["challenger", "champion"]:
        return None
    if observation.kind == "decision" and record.outcome == "verdict" and record.judge_winner is not None:
        kind, winner = "judged", record.judge_winner
    elif observation.kind == "labelled" and record.outcome == "review" and observation.label is not None:
        kind, winner = "human", observation.label.winner
    else:
        return None
    challenger = record.roles.index("challenger")
    champion = 1 - challenger
    side: Side = "tie" if winner == TIE else "win" if winner == record.candidates[challenger] else "loss"
    return ScoreEvent(
        experiment=record.experiment,
        pair_id=record.pair_id,
        kind=kind,
        side=side,
        rubric_kind=record.series.rubric,
        traffic=record.traffic,
        chars=(record.chars[challenger], record.chars[champion]) if record.chars else None,
        models=(record.models[challenger], record.models[champion]) if record.models else None,
    )
