"""Reading the dead-letter topic back: every letter up to where the topic ended when the read began.

``pairjudge deadletter list`` and ``replay`` both start here. The read is bounded: it stops at each
partition's end offset as read before it began, so it terminates on a topic that workers keep writing to,
and a letter written meanwhile (a replayed pair that failed again, say) is left for the next run. It is
group-less (``streams.kafka.readers.from_start``): it takes no partition from anyone and commits nothing.

A record that is not a ``DeadLetter`` (another producer's, or an unknown schema version) is counted, not
an error: one bad record must not hide the thousands of good ones beside it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from aiokafka.structs import ConsumerRecord

from pairjudge.agents.errors import InputRejected
from pairjudge.schemas import DeadLetter
from pairjudge.streams.kafka.codecs import decode
from pairjudge.streams.kafka.readers import from_start
from pairjudge.streams.security.kafka_clients import ClientConfig

log = logging.getLogger(__name__)

#: Largest dead-letter record decoded. Letters are built to fit 900,000 bytes
#: (``streams.kafka.dead_letters.DEFAULT_MAX_LETTER_BYTES``); a little room for older or foreign ones.
MAX_LETTER_BYTES = 2_000_000
#: Seconds without any partition's position moving before a read gives up (a broker that stopped
#: answering); a read that keeps moving runs as long as the topic takes.
STALL_S = 60.0


class ReadStalled(RuntimeError):
    """The dead-letter topic stopped delivering before its end offsets were reached."""


@dataclass(frozen=True, slots=True)
class StoredLetter:
    """A dead letter and where it sits on the dead-letter topic."""

    letter: DeadLetter
    #: The letter record's key: the pair id when one could be read, else the failed input's key (bounded).
    key: bytes | None
    topic: str
    partition: int
    offset: int

    @property
    def where(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


@dataclass(frozen=True, slots=True)
class LetterFilter:
    """Which letters to keep; an empty set or None means "any"."""

    reasons: frozenset[str] = frozenset()
    stages: frozenset[str] = frozenset()
    pair_ids: frozenset[str] = frozenset()
    #: Inclusive bounds on ``failed_at`` (timezone-aware).
    since: datetime | None = None
    until: datetime | None = None

    def matches(self, letter: DeadLetter) -> bool:
        if self.reasons and letter.reason not in self.reasons:
            return False
        if self.stages and letter.stage not in self.stages:
            return False
        if self.pair_ids and letter.pair_id not in self.pair_ids:
            return False
        if self.since is not None and letter.failed_at < self.since:
            return False
        return self.until is None or letter.failed_at <= self.until


@dataclass
class LetterRead:
    """What a read found: the selected letters in topic order, and what it passed over."""

    letters: list[StoredLetter] = field(default_factory=list)
    #: Records read, selected or not.
    scanned: int = 0
    #: Records that are not dead letters (undecodable), by reason code.
    unreadable: dict[str, int] = field(default_factory=dict)


def sort_key(stored: StoredLetter) -> tuple[datetime, int, int]:
    """Oldest first; letters of the same instant by their place on the topic."""
    return (stored.letter.failed_at, stored.partition, stored.offset)


def latest_per_pair(letters: Iterable[StoredLetter]) -> list[StoredLetter]:
    """One letter per pair id, its latest (by ``failed_at``), oldest first; letters without a pair id all kept.

    A replayed pair that fails again is dead-lettered again, so a pair may have several letters: the
    latest says how it stands now.
    """
    latest: dict[str, StoredLetter] = {}
    kept: list[StoredLetter] = []
    for stored in letters:
        pair_id = stored.letter.pair_id
        if pair_id is None:
            kept.append(stored)
        elif pair_id not in latest or sort_key(stored) > sort_key(latest[pair_id]):
            latest[pair_id] = stored
    return sorted([*kept, *latest.values()], key=sort_key)


def parse_record(record: ConsumerRecord[bytes, bytes]) -> StoredLetter:
    """The letter in ``record``; ``InputRejected`` (with a reason code) when it is not one."""
    letter = decode(DeadLetter, record.value, max_bytes=MAX_LETTER_BYTES)
    return StoredLetter(letter, record.key, record.topic, record.partition, record.offset)


async def read_letters(config: ClientConfig, topic: str, selection: LetterFilter | None = None) -> LetterRead:
    """Every letter on ``topic`` that ``selection`` keeps, up to the end offsets read at the start."""
    found = LetterRead()
    # Large enough for the largest letter in one fetch.
    async with from_start(config, [topic], max_partition_fetch_bytes=MAX_LETTER_BYTES) as reader:
        moved_at, last = time.monotonic(), -1
        while not await reader.caught_up():
            batches = await reader.batches(timeout_ms=500, max_records=1_000)
            for tp, records in batches.items():
                for record in records:
                    if record.offset >= reader.ends.get(tp, 0):
                        continue  # written after the read began: the next run's
                    found.scanned += 1
                    try:
                        stored = parse_record(record)
                    except InputRejected as exc:
                        found.unreadable[exc.reason] = found.unreadable.get(exc.reason, 0) + 1
                        log.warning(
                            "%s[%d]@%d is not a dead letter: %s", tp.topic, tp.partition, record.offset, exc.reason
                        )
                        continue
                    if selection is None or selection.matches(stored.letter):
                        found.letters.append(stored)
            if found.scanned != last:
                moved_at, last = time.monotonic(), found.scanned
            elif time.monotonic() - moved_at > STALL_S:
                raise ReadStalled(f"{topic} delivered nothing for {STALL_S:.0f} s before its end offsets were reached")
    found.letters.sort(key=sort_key)
    return found
