"""The drift audit's pure logic: decision records from real decisions, the label join, window sums, guards."""

from __future__ import annotations

import dataclasses
import json
import random
from datetime import UTC, datetime

import pytest

from pairjudge.agents.audit import (
    KNOWN_LABEL_REVIEWER,
    ConfidenceHistogram,
    GuardBounds,
    JoinEntry,
    SeriesWindow,
    WindowStats,
    findings,
    grid_bin,
    on_label,
    on_record,
    record_for,
    threshold_snapshot,
    window_start,
)
from pairjudge.agents.core import judge_pair, resolve_tiebreak
from pairjudge.agents.policy import Policy
from pairjudge.agents.prompts import template_hash
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.agents.stats import (
    calibrate_threshold,
    cohen_kappa,
    expected_calibration_error,
    kappa_interval,
)
from pairjudge.schemas import DEFAULT_TIEBREAK_WEIGHTS, TIE, HumanLabel, KnownLabel, PairMetadata, TieBreakRequest
from pairjudge.schemas.audit import AuditObservation, AuditSeries, DecisionRecord
from tests.unit.factories import FIRST_ID, SECOND_ID, make_pair, per_order, tiebreak_reply, tone_reply

SERIES = AuditSeries(judge_provider="scripted", judge_model="m", prompt_template_hash="h", rubric="tone_style")


def label(winner: str, pair_id: str = "pair-0001-factory", reviewer: str = "ana") -> HumanLabel:
    return HumanLabel(pair_id=pair_id, winner=winner, reviewer=reviewer)


def record(
    *,
    pair_id: str = "pair-0001-factory",
    stage: str = "primary",
    outcome: str = "verdict",
    winner: str | None = FIRST_ID,
    confidence: float | None = 0.9,
    **extra: object,
) -> DecisionRecord:
    return DecisionRecord.model_validate(
        {
            "pair_id": pair_id,
            "series": SERIES,
            "stage": stage,
            "outcome": outcome,
            "auto_decided": outcome == "verdict",
            "candidates": (FIRST_ID, SECOND_ID),
            "judge_winner": winner,
            "confidence": confidence,
            **extra,
        }
    )


# --- records from real decisions --------------------------------------------------------------------


async def test_a_verdict_records_its_winner_positions_and_series() -> None:
    pair = make_pair(outputs=("a much longer first output than the other one", "short"))
    judge = ScriptedJudge(per_order(pair, tone_reply("A", confidence=0.8), tone_reply("B", confidence=0.9)))
    decision = await judge_pair(pair, judge, Policy())
    rec = record_for(decision, pair)
    assert rec is not None
    assert (rec.stage, rec.outcome, rec.auto_decided, rec.judge_winner) == ("primary", "verdict", True, FIRST_ID)
    assert rec.confidence == pytest.approx(0.85)
    # AB: A won (the first candidate, shown first); BA: B won (the same candidate, shown second).
    assert (rec.decisive_orderings, rec.position_a_wins, rec.flip, rec.both_valid) == (2, 1, False, True)
    assert rec.longer == "first"
    assert rec.series.rubric == "tone_style"
    assert rec.series.experiment_id == "exp-tone-42"
    assert rec.series.prompt_template_hash == template_hash("tone_style", datamark=True)  # Policy.datamark
    assert rec.series.judge_model == judge.identity.model


async def test_a_position_flip_records_the_tiebreak_and_the_bias() -> None:
    pair = make_pair()
    judge = ScriptedJudge(per_order(pair, tone_reply("A"), tone_reply("A")))  # always position A
    decision = await judge_pair(pair, judge, Policy())
    rec = record_for(decision, pair)
    assert rec is not None
    assert (rec.outcome, rec.reason, rec.flip, rec.auto_decided, rec.judge_winner) == (
        "tiebreak",
        "position_inconsistent",
        True,
        False,
        None,
    )
    assert (rec.decisive_orderings, rec.position_a_wins) == (2, 2)


async def test_under_the_kappa_guard_the_record_keeps_the_would_be_winner() -> None:
    # Agreement with humans is still measured while automation is paused.
    pair = make_pair()
    judge = ScriptedJudge(per_order(pair, tone_reply("B", confidence=0.9), tone_reply("A", confidence=0.9)))
    decision = await judge_pair(pair, judge, Policy(kappa_guard_tripped=True))
    rec = record_for(decision, pair)
    assert rec is not None
    assert (rec.outcome, rec.reason, rec.auto_decided, rec.judge_winner) == ("review", "kappa_guard", False, SECOND_ID)


