"""``pairjudge evaluate``: the judging core over a file, no Kafka, and the report.

The judging is the Python API's (``streams.api``: the worker's own stage handler, so each pair goes
through the same path as in the worker: input checks, both orders, reconciliation and, where needed,
the tie-break). Each pair's row is appended to ``--out`` as it is decided, and a rerun resumes the file.
Where the file carries human labels, the judge is scored against them, beside simple baselines.
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from pairjudge.agents import Judge
from pairjudge.agents.stats import (
    KappaEstimate,
    agreement,
    cohen_kappa,
    flip_rate,
    kappa_interval,
    position_a_win_rate,
    relative_label,
)
from pairjudge.schemas import TIE
from pairjudge.schemas.outcomes import entry_for_row
from pairjudge.streams.api.evaluator import DEFAULT_CONCURRENCY, Evaluator, FileRun
from pairjudge.streams.api.results import PairResult
from pairjudge.streams.cli.words import DECIDED_BY_WORDS, reason_words, shorten
from pairjudge.streams.config.oversight import AuditSettings
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.judges.panel import JudgePanel

__all__ = [
    "FIRST",
    "RANDOM_SEEDS",
    "SECOND",
    "EvaluateReport",
    "MethodScore",
    "PairResult",
    "longer_wins",
    "print_baselines",
    "print_capped",
    "print_failures",
    "print_pairs",
    "print_report",
    "random_baseline",
    "run_evaluate",
    "score_labels",
]

#: Relative labels (see ``agents.stats.relative_label``): what every method below is scored in.
FIRST, SECOND = "first", "second"
#: Seeds averaged for the random baseline: one draw is noisy on a set of a hundred pairs.
RANDOM_SEEDS = 200


@dataclass(frozen=True, slots=True)
class MethodScore:
    """One method scored against the human labels, over the same labelled pairs.

    ``coverage`` is the share of pairs the method decided (named a winner) on its own; an undecided
    pair counts as the method saying TIE. ``decided_accuracy`` is precision-like: of the pairs it
    decided *and* the humans decided, the share where it picked the humans' winner (a pair the humans
    called a tie has no right winner, so it is left out here; agreement and kappa still count it).
    ``escalated`` and ``flip_rate`` only mean something for the judge.
    """

    name: str
    pairs: int
    agreement: float | None
    kappa: float | None
    coverage: float | None
    decided_accuracy: float | None
    escalated: float | None = None
    flip_rate: float | None = None


def score_labels(name: str, predicted: Sequence[str], human: Sequence[str]) -> MethodScore:
    """Agreement, Cohen's kappa, coverage and accuracy-when-decided of ``predicted`` against ``human``."""
    pairs = list(zip(predicted, human, strict=True))
    decided = [(p, h) for p, h in pairs if p != TIE]
    both = [(p, h) for p, h in decided if h != TIE]
    return MethodScore(
        name=name,
        pairs=len(pairs),
        agreement=agreement(pairs),
        kappa=cohen_kappa(predicted, human),
        coverage=len(decided) / len(pairs) if pairs else None,
        decided_accuracy=sum(1 for p, h in both if p == h) / len(both) if both else None,
    )


def longer_wins(lengths: tuple[int, int]) -> str:
    """The "longer wins" baseline: the longer output wins; equal lengths are a tie."""
    first, second = lengths
    return FIRST if first > second else SECOND if second > first else TIE


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return math.fsum(present) / len(present) if present else None


def random_baseline(human: Sequence[str], seeds: int = RANDOM_SEEDS) -> MethodScore:
    """A coin flip between the two outputs per pair (it never says TIE, like a forced-choice judge),
    scored per seed and averaged over ``seeds`` seeded RNGs so the figure is reproducible."""
    runs = []
    for seed in range(seeds):
        rng = random.Random(seed)  # noqa: S311 - a reproducible baseline, not security
        runs.append(score_labels("random", [rng.choice((FIRST, SECOND)) for _ in human], human))
    return MethodScore(
        name=f"random ({seeds} seeds)",
        pairs=len(human),
        agreement=_mean([r.agreement for r in runs]),
        kappa=_mean([r.kappa for r in runs]),
        coverage=_mean([r.coverage for r in runs]),
        decided_accuracy=_mean([r.decided_accuracy for r in runs]),
    )


