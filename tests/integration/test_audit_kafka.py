"""The trust loop on real Kafka (seed 001): human labels join the verdicts, the audit finds the judge
disagreeing with the humans, automatic decisions stop on every worker, and only a person resumes them.
Every pair still gets exactly one final outcome throughout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pairjudge.agents.core import judge_pair
from pairjudge.agents.offline import OfflineJudge
from pairjudge.agents.policy import Policy
from pairjudge.schemas import CandidatePair, HumanLabel, PairVerdict
from pairjudge.schemas.audit import Alert, AuditSnapshot, ThresholdUpdate
from pairjudge.streams.audit.report import parse_audit_events
from pairjudge.streams.cli.demo import sample_labels
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.codecs import encode
from pairjudge.streams.kafka.collector import Outcomes, collect_outcomes, read_topic
from pairjudge.streams.kafka.producer import send_events
from pairjudge_dev.pairgen import sample_dicts
from pairjudge_dev.workers import kafka_run, produce_raw, running_worker

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

#: Labels a window needs before the kappa guard may act (small, so the test stays quick).
MIN_LABELS = 16
FIRST_BATCH = 24


def _decisive(pair_id: str) -> bytes:
    # A pair the offline judge decides on its own, confidently: a verdict unless automation is paused.
    pair = next(p for p in sample_dicts() if p["pair_id"] == "email-card-delay")
    pair["pair_id"] = pair_id
    return json.dumps(pair).encode()


def _label(pair_id: str, winner: str, reviewer: str = "ana") -> bytes:
    return encode(HumanLabel(pair_id=pair_id, winner=winner, reviewer=reviewer, from_audit=True))


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PAIRJUDGE_TOPICS__PREFIX": settings.topics.prefix}
    command = [sys.executable, "-m", "pairjudge.streams.cli", *args, "--bootstrap", settings.kafka.bootstrap_servers]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)


async def _one_by_one(settings: Settings, ids: list[str], stop: str | None = None) -> Outcomes:
    """Send pairs one at a time until one's final outcome has reason ``stop`` (or is a verdict for None)."""
    outcomes = Outcomes(expected=set())
    for pair_id in ids:
        await send_events(settings, [_decisive(pair_id)])
        got = await collect_outcomes(settings, {pair_id}, timeout=60)
        outcomes.final.update(got.final)
        kind, event = got.final[pair_id]
        if (stop is None and kind == "verdicts") or (stop is not None and event.get("reason") == stop):
            break
    return outcomes


async def _audit_events(settings: Settings, until: Any, timeout: float = 90) -> tuple[list[Alert], list[AuditSnapshot]]:
    def parse(records: list[tuple[bytes | None, bytes | None]]) -> tuple[list[Alert], list[AuditSnapshot]]:
        events = parse_audit_events(value for _, value in records if value)
        return events.alerts, events.snapshots

    records = await read_topic(settings, "audit", timeout=timeout, until=lambda r: until(*parse(r)))
    return parse(records)


