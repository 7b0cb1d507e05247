"""``pairjudge review serve|hash-password``: the human-review service."""

from __future__ import annotations

import asyncio
from typing import Annotated

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


token_app = typer.Typer(help="Bearer tokens for the read API (/api/v1).", no_args_is_help=True)
review_app.add_typer(token_app, name="token")


@token_app.command("new")
def review_token_new(
    name: Annotated[str, typer.Option("--name", help="Who or what uses the token (e.g. argo-rollouts).")],
    role: Annotated[
        list[str] | None, typer.Option("--role", help="A role it has (read: the read API); repeatable.")
    ] = None,
) -> None:
    """Mint a token: print it once (give it to its user) and the line to add to PAIRJUDGE_REVIEW__API_TOKENS_FILE.

    The file keeps only the token's hash; delete the line to revoke it (no restart needed)."""
    from pairjudge.streams.review.tokens import new_token

    try:
        token, line = new_token(name, tuple(role or ["read"]))
    except ValueError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from None
    # stderr for the words, stdout for the two values, so a script can take them apart.
    typer.echo("token (shown once; keep it in a secret store):", err=True)
    print(token)
    typer.echo("line for the tokens file (holds only the hash):", err=True)
    print(line)
