"""``pairjudge demo --serve``: the whole loop, live, on embedded defaults, until Ctrl-C.

Tansu on a free loopback port, one worker and the review service (each a subprocess in its own process
group), and a trickle of the sample pairs under fresh pair ids, each drawn afresh (:func:`vary`). A demo
reviewer and a demo operator get generated passwords, printed once; their scrypt hashes, the session secret
and the review queue's SQLite database live in a private temporary directory that is removed on exit.

The demo's policy audits half of the judge's verdicts (``DEMO_POLICY``), so the queue fills. The
sample's human labels are published (as ``pairjudge labels import`` would) for the head start's pairs
that the audit does *not* draw, so agreement and kappa have numbers from the first snapshot; the
pairs it draws wait in the queue (``?reason=audit_sample``), and every label a reviewer gives one adds to
the series' label count on ``/audit``. After the head start no more labels are imported: each new label
there is a reviewer's.

SIGINT and SIGTERM stop the trickle, then the review service, the worker (each process group: SIGTERM,
then SIGKILL) and the broker, and remove the directory: nothing is left running or listening.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
from aiokafka import AIOKafkaProducer
from pydantic import SecretStr

from pairjudge.agents.sampling import audit_fraction
from pairjudge.streams.audit.label_files import parse_labels
from pairjudge.streams.audit.label_import import publish as publish_labels
from pairjudge.streams.cli.base import pairjudge_command
from pairjudge.streams.cli.demo import DEMO_AUDIT, sample_labels, sample_pairs, start_worker, stop_process
from pairjudge.streams.config.settings import Settings, environ_for
from pairjudge.streams.kafka.admin import create_topics, wait_until_ready
from pairjudge.streams.kafka.embedded import RunningBroker, free_port, start_tansu
from pairjudge.streams.kafka.producer import key_of, send_events
from pairjudge.streams.kafka.topics import topic_specs
from pairjudge.streams.review.auth import hash_password
from pairjudge.streams.security.files import open_private_append, private_dir, write_private_text
from pairjudge.streams.security.kafka_clients import PLAINTEXT_CLIENT, client_config

LOOPBACK = "127.0.0.1"
REVIEWER, OPERATOR = "demo-reviewer", "demo-operator"
#: The demo's audit sample: half of the judge's verdicts (confident or not) go to the queue as audit
#: items, none to a second reviewer (one person can try the whole loop). Production: 5% and 10%.
DEMO_AUDIT_SHARE = 0.5
DEMO_POLICY = {"audit_share": DEMO_AUDIT_SHARE, "audit_uncertain_share": DEMO_AUDIT_SHARE, "audit_double_share": 0.0}
#: Rounds of the sample set sent at once on start-up, with the sample's labels for the pairs not drawn.
HEAD_START_ROUNDS = 3
#: Pairs a second in the trickle after the head start.
DEFAULT_RATE = 3.0


@dataclass(frozen=True)
class DemoUser:
    name: str
    role: str
    password: str

    def entry(self) -> dict[str, str]:
        """The user as ``PAIRJUDGE_REVIEW__USERS_FILE`` holds it: the scrypt hash, never the password."""
        return {"name": self.name, "role": self.role, "password_hash": hash_password(self.password)}


def demo_users() -> list[DemoUser]:
    """A reviewer and an operator, each with a fresh random password."""
    return [
        DemoUser(REVIEWER, "reviewer", secrets.token_urlsafe(12)),
        DemoUser(OPERATOR, "operator", secrets.token_urlsafe(12)),
    ]


def users_file_text(users: Iterable[DemoUser]) -> str:
    return json.dumps([u.entry() for u in users], indent=2) + "\n"


def live_pair_id(pair_id: str, round_no: int) -> str:
    """A fresh id per round: ``live-0003-email-card-delay``, so every round is a new pair to the worker."""
    return f"live-{round_no:04d}-{pair_id}"


def original_pair_id(live_id: str) -> str:
    """The sample pair's own id, back from a :func:`live_pair_id`."""
    match = re.fullmatch(r"live-\d{4,}-(.+)", live_id)
    return match.group(1) if match else live_id


