"""The human loop on real Kafka with a real worker: the label budget scales the audit draw, an audit sample
whose label never comes is counted as expired on the scoreboard, and two reviewers' labels on an audit
pair give the series its human ceiling (human-human agreement and kappa), each counted once.

A scripted judge (``pairjudge_dev.slow_judge_server``) decides every pair at confidence 0.9, the same in
both orders, so every verdict is a primary, "confident" one and the sampling rule is known exactly.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pairjudge.agents.sampling import audit_fraction, drawn
from pairjudge.schemas import ReviewRequest
from pairjudge.schemas.audit import AuditSnapshot, DecisionRecord
from pairjudge.schemas.scores import HumanBasisSnapshot, ScoreSnapshot
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.codecs import encode
from pairjudge.streams.kafka.collector import read_topic
from pairjudge_dev.slow_judge_server import Behaviour, JudgeServer
from pairjudge_dev.workers import kafka_run, produce_raw, running_worker, wait_for_log
from tests.integration.test_audit_kafka import _audit_events, _label
from tests.integration.test_scores_kafka import EXPERIMENT, _final_records, _pair

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

#: The audit share of both classes in every test (so a verdict's share does not depend on its class).
SHARE = 0.5
FLOOR = 0.05
#: How often the label budget recomputes the scale (``streams.audit.budget.UPDATE_EVERY_S``, not a setting).
BUDGET_TICK_S = 30.0
#: The join's retention in the expiry test; the sweep then runs every second.
RETENTION_S = 10.0
SNAPSHOTS = {"snapshot_interval_s": 0.5}
ONE_WINDOW = {**SNAPSHOTS, "window_s": 10_000_000.0}


@pytest.fixture(scope="module")
def sha_judge() -> Iterator[dict[str, object]]:
    """The judge section for a worker that uses the scripted judge (started once for the module)."""
    server = JudgeServer(Behaviour()).start()
    try:
        yield {"kind": "openai", "base_url": server.base_url, "model": "sha-judge", "cache_enabled": False}
    finally:
        server.stop()


async def _audit_reviews(settings: Settings, pair_ids: set[str], count: int) -> dict[str, ReviewRequest]:
    """The audit review requests (``audit=True``) on the review topic for ``pair_ids``, once ``count`` are in."""

    def audits(records: list[tuple[bytes | None, bytes | None]]) -> dict[str, ReviewRequest]:
        parsed = (ReviewRequest.model_validate_json(v) for _, v in records if v)
        return {r.pair_id: r for r in parsed if r.audit and r.pair_id in pair_ids}

    records = await read_topic(settings, "review", timeout=30, until=lambda rs: len(audits(rs)) >= count)
    return audits(records)


async def _boards(
    settings: Settings, until: Callable[[HumanBasisSnapshot], bool], timeout: float = 60
) -> list[ScoreSnapshot]:
    """Every scoreboard snapshot of the experiment, read until the latest one's human basis meets ``until``."""

    def parse(records: list[tuple[bytes | None, bytes | None]]) -> list[ScoreSnapshot]:
        snaps = (ScoreSnapshot.model_validate_json(v) for _, v in records if v)
        return [s for s in snaps if s.experiment == EXPERIMENT and s.human_basis is not None]

    def done(records: list[tuple[bytes | None, bytes | None]]) -> bool:
        mine = parse(records)
        return bool(mine) and until(_basis(mine[-1]))

    return parse(await read_topic(settings, "scores", timeout=timeout, until=done))


def _basis(snapshot: ScoreSnapshot) -> HumanBasisSnapshot:
    assert snapshot.human_basis is not None
    return snapshot.human_basis


def _verdicts(records: dict[str, DecisionRecord]) -> list[DecisionRecord]:
    return [r for r in records.values() if r.outcome == "verdict"]


