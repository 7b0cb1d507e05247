"""The agreement guard (agents.audit.agreement_guard): its e-value against a direct integration, its false-pause
rate at and above the floor (exactly, and in 1,000 simulated streams), its labels to pause for judges at 30%, 50%
and 60% (what docs/guides/drift-audit.md states), and the window that carries it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate

from pairjudge.agents.audit import GuardBounds, SeriesWindow, WindowStats, findings
from pairjudge.agents.audit.agreement_guard import e_below, log_e_below, pause_probabilities, trip_boundary
from pairjudge.schemas.audit import AuditObservation
from tests.unit.factories import FIRST_ID, SECOND_ID
from tests.unit.test_audit import SERIES, label, record

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "drift-audit.md"
FLOOR, ALPHA = 0.7, 0.05
#: Labels to pause, median and 90th percentile, for judges whose decided-alone pairs agree with people this
#: often (floor 0.7, alpha 0.05): the exact figures the guide's table states.
DOCUMENTED = {0.3: (9, 23), 0.5: (37, 93), 0.6: (163, 403)}
RUNS = 1000


def _direct_e(agreeing: int, labels: int, floor: float) -> float:
    """The mixture e-value by numerical integration: the mean over q ~ U(0, floor) of the likelihood ratio."""

    def ratio(q: float) -> float:
        return math.exp(agreeing * math.log(q / floor) + (labels - agreeing) * math.log((1 - q) / (1 - floor)))

    value, _ = integrate.quad(ratio, 0.0, floor, limit=200)
    return value / floor


@pytest.mark.parametrize(
    ("agreeing", "labels", "floor"), [(0, 1, 0.7), (1, 1, 0.7), (3, 10, 0.7), (12, 40, 0.6), (30, 60, 0.85)]
)
def test_the_closed_form_is_the_mixture_it_stands_for(agreeing: int, labels: int, floor: float) -> None:
    assert e_below(agreeing, labels, floor) == pytest.approx(_direct_e(agreeing, labels, floor), rel=1e-6)
    assert float(log_e_below(0, 0, floor)) == pytest.approx(0.0)  # no labels: no evidence


def test_the_guard_trips_on_every_count_at_or_below_its_boundary_and_no_other() -> None:
    boundary = trip_boundary(FLOOR, ALPHA, 300)
    for n in range(1, 301):
        s = np.arange(n + 1)
        trips = log_e_below(s, n, FLOOR) >= -math.log(ALPHA)
        assert trips.tolist() == (s <= boundary[n - 1]).tolist(), n


@pytest.mark.parametrize("agreement", [FLOOR, 0.85])
def test_a_judge_at_the_floor_or_above_is_paused_at_most_alpha_of_the_time_exactly(agreement: float) -> None:
    paused = pause_probabilities(agreement, FLOOR, ALPHA, 2000)
    assert paused[-1] <= ALPHA
    if agreement == FLOOR:
        assert paused[-1] > ALPHA / 2  # the bound is not vacuous: at the floor it is nearly reached


def _simulated_pauses(agreement: float, horizon: int, seed: int) -> np.ndarray:
    """Labels to pause in RUNS independent streams (horizon + 1: never paused), by the boundary (vectorised)."""
    rng = np.random.default_rng(seed)
    agreeing = np.cumsum(rng.random((RUNS, horizon)) < agreement, axis=1)
    trips = agreeing <= trip_boundary(FLOOR, ALPHA, horizon)[None, :]
    first = np.argmax(trips, axis=1) + 1
    return np.where(trips.any(axis=1), first, horizon + 1)


@pytest.mark.parametrize("agreement", [FLOOR, 0.85])
def test_a_good_judge_is_rarely_paused_in_simulation_over_a_long_stream(agreement: float) -> None:
    pauses = _simulated_pauses(agreement, 2000, seed=41)
    assert np.mean(pauses <= 2000) <= ALPHA


@pytest.mark.parametrize("agreement", sorted(DOCUMENTED))
def test_labels_to_pause_are_what_the_guide_states(agreement: float) -> None:
    median, q90 = DOCUMENTED[agreement]
    paused = pause_probabilities(agreement, FLOOR, ALPHA, 1000)
    exact = int(np.searchsorted(paused, 0.5)) + 1, int(np.searchsorted(paused, 0.9)) + 1
    assert exact == (median, q90)
    simulated = _simulated_pauses(agreement, 1000, seed=int(agreement * 100))
    assert np.all(simulated <= 1000)
    assert abs(float(np.median(simulated)) - median) <= 0.1 * median + 2
    row = f"| {agreement:.0%} | {median} | {q90} |"
    assert row in GUIDE.read_text(), f"the guide's table lacks {row!r}"


def _window(agreeing: int, labels: int, *, flip: bool = False) -> WindowStats:
    stats = WindowStats()
    for i in range(labels):
        human = FIRST_ID if i < agreeing else SECOND_ID
        rec = record(pair_id=f"pair-{i:04d}-guard", winner=FIRST_ID, flip=flip)
        stats.add(AuditObservation(kind="labelled", series=SERIES, record=rec, label=label(human, rec.pair_id)))
    return stats


def test_a_consistently_wrong_judge_is_paused_long_before_the_kappa_guard_may_act() -> None:
    stats = _window(2, 10)  # 20% agreement on 10 pairs decided alone; the kappa guard waits for 50 labels
    fired = findings(stats, GuardBounds())
    assert [f.kind for f in fired] == ["agreement_below_floor"]
    assert fired[0].value == pytest.approx(0.2)
    assert fired[0].threshold == 0.7
    assert "2 of 10 pairs it decided alone" in fired[0].message
    assert findings(_window(2, 10), GuardBounds(agreement_alpha=None)) == []  # off
    assert findings(_window(9, 10), GuardBounds()) == []  # a good judge
    # Pairs whose orders flipped were not decided by agreeing orders: not this guard's evidence.
    flipped = _window(2, 10, flip=True)
    assert flipped.orders_agreed_labels == 0
    assert findings(flipped, GuardBounds()) == []


def test_the_guard_tests_against_the_relative_floor_or_the_configured_one() -> None:
    stats = _window(4, 14)  # 29%: evidence enough against 0.7, none against 0.25
    assert [f.kind for f in findings(stats, GuardBounds())] == ["agreement_below_floor"]
    assert findings(stats, GuardBounds(agreement_min=0.25)) == []


def test_the_guard_state_survives_a_restart_and_an_older_window_reads_as_none() -> None:
    window = SeriesWindow(SERIES, 0.0, 60.0, 0, _window(3, 8))
    back = SeriesWindow.from_bytes(window.to_bytes())
    assert (back.stats.orders_agreed_labels, back.stats.orders_agreed_correct) == (8, 3)
    snap = back.snapshot(final=False, bounds=GuardBounds())
    assert (snap.orders_agreed_labels, snap.agreement_guard_floor, snap.agreement_guard_alpha) == (8, 0.7, 0.05)
    assert snap.agreement_guard_evidence == pytest.approx(e_below(3, 8, 0.7))
    # A window without such labels stores what it stored before the guard (what an older worker reads).
    assert b"orders_agreed" not in SeriesWindow(SERIES, 0.0, 60.0, 0).to_bytes()


def test_the_audit_page_and_the_report_say_which_floor_and_what_the_agreement_guard_sees() -> None:
    from types import SimpleNamespace

    from pairjudge.streams.audit.report import guard_summary
    from pairjudge.streams.config.oversight import AuditSettings
    from pairjudge.streams.review.views import audit_context, templates

    relative = GuardBounds(guard_mode="relative")
    snap = SeriesWindow(SERIES, 0.0, 60.0, 0, _window(3, 8)).snapshot(final=False, bounds=relative)
    fallback = "judged against the fixed floor 0.70: no pair has two people"  # (the apostrophe is escaped)
    report = guard_summary([snap])
    assert fallback in report
    assert "people agreed with 3 of the 8 pairs the judge decided alone (38%)" in report
    context = audit_context(SimpleNamespace(latest={SERIES.key: snap}), None, AuditSettings())  # type: ignore[arg-type]
    page = templates().env.get_template("_audit.html").render(**context)
    assert fallback in page
    assert "evidence 3.31 of the 20 that pauses" in page
