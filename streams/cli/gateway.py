"""``pairjudge gateway``: the capturing reverse proxy in front of the champion (docs/guides/gateway.md)."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from pairjudge.streams.cli.base import Bootstrap, app, console, settings_for


@app.command("gateway")
def gateway(
    bootstrap: Bootstrap = None,
    upstream: Annotated[
        str | None, typer.Option("--upstream", help="The champion's base URL (default: PAIRJUDGE_GATEWAY__UPSTREAM).")
    ] = None,
    port: Annotated[int | None, typer.Option("--port", help="Port to listen on (default 8090).")] = None,
) -> None:
    """Proxy an OpenAI-compatible (or Anthropic) model server and capture a share of its calls for the shadow stage.

    Apps point their SDK's base URL here; their calls and the server's replies pass through unchanged."""
    from pairjudge.streams.gateway import GatewaySettingsError, serve

    settings = settings_for(bootstrap)
    changes: dict[str, object] = {}
    if upstream is not None:
        changes["upstream"] = upstream
    if port is not None:
        changes["port"] = port
    if changes:
        settings = settings.model_copy(update={"gateway": settings.gateway.model_copy(update=changes)})
    try:
        console.print(
            f"gateway on http://{settings.gateway.host}:{settings.gateway.port}/ -> {settings.gateway.upstream}"
        )
        asyncio.run(serve(settings))
    except GatewaySettingsError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
