"""The tie-break earns its place, or loses it, on real Kafka (issue 41 item 2).

A real worker judges tone pairs through the OpenAI-compatible adapter against a real HTTP judge whose replies are
scripted: its two orders always name whatever sits in position A (every pair flips), and its tie-break replies
name the second candidate in both orders, confidently and with consistent weighted scores, so the tie-break
decides every pair. People label most pairs for the first candidate: the tie-break is mostly wrong. Once the
tie-break has the audit's minimum of labels, the audit reports its low agreement by stage (with its interval),
finds no threshold that reaches the target and its agreement shown below it, and switches the series' tie-break
off on ``pairjudge.thresholds`` with a ``tiebreak_below_target`` alert that says why; the worker's later flips
go to review "tiebreak_disabled" without a tie-break call. ``pairjudge report`` shows the stage table and the
review load the switch-off costs.

Then a person switches it back on (``pairjudge control tiebreak-on``): the next flip goes to the tie-break again
(a tie-break call is made), and the audit judges it afresh: neither the labels that switched it off nor the late
label of one of the old tie-break's decisions count, so it is not switched off again; a restarted worker keeps it
so (the audit's state is read back from its table's changelog).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pairjudge.agents.audit.stages import tiebreak_threshold_key
from pairjudge.schemas import HumanLabel
from pairjudge.schemas.audit import AuditSnapshot, ThresholdUpdate
from pairjudge.schemas.rubric import DEFAULT_TIEBREAK_WEIGHTS
from pairjudge.streams.audit.report import parse_audit_events, render_report
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.codecs import encode
from pairjudge.streams.kafka.collector import collect_outcomes, read_topic
from pairjudge_dev.workers import final_decision_records, kafka_run, produce_raw, read_log, running_worker
from tests.fixtures.fake_judge_server import Action, FakeJudgeServer, RecordedRequest, fake_judge_server, reply
from tests.unit.factories import FIRST_ID, SECOND_ID, make_pair, tone_rubric

__all__ = ["fake_judge_server"]  # a fixture, imported for pytest
pytestmark = [pytest.mark.kafka]

TARGET, RISK, MIN_LABELS = 0.8, 0.1, 20
#: Every fifth pair is labelled for the second candidate: the tie-break is right on 20% of its decisions.
PAIRS = 30


def _is_tiebreak(body: str) -> bool:
    return "weighted_score_a" in body


def _judge(request: RecordedRequest) -> Action:
    body = request.body.decode("utf-8", "replace")
    first_at, second_at = body.find("FIRSTOUT"), body.find("SECONDOUT")
    second = "B" if 0 <= first_at < second_at else "A"
    if _is_tiebreak(body):
        # The second candidate wins every criterion: its weighted score is the whole weight.
        weights = DEFAULT_TIEBREAK_WEIGHTS.criteria
        content = {
            "winner": second,
            "criteria_analysis": [
                {"criterion": c.name, "weight": c.weight, "winner": second, "rationale": "Reads better."}
                for c in weights
            ],
            "weighted_score_a": 1.0 if second == "A" else 0.0,
            "weighted_score_b": 1.0 if second == "B" else 0.0,
            "escalation_triggered": False,
            "final_justification": f"Output {second} is better on every weighted criterion.",
            "confidence": 0.9,
        }
        return reply(json.dumps(content))
    scores = {"A": 5, "B": 2}  # position A always wins: the two orders flip
    content = {
        "winner": "A",
        "confidence": 0.9,
        "justification": "Output A is warmer.",
        "dimension_scores": {d: scores for d in ("tone_match", "audience_suitability", "stylistic_consistency")}
        | {"guideline_adherence": {"A": 3, "B": 3}},
        "key_differentiator": "warmer register",
    }
    return reply(json.dumps(content))


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PAIRJUDGE_TOPICS__PREFIX": settings.topics.prefix}
    command = [sys.executable, "-m", "pairjudge.streams.cli", *args, "--bootstrap", settings.kafka.bootstrap_servers]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)


def _fresh_snapshot(since: datetime, labels: int) -> Any:
    """A test for ``read_topic``: a snapshot published after ``since`` whose window counts ``labels`` labels."""

    def found(records: list[tuple[bytes | None, bytes | None]]) -> bool:
        return _latest(records, since, labels) is not None

    return found


def _latest(records: list[tuple[bytes | None, bytes | None]], since: datetime, labels: int) -> AuditSnapshot | None:
    events = parse_audit_events(v for _, v in records if v)
    later = [s for s in events.snapshots if s.published_at > since and s.stages and s.human_labels >= labels]
    return max(later, key=lambda s: s.published_at) if later else None


async def _tiebreak_decides(settings: Settings, server: FakeJudgeServer, pair_id: str) -> dict[str, Any]:
    """Send one flipping pair (again, while the worker has not read the switch yet) until the tie-break decides it;
    returns its verdict, after checking the judge was asked for a tie-break."""
    for attempt in range(20):
        before = len(server.requests)
        pid = f"{pair_id}-{attempt}"
        await produce_raw(settings.kafka.bootstrap_servers, settings.topics.name("pairs"), [_pair(pid)], keyed=True)
        kind, event = (await collect_outcomes(settings, {pid}, timeout=30)).final[pid]
        if kind == "verdicts":
            bodies = [r.body.decode("utf-8", "replace") for r in server.requests[before:]]
            assert sum(_is_tiebreak(b) for b in bodies) == 2, bodies  # the tie-break's two orders
            assert event["decided_by"] == "tiebreak", event
            return event
    raise AssertionError(f"no tie-break verdict after 20 pairs: {event}")


def _pair(pair_id: str) -> bytes:
    outputs = ("FIRSTOUT Hi Sam, your refund is on its way.", "SECONDOUT Your refund was processed.")
    return encode(make_pair(pair_id=pair_id, outputs=outputs, rubric=tone_rubric()))


async def test_a_mostly_wrong_tiebreak_is_measured_switched_off_and_its_flips_go_to_review(
    kafka_bootstrap: str, tmp_path: Path, fake_judge_server: FakeJudgeServer
) -> None:
    fake_judge_server.set_responder(_judge)
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "tbswitch",
        judge=fake_judge_server.judge_settings(),
        policy={"audit_share": 0.0},
        audit={
            "snapshot_interval_s": 0.5,
            "window_s": 10_000_000.0,
            "min_labels": MIN_LABELS,
            # The kappa guard would pause the whole series on these labels first (it counts every verdict); held
            # off here so the tie-break's own switch is what acts.
            "kappa_min": -1.0,
            "calibration_min_labels": MIN_LABELS,
            "calibration_target": TARGET,
            "calibration_risk": RISK,
        },
    )
    prefix = settings.topics.prefix
    ids = [f"{prefix}-flip-{i}" for i in range(PAIRS)]
    labels = [
        encode(HumanLabel(pair_id=pid, winner=SECOND_ID if i % 5 == 0 else FIRST_ID, reviewer="ana"))
        for i, pid in enumerate(ids)
    ]
    #: One of the old tie-break's decisions whose label comes late, after the tie-break is switched back on.
    late = f"{prefix}-late-old"
    log = tmp_path / "worker.log"
    with running_worker(settings, log):
        # 1. Every pair flips and the tie-break decides it.
        await produce_raw(kafka_bootstrap, settings.topics.name("pairs"), [_pair(p) for p in [*ids, late]], keyed=True)
        outcomes = await collect_outcomes(settings, {*ids, late}, timeout=60)
        assert outcomes.complete, read_log(log)[-4000:]
        for kind, event in outcomes.final.values():
            assert kind == "verdicts", event
            assert event["decided_by"] == "tiebreak", event
            assert event["winner"] == SECOND_ID
        # 2. People label them: the audit measures the tie-break on its own and switches it off.
        await produce_raw(kafka_bootstrap, settings.topics.name("labels"), labels, keyed=True)
        (record,) = {r.series.key: r for r in (await final_decision_records(settings, set(ids), timeout=30)).values()}
        key = tiebreak_threshold_key(record).encode()

        def switched(records: list[tuple[bytes | None, bytes | None]]) -> bool:
            return any(k == key and v and ThresholdUpdate.model_validate_json(v).switched_off for k, v in records)

        thresholds = await read_topic(settings, "thresholds", timeout=45, until=switched)
        assert switched(thresholds), read_log(log)[-4000:]
        update = next(ThresholdUpdate.model_validate_json(v) for k, v in thresholds if k == key and v)
        assert (update.stage, update.threshold, update.series) == ("tiebreak", None, record)
        assert MIN_LABELS <= update.labels <= PAIRS

        # 3. Later flips go to people, without a tie-break call (the worker may take a moment to read the update).
        for attempt in range(20):
            before = len(fake_judge_server.requests)
            later = f"{prefix}-later-{attempt}"
            await produce_raw(kafka_bootstrap, settings.topics.name("pairs"), [_pair(later)], keyed=True)
            done = await collect_outcomes(settings, {later}, timeout=30)
            kind, event = done.final[later]
            if event.get("reason") == "tiebreak_disabled":
                break
        assert (kind, event["reason"], event["stage"]) == ("review", "tiebreak_disabled", "primary"), event
        # The judge saw the last pair's two orders, and no tie-break request for it.
        last = [r.body.decode("utf-8", "replace") for r in fake_judge_server.requests[before:]]
        assert len(last) == 2, last
        assert not any(_is_tiebreak(body) for body in last)

        def reported(records: list[tuple[bytes | None, bytes | None]]) -> bool:
            events = parse_audit_events(v for _, v in records if v)
            full = any(s.tiebreak_off and any(r.labels == PAIRS for r in s.stages) for s in events.snapshots)
            return full and any(a.kind == "tiebreak_below_target" for a in events.alerts)

        audit = await read_topic(settings, "audit", timeout=30, until=reported)

        # 4. A person switches it back on (a new tie-break prompt, say): the next flip goes to the tie-break again.
        ran = _cli(settings, "control", "tiebreak-on", record, "--by", "ana", "--why", "new tie-break prompt")
        assert ran.returncode == 0, ran.stderr
        assert "switched back on by ana: new tie-break prompt" in " ".join((ran.stdout + ran.stderr).split())

        def switched_on(records: list[tuple[bytes | None, bytes | None]]) -> bool:
            return any(k == key and v and ThresholdUpdate.model_validate_json(v).switched_on_by for k, v in records)

        on = [
            ThresholdUpdate.model_validate_json(v)
            for k, v in await read_topic(settings, "thresholds", timeout=15, until=switched_on)
            if k == key and v
        ]
        assert (on[-1].switched_off, on[-1].switched_on_by) == (False, "ana: new tie-break prompt")
        assert on[-1].fresh_since is not None
        switched_on_at = on[-1].fresh_since
        fresh = await _tiebreak_decides(settings, fake_judge_server, f"{prefix}-fresh")
        # The old decision's late label, and the new decision's label: both say the tie-break was wrong.
        late_labels = [HumanLabel(pair_id=p, winner=FIRST_ID, reviewer="ana") for p in (late, fresh["pair_id"])]
        await produce_raw(kafka_bootstrap, settings.topics.name("labels"), [encode(x) for x in late_labels], keyed=True)
        all_labels = PAIRS + 2
        after_on = await read_topic(settings, "audit", timeout=45, until=_fresh_snapshot(switched_on_at, all_labels))
        snap = _latest(after_on, switched_on_at, all_labels)
        assert snap is not None, read_log(log)[-4000:]
        # Judged afresh: only the new decision's label counts, and it is not switched off again.
        assert not snap.tiebreak_off
        (tb,) = [r for r in snap.stages if r.stage == "tiebreak"]
        assert (tb.labels, tb.agreeing) == (1, 0)

    # 5. A restarted worker reads the audit's state back: the old evidence does not come back, and the tie-break
    # stays on.
    with running_worker(settings, tmp_path / "worker-again.log"):
        again = await _tiebreak_decides(settings, fake_judge_server, f"{prefix}-again")
        assert again["winner"] == SECOND_ID
        restarted = await read_topic(settings, "audit", timeout=45, until=_fresh_snapshot(datetime.now(UTC), 0))
    snap = _latest(restarted, switched_on_at, all_labels)
    assert snap is not None
    assert not snap.tiebreak_off
    assert [(r.labels, r.agreeing) for r in snap.stages if r.stage == "tiebreak"] == [(1, 0)]
    thresholds = await read_topic(settings, "thresholds", timeout=3)
    records = [ThresholdUpdate.model_validate_json(v) for k, v in thresholds if k == key and v]
    assert not records[-1].switched_off  # never switched off again

    # The audit: agreement by stage, the switch-off's alert in plain words, and the report with its cost.
    events = parse_audit_events(v for _, v in audit if v)
    alerts = [a for a in events.alerts if a.kind == "tiebreak_below_target"]
    assert len(alerts) == 1, events.alerts
    assert "go to people for review" in alerts[0].message
    assert alerts[0].value < 0.5
    latest = max((s for s in events.snapshots if s.stages), key=lambda s: (s.stages[1].labels, s.published_at))
    assert latest.tiebreak_off
    stages = {row.stage: row for row in latest.stages}
    tb = stages["tiebreak"]
    assert (tb.labels, tb.agreeing) == (PAIRS, (PAIRS + 4) // 5)
    assert tb.low is not None
    assert tb.high is not None
    assert tb.low < tb.agreeing / tb.labels < tb.high < TARGET
    assert stages["primary"].labels == 0  # no pair was decided by the primary judge
    page = render_report(events)
    section = page[page.index("Agreement with people by deciding stage") :]
    assert "The tie-break is switched off for this series" in section
    assert "review items per hour" in section
