"""The human basis on the scoreboard: which observations feed it, the board's state, the snapshot, the gate
text and the metrics (pure logic and the snapshot builders; no broker)."""

from __future__ import annotations

import asyncio
import json
import random
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from pairjudge.agents.audit.join import JoinEntry
from pairjudge.agents.scores.board import Scoreboard
from pairjudge.agents.scores.events import expired_event, score_event
from pairjudge.agents.scores.human import HumanBasis, estimate
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.schemas import HumanLabel
from pairjudge.schemas.audit import AuditObservation, AuditSeries, DecisionRecord
from pairjudge.schemas.scores import GateUpdate, ScoreEvent, ScoreSnapshot
from pairjudge.streams.app import create_app
from pairjudge.streams.audit.stored import with_partition
from pairjudge.streams.config.settings import ScoreSettings, Settings
from pairjudge.streams.scores.gate_reader import EXIT_CODES, human_text
from pairjudge.streams.scores.handlers import Entry, ExperimentGauges, count, observe_scores, snapshot
from pairjudge.streams.worker.health_server import PrometheusMetrics
from pairjudge.streams.worker.pipeline import Outgoing
from pairjudge.streams.worker.tables import put
from tests.unit.factories import FIRST_ID, SECOND_ID, tone_reply

CHAMPION, CHALLENGER = FIRST_ID, SECOND_ID
SERIES = AuditSeries(judge_provider="scripted", judge_model="m", prompt_template_hash="h", rubric="tone_style")
NOW = datetime(2031, 5, 1, tzinfo=UTC)


def record(
    *,
    pair_id: str = "p1",
    outcome: str = "verdict",
    winner: str | None = CHALLENGER,
    audit_sample: bool = False,
    pi: float | None = 0.05,
    stratum: str | None = "confident",
    **extra: object,
) -> DecisionRecord:
    return DecisionRecord.model_validate(
        {
            "pair_id": pair_id,
            "series": SERIES,
            "stage": "primary",
            "outcome": outcome,
            "auto_decided": outcome == "verdict",
            "candidates": (CHAMPION, CHALLENGER),
            "judge_winner": winner,
            "audit_sample": audit_sample,
            "inclusion_probability": pi,
            "sampling_class": stratum,
            "experiment": "exp-1",
            "traffic": "shadow",
            "roles": ("champion", "challenger"),
            "models": ("champ-model", "chall-model"),
            "chars": (100, 200),
            **extra,
        }
    )


def decision(rec: DecisionRecord) -> AuditObservation:
    return AuditObservation(kind="decision", series=rec.series, record=rec)


def labelled(rec: DecisionRecord, winner: str) -> AuditObservation:
    label = HumanLabel(pair_id=rec.pair_id, winner=winner, reviewer="ana", from_audit=True)
    return AuditObservation(kind="labelled", series=rec.series, record=rec, label=label)


# --- which observations, as which events -------------------------------------------------------------


def test_a_verdict_is_judged_with_its_outcome_stratum_and_probability() -> None:
    event = score_event(decision(record(audit_sample=True, pi=0.25, stratum="uncertain")))
    assert event is not None
    assert (event.kind, event.side, event.judge_outcome) == ("judged", "win", 1.0)
    assert (event.stratum, event.inclusion_probability, event.sampled) == ("uncertain", 0.25, True)
    assert (event.chars, event.models) == ((200, 100), ("chall-model", "champ-model"))  # challenger first
    tie = score_event(decision(record(winner="TIE")))
    assert tie is not None
    assert (tie.side, tie.judge_outcome, tie.sampled) == ("tie", 0.5, False)
    loss = score_event(decision(record(winner=CHAMPION)))
    assert loss is not None
    assert (loss.side, loss.judge_outcome) == ("loss", 0.0)


def test_a_verdict_without_a_probability_is_a_confident_pair_that_expects_no_label() -> None:
    event = score_event(decision(record(audit_sample=True, pi=None, stratum=None)))
    assert event is not None
    assert (event.kind, event.stratum, event.inclusion_probability, event.sampled) == (
        "judged",
        "confident",
        None,
        False,
    )


