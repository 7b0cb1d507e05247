"""The join's deltas give the series the same sums, and so the same snapshots, as one event per observation.

Issue 27 moved the series' counting off the per-pair path: the join sums its observations per series and
window (``agents.audit.deltas``) and the series merges one delta per flush. These tests hold the new path to
the old one on the same observations: random decisions, labels, second opinions, canaries, rules, dimension
facts and guide rules, cut into flushes at random, each delta through its wire bytes (``AuditDelta`` and the
codec), then compared snapshot by snapshot with the windows that took the same observations one by one.
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pairjudge.agents.audit import (
    ConfidenceHistogram,
    DeltaBuffer,
    SeriesDelta,
    SeriesWindow,
    WindowStats,
    window_start,
)
from pairjudge.agents.audit.deltas import DELTA_FIELDS
from pairjudge.agents.audit.guards import GuardBounds
from pairjudge.schemas import TIE, HumanLabel
from pairjudge.schemas.audit import AuditDelta, AuditObservation, AuditSeries, DecisionRecord
from pairjudge.streams.kafka.codecs import decode, encode
from tests.unit.factories import FIRST_ID, SECOND_ID

WINDOW_S = 600.0
T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
SERIES = [
    AuditSeries(judge_provider="scripted", judge_model=m, prompt_template_hash="h", rubric="tone_style")
    for m in ("small", "large")
]
DIMENSIONS = ("clarity", "tone", "accuracy")
RULES = ("0a1b2c3d:1", "0a1b2c3d:2")


def _record(rng: random.Random, i: int) -> DecisionRecord:
    stage = rng.choice(["primary", "primary", "primary", "tiebreak"])
    outcome = rng.choice(["verdict", "verdict", "verdict", "tiebreak", "review"])
    if stage == "tiebreak" and outcome == "tiebreak":
        outcome = "verdict"
    winner = rng.choice([FIRST_ID, SECOND_ID, TIE]) if outcome == "verdict" else None
    return DecisionRecord.model_validate(
        {
            "pair_id": f"pair-{i:05d}",
            "series": rng.choice(SERIES),
            "stage": stage,
            "outcome": outcome,
            "auto_decided": outcome == "verdict",
            "candidates": (FIRST_ID, SECOND_ID),
            "judge_winner": winner,
            "confidence": round(rng.random(), 3) if winner is not None and rng.random() < 0.9 else None,
            "flip": rng.random() < 0.2,
            "both_valid": rng.random() < 0.8,
            "calls": rng.randint(2, 4),
            "invalid_replies": rng.choice([0, 0, 0, 1]),
            "decisive_orderings": rng.randint(0, 2),
            "position_a_wins": rng.randint(0, 1),
            "longer": rng.choice([None, "first", "second"]),
            "model_mismatch": rng.choice([None] * 9 + ["other-model"]),
            "canary": rng.random() < 0.1,
            "rule": rng.random() < 0.03,
            "dimensions": [
                {"name": d, "orders_disagree": rng.random() < 0.3, "winner": rng.choice([None, "first", "second", TIE])}
                for d in DIMENSIONS
                if rng.random() < 0.7
            ],
            "rules_cited": [r for r in RULES if rng.random() < 0.3],
        }
    )


def _observations(seed: int, n: int = 400) -> list[AuditObservation]:
    """A stream of observations over a few windows, as the join emits them."""
    rng = random.Random(seed)
    out: list[AuditObservation] = []
    for i in range(n):
        record = _record(rng, i)
        at = T0 + timedelta(seconds=i * 4.5)  # 30 minutes: three windows
        kind = rng.choice(["decision", "decision", "labelled", "second_label"])
        label = HumanLabel(pair_id=record.pair_id, winner=rng.choice([FIRST_ID, SECOND_ID, TIE]), reviewer="ana")
        first = HumanLabel(pair_id=record.pair_id, winner=rng.choice([FIRST_ID, SECOND_ID, TIE]), reviewer="bo")
        out.append(
            AuditObservation(
                kind=kind,
                series=record.series,
                record=record,
                label=None if kind == "decision" else label,
                first_label=first if kind == "second_label" else None,
                observed_at=at,
            )
        )
    return out


def _one_by_one(
    observations: list[AuditObservation],
) -> tuple[dict[bytes, SeriesWindow], dict[str, ConfidenceHistogram]]:
    """The series agent as it was: every observation added to its window and, labelled, to the histogram."""
    windows: dict[bytes, SeriesWindow] = {}
    histograms: dict[str, ConfidenceHistogram] = {}
    for o in observations:
        start = window_start(o.observed_at, WINDOW_S)
        key = f"{o.series.key}#{int(start)}".encode()
        window = windows.setdefault(key, SeriesWindow(o.series, start, WINDOW_S, 0))
        window.stats.add(o)
        if o.kind == "labelled":
            histograms.setdefault(o.series.key, ConfidenceHistogram()).add(o)
    return windows, histograms


def _by_deltas(
    observations: list[AuditObservation], rng: random.Random
) -> tuple[dict[bytes, SeriesWindow], dict[str, ConfidenceHistogram], int]:
    """The join's buffer, flushed at random points; each delta through its bytes; merged as the series does."""
    windows: dict[bytes, SeriesWindow] = {}
    histograms: dict[str, ConfidenceHistogram] = {}
    buffer = DeltaBuffer(WINDOW_S)
    sent = 0

    def flush() -> None:
        nonlocal buffer, sent
        for delta in buffer.deltas():
            wire = decode(AuditDelta, encode(delta.to_event()), max_bytes=256_000)
            received = SeriesDelta.from_event(wire)
            key = f"{received.series.key}#{int(received.start)}".encode()
            window = windows.setdefault(key, SeriesWindow(received.series, received.start, received.size, 0))
            window.stats.merge(received.stats)
            if not received.calibration.empty:
                histograms.setdefault(received.series.key, ConfidenceHistogram()).merge(received.calibration)
            sent += 1
        buffer = DeltaBuffer(WINDOW_S)

    for o in observations:
        buffer.add(o)
        if rng.random() < 0.05:
            flush()
    flush()
    return windows, histograms, sent


