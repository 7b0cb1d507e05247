"""What ``pairjudge worker --processes N`` does when one of its worker processes exits (pure: no processes, no clock).

A worker's exit status says whether starting it again can help (docs/operations/health.md#exit-statuses):

- **2**, a start-up refusal: an unverified Faust runtime, a data directory another process holds, topics that
  are missing or a broker that refuses the credentials, settings that do not validate. The same process
  would be refused again, so nothing is restarted: the supervisor stops the others and exits 2 itself, for
  whoever runs it (an orchestrator, systemd, a person) to see the cause in the log.
- **4**, a broken deploy: a run of unexpected errors (streams.worker.error_budget). Every process runs the
  same code, so restarting one would only crash-loop the stream; the supervisor stops everything and exits 4.
- **3**, a stalled table recovery (streams.faust_compat.recovery_watch): the worker stopped so that the group
  rebalances; starting it again is the cure.
- Anything else (a crash, a signal from outside, even 0 when nobody asked it to stop): restarted after a
  backoff, so a process that fails at once does not spin.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field

from pairjudge.streams.faust_compat.recovery_watch import EXIT_RECOVERY_STALLED
from pairjudge.streams.worker.error_budget import BROKEN_DEPLOY_EXIT

#: A worker that refused to start (the CLI's EXIT_UNVERIFIED_RUNTIME and EXIT_DATA_DIR_IN_USE, ensure_topics,
#: invalid settings); the supervisor's own refusals use it too.
EXIT_START_UP_REFUSED = 2
#: The supervisor's status when a worker process had to be killed at the end of the shutdown grace, or
#: stopped with an error while everything was stopping.
EXIT_UNCLEAN_STOP = 1

#: How a worker ends when it is asked to stop: 0 from Faust's own handler, or the signal itself when it came
#: before Faust installed that handler (a process still importing).
_STOPPED_CLEANLY = {0, -signal.SIGTERM, -signal.SIGINT}


@dataclass(frozen=True)
class AfterExit:
    """What to do about one worker process that exited."""

    #: Start it again (after ``Backoff.delay``).
    restart: bool
    #: Stop every other process and exit with this status; None to go on.
    stop_with: int | None
    #: For the log and ``/readyz``: the exit and what it means.
    why: str


def describe(status: int) -> str:
    """An exit status as people read it: ``exit status 3 (table recovery stalled)``, ``killed by SIGKILL``."""
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    meaning = {
        0: "stopped without being asked",
        EXIT_START_UP_REFUSED: "refused to start",
        EXIT_RECOVERY_STALLED: "table recovery stalled",
        BROKEN_DEPLOY_EXIT: "stopped by a run of unexpected errors: a broken deploy",
    }.get(status, "crashed")
    return f"exit status {status} ({meaning})"


def after_exit(status: int, *, stopping: bool) -> AfterExit:
    """The decision for a worker process that exited with ``status`` (negative: killed by that signal).

    ``stopping``: the supervisor is already stopping everything, so nothing is restarted whatever the status.
    """
    why = describe(status)
    if stopping:
        return AfterExit(restart=False, stop_with=None, why=why)
    if status == EXIT_START_UP_REFUSED:
        return AfterExit(restart=False, stop_with=EXIT_START_UP_REFUSED, why=why)
    if status == BROKEN_DEPLOY_EXIT:
        return AfterExit(restart=False, stop_with=BROKEN_DEPLOY_EXIT, why=why)
    return AfterExit(restart=True, stop_with=None, why=why)


def shutdown_status(statuses: list[int], *, stop_with: int | None) -> int:
    """The supervisor's exit status once every worker process has exited.

    ``stop_with``: the status a worker's exit decided (``AfterExit.stop_with``), which wins. Otherwise the stop
    came from a signal: 0 when every process stopped cleanly, ``EXIT_UNCLEAN_STOP`` when one had to be killed
    or failed on the way out.
    """
    if stop_with is not None:
        return stop_with
    return 0 if all(status in _STOPPED_CLEANLY for status in statuses) else EXIT_UNCLEAN_STOP


@dataclass
class Backoff:
    """Seconds before a worker process is started again: ``first_s``, doubling after every exit that came
    sooner than ``stable_s`` after its start, up to ``max_s``; back to ``first_s`` after a stable run."""

    first_s: float = 1.0
    max_s: float = 60.0
    stable_s: float = 60.0
    _next_s: float | None = field(default=None, init=False)

    def delay(self, ran_for_s: float) -> float:
        """The wait before the next start of a process that has just exited after ``ran_for_s`` seconds."""
        if self._next_s is None or ran_for_s >= self.stable_s:
            self._next_s = self.first_s
        wait = self._next_s
        self._next_s = min(self.max_s, wait * 2)
        return wait
