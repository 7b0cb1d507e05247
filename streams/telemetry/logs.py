"""Rate-limited, de-duplicated logging for the worker process.

While the broker is down, aiokafka's and Faust's reconnect loops log the same few errors over and
over (``Unable connect to node with id %s: %s``, ``Unable to update metadata from %r`` ...), a hundred
or more lines a second per worker, which buries everything else and fills disks. ``QuietFilter``
collapses repeats:

- records are keyed by (logger name, level, message *template*): ``record.msg`` before formatting,
  so repeats that differ only in offsets, addresses or node ids are one key;
- the first record of a key always passes, immediately;
- after that, at most one record per key passes per ``window_s``; it carries how many were
  suppressed since the previous one (``[repeated 57 times in the last 10 s; ...]``);
- nothing is held back: a suppressed record is counted and dropped, and counts still pending when
  a key goes quiet are logged by a sweeper thread (or at exit) as a summary line of their own, so
  the totals are never lost.

It is a ``logging.Filter`` on *handlers* (a filter on a logger does not see records propagated from
child loggers). One instance serves every handler: its decision is remembered on the record, so a
record is counted once however many handlers it reaches.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_WINDOW_S", "QuietFilter", "attach", "install_quiet_logging"]

#: At most one line per key per this many seconds (after its first).
DEFAULT_WINDOW_S: Final = 10.0
#: Keys tracked at once. Beyond it, records of new keys pass untracked: a first occurrence is never dropped.
DEFAULT_MAX_KEYS: Final = 4096

#: Record attributes: the filter's decision (so a second handler reuses it) and the summary mark.
_DECIDED: Final = "_pairjudge_quiet_pass"
_SUMMARY: Final = "_pairjudge_quiet_summary"

_Key = tuple[str, int, str]


@dataclass(slots=True)
class _Slot:
    #: When the last line of this key was let through (or summarised).
    shown_at: float
    suppressed: int = 0
    # Enough of the latest suppressed record to summarise it with current values, without keeping
    # the record itself (its exc_info would keep a traceback's frames alive).
    args: Any = None
    pathname: str = ""
    lineno: int = 0
    func: str | None = None


def _template(msg: object) -> str:
    # Non-string messages (an exception logged as the message) key by their type: their text
    # varies like formatted arguments do.
    return msg if isinstance(msg, str) else f"<{type(msg).__qualname__}>"


def _render(template: str, args: Any) -> str:
    """``template % args`` as logging would, or the bare template if they do not fit."""
    if not args:
        return template
    try:
        return str(template % args)
    except (TypeError, ValueError, KeyError):
        return template


class QuietFilter(logging.Filter):
    """Pass a key's first record, then at most one per ``window_s``, annotated with the repeats it stands for."""

    def __init__(
        self,
        window_s: float = DEFAULT_WINDOW_S,
        *,
        max_keys: int = DEFAULT_MAX_KEYS,
        clock: Callable[[], float] = time.monotonic,
        min_level: int = logging.WARNING,
    ) -> None:
        super().__init__()
        #: Records below this level pass untouched: floods are warnings and errors, while INFO lines
        #: (rebalances, assignments; shown only when asked for) are diagnostics worth every line.
        self.min_level = min_level
        if window_s <= 0:
            raise ValueError("window_s must be positive")
        self.window_s = window_s
        self.max_keys = max_keys
        self._clock = clock
        self._slots: dict[_Key, _Slot] = {}
        # Faust runs its Kafka consumer in a thread of its own, and the sweeper is another.
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        decided = record.__dict__.get(_DECIDED)
        if decided is None:
            decided = self._decide(record)
            record.__dict__[_DECIDED] = decided
        return bool(decided)

    def _decide(self, record: logging.LogRecord) -> bool:
        if record.__dict__.get(_SUMMARY) or record.levelno < self.min_level:
            return True
        key = (record.name, record.levelno, _template(record.msg))
        now = self._clock()
        with self._lock:
            slot = self._slots.get(key)
            if slot is None:
                if len(self._slots) >= self.max_keys:
                    self._forget_idle(now)
                if len(self._slots) < self.max_keys:
                    self._slots[key] = _Slot(shown_at=now)
                return True
            since = now - slot.shown_at
            if since < self.window_s:
                slot.suppressed += 1
                slot.args, slot.pathname, slot.lineno, slot.func = (
                    record.args,
                    record.pathname,
                    record.lineno,
                    record.funcName,
                )
                return False
            suppressed = slot.suppressed
            slot.shown_at, slot.suppressed, slot.args = now, 0, None
        if suppressed:
            # Formatting now rather than appending to the template: the suffix must not be read as
            # %-placeholders, and this record is about to be formatted anyway.
            record.msg = f"{record.getMessage()} {self._suffix(suppressed, since)}"
            record.args = ()  # not None: mode's formatter turns None into (None,)
        return True

    def _suffix(self, suppressed: int, since: float) -> str:
        return f"[repeated {suppressed} times in the last {since:.0f} s; shown at most once per {self.window_s:g} s]"

    def _forget_idle(self, now: float) -> None:
        """Drop keys with nothing pending whose window is over (caller holds the lock)."""
        for key in [k for k, s in self._slots.items() if not s.suppressed and now - s.shown_at >= self.window_s]:
            del self._slots[key]

    def flush(self, *, force: bool = False) -> int:
        """Log a summary for every key whose window is over with repeats pending (every key, if ``force``).

        Returns how many summaries were logged. Called by the sweeper every ``window_s / 2`` and at exit.
        """
        now = self._clock()
        due: list[tuple[_Key, _Slot, float]] = []
        with self._lock:
            for key, slot in self._slots.items():
                since = now - slot.shown_at
                if slot.suppressed and (force or since >= self.window_s):
                    due.append((key, dataclasses.replace(slot), since))
                    slot.shown_at, slot.suppressed, slot.args = now, 0, None
            self._forget_idle(now)
        for (name, level, template), pending, since in due:
            self._emit_summary(name, level, template, pending, since)
        return len(due)

    def _emit_summary(self, name: str, level: int, template: str, pending: _Slot, since: float) -> None:
        logger = logging.getLogger(name)
        message = f"{_render(template, pending.args)} {self._suffix(pending.suppressed, since)}"
        record = logger.makeRecord(
            name, level, pending.pathname, pending.lineno, message, (), None, pending.func, {_SUMMARY: True}
        )
        # handle(), not log(): the level was already accepted when the repeats were logged.
        logger.handle(record)

    def pending(self) -> int:
        """Suppressed records not yet reported (for tests and diagnostics)."""
        with self._lock:
            return sum(slot.suppressed for slot in self._slots.values())


