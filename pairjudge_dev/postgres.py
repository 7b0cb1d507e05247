"""A throwaway PostgreSQL cluster on 127.0.0.1 from Debian's server binaries, for tests and benchmarks.

The cluster lives in a fresh directory under the system's temporary directory and is removed on exit.
As root, the server runs as the ``postgres`` system user (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path


class PostgresError(RuntimeError):
    pass


def server_binary(name: str) -> str:
    on_path = shutil.which(name)
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or ([on_path] if on_path else [])
    if not found:
        raise PostgresError(f"PostgreSQL's {name} is not installed (apt-get install postgresql; .ci/run does)")
    return found[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running_postgres(database: str = "pairjudge") -> Iterator[str]:
    """``postgresql+psycopg://…`` of a fresh cluster with ``database``, stopped and removed on exit."""
    root = Path(tempfile.mkdtemp(prefix="pairjudge-pg-"))
    data, sockets = root / "data", root / "sock"
    sockets.mkdir()
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sockets, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    port = _free_port()

    def run(*cmd: str) -> None:
        subprocess.run([*as_user, *cmd], check=True, capture_output=True, text=True)

    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c max_connections=100 -c fsync=off"
    try:
        try:
            run(server_binary("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
            run(
                server_binary("pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(root / "server.log"),
                "-w",
                "-t",
                "60",
                "-o",
                options,
                "start",
            )
            run(server_binary("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", database)
        except subprocess.CalledProcessError as exc:
            log = (root / "server.log").read_text() if (root / "server.log").exists() else ""
            raise PostgresError(f"could not start PostgreSQL: {exc.stderr or exc.stdout}\n{log[-2000:]}") from None
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/{database}"
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run(
                [*as_user, server_binary("pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], capture_output=True
            )
        shutil.rmtree(root, ignore_errors=True)
