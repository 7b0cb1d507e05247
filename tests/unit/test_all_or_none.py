"""All of an input's outputs or none (streams.worker.delivery): sizes are checked before the first send."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from pairjudge.streams.worker.delivery import Delivery, RecordTooLarge, record_bytes
from pairjudge.streams.worker.pipeline import Outgoing, StageResult
from tests.unit.test_delivery import ORIGIN, out, rig


def message(value_bytes: int, *, headers: int = 1) -> Outgoing:
    return Outgoing("review", b"pair-0001", b"x" * value_bytes, [("traceparent", b"0" * 55)] * headers)


@pytest.mark.parametrize("size", [0, 1, 1_000, 250_000, 999_000])
def test_the_estimate_is_never_below_the_batch_aiokafka_builds(size: int) -> None:
    m = message(size, headers=3)
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=2**24,
    )
    builder.append(0, timestamp=1_700_000_000_000, key=m.key, value=m.value, headers=list(m.headers))
    assert record_bytes(m) >= len(builder.build())


async def test_one_record_over_the_limit_stops_every_send() -> None:
    r = rig()
    limit = r.app.conf.producer_max_request_size = r.delivery.max_record_bytes = 10_000
    fits, too_large = message(1_000), message(limit)
    with pytest.raises(RecordTooLarge, match="none of the input's outputs was sent"):
        await r.delivery.publish([fits, too_large, fits])
    assert r.log == []


async def test_a_pair_whose_audit_copy_is_too_large_gets_only_its_dead_letter() -> None:
    r = rig()
    r.delivery.max_record_bytes = 10_000
    result = StageResult(outgoing=[out("verdicts"), message(20_000), out("decisions")], pair_id="pair-1")
    await r.delivery.deliver("primary", result, b"raw", ORIGIN)
    sent = [entry for entry in r.log if entry[0] in ("send", "undeliverable")]
    assert [entry[:2] for entry in sent] == [("undeliverable", "primary"), ("send", "deadletter")]
    assert "over the producer's limit of 10000" in sent[0][4]


def test_the_limit_is_the_producers() -> None:
    r = rig()
    r.app.conf.producer_max_request_size = 12_345
    delivery = Delivery(r.app, topics={}, pipeline=r.pipeline, outcomes=Any, inflight=r.inflight)  # type: ignore[arg-type]
    overhead = record_bytes(message(12_000)) - 12_000  # the same length varints as near the limit
    delivery.check_sizes([message(12_345 - overhead)])
    with pytest.raises(RecordTooLarge, match="12345"):
        delivery.check_sizes([message(12_345 - overhead + 1)])
