"""A judge that refuses the request (``JudgeRejected``: a bad key, a prompt over the context length) is
its own outcome all the way out of the core: review "judge_rejected", never retried, never re-asked,
and never mistaken for an outage ("judge_unavailable") that the edge would judge again.

Precedence over failed orderings: rejected over unavailable over invalid replies. The decision's
``disposition`` (``agents.disposition``) tells the edge what to do: dead-letter a refusal with its detail
and status, judge an outage again later, publish everything else.
"""

from __future__ import annotations

import pytest

from pairjudge.agents.core import Decision, judge_pair, resolve_tiebreak
from pairjudge.agents.disposition import PUBLISH, RETRY_LATER, DeadLetterPair, disposition
from pairjudge.agents.errors import JudgeError, JudgeRejected, JudgeUnavailable
from pairjudge.agents.judge import judge_info
from pairjudge.agents.policy import Policy
from pairjudge.agents.prompts import render_primary
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.agents.truth_table import failure_reason
from pairjudge.agents.validation import ask_validated
from pairjudge.schemas import OrderingResult, PairVerdict, ReviewRequest, TieBreakRequest
from pairjudge.schemas.replies import ToneStyleReply
from pairjudge.schemas.rubric import ToneStyleRubric
from tests.unit.factories import (
    FIRST_ID,
    SECOND_ID,
    h2h_reply,
    h2h_rubric,
    make_pair,
    per_order,
    tiebreak_reply,
    tone_reply,
)

X, Y = FIRST_ID, SECOND_ID
BAD = '{"winner": "A"'  # never validates
KEY_401 = "judge m@api.example.com rejected the request: HTTP 401: Incorrect API key provided: [REDACTED]"
CONTEXT_400 = "judge m@api.example.com rejected the request: HTTP 400: maximum context length is 4096 tokens"


def _refused(decision: Decision) -> DeadLetterPair | None:
    return decision.disposition if isinstance(decision.disposition, DeadLetterPair) else None


def rejected_detail(decision: Decision) -> str | None:
    """The dead letter's detail when the decision is to dead-letter the pair; else None."""
    refused = _refused(decision)
    return refused.detail if refused is not None else None


def rejected_status(decision: Decision) -> int | None:
    refused = _refused(decision)
    return refused.status if refused is not None else None


def _consistent_tone() -> tuple[str, str]:
    # X wins in both orders: A in AB, B in BA.
    return tone_reply("A"), tone_reply("B")


# --- the single judge ---------------------------------------------------------------------------


async def test_a_rejected_ordering_is_judge_rejected_and_not_reasked() -> None:
    pair = make_pair()
    judge = ScriptedJudge(per_order(pair, JudgeRejected(KEY_401, status=401), tone_reply("B")))
    decision = await judge_pair(pair, judge, Policy(max_reasks=5))
    out = decision.outcome
    assert isinstance(out, ReviewRequest)
    assert (out.reason, out.stage) == ("judge_rejected", "primary")
    assert judge.calls == 2  # one call per ordering: the refused one was neither retried nor re-asked
    assert decision.facts.reason == "judge_rejected"
    assert decision.facts.decided_by == "human"
    ab = out.orderings[0]
    assert (ab.valid, ab.retries, ab.error_kind, ab.error) == (False, 0, "judge_rejected", KEY_401)
    assert rejected_detail(decision) == KEY_401
    assert rejected_status(decision) == 401
    assert decision.disposition == DeadLetterPair("judge_rejected", 401, KEY_401)


@pytest.mark.parametrize(
    ("ab", "ba", "reason"),
    [
        (JudgeRejected(KEY_401, status=401), JudgeUnavailable("HTTP 503 after 4 attempts"), "judge_rejected"),
        (JudgeUnavailable("HTTP 503 after 4 attempts"), JudgeRejected(KEY_401, status=401), "judge_rejected"),
        (JudgeRejected(KEY_401, status=401), BAD, "judge_rejected"),
        (JudgeUnavailable("connect refused"), BAD, "judge_unavailable"),
        (BAD, BAD, "ordering_invalid"),
    ],
)
async def test_precedence_rejected_over_unavailable_over_invalid(
    ab: str | Exception, ba: str | Exception, reason: str
) -> None:
    pair = make_pair()
    decision = await judge_pair(pair, ScriptedJudge(per_order(pair, ab, ba)), Policy())
    assert isinstance(decision.outcome, ReviewRequest)
    assert decision.outcome.reason == reason
    assert (rejected_detail(decision) is not None) == (reason == "judge_rejected")
    if reason == "judge_unavailable":
        assert decision.disposition == RETRY_LATER  # the edge judges the pair again once the judge is back
    if reason == "ordering_invalid":
        assert decision.disposition == PUBLISH  # to review: the judge answered, only badly


