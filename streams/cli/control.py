"""``pairjudge control set|pause|resume|clear|tiebreak-on``: live settings on ``pairjudge.control``, and a series'
tie-break switched back on (``pairjudge.thresholds``)."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from pairjudge.streams.cli.base import (
    Bootstrap,
    console,
    control_app,
    settings_for,
)


@control_app.command("set")
def control_set(
    key: Annotated[
        str,
        typer.Argument(
            help="tiebreak_enabled, tiebreak_confidence_threshold, high_primary_confidence_threshold, ..."
            " (docs/getting-started/configuration.md#live-settings)"
        ),
    ],
    value: Annotated[
        str, typer.Argument(help="true/false, a number, a word, or a list (shadow_paused, shadow_shares)")
    ],
    bootstrap: Bootstrap = None,
    by: Annotated[str, typer.Option(help="Who made the change, for the record.")] = "",
) -> None:
    """Change a setting on every running worker, without a redeploy."""
    from pairjudge.streams.control.live import parse_value, publish_control

    settings = settings_for(bootstrap)
    asyncio.run(publish_control(settings, key, parse_value(key, value), by))
    console.print(f"{settings.topics.name('control')}: {key} = {value}")


@control_app.command("pause")
def control_pause(
    by: Annotated[str, typer.Option(help="Who paused, and why: kept on the control topic.")],
    bootstrap: Bootstrap = None,
) -> None:
    """Pause automatic decisions on every worker (the kappa guard): every pair goes to human review."""
    from pairjudge.streams.control.live import publish_control

    settings = settings_for(bootstrap)
    asyncio.run(publish_control(settings, "kappa_guard_tripped", True, by))
    console.print(f"{settings.topics.name('control')}: automatic decisions paused by {by}")


@control_app.command("resume")
def control_resume(
    by: Annotated[str, typer.Option(help="Who resumed: a person, kept on the control topic.")],
    bootstrap: Bootstrap = None,
) -> None:
    """Resume automatic decisions after the kappa guard paused them (only a person does this: the guard never
    resumes by itself)."""
    from pairjudge.streams.control.live import publish_control

    settings = settings_for(bootstrap)
    # An explicit false, not a tombstone: the record of who resumed stays on the compacted topic.
    asyncio.run(publish_control(settings, "kappa_guard_tripped", False, by))
    console.print(f"{settings.topics.name('control')}: automatic decisions resumed by {by}")


@control_app.command("clear")
def control_clear(key: Annotated[str, typer.Argument()], bootstrap: Bootstrap = None) -> None:
    """Return a setting to its configured value on every worker (writes a tombstone)."""
    from pairjudge.streams.control.live import publish_control

    settings = settings_for(bootstrap)
    asyncio.run(publish_control(settings, key, None, ""))
    console.print(f"{settings.topics.name('control')}: {key} cleared")


@control_app.command("tiebreak-on")
def control_tiebreak_on(
    series: Annotated[
        str,
        typer.Argument(
            help="The series whose tie-break the audit switched off, as the audit names it (its key: `pairjudge "
            "report` and the operators' page show it)."
        ),
    ],
    by: Annotated[str, typer.Option(help="Who switches it back on: kept on the thresholds topic.")],
    why: Annotated[str, typer.Option(help="Why, e.g. what changed in the tie-break's prompt or model.")],
    bootstrap: Bootstrap = None,
) -> None:
    """Switch a series' tie-break back on after the audit switched it off (only a person does this).

    Every worker sends the series' flips to the tie-break again at its configured
    threshold, and the audit judges the tie-break afresh, on labels of the decisions it makes from now on: the
    labels that switched it off no longer count."""
    from pairjudge.streams.control.live import publish_tiebreak_on

    if not by.strip() or not why.strip():
        raise typer.BadParameter("say who switches the tie-break back on (--by) and why (--why)")
    settings = settings_for(bootstrap)
    try:
        update = asyncio.run(publish_tiebreak_on(settings, series, f"{by.strip()}: {why.strip()}"))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    console.print(
        f"{settings.topics.name('thresholds')}: the tie-break of {series} is switched back on by "
        f"{update.switched_on_by} at {update.updated_at:%Y-%m-%d %H:%M:%S} UTC; the audit judges it afresh, from "
        "labels of the decisions it makes from now on."
    )
