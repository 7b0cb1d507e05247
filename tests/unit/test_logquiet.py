"""The worker's log filter: first occurrences pass at once, repeats collapse to one counted line per window."""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Iterator

import pytest
from mode.utils.logging import DefaultFormatter, ExtensionFormatter

from pairjudge.streams.telemetry.logs import QuietFilter, attach


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Lines(logging.Handler):
    """Keeps what a handler would write."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.getMessage()}")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def quiet(clock: Clock) -> QuietFilter:
    return QuietFilter(10.0, clock=clock)


@pytest.fixture
def lines(quiet: QuietFilter) -> Iterator[Lines]:
    """A logger of the test's own (no propagation) whose one handler carries the filter."""
    handler = Lines()
    handler.addFilter(quiet)
    logger = logging.getLogger("test.logquiet")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def _log(msg: str, *args: object, level: int = logging.ERROR, name: str = "test.logquiet") -> None:
    logging.getLogger(name).log(level, msg, *args)


def test_the_first_occurrence_passes_and_repeats_within_the_window_are_counted_not_shown(
    quiet: QuietFilter, lines: Lines, clock: Clock
) -> None:
    _log("Unable connect to node with id %s: %s", 1, "refused")
    for port in range(57):
        clock.now += 0.1
        _log("Unable connect to node with id %s: %s", 1, f"refused on {port}")  # same template, new text
    assert lines.lines == ["ERROR Unable connect to node with id 1: refused"]
    assert quiet.pending() == 57


def test_the_next_record_after_the_window_carries_the_count(quiet: QuietFilter, lines: Lines, clock: Clock) -> None:
    _log("Unable to update metadata from %s", [1])
    for _ in range(5):
        clock.now += 1
        _log("Unable to update metadata from %s", [1])
    clock.now += 6  # 11 s after the first line
    _log("Unable to update metadata from %s", [2])
    assert lines.lines[1] == (
        "ERROR Unable to update metadata from [2] [repeated 5 times in the last 11 s; shown at most once per 10 s]"
    )
    assert quiet.pending() == 0
    clock.now += 1
    _log("Unable to update metadata from %s", [3])  # a new window began with that line
    assert len(lines.lines) == 2


def test_keys_are_logger_level_and_template(lines: Lines) -> None:
    _log("fetch failed: %s", "a")
    _log("fetch failed: %s", "b", level=logging.WARNING)  # another level
    _log("fetch failed: %s", "c", name="test.logquiet.other")  # another logger (propagates to ours)
    _log("metadata failed: %s", "d")  # another template
    _log("fetch failed: %s", "e")  # a repeat
    assert lines.lines == [
        "ERROR fetch failed: a",
        "WARNING fetch failed: b",
        "ERROR fetch failed: c",
        "ERROR metadata failed: d",
    ]


def test_a_quiet_key_is_summarised_by_flush_so_no_count_is_lost(quiet: QuietFilter, lines: Lines, clock: Clock) -> None:
    _log("Heartbeat failed: %s", "not ready")
    for _ in range(3):
        clock.now += 1
        _log("Heartbeat failed: %s", "node 1 not ready")
    assert quiet.flush() == 0  # the window is still open: nothing is due yet
    clock.now += 8
    assert quiet.flush() == 1
    assert lines.lines[-1] == (
        "ERROR Heartbeat failed: node 1 not ready [repeated 3 times in the last 11 s; shown at most once per 10 s]"
    )
    clock.now += 10
    assert quiet.flush() == 0  # nothing new: no line, and the key is forgotten...
    _log("Heartbeat failed: %s", "again")
    assert lines.lines[-1] == "ERROR Heartbeat failed: again"  # ...so its next record is a first again


def test_flush_at_exit_reports_pending_counts_before_the_window_ends(
    quiet: QuietFilter, lines: Lines, clock: Clock
) -> None:
    _log("Connection lost")
    clock.now += 2
    _log("Connection lost")
    assert quiet.flush(force=True) == 1
    assert lines.lines[-1] == "ERROR Connection lost [repeated 1 times in the last 2 s; shown at most once per 10 s]"


