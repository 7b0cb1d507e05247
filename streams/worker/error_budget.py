"""A bug stops the worker; bad input is dead-lettered (docs/operations/failures.md).

Bad input never raises: the stages turn it into a dead letter with its reason. An exception that still
escapes a stage is a bug. One such pair is dead-lettered as ``internal_error`` and the worker goes on: a
bug that one odd pair trips should not stop a partition. But a deploy with a bug on every pair of some
rubric would then dead-letter the whole stream at full speed, committing each pair as it went. So the
errors are counted: past ``limit`` within ``window_s`` seconds, the next one stops the worker without
committing its pair (``WorkerBroken``), and the supervisor's restart loop, the readiness probe and the
alert rules show a broken deploy instead of an emptied stream.

A pair whose offset already stopped a worker (a crash mark, ``streams.worker.published``) is never
counted as isolated: failing again, it stops the worker again, and after ``crash_loop_limit`` stops it is
dead-lettered as ``crashed_worker`` instead (``streams.worker.delivery``).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

#: Exit status of a worker stopped by a run of unexpected errors (3 is the recovery watch's).
BROKEN_DEPLOY_EXIT = 4


class WorkerBroken(Exception):
    """Unexpected errors came in a run: stop without committing the pair that raised this one."""


class ErrorBudget:
    """Counts unexpected errors in a sliding window; once spent, stays spent for this process."""

    def __init__(self, limit: int, window_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        if limit < 0 or window_s <= 0:
            raise ValueError("limit must be >= 0 and window_s > 0")
        self.limit = limit
        self.window_s = window_s
        self._clock = clock
        self._seen: deque[float] = deque()
        #: Why the budget was spent, once it is: the worker is broken from then on.
        self.spent: str | None = None

    def charge(self, what: str) -> bool:
        """Count one unexpected error (``what``: its type and message); True while it may be dead-lettered.

        False once more than ``limit`` came within ``window_s``, and for every error after that: the
        worker must stop (a half-stopped worker dead-lettering what it still reads would empty the stream).
        """
        if self.spent is not None:
            return False
        now = self._clock()
        while self._seen and now - self._seen[0] > self.window_s:
            self._seen.popleft()
        if len(self._seen) >= self.limit:
            self.spent = (
                f"{len(self._seen) + 1} unexpected errors within {self.window_s:g} s (the limit is "
                f"{self.limit}, PAIRJUDGE_WORKER__INTERNAL_ERROR_LIMIT); the latest: {what}"
            )
            return False
        self._seen.append(now)
        return True