async def test_a_tiebreak_stage_record_counts_in_the_primary_judges_series() -> None:
    pair = make_pair()
    primary = ScriptedJudge(per_order(pair, tone_reply("A"), tone_reply("A")))
    first = await judge_pair(pair, primary, Policy())
    assert isinstance(first.outcome, TieBreakRequest)
    all_a = {c.name: "A" for c in DEFAULT_TIEBREAK_WEIGHTS.criteria}
    all_b = {c.name: "B" for c in DEFAULT_TIEBREAK_WEIGHTS.criteria}
    resolver = ScriptedJudge(per_order(pair, tiebreak_reply(all_a), tiebreak_reply(all_b)))
    second = await resolve_tiebreak(first.outcome, resolver, Policy())
    rec = record_for(second, first.outcome)
    assert rec is not None
    assert (rec.stage, rec.outcome, rec.auto_decided, rec.judge_winner) == ("tiebreak", "verdict", True, FIRST_ID)
    primary_rec = record_for(first, pair)
    assert primary_rec is not None
    assert rec.series == primary_rec.series  # not the tie-break template's hash
    assert rec.decisive_orderings == 0  # position statistics describe the primary judge only


# --- the join -----------------------------------------------------------------------------------------


def kinds(observations: list[AuditObservation]) -> list[str]:
    return [o.kind for o in observations]


def test_a_label_before_its_verdict_is_kept_and_joined_when_the_verdict_comes() -> None:
    entry, out, outcome = on_label(JoinEntry(), label(FIRST_ID), now=1.0)
    assert (out, outcome) == ([], "kept")
    entry, out = on_record(entry, record(), now=2.0)
    assert kinds(out) == ["decision", "labelled"]
    assert out[1].label is not None
    assert out[1].label.winner == FIRST_ID
    assert entry.joined


def test_a_verdict_before_its_label_joins_when_the_label_comes() -> None:
    entry, out = on_record(JoinEntry(), record(), now=1.0)
    assert kinds(out) == ["decision"]
    entry, out, outcome = on_label(entry, label(SECOND_ID), now=2.0)
    assert (kinds(out), outcome) == (["labelled"], "joined")


def test_redelivered_records_and_duplicate_labels_are_counted_once() -> None:
    entry, _ = on_record(JoinEntry(), record(), now=1.0)
    entry, again = on_record(entry, record(), now=2.0)
    assert again == []
    entry, _, _ = on_label(entry, label(FIRST_ID), now=3.0)
    entry, out, outcome = on_label(entry, label(FIRST_ID), now=4.0)
    assert (out, outcome, entry.extra_labels, entry.conflicting_labels) == ([], "duplicate", 1, 0)
    entry, out, outcome = on_label(entry, label(SECOND_ID, reviewer="bo"), now=5.0)
    assert (out, outcome, entry.extra_labels, entry.conflicting_labels) == ([], "conflicting", 2, 1)
    assert entry.label is not None
    assert entry.label.winner == FIRST_ID


def test_a_label_naming_neither_candidate_of_a_decided_pair_is_unjoinable() -> None:
    entry, _ = on_record(JoinEntry(), record(), now=1.0)
    after, out, outcome = on_label(entry, label("someone-else"), now=2.0)
    assert (after, out, outcome) == (entry, [], "unjoinable")


def test_a_label_kept_before_its_decision_that_names_neither_candidate_is_dropped_not_compared() -> None:
    entry, _, outcome = on_label(JoinEntry(), label("someone-else"), now=1.0)
    assert outcome == "kept"
    entry, out = on_record(entry, record(), now=2.0)
    assert (kinds(out), entry.label, entry.unjoinable_labels) == (["decision"], None, 1)
    entry, out, outcome = on_label(entry, label(SECOND_ID), now=3.0)  # a valid label still joins
    assert (kinds(out), outcome) == (["labelled"], "joined")


def test_an_escalated_pair_is_joined_as_a_human_decision_but_never_compared() -> None:
    entry, out = on_record(JoinEntry(), record(outcome="review", winner=None, reason="ordering_invalid"), 1.0)
    entry, joined, outcome = on_label(entry, label(FIRST_ID), now=2.0)
    assert (kinds(out), kinds(joined), outcome) == (["decision"], ["labelled"], "joined")
    stats = WindowStats()
    for observation in out + joined:
        stats.add(observation)
    # The person decided the pair; the judge gave no answer to compare, so kappa and calibration see nothing.
    assert (stats.human_decided, stats.labels, stats.confusion) == (1, 0, {})
    window = SeriesWindow(SERIES, 0.0, 60.0, 0, stats)
    assert SeriesWindow.from_bytes(window.to_bytes()).stats.human_decided == 1


