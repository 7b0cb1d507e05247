"""Which dimension and which style-guide rule the judge is ambiguous on, end to end on real Kafka.

A real worker judges tone pairs through the OpenAI-compatible adapter against a real HTTP judge whose
replies are scripted per ordering: on the "bias" pairs, stylistic consistency always goes to whatever
sits in position A (the orders disagree on it) and the justifications cite rule 2; on the "steady" pairs
every dimension keeps its winner across the orders and the justifications cite rule 3. People label the
pairs; tone_match always named the first candidate, the people the second on most pairs. The snapshot
on ``pairjudge.audit`` and ``pairjudge report`` rank stylistic consistency first by order disagreement,
tone_match first by human disagreement, and rule 2 first among the rules cited in disagreeing pairs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pairjudge.agents.guide_rules import guide_id
from pairjudge.schemas import HumanLabel
from pairjudge.schemas.audit import AuditSnapshot
from pairjudge.streams.audit.report import parse_audit_events, render_report
from pairjudge.streams.kafka.codecs import encode
from pairjudge.streams.kafka.collector import collect_outcomes, read_topic
from pairjudge_dev.workers import kafka_run, produce_raw, running_worker
from tests.fixtures.fake_judge_server import Action, FakeJudgeServer, RecordedRequest, fake_judge_server, reply
from tests.unit.factories import FIRST_ID, SECOND_ID, make_pair, tone_rubric

__all__ = ["fake_judge_server"]  # a fixture, imported for pytest
pytestmark = [pytest.mark.kafka]

GUIDE = (
    "1. Open with the customer's name.\n"
    "2. Never promise a delivery date you cannot keep.\n"
    "3. Sign off with the team name, not a person."
)
BIAS, STEADY = 6, 4
#: Pairs labelled for the second candidate (the rest for the first, which every order's tone_match names).
SECOND_LABELS = {f"bias-{i}" for i in range(4)} | {"steady-0"}


def _judge(request: RecordedRequest) -> Action:
    body = request.body.decode("utf-8", "replace")
    first_at, second_at = body.find("FIRSTOUT"), body.find("SECONDOUT")
    first_shown_as_a = 0 <= first_at < second_at
    first, second = ("A", "B") if first_shown_as_a else ("B", "A")
    bias = "BIASPAIR" in body

    def better(winner: str) -> dict[str, int]:
        return {winner: 5, ("B" if winner == "A" else "A"): 2}

    content = {
        "winner": first,  # the first candidate wins overall in both orders: a verdict
        "confidence": 0.9,
        "justification": f"Output {first} keeps to rule 2 of the guide."
        if bias
        else f"Output {first} keeps to rule 3.",
        "dimension_scores": {
            "tone_match": better(first),
            "audience_suitability": better(first),
            "stylistic_consistency": better("A") if bias else better(second),
            "guideline_adherence": {"A": 3, "B": 3},
        },
        "key_differentiator": "warmer register",
    }
    return reply(json.dumps(content))


def _pair(pair_id: str, bias: bool) -> bytes:
    tag = "BIASPAIR" if bias else "STEADYPAIR"
    pair = make_pair(
        pair_id=pair_id,
        outputs=(f"FIRSTOUT {tag} Hi Sam, your refund is on its way.", f"SECONDOUT {tag} Your refund was processed."),
        rubric=tone_rubric(style_guide=GUIDE),
    )
    return encode(pair)


async def test_the_snapshot_and_the_report_name_the_ambiguous_dimension_and_rule(
    kafka_bootstrap: str, tmp_path: Path, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.set_responder(_judge)
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "ambiguity",
        judge=fake_judge_server.judge_settings(),
        policy={"audit_share": 0.0},
        audit={"snapshot_interval_s": 0.5, "window_s": 10_000_000.0},
    )
    prefix = settings.topics.prefix
    names = [f"bias-{i}" for i in range(BIAS)] + [f"steady-{i}" for i in range(STEADY)]
    ids = {name: f"{prefix}-{name}" for name in names}
    labels = [
        encode(HumanLabel(pair_id=ids[n], winner=SECOND_ID if n in SECOND_LABELS else FIRST_ID, reviewer="ana"))
        for n in names
    ]
    with running_worker(settings, tmp_path / "worker.log"):
        pairs = [_pair(ids[n], n.startswith("bias")) for n in names]
        await produce_raw(kafka_bootstrap, settings.topics.name("pairs"), pairs, keyed=True)
        outcomes = await collect_outcomes(settings, set(ids.values()), timeout=120)
        assert outcomes.complete, "not every pair was judged"
        assert {kind for kind, _ in outcomes.final.values()} == {"verdicts"}
        await produce_raw(kafka_bootstrap, settings.topics.name("labels"), labels, keyed=True)

        def labelled(records: list[tuple[bytes | None, bytes | None]]) -> bool:
            snaps = parse_audit_events(v for _, v in records if v).snapshots
            return any(s.human_labels >= len(names) and s.ambiguity is not None for s in snaps)

        records = await read_topic(settings, "audit", timeout=90, until=labelled)
    events = parse_audit_events(v for _, v in records if v)
    latest: AuditSnapshot = max(
        (s for s in events.snapshots if s.ambiguity is not None), key=lambda s: (s.human_labels, s.published_at)
    )
    assert latest.human_labels == len(names)
    assert latest.ambiguity is not None
    dims = {d.name: d for d in latest.ambiguity.dimensions}
    # The most ambiguous dimension first: the orders disagreed on stylistic consistency on every bias pair.
    top = latest.ambiguity.dimensions[0]
    assert top.name == "stylistic_consistency"
    assert (top.orders_disagree, top.orders_compared) == (BIAS, BIAS + STEADY)
    assert top.order_low is not None
    assert top.order_high is not None
    assert top.order_low < BIAS / (BIAS + STEADY) < top.order_high
    assert dims["tone_match"].orders_disagree == 0
    # tone_match named the first candidate every time; the people chose the second on 5 of 10.
    assert (dims["tone_match"].human_disagree, dims["tone_match"].human_compared) == (len(SECOND_LABELS), len(names))
    # stylistic consistency is compared with the humans only on the steady pairs (the second candidate there).
    assert (dims["stylistic_consistency"].human_disagree, dims["stylistic_consistency"].human_compared) == (
        STEADY - 1,
        STEADY,
    )
    # guideline_adherence is a tie in every order: never compared with a person.
    assert dims["guideline_adherence"].human_compared == 0

    gid = guide_id(GUIDE)
    rules = {r.rule_id: r for r in latest.ambiguity.rules}
    assert latest.ambiguity.rules[0].rule_id == f"{gid}:2"
    assert (rules[f"{gid}:2"].cited, rules[f"{gid}:2"].cited_order_disagreeing) == (BIAS, BIAS)
    assert rules[f"{gid}:2"].cited_human_disagreeing == 4
    assert (rules[f"{gid}:3"].cited, rules[f"{gid}:3"].cited_order_disagreeing) == (STEADY, 0)
    assert rules[f"{gid}:3"].cited_human_disagreeing == 1

    page = render_report(events)
    section = page[page.index("Ambiguous dimensions and rules") :]
    assert section.index("stylistic_consistency") < section.index("tone_match")
    assert f"{gid}:2" in section
    assert section.index(f"{gid}:2") < section.index(f"{gid}:3")
    assert "6 of 10 pairs" in section  # stylistic consistency's order disagreement, with its count
