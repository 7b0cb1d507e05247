"""What a scoreboard shows, as formatted text: the human basis and the judge basis side by side.

One view for both places a user reads a scoreboard: the review service's ``/scores`` page (a Jinja
template, autoescaped) and the scoreboard section of ``pairjudge report`` (HTML built by hand, every text
through ``html.escape``). This module only formats numbers and picks words; it emits no markup, so the
escaping stays with whoever renders it.

The human basis comes first: it is what people would decide and the default basis of ``pairjudge gate``.
Snapshots published before it existed (``human_basis``/``human_gate`` None) show the judge basis and say so.
"""

from __future__ import annotations

from dataclasses import dataclass

from pairjudge.schemas.scores import (
    GateSnapshot,
    HumanBasisSnapshot,
    HumanGateSnapshot,
    ScoreSnapshot,
    TallySnapshot,
)

HUMAN_MEANING = (
    "The challenger's win rate as people would judge it (a tie counts half), estimated from every final "
    "outcome and the human labels of the audit sample; it stays valid when the judge disagrees with people "
    "(a poor judge only makes it need more labels)."
)
JUDGE_MEANING = (
    "The challenger's share of the judge's decisive automatic verdicts: the judge's opinion, not people's "
    "(a judge that prefers the challenger's style promotes it whatever people think)."
)
NO_HUMAN_BASIS = "Not in this snapshot: it was published before the human basis existed. Only the judge basis is shown."
DASH = "–"


def pct(value: float | None) -> str:
    """0.6234 -> "62.3%"; None -> "–"."""
    return DASH if value is None else f"{100 * value:.1f}%"


def span(low: float | None, high: float | None) -> str:
    """An interval in percent: "55.1–69.0%"; "–" when either end is missing."""
    if low is None or high is None:
        return DASH
    return f"{100 * low:.1f}{DASH}{100 * high:.1f}%"


def level(alpha: float) -> str:
    """The confidence level of ``alpha``: 0.05 -> "95%"."""
    return f"{100 * (1 - alpha):g}%"


