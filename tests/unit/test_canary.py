"""Canary rounds: labelled pairs under fresh ids, marked as canary traffic; a bad file sends nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pairjudge.agents.pair_checks import resolve_rubric
from pairjudge.agents.prompts import reask, render_primary, render_tiebreak
from pairjudge.schemas import CandidatePair, KnownLabel, PairMetadata
from pairjudge.schemas.rubric import DEFAULT_TIEBREAK_WEIGHTS
from pairjudge.streams.audit.canary import CanaryFileError, load_canaries, round_events, round_stamp
from tests.unit.factories import FIRST_ID, make_pair


def write(path: Path, *pairs: CandidatePair | str) -> Path:
    path.write_text("\n".join(p if isinstance(p, str) else p.model_dump_json() for p in pairs) + "\n")
    return path


def test_every_round_sends_every_canary_under_a_fresh_id(tmp_path: Path) -> None:
    pairs = load_canaries(write(tmp_path / "c.jsonl", make_pair(human_label=KnownLabel(winner=FIRST_ID))))
    first = round_events(pairs, round_stamp(datetime(2026, 12, 1, 10, tzinfo=UTC)))
    second = round_events(pairs, round_stamp(datetime(2026, 12, 1, 11, tzinfo=UTC)))
    a, b = (CandidatePair.model_validate_json(events[0]) for events in (first, second))
    assert a.pair_id == "canary-20261201T100000-pair-0001-factory"
    assert a.pair_id != b.pair_id
    assert a.metadata.traffic == "canary"
    assert a.metadata.experiment_id == pairs[0].metadata.experiment_id
    assert a.human_label == KnownLabel(winner=FIRST_ID)
    assert a.candidates == pairs[0].candidates


def test_a_canary_without_a_label_or_a_line_that_is_no_pair_stops_everything(tmp_path: Path) -> None:
    labelled = make_pair(human_label=KnownLabel(winner=FIRST_ID))
    with pytest.raises(CanaryFileError, match=r"c.jsonl:2: canary 'pair-0001-factory' has no human_label"):
        load_canaries(write(tmp_path / "c.jsonl", labelled, make_pair()))
    with pytest.raises(CanaryFileError, match=r"d.jsonl:2: not a candidate pair"):
        load_canaries(write(tmp_path / "d.jsonl", labelled, json.dumps({"pair_id": "x"})))
    with pytest.raises(CanaryFileError, match="no canary pairs"):
        load_canaries(write(tmp_path / "e.jsonl", ""))


def test_long_ids_are_cut_to_the_pair_id_limit(tmp_path: Path) -> None:
    long_id = "p" * 128
    pairs = load_canaries(write(tmp_path / "c.jsonl", make_pair(pair_id=long_id, human_label=KnownLabel(winner="TIE"))))
    (event,) = round_events(pairs, "20261201T100000")
    assert len(CandidatePair.model_validate_json(event).pair_id) == 128


def test_a_canary_pairs_requests_ask_for_a_fresh_reply_and_no_other_pairs_do(tmp_path: Path) -> None:
    pairs = load_canaries(write(tmp_path / "c.jsonl", make_pair(human_label=KnownLabel(winner=FIRST_ID))))
    canary = CandidatePair.model_validate_json(round_events(pairs, "20261201T100000")[0])
    weights = DEFAULT_TIEBREAK_WEIGHTS
    for pair, fresh in ((canary, True), (pairs[0], False), (make_pair(metadata=PairMetadata()), False)):
        rubric = resolve_rubric(pair, {})
        requests = [render_primary(pair, rubric, "BA"), render_tiebreak(pair, weights, "AB")]
        requests.append(reask(requests[0], "not json", "no JSON object", attempt=1))  # a re-ask keeps it
        assert [r.fresh for r in requests] == [fresh] * 3, pair.metadata.traffic
