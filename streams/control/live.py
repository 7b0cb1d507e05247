"""Live settings from the compacted ``pairjudge.control`` topic, without a redeploy.

Every worker must see every update, so this is not a Faust agent (an agent's consumer group would
give the one control partition to a single worker): each worker reads the whole topic with its own
groupless consumer, from the beginning, and keeps following it. ``pairjudge control set`` writes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from types import MappingProxyType

from aiokafka import AIOKafkaProducer, TopicPartition
from pydantic import ValidationError

from pairjudge.agents import InputRejected, Policy
from pairjudge.agents.audit.stages import TIEBREAK_KEY_SUFFIX, tiebreak_threshold_key
from pairjudge.schemas import ControlUpdate, ThresholdUpdate
from pairjudge.schemas.kinds import CHOICE_KEYS, CONTROLS, SWITCH_KEYS, TEXT_KEYS
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.signing import ControlSigner, signer_from_settings, with_signature
from pairjudge.streams.kafka.cancellation import stop_if_cancelled
from pairjudge.streams.kafka.codecs import decode, encode
from pairjudge.streams.kafka.readers import from_start
from pairjudge.streams.security.kafka_clients import client_config

log = logging.getLogger(__name__)

#: How long one poll waits for records. Only a wait: an empty poll says nothing about being caught up
#: (a slow broker returns empty polls while updates are still unread).
POLL_TIMEOUT_MS = 1000
MAX_CONTROL_BYTES = 4096
CONTROL_KEYS: tuple[str, ...] = tuple(CONTROLS)


class PolicyHolder:
    """The live policy: the configured one with the control topic's overrides on top.

    Overrides are kept per key, as the compacted control topic keeps them, so a tombstone (an
    update deleted from the topic) returns that one setting to its configured value.
    """

    def __init__(self, policy: Policy, *, follows_control: bool = False) -> None:
        self.base = policy
        self.current = policy
        self._overrides: dict[str, ControlUpdate] = {}
        #: The tie-break stage's latest record per series (switched off by the audit, or on by a person).
        self._tiebreaks: dict[str, ThresholdUpdate] = {}
        #: Per series, the latest moment its tie-break was switched back on and its evidence started afresh.
        self._fresh_since: dict[str, datetime] = {}
        #: Set once the control topic has been read up to date; stages wait for it, so no pair is
        #: judged under settings that were already changed before this worker started.
        self.ready = asyncio.Event()
        if not follows_control:
            self.ready.set()

    @property
    def overrides(self) -> Mapping[str, ControlUpdate]:
        """The control topic's live updates by key (who set what, and when)."""
        return MappingProxyType(self._overrides)

    def apply(self, update: ControlUpdate) -> None:
        """Apply one update; a bad value raises ``ValueError`` and changes nothing."""
        self.current = self.current.apply(update)
        self._overrides[update.key] = update

    def clear(self, key: str) -> None:
        self._overrides.pop(key, None)
        self._rebuild()

    def set_series_threshold(self, series: str, threshold: float | None) -> None:
        """A series' calibrated threshold from the audit (None: the configured one applies again)."""
        thresholds = dict(self.current.series_thresholds)
        if threshold is None:
            thresholds.pop(series, None)
        else:
            thresholds[series] = threshold
        # Validated by Policy before anything changes.
        self.current = dataclasses.replace(self.current, series_thresholds=thresholds)

    def set_tiebreak_state(self, series: str, threshold: float | None, *, off: bool) -> None:
        """A series' tie-break threshold from the audit (None: the configured one), and whether its tie-break is
        switched off (its flips go to review: ``agents.audit.stages``)."""
        thresholds = dict(self.current.tiebreak_series_thresholds)
        if threshold is None:
            thresholds.pop(series, None)
        else:
            thresholds[series] = threshold
        switched = self.current.tiebreak_off_series - {series} | ({series} if off else set())
        self.current = dataclasses.replace(
            self.current, tiebreak_series_thresholds=thresholds, tiebreak_off_series=frozenset(switched)
        )

    @property
    def tiebreaks(self) -> Mapping[str, ThresholdUpdate]:
        """Each series' latest tie-break record from the thresholds topic: why and when it was switched off, or
        who switched it back on."""
        return MappingProxyType(self._tiebreaks)

    @property
    def fresh_since(self) -> Mapping[str, datetime]:
        """Per series, when a person last switched its tie-break back on (its evidence starts afresh there)."""
        return MappingProxyType(self._fresh_since)

    def note_tiebreak(self, update: ThresholdUpdate | None, series: str) -> None:
        """Keep the series' latest tie-break record (None: its record was deleted). The moment its evidence
        started afresh only moves forward: a record written before the person's (the audit's, read late)
        cannot take it back."""
        if update is None:
            self._tiebreaks.pop(series, None)
            return
        self._tiebreaks[series] = update
        since = update.fresh_since
        if since is not None and (series not in self._fresh_since or since > self._fresh_since[series]):
            self._fresh_since[series] = since

    def set_audit_scale(self, scale: float) -> None:
        """The label budget's scale on the audit shares (``streams.audit.budget``); validated by Policy."""
        self.current = dataclasses.replace(self.current, audit_scale=scale)

    def _rebuild(self) -> None:
        # Measured state (series thresholds, the budget's scale) survives a tombstone: it is not configuration.
        policy = dataclasses.replace(
            self.base,
            series_thresholds=self.current.series_thresholds,
            tiebreak_series_thresholds=self.current.tiebreak_series_thresholds,
            tiebreak_off_series=self.current.tiebreak_off_series,
            audit_scale=self.current.audit_scale,
        )
        for update in self._overrides.values():
            policy = policy.apply(update)
        self.current = policy


