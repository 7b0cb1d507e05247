"""Files with pair content are private to their owner, whatever the umask.

The response cache, the trace file, ``evaluate --out``, ``report --out``, the demo's files and the review
service's SQLite database.

Files are 0o600 and directories 0o700 when created; ones that already exist with wider permissions are
tightened, and that is logged. Modes are read back with ``stat`` from the real files on disk.
"""

from __future__ import annotations

import io
import json
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.schemas import ReviewRequest
from pairjudge.streams.audit.report import parse_audit_events, write_report
from pairjudge.streams.cli.demo import _write_audit, _write_outcomes
from pairjudge.streams.cli.evaluate import run_evaluate
from pairjudge.streams.config.settings import Settings, TelemetrySettings
from pairjudge.streams.judges.cache_codec import CachedReply
from pairjudge.streams.judges.cache_store import ResponseCache
from pairjudge.streams.kafka.collector import Outcomes
from pairjudge.streams.review.store import ReviewStore
from pairjudge.streams.security.files import (
    open_private_append,
    open_private_write,
    private_dir,
    private_file,
    tighten_tree,
    write_private_text,
)
from pairjudge.streams.telemetry.tracing import make_tracer_provider
from tests.unit.factories import make_pair, tone_reply

LOGGER = "pairjudge.streams.security.files"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o022, 0o000, 0o277], ids=["umask022", "umask000", "umask277"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """Run the test under a permissive, an open and a too-strict umask; restore the old one after."""
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def reply(text: str = '{"winner": "A"}') -> CachedReply:
    return CachedReply(text=text, model="m", input_tokens=1, output_tokens=1, latency_s=0.1, stored_at=0.0)


def everything_under(root: Path) -> list[Path]:
    return sorted(root.rglob("*"))


# --- the response cache ------------------------------------------------------------------------


def test_a_new_cache_is_private_whatever_the_umask(
    tmp_path: Path, umask: int, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "parent" / "cache"
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        cache = ResponseCache(directory)
        try:
            cache.put("small", reply())
            cache.put("large", reply('{"j": "' + "x" * 100_000 + '"}'))  # over diskcache's 32 KiB: a file
            assert cache.get("large") is not None
            assert cache.get("small") is not None
        finally:
            cache.close()
    assert mode(directory) == 0o700
    paths = everything_under(directory)
    files = [p for p in paths if p.is_file()]
    dirs = [p for p in paths if p.is_dir()]
    names = {p.name for p in files}
    assert "cache.db" in names
    assert any(p.suffix == ".val" for p in files), "the large reply should be stored in a file"
    assert len(dirs) >= 2  # the value file's two levels of sub-directories
    assert {str(p.relative_to(directory)): oct(mode(p)) for p in files} == {
        str(p.relative_to(directory)): oct(0o600) for p in files
    }
    assert all(mode(d) & 0o077 == 0 for d in dirs), {str(d): oct(mode(d)) for d in dirs}
    assert [r for r in caplog.records if r.name == LOGGER] == []  # nothing was exposed: nothing to report


def test_an_existing_open_cache_is_tightened_and_that_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "cache"
    old = os.umask(0o022)
    try:
        cache = ResponseCache(directory)
        cache.put("large", reply('{"j": "' + "x" * 100_000 + '"}'))
        cache.close()
    finally:
        os.umask(old)
    # As an older version (or a careless operator) left it: readable by everyone.
    for path in [directory, *everything_under(directory)]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        cache = ResponseCache(directory)
        try:
            assert cache.get("large") is not None  # the entries survive
        finally:
            cache.close()
    assert mode(directory) == 0o700
    for path in everything_under(directory):
        assert mode(path) == (0o700 if path.is_dir() else 0o600), path
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert any(str(directory) in m and "0o755" in m and "0o700" in m for m in messages), messages
    assert any("cache.db" in m and "0o644" in m and "0o600" in m for m in messages), messages
    assert any("readable by others" in m and "files or directories" in m for m in messages), messages


def test_private_helpers_set_exact_modes(tmp_path: Path, umask: int) -> None:
    made = private_dir(tmp_path / "a" / "b")
    assert mode(made) == 0o700
    created = private_file(made / "f")
    assert mode(created) == 0o600
    assert created.read_bytes() == b""
    os.chmod(created, 0o666)
    created.write_text("kept")
    private_file(created)
    assert (mode(created), created.read_text()) == (0o600, "kept")
    os.chmod(made, 0o777)
    private_dir(made)
    assert mode(made) == 0o700
    nested = made / "x" / "y"
    nested.mkdir(parents=True, mode=0o777)
    os.chmod(nested, 0o777)
    (nested / "v").write_text("v")
    os.chmod(nested / "v", 0o644)
    assert tighten_tree(made) >= 2
    assert (mode(nested), mode(nested / "v")) == (0o700, 0o600)


# --- the trace file -------------------------------------------------------------------------------


def _write_one_span(path: Path) -> None:
    provider = make_tracer_provider(TelemetrySettings(exporter="file", file_path=path))
    with provider.get_tracer("test").start_as_current_span("one"):
        pass
    provider.force_flush()
    provider.shutdown()


def test_a_new_trace_file_is_private_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    path = tmp_path / "out" / "traces.jsonl"
    _write_one_span(path)
    assert mode(path) == 0o600
    assert mode(path.parent) == 0o700  # created by us, so ours to make private
    assert json.loads(path.read_text().splitlines()[0])["name"] == "one"


def test_an_existing_trace_file_is_tightened_appended_to_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text('{"name": "earlier"}\n')
    path.chmod(0o644)
    parent_mode = mode(tmp_path)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        _write_one_span(path)
    assert mode(path) == 0o600
    assert mode(tmp_path) == parent_mode  # a directory that already existed is not ours to change
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == {"name": "earlier"}
    assert json.loads(lines[1])["name"] == "one"
    [message] = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert "trace file" in message
    assert str(path) in message
    assert "0o644" in message
    assert "0o600" in message


def test_open_private_append_appends(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    with open_private_append(path) as out:
        out.write("a\n")
    with open_private_append(path) as out:
        out.write("b\n")
    assert path.read_text() == "a\nb\n"
    assert mode(path) == 0o600


# --- every other file written with pair content --------------------------------------------------


def test_open_private_write_creates_tightens_and_truncates(
    tmp_path: Path, umask: int, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "new" / "out.jsonl"
    with open_private_write(path) as out:
        out.write("first\n")
    assert (mode(path), mode(path.parent), path.read_text()) == (0o600, 0o700, "first\n")
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger=LOGGER), open_private_write(path, what="evaluate output") as out:
        assert mode(path) == 0o600  # private before anything new is written
        out.write("second\n")
    assert (mode(path), path.read_text()) == (0o600, "second\n")
    assert any("evaluate output" in r.getMessage() and "0o644" in r.getMessage() for r in caplog.records)
    existing = tmp_path / "shared"
    existing.mkdir(mode=0o755)
    existing.chmod(0o755)
    write_private_text(existing / "report.html", "<html></html>")
    assert (mode(existing / "report.html"), mode(existing)) == (0o600, 0o755)  # an existing parent is left


async def test_evaluate_out_is_private(tmp_path: Path, umask: int) -> None:
    pairs = _write_lines(tmp_path / "set.jsonl", [make_pair(pair_id=f"p{i}").model_dump_json() for i in range(2)])
    out = tmp_path / "results" / "out.jsonl"
    await run_evaluate(
        Settings(),
        pairs,
        out_path=out,
        console=Console(file=io.StringIO()),
        judge=ScriptedJudge(lambda r: tone_reply()),
    )
    assert len(out.read_text().splitlines()) == 2
    assert (mode(out), mode(out.parent)) == (0o600, 0o700)


def test_the_report_is_private(tmp_path: Path, umask: int) -> None:
    out = tmp_path / "reports" / "report.html"
    write_report(parse_audit_events([]), out)
    assert "<html" in out.read_text()
    assert (mode(out), mode(out.parent)) == (0o600, 0o700)


def test_the_demo_files_are_private(tmp_path: Path, umask: int) -> None:
    outcomes_path, audit_path = tmp_path / "demo-outcomes.jsonl", tmp_path / "demo-audit.jsonl"
    outcomes = Outcomes(expected={"p1"})
    outcomes.final["p1"] = ("verdicts", {"pair_id": "p1", "winner": "cand-a"})
    _write_outcomes(outcomes_path, outcomes)
    _write_audit(audit_path, [], [])
    assert json.loads(outcomes_path.read_text())["pair_id"] == "p1"
    assert (mode(outcomes_path), mode(audit_path)) == (0o600, 0o600)


async def test_the_review_database_is_private(tmp_path: Path, umask: int) -> None:
    database = tmp_path / "review" / "queue.db"
    store = ReviewStore(f"sqlite+aiosqlite:///{database}")
    try:
        await store.migrate()
        await store.add(make_review_request())
    finally:
        await store.engine.dispose()
    assert database.stat().st_size > 0  # SQLite used the file we created
    files = [p for p in database.parent.iterdir() if p.name.startswith("queue.db")]
    assert {p.name: oct(mode(p)) for p in files} == {p.name: oct(0o600) for p in files}
    assert mode(database.parent) == 0o700


def _write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def make_review_request() -> ReviewRequest:
    pair = make_pair(pair_id="p-review")
    return ReviewRequest(pair_id=pair.pair_id, reason="tiebreak_disagreement", stage="tiebreak", pair=pair)