def test_a_tiebroken_pair_counts_both_stages_and_joins_the_final_one() -> None:
    entry, out1 = on_record(JoinEntry(), record(outcome="tiebreak", winner=None, reason="tie"), 1.0)
    entry, _, _ = on_label(entry, label(SECOND_ID), now=2.0)
    assert entry.final is None  # a tie-break request is not where the pair ends
    entry, out2 = on_record(entry, record(stage="tiebreak", winner=SECOND_ID), now=3.0)
    assert kinds(out1) + kinds(out2) == ["decision", "decision", "labelled"]


def test_a_pairs_own_known_label_joins_unless_a_human_came_first() -> None:
    entry, out = on_record(JoinEntry(), record(known_label=SECOND_ID), 1.0)
    assert kinds(out) == ["decision", "labelled"]
    assert out[1].label is not None
    assert out[1].label.reviewer == KNOWN_LABEL_REVIEWER
    entry, _, _ = on_label(JoinEntry(), label(FIRST_ID), now=1.0)
    entry, out = on_record(entry, record(known_label=SECOND_ID), 2.0)
    assert out[1].label is not None
    assert out[1].label.winner == FIRST_ID


def test_a_join_entry_survives_its_bytes() -> None:
    entry, _ = on_record(JoinEntry(), record(), now=1.0)
    entry, _, _ = on_label(entry, label(FIRST_ID), now=2.0)
    assert JoinEntry.from_bytes(entry.to_bytes()) == entry


# --- window sums ------------------------------------------------------------------------------------


def labelled(
    judge: str, human: str, confidence: float, *, longer: str | None = None, canary: bool = False
) -> AuditObservation:
    rec = record(winner=judge, confidence=confidence, longer=longer, canary=canary)
    return AuditObservation(kind="labelled", series=SERIES, record=rec, label=label(human))


def test_window_statistics_match_the_textbook_functions_on_the_same_labels() -> None:
    rng = random.Random(7)
    stats = WindowStats()
    judge_labels, human_labels, confidences, corrects = [], [], [], []
    for _ in range(300):
        judge = rng.choice([FIRST_ID, SECOND_ID])
        human = judge if rng.random() < 0.75 else rng.choice([FIRST_ID, SECOND_ID, "TIE"])
        confidence = round(rng.uniform(0.5, 1.0), 3)
        stats.add(labelled(judge, human, confidence))
        judge_labels.append("first" if judge == FIRST_ID else "second")
        human_labels.append({FIRST_ID: "first", SECOND_ID: "second", "TIE": "TIE"}[human])
        confidences.append(confidence)
        corrects.append(judge == human)
    snapshot = SeriesWindow(SERIES, 0.0, 60.0, 0, stats).snapshot(final=True)
    expected = kappa_interval(judge_labels, human_labels)
    assert expected is not None
    assert snapshot.human_labels == 300
    assert snapshot.cohen_kappa == pytest.approx(cohen_kappa(judge_labels, human_labels))
    assert snapshot.kappa_low == pytest.approx(expected.low)
    assert snapshot.kappa_high == pytest.approx(expected.high)
    assert snapshot.agreement == pytest.approx(sum(corrects) / 300)
    assert snapshot.ece == pytest.approx(expected_calibration_error(confidences, corrects))
    brier = sum((c - ok) ** 2 for c, ok in zip(confidences, corrects, strict=True)) / 300
    assert snapshot.brier == pytest.approx(brier)
    assert sum(b.count for b in snapshot.reliability) == 300


def test_length_preference_compares_the_judge_with_the_humans() -> None:
    stats = WindowStats()
    stats.add(labelled(FIRST_ID, FIRST_ID, 0.9, longer="first"))  # both chose the longer
    stats.add(labelled(FIRST_ID, SECOND_ID, 0.9, longer="first"))  # the judge chose the longer, humans not
    stats.add(labelled(SECOND_ID, SECOND_ID, 0.9, longer="first"))  # neither
    stats.add(labelled(FIRST_ID, "TIE", 0.9, longer="first"))  # a human tie says nothing about length
    snapshot = SeriesWindow(SERIES, 0.0, 60.0, 0, stats).snapshot(final=False)
    assert snapshot.judge_longer_win_rate == pytest.approx(2 / 3)
    assert snapshot.human_longer_win_rate == pytest.approx(1 / 3)


