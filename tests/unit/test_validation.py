"""Strict parsing, context checks and the re-ask loop."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pairjudge.agents.errors import InvalidReply, JudgeRejected, JudgeUnavailable
from pairjudge.agents.judge import JudgeRequest
from pairjudge.agents.prompts import render_primary, render_tiebreak
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.agents.validation import (
    ask_validated,
    check_head_to_head,
    check_pairwise,
    check_tiebreak,
    parse_reply,
    strip_fence,
)
from pairjudge.schemas import DEFAULT_TIEBREAK_WEIGHTS
from pairjudge.schemas.replies import HeadToHeadReply, PairwiseReply, TieBreakReply, ToneStyleReply
from tests.unit.factories import (
    H2H_CRITERIA,
    h2h_reply,
    h2h_rubric,
    make_pair,
    pairwise_reply,
    pairwise_rubric,
    tiebreak_reply,
    tone_reply,
    tone_rubric,
)


def _invalid(text: str, model: type = ToneStyleReply) -> str:
    with pytest.raises(InvalidReply) as caught:
        parse_reply(text, model)
    assert caught.value.raw == text
    return str(caught.value)


# --- parsing ----------------------------------------------------------------------------------


def test_valid_reply_parses() -> None:
    reply = parse_reply(tone_reply("B", 0.8), ToneStyleReply)
    assert reply.winner == "B"
    assert reply.confidence == 0.8
    assert reply.dimension_scores.tone_match.b == 4


@pytest.mark.parametrize(
    "wrapper",
    ["```json\n{}\n```", "```\n{}\n```", "  ```JSON\n{}\n```  \n", "```json\n{}```", "\n{}\n"],
)
def test_surrounding_fence_is_accepted(wrapper: str) -> None:
    text = wrapper.replace("{}", tone_reply("A", 0.75))
    assert parse_reply(text, ToneStyleReply).confidence == 0.75


def test_strip_fence_leaves_unfenced_and_inner_fences_alone() -> None:
    assert strip_fence('{"a": 1}') == '{"a": 1}'
    partial = 'Here you go:\n```json\n{"a": 1}\n```'
    assert strip_fence(partial) == partial  # not a *surrounding* fence: stays, and then fails to parse


def test_extra_field_is_rejected_with_its_path() -> None:
    message = _invalid(tone_reply(extra_note="hi"))
    assert "extra_note: Extra inputs are not permitted" in message


def test_nested_extra_field_is_rejected() -> None:
    data = json.loads(tone_reply())
    data["dimension_scores"]["tone_match"]["C"] = 2
    assert "dimension_scores.tone_match.C: Extra inputs are not permitted" in _invalid(json.dumps(data))


def test_truncated_json_is_rejected() -> None:
    text = tone_reply()[:-20]
    message = _invalid(text)
    assert message.startswith("the reply is not valid JSON:")
    assert "line 1 column" in message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "the reply is empty"),
        ("Sure! " + tone_reply(), "not valid JSON"),
        (tone_reply() + "\nHope this helps.", "not valid JSON"),
        ("[1, 2]", "one JSON object, not a JSON list"),
        ('"A"', "one JSON object, not a JSON str"),
        ('{"winner": "A", "winner": "B"}', "appears twice"),
        ('{"confidence": NaN}', "NaN is not a valid JSON number"),
    ],
)
def test_malformed_replies_are_rejected(text: str, fragment: str) -> None:
    assert fragment in _invalid(text)


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"winner": "TIE"}, "winner: Input should be 'A' or 'B'"),
        ({"confidence": 1.5}, "confidence: Input should be less than or equal to 1"),
        ({"confidence": "0.9"}, "confidence: Input should be a valid number"),  # strict: no string coercion
        ({"justification": ""}, "justification: String should have at least 1 character"),
        (
            {"dimension_scores": {"tone_match": {"A": 4, "B": 3}}},
            "dimension_scores.audience_suitability: Field required",
        ),
    ],
)
def test_schema_violations_are_rejected_strictly(overrides: dict[str, Any], fragment: str) -> None:
    assert fragment in _invalid(tone_reply(**overrides))


def test_float_score_is_not_coerced_to_int() -> None:
    data = json.loads(tone_reply())
    data["dimension_scores"]["tone_match"]["A"] = 4.0
    assert "dimension_scores.tone_match.A: Input should be a valid integer" in _invalid(json.dumps(data))


def test_validation_error_does_not_echo_the_input() -> None:
    secret = "SUPER-LONG-MODEL-TEXT-" * 10
    message = _invalid(tone_reply(winner=secret))
    assert secret not in message


# --- context checks ---------------------------------------------------------------------------


def test_head_to_head_keys_must_equal_rubric_criteria() -> None:
    check = check_head_to_head(h2h_rubric())
    assert check(parse_reply(h2h_reply(), HeadToHeadReply)) is None
    missing = check(parse_reply(h2h_reply(criteria=("accuracy", "clarity", "style")), HeadToHeadReply))
    assert missing is not None
    assert 'missing: ["safety"]' in missing
    assert 'not in the rubric: ["style"]' in missing
    assert json.dumps(list(H2H_CRITERIA)) in missing


def test_pairwise_comparison_must_cover_each_criterion_once() -> None:
    check = check_pairwise(pairwise_rubric(("accuracy", "specificity")))
    assert check(parse_reply(pairwise_reply(criteria=("specificity", "accuracy")), PairwiseReply)) is None  # any order
    repeated = check(parse_reply(pairwise_reply(criteria=("accuracy", "accuracy", "specificity")), PairwiseReply))
    assert repeated is not None
    assert 'named more than once: ["accuracy"]' in repeated
    short = check(parse_reply(pairwise_reply(criteria=("accuracy",)), PairwiseReply))
    assert short is not None
    assert 'missing: ["specificity"]' in short


def test_tiebreak_analysis_must_name_the_configured_criteria() -> None:
    check = check_tiebreak(DEFAULT_TIEBREAK_WEIGHTS)
    assert check(parse_reply(tiebreak_reply(), TieBreakReply)) is None
    data = json.loads(tiebreak_reply())
    data["criteria_analysis"][0]["criterion"] = "Safety"  # exact names, no guessing
    problem = check(parse_reply(json.dumps(data), TieBreakReply))
    assert problem is not None
    assert 'missing: ["safety"]' in problem
    assert 'not in the rubric: ["Safety"]' in problem


# --- ask_validated ----------------------------------------------------------------------------


def _request() -> JudgeRequest:
    return render_primary(make_pair(), tone_rubric(), "AB")


async def test_first_valid_reply_is_accepted() -> None:
    judge = ScriptedJudge(
        [tone_reply("A", 0.9)],
        model="req-model",
        answered_model="rerouted-model",
        input_tokens=120,
        output_tokens=40,
        latency_s=0.25,
    )
    result = await ask_validated(judge, _request(), ToneStyleReply, None, 2, order="BA")
    assert result.reply is not None
    assert result.reply is not None
    assert result.reply.winner == "A"
    assert result.retries == 0
    assert result.error is None
    assert result.error_kind is None
    assert result.answered_model == "rerouted-model"
    (call,) = result.calls
    assert (call.stage, call.order, call.attempt, call.valid, call.forced_choice) == ("primary", "BA", 0, True, False)
    assert (call.requested_model, call.answered_model) == ("req-model", "rerouted-model")
    assert (call.input_tokens, call.output_tokens, call.latency_s) == (120, 40, 0.25)


async def test_reask_carries_the_validation_error_and_the_previous_reply() -> None:
    bad = tone_reply(winner="TIE")
    judge = ScriptedJudge([bad, tone_reply("B", 0.8)])
    base = _request()
    result = await ask_validated(judge, base, ToneStyleReply, None, 2)
    assert result.reply is not None
    assert result.retries == 1
    first, second = judge.requests
    assert first is base
    assert second.attempt == 1
    assert second.messages[: len(base.messages)] == base.messages
    assert second.messages[-2].role == "assistant"
    assert second.messages[-2].content == bad
    assert "winner: Input should be 'A' or 'B'" in second.messages[-1].content
    assert "Return only the corrected JSON object" in second.messages[-1].content
    assert [c.valid for c in result.calls] == [False, True]
    assert result.calls[0].error_kind == "invalid_reply"
    assert result.calls[0].error is not None


async def test_context_problems_are_reasked_too() -> None:
    rubric = h2h_rubric()
    judge = ScriptedJudge([h2h_reply(criteria=("accuracy",)), h2h_reply()])
    request = render_primary(make_pair(rubric=rubric), rubric, "AB")
    result = await ask_validated(judge, request, HeadToHeadReply, check_head_to_head(rubric), 2)
    assert result.reply is not None
    assert result.retries == 1
    assert 'missing: ["clarity", "safety"]' in judge.requests[1].messages[-1].content


async def test_gives_up_after_two_reasks_three_asks_in_total() -> None:
    judge = ScriptedJudge(["not json", "still {not json", '{"winner": "A"}', tone_reply()])
    result = await ask_validated(judge, _request(), ToneStyleReply, None, 2)
    assert result.reply is None
    assert result.reply is None
    assert judge.calls == 3
    assert result.retries == 2
    assert result.error_kind == "invalid_reply"
    assert result.error is not None
    assert "Field required" in result.error
    assert [c.attempt for c in result.calls] == [0, 1, 2]
    assert result.text == '{"winner": "A"}'
    # Each re-ask is built on the base request, so the conversation does not grow.
    assert [len(r.messages) for r in judge.requests] == [2, 4, 4]
    assert "still {not json" in judge.requests[2].messages[-2].content


async def test_zero_reasks_means_one_ask() -> None:
    judge = ScriptedJudge(["nope", tone_reply()])
    result = await ask_validated(judge, _request(), ToneStyleReply, None, 0)
    assert result.reply is None
    assert judge.calls == 1
    assert result.retries == 0


@pytest.mark.parametrize(
    ("exc", "kind"),
    [(JudgeUnavailable("503 after 4 tries"), "judge_unavailable"), (JudgeRejected("401"), "judge_rejected")],
)
async def test_judge_failures_are_not_reasked(exc: Exception, kind: str) -> None:
    judge = ScriptedJudge([exc, tone_reply()])
    result = await ask_validated(judge, _request(), ToneStyleReply, None, 2)
    assert result.reply is None
    assert judge.calls == 1
    assert result.error_kind == kind
    assert result.error == str(exc)
    (call,) = result.calls
    assert not call.valid
    assert (call.error_kind, call.error) == (kind, str(exc))
    assert call.answered_model is None


async def test_judge_failure_after_an_invalid_reply_keeps_the_retry_count() -> None:
    judge = ScriptedJudge(["bad", JudgeUnavailable("timeout")])
    result = await ask_validated(judge, _request(), ToneStyleReply, None, 2)
    assert result.error_kind == "judge_unavailable"
    assert result.retries == 1
    assert len(result.calls) == 2


async def test_invalid_reply_raised_by_the_judge_is_reasked() -> None:
    judge = ScriptedJudge([InvalidReply("no content in the completion", raw=""), tone_reply()])
    result = await ask_validated(judge, _request(), ToneStyleReply, None, 2)
    assert result.reply is not None
    assert result.retries == 1
    assert "no content in the completion" in judge.requests[1].messages[-1].content


async def test_tiebreak_calls_are_labelled_tiebreak() -> None:
    request = render_tiebreak(make_pair(), DEFAULT_TIEBREAK_WEIGHTS, "AB")
    judge = ScriptedJudge([tiebreak_reply()])
    result = await ask_validated(judge, request, TieBreakReply, check_tiebreak(DEFAULT_TIEBREAK_WEIGHTS), 2)
    assert result.reply is not None
    assert result.calls[0].stage == "tiebreak"