async def test_labels_that_disagree_trip_the_kappa_guard_on_every_worker_until_a_person_resumes(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "audit",
        # One window for the whole test (a window boundary inside it would split the labels).
        audit={"min_labels": MIN_LABELS, "snapshot_interval_s": 0.5, "window_s": 10_000_000.0},
        policy={"audit_share": 0.0},
    )
    prefix = settings.topics.prefix
    labels_topic = settings.topics.name("labels")
    ids = [f"{prefix}-p{i}" for i in range(FIRST_BATCH)]
    with (
        running_worker(settings, tmp_path / "worker-1.log"),
        running_worker(settings, tmp_path / "worker-2.log"),
    ):
        # Labels before their verdicts (kept and joined later), for a pair that never comes, and malformed.
        early = [_label(pair_id, "champion") for pair_id in ids[:4]]
        malformed = [b"{not json", json.dumps({"pair_id": ids[5], "reviewer": "ana"}).encode()]
        ghost = _label(f"{prefix}-ghost", "champion")
        await produce_raw(kafka_bootstrap, labels_topic, [*early, ghost, *malformed], keyed=True)

        await send_events(settings, [_decisive(pair_id) for pair_id in ids])
        first = await collect_outcomes(settings, set(ids), timeout=120)
        assert first.complete, "the first pairs were not all judged"
        assert {kind for kind, _ in first.final.values()} == {"verdicts"}
        winner, loser = (first.final[ids[0]][1][k] for k in ("winner", "loser"))

        # The humans agree with the judge on every other pair: kappa 0, far below 0.7.
        late = [_label(pair_id, winner if i % 2 else loser) for i, pair_id in enumerate(ids) if i >= 4]
        duplicates = [_label(pair_id, winner if i % 2 else loser, "bo") for i, pair_id in enumerate(ids[4:8], 4)]
        await produce_raw(kafka_bootstrap, labels_topic, [*late, *duplicates], keyed=True)

        alerts, snapshots = await _audit_events(
            settings,
            lambda a, s: (
                any(x.kind == "kappa_below_threshold" for x in a) and any(x.human_labels >= FIRST_BATCH for x in s)
            ),
        )
        paused = await _one_by_one(settings, [f"{prefix}-q{i}" for i in range(10)], stop="kappa_guard")
        # Paused means paused, on every partition (two workers hold them): every later pair goes to humans.
        held_ids = [f"{prefix}-h{i}" for i in range(12)]
        await send_events(settings, [_decisive(pair_id) for pair_id in held_ids])
        held = await collect_outcomes(settings, set(held_ids), timeout=60)

        resumed = _cli(settings, "control", "resume", "--by", "alice (retrained the judge)")
        assert resumed.returncode == 0, resumed.stderr
        after = await _one_by_one(settings, [f"{prefix}-r{i}" for i in range(10)])

        everything = {*ids, *paused.final, *held_ids, *after.final}
        final = await collect_outcomes(settings, everything, timeout=60, settle=3)
        letters = await read_topic(settings, "deadletter", timeout=30, until=lambda r: len(r) >= len(malformed))
    logs = [(tmp_path / f"worker-{n}.log").read_text(errors="replace") for n in (1, 2)]

    # The audit saw each label once (duplicates and redeliveries are not counted again), and measured kappa.
    latest = max((s for s in snapshots if s.human_labels), key=lambda s: (s.human_labels, s.published_at))
    assert latest.human_labels == FIRST_BATCH
    assert latest.cohen_kappa is not None
    assert latest.cohen_kappa < 0.7
    assert latest.kappa_low is not None
    assert latest.kappa_high is not None
    assert latest.kappa_low <= latest.cohen_kappa <= latest.kappa_high
    # The judge named one winner throughout: the 4 early labels said "champion", then every other one agreed.
    assert latest.agreement == pytest.approx((4 * (winner == "champion") + 10) / FIRST_BATCH)
    assert latest.pairs >= FIRST_BATCH
    assert latest.threshold is not None
    assert latest.threshold.source == "configured"
    kappa_alerts = [a for a in alerts if a.kind == "kappa_below_threshold"]
    assert len(kappa_alerts) == 1, kappa_alerts
    assert kappa_alerts[0].series == latest.series

    # Every worker applied the pause, and every pair after it went to review "kappa_guard".
    for log in logs:
        assert "control: kappa_guard_tripped = True (by audit:" in log, log[-3000:]
    assert len(paused.final) <= 3, f"the pause took {len(paused.final)} pairs to arrive"
    assert held.complete
    assert {(kind, event["reason"]) for kind, event in held.final.values()} == {("review", "kappa_guard")}
    assert list(after.final.values())[-1][0] == "verdicts", "automatic decisions never resumed"
    assert len(after.final) <= 2, f"the resume took {len(after.final)} pairs to arrive"

    # Exactly one final outcome per pair, and the malformed labels are dead letters, not outcomes.
    assert final.ok, (final.missing, final.conflicting)
    reasons = {json.loads(value or b"{}")["reason"] for _, value in letters}
    assert {"malformed_json", "missing_field"} <= reasons
    # (At least once: a rebalance before the commit re-reads a label and dead-letters it again.)
    assert final.other_letters >= len(malformed)


