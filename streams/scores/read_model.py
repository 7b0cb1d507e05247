"""The scoreboards, the gate and the audit as the read API returns them (``schemas.read_api``), built from the
snapshots the workers publish.

One function decides what the gate answers on a basis, :func:`gate_answer`: ``pairjudge gate`` exits with its
``exit_code``, the read API returns it, and the audit page shows its decision and reason. Its words come from
``streams.scores.view`` (the pages' own), so a person reading the page and a controller reading the API see
the same answer for the same snapshot.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from urllib.parse import quote

from pairjudge.schemas.audit import AuditSnapshot
from pairjudge.schemas.read_api import (
    API_VERSION,
    EXIT_CODES,
    AuditSeries,
    ExperimentSummary,
    GateAnswer,
    GateBasis,
    HumanBasis,
    Interval,
    JudgeBasis,
    Scoreboard,
    Split,
)
from pairjudge.schemas.scores import GateSnapshot, HumanBasisSnapshot, HumanGateSnapshot, ScoreSnapshot, TallySnapshot
from pairjudge.streams.scores.plain import enough, progress, series_name
from pairjudge.streams.scores.view import human_gate_view, judge_gate_view, min_labels_of

NO_DECISION = "no decision published yet"


def _finite_log(e: float) -> float | None:
    if e > 0 and math.isfinite(e):
        return math.log(e)
    return None


def _interval(low: float | None, high: float | None, level: float, kind: str) -> Interval | None:
    if low is None or high is None:
        return None
    return Interval.model_validate({"low": low, "high": high, "level": round(level, 6), "kind": kind})


def paused_text(paused_by: str) -> str:
    return (
        f"Automatic decisions are paused by the kappa guard ({paused_by or 'unknown'}); "
        "the judge basis decides again once a person resumes them."
    )


def gate_answer(
    experiment: str,
    basis: GateBasis,
    gate: GateSnapshot | None,
    human: HumanGateSnapshot | None,
    decided_at: datetime | None,
    *,
    paused_by: str | None = None,
) -> GateAnswer:
    """What the gate answers for ``experiment`` on ``basis``, from its latest published gates (None: none yet).

    The human basis never falls back to the judge and keeps deciding while the kappa guard holds automatic
    decisions; the judge basis refuses then (``paused_by``: who or what paused them), answering continue."""
    if basis == "human":
        if human is None:
            return GateAnswer(
                experiment=experiment, basis=basis, decision="continue", exit_code=2, reason=NO_DECISION, detail=""
            )
        view = human_gate_view(human)
        shown = enough(human.labels, human.min_labels)
        return GateAnswer(
            experiment=experiment,
            basis=basis,
            decision=human.decision,
            exit_code=EXIT_CODES[human.decision],
            reason=view.reason,
            detail=view.detail,
            rate=human.rate if shown else None,
            interval=_interval(human.low, human.high, 1 - human.alpha, "anytime") if shown else None,
            labels=human.labels,
            min_labels=human.min_labels,
            labels_needed=human.labels_needed if human.decision == "continue" else None,
            pending=human.pending,
            expired=human.expired,
            alpha=human.alpha,
            min_effect=human.min_effect,
            decided_at=decided_at,
        )
    if gate is None:
        return GateAnswer(
            experiment=experiment, basis=basis, decision="continue", exit_code=2, reason=NO_DECISION, detail=""
        )
    view = judge_gate_view(gate)
    log_promote, log_reject = _finite_log(gate.e_promote), _finite_log(gate.e_reject)
    to_promote = 1.0 if gate.e_promote == math.inf else progress(log_promote, gate.threshold)
    to_reject = 1.0 if gate.e_reject == math.inf else progress(log_reject, gate.threshold)
    refused = paused_text(paused_by) if paused_by is not None else gate.refused
    decision = "continue" if refused else gate.decision
    decisive = gate.wins + gate.losses
    return GateAnswer(
        experiment=experiment,
        basis=basis,
        decision=decision,
        exit_code=EXIT_CODES[decision],
        reason=f"will not decide: {refused}" if refused else view.reason,
        detail=view.detail,
        rate=gate.wins / decisive if decisive else None,
        labels=decisive,
        progress_share=max(to_promote, to_reject),
        leaning="promote" if to_promote >= to_reject else "reject",
        log_e_promote=log_promote,
        log_e_reject=log_reject,
        log_threshold=_finite_log(gate.threshold),
        refused=refused,
        alpha=gate.alpha,
        min_effect=gate.min_effect,
        decided_at=decided_at,
    )


def snapshot_gate(snap: ScoreSnapshot | None, experiment: str, basis: GateBasis, paused_by: str | None) -> GateAnswer:
    """The gate's answer from an experiment's latest scoreboard (None: none published yet)."""
    if snap is None:
        return gate_answer(experiment, basis, None, None, None, paused_by=paused_by)
    return gate_answer(experiment, basis, snap.gate, snap.human_gate, snap.updated_at, paused_by=paused_by)


def _human(b: HumanBasisSnapshot, min_labels: int, unweighted: int = 0) -> HumanBasis:
    shown = enough(b.labels, min_labels) and b.rate is not None
    level = 1 - b.alpha
    return HumanBasis(
        rate=b.rate if shown else None,
        anytime=_interval(b.anytime_low, b.anytime_high, level, "anytime") if shown else None,
        single_look=_interval(b.low, b.high, level, "single_look") if shown else None,
        worst_case=_interval(b.worst_low, b.worst_high, level, "worst_case") if shown else None,
        labels=b.labels,
        pairs=b.pairs,
        pending=b.pending,
        expired=b.expired,
        min_labels=min_labels,
        enough_labels=shown,
        judge_rate=b.judge_rate,
        unweighted_labels=unweighted,
    )


def _judge(t: TallySnapshot, length_controlled: float | None = None) -> JudgeBasis:
    return JudgeBasis(
        rate=t.win_rate,
        interval=_interval(t.low, t.high, 0.95, "wilson"),
        wins=t.wins,
        losses=t.losses,
        ties=t.ties,
        length_controlled_rate=length_controlled,
    )


def _splits(
    kind: str, tallies: Mapping[str, TallySnapshot], human: Mapping[str, HumanBasisSnapshot], min_labels: int
) -> list[Split]:
    return [
        Split.model_validate(
            {
                "kind": kind,
                "name": name,
                "human": _human(human[name], min_labels) if name in human else None,
                "judge": _judge(tallies[name]) if name in tallies else None,
            }
        )
        for name in sorted({*tallies, *human})
    ]


def scoreboard(snap: ScoreSnapshot, paused_by: str | None = None) -> Scoreboard:
    """An experiment's scoreboard on both bases, with both gates (human first) and the splits."""
    needed = min_labels_of(snap)
    human = _human(snap.human_basis, needed, snap.unweighted_labels) if snap.human_basis is not None else None
    return Scoreboard(
        experiment=snap.experiment,
        updated_at=snap.updated_at,
        human=human,
        judge=_judge(snap.overall, snap.length_controlled_win_rate),
        gates=[snapshot_gate(snap, snap.experiment, basis, paused_by) for basis in ("human", "judge")],
        splits=_splits("rubric", snap.by_rubric, snap.human_basis_by_rubric, needed)
        + _splits("traffic", snap.by_traffic, snap.human_basis_by_traffic, needed),
    )


