"""``pairjudge review serve|hash-password``: the human-review service."""

from __future__ import annotations

import asyncio

import typer

from pairjudge.streams.cli.base import (
    Bootstrap,
    console,
    review_app,
    settings_for,
)


@review_app.command("serve")
def review_serve(bootstrap: Bootstrap = None) -> None:
    """Consume pairjudge.review into the queue and serve the review UI (127.0.0.1:8088 by default)."""
    from pairjudge.streams.review.service import serve

    settings = settings_for(bootstrap)
    console.print(f"review UI on http://{settings.review.host}:{settings.review.port}/")
    asyncio.run(serve(settings))


@review_app.command("hash-password")
def review_hash_password() -> None:
    """Read a password (twice, not echoed) and print its scrypt hash for PAIRJUDGE_REVIEW__USERS."""
    from pairjudge.streams.review.auth import hash_password

    password = typer.prompt("password", hide_input=True, confirmation_prompt=True)
    print(hash_password(password))