def apply_record(
    holder: PolicyHolder,
    key: bytes | None,
    value: bytes | None,
    *,
    headers: Sequence[tuple[str, bytes]] | None = None,
    verifier: ControlSigner | None = None,
    topic: str = "",
) -> None:
    """Apply one control record; a tombstone returns its setting to the configured value.

    With a ``verifier`` (a signing key is configured), a record that is unsigned or badly signed is
    ignored and logged (streams.control.signing); a signed one is applied, its ``updated_by`` prefixed
    with the verified key id.
    """
    signed_by: str | None = None
    if verifier is not None:
        check = verifier.verify(topic, key, value, headers)
        if not check.ok:
            log.warning(
                "control: ignored an update for key %r on %s: %s (key id %r); only updates signed with "
                "PAIRJUDGE_CONTROL__SIGNING_KEY apply",
                (key or b"")[:64],
                topic,
                check.problem,
                (check.key_id or "")[:64] or None,
            )
            return
        signed_by = check.key_id
    if value is None:
        if key:
            holder.clear(key.decode("utf-8", "replace"))
            log.warning("control: %s cleared; back to the configured value", key.decode("utf-8", "replace"))
        return
    try:
        update = decode(ControlUpdate, value, max_bytes=MAX_CONTROL_BYTES)
        if signed_by is not None:
            # Who made it is the key's holder: the free text follows, as the signer wrote it.
            who = f"key {signed_by}" + (f": {update.updated_by}" if update.updated_by else "")
            update = update.model_copy(update={"updated_by": who})
        holder.apply(update)
    except (InputRejected, ValueError) as exc:
        # A bad control message must not stop the worker or change anything; it is reported loudly.
        log.error("control: ignored an invalid update (key %r): %s", key, exc)
        return
    log.warning("control: %s = %s (by %s)", update.key, update.value, update.updated_by or "unknown")


def apply_threshold_record(holder: PolicyHolder, key: bytes | None, value: bytes | None) -> None:
    """Apply one record of the thresholds topic; a tombstone forgets the series' threshold."""
    series = (key or b"").decode("utf-8", "replace")
    if value is None:
        if series.endswith(TIEBREAK_KEY_SUFFIX):  # the tie-break stage's: back to configured, switched on
            holder.set_tiebreak_state(series.removesuffix(TIEBREAK_KEY_SUFFIX), None, off=False)
            holder.note_tiebreak(None, series.removesuffix(TIEBREAK_KEY_SUFFIX))
        else:
            holder.set_series_threshold(series, None)
        return
    try:
        update = decode(ThresholdUpdate, value, max_bytes=MAX_CONTROL_BYTES)
        if update.stage == "tiebreak":
            holder.set_tiebreak_state(update.series, update.threshold, off=update.switched_off)
            holder.note_tiebreak(update, update.series)
        else:
            holder.set_series_threshold(update.series, update.threshold)
    except (InputRejected, ValueError) as exc:
        log.error("thresholds: ignored an invalid update (key %r): %s", key, exc)
        return
    if update.stage == "primary":
        log.warning("thresholds: series %s auto-decides from confidence %s", update.series, update.threshold)
    elif update.switched_on_by:
        log.warning("thresholds: series %s: tie-break switched back on by %s", update.series, update.switched_on_by)
    elif update.switched_off:
        log.warning("thresholds: series %s: tie-break switched off, its flips go to review", update.series)
    else:
        log.warning("thresholds: series %s: tie-break decides from confidence %s", update.series, update.threshold)


