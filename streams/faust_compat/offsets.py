"""Commit only what is done: the offsets a worker may commit, tracked by the project, not by Faust.

faust-streaming 0.15.3 decides the committable offset in ``Consumer._new_offset`` from the list of
acked offsets alone. Its guard against a gap at the head of that list is off by one, and it is
skipped while nothing has been committed yet (faust-streaming#606; the fix proposed in #707 is not
released). With concurrency above 1 and uneven judge latency, a later pair finishing first lets the
group commit past a pair that is still being judged, and a crash then loses it.

The rule kept here needs no gap arithmetic: a record is *pending* from the moment aiokafka hands it to
Faust's fetcher (``fetched``), through the consumer handing it to the conductor (before any channel
buffer), until its stage has published and the broker has acknowledged the outputs. aiokafka returns
the records of a partition in offset order from its fetch position, so every offset below the lowest
pending one was either finished or never fetched (a hole in the log). The committable offset is
therefore the lowest pending offset, or one past the highest finished offset when nothing is pending.
Pending entries remember the message object, so an ack for a message of an earlier assignment (a stale
actor finishing after a rebalance) never clears the new one.

Pending from the fetch, not only from the hand-over, because Faust drops fetched records without
delivering them (a partition paused, the flow stopped or the generation changed while a batch is
being iterated) after aiokafka's position has moved past them. Counting from the hand-over, the next
record delivered looked like the head of the partition: a worker assigned pairs[0] at committed offset
0 was handed 212 first, committed 212, and offsets 125..211 were never judged by anyone
(bench/rebalance_loss.py --judge llm, 87 pairs lost). See ``LedgerConsumer._getmany``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from faust.transport.drivers import aiokafka as _faust_aiokafka
from mode.utils.queues import FlowControlEvent

K = TypeVar("K")

#: The pending entry of a record aiokafka returned that the consumer has not handed over (yet): no
#: message is ever this object, so only a hand-over (``started``) replaces it.
_FETCHED: object = object()


@dataclass
class _PartitionState:
    #: offset -> the message object handed over; identity matters (see module docstring).
    pending: dict[int, object] = field(default_factory=dict)
    #: Highest offset finished since the partition was (re)assigned; None before the first.
    finished_high: int | None = None


class OffsetLedger(Generic[K]):
    """Per partition: which handed-over offsets are still in flight, and how far it is safe to commit.

    Pure bookkeeping (no Faust, no Kafka), so the rule is unit-tested on its own. ``K`` is the
    partition key (a Faust ``TP`` in the worker).
    """

    def __init__(self) -> None:
        self._parts: dict[K, _PartitionState] = {}

    def fetched(self, tp: K, offsets: Iterable[int]) -> None:
        """aiokafka returned the records at ``offsets`` to the consumer: pending until handed over and finished.

        A record already pending keeps its entry (a message still in flight there is not disowned by a
        second fetch of its offset after a seek); one handed over again replaces it (``started``).
        """
        pending = self._parts.setdefault(tp, _PartitionState()).pending
        for offset in offsets:
            pending.setdefault(offset, _FETCHED)

    def started(self, tp: K, offset: int, message: object) -> None:
        """The consumer handed ``message`` (at ``offset``) over for processing."""
        self._parts.setdefault(tp, _PartitionState()).pending[offset] = message

    def finished(self, tp: K, offset: int, message: object) -> bool:
        """The stage is done with ``message``. Returns False (and changes nothing) for a message this
        ledger is not tracking: one from before a rebalance, or one never handed over."""
        state = self._parts.get(tp)
        if state is None or state.pending.get(offset) is not message:
            return False
        del state.pending[offset]
        if state.finished_high is None or offset > state.finished_high:
            state.finished_high = offset
        return True

    def committable(self, tp: K) -> int | None:
        """The offset to commit for ``tp`` (Kafka's "next offset to read"), or None if nothing is done."""
        state = self._parts.get(tp)
        if state is None:
            return None
        if state.pending:
            return min(state.pending)
        return None if state.finished_high is None else state.finished_high + 1

    def in_flight(self, tp: K) -> int:
        state = self._parts.get(tp)
        return 0 if state is None else len(state.pending)

    def partitions(self) -> Iterator[K]:
        return iter(list(self._parts))

    def forget(self, tps: Iterable[K]) -> None:
        """The partitions were revoked: whatever is still in flight there belongs to no one now."""
        for tp in tps:
            self._parts.pop(tp, None)


class BuffersKeptOnResume(FlowControlEvent):
    """Faust's flow control, except that resuming the flow does not empty the stream buffers.

    Faust empties every agent's buffer when the flow resumes after a rebalance. With changelog-backed
    tables the flow is resumed twice after an assignment: once to restore the tables, then again
    after the stream partitions were sought to their committed offsets. A record of the new
    assignment fetched in between is emptied by the second resume, while Faust's read-offset check
    drops its second fetch as already read: pairs stuck unjudged (and pending in the ledger, so
    never committed past) until the next rebalance. In bench/rebalance_loss.py a worker judged the
    first two records of three partitions and skipped the next 24 of each (49 pairs). Kept, they
    are judged; records of an earlier assignment left in a buffer are skipped by the stream anyway
    (their generation is stale), and the explicit clear at a revocation still empties everything.
    """

    def __init__(self) -> None:
        super().__init__()
        self._resuming = False

    def resume(self) -> None:
        self._resuming = True
        try:
            super().resume()
        finally:
            self._resuming = False

    def clear(self) -> None:
        if not self._resuming:
            super().clear()


def install_commit_ledger(app: Any) -> None:
    """Make ``app`` (a ``faust.App`` on the aiokafka driver) commit through an ``OffsetLedger``.

    Must be called before anything touches ``app.transport`` (topics, agents, tables): the consumer
    is built from the transport's ``Consumer`` class, and the stream buffers register with the flow
    control that exists when they are made.
    """
    app.transport = _LedgerTransport(app.conf.broker_consumer, app)
    app.flow_control = BuffersKeptOnResume()


def mark_done(app: Any, message: Any) -> None:
    """Tell ``app``'s commit ledger that ``message`` is finished (its outputs are on the broker)."""
    app.consumer.done(message)


class LedgerConsumer(_faust_aiokafka.Consumer):
    """Faust's aiokafka consumer, with commits decided by an ``OffsetLedger``.

    A message is finished only when the agent says so (``done``), never by Faust's ack: Faust also
    acks messages it *skips* without processing (a record fetched before a rebalance, or taken while
    flow is suspended), and counting those as done once let the commit jump over a partition's
    unprocessed head after a short reassignment (seen in bench/rebalance_loss.py --judge llm).
    Everything else (fetching, acks for Faust's own shutdown bookkeeping, commit scheduling every
    ``broker_commit_every`` acks or ``broker_commit_interval`` seconds, flushing the producer before
    a commit) stays Faust's.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ledger: OffsetLedger[Any] = OffsetLedger()
        #: True from a revocation to the end of the next assignment: no commits then (``_commit_tps``).
        self._rebalancing = False
        #: True from an assignment until its stream partitions were sought (``resume_partitions``).
        self._seek_pending = False
        #: Stream partitions whose resumption waits for that seek.
        self._held: set[Any] = set()
        deliver = self.callback

        async def track_then_deliver(message: Any) -> None:
            # Tracked before the conductor may await (flow control, full buffers): from here on the
            # offset is pending, whether it sits in a buffer or in an agent. A record of an earlier
            # generation is never processed (the stream skips it), so it is not tracked either.
            if message.generation_id == self.app.consumer_generation_id and self._tracks(message.topic):
                self.ledger.started(message.tp, message.offset, message)
            await deliver(message)

        self.callback = track_then_deliver

    def _tracks(self, topic: str) -> bool:
        """True for the topics the agents process; never for the tables' changelogs.

        Changelog records go to the table manager, never to an agent, so they would stay pending for
        ever: the group would then commit changelog offsets, and a later seek to committed offsets
        moved a newly assigned changelog partition away from where table recovery was reading it
        (recovery then waited for events that never came, "No event received for active tp", and the
        worker judged nothing until the next rebalance, in churn runs of bench/rebalance_loss.py).
        """
        return self.app.topics.acks_enabled_for(topic) and topic not in self.app.tables.changelog_topics

    async def perform_seek(self) -> None:
        """Seek every partition to its committed offset, including those committed at 0 or not at all;
        then let the stream partitions held by ``resume_partitions`` fetch again.

        aiokafka's ``seek_to_committed`` seeks only when the committed offset is above 0, so a partition
        committed at 0, or never, kept whatever fetch position the client had. After a reassignment that
        was seen to be ahead of the committed offset (a tie-break partition fetched from 36 with nothing
        committed past 0, in bench/rebalance_loss.py --judge llm), and the offsets in between were never
        delivered, so their pairs were lost once later ones finished. Here those partitions are sought
        explicitly to the start of their log, on the consumer's thread (``seek_wait``): a seek from the
        app's thread empties aiokafka's fetch buffer while that thread may be reading it.
        """
        held, self._held = self._held, set()
        try:
            await super().perform_seek()
            unset = [tp for tp in self.assignment() if self._tracks(tp.topic) and not self._committed_offset.get(tp)]
            if unset:
                earliest = await self.earliest_offsets(*unset)
                await self.seek_wait({tp: max(0, earliest.get(tp) or 0) for tp in unset})
        finally:
            # A revocation meanwhile pauses everything and the next assignment holds its own partitions.
            if held and not self._rebalancing:
                self._seek_pending = False
                super().resume_partitions(held & self.assignment())

    def resume_partitions(self, tps: Iterable[Any]) -> None:
        """Resume fetching, except a new assignment's stream partitions before they were sought.

        Faust's recovery resumes the stream partitions, then seeks them to their committed offsets
        (``Recovery._resume_streams``). In between the fetcher hands over records from wherever aiokafka's
        position is, which after an assignment was seen far past the committed offset (aiokafka had
        returned the records of paused partitions, which Faust dropped: ``_getmany``; one was handed over
        and committed during the seek). Records of a batch taken before the seek and delivered after it
        would also move Faust's read offset (``Consumer._drain_messages``) past the records the seek
        fetches again, which Faust would drop as already read. Held here, those partitions are resumed by
        ``perform_seek`` once they are sought.
        """
        tps = list(tps)
        if self._seek_pending:
            hold = {tp for tp in tps if not self._is_changelog_tp(tp)}
            self._held.update(hold)
            tps = [tp for tp in tps if tp not in hold]
        super().resume_partitions(tps)

    async def _getmany(self, active_partitions: Any, timeout: float) -> Any:
        """Fetch the records of the partitions active now; each is pending in the ledger from here.

        Faust passes its live set of active partitions, which it keeps changing while aiokafka waits for
        records on the consumer's thread; aiokafka reads an empty set as "every assigned partition". When
        table recovery paused the last changelog partition during that wait, aiokafka returned the
        records of the still-paused stream partitions and moved its position past them, and Faust dropped
        them (not active). The next records handed over were far past the committed offset: pairs[0] was
        fetched from 30 to 334 and dropped, 335 was judged and committed (bench/rebalance_loss.py --judge
        llm). A snapshot taken here, never empty, keeps aiokafka to the partitions that were active; and
        every record returned is pending (``OffsetLedger.fetched``), so a record Faust drops for any other
        reason (the flow stopped or the generation changed mid-batch) still holds the commit below it.
        """
        if active_partitions is not None:
            active_partitions = frozenset(active_partitions)
            if not active_partitions:
                return {}
        records = await super()._getmany(active_partitions, timeout)
        for tp, batch in records.items():
            if batch and self._tracks(tp.topic):
                self.ledger.fetched(tp, (record.offset for record in batch))
        return records

    def done(self, message: Any) -> None:
        """The agent has finished ``message``: its outputs are on the broker."""
        self.ledger.finished(message.tp, message.offset, message)

    def ack(self, message: Any) -> bool:
        acked: bool = super().ack(message)
        # Faust's own acked lists are no longer read (see _new_offset); keep them from growing.
        self._acked.pop(message.tp, None)
        self._acked_index.pop(message.tp, None)
        return acked

    def _new_offset(self, tp: Any) -> int | None:
        return self.ledger.committable(tp)

    def _filter_tps_with_pending_acks(self, topics: Any = None) -> Iterator[Any]:
        for tp in self.ledger.partitions():
            if topics is None or tp in topics or tp.topic in topics:
                yield tp

    async def _commit_tps(self, tps: Any, start_new_transaction: bool) -> bool:
        # No commits between a revocation and the next assignment. Faust commits while it waits for
        # in-flight events during a revocation (``wait_empty``); the group still accepts this member's
        # commits then, for any partition, but what this worker tracked belongs to an assignment that
        # is over. A commit of 245 on a partition whose new owner was still judging offset 74 was seen
        # in exactly that window (bench/rebalance_loss.py --judge llm); the new owner re-reads from the
        # last commit instead, and replays what was recorded (streams.worker.published).
        if self._rebalancing:
            return False
        result: bool = await super()._commit_tps(tps, start_new_transaction)
        return result

    async def on_partitions_revoked(self, revoked: set[Any]) -> None:
        self._rebalancing = True
        self._held.clear()
        self.ledger.forget(list(self.ledger.partitions()))
        await super().on_partitions_revoked(revoked)

    async def on_partitions_assigned(self, assigned: set[Any], generation_id: int = 0) -> None:
        # Anything tracked since the revocation was delivered while flow was suspended, so the stream
        # skipped it and it will be fetched again from the committed offset. Nothing of the new
        # generation has been fetched yet: fetching resumes after this callback. Its stream partitions
        # fetch only once they are sought to their committed offsets (resume_partitions).
        self.ledger.forget(list(self.ledger.partitions()))
        self._held.clear()
        self._seek_pending = True
        try:
            await super().on_partitions_assigned(assigned, generation_id)
        finally:
            self._rebalancing = False


class _LedgerTransport(_faust_aiokafka.Transport):
    Consumer = LedgerConsumer
