"""The judging core pinned byte for byte on a varied set of pairs (issue 27: trimmed, not changed).

For every pair of ``pairjudge_dev.core_cases`` (every rubric kind, risk levels, conversations, hostile and
disguised outputs, the corners of ``agents.untrusted``), the pins in ``tests/data/core_golden.json`` are
sha256 digests, taken with the code before issue 27's trimming, of:

* ``prompts``: every rendered request, both orders, primary and tie-break, datamarked and not (messages,
  response schema, schema name);
* ``replies``: the offline judge's reply text to each of those requests;
* ``decision``: ``judge_pair`` with the offline judge and the default policy (the outcome, its audit copy,
  the calls, the facts and the evaluation), and the tie-break's decision when it asks for one (timestamps
  left out: they are the clock's);
* ``record``: the drift audit's ``DecisionRecord`` of each of those decisions (``agents.audit.record_for``),
  pinned apart so a deliberate change to the records re-pins them alone.

``validation`` pins what ``agents.validation`` makes of valid and invalid reply texts: the parsed reply
(its digest) or the exact re-ask feedback. A refactoring changes no pin. A deliberate change re-pins
with ``PAIRJUDGE_REPIN=1 pytest tests/unit/test_core_golden.py`` (which still fails once, so a re-pin
is never silent).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pairjudge.agents.audit import record_for
from pairjudge.agents.core import Decision, judge_pair, resolve_tiebreak
from pairjudge.agents.errors import InputRejected, InvalidReply, JudgeRejected
from pairjudge.agents.judge import JudgeIdentity, JudgeRequest, JudgeResponse
from pairjudge.agents.offline import OfflineJudge, judge_reply
from pairjudge.agents.pair_checks import resolve_rubric
from pairjudge.agents.policy import Policy
from pairjudge.agents.prompts import render_primary, render_tiebreak
from pairjudge.agents.validation import check_head_to_head, check_pairwise, check_tiebreak, parse_reply
from pairjudge.schemas import DEFAULT_TIEBREAK_WEIGHTS, SCHEMA_VERSION, CandidatePair, TieBreakRequest
from pairjudge.schemas.events import Order
from pairjudge.schemas.replies import HeadToHeadReply, PairwiseReply, Reply, TieBreakReply, ToneStyleReply
from pairjudge.schemas.rubric import Criterion, HeadToHeadRubric, PairwiseRubric
from pairjudge_dev.core_cases import CATALOG, varied_pairs
from pairjudge_dev.replies import h2h_reply, pairwise_reply, tiebreak_reply, tone_reply
from tests.fixtures.golden import current_or_repin, read_pins

# On one worker under xdist: the pairs are walked once (module fixtures), and only it may re-pin the file.
pytestmark = pytest.mark.xdist_group("core-golden")

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "core_golden.json"
ORDERS: tuple[Order, Order] = ("AB", "BA")
#: The clock's fields: every other byte of an outcome or record is pinned.
_CLOCK_FIELDS = frozenset({"decided_at", "requested_at", "labelled_at", "failed_at", "observed_at", "updated_at"})


def _digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


#: Fields added after the pins were made, dropped from the views while they hold their default (the judge
#: cascade's, issue 28: no tier outside a cascade), so the pins still check everything else unchanged. A
#: value other than the default stays in the view and changes the digest.
_LATER_FIELDS: dict[str, tuple[object, ...]] = {
    "tier": (None,),
    "judge_tier": (None,),
    "escalated_from": ((), []),
    # The pinned judge is unpriced: its decisions' spend is unknown (None), a decision without calls costs 0.
    "pair_cost_usd": (None, 0.0),
    "primary_cost_usd": (None,),
    # Schema version 3's tools (issue 37): a pair without tools holds them empty.
    "tools": ((), []),
    "tool_calls": ((), [], None),
    "tool_call_id": (None,),
    # Confidence from token probabilities (issue 41): the offline judge sends none, so its orderings, verdicts
    # and records hold these at their defaults.
    "token_probabilities": (None,),
    "token_confidence": (None,),
    "stated_confidence": (None,),
    "confidence_source": ("stated",),
}


def _without_later_cost(view: dict[str, Any]) -> dict[str, Any]:
    """A decision's facts or record without its later ``cost_usd`` (calls and orderings had theirs pinned)."""
    return {k: v for k, v in view.items() if not (k == "cost_usd" and v in (None, 0.0))}