def test_a_review_outcome_is_a_pair_of_the_review_stratum_with_the_judges_leaning() -> None:
    leaning = score_event(decision(record(outcome="review", reason="low_confidence", pi=None, stratum=None)))
    assert leaning is not None
    assert (leaning.kind, leaning.side, leaning.judge_outcome) == ("outcome", None, 1.0)
    assert (leaning.stratum, leaning.inclusion_probability, leaning.sampled) == ("review", 1.0, True)
    silent = score_event(decision(record(outcome="review", reason="low_confidence", winner=None)))
    assert silent is not None
    assert silent.judge_outcome == 0.5


def test_labels_on_an_audit_sample_and_on_a_review_pair() -> None:
    audit = score_event(labelled(record(audit_sample=True, pi=0.1), CHAMPION))
    assert audit is not None
    assert (audit.kind, audit.judge_outcome, audit.human_outcome) == ("label", 1.0, 0.0)
    assert (audit.stratum, audit.inclusion_probability, audit.side) == ("confident", 0.1, None)
    review = score_event(labelled(record(outcome="review", reason="low_confidence", winner=CHAMPION), "TIE"))
    assert review is not None
    assert (review.kind, review.side, review.judge_outcome, review.human_outcome) == ("human", "tie", 0.0, 0.5)
    assert (review.stratum, review.inclusion_probability) == ("review", 1.0)


def test_a_label_not_drawn_by_the_recorded_design_carries_no_weight() -> None:
    for rec in (record(audit_sample=False, pi=0.05), record(audit_sample=True, pi=None)):
        event = score_event(labelled(rec, CHALLENGER))
        assert event is not None
        assert (event.kind, event.inclusion_probability) == ("label", None)


def test_canaries_tiebreaks_second_opinions_and_non_experiments_move_nothing() -> None:
    assert score_event(decision(record(canary=True))) is None
    assert score_event(labelled(record(canary=True, audit_sample=True), CHAMPION)) is None
    assert score_event(decision(record(experiment=None))) is None
    assert score_event(decision(record(roles=("champion", "champion")))) is None
    assert score_event(decision(record(outcome="tiebreak", reason="position_inconsistent", pi=None))) is None
    rec = record(audit_sample=True)
    first = HumanLabel(pair_id="p1", winner=CHAMPION, reviewer="ana", from_audit=True)
    second = AuditObservation(kind="second_label", series=SERIES, record=rec, label=first, first_label=first)
    assert score_event(second) is None


def test_an_audit_sample_swept_without_a_label_is_expired() -> None:
    sampled = record(audit_sample=True, pi=0.1)
    event = expired_event(sampled, None)
    assert event is not None
    assert (event.kind, event.stratum, event.inclusion_probability) == ("expired", "confident", 0.1)
    review = expired_event(record(outcome="review", reason="low_confidence"), None)
    assert review is not None
    assert review.stratum == "review"
    label = HumanLabel(pair_id="p1", winner=CHAMPION, reviewer="ana")
    assert expired_event(sampled, label) is None  # it was labelled
    assert expired_event(record(audit_sample=False), None) is None  # no label was expected
    assert expired_event(None, label) is None  # a label whose decision never came
    assert expired_event(record(audit_sample=True, canary=True), None) is None


def test_a_score_event_missing_what_its_kind_needs_is_rejected() -> None:
    base = {"experiment": "e", "pair_id": "p1", "rubric_kind": "tone_style", "traffic": "shadow"}
    with pytest.raises(ValidationError):
        ScoreEvent.model_validate({**base, "kind": "judged"})
    with pytest.raises(ValidationError):
        ScoreEvent.model_validate({**base, "kind": "label", "judge_outcome": 1.0, "stratum": "confident"})
    # An event from before the human basis: a judged side alone still counts in the tallies.
    old = ScoreEvent.model_validate({**base, "kind": "judged", "side": "win"})
    board = Scoreboard()
    count(board, old)
    assert (board.overall.wins, board.human_basis.pairs) == (1, 0)


# --- the board ---------------------------------------------------------------------------------------


