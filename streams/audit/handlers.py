"""The drift audit's Faust side (docs/design.md §3): the label join and the series windows, as tables and handlers.

Two stages, because a label and a decision meet by pair id while statistics add up by series:

- **join** (keyed by pair id, the ``audit-join`` table): keeps each pair's final decision record and its
  first label, whichever comes first (and an audit pair's second opinion, by a different reviewer, for the
  human ceiling), and counts what to count. A judging stage hands its decision record to the join on its
  own worker (``join_record``, through ``streams.worker.delivery``) when the pair's join entry is in the
  partition that worker owns; otherwise (a pair its producer keyed by something else) the record goes
  through ``pairjudge.decisions`` like the labels (``pairjudge.labels``), co-partitioned with the table.
  A malformed label (or record) goes to the dead-letter topic with its reason and bytes.
- **series** (``pairjudge.observations``, keyed by series, co-partitioned with ``audit-windows``): adds the
  join's deltas into tumbling windows per series, applies the guards, publishes ``Alert``s and the kappa
  guard's control update, and (on a timer) ``AuditSnapshot``s on ``pairjudge.audit``.

The join does not send one event per observation. It sums what it counted per series and window
(``agents.audit.deltas``) and its score events per experiment, and a timer (``flush_interval_s``, a
second) sends one ``AuditDelta`` per series and window and one ``ScoreEventBatch`` per experiment. The
series agent merges a delta as it added an observation: the same sums and snapshots, for a produce,
a decode and a table write per series and second instead of per pair and stage.

Delivery: an input the join counted is done only after the flush: its sums are on the broker first,
then its join entry, then (for a judging stage's record) the outcome's published mark, then the input is
marked done for the commit. A crash before the sums leaves all of it to be read (or replayed) and
counted again, once; a crash between the sums and the entry counts it twice, never not at all. The series
and the scoreboard take each input once: every entry keeps the offset of the last delta or batch it took
in. Before this worker's partitions go (a rebalance, a shutdown) the join flushes what it holds.

Both agents run with concurrency 1: each input is a read-modify-write of table entries.

The pure parts (records, the join, the sums, the deltas, the guards, the by-stage view) are in ``agents.audit``.

Over 600 lines on purpose: the join, the series windows and their timers are one class because they share the two
tables and the flush's ordering; what is not I/O has already moved to ``agents.audit``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

from pairjudge.agents import InputRejected
from pairjudge.agents.audit import (
    CALIBRATION_SUFFIX,
    ConfidenceHistogram,
    DeltaBuffer,
    JoinEntry,
    SeriesDelta,
    SeriesWindow,
    TierCalibration,
    calibration_key,
    on_label,
    on_record,
    threshold_snapshot,
    window_key,
    window_start,
)
from pairjudge.agents.audit.stages import (
    StageView,
    decided_before,
    restart_evidence,
    stage_view,
    tiebreak_calibration_key,
    tiebreak_threshold_key,
)
from pairjudge.agents.scores.events import expired_event, score_event
from pairjudge.schemas import ControlUpdate, HumanLabel
from pairjudge.schemas.audit import (
    Alert,
    AuditDelta,
    AuditObservation,
    AuditSeries,
    DecisionRecord,
    ThresholdSnapshot,
    ThresholdUpdate,
)
from pairjudge.schemas.scores import MAX_SCORE_BATCH, ScoreEvent, ScoreEventBatch
from pairjudge.streams.audit.stored import split_partition, with_partition
from pairjudge.streams.config.settings import AuditSettings
from pairjudge.streams.control.live import PolicyHolder
from pairjudge.streams.control.signing import ControlSigner, with_signature
from pairjudge.streams.faust_compat.offsets import mark_done
from pairjudge.streams.kafka.codecs import decode, encode, parse_object, validate
from pairjudge.streams.kafka.topics import AUDIT_JOIN_TABLE, AUDIT_WINDOWS_TABLE, partition_of
from pairjudge.streams.security.redaction_hook import EventRedactor
from pairjudge.streams.telemetry.tracing import Telemetry, inject_headers
from pairjudge.streams.worker.delivery import Publish
from pairjudge.streams.worker.pipeline import Origin, Outgoing, dead_letter
from pairjudge.streams.worker.tables import (
    current_entries,
    entries,
    forget,
    owned_partitions,
    read,
    store,
    table_options,
)

log = logging.getLogger(__name__)

#: The largest record, label or observation read; a label is at most about 30 KB (streams.audit.label_files).
MAX_AUDIT_EVENT_BYTES = 256_000
#: Who the kappa guard's control update says tripped it.
GUARD_AUTHOR = "audit"
#: The findings that pause automatic decisions (``kappa_guard_tripped``): the kappa guard's and the agreement
#: guard's, its earlier sequential trip (docs/guides/drift-audit.md#the-agreement-guard).
PAUSING_KINDS = frozenset({"kappa_below_threshold", "agreement_below_floor"})
#: Inputs the join holds before it flushes without waiting for the timer (a flood: bounded memory).
MAX_PENDING_INPUTS = 5000


@dataclass
class _Pending:
    """What the join took in since its last flush, none of it on the broker yet."""

    deltas: DeltaBuffer
    #: pair id -> (partition, stored value): entries to write once the sums are out.
    entries: dict[bytes, tuple[int, bytes]] = field(default_factory=dict)
    #: experiment -> its score events, in the order counted.
    scores: dict[str, list[ScoreEvent]] = field(default_factory=dict)
    #: The Faust messages covered (None for an input handed in without one, as in the tests).
    messages: list[Any] = field(default_factory=list)
    #: The consumer generation they were read in.
    generation: int | None = None
    #: What to do once it is on the broker: the judging stages' published marks (``join_record``).
    on_flushed: list[Callable[[], Any]] = field(default_factory=list)


class Audit:
    """The two tables and the handlers of the join and series agents. Built by ``create_app``; its agents and
    timers are put on the app by ``streams.audit.wiring.wire_audit``."""

    def __init__(
        self,
        app: Any,
        *,
        settings: AuditSettings,
        partitions: int,
        policy: PolicyHolder,
        telemetry: Telemetry,
        publish: Publish,
        topic_names: dict[str, str],
        alert_sink: Callable[[Alert], None] | None = None,
        feed_scores: bool = False,
        control_signer: ControlSigner | None = None,
        tiers: Mapping[str, TierCalibration] | None = None,
        redactor: EventRedactor | None = None,
    ) -> None:
        self.settings = settings
        #: The judge cascade's tiers by name: each tier's series is calibrated to its own target and risk, walking
        #: down no lower than its own floor (``_threshold``).
        self._tiers = dict(tiers or {})
        self._partitions = partitions
        #: Signs the kappa guard's pause when a control signing key is configured (streams.control.signing).
        self._control_signer = control_signer
        #: Also publish each final outcome as a ``ScoreEvent`` for the scoreboard (``streams.scores.handlers``).
        self.feed_scores = feed_scores
        self._alert_sink = alert_sink
        #: Redacts dead letters before they are published (``streams.security.redaction_hook``).
        self.redactor = redactor
        self._app = app
        self._policy = policy
        self._telemetry = telemetry
        self._publish = publish
        self.topic_names = topic_names
        self.join_table = app.Table(
            AUDIT_JOIN_TABLE,
            default=None,
            key_type=bytes,
            value_type=bytes,
            partitions=partitions,
            options=table_options(app),
            help="Per pair id: its final decision record and first human label (the drift audit's join).",
        )
        self.windows_table = app.Table(
            AUDIT_WINDOWS_TABLE,
            default=None,
            key_type=bytes,
            value_type=bytes,
            partitions=partitions,
            options=table_options(app),
            help="Per series and tumbling window: the drift audit's sums.",
        )
        #: Windows changed since their last running snapshot (this worker's only; rebuilt as events come).
        self._dirty: set[bytes] = set()
        #: What the join counted since its last flush, and what it is flushing now (``flush``).
        self._pending = _Pending(DeltaBuffer(settings.window_s))
        self._flushing: _Pending | None = None
        self._flush_lock = asyncio.Lock()

    # --- the join --------------------------------------------------------------------------------

    async def on_join_input(self, raw: bytes | None, origin: Origin, message: Any = None) -> bool:
        """One decision record or label from the join's topics, by the topic it came from. Returns True when
        what it counted waits in the buffer (``flush``): the input is done only once the flush has put it
        on the broker."""
        is_label = origin.topic == self.topic_names["labels"]
        try:
            item: HumanLabel | DecisionRecord = (
                decode(HumanLabel, raw, max_bytes=MAX_AUDIT_EVENT_BYTES)
                if is_label
                else decode(DecisionRecord, raw, max_bytes=MAX_AUDIT_EVENT_BYTES)
            )
        except InputRejected as exc:
            await self._publish([self._dead_letter(exc.reason, exc.detail, raw, origin)])
            return False
        return await self._join(item, raw, origin, message)

    def accepts(self, pair_id: str, partition: int) -> bool:
        """Whether ``pair_id``'s join entry is in ``partition`` of the join table: the partition the decisions
        and labels topics put it in (the producer's default partitioner on its key), which the worker owning
        that partition of the input topics also holds. A pair keyed otherwise by its producer is not."""
        return partition_of(pair_id.encode("utf-8"), self._partitions) == partition

    async def join_record(
        self, record: Outgoing, origin: Origin, message: Any, on_flushed: Callable[[], Any] | None = None
    ) -> bool:
        """A judging stage's decision record, handed over on this worker instead of through the decisions topic
        (``streams.worker.delivery.LocalJoin``); ``on_flushed`` runs once the flush has put it on the broker."""
        item = record.event if isinstance(record.event, DecisionRecord) else None
        if item is None:  # replayed from the recorded bytes
            item = decode(DecisionRecord, record.value, max_bytes=MAX_AUDIT_EVENT_BYTES)
        return await self._join(item, record.value, origin, message, on_flushed)

    async def _join(
        self,
        item: HumanLabel | DecisionRecord,
        raw: bytes | None,
        origin: Origin,
        message: Any,
        on_flushed: Callable[[], Any] | None = None,
    ) -> bool:
        pending = self._pending_for(message)
        key = item.pair_id.encode("utf-8")
        stored = self._join_entry(key)
        entry = JoinEntry.from_bytes(split_partition(stored)[1] if stored else None)
        now = time.time()
        tiebreak_evidence = True
        if isinstance(item, HumanLabel):
            updated, observations, outcome = on_label(entry, item, now)
            tiebreak_evidence = not self._old_tiebreak_decision(entry)
            if outcome == "unjoinable":
                detail = f"label winner {item.winner!r} names neither candidate of pair {item.pair_id} nor TIE"
                await self._publish([self._dead_letter("label_unjoinable", detail, raw, origin)])
                return False
            if outcome in ("duplicate", "conflicting"):
                log.info("audit: %s label for pair %s (kept the first)", outcome, item.pair_id)
            elif outcome == "second_opinion":
                log.debug("audit: second opinion on pair %s (for the human ceiling)", item.pair_id)
        else:
            updated, observations = on_record(entry, item, now)
        if not observations and updated == entry and on_flushed is None:
            return False
        for observation in observations:
            pending.deltas.add(observation, tiebreak_evidence=tiebreak_evidence)
            if self.feed_scores:
                # The join counts each pair's final decision and its label once: so does the scoreboard.
                event = score_event(observation)
                if event is not None:
                    pending.scores.setdefault(event.experiment, []).append(event)
        if updated != entry:
            partition = origin.partition or 0
            pending.entries[key] = (partition, with_partition(partition, updated.to_bytes()))
        pending.messages.append(message)
        if on_flushed is not None:
            pending.on_flushed.append(on_flushed)
        if len(pending.messages) >= MAX_PENDING_INPUTS:
            await self.flush()  # bounded memory under a flood; the agent waits for it, and so does its fetching
        return True

    def _old_tiebreak_decision(self, entry: JoinEntry) -> bool:
        """Whether the pair's final decision is a tie-break verdict made before a person switched the series'
        tie-break back on: its label, come late, is the old tie-break's evidence and must not count against the
        new one (``agents.audit.stages.decided_before``). The entry's last change, before this label, is when its
        record came."""
        final = entry.final
        if final is None or final.stage != "tiebreak":
            return False
        since = self._policy.fresh_since.get(final.series.key)
        return decided_before(entry.updated_at, None if since is None else since.timestamp())

    def _pending_for(self, message: Any) -> _Pending:
        """The buffer this input joins. One read in an earlier consumer generation (before a rebalance) is
        thrown away with its inputs: none is committed, so the partitions' owners read them again."""
        generation = getattr(message, "generation_id", None)
        if self._pending.messages and generation != self._pending.generation:
            log.info("audit: a rebalance; the join's %d unflushed inputs are read again", len(self._pending.messages))
            self._pending = _Pending(DeltaBuffer(self.settings.window_s), generation=generation)
        self._pending.generation = generation
        return self._pending

    def _join_entry(self, key: bytes) -> bytes | None:
        """A pair's join entry: the buffer's, then the one being flushed, then the table's."""
        for pending in (self._pending, self._flushing):
            if pending is not None and key in pending.entries:
                return pending.entries[key][1]
        return read(self.join_table.data, key)

    async def flush(self) -> int:
        """Send what the join counted since the last flush, then its entries, then mark its inputs done.

        In that order: a crash before the sums are on the broker leaves the inputs uncommitted and the
        entries unwritten (they are counted again, once); a crash after them and before the entries counts
        them twice, never not at all, as before the buffer. Returns how many inputs it covered.

        One flush at a time (the timer, a full buffer and a hand-over may ask at once): what a flush holds is
        read from it until its entries are in the table, and a second one would take that place.
        """
        async with self._flush_lock:
            return await self._flush()

    async def _flush(self) -> int:
        pending = self._pending
        if not pending.messages:
            return 0
        self._pending = _Pending(DeltaBuffer(self.settings.window_s), generation=pending.generation)
        current = getattr(self._app, "consumer_generation_id", None)
        if pending.generation is not None and pending.generation != current:
            log.info("audit: a rebalance; the join's %d unflushed inputs are read again", len(pending.messages))
            return 0
        self._flushing = pending
        try:
            outgoing = [self._delta(d) for d in pending.deltas.deltas()]
            for experiment, events in pending.scores.items():
                outgoing += [
                    Outgoing("score-events", experiment.encode(), value, inject_headers())
                    for value in score_batches(experiment, events)
                ]
            await self._publish(outgoing)
            await asyncio.gather(*(store(self.join_table, p, k, v) for k, (p, v) in pending.entries.items()))
        finally:
            self._flushing = None
        # The judging stages' outcomes are marked published (streams.worker.published) once the records they
        # carried are counted: a crash before replays the recorded outcome, record included. Awaited, so a
        # partition handed over after this flush (``GracefulApp.before_handover``) goes with its marks; a lost
        # mark costs a duplicate of the outcome, never the outcome (logged where it is sent).
        marks = [mark() for mark in pending.on_flushed]
        await asyncio.gather(*(m for m in marks if inspect.isawaitable(m)), return_exceptions=True)
        for message in pending.messages:
            if message is not None:
                mark_done(self._app, message)
        return len(pending.messages)

    def _delta(self, delta: SeriesDelta) -> Outgoing:
        return Outgoing("observations", delta.series.key.encode(), encode(delta.to_event()), inject_headers())

    def _dead_letter(self, reason: str, detail: str, raw: bytes | None, origin: Origin) -> Outgoing:
        return dead_letter(self._telemetry, "decode", reason, detail, raw, origin, redactor=self.redactor)

    # --- the series windows ----------------------------------------------------------------------

    async def on_observation(self, raw: bytes | None, origin: Origin) -> None:
        """Add a join's delta (or, from a worker of an earlier version, one observation) to its series' window
        and, for labelled decisions, to the series' calibration.

        Exactly once per entry: each entry keeps the offset of the last input it took in, and every input
        of a series comes from the one partition its key maps to, in offset order. An input redelivered
        after a rebalance or a crash (read again from the last commit) is at or below that offset and is
        skipped: the statistics never count it twice.
        """
        try:
            delta = self._decode_delta(raw)
        except InputRejected as exc:
            await self._publish([self._dead_letter(exc.reason, exc.detail, raw, origin)])
            return
        partition = origin.partition or 0
        offset = origin.offset if origin.offset is not None else -1
        key = window_key(delta.series.key, delta.start)
        stored = read(self.windows_table.data, key)
        window = (
            SeriesWindow.from_bytes(stored)
            if stored
            else SeriesWindow(delta.series, delta.start, delta.size, partition)
        )
        if offset < 0 or offset > window.last_offset:
            window.stats.merge(delta.stats)
            window.last_offset = offset
            findings = self._act_on_findings(window)
            await self._publish([o for o in findings if o.kind != "control"])
            for trip in (o for o in findings if o.kind == "control"):
                await self._publish_guard(trip)
            await store(self.windows_table, partition, key, window.to_bytes())
            self._dirty.add(key)
        # The series' labelled decisions over all its windows, per deciding stage, for the calibrated thresholds.
        for key, part in (
            (calibration_key(delta.series.key), delta.calibration),
            (tiebreak_calibration_key(delta.series.key), delta.tiebreak),
        ):
            histogram = self._stored_histogram(key)
            if not part.empty and (offset < 0 or offset > histogram.last_offset):
                histogram.merge(part)
                histogram.last_offset = offset
                await store(self.windows_table, partition, key, with_partition(partition, histogram.to_bytes()))

    def _decode_delta(self, raw: bytes | None) -> SeriesDelta:
        """An ``AuditDelta``, or an ``AuditObservation`` (a worker of an earlier version) as a delta of one."""
        data = parse_object(raw, max_bytes=MAX_AUDIT_EVENT_BYTES)
        if "stats" in data:
            event = validate(AuditDelta, data)
            try:
                return SeriesDelta.from_event(event)
            except ValueError as exc:
                raise InputRejected("invalid_event", str(exc)) from None
        observation = validate(AuditObservation, data)
        delta = SeriesDelta(
            observation.series, window_start(observation.observed_at, self.settings.window_s), self.settings.window_s
        )
        delta.add(observation)
        return delta

    def _act_on_findings(self, window: SeriesWindow) -> list[Outgoing]:
        """Alerts for the bounds this window newly breaks; the kappa guard also pauses automation."""
        out: list[Outgoing] = []
        series = window.series.key
        for finding in window.new_findings(self.settings.bounds()):
            alert = Alert(
                kind=finding.kind,
                series=series,
                message=finding.message,
                value=finding.value,
                threshold=finding.threshold,
                window_start=datetime.fromtimestamp(window.start, UTC),
            )
            log.error("audit alert %s on %s: %s", finding.kind, series, finding.message)
            self._telemetry.instruments.alerts.add(1, {"pairjudge.alert": finding.kind})
            if self._alert_sink is not None:
                self._alert_sink(alert)  # queued, never awaited: a slow receiver must not hold the audit
            out.append(Outgoing("audit", series.encode(), encode(alert), inject_headers()))
            if finding.kind in PAUSING_KINDS:
                out.extend(self._trip_guard(series))
        return out

    def _trip_guard(self, series: str) -> list[Outgoing]:
        if self._policy.current.kappa_guard_tripped:
            return []  # already paused; only a person resumes
        # (Two series tripping it before the first update comes back write it twice: harmless.)
        update = ControlUpdate(key="kappa_guard_tripped", value=True, updated_by=f"{GUARD_AUTHOR}:{series}"[:200])
        log.critical("audit: kappa guard tripped by %s; automatic decisions pause on every worker", series)
        key, value = b"kappa_guard_tripped", encode(update)
        topic = self.topic_names.get("control", "")
        headers = with_signature(self._control_signer, topic, key, value, inject_headers())
        return [Outgoing("control", key, value, headers)]

    async def _publish_guard(self, trip: Outgoing) -> None:
        """Publish the kappa guard's pause; a worker not authorised to write the control topic (the
        operator-only ACL of docs/operations/secured-kafka.md#topics-and-acls) pauses itself and says so,
        rather than stopping."""
        try:
            await self._publish([trip])
        except Exception as exc:
            if not _authorisation_refused(exc):
                raise
            log.critical(
                "audit: not authorised to write the kappa guard's pause to %s (TOPIC_AUTHORIZATION_FAILED): "
                "automatic decisions pause on this worker only; an operator should run `pairjudge control pause`, "
                "or grant the workers WRITE on that topic",
                self.topic_names.get("control", "the control topic"),
            )
            self._policy.apply(decode(ControlUpdate, trip.value, max_bytes=MAX_AUDIT_EVENT_BYTES))

    # --- timers ----------------------------------------------------------------------------------

    def _owned(self, kind: str) -> set[int]:
        return owned_partitions(self._app, self.topic_names[kind])

    async def publish_snapshots(self, now: float | None = None) -> int:
        """Running snapshots of changed open windows; the final one of each window that closed; expiry.

        Returns how many snapshots were published.
        """
        now = time.time() if now is None else now
        owned = self._owned("observations")
        await self._restart_tiebreaks(owned)
        published = 0
        for key, stored in list(entries(self.windows_table.data)):
            if not stored or key.endswith(CALIBRATION_SUFFIX):
                continue
            window = SeriesWindow.from_bytes(stored)
            if window.partition not in owned:
                self._dirty.discard(key)
                continue
            closed = now >= window.end
            if closed and window.stats.final_published and key not in self._dirty:
                if now >= window.end + window.size:  # one window's grace for late observations
                    await forget(self.windows_table, window.partition, key)
                continue
            if not closed and key not in self._dirty:
                continue
            threshold = self._threshold(window.series)
            snapshot = window.snapshot(final=closed, threshold=threshold, bounds=self.settings.bounds())
            view = stage_view(
                window.series,
                self._histogram(window.series.key),
                self._stored_histogram(tiebreak_calibration_key(window.series.key)),
                configured=self._policy.current.thresholds_for(window.series.risk_level or "normal").tiebreak,
                min_labels=self.settings.min_labels,
                target=self.settings.calibration_target,
                risk=self.settings.calibration_risk,
                calibration_min_labels=self.settings.calibration_min_labels,
            )
            snapshot = snapshot.model_copy(update=view.snapshot_fields())
            if closed:
                # Marked before the first await: a late observation handled meanwhile updates the stored
                # window, and this older copy must not be written back over it afterwards.
                window.stats.final_published = True
                await store(self.windows_table, window.partition, key, window.to_bytes())
            await self._publish([Outgoing("audit", window.series.key.encode(), encode(snapshot), inject_headers())])
            await self._publish_threshold(window.series.key, window.partition, threshold)
            await self._publish_tiebreak(window.series.key, window.partition, view)
            published += 1
            self._dirty.discard(key)
        return published

    async def _publish_threshold(self, series_key: str, partition: int, threshold: ThresholdSnapshot) -> None:
        """Tell every worker the series' calibrated threshold when it changed (None: back to configured)."""
        histogram = self._histogram(series_key)
        live = threshold.threshold if threshold.source == "calibrated" else None
        if live == histogram.published_threshold:
            return
        update = ThresholdUpdate(
            series=series_key,
            threshold=live,
            coverage=threshold.coverage,
            target=threshold.target,
            risk=threshold.risk,
            labels=threshold.labels,
        )
        log.warning("audit: series %s now auto-decides from confidence %s (%s)", series_key, live, threshold.note)
        await self._publish([Outgoing("thresholds", series_key.encode(), encode(update), inject_headers())])
        # Read again after the await: labelled observations may have been added to the histogram meanwhile,
        # and writing back the copy read before it would lose them.
        histogram = self._histogram(series_key)
        histogram.published_threshold = live
        value = with_partition(partition, histogram.to_bytes())
        await store(self.windows_table, partition, calibration_key(series_key), value)

    def _raise(self, alert: Alert) -> Outgoing:
        """Raise the tie-break switch-off's alert as ``_act_on_findings`` raises the guards': log, count, hand it to
        the webhook; returns the record that puts it on ``pairjudge.audit``."""
        log.error("audit alert %s on %s: %s", alert.kind, alert.series, alert.message)
        self._telemetry.instruments.alerts.add(1, {"pairjudge.alert": alert.kind})
        if self._alert_sink is not None:
            self._alert_sink(alert)  # queued, never awaited: a slow receiver must not hold the audit
        return Outgoing("audit", alert.series.encode(), encode(alert), inject_headers())

    async def _publish_tiebreak(self, series_key: str, partition: int, view: StageView) -> None:
        """Tell every worker the series' tie-break threshold, or that its tie-break is switched off, when either
        changed; a switch-off also raises its alert (``agents.audit.stages``)."""
        key = tiebreak_calibration_key(series_key)
        histogram = self._stored_histogram(key)
        live = view.live_threshold
        if live == histogram.published_threshold and view.off == histogram.published_off:
            return
        update = encode(view.update(series_key, histogram.fresh_since))
        out = [Outgoing("thresholds", tiebreak_threshold_key(series_key).encode(), update, inject_headers())]
        if view.off and not histogram.published_off:
            out.append(self._raise(view.alert(series_key)))
        log.warning("audit: series %s tie-break: %s", series_key, view.threshold.note)
        await self._publish(out)
        histogram = self._stored_histogram(key)  # read again after the await, as in _publish_threshold
        histogram.published_threshold, histogram.published_off = live, view.off
        await store(self.windows_table, partition, key, with_partition(partition, histogram.to_bytes()))

    async def _restart_tiebreaks(self, owned: set[int]) -> None:
        """Start afresh the tie-break evidence of each series a person switched back on since (its record on the
        thresholds topic, read by this worker's control follower): the emptied histogram goes to the table, whose
        changelog a restarted worker reads back, so the old labels never return; its windows are marked for a
        new snapshot, which shows the tie-break on. Only the series' owner (its observations partition) writes."""
        for series_key, since in list(self._policy.fresh_since.items()):
            key = tiebreak_calibration_key(series_key)
            stored = read(self.windows_table.data, key)
            partition = split_partition(stored)[0] if stored else partition_of(series_key.encode(), self._partitions)
            if partition not in owned:
                continue
            fresh = restart_evidence(self._stored_histogram(key), since.timestamp())
            if fresh is None:
                continue
            log.warning("audit: series %s tie-break switched back on: its evidence starts afresh", series_key)
            await store(self.windows_table, partition, key, with_partition(partition, fresh.to_bytes()))
            prefix = f"{series_key}#".encode()  # its windows' keys (``window_key``): the prefix, then the start
            self._dirty.update(
                k for k, _ in entries(self.windows_table.data) if k.startswith(prefix) and k[len(prefix) :].isdigit()
            )

    def _histogram(self, series_key: str) -> ConfidenceHistogram:
        return self._stored_histogram(calibration_key(series_key))

    def _stored_histogram(self, key: bytes) -> ConfidenceHistogram:
        stored = read(self.windows_table.data, key)
        return ConfidenceHistogram.from_bytes(split_partition(stored)[1] if stored else None)

    def _threshold(self, series: AuditSeries) -> ThresholdSnapshot:
        # A low or high series is walked down to its own level's threshold, the one in force for its pairs; a
        # cascade tier's no lower than its own floor, to its own target and risk.
        tier = self._tiers.get(series.judge_tier or "", TierCalibration())
        configured = self._policy.current.thresholds_for(series.risk_level or "normal").primary
        return threshold_snapshot(
            self._histogram(series.key),
            configured=max(configured, tier.floor),
            target=self.settings.calibration_target if tier.target is None else tier.target,
            risk=self.settings.calibration_risk if tier.risk is None else tier.risk,
            min_labels=self.settings.calibration_min_labels,
        )

    async def sweep_join(self, now: float | None = None) -> int:
        """Forget pairs whose entry has not changed for ``join_retention_s``; returns how many."""
        now = time.time() if now is None else now
        owned = self._owned("decisions")
        expired = 0
        # The table holds every pair of the retention (days): a walk that yields and skips updated entries.
        async for key, stored in current_entries(self.join_table.data):
            partition, value = split_partition(stored)
            # Only the time is read for the entries that stay: a full decode costs 18 µs per entry.
            if now - JoinEntry.updated_at_of(value) <= self.settings.join_retention_s:
                continue
            entry = JoinEntry.from_bytes(value)
            owner = partition in owned  # the owner tombstones; a standby only forgets
            # An audit sample (or review pair) forgotten without a label: the human basis counts it as
            # expired. Published before the tombstone (a crash in between counts it again on restart,
            # never not at all); popped first, so a label arriving meanwhile starts a fresh entry.
            gone = expired_event(entry.final, entry.label) if owner and self.feed_scores else None
            announce = None
            if gone is not None:
                expired_now = [Outgoing("score-events", gone.experiment.encode(), encode(gone), inject_headers())]
                announce = partial(self._publish, expired_now)
            await forget(self.join_table, partition if owner else None, key, before_tombstone=announce)
            if entry.label is not None and entry.final is None:
                log.info("audit: label for %s expired unjoined (no decision came)", key.decode("utf-8", "replace"))
            expired += 1
        return expired


#: The largest score-event batch sent as one record: well under the producer's 1 MB request limit.
MAX_BATCH_BYTES = 256_000


def score_batches(experiment: str, events: list[ScoreEvent]) -> list[bytes]:
    """``events`` as encoded ``ScoreEventBatch``es of at most ``MAX_SCORE_BATCH`` events and about
    ``MAX_BATCH_BYTES`` each (a batch over it is halved: events are about 0.4 KB, so it rarely is)."""
    out: list[bytes] = []
    for i in range(0, len(events), MAX_SCORE_BATCH):
        chunk = events[i : i + MAX_SCORE_BATCH]
        value = encode(ScoreEventBatch(experiment=experiment, events=chunk))
        if len(value) > MAX_BATCH_BYTES and len(chunk) > 1:
            half = len(chunk) // 2
            out += score_batches(experiment, chunk[:half]) + score_batches(experiment, chunk[half:])
        else:
            out.append(value)
    return out


def _authorisation_refused(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps: Faust wraps producer errors) is a refused topic authorisation."""
    seen: BaseException | None = exc
    while seen is not None:
        if getattr(seen, "errno", None) == TOPIC_AUTHORIZATION_FAILED:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


TOPIC_AUTHORIZATION_FAILED = 29
