"""What the review pages show: the template contexts built from the queue's items, the live controls, the
drift audit's and the scoreboards' feeds, and the templates that render them.

Reads only: no route, no write and no session here (those, and the guard every write route goes through,
are ``streams.review.web``'s). What a page never shows is as deliberate as what it shows: the judge's
verdict, confidence and justification stay out of every context (seed 000, against anchoring), and every
piece of model or user text is left for Jinja2's autoescaping.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal
from urllib.parse import urlencode

import jinja2
from markupsafe import Markup
from starlette.requests import Request
from starlette.templating import Jinja2Templates

from pairjudge.agents.prompt_blocks import interleave
from pairjudge.agents.tool_views import call_view, definition_view, message_views
from pairjudge.schemas import (
    AuditSnapshot,
    CandidatePair,
    ControlUpdate,
    HeadToHeadRubric,
    Message,
    PairwiseRubric,
    ToneStyleRubric,
    ToolCall,
)
from pairjudge.schemas.audit import ThresholdUpdate
from pairjudge.schemas.kinds import CHOICE_KEYS
from pairjudge.schemas.kinds import CONTROLS as CONTROL_SPECS
from pairjudge.schemas.scores import ScoreSnapshot
from pairjudge.streams.config.oversight import AuditSettings
from pairjudge.streams.review.controls import control_rows
from pairjudge.streams.review.kafka import AuditFeed, ScoresFeed
from pairjudge.streams.review.store import Filters, Item
from pairjudge.streams.scores.charts import evidence_chart, strengths_chart, win_rate_chart
from pairjudge.streams.scores.plain import (
    GLOSSARY,
    GLOSSARY_URL,
    agreement_guard_text,
    anchor,
    estimate,
    interval,
    kappa,
    pct,
    plural,
    reason_text,
    series_name,
)
from pairjudge.streams.scores.read_model import snapshot_gate
from pairjudge.streams.scores.view import BasisPanel, BoardView, GateView, board_view, min_labels_of

#: Rubric kinds whose reviewers may call a tie (seed 000, tone and style, always names a winner).
TIE_KINDS = frozenset({"head_to_head", "pairwise"})
#: The controls the operators' page can set (docs/design.md §2), with the kind of value each takes: every live
#: control key of the registry but the kappa guard, which has its own resume button.
CONTROLS: dict[str, str] = {key: spec.value for key, spec in CONTROL_SPECS.items() if spec.on_form}


def templates() -> Jinja2Templates:
    """The pages' templates (package data), autoescaped, failing on any name a context lacks."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pairjudge.streams.review", "templates"),
        autoescape=True,  # every {{ }} is escaped; nothing in these templates is marked safe
        undefined=jinja2.StrictUndefined,
    )
    return Jinja2Templates(env=env)


def filters_of(request: Request) -> Filters:
    """The queue filters a page's query string asks for."""
    q = request.query_params
    return Filters(
        experiment=q.get("experiment") or None, rubric_kind=q.get("rubric_kind") or None, reason=q.get("reason") or None
    )


def filter_query(filters: Filters) -> str:
    """``filters`` as the query string that asks for them again."""
    values = {
        k: v
        for k, v in (
            ("experiment", filters.experiment),
            ("rubric_kind", filters.rubric_kind),
            ("reason", filters.reason),
        )
        if v
    }
    return urlencode(values)


def _rubric_view(item: Item) -> dict[str, Any]:
    """What the reviewer needs of the rubric: the guide and audience, or the criteria. Never the verdict."""
    rubric = item.request.pair.rubric
    if isinstance(rubric, ToneStyleRubric):
        return {
            "kind": "tone_style",
            "style_guide": rubric.style_guide,
            "audience": rubric.audience,
            "forbidden": list(rubric.forbidden_terms),
            "required": list(rubric.required_terms),
        }
    if isinstance(rubric, HeadToHeadRubric):
        return {
            "kind": "head_to_head",
            "criteria": [(c.name, c.description) for c in rubric.criteria],
            "constraints": rubric.constraints,
        }
    if isinstance(rubric, PairwiseRubric):
        return {"kind": "pairwise", "criteria": [(c, "") for c in rubric.criteria]}
    return {"kind": "named", "name": getattr(rubric, "name", "")}