def test_canaries_have_their_own_accuracy_and_stay_out_of_kappa() -> None:
    stats = WindowStats()
    stats.add(labelled(FIRST_ID, FIRST_ID, 0.9, canary=True))
    stats.add(labelled(FIRST_ID, SECOND_ID, 0.9, canary=True))
    snapshot = SeriesWindow(SERIES, 0.0, 60.0, 0, stats).snapshot(final=False)
    assert (snapshot.canary_labels, snapshot.canary_accuracy, snapshot.human_labels) == (2, 0.5, 0)


def test_decision_rates() -> None:
    stats = WindowStats()
    for rec in (
        record(),
        record(outcome="tiebreak", winner=None, reason="position_inconsistent", flip=True, both_valid=True),
        record(outcome="tiebreak", winner=None, reason="tie", both_valid=True),
        record(outcome="review", winner=None, reason="ordering_invalid", calls=4, invalid_replies=3),
        record(stage="tiebreak", outcome="review", winner=None, reason="tiebreak_disagreement"),
        record(stage="tiebreak"),
    ):
        stats.add(AuditObservation(kind="decision", series=SERIES, record=rec))
    snapshot = SeriesWindow(SERIES, 0.0, 60.0, 0, stats).snapshot(final=False)
    assert (snapshot.pairs, snapshot.verdicts, snapshot.tiebreaks, snapshot.reviews) == (4, 2, 2, 2)
    assert snapshot.tiebreak_rate == 0.5
    assert snapshot.escalation_rate == 0.5
    assert snapshot.flip_rate == pytest.approx(1 / 2)  # of the two pairs with both orders valid
    assert snapshot.invalid_reply_rate == pytest.approx(3 / 4)


def test_a_series_window_survives_its_bytes() -> None:
    window = SeriesWindow(SERIES, 3600.0, 3600.0, 2)
    window.stats.add(labelled(FIRST_ID, SECOND_ID, 0.77, longer="second"))
    assert SeriesWindow.from_bytes(window.to_bytes()) == window


def test_stored_audit_state_is_byte_for_byte_what_it_was() -> None:
    """The shallow encodings (no asdict deep copy) write exactly the bytes changelogs already hold."""
    window = SeriesWindow(SERIES, 3600.0, 3600.0, 2)
    window.stats.add(labelled(FIRST_ID, SECOND_ID, 0.77, longer="second"))
    window.stats.alerts_raised.append("kappa_low")
    stats = window.stats
    body = json.loads(window.to_bytes())
    # outcome_counts, token_bins and stated_bins came later: left out while empty, so the bytes stay those an
    # older worker wrote and reads.
    later = ("outcome_counts", "token_bins", "stated_bins")
    before = {k: v for k, v in dataclasses.asdict(stats).items() if k not in later}
    assert body["stats"] == before
    deep = {**body, "stats": before}
    assert window.to_bytes() == json.dumps(deep, separators=(",", ":")).encode()
    histogram = ConfidenceHistogram()
    histogram.add(labelled(FIRST_ID, SECOND_ID, 0.77, longer="second"))
    expected = json.dumps(dataclasses.asdict(histogram), separators=(",", ":")).encode()
    assert histogram.to_bytes() == expected


def test_windows_are_aligned_tumbling_windows() -> None:
    at = datetime(2026, 12, 1, 10, 59, 59, tzinfo=UTC)
    assert window_start(at, 3600) == datetime(2026, 12, 1, 10, tzinfo=UTC).timestamp()
    assert (
        window_start(at.replace(hour=11, minute=0, second=0), 3600) == datetime(2026, 12, 1, 11, tzinfo=UTC).timestamp()
    )


# --- guards -----------------------------------------------------------------------------------------


def test_the_kappa_guard_waits_for_enough_labels_then_fires_once_per_window() -> None:
    window = SeriesWindow(SERIES, 0.0, 60.0, 0)
    bounds = GuardBounds(min_labels=10)
    for i in range(9):  # a judge at chance
        window.stats.add(labelled(FIRST_ID, FIRST_ID if i % 2 else SECOND_ID, 0.9))
    assert window.new_findings(bounds) == []
    window.stats.add(labelled(SECOND_ID, FIRST_ID, 0.9))
    fired = window.new_findings(bounds)
    assert [f.kind for f in fired][:1] == ["kappa_below_threshold"]
    assert fired[0].value < 0.7
    assert fired[0].threshold == 0.7
    window.stats.add(labelled(SECOND_ID, FIRST_ID, 0.9))
    assert window.new_findings(bounds) == []  # raised once per window