def api_path(*parts: str) -> str:
    return "/".join([f"/api/{API_VERSION}", *(quote(p, safe="") for p in parts)])


def summary(snap: ScoreSnapshot) -> ExperimentSummary:
    b, t = snap.human_basis, snap.overall
    return ExperimentSummary(
        experiment=snap.experiment,
        updated_at=snap.updated_at,
        pairs=b.pairs if b is not None else t.wins + t.losses + t.ties,
        labels=b.labels if b is not None else 0,
        human_decision=snap.human_gate.decision if snap.human_gate is not None else None,
        judge_decision=snap.gate.decision,
        scoreboard=api_path("experiments", snap.experiment, "scoreboard"),
        gate=api_path("experiments", snap.experiment, "gate"),
    )


def audit_series(key: str, snap: AuditSnapshot) -> AuditSeries:
    level = snap.kappa_confidence if snap.kappa_confidence is not None else 0.95
    return AuditSeries(
        series=key,
        name=series_name(snap.series_info, key),
        window_start=snap.window_start,
        window_end=snap.window_end,
        final=snap.final,
        pairs=snap.pairs,
        human_labels=snap.human_labels,
        agreement=snap.agreement,
        cohen_kappa=snap.cohen_kappa,
        kappa_interval=_interval(snap.kappa_low, snap.kappa_high, level, "single_look"),
        human_pairs=snap.human_pairs,
        human_kappa=snap.human_kappa,
        guard_mode=snap.guard_mode,
        guard_kappa_min=snap.guard_kappa_min,
        guard_note=snap.guard_note,
        orders_agreed_labels=snap.orders_agreed_labels,
        orders_agreed_agreement=snap.orders_agreed_agreement,
        agreement_guard_floor=snap.agreement_guard_floor,
        agreement_guard_evidence=snap.agreement_guard_evidence,
        flip_rate=snap.flip_rate,
        tiebreak_rate=snap.tiebreak_rate,
        escalation_rate=snap.escalation_rate,
        published_at=snap.published_at,
    )
