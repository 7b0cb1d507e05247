"""Faust's ``Worker`` without its spinner and with pairjudge's log filter: ``QuietWorker``.

Hooks it relies on (faust-streaming 0.15.3, ``faust/worker.py`` and ``mode/worker.py``):

- ``Worker.spinner``: set to None after ``__init__``. At WARNING and above Faust adds a handler that
  spins on every record and sets the root logger to DEBUG for it, so every debug line of aiokafka and
  Faust (several per message produced) was formatted only to turn the spinner: 3-5% of a busy worker's
  CPU, for a progress wheel nobody sees in a container's log.
- ``Worker.on_setup_root_logger``: Faust has just replaced the root handlers with its own; the quiet
  filter (``streams.telemetry.logs``) goes on those too.
- ``Worker.on_execute`` and ``Worker.on_shutdown`` (public ``mode`` hooks): the callers' start and stop
  steps run on the loop that runs the app.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from faust import Worker

from pairjudge.streams.telemetry.logs import install_quiet_logging


async def _nothing() -> None:
    return None


class QuietWorker(Worker):
    """``faust.Worker`` with no spinner, the quiet log filter, and ``on_started`` / ``on_stopped`` steps."""

    def __init__(
        self,
        *args: Any,
        on_started: Callable[[], Awaitable[None]] = _nothing,
        on_stopped: Callable[[], Awaitable[None]] = _nothing,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.spinner = None
        self._on_started = on_started
        self._on_stopped = on_stopped

    def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
        super().on_setup_root_logger(logger, level)
        install_quiet_logging()

    async def on_execute(self) -> None:
        await super().on_execute()
        # Before the app starts.
        await self._on_started()

    async def on_shutdown(self) -> None:
        await super().on_shutdown()
        # Once the app and its agents have stopped, on the loop that opened them.
        await self._on_stopped()
