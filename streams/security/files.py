"""Files only their owner can read: everything pairjudge writes that holds pair content or secrets.

The response cache's store, the trace file, ``pairjudge evaluate --out``, ``pairjudge report --out``,
the demo's ``out/`` files, the review service's SQLite database and the worker's data directory all
hold what pairs said (cached judge replies quote the outputs; traces may carry prompts and outputs
when content capture is on), so they are created ``0o600`` (files) and ``0o700`` (directories)
whatever the process's umask. One that already exists with wider permissions is tightened, and that
is logged as a WARNING naming the path and both modes, because the data in it may already have been
readable by others. Workers that share a cache directory must therefore run as the same user.

A path we cannot tighten (owned by another user) is logged as an ERROR and used as it is: refusing to
start would not make what is already in it private.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import IO, Final

log = logging.getLogger(__name__)

PRIVATE_FILE_MODE: Final = 0o600
PRIVATE_DIR_MODE: Final = 0o700
_GROUP_OTHER: Final = 0o077


def _mode(st: os.stat_result) -> int:
    return stat.S_IMODE(st.st_mode)


def _tightened(path: Path, old: int, new: int, what: str) -> None:
    if old & _GROUP_OTHER:
        log.warning("%s %s was readable by others (mode %s); tightened it to %s", what, path, oct(old), oct(new))


def _cannot_tighten(path: Path, old: int, exc: OSError, what: str) -> None:
    log.error("%s %s has mode %s and cannot be made private: %s", what, path, oct(old), exc.strerror or exc)


def private_dir(path: Path | str) -> Path:
    """``path`` as a directory that only its owner may enter: created ``0o700`` (missing parents with
    the default mode), or an existing one stripped of group and other permissions."""
    path = Path(path)
    try:
        path.mkdir(mode=PRIVATE_DIR_MODE, parents=True)
    except FileExistsError:
        if not path.is_dir():
            raise
        old = _mode(path.stat())
        if old & _GROUP_OTHER:
            new = old & ~_GROUP_OTHER
            try:
                path.chmod(new)
            except OSError as exc:
                _cannot_tighten(path, old, exc, "directory")
            else:
                _tightened(path, old, new, "directory")
        return path
    # mkdir's mode is filtered by the umask: set it exactly.
    path.chmod(PRIVATE_DIR_MODE)
    return path


def _private_fd(fd: int, path: Path, what: str) -> None:
    old = _mode(os.fstat(fd))
    if old == PRIVATE_FILE_MODE:
        return
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
    except OSError as exc:
        _cannot_tighten(path, old, exc, what)
    else:
        _tightened(path, old, PRIVATE_FILE_MODE, what)


def private_file(path: Path | str, *, what: str = "file") -> Path:
    """Create ``path`` if missing, empty, ``0o600``; make an existing one ``0o600`` (wider: logged)."""
    path = Path(path)
    fd = os.open(path, os.O_RDONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), PRIVATE_FILE_MODE)
    try:
        _private_fd(fd, path, what)
    finally:
        os.close(fd)
    return path


def tighten_if_exists(path: Path | str, *, what: str = "file", quiet: bool = False) -> None:
    """Make ``path`` ``0o600`` if it exists (a file) or strip a directory of group and other permissions.

    ``quiet``: do not log the change (for what we have just created ourselves, under the umask).
    """
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        return
    old = _mode(st)
    if stat.S_ISDIR(st.st_mode):
        if old & _GROUP_OTHER:
            try:
                path.chmod(old & ~_GROUP_OTHER)
            except OSError as exc:
                _cannot_tighten(path, old, exc, what)
            else:
                if not quiet:
                    _tightened(path, old, old & ~_GROUP_OTHER, what)
        return
    if old != PRIVATE_FILE_MODE:
        try:
            path.chmod(PRIVATE_FILE_MODE)
        except OSError as exc:
            _cannot_tighten(path, old, exc, what)
        else:
            if not quiet:
                _tightened(path, old, PRIVATE_FILE_MODE, what)


def open_private_append(path: Path | str, *, what: str = "file") -> IO[str]:
    """``path`` opened for appending text (UTF-8), created ``0o600``; an existing file is made ``0o600``.

    Missing parent directories are created ``0o700``. The mode is set on the open descriptor, so it
    holds for the file that was opened even if the path is replaced meanwhile.
    """
    path = Path(path)
    if not path.parent.exists():
        private_dir(path.parent)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, PRIVATE_FILE_MODE)
    try:
        _private_fd(fd, path, what)
        return os.fdopen(fd, "a", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def open_private_write(path: Path | str, *, what: str = "file") -> IO[str]:
    """``path`` opened for writing text (UTF-8) from empty, created ``0o600``; an existing file is made
    ``0o600`` before it is truncated, so its new content is never readable by others.

    Missing parent directories are created ``0o700``; an existing parent is left as it is.
    """
    path = Path(path)
    if not path.parent.exists():
        private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), PRIVATE_FILE_MODE)
    try:
        _private_fd(fd, path, what)
        os.ftruncate(fd, 0)
        return os.fdopen(fd, "w", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def write_private_text(path: Path | str, text: str, *, what: str = "file") -> Path:
    """Write ``text`` to ``path`` as :func:`open_private_write` opens it; return the path."""
    with open_private_write(path, what=what) as out:
        out.write(text)
    return Path(path)


def tighten_tree(root: Path | str, *, what: str = "directory") -> int:
    """Make every file under ``root`` ``0o600`` and strip every directory of group and other
    permissions; return how many were changed. One WARNING sums up any that were readable by others."""
    root = Path(root)
    changed = exposed = 0
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        for name in dirnames:
            changed, exposed = _tighten_one(here / name, is_dir=True, counts=(changed, exposed))
        for name in filenames:
            changed, exposed = _tighten_one(here / name, is_dir=False, counts=(changed, exposed))
    if exposed:
        log.warning(
            "%s %s held %d files or directories readable by others; tightened them to %s (files) and %s (directories)",
            what,
            root,
            exposed,
            oct(PRIVATE_FILE_MODE),
            oct(PRIVATE_DIR_MODE),
        )
    return changed


def _tighten_one(path: Path, *, is_dir: bool, counts: tuple[int, int]) -> tuple[int, int]:
    changed, exposed = counts
    try:
        st = path.lstat()
    except FileNotFoundError:  # removed meanwhile (another worker evicting)
        return counts
    if stat.S_ISLNK(st.st_mode):
        return counts  # never follow a link out of the tree
    old = _mode(st)
    new = old & ~_GROUP_OTHER if is_dir else PRIVATE_FILE_MODE
    if old == new:
        return counts
    try:
        path.chmod(new)
    except FileNotFoundError:
        return counts
    except OSError as exc:
        _cannot_tighten(path, old, exc, "directory" if is_dir else "file")
        return counts
    return changed + 1, exposed + (1 if old & _GROUP_OTHER else 0)
