"""What a scoreboard shows, as formatted text: measured against people beside measured against the judge.

One view for both places a user reads a scoreboard: the review service's ``/scores`` page (a Jinja
template, autoescaped) and the scoreboard section of ``pairjudge report`` (HTML built by hand, every text
through ``html.escape``). This module only formats numbers and picks words (through ``streams.scores.plain``,
whose rules every page keeps: no raw e-value, no scientific notation, no estimate below its minimum of
labels); it emits no markup, so the escaping stays with whoever renders it.

The human basis ("measured against people") comes first: it is what people would decide and the default
basis of ``pairjudge gate``. Snapshots published before it existed (``human_basis``/``human_gate`` None)
show the judge basis and say so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pairjudge.agents.scores.human import stratum_words
from pairjudge.schemas.scores import (
    GateSnapshot,
    HumanBasisSnapshot,
    HumanGateSnapshot,
    ScoreSnapshot,
    TallySnapshot,
)
from pairjudge.streams.scores.plain import (
    DASH,
    enough,
    interval,
    labels_forecast,
    not_enough,
    pct,
    plural,
    progress,
    progress_text,
)

HUMAN_TITLE = "Measured against people"
JUDGE_TITLE = "Measured against the judge"
HUMAN_MEANING = (
    "The challenger's win rate as people would judge it (a tie counts half), estimated from every pair and "
    "the labels of the random checks; it stays right when the judge disagrees with people (a poor judge only "
    "makes it need more labels)."
)
JUDGE_MEANING = (
    "The challenger's share of the judge's own decisive verdicts: the judge's opinion, not people's "
    "(a judge that prefers the challenger's style promotes it whatever people think)."
)
NO_HUMAN_BASIS = (
    "Not in this snapshot: it was published before this measure existed. Only the judge's measure is shown."
)
#: The human basis's minimum of labels when a snapshot carries no gate to say it (ScoreSettings.human_min_labels).
DEFAULT_MIN_LABELS = 30


def level(alpha: float) -> str:
    """The confidence level of ``alpha``: 0.05 -> "95%"."""
    return f"{100 * (1 - alpha):g}%"


def count(n: int, one: str, many: str | None = None) -> str:
    return plural(n, one, many)


def span(low: float | None, high: float | None) -> str:
    """An interval in percent: "55.1% to 69.0%"; "–" when either end is missing."""
    return interval(low, high)


@dataclass(frozen=True, slots=True)
class Figure:
    label: str
    value: str


@dataclass(frozen=True, slots=True)
class GateView:
    #: "promote", "reject" or "continue" (a CSS class on the page).
    decision: str
    #: Why, e.g. "140 more human labels expected to be needed".
    reason: str
    #: How it decides, in one line.
    detail: str

    @property
    def text(self) -> str:
        """The decision and why: "continue: 140 more human labels expected to be needed"."""
        return f"{self.decision}: {self.reason}"


@dataclass(frozen=True, slots=True)
class BasisPanel:
    #: "human" or "judge" (a CSS class and an id on the page).
    key: str
    title: str
    meaning: str
    #: The rate, large ("–" while not estimable), and what it is a rate of.
    headline: str
    headline_note: str
    figures: tuple[Figure, ...]
    gate: GateView | None
    #: Set when the snapshot does not carry this basis: says so instead of the figures.
    missing: str | None = None


@dataclass(frozen=True, slots=True)
class SplitRow:
    """One line of the per-split table: a rubric or a traffic split (or all pairs), both bases."""

    name: str
    human_rate: str
    human_anytime: str
    human_labels: str
    human_judge: str
    judge_rate: str
    judge_counts: str


@dataclass(frozen=True, slots=True)
class StratumRow:
    stratum: str
    pairs: str
    labels: str
    rate: str
    lam: str
    #: The spread of person - judge in the stratum, and the audit share the labels recommend (Neyman).
    spread: str
    recommended: str


@dataclass(frozen=True, slots=True)
class BoardView:
    experiment: str
    human: BasisPanel
    judge: BasisPanel
    splits: tuple[SplitRow, ...]
    strata: tuple[StratumRow, ...]
    #: Whether the snapshot carries the human basis at all (the table's human columns are "–" otherwise).
    has_human: bool
    #: When the snapshot was computed and the labels it counts: "as of 19:42:10 UTC, 12 labels", so pages
    #: read at different moments say which moment each shows.
    as_of: str = ""


def min_labels_of(snap: ScoreSnapshot) -> int:
    return snap.human_gate.min_labels if snap.human_gate is not None else DEFAULT_MIN_LABELS


def human_gate_view(g: HumanGateSnapshot) -> GateView:
    """The gate's decision in words built from its numbers (not its internal reason text): below the minimum
    of labels it says how many there are; a forecast past any realistic count says no decision is in sight."""
    if g.decision == "promote":
        reason = "people prefer the challenger"
    elif g.decision == "reject":
        reason = "people do not prefer the challenger by the minimum margin"
    elif not enough(g.labels, g.min_labels):
        reason = not_enough(g.labels, g.min_labels)
    elif g.short_stratum is not None and g.min_stratum_labels is not None:
        # The stratum holding the most pairs that is short: the gate waits for it (every stratum must have its minimum).
        reason = (
            f"not enough labels yet in {stratum_words(g.short_stratum)}: "
            f"{g.short_stratum_labels or 0:,} of the {g.min_stratum_labels:,} needed"
        )
    else:
        reason = labels_forecast(g.labels_needed)
    return GateView(
        decision=g.decision,
        reason=reason,
        detail=(
            f"Promotes when the interval lies above 50%, rejects when it lies below {pct(0.5 + g.min_effect)}; "
            f"decides nothing below {count(g.min_labels, 'label')}"
            + (
                f", nor while any group of pairs (sure verdicts, unsure ones, reviews) has fewer than "
                f"{count(g.min_stratum_labels, 'label')}"
                if g.min_stratum_labels is not None
                else ""
            )
            + f". A decision once reached stays. A wrong promotion happens at most "
            f"{pct(g.alpha, 0)} of the time, however often this page is read. It never falls back to the judge. "
            + (
                "Labels that have not come are read at their worst (it assumes nothing about why they are missing)."
                if g.missing_labels == "worst_case"
                else "Labels that have not come are taken as missing at random."
            )
        ),
    )


def judge_gate_view(g: GateSnapshot) -> GateView:
    """The judge's gate with its evidence as a share of the way to a decision, never as a raw e-value."""
    to_promote = progress(_log(g.e_promote), g.threshold)
    to_reject = progress(_log(g.e_reject), g.threshold)
    if g.refused:
        why = f"will not decide: {g.refused}"
    elif g.decision == "promote":
        why = "the judge's verdicts give enough evidence that the challenger is better"
    elif g.decision == "reject":
        why = "the judge's verdicts give enough evidence that the challenger is not better by the minimum margin"
    elif to_promote >= to_reject:
        why = f"towards promoting: {progress_text(to_promote)}"
    else:
        why = f"towards rejecting: {progress_text(to_reject)}"
    return GateView(
        decision=g.decision,
        reason=why,
        detail=(
            f"Weighs the judge's wins and losses as they come. Towards promoting: {progress_text(to_promote)}; "
            f"towards rejecting: {progress_text(to_reject)} (a wrong call at most {pct(g.alpha, 0)} of the time, "
            f"minimum margin {pct(g.min_effect, 0)}). "
            "The judge's opinion, not people's."
        ),
    )