def test_a_judge_that_agrees_with_humans_trips_nothing() -> None:
    stats = WindowStats()
    for i in range(100):
        winner = FIRST_ID if i % 3 else SECOND_ID
        stats.add(labelled(winner, winner, 0.95))
    assert findings(stats, GuardBounds()) == []


def test_tiebreak_rate_above_a_fifth_raises_the_seed_002_alert() -> None:
    stats = WindowStats()
    bounds = GuardBounds(min_pairs=20)
    for i in range(30):
        outcome = "tiebreak" if i % 3 == 0 else "verdict"  # 10 of 30: a third
        rec = record(outcome=outcome, winner=None if outcome == "tiebreak" else FIRST_ID, reason=None)
        stats.add(AuditObservation(kind="decision", series=SERIES, record=rec))
    found = findings(stats, bounds)
    assert [f.kind for f in found] == ["tiebreak_rate_high"]
    assert found[0].value == pytest.approx(1 / 3)
    assert "recalibration" in found[0].message


def test_a_judge_answering_as_another_model_raises_an_alert() -> None:
    stats = WindowStats()
    stats.add(AuditObservation(kind="decision", series=SERIES, record=record(model_mismatch="other-model")))
    assert [f.kind for f in findings(stats, GuardBounds())] == ["judge_model_mismatch"]


async def test_a_canary_records_its_known_answer() -> None:
    pair = make_pair(human_label=KnownLabel(winner=SECOND_ID), metadata=PairMetadata(traffic="canary"))
    judge = ScriptedJudge(per_order(pair, tone_reply("A"), tone_reply("B")))
    rec = record_for(await judge_pair(pair, judge, Policy()), pair)
    assert rec is not None
    assert (rec.canary, rec.known_label, rec.judge_winner) == (True, SECOND_ID, FIRST_ID)
    _, out = on_record(JoinEntry(), rec, now=1.0)
    stats = WindowStats()
    for observation in out:
        stats.add(observation)
    assert (stats.canary_labels, stats.canary_correct, stats.labels) == (1, 0, 0)


# --- the calibrated threshold -------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_the_histogram_calibrates_exactly_as_the_raw_confidences_do(seed: int) -> None:
    rng = random.Random(seed)
    histogram = ConfidenceHistogram()
    confidences, agrees = [], []
    for _ in range(600):
        # Some confidences sit exactly on grid points, and some a rounding error below or above one.
        confidence = rng.choice([rng.random(), round(rng.random(), 2), round(rng.random(), 2) - 1e-16])
        confidence = min(max(confidence, 0.0), 1.0)
        agree = rng.random() < 0.5 + confidence / 2  # informative: higher confidence, more agreement
        winner = FIRST_ID
        histogram.add(labelled(winner, winner if agree else SECOND_ID, confidence))
        confidences.append(confidence)
        agrees.append(agree)
    assert sum(histogram.counts) == 600
    from_histogram = histogram.guarantee(target=0.85, risk=0.1, min_labels=100)
    from_raw = calibrate_threshold(confidences, agrees, target=0.85, risk=0.1, min_labels=100)
    assert from_histogram == from_raw


def test_grid_bins_follow_float_comparison_with_the_grid() -> None:
    for confidence in (0.0, 0.7, 0.69999999999, 0.7000000000001, (0.6 + 0.8) / 2, 0.29, 1.0, 0.995):
        k = grid_bin(confidence)
        assert confidence >= k / 100
        assert k == 100 or confidence < (k + 1) / 100


def test_the_snapshot_reports_the_configured_threshold_until_one_is_calibrated() -> None:
    histogram = ConfidenceHistogram()
    for _ in range(30):
        histogram.add(labelled(FIRST_ID, FIRST_ID, 0.95))
    early = threshold_snapshot(histogram, configured=0.7, target=0.9, risk=0.1, min_labels=100)
    assert (early.source, early.threshold, early.labels) == ("configured", 0.7, 30)
    assert early.note is not None
    assert "too few labels" in early.note
    for i in range(300):  # a judge right 97% of the time above 0.9, at chance below 0.8
        confidence = 0.95 if i % 2 else 0.75
        agree = (i % 33 != 0) if confidence > 0.9 else (i % 4 < 2)
        histogram.add(labelled(FIRST_ID, FIRST_ID if agree else SECOND_ID, confidence))
    later = threshold_snapshot(histogram, configured=0.7, target=0.9, risk=0.1, min_labels=100)
    assert later.source == "calibrated"
    assert later.threshold is not None
    assert 0.75 < later.threshold <= 0.95  # the chance-level band stays below it
    assert later.coverage == pytest.approx(180 / 330)