def _emitting_handlers() -> list[logging.Handler]:
    """The root's handlers and those of every existing logger (a library may have added its own)."""
    handlers = list(logging.root.handlers)
    for logger in list(logging.Logger.manager.loggerDict.values()):
        if isinstance(logger, logging.Logger):
            handlers.extend(logger.handlers)
    return [h for h in handlers if not isinstance(h, logging.NullHandler)]


def attach(quiet: QuietFilter) -> int:
    """Put ``quiet`` on every handler that can emit now; returns how many handlers it is on."""
    handlers = _emitting_handlers()
    for handler in handlers:
        handler.addFilter(quiet)  # a no-op when it is already there
    return len(set(handlers))


_installed: QuietFilter | None = None
_install_lock = threading.Lock()


def install_quiet_logging(window_s: float = DEFAULT_WINDOW_S) -> QuietFilter:
    """The process's filter, attached to every current handler; call again after handlers are replaced.

    The first call also starts the sweeper thread and registers the final flush at exit.
    """
    global _installed
    with _install_lock:
        if _installed is None:
            _installed = QuietFilter(window_s)
            _start_sweeper(_installed)
            # Registered after logging's own atexit hook, so it runs first, while handlers still work.
            atexit.register(_installed.flush, force=True)
        quiet = _installed
    attach(quiet)
    return quiet


def _start_sweeper(quiet: QuietFilter) -> None:
    interval = quiet.window_s / 2

    def sweep() -> None:
        while True:
            time.sleep(interval)
            try:
                quiet.flush()
            except Exception:  # the sweeper must outlive one bad summary
                log.exception("logquiet: logging the pending summaries failed")

    threading.Thread(target=sweep, name="pairjudge-logquiet", daemon=True).start()
