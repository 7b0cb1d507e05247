"""The Faust agents, wired by ``create_app``, driven through ``agent.test_context()``.

Faust has no in-memory broker, so outgoing sends are captured by replacing each output topic's
``send``; everything else (agent concurrency, the stream, the handlers, the core) is the real code.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pairjudge.agents.judge import JudgeRequest
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.schemas import (
    DEFAULT_TIEBREAK_WEIGHTS,
    CandidatePair,
    DeadLetter,
    PairVerdict,
    ReviewRequest,
    TieBreakRequest,
)
from pairjudge.schemas.audit import DecisionRecord
from pairjudge.streams.app import PairjudgeApp, create_app
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.topics import partition_of
from pairjudge.streams.telemetry.tracing import Telemetry, make_tracer_provider
from pairjudge.streams.worker.pipeline import Origin, Outgoing
from pairjudge.streams.worker.tables import put
from tests.unit.factories import make_pair, tiebreak_reply, tone_reply


@dataclass
class Captured:
    sent: list[tuple[str, bytes, bytes, dict[str, bytes]]] = field(default_factory=list)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [json.loads(value) for k, _, value, _ in self.sent if k == kind]


def _capture(wired: PairjudgeApp) -> Captured:
    captured = Captured()
    for kind, topic in wired.topics.items():

        async def send(*, key: bytes, value: bytes, headers: Any = None, _kind: str = kind, **_: Any) -> Any:
            captured.sent.append((_kind, key, value, dict(headers or [])))
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            fut.set_result(None)
            return fut

        topic.send = send  # type: ignore[method-assign,assignment]
    for stage, table in wired.outcomes.tables.items():
        # The outcome tables' changelog writes are outgoing sends too: captured, and acked at once.
        def send_changelog(partition: int, key: bytes, value: bytes | None, _stage: str = stage, **_: Any) -> Any:
            captured.sent.append((f"changelog-{_stage}", key, value or b"", {}))
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            fut.set_result(None)
            return fut

        table.send_changelog = send_changelog
    if wired.audit is not None:
        for name, table in (("audit-join", wired.audit.join_table), ("audit-windows", wired.audit.windows_table)):

            def audit_changelog(partition: int, key: bytes, value: bytes | None, _name: str = name, **_: Any) -> Any:
                captured.sent.append((f"changelog-{_name}", key, value or b"", {}))
                fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                fut.set_result(None)
                return fut

            table.send_changelog = audit_changelog
    return captured


async def _delivered(wired: PairjudgeApp) -> None:
    """What the worker's timers would do next: the deliveries behind the judging finish, the join flushes."""
    assert wired.delivery is not None
    assert wired.audit is not None
    await wired.delivery.settle()
    await wired.audit.flush()


def wired_partitions() -> int:
    """The partition count ``_wire``'s settings give every topic and table."""
    return Settings().kafka.partitions


def _wire(tmp_path: Path, reply: Callable[[JudgeRequest], str]) -> tuple[PairjudgeApp, InMemorySpanExporter]:
    settings = Settings(worker={"data_dir": tmp_path, "concurrency": 4})
    exporter = InMemorySpanExporter()
    telemetry = Telemetry(settings.telemetry, tracer_provider=make_tracer_provider(settings.telemetry, exporter))
    return create_app(settings, judge=ScriptedJudge(reply), telemetry=telemetry, follow_control=False), exporter


async def test_a_consistent_pair_becomes_a_verdict_with_its_trace(tmp_path: Path) -> None:
    pair = make_pair()
    wired, exporter = _wire(tmp_path, lambda req: tone_reply(winner="A" if req.order == "AB" else "B"))
    captured = _capture(wired)
    async with wired.judge_agent.test_context() as agent:
        await agent.put(pair.model_dump_json().encode(), key=pair.pair_id.encode())
    verdicts = captured.of("verdicts")
    assert len(verdicts) == 1
    verdict = PairVerdict.model_validate(verdicts[0])
    assert verdict.winner == pair.candidates[0].candidate_id
    assert verdict.decided_by == "primary"
    wired.telemetry.tracer_provider.force_flush()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    stage = spans["pairjudge.primary"]
    assert verdict.trace_id == format(stage.context.trace_id, "032x")
    # The outgoing traceparent continues the same trace.
    headers = next(h for kind, _, _, h in captured.sent if kind == "verdicts")
    assert headers["traceparent"].decode().split("-")[1] == verdict.trace_id