def _log(e: float) -> float | None:
    return math.log(e) if e > 0 and math.isfinite(e) else (math.inf if e == math.inf else None)


def human_panel(snap: ScoreSnapshot) -> BasisPanel:
    b, g = snap.human_basis, snap.human_gate
    gate = human_gate_view(g) if g is not None else None
    if b is None:
        return BasisPanel("human", HUMAN_TITLE, HUMAN_MEANING, DASH, "", (), gate, NO_HUMAN_BASIS)
    needed = min_labels_of(snap)
    labels = Figure("labels it rests on", f"{count(b.labels, 'label')} from people, over {count(b.pairs, 'pair')}")
    waiting = Figure(
        "labels still to come",
        f"{count(b.pending, 'random check')} waiting, {count(b.expired, 'random check')} never labelled",
    )
    if not enough(b.labels, needed) or b.rate is None:
        note = not_enough(b.labels, needed)
        return BasisPanel("human", HUMAN_TITLE, HUMAN_MEANING, DASH, note, (labels, waiting), gate)
    figures = [
        Figure(
            f"{level(b.alpha)} interval, right whenever it is read (the gate reads it)",
            span(b.anytime_low, b.anytime_high),
        ),
        Figure(f"{level(b.alpha)} interval for a single look", span(b.low, b.high)),
        labels,
        waiting,
        Figure("assuming the worst of labels still to come", span(b.worst_low, b.worst_high)),
        Figure("the judge on the same pairs", pct(b.judge_rate) + " (ties half)"),
    ]
    if b.unlabelled_share:
        figures.append(
            Figure(
                "pairs in groups with too few labels", f"{100 * b.unlabelled_share:.0f}% (counted at their whole range)"
            )
        )
    if snap.unweighted_labels:
        figures.append(Figure("left out", count(snap.unweighted_labels, "label") + " not drawn by the random checks"))
    return BasisPanel("human", HUMAN_TITLE, HUMAN_MEANING, pct(b.rate), "tie counts half", tuple(figures), gate)


