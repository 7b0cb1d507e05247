"""The label join: a pair's records and its human label, whichever comes first, each counted once."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Literal

from pairjudge.schemas.audit import (
    AuditObservation,
    DecisionRecord,
)
from pairjudge.schemas.events import HumanLabel
from pairjudge.schemas.pair import TIE

#: Reviewer name of a label that came with the pair itself (``CandidatePair.human_label``).
KNOWN_LABEL_REVIEWER = "known_label"


LabelOutcome = Literal["joined", "kept", "duplicate", "conflicting", "unjoinable"]


@dataclass(frozen=True, slots=True)
class JoinEntry:
    """One pair's side of the join: the stages counted so far, its final record, its label.

    Stored per pair id in a changelog-backed table, so a redelivered record or label (at-least-once)
    is recognised and counted once.
    """

    stages_counted: tuple[str, ...] = ()
    final: DecisionRecord | None = None
    label: HumanLabel | None = None
    joined: bool = False
    #: Labels for this pair after the first: the same answer (a redelivery, a second reviewer
    #: agreeing) or a different one. Only the first is compared with the judge.
    extra_labels: int = 0
    conflicting_labels: int = 0
    #: Labels kept before the decision came that named neither of its candidates.
    unjoinable_labels: int = 0
    updated_at: float = 0.0

    def to_bytes(self) -> bytes:
        body = {
            "stages_counted": list(self.stages_counted),
            "final": self.final.model_dump(mode="json") if self.final is not None else None,
            "label": self.label.model_dump(mode="json") if self.label is not None else None,
            "joined": self.joined,
            "extra_labels": self.extra_labels,
            "conflicting_labels": self.conflicting_labels,
            "unjoinable_labels": self.unjoinable_labels,
            "updated_at": self.updated_at,
        }
        return json.dumps(body, separators=(",", ":")).encode("utf-8")

    @staticmethod
    def updated_at_of(raw: bytes) -> float:
        """``updated_at`` of a stored entry without decoding the rest (the sweep reads every entry).

        ``to_bytes`` writes it as the body's last member, so it is the last ``"updated_at":`` in the bytes:
        inside a JSON string the same text has its quotes escaped and cannot match. Anything unexpected
        falls back to a full decode.
        """
        at = raw.rfind(b'"updated_at":')
        if at >= 0 and raw.endswith(b"}"):
            try:
                return float(raw[at + len(b'"updated_at":') : -1])
            except ValueError:
                pass
        return float(json.loads(raw)["updated_at"])

    @classmethod
    def from_bytes(cls, raw: bytes | None) -> JoinEntry:
        if not raw:
            return cls()
        body = json.loads(raw)
        return cls(
            stages_counted=tuple(body["stages_counted"]),
            final=DecisionRecord.model_validate(body["final"]) if body["final"] is not None else None,
            label=HumanLabel.model_validate(body["label"]) if body["label"] is not None else None,
            joined=body["joined"],
            extra_labels=body["extra_labels"],
            conflicting_labels=body["conflicting_labels"],
            unjoinable_labels=body["unjoinable_labels"],
            updated_at=body["updated_at"],
        )


def _joined(entry: JoinEntry, now: float) -> tuple[JoinEntry, list[AuditObservation]]:
    """Emit the labelled observation once, when the final record and the label are both in.

    A label kept before its decision that turns out to name neither candidate is dropped from the
    entry (and counted): it cannot be compared, and a later valid label may still join.
    """
    final, label = entry.final, entry.label
    if entry.joined or final is None or label is None:
        return entry, []
    if label.winner not in (*final.candidates, TIE):
        return replace(entry, label=None, unjoinable_labels=entry.unjoinable_labels + 1, updated_at=now), []
    # Joined whether or not the judge named a winner: on an escalated pair the label is the human
    # decision, which the series counts apart (``human_decided``); only a judge's answer enters kappa.
    observation = AuditObservation(kind="labelled", series=final.series, record=final, label=label)
    return replace(entry, joined=True, updated_at=now), [observation]


def on_record(entry: JoinEntry, record: DecisionRecord, now: float) -> tuple[JoinEntry, list[AuditObservation]]:
    """Count a stage's decision once; on the final one, join with a label that is already in.

    A pair that carried its own label (``known_label``) is joined with it, unless a human label came first.
    """
    if record.stage in entry.stages_counted:
        return entry, []  # a redelivered or replayed record
    observations = [AuditObservation(kind="decision", series=record.series, record=record)]
    entry = replace(entry, stages_counted=(*entry.stages_counted, record.stage), updated_at=now)
    if record.outcome != "tiebreak":  # a verdict or a review: where the pair's story ends
        entry = replace(entry, final=record)
        if entry.label is None and record.known_label is not None:
            entry = replace(entry, label=known_label(record))
    entry, joined = _joined(entry, now)
    return entry, observations + joined


def known_label(record: DecisionRecord) -> HumanLabel:
    assert record.known_label is not None
    return HumanLabel(pair_id=record.pair_id, winner=record.known_label, reviewer=KNOWN_LABEL_REVIEWER)


def on_label(entry: JoinEntry, label: HumanLabel, now: float) -> tuple[JoinEntry, list[AuditObservation], LabelOutcome]:
    """Keep the pair's first label and join it with the final record when that is (or comes) in.

    A later label is not compared again: the same answer is a duplicate, a different answer a conflict
    (both counted on the entry, for the review UI to settle). A label naming neither candidate of a
    decided pair cannot be joined; it is reported, not counted.
    """
    final = entry.final
    if final is not None and label.winner not in (*final.candidates, TIE):
        return entry, [], "unjoinable"
    if entry.label is not None:
        if label.winner == entry.label.winner:
            return replace(entry, extra_labels=entry.extra_labels + 1, updated_at=now), [], "duplicate"
        updated = replace(
            entry,
            extra_labels=entry.extra_labels + 1,
            conflicting_labels=entry.conflicting_labels + 1,
            updated_at=now,
        )
        return updated, [], "conflicting"
    entry = replace(entry, label=label, updated_at=now)
    entry, joined = _joined(entry, now)
    return entry, joined, "joined" if joined else "kept"