@dataclass
class EvaluateReport:
    results: list[PairResult] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return sum(1 for r in self.results if r.outcome == "error")

    @property
    def rejected(self) -> int:
        return sum(1 for r in self.results if r.outcome == "rejected")

    @property
    def not_judged(self) -> list[PairResult]:
        """The rows of pairs that were not judged (rejected input, an error: ``OutcomeEntry.judged``)."""
        return [r for r in self.results if not _judged(r)]

    @property
    def failed(self) -> bool:
        """Some pair was not judged: the command exits non-zero."""
        return bool(self.not_judged)

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
    def kappa_estimate(self) -> KappaEstimate | None:
        """Kappa with its 95% interval: on a set of a hundred pairs the point value alone overstates
        what is known (see ``agents.stats.kappa_interval`` for the method and its limits)."""
        judge, human = self.judge_labels()
        return kappa_interval(judge, human)

    @property
    def flip_rate(self) -> float | None:
        return flip_rate(w for r in self.results for w in r.primary_winners)

    @property
    def position_a_rate(self) -> float | None:
        return position_a_win_rate(w for r in self.results for w in r.raw_winners)

    def judge_score(self) -> MethodScore:
        """The judge on the labelled pairs, in the same terms as the baselines."""
        judge, human = self.judge_labels()
        base = score_labels("judge", judge, human)
        labelled = self.labelled
        escalated = sum(1 for r in labelled if _escalated(r)) / len(labelled) if labelled else None
        return MethodScore(
            name=base.name,
            pairs=base.pairs,
            agreement=base.agreement,
            kappa=base.kappa,
            coverage=base.coverage,
            decided_accuracy=base.decided_accuracy,
            escalated=escalated,
            flip_rate=flip_rate(w for r in labelled for w in r.primary_winners),
        )

    def baseline_scores(self, seeds: int = RANDOM_SEEDS) -> list[MethodScore]:
        """ "Longer wins", a seeded coin flip and "always TIE", on exactly the judge's labelled pairs."""
        _, human = self.judge_labels()
        lengths = [r.lengths for r in self.labelled]
        longer = [longer_wins(n) if n is not None else TIE for n in lengths]
        return [
            score_labels("longer wins", longer, human),
            random_baseline(human, seeds),
            score_labels("always TIE", [TIE] * len(human), human),
        ]


async def run_evaluate(
    settings: Settings,
    path: Path,
    *,
    out_path: Path | None,
    console: Console,
    judge: Judge | None = None,
    panel: JudgePanel | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    baselines: bool | None = None,
    fresh: bool = False,
    quiet: bool = False,
) -> EvaluateReport:
    """Judge every pair in ``path`` and print the report: a line per pair (its winner and why; not with
    ``quiet``), then the totals. ``baselines`` (default: on when the file has human labels) adds the
    judge-versus-baselines table.

    Each pair's row is appended to ``out_path`` as it is decided; pairs it already holds are not judged
    again (``fresh``: start it over), and the report covers every pair of ``path``, earlier rows included.
    """
    with _letters_said_per_pair():
        return await _judge_and_print(
            settings, path, out_path, console, judge, panel, concurrency, baselines=baselines, fresh=fresh, quiet=quiet
        )


#: The worker's pipeline logs each dead letter for operators; evaluate says the same in its own lines.
_PIPELINE_LOG = "pairjudge.streams.worker.pipeline"


def _is_letter_log(record: logging.LogRecord) -> bool:  # a logging filter: False drops the record
    return not str(record.msg).startswith("dead-lettered ")


@contextlib.contextmanager
def _letters_said_per_pair() -> Iterator[None]:
    """Keep the pipeline's "dead-lettered ... from None" log lines off the terminal while evaluate runs:
    there is no topic to name, and each pair's line (or the failure list) already says why."""
    logger = logging.getLogger(_PIPELINE_LOG)
    logger.addFilter(_is_letter_log)
    try:
        yield
    finally:
        logger.removeFilter(_is_letter_log)