def _feed(board: Scoreboard, observations: list[AuditObservation]) -> None:
    for o in observations:
        event = score_event(o)
        if event is not None:
            count(board, event)


def test_the_board_counts_both_bases_and_survives_a_round_trip() -> None:
    board = Scoreboard()
    sampled = record(pair_id="a", audit_sample=True, pi=0.5)
    review = record(pair_id="r", outcome="review", reason="low_confidence", winner=CHAMPION, traffic="production")
    stray = record(pair_id="s", audit_sample=False)
    _feed(board, [decision(sampled), labelled(sampled, CHAMPION), decision(review), labelled(review, CHALLENGER)])
    _feed(board, [decision(stray), labelled(stray, CHALLENGER)])
    gone = expired_event(record(pair_id="x", audit_sample=True, pi=0.5), None)
    assert gone is not None
    count(board, gone)
    # The judge basis is what it was: the automatic verdicts, and the review pair a person decided apart.
    assert (board.overall.wins, board.overall.losses, board.human.wins) == (2, 0, 1)
    basis = board.human_basis
    assert (basis.pairs, basis.labels, basis.sampled, basis.expired, basis.pending) == (3, 2, 2, 1, 0)
    assert basis.strata["confident"].w == pytest.approx(2.0)  # weighted by 1/pi
    assert basis.strata["review"].labels == 1
    assert board.unweighted_labels == 1
    assert board.human_basis_by_traffic["production"].pairs == 1
    assert board.human_basis_by_rubric["tone_style"].pairs == 3
    again = Scoreboard.from_dict(json.loads(json.dumps(board.to_dict())))
    assert again == board


def test_a_board_stored_before_the_human_basis_loads_with_empty_bases() -> None:
    board = Scoreboard()
    board.add_judged("win", rubric="tone_style", traffic="shadow")
    old = board.to_dict()
    del old["human_basis"]
    loaded = Scoreboard.from_dict(old)
    assert loaded.overall.wins == 1
    assert loaded.human_basis == HumanBasis()
    assert (loaded.human_basis_by_rubric, loaded.unweighted_labels) == ({}, 0)


# --- the snapshot and the gates ----------------------------------------------------------------------


def _biased_stream(n: int, share: float, human_challenger: float, seed: int = 1) -> Scoreboard:
    """A judge that always names the challenger; people prefer it ``human_challenger`` of the time."""
    rng = random.Random(seed)
    board = Scoreboard()
    for i in range(n):
        drawn = rng.random() < share
        rec = record(pair_id=f"p{i}", audit_sample=drawn, pi=share)
        observations = [decision(rec)]
        if drawn:
            observations.append(labelled(rec, CHALLENGER if rng.random() < human_challenger else CHAMPION))
        _feed(board, observations)
    return board


def test_a_judge_that_likes_the_challenger_promotes_on_its_basis_and_people_reject() -> None:
    board = _biased_stream(2000, share=0.2, human_challenger=0.3)
    settings = ScoreSettings()
    snap = snapshot("exp-1", Entry(board, 0), settings, paused=False, now=NOW)
    assert snap.gate.decision == "promote"  # the judge's opinion
    human = snap.human_basis
    assert human is not None
    assert human.judge_rate == pytest.approx(1.0)
    assert human.rate is not None
    assert human.rate == pytest.approx(0.3, abs=0.06)
    assert human.low is not None
    assert human.high is not None
    assert human.anytime_low is not None
    assert human.anytime_high is not None
    assert human.anytime_low < human.low < human.rate < human.high < human.anytime_high  # the sequence is wider
    assert (human.pairs, human.pending, human.expired, human.unlabelled_share) == (2000, 0, 0, 0.0)
    assert human.labels == board.human_basis.labels > 300
    assert [(s.stratum, s.pairs, s.labels) for s in human.strata] == [("confident", 2000, human.labels)]
    assert human.strata[0].lam is not None
    assert snap.human_basis_by_traffic["shadow"] == human
    assert snap.human_basis_by_rubric["tone_style"] == human
    gate = snap.human_gate
    assert gate is not None
    assert (gate.decision, gate.labels_needed, gate.min_labels, gate.target_labels) == ("reject", None, 30, 500)
    assert (gate.low, gate.high) == (human.anytime_low, human.anytime_high)
    assert snap.history[-1].human_rate == human.rate
    # The snapshot and the gate update are contracts: they survive the wire.
    assert ScoreSnapshot.model_validate_json(snap.model_dump_json()) == snap
    update = GateUpdate(experiment="exp-1", gate=snap.gate, human=gate, decided_at=NOW)
    assert GateUpdate.model_validate_json(update.model_dump_json()) == update