def judge_panel(snap: ScoreSnapshot) -> BasisPanel:
    t, p = snap.overall, snap.human
    figures = [
        Figure("95% interval", span(t.low, t.high)),
        Figure(
            "decisive verdicts",
            f"{count(t.wins, 'win')}, {count(t.losses, 'loss', 'losses')} ({count(t.ties, 'tie')} left out)",
        ),
        Figure(
            "win rate after allowing for reply length",
            pct(snap.length_controlled_win_rate)
            if snap.length_controlled_win_rate is not None
            else "not enough decisive pairs yet",
        ),
        Figure(
            "pairs people decided instead of the judge (apart)",
            f"{count(p.wins, 'win')}, {count(p.losses, 'loss', 'losses')}, {count(p.ties, 'tie')}",
        ),
    ]
    note = "of the judge's decisive verdicts" if t.win_rate is not None else "no decisive verdicts yet"
    return BasisPanel(
        "judge", JUDGE_TITLE, JUDGE_MEANING, pct(t.win_rate), note, tuple(figures), judge_gate_view(snap.gate)
    )


def _split_row(name: str, t: TallySnapshot | None, h: HumanBasisSnapshot | None, needed: int) -> SplitRow:
    shown = h is not None and enough(h.labels, needed) and h.rate is not None
    return SplitRow(
        name=name,
        human_rate=pct(h.rate) if h and shown else DASH,
        human_anytime=(span(h.anytime_low, h.anytime_high) if shown else not_enough(h.labels, needed)) if h else DASH,
        human_labels=f"{h.labels:,}" if h else DASH,
        human_judge=pct(h.judge_rate) if h else DASH,
        judge_rate=(f"{pct(t.win_rate)} ({span(t.low, t.high)})" if t.win_rate is not None else DASH) if t else DASH,
        judge_counts=f"{t.wins:,}{DASH}{t.losses:,}{DASH}{t.ties:,}" if t else DASH,
    )


def _splits(
    kind: str, tallies: dict[str, TallySnapshot], human: dict[str, HumanBasisSnapshot], needed: int
) -> list[SplitRow]:
    return [_split_row(f"{kind} {k}", tallies.get(k), human.get(k), needed) for k in sorted({*tallies, *human})]


def board_view(snap: ScoreSnapshot) -> BoardView:
    needed = min_labels_of(snap)
    splits = [_split_row("all pairs", snap.overall, snap.human_basis, needed)]
    splits += _splits("rubric", snap.by_rubric, snap.human_basis_by_rubric, needed)
    splits += _splits("traffic", snap.by_traffic, snap.human_basis_by_traffic, needed)
    strata = tuple(
        StratumRow(
            s.stratum,
            f"{s.pairs:,}",
            f"{s.labels:,}",
            pct(s.rate) if s.rate is not None else "too few labels",
            DASH if s.lam is None else f"{s.lam:.2f}",
            DASH if s.rectifier_sd is None else f"{s.rectifier_sd:.3f}",
            DASH if s.recommended_share is None else pct(s.recommended_share),
        )
        for s in (snap.human_basis.strata if snap.human_basis else ())
    )
    labels = snap.human_basis.labels if snap.human_basis is not None else 0
    return BoardView(
        experiment=snap.experiment,
        human=human_panel(snap),
        judge=judge_panel(snap),
        splits=tuple(splits),
        strata=strata,
        has_human=snap.human_basis is not None,
        as_of=f"as of {snap.updated_at:%H:%M:%S} UTC, {count(labels, 'label')} from people",
    )