async def follow_control(settings: Settings, holder: PolicyHolder) -> None:
    """Read the control and thresholds topics from the start, mark the holder ready once caught up,
    then keep following both.

    "Caught up" means every partition's position has reached the end offset it had when the follower
    started: everything written before this worker started has been applied, however slowly the
    broker hands it over. (Tansu reports an end offset as the last batch's start + 1, at or below
    the real one: it is still reached, once that last batch has been read.)
    """
    appliers = {
        settings.topics.name("control"): apply_record,
        settings.topics.name("thresholds"): apply_threshold_record,
    }
    control_topic = settings.topics.name("control")
    signer = signer_from_settings(settings.control)
    if signer is None:
        log.warning(
            "control: updates on %s are not authenticated (PAIRJUDGE_CONTROL__SIGNING_KEY is not set): anyone "
            "who may write that topic can change this process's policy",
            control_topic,
        )
    async with from_start(client_config(settings.kafka), list(appliers)) as reader:
        while True:
            stop_if_cancelled()  # a request to stop swallowed while the reader opened (streams.kafka.cancellation)
            # Checked before each poll, so an empty topic is ready without waiting for one.
            if not holder.ready.is_set() and await reader.caught_up():
                holder.ready.set()
                log.info("control: caught up to %s; policy %s", _offsets_text(reader.ends), holder.current)
            for tp, records in (await reader.batches(timeout_ms=POLL_TIMEOUT_MS)).items():
                for record in records:
                    if tp.topic == control_topic:
                        apply_record(
                            holder,
                            record.key,
                            record.value,
                            headers=record.headers,
                            verifier=signer,
                            topic=control_topic,
                        )
                    else:
                        appliers[tp.topic](holder, record.key, record.value)


def _offsets_text(offsets: Mapping[TopicPartition, int]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]@{offset}" for tp, offset in sorted(offsets.items()))


def parse_value(key: str, raw: str) -> float | bool | str:
    if key in TEXT_KEYS:
        return raw.strip()
    if key in CHOICE_KEYS:
        word = raw.strip().lower()
        if word not in CHOICE_KEYS[key]:
            raise ValueError(f"{key} takes one of {', '.join(CHOICE_KEYS[key])}, not {raw!r}")
        return word
    if key in SWITCH_KEYS:
        lowered = raw.strip().lower()
        if lowered not in ("true", "false"):
            raise ValueError(f"{key} takes true or false, not {raw!r}")
        return lowered == "true"
    return float(raw)


async def publish_control(settings: Settings, key: str, value: float | bool | str | None, updated_by: str) -> None:
    """Write one update (``value=None`` writes a tombstone: back to the configured value)."""
    payload: bytes | None = None
    if value is not None:
        try:
            update = ControlUpdate.model_validate({"key": key, "value": value, "updated_by": updated_by})
        except ValidationError as exc:
            raise ValueError(f"invalid control update: {exc.errors()[0]['msg']}") from None
        # Refuse what a worker would refuse, before it reaches the topic.
        PolicyHolder(settings.policy.to_policy()).apply(update)
        payload = encode(update)
    elif key not in CONTROL_KEYS:
        raise ValueError(f"unknown control key {key!r}; one of {', '.join(CONTROL_KEYS)}")
    topic = settings.topics.name("control")
    # Signed when a key is configured (streams.control.signing); workers with the key ignore unsigned updates.
    headers = with_signature(signer_from_settings(settings.control), topic, key.encode(), payload, [])
    await _send_one(settings, topic, key.encode(), payload, headers)


async def _send_one(
    settings: Settings, topic: str, key: bytes, value: bytes | None, headers: list[tuple[str, bytes]]
) -> None:
    """Write one record and wait for every in-sync replica to have it (a person's change, made once)."""
    producer = AIOKafkaProducer(**client_config(settings.kafka).kwargs(acks="all"))
    await producer.start()
    try:
        await producer.send_and_wait(topic, value=value, key=key, headers=headers)
    finally:
        await producer.stop()


async def publish_tiebreak_on(settings: Settings, series: str, switched_on_by: str) -> ThresholdUpdate:
    """Switch ``series``' tie-break back on: an explicit "on" record on the thresholds topic (not a tombstone, so
    who did it and why stays on the compacted topic, as ``pairjudge control resume`` keeps who resumed). Every
    worker applies it live (configured threshold, switched on); the audit starts the tie-break's evidence afresh
    from its ``fresh_since`` (``agents.audit.stages.restart_evidence``). Returns the record written."""
    series, switched_on_by = series.strip(), switched_on_by.strip()
    if not series or series.endswith(TIEBREAK_KEY_SUFFIX):
        raise ValueError(f"name the series as the audit shows it (experiment, rubric, judge), not {series!r}")
    if not switched_on_by:
        raise ValueError("say who switches the tie-break back on, and why")
    audit = settings.audit
    update = ThresholdUpdate(
        series=series,
        threshold=None,
        target=audit.calibration_target,
        risk=audit.calibration_risk,
        labels=0,
        stage="tiebreak",
        switched_off=False,
        switched_on_by=switched_on_by[:200],
        fresh_since=datetime.now(UTC),
    )
    await _send_one(
        settings, settings.topics.name("thresholds"), tiebreak_threshold_key(series).encode(), encode(update), []
    )
    return update