async def _judge_and_print(
    settings: Settings,
    path: Path,
    out_path: Path | None,
    console: Console,
    judge: Judge | None,
    panel: JudgePanel | None,
    concurrency: int,
    *,
    baselines: bool | None,
    fresh: bool,
    quiet: bool,
) -> EvaluateReport:
    async with Evaluator(settings, judge=judge, panel=panel) as evaluator:
        run = evaluator.compare_file(path, out=out_path, concurrency=concurrency, fresh=fresh)
        await run.prepare()
        _print_resume(console, run)
        # A live bar on a terminal (a long file otherwise shows no sign of life); nothing when piped.
        progress = Progress(
            TextColumn("judging"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
            disable=not console.is_terminal,
        )
        task = progress.add_task("pairs", total=run.total, completed=run.already)
        with progress:
            async for _ in run:
                progress.advance(task)
        report = EvaluateReport(results=run.results())
        if not quiet:
            print_pairs(console, report)
        print_report(console, report, evaluator.judge)
    print_failures(console, report, shown=10 if quiet else 0)
    print_capped(console, report)
    if (baselines is None or baselines) and report.labelled:
        print_baselines(console, report)
    return report


def _print_resume(console: Console, run: FileRun) -> None:
    """Say what an earlier run left, so a resumed report is never mistaken for a fresh one."""
    if run.dropped_bytes:
        console.print(f"dropped a partial last line ({run.dropped_bytes} bytes) from {run.out}: a run was cut off")
    if run.already:
        console.print(f"resuming: {run.already} of {run.total} already decided (in {run.out})", markup=False)
    if run.duplicates:
        console.print(f"{run.duplicates} input line(s) repeat an earlier pair id: each pair is judged once")
    if run.foreign:
        console.print(f"{run.out} also holds {run.foreign} row(s) for pairs not in this file: kept, not reported")


#: Widths of the per-pair lines: a pair id longer than this is cut, and so is the why.
PAIR_ID_CHARS, WHY_CHARS = 28, 90


def pair_line(row: PairResult) -> tuple[str, str, str]:
    """(pair id, winner in plain words, why) for one pair's line."""
    if row.outcome == "verdict":
        if row.winner == TIE:
            winner = "tie"
        elif row.winner_role and row.winner and row.winner != row.winner_role:
            winner = f"{row.winner_role} ({row.winner})"
        else:
            winner = row.winner_role or row.winner or "?"
        why = DECIDED_BY_WORDS.get(row.decided_by or "", row.decided_by or "")
        if row.confidence is not None and row.decided_by in ("primary", "tiebreak"):
            why += f" (confidence {row.confidence:.2f})"
        return row.pair_id, winner, why
    if row.outcome == "review":
        return row.pair_id, "needs review", reason_words(row.reason)
    if row.outcome == "tiebreak":
        return row.pair_id, "tie-break", reason_words(row.reason)
    what = "not judged" if row.outcome == "rejected" else "error"
    why = row.detail or reason_words(row.reason)
    return row.pair_id, what, f"{why} ({row.reason})" if row.detail and row.reason else why


def print_pairs(console: Console, report: EvaluateReport) -> None:
    """One line per pair, in the file's order: which output won, in plain words, and why (cut to fit a line;
    ``--out`` holds every field)."""
    if not report.results:
        return
    lines = [pair_line(r) for r in report.results]
    id_width = min(PAIR_ID_CHARS, max(len(pid) for pid, _, _ in lines))
    winner_width = max(len(w) for _, w, _ in lines)
    for pair_id, winner, why in lines:
        console.print(
            f"{shorten(pair_id, id_width):<{id_width}}  {winner:<{winner_width}}  {shorten(why, WHY_CHARS)}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


def print_failures(console: Console, report: EvaluateReport, shown: int = 10) -> None:
    """Name the pairs that were not judged, by reason, so a non-zero exit is never a mystery (``shown``: how
    many are listed one by one; 0 when the per-pair lines above already named them)."""
    failed = report.not_judged
    if not failed:
        return
    by_reason: dict[str, int] = {}
    for r in failed:
        key = reason_words(r.reason) or r.outcome
        by_reason[key] = by_reason.get(key, 0) + 1
    console.print(f"[bold red]{len(failed)} pair(s) not judged[/] (each is in --out with its reason):")
    for key, count in sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0])):
        console.print(f"  {count} {key}", markup=False, highlight=False)
    for r in failed[:shown]:
        console.print(f"  {r.pair_id}: {r.reason}" + (f" - {r.detail}" if r.detail else ""), markup=False)


def print_capped(console: Console, report: EvaluateReport) -> None:
    """Say how many pairs a spending cap held back unjudged (``policy.spend_*``), so a cheap run is never
    mistaken for a judged one."""
    capped = [r for r in report.results if r.reason == "spend_capped"]
    if capped:
        console.print(
            f"{len(capped)} pair(s) met a spending cap and were not judged (reason spend_capped; policy.spend_*): "
            "rerun them with a new --out once the hour has turned or the cap is raised",
            markup=False,
        )


