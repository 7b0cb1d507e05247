"""``pairjudge backtest``: recorded judge answers replayed through the core under policy files, side by side;
``pairjudge export backtest``: a deployment's own history written in the backtest's import format.

The replay and its figures are ``agents.backtest``'s (pure); reading the history from the topics is here, with
``streams.kafka.readers.from_start`` as ``export preferences`` reads them. docs/guides/backtest.md.
"""

from __future__ import annotations

import asyncio
import json
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pairjudge.agents.backtest import PolicySummary, StageAgreement, replay_all, summarise
from pairjudge.agents.backtest_history import History
from pairjudge.agents.policy import Policy
from pairjudge.schemas.backtest import RecordedPair
from pairjudge.streams.cli.base import Bootstrap, app, console, export_app, output_console, settings_for
from pairjudge.streams.cli.durable import replace_whole
from pairjudge.streams.cli.topic_history import decoding, read_to_end
from pairjudge.streams.cli.words import reason_words
from pairjudge.streams.config.sections import PolicySettings
from pairjudge.streams.config.settings import Settings

__all__ = ["backtest_table", "load_policy", "read_history", "read_rows", "summaries"]


def load_policy(path: Path) -> Policy:
    """The policy of a pairjudge config file: its ``[policy]`` table, validated as the worker validates it (the
    rest of the file, judges included, is not read)."""
    with path.open("rb") as handle:
        table = tomllib.load(handle).get("policy", {})
    return PolicySettings.model_validate(table).to_policy()


def read_rows(path: Path) -> list[RecordedPair]:
    """The recorded pairs of a JSON Lines file; a bad line is an error naming its line number."""
    rows: list[RecordedPair] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                rows.append(RecordedPair.model_validate_json(line))
            except ValidationError as exc:
                raise ValueError(f"{path}:{number}: not a recorded pair: {exc.errors()[0]['msg']}") from None
    return rows


async def summaries(rows: Sequence[RecordedPair], policies: Sequence[tuple[str, Policy]]) -> list[PolicySummary]:
    return [summarise(name, await replay_all(rows, policy)) for name, policy in policies]


def _share(part: int, whole: int) -> str:
    return f"{part} ({part / whole:.1%})" if whole else str(part)


def _agreement(a: StageAgreement) -> str:
    if a.rate is None or a.interval is None:
        return "no labels"
    low, high = a.interval
    labels = "label" if a.labelled == 1 else "labels"
    return f"{a.rate:.1%} [{low:.1%}, {high:.1%}] on {a.labelled} {labels}"


def _cost(s: PolicySummary) -> str:
    if s.cost_usd is None:
        return "not recorded"
    note = "" if s.costed_pairs == s.pairs else f" ({s.costed_pairs} of {s.pairs} pairs priced)"
    return f"${s.cost_usd:.4f}{note}"


def backtest_table(results: Sequence[PolicySummary]) -> Table:
    table = Table(title="Backtest: the recorded answers under each policy", show_lines=False)
    table.add_column("")
    for s in results:
        table.add_column(escape(s.policy), overflow="fold")
    rows: list[tuple[str, Callable[[PolicySummary], str]]] = [
        ("pairs", lambda s: str(s.pairs)),
        ("decided without a person", lambda s: _share(s.decided_primary + s.decided_tiebreak, s.pairs)),
        ("  by the judge alone (both orders agreed)", lambda s: _share(s.decided_primary, s.pairs)),
        ("  by the tie-break", lambda s: _share(s.decided_tiebreak, s.pairs)),
        ("agreement with people, decided without a person", lambda s: _agreement(s.agreement_auto)),
        ("  pairs decided by the judge alone", lambda s: _agreement(s.agreement_primary)),
        ("  pairs decided by the tie-break", lambda s: _agreement(s.agreement_tiebreak)),
        ("sent to people", lambda s: _share(s.to_people, s.pairs)),
        ("  the judge's lean there, against people", lambda s: _agreement(s.agreement_people_lean)),
        ("  why", lambda s: "; ".join(f"{v} {reason_words(k)}" for k, v in s.review_reasons.items()) or "-"),
        ("audit copies (verdicts people also label)", lambda s: str(s.audit_copies)),
        ("labels asked of people", lambda s: str(s.people_load)),
        ("waiting for a tie-break answer not recorded", lambda s: _share(s.tiebreak_unrecorded, s.pairs)),
        ("judge cost", _cost),
    ]
    for label, value in rows:
        table.add_row(label, *(value(s) for s in results))
    return table


