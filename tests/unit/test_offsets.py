"""The commit ledger's rule: never commit past a handed-over offset that is not finished."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from faust import types as faust_types

from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.streams.app import create_app
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.faust_compat.offsets import LedgerConsumer, OffsetLedger

TP = "pairs/0"


class Msg:
    """A message object: the ledger matches finishes by identity, as Faust hands over objects."""

    def __init__(self, offset: int) -> None:
        self.offset = offset


def test_nothing_handed_over_commits_nothing() -> None:
    assert OffsetLedger[str]().committable(TP) is None


def test_a_slow_head_holds_the_commit_however_much_finishes_after_it() -> None:
    # faust-streaming 0.15.3 committed 6 here: offset 0 still in flight, 1..5 acked, nothing committed yet.
    ledger = OffsetLedger[str]()
    msgs = [Msg(i) for i in range(6)]
    for m in msgs:
        ledger.started(TP, m.offset, m)
    for m in msgs[1:]:
        ledger.finished(TP, m.offset, m)
    assert ledger.committable(TP) == 0
    ledger.finished(TP, 0, msgs[0])
    assert ledger.committable(TP) == 6


def test_the_offset_right_after_the_commit_holds_it() -> None:
    # The off-by-one: committed 10, offset 10 in flight, 11 and 12 done. Faust committed 13.
    ledger = OffsetLedger[str]()
    msgs = {i: Msg(i) for i in (10, 11, 12)}
    for i, m in msgs.items():
        ledger.started(TP, i, m)
    ledger.finished(TP, 11, msgs[11])
    ledger.finished(TP, 12, msgs[12])
    assert ledger.committable(TP) == 10


def test_holes_in_the_log_do_not_stall_the_commit() -> None:
    # Compaction or transaction markers leave offsets that are never delivered.
    ledger = OffsetLedger[str]()
    for i in (3, 7, 8):
        m = Msg(i)
        ledger.started(TP, i, m)
        ledger.finished(TP, i, m)
    assert ledger.committable(TP) == 9


def test_a_finish_from_before_a_rebalance_is_ignored() -> None:
    ledger = OffsetLedger[str]()
    old = Msg(5)
    ledger.started(TP, 5, old)
    ledger.forget([TP])  # revoked, then assigned again: offset 5 is delivered anew
    new = Msg(5)
    ledger.started(TP, 5, new)
    assert ledger.finished(TP, 5, old) is False
    assert ledger.committable(TP) == 5
    assert ledger.finished(TP, 5, new) is True
    assert ledger.committable(TP) == 6


def test_a_finish_for_a_message_never_handed_over_is_ignored() -> None:
    ledger = OffsetLedger[str]()
    ledger.started(TP, 1, Msg(1))
    assert ledger.finished(TP, 2, Msg(2)) is False
    assert ledger.committable(TP) == 1


def test_partitions_are_independent() -> None:
    ledger = OffsetLedger[str]()
    a, b = Msg(0), Msg(0)
    ledger.started("p/0", 0, a)
    ledger.started("p/1", 0, b)
    ledger.finished("p/1", 0, b)
    assert (ledger.committable("p/0"), ledger.committable("p/1")) == (0, 1)
    assert sorted(ledger.partitions()) == ["p/0", "p/1"]
    assert ledger.in_flight("p/0") == 1


@pytest.mark.parametrize("seed", range(40))
def test_random_interleavings_never_commit_past_unfinished_work(seed: int) -> None:
    """Delivery in offset order with holes, finishes in any order, commits read at any moment."""
    rng = random.Random(seed)
    ledger = OffsetLedger[str]()
    offsets = sorted(rng.sample(range(400), 150))
    in_flight: dict[int, Msg] = {}
    finished: set[int] = set()
    delivered: list[int] = []
    last_commit = 0
    for offset in offsets:
        m = Msg(offset)
        ledger.started(TP, offset, m)
        in_flight[offset] = m
        delivered.append(offset)
        for _ in range(rng.randint(0, 3)):
            if in_flight:
                done = rng.choice(list(in_flight))
                assert ledger.finished(TP, done, in_flight.pop(done))
                finished.add(done)
        commit = ledger.committable(TP)
        if commit is not None:
            # Every delivered offset below the commit is finished, and commits never go backwards.
            assert all(o in finished for o in delivered if o < commit)
            assert commit >= last_commit
            last_commit = commit
    for offset, m in list(in_flight.items()):
        ledger.finished(TP, offset, m)
    assert ledger.committable(TP) == offsets[-1] + 1


async def test_resuming_the_flow_keeps_what_the_stream_buffers_hold(tmp_path: Path) -> None:
    # After an assignment Faust resumes the flow twice (table restore, then streams). Records fetched
    # in between sit in the agents' buffers; emptying them on the second resume left a pair pending
    # and unjudged until the next rebalance. A revocation still empties the buffers.
    wired = create_app(Settings(worker={"data_dir": tmp_path}), judge=ScriptedJudge([]), follow_control=False)
    app = wired.faust_app
    buffer: Any = app.FlowControlQueue(maxsize=8, clear_on_resume=True)  # what agents' channels use
    app.flow_control.suspend()
    buffer.put_nowait("fetched between the two resumes")
    app.flow_control.resume()
    assert buffer.qsize() == 1
    app.flow_control.suspend()
    app.flow_control.clear()  # Faust's explicit clear when partitions are revoked
    assert buffer.qsize() == 0
    app.flow_control.resume()


def test_the_ledger_tracks_the_agents_topics_and_never_a_changelog(tmp_path: Path) -> None:
    # Changelog records go to the table manager, never to an agent: tracked, they would stay pending for
    # ever, the group would commit changelog offsets, and a seek to those moved a changelog partition
    # away from where table recovery was reading it (recovery then hung).
    wired = create_app(Settings(worker={"data_dir": tmp_path}), judge=ScriptedJudge([]), follow_control=False)
    app = wired.faust_app
    pairs = wired.settings.topics.name("pairs")
    changelogs = sorted(app.tables.changelog_topics)
    assert changelogs  # the outcome tables have changelogs
    app.topics.acking_topics.update([pairs, *changelogs])  # as Faust marks every subscribed topic
    consumer = app.consumer
    assert isinstance(consumer, LedgerConsumer)
    assert consumer._tracks(pairs)
    assert not any(consumer._tracks(name) for name in changelogs)


def test_records_fetched_but_never_handed_over_hold_the_commit() -> None:
    # bench/rebalance_loss.py --judge llm: aiokafka returned pairs[0] 30..334 while the partition was
    # paused, Faust dropped them, 335 was handed over first and finished, and the group committed 335
    # (from 30): 87 pairs never judged by anyone. Fetched records are pending until handed over.
    ledger = OffsetLedger[str]()
    ledger.fetched(TP, range(30, 335))  # dropped by Faust: never handed over
    ledger.fetched(TP, [335])
    head = Msg(335)
    ledger.started(TP, 335, head)
    ledger.finished(TP, 335, head)
    assert ledger.committable(TP) == 30
    # The seek to the committed offset fetches them again; handed over and finished, the commit moves on.
    ledger.fetched(TP, range(30, 336))
    for offset in range(30, 336):
        m = Msg(offset)
        ledger.started(TP, offset, m)
        assert ledger.committable(TP) == offset
        ledger.finished(TP, offset, m)
    assert ledger.committable(TP) == 336


def test_a_second_fetch_of_an_offset_in_flight_keeps_its_message() -> None:
    # A seek back fetches an offset whose message an agent still holds: its finish still counts.
    ledger = OffsetLedger[str]()
    m = Msg(7)
    ledger.fetched(TP, [7])
    ledger.started(TP, 7, m)
    ledger.fetched(TP, [7, 8])
    assert ledger.finished(TP, 7, m) is True
    assert ledger.committable(TP) == 8  # 8 fetched, not handed over yet


def _ledger_consumer(tmp_path: Path) -> tuple[Any, LedgerConsumer, Any, Any]:
    wired = create_app(Settings(worker={"data_dir": tmp_path}), judge=ScriptedJudge([]), follow_control=False)
    app = wired.faust_app
    pairs = wired.settings.topics.name("pairs")
    changelog = sorted(app.tables.changelog_topics)[0]
    app.topics.acking_topics.update([pairs, changelog])
    consumer = app.consumer
    assert isinstance(consumer, LedgerConsumer)
    return app, consumer, faust_types.TP(pairs, 0), faust_types.TP(changelog, 0)


class _Record:
    def __init__(self, offset: int) -> None:
        self.offset = offset


async def test_aiokafka_never_sees_the_live_set_of_active_partitions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Faust hands its live set of active partitions to aiokafka, which waits for records on another
    # thread and reads an empty set as "every assigned partition". Table recovery paused its last
    # changelog partition during such a wait: aiokafka returned the paused stream partition's records,
    # moved its position past them, and Faust dropped them. The consumer passes a snapshot.
    _, consumer, stream_tp, changelog_tp = _ledger_consumer(tmp_path)
    live = {changelog_tp}
    seen: list[Any] = []

    async def aiokafka_getmany(self: Any, active_partitions: Any, timeout: float) -> Any:
        seen.append(active_partitions)
        live.clear()  # recovery pauses the changelog partition while aiokafka waits
        buffered = {stream_tp: [_Record(o) for o in range(30, 335)], changelog_tp: []}
        # aiokafka's Fetcher.fetched_records: "if partitions and tp not in partitions: continue"
        return {tp: recs for tp, recs in buffered.items() if not active_partitions or tp in active_partitions}

    base = LedgerConsumer.__mro__[2]  # faust.transport.consumer.ThreadDelegateConsumer
    assert "_getmany" in vars(base)
    monkeypatch.setattr(base, "_getmany", aiokafka_getmany)
    records = await consumer._getmany(live, 1.0)
    assert seen[0] is not live
    assert stream_tp not in records
    assert consumer.ledger.committable(stream_tp) is None
    # Nothing active: nothing is asked of aiokafka at all.
    assert await consumer._getmany(set(), 1.0) == {}
    assert len(seen) == 1


async def test_a_fetched_record_faust_drops_holds_the_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, consumer, stream_tp, _ = _ledger_consumer(tmp_path)

    async def aiokafka_getmany(self: Any, active_partitions: Any, timeout: float) -> Any:
        return {stream_tp: [_Record(o) for o in range(5, 9)]}

    monkeypatch.setattr(LedgerConsumer.__mro__[2], "_getmany", aiokafka_getmany)
    await consumer._getmany({stream_tp}, 1.0)
    last = Msg(8)  # 5..7 dropped (say the flow stopped mid-batch), 8 handed over and finished
    consumer.ledger.started(stream_tp, 8, last)
    consumer.ledger.finished(stream_tp, 8, last)
    assert consumer.ledger.committable(stream_tp) == 5


async def test_stream_partitions_fetch_only_after_the_seek_to_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Faust's recovery resumes the stream partitions and then seeks them to their committed offsets. In
    # between the fetcher delivered records from wherever aiokafka's position was. A new assignment's
    # stream partitions are held until perform_seek has sought them; changelogs are never held.
    _, consumer, stream_tp, changelog_tp = _ledger_consumer(tmp_path)
    consumer._seek_pending = True  # as on_partitions_assigned leaves it
    active = consumer._get_active_partitions()
    active.clear()
    order: list[str] = []

    async def seek_to_committed(self: Any) -> Any:
        order.append(f"seek, active={sorted(str(tp.topic) for tp in self._get_active_partitions())}")
        return {stream_tp: 12}

    monkeypatch.setattr(LedgerConsumer.__mro__[2], "seek_to_committed", seek_to_committed)
    monkeypatch.setattr(LedgerConsumer, "assignment", lambda self: {stream_tp, changelog_tp})
    consumer.resume_partitions({stream_tp, changelog_tp})
    assert active == {changelog_tp}
    await consumer.perform_seek()
    assert order == [f"seek, active={[changelog_tp.topic]}"]
    assert active == {stream_tp, changelog_tp}
    # Once sought, later resumes (a flow-control resume, a recovery of the same assignment) go through.
    consumer.pause_partitions({stream_tp})
    consumer.resume_partitions({stream_tp})
    assert stream_tp in active
