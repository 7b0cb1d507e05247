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


class PostgresCluster:
    """A cluster in a fresh directory: ``start`` (initdb and createdb the first time), ``stop``, ``remove``.

    Stopping and starting again keeps the data and the port: tests use it to take the database away
    from a running service and give it back.
    """

    def __init__(self, database: str = "pairjudge") -> None:
        self.database = database
        self.root = Path(tempfile.mkdtemp(prefix="pairjudge-pg-"))
        self.data, self._sockets = self.root / "data", self.root / "sock"
        self._sockets.mkdir()
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
            shutil.chown(self._sockets, "postgres")
            self._as_user = ["runuser", "-u", "postgres", "--"]
        self.port = _free_port()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *cmd: str) -> None:
        subprocess.run([*self._as_user, *cmd], check=True, capture_output=True, text=True)

    def start(self) -> str:
        """Start the server (creating the cluster and database the first time); returns the URL."""
        options = f"-p {self.port} -k {self._sockets} -c listen_addresses=127.0.0.1 -c max_connections=100 -c fsync=off"
        fresh = not self.data.exists()
        log = self.root / "server.log"
        try:
            if fresh:
                self._run(server_binary("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
            self._run(
                server_binary("pg_ctl"), "-D", str(self.data), "-l", str(log), "-w", "-t", "60", "-o", options, "start"
            )
            if fresh:
                self._run(
                    server_binary("createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", self.database
                )
        except subprocess.CalledProcessError as exc:
            text = log.read_text() if log.exists() else ""
            raise PostgresError(f"could not start PostgreSQL: {exc.stderr or exc.stdout}\n{text[-2000:]}") from None
        return self.url

    def stop(self) -> None:
        """Stop the server now (``-m fast``: open sessions are ended); the data stays."""
        if (self.data / "postmaster.pid").exists():
            subprocess.run(
                [*self._as_user, server_binary("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"],
                capture_output=True,
            )

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def running_postgres(database: str = "pairjudge") -> Iterator[str]:
    """``postgresql+psycopg://…`` of a fresh cluster with ``database``, stopped and removed on exit."""
    cluster = PostgresCluster(database)
    try:
        yield cluster.start()
    finally:
        cluster.remove()