async def test_a_flip_goes_to_tiebreak_and_the_tiebreak_agent_decides(tmp_path: Path) -> None:
    pair = make_pair()

    def reply(req: JudgeRequest) -> str:
        if req.template == "tiebreak":
            # Both tie-break orders prefer the pair's second candidate on every criterion.
            side = "B" if req.order == "AB" else "A"
            return tiebreak_reply({c.name: side for c in DEFAULT_TIEBREAK_WEIGHTS.criteria})
        return tone_reply(winner="A")  # position A always wins: a flip

    wired, _ = _wire(tmp_path, reply)
    captured = _capture(wired)
    async with wired.judge_agent.test_context() as agent:
        await agent.put(pair.model_dump_json().encode(), key=pair.pair_id.encode())
    requests = captured.of("tiebreak")
    assert [r["reason"] for r in requests] == ["position_inconsistent"]
    TieBreakRequest.model_validate(requests[0])
    async with wired.tiebreak_agent.test_context() as agent:
        await agent.put(json.dumps(requests[0]).encode(), key=pair.pair_id.encode())
    verdict = PairVerdict.model_validate(captured.of("verdicts")[0])
    assert verdict.decided_by == "tiebreak"
    assert verdict.winner == pair.candidates[1].candidate_id
    assert verdict.tiebreak_reason == "position_inconsistent"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"\xff\xfe not utf-8", "not_utf8"),
        (b'{"pair_id": "p-1", "task": {"prompt": "x"', "malformed_json"),
        (b"[1, 2, 3]", "malformed_json"),
        (b"", "empty_event"),
    ],
)
async def test_malformed_bytes_are_dead_lettered_with_the_original(tmp_path: Path, raw: bytes, reason: str) -> None:
    wired, _ = _wire(tmp_path, lambda req: tone_reply())
    captured = _capture(wired)
    async with wired.judge_agent.test_context() as agent:
        await agent.put(raw, key=b"k-1")
        # The agent keeps running: a good pair after the bad one is still judged.
        pair = make_pair()
        await agent.put(pair.model_dump_json().encode(), key=pair.pair_id.encode())
    letters = [DeadLetter.model_validate(d) for d in captured.of("deadletter")]
    assert [(d.reason, d.stage, d.original) for d in letters] == [(reason, "decode", raw)]
    assert len(captured.of("verdicts")) + len(captured.of("tiebreak")) + len(captured.of("review")) == 1


async def test_a_judge_that_stays_invalid_sends_the_pair_to_review_not_a_tie(tmp_path: Path) -> None:
    pair = make_pair()
    wired, _ = _wire(tmp_path, lambda req: '{"winner": "A", "confidence": 0.9}')  # off-schema, every time
    captured = _capture(wired)
    async with wired.judge_agent.test_context() as agent:
        await agent.put(pair.model_dump_json().encode(), key=pair.pair_id.encode())
    reviews = [ReviewRequest.model_validate(r) for r in captured.of("review")]
    assert [r.reason for r in reviews] == ["ordering_invalid"]
    assert captured.of("verdicts") == []
    assert captured.of("tiebreak") == []
    assert all(o.retries == 2 for o in reviews[0].orderings)


