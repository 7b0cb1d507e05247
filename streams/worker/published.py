"""One outcome per pair and stage (docs/design.md §2.12): what was published, kept where a redelivery finds it.

Faust re-delivers work after a rebalance (faust#502) and after a crash, and an LLM judge asked twice
may answer differently. So before a stage publishes, it records its messages in a changelog-backed
Faust table keyed by pair id, one table per stage; a redelivered input finds them and re-publishes
the same bytes without calling the judge.

The write goes to the changelog *and is acknowledged by the broker* before the outputs are sent, so
no crash can leave an outcome published but not recorded. The changelog record lands in the same
partition number as the input, which is how Faust co-partitions a table with its source: the worker
that owns ``pairs``/3 also holds the outcomes recorded for it.

Once the broker has acknowledged every message of the outcome, the entry is replaced by a mark that
says so (``mark_published``), and a redelivery finds the mark and sends nothing: the messages are on
their topics already, and a copy would be a duplicate every consumer has to drop. Only a redelivery
between the send and the mark (a crash there, or a rebalance whose new owner restored the table before
the mark reached the changelog) re-sends the recorded bytes. The mark is also what a retained pair
costs: tens of bytes, not the few KB of its outcome.

Entries expire after ``retention_s`` (a tombstone on the changelog): redeliveries come within
minutes, producer retries within hours.
"""

from __future__ import annotations

import asyncio
import json
import logging
import struct
import time
import zlib
from base64 import b64decode
from collections.abc import Iterable
from typing import Any

from pairjudge.schemas.kinds import WorkerStage
from pairjudge.schemas.outcomes import OUTCOMES
from pairjudge.streams.kafka.topics import STAGES, outcome_table_name
from pairjudge.streams.worker.pipeline import Origin, Outgoing, TopicKind
from pairjudge.streams.worker.tables import (
    current_entries,
    forget,
    owned_partitions,
    put,
    read,
    store,
    table_options,
)

log = logging.getLogger(__name__)


# --- the stored value ---------------------------------------------------------------------------------
# b"<stored_at>:<partition>:" + FRAMED + the messages, each as length-prefixed binary frames. The header is
# read without parsing the rest, so the expiry sweep stays cheap on a large table. The frames are not
# compressed unless large: an entry lives only until its published mark replaces it (about a second), and
# zlib with JSON and base64 around it was the worker's largest own cost per pair after judging (issue 27).
# Entries of earlier versions (zlib of a JSON list, starting 0x78) are still read.

#: First byte of a framed payload (never a zlib stream's 0x78, ``PUBLISHED``'s "!" or a crash mark's digit),
#: and of one whose frames are zlib-compressed: those over ``COMPRESS_OVER`` bytes, rare and large.
FRAMED = b"\x01"
COMPRESSED = b"\x02"
COMPRESS_OVER = 64 * 1024
_MESSAGE = struct.Struct(">BHIH")  # kind, key and value lengths; header count
_HEADER = struct.Struct(">HI")  # name and value lengths


def pack(outgoing: Iterable[Outgoing], *, partition: int, stored_at: float) -> bytes:
    parts: list[bytes] = []
    for m in outgoing:
        kind = m.kind.encode("ascii")
        parts.append(_MESSAGE.pack(len(kind), len(m.key), len(m.value), len(m.headers)))
        parts += (kind, m.key, m.value)
        for name, value in m.headers:
            raw_name = name.encode("utf-8")
            parts += (_HEADER.pack(len(raw_name), len(value)), raw_name, value)
    frames = b"".join(parts)
    if len(frames) > COMPRESS_OVER:
        # A large outcome (a review request carrying long outputs) must still fit the changelog's records.
        return entry_header(partition, stored_at) + COMPRESSED + zlib.compress(frames, level=1)
    return entry_header(partition, stored_at) + FRAMED + frames


def entry_header(partition: int, stored_at: float) -> bytes:
    """The ``<stored_at>:<partition>:`` every stored value starts with: outcomes, published and crash marks."""
    return f"{int(stored_at)}:{partition}:".encode("ascii")


def published_mark(partition: int, stored_at: float) -> bytes:
    """What a recorded outcome becomes once the broker has all of it."""
    return entry_header(partition, stored_at) + PUBLISHED


def header(stored: bytes) -> tuple[float, int]:
    """(stored_at, partition) of a packed value."""
    stored_at, partition, _ = stored.split(b":", 2)
    return float(stored_at), int(partition)


