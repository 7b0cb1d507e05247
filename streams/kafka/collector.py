"""Reading outcomes back: what happened to each pair, de-duplicated by pair id.

Faust re-delivers after a rebalance (faust#502), so a pair can have the same outcome twice; its final
outcome is the first verdict, non-audit review request or dead letter seen for its id. Workers promise
"same pair id, same outcome" (streams.worker.published), so two *different* final outcomes for one pair (another
kind, another winner, another reason) are a conflict, and a conflict is an error, not a duplicate.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.readers import from_start
from pairjudge.streams.kafka.topics import FINAL_KINDS, STAGE_SOURCES
from pairjudge.streams.security.kafka_clients import client_config


@dataclass
class Outcomes:
    expected: set[str]
    final: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)  # pair_id -> (kind, event)
    duplicates: int = 0
    audits: int = 0
    unexpected: int = 0
    #: Dead letters of what is not a pair (a malformed label, say): not any pair's outcome.
    other_letters: int = 0
    #: pair_id -> every distinct final outcome seen (see ``outcome_signature``).
    seen: dict[str, set[str]] = field(default_factory=dict)

    @property
    def missing(self) -> set[str]:
        return self.expected - self.final.keys()

    @property
    def complete(self) -> bool:
        return not self.missing

    @property
    def conflicting(self) -> dict[str, set[str]]:
        """Pairs with more than one distinct final outcome: a broken promise, never a harmless duplicate."""
        return {pid: outcomes for pid, outcomes in self.seen.items() if len(outcomes) > 1}

    @property
    def ok(self) -> bool:
        """Every expected pair has an outcome, and no pair has two different ones."""
        return self.complete and not self.conflicting

    def add(self, kind: str, event: dict[str, Any], fallback_key: str | None) -> None:
        if kind == "review" and event.get("audit"):
            self.audits += 1
            return
        pair_id = event.get("pair_id") or fallback_key
        if pair_id is None or pair_id not in self.expected:
            self.unexpected += 1
            return
        self.seen.setdefault(pair_id, set()).add(outcome_signature(kind, event))
        if pair_id in self.final:
            self.duplicates += 1
            return
        self.final[pair_id] = (kind, event)


def outcome_signature(kind: str, event: dict[str, Any]) -> str:
    """What must not differ between two deliveries of one pair's outcome (timestamps and trace ids may)."""
    if kind == "verdicts":
        return f"verdict:{event.get('winner')}:{event.get('decided_by')}"
    return f"{kind}:{event.get('reason')}"


async def collect_outcomes(
    settings: Settings,
    expected: Collection[str],
    *,
    timeout: float,
    settle: float = 0.0,
) -> Outcomes:
    """Read the final-outcome topics from the start until every expected pair has one (or timeout).

    ``settle`` keeps reading that many seconds after completion, to catch duplicates and conflicts.
    """
    outcomes = Outcomes(expected=set(expected))
    topic_by_kind = {settings.topics.name(kind): kind for kind in FINAL_KINDS}
    # Dead letters name the topic they were read from; only the stages' inputs carry pairs (or a letter
    # without a topic: a producer-side rejection).
    pair_topics = {*(settings.topics.name(kind) for kind in STAGE_SOURCES), None}
    # No consumer group: an observer must not steal partitions from anyone, nor commit offsets.
    async with from_start(client_config(settings.kafka), list(topic_by_kind)) as reader:
        deadline = time.monotonic() + timeout
        done_at: float | None = None
        while time.monotonic() < deadline:
            for tp, records in (await reader.batches(timeout_ms=500, max_records=1000)).items():
                for record in records:
                    try:
                        event = json.loads(record.value or b"{}")
                    except ValueError:
                        outcomes.unexpected += 1
                        continue
                    key = record.key.decode("utf-8", "replace") if record.key else None
                    kind = topic_by_kind[tp.topic]
                    if kind == "deadletter" and event.get("topic") not in pair_topics:
                        outcomes.other_letters += 1  # e.g. a malformed human label
                        continue
                    outcomes.add(kind, event, key)
            if outcomes.complete:
                done_at = done_at or time.monotonic()
                if time.monotonic() - done_at >= settle:
                    break
    return outcomes


async def read_topic(
    settings: Settings,
    kind: str,
    *,
    timeout: float,
    until: Callable[[list[tuple[bytes | None, bytes | None]]], bool] | None = None,
) -> list[tuple[bytes | None, bytes | None]]:
    """Every (key, value) on the ``kind`` topic, read from the start without a group, until ``until``
    holds for what was read (or, without ``until``, until ``timeout`` has passed)."""
    topic = settings.topics.name(kind)
    records: list[tuple[bytes | None, bytes | None]] = []
    async with from_start(client_config(settings.kafka), [topic]) as reader:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for batch in (await reader.batches(timeout_ms=200, max_records=1000)).values():
                records.extend((r.key, r.value) for r in batch)
            if until is not None and until(records):
                break
    return records
