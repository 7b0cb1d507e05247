"""The Python API: the worker's judging path without Kafka, for a notebook, a script or a service.

    from pairjudge.api import Evaluator, compare, tie_break

    outcome = await compare(pair)                   # one pair: Verdict | Review | Rejected | ...
    async with Evaluator() as evaluator:            # many: one set of judges and HTTP clients
        async for outcome in evaluator.compare_file("pairs.jsonl", out="results.jsonl"):
            print(outcome.pair_id, outcome.kind, outcome.winner)
    result = await tie_break(output_a, output_b, prompt, {"safety": 0.6, "conciseness": 0.4})

Modules:

- ``evaluator``: ``Evaluator`` (compare, compare_many, compare_file, resolve_tiebreak) and ``FileRun``.
- ``outcomes``: the ``Outcome`` union (``Verdict``, ``TieBreakPending``, ``Review``, ``Rejected``, ``Failed``).
- ``results``: the summary row per pair and the appended, resumable results file.
- ``tiebreak``: seed 002's ``tie_break`` and its ``TieBreakResult``.

Nothing here imports Faust or needs a broker. Guide: docs/guides/python-api.md.
"""

from __future__ import annotations

from pairjudge.schemas.outcomes import OutcomeKind
from pairjudge.streams.api.evaluator import DEFAULT_CONCURRENCY, Evaluator, FileRun, PairInput
from pairjudge.streams.api.outcomes import Failed, Outcome, Rejected, Review, TieBreakPending, Verdict
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
) -> Outcome:
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
    "Failed",
    "FileRun",
    "Outcome",
    "OutcomeKind",
    "PairInput",
    "PairResult",
    "Rejected",
    "Review",
    "Settings",
    "SpendCapUnsupported",
    "TieBreakPending",
    "TieBreakResult",
    "Verdict",
    "compare",
    "tie_break",
]