async def test_the_label_budget_scales_the_draw_and_each_verdict_records_the_probability_it_was_drawn_with(
    kafka_bootstrap: str, tmp_path: Path, sha_judge: dict[str, object]
) -> None:
    # 60 verdicts in the budget's first minute read as about 3,700 an hour (its warm-up correction counts
    # the first 60 s as a whole minute): at a share of 0.5 that asks for ~1,850 labels an hour, against a
    # budget of 550, so the shares scale by ~0.3 (a probability of ~0.15, well above the floor's 0.05).
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "budget",
        judge=sha_judge,
        policy={
            "audit_share": SHARE,
            "audit_uncertain_share": SHARE,
            "audit_floor": FLOOR,
            "audit_double_share": 0.0,
            "audit_label_budget": 550,
            "audit_budget_period": "hour",
        },
        worker={"log_level": "INFO"},
    )
    prefix = settings.topics.prefix
    first = [_pair(prefix, i, challenger_wins=i % 2 == 0) for i in range(60)]
    second = [_pair(prefix, i, challenger_wins=i % 2 == 0) for i in range(60, 260)]
    log_path = tmp_path / "worker.log"
    started = time.monotonic()
    with running_worker(settings, log_path):
        await produce_raw(kafka_bootstrap, settings.topics.name("pairs"), [encode(p) for p in first], keyed=True)
        before = await _final_records(settings, {p.pair_id for p in first})
        # The budget's timer first fires one interval after the worker starts.
        log = await wait_for_log(log_path, "audit shares scaled by", timeout=BUDGET_TICK_S + 30)
        scaled_after = time.monotonic() - started
        await produce_raw(kafka_bootstrap, settings.topics.name("pairs"), [encode(p) for p in second], keyed=True)
        after = await _final_records(settings, {p.pair_id for p in second})
        sampled = {r.pair_id for r in _verdicts(after) if r.audit_sample}
        reviews = await _audit_reviews(settings, {p.pair_id for p in second}, len(sampled))
    found = re.search(r"audit shares scaled by ([0-9.]+)", log)
    assert found is not None, log[-3000:]
    scale = float(found.group(1))

    # Before the first tick, every verdict was drawn at the configured share.
    assert {r.inclusion_probability for r in _verdicts(before)} == {SHARE}, f"the scale came in {scaled_after:.0f} s"
    # The budget asked for a scale between the floor's and none at all.
    assert FLOOR < SHARE * scale < SHARE, scale
    verdicts = _verdicts(after)
    assert len(verdicts) >= len(second) - 5, Counter(r.outcome for r in after.values())
    probabilities = [r.inclusion_probability for r in verdicts]
    assert all(p is not None and FLOOR <= p < SHARE for p in probabilities), Counter(probabilities)
    # Most of the second batch was decided before the next tick, at the scale the log names (to its 3 digits).
    modal, _ = Counter(probabilities).most_common(1)[0]
    assert modal == pytest.approx(max(FLOOR, SHARE * scale), abs=SHARE * 6e-4)
    # Each verdict was drawn with exactly the probability it records (the draw hashes the pair id) ...
    for record in verdicts:
        assert record.inclusion_probability is not None
        assert record.audit_sample == (audit_fraction(record.pair_id) < record.inclusion_probability), record
    # ... so the sample's size matches the recorded probabilities, within four binomial standard deviations.
    expected = math.fsum(p for p in probabilities if p is not None)
    spread = math.sqrt(math.fsum(p * (1 - p) for p in probabilities if p is not None))
    assert abs(len(sampled) - expected) <= 4 * spread + 1, (len(sampled), expected, spread)
    assert len(sampled) < SHARE * len(verdicts) - 4 * math.sqrt(len(verdicts) * SHARE * (1 - SHARE))
    # Every drawn verdict, and only those, went to the reviewers as an audit sample.
    assert set(reviews) == sampled