def _json(results: Sequence[PolicySummary]) -> str:
    def one(s: PolicySummary) -> dict[str, object]:
        data = asdict(s)
        data["coverage"] = s.coverage
        data["people_load"] = s.people_load
        for key in ("agreement_primary", "agreement_tiebreak", "agreement_auto", "agreement_people_lean"):
            stage: StageAgreement = getattr(s, key)
            data[key] |= {"rate": stage.rate, "interval": stage.interval}
        return data

    return json.dumps([one(s) for s in results], indent=2)


@app.command()
def backtest(
    file: Annotated[
        Path, typer.Argument(exists=True, dir_okay=False, help="JSONL of recorded pairs (docs/guides/backtest.md).")
    ],
    policy: Annotated[
        list[Path] | None,
        typer.Option(
            "--policy",
            "-p",
            exists=True,
            dir_okay=False,
            help="A pairjudge config file whose [policy] table to replay under; repeat to compare. "
            "None: the default policy.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON instead of a table.")] = False,
) -> None:
    """Replay recorded judge answers and people's labels through the core under each policy, side by side."""
    try:
        rows = read_rows(file)
        policies = [(p.name, load_policy(p)) for p in policy] if policy else [("default policy", Policy())]
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(code=2) from None
    results = asyncio.run(summaries(rows, policies))
    if as_json:
        print(_json(results))
        return
    out = output_console()
    out.print(backtest_table(results))
    unstated = max(s.no_confidence for s in results) if results else 0
    if unstated:
        out.print(f"{unstated} recorded answers carried no confidence: each was replayed as 1.0.")


async def read_history(settings: Settings, timeout: float) -> History:
    """The history of the deployment ``settings`` name, every topic read from its start to its end now."""
    from pairjudge.schemas.events import HumanLabel, PairVerdict, ReviewRequest
    from pairjudge.schemas.pair import CandidatePair

    history = History()
    takers = {
        "pairs": decoding(CandidatePair, history.add_pair, settings),
        "verdicts": decoding(PairVerdict, history.add_verdict, settings),
        "review": decoding(ReviewRequest, history.add_review, settings),
        "labels": decoding(HumanLabel, history.add_label, settings),
    }
    # Not an event of its topic: the worker dead-lettered it already.
    history.skipped += await read_to_end(settings, takers, timeout=timeout)
    return history


@export_app.command("backtest")
def export_backtest(
    out: Annotated[Path, typer.Argument(dir_okay=False, help="The JSONL file to write (replaced).")],
    bootstrap: Bootstrap = None,
    timeout: Annotated[float, typer.Option(help="Seconds to read the topics for, at most.", min=1)] = 300.0,
) -> None:
    """Write the deployment's own history (its verdicts, reviews and labels) in the backtest's import format."""
    history = asyncio.run(read_history(settings_for(bootstrap), timeout))
    rows = history.rows()
    # Whole or not at all: a run killed while writing leaves the previous export as it was.
    replace_whole(out, "".join(row.model_dump_json(exclude_none=True) + "\n" for row in rows))
    Console(stderr=True).print(
        f"wrote {len(rows)} recorded pairs to {escape(str(out))}; left out {history.skipped} "
        "(a jury's or a cascade's, decided before any judge call, or unreadable)"
    )
