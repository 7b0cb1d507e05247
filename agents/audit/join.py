"""The label join: a pair's records and its human label, whichever comes first, each counted once.

An audit pair may also get a second opinion: the review service hands some audit items to a second,
different reviewer (``ReviewRequest.reviews_wanted``). That second label is never compared with the
judge; it is compared with the first label, once per pair, so the series can report how well people
agree with each other beside how well the judge agrees with people. That is the ceiling a judge can be
held to: a judge cannot be expected to agree with people more than people agree with each other
(MT-Bench: GPT-4 agreed with experts 66% of the time, experts with each other 63%, ties counted).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Literal

from pairjudge.schemas.audit import (
    AuditObservation,
    DecisionRecord,
)
from pairjudge.schemas.events import HumanLabel
from pairjudge.schemas.outcomes import OUTCOMES
from pairjudge.schemas.pair import TIE

#: Reviewer name of a label that came with the pair itself (``CandidatePair.human_label``).
KNOWN_LABEL_REVIEWER = "known_label"


LabelOutcome = Literal["joined", "kept", "second_opinion", "duplicate", "conflicting", "unjoinable"]


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
    #: Labels for this pair after the first, other than its second opinion: the same answer (a
    #: redelivery, a further reviewer agreeing) or a different one. Only the first is compared with the judge.
    extra_labels: int = 0
    conflicting_labels: int = 0
    #: Labels kept before the decision came that named neither of its candidates.
    unjoinable_labels: int = 0
    #: The audit pair's second opinion: the first label by a reviewer other than the first one's (see
    #: :func:`is_second_opinion`), and whether its ``second_label`` observation was emitted (once).
    second_label: HumanLabel | None = None
    second_joined: bool = False
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
            **self._second_body(),
            "updated_at": self.updated_at,  # last: ``updated_at_of`` relies on it
        }
        return json.dumps(body, separators=(",", ":")).encode("utf-8")

    def _second_body(self) -> dict[str, object]:
        """The second-opinion members, only when there is one: an entry without keeps the bytes it had."""
        if self.second_label is None and not self.second_joined:
            return {}
        return {
            "second_label": self.second_label.model_dump(mode="json") if self.second_label is not None else None,
            "second_joined": self.second_joined,
        }

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
            second_label=HumanLabel.model_validate(body["second_label"]) if body.get("second_label") else None,
            second_joined=body.get("second_joined", False),
            updated_at=body["updated_at"],
        )


def _joined(entry: JoinEntry, now: float) -> tuple[JoinEntry, list[AuditObservation]]:
    """Emit the labelled observation once, when the final record and the label are both in; then the
    second opinion's observation once, when there is one.

    A label kept before its decision that turns out to name neither candidate is dropped from the
    entry (and counted): it cannot be compared, and a later valid label may still join. A second
    opinion kept behind such a first label becomes the pair's first label (it was a person's answer
    all the same, and nothing else is left to compare it with).
    """
    final, label = entry.final, entry.label
    if entry.joined or final is None or label is None:
        return _second_joined(entry, now)
    if label.winner not in (*final.candidates, TIE):
        dropped = replace(
            entry,
            label=entry.second_label,
            second_label=None,
            unjoinable_labels=entry.unjoinable_labels + 1,
            updated_at=now,
        )
        return _joined(dropped, now) if dropped.label is not None else (dropped, [])
    # Joined whether or not the judge named a winner: on an escalated pair the label is the human
    # decision, which the series counts apart (``human_decided``); only a judge's answer enters kappa.
    observation = AuditObservation(kind="labelled", series=final.series, record=final, label=label)
    entry, second = _second_joined(replace(entry, joined=True, updated_at=now), now)
    return entry, [observation, *second]


def _second_joined(entry: JoinEntry, now: float) -> tuple[JoinEntry, list[AuditObservation]]:
    """Emit the ``second_label`` observation once, after the first label joined its final record."""
    final, first, second = entry.final, entry.label, entry.second_label
    if entry.second_joined or not entry.joined or final is None or first is None or second is None:
        return entry, []
    if second.winner not in (*final.candidates, TIE):
        return replace(entry, second_label=None, unjoinable_labels=entry.unjoinable_labels + 1, updated_at=now), []
    observation = AuditObservation(
        kind="second_label", series=final.series, record=final, label=second, first_label=first
    )
    return replace(entry, second_joined=True, updated_at=now), [observation]


def is_second_opinion(entry: JoinEntry, label: HumanLabel) -> bool:
    """Whether ``label`` is the pair's second opinion: the human ceiling's evidence.

    It is when the pair already has a first label, has no second opinion yet, both labels came from
    the audit sample's review (``from_audit``), both are by people (not the ``known_label`` a pair
    carried in) and by two different reviewers. The same reviewer's label again is a redelivery (or a
    change of mind), not a second opinion: counting it would make people look as consistent as one
    person is with themself. Only one second opinion counts per pair, so a redelivered one counts once.
    """
    first = entry.label
    return (
        first is not None
        and entry.second_label is None
        and not entry.second_joined
        and first.from_audit
        and label.from_audit
        and KNOWN_LABEL_REVIEWER not in (first.reviewer, label.reviewer)
        and label.reviewer != first.reviewer
    )


def on_record(entry: JoinEntry, record: DecisionRecord, now: float) -> tuple[JoinEntry, list[AuditObservation]]:
    """Count a stage's decision once; on the final one, join with a label that is already in.

    A pair that carried its own label (``known_label``) is joined with it, unless a human label came first.
    """
    if record.stage in entry.stages_counted:
        return entry, []  # a redelivered or replayed record
    observations = [AuditObservation(kind="decision", series=record.series, record=record)]
    kind = OUTCOMES[record.outcome]
    if not kind.settles_stage:
        # The stage is not done with the pair (schemas.outcomes): its decision when the pair comes back counts.
        return replace(entry, updated_at=now), observations
    entry = replace(entry, stages_counted=(*entry.stages_counted, record.stage), updated_at=now)
    if kind.ends_story:  # a verdict or a review, not a way-station such as the tie-break request
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

    A later label by a second, different reviewer of an audit pair is its second opinion
    (:func:`is_second_opinion`): kept, and compared with the first label (never with the judge) once the
    first has joined. Any other later label is not compared again: the same answer as the label of the
    same reviewer (or, failing that, the first label) is a duplicate, a different answer a conflict (both
    counted on the entry, for the review UI to settle). A label naming neither candidate of a decided
    pair cannot be joined; it is reported, not counted.
    """
    final = entry.final
    if final is not None and label.winner not in (*final.candidates, TIE):
        return entry, [], "unjoinable"
    if entry.label is not None and is_second_opinion(entry, label):
        entry, joined = _joined(replace(entry, second_label=label, updated_at=now), now)
        return entry, joined, "second_opinion"
    if entry.label is not None:
        second = entry.second_label
        earlier = second if second is not None and second.reviewer == label.reviewer else entry.label
        if label.winner == earlier.winner:
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
