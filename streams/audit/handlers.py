"""The drift audit's Faust side (docs/design.md §3): the label join and the series windows, as tables and handlers.

Two stages, because a label and a decision meet by pair id while statistics add up by series:

- **join** (``pairjudge.decisions`` + ``pairjudge.labels``, keyed by pair id, co-partitioned with the
  ``audit-join`` table): keeps each pair's final decision record and its first label, whichever comes
  first (and an audit pair's second opinion, by a different reviewer, for the human ceiling), and
  forwards what to count to ``pairjudge.observations``, keyed by series. A malformed label
  (or record) goes to the dead-letter topic with its reason and bytes.
- **series** (``pairjudge.observations``, keyed by series, co-partitioned with ``audit-windows``): sums
  observations into tumbling windows per series, applies the guards, publishes ``Alert``s and the
  kappa guard's control update, and (on a timer) ``AuditSnapshot``s on ``pairjudge.audit``.

Both stages run with concurrency 1: each event is a read-modify-write of one table entry.

Delivery: outputs are published (and acknowledged by the broker) before the table entry is written
and the input acked, so a crash in between counts an observation twice rather than never. Within a
pair, a redelivered record or label is recognised by the join entry and not counted again.

The pure parts (records, the join, the sums, the guards) are in ``agents.audit``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

import faust

from pairjudge.agents import InputRejected
from pairjudge.agents.audit import (
    CALIBRATION_SUFFIX,
    ConfidenceHistogram,
    JoinEntry,
    SeriesWindow,
    calibration_key,
    on_label,
    on_record,
    threshold_snapshot,
    window_key,
    window_start,
)
from pairjudge.agents.scores.events import expired_event, score_event
from pairjudge.schemas import ControlUpdate, HumanLabel
from pairjudge.schemas.audit import Alert, AuditObservation, DecisionRecord, ThresholdSnapshot, ThresholdUpdate
from pairjudge.schemas.pair import RiskLevel
from pairjudge.streams.config.settings import AuditSettings
from pairjudge.streams.control.live import PolicyHolder
from pairjudge.streams.control.signing import ControlSigner, with_signature
from pairjudge.streams.kafka.codecs import decode, encode
from pairjudge.streams.kafka.topics import AUDIT_JOIN_TABLE, AUDIT_WINDOWS_TABLE
from pairjudge.streams.security.redaction_hook import EventRedactor
from pairjudge.streams.telemetry.tracing import Telemetry, inject_headers
from pairjudge.streams.worker.delivery import Consume, Publish
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


class Audit:
    """The two tables and the handlers of the join and series agents. Built by ``create_app``."""

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
    ) -> None:
        self.settings = settings
        #: Signs the kappa guard's pause when a control signing key is configured (streams.control.signing).
        self._control_signer = control_signer
        #: Also publish each final outcome as a ``ScoreEvent`` for the scoreboard (``streams.scores.handlers``).
        self.feed_scores = feed_scores
        self._alert_sink = alert_sink
        #: Redacts dead letters before they are published (``streams.security.redaction_hook``); set by ``create_app``.
        self.redactor: EventRedactor | None = None
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

    # --- the join --------------------------------------------------------------------------------

    async def on_join_input(self, raw: bytes | None, origin: Origin) -> None:
        """One decision record or label, by the topic it came from."""
        is_label = origin.topic == self.topic_names["labels"]
        try:
            item: HumanLabel | DecisionRecord = (
                decode(HumanLabel, raw, max_bytes=MAX_AUDIT_EVENT_BYTES)
                if is_label
                else decode(DecisionRecord, raw, max_bytes=MAX_AUDIT_EVENT_BYTES)
            )
        except InputRejected as exc:
            await self._publish([self._dead_letter(exc.reason, exc.detail, raw, origin)])
            return
        key = item.pair_id.encode("utf-8")
        stored = read(self.join_table.data, key)
        entry = JoinEntry.from_bytes(_split_partition(stored)[1] if stored else None)
        now = time.time()
        if isinstance(item, HumanLabel):
            updated, observations, outcome = on_label(entry, item, now)
            if outcome == "unjoinable":
                detail = f"label winner {item.winner!r} names neither candidate of pair {item.pair_id} nor TIE"
                await self._publish([self._dead_letter("label_unjoinable", detail, raw, origin)])
                return
            if outcome in ("duplicate", "conflicting"):
                log.info("audit: %s label for pair %s (kept the first)", outcome, item.pair_id)
            elif outcome == "second_opinion":
                log.debug("audit: second opinion on pair %s (for the human ceiling)", item.pair_id)
        else:
            updated, observations = on_record(entry, item, now)
        outgoing = [self._observation(o) for o in observations]
        if self.feed_scores:
            # The join counts each pair's final decision and its label once: so does the scoreboard.
            events = [e for e in (score_event(o) for o in observations) if e is not None]
            outgoing += [Outgoing("score-events", e.experiment.encode(), encode(e), inject_headers()) for e in events]
        await self._publish(outgoing)
        if updated != entry:
            partition = origin.partition or 0
            await store(self.join_table, partition, key, _with_partition(partition, updated.to_bytes()))

    def _observation(self, observation: AuditObservation) -> Outgoing:
        return Outgoing("observations", observation.series.key.encode(), encode(observation), inject_headers())

    def _dead_letter(self, reason: str, detail: str, raw: bytes | None, origin: Origin) -> Outgoing:
        return dead_letter(self._telemetry, "decode", reason, detail, raw, origin, redactor=self.redactor)

    # --- the series windows ----------------------------------------------------------------------

    async def on_observation(self, raw: bytes | None, origin: Origin) -> None:
        """Add one observation to its series' window (and, labelled, to the series' calibration).

        Exactly once per entry: each entry keeps the offset of the last observation it took in, and
        every observation of a series comes from the one partition its key maps to, in offset order.
        An observation redelivered after a rebalance or a crash (read again from the last commit) is
        at or below that offset and is skipped: the statistics never count it twice.
        """
        try:
            observation = decode(AuditObservation, raw, max_bytes=MAX_AUDIT_EVENT_BYTES)
        except InputRejected as exc:
            await self._publish([self._dead_letter(exc.reason, exc.detail, raw, origin)])
            return
        partition = origin.partition or 0
        offset = origin.offset if origin.offset is not None else -1
        start = window_start(observation.observed_at, self.settings.window_s)
        key = window_key(observation.series.key, start)
        stored = read(self.windows_table.data, key)
        window = (
            SeriesWindow.from_bytes(stored)
            if stored
            else SeriesWindow(observation.series, start, self.settings.window_s, partition)
        )
        if offset < 0 or offset > window.last_offset:
            window.stats.add(observation)
            window.last_offset = offset
            findings = self._act_on_findings(window)
            await self._publish([o for o in findings if o.kind != "control"])
            for trip in (o for o in findings if o.kind == "control"):
                await self._publish_guard(trip)
            await store(self.windows_table, partition, key, window.to_bytes())
            self._dirty.add(key)
        if observation.kind == "labelled":
            # The series' labelled decisions over all its windows, for the calibrated threshold.
            histogram = self._histogram(observation.series.key)
            if offset < 0 or offset > histogram.last_offset:
                histogram.add(observation)
                histogram.last_offset = offset
                value = _with_partition(partition, histogram.to_bytes())
                await store(self.windows_table, partition, calibration_key(observation.series.key), value)

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
            if finding.kind == "kappa_below_threshold":
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
            threshold = self._threshold(window.series.key, window.series.risk_level or "normal")
            snapshot = window.snapshot(final=closed, threshold=threshold, bounds=self.settings.bounds())
            if closed:
                # Marked before the first await: a late observation handled meanwhile updates the stored
                # window, and this older copy must not be written back over it afterwards.
                window.stats.final_published = True
                await store(self.windows_table, window.partition, key, window.to_bytes())
            await self._publish([Outgoing("audit", window.series.key.encode(), encode(snapshot), inject_headers())])
            await self._publish_threshold(window.series.key, window.partition, threshold)
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
            target=self.settings.calibration_target,
            risk=self.settings.calibration_risk,
            labels=threshold.labels,
        )
        log.warning("audit: series %s now auto-decides from confidence %s (%s)", series_key, live, threshold.note)
        await self._publish([Outgoing("thresholds", series_key.encode(), encode(update), inject_headers())])
        # Read again after the await: labelled observations may have been added to the histogram meanwhile,
        # and writing back the copy read before it would lose them.
        histogram = self._histogram(series_key)
        histogram.published_threshold = live
        value = _with_partition(partition, histogram.to_bytes())
        await store(self.windows_table, partition, calibration_key(series_key), value)

    def _histogram(self, series_key: str) -> ConfidenceHistogram:
        stored = read(self.windows_table.data, calibration_key(series_key))
        return ConfidenceHistogram.from_bytes(_split_partition(stored)[1] if stored else None)

    def _threshold(self, series_key: str, risk: RiskLevel = "normal") -> ThresholdSnapshot:
        # A low or high series is walked down to its own level's threshold, the one in force for its pairs.
        return threshold_snapshot(
            self._histogram(series_key),
            configured=self._policy.current.thresholds_for(risk).primary,
            target=self.settings.calibration_target,
            risk=self.settings.calibration_risk,
            min_labels=self.settings.calibration_min_labels,
        )

    async def sweep_join(self, now: float | None = None) -> int:
        """Forget pairs whose entry has not changed for ``join_retention_s``; returns how many."""
        now = time.time() if now is None else now
        owned = self._owned("decisions")
        expired = 0
        # The table holds every pair of the retention (days): a walk that yields and skips updated entries.
        async for key, stored in current_entries(self.join_table.data):
            partition, value = _split_partition(stored)
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


def _with_partition(partition: int, value: bytes) -> bytes:
    """A join entry as stored: prefixed with the partition its changelog record goes to, for the sweep."""
    return f"{partition}:".encode("ascii") + value


def _split_partition(stored: bytes) -> tuple[int, bytes]:
    partition, value = stored.split(b":", 1)
    return int(partition), value


def _authorisation_refused(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps: Faust wraps producer errors) is a refused topic authorisation."""
    seen: BaseException | None = exc
    while seen is not None:
        if getattr(seen, "errno", None) == TOPIC_AUTHORIZATION_FAILED:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