def _close(a: Any, b: Any, where: str = "") -> None:
    """Equal, floats to 1e-12 relative (sums added in another order differ in their last bits)."""
    if isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


@pytest.mark.parametrize("seed", range(20))
def test_snapshots_from_deltas_equal_snapshots_one_observation_at_a_time(seed: int) -> None:
    observations = _observations(seed)
    before, histograms_before = _one_by_one(observations)
    after, histograms_after, sent = _by_deltas(observations, random.Random(seed + 1000))
    assert sent < len(observations) / 3  # the point of it: far fewer events than observations
    assert before.keys() == after.keys()
    bounds = GuardBounds()
    for key, window in before.items():
        # Everything but the moment each was taken.
        old = window.snapshot(final=True, bounds=bounds).model_dump(mode="json", exclude={"published_at"})
        new = after[key].snapshot(final=True, bounds=bounds).model_dump(mode="json", exclude={"published_at"})
        _close(old, new, key.decode())
        assert after[key].new_findings(bounds) == window.new_findings(bounds)
    assert {k: (h.counts, h.agrees) for k, h in histograms_before.items()} == {
        k: (h.counts, h.agrees) for k, h in histograms_after.items()
    }


def test_the_sums_are_not_vacuous() -> None:
    """The comparison above means something only if the observations exercise every kind of sum."""
    windows, histograms = _one_by_one(_observations(0))
    total = WindowStats()
    for w in windows.values():
        total.merge(w.stats)
    sums = {
        "pairs": total.pairs,
        "tiebreaks": total.tiebreaks,
        "reviews": total.reviews,
        "flips": total.flips,
        "labels": total.labels,
        "human_pairs": total.human_pairs,
        "canary_labels": total.canary_labels,
        "model_mismatches": total.model_mismatches,
        "length_decided": total.length_decided,
        "dimensions": len(total.dimension_counts),
        "rules": len(total.rule_counts),
        "calibrated": total.calibrated_count(),
    }
    assert all(sums.values()), sums
    assert any(any(h.counts) for h in histograms.values())


def test_merge_adds_every_sum_and_leaves_the_windows_own_bookkeeping() -> None:
    observations = _observations(3, 200)
    whole = WindowStats()
    for o in observations:
        whole.add(o)
    merged = WindowStats(alerts_raised=["kappa_below_threshold"], final_published=True)
    half = len(observations) // 2
    for part in (observations[:half], observations[half:]):
        delta = WindowStats(alerts_raised=["tiebreak_rate_high"], final_published=False)
        for o in part:
            delta.add(o)
        merged.merge(delta)
    assert merged.alerts_raised == ["kappa_below_threshold"]
    assert merged.final_published is True
    for name in DELTA_FIELDS:  # every sum, including those as_json leaves out while empty
        _close(getattr(merged, name), getattr(whole, name), name)


def test_a_delta_with_unknown_or_misshapen_sums_is_refused_whole() -> None:
    delta = SeriesDelta(SERIES[0], 0.0, WINDOW_S)
    delta.add(_observations(1, 1)[0])
    event = delta.to_event()
    with pytest.raises(ValueError, match="unknown sums"):
        SeriesDelta.from_event(event.model_copy(update={"stats": {**event.stats, "alerts_raised": ["x"]}}))
    with pytest.raises(ValueError, match="malformed sums"):
        SeriesDelta.from_event(event.model_copy(update={"stats": {**event.stats, "bins": [[1, 0.5, 1]]}}))
    with pytest.raises(ValueError, match="malformed sums"):
        SeriesDelta.from_event(event.model_copy(update={"calibration_counts": [1, 2], "calibration_agrees": [1]}))
