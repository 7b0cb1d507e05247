"""Helper processes that announce their port: a child prints ``PORT <n>`` on stdout once it listens.

The simulated judge servers of the tests and benchmarks run as processes of their own, so their CPU
is not the client's (a bench measures the client) and a SIGKILLed worker never takes them down.
"""

from __future__ import annotations

import select
import subprocess
from collections.abc import Sequence
from pathlib import Path

#: The checkout root: children run ``python -m pairjudge_dev...`` or ``-m bench...`` from here.
REPO = Path(__file__).resolve().parents[1]


class AnnouncedProcess:
    """``argv`` in its own session (signals to the caller do not reach it), stderr to ``log_path``."""

    def __init__(self, argv: Sequence[str], log_path: Path, *, startup_timeout: float = 30.0) -> None:
        self.log_path = log_path
        with log_path.open("ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                list(argv), stdout=subprocess.PIPE, stderr=log, cwd=REPO, start_new_session=True
            )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], startup_timeout)
        line = self.proc.stdout.readline().decode() if ready else ""
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(
                f"{argv[2:3]} did not start: {line!r}; log:\n{log_path.read_text(errors='replace')[-2000:]}"
            )
        self.port = int(line.split()[1])

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL of a judge server (ends in ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s. Safe to call twice."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
