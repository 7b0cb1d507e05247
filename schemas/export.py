"""JSON Schema export, for consumers written in other languages."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from pairjudge.schemas.audit import (
    Alert,
    AuditDelta,
    AuditObservation,
    AuditSnapshot,
    DecisionRecord,
    ThresholdUpdate,
)
from pairjudge.schemas.captures import Capture
from pairjudge.schemas.events import ControlUpdate, HumanLabel, SpendReport
from pairjudge.schemas.outcomes import OUTCOMES
from pairjudge.schemas.pair import CandidatePair
from pairjudge.schemas.replies import HeadToHeadReply, PairwiseReply, TieBreakReply, ToneStyleReply
from pairjudge.schemas.scores import GateUpdate, ScoreEvent, ScoreEventBatch, ScoreSnapshot

EXPORTED: tuple[type[BaseModel], ...] = (
    CandidatePair,
    # Every outcome kind's event, in the registry's order (schemas.outcomes).
    *dict.fromkeys(entry.event for entry in OUTCOMES.values()),
    HumanLabel,
    DecisionRecord,
    AuditObservation,
    AuditDelta,
    AuditSnapshot,
    Alert,
    ThresholdUpdate,
    ControlUpdate,
    # The champion-challenger scoreboard (pairjudge.score-events, pairjudge.scores, pairjudge.gate).
    ScoreEvent,
    ScoreEventBatch,
    ScoreSnapshot,
    GateUpdate,
    # What each worker spent per clock hour (pairjudge.spend), for the spending caps.
    SpendReport,
    # One production exchange (pairjudge.captures), for the shadow stage.
    Capture,
    ToneStyleReply,
    HeadToHeadReply,
    PairwiseReply,
    TieBreakReply,
)


def export_json_schemas(directory: Path) -> list[Path]:
    """Write one ``<Model>.schema.json`` per contract; return the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for model in EXPORTED:
        path = directory / f"{model.__name__}.schema.json"
        path.write_text(json.dumps(model.model_json_schema(), indent=2, sort_keys=True) + "\n")
        written.append(path)
    return written