#: The share of each round's pairs whose two outputs change sides (:func:`vary`).
SWAP_SHARE = 0.5
_ROLES = {"champion": "challenger", "challenger": "champion"}


def swapped(live_id: str, draw: str) -> bool:
    """Whether this pair's outputs change sides in this run: a hash of the id and the run's ``draw``, so a
    pair and its label always agree; no draw (``""``) swaps nothing."""
    return bool(draw) and audit_fraction(live_id, f"swap:{draw}") < SWAP_SHARE


def vary(data: dict[str, object], draw: str) -> dict[str, object]:
    """A sample pair (or its label) drawn afresh: for about half the pairs of a round the champion's output
    is the challenger's and the other way round (their ids and sources change sides with them; a label's
    winner follows its output).

    Why: the sample set has a dozen pairs, and sent round after round unchanged the same side wins the same
    pairs forever, so the gates' evidence grows without bound as no real traffic would. Drawn this way the
    two models are equally good, as far as the judge and the sample's labels can tell, so the evidence
    wanders and settles the way it does on traffic where neither model is better."""
    live_id = data.get("pair_id")
    if not isinstance(live_id, str) or not swapped(live_id, draw):
        return data
    candidates = data.get("candidates")
    if isinstance(candidates, list) and len(candidates) == 2 and all(isinstance(c, dict) for c in candidates):
        first, second = candidates
        for key in ("candidate_id", "source"):
            if key in first and key in second:
                first[key], second[key] = second[key], first[key]
    winner = data.get("winner")
    if isinstance(winner, str) and winner in _ROLES:
        data["winner"] = _ROLES[winner]
    return data


def rename(raw: bytes, round_no: int, draw: str = "") -> bytes | None:
    """A sample line (pair or label) under its round's id, drawn afresh for ``draw`` (:func:`vary`); None
    for a line without a readable id."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("pair_id"), str):
        return None
    data["pair_id"] = live_pair_id(data["pair_id"], round_no)
    return json.dumps(vary(data, draw)).encode()


def round_events(pairs: Iterable[bytes], round_no: int, draw: str = "") -> list[bytes]:
    """One round of the sample set under fresh ids (lines without an id are left out: the batch demo shows
    the dead letters), drawn afresh for ``draw``."""
    return [line for line in (rename(raw, round_no, draw) for raw in pairs) if line is not None]


def drawn_for_audit(pair_id: str, share: float = DEMO_AUDIT_SHARE, seed: str = "") -> bool:
    """Whether the worker will send this pair's verdict to the queue as an audit item
    (``agents.sampling``: the draw is a hash of the id, the same on every worker)."""
    return audit_fraction(pair_id, seed) < share


def head_start_labels(
    labels: Iterable[bytes], rounds: int, share: float = DEMO_AUDIT_SHARE, seed: str = "", draw: str = ""
) -> bytes:
    """The sample's labels for the head start's pairs that the audit does not draw (JSONL): the drawn ones
    are left for the reviewer, so each of their labels counts (a second label for a pair would not)."""
    out = []
    for round_no in range(rounds):
        for raw in labels:
            line = rename(raw, round_no, draw)
            if line is not None and not drawn_for_audit(json.loads(line)["pair_id"], share, seed):
                out.append(line)
    return b"\n".join(out)


#: "  review queue:   http://…" and "  reviewer:  demo-reviewer  <password>" lines of the demo's output.
_FIELD = re.compile(r"^\s+([a-z][a-z ]*[a-z]):\s+(\S.*?)\s*$")


def parse_output(lines: Iterable[str]) -> dict[str, str]:
    """The demo's printed fields by name ("review queue", "audit view", "reviewer", ...), for scripts and tests."""
    fields: dict[str, str] = {}
    for line in lines:
        match = _FIELD.match(line)
        if match:
            fields.setdefault(match.group(1), match.group(2))
    return fields


def credentials(fields: Mapping[str, str], role: str) -> tuple[str, str]:
    """(name, password) of the ``role`` line parsed by :func:`parse_output`."""
    name, password = fields[role].split()[:2]
    return name, password