async def test_an_audit_sample_whose_label_never_comes_is_counted_as_expired(
    kafka_bootstrap: str, tmp_path: Path, sha_judge: dict[str, object]
) -> None:
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "expiry",
        judge=sha_judge,
        policy={"audit_share": SHARE, "audit_uncertain_share": SHARE},
        audit={**ONE_WINDOW, "join_retention_s": RETENTION_S},
        scores={**SNAPSHOTS, "bootstrap": 10},
    )
    prefix = settings.topics.prefix
    pairs = [_pair(prefix, i, challenger_wins=i % 2 == 0) for i in range(24)]
    # Known before it is judged (the draw hashes the pair id): this pair will be an audit sample. Its label
    # comes before the pair itself; another sample's label comes after its decision, before the sweep.
    early = next(p for p in pairs if drawn(p.pair_id, SHARE))
    labels_topic = settings.topics.name("labels")
    with running_worker(settings, tmp_path / "worker.log"):
        await produce_raw(
            kafka_bootstrap, labels_topic, [_label(early.pair_id, early.candidates[0].candidate_id)], keyed=True
        )
        await produce_raw(kafka_bootstrap, settings.topics.name("pairs"), [encode(p) for p in pairs], keyed=True)
        finals = await _final_records(settings, {p.pair_id for p in pairs})
        sampled = {r.pair_id for r in _verdicts(finals) if r.audit_sample}
        late = next(r for r in _verdicts(finals) if r.audit_sample and r.pair_id != early.pair_id)
        await produce_raw(kafka_bootstrap, labels_topic, [_label(late.pair_id, late.candidates[1])], keyed=True)
        late_sent = time.monotonic()
        # Every drawn pair (and any review pair) waits for a label; all but the two labelled ones expire.
        reviews = [r for r in finals.values() if r.outcome == "review"]
        missing = len(sampled) + len(reviews) - 2
        await _boards(settings, lambda b: b.expired >= missing and b.labels >= 2)
        # The late label's entry is swept one retention after the label joined it: give the sweep that
        # long (and a tick) to count it, wrongly; the read ends early only if it does.
        over = max(3.0, late_sent + RETENTION_S + 3 - time.monotonic())
        boards = await _boards(settings, lambda b: b.expired > missing, timeout=over)
    assert early.pair_id in sampled, "the draw was not the one the pair id predicts"
    unsampled = [r for r in _verdicts(finals) if not r.audit_sample]
    assert unsampled, "every pair was drawn: nothing shows that unsampled pairs are not counted as expired"
    assert all(r.inclusion_probability == SHARE for r in _verdicts(finals))
    final = _basis(boards[-1])
    # Every audit sample without a label, and nothing else (unsampled verdicts are forgotten uncounted).
    assert (final.expired, final.pending, final.labels) == (missing, 0, 2), final
    assert final.pairs == len(pairs)
    # Before the sweep, the same samples were pending.
    waiting = [_basis(s) for s in boards if _basis(s).expired == 0 and _basis(s).labels == 2]
    assert waiting, [(_basis(s).labels, _basis(s).pending, _basis(s).expired) for s in boards]
    assert waiting[-1].pending == missing


def _kappa(first: list[int], second: list[int]) -> float:
    """Cohen's kappa of two raters' labels (0 or 1), written out here rather than taken from the product."""
    n = len(first)
    observed = sum(a == b for a, b in zip(first, second, strict=True)) / n
    chance = sum((first.count(c) / n) * (second.count(c) / n) for c in (0, 1))
    return (observed - chance) / (1 - chance)


