"""The champion-challenger scoreboard's Faust side: one table of scoreboards by experiment.

The audit's label join (``streams.audit.handlers``) already sees every pair's final decision once and every label
once; from those it publishes ``ScoreEvent``s to ``pairjudge.score-events``, keyed by experiment
(``agents.scores.events``). This agent adds them to the experiment's ``Scoreboard`` in the ``scores``
table (co-partitioned with that topic), exactly once per entry: the entry keeps the offset of the last
event it took in, and an event redelivered after a crash or a rebalance is at or below it. A timer
publishes each changed experiment's ``ScoreSnapshot`` to ``pairjudge.scores`` and its gates to the
compacted ``pairjudge.gate``: the judge basis's (``GateUpdate.gate``, the judge's opinion) and the human
basis's (``GateUpdate.human``, ``agents.scores.human``). The judge gate refuses to decide while the kappa
guard has paused automatic decisions, and says so; the human gate keeps deciding (its validity never
rested on the judge agreeing with people).

With the worker's ``/metrics`` on, :func:`observe_scores` adds gauges per experiment this worker owns:
the human basis's rate and anytime-valid interval, its labels, and the judge's rate on the same estimand.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import faust
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider

from pairjudge.agents import InputRejected
from pairjudge.agents.scores.board import Scoreboard, Tally
from pairjudge.agents.scores.gate import GateConfig, decide
from pairjudge.agents.scores.human import (
    HeldInterval,
    HumanBasis,
    confidence_sequence,
    decide_human,
    estimate,
    neyman_shares,
    rectifier_sd,
    worst_case,
)
from pairjudge.schemas.scores import (
    GateSnapshot,
    GateUpdate,
    HistoryPoint,
    HumanBasisSnapshot,
    HumanGateSnapshot,
    ScoreEvent,
    ScoreEventBatch,
    ScoreSnapshot,
    SpendSnapshot,
    StratumSnapshot,
    StrengthSnapshot,
    TallySnapshot,
)
from pairjudge.streams.config.settings import ScoreSettings
from pairjudge.streams.control.live import PolicyHolder
from pairjudge.streams.kafka.codecs import encode, parse_object, validate
from pairjudge.streams.kafka.topics import SCORES_TABLE
from pairjudge.streams.security.redaction_hook import EventRedactor
from pairjudge.streams.telemetry.tracing import Telemetry, inject_headers
from pairjudge.streams.worker.delivery import Consume, Publish
from pairjudge.streams.worker.pipeline import Origin, Outgoing, dead_letter
from pairjudge.streams.worker.tables import owned_partitions, read, store, table_options

log = logging.getLogger(__name__)

MAX_SCORE_EVENT_BYTES = 16_000
#: The largest batch read (the join sends them under 256 KB: ``streams.audit.handlers.score_batches``).
MAX_SCORE_BATCH_BYTES = 1_000_000
#: Points of the win rate's history kept per experiment (one per snapshot that changed it).
HISTORY_POINTS = 500
GUARD_REFUSAL = "automatic decisions are paused by the kappa guard; the gate decides again once a person resumes them"


class Entry:
    """One experiment's state: the scoreboard and the last offset taken in (stored under the experiment's
    key, written per event), and the history of snapshots (stored under ``history_key``, written only by
    the snapshot timer, so an event never re-serialises up to ``HISTORY_POINTS`` points)."""

    def __init__(
        self,
        board: Scoreboard,
        partition: int,
        last_offset: int = -1,
        history: list[dict[str, Any]] | None = None,
        held: HeldInterval | None = None,
    ) -> None:
        self.board = board
        self.partition = partition
        self.last_offset = last_offset
        self.history = history or []
        #: The human gate's running intersection (``human.HeldInterval``), stored under ``held_key`` and, like
        #: the history, written only by the snapshot timer: it is what makes a decision stick across restarts.
        self.held = held

    def to_bytes(self) -> bytes:
        return json.dumps(
            {"board": self.board.to_dict(), "partition": self.partition, "offset": self.last_offset},
            separators=(",", ":"),
        ).encode()

    def history_bytes(self) -> bytes:
        return json.dumps(self.history, separators=(",", ":")).encode()

    def held_bytes(self) -> bytes:
        return json.dumps(self.held.to_dict() if self.held else None, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes, history: bytes | None = None, held: bytes | None = None) -> Entry:
        data = json.loads(raw)
        points = json.loads(history) if history else []
        kept = json.loads(held) if held else None
        return cls(
            Scoreboard.from_dict(data["board"]),
            int(data["partition"]),
            int(data["offset"]),
            points,
            HeldInterval.from_dict(kept) if kept else None,
        )


#: Suffix of the table key that holds an experiment's history (an experiment id is text; NUL is not).
HISTORY_SUFFIX = b"\x00history"


def history_key(key: bytes) -> bytes:
    return key + HISTORY_SUFFIX


#: Suffix of the table key that holds an experiment's human-gate running intersection.
HELD_SUFFIX = b"\x00human-held"


def held_key(key: bytes) -> bytes:
    return key + HELD_SUFFIX


def spend_snapshots(board: Scoreboard) -> tuple[SpendSnapshot, ...]:
    """The board's spend table, by tier then outcome."""
    rows = []
    for key, (pairs, usd, unpriced) in sorted(board.spend.items()):
        tier, outcome = key.split("|", 1)
        priced = int(pairs) - int(unpriced)
        rows.append(
            SpendSnapshot(
                tier=None if tier == "-" else tier,
                outcome=outcome,
                pairs=int(pairs),
                usd=usd,
                usd_per_pair=usd / priced if priced else None,
                unpriced_pairs=int(unpriced),
            )
        )
    return tuple(rows)


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


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def human_basis_snapshot(basis: HumanBasis, settings: ScoreSettings) -> HumanBasisSnapshot:
    """The human basis as published: both intervals at ``settings.alpha``, the counts and the strata."""
    fixed = estimate(basis, settings.alpha)
    anytime = confidence_sequence(basis, settings.alpha, target_labels=settings.human_target_labels)
    estimated = {s.stratum: s for s in fixed.strata} if fixed else {}
    recommended = neyman_shares(basis, alpha=settings.alpha) or {}
    worst = worst_case(basis, settings.alpha, target_labels=settings.human_target_labels)
    strata = tuple(
        StratumSnapshot(
            stratum=name,
            pairs=sums.pairs,
            labels=sums.labels,
            lam=estimated[name].lam if name in estimated else None,
            rate=estimated[name].rate if name in estimated else None,
            rectifier_sd=rectifier_sd(sums, settings.alpha),
            recommended_share=recommended.get(name),
        )
        for name, sums in sorted(basis.strata.items())
    )
    return HumanBasisSnapshot(
        rate=fixed.rate if fixed else None,
        low=fixed.low if fixed else None,
        high=fixed.high if fixed else None,
        anytime_low=anytime.low if anytime else None,
        anytime_high=anytime.high if anytime else None,
        std_error=fixed.std_error if fixed else None,
        labels=basis.labels,
        pairs=basis.pairs,
        pending=basis.pending,
        expired=basis.expired,
        judge_rate=basis.judge_rate(),
        unlabelled_share=fixed.unlabelled_share if fixed else None,
        worst_low=worst[0] if worst else None,
        worst_high=worst[1] if worst else None,
        strata=strata,
        alpha=settings.alpha,
    )


