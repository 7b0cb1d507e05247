"""A worker whose table recovery stops making progress restarts itself, so the group rebalances.

After an assignment a Faust worker restores its tables from their changelogs before its agents judge
anything. Now and then (bench.scaleout's rebalance leg: a worker joining, one SIGTERMed and one SIGKILLed
within half a minute; bench.rebalance_loss: about 1 run in 20) a changelog partition that became active
never delivers a record to recovery: Faust logs "No event received for active tp ... since recovery start"
for ever, and the worker judges nothing on any of its partitions. Nothing is lost (those pairs are pending
in the commit ledger, never committed past), but nothing is decided either until the group rebalances.
A new assignment has always recovered. The cause inside faust-streaming 0.15.3 is not understood yet.

So the worker watches the progress itself: while it is in recovery with active changelog records still to
read, the count of remaining records must fall. When it has not fallen for ``recovery_stall_s``, the worker
reports it (``/livez`` answers 503), stops as on SIGTERM (leaving the group, which rebalances at once) and
exits with ``EXIT_RECOVERY_STALLED``, so its supervisor (Kubernetes, Compose's restart policy, systemd)
starts it again. A hard exit follows if the orderly stop itself hangs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

#: The worker's exit status after it stopped itself over a stalled recovery.
EXIT_RECOVERY_STALLED = 3
#: How often the watch looks at the recovery.
CHECK_EVERY_S = 5.0


def records_left(recovery: Any) -> int | None:
    """None when Faust's recovery (``app.tables.recovery``) is not running; else its active changelog records
    still to read (0 until it has fetched the partitions' offsets).

    The one reader of the recovery's state, for this watch and for ``/readyz``. Faust also sets
    ``app.in_recovery``; it is set and cleared together with ``Recovery.in_recovery``, which is read here.
    """
    if not recovery.in_recovery:
        return None
    return int(recovery.active_remaining_total())


@dataclass
class RecoveryProgress:
    """Seconds since table recovery last made progress (pure: fed the recovery's state and the time)."""

    #: The remaining-record count last seen, and when it last changed (or recovery started).
    _remaining: int | None = field(default=None, init=False)
    _since: float = field(default=0.0, init=False)

    def stalled_for(self, *, in_recovery: bool, remaining: int, now: float) -> float:
        """0 unless recovering with records left and no progress; otherwise seconds without progress."""
        if not in_recovery or remaining <= 0:
            self._remaining = None
            return 0.0
        if self._remaining is None or remaining != self._remaining:
            self._remaining, self._since = remaining, now
            return 0.0
        return now - self._since


@dataclass
class RecoveryWatch:
    """Watches a Faust app's table recovery; stops the worker when it has stalled (module doc)."""

    recovery: Any  # faust.tables.recovery.Recovery
    stall_s: float
    #: Told once when the watch gives up on the recovery (``/livez`` goes 503).
    on_stalled: Callable[[str], None] = lambda reason: None
    #: How long the orderly stop may take before the process exits hard.
    hard_exit_after_s: float = 60.0
    progress: RecoveryProgress = field(default_factory=RecoveryProgress)
    stalled: str | None = None

    def check(self, now: float) -> str | None:
        """The stall, described, once recovery has made no progress for ``stall_s``; else None."""
        left = records_left(self.recovery)
        remaining = left or 0
        seconds = self.progress.stalled_for(in_recovery=left is not None, remaining=remaining, now=now)
        if seconds < self.stall_s:
            return None
        stuck = sorted(
            (tp for tp, left in self.recovery.active_remaining().items() if left),
            key=lambda tp: (tp.topic, tp.partition),
        )
        names = [f"{tp.topic}[{tp.partition}]" for tp in stuck]
        where = f"{', '.join(names[:6])}{', ...' if len(names) > 6 else ''}"
        return (
            f"table recovery has read no changelog record for {seconds:.0f} s with {remaining} still to read"
            f" (on {where}); {consumer_view(self.recovery, stuck[:6])}"
        )

    async def run(self) -> None:
        while self.stalled is None:
            await asyncio.sleep(CHECK_EVERY_S)
            try:
                reason = self.check(time.monotonic())
            except Exception:
                # The watch reads Faust's private state; a surprise there must not end the watch unseen.
                log.exception("the recovery watch could not read the recovery's state; it keeps watching")
                continue
            if reason is not None:
                self.give_up(reason)

    def give_up(self, reason: str) -> None:
        self.stalled = reason
        log.error("%s: stopping so the group rebalances; exit status %d", reason, EXIT_RECOVERY_STALLED)
        self.on_stalled(reason)
        # The orderly stop (streams.faust_compat.inflight) leaves the group at once; if it hangs, exit anyway: nothing
        # the worker holds is lost (its pending pairs are uncommitted, its outcomes are in the changelogs).
        timer = threading.Timer(self.hard_exit_after_s, os._exit, args=(EXIT_RECOVERY_STALLED,))
        timer.daemon = True
        timer.start()
        with contextlib.suppress(ProcessLookupError):
            os.kill(os.getpid(), signal.SIGTERM)


def consumer_view(recovery: Any, tps: list[Any]) -> str:
    """Where each stuck changelog partition stands in Faust's consumer and in aiokafka's, for the log.

    The cause of the stall is not known (module doc), so the report carries what would tell: whether
    the partition is assigned, in Faust's set of partitions it fetches, paused or "buffer full" there,
    paused or awaiting an offset reset in aiokafka, its fetch position against the recovery's offsets,
    and whether flow is on. Read-only and best effort: these are private attributes of faust-streaming
    0.15.3 and aiokafka 0.12, read from another thread, so any of them may be missing or in motion.
    """
    try:
        return _consumer_view(recovery, tps)
    # Blind on purpose: whatever these internals raise (faust's ConsumerNotStarted, a renamed attribute, a
    # set changing size under another thread), the stall report must still be made and acted on.
    except Exception as exc:  # noqa: BLE001
        return f"consumer state unavailable ({type(exc).__name__}: {exc})"


def _consumer_view(recovery: Any, tps: list[Any]) -> str:
    consumer = recovery.app.consumer
    client = consumer._thread._ensure_consumer()
    states = client._subscription.subscription.assignment
    flow = f"flow {'on' if consumer.flow_active else 'off'}"
    flow += f", app flow control {'on' if recovery.app.flow_control.is_active() else 'off'}"
    parts = [flow]
    assigned = set(consumer.assignment())
    for tp in tps:
        facts = [
            f"read up to {recovery.active_offsets.get(tp)} of {recovery.active_highwaters.get(tp)}",
            "assigned" if tp in assigned else "NOT assigned",
            "fetched" if tp in (consumer._active_partitions or ()) else "NOT among fetched partitions",
        ]
        if tp in consumer._paused_partitions:
            facts.append("paused in faust")
        if tp in consumer._buffered_partitions:
            facts.append("buffer-full in faust")
        state = states.state_value(tp)
        if state is None:
            facts.append("no aiokafka state")
        else:
            if state.paused:
                facts.append("paused in aiokafka")
            if state.awaiting_reset:
                facts.append("awaiting offset reset")
            facts.append(f"position {state.position if state.has_valid_position else 'none'}")
            facts.append(f"highwater {state.highwater}")
            facts.append("records waiting" if tp in client._fetcher._records else "no records waiting")
        parts.append(f"{tp.topic}[{tp.partition}]: {', '.join(facts)}")
    return "; ".join(parts)