# --- the calibrated threshold, applied ------------------------------------------------------------------


async def test_a_series_calibrated_threshold_raises_the_bar_for_that_series_only() -> None:
    pair = make_pair()
    judge = ScriptedJudge(per_order(pair, tone_reply("A", confidence=0.85), tone_reply("B", confidence=0.85)))
    plain = await judge_pair(pair, judge, Policy())
    record = record_for(plain, pair)
    assert record is not None
    assert plain.facts.outcome == "verdict"
    assert plain.facts.primary_threshold == 0.7
    raised = Policy(series_thresholds={record.series.key: 0.9})
    held = await judge_pair(pair, judge, raised)
    assert (held.facts.outcome, held.facts.reason, held.facts.primary_threshold) == ("tiebreak", "low_confidence", 0.9)
    other = Policy(series_thresholds={record.series.key + "-another": 0.9})
    assert (await judge_pair(pair, judge, other)).facts.outcome == "verdict"
    # A calibrated threshold never lowers the configured one.
    lowered = Policy(primary_confidence_threshold=0.9, series_thresholds={record.series.key: 0.5})
    assert (await judge_pair(pair, judge, lowered)).facts.primary_threshold == 0.9


def test_a_series_threshold_outside_0_1_is_refused() -> None:
    with pytest.raises(ValueError, match="must be within"):
        Policy(series_thresholds={"s": 1.5})


def test_calibration_never_certifies_a_threshold_below_the_configured_one() -> None:
    # Labels exist only for automatic verdicts (confidence >= 0.7): below it, the data says nothing.
    histogram = ConfidenceHistogram()
    for _ in range(150):
        histogram.add(labelled(FIRST_ID, FIRST_ID, 0.8))
    found = threshold_snapshot(histogram, configured=0.7, target=0.9, risk=0.1, min_labels=100)
    assert (found.source, found.threshold) == ("calibrated", 0.7)
    unclamped = histogram.guarantee(target=0.9, risk=0.1, min_labels=100)
    assert unclamped.threshold == 0.0  # what the walk alone would certify, on no evidence below 0.8


# --- the human ceiling: second opinions -------------------------------------------------------------


def audit_label(winner: str, reviewer: str, pair_id: str = "pair-0001-factory") -> HumanLabel:
    return HumanLabel(pair_id=pair_id, winner=winner, reviewer=reviewer, from_audit=True)


def test_a_second_reviewers_audit_label_is_a_second_opinion_counted_once() -> None:
    entry, _ = on_record(JoinEntry(), record(audit_sample=True), now=1.0)
    entry, out, outcome = on_label(entry, audit_label(FIRST_ID, "ana"), now=2.0)
    assert (kinds(out), outcome) == (["labelled"], "joined")
    entry, out, outcome = on_label(entry, audit_label(SECOND_ID, "bo"), now=3.0)
    assert (kinds(out), outcome) == (["second_label"], "second_opinion")
    assert out[0].first_label is not None
    assert out[0].label is not None
    assert (out[0].first_label.reviewer, out[0].label.reviewer) == ("ana", "bo")
    assert (entry.extra_labels, entry.conflicting_labels) == (0, 0)  # a measurement, not a conflict
    # bo's label redelivered: a duplicate of bo's own label, not a second second opinion.
    entry, out, outcome = on_label(entry, audit_label(SECOND_ID, "bo"), now=4.0)
    assert (out, outcome, entry.extra_labels, entry.conflicting_labels) == ([], "duplicate", 1, 0)
    # A third reviewer is not counted either (one second opinion per pair); it disagrees with the first.
    entry, out, outcome = on_label(entry, audit_label(SECOND_ID, "cy"), now=5.0)
    assert (out, outcome, entry.extra_labels, entry.conflicting_labels) == ([], "conflicting", 2, 1)
    assert JoinEntry.from_bytes(entry.to_bytes()) == entry


def test_the_same_reviewers_label_again_is_no_second_opinion() -> None:
    entry, _ = on_record(JoinEntry(), record(audit_sample=True), now=1.0)
    entry, _, _ = on_label(entry, audit_label(FIRST_ID, "ana"), now=2.0)
    entry, out, outcome = on_label(entry, audit_label(FIRST_ID, "ana"), now=3.0)
    assert (out, outcome, entry.second_label) == ([], "duplicate", None)
    entry, out, outcome = on_label(entry, audit_label(SECOND_ID, "ana"), now=4.0)  # a change of mind
    assert (out, outcome, entry.second_label) == ([], "conflicting", None)
    # bo still gives the pair its second opinion afterwards.
    entry, out, outcome = on_label(entry, audit_label(FIRST_ID, "bo"), now=5.0)
    assert (kinds(out), outcome) == (["second_label"], "second_opinion")


