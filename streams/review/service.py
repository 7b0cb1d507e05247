"""``pairjudge review``: the queue's consumer and the web app in one process (several may share PostgreSQL)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass

import uvicorn
from starlette.applications import Starlette

from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.live import follow_control
from pairjudge.streams.kafka.cancellation import cancel_and_wait
from pairjudge.streams.review.kafka import AuditFeed, LabelSink, ReviewFeed, ScoresFeed
from pairjudge.streams.review.store import ReviewStore
from pairjudge.streams.review.web import ReviewApp, build_app, new_review_app
from pairjudge.streams.services import build_services

log = logging.getLogger(__name__)


@dataclass
class RunningReview:
    app: Starlette
    review: ReviewApp
    feed: ReviewFeed
    store: ReviewStore


def session_secret(settings: Settings) -> str:
    configured = settings.review.resolved_session_secret()
    if configured is not None:
        return configured.get_secret_value()
    log.warning("no PAIRJUDGE_REVIEW__SESSION_SECRET: using a random key, so sessions end when this process stops")
    return secrets.token_urlsafe(48)


@contextlib.asynccontextmanager
async def review_service(settings: Settings) -> AsyncIterator[RunningReview]:
    """The store (migrated), the label producer, the review feed consuming in the background, and the app."""
    store = ReviewStore(settings.review.resolved_database_url())
    await store.migrate()
    labels = LabelSink(settings)
    feed = ReviewFeed(settings, store)
    await labels.start()
    await feed.start()
    consume = asyncio.create_task(feed.run(), name="review-feed")
    # The operators' page shows the live controls, as every worker sees them.
    policy = build_services(settings, "review").policy
    follow = asyncio.create_task(follow_control(settings, policy), name="review-control")
    scores = ScoresFeed(settings)
    scoreboards = asyncio.create_task(scores.run(), name="review-scores")
    # The operators' page shows each series' judge-human kappa beside the human ceiling.
    audit = AuditFeed(settings)
    snapshots = asyncio.create_task(audit.run(), name="review-audit")
    review = new_review_app(settings, store, labels, policy, scores, audit)
    if review.health is not None:
        review.health.feed = feed
        review.health.tasks = {
            "review feed": consume,
            "control follower": follow,
            "scores feed": scoreboards,
            "audit feed": snapshots,
        }
    if not len(review.users):
        log.warning("no review users configured (PAIRJUDGE_REVIEW__USERS or __USERS_FILE): nobody can sign in")
    try:
        yield RunningReview(build_app(review, session_secret(settings)), review, feed, store)
    finally:
        # Asked again until they end: a request that reaches a task while aiokafka closes a client is lost
        # (streams.kafka.cancellation), and a feed that reads for ever would then keep this from stopping.
        await cancel_and_wait(consume, follow, scoreboards, snapshots)
        await feed.stop()
        await labels.stop()
        await store.close()


async def serve(settings: Settings) -> None:
    async with review_service(settings) as running:
        config = uvicorn.Config(
            running.app,
            host=settings.review.host,
            port=settings.review.port,
            log_level="warning",
            proxy_headers=False,
            server_header=False,
        )
        await uvicorn.Server(config).serve()