def test_while_the_kappa_guard_holds_the_judge_gate_refuses_and_the_human_gate_decides() -> None:
    board = _biased_stream(2000, share=0.2, human_challenger=0.3)
    snap = snapshot("exp-1", Entry(board, 0), ScoreSettings(), paused=True, now=NOW)
    assert snap.gate.decision == "continue"
    assert snap.gate.refused
    assert snap.human_gate is not None
    assert snap.human_gate.decision == "reject"


def test_too_few_labels_continue_with_the_labels_still_needed() -> None:
    board = _biased_stream(60, share=0.3, human_challenger=0.3, seed=4)
    snap = snapshot("exp-1", Entry(board, 0), ScoreSettings(), paused=False, now=NOW)
    gate = snap.human_gate
    assert gate is not None
    assert gate.decision == "continue"
    assert gate.labels_needed is not None
    assert gate.labels_needed >= 30 - gate.labels
    update = GateUpdate(experiment="exp-1", gate=snap.gate, human=gate, decided_at=NOW)
    text = human_text("exp-1", gate, update)
    assert EXIT_CODES[gate.decision] == 2
    assert f"continue: not enough labels yet: {gate.labels} of the 30 needed" in text
    assert f"no interval yet: not enough labels yet: {gate.labels} of the 30 needed" in text
    assert f"human labels used {gate.labels}, pending 0, expired 0" in text
    assert "human basis" in text


def test_without_labels_the_human_basis_has_counts_and_no_interval() -> None:
    board = Scoreboard()
    _feed(board, [decision(record(pair_id="a", audit_sample=True, pi=0.5))])
    snap = snapshot("exp-1", Entry(board, 0), ScoreSettings(), paused=False, now=NOW)
    human = snap.human_basis
    assert human is not None
    assert (human.rate, human.low, human.anytime_low, human.pairs, human.pending) == (None, None, None, 1, 1)
    assert human.judge_rate == 1.0
    assert [(s.stratum, s.labels, s.lam) for s in human.strata] == [("confident", 0, None)]
    gate = snap.human_gate
    assert gate is not None
    assert (gate.decision, gate.rate) == ("continue", None)
    assert "no human labels yet" in gate.reason


# --- metrics -----------------------------------------------------------------------------------------


def test_metrics_show_each_experiment_s_human_basis_beside_the_judges_rate() -> None:
    board = _biased_stream(2000, share=0.2, human_challenger=0.3)
    snap = snapshot("exp-1", Entry(board, 0), ScoreSettings(), paused=False, now=NOW)
    metrics = PrometheusMetrics("test")
    try:
        gauges = {"exp-1": ExperimentGauges.of(0, snap)}
        observe_scores(metrics.provider, gauges)
        text = metrics.render().decode()
        gauges["exp-2"] = ExperimentGauges.of(0, snap.model_copy(update={"human_basis": None}))
        later = metrics.render().decode()
    finally:
        metrics.shutdown()
    human = snap.human_basis
    assert human is not None
    assert human.rate is not None
    rate_lines = [line for line in text.splitlines() if line.startswith("pairjudge_scores_human_rate{")]
    assert len(rate_lines) == 1
    assert 'experiment="exp-1"' in rate_lines[0]
    assert float(rate_lines[0].rsplit(" ", 1)[1]) == pytest.approx(human.rate)
    assert "pairjudge_scores_human_low{" in text
    assert "pairjudge_scores_human_high{" in text
    judge_line = next(line for line in text.splitlines() if line.startswith("pairjudge_scores_judge_rate{"))
    assert float(judge_line.rsplit(" ", 1)[1]) == pytest.approx(1.0)
    # An experiment without a human basis yet shows its labels (0) but no rate.
    assert 'pairjudge_scores_human_labels{experiment="exp-2"' in later
    assert 'pairjudge_scores_human_rate{experiment="exp-2"' not in later


