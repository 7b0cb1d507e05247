"""The agreement guard on real Kafka: a judge whose confident verdicts people reject is paused after a handful of
labels, long before the kappa guard's 50, with its own alert kind, and every later pair goes to people."""

from __future__ import annotations

from pathlib import Path

import pytest

from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.producer import send_events
from pairjudge_dev.workers import kafka_run, produce_raw, running_worker
from tests.integration.test_audit_kafka import _audit_events, _decisive, _label, _one_by_one

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PAIRS = 8


async def test_a_judge_people_keep_rejecting_is_paused_by_the_agreement_guard_before_the_kappa_guard_may_act(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "agree",
        # The kappa guard keeps its default 50 labels: only the agreement guard can act on 8.
        audit={"snapshot_interval_s": 0.5, "window_s": 10_000_000.0},
        policy={"audit_share": 0.0},
    )
    prefix = settings.topics.prefix
    ids = [f"{prefix}-p{i}" for i in range(PAIRS)]
    with running_worker(settings, tmp_path / "worker.log"):
        await send_events(settings, [_decisive(pair_id) for pair_id in ids])
        first = await collect_outcomes(settings, set(ids), timeout=120)
        assert first.complete, "the first pairs were not all judged"
        assert {kind for kind, _ in first.final.values()} == {"verdicts"}
        loser = first.final[ids[0]][1]["loser"]
        # People reject every one of the judge's verdicts.
        await produce_raw(kafka_bootstrap, settings.topics.name("labels"), [_label(i, loser) for i in ids], keyed=True)
        alerts, snapshots = await _audit_events(
            settings,
            lambda a, s: any(x.kind == "agreement_below_floor" for x in a) and any(x.human_labels >= PAIRS for x in s),
        )
        paused = await _one_by_one(settings, [f"{prefix}-q{i}" for i in range(10)], stop="kappa_guard")
    log = (tmp_path / "worker.log").read_text(errors="replace")

    kinds = [a.kind for a in alerts]
    assert "agreement_below_floor" in kinds
    assert "kappa_below_threshold" not in kinds  # 8 labels: the kappa guard has not acted
    alert = next(a for a in alerts if a.kind == "agreement_below_floor")
    assert (alert.value, alert.threshold) == (0.0, 0.7)
    latest = max(snapshots, key=lambda s: (s.human_labels, s.published_at))
    assert (latest.orders_agreed_labels, latest.orders_agreed_agreement) == (PAIRS, 0.0)
    assert latest.agreement_guard_floor == 0.7
    assert latest.agreement_guard_evidence is not None
    assert latest.agreement_guard_evidence >= 20
    assert "control: kappa_guard_tripped = True (by audit:" in log, log[-3000:]
    assert list(paused.final.values())[-1][1]["reason"] == "kappa_guard"
    assert len(paused.final) <= 3, f"the pause took {len(paused.final)} pairs to arrive"