async def test_canaries_are_judged_every_round_and_scored_apart_from_human_labels(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "canary",
        audit={"snapshot_interval_s": 0.5, "window_s": 10_000_000.0},
        policy={"audit_share": 0.0},
    )
    known = {json.loads(raw)["pair_id"]: json.loads(raw)["winner"] for raw in sample_labels()}
    canaries = []
    for pair in sample_dicts():
        if pair["pair_id"] in known and known[pair["pair_id"]] != "TIE":
            canaries.append(json.dumps({**pair, "human_label": {"winner": known[pair["pair_id"]]}}))
    canary_file = tmp_path / "canaries.jsonl"
    canary_file.write_text("\n".join(canaries) + "\n")
    with running_worker(settings, tmp_path / "worker.log"):
        sent = _cli(settings, "canary", "send", str(canary_file), "--every", "1", "--rounds", "2")
        assert sent.returncode == 0, sent.stderr
        records = await read_topic(settings, "pairs", timeout=30, until=lambda r: len(r) >= 2 * len(canaries))
        sent_ids = {json.loads(value or b"{}")["pair_id"] for _, value in records}
        assert len(sent_ids) == 2 * len(canaries)  # every round under fresh ids
        outcomes = await collect_outcomes(settings, sent_ids, timeout=120)
        assert outcomes.ok

        def scored(alerts: list[Alert], snapshots: list[AuditSnapshot]) -> bool:
            decided = {pid for pid, (kind, _) in outcomes.final.items() if kind == "verdicts"}
            return sum(s.canary_labels for s in latest_per_series(snapshots)) >= len(decided)

        _, snapshots = await _audit_events(settings, scored)
    assert f"sent {2 * len(canaries)} canary pairs" in sent.stdout
    # The judge's accuracy on the canaries, computed here from its verdicts and the known answers.
    judged = {}
    for pair_id, (kind, event) in outcomes.final.items():
        if kind == "verdicts":
            judged[pair_id] = event["winner"] == known[pair_id.split("-", 2)[2]]
    latest = latest_per_series(snapshots)
    assert sum(s.canary_labels for s in latest) == len(judged) > 0
    right = sum(round((s.canary_accuracy or 0) * s.canary_labels) for s in latest)
    assert right == sum(judged.values())
    assert sum(s.human_labels for s in latest) == 0  # canaries never count as human labels


def latest_per_series(snapshots: list[AuditSnapshot]) -> list[AuditSnapshot]:
    latest: dict[str, AuditSnapshot] = {}
    for snapshot in snapshots:
        if snapshot.series not in latest or snapshot.published_at >= latest[snapshot.series].published_at:
            latest[snapshot.series] = snapshot
    return list(latest.values())


def _variant(source_id: str, pair_id: str) -> bytes:
    pair = next(p for p in sample_dicts() if p["pair_id"] == source_id)
    return json.dumps({**pair, "pair_id": pair_id}).encode()


async def _offline_confidence(source_id: str) -> float:
    """The offline judge's confidence in its first-pass verdict on a sample pair, as a worker would give it."""
    pair = CandidatePair.model_validate(next(p for p in sample_dicts() if p["pair_id"] == source_id))
    outcome = (await judge_pair(pair, OfflineJudge(), Policy())).outcome
    assert isinstance(outcome, PairVerdict), (source_id, outcome)
    assert outcome.decided_by == "primary", (source_id, outcome)
    return outcome.confidence


async def _final_one_by_one(settings: Settings, source_id: str, ids: list[str], until_decided_by: str) -> int:
    """Send ``source_id`` variants one at a time until one is decided by ``until_decided_by``; how many it took."""
    for n, pair_id in enumerate(ids, start=1):
        await send_events(settings, [_variant(source_id, pair_id)])
        got = await collect_outcomes(settings, {pair_id}, timeout=60)
        kind, event = got.final[pair_id]
        if kind == "verdicts" and event["decided_by"] == until_decided_by:
            return n
    return len(ids) + 1


