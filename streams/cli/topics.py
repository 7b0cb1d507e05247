"""``pairjudge topics create|check``, and the topic check every command that starts a worker runs."""

from __future__ import annotations

import asyncio

import typer

from pairjudge.streams.cli.base import (
    Bootstrap,
    console,
    settings_for,
    topics_app,
)
from pairjudge.streams.config.settings import Settings


def ensure_topics(settings: Settings, *, create: bool, what: str) -> int:
    """Create (idempotent) or check every pairjudge topic; exit 2 with the broker's reason on failure.

    On a secured cluster this is where a wrong password, a refused certificate or a missing ACL shows,
    with a clear message, instead of a Faust worker retrying for ever.
    """
    from aiokafka.errors import KafkaError
    from rich.markup import escape

    from pairjudge.streams.kafka.admin import BrokerError, check_topics, create_topics
    from pairjudge.streams.kafka.topics import topic_specs
    from pairjudge.streams.security.kafka_clients import client_config, explain

    config = client_config(settings.kafka)
    specs = topic_specs(settings)
    try:
        asyncio.run((create_topics if create else check_topics)(config, specs))
    except (BrokerError, KafkaError, OSError) as exc:
        console.print(f"[red]error:[/red] {escape(asyncio.run(explain(exc, config, what=what)))}")
        raise typer.Exit(code=2) from None
    return len(specs)


@topics_app.command("create")
def topics_create(bootstrap: Bootstrap = None) -> None:
    """Create every pairjudge topic (and the tables' changelogs) with its partition count, then exit.

    Idempotent: existing topics are kept. A topic that exists with another partition count fails the
    command, naming it (partitions cap a consumer group's workers, so the count is chosen once).
    Deployments run this once before the workers, which then start with ``--no-create-topics``.
    """
    settings = settings_for(bootstrap)
    count = ensure_topics(settings, create=True, what="topic creation")
    console.print(f"{count} topics ready on {settings.kafka.bootstrap_servers}")


@topics_app.command("check")
def topics_check(bootstrap: Bootstrap = None) -> None:
    """Exit 0 if every pairjudge topic exists with its partition count, 2 (naming what is wrong) if not."""
    settings = settings_for(bootstrap)
    count = ensure_topics(settings, create=False, what="topic check")
    console.print(f"{count} topics present on {settings.kafka.bootstrap_servers}")