#: The version the pins' events were written at. Each outcome carries the version this code writes, and a
#: version bump (3, for tools) changes that number and nothing else in them: the views show it as pinned when
#: it is the version written now (any other version still changes the digest). test_poison_events pins
#: which version is written.
_PINNED_VERSION = 2


def _scrub(value: Any, later: dict[str, tuple[object, ...]] = _LATER_FIELDS) -> Any:
    """A JSON-mode dump (or a dataclass's ``asdict``) without the clock's fields and ``later`` defaults."""
    if isinstance(value, dict):
        return {
            k: None
            if k in _CLOCK_FIELDS
            else (_PINNED_VERSION if k == "schema_version" and v == SCHEMA_VERSION else _scrub(v, later))
            for k, v in value.items()
            if not (k in later and any(v == d for d in later[k]))
        }
    if isinstance(value, list | tuple):
        return [_scrub(v, later) for v in value]
    return value


#: A call's ``cost_usd`` was pinned (None for the unpriced judge): only its ``tier`` is later.
_LATER_CALL_FIELDS = {"tier": _LATER_FIELDS["tier"]}


def _request_view(request: JudgeRequest) -> object:
    return [
        request.template,
        request.order,
        request.attempt,
        request.forced_choice,
        request.schema_name,
        [[m.role, m.content] for m in request.messages],
        request.response_schema,
    ]


def _requests(pair: CandidatePair) -> Iterator[tuple[str, JudgeRequest]]:
    rubric = resolve_rubric(pair, CATALOG)
    weights = pair.tiebreak or DEFAULT_TIEBREAK_WEIGHTS
    for datamark in (False, True):
        for order in ORDERS:
            yield f"primary {order} mark={datamark}", render_primary(pair, rubric, order, datamark=datamark)
            yield f"tiebreak {order} mark={datamark}", render_tiebreak(pair, weights, order, datamark=datamark)


def _reply_text(request: JudgeRequest) -> str:
    try:
        return judge_reply(request).model_dump_json(by_alias=True)  # what OfflineJudge.complete sends
    except JudgeRejected as exc:
        return f"rejected: {exc}"


class _FixedLatencyJudge:
    """The offline judge, reporting a fixed latency: with none, a call's latency is the wall clock's."""

    def __init__(self) -> None:
        self._inner = OfflineJudge()

    @property
    def identity(self) -> JudgeIdentity:
        return self._inner.identity

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        return dataclasses.replace(await self._inner.complete(request), latency_s=0.125)


def _decision_view(decision: Decision) -> object:
    return {
        "stage": decision.stage,
        "outcome": _scrub(decision.outcome.model_dump(mode="json")),
        "audit_copy": _scrub(decision.audit_copy.model_dump(mode="json")) if decision.audit_copy else None,
        "calls": [_scrub(dataclasses.asdict(c), _LATER_CALL_FIELDS) for c in decision.calls],
        "facts": _scrub(_without_later_cost(dataclasses.asdict(decision.facts))),
        "evaluation": dataclasses.asdict(decision.evaluation) if decision.evaluation else None,
    }


def _record_view(decision: Decision, judged: CandidatePair | TieBreakRequest) -> object:
    record = record_for(decision, judged, CATALOG)
    return _scrub(_without_later_cost(record.model_dump(mode="json"))) if record is not None else None


async def _decisions(pair: CandidatePair) -> tuple[list[object], list[object]]:
    """(the decisions, their records): the primary stage's, and the tie-break's when it asks for one."""
    judge, policy = _FixedLatencyJudge(), Policy()
    try:
        primary = await judge_pair(pair, judge, policy, CATALOG)
    except InputRejected as exc:
        return [f"rejected {exc.reason}: {exc.detail}"], []
    decisions, records = [_decision_view(primary)], [_record_view(primary, pair)]
    if isinstance(primary.outcome, TieBreakRequest):
        tiebreak = await resolve_tiebreak(primary.outcome, judge, policy)
        decisions.append(_decision_view(tiebreak))
        records.append(_record_view(tiebreak, primary.outcome))
    return decisions, records