async def test_a_redelivered_pair_is_neither_judged_nor_published_again(tmp_path: Path) -> None:
    """docs/design.md §2.12: a second delivery of a pair (a rebalance, a crash, a producer retry) whose outcome
    the broker has sends nothing, even with a judge that would now answer differently; one that comes before
    the published mark (a crash in between) re-sends the recorded outcome, byte for byte."""
    # test_context() hands every event in on partition 0: a pair whose join entry is there too, so its record
    # goes to the join on this worker (another pair's goes through the decisions topic, as the next test shows).
    pair = make_pair(pair_id="pair-0001-local")
    assert partition_of(pair.pair_id.encode(), wired_partitions()) == 0
    calls: list[str] = []

    def fickle(req: JudgeRequest) -> str:
        calls.append(req.template)
        # The first pair of calls favours the first candidate; any later call the second one.
        first = len(calls) <= 2
        favours_first = (req.order == "AB") == first
        return tone_reply(winner="A" if favours_first else "B")

    wired, exporter = _wire(tmp_path, fickle)
    captured = _capture(wired)
    raw = pair.model_dump_json().encode()
    async with wired.judge_agent.test_context() as agent:
        await agent.put(raw, key=pair.pair_id.encode())
        await _delivered(wired)
        await agent.put(raw, key=pair.pair_id.encode())
        await _delivered(wired)
    # Recorded once, on the primary stage's changelog, before it was published; the decision's audit record
    # goes to the join on this worker (not the decisions topic), whose flush sends the series its delta and
    # and the scoreboard their batches and writes the pair's join entry; then the outcome is marked published,
    # and the redelivery sends nothing.
    kinds = [kind for kind, _, _, _ in captured.sent]
    assert kinds == [
        "changelog-primary",
        "verdicts",
        "observations",
        "score-events",  # the factory's pair is an experiment's
        "changelog-audit-join",
        "changelog-primary",
    ]
    recorded, mark = (value for kind, _, value, _ in captured.sent if kind == "changelog-primary")
    assert mark.endswith(b":!published")
    assert len(mark) < len(recorded)
    assert len(calls) == 2, f"the judge was asked again on redelivery: {calls}"

    # The mark lost (a crash between the send and the mark): the recorded bytes are sent again, unjudged.
    first_verdict = next(value for kind, _, value, _ in captured.sent if kind == "verdicts")
    put(wired.outcomes.tables["primary"].data, 0, pair.pair_id.encode(), recorded)
    async with wired.judge_agent.test_context() as agent:
        await agent.put(raw, key=pair.pair_id.encode())
        await _delivered(wired)
    verdicts = [value for kind, _, value, _ in captured.sent if kind == "verdicts"]
    assert verdicts == [first_verdict, first_verdict], "the redelivery published a different outcome"
    assert PairVerdict.model_validate_json(verdicts[0]).winner == pair.candidates[0].candidate_id
    assert len(calls) == 2, f"the judge was asked again on redelivery: {calls}"
    wired.telemetry.tracer_provider.force_flush()
    replayed = [s for s in exporter.get_finished_spans() if (s.attributes or {}).get("pairjudge.replayed")]
    assert [(s.attributes or {}).get("pairjudge.already_published") for s in replayed] == [True, False]


async def test_a_record_whose_join_entry_another_worker_holds_goes_through_the_decisions_topic(
    tmp_path: Path,
) -> None:
    """A pair its producer keyed so that it lands on another partition than its pair id's (here every input is on
    partition 0, and this pair id hashes to 1): the join entry is not this worker's to write, so the record goes
    through the decisions topic, and the outcome is marked published at once."""
    pair = make_pair()
    assert partition_of(pair.pair_id.encode(), wired_partitions()) != 0
    wired, _ = _wire(tmp_path, lambda req: tone_reply(winner="A" if req.order == "AB" else "B"))
    captured = _capture(wired)
    async with wired.judge_agent.test_context() as agent:
        await agent.put(pair.model_dump_json().encode(), key=b"not-its-pair-id")
        assert wired.delivery is not None
        await wired.delivery.settle()
    kinds = [kind for kind, _, _, _ in captured.sent]
    assert kinds == ["changelog-primary", "verdicts", "decisions", "changelog-primary"]
    (record,) = (DecisionRecord.model_validate(r) for r in captured.of("decisions"))
    assert record.pair_id == pair.pair_id


async def test_an_input_whose_delivery_fails_is_never_done(tmp_path: Path) -> None:
    """An input whose outcome could not be delivered stops the worker and is never marked done: the commit
    ledger keeps it pending (whatever Faust's own ack says: its acks never commit), and a restart judges it
    again."""
    from aiokafka.errors import KafkaTimeoutError

    pair = make_pair()
    wired, _ = _wire(tmp_path, lambda req: tone_reply(winner="A" if req.order == "AB" else "B"))
    _capture(wired)

    async def failing_send(**_: Any) -> Any:
        raise KafkaTimeoutError("the broker went away")

    wired.topics["verdicts"].send = failing_send  # type: ignore[method-assign]
    crashed: list[BaseException] = []

    async def crash(reason: BaseException) -> None:
        crashed.append(reason)

    wired.faust_app.crash = crash  # type: ignore[method-assign]
    done: list[Any] = []
    wired.faust_app.consumer.done = done.append  # type: ignore[attr-defined]
    async with wired.judge_agent.test_context() as agent:
        await agent.put(pair.model_dump_json().encode(), key=pair.pair_id.encode(), wait=False)
        for _ in range(200):
            if crashed:
                break
            await asyncio.sleep(0.01)
        assert wired.delivery is not None
        await wired.delivery.settle()
    assert [type(c).__name__ for c in crashed] == ["KafkaTimeoutError"]
    assert done == [], "the input was marked done although its outcome was never delivered"