def count(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


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


def human_gate_view(g: HumanGateSnapshot) -> GateView:
    return GateView(
        decision=g.decision,
        reason=g.reason,
        detail=(
            f"Reads the anytime-valid interval: promotes when it lies above 50%, rejects when it lies below "
            f"{pct(0.5 + g.min_effect)}; decides nothing below {count(g.min_labels, 'label')} "
            f"(alpha {g.alpha:g}, minimum effect {g.min_effect:g}). It never falls back to the judge. "
            + (
                "Missing labels are read at their worst (assumes nothing about why they are missing)."
                if g.missing_labels == "worst_case"
                else "Missing labels are taken as missing at random."
            )
        ),
    )


def judge_gate_view(g: GateSnapshot) -> GateView:
    if g.refused:
        why = f"refused: {g.refused}"
    elif g.decision == "promote":
        why = f"the evidence for promotion ({g.e_promote:.3g}) reached {g.threshold:g}"
    elif g.decision == "reject":
        why = f"the evidence for rejection ({g.e_reject:.3g}) reached {g.threshold:g}"
    else:
        why = f"neither e-value has reached {g.threshold:g} yet"
    return GateView(
        decision=g.decision,
        reason=why,
        detail=(
            f"E-processes on the judge's wins and losses: evidence for promotion {g.e_promote:.3g}, for "
            f"rejection {g.e_reject:.3g}; either decides at {g.threshold:g} "
            f"(alpha {g.alpha:g}, minimum effect {g.min_effect:g}). The judge's opinion, not people's."
        ),
    )


def human_panel(snap: ScoreSnapshot) -> BasisPanel:
    title = "Human basis: what people would decide"
    b, g = snap.human_basis, snap.human_gate
    gate = human_gate_view(g) if g is not None else None
    if b is None:
        return BasisPanel("human", title, HUMAN_MEANING, DASH, "", (), gate, NO_HUMAN_BASIS)
    figures = [
        Figure(f"anytime-valid {level(b.alpha)} interval (the gate reads it)", span(b.anytime_low, b.anytime_high)),
        Figure(f"fixed-n {level(b.alpha)} interval (right at one look only)", span(b.low, b.high)),
        Figure("labels it rests on", f"{count(b.labels, 'human label')} over {count(b.pairs, 'pair')}"),
        Figure("pending", count(b.pending, "sample") + " awaiting a label"),
        Figure("expired", count(b.expired, "sample") + " whose label never came"),
        Figure(
            "assuming nothing about missing labels",
            span(b.worst_low, b.worst_high) + " (anytime; each missing label at its worst)",
        ),
        Figure("the judge on the same question", pct(b.judge_rate) + " (ties half, review pairs included)"),
        Figure(
            "pairs in strata with too few labels",
            DASH if b.unlabelled_share is None else f"{100 * b.unlabelled_share:.0f}% (taken at their whole range)",
        ),
    ]
    if snap.unweighted_labels:
        figures.append(
            Figure("left out", count(snap.unweighted_labels, "label") + " not drawn by the recorded sampling design")
        )
    note = "tie counts half" if b.rate is not None else "not enough labels to estimate yet"
    return BasisPanel("human", title, HUMAN_MEANING, pct(b.rate), note, tuple(figures), gate)


def judge_panel(snap: ScoreSnapshot) -> BasisPanel:
    t, p = snap.overall, snap.human
    figures = [
        Figure("Wilson 95% interval", span(t.low, t.high)),
        Figure(
            "decisive verdicts",
            f"{count(t.wins, 'win')}, {count(t.losses, 'loss', 'losses')} ({count(t.ties, 'tie')} left out)",
        ),
        Figure(
            "length-controlled win rate",
            f"{pct(snap.length_controlled_win_rate)} (log-odds per unit of log length ratio "
            f"{snap.length_coefficient or 0:.2f})"
            if snap.length_controlled_win_rate is not None
            else "not enough decisive pairs yet",
        ),
        Figure("escalations decided by people (apart)", f"{p.wins}{DASH}{p.losses}{DASH}{p.ties} (wins, losses, ties)"),
    ]
    note = "of decisive automatic verdicts" if t.win_rate is not None else "no decisive verdicts yet"
    return BasisPanel(
        "judge",
        "Judge basis: the judge's opinion, not people's",
        JUDGE_MEANING,
        pct(t.win_rate),
        note,
        tuple(figures),
        judge_gate_view(snap.gate),
    )


def _split_row(name: str, t: TallySnapshot | None, h: HumanBasisSnapshot | None) -> SplitRow:
    return SplitRow(
        name=name,
        human_rate=pct(h.rate) if h else DASH,
        human_anytime=span(h.anytime_low, h.anytime_high) if h else DASH,
        human_labels=f"{h.labels:,}" if h else DASH,
        human_judge=pct(h.judge_rate) if h else DASH,
        judge_rate=(f"{pct(t.win_rate)} ({span(t.low, t.high)})" if t.win_rate is not None else DASH) if t else DASH,
        judge_counts=f"{t.wins}{DASH}{t.losses}{DASH}{t.ties}" if t else DASH,
    )


def _splits(kind: str, tallies: dict[str, TallySnapshot], human: dict[str, HumanBasisSnapshot]) -> list[SplitRow]:
    return [_split_row(f"{kind} {k}", tallies.get(k), human.get(k)) for k in sorted({*tallies, *human})]


def board_view(snap: ScoreSnapshot) -> BoardView:
    splits = [_split_row("all pairs", snap.overall, snap.human_basis)]
    splits += _splits("rubric", snap.by_rubric, snap.human_basis_by_rubric)
    splits += _splits("traffic", snap.by_traffic, snap.human_basis_by_traffic)
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
    return BoardView(
        experiment=snap.experiment,
        human=human_panel(snap),
        judge=judge_panel(snap),
        splits=tuple(splits),
        strata=strata,
        has_human=snap.human_basis is not None,
    )