def _pins_for(pair: CandidatePair) -> dict[str, str]:
    requests = list(_requests(pair))
    decisions, records = asyncio.run(_decisions(pair))
    return {
        "prompts": _digest([[name, _request_view(r)] for name, r in requests]),
        "replies": _digest([[name, _reply_text(r)] for name, r in requests]),
        "decision": _digest(decisions),
        "record": _digest(records),
    }


# --- validation -------------------------------------------------------------------------------

_H2H = HeadToHeadRubric(criteria=(Criterion(name="accuracy"), Criterion(name="clarity"), Criterion(name="safety")))
_PAIRWISE = PairwiseRubric(criteria=("accuracy", "specificity", "actionability"))
_Check = Callable[[Any], str | None] | None


def _validation_cases() -> Iterator[tuple[str, type[Reply], _Check, str]]:
    tone, h2h, pw, tb = tone_reply(), h2h_reply(), pairwise_reply(), tiebreak_reply()
    checks: dict[type[Reply], _Check] = {
        ToneStyleReply: None,
        HeadToHeadReply: check_head_to_head(_H2H),
        PairwiseReply: check_pairwise(_PAIRWISE),
        TieBreakReply: check_tiebreak(DEFAULT_TIEBREAK_WEIGHTS),
    }
    valid: dict[type[Reply], str] = {ToneStyleReply: tone, HeadToHeadReply: h2h, PairwiseReply: pw, TieBreakReply: tb}
    for model, text in valid.items():
        name = model.__name__
        check = checks[model]
        yield f"{name} valid", model, check, text
        yield f"{name} fenced", model, check, f"```json\n{text}\n```"
        yield f"{name} fenced bare", model, check, f"  ```\r\n{text}```  "
        yield f"{name} pretty", model, check, json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        yield f"{name} unicode escapes", model, check, text.replace("judged", "jud\\u0067ed \\u00e9\\ud83d\\ude00")
        yield f"{name} raw unicode", model, check, text.replace("judged", "jugé ✓ 中")
        yield f"{name} lone surrogate", model, check, text.replace("judged", "\\ud800")
        yield f"{name} extra field", model, check, text[:-1] + ', "extra": 1}'
        yield f"{name} duplicate key", model, check, text[:-1] + ', "confidence": 0.5}'
        yield f"{name} trailing text", model, check, text + " thanks!"
        yield f"{name} two objects", model, check, text + text
        yield f"{name} truncated", model, check, text[: len(text) // 2]
        yield f"{name} array", model, check, f"[{text}]"
        yield f"{name} bom", model, check, "\ufeff" + text
    yield "empty", ToneStyleReply, None, ""
    yield "blank", ToneStyleReply, None, " \n\t "
    yield "empty fence", ToneStyleReply, None, "```json\n\n```"
    yield "string", ToneStyleReply, None, '"A"'
    yield "number", ToneStyleReply, None, "1"
    yield "null", ToneStyleReply, None, "null"
    yield "prose", ToneStyleReply, None, "Output A is better."
    yield "deep", ToneStyleReply, None, "[" * 100_000 + "]" * 100_000
    yield "deep object", ToneStyleReply, None, '{"a":' * 5_000 + "1" + "}" * 5_000
    for constant in ("NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1E+2", "0.9000000000000000000001", "1.0"):
        yield f"confidence {constant}", ToneStyleReply, None, tone_reply(confidence=0.5).replace("0.5", constant)
    yield "confidence string", ToneStyleReply, None, tone_reply(confidence="0.9")  # type: ignore[arg-type]
    yield "confidence high", ToneStyleReply, None, tone_reply(confidence=1.5)
    yield "score float", ToneStyleReply, None, tone_reply().replace('"A": 5', '"A": 5.0')
    yield "score big int", ToneStyleReply, None, tone_reply().replace('"A": 5', '"A": 123456789012345678901234567890')
    yield "score true", ToneStyleReply, None, tone_reply().replace('"A": 5', '"A": true')
    yield "winner lower", ToneStyleReply, None, tone_reply(winner="a")
    yield "winner tie", ToneStyleReply, None, tone_reply(winner="TIE")
    yield "justification long", ToneStyleReply, None, tone_reply(justification="x" * 1_001)
    yield "null field", ToneStyleReply, None, tone_reply(key_differentiator=None)
    many: dict[str, Any] = {f"field_{i}": i for i in range(30)}
    yield "many extras", ToneStyleReply, None, tone_reply(**many)
    yield "h2h missing criterion", HeadToHeadReply, checks[HeadToHeadReply], h2h_reply(criteria=("accuracy", "clarity"))
    yield (
        "h2h unknown criterion",
        HeadToHeadReply,
        checks[HeadToHeadReply],
        h2h_reply(criteria=("accuracy", "clarity", "safety", "x" * 80, "speed")),
    )
    yield "h2h duplicate criterion", HeadToHeadReply, checks[HeadToHeadReply], h2h.replace('"clarity"', '"accuracy"')
    yield (
        "pairwise repeated criterion",
        PairwiseReply,
        checks[PairwiseReply],
        pairwise_reply(criteria=("accuracy", "accuracy", "actionability")),
    )
    yield "pairwise no comparison", PairwiseReply, checks[PairwiseReply], pairwise_reply(comparison=[])
    yield "tiebreak wrong criteria", TieBreakReply, checks[TieBreakReply], tb.replace('"safety"', '"harm"')
    yield "tiebreak weight string", TieBreakReply, checks[TieBreakReply], tb.replace('"weight": 0.4', '"weight": "0.4"')
    yield "tiebreak weight nan", TieBreakReply, checks[TieBreakReply], tb.replace('"weight": 0.4', '"weight": NaN')
    yield "tiebreak weight huge", TieBreakReply, checks[TieBreakReply], tb.replace('"weight": 0.4', '"weight": 1e999')
    yield "tiebreak score int", TieBreakReply, checks[TieBreakReply], tiebreak_reply(score_a=1, score_b=0)


def _validated(model: type[Reply], check: _Check, text: str) -> str:
    try:
        reply = parse_reply(text, model)
    except InvalidReply as exc:
        return f"invalid: {exc}"
    problem = check(reply) if check is not None else None
    dumped = reply.model_dump_json(by_alias=True)
    return f"ok {type(reply).__name__} {_digest(dumped)}" + (f"; context: {problem}" if problem else "")


def _validation_pins() -> dict[str, str]:
    return {name: _validated(model, check, text) for name, model, check, text in _validation_cases()}


# --- the pins ---------------------------------------------------------------------------------


def _current() -> dict[str, Any]:
    return {
        "pairs": {key: _pins_for(pair) for key, pair in varied_pairs()},
        "validation": _validation_pins(),
    }


@pytest.fixture(scope="module")
def current() -> dict[str, Any]:
    pins = _current()
    return current_or_repin(GOLDEN, pins, f"{len(pins['pairs'])} pairs")


@pytest.fixture(scope="module")
def pinned(current: dict[str, Any]) -> dict[str, Any]:  # after ``current``, which may re-pin
    return read_pins(GOLDEN)


def test_the_cases_cover_every_kind_of_pair(pinned: dict[str, Any]) -> None:
    pairs = dict(varied_pairs())
    assert set(pairs) == set(pinned["pairs"])
    assert {p.rubric.kind for p in pairs.values()} == {"tone_style", "head_to_head", "pairwise", "named"}
    assert {p.risk_level for p in pairs.values()} == {None, "low", "normal", "high"}
    assert any(p.is_transcript for p in pairs.values())
    assert any(p.task.history for p in pairs.values())
    assert sum(k.startswith(("hostile-", "bipia-")) for k in pairs) >= 140


@pytest.mark.parametrize("part", ["prompts", "replies", "decision", "record"])
def test_every_pair_is_judged_as_pinned(part: str, current: dict[str, Any], pinned: dict[str, Any]) -> None:
    now = {key: pins[part] for key, pins in current["pairs"].items()}
    then = {key: pins[part] for key, pins in pinned["pairs"].items()}
    changed = sorted(key for key in then if now.get(key) != then[key])
    assert changed == [], f"{part} changed for {len(changed)} of {len(then)} pairs, e.g. {changed[:5]}"


def test_replies_are_validated_as_pinned(current: dict[str, Any], pinned: dict[str, Any]) -> None:
    now, then = current["validation"], pinned["validation"]
    assert now.keys() == then.keys()
    changed = {name: (then[name], now[name]) for name in then if now[name] != then[name]}
    assert changed == {}
