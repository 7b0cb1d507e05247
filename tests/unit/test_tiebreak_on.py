"""Switching a series' tie-break back on after the audit switched it off (issue 41 item 2), and the review
service's audit table by deciding stage: the pure parts and the pages' words. On Kafka:
tests/integration/test_tiebreak_switch_kafka.py; the operators' button in a browser:
tests/integration/test_review_ui.py.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from pairjudge.agents.audit import ConfidenceHistogram, SeriesDelta
from pairjudge.agents.audit.stages import decided_before, restart_evidence, stage_agreement, tiebreak_threshold_key
from pairjudge.agents.policy import Policy
from pairjudge.schemas.audit import AuditObservation, AuditSnapshot, StageAgreement, ThresholdUpdate
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.live import PolicyHolder, apply_threshold_record
from pairjudge.streams.kafka.codecs import encode
from pairjudge.streams.review import views
from pairjudge.streams.review.kafka import AuditFeed
from tests.unit.factories import FIRST_ID, SECOND_ID
from tests.unit.test_audit import SERIES, label, record
from tests.unit.test_audit_stages import _histogram

NOW = datetime(2026, 12, 7, 3, 0, tzinfo=UTC)
OFF = ThresholdUpdate(
    series=SERIES.key,
    threshold=None,
    target=0.8,
    risk=0.1,
    labels=30,
    stage="tiebreak",
    switched_off=True,
    updated_at=NOW - timedelta(hours=2),
)
ON = OFF.model_copy(
    update={
        "switched_off": False,
        "labels": 0,
        "switched_on_by": "olga: new prompt",
        "fresh_since": NOW,
        "updated_at": NOW,
    }
)


def _apply(holder: PolicyHolder, update: ThresholdUpdate | None) -> None:
    apply_threshold_record(
        holder, tiebreak_threshold_key(SERIES.key).encode(), None if update is None else encode(update)
    )


def test_the_on_record_switches_the_tiebreak_back_on_live_and_its_moment_only_moves_forward() -> None:
    holder = PolicyHolder(Policy())
    _apply(holder, OFF)
    assert not holder.current.tiebreak_on_for(SERIES.key)
    assert holder.tiebreaks[SERIES.key].switched_off
    _apply(holder, ON)
    assert holder.current.tiebreak_on_for(SERIES.key)
    assert holder.current.tiebreak_verdict_threshold_for(SERIES.key) == Policy().tiebreak_confidence_threshold
    assert holder.fresh_since[SERIES.key] == NOW
    # The audit's later record carries the moment on; one written before (read late) cannot take it back.
    _apply(holder, OFF.model_copy(update={"switched_off": False, "fresh_since": NOW - timedelta(days=1)}))
    assert holder.fresh_since[SERIES.key] == NOW
    _apply(holder, None)  # a deleted record forgets the record, not when the evidence started afresh
    assert SERIES.key not in holder.tiebreaks
    assert holder.fresh_since[SERIES.key] == NOW


def test_the_evidence_starts_afresh_once_per_switch_back_on() -> None:
    old = _histogram([0.9] * 30, [i % 5 == 0 for i in range(30)])
    old.last_offset, old.published_off = 41, True
    since = NOW.timestamp()
    fresh = restart_evidence(old, since)
    assert fresh is not None
    assert (fresh.empty, fresh.published_off, fresh.published_threshold) == (True, False, None)
    assert (fresh.last_offset, fresh.fresh_since) == (41, since)  # redelivered deltas are still skipped
    # Stored and read back (a restarted worker): the same moment does not empty it again, a later one does.
    stored = ConfidenceHistogram.from_bytes(fresh.to_bytes())
    stored.merge(_histogram([0.9], [True]))
    assert restart_evidence(stored, since) is None
    assert restart_evidence(stored, since - 60) is None
    assert restart_evidence(stored, since + 60) is not None


def test_a_late_label_of_the_old_tiebreak_is_not_the_new_ones_evidence() -> None:
    since = NOW.timestamp()
    assert decided_before(since - 1, since)
    assert not decided_before(since, since)
    assert not decided_before(since - 1, None)
    obs = AuditObservation(
        kind="labelled",
        series=SERIES,
        record=record(stage="tiebreak", winner=FIRST_ID, confidence=0.9),
        label=label(SECOND_ID),
    )
    counted, skipped = SeriesDelta(SERIES, 0.0, 60.0), SeriesDelta(SERIES, 0.0, 60.0)
    counted.add(obs)
    skipped.add(obs, tiebreak_evidence=False)
    assert sum(counted.tiebreak.counts) == 1
    assert skipped.tiebreak.empty
    assert skipped.stats == counted.stats  # the window's own sums count it all the same


def test_the_audits_later_records_carry_when_the_evidence_started_afresh() -> None:
    from tests.unit.test_audit_stages import _view

    view = _view(_histogram([0.9] * 5, [True] * 5))
    assert view.update(SERIES.key).fresh_since is None
    assert view.update(SERIES.key, NOW.timestamp()).fresh_since == NOW


def _snapshot(*stages: StageAgreement, off: bool = False) -> AuditSnapshot:
    return AuditSnapshot(
        series=SERIES.key,
        series_info=SERIES,
        window_start=NOW,
        window_end=NOW,
        pairs=60,
        verdicts=60,
        flips=60,
        tiebreaks=60,
        reviews=0,
        invalid_replies=0,
        position_a_wins=0,
        human_labels=60,
        stages=stages,
        tiebreak_off=off,
    )


def test_the_audit_table_shows_agreement_by_deciding_stage_from_the_minimum() -> None:
    few = StageAgreement(stage="tiebreak", labels=12, agreeing=3, min_labels=50, confidence=0.95)
    primary = StageAgreement(stage="primary", labels=0, agreeing=0, min_labels=50, confidence=0.95)
    assert views.by_stage(_snapshot(primary, few)) == [
        {"stage": "primary", "name": "judge alone (both orders agreeing)", "text": "no labels yet"},
        {"stage": "tiebreak", "name": "tie-break", "text": "not enough labels yet: 12 of the 50 needed"},
    ]
    row = stage_agreement("tiebreak", _histogram([0.9] * 60, [i % 5 == 0 for i in range(60)]), min_labels=50)
    (shown,) = views.by_stage(_snapshot(row, off=True))
    assert shown["text"] == "20% (12% to 32%), from 60 labels; switched off, its flips go to people"
    feed = AuditFeed(Settings())
    feed.latest[SERIES.key] = _snapshot(row, off=True)
    context = views.audit_context(feed, None, Settings().audit)
    page = views.templates().env.get_template("_audit.html").render(context)
    cell = re.search(r'<td class="by-stage">(.*?)</td>', page, re.S)
    assert cell is not None
    assert "tie-break: 20% (12% to 32%), from 60 labels; switched off" in cell.group(1)
    assert "e-value" not in page
    text = re.sub(r"<[^>]+>", " ", re.sub(r"<details.*?</details>", "", page, flags=re.S))
    assert SERIES.key not in text  # the key only in its fold


def test_the_operators_page_shows_each_switched_off_tiebreak_with_why_and_when_and_its_button() -> None:
    holder = PolicyHolder(Policy())
    _apply(holder, OFF)
    feed = AuditFeed(Settings())
    row = stage_agreement("tiebreak", _histogram([0.9] * 30, [i % 5 == 0 for i in range(30)]), min_labels=20)
    feed.latest[SERIES.key] = _snapshot(row, off=True)
    (off,) = views.tiebreak_off_rows(holder.tiebreaks, feed)
    assert off["since"] == "2026-12-07 01:00:00 UTC"
    assert "On 30 labels, its decisions were shown to agree with people less than 80% of the time" in off["why"]
    assert "6 of 30 labels agreed: 20%, 95% interval" in off["why"]
    assert off["series"] == SERIES.key
    assert off["name"] != SERIES.key
    context = {
        "user": {"name": "olga", "role": "operator"},
        "csrf": "the-token",
        **views.controls_context(Settings().policy, Policy(), {}),
        "paused": False,
        "guard_by": None,
        "message": None,
        "stats": {"waiting": 0, "second_opinion": 0, "claimed": 0, "done": 0},
        "guard": {"mode": "absolute", "kappa_min": 0.7, "ratio": 0.9, "min_human_pairs": 30},
        "series": [],
        "tiebreaks_off": [off],
        "tiebreaks_on": views.tiebreak_on_rows(holder.tiebreaks, feed),
    }
    render = views.templates().env.get_template("operators.html").render
    page = render(context)
    form = re.search(r'<form method="post" action="/operators/tiebreak-on".*?</form>', page, re.S)
    assert form is not None
    assert '<input type="hidden" name="csrf_token" value="the-token">' in form.group(0)
    assert f'<input type="hidden" name="series" value="{SERIES.key}">' in form.group(0)
    assert "Switch the tie-break back on" in form.group(0)
    assert re.search(r'<label for="why-1">.*?</label> <input id="why-1" name="why" required', form.group(0))
    assert "Switched off at 2026-12-07 01:00:00 UTC." in page
    # Switched back on: no button, and who did it is said.
    _apply(holder, ON)
    after = render(
        {
            **context,
            "tiebreaks_off": views.tiebreak_off_rows(holder.tiebreaks, feed),
            "tiebreaks_on": views.tiebreak_on_rows(holder.tiebreaks, feed),
        }
    )
    assert 'action="/operators/tiebreak-on"' not in after
    assert 'id="tiebreaks-none"' in after
    assert "by olga: new prompt at 2026-12-07 03:00:00 UTC" in after


def test_the_command_refuses_a_missing_series_name_or_reason_before_writing_anything() -> None:
    from typer.testing import CliRunner

    from pairjudge.streams.cli import app

    runner = CliRunner()
    unreachable = ["--bootstrap", "127.0.0.1:1"]  # nothing is written: the refusal comes first
    no_reason = runner.invoke(app, ["control", "tiebreak-on", SERIES.key, "--by", "olga", "--why", " ", *unreachable])
    assert no_reason.exit_code == 2
    assert "and why (--why)" in " ".join(no_reason.output.split())
    key = tiebreak_threshold_key(SERIES.key)
    wrong = runner.invoke(app, ["control", "tiebreak-on", key, "--by", "olga", "--why", "new prompt", *unreachable])
    assert wrong.exit_code == 2
    assert "name the series as the audit shows it" in " ".join(wrong.output.split())