def human_gate_snapshot(
    board: Scoreboard, settings: ScoreSettings, held: HeldInterval | None = None
) -> tuple[HumanGateSnapshot, HeldInterval]:
    """The human basis's gate, and the running intersection to keep for its next look (``held``: the one
    kept from the last). It does not look at the kappa guard: the guard pauses automation because
    the judge stopped agreeing with people, and the human basis's validity never rested on that agreement
    (a worse judge only makes the interval need more labels). Its answer stays right while the guard holds."""
    basis = board.human_basis
    gate = decide_human(
        basis,
        alpha=settings.alpha,
        min_effect=settings.min_effect,
        min_labels=settings.human_min_labels,
        min_stratum_labels=settings.human_min_stratum_labels,
        target_labels=settings.human_target_labels,
        missing=settings.human_missing_labels,
        held=held,
    )
    interval, kept = gate.interval, gate.held
    taken = kept.looks > 0
    snap = HumanGateSnapshot(
        decision=gate.decision,
        reason=gate.reason,
        labels_needed=gate.labels_needed,
        rate=interval.rate if interval else None,
        low=kept.low if taken else (interval.low if interval else None),
        high=kept.high if taken else (interval.high if interval else None),
        current_low=interval.low if interval else None,
        current_high=interval.high if interval else None,
        looks=kept.looks,
        short_stratum=gate.short[0] if gate.short else None,
        short_stratum_labels=gate.short[1] if gate.short else None,
        min_stratum_labels=gate.min_stratum_labels,
        labels=basis.labels,
        pending=basis.pending,
        expired=basis.expired,
        alpha=settings.alpha,
        min_effect=settings.min_effect,
        min_labels=settings.human_min_labels,
        target_labels=settings.human_target_labels,
        missing_labels=settings.human_missing_labels,
    )
    return snap, kept


