"""Files the export commands write so that a run killed at any moment (SIGKILL, the machine losing power) leaves
something the next run can use: a whole file or the old one, never half of one; an appended file whose torn last
line is cut away before anything is appended after it.

``pairjudge evaluate --out`` does the same for its results file (``streams.api.results.ResultsFile``).
tests/integration/test_export_killed_kafka.py kills the exports at seeded points of their writing.
"""

from __future__ import annotations

import os
from pathlib import Path


def replace_whole(path: Path, text: str) -> None:
    """Write ``text`` beside ``path``, flush it to disk, then rename it over ``path``: a reader (or a run after a
    kill) sees the old file or the new one. The directory is synced too, so the rename survives a power loss."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    with partial.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    partial.replace(path)
    sync_directory(path.parent)


def drop_torn_tail(path: Path) -> int:
    """Cut ``path`` back to its last whole line and return how many bytes went (0: it ended on one, or is missing).

    Every line these commands append ends in a newline and is on disk before the run records it as written, so
    bytes after the last newline are a row a killed run had not finished: its pair was never counted as written.
    Appending after them would glue the next row onto half of one."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    if size == 0:
        return 0
    with path.open("rb") as handle:
        # Read backwards in blocks until a newline: a torn row is at most one row long.
        end, block = size, 64 * 1024
        while end > 0:
            start = max(0, end - block)
            handle.seek(start)
            chunk = handle.read(end - start)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
                break
            end = start
        else:
            keep = 0
    if keep < size:
        os.truncate(path, keep)
    return size - keep


def sync_directory(directory: Path) -> None:
    """Flush a directory's entries (a rename into it) to disk; a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
