"""The human gate's replay on recorded verdicts (bench/autoj_human_replay.py): how it reads a pair through the core,
orients it and draws streams at an exact true win rate. Synthetic rows only (Auto-J's data is never shipped)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from bench import autoj_human_replay as replay
from pairjudge.schemas.backtest import RecordedPair


def _row(pair_id: str, ab: str, ba: str, label: str) -> RecordedPair:
    return RecordedPair.model_validate(
        {"pair_id": pair_id, "labels": [label], "primary": {"ab": {"winner": ab}, "ba": {"winner": ba}}}
    )


def test_the_core_gives_each_pair_its_stratum_probability_and_judge_outcome() -> None:
    agreed = asyncio.run(replay._judge(_row("p-agree", "A", "B", "second")))  # both orders named the first
    flipped = asyncio.run(replay._judge(_row("p-flip", "A", "A", "first")))
    ties = asyncio.run(replay._judge(_row("p-tie", "tie", "tie", "tie")))
    assert agreed == replay.Judged("confident", 0.05, "first", "second")
    assert flipped == replay.Judged("review", 1.0, None, "first")
    assert ties == replay.Judged("review", 1.0, None, "tie")


PAIRS = [
    *[replay.Judged("confident", 0.05, "first", "first")] * 40,
    *[replay.Judged("confident", 0.05, "second", "first")] * 10,
    *[replay.Judged("confident", 0.05, "first", "tie")] * 5,
    *[replay.Judged("review", 1.0, None, "second")] * 15,
]


@pytest.mark.parametrize("sides", ["random sides", "judge's pick"])
@pytest.mark.parametrize("theta", [0.4, 0.5, 0.6])
def test_the_draw_has_exactly_the_true_win_rate_asked_for(sides: str, theta: float) -> None:
    source = replay.items(PAIRS, sides).at(theta)
    assert float(np.sum(source.weight)) == pytest.approx(1.0, abs=1e-12)
    assert float(np.sum(source.weight * source.y)) == pytest.approx(theta, abs=1e-12)
    if sides == "judge's pick":  # the judge names the challenger wherever it named a response
        assert np.all(source.f[source.stratum == 0] == 1.0)


def test_streams_count_every_pair_once_and_label_every_review_pair() -> None:
    source = replay.items(PAIRS, "random sides").at(0.5)
    sums = replay.stream_sums(source, streams=8, pairs=400, every=20, rng=np.random.default_rng(1))
    total = sums["confident"].pairs + sums["review"].pairs
    assert np.all(total[:, -1] == 400)
    assert np.all(np.diff(total, axis=1) == 20)
    assert np.array_equal(sums["review"].labels, sums["review"].pairs)
    # About 314 of each stream's 400 pairs are confident, labelled at 5%: some labels, far fewer than pairs.
    assert 0 < sums["confident"].labels[:, -1].sum() < 0.15 * sums["confident"].pairs[:, -1].sum()