def test_a_known_label_or_a_label_outside_the_audit_is_no_second_opinion() -> None:
    entry, out = on_record(JoinEntry(), record(known_label=FIRST_ID, audit_sample=True), now=1.0)
    assert kinds(out) == ["decision", "labelled"]
    entry, out, outcome = on_label(entry, audit_label(SECOND_ID, "ana"), now=2.0)
    assert (out, outcome, entry.second_label) == ([], "conflicting", None)  # the known label came first
    entry, _ = on_record(JoinEntry(), record(), now=1.0)
    entry, _, _ = on_label(entry, label(FIRST_ID, reviewer="ana"), now=2.0)  # an escalated pair's review
    entry, out, outcome = on_label(entry, audit_label(FIRST_ID, "bo"), now=3.0)
    assert (out, outcome) == ([], "duplicate")
    entry, _ = on_record(JoinEntry(), record(), now=1.0)
    entry, _, _ = on_label(entry, audit_label(FIRST_ID, "ana"), now=2.0)
    entry, out, outcome = on_label(entry, audit_label(FIRST_ID, KNOWN_LABEL_REVIEWER), now=3.0)
    assert (out, outcome) == ([], "duplicate")


def test_two_labels_before_the_decision_join_then_compare_once() -> None:
    entry, out, outcome = on_label(JoinEntry(), audit_label(FIRST_ID, "ana"), now=1.0)
    assert (out, outcome) == ([], "kept")
    entry, out, outcome = on_label(entry, audit_label(TIE, "bo"), now=2.0)
    assert (out, outcome) == ([], "second_opinion")
    entry, out = on_record(entry, record(audit_sample=True), now=3.0)
    assert kinds(out) == ["decision", "labelled", "second_label"]
    entry, out = on_record(entry, record(audit_sample=True), now=4.0)  # redelivered: nothing again
    assert out == []
    assert entry.second_joined


def test_a_first_label_naming_neither_candidate_gives_way_to_the_second() -> None:
    entry, _, _ = on_label(JoinEntry(), audit_label("someone-else", "ana"), now=1.0)
    entry, _, _ = on_label(entry, audit_label(SECOND_ID, "bo"), now=2.0)
    entry, out = on_record(entry, record(), now=3.0)
    assert kinds(out) == ["decision", "labelled"]
    assert out[1].label is not None
    assert (out[1].label.reviewer, entry.unjoinable_labels, entry.second_label) == ("bo", 1, None)


def test_an_entry_without_a_second_opinion_keeps_its_bytes() -> None:
    entry, _ = on_record(JoinEntry(), record(), now=1.0)
    entry, _, _ = on_label(entry, label(FIRST_ID), now=2.0)
    body = json.loads(entry.to_bytes())
    assert "second_label" not in body
    assert list(body)[-1] == "updated_at"
    assert JoinEntry.updated_at_of(entry.to_bytes()) == 2.0


def human_pair(first: str, second: str, judge: str = FIRST_ID) -> AuditObservation:
    return AuditObservation(
        kind="second_label",
        series=SERIES,
        record=record(winner=judge, audit_sample=True),
        label=audit_label(second, "bo"),
        first_label=audit_label(first, "ana"),
    )


def test_the_window_counts_human_pairs_apart_with_their_own_kappa() -> None:
    rng = random.Random(11)
    stats = WindowStats()
    firsts, seconds = [], []
    names = {FIRST_ID: "first", SECOND_ID: "second", TIE: "TIE"}
    for _ in range(120):
        a = rng.choice([FIRST_ID, SECOND_ID, TIE])
        b = a if rng.random() < 0.6 else rng.choice([FIRST_ID, SECOND_ID, TIE])
        stats.add(human_pair(a, b))
        firsts.append(names[a])
        seconds.append(names[b])
    stats.add(labelled(FIRST_ID, FIRST_ID, 0.9))
    # The judge's figures see only the labelled observation; the ceiling only the human pairs.
    assert (stats.labels, stats.human_pairs, stats.pairs) == (1, 120, 0)
    snap = SeriesWindow(SERIES, 0.0, 60.0, 0, stats).snapshot(final=True, bounds=GuardBounds())
    assert snap.human_pairs == 120
    assert snap.human_kappa == pytest.approx(cohen_kappa(firsts, seconds))
    assert snap.human_agreement == pytest.approx(sum(a == b for a, b in zip(firsts, seconds, strict=True)) / 120)
    assert (snap.guard_mode, snap.guard_kappa_min, snap.guard_note) == ("absolute", 0.7, None)
    window = SeriesWindow(SERIES, 0.0, 60.0, 0, stats)
    assert SeriesWindow.from_bytes(window.to_bytes()).stats == stats
    stored_before = {**json.loads(window.to_bytes()), "stats": {"pairs": 3}}  # a window stored before
    assert SeriesWindow.from_bytes(json.dumps(stored_before).encode()).stats.human_pairs == 0