def snapshot(experiment: str, entry: Entry, settings: ScoreSettings, paused: bool, now: datetime) -> ScoreSnapshot:
    board = entry.board
    overall = tally_snapshot(board.overall)
    gate = gate_snapshot(board, settings, paused)
    human = human_basis_snapshot(board.human_basis, settings)
    human_gate, entry.held = human_gate_snapshot(board, settings, entry.held)
    point = HistoryPoint(
        at=now,
        pairs=board.overall.pairs,
        win_rate=overall.win_rate,
        low=overall.low,
        high=overall.high,
        log_e_promote=math.log(gate.e_promote) if gate.e_promote > 0 else None,
        log_e_reject=math.log(gate.e_reject) if gate.e_reject > 0 else None,
        human_rate=human.rate,
        human_low=human.anytime_low,
        human_high=human.anytime_high,
        human_labels=human.labels,
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
        human_basis=human,
        human_basis_by_rubric={k: human_basis_snapshot(v, settings) for k, v in board.human_basis_by_rubric.items()},
        human_basis_by_traffic={k: human_basis_snapshot(v, settings) for k, v in board.human_basis_by_traffic.items()},
        human_gate=human_gate,
        unweighted_labels=board.unweighted_labels,
        spend=spend_snapshots(board),
        history=tuple(HistoryPoint.model_validate(h) for h in entry.history),
        updated_at=now,
    )


@dataclass(frozen=True, slots=True)
class ExperimentGauges:
    """What /metrics shows of one experiment: the latest snapshot's human basis beside the judge's rate."""

    partition: int
    human_rate: float | None
    human_low: float | None
    human_high: float | None
    human_labels: int
    judge_rate: float | None

    @classmethod
    def of(cls, partition: int, snap: ScoreSnapshot) -> ExperimentGauges:
        human = snap.human_basis or HumanBasisSnapshot()
        return cls(
            partition=partition,
            human_rate=human.rate,
            human_low=human.anytime_low,
            human_high=human.anytime_high,
            human_labels=human.labels,
            judge_rate=_finite(human.judge_rate) if human.judge_rate is not None else None,
        )


#: Experiments shown on /metrics per worker at most (the most recently updated): bounds the label cardinality.
MAX_METRIC_EXPERIMENTS = 200


