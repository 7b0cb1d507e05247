"""A pairjudge worker whose judge answers every request at once, in process (row 6 of ``bench.speed``).

Run by path (``python bench/_instant_worker.py``) with the import path pointed at the tree under test
(``PYTHONPATH`` and the working directory), so it imports that tree's ``streams``, ``agents`` and
``pairjudge_dev``, never this checkout's. It mirrors ``pairjudge worker`` (streams/cli/worker.py): settings
from the environment, topics created (idempotent), the data dir made private, ``create_app``, and its
Faust worker class (``QuietWorker``: no spinner, the quiet log filter). The one difference is
``create_app(settings, judge=InstantJudge())``: the judge is an object in the worker with no network, no
sleep and no cache, so what is left is pairjudge's own plumbing.

The reply for each request is built as the simulated server builds it (``pairjudge_dev.slow_judge_server``):
a valid reply for the request's template and criteria, naming the position that shows the output with
``MARKER`` at confidence 0.9. Replies are kept per (template, criteria, position), so building them
costs nothing after the first few pairs.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal

from pairjudge.agents.judge import JudgeIdentity, JudgeRequest, JudgeResponse
from pairjudge.streams.app import create_app
from pairjudge.streams.config.settings import load_settings
from pairjudge.streams.faust_compat.worker import QuietWorker
from pairjudge.streams.kafka.admin import create_topics
from pairjudge.streams.kafka.topics import topic_specs
from pairjudge.streams.security.files import private_dir
from pairjudge.streams.security.kafka_clients import client_config
from pairjudge.streams.telemetry.logs import install_quiet_logging
from pairjudge_dev.slow_judge_server import parse_call, reply_text

#: The same marker as bench._speed_server's (this file must not import the bench package: see above).
MARKER = "[[bench-preferred]]"


class InstantJudge:
    """A ``Judge`` that answers at once with a valid reply preferring the marked output."""

    def __init__(self) -> None:
        self._replies: dict[tuple[str, tuple[str, ...], str], str] = {}

    @property
    def identity(self) -> JudgeIdentity:
        return JudgeIdentity(provider="bench", model="instant")

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        payload: dict[str, Any] = {
            "model": "instant",
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "response_format": {"json_schema": {"name": request.schema_name, "schema": request.response_schema}},
        }
        call = parse_call(payload)
        winner: Literal["A", "B"] = "A" if MARKER in call.output_a else "B"
        key = (call.kind, call.criteria, winner)
        text = self._replies.get(key)
        if text is None:
            text = self._replies[key] = reply_text(call, winner, 0.9)
        return JudgeResponse(text=text, model="instant", input_tokens=len(call.prompt) // 4, output_tokens=50)


def main() -> None:
    settings = load_settings()
    logging.basicConfig(level=settings.worker.log_level)
    install_quiet_logging()
    asyncio.run(create_topics(client_config(settings.kafka), topic_specs(settings)))
    private_dir(settings.worker.data_dir)
    wired = create_app(settings, judge=InstantJudge())
    try:
        QuietWorker(wired.faust_app, loglevel=settings.worker.log_level.lower(), quiet=True).execute_from_commandline()
    finally:
        wired.telemetry.shutdown()


if __name__ == "__main__":
    main()