def _transcript(pair: CandidatePair, candidate_id: str) -> list[tuple[str, str]]:
    """A transcript comparison's candidate, turn by turn up to its last reply (shown as its output)."""
    c = pair.candidate(candidate_id)
    history = tuple((m.role, m.content) for m in pair.task.history)
    return list(interleave(history, c.turns, pair.task.question, c.output)[:-1])


def _shown(role: str, text: str) -> tuple[str, str]:
    """A turn for the page: a tool call or result (one JSON line, ``agents.tool_views``) indented for people."""
    if role in ("tool", "tool_call"):
        return role.replace("_", " "), json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    return role, text


def _turns(messages: Sequence[Message]) -> list[tuple[str, str]]:
    return [_shown(role, text) for m in messages for role, text in message_views(m)]


def _calls(calls: Sequence[ToolCall]) -> list[str]:
    return [_shown("tool_call", call_view(c))[1] for c in calls]


def item_context(item: Item | None) -> dict[str, Any]:
    """The claimed item as the queue page shows it: the task, the two outputs in the order drawn, the rubric."""
    if item is None:
        return {"item": None}
    pair = item.request.pair
    transcript = pair.is_transcript
    return {
        "item": {
            "id": item.id,
            "pair_id": item.pair_id,
            "reason": item.reason,
            "reason_text": reason_text(item.reason),
            "audit": item.audit,
            "experiment": item.experiment,
            "task": pair.task.question,
            "context": pair.task.context,
            # A conversation (docs/guides/conversations.md): the turns before the last user turn, in order
            # with their roles; a transcript comparison shows each candidate's whole conversation instead.
            "transcript": transcript,
            "history": [] if transcript else _turns(pair.task.history),
            # Tools (schema version 3, docs/guides/tool-calls.md): what was offered, the calls and results
            # after the last user turn, and each output's own calls; all escaped like any text.
            "tools": [_shown("tool", definition_view(t))[1] for t in pair.task.tools],
            "after": _turns(pair.task.after_question),
            "left_calls": _calls(pair.candidate(item.left).tool_calls),
            "right_calls": _calls(pair.candidate(item.right).tool_calls),
            "left_turns": _transcript(pair, item.left) if transcript else [],
            "right_turns": _transcript(pair, item.right) if transcript else [],
            "rubric": _rubric_view(item),
            "left": pair.candidate(item.left).output,
            "right": pair.candidate(item.right).output,
            "allow_tie": item.rubric_kind in TIE_KINDS,
            "claim_expires": item.claim_expires,
        }
    }


def controls_context(configured: object, live: object | None, overrides: Mapping[str, ControlUpdate]) -> dict[str, Any]:
    """The live controls form's rows (``CONTROLS``): each key's configured and live value, and who set it."""
    return {
        "controls": CONTROLS,
        "choices": CHOICE_KEYS,
        "configured": {k: getattr(configured, k) for k in CONTROLS},
        "live": {k: getattr(live, k) for k in CONTROLS} if live is not None else None,
        "set_by": {k: f"{u.updated_by} at {u.updated_at:%Y-%m-%d %H:%M:%S} UTC" for k, u in overrides.items()},
        "control_rows": control_rows(configured, live, overrides),
    }


def guard_context(audit: AuditSettings) -> dict[str, Any]:
    """The kappa guard as configured here (the workers run with the same settings in a deployment)."""
    return {
        "mode": audit.guard_mode,
        "kappa_min": audit.kappa_min,
        "ratio": audit.relative_kappa_ratio,
        "min_human_pairs": audit.min_human_pairs,
    }


def _fmt(value: float | None, pattern: str = "{:.2f}") -> str:
    return "n/a" if value is None else pattern.format(value)


def agreement_text(share: float | None, labels: int) -> str:
    """Agreement as the count it is: "10 of 12 labels (83%)"."""
    if share is None or labels == 0:
        return "no labels yet"
    return f"{round(share * labels):,} of {plural(labels, 'label')} ({pct(share, 0)})"


#: The audit's minimum of labels for a kappa, when the caller passes none.
_MIN_LABELS = AuditSettings().min_labels


def kappa_guard_text(snap: AuditSnapshot) -> str:
    """The kappa guard's floor as the audit applied it (its note says when the relative one fell back)."""
    if snap.guard_mode is None:
        return "kappa guard: n/a"
    if snap.guard_mode == "relative" and snap.guard_note is None:
        return f"kappa guard: floor {_fmt(snap.guard_kappa_min, '{:.3f}')}, relative to people's agreement"
    return f"kappa guard: floor {_fmt(snap.guard_kappa_min)}"


