"""Replaying dead letters: each selected letter's original bytes back onto the topic it was read from.

Replay relies on the worker's promise of one outcome per pair and stage (docs/design.md §2.12,
``streams.worker.published``): a replayed pair that was decided meanwhile finds its recorded outcome and
re-publishes it byte for byte, unjudged, like any redelivery; so replaying a letter twice never makes a
second, different outcome. A dead letter itself is never recorded as an outcome
(``streams.worker.delivery``), which is what lets a replay ask the judge again once it is fixed.

What is never replayed, whatever the filters: an original that was cut to fit the letter
(``original_truncated``) or passed through the redaction hook (``original_redacted``), or whose bytes do not
match the SHA-256 recorded for the event as received: those bytes are not what was sent. What is replayed
only when asked for by reason: a letter whose reason says the event itself is at fault (``malformed_json``,
``oversized_output``...), since the same bytes would fail the same way; see ``REPLAYABLE_REASONS``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

import anyio
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from pairjudge.streams.kafka.letters import StoredLetter, sort_key
from pairjudge.streams.security.kafka_clients import ClientConfig

log = logging.getLogger(__name__)

#: Reasons replayed without being named: their cause lies outside the event, so the same bytes can
#: succeed once it is fixed (a judge key renewed, a bug fixed, a topic's size limit raised, the workers
#: upgraded to a schema version, a rubric added to the catalog, budget again under a spending cap). Any other
#: reason must be given with ``--reason`` to be replayed.
REPLAYABLE_REASONS: Final = frozenset(
    {
        "judge_rejected",
        "internal_error",
        "crashed_worker",
        "outcome_undeliverable",
        "unsupported_schema_version",
        "unknown_rubric",
        "spend_capped",
    }
)
#: Header on every replayed record: the dead letter it came from (``topic[partition]@offset``), for tracing
#: a replay back. The worker reads only trace context from headers, so it changes nothing there.
REPLAY_HEADER: Final = "pairjudge-replayed-from"

SKIP_TRUNCATED: Final = "original truncated (only its first bytes were kept)"
SKIP_REDACTED: Final = "original redacted (not the bytes that were sent)"
SKIP_CORRUPT: Final = "original does not match its recorded SHA-256"
SKIP_NO_TOPIC: Final = "no source topic recorded (give --to-topic)"
SKIP_OLDER: Final = "an older letter of a pair replayed from its latest letter"


def skip_reason_not_selected(reason: str) -> str:
    return f"reason {reason} is a fault of the event itself (replayed only with --reason {reason})"


@dataclass(frozen=True, slots=True)
class Planned:
    """One letter and what a replay does with it: publish ``value`` to ``topic`` keyed ``key``, or skip it."""

    stored: StoredLetter
    topic: str | None
    key: bytes | None
    skip: str | None = None

    @property
    def value(self) -> bytes:
        return self.stored.letter.original

    @property
    def headers(self) -> list[tuple[str, bytes]]:
        return [(REPLAY_HEADER, self.stored.where.encode())]


def plan_replay(
    letters: Sequence[StoredLetter], *, named_reasons: frozenset[str] = frozenset(), to_topic: str | None = None
) -> list[Planned]:
    """What a replay of ``letters`` (already filtered) does with each, oldest first.

    A pair is replayed once, from its latest letter: one replay per pair is all the worker needs, and its
    older letters are reported as such. ``named_reasons`` are the reasons the user asked for by name.
    """
    latest: dict[str, StoredLetter] = {}
    for stored in letters:
        pair_id = stored.letter.pair_id
        if pair_id is not None and (pair_id not in latest or sort_key(stored) > sort_key(latest[pair_id])):
            latest[pair_id] = stored
    plans = []
    for stored in sorted(letters, key=sort_key):
        letter = stored.letter
        # Keyed as producers key pairs (streams.kafka.producer.key_of), so the replay lands on the pair's
        # partition, beside its recorded outcome; a letter without a pair id kept the input's own key.
        key = letter.pair_id.encode() if letter.pair_id is not None else (stored.key or None)
        topic = to_topic or letter.topic
        plans.append(Planned(stored, topic, key, _why_not(stored, latest, named_reasons, topic)))
    return plans


def _why_not(
    stored: StoredLetter, latest: dict[str, StoredLetter], named_reasons: frozenset[str], topic: str | None
) -> str | None:
    letter = stored.letter
    if letter.original_redacted:
        return SKIP_REDACTED
    if letter.original_truncated:
        return SKIP_TRUNCATED
    if letter.original_sha256 is not None and hashlib.sha256(letter.original).hexdigest() != letter.original_sha256:
        return SKIP_CORRUPT
    if letter.reason not in REPLAYABLE_REASONS and letter.reason not in named_reasons:
        return skip_reason_not_selected(letter.reason)
    if topic is None:
        return SKIP_NO_TOPIC
    if letter.pair_id is not None and latest[letter.pair_id] is not stored:
        return SKIP_OLDER
    return None


class Pacer:
    """At most ``rate`` sends a second, evenly spaced: each send is due ``1 / rate`` after the previous one.

    Spaced rather than bursting, so the workers see a steady trickle; and a caller that was slow (a
    broker pause) earns no burst to catch up: the next send is due one interval after the later of the
    previous send's due time and now.
    """

    def __init__(
        self,
        rate: float,
        *,
        clock: Callable[[], float] = anyio.current_time,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, not {rate}")
        self.interval = 1.0 / rate
        self._clock = clock
        self._sleep = sleep
        self._next: float | None = None

    async def wait(self) -> None:
        """Return when the next send is due."""
        now = self._clock()
        due = now if self._next is None else max(self._next, now)
        self._next = due + self.interval
        if due > now:
            await self._sleep(due - now)


@dataclass
class ReplayReport:
    replayed: list[Planned] = field(default_factory=list)
    #: Why letters were not replayed, with how many each.
    skipped: Counter[str] = field(default_factory=Counter)
    #: Why sends failed (the broker's error class), with how many each.
    failed: Counter[str] = field(default_factory=Counter)


def skipped_of(plans: Sequence[Planned]) -> Counter[str]:
    return Counter(p.skip for p in plans if p.skip is not None)


async def publish_replay(
    config: ClientConfig,
    plans: Sequence[Planned],
    *,
    rate: float | None = None,
    on_sent: Callable[[Planned], None] | None = None,
) -> ReplayReport:
    """Publish every plan that is not skipped, acknowledged by all in-sync replicas, paced by ``rate``.

    One send failing (a topic that is gone, a record over its size limit) is counted and the rest go on.
    """
    report = ReplayReport(skipped=skipped_of(plans))
    pacer = Pacer(rate) if rate else None
    producer = AIOKafkaProducer(**config.kwargs(acks="all", linger_ms=5))
    await producer.start()
    try:
        # Handed to the producer at the pace, acknowledgements awaited as they come: the rate is of
        # records sent, and no send waits for the previous one's round trip.
        pending: list[tuple[Planned, asyncio.Future[object]]] = []
        for plan in plans:
            if plan.skip is not None or plan.topic is None:
                continue
            if pacer is not None:
                await pacer.wait()
            try:
                pending.append(
                    (plan, await producer.send(plan.topic, value=plan.value, key=plan.key, headers=plan.headers))
                )
            except KafkaError as exc:
                _failed(report, plan, exc)
        for plan, sent in pending:
            try:
                await sent
            except KafkaError as exc:
                _failed(report, plan, exc)
                continue
            report.replayed.append(plan)
            if on_sent is not None:
                on_sent(plan)
    finally:
        await producer.stop()
    return report


def _failed(report: ReplayReport, plan: Planned, exc: KafkaError) -> None:
    log.warning("replaying %s to %s failed: %s", plan.stored.where, plan.topic, type(exc).__name__)
    report.failed[type(exc).__name__] += 1
