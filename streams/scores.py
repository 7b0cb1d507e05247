"""The champion-challenger scoreboard's Faust side: one table of scoreboards by experiment.

The audit's label join (``streams.audit``) already sees every pair's final decision once and every label
once; from those it publishes ``ScoreEvent``s to ``pairjudge.score-events``, keyed by experiment
(``agents.scores.events``). This agent adds them to the experiment's ``Scoreboard`` in the ``scores``
table (co-partitioned with that topic), exactly once per entry: the entry keeps the offset of the last
event it took in, and an event redelivered after a crash or a rebalance is at or below it. A timer
publishes each changed experiment's ``ScoreSnapshot`` to ``pairjudge.scores`` and its gate to the
compacted ``pairjudge.gate``. The gate refuses to decide while the kappa guard has paused automatic
decisions, and says so.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import faust

from pairjudge.agents import InputRejected
from pairjudge.agents.scores.board import Scoreboard, Tally
from pairjudge.agents.scores.gate import GateConfig, decide
from pairjudge.schemas.scores import (
    GateSnapshot,
    GateUpdate,
    HistoryPoint,
    ScoreEvent,
    ScoreSnapshot,
    StrengthSnapshot,
    TallySnapshot,
)
from pairjudge.streams.audit import Consume, Publish
from pairjudge.streams.codecs import decode, encode
from pairjudge.streams.control import PolicyHolder
from pairjudge.streams.pipeline import Origin, Outgoing, dead_letter
from pairjudge.streams.redaction import EventRedactor
from pairjudge.streams.settings import ScoreSettings
from pairjudge.streams.telemetry import Telemetry, inject_headers
from pairjudge.streams.topics import SCORES_TABLE

log = logging.getLogger(__name__)

MAX_SCORE_EVENT_BYTES = 16_000
#: Points of the win rate's history kept per experiment (one per snapshot that changed it).
HISTORY_POINTS = 500
GUARD_REFUSAL = "automatic decisions are paused by the kappa guard; the gate decides again once a person resumes them"


class Entry:
    """One experiment's state: the scoreboard and the last offset taken in (stored under the experiment's
    key, written per event), and the history of snapshots (stored under ``history_key``, written only by
    the snapshot timer, so an event never re-serialises up to ``HISTORY_POINTS`` points)."""

    def __init__(
        self, board: Scoreboard, partition: int, last_offset: int = -1, history: list[dict[str, Any]] | None = None
    ) -> None:
        self.board = board
        self.partition = partition
        self.last_offset = last_offset
        self.history = history or []

    def to_bytes(self) -> bytes:
        return json.dumps(
            {"board": self.board.to_dict(), "partition": self.partition, "offset": self.last_offset},
            separators=(",", ":"),
        ).encode()

    def history_bytes(self) -> bytes:
        return json.dumps(self.history, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes, history: bytes | None = None) -> Entry:
        data = json.loads(raw)
        points = json.loads(history) if history else []
        return cls(Scoreboard.from_dict(data["board"]), int(data["partition"]), int(data["offset"]), points)


#: Suffix of the table key that holds an experiment's history (an experiment id is text; NUL is not).
HISTORY_SUFFIX = b"\x00history"


def history_key(key: bytes) -> bytes:
    return key + HISTORY_SUFFIX


def tally_snapshot(t: Tally) -> TallySnapshot:
    rate = t.win_rate()
    return TallySnapshot(
        wins=t.wins,
        losses=t.losses,
        ties=t.ties,
        win_rate=rate[0] if rate else None,
        low=rate[1] if rate else None,
        high=rate[2] if rate else None,
    )


def gate_snapshot(board: Scoreboard, settings: ScoreSettings, paused: bool) -> GateSnapshot:
    config = GateConfig(alpha=settings.alpha, min_effect=settings.min_effect)
    # The gate counts what the judge decided: a human-decided pair is a different measurement.
    state = decide(board.overall.wins, board.overall.losses, config)
    return GateSnapshot(
        decision="continue" if paused else state.decision,
        wins=state.wins,
        losses=state.losses,
        e_promote=state.e_promote,
        e_reject=state.e_reject,
        threshold=state.threshold,
        alpha=settings.alpha,
        min_effect=settings.min_effect,
        refused=GUARD_REFUSAL if paused else None,
    )


def snapshot(experiment: str, entry: Entry, settings: ScoreSettings, paused: bool, now: datetime) -> ScoreSnapshot:
    board = entry.board
    overall = tally_snapshot(board.overall)
    gate = gate_snapshot(board, settings, paused)
    point = HistoryPoint(
        at=now,
        pairs=board.overall.pairs,
        win_rate=overall.win_rate,
        low=overall.low,
        high=overall.high,
        log_e_promote=math.log(gate.e_promote) if gate.e_promote > 0 else None,
        log_e_reject=math.log(gate.e_reject) if gate.e_reject > 0 else None,
    )
    entry.history = [*entry.history, point.model_dump(mode="json")][-HISTORY_POINTS:]
    lc = board.length_controlled()
    return ScoreSnapshot(
        experiment=experiment,
        overall=overall,
        by_rubric={k: tally_snapshot(v) for k, v in board.by_rubric.items()},
        by_traffic={k: tally_snapshot(v) for k, v in board.by_traffic.items()},
        human=tally_snapshot(board.human),
        length_controlled_win_rate=lc.rate if lc else None,
        length_coefficient=lc.length_coefficient if lc else None,
        strengths=tuple(
            StrengthSnapshot(model=s.model, strength=s.strength, low=s.low, high=s.high, comparisons=s.comparisons)
            for s in board.strengths(bootstrap=settings.bootstrap)
        ),
        gate=gate,
        history=tuple(HistoryPoint.model_validate(h) for h in entry.history),
        updated_at=now,
    )


class Scores:
    """The scoreboard table and its handler and timer. Built by ``create_app``."""

    def __init__(
        self,
        app: Any,
        *,
        settings: ScoreSettings,
        partitions: int,
        policy: PolicyHolder,
        telemetry: Telemetry,
        publish: Publish,
        topic_name: str,
    ) -> None:
        self.settings = settings
        self._app = app
        self._policy = policy
        self._telemetry = telemetry
        self._publish = publish
        #: Redacts dead letters before they are published (``streams.redaction``); set by ``create_app``.
        self.redactor: EventRedactor | None = None
        self.topic_name = topic_name
        self.table = app.Table(
            SCORES_TABLE,
            default=None,
            key_type=bytes,
            value_type=bytes,
            partitions=partitions,
            help="Per experiment: the champion-challenger scoreboard.",
        )
        self._dirty: set[bytes] = set()

    async def on_score_event(self, raw: bytes | None, origin: Origin) -> None:
        try:
            event = decode(ScoreEvent, raw, max_bytes=MAX_SCORE_EVENT_BYTES)
        except InputRejected as exc:
            letter = dead_letter(self._telemetry, "decode", exc.reason, exc.detail, raw, origin, redactor=self.redactor)
            await self._publish([letter])
            return
        partition = origin.partition or 0
        offset = origin.offset if origin.offset is not None else -1
        key = event.experiment.encode()
        stored = self.table.data.get(key)
        entry = Entry.from_bytes(stored) if stored else Entry(Scoreboard(), partition)
        if 0 <= offset <= entry.last_offset:
            return  # redelivered after a crash or rebalance: already counted
        if event.kind == "human":
            entry.board.add_human(event.side)
        else:
            entry.board.add_judged(
                event.side, rubric=event.rubric_kind, traffic=event.traffic, lengths=event.chars, models=event.models
            )
        entry.last_offset = offset
        await self._store(partition, key, entry.to_bytes())
        self._dirty.add(key)

    async def publish_snapshots(self, now: datetime | None = None) -> int:
        """A snapshot and a gate update for every experiment changed since the last tick; how many."""
        now = now or datetime.now(UTC)
        owned = {tp.partition for tp in self._app.consumer.assignment() if tp.topic == self.topic_name}
        paused = self._policy.current.kappa_guard_tripped
        published = 0
        for key in sorted(self._dirty):
            stored = self.table.data.get(key)
            self._dirty.discard(key)
            if not stored:
                continue
            entry = Entry.from_bytes(stored, self.table.data.get(history_key(key)))
            if entry.partition not in owned:
                continue
            experiment = key.decode()
            snap = snapshot(experiment, entry, self.settings, paused, now)
            # The timer writes only the history, never the scoreboard: events counted while it awaits the
            # broker below cannot be overwritten by this copy.
            await self._store(entry.partition, history_key(key), entry.history_bytes())
            update = GateUpdate(experiment=experiment, gate=snap.gate, decided_at=now)
            await self._publish(
                [
                    Outgoing("scores", key, encode(snap), inject_headers()),
                    Outgoing("gate", key, encode(update), inject_headers()),
                ]
            )
            published += 1
        return published

    async def _store(self, partition: int, key: bytes, value: bytes) -> None:
        # The in-memory write happens before the first await: the handler's read-modify-write (no await
        # between its read and this call) cannot lose another's update.
        self.table.data[key] = value
        await self.table.send_changelog(partition, key, value)


def wire_scores(app: faust.App, scores: Scores, topics: dict[str, faust.TopicT], consume: Consume) -> Any:
    """The scoreboard agent and its snapshot timer, on ``app``; returns the agent."""

    async def one(event: Any, origin: Origin) -> None:
        await scores.on_score_event(event.value, origin)

    @app.agent(topics["score-events"], name="pairjudge.scoreboard", concurrency=1)
    async def scoreboard(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for _ in consume(stream, "scoreboard", one):
            yield None

    async def snapshots() -> None:
        await scores.publish_snapshots()

    app.timer(interval=scores.settings.snapshot_interval_s)(snapshots)
    return scoreboard
