"""The Python API: the worker's judging path without Kafka, for a notebook, a script or a service.

    from pairjudge.api import Evaluator, compare, tie_break

    outcome = await compare(pair)                   # one pair: Verdict | Review | Rejected | ...
    async with Evaluator() as evaluator:            # many: one set of judges and HTTP clients
        async for outcome in evaluator.compare_file("pairs.jsonl", out="results.jsonl"):
            print(outcome.pair_id, outcome.kind, outcome.winner)
    result = await tie_break(output_a, output_b, prompt, {"safety": 0.6, "conciseness": 0.4})

Modules:

- ``evaluator``: ``Evaluator`` (compare, compare_many, compare_file, resolve_tiebreak) and ``FileRun``.
- ``outcomes``: the ``Outcome`` union, one wrapper per outcome kind (``Verdict``, ``Review``, ...: its ``__all__``).
- ``results``: the summary row per pair and the appended, resumable results file.
- ``tiebreak``: seed 002's ``tie_break`` and its ``TieBreakResult``.

Nothing here imports Faust or needs a broker. Guide: docs/guides/python-api.md.
"""

from __future__ import annotations

from pairjudge.schemas.outcomes import OutcomeKind
from pairjudge.streams.api import outcomes as _outcomes
from pairjudge.streams.api.evaluator import DEFAULT_CONCURRENCY, Evaluator, FileRun, PairInput
from pairjudge.streams.api.outcomes import *  # noqa: F403 - every outcome wrapper and the union (its __all__)
from pairjudge.streams.api.results import PairResult
from pairjudge.streams.api.tiebreak import EvaluationFailed, TieBreakResult, tie_break
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.worker.spend import SpendCapUnsupported


async def compare(
    pair: PairInput,
    *,
    settings: Settings | None = None,
    evaluator: Evaluator | None = None,
    tiebreak: bool = True,
) -> _outcomes.Outcome:
    """Decide one pair as the worker would (``Evaluator.compare``), with ``evaluator`` or a new one from
    ``settings`` that is closed before returning. For many pairs, keep one ``Evaluator`` open."""
    if evaluator is not None:
        return await evaluator.compare(pair, tiebreak=tiebreak)
    async with Evaluator(settings) as own:
        return await own.compare(pair, tiebreak=tiebreak)


__all__ = [
    "DEFAULT_CONCURRENCY",
    "EvaluationFailed",
    "Evaluator",
    "FileRun",
    "OutcomeKind",
    "PairInput",
    "PairResult",
    "Settings",
    "SpendCapUnsupported",
    "TieBreakResult",
    "compare",
    "tie_break",
]
__all__ += _outcomes.__all__
