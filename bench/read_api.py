"""What a rollout controller polling the read API costs the review service: per request, an answer in full
(200) against an unchanged one (304 on its ETag), for the gate and the scoreboard, side by side in one run.

The review app is called in-process over ASGI (httpx), as bench/review_queue.py does, so the figures are the
service's own work plus httpx's in-process client, not the network's. The experiment is the scoreboard pages'
realistic one (a judge biased towards the challenger, 16 snapshots of 150 pairs); every request carries a read
token checked against a tokens file, as Argo's would. The last lines turn the cost into what 1,000 rollouts
polling every 30 s (Argo's interval in deploy/argo/analysis-template.yaml) take of one core.

    python -m bench.read_api [--requests 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import httpx

from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.codecs import encode
from pairjudge.streams.review.kafka import AuditFeed, LabelSink, ScoresFeed
from pairjudge.streams.review.store import ReviewStore
from pairjudge.streams.review.tokens import new_token
from pairjudge.streams.review.web import build_app, new_review_app
from tests.fixtures.scoreboard import biased_judge_snapshots

EXPERIMENT = "support-assistant-v2"
POLL_INTERVAL_S = 30.0
ROLLOUTS = 1000


async def _measure(client: httpx.AsyncClient, path: str, etag: str | None, n: int) -> tuple[list[float], float]:
    """Per-request wall times (s) and process CPU seconds per request, after a warm-up."""
    headers = {"if-none-match": etag} if etag else {}
    for _ in range(50):
        await client.get(path, headers=headers)
    times = []
    cpu0 = time.process_time()
    for _ in range(n):
        t0 = time.perf_counter()
        answer = await client.get(path, headers=headers)
        times.append(time.perf_counter() - t0)
        assert answer.status_code == (304 if etag else 200), answer.status_code
    return times, (time.process_time() - cpu0) / n


async def run(requests: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tokens = Path(tmp) / "tokens"
        token, line = new_token("argo-rollouts", ("read",))
        tokens.write_text(line + "\n")
        settings = Settings.model_validate(
            {"review": {"database_url": f"sqlite+aiosqlite:///{tmp}/r.db", "api_tokens_file": str(tokens)}}
        )
        scores = ScoresFeed(settings)
        for snap in biased_judge_snapshots(EXPERIMENT):
            scores.take(encode(snap))
        store = ReviewStore(settings.review.resolved_database_url())
        app = build_app(
            new_review_app(settings, store, LabelSink(settings), None, scores, AuditFeed(settings)), "s" * 48
        )
        transport = httpx.ASGITransport(app=app)
        base = f"/api/v1/experiments/{quote(EXPERIMENT, safe='')}"
        rows = []
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers={"authorization": f"Bearer {token}"}
        ) as client:
            for name, path in (
                ("gate (human basis)", f"{base}/gate?basis=human"),
                ("scoreboard", f"{base}/scoreboard"),
                ("experiments", "/api/v1/experiments"),
            ):
                first = await client.get(path)
                assert first.status_code == 200, first.text
                size = len(first.content)
                full, full_cpu = await _measure(client, path, None, requests)
                same, same_cpu = await _measure(client, path, first.headers["etag"], requests)
                rows.append((name, size, full, full_cpu, same, same_cpu))
        await store.close()

    print(f"read API, {requests:,} requests per row, in-process ASGI (service + httpx client)")
    print(f"{'path':<20} {'bytes':>7} {'200 p50':>9} {'200 p99':>9} {'200 CPU':>9} {'304 p50':>9} {'304 p99':>9} "
          f"{'304 CPU':>9} {'304/200':>8}")  # fmt: skip
    for name, size, full, full_cpu, same, same_cpu in rows:
        print(
            f"{name:<20} {size:>7,} {_ms(statistics.median(full))} {_ms(_p99(full))} {_ms(full_cpu)} "
            f"{_ms(statistics.median(same))} {_ms(_p99(same))} {_ms(same_cpu)} {same_cpu / full_cpu:>8.2f}"
        )
    gate_cpu = rows[0][5]
    rate = ROLLOUTS / POLL_INTERVAL_S
    print(
        f"{ROLLOUTS:,} rollouts polling the gate every {POLL_INTERVAL_S:g} s ({rate:.1f} requests/s), unchanged "
        f"answers: {rate * gate_cpu * 100:.2f}% of one core"
    )


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:>7.3f}ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    asyncio.run(run(args.requests))


if __name__ == "__main__":
    main()
