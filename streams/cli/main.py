"""The ``pairjudge`` command line: every command module registered on the one typer app, and ``main``."""

from __future__ import annotations

import asyncio
import importlib
import sys

from pairjudge.streams.cli.base import _used, app, console
from pairjudge.streams.config.settings import load_settings

#: Each module registers its commands on the shared app (or one of its groups) when imported; in this
#: order, which is the order ``pairjudge --help`` lists them in.
COMMAND_MODULES = (
    "run",
    "worker",
    "gateway",
    "topics",
    "control",
    "labels",
    "deadletter",
    "reports",
    "export",
    "backtest",
    "review",
)
for _module in COMMAND_MODULES:
    importlib.import_module(f"pairjudge.streams.cli.{_module}")


def main() -> None:
    from aiokafka.errors import KafkaError

    from pairjudge.streams.kafka.admin import BrokerError

    try:
        app()
    except ValueError as exc:
        # Settings errors name the variable, never its value.
        console.print(f"[red]error:[/red] {exc}")
        sys.exit(2)
    except (KafkaError, BrokerError) as exc:
        # A refused ACL, password or certificate: said plainly (security.kafka_clients.explain), never a secret.
        from rich.markup import escape

        from pairjudge.streams.security.kafka_clients import client_config, explain

        settings = _used[0] if _used else load_settings()
        console.print(f"[red]error:[/red] {escape(asyncio.run(explain(exc, client_config(settings.kafka))))}")
        sys.exit(3)


if __name__ == "__main__":
    main()


__all__ = ["app", "main"]