async def test_a_refused_reask_is_judge_rejected() -> None:
    # The first reply is invalid; the re-ask (longer: it carries the error) is over the context length.
    pair = make_pair()
    judge = ScriptedJudge(per_order(pair, [BAD, JudgeRejected(CONTEXT_400, status=400)], tone_reply("B")))
    decision = await judge_pair(pair, judge, Policy(max_reasks=2))
    out = decision.outcome
    assert isinstance(out, ReviewRequest)
    assert out.reason == "judge_rejected"
    assert judge.calls == 3  # AB: ask + one re-ask, which was refused, and no more; BA: one
    assert out.orderings[0].retries == 1
    assert rejected_detail(decision) == CONTEXT_400
    assert rejected_status(decision) == 400


async def test_the_kappa_guard_does_not_hide_a_rejection() -> None:
    pair = make_pair()
    judge = ScriptedJudge(per_order(pair, tone_reply("A"), JudgeRejected(KEY_401, status=401)))
    decision = await judge_pair(pair, judge, Policy(kappa_guard_tripped=True, audit_share=1.0))
    assert isinstance(decision.outcome, ReviewRequest)
    assert decision.outcome.reason == "judge_rejected"
    assert decision.audit_copy is None  # only verdicts are sampled


async def test_ask_validated_stops_at_once_on_a_rejection() -> None:
    pair = make_pair()
    assert isinstance(pair.rubric, ToneStyleRubric)
    request = render_primary(pair, pair.rubric, "AB")
    judge = ScriptedJudge([JudgeRejected(KEY_401, status=401), tone_reply()])  # a second call would succeed
    result = await ask_validated(judge, request, ToneStyleReply, None, max_reasks=5)
    assert (result.reply is not None, result.error_kind, result.retries, judge.calls) == (False, "judge_rejected", 0, 1)
    assert result.error == KEY_401
    assert [(c.error_kind, c.error, c.status) for c in result.calls] == [("judge_rejected", KEY_401, 401)]


def test_failure_reason() -> None:
    assert failure_reason([]) is None
    assert failure_reason(["invalid_reply", None]) is None
    assert failure_reason(["invalid_reply", "judge_unavailable"]) == "judge_unavailable"
    assert failure_reason(["judge_unavailable", "judge_rejected", "invalid_reply"]) == "judge_rejected"


# --- the tie-break stage --------------------------------------------------------------------------


def _primary(order: str, winner: str) -> OrderingResult:
    a, b = (X, Y) if order == "AB" else (Y, X)
    return OrderingResult(
        order_shown=order,
        swapped=order == "BA",
        shown_as_a=a,
        shown_as_b=b,
        valid=True,
        raw_winner="A" if winner == a else "B",
        mapped_winner=winner,
        confidence=0.8,
        justification=f"primary {order}",
    )


def _tiebreak_request() -> TieBreakRequest:
    pair = make_pair()
    return TieBreakRequest(
        pair_id=pair.pair_id,
        reason="position_inconsistent",
        pair=pair,
        primary=(_primary("AB", X), _primary("BA", Y)),
        primary_judge=judge_info(ScriptedJudge([], model="primary-model"), "0123456789abcdef"),
    )


@pytest.mark.parametrize(
    ("ab", "ba", "reason"),
    [
        (JudgeRejected(KEY_401, status=401), JudgeUnavailable("circuit open"), "judge_rejected"),
        (JudgeUnavailable("circuit open"), tiebreak_reply(), "judge_unavailable"),
        (BAD, tiebreak_reply(), "tiebreak_invalid"),
    ],
)
async def test_tiebreak_failures_by_kind(ab: str | Exception, ba: str | Exception, reason: str) -> None:
    request = _tiebreak_request()
    decision = await resolve_tiebreak(request, ScriptedJudge(per_order(request.pair, ab, ba)), Policy())
    out = decision.outcome
    assert isinstance(out, ReviewRequest)
    assert (out.reason, out.stage) == (reason, "tiebreak")
    if reason == "judge_rejected":
        assert rejected_detail(decision) == KEY_401
        # The primary orderings travel along, but only the refused tie-break ordering is named.
        assert len(out.orderings) == 4
        assert decision.disposition == DeadLetterPair("judge_rejected", 401, KEY_401)
    else:
        assert rejected_detail(decision) is None
        assert decision.disposition == (RETRY_LATER if reason == "judge_unavailable" else PUBLISH)


async def test_a_refused_forced_choice_reask_is_judge_rejected() -> None:
    request = _tiebreak_request()
    unsure = tiebreak_reply(confidence=0.3)  # below 0.6: the forced-choice re-ask follows
    judge = ScriptedJudge(per_order(request.pair, [unsure, JudgeRejected(CONTEXT_400, status=400)], tiebreak_reply()))
    decision = await resolve_tiebreak(request, judge, Policy())
    assert isinstance(decision.outcome, ReviewRequest)
    assert decision.outcome.reason == "judge_rejected"
    assert rejected_detail(decision) == CONTEXT_400


# --- juries ---------------------------------------------------------------------------------------


def _votes_for_x(model: str) -> ScriptedJudge:
    pair = make_pair(rubric=h2h_rubric())
    return ScriptedJudge(per_order(pair, h2h_reply("A", 0.9), h2h_reply("B", 0.9)), model=model)