async def test_the_join_sweep_publishes_an_expired_event_for_an_audit_sample_without_a_label(tmp_path: Path) -> None:
    settings = Settings(worker={"data_dir": tmp_path})
    wired = create_app(settings, judge=ScriptedJudge(lambda _req: tone_reply()), follow_control=False)
    audit = wired.audit
    assert audit is not None
    assert audit.feed_scores
    audit._owned = lambda _kind: {0}  # type: ignore[method-assign,assignment]  # no broker assigns partitions here
    published: list[Outgoing] = []
    tombstoned: list[bytes] = []

    async def publish(messages: list[Outgoing]) -> None:
        published.extend(messages)

    def send_changelog(partition: int, key: bytes, value: bytes | None, **_: Any) -> Any:
        tombstoned.append(key)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut

    audit._publish = publish
    audit.join_table.send_changelog = send_changelog
    old = time.time() - settings.audit.join_retention_s - 60
    label = HumanLabel(pair_id="b", winner=CHAMPION, reviewer="ana")
    entries = {
        "a": JoinEntry(final=record(pair_id="a", audit_sample=True, pi=0.5), updated_at=old),
        "b": JoinEntry(final=record(pair_id="b", audit_sample=True), label=label, joined=True, updated_at=old),
        "c": JoinEntry(final=record(pair_id="c", audit_sample=False), updated_at=old),
    }
    for key, entry in entries.items():
        put(audit.join_table.data, 0, key.encode(), with_partition(0, entry.to_bytes()))
    assert await audit.sweep_join() == 3
    assert sorted(tombstoned) == [b"a", b"b", b"c"]
    assert [(m.kind, m.key) for m in published] == [("score-events", b"exp-1")]
    event = ScoreEvent.model_validate_json(published[0].value)
    assert (event.kind, event.pair_id, event.stratum) == ("expired", "a", "confident")
    board = Scoreboard()
    count(board, event)
    assert (board.human_basis.expired, board.human_basis_by_traffic["shadow"].expired) == (1, 1)


def test_a_rule_verdict_is_its_own_labelled_stratum() -> None:
    # An empty challenger output loses by rule: nobody labels it, and the rule is taken as the human answer,
    # so the stratum neither borrows the confident stratum's labels nor widens the interval to [0, 1].
    event = score_event(decision(record(winner=CHAMPION, pi=None, stratum=None, rule=True)))
    assert event is not None
    assert (event.stratum, event.sampled) == ("rule", False)
    board = Scoreboard()
    board.add_outcome(0.0, stratum="rule", sampled=False, rubric="tone_style", traffic="shadow")
    basis = board.human_basis
    assert (basis.known_pairs, basis.known_total, basis.labels, basis.pairs) == (1, 0.0, 0, 1)
    assert "rule" not in basis.strata
    assert basis.pending == 0
    # With labels elsewhere, the known pair moves the estimate by its share and adds no variance.
    for i in range(40):
        board.add_outcome(1.0, stratum="confident", sampled=True, rubric="tone_style", traffic="shadow")
        board.add_label(1.0, float(i % 2), stratum="confident", inclusion_probability=1.0, rubric="x", traffic="y")
    with_rule = estimate(board.human_basis)
    without = HumanBasis.from_dict({**board.human_basis.to_dict(), "known_pairs": 0, "known_total": 0.0})
    alone = estimate(without)
    assert with_rule is not None
    assert alone is not None
    assert with_rule.rate == pytest.approx(alone.rate * 40 / 41)
    assert with_rule.labels == alone.labels == 40


