"""What every end-to-end test on Kafka sets up: its own topics and group, and workers that get stopped."""

from __future__ import annotations

import contextlib
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from streams.brokers import create_topics
from streams.demo import start_worker, stop_process
from streams.settings import Settings
from streams.topics import topic_specs


async def kafka_run(bootstrap: str, tmp_path: Path, tag: str, **sections: dict[str, Any]) -> Settings:
    """Settings for one test run, with its topics created: a topic prefix and consumer group of its own,
    4 partitions, worker data under ``tmp_path``. ``sections`` add to (or override) those settings."""
    run = f"{tag}-{uuid.uuid4().hex[:8]}"
    values: dict[str, dict[str, Any]] = {
        "kafka": {"bootstrap_servers": bootstrap, "partitions": 4},
        "topics": {"prefix": run},
        "worker": {"app_id": f"pairjudge-{run}", "data_dir": tmp_path / "data"},
    }
    for name, section in sections.items():
        values[name] = {**values.get(name, {}), **section}
    settings = Settings(**values)  # type: ignore[arg-type]
    await create_topics(bootstrap, topic_specs(settings))
    return settings


@contextlib.contextmanager
def running_worker(settings: Settings, log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A ``pairjudge worker`` process, stopped gracefully (which flushes its spans) however the test ends."""
    worker = start_worker(settings, log_path)
    try:
        yield worker
    finally:
        stop_process(worker)
