"""The human-basis replay's building blocks on a small slice of the dev split (the test split is for the
figures): the stream, the sampling plan, and coverage of the full-label human win rate."""

from __future__ import annotations

import pytest

from pairjudge_dev.human_replay import (
    ACTIVE_CONFIDENT,
    ACTIVE_UNCERTAIN,
    Mode,
    StreamPair,
    build_stream,
    outcome,
    plan,
    rate,
    replay,
    streams_by_name,
)

# On one worker under xdist: the streams are built once (a module fixture), not once per worker.
pytestmark = pytest.mark.xdist_group("human-replay-streams")

PER_SET = 120
REPETITIONS = 50


@pytest.fixture(scope="module")
def streams() -> dict[str, list[StreamPair]]:
    return streams_by_name(build_stream("dev", PER_SET))


def test_stream_is_the_longer_text_against_the_people(streams: dict[str, list[StreamPair]]) -> None:
    assert set(streams) == {"formal", "casual", "polite", "plain", "all"}
    formal = streams["formal"]
    assert len(formal) > 100
    assert {p.y for p in formal} <= {0.0, 1.0}
    assert all(p.final == 0.5 for p in formal if p.stage == "review")
    # Formal sentences run longer and people prefer them; the judge sees it far less often.
    assert rate([p.y for p in formal]) - rate([outcome(p, "final") for p in formal]) > 0.1
    assert rate([p.y for p in formal]) - rate([outcome(p, "primary") for p in formal]) > 0.1


def test_plan_labels_every_review_pair_and_records_probabilities() -> None:
    review = StreamPair("formal", "p1", 1.0, 0.5, "review", None, 1.0, 0.9)
    sure = StreamPair("formal", "p2", 1.0, 1.0, "primary", 0.9, 1.0, 0.9)
    unsure = StreamPair("formal", "p3", 0.0, 1.0, "tiebreak", 0.65, 0.5, 0.0)
    assert plan(review, "final", "uniform 5%") == ("review", 1.0)
    assert plan(review, "primary", "uniform 5%") == ("audit", 0.05)
    assert plan(sure, "final", "uniform 10%") == ("audit", 0.10)
    assert plan(sure, "final", "active 25/5%") == ("confident", ACTIVE_CONFIDENT)
    assert plan(unsure, "final", "active 25/5%") == ("uncertain", ACTIVE_UNCERTAIN)
    assert plan(unsure, "primary", "active 25/5%") == ("uncertain", ACTIVE_UNCERTAIN)


@pytest.mark.parametrize("mode", ["final", "primary"])
def test_human_basis_covers_the_full_label_rate(streams: dict[str, list[StreamPair]], mode: Mode) -> None:
    # All sets together: on one set's 120 pairs the final mode's audit stratum gets ~6 labels, too few
    # for the CLT interval (it covered 36 of 50 there; see the report of pairjudge_dev/human_replay.py).
    stream = streams["all"]
    r = replay(stream, "all", mode, "uniform 10%", REPETITIONS, checkpoint=len(stream))  # the end only
    assert r.repetitions == REPETITIONS
    assert r.fixed_covered / REPETITIONS >= 0.8
    assert r.labels_only_covered / REPETITIONS >= 0.8
    # Sampled labels only: fewer than all pairs (review pairs are all labelled in the final mode).
    reviews = sum(p.stage == "review" for p in stream) if mode == "final" else 0
    assert reviews < r.labels / REPETITIONS < reviews + 0.25 * (len(stream) - reviews)


def test_primary_stream_confidence_sequence_covers(streams: dict[str, list[StreamPair]]) -> None:
    r = replay(streams["all"], "all", "primary", "uniform 10%", REPETITIONS, checkpoint=100)
    assert r.cs_covered / REPETITIONS >= 0.8
    assert r.fixed_covered / REPETITIONS >= 0.8
    # The confidence sequence pays for looking at every checkpoint with a wider interval.
    assert r.cs_width > r.fixed_width
