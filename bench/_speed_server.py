"""The simulated judge of ``bench.speed``: one OpenAI-compatible server for pairjudge and for FastChat.

Run as ``python -m bench._speed_server --latency 0.2``; it prints ``PORT <n>`` once it listens on
127.0.0.1 (``pairjudge_dev.processes``), and runs in a process of its own so that neither client is
charged for its CPU.

* Every ``POST /v1/chat/completions`` is held for exactly ``--latency`` seconds, then answered.
* A pairjudge prompt (any seed template) gets a valid reply built by ``pairjudge_dev.slow_judge_server``
  (the same builders the tests use), naming the position that shows the output carrying ``MARKER``
  with confidence 0.9, so both orders agree and every pair must end as a verdict for the marked
  candidate.
* A FastChat ``pair-v2`` prompt (``[The Start of Assistant A's Answer]`` ...) gets a short judgment
  ending in ``[[A]]`` or ``[[B]]``, by the same marker rule.
* Anything else is answered 400 and counted as ``bad``: the bench fails on any.
* ``POST /control/outage?on=1`` makes every judge endpoint (completions and the model list) answer 503
  until ``?on=0``: a judge that is down behind its load balancer. The time of the switch back is
  taken by the caller, which flips it.
* ``GET /stats`` gives the counters and this process's CPU seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from aiohttp import web

from pairjudge_dev.processes import AnnouncedProcess, serve_announced
from pairjudge_dev.slow_judge_server import parse_call, reply_text

#: Put in the preferred candidate's output; the replies pick whichever position shows it.
MARKER = "[[bench-preferred]]"
FASTCHAT_OPENING = "[User Question]"
_FASTCHAT_ANSWER = {
    letter: re.compile(
        rf"\[The Start of Assistant {letter}'s Answer\]\n(.*?)\n\[The End of Assistant {letter}'s Answer\]", re.DOTALL
    )
    for letter in ("A", "B")
}


@dataclass
class Stats:
    requests: int = 0
    pairjudge: int = 0
    fastchat: int = 0
    bad: int = 0
    unavailable: int = 0
    in_flight: int = 0
    peak: int = 0
    cpu_s: float = 0.0


@dataclass
class _State:
    latency: float
    outage: bool = False
    stats: Stats | None = None


STATE = web.AppKey("state", _State)


def fastchat_judgment(messages: list[object]) -> str:
    """FastChat's verdict format for a ``pair-v2`` prompt; ``ValueError`` for any other prompt."""
    users = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if len(users) != 1 or not isinstance(users[0], str) or not users[0].startswith(FASTCHAT_OPENING):
        raise ValueError("not a FastChat pairwise prompt")
    marked = []
    for letter, pattern in _FASTCHAT_ANSWER.items():
        found = pattern.search(users[0])
        if found is None:
            raise ValueError(f"no answer {letter} in the FastChat prompt")
        if MARKER in found.group(1):
            marked.append(letter)
    if len(marked) != 1:
        raise ValueError(f"{len(marked)} answers carry the marker; exactly one must")
    return f"Assistant {marked[0]} answers the question more closely.\n\n[[{marked[0]}]]"


def _answer(payload: object) -> tuple[str, str, int, str]:
    """(model, reply text, prompt characters, client) for one request body; ``ValueError`` if unknown."""
    if not isinstance(payload, dict) or not isinstance(payload.get("messages"), list):
        raise ValueError("need a JSON object with messages")
    model = str(payload.get("model", ""))
    messages = payload["messages"]
    first_user = next((m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"), "")
    if isinstance(first_user, str) and first_user.startswith(FASTCHAT_OPENING):
        return model, fastchat_judgment(messages), len(first_user), "fastchat"
    call = parse_call(payload)
    winner: Literal["A", "B"] = "A" if MARKER in call.output_a else "B"
    if (MARKER in call.output_a) == (MARKER in call.output_b):
        raise ValueError("exactly one shown output must carry the marker")
    return model, reply_text(call, winner, 0.9), len(call.prompt), "pairjudge"


def _unavailable() -> web.Response:
    return web.json_response({"error": {"message": "the judge is down", "type": "server_error"}}, status=503)


async def _chat(request: web.Request) -> web.Response:
    state = request.app[STATE]
    stats = state.stats
    assert stats is not None
    stats.requests += 1
    if state.outage:
        stats.unavailable += 1
        return _unavailable()
    stats.in_flight += 1
    stats.peak = max(stats.peak, stats.in_flight)
    try:
        try:
            model, text, prompt_chars, client = _answer(await request.json())
        except ValueError as exc:  # json.JSONDecodeError and slow_judge_server.BadRequest are ValueErrors
            stats.bad += 1
            return web.json_response({"error": {"message": str(exc), "type": "invalid_request_error"}}, status=400)
        if client == "fastchat":
            stats.fastchat += 1
        else:
            stats.pairjudge += 1
        await asyncio.sleep(state.latency)
        body = {
            "id": f"chatcmpl-speed-{stats.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": prompt_chars // 4,
                "completion_tokens": len(text) // 4,
                "total_tokens": (prompt_chars + len(text)) // 4,
            },
        }
        return web.json_response(body)
    finally:
        stats.in_flight -= 1


async def _models(request: web.Request) -> web.Response:
    if request.app[STATE].outage:
        return _unavailable()
    return web.json_response({"object": "list", "data": [{"id": "bench-judge", "object": "model"}]})


async def _stats(request: web.Request) -> web.Response:
    state = request.app[STATE]
    assert state.stats is not None
    state.stats.cpu_s = time.process_time()
    body = asdict(state.stats)
    if request.query.get("reset_peak") == "1":
        state.stats.peak = state.stats.in_flight
    return web.json_response(body)


async def _outage(request: web.Request) -> web.Response:
    state = request.app[STATE]
    state.outage = request.query.get("on") == "1"
    return web.json_response({"outage": state.outage, "at": time.time()})


def build_app(latency: float) -> web.Application:
    app = web.Application()
    app[STATE] = _State(latency=latency, stats=Stats())
    app.router.add_post("/v1/chat/completions", _chat)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/stats", _stats)
    app.router.add_post("/control/outage", _outage)
    return app


class SpeedServer(AnnouncedProcess):
    """The server as a child process; small blocking control calls (run them in a thread from a loop)."""

    def __init__(self, latency: float, log_path: Path) -> None:
        super().__init__([sys.executable, "-m", "bench._speed_server", "--latency", repr(latency)], log_path)

    def _call(self, method: str, path: str) -> dict[str, object]:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method)
        with urllib.request.urlopen(req, timeout=10) as resp:
            data: dict[str, object] = json.loads(resp.read())
            return data

    def stats(self) -> Stats:
        return Stats(**self._call("GET", "/stats"))  # type: ignore[arg-type]

    def set_outage(self, on: bool) -> float:
        """Switch the outage on or off; the server's wall-clock time of the switch."""
        return float(self._call("POST", f"/control/outage?on={int(on)}")["at"])  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args(argv)
    asyncio.run(serve_announced(build_app(args.latency)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