TOPIC_AUTHORIZATION_FAILED = 29


def wire_audit(app: faust.App, audit: Audit, topics: dict[str, faust.TopicT], consume: Consume) -> tuple[Any, Any]:
    """The join and series agents and the audit's timers, on ``app``; returns the two agents."""
    names = audit.topic_names
    join_source = app.topic(
        names["decisions"],
        names["labels"],
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
    )

    async def join_one(event: Any, origin: Origin) -> None:
        await audit.on_join_input(event.value, origin)

    async def observe_one(event: Any, origin: Origin) -> None:
        await audit.on_observation(event.value, origin)

    @app.agent(join_source, name="pairjudge.audit-join", concurrency=1)
    async def audit_join(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for _ in consume(stream, "audit join", join_one):
            yield None

    @app.agent(topics["observations"], name="pairjudge.audit-series", concurrency=1)
    async def audit_series(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for _ in consume(stream, "audit series", observe_one):
            yield None

    async def snapshots() -> None:
        await audit.publish_snapshots()

    async def sweep() -> None:
        await audit.sweep_join()

    app.timer(interval=audit.settings.snapshot_interval_s)(snapshots)
    app.timer(interval=max(1.0, min(600.0, audit.settings.join_retention_s / 10)))(sweep)
    return audit_join, audit_series