def seconds_since_process_start() -> float | None:
    """How long this process has run (Linux /proc), so "ready in" counts from the command itself."""
    try:
        stat = Path("/proc/self/stat").read_text()
        start_ticks = int(stat.rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def start_review(settings: Settings, log_path: Path) -> subprocess.Popen[bytes]:
    """``pairjudge review serve`` as a subprocess in its own process group (as the worker is)."""
    log = open_private_append(log_path, what="review service log")
    return subprocess.Popen(
        [sys.executable, "-m", "pairjudge.streams.cli", "review", "serve"],
        env=environ_for(settings),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


async def wait_for_page(url: str, children: Iterable[subprocess.Popen[bytes]], timeout: float = 60.0) -> None:
    """Until ``url`` answers 200 or 401 (the sign-in page); raise if a child exits or time runs out."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2.0) as client:
        while True:
            for child in children:
                if child.poll() is not None:
                    raise RuntimeError(f"a demo process exited with {child.returncode} before the page answered")
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(url)).status_code in (200, 401):
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not answer within {timeout:.0f} s")
            await asyncio.sleep(0.2)


async def trickle(settings: Settings, pairs: list[bytes], first_round: int, rate: float, draw: str = "") -> None:
    """Send the sample set round after round under fresh ids, drawn afresh (:func:`vary`), ``rate`` pairs a
    second, until cancelled."""
    topic = settings.topics.name("pairs")
    producer = AIOKafkaProducer(**client_config(settings.kafka).kwargs(acks="all", linger_ms=5))
    await producer.start()
    try:
        round_no = first_round
        while True:
            for raw in round_events(pairs, round_no, draw):
                await producer.send_and_wait(topic, value=raw, key=key_of(raw))
                await asyncio.sleep(1.0 / rate)
            round_no += 1
    finally:
        await producer.stop()


def demo_settings(settings: Settings, bootstrap: str, work_dir: Path, review_port: int) -> Settings:
    """The live demo's settings: the embedded broker (plaintext, short sessions), the batch demo's audit,
    the demo policy, and the review service on loopback with its files in ``work_dir``."""
    run_id = uuid.uuid4().hex[:8]
    kafka = settings.kafka.model_copy(
        update={
            "bootstrap_servers": bootstrap,
            "session_timeout_s": 5.0,
            "heartbeat_interval_s": 1.0,
            **PLAINTEXT_CLIENT,
        }
    )
    review = settings.review.model_copy(
        update={
            "host": LOOPBACK,
            "port": review_port,
            "database_url": SecretStr(f"sqlite+aiosqlite:///{work_dir / 'review.db'}"),
            "database_url_file": None,
            "users": (),
            "users_file": work_dir / "users.json",
            "session_secret": None,
            "session_secret_file": work_dir / "session-secret",
            "group_id": f"pairjudge-review-{run_id}",
            "idempotent_labels": False,  # Tansu has no idempotent producer
        }
    )
    return settings.model_copy(
        update={
            "kafka": kafka,
            "worker": settings.worker.model_copy(
                update={"data_dir": work_dir / "worker", "app_id": f"pairjudge-live-{run_id}"}
            ),
            "audit": settings.audit.model_copy(update=DEMO_AUDIT),
            "policy": settings.policy.model_copy(update=DEMO_POLICY),
            "review": review,
        }
    )


def _print_ready(settings: Settings, users: list[DemoUser], ready_s: float, work_dir: Path) -> None:
    url = f"http://{settings.review.host}:{settings.review.port}"
    bootstrap = settings.kafka.bootstrap_servers
    by_role = {u.role: u for u in users}
    lines = [
        f"pairjudge live demo: ready in {ready_s:.1f} s",
        f"  review queue:    {url}/",
        f"  audit samples:   {url}/?reason=audit_sample",
        f"  audit view:      {url}/audit",
        f"  scoreboard:      {url}/scores",
        f"  operators page:  {url}/operators",
        f"  broker:          {bootstrap}",
        f"  report:          {pairjudge_command()} report --bootstrap {bootstrap} --out out/live-report.html",
        "sign in with (the passwords are shown only this once):",
        f"  reviewer:        {by_role['reviewer'].name}  {by_role['reviewer'].password}",
        f"  operator:        {by_role['operator'].name}  {by_role['operator'].password}",
        "what to try first:",
        "  1. Open the audit samples as the reviewer: pick the better output (the page shows its keys), then Enter,",
        "     for a few pairs.",
        "  2. Open the audit view: within seconds the series' labels, agreement and kappa change with yours.",
        "  3. The scoreboard shows, per experiment, whether the challenger can ship: by people's answers and by the",
        "     judge's. The operators page (as the operator) changes settings live: set audit_share (the share of",
        "     verdicts people check) to 0.1 and watch the queue fill more slowly.",
        "  4. Write the drift report: paste the report command above into another terminal while the demo runs.",
        f"files: {work_dir} (logs, the queue's database; removed on exit)",
        "Ctrl-C stops everything.",
    ]
    print("\n".join(lines), flush=True)


async def run_live(settings: Settings, *, rate: float = DEFAULT_RATE, head_start: int = HEAD_START_ROUNDS) -> int:
    """Run the live demo until SIGINT or SIGTERM (0), or until a part of it fails (1)."""
    started = time.monotonic()
    since_start = seconds_since_process_start()
    offset = since_start if since_start is not None else 0.0
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    work_dir = Path(tempfile.mkdtemp(prefix="pairjudge-live-"))  # 0o700
    broker: RunningBroker | None = None
    children: list[subprocess.Popen[bytes]] = []
    feeder: asyncio.Task[None] | None = None
    status = 0
    try:
        broker = start_tansu(log_dir=work_dir)
        settings = demo_settings(settings, broker.bootstrap, work_dir, free_port())
        users = demo_users()
        write_private_text(work_dir / "users.json", users_file_text(users), what="demo users file")
        write_private_text(work_dir / "session-secret", secrets.token_urlsafe(48), what="demo session secret")
        private_dir(work_dir / "worker")
        await wait_until_ready(client_config(settings.kafka), timeout=30)
        await create_topics(client_config(settings.kafka), topic_specs(settings))
        children.append(start_worker(settings, work_dir / "worker.log"))
        children.append(start_review(settings, work_dir / "review.log"))
        # The head start: a few rounds at once, and the sample's labels for the pairs the audit leaves out.
        pairs, draw = sample_pairs(), secrets.token_hex(4)  # each run draws its own sides
        await send_events(settings, [e for n in range(head_start) for e in round_events(pairs, n, draw)])
        head = parse_labels(head_start_labels(sample_labels(), head_start, draw=draw), "jsonl")
        await publish_labels(settings, head, source="sample_labels.jsonl")
        feeder = asyncio.create_task(trickle(settings, pairs, head_start, rate, draw), name="live-demo-trickle")
        url = f"http://{settings.review.host}:{settings.review.port}/"
        waiting = asyncio.create_task(wait_for_page(url, children))
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if stopping.done():
            waiting.cancel()
            return 0
        stopping.cancel()
        try:
            waiting.result()  # raises if a child died or the page never answered
        except (RuntimeError, TimeoutError) as exc:
            print(f"the live demo did not start: {exc}", flush=True)
            _show_logs(work_dir)
            return 1
        _print_ready(settings, users, offset + time.monotonic() - started, work_dir)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=1.0)
            dead = [c for c in children if c.poll() is not None]
            if dead or feeder.done():
                print(f"a part of the demo stopped (see the logs in {work_dir}); stopping the rest", flush=True)
                _show_logs(work_dir)
                status = 1
                break
        return status
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        if feeder is not None:
            feeder.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await feeder
        for child in reversed(children):  # the review service first, then the worker
            stop_process(child)
        if broker is not None:
            broker.stop()
        shutil.rmtree(work_dir, ignore_errors=True)
        print("stopped: review service, worker and broker; removed " + str(work_dir), flush=True)


def _show_logs(work_dir: Path) -> None:
    for name in ("review.log", "worker.log"):
        with contextlib.suppress(OSError):
            tail = (work_dir / name).read_text(errors="replace").splitlines()[-15:]
            print(f"--- {name} ---\n" + "\n".join(tail), flush=True)
