"""Live settings on real Kafka: the tie-break is switched off and on again without a redeploy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.collector import collect_outcomes
from streams.control import publish_control
from streams.producer import send_events
from tests.integration.harness import kafka_run, running_worker
from tests.integration.pairgen import sample_dicts

pytestmark = [pytest.mark.kafka]


def _near_identical(prefix: str, n: int) -> bytes:
    # Near-identical outputs: the offline judge cannot separate them, so the pair needs the tie-break.
    pair = next(p for p in sample_dicts() if p["pair_id"] == "support-password")
    pair["pair_id"] = f"{prefix}-{n}"
    return json.dumps(pair).encode()


async def test_the_tiebreak_switch_reaches_a_running_worker(kafka_bootstrap: str, tmp_path: Path) -> None:
    settings = await kafka_run(kafka_bootstrap, tmp_path, "ctl")
    prefix = settings.topics.prefix
    # Set before the worker starts: it must read the topic up to date before judging anything.
    await publish_control(settings, "tiebreak_enabled", False, "test")
    with running_worker(settings, tmp_path / "worker.log"):
        await send_events(settings, [_near_identical(prefix, 1)])
        off = await collect_outcomes(settings, {f"{prefix}-1"}, timeout=60)

        await publish_control(settings, "tiebreak_enabled", None, "test")  # back to the configured value
        # The running worker applies it; keep sending fresh pairs until one is routed through the tie-break.
        for n in range(2, 12):
            await send_events(settings, [_near_identical(prefix, n)])
            on = await collect_outcomes(settings, {f"{prefix}-{n}"}, timeout=60)
            if on.final[f"{prefix}-{n}"][1].get("reason") != "tiebreak_disabled":
                break
    log = (tmp_path / "worker.log").read_text(errors="replace")
    assert off.complete, log[-3000:]
    kind, event = off.final[f"{prefix}-1"]
    assert (kind, event["reason"]) == ("review", "tiebreak_disabled")
    assert on.complete
    kind, event = on.final[f"{prefix}-{n}"]
    assert event.get("reason") != "tiebreak_disabled", "the worker never picked up the cleared setting"
    assert kind == "verdicts" or event["stage"] == "tiebreak"
    assert n <= 4, f"the change took {n - 1} pairs to arrive"
    assert "control: tiebreak_enabled cleared" in log
