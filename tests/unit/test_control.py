"""Live settings: overrides per key, tombstones back to the configured value, bad updates ignored."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import TopicPartition

from pairjudge.agents.policy import Policy
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.schemas import ControlUpdate, ThresholdUpdate
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.live import PolicyHolder, apply_record, apply_threshold_record, parse_value
from pairjudge.streams.judges.panel import JudgePanel
from pairjudge.streams.kafka.readers import caught_up
from pairjudge.streams.telemetry.tracing import Telemetry
from pairjudge.streams.worker.pipeline import Origin, Pipeline
from tests.unit.factories import make_pair, per_order, tone_reply


def _record(key: str, value: object) -> tuple[bytes, bytes]:
    return key.encode(), ControlUpdate(key=key, value=value).model_dump_json().encode()


def test_updates_override_and_tombstones_restore_the_configured_value() -> None:
    holder = PolicyHolder(Policy(primary_confidence_threshold=0.7, tiebreak_enabled=True))
    apply_record(holder, *_record("tiebreak_enabled", False))
    apply_record(holder, *_record("primary_confidence_threshold", 0.8))
    assert (holder.current.tiebreak_enabled, holder.current.primary_confidence_threshold) == (False, 0.8)
    apply_record(holder, b"tiebreak_enabled", None)  # compaction's delete marker
    assert (holder.current.tiebreak_enabled, holder.current.primary_confidence_threshold) == (True, 0.8)
    apply_record(holder, b"primary_confidence_threshold", None)
    assert holder.current == holder.base


@pytest.mark.parametrize(
    "value",
    [
        b"not json",
        b'{"key": "tiebreak_enabled", "value": 0.5}',  # a number where a switch is needed
        b'{"key": "primary_confidence_threshold", "value": true}',
        b'{"key": "primary_confidence_threshold", "value": 7}',  # outside [0, 1]
        b'{"key": "retention", "value": 1}',  # not a live setting
    ],
)
def test_a_bad_update_changes_nothing(value: bytes) -> None:
    holder = PolicyHolder(Policy())
    apply_record(holder, b"k", value)
    assert holder.current == Policy()


async def test_a_worker_that_follows_control_judges_nothing_until_caught_up() -> None:
    # A worker must not judge under settings that were changed before it started: the stage waits
    # for the holder to be caught up, then judges under the updated policy.
    pair = make_pair()
    judge = ScriptedJudge(per_order(pair, tone_reply("A", confidence=0.85), tone_reply("B", confidence=0.85)))
    holder = PolicyHolder(Policy(primary_confidence_threshold=0.7), follows_control=True)
    settings = Settings()
    pipeline = Pipeline(JudgePanel.single(judge), holder, Telemetry(settings.telemetry), {}, settings.max_event_bytes)
    stage = asyncio.create_task(pipeline.on_pair(pair.model_dump_json().encode(), None, Origin()))
    await asyncio.sleep(0.2)
    assert not stage.done()
    assert judge.requests == []
    apply_record(holder, *_record("primary_confidence_threshold", 0.9))  # read from the control topic
    holder.ready.set()  # ... up to the end offsets seen at start-up
    result = await asyncio.wait_for(stage, 5)
    kinds = [message.kind for message in result.outgoing]
    # 0.85 is below the updated 0.9: not the verdict the old 0.7 gave (and the decision's audit record).
    assert kinds == ["tiebreak", "decisions"]
    assert len(judge.requests) == 2


def test_parse_value() -> None:
    assert parse_value("tiebreak_enabled", "False") is False
    assert parse_value("tiebreak_confidence_threshold", "0.65") == 0.65
    with pytest.raises(ValueError, match="true or false"):
        parse_value("tiebreak_enabled", "maybe")


P0, P1 = TopicPartition("pairjudge.control", 0), TopicPartition("pairjudge.control", 1)


@pytest.mark.parametrize(
    ("positions", "targets", "expected"),
    [
        ({P0: 0}, {P0: 0}, True),  # an empty topic: ready at once
        ({}, {}, True),
        ({P0: 4999}, {P0: 5000}, False),  # one update still unread
        ({P0: 5000}, {P0: 5000}, True),
        ({P0: 5003}, {P0: 5000}, True),  # compaction gaps, or updates written since start-up
        ({P0: 5000, P1: 2}, {P0: 5000, P1: 3}, False),  # every partition, not just one
        ({P0: 5000}, {P0: 5000, P1: 0}, False),  # a partition with no position yet is not caught up
    ],
)
def test_caught_up_means_every_position_reached_its_start_up_end_offset(
    positions: dict[TopicPartition, int], targets: dict[TopicPartition, int], expected: bool
) -> None:
    assert caught_up(positions, targets) is expected


def test_the_kappa_guard_is_a_live_switch() -> None:
    holder = PolicyHolder(Policy())
    apply_record(holder, *_record("kappa_guard_tripped", True))
    assert holder.current.kappa_guard_tripped
    apply_record(holder, b"kappa_guard_tripped", b'{"key": "kappa_guard_tripped", "value": 1}')  # not a switch
    assert holder.current.kappa_guard_tripped
    apply_record(holder, *_record("kappa_guard_tripped", False))
    assert not holder.current.kappa_guard_tripped
    assert parse_value("kappa_guard_tripped", "true") is True
    with pytest.raises(ValueError, match="true or false"):
        parse_value("kappa_guard_tripped", "1")


def _threshold(series: str, value: float | None) -> tuple[bytes, bytes]:
    update = ThresholdUpdate(series=series, threshold=value, target=0.9, risk=0.1, labels=120)
    return series.encode(), update.model_dump_json().encode()


def test_series_thresholds_follow_their_topic_and_survive_control_changes() -> None:
    holder = PolicyHolder(Policy(primary_confidence_threshold=0.7))
    apply_threshold_record(holder, *_threshold("s1", 0.82))
    apply_threshold_record(holder, *_threshold("s2", 0.9))
    assert holder.current.primary_threshold_for("s1") == 0.82
    apply_record(holder, *_record("primary_confidence_threshold", 0.75))
    apply_record(holder, b"primary_confidence_threshold", None)  # a tombstone: back to configured
    assert dict(holder.current.series_thresholds) == {"s1": 0.82, "s2": 0.9}
    apply_threshold_record(holder, *_threshold("s1", None))  # no calibrated threshold any more
    apply_threshold_record(holder, b"s2", None)  # a tombstone
    assert dict(holder.current.series_thresholds) == {}
    assert holder.current.primary_threshold_for("s1") == 0.7


def test_an_invalid_threshold_record_changes_nothing() -> None:
    holder = PolicyHolder(Policy())
    apply_threshold_record(holder, *_threshold("s1", 0.8))
    apply_threshold_record(holder, b"s1", b'{"series": "s1", "threshold": 7}')
    apply_threshold_record(holder, b"s1", b"not json")
    assert dict(holder.current.series_thresholds) == {"s1": 0.8}
