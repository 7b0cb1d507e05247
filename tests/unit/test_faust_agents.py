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

from agents.judge import JudgeRequest
from agents.scripted import ScriptedJudge
from schemas import DEFAULT_TIEBREAK_WEIGHTS, DeadLetter, PairVerdict, ReviewRequest, TieBreakRequest
from streams.app import PairjudgeApp, create_app
from streams.settings import Settings
from streams.telemetry import Telemetry, make_tracer_provider
from tests.unit.factories import make_pair, order_of, tiebreak_reply, tone_reply


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
    return captured


def _wire(tmp_path: Path, reply: Callable[[JudgeRequest], str]) -> tuple[PairjudgeApp, InMemorySpanExporter]:
    settings = Settings(worker={"data_dir": tmp_path, "concurrency": 4})
    exporter = InMemorySpanExporter()
    telemetry = Telemetry(settings.telemetry, tracer_provider=make_tracer_provider(settings.telemetry, exporter))
    return create_app(settings, judge=ScriptedJudge(reply), telemetry=telemetry, follow_control=False), exporter


async def test_a_consistent_pair_becomes_a_verdict_with_its_trace(tmp_path: Path) -> None:
    pair = make_pair()
    wired, exporter = _wire(tmp_path, lambda req: tone_reply(winner="A" if order_of(req, pair) == "AB" else "B"))
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
    _, _, _, headers = captured.sent[0]
    assert headers["traceparent"].decode().split("-")[1] == verdict.trace_id


async def test_a_flip_goes_to_tiebreak_and_the_tiebreak_agent_decides(tmp_path: Path) -> None:
    pair = make_pair()

    def reply(req: JudgeRequest) -> str:
        if req.template == "tiebreak":
            # Both tie-break orders prefer the pair's second candidate on every criterion.
            side = "B" if order_of(req, pair) == "AB" else "A"
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