def test_one_filter_on_two_handlers_counts_each_record_once(quiet: QuietFilter, lines: Lines, clock: Clock) -> None:
    second = Lines()
    second.addFilter(quiet)
    logging.getLogger("test.logquiet").addHandler(second)
    try:
        _log("boom %d", 1)
        clock.now += 1
        _log("boom %d", 2)
        clock.now += 10
        _log("boom %d", 3)
    finally:
        logging.getLogger("test.logquiet").removeHandler(second)
    expected = ["ERROR boom 1", "ERROR boom 3 [repeated 1 times in the last 11 s; shown at most once per 10 s]"]
    assert lines.lines == expected
    assert second.lines == expected


def test_percent_signs_in_the_text_and_non_string_messages_are_safe(lines: Lines, clock: Clock) -> None:
    _log("progress %s", "100%s done")
    clock.now += 1
    _log("progress %s", "50%d done")
    clock.now += 10
    _log("progress %s", "%(x)s")
    logging.getLogger("test.logquiet").error(ValueError("first"))
    logging.getLogger("test.logquiet").error(ValueError("second"))  # keyed by type: a repeat
    assert lines.lines == [
        "ERROR progress 100%s done",
        "ERROR progress %(x)s [repeated 1 times in the last 11 s; shown at most once per 10 s]",
        "ERROR first",
    ]


@pytest.mark.parametrize("formatter", [ExtensionFormatter(), DefaultFormatter("%(levelname)s %(message)s")])
def test_annotated_records_format_through_fausts_formatters(
    quiet: QuietFilter, clock: Clock, formatter: logging.Formatter
) -> None:
    # Faust's worker formats with mode's formatters; ExtensionFormatter rewrites record.args, and
    # once turned args=None into (None,), which broke every annotated line.
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    handler.addFilter(quiet)
    logger = logging.getLogger("test.logquiet.mode")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.error("Unable connect to node with id %s: %s", 1, "refused")
        clock.now += 1
        logger.error("Unable connect to node with id %s: %s", 1, "refused")
        clock.now += 10
        logger.error("Unable connect to node with id %s: %s", 1, "refused")
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert "Logging error" not in text
    assert "Traceback" not in text
    assert text.count("Unable connect to node with id 1: refused") == 2
    assert "[repeated 1 times in the last 11 s; shown at most once per 10 s]" in text


def test_a_first_occurrence_passes_even_when_the_key_table_is_full(clock: Clock) -> None:
    quiet = QuietFilter(10.0, max_keys=2, clock=clock)
    handler = Lines()
    handler.addFilter(quiet)
    logger = logging.getLogger("test.logquiet.full")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        for n in range(4):
            logger.error(f"unique message {n}")  # f-strings: every template is new
        logger.error("unique message 0")  # still tracked: a repeat
    finally:
        logger.removeHandler(handler)
    assert handler.lines == [f"ERROR unique message {n}" for n in range(4)]


def test_concurrent_threads_let_exactly_one_record_through(quiet: QuietFilter, lines: Lines) -> None:
    # Faust's Kafka consumer logs from a thread of its own.
    def hammer() -> None:
        for n in range(5000):
            _log("Failed fetch messages from %s: %s", 1, n)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(lines.lines) == 1
    assert quiet.pending() == 4 * 5000 - 1


def test_attach_reaches_every_emitting_handler_and_is_idempotent() -> None:
    quiet = QuietFilter()
    root_handler, library_handler = Lines(), Lines()
    library = logging.getLogger("test.logquiet.library")
    null = logging.NullHandler()
    library.addHandler(library_handler)
    library.addHandler(null)
    logging.root.addHandler(root_handler)
    try:
        attach(quiet)
        attach(quiet)
        assert root_handler.filters == [quiet]
        assert library_handler.filters == [quiet]
        assert null.filters == []
    finally:
        logging.root.removeHandler(root_handler)
        library.removeHandler(library_handler)
        library.removeHandler(null)
        # attach() also reached pytest's own handlers: take the filter off them again.
        for handler in [*logging.root.handlers, *_all_logger_handlers()]:
            handler.removeFilter(quiet)


def _all_logger_handlers() -> list[logging.Handler]:
    loggers = [lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)]
    return [h for lg in loggers for h in lg.handlers]


def test_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        QuietFilter(0)


def test_info_lines_are_never_collapsed(quiet: QuietFilter, lines: Lines, clock: Clock) -> None:
    # Rebalance and assignment lines share a template but each says something new.
    for generation in range(5):
        clock.now += 0.1
        _log("Setting newly assigned partitions %s", {f"pairs/{generation}"}, level=logging.INFO)
    assert len(lines.lines) == 5
    assert quiet.pending() == 0