async def test_a_jury_with_a_refused_juror_is_judge_rejected_even_with_a_majority() -> None:
    pair = make_pair(rubric=h2h_rubric())
    refused = ScriptedJudge(
        per_order(pair, JudgeRejected(KEY_401, status=401), JudgeRejected(KEY_401, status=401)), model="m3"
    )
    # Without the refusal, m1 and m2 are a majority of three (the baseline proves it).
    baseline = await judge_pair(
        pair,
        [_votes_for_x("m1"), _votes_for_x("m2"), ScriptedJudge(per_order(pair, BAD, BAD), model="m3")],
        Policy(),
    )
    assert isinstance(baseline.outcome, PairVerdict)
    decision = await judge_pair(pair, [_votes_for_x("m1"), _votes_for_x("m2"), refused], Policy())
    out = decision.outcome
    assert isinstance(out, ReviewRequest)
    assert out.reason == "judge_rejected"
    assert out.judge is not None
    assert out.judge.model == "m1+m2+m3"
    assert len(out.orderings) == 6
    assert rejected_detail(decision) == KEY_401  # both orders refused alike: said once


async def test_a_jury_reports_different_refusals_in_order() -> None:
    pair = make_pair(rubric=h2h_rubric())
    first = ScriptedJudge(per_order(pair, JudgeRejected(KEY_401, status=401), h2h_reply("B")), model="m1")
    second = ScriptedJudge(
        per_order(pair, JudgeUnavailable("down"), JudgeRejected(CONTEXT_400, status=400)), model="m2"
    )
    decision = await judge_pair(pair, [first, second], Policy())
    assert isinstance(decision.outcome, ReviewRequest)
    assert decision.outcome.reason == "judge_rejected"
    assert rejected_detail(decision) == f"{KEY_401} | {CONTEXT_400}"
    assert rejected_status(decision) == 401


async def test_a_jury_down_without_refusals_stays_judge_unavailable() -> None:
    pair = make_pair(rubric=h2h_rubric())
    down = ScriptedJudge(per_order(pair, JudgeUnavailable("down"), JudgeUnavailable("down")), model="m1")
    bad = ScriptedJudge(per_order(pair, BAD, BAD), model="m2")
    decision = await judge_pair(pair, [down, bad], Policy())
    assert isinstance(decision.outcome, ReviewRequest)
    assert decision.outcome.reason == "judge_unavailable"
    assert decision.disposition == RETRY_LATER


# --- agents.disposition on other outcomes ---------------------------------------------------------


async def test_rejected_detail_is_none_for_verdicts_and_their_audit_copies() -> None:
    pair = make_pair()
    ab, ba = _consistent_tone()
    decision: Decision = await judge_pair(pair, ScriptedJudge(per_order(pair, ab, ba)), Policy(audit_share=1.0))
    assert isinstance(decision.outcome, PairVerdict)
    assert decision.audit_copy is not None
    assert decision.disposition == PUBLISH


def test_a_refusals_detail_comes_from_the_refused_orderings() -> None:
    pair = make_pair()
    refused = _primary("AB", X).model_copy(
        update={
            "valid": False,
            "mapped_winner": None,
            "error": "HTTP 403: forbidden",
            "error_kind": "judge_rejected",
        }
    )
    valid = _primary("BA", X)
    # The status travels typed with the calls; an ordering records only the text, which is never read back.
    assert disposition("judge_rejected", (refused, valid), ()) == DeadLetterPair(
        "judge_rejected", None, "HTTP 403: forbidden"
    )
    bare = disposition("judge_rejected", (), ())
    assert bare == DeadLetterPair("judge_rejected", None, "the judge refused the request (no detail recorded)")
    assert disposition("judge_unavailable", (refused,), ()) == RETRY_LATER
    assert disposition(None, (refused,), ()) == PUBLISH
    assert pair.pair_id


async def test_the_status_is_the_judges_own_never_read_from_its_message() -> None:
    pair = make_pair()
    says_401 = ScriptedJudge(per_order(pair, JudgeRejected(KEY_401), JudgeRejected(KEY_401)))
    decision = await judge_pair(pair, says_401, Policy())
    assert isinstance(decision.disposition, DeadLetterPair)
    assert rejected_detail(decision) == KEY_401
    assert rejected_status(decision) is None  # "HTTP 401" in the text is only text
    typed = ScriptedJudge(per_order(pair, JudgeRejected("refused", status=403), tone_reply("B")))
    assert rejected_status(await judge_pair(pair, typed, Policy())) == 403


class _Refused(JudgeError):
    """A judge's own refusal type, outside the tree's two: its flag alone says it must not be retried."""

    retriable = False


@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        (_Refused("no"), "judge_rejected"),
        (JudgeError("odd"), "judge_unavailable"),
        (JudgeUnavailable(), "judge_unavailable"),
    ],
)
async def test_retriable_decides_retry_or_escalate(failure: JudgeError, kind: str) -> None:
    pair = make_pair()
    assert isinstance(pair.rubric, ToneStyleRubric)
    result = await ask_validated(
        ScriptedJudge([failure]), render_primary(pair, pair.rubric, "AB"), ToneStyleReply, None, 2
    )
    assert (result.error_kind, result.retries) == (kind, 0)  # neither is re-asked: only a bad reply is
