"""The spending caps at the edge (``agents.spend``): what this worker spends, what the others report, the gate.

Each worker keeps a ledger of the current clock hour's spend. Its own decisions go in as they happen
(``SpendTracker.record``); every second it reports its total so far for the hour on the compacted
``pairjudge.spend`` topic (``report``), keyed ``<worker>|<hour>``, and follows that topic for the other
workers' reports (``follow_spend``), keeping the latest of each. A worker's total is cumulative, so a report
read twice, or again after a restart, is never counted twice.

What the caps may miss: the spend of the last second of a worker that crashes before reporting it, and the
other workers' spend of their last second before a pair is gated (a cap holds to within a second of spend
per worker). A restarted worker reports under a new id, and the old id's report stays counted: nothing spent
is forgotten within the hour. A worker that starts gates no pair before it has read the topic up to date.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from pairjudge.agents.spend import CapReached, SpendCaps, SpendLedger, hour_of
from pairjudge.schemas import SpendReport
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.codecs import decode, encode
from pairjudge.streams.kafka.readers import from_start
from pairjudge.streams.security.kafka_clients import client_config
from pairjudge.streams.worker.pipeline import Outgoing
from pairjudge.streams.worker.tasks import keep_following

log = logging.getLogger(__name__)

#: How often a waiting (``queue``) pair looks at the ledger again, and how often a worker reports.
RECHECK_S = 1.0
REPORT_EVERY_S = 1.0
MAX_REPORT_BYTES = 1_000_000


class SpendTracker:
    """This worker's view of the hour's spend, and the gate new pairs pass."""

    def __init__(
        self, *, clock: Callable[[], float] = time.time, worker: str | None = None, follows_topic: bool = False
    ) -> None:
        self.worker = worker or uuid.uuid4().hex[:12]
        self.ledger = SpendLedger()
        #: Set once the spend topic has been read up to date (``follow_spend``): a worker that has just started
        #: gates no pair before it knows what the others (and its own earlier run) spent this hour.
        self.caught_up = asyncio.Event()
        if not follows_topic:
            self.caught_up.set()
        self._clock = clock
        #: Hours whose own total changed since the last report.
        self._changed: set[int] = set()
        #: Hours this worker has reported (emptied on the topic once two hours past).
        self._reported: set[int] = set()

    def record(self, experiment: str | None, usd: float | None) -> None:
        """A decision's spend (None: unpriced, nothing to add)."""
        if not usd:
            return
        hour = hour_of(self._clock())
        self.ledger.add(self.worker, hour, experiment, usd)
        self._changed.add(hour)

    async def reached_now(self, caps: SpendCaps, experiment: str | None) -> CapReached | None:
        """``reached``, once the spend topic has been read up to date."""
        await self.caught_up.wait()
        return self.reached(caps, experiment)

    def reached(self, caps: SpendCaps, experiment: str | None) -> CapReached | None:
        """The cap a new pair of ``experiment`` is over now, if any."""
        if not caps.any:
            return None
        return self.ledger.reached(caps, hour_of(self._clock()), experiment)

    async def wait_for_budget(self, caps: Callable[[], SpendCaps], experiment: str | None) -> None:
        """Wait until no cap holds a pair of ``experiment`` back (the ``queue`` action): the hour turns, the
        cap is raised, or the action changes."""
        # Polled: the hour turning, a live cap change and other workers' reports would each need to signal.
        while (current := caps()).action == "queue" and self.reached(current, experiment) is not None:  # noqa: ASYNC110
            await asyncio.sleep(RECHECK_S)

    def take_in(self, value: bytes | None) -> None:
        """One record of the spend topic: another worker's total for an hour (its own are already counted)."""
        if value is None:
            return
        report = decode(SpendReport, value, max_bytes=MAX_REPORT_BYTES)
        if report.worker != self.worker:
            self.ledger.set_worker(report.worker, report.hour, report.by_experiment)

    def not_reported(self, reports: list[Outgoing]) -> None:
        """``reports`` did not reach the broker: report their hours again next time."""
        for out in reports:
            worker, hour = out.key.decode().split("|")
            if out.value and worker == self.worker:
                self._changed.add(int(hour))

    def reports(self) -> list[Outgoing]:
        """This worker's changed totals as spend records, and an empty record for each of its hours gone by:
        compaction then keeps only that under the hour's key (the followers skip it)."""
        out: list[Outgoing] = []
        for hour in sorted(self._changed):
            report = SpendReport(worker=self.worker, hour=hour, by_experiment=self.ledger.of_worker(self.worker, hour))
            out.append(Outgoing("spend", _key(self.worker, hour), encode(report), []))
            self._reported.add(hour)
        self._changed.clear()
        now = hour_of(self._clock())
        for hour in [h for h in self._reported if h < now - 1]:
            out.append(Outgoing("spend", _key(self.worker, hour), b"", []))
            self._reported.discard(hour)
        return out


