"""A LiteLLM proxy (1.110.2) in front of a given upstream, for the gateway bench's LiteLLM row (issue 38 item 3).

    with litellm_proxy_url("http://127.0.0.1:8001/v1", workdir) as proxy:
        ...  # clients call f"{proxy.url}/v1/chat/completions" with api_key=proxy.master_key, model=proxy.model

The proxy runs from ``deploy/litellm/setup.sh``'s environment (``$PAIRJUDGE_CACHE/litellm-venv``), one uvicorn
worker, on 127.0.0.1, with its model price map read locally and its telemetry off.

"Shadow eval on", as far as it can be here: LiteLLM's ``ShadowEvalLogger`` is registered as a success callback,
so each call pays its hook (the identity and sampling checks it runs after every successful call). LiteLLM
registers it only when the proxy has its database (``cost_tracking()`` in ``proxy_server.py``), and reads its
shadow-eval jobs from there (Prisma over PostgreSQL); without one it finds no job, so it never makes the shadow
and judge calls. The row therefore measures the proxy with the hook and without the shadow calls, whose work runs
in a detached task, off the request path, and would add upstream calls and CPU, not latency to first byte.

``pairjudge_callback=True`` adds pairjudge's LiteLLM callback (``PAIRJUDGE_*`` settings from ``env``).
``extra_models``: more model names served from the same upstream (the gateway bench's ``bench-fast``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
MASTER_KEY = "sk-bench-litellm-master"
MODEL = "bench"
PAIRJUDGE_CALLBACK = "pairjudge.streams.capture.litellm_callback.capture_callback"
#: A module of the proxy's work directory (LiteLLM loads ``module.instance`` from the config's folder first).
SHADOW_EVAL_MODULE = (
    "from litellm.integrations.shadow_eval_logger import ShadowEvalLogger\n\nlogger = ShadowEvalLogger()\n"
)
SHADOW_EVAL_CALLBACK = "bench_shadow_eval.logger"
#: The proxy's output, in its work directory.
LOG_NAME = "litellm.log"


@dataclass(frozen=True, slots=True)
class RunningProxy:
    url: str
    pid: int
    master_key: str
    model: str
    log_path: Path


def litellm_venv() -> Path:
    cache = Path(os.environ.get("PAIRJUDGE_CACHE", "").strip() or Path.home() / ".cache" / "pairjudge")
    return cache / "litellm-venv"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health/liveliness", timeout=2) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def litellm_proxy_url(
    upstream_base_url: str,
    workdir: Path,
    *,
    upstream_key: str = "sk-bench-upstream",
    shadow_eval: bool = True,
    pairjudge_callback: bool = False,
    env: Mapping[str, str] | None = None,
    startup_timeout_s: float = 120.0,
    extra_models: Sequence[str] = (),
) -> Iterator[RunningProxy]:
    """A LiteLLM proxy serving ``MODEL`` from the OpenAI-compatible ``upstream_base_url`` (ending in ``/v1``)."""
    venv = litellm_venv()
    cli = venv / "bin" / "litellm"
    if not cli.exists():
        raise RuntimeError(f"LiteLLM is not installed at {venv}: run deploy/litellm/setup.sh")
    workdir.mkdir(parents=True, exist_ok=True)
    callbacks: list[str] = []
    if shadow_eval:
        (workdir / "bench_shadow_eval.py").write_text(SHADOW_EVAL_MODULE)
        callbacks.append(SHADOW_EVAL_CALLBACK)
    if pairjudge_callback:
        callbacks.append(PAIRJUDGE_CALLBACK)
    config = {
        "model_list": [
            {
                "model_name": name,
                "litellm_params": {"model": f"openai/{name}", "api_base": upstream_base_url, "api_key": upstream_key},
            }
            for name in (MODEL, *extra_models)
        ],
        "litellm_settings": {"callbacks": callbacks, "num_retries": 0},
        "general_settings": {"master_key": MASTER_KEY},
    }
    with running_litellm(config, env or {}, workdir, cli=cli, startup_timeout_s=startup_timeout_s) as (url, pid):
        yield RunningProxy(url, pid, MASTER_KEY, MODEL, workdir / LOG_NAME)


@contextlib.contextmanager
def running_litellm(
    config: Mapping[str, object],
    env: Mapping[str, str],
    workdir: Path,
    *,
    cli: Path,
    startup_timeout_s: float = 120.0,
) -> Iterator[tuple[str, int]]:
    """Start ``cli --config`` (LiteLLM's proxy) with ``config`` on a free port of 127.0.0.1, one worker, ``env``
    added to this process's, and this checkout importable; yield its URL and pid once it answers its liveliness
    check; stop its whole process group on exit. Its output goes to ``workdir / LOG_NAME``. RuntimeError (naming
    the log) when it exits or does not answer within ``startup_timeout_s``. Shared by the bench and the tests."""
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "litellm.yaml"
    config_path.write_text(json.dumps(config))  # JSON is YAML
    port = _free_port()
    log_path = workdir / LOG_NAME
    full_env = {
        **os.environ,
        "PYTHONPATH": str(CHECKOUT),
        # No download of the model price map at start, no usage telemetry: everything stays on this machine.
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY": "False",
        **env,
    }
    command = [str(cli), "--config", str(config_path), "--host", "127.0.0.1", "--port", str(port)]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [*command, "--num_workers", "1"],
            env=full_env,
            cwd=workdir,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_timeout_s
        while not _ready(url):
            if proc.poll() is not None:
                raise RuntimeError(f"the LiteLLM proxy exited with {proc.returncode}; its log: {log_path}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the LiteLLM proxy did not start in {startup_timeout_s:.0f} s; its log: {log_path}")
            time.sleep(0.3)
        yield url, proc.pid
    finally:
        # SIGINT: uvicorn shuts down, then re-raises the signal, which Python turns into an exit that runs the
        # atexit hooks (the callback's last flush and count). SIGTERM, re-raised, would end the process at once.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


__all__ = ["LOG_NAME", "MASTER_KEY", "MODEL", "RunningProxy", "litellm_proxy_url", "litellm_venv", "running_litellm"]
