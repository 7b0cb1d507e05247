"""One worker per data directory (streams.worker.data_dir)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pairjudge.streams.worker.data_dir import DataDirInUse, lock_data_dir


def test_a_second_holder_is_refused_with_the_setting_named(tmp_path: Path) -> None:
    fd = lock_data_dir(tmp_path)
    try:
        with pytest.raises(DataDirInUse, match=rf"in use by pid {os.getpid()}.*PAIRJUDGE_WORKER__DATA_DIR"):
            lock_data_dir(tmp_path)
    finally:
        os.close(fd)
    os.close(lock_data_dir(tmp_path))  # released with its holder


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    code = (
        "import sys, os, pathlib; from pairjudge.streams.worker.data_dir import lock_data_dir; "
        "lock_data_dir(pathlib.Path(sys.argv[1])); os.kill(os.getpid(), 9)"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=False)
    assert proc.returncode == -9
    os.close(lock_data_dir(tmp_path))
