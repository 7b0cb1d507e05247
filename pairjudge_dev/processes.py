"""Helper processes that announce their port: a child prints ``PORT <n>`` on stdout once it listens.

``AnnouncedProcess`` is the parent's side, ``serve_announced`` the child's (an aiohttp app).

The simulated judge servers of the tests and benchmarks run as processes of their own, so their CPU
is not the client's (a bench measures the client) and a SIGKILLed worker never takes them down.
"""

from __future__ import annotations

import asyncio
import select
import signal
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web

#: The checkout root: children run ``python -m pairjudge_dev...`` or ``-m bench...`` from here.
REPO = Path(__file__).resolve().parents[1]


class AnnouncedProcess:
    """``argv`` in its own session (signals to the caller do not reach it), stderr to ``log_path``."""

    def __init__(self, argv: Sequence[str], log_path: Path, *, startup_timeout: float = 30.0) -> None:
        self.log_path = log_path
        with log_path.open("ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                list(argv), stdout=subprocess.PIPE, stderr=log, cwd=REPO, start_new_session=True
            )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], startup_timeout)
        line = self.proc.stdout.readline().decode() if ready else ""
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(
                f"{argv[2:3]} did not start: {line!r}; log:\n{log_path.read_text(errors='replace')[-2000:]}"
            )
        self.port = int(line.split()[1])

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL of a judge server (ends in ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s. Safe to call twice."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


async def listen(app: web.Application, port: int = 0) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on 127.0.0.1 (a free port by default); return its runner and port."""
    # A short shutdown: calls still sleeping out a tail latency are cut off, not waited for.
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    # A deep backlog: a bench cell or three workers open a hundred or more connections at once.
    sock.listen(1024)
    await web.SockSite(runner, sock).start()
    return runner, int(sock.getsockname()[1])


async def serve_announced(app: web.Application) -> None:
    """The child's side: listen, print ``PORT <n>``, serve until SIGTERM or SIGINT."""
    runner, port = await listen(app)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"PORT {port}", flush=True)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