async def test_two_deliveries_of_one_pair_in_flight_at_once_are_judged_once(tmp_path: Path) -> None:
    """A producer retry (or a re-published tie-break request) can put the same pair in two actors at
    once; the second waits for the first and publishes its outcome instead of asking the judge again."""
    pair = make_pair()
    calls: list[str] = []
    release = asyncio.Event()

    async def slow_first(req: JudgeRequest) -> None:
        calls.append(req.order)
        if len(calls) <= 2:
            await release.wait()

    def fickle(req: JudgeRequest) -> str:
        favours_first = (req.order == "AB") == (len(calls) <= 2)
        return tone_reply(winner="A" if favours_first else "B")

    settings = Settings(worker={"data_dir": tmp_path, "concurrency": 4})
    telemetry = Telemetry(settings.telemetry, tracer_provider=make_tracer_provider(settings.telemetry))
    judge = ScriptedJudge(fickle, on_request=slow_first)
    wired = create_app(settings, judge=judge, telemetry=telemetry, follow_control=False)
    captured = _capture(wired)
    raw = pair.model_dump_json().encode()
    async with wired.judge_agent.test_context() as agent:
        await agent.put(raw, key=pair.pair_id.encode(), wait=False)
        await agent.put(raw, key=pair.pair_id.encode(), wait=False)
        for _ in range(100):
            if len(calls) >= 2:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # the second delivery is in an actor now, waiting
        release.set()
        for _ in range(200):
            if len([k for k, *_ in captured.sent if k == "verdicts"]) >= 2:
                break
            await asyncio.sleep(0.01)
    verdicts = [value for kind, _, value, _ in captured.sent if kind == "verdicts"]
    assert len(verdicts) == 2
    assert verdicts[0] == verdicts[1]
    assert len(calls) == 2, f"the judge was asked {len(calls)} times"


async def test_flushes_of_the_join_run_one_at_a_time_and_what_one_holds_stays_readable(tmp_path: Path) -> None:
    """The timer, a full buffer and a hand-over may all ask the join to flush. While one flush waits for the
    broker, the entries it holds are still what the join reads (a label arriving then joins them), and a
    second flush waits its turn instead of taking that place."""
    wired, _ = _wire(tmp_path, lambda req: tone_reply(winner="A"))
    _capture(wired)
    audit = wired.audit
    assert audit is not None
    release = asyncio.Event()
    published: list[int] = []

    async def slow_publish(messages: list[Any]) -> None:
        published.append(len(messages))
        await release.wait()

    audit._publish = slow_publish
    first, second = (make_pair(pair_id=f"pair-000{i}-local") for i in (1, 2))
    origin = Origin(topic="pairjudge.pairs", partition=0, offset=0)
    records = [_record_of(p) for p in (first, second)]
    assert await audit.join_record(_outgoing(records[0]), origin, None) is True
    flushing = asyncio.ensure_future(audit.flush())
    await asyncio.sleep(0.01)
    assert published == [1]  # the first flush is with the broker
    assert await audit.join_record(_outgoing(records[1]), origin, None) is True
    waiting = asyncio.ensure_future(audit.flush())
    await asyncio.sleep(0.01)
    assert published == [1], "a second flush started while the first still held its entries"
    # The first flush's entry is read from it, not from the table it has not reached yet.
    held = audit._join_entry(first.pair_id.encode())
    assert held is not None
    assert b'"stages_counted":["primary"]' in held
    release.set()
    assert await flushing == 1
    assert await waiting == 1
    assert published == [1, 1]


def _record_of(pair: CandidatePair) -> DecisionRecord:
    return DecisionRecord.model_validate(
        {
            "pair_id": pair.pair_id,
            "series": {"judge_provider": "p", "judge_model": "m", "prompt_template_hash": "h", "rubric": "tone_style"},
            "stage": "primary",
            "outcome": "verdict",
            "auto_decided": True,
            "candidates": [c.candidate_id for c in pair.candidates],
            "judge_winner": pair.candidates[0].candidate_id,
            "confidence": 0.9,
        }
    )


def _outgoing(record: DecisionRecord) -> Outgoing:
    return Outgoing("decisions", record.pair_id.encode(), record.model_dump_json().encode(), [], event=record)