def unpack(payload: bytes) -> list[Outgoing]:
    """The messages of a packed value's payload (what follows its header)."""
    if payload.startswith(COMPRESSED):
        payload = FRAMED + zlib.decompress(payload[1:])
    elif not payload.startswith(FRAMED):
        return _unpack_zlib_json(payload)
    out: list[Outgoing] = []
    view, at = memoryview(payload), 1
    while at < len(payload):
        kind_len, key_len, value_len, header_count = _MESSAGE.unpack_from(view, at)
        at += _MESSAGE.size
        kind = bytes(view[at : at + kind_len]).decode("ascii")
        at += kind_len
        key = bytes(view[at : at + key_len])
        at += key_len
        value = bytes(view[at : at + value_len])
        at += value_len
        headers: list[tuple[str, bytes]] = []
        for _ in range(header_count):
            name_len, header_len = _HEADER.unpack_from(view, at)
            at += _HEADER.size
            name = bytes(view[at : at + name_len]).decode("utf-8")
            at += name_len
            headers.append((name, bytes(view[at : at + header_len])))
            at += header_len
        out.append(Outgoing(kind=_topic_kind(kind), key=key, value=value, headers=headers))
    return out


def _unpack_zlib_json(payload: bytes) -> list[Outgoing]:
    """An entry recorded before the framed format: zlib of a JSON list, bytes in base64."""
    body = json.loads(zlib.decompress(payload))
    return [
        Outgoing(
            kind=_topic_kind(m["kind"]),
            key=b64decode(m["key"]),
            value=b64decode(m["value"]),
            headers=[(name, b64decode(value)) for name, value in m["headers"]],
        )
        for m in body
    ]


#: The payload that replaces a recorded outcome once the broker has all of it (never a zlib stream: those
#: start with 0x78).
PUBLISHED = b"!published"


def crash_key(origin: Origin) -> bytes:
    """The crash mark's key for the input at ``origin``; never a pair id (those have no NUL)."""
    return f"\x00crash:{origin.topic}:{origin.partition}:{origin.offset}".encode()


def _log_failed_mark(sent: Any) -> None:
    # Retrieved so that asyncio does not report it unawaited; the next redelivery re-sends the outcome.
    if not sent.cancelled() and sent.exception() is not None:
        log.warning("a published mark did not reach the changelog: %s", sent.exception())


#: What a stage records for a pair: its outcome (``schemas.outcomes``) and the decision record beside it; the
#: shadow stage's outcome is the pair it made.
_RECORDED_KINDS = frozenset({*(entry.topic for entry in OUTCOMES.values()), "decisions", "pairs"})

#: The payload of an ask begun and not yet recorded (the shadow stage's challenger call, ``mark_asking``).
ASKING = b"?asking"


def _topic_kind(kind: str) -> TopicKind:
    if kind not in _RECORDED_KINDS:
        raise ValueError(f"stored outcome has an unknown topic kind {kind!r}")
    return kind  # type: ignore[return-value]