def _judged(row: PairResult) -> bool:
    entry = entry_for_row(row.outcome)
    return entry is None or entry.judged  # a row of no known kind is not ours to call a failure


def _escalated(row: PairResult) -> bool:
    entry = entry_for_row(row.outcome)
    return entry is None or entry.escalated


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


#: Who settled a pair, in the words of the totals (``DecidedBy``).
_DECIDED_BY_WORDS: dict[str, str] = {
    "primary": "by the judge, both orders agreeing",
    "tiebreak": "by the tie-break",
    "human": "by a person",
    "rule": "by a rule, without asking the judge",
}
#: Below this many human labels, kappa is a number with no interval worth showing (the drift audit's minimum).
KAPPA_MIN_LABELS = AuditSettings().min_labels


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _count_words(row: PairResult) -> str:
    entry = entry_for_row(row.outcome)
    what = entry.count_label if entry is not None else row.outcome
    return f"{what} {_DECIDED_BY_WORDS.get(row.decided_by, row.decided_by)}" if row.decided_by else what


def print_report(console: Console, report: EvaluateReport, judge: Judge) -> None:
    outcomes: dict[str, int] = {}
    for r in report.results:
        key = _count_words(r)
        outcomes[key] = outcomes.get(key, 0) + 1
    who = judge.identity
    # The title on a line of its own: as a table title it would wrap to the narrow table's width.
    console.print(f"[bold]totals[/bold] judge {who.provider}/{who.model}" + (" (heuristic)" if who.heuristic else ""))
    table = Table()
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("pairs", str(len(report.results)))
    for key in sorted(outcomes):
        table.add_row(f"  {key}", str(outcomes[key]))
    table.add_row("changed its pick when the two were swapped", _pct(report.flip_rate))
    table.add_row("picked whichever came first", _pct(report.position_a_rate))
    labelled = len(report.labelled)
    table.add_row("human-labelled pairs", str(labelled))
    table.add_row("agreement with people", _pct(report.agreement))
    est = report.kappa_estimate
    table.add_row("Cohen's kappa (agreement beyond chance)", _fmt(report.kappa))
    if est is None:
        shown = "n/a"
    elif labelled < KAPPA_MIN_LABELS:
        # An interval from a handful of labels (often 1.00 to 1.00) reads as certainty it is not.
        shown = f"not enough labels yet: {labelled} of the {KAPPA_MIN_LABELS} needed"
    elif est.high - est.low < 0.005:
        shown = "cannot be measured (every resample the same)"
    else:
        shown = f"{est.low:.3f} to {est.high:.3f}"
    table.add_row("  its 95% interval", shown)
    console.print(table)


#: (row label, value, judge only): escalation and flips exist only for a judge that runs both orders.
_ROWS: tuple[tuple[str, Callable[[MethodScore], float | None], bool], ...] = (
    ("agreement", lambda m: m.agreement, False),
    ("Cohen's kappa", lambda m: m.kappa, False),
    ("coverage", lambda m: m.coverage, False),
    ("accuracy when decided", lambda m: m.decided_accuracy, False),
    ("escalated to review", lambda m: m.escalated, True),
    ("position-flip rate", lambda m: m.flip_rate, True),
)


def print_baselines(console: Console, report: EvaluateReport, seeds: int = RANDOM_SEEDS) -> None:
    """The judge beside simple baselines on the same labelled pairs: a judge is only worth running if
    it beats "pick the longer one" and a coin flip on kappa."""
    judge = report.judge_score()
    methods = [judge, *report.baseline_scores(seeds)]
    _, human = report.judge_labels()
    ties = sum(1 for h in human if h == TIE)
    table = Table(
        title=f"judge vs baselines: {judge.pairs} human-labelled pairs, {ties} of them human ties",
        caption=(
            "coverage: share decided without review (undecided counts as TIE). accuracy when decided: "
            "pairs the method decided and the humans did not call a tie. longer wins: more characters "
            "wins, equal length is TIE. random: a fair coin between the two outputs, mean over the seeds."
        ),
    )
    table.add_column("measure")
    for m in methods:
        table.add_column(m.name, justify="right")
    for label, get, judge_only in _ROWS:
        table.add_row(label, *("-" if judge_only and m is not judge else _fmt(get(m)) for m in methods))
    console.print(table)
