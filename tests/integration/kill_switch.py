"""Run a pairjudge command that kills itself with SIGKILL partway through writing its files.

``python -m tests.integration.kill_switch DIR BUDGET ARGS...`` runs ``pairjudge ARGS`` with every file opened for
writing under ``DIR`` counted, character by character, against ``BUDGET``. The write that would go past the budget
writes only up to it, flushes, and the process sends itself SIGKILL: on disk is what a kill at that moment leaves
(any prefix of what was being written, and nothing after it). Renaming or truncating a file under ``DIR`` costs
one character, so a budget can also land between writing a file and renaming it into place.

A timed kill from outside lands almost never inside a write (a few hundred rows take milliseconds); counting
makes every seeded moment of the writing reachable. Only the test process loads this module.
"""

from __future__ import annotations

import builtins
import io
import os
import signal
import sys
from pathlib import Path
from typing import IO, Any


class _Budget:
    def __init__(self, under: Path, characters: int) -> None:
        self.under = under
        self.left = characters

    def watched(self, file: object) -> bool:
        if not isinstance(file, str | os.PathLike):
            return False
        return Path(os.fspath(file)).resolve().is_relative_to(self.under)

    def spend(self, cost: int) -> int:
        """How much of ``cost`` may happen before the kill; kills (after the caller did that much) when short."""
        allowed = min(cost, self.left)
        self.left -= allowed
        return allowed


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class _Counted:
    """A file object whose writes spend the budget."""

    def __init__(self, inner: IO[Any], budget: _Budget) -> None:
        self._inner = inner
        self._budget = budget

    def write(self, data: Any) -> int:
        allowed = self._budget.spend(len(data))
        if allowed < len(data):
            self._inner.write(data[:allowed])
            self._inner.flush()
            _die()
        return self._inner.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __iter__(self) -> Any:
        return iter(self._inner)

    def __enter__(self) -> _Counted:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._inner.__exit__(*exc)


def arm(under: Path, characters: int) -> None:
    budget = _Budget(under.resolve(), characters)
    real_open, real_replace, real_rename, real_truncate = io.open, os.replace, os.rename, os.truncate

    def counted_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real_open(file, mode, *args, **kwargs)
        if any(flag in mode for flag in "wax+") and budget.watched(file):
            return _Counted(handle, budget)
        return handle

    def step(real: Any) -> Any:
        def counted(path: Any, *args: Any, **kwargs: Any) -> Any:
            if budget.watched(path) and budget.spend(1) < 1:
                _die()
            return real(path, *args, **kwargs)

        return counted

    io.open = builtins.open = counted_open
    os.replace, os.rename, os.truncate = step(real_replace), step(real_rename), step(real_truncate)


if __name__ == "__main__":
    arm(Path(sys.argv[1]), int(sys.argv[2]))
    sys.argv = ["pairjudge", *sys.argv[3:]]
    from pairjudge.streams.cli.main import main

    main()