class OutcomeTables:
    """The Faust tables, one per stage, and the expiry sweep (its timer installed on ``app`` here). Built by the
    composition root."""

    def __init__(self, app: Any, *, partitions: int, retention_s: float) -> None:
        self.retention_s = retention_s
        #: (stage, pair id) -> set when the delivery deciding it has recorded or given up.
        self._deciding: dict[tuple[WorkerStage, str], asyncio.Event] = {}
        self._app = app
        self._tables = {
            stage: app.Table(
                outcome_table_name(stage),
                default=None,
                key_type=bytes,
                value_type=bytes,
                partitions=partitions,
                options=table_options(app),
                help=f"What the {stage} stage published, per pair id (idempotent redelivery).",
            )
            for stage in STAGES
        }
        self._keep_swept()

    def _keep_swept(self) -> None:
        """A timer on the app that expires recorded outcomes past their retention."""

        async def expire_outcomes() -> None:
            await self.sweep()

        self._app.timer(interval=max(1.0, min(600.0, self.retention_s / 10)))(expire_outcomes)

    @property
    def tables(self) -> dict[WorkerStage, Any]:
        """The Faust table of each stage."""
        return dict(self._tables)

    async def claim(self, stage: WorkerStage, pair_id: str) -> list[Outgoing] | None:
        """The recorded outcome to replay, or None: then this delivery decides, and must ``record`` or
        ``release``. A second delivery of the pair arriving meanwhile (a producer retry, a re-published
        tie-break request) waits for the first instead of asking the judge again."""
        key = (stage, pair_id)
        while (deciding := self._deciding.get(key)) is not None:
            await deciding.wait()
        recorded = self.recall(stage, pair_id)
        if recorded is None:
            self._deciding[key] = asyncio.Event()
        return recorded

    def release(self, stage: WorkerStage, pair_id: str) -> None:
        """Give up a claim without recording (nothing was published): a waiting delivery decides."""
        deciding = self._deciding.pop((stage, pair_id), None)
        if deciding is not None:
            deciding.set()

    def recall(self, stage: WorkerStage, pair_id: str) -> list[Outgoing] | None:
        """The messages recorded for this pair at this stage, if any and not expired."""
        payload = self._payload(stage, pair_id.encode("utf-8"))
        if payload is None:
            return None
        if payload == PUBLISHED:
            return []  # on the broker already: nothing to send again
        if payload == ASKING:
            return None  # begun before a crash or a rebalance, never recorded: to decide again
        return unpack(payload)

    def was_asking(self, stage: WorkerStage, pair_id: str) -> bool:
        """Whether an ask for ``pair_id`` began and was never recorded (a crash or a rebalance cut it off)."""
        return self._payload(stage, pair_id.encode("utf-8")) == ASKING

    async def clear_asking(self, stage: WorkerStage, pair_id: str, partition: int) -> None:
        """Forget an asking mark whose ask ended without an outcome (a dead letter): nothing was cut off."""
        key = pair_id.encode("utf-8")
        if self._payload(stage, key) == ASKING:
            await forget(self._tables[stage], partition, key)

    async def mark_asking(self, stage: WorkerStage, pair_id: str, partition: int) -> None:
        """Record that an ask for ``pair_id`` begins, and wait until the broker has it: a redelivery that finds it
        knows the ask may have been made already (``was_asking``), and counts the repeat."""
        key = pair_id.encode("utf-8")
        await store(self._tables[stage], partition, key, entry_header(partition, time.time()) + ASKING)

    def _payload(self, stage: WorkerStage, key: bytes) -> bytes | None:
        """What is stored under ``key`` after its header, or None when nothing is or it has expired."""
        stored = read(self._tables[stage].data, key)
        if not stored:
            return None
        stored_at, _ = header(stored)
        if time.time() - stored_at > self.retention_s:
            return None
        return stored.split(b":", 2)[2]

    def mark_published(self, stage: WorkerStage, pair_id: str, partition: int) -> Any:
        """The broker has every message of this pair's outcome: keep only that, so a redelivery sends nothing.

        Returns the changelog record's future. The judging path does not wait for it: lost in a crash, it
        costs one duplicate of the outcome (the recorded bytes, re-sent), never an outcome.
        """
        table = self._tables[stage]
        key = pair_id.encode("utf-8")
        value = published_mark(partition, time.time())
        put(table.data, partition, key, value)
        sent = table.send_changelog(partition, key, value)
        sent.add_done_callback(_log_failed_mark)
        return sent

    async def record(self, stage: WorkerStage, pair_id: str, partition: int, outgoing: list[Outgoing]) -> None:
        """Record, and wait until the broker has the changelog record."""
        table = self._tables[stage]
        key = pair_id.encode("utf-8")
        value = pack(outgoing, partition=partition, stored_at=time.time())
        try:
            await store(table, partition, key, value)
        finally:
            self.release(stage, pair_id)

    # --- crash marks: how often an input stopped a worker (streams.worker.delivery) ---------------------
    # Kept in the stage's table, co-partitioned with the input, so the partition's next owner has them.
    # The key cannot collide with a pair id (those match ``^[A-Za-z0-9_.:-]+$``); the value has the outcome
    # header, so the sweep expires marks like outcomes.

    def crashes(self, stage: WorkerStage, origin: Origin) -> int:
        """How many times the input at ``origin`` stopped a worker (0 without a mark, or an expired one)."""
        payload = self._payload(stage, crash_key(origin))
        return 0 if payload is None else int(payload)

    async def mark_crash(self, stage: WorkerStage, origin: Origin) -> int:
        """Count one more stop on the input at ``origin``, and wait until the broker has it. Returns the count."""
        count = self.crashes(stage, origin) + 1
        partition = origin.partition or 0
        value = entry_header(partition, time.time()) + str(count).encode("ascii")
        await store(self._tables[stage], partition, crash_key(origin), value)
        return count

    async def sweep(self) -> int:
        """Expire old entries: drop them here and tombstone them on the changelog. Returns how many."""
        now = time.time()
        assigned = owned_partitions(self._app)
        expired = 0
        for table in self._tables.values():
            async for key, stored in current_entries(table.data):  # a day of pairs: yields, skips updated
                stored_at, partition = header(stored)
                if now - stored_at <= self.retention_s:
                    continue
                # The owner tombstones; others only forget.
                await forget(table, partition if partition in assigned else None, key)
                expired += 1
        if expired:
            log.info("expired %d recorded outcomes older than %.0f s", expired, self.retention_s)
        return expired