def _key(worker: str, hour: int) -> bytes:
    return f"{worker}|{hour}".encode()


async def follow_spend(settings: Settings, tracker: SpendTracker) -> None:
    """Read the spend topic from its start, then keep following it, into ``tracker``."""
    topic = settings.topics.name("spend")
    async with from_start(client_config(settings.kafka), [topic]) as reader:
        while True:
            # Checked before each poll, so an empty topic is caught up without waiting for one.
            if not tracker.caught_up.is_set() and await reader.caught_up():
                tracker.caught_up.set()
            for records in (await reader.batches(timeout_ms=1000)).values():
                for record in records:
                    try:
                        tracker.take_in(record.value or None)
                    except Exception as exc:  # noqa: BLE001  # a bad record must not stop the worker's caps
                        log.error("spend: ignored an invalid report (key %r): %s", record.key, exc)


def keep_spend(
    app: Any, settings: Settings, tracker: SpendTracker, publish: Callable[[list[Outgoing]], Awaitable[None]]
) -> None:
    """On a worker's ``app``: a task following every worker's spend into ``tracker`` (without the others' spend
    the caps would let through what they should hold) and a timer reporting this worker's every second."""
    keep_following(app, settings.topics.name("spend"), lambda: follow_spend(settings, tracker))

    async def report_spend() -> None:
        reports = tracker.reports()
        if not reports:
            return
        try:
            await publish(reports)
        except Exception as exc:  # noqa: BLE001  # a broker hiccup: reported again on the next tick
            tracker.not_reported(reports)
            log.warning("could not report this worker's spend (%s); trying again in %g s", exc, REPORT_EVERY_S)

    app.timer(interval=REPORT_EVERY_S)(report_spend)


class SpendCapUnsupported(ValueError):
    """A spending cap configured with an action this kind of run cannot carry out."""


def in_process_tracker(caps: SpendCaps) -> SpendTracker:
    """The ledger and gate of a run that follows no spend topic (the Python API, ``pairjudge evaluate``): the
    caps hold on this run's own spend, per UTC clock hour as in the worker (a run that crosses the hour starts
    the new hour with a new budget); a running fleet's spend is not counted.

    ``queue`` is refused (``SpendCapUnsupported``): a queued pair waits until the hour turns or the cap is raised
    through ``pairjudge.control``, which an in-process run does not follow, so the run would stall for up to an
    hour with nothing to say why."""
    if caps.any and caps.action == "queue":
        raise SpendCapUnsupported(
            "policy.spend_action 'queue' cannot be honoured by an in-process run (pairjudge evaluate, the Python "
            "API): a queued pair waits for the clock hour to turn or for the cap to be raised through "
            "pairjudge.control, which this run does not follow, so it would stall for up to an hour. Set "
            "policy.spend_action to 'review' (pairs past the cap go to review as spend_capped) or 'sample' (a share "
            "is still judged, the rest fail as spend_capped) for this run, or lift the cap."
        )
    return SpendTracker()
