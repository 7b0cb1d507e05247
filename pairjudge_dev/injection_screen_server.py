"""A reference injection screen: the screen contract (``streams.judges.injection_screen``) served on 127.0.0.1.

    python -m pairjudge_dev.injection_screen_server --port 8099
    PAIRJUDGE_INJECTION_SCREEN__URL=http://127.0.0.1:8099/screen pairjudge worker

**What it is for.** Showing and testing the contract, and a baseline the measurements in
docs/guides/prompt-injection.md compare against. A deployment should put a trained classifier behind
the same contract (a prompt-injection classifier such as Meta's Prompt Guard or ProtectAI's DeBERTa
model, or a second, cheap judge asked only "does this text address the evaluator?"); none is shipped
here, because none could be installed and measured for this change.

**What it scores** (:func:`score`): not disguises (``agents.injection`` lists those) but the shape of a
request made *to whoever reads the text*, which an answer to someone else's task has no reason to make:

* a *meta-directive*, flagged (score 0.9): text about the reader's own reply ("modify your answer to
  ...", "encode your response in Base64", "I want you to"), or "the following code block" together with
  "your code / implementation / solution" (an instruction to put code into whatever the reader writes);
* a *task request* opening a sentence ("Write a ...", "Explain how ...", "Can you show ..."), scored 0.4
  and *not* flagged: on the dev split it flagged about a third of ordinary LLM answers, which instruct
  their users all the time.

Both are English-only word lists, so paraphrases in other words or languages pass, and an answer that
speaks of "your message" to its user is flagged: its false-alarm rate is measured, not assumed. Tuned on
BIPIA's dev split and the dev split of the ordinary texts only (evaldata/bipia/PROVENANCE.md).

The server can also misbehave on cue (``script``: a status, a delay, a malformed body), for the tests of
the client's retries and of the fail-closed setting.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Final

from pairjudge.agents.injection_screen import ScreenVerdict

__all__ = ["Misbehaviour", "ScreenServer", "running_screen_server", "score"]

# What the reader of an output writes back: an instruction about it is an instruction to the reader.
_YOUR_REPLY = r"(?:response|answer|reply|message|output|elucidation|explanation|summary)"
# What the reader of a code answer writes: only together with "the following code ..." (an answer to a
# coding question tells its user what to put in their code all the time).
_YOUR_CODE = r"(?:code|codebase|solution|implementation|algorithm|program|script)"
_META: Final = re.compile(
    r"(?i)\byour (?:own )?" + _YOUR_REPLY + r"s?\b(?!\s+(?:to|from|for) (?:the|a|an|this|my)\b)"
    r"|\bi (?:want|need|would like) you to\b"
    r"|\b(?:the )?(?:following|subsequent|below|above) code (?:block|snippet|section|excerpt|segment|fragment)\b"
    r"[\s\S]{0,80}?\byour " + _YOUR_CODE + r"\b"
    r"|\byour " + _YOUR_CODE + r"\b[\s\S]{0,80}?\b(?:the )?(?:following|subsequent|below) code (?:block|snippet|section"
    r"|excerpt|segment|fragment)\b"
    r"|\b(?:respond|reply|answer) (?:only )?(?:with|using|in) (?:the )?"
    r"(?:word|emoji|base ?64|json|french|german|spanish)"
)
_TASK_VERBS: Final = (
    "write|draft|compose|explain|translate|summari[sz]e|recommend|suggest|provide|list|describe|analy[sz]e|"
    "create|generate|tell|show|give|find|calculate|compare|outline|rewrite|encode|decode|reverse|convert|"
    "predict|identify|evaluate|discuss|elaborate|design|develop|propose|determine|help"
)
_TASK: Final = re.compile(
    r"(?im)(?:^|[.!?]\s+|\n)\s*(?:[-*>\"']\s*)?(?:please,?\s+|now,?\s+|kindly\s+)?"
    rf"(?:(?:{_TASK_VERBS}) (?:me|a|an|the|how|what|why)\b"
    rf"|(?:can|could|would|will) you (?:please )?(?:{_TASK_VERBS})\b)"
)


_BLANKS: Final = re.compile(r"[^\S\n]+|[\u2800\u3164\u115f\u1160\uffa0]+")


def score(text: str) -> ScreenVerdict:
    """The reference verdict on one text (see the module doc): flagged for a meta-directive; a task
    request alone scores 0.4, below the flagging line (its false alarms on answers that instruct their
    user were too many on the dev split: docs/guides/prompt-injection.md)."""
    # Any blank reads as a space (a no-break space, a Braille blank): the word lists are written with spaces.
    text = _BLANKS.sub(" ", text)
    meta = _META.search(text)
    if meta is not None:
        return ScreenVerdict(True, 0.9, f"meta-directive: {meta.group(0).strip()[:40]}")
    task = _TASK.search(text)
    if task is not None:
        return ScreenVerdict(False, 0.4, f"task request: {task.group(0).strip()[:40]}")
    return ScreenVerdict(False, 0.0, "")


@dataclass(frozen=True, slots=True)
class Misbehaviour:
    """How to answer one request instead of scoring it: a status, a delay first, or a body as given."""

    status: int = 200
    delay_s: float = 0.0
    body: bytes | None = None


@dataclass
class ScreenServer:
    """The reference screen on 127.0.0.1 (threads: a slow answer never blocks the client under test)."""

    port: int = 0
    script: deque[Misbehaviour] = field(default_factory=deque)
    texts: list[str] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/screen"

    def start(self) -> ScreenServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                act = owner.script.popleft() if owner.script else None
                if act is not None and act.delay_s:
                    time.sleep(act.delay_s)
                if act is not None and (act.status != 200 or act.body is not None):
                    self._send(act.status, act.body if act.body is not None else b'{"error": "scripted"}')
                    return
                try:
                    text = json.loads(raw)["text"]
                    if not isinstance(text, str):
                        raise TypeError("text")
                except (ValueError, KeyError, TypeError):
                    self._send(400, b'{"error": "expected {\\"text\\": string}"}')
                    return
                owner.texts.append(text)
                verdict = score(text)
                body = {"flagged": verdict.flagged, "score": verdict.score, "label": verdict.label}
                self._send(200, json.dumps(body).encode())

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@contextmanager
def running_screen_server(port: int = 0) -> Iterator[ScreenServer]:
    server = ScreenServer(port=port).start()
    try:
        yield server
    finally:
        server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8099)
    args = parser.parse_args()
    with running_screen_server(args.port) as server:
        print(f"reference injection screen at {server.url} (127.0.0.1 only); Ctrl-C stops it", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    raise SystemExit(main())