async def test_two_reviewers_labels_give_the_human_ceiling_once_per_pair(
    kafka_bootstrap: str, tmp_path: Path, sha_judge: dict[str, object]
) -> None:
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "ceiling",
        judge=sha_judge,
        policy={"audit_share": 1.0, "audit_uncertain_share": 1.0, "audit_double_share": 1.0},
        audit=ONE_WINDOW,
        scores={**SNAPSHOTS, "bootstrap": 10},
        worker={"log_level": "INFO"},
    )
    prefix = settings.topics.prefix
    pairs = [_pair(prefix, i, challenger_wins=i % 2 == 0) for i in range(20)]
    ids = [p.pair_id for p in pairs]
    # Where the first reviewer named the champion, the second names the challenger on these four: people
    # then prefer the challenger in 10 of 20 pairs by the first labels, in 14 by the second.
    disagree = {ids[0], ids[2], ids[4], ids[6]}
    labels_topic = settings.topics.name("labels")
    log_path = tmp_path / "worker.log"
    with running_worker(settings, log_path):
        await produce_raw(kafka_bootstrap, settings.topics.name("pairs"), [encode(p) for p in pairs], keyed=True)
        finals = await _final_records(settings, set(ids))
        reviews = await _audit_reviews(settings, set(ids), len(ids))
        first = {pid: i % 2 for i, pid in enumerate(ids)}  # the candidate index (1: the challenger) named
        second = {pid: 1 - c if pid in disagree else c for pid, c in first.items()}

        def label(pair_id: str, index: int, reviewer: str) -> bytes:
            return _label(pair_id, finals[pair_id].candidates[index], reviewer)

        # The first labels, and every second opinion but the last pair's (held back until the end).
        held = ids[-1]
        await produce_raw(
            kafka_bootstrap,
            labels_topic,
            [label(pid, first[pid], "ana") for pid in ids] + [label(pid, second[pid], "bo") for pid in ids[:-1]],
            keyed=True,
        )
        await _audit_events(settings, lambda _, s: any(x.human_pairs >= len(ids) - 1 for x in s))
        # A redelivered second opinion, and a third reviewer's label: neither is a second opinion again.
        again = ids[1]
        await produce_raw(
            kafka_bootstrap,
            labels_topic,
            [label(again, second[again], "bo"), label(again, 1 - first[again], "cy")],
            keyed=True,
        )
        log = await wait_for_log(log_path, f"conflicting label for pair {again}", timeout=30)
        # The join takes one input at a time: anything the copies had caused is published before this one.
        await produce_raw(kafka_bootstrap, labels_topic, [label(held, second[held], "bo")], keyed=True)
        _, snapshots = await _audit_events(settings, lambda _, s: any(x.human_pairs >= len(ids) for x in s))
        await _boards(settings, lambda b: b.labels >= len(ids))
        # Had a second opinion moved the scoreboard, it would show within a few snapshot ticks.
        boards = await _boards(settings, lambda b: b.labels > len(ids), timeout=3)
    assert f"duplicate label for pair {again}" in log, log[-3000:]
    records = _verdicts(finals)
    assert len(records) == len(ids), Counter(r.outcome for r in finals.values())
    assert all(r.audit_sample and r.inclusion_probability == 1.0 for r in records)
    # Every audit sample asked for two reviewers.
    assert {r.reviews_wanted for r in reviews.values()} == {2}
    assert set(reviews) == set(ids)

    (series,) = {s.series for s in snapshots}
    latest: AuditSnapshot = max(snapshots, key=lambda s: (s.human_pairs, s.published_at))
    assert latest.human_pairs == len(ids), "a second opinion was counted twice (or missed)"
    assert latest.human_agreement == pytest.approx((len(ids) - len(disagree)) / len(ids))
    assert latest.human_kappa == pytest.approx(_kappa([first[i] for i in ids], [second[i] for i in ids]))
    assert latest.human_labels == len(ids)  # the judge is compared with the first label only
    assert series == latest.series

    # The scoreboard counted one label per pair (the first), never the second opinions.
    basis = _basis(boards[-1])
    assert (basis.labels, basis.pending, basis.expired) == (len(ids), 0, 0), basis
    assert boards[-1].unweighted_labels == 0
    # Every pair labelled at probability 1: the human rate is the first reviewer's share for the challenger.
    assert basis.rate == pytest.approx(sum(first.values()) / len(ids))
