"""``pairjudge evaluate``: the judging core over a file, no Kafka.

Each pair goes through the same path as in the worker: input checks, both orders, reconciliation and,
where needed, the tie-break. Where the file carries human labels, the judge is scored against them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from rich.console import Console
from rich.table import Table

from agents.core import check_pair, judge_pair, resolve_tiebreak
from agents.errors import InputRejected
from agents.judge import Judge
from agents.policy import Policy
from agents.stats import agreement, cohen_kappa, flip_rate, position_a_win_rate, relative_label
from schemas import TIE, CandidatePair, InlineRubric, PairVerdict, ReviewRequest, TieBreakRequest
from streams.app import load_catalog
from streams.codecs import decode
from streams.judges.factory import build_judge
from streams.settings import Settings


@dataclass
class PairResult:
    pair_id: str
    outcome: str  # "verdict" | "review" | "rejected" | "error"
    winner: str | None = None  # a candidate id, None when undecided
    decided_by: str | None = None
    reason: str | None = None
    confidence: float | None = None
    human: str | None = None  # the known label: a candidate id or TIE
    candidate_ids: tuple[str, str] | None = None
    primary_winners: tuple[str, str] | None = None  # (AB mapped, BA mapped) when both orders were valid
    raw_winners: tuple[str, ...] = ()


@dataclass
class EvaluateReport:
    results: list[PairResult] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return sum(1 for r in self.results if r.outcome == "error")

    @property
    def labelled(self) -> list[PairResult]:
        return [r for r in self.results if r.human is not None and r.candidate_ids is not None]

    def judge_labels(self) -> tuple[list[str], list[str]]:
        """Pair-independent labels (first / second / TIE); an undecided pair counts as the judge saying TIE."""
        judge: list[str] = []
        human: list[str] = []
        for r in self.labelled:
            assert r.candidate_ids is not None
            assert r.human is not None
            judge.append(relative_label(r.candidate_ids, r.winner or TIE))
            human.append(relative_label(r.candidate_ids, r.human))
        return judge, human

    @property
    def agreement(self) -> float | None:
        judge, human = self.judge_labels()
        return agreement(zip(judge, human, strict=True))

    @property
    def kappa(self) -> float | None:
        judge, human = self.judge_labels()
        return cohen_kappa(judge, human)

    @property
    def flip_rate(self) -> float | None:
        return flip_rate(r.primary_winners for r in self.results if r.primary_winners)

    @property
    def position_a_rate(self) -> float | None:
        return position_a_win_rate(w for r in self.results for w in r.raw_winners)


async def evaluate_pair(
    raw: bytes, judge: Judge, policy: Policy, catalog: dict[str, InlineRubric], max_bytes: int
) -> PairResult:
    try:
        pair = decode(CandidatePair, raw, max_bytes=max_bytes)
    except InputRejected as exc:
        return PairResult(pair_id=_pair_id_of(raw), outcome="rejected", reason=exc.reason)
    ids = (pair.candidates[0].candidate_id, pair.candidates[1].candidate_id)
    human = pair.human_label.winner if pair.human_label else None
    base = PairResult(pair_id=pair.pair_id, outcome="error", human=human, candidate_ids=ids)
    try:
        check_pair(pair, policy, catalog)
    except InputRejected as exc:
        base.outcome, base.reason = "rejected", exc.reason
        return base
    decision = await judge_pair(pair, judge, policy, catalog)
    outcome = decision.outcome
    if isinstance(outcome, TieBreakRequest):
        primary = outcome.primary
        base.reason = outcome.reason
        outcome = (await resolve_tiebreak(outcome, judge, policy)).outcome
    else:
        primary = outcome.orderings
    base.raw_winners = tuple(o.raw_winner for o in primary if o.raw_winner)
    if len(primary) == 2 and all(o.valid and o.mapped_winner for o in primary):
        base.primary_winners = (primary[0].mapped_winner or TIE, primary[1].mapped_winner or TIE)
    if isinstance(outcome, PairVerdict):
        base.outcome, base.winner = "verdict", outcome.winner
        base.decided_by, base.confidence = outcome.decided_by, outcome.confidence
    elif isinstance(outcome, ReviewRequest):
        base.outcome, base.reason = "review", outcome.reason
    return base


def _pair_id_of(raw: bytes) -> str:
    try:
        data = json.loads(raw)
        return str(data.get("pair_id", "?")) if isinstance(data, dict) else "?"
    except ValueError:
        return "?"


async def run_evaluate(
    settings: Settings,
    path: Path,
    *,
    out_path: Path | None,
    console: Console,
    judge: Judge | None = None,
    concurrency: int = 8,
) -> EvaluateReport:
    judge = judge or build_judge(settings.judge)
    policy = settings.policy.to_policy()
    catalog = load_catalog(settings.rubrics_file)
    lines = [line for line in (await anyio.Path(path).read_bytes()).splitlines() if line.strip()]
    results: list[PairResult | None] = [None] * len(lines)
    limiter = anyio.CapacityLimiter(concurrency)

    async def one(i: int, raw: bytes) -> None:
        async with limiter:
            try:
                results[i] = await evaluate_pair(raw, judge, policy, catalog, settings.max_event_bytes)
            except Exception as exc:  # noqa: BLE001 - report it as a row, keep evaluating the rest
                results[i] = PairResult(
                    pair_id=_pair_id_of(raw), outcome="error", reason=f"{type(exc).__name__}: {exc}"
                )

    async with anyio.create_task_group() as tg:
        for i, raw in enumerate(lines):
            tg.start_soon(one, i, raw)
    report = EvaluateReport(results=[r for r in results if r is not None])
    if out_path is not None:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        with out_path.open("w", encoding="utf-8") as fh:
            for r in report.results:
                fh.write(json.dumps(r.__dict__, default=list) + "\n")
    print_report(console, report, judge)
    return report


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def print_report(console: Console, report: EvaluateReport, judge: Judge) -> None:
    outcomes: dict[str, int] = {}
    for r in report.results:
        key = f"{r.outcome} ({r.decided_by})" if r.decided_by else r.outcome
        outcomes[key] = outcomes.get(key, 0) + 1
    table = Table(
        title=f"pairjudge evaluate: {judge.provider}/{judge.model}" + (" (heuristic)" if judge.heuristic else "")
    )
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("pairs", str(len(report.results)))
    for key in sorted(outcomes):
        table.add_row(f"  {key}", str(outcomes[key]))
    table.add_row("position-flip rate", _fmt(report.flip_rate))
    table.add_row("position-A win rate", _fmt(report.position_a_rate))
    table.add_row("human-labelled pairs", str(len(report.labelled)))
    table.add_row("agreement with humans", _fmt(report.agreement))
    table.add_row("Cohen's kappa", _fmt(report.kappa))
    console.print(table)
