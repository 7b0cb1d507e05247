"""How the review page behaves as the queue grows: page time with 100 and with 10,000 pending items.

Each backend (SQLite, the embedded default; PostgreSQL, for several instances) gets a queue of 100 and
then of 10,000 review requests, and reviewers open the queue page one after another: every request
claims the next item (a new reviewer each time, so nothing is resumed), counts the queue for the page
and renders it. The app is called in-process over ASGI (httpx), so the figures are the service's own
cost, not the network's. The two sizes run side by side and the ratio is printed.

    python -m bench.review_queue [--pages 200] [--sizes 100 10000] [--no-postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator

import httpx

from pairjudge.schemas import ReviewRequest
from pairjudge.schemas.pair import Candidate, CandidatePair, CandidateSource, PairMetadata, Task
from pairjudge.schemas.rubric import ToneStyleRubric
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.review.auth import hash_password
from pairjudge.streams.review.kafka import LabelSink
from pairjudge.streams.review.store import ReviewStore
from pairjudge.streams.review.web import build_app, new_review_app
from pairjudge_dev.postgres import running_postgres

RUBRIC = ToneStyleRubric(style_guide="Warm and plain.", audience="Customers.")


def _requests(n: int, offset: int) -> list[ReviewRequest]:
    out = []
    for i in range(offset, offset + n):
        pair = CandidatePair(
            pair_id=f"bench-{i}",
            task=Task(prompt="Tell the customer their refund was processed."),
            candidates=(
                Candidate(
                    candidate_id="a", output=f"Your refund {i} is on its way.", source=CandidateSource(model="m1")
                ),
                Candidate(candidate_id="b", output=f"Refund {i} processed.", source=CandidateSource(model="m2")),
            ),
            rubric=RUBRIC,
            metadata=PairMetadata(experiment_id=f"exp-{i % 7}"),
        )
        out.append(ReviewRequest(pair_id=pair.pair_id, reason="tiebreak_disagreement", stage="tiebreak", pair=pair))
    return out


async def _fill(store: ReviewStore, size: int) -> None:
    for start in range(0, size, 500):
        await store.add_many(_requests(min(500, size - start), start))


async def _page_times(url: str, size: int, pages: int) -> list[float]:
    store = ReviewStore(url)
    await store.migrate()
    await _fill(store, size)
    names = ["reviewer"]
    users = [{"name": n, "password_hash": hash_password("pw"), "role": "reviewer"} for n in names]
    settings = Settings.model_validate({"review": {"users": users, "cookie_secure": False}})
    app = build_app(new_review_app(settings, store, LabelSink(settings)), "bench-session-secret")
    times = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://review.local") as client:
        page = await client.get("/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert token is not None
        await client.post("/login", data={"csrf_token": token.group(1), "name": names[0], "password": "pw"})
        for i in range(pages):
            # A fresh claim every time: the item is skipped (released) after each page, so the next page
            # claims again and counts a full queue.
            started = time.perf_counter()
            response = await client.get("/")
            times.append(time.perf_counter() - started)
            assert response.status_code == 200, response.status_code
            item = re.search(r'data-item-id="(\d+)"', response.text)
            csrf = re.search(r'<meta name="csrf-token" content="([^"]+)"', response.text)
            assert item is not None, "the queue ran dry"
            assert csrf is not None
            await client.post(f"/items/{item.group(1)}/skip", data={"csrf_token": csrf.group(1)})
            if i == 0:
                waiting = re.search(r'id="waiting">(\d+)<', response.text)
                assert waiting is not None
                assert int(waiting.group(1)) >= size - 1
    await store.close()
    return times


@contextlib.contextmanager
def _sqlite() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="pairjudge-bench-review-") as tmp:
        yield f"sqlite+aiosqlite:///{tmp}/review.db"


def _fmt(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return statistics.median(ordered) * 1000, ordered[int(0.95 * (len(ordered) - 1))] * 1000


async def main_async(pages: int, sizes: list[int], postgres: bool) -> None:
    print(f"review page time: {pages} page loads per queue size, each claiming a new item\n")
    print("| backend | pending | p50 ms | p95 ms |")
    print("|---|---|---|---|")
    backends: list[tuple[str, contextlib.AbstractContextManager[str]]] = [("SQLite", _sqlite())]
    if postgres:
        backends.append(("PostgreSQL", running_postgres()))
    for name, server in backends:
        with server as base_url:
            medians = []
            for size in sizes:
                # A fresh database per size: the same schema and code, only the queue's length differs.
                with _fresh(name, base_url) as url:
                    p50, p95 = _fmt(await _page_times(url, size, pages))
                medians.append(p50)
                print(f"| {name} | {size:,} | {p50:.1f} | {p95:.1f} |")
            print(f"| {name} | **ratio** | **{medians[-1] / medians[0]:.2f}x** ({sizes[-1]:,} vs {sizes[0]:,}) | |")


@contextlib.contextmanager
def _fresh(name: str, base_url: str) -> Iterator[str]:
    """Another empty database of the same backend."""
    if name == "SQLite":
        with _sqlite() as url:
            yield url
        return
    import psycopg

    db = f"bench_{time.monotonic_ns()}"
    admin = base_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {db}")
    yield base_url.rsplit("/", 1)[0] + f"/{db}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 10_000])
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    asyncio.run(main_async(args.pages, args.sizes, not args.no_postgres))
    return 0


if __name__ == "__main__":
    sys.exit(main())
