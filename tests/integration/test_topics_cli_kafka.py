"""``pairjudge topics create`` and ``topics check``, as the compose stack and the Kubernetes Job run them.

Deployments create the topics once, then start every worker with ``--no-create-topics``: the command must
create each topic with its partition count, be idempotent, and refuse (exit 2, naming the topic) a cluster
whose topic has another partition count, since partitions cap a consumer group's workers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pairjudge.schemas.kinds import TOPICS
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.admin import topic_partitions
from pairjudge.streams.kafka.topics import topic_specs

pytestmark = [pytest.mark.kafka]


def _pairjudge(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = shutil.which("pairjudge", path=str(Path(sys.executable).parent))
    assert command, "the pairjudge console script is not installed"
    return subprocess.run([command, *args], env=env, capture_output=True, text=True, timeout=120, check=False)


def _env(bootstrap: str, prefix: str, partitions: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAIRJUDGE_")}
    return env | {
        "PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS": bootstrap,
        "PAIRJUDGE_KAFKA__PARTITIONS": str(partitions),
        "PAIRJUDGE_TOPICS__PREFIX": prefix,
        "PAIRJUDGE_WORKER__APP_ID": prefix,
    }


async def test_create_is_idempotent_and_check_refuses_another_partition_count(
    kafka_bootstrap: str, unique_topic_prefix: str
) -> None:
    prefix = unique_topic_prefix.rstrip(".")
    env = _env(kafka_bootstrap, prefix, partitions=6)

    missing = _pairjudge(["topics", "check"], env)
    assert missing.returncode == 2, missing.stderr
    assert f"{prefix}." in missing.stderr

    for attempt in ("creates", "finds them"):
        done = _pairjudge(["topics", "create"], env)
        assert done.returncode == 0, f"{attempt}: {done.stderr}"
    specs = topic_specs(
        Settings.model_validate(
            {"kafka": {"partitions": 6}, "topics": {"prefix": prefix}, "worker": {"app_id": prefix}}
        )
    )
    assert f"{len(specs)} topics ready on {kafka_bootstrap}" in done.stderr
    found = await topic_partitions(kafka_bootstrap, list(specs))
    assert {name: len(parts) for name, parts in found.items()} == {n: s.partitions for n, s in specs.items()}
    assert len(found[f"{prefix}.pairs"]) == 6
    # Every topic kind of the registry, with its layout: a new kind is created without a line of its own.
    for kind, spec in TOPICS.items():
        assert len(found[f"{prefix}.{kind}"]) == (1 if spec.single_partition else 6), kind

    assert _pairjudge(["topics", "check"], env).returncode == 0
    # A deployment that changed its partition count after the topics exist is told so, not started.
    other = _pairjudge(["topics", "create"], _env(kafka_bootstrap, prefix, partitions=8))
    assert other.returncode == 2
    assert f"{prefix}.pairs" in other.stderr