def series_rows(feed: AuditFeed | None, min_labels: int = _MIN_LABELS) -> list[dict[str, str]]:
    """Per series, its latest window: the judge's kappa against people beside the human ceiling (people
    against each other on audit pairs labelled twice), and the guard's floor as the audit applied it."""
    latest = feed.latest if feed is not None else {}
    rows = []
    for key, snap in sorted(latest.items()):
        if snap.guard_mode is None:
            guard = "n/a"
        elif snap.guard_mode == "relative" and snap.guard_note is None:
            guard = f"relative: floor {_fmt(snap.guard_kappa_min, '{:.3f}')}"
        else:
            guard = f"{snap.guard_mode}: floor {_fmt(snap.guard_kappa_min, '{:g}')}"
        rows.append(
            {
                "series": key,
                "name": series_name(snap.series_info, key),
                "window": f"{snap.window_start:%d %b %H:%M} UTC" + ("" if snap.final else ", open"),
                "labels": str(snap.human_labels),
                "kappa": kappa(snap.cohen_kappa, None, None, snap.human_labels, min_labels),
                "human_pairs": str(snap.human_pairs),
                "human_agreement": _fmt(snap.human_agreement, "{:.0%}"),
                "human_kappa": _fmt(snap.human_kappa),
                "guard": guard,
                "note": snap.guard_note or "",
            }
        )
    return rows


#: The deciding stages in plain words, short enough for a table cell (the report's ``STAGE_NAMES``, shortened).
STAGE_WORDS = {"primary": "judge alone (both orders agreeing)", "tiebreak": "tie-break"}


def by_stage(snap: AuditSnapshot) -> list[dict[str, str]]:
    """Each deciding stage's agreement with people over the series' labels so far (``AuditSnapshot.stages``, all
    windows together), shown from the audit's minimum of labels, and whether the tie-break is switched off."""
    rows = []
    for row in snap.stages:
        name = STAGE_WORDS.get(row.stage, row.stage) + (f", tier {row.tier}" if row.tier else "")
        shown = f"{pct(row.agreement, 0)} ({interval(row.low, row.high, digits=0)})"
        text = estimate(shown, row.labels, row.min_labels) if row.labels else "no labels yet"
        if row.stage == "tiebreak" and snap.tiebreak_off:
            text += "; switched off, its flips go to people"
        rows.append({"stage": row.stage, "name": name, "text": text})
    return rows


def tiebreak_off_rows(records: Mapping[str, ThresholdUpdate], feed: AuditFeed | None) -> list[dict[str, str]]:
    """The series whose tie-break the audit switched off (the thresholds topic's latest record of each), with why
    and when, for the operators' page; the figures from the series' latest snapshot when it has them."""
    latest = feed.latest if feed is not None else {}
    rows = []
    for key, record in sorted(records.items()):
        if not record.switched_off:
            continue
        snap = latest.get(key)
        tb = next((r for r in snap.stages if r.stage == "tiebreak"), None) if snap is not None else None
        why = (
            f"On {plural(record.labels, 'label')}, its decisions were shown to agree with people less than "
            f"{pct(record.target, 0)} of the time, and at no confidence level do they reach it"
        )
        if tb is not None and tb.agreement is not None:
            why += f" ({tb.agreeing:,} of {plural(tb.labels, 'label')} agreed: {pct(tb.agreement, 0)}"
            why += f", 95% interval {interval(tb.low, tb.high, digits=0)})"
        rows.append(
            {
                "series": key,
                "name": series_name(snap.series_info if snap is not None else None, key),
                "since": f"{record.updated_at:%Y-%m-%d %H:%M:%S} UTC",
                "why": why + ". Its flips go to people for review.",
            }
        )
    return rows


def tiebreak_on_rows(records: Mapping[str, ThresholdUpdate], feed: AuditFeed | None) -> list[dict[str, str]]:
    """The series whose tie-break a person switched back on (and the audit has not switched off again since)."""
    latest = feed.latest if feed is not None else {}
    return [
        {
            "series": key,
            "name": series_name(latest[key].series_info if key in latest else None, key),
            "by": record.switched_on_by,
            "at": f"{record.updated_at:%Y-%m-%d %H:%M:%S} UTC",
        }
        for key, record in sorted(records.items())
        if record.switched_on_by and not record.switched_off
    ]