def observe_scores(provider: MeterProvider, gauges: dict[str, ExperimentGauges]) -> None:
    """Gauges per experiment, read at scrape time from ``gauges`` (``Scores.gauges``, kept by the snapshot
    timer for the experiments this worker owns), labelled by ``experiment`` only."""
    meter = provider.get_meter("pairjudge.worker")

    def reader(name: str) -> Any:
        def read(_: CallbackOptions) -> Iterable[Observation]:
            for experiment, g in list(gauges.items()):
                value = getattr(g, name)
                if value is not None:
                    yield Observation(value, {"experiment": experiment})

        return read

    for name, description in (
        ("human_rate", "The human basis: the challenger's win rate as people would judge it (ties 1/2)"),
        ("human_low", "The human basis's anytime-valid interval, lower end (the human gate reads it)"),
        ("human_high", "The human basis's anytime-valid interval, upper end"),
        ("human_labels", "Human labels the human basis uses"),
        ("judge_rate", "The judge basis on the same estimand: the mean judge outcome over the same pairs"),
    ):
        basis, what = name.split("_", 1)
        meter.create_observable_gauge(f"pairjudge.scores.{basis}.{what}", [reader(name)], description=description)


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
        redactor: EventRedactor | None = None,
    ) -> None:
        self.settings = settings
        self._app = app
        self._policy = policy
        self._telemetry = telemetry
        self._publish = publish
        #: Redacts dead letters before they are published (``streams.security.redaction_hook``).
        self.redactor = redactor
        self.topic_name = topic_name
        self.table = app.Table(
            SCORES_TABLE,
            default=None,
            key_type=bytes,
            value_type=bytes,
            partitions=partitions,
            options=table_options(app),
            help="Per experiment: the champion-challenger scoreboard.",
        )
        self._dirty: set[bytes] = set()
        #: Per experiment this worker owns, what /metrics shows (``observe_scores``); set by the snapshot timer.
        self.gauges: dict[str, ExperimentGauges] = {}

    async def on_score_event(self, raw: bytes | None, origin: Origin) -> None:
        """One batch of an experiment's score events from a join's flush (or, from a worker of an earlier
        version or the join's expiry sweep, one event), counted in order, once: a redelivered input is at or
        below the entry's offset."""
        try:
            events = _decode_events(raw)
        except InputRejected as exc:
            letter = dead_letter(self._telemetry, "decode", exc.reason, exc.detail, raw, origin, redactor=self.redactor)
            await self._publish([letter])
            return
        partition = origin.partition or 0
        offset = origin.offset if origin.offset is not None else -1
        key = events[0].experiment.encode()
        stored = read(self.table.data, key)
        entry = Entry.from_bytes(stored) if stored else Entry(Scoreboard(), partition)
        if 0 <= offset <= entry.last_offset:
            return  # redelivered after a crash or rebalance: already counted
        for event in events:
            count(entry.board, event)
        entry.last_offset = offset
        # No await since the read above: the write cannot lose another event's update (``store``).
        await store(self.table, partition, key, entry.to_bytes())
        self._dirty.add(key)

    async def publish_snapshots(self, now: datetime | None = None) -> int:
        """A snapshot and a gate update for every experiment changed since the last tick; how many."""
        now = now or datetime.now(UTC)
        owned = owned_partitions(self._app, self.topic_name)
        paused = self._policy.current.kappa_guard_tripped
        for gone in [e for e, g in self.gauges.items() if g.partition not in owned]:
            del self.gauges[gone]  # moved to another worker in a rebalance: it shows them now
        published = 0
        for key in sorted(self._dirty):
            stored = read(self.table.data, key)
            self._dirty.discard(key)
            if not stored:
                continue
            entry = Entry.from_bytes(
                stored, read(self.table.data, history_key(key)), read(self.table.data, held_key(key))
            )
            if entry.partition not in owned:
                continue
            experiment = key.decode()
            snap = snapshot(experiment, entry, self.settings, paused, now)
            # The timer writes only the history, never the scoreboard: events counted while it awaits the
            # broker below cannot be overwritten by this copy.
            await store(self.table, entry.partition, history_key(key), entry.history_bytes())
            await store(self.table, entry.partition, held_key(key), entry.held_bytes())
            self.gauges.pop(experiment, None)  # re-inserted last: the dict runs from least to most recent
            self.gauges[experiment] = ExperimentGauges.of(entry.partition, snap)
            while len(self.gauges) > MAX_METRIC_EXPERIMENTS:
                del self.gauges[next(iter(self.gauges))]
            update = GateUpdate(experiment=experiment, gate=snap.gate, human=snap.human_gate, decided_at=now)
            await self._publish(
                [
                    Outgoing("scores", key, encode(snap), inject_headers()),
                    Outgoing("gate", key, encode(update), inject_headers()),
                ]
            )
            published += 1
        return published


def _decode_events(raw: bytes | None) -> list[ScoreEvent]:
    """A ``ScoreEventBatch``'s events, or a single ``ScoreEvent`` (the join's expiry sweep, an earlier version)."""
    data = parse_object(raw, max_bytes=MAX_SCORE_BATCH_BYTES)
    if "events" in data:
        return list(validate(ScoreEventBatch, data).events)
    if raw is not None and len(raw) > MAX_SCORE_EVENT_BYTES:
        raise InputRejected("oversized_event", f"the event is {len(raw)} bytes; the limit is {MAX_SCORE_EVENT_BYTES}")
    return [validate(ScoreEvent, data)]


def count(board: Scoreboard, event: ScoreEvent) -> None:
    """Add one score event to ``board``: the judge basis's tallies and the human basis (``schemas.scores``).

    An event published before the human basis existed (no ``judge_outcome``) moves only the tallies."""
    rubric, traffic = event.rubric_kind, event.traffic
    if event.kind == "judged" and event.side is not None:
        board.add_judged(event.side, rubric=rubric, traffic=traffic, lengths=event.chars, models=event.models)
    elif event.kind == "human" and event.side is not None:
        board.add_human(event.side)
    if event.kind == "expired":
        board.add_expired(rubric=rubric, traffic=traffic)
        return
    f, stratum = event.judge_outcome, event.stratum
    if f is None or stratum is None:
        return
    if event.kind in ("judged", "outcome"):
        if event.spend_outcome is not None:
            board.add_spend(event.tier, event.spend_outcome, event.cost_usd)
        board.add_outcome(
            f,
            stratum=stratum,
            sampled=event.sampled,
            rubric=rubric,
            traffic=traffic,
            inclusion_probability=event.inclusion_probability,
        )
    elif event.human_outcome is not None:  # "human", "label"
        board.add_label(
            f,
            event.human_outcome,
            stratum=stratum,
            inclusion_probability=event.inclusion_probability,
            rubric=rubric,
            traffic=traffic,
        )


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