async def test_a_calibrated_threshold_reaches_every_worker_and_sends_less_trusted_pairs_to_the_tiebreak(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    # The offline judge (heuristic-4) decides "support-dispute" at confidence 0.931 and "email-card-delay" at
    # 0.792, in the same series. Humans agree with every 0.931 verdict and with half of the 0.792 ones:
    # agreement of 0.9 with risk 0.1 holds only above 0.792, and the lowest threshold of the 0.01 grid
    # above it is 0.80, so that becomes the series' threshold. (heuristic-3 said 0.93 and 0.787: 0.79.)
    # The premise is checked first, so a change of the judge's calibration fails here, by name.
    assert await _offline_confidence("support-dispute") == pytest.approx(0.931)
    assert await _offline_confidence("email-card-delay") == pytest.approx(0.792)
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "thresh",
        # kappa_min -1: the offline judge names "champion" every time here, and a rater who never varies
        # has kappa 0 however often it agrees; this test is about the threshold, not the guard. The
        # threshold is first computed once all 60 labels are in (calibration_min_labels), so its coverage
        # does not depend on how many labels the join had taken in when the snapshot timer fired.
        audit={"snapshot_interval_s": 0.5, "window_s": 10_000_000.0, "calibration_min_labels": 60, "kappa_min": -1.0},
        policy={"audit_share": 0.0},
    )
    prefix = settings.topics.prefix
    sure = [f"{prefix}-s{i}" for i in range(40)]
    unsure = [f"{prefix}-e{i}" for i in range(20)]
    with (
        running_worker(settings, tmp_path / "worker-1.log"),
        running_worker(settings, tmp_path / "worker-2.log"),
    ):
        await send_events(
            settings,
            [_variant("support-dispute", i) for i in sure] + [_variant("email-card-delay", i) for i in unsure],
        )
        first = await collect_outcomes(settings, {*sure, *unsure}, timeout=120)
        assert first.complete
        assert {(kind, event["decided_by"]) for kind, event in first.final.values()} == {("verdicts", "primary")}
        labels = [_label(i, "champion") for i in sure]
        labels += [_label(i, "champion" if n % 2 else "challenger") for n, i in enumerate(unsure)]
        await produce_raw(kafka_bootstrap, settings.topics.name("labels"), labels, keyed=True)
        updates = await read_topic(
            settings,
            "thresholds",
            timeout=90,
            until=lambda r: any(json.loads(v or b"{}").get("threshold") is not None for _, v in r),
        )
        took = await _final_one_by_one(
            settings, "email-card-delay", [f"{prefix}-x{i}" for i in range(10)], until_decided_by="tiebreak"
        )
        # Every worker holds the new bar: the unsure pairs go through the tie-break, the sure ones do not.
        later = {f"{prefix}-late-e{i}": "email-card-delay" for i in range(8)}
        later |= {f"{prefix}-late-s{i}": "support-dispute" for i in range(8)}
        await send_events(settings, [_variant(source, pair_id) for pair_id, source in later.items()])
        after = await collect_outcomes(settings, set(later), timeout=120)
        _, snapshots = await _audit_events(
            settings, lambda a, s: any(x.threshold and x.threshold.source == "calibrated" for x in s)
        )
    logs = [(tmp_path / f"worker-{n}.log").read_text(errors="replace") for n in (1, 2)]

    (update,) = [ThresholdUpdate.model_validate_json(v or b"{}") for _, v in updates]
    assert update.threshold == pytest.approx(0.80)
    assert update.coverage == pytest.approx(40 / 60)
    assert (update.labels, update.target, update.risk) == (60, 0.9, 0.1)
    for log in logs:
        assert f"thresholds: series {update.series} auto-decides from confidence 0.8" in log, log[-3000:]
    assert took <= 3, f"the new threshold took {took} pairs to arrive"
    assert after.ok
    decided_by = {pair_id: event.get("decided_by") for pair_id, (_, event) in after.final.items()}
    assert {decided_by[i] for i in later if "late-e" in i} == {"tiebreak"}
    assert {decided_by[i] for i in later if "late-s" in i} == {"primary"}
    calibrated = [s.threshold for s in snapshots if s.threshold and s.threshold.source == "calibrated"]
    assert calibrated[-1] is not None
    assert calibrated[-1].threshold == pytest.approx(0.80)