def audit_context(feed: AuditFeed | None, scores: ScoresFeed | None, settings: AuditSettings) -> dict[str, Any]:
    """The audit view's figures: each series' latest window as the drift audit published it (pairs, the
    labels on the judge's verdicts, agreement and kappa), and each experiment's two gates.

    Every figure says when it was computed: the series' snapshots and the scoreboards are published apart,
    so two of them read at one moment may count different labels; each row carries its own time."""
    latest = feed.latest if feed is not None else {}
    rows = []
    for key, snap in sorted(latest.items()):
        rows.append(
            {
                "series": key,
                "name": series_name(snap.series_info, key),
                "window": f"{snap.window_start:%d %b %H:%M} UTC" + ("" if snap.final else ", open"),
                "pairs": str(snap.pairs),
                "labels": str(snap.human_labels),
                "human_decided": str(snap.human_decided),
                "agreement": agreement_text(snap.agreement, snap.human_labels),
                "kappa": kappa(
                    snap.cohen_kappa, snap.kappa_low, snap.kappa_high, snap.human_labels, settings.min_labels
                ),
                "tiebreak_rate": _fmt(snap.tiebreak_rate, "{:.0%}"),
                "by_stage": by_stage(snap),
                "kappa_guard": kappa_guard_text(snap),
                "guard_note": snap.guard_note or "",
                "agreement_guard": agreement_guard_text(snap),
                "published": f"{snap.published_at:%H:%M:%S} UTC",
            }
        )
    gates = []
    for _, board in sorted((scores.latest if scores is not None else {}).items()):
        view = board_view(board)
        # The gates' decisions and reasons as the read API and `pairjudge gate` give them (one function).
        human, judge = (snapshot_gate(board, board.experiment, basis, None) for basis in ("human", "judge"))
        gates.append(
            {
                "experiment": board.experiment,
                "human": f"{human.decision}: {human.reason}"
                if board.human_gate is not None
                else view.human.missing or "n/a",
                "judge": f"{judge.decision}: {judge.reason}",
                "human_rate": view.human.headline,
                "judge_rate": view.judge.headline,
                "as_of": view.as_of,
            }
        )
    return {
        "series": rows,
        "total_labels": sum(s.human_labels for s in latest.values()),
        "total_decided": sum(s.human_decided for s in latest.values()),
        "total_pairs": sum(s.pairs for s in latest.values()),
        "gates": gates,
        "min_labels": settings.min_labels,
        "kappa_min": settings.kappa_min,
        "glossary": GLOSSARY_URL,
    }


def _gates_answered(view: BoardView, snap: ScoreSnapshot) -> BoardView:
    """The board with each basis's gate as ``gate_answer`` gives it: the decision the read API returns and
    ``pairjudge gate`` exits with, in the same words."""

    def answered(panel: BasisPanel, basis: Literal["human", "judge"]) -> BasisPanel:
        if panel.gate is None:
            return panel
        answer = snapshot_gate(snap, snap.experiment, basis, None)
        return replace(panel, gate=GateView(answer.decision, answer.reason, answer.detail))

    return replace(view, human=answered(view.human, "human"), judge=answered(view.judge, "judge"))


def score_boards(latest: Mapping[str, ScoreSnapshot]) -> list[dict[str, Any]]:
    """The scores page's boards, by experiment: the view (``streams.scores.view``, plain text the
    template escapes) and the charts."""
    # Safe by construction (streams.scores.charts escapes every text it draws; the rest are formatted numbers).
    return [
        {
            "snap": snap,
            "view": _gates_answered(board_view(snap), snap),
            "win_rate": Markup(win_rate_chart(snap.history, min_labels_of(snap))),  # noqa: S704
            "evidence": Markup(evidence_chart(snap.history, snap.gate.threshold)),  # noqa: S704
            "strengths": Markup(strengths_chart(snap.strengths)),  # noqa: S704
        }
        for _, snap in sorted(latest.items())
    ]


def glossary_context() -> dict[str, Any]:
    """The glossary page: each term the pages use, its anchor and what it means (``streams.scores.plain``)."""
    return {"terms": [(anchor(term), term, meaning) for term, meaning in GLOSSARY.items()]}
