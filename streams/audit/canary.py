"""Canary pairs (seed 000): human-labelled pairs sent through the live pipeline on a schedule.

A canary file holds ``CandidatePair`` lines that each carry a ``human_label``. Every round sends all of
them again under fresh pair ids (``canary-<round stamp>-<original id>``) with ``metadata.traffic`` set to
"canary", so each round is judged anew (never replayed from the outcome tables) and the drift audit
scores them apart from human labels: the series' ``canary_accuracy``, and an alert when it drops
(``canary_accuracy_low``). Their decisions still count in the series' rates: a canary is judged by the
same judge as any pair.

``pairjudge canary send FILE --every 3600`` is the scheduler (or run it once from cron). The file is
read and checked once, up front: a line that is not a labelled pair stops the command before anything
is sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from pairjudge.schemas import CandidatePair
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.codecs import encode
from pairjudge.streams.kafka.producer import send_events

log = logging.getLogger(__name__)

#: Longest pair id (``schemas.pair.PairId``).
MAX_PAIR_ID = 128


class CanaryFileError(ValueError):
    """The canary file has a line that is not a human-labelled pair."""


def load_canaries(path: Path) -> list[CandidatePair]:
    pairs: list[CandidatePair] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            pair = CandidatePair.model_validate_json(line)
        except ValidationError as exc:
            raise CanaryFileError(f"{path}:{number}: not a candidate pair: {exc.errors()[0]['msg']}") from None
        if pair.human_label is None:
            raise CanaryFileError(f"{path}:{number}: canary {pair.pair_id!r} has no human_label")
        pairs.append(pair)
    if not pairs:
        raise CanaryFileError(f"{path}: no canary pairs")
    return pairs


def round_events(pairs: Sequence[CandidatePair], stamp: str) -> list[bytes]:
    """One round's events: every canary under a fresh id, marked as canary traffic."""
    events = []
    for pair in pairs:
        pair_id = f"canary-{stamp}-{pair.pair_id}"[:MAX_PAIR_ID]
        metadata = pair.metadata.model_copy(update={"traffic": "canary"})
        events.append(encode(pair.model_copy(update={"pair_id": pair_id, "metadata": metadata})))
    return events


def round_stamp(now: datetime | None = None) -> str:
    return (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S")


async def send_rounds(settings: Settings, pairs: Sequence[CandidatePair], *, every_s: float | None, rounds: int) -> int:
    """Send ``rounds`` rounds (0: until cancelled), ``every_s`` apart; returns how many events were sent."""
    sent = 0
    done = 0
    while True:
        stamp = round_stamp()
        sent += await send_events(settings, round_events(pairs, stamp))
        done += 1
        log.info("canary round %s: %d pairs sent", stamp, len(pairs))
        if every_s is None or (rounds and done >= rounds):
            return sent
        await asyncio.sleep(every_s)
