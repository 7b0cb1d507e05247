"""Which dimensions and guide rules the judge is ambiguous on: the facts per pair, the window counts,
their merge and the snapshot's ranking (agents.audit.ambiguity)."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any, Literal

import pytest

from pairjudge.agents.audit import JoinEntry, SeriesWindow, WindowStats, on_label, on_record, record_for, snapshot
from pairjudge.agents.audit.ambiguity import MAX_KEYS, OTHER, AmbiguityCounts, counts_of, dimension_facts
from pairjudge.agents.core import judge_pair, resolve_tiebreak
from pairjudge.agents.guide_rules import guide_id
from pairjudge.agents.policy import Policy
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.agents.stats import wilson_interval
from pairjudge.schemas import DEFAULT_TIEBREAK_WEIGHTS, HumanLabel, TieBreakRequest
from pairjudge.schemas.audit import AuditObservation, AuditSeries, DecisionRecord, DimensionFact
from pairjudge.schemas.events import OrderingResult
from pairjudge.schemas.rubric import RubricRef
from tests.unit.factories import (
    FIRST_ID,
    SECOND_ID,
    h2h_reply,
    h2h_rubric,
    make_pair,
    per_order,
    tiebreak_reply,
    tone_reply,
    tone_rubric,
)

SERIES = AuditSeries(judge_provider="scripted", judge_model="m", prompt_template_hash="t", rubric="tone_style")
GUIDE = "1. Open with the customer's name.\n2. Never promise a delivery date you cannot keep.\n3. No emoji."
CANDS = (FIRST_ID, SECOND_ID)


def _tone(winner: str, scores: dict[str, dict[str, int]], justification: str = "fine") -> str:
    base = json.loads(tone_reply(winner))
    base["dimension_scores"].update(scores)
    base["justification"] = justification
    return json.dumps(base)


def _ordering(
    order: Literal["AB", "BA"], scores: Mapping[str, Mapping[str, float]], valid: bool = True
) -> OrderingResult:
    a, b = CANDS if order == "AB" else CANDS[::-1]
    return OrderingResult(
        order_shown=order,
        swapped=order == "BA",
        shown_as_a=a,
        shown_as_b=b,
        valid=valid,
        dimension_scores={k: dict(v) for k, v in scores.items()},
    )


def _record(dims: tuple[DimensionFact, ...] = (), rules: tuple[str, ...] = (), **extra: Any) -> DecisionRecord:
    values: dict[str, Any] = {
        "pair_id": "p",
        "series": SERIES,
        "stage": "primary",
        "outcome": "verdict",
        "auto_decided": True,
        "candidates": CANDS,
        "judge_winner": FIRST_ID,
        "confidence": 0.9,
        "dimensions": dims,
        "rules_cited": rules,
    }
    return DecisionRecord.model_validate(values | extra)


# --- facts per pair ---------------------------------------------------------------------------------


def test_a_dimensions_winner_is_the_higher_scored_candidate_and_a_tie_against_a_winner_is_a_disagreement() -> None:
    ab = _ordering(
        "AB", {"x": {FIRST_ID: 4, SECOND_ID: 2}, "y": {FIRST_ID: 3, SECOND_ID: 3}, "z": {FIRST_ID: 1, SECOND_ID: 5}}
    )
    ba = _ordering(
        "BA", {"x": {FIRST_ID: 5, SECOND_ID: 1}, "y": {FIRST_ID: 3, SECOND_ID: 4}, "z": {FIRST_ID: 2, SECOND_ID: 2}}
    )
    facts = {f.name: f for f in dimension_facts([ab, ba], CANDS)}
    assert facts["x"] == DimensionFact(name="x", orders_disagree=False, winner="first")
    assert facts["y"] == DimensionFact(name="y", orders_disagree=True, winner=None)
    assert facts["z"] == DimensionFact(name="z", orders_disagree=True, winner=None)


def test_only_dimensions_both_valid_orders_scored_count() -> None:
    ab = _ordering("AB", {"x": {FIRST_ID: 4, SECOND_ID: 2}, "only_ab": {FIRST_ID: 1, SECOND_ID: 2}})
    ba = _ordering("BA", {"x": {FIRST_ID: 4, SECOND_ID: 2}, "half": {FIRST_ID: 4}})
    assert [f.name for f in dimension_facts([ab, ba], CANDS)] == ["x"]
    assert dimension_facts([ab, _ordering("BA", {"x": {FIRST_ID: 1, SECOND_ID: 2}}, valid=False)], CANDS) == ()


def test_for_a_jury_one_jurors_flip_is_a_disagreement_and_jurors_disagreeing_leave_no_winner() -> None:
    first = {"x": {FIRST_ID: 4, SECOND_ID: 2}}
    second = {"x": {FIRST_ID: 2, SECOND_ID: 4}}
    agreeing = [_ordering("AB", first), _ordering("BA", first)]
    other_juror = [_ordering("AB", second), _ordering("BA", second)]
    (fact,) = dimension_facts([*agreeing, *other_juror], CANDS)
    assert (fact.orders_disagree, fact.winner) == (False, None)
    (fact,) = dimension_facts([*agreeing, _ordering("AB", first), _ordering("BA", second)], CANDS)
    assert (fact.orders_disagree, fact.winner) == (True, None)


async def test_a_tone_verdict_records_per_dimension_facts_and_the_rules_its_justifications_cite() -> None:
    pair = make_pair(rubric=tone_rubric(style_guide=GUIDE))
    # tone_reply's stylistic_consistency is always A 5, B 2: position bias on that dimension alone.
    ab = _tone("A", {}, "A follows rule 2.")
    ba = _tone("B", {}, "B misses: open with the customer's name.")
    decision = await judge_pair(pair, ScriptedJudge(per_order(pair, ab, ba)), Policy())
    rec = record_for(decision, pair)
    assert rec is not None
    facts = {f.name: (f.orders_disagree, f.winner) for f in rec.dimensions}
    assert facts == {
        "tone_match": (False, "first"),
        "audience_suitability": (False, "first"),
        "stylistic_consistency": (True, None),
        "guideline_adherence": (False, "TIE"),
    }
    gid = guide_id(GUIDE)
    assert rec.rules_cited == (f"{gid}:1", f"{gid}:2")
    assert "customer's" not in rec.model_dump_json()  # ids only, never the justification's text


async def test_a_head_to_head_records_its_criteria_and_no_rules() -> None:
    pair = make_pair(rubric=h2h_rubric())
    ab = h2h_reply("A", criteria_winners={"clarity": "A", "safety": "TIE"})
    ba = h2h_reply("B", criteria_winners={"clarity": "A", "safety": "TIE"})
    rec = record_for(await judge_pair(pair, ScriptedJudge(per_order(pair, ab, ba)), Policy()), pair)
    assert rec is not None
    facts = {f.name: (f.orders_disagree, f.winner) for f in rec.dimensions}
    assert facts == {"accuracy": (False, "first"), "clarity": (True, None), "safety": (False, "TIE")}
    assert rec.rules_cited == ()


async def test_a_named_rubric_cites_rules_only_with_the_catalog() -> None:
    pair = make_pair(rubric=RubricRef(name="house"))
    catalog = {"house": tone_rubric(style_guide=GUIDE)}
    decision = await judge_pair(
        pair, ScriptedJudge(per_order(pair, _tone("A", {}, "rule 3"), _tone("B", {}, "rule 3"))), Policy(), catalog
    )
    assert (rec := record_for(decision, pair)) is not None
    assert rec.rules_cited == ()
    assert (rec := record_for(decision, pair, catalog)) is not None
    assert rec.rules_cited == (f"{guide_id(GUIDE)}:3",)


async def test_the_tiebreak_stage_record_carries_the_primary_judges_facts_counted_once() -> None:
    pair = make_pair(rubric=tone_rubric(style_guide=GUIDE))
    first = await judge_pair(
        pair, ScriptedJudge(per_order(pair, _tone("A", {}, "rule 2"), _tone("A", {}, "x"))), Policy()
    )
    assert isinstance(first.outcome, TieBreakRequest)
    all_a = {c.name: "A" for c in DEFAULT_TIEBREAK_WEIGHTS.criteria}
    all_b = {c.name: "B" for c in DEFAULT_TIEBREAK_WEIGHTS.criteria}
    second = await resolve_tiebreak(
        first.outcome, ScriptedJudge(per_order(pair, tiebreak_reply(all_a), tiebreak_reply(all_b))), Policy()
    )
    primary_rec, tiebreak_rec = record_for(first, pair), record_for(second, first.outcome)
    assert primary_rec is not None
    assert tiebreak_rec is not None
    assert tiebreak_rec.dimensions == primary_rec.dimensions != ()
    assert tiebreak_rec.rules_cited == primary_rec.rules_cited == (f"{guide_id(GUIDE)}:2",)
    # Through the join: each stage's decision once, the label once against the final (tie-break) record.
    entry, observations = JoinEntry(), []
    for rec in (primary_rec, tiebreak_rec, tiebreak_rec, primary_rec):  # redeliveries
        entry, out = on_record(entry, rec, 0.0)
        observations += out
    entry, out, _ = on_label(entry, HumanLabel(pair_id=pair.pair_id, winner=SECOND_ID, reviewer="ana"), 0.0)
    observations += out
    stats = WindowStats()
    for o in observations:
        stats.add(o)
    counts = stats.dimension_counts
    assert sum(c[0] for c in counts.values()) == len(primary_rec.dimensions)  # orders compared: once per dimension
    # The primary orders flipped (both A), so every dimension A won in AB is B's... each once, and the
    # human's winner (second) is compared with each dimension's agreed winner exactly once.
    assert sum(c[2] for c in counts.values()) == sum(
        1 for f in primary_rec.dimensions if f.winner in ("first", "second")
    )
    (rule,) = stats.rule_counts.values()
    assert rule == [1, 1, 1, 1]  # cited once, in a flipped pair, labelled once, the human not the judge's winner


# --- counts per window ------------------------------------------------------------------------------


def _obs(record: DecisionRecord, winner: str | None = None) -> AuditObservation:
    if winner is None:
        return AuditObservation(kind="decision", series=SERIES, record=record)
    label = HumanLabel(pair_id=record.pair_id, winner=winner, reviewer="ana")
    return AuditObservation(kind="labelled", series=SERIES, record=record, label=label)


def test_the_window_counts_order_and_human_disagreement_per_dimension() -> None:
    stats = WindowStats()
    flipping = (
        DimensionFact(name="style", orders_disagree=True),
        DimensionFact(name="tone", orders_disagree=False, winner="first"),
    )
    steady = (
        DimensionFact(name="style", orders_disagree=False, winner="second"),
        DimensionFact(name="tone", orders_disagree=False, winner="first"),
    )
    for i in range(3):
        stats.add(_obs(_record(flipping, pair_id=f"f{i}")))
        stats.add(_obs(_record(flipping, pair_id=f"f{i}"), SECOND_ID))
    stats.add(_obs(_record(steady)))
    stats.add(_obs(_record(steady), SECOND_ID))
    stats.add(_obs(_record(steady), "TIE"))  # a human tie is not compared
    stats.add(_obs(_record(steady, stage="tiebreak")))  # the tie-break stage repeats the primary facts: not counted
    stats.add(_obs(_record(steady, canary=True), FIRST_ID))  # canaries are measured apart
    stats.add(_obs(_record(steady, rule=True)))  # settled by rule
    assert stats.dimension_counts == {"style": [4, 3, 1, 0], "tone": [4, 0, 4, 4]}
    amb = snapshot(stats, SERIES, *_times(), final=False).ambiguity
    assert amb is not None
    assert [d.name for d in amb.dimensions] == ["style", "tone"]  # style: the orders disagree 3 of 4
    style, tone = amb.dimensions
    assert (style.orders_disagree, style.orders_compared, style.order_disagreement_rate) == (3, 4, 0.75)
    assert (style.order_low, style.order_high) == pytest.approx(wilson_interval(3, 4))
    assert (tone.human_disagree, tone.human_compared, tone.human_disagreement_rate) == (4, 4, 1.0)
    assert tone.order_disagreement_rate == 0.0
    # The existing figures are the same as without the facts.
    plain = WindowStats()
    for o in [_obs(_record(pair_id="x")), _obs(_record(), SECOND_ID)]:
        plain.add(o)
    assert (plain.pairs, plain.confusion) == (1, {"first|second": 1})


def test_rules_are_counted_in_order_and_human_disagreeing_pairs() -> None:
    stats = WindowStats()
    flip = _record(rules=("0000000a:1", "0000000a:2"), flip=True, judge_winner=None, outcome="tiebreak")
    calm = _record(rules=("0000000a:2",))
    stats.add(_obs(flip))
    stats.add(_obs(calm))
    stats.add(_obs(calm, SECOND_ID))  # the human disagrees with the judge
    stats.add(_obs(flip.model_copy(update={"outcome": "review"}), SECOND_ID))  # no judge's winner: not compared
    assert stats.rule_counts == {"0000000a:1": [1, 1, 0, 0], "0000000a:2": [2, 1, 1, 1]}
    amb = stats.ambiguity.snapshot()
    assert amb is not None
    assert [r.rule_id for r in amb.rules] == ["0000000a:2", "0000000a:1"]


def _random_counts(rng: random.Random) -> AmbiguityCounts:
    counts = AmbiguityCounts()
    for _ in range(rng.randint(0, 40)):
        name = f"d{rng.randint(0, 300):03d}"
        counts.add_decision(
            _record((DimensionFact(name=name, orders_disagree=rng.random() < 0.5),), (f"0000000b:{name}",))
        )
    return counts


def test_the_merge_is_associative_and_commutative_even_when_names_are_folded() -> None:
    rng = random.Random(7)
    for _ in range(30):
        a, b, c = (_random_counts(rng) for _ in range(3))
        left, right = a.merge(b).merge(c), a.merge(b.merge(c))
        assert left == right
        assert a.merge(b) == b.merge(a)
    # Folding keeps the totals and at most MAX_KEYS names besides OTHER.
    big = AmbiguityCounts()
    for i in range(MAX_KEYS + 50):
        big.add_decision(_record((DimensionFact(name=f"n{i:04d}", orders_disagree=True),)))
    assert len(big.dimensions) == MAX_KEYS + 1
    assert big.dimensions[OTHER] == [50, 50, 0, 0]
    assert sum(c[0] for c in big.dimensions.values()) == MAX_KEYS + 50


def test_merging_windows_equals_counting_them_together_and_survives_storage() -> None:
    rng = random.Random(3)
    records = [
        _record(
            (DimensionFact(name=rng.choice("xyz"), orders_disagree=rng.random() < 0.3, winner=None),), pair_id=f"p{i}"
        )
        for i in range(60)
    ]
    together, one, two = WindowStats(), WindowStats(), WindowStats()
    for i, rec in enumerate(records):
        together.add(_obs(rec))
        (one if i % 2 else two).add(_obs(rec))
    assert one.ambiguity.merge(two.ambiguity) == together.ambiguity
    window = SeriesWindow(series=SERIES, start=0.0, size=60.0, partition=0, stats=together)
    assert SeriesWindow.from_bytes(window.to_bytes()).stats.ambiguity == together.ambiguity
    amb = window.snapshot(final=True).ambiguity
    assert amb is not None
    assert counts_of(amb) == together.ambiguity  # a report can add the windows' snapshots up


def test_a_window_stored_before_these_counts_loads_with_none() -> None:
    window = SeriesWindow(series=SERIES, start=0.0, size=60.0, partition=0)
    body = json.loads(window.to_bytes())
    del body["stats"]["dimension_counts"], body["stats"]["rule_counts"]
    loaded = SeriesWindow.from_bytes(json.dumps(body).encode())
    assert loaded.snapshot(final=False).ambiguity is None


def _times() -> tuple[Any, Any]:
    from datetime import UTC, datetime

    return datetime(2030, 1, 1, tzinfo=UTC), datetime(2030, 1, 2, tzinfo=UTC)
