"""Faust really calls every hook pairjudge overrides (``streams.faust_compat.HOOKS``), in a real worker's life.

tests/unit/test_faust_hooks.py reads source text: the hook exists, pairjudge overrides it, the named Faust
caller mentions it. This test runs the code. A real ``pairjudge worker`` (offline judge, real Apache Kafka)
runs with a recorder on every override (``tests/fixtures/faust_hook_recorder.py``) through its whole life:

* start-up and its first assignment, a few pairs judged, acked and committed;
* a second worker joins the group: a rebalance, with a revocation and a new assignment on the first;
* more pairs, shared by both workers; then SIGTERM to the first, a graceful stop.

Every override (and each "wraps" and "sets" hook, through its witness) must have been called at least once;
the failure names those that never were. A Faust upgrade that renames or stops calling one of them leaves
pairjudge's override silent (the commit ledger bypassed, pairs lost after a rebalance) while every unit test
of the ledger stays green: this is the test that notices.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pairjudge.streams.cli.demo import start_worker, stop_process
from pairjudge.streams.config.settings import Settings, environ_for
from pairjudge.streams.faust_compat import HOOKS
from pairjudge.streams.kafka.collector import collect_outcomes
from pairjudge.streams.kafka.producer import send_events
from pairjudge_dev.workers import kafka_run, read_log
from tests.fixtures import faust_hook_recorder
from tests.fixtures.marked import marked_pair

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
#: Recorded by name (overrides) or by witness (the "wraps" and "sets" hooks); "reads" are pairjudge's own doing.
EXPECTED = {
    faust_hook_recorder.key(h): h
    for h in HOOKS
    if h.kind == "overrides" or (h.kind in ("wraps", "sets") and h.attribute in faust_hook_recorder.WITNESSED)
}


def start_recorded_worker(settings: Settings, record: Path, log_path: Path) -> subprocess.Popen[bytes]:
    """``pairjudge worker`` as ``start_worker`` runs it, with the hooks recorded into ``record``."""
    env = environ_for(settings)
    # The recorder lives in the tests package, at the checkout's root.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.fixtures.faust_hook_recorder", str(record), "worker", "--no-create-topics"],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def recorded(record: Path) -> set[str]:
    return set(record.read_text().splitlines()) if record.exists() else set()


async def wait_recorded(record: Path, name: str, timeout: float) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout
    while name not in recorded(record):
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.2)
    return True


ASSIGNED = "pairjudge.streams.faust_compat.offsets:LedgerConsumer.on_partitions_assigned"


def test_every_hook_in_the_index_is_witnessed() -> None:
    """A new "wraps" or "sets" hook needs a witness in the recorder, or this test would not cover it."""
    not_covered = sorted(
        f"{h.ours}.{h.attribute}"
        for h in HOOKS
        if h.kind in ("wraps", "sets") and h.attribute not in faust_hook_recorder.WITNESSED
    )
    assert not not_covered, f"add a witness to tests/fixtures/faust_hook_recorder.py for {not_covered}"


async def test_faust_calls_every_overridden_hook(kafka_bootstrap: str, tmp_path: Path) -> None:
    settings = await kafka_run(kafka_bootstrap, tmp_path, "hooks", worker={"shutdown_grace_s": 5.0})
    prefix = settings.topics.prefix
    record = tmp_path / "hooks.txt"
    first_log, second_log = tmp_path / "worker-1.log", tmp_path / "worker-2.log"
    first = start_recorded_worker(settings, record, first_log)
    second: subprocess.Popen[bytes] | None = None
    try:
        alone = [f"{prefix}-a{i}" for i in range(6)]
        await send_events(settings, [marked_pair(pair_id, f"A{i}") for i, pair_id in enumerate(alone)])
        outcomes = await collect_outcomes(settings, alone, timeout=120)
        assert outcomes.ok, (outcomes.missing, read_log(first_log)[-3000:])

        # A second member joins: the first has its partitions revoked and gets a new assignment (its second;
        # the first came at start-up). The shared pairs are sent after it, so they are judged, acked and
        # committed under the new assignment.
        assert ASSIGNED in recorded(record), read_log(first_log)[-3000:]
        second = start_worker(settings, second_log)
        rebalanced = await wait_recorded(record, ASSIGNED + faust_hook_recorder.SECOND, timeout=90)
        assert rebalanced, (
            "no rebalance on the first worker",
            read_log(first_log)[-3000:],
            read_log(second_log)[-3000:],
        )
        shared = [f"{prefix}-b{i}" for i in range(12)]
        await send_events(settings, [marked_pair(pair_id, f"B{i}") for i, pair_id in enumerate(shared)])
        outcomes = await collect_outcomes(settings, shared, timeout=120)
        assert outcomes.ok, (outcomes.missing, read_log(first_log)[-3000:], read_log(second_log)[-3000:])
        # Let a commit interval (1 s) pass after the last pairs, so commits of the new assignment happen.
        await asyncio.sleep(2.5)

        await asyncio.to_thread(stop_process, first, 30.0)  # SIGTERM: the graceful stop
        assert first.returncode == 0, read_log(first_log)[-4000:]
    finally:
        stop_process(first)
        if second is not None:
            stop_process(second)

    seen = recorded(record)
    never = sorted(name for name in EXPECTED if name not in seen)
    assert not never, (
        "Faust never called these pairjudge overrides in a worker's whole life (start, commits, a rebalance, "
        f"a graceful stop); renamed or no longer called in this Faust? {never}\n"
        f"called: {sorted(seen)}\n{read_log(first_log)[-3000:]}"
    )