def ceiling_window(human_agree: int, human_pairs: int, judge_agree: int, labels: int = 100) -> WindowStats:
    """Judge and people over first/second winners: ``judge_agree`` of ``labels`` and ``human_agree`` of
    ``human_pairs`` agree; the rest disagree, so kappa follows agreement."""
    stats = WindowStats()
    for i in range(labels):
        winner = FIRST_ID if i % 2 else SECOND_ID
        other = SECOND_ID if i % 2 else FIRST_ID
        stats.add(labelled(winner, winner if i < judge_agree else other, 0.9))
    for i in range(human_pairs):
        winner = FIRST_ID if i % 2 else SECOND_ID
        other = SECOND_ID if i % 2 else FIRST_ID
        stats.add(human_pair(winner, winner if i < human_agree else other))
    return stats


def test_the_relative_guard_holds_the_judge_to_a_share_of_the_human_ceiling() -> None:
    relative = GuardBounds(guard_mode="relative", relative_kappa_ratio=0.9, min_human_pairs=30)
    # People agree 95% (kappa 0.9): the judge at 88% (kappa 0.76) passes 0.7 but not 0.9 x 0.9 = 0.81.
    stats = ceiling_window(human_agree=38, human_pairs=40, judge_agree=88)
    assert [f.kind for f in findings(stats, GuardBounds())][:1] != ["kappa_below_threshold"]
    fired = findings(stats, relative)
    assert fired[0].kind == "kappa_below_threshold"
    assert fired[0].threshold == pytest.approx(0.81)
    assert "human-human kappa 0.900 over 40 pairs" in fired[0].message
    # People agree 70% (kappa 0.4): the judge at 75% (kappa 0.5) trips the absolute 0.7, not 0.9 x 0.4.
    stats = ceiling_window(human_agree=28, human_pairs=40, judge_agree=75)
    assert findings(stats, GuardBounds())[0].kind == "kappa_below_threshold"
    assert [f.kind for f in findings(stats, relative)][:1] != ["kappa_below_threshold"]
    snap = SeriesWindow(SERIES, 0.0, 60.0, 0, stats).snapshot(final=True, bounds=relative)
    assert (snap.guard_mode, snap.guard_note) == ("relative", None)
    assert snap.guard_kappa_min == pytest.approx(0.36)


def test_the_relative_guard_falls_back_to_the_absolute_floor_without_enough_human_pairs() -> None:
    relative = GuardBounds(guard_mode="relative", min_human_pairs=30)
    stats = ceiling_window(human_agree=20, human_pairs=29, judge_agree=75)  # people at chance, too few pairs
    fired = findings(stats, relative)
    assert fired[0].kind == "kappa_below_threshold"
    assert fired[0].threshold == 0.7
    assert "only 29 pairs have two people's labels, 30 are needed" in fired[0].message
    snap = SeriesWindow(SERIES, 0.0, 60.0, 0, stats).snapshot(final=True, bounds=relative)
    assert (snap.guard_mode, snap.guard_kappa_min) == ("relative", 0.7)
    assert snap.guard_note is not None
    assert snap.guard_note.startswith("judged against the fixed floor 0.70: ")
    # No pair labelled twice at all: the words the audit page and the report show.
    alone = ceiling_window(human_agree=0, human_pairs=0, judge_agree=75)
    snap = SeriesWindow(SERIES, 0.0, 60.0, 0, alone).snapshot(final=True, bounds=relative)
    assert snap.guard_note == "judged against the fixed floor 0.70: no pair has two people's labels yet"
    # An undefined human kappa (every pair one label throughout) falls back as well, and says why.
    undefined = ceiling_window(human_agree=0, human_pairs=0, judge_agree=75)
    for _ in range(40):
        undefined.add(human_pair(FIRST_ID, FIRST_ID))
    fired = findings(undefined, relative)
    assert fired[0].threshold == 0.7
    assert "cannot be measured" in fired[0].message
