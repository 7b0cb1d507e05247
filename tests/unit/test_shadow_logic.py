"""The shadow stage's pure part (agents.shadow): experiment matching, the stable draw, set-aside rules, the
challenger's request and reply, and the pair built from a capture and the challenger's reply."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pairjudge.agents.capture.build import make_capture
from pairjudge.agents.policy import Policy
from pairjudge.agents.shadow import (
    CHALLENGER_ID,
    CHAMPION_ID,
    SetAside,
    Unusable,
    build_pair,
    challenger_request,
    challenger_usd,
    cut_off,
    drawn,
    joins,
    matches,
    read_reply,
    set_aside,
    shadow_pair_id,
)
from pairjudge.agents.shadow_anthropic import DEFAULT_MAX_TOKENS, messages_request, read_messages_reply
from pairjudge.schemas import CandidatePair, ControlUpdate
from pairjudge.schemas.captures import Capture
from pairjudge.schemas.experiments import Experiment, ExperimentFile

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def _capture(
    *,
    capture_id: str = "cap-1",
    messages: list[dict[str, Any]] | None = None,
    reply: dict[str, Any] | None = None,
    finish: str = "stop",
    tools: bool = False,
    tags: tuple[str, ...] = (),
    headers: dict[str, str] | None = None,
    route: str = "/chat",
) -> Capture:
    request: dict[str, Any] = {
        "model": "gpt-champion",
        "messages": messages or [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}],
        "temperature": 0.3,
    }
    if tools:
        request["tools"] = TOOLS
        request["tool_choice"] = "auto"
    response = {
        "id": "x",
        "object": "chat.completion",
        "model": "gpt-champion-2026",
        "choices": [
            {"index": 0, "message": reply or {"role": "assistant", "content": "Hello!"}, "finish_reason": finish}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }
    return make_capture(
        "chat_completions",
        request,
        response,
        capture_id=capture_id,
        route=route,
        tags=tags,
        headers=headers,
        prompt_version="p1",
    )


def _experiment(**overrides: Any) -> Experiment:
    data: dict[str, Any] = {
        "id": "exp-a",
        "challenger": {"base_url": "http://127.0.0.1:1/v1", "model": "challenger-m"},
        "rubric": {"kind": "named", "name": "tone_style"},
    }
    data.update(overrides)
    return Experiment.model_validate(data)


def _completion(message: dict[str, Any], finish: str = "stop", **usage: int) -> bytes:
    return json.dumps(
        {
            "model": "challenger-m-1",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
            "usage": usage or {"prompt_tokens": 1000, "completion_tokens": 500},
        }
    ).encode()


# --- matching and the draw ---------------------------------------------------------------------------


def test_an_experiment_without_criteria_takes_every_capture() -> None:
    assert matches(_experiment(), _capture())


@pytest.mark.parametrize(
    ("select", "joined"),
    [
        ({"models": ["gpt-champion"]}, True),
        ({"models": ["other"]}, False),
        ({"routes": ["/chat"]}, True),
        ({"routes": ["/other"]}, False),
        ({"tags": ["beta", "shadow-me"]}, True),
        ({"tags": ["nope"]}, False),
        ({"headers": {"X-Tenant": ["acme"]}}, True),
        ({"headers": {"x-tenant": ["globex"]}}, False),
        ({"headers": {"x-missing": ["acme"]}}, False),
        ({"models": ["gpt-champion"], "routes": ["/other"]}, False),
    ],
)
def test_every_criterion_must_hold(select: dict[str, Any], joined: bool) -> None:
    capture = _capture(tags=("shadow-me",), headers={"x-tenant": "acme"})
    assert matches(_experiment(select=select), capture) is joined


def test_the_draw_is_stable_by_capture_and_near_its_share() -> None:
    ids = [f"cap-{i}" for i in range(4000)]
    first = [drawn(i, "exp-a", 0.25) for i in ids]
    assert first == [drawn(i, "exp-a", 0.25) for i in ids]  # a redelivery draws the same
    assert 0.22 < sum(first) / len(ids) < 0.28
    other = [drawn(i, "exp-b", 0.25) for i in ids]
    assert first != other  # experiments draw independently
    assert all(drawn(i, "exp-a", 1.0) for i in ids[:50])
    assert not any(drawn(i, "exp-a", 0.0) for i in ids[:50])


def test_joins_leaves_out_paused_unmatched_and_undrawn_experiments() -> None:
    experiments = [
        _experiment(id="on"),
        _experiment(id="paused", paused=True),
        _experiment(id="elsewhere", select={"routes": ["/x"]}),
        _experiment(id="never", share=0.0),
    ]
    assert [e.id for e in joins(_capture(), experiments)] == ["on"]


def test_live_changes_pause_an_experiment_and_change_its_share() -> None:
    experiments = [_experiment(id="a"), _experiment(id="b", share=0.0)]
    capture = _capture()
    assert [e.id for e in joins(capture, experiments)] == ["a"]
    policy = Policy().apply(ControlUpdate(key="shadow_paused", value="a"))
    policy = policy.apply(ControlUpdate(key="shadow_shares", value="b=1.0, a=0.5"))
    paused, shares = policy.shadow_live()
    assert (paused, shares) == (frozenset({"a"}), {"b": 1.0, "a": 0.5})
    assert [e.id for e in joins(capture, experiments, paused=paused, shares=shares)] == ["b"]
    with pytest.raises(ValueError, match="shadow_shares"):
        Policy().apply(ControlUpdate(key="shadow_shares", value="a=2"))
    with pytest.raises(ValueError, match="shadow_shares"):
        Policy().apply(ControlUpdate(key="shadow_shares", value="a"))


def test_the_pair_id_derives_from_the_capture_and_experiment_alone() -> None:
    assert shadow_pair_id("c1", "e") == shadow_pair_id("c1", "e")
    assert len({shadow_pair_id("c1", "e"), shadow_pair_id("c2", "e"), shadow_pair_id("c1", "f")}) == 3


def test_an_experiment_file_refuses_unknown_params_and_shared_ids() -> None:
    with pytest.raises(ValueError, match="params may override"):
        _experiment(challenger={"base_url": "http://h/v1", "model": "m", "params": {"api_key": "x"}})
    with pytest.raises(ValueError, match="share an id"):
        ExperimentFile(experiments=(_experiment(), _experiment()))


# --- set aside ---------------------------------------------------------------------------------------


def test_an_image_part_sets_the_capture_aside() -> None:
    capture = _capture(
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                ],
            }
        ]
    )
    reason = set_aside(capture)
    assert reason is not None
    assert reason.reason == "capture_unseen_image"


def test_a_whole_text_capture_is_not_set_aside() -> None:
    assert set_aside(_capture()) is None


def test_a_conversation_ending_on_the_assistant_is_set_aside() -> None:
    capture = _capture(messages=[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hel"}])
    reason = set_aside(capture)
    assert reason is not None
    assert reason.reason == "capture_not_a_question"


@pytest.mark.parametrize(
    ("champion", "challenger", "reason"),
    [
        ("stop", "stop", None),
        ("length", "length", None),
        ("length", "stop", "champion_cut_off"),
        ("stop", "length", "challenger_cut_off"),
        ("tool_calls", "length", "challenger_cut_off"),
    ],
)
def test_a_reply_cut_off_on_one_side_only_is_set_aside(champion: str, challenger: str, reason: str | None) -> None:
    found = cut_off(champion, challenger)
    assert (found.reason if found else None) == reason


# --- the request -------------------------------------------------------------------------------------


def test_the_challenger_is_asked_the_same_request_never_shown_the_champion_s_reply() -> None:
    body = challenger_request(_capture(tools=True), _experiment())
    assert body["model"] == "challenger-m"
    assert body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}]
    assert body["tools"][0]["function"]["name"] == "get_weather"
    assert body["tool_choice"] == "auto"
    assert body["temperature"] == 0.3
    assert "Hello!" not in json.dumps(body)


def test_a_new_prompt_version_replaces_the_system_turn_and_overrides_parameters() -> None:
    experiment = _experiment(
        challenger={
            "base_url": "http://h/v1",
            "model": "m",
            "system_prompt": "Be warm.",
            "params": {"temperature": 0.9},
        }
    )
    body = challenger_request(_capture(), experiment)
    assert body["messages"] == [{"role": "system", "content": "Be warm."}, {"role": "user", "content": "Hi?"}]
    assert body["temperature"] == 0.9
    no_system = challenger_request(_capture(messages=[{"role": "user", "content": "Q"}]), experiment)
    assert no_system["messages"][0] == {"role": "system", "content": "Be warm."}


# --- the reply ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (_completion({"content": None, "refusal": "I can't."}), "challenger_refused"),
        (_completion({"content": "partial"}, finish="content_filter"), "challenger_filtered"),
        (_completion({"content": "   "}), "challenger_empty"),
        (_completion({"content": None}), "challenger_empty"),
        (b'{"error": {"message": "overloaded"}}', "challenger_unreadable"),
        (b"not json", "challenger_unreadable"),
        (_completion({"content": None, "tool_calls": [{"id": "c1", "function": {}}]}), "challenger_unreadable"),
    ],
)
def test_an_answer_a_pair_cannot_hold_is_unusable(body: bytes, reason: str) -> None:
    with pytest.raises(Unusable) as raised:
        read_reply(body)
    assert raised.value.reason == reason


def test_a_tool_call_reply_is_read_with_its_usage() -> None:
    reply = read_reply(
        _completion(
            {
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"c":1}'}}
                ],
            },
            finish="tool_calls",
        )
    )
    assert reply.text == ""
    assert reply.tool_calls[0].function.name == "get_weather"
    assert (reply.prompt_tokens, reply.completion_tokens, reply.finish_reason) == (1000, 500, "tool_calls")
    priced = _experiment(
        challenger={"base_url": "http://h/v1", "model": "m", "usd_per_million_input": 2, "usd_per_million_output": 8}
    )
    assert challenger_usd(priced, reply) == pytest.approx(0.006)


# --- the pair ----------------------------------------------------------------------------------------


def test_the_pair_holds_the_request_the_champion_s_reply_and_the_challenger_s() -> None:
    capture = _capture(
        tools=True,
        reply={
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c9", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}],
        },
        finish="tool_calls",
    )
    experiment = _experiment(risk_level="high")
    pair = build_pair(capture, experiment, read_reply(_completion({"content": "It is sunny."})))
    assert pair.pair_id == shadow_pair_id("cap-1", "exp-a")
    champion, challenger = pair.candidates
    assert (champion.candidate_id, challenger.candidate_id) == (CHAMPION_ID, CHALLENGER_ID)
    assert champion.tool_calls[0].function.name == "get_weather"
    assert champion.output == ""
    assert champion.source.role == "champion"
    assert champion.source.prompt_version == "p1"
    assert challenger.output == "It is sunny."
    assert challenger.source.model == "challenger-m-1"
    assert pair.task.tools[0].function.name == "get_weather"
    assert pair.task.messages[-1].content == "Hi?"
    assert (pair.metadata.traffic, pair.metadata.experiment_id, pair.risk_level) == ("shadow", "exp-a", "high")
    assert CandidatePair.model_validate_json(pair.model_dump_json()) == pair


def test_an_empty_champion_reply_is_set_aside_not_judged() -> None:
    capture = _capture(reply={"role": "assistant", "content": "  "})
    with pytest.raises(SetAside, match="champion_empty"):
        build_pair(capture, _experiment(), read_reply(_completion({"content": "Hi"})))


# --- an Anthropic challenger -------------------------------------------------------------------------


def test_the_request_in_anthropic_s_shape_keeps_system_tools_calls_and_results() -> None:
    capture = _capture(
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c0",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c0", "content": "12 C"},
        ],
        tools=True,
    )
    body = messages_request(challenger_request(capture, _experiment()))
    assert body["system"] == "Be brief."
    assert body["max_tokens"] == DEFAULT_MAX_TOKENS
    assert body["tools"][0]["input_schema"]["properties"] == {"city": {"type": "string"}}
    assert body["tool_choice"] == {"type": "auto"}
    assert [t["role"] for t in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "c0", "name": "get_weather", "input": {"city": "Oslo"}}
    ]
    assert body["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": "c0", "content": "12 C"}]


def _message(content: list[dict[str, Any]], stop: str = "end_turn") -> bytes:
    usage = {"input_tokens": 100, "output_tokens": 20}
    return json.dumps({"model": "claude-c", "content": content, "stop_reason": stop, "usage": usage}).encode()


def test_an_anthropic_reply_reads_as_the_challenger_s_next_message() -> None:
    reply = read_messages_reply(
        _message(
            [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Lima"}},
            ],
            stop="tool_use",
        )
    )
    assert (reply.text, reply.finish_reason, reply.prompt_tokens, reply.completion_tokens) == (
        "Checking.",
        "tool_calls",
        100,
        20,
    )
    assert json.loads(reply.tool_calls[0].function.arguments) == {"city": "Lima"}
    assert read_messages_reply(_message([{"type": "text", "text": "cut"}], stop="max_tokens")).finish_reason == "length"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (_message([{"type": "text", "text": "No."}], stop="refusal"), "challenger_refused"),
        (_message([]), "challenger_empty"),
        (b'{"type": "error"}', "challenger_unreadable"),
    ],
)
def test_an_anthropic_answer_a_pair_cannot_hold_is_unusable(body: bytes, reason: str) -> None:
    with pytest.raises(Unusable) as raised:
        read_messages_reply(body)
    assert raised.value.reason == reason