def test_the_snapshot_shows_the_interval_that_assumes_nothing_about_missing_labels() -> None:
    from pairjudge.streams.scores.handlers import human_basis_snapshot, human_gate_snapshot

    board = Scoreboard()
    for i in range(600):
        f = float(i % 3 != 0)
        drawn = i % 5 == 0
        board.add_outcome(
            f, stratum="confident", sampled=drawn, rubric="r", traffic="t", inclusion_probability=0.2 if drawn else None
        )
        if drawn and i < 400:  # the last 40 draws are still pending
            board.add_label(f, f, stratum="confident", inclusion_probability=0.2, rubric="r", traffic="t")
    snap = human_basis_snapshot(board.human_basis, ScoreSettings())
    assert snap.pending == 40
    assert snap.worst_low is not None
    assert snap.anytime_low is not None
    assert snap.worst_high is not None
    assert snap.anytime_high is not None
    assert snap.worst_low < snap.anytime_low
    assert snap.worst_high > snap.anytime_high
    strict, _ = human_gate_snapshot(board, ScoreSettings(human_missing_labels="worst_case"))
    assert strict.missing_labels == "worst_case"
    assert human_gate_snapshot(board, ScoreSettings())[0].missing_labels == "at_random"


def _leaning_board(labels: int, wins: int) -> Scoreboard:
    board = Scoreboard()
    for i in range(2000):
        board.human_basis.add_pair(float(i % 2), "confident")
    for i in range(labels):
        board.human_basis.add_label(1.0, float(i < wins), "confident", 0.5)
    return board


def test_the_human_gate_s_decision_survives_a_restart_with_the_table_s_bytes() -> None:
    """The running intersection is kept beside the board (``held_key``, written by the snapshot timer with the
    history): a worker that restarts from the table's changelog reads the same held interval, and the decision
    it had reached stays even when the current interval alone would say continue."""
    settings = ScoreSettings()
    entry = Entry(_leaning_board(200, 150), 0)
    first = snapshot("exp-1", entry, settings, paused=False, now=NOW).human_gate
    assert first is not None
    assert first.decision == "promote"
    assert first.looks == 1
    stored = (entry.to_bytes(), entry.history_bytes(), entry.held_bytes())  # what the table holds
    restarted = Entry.from_bytes(*stored)
    assert restarted.held == entry.held
    restarted.board = _leaning_board(400, 215)  # later labels: the current interval alone continues
    fresh = snapshot("exp-1", Entry(restarted.board, 0), settings, paused=False, now=NOW).human_gate
    assert fresh is not None
    assert fresh.decision == "continue"
    after = snapshot("exp-1", restarted, settings, paused=False, now=NOW).human_gate
    assert after is not None
    assert after.decision == "promote"
    assert after.looks == 2
    assert after.low is not None
    assert after.current_low is not None
    assert after.low > 0.5 > after.current_low
    # An entry stored before the held interval existed loads without one (a new series from then on).
    assert Entry.from_bytes(stored[0], stored[1]).held is None


def test_the_page_names_the_stratum_that_is_short() -> None:
    board = _leaning_board(200, 150)
    for i in range(500):
        board.human_basis.add_pair(float(i % 2), "uncertain")
    for _ in range(6):
        board.human_basis.add_label(1.0, 1.0, "uncertain", 0.02)
    gate = snapshot("exp-1", Entry(board, 0), ScoreSettings(), paused=False, now=NOW).human_gate
    assert gate is not None
    assert gate.decision == "continue"
    assert (gate.short_stratum, gate.short_stratum_labels, gate.min_stratum_labels) == ("uncertain", 6, 30)
    update = GateUpdate(experiment="exp-1", gate=snap_gate(board), human=gate, decided_at=NOW)
    assert "not enough labels yet in the verdicts the judge was unsure of: 6 of the 30 needed" in human_text(
        "exp-1", gate, update
    )
    lower = snapshot("exp-1", Entry(board, 0), ScoreSettings(human_min_stratum_labels=5), paused=False, now=NOW)
    assert lower.human_gate is not None
    assert lower.human_gate.decision == "promote"


def snap_gate(board: Scoreboard) -> Any:
    return snapshot("exp-1", Entry(board, 0), ScoreSettings(), paused=False, now=NOW).gate
