"""The capture normalisers (``agents.capture``): OpenAI chat completions, Anthropic Messages and the Responses API
to one shape, streamed replies joined as the unstreamed ones, parts the judge cannot see kept as markers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from pairjudge.agents.capture import (
    CaptureUnreadable,
    anthropic_request,
    anthropic_response,
    assemble_anthropic_events,
    assemble_chat_chunks,
    chat_request,
    chat_response,
    final_response,
    make_capture,
    map_texts,
    responses_request,
    responses_response,
)
from pairjudge.schemas import SCHEMA_VERSION, WIRE_CONTEXT, Capture
from pairjudge.schemas.captures import NamedFunction, NamedToolChoice, TextPart, UnseenPart
from pairjudge.schemas.export import EXPORTED
from tests.fixtures.provider_streams import (
    Call,
    anthropic_reply,
    anthropic_stream,
    chat_reply,
    chat_stream,
    responses_reply,
    responses_stream,
)

CALLS = (Call("call_1", "get_weather", {"city": "Paris"}), Call("call_2", "get_time", {"tz": "Europe/Paris"}))
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def _body(action: Any) -> dict[str, Any]:
    return dict(json.loads(action.body))


def _sse(action: Any) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in action.body.decode().splitlines() if line.startswith("data: {")]


# --- OpenAI chat completions -----------------------------------------------------------------------------


def test_a_chat_request_with_tools_history_and_parts_reads_field_by_field() -> None:
    request = chat_request(
        {
            "model": "gpt-x",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is in this picture, and the weather?"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    ],
                },
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "12 °C, rain"},
                {"role": "user", "content": "Thanks. And tomorrow?"},
            ],
            "tools": [
                {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
                {"type": "custom", "custom": {"name": "x"}},
            ],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}}},
            "temperature": 0.2,
            "max_completion_tokens": 300,
            "stop": "END",
            "seed": 7,
            "parallel_tool_calls": False,
        }
    )
    user = request.messages[1]
    assert user.content == (
        TextPart(text="What is in this picture, and the weather?"),
        UnseenPart(kind="image", original_type="image_url"),
    )
    assert user.unseen == ("image",)
    # Arguments as the model wrote them, invalid JSON included: the judge sees what it wrote.
    assert request.messages[2].tool_calls[0].function.arguments == '{"city":'
    assert request.messages[3].role == "tool"
    assert request.messages[3].tool_call_id == "call_1"
    assert request.tools[0].function.parameters == WEATHER
    assert request.builtin_tools == ("custom",)
    assert request.tool_choice == NamedToolChoice(function=NamedFunction(name="get_weather"))
    assert request.response_format is not None
    assert request.response_format.type == "json_schema"
    sampling = request.sampling
    assert (sampling.temperature, sampling.max_tokens, sampling.stop, sampling.seed) == (0.2, 300, ("END",), 7)
    assert sampling.parallel_tool_calls is False
    # The image's data is not kept, only its marker.
    assert "AAAA" not in request.model_dump_json()


def test_a_streamed_chat_reply_is_captured_exactly_as_the_unstreamed_one() -> None:
    whole = chat_response(_body(chat_reply("Let me check both.", CALLS, finish="tool_calls")))
    streamed = chat_response(
        assemble_chat_chunks(_sse(chat_stream("Let me check both.", CALLS, finish="tool_calls"))), streamed=True
    )
    assert streamed.model_copy(update={"streamed": False}) == whole
    assert [c.function.arguments for c in whole.message.tool_calls] == [json.dumps(c.arguments) for c in CALLS]
    assert whole.finish_reason == "tool_calls"
    assert whole.usage is not None
    assert whole.usage.prompt_tokens == 31


def test_a_chat_reply_cut_off_by_its_token_limit_says_length() -> None:
    reply = chat_response(_body(chat_reply("It was the best of", finish="length")))
    assert (reply.finish_reason, reply.provider_finish_reason) == ("length", "length")


def test_an_audio_reply_is_kept_as_a_marker() -> None:
    body = _body(chat_reply(None))
    body["choices"][0]["message"]["audio"] = {"id": "a1", "data": "UklGR", "transcript": "hello"}
    message = chat_response(body).message
    assert message.unseen == ("audio",)
    assert "UklGR" not in message.model_dump_json()


# --- Anthropic Messages ------------------------------------------------------------------------------------


def test_an_anthropic_request_becomes_chat_shape_with_tool_results_as_tool_turns() -> None:
    request = anthropic_request(
        {
            "model": "claude-x",
            "max_tokens": 512,
            "system": [{"type": "text", "text": "You are a weather bot."}],
            "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "I should call the tool", "signature": "s"},
                        {"type": "text", "text": "Checking."},
                        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_1",
                            "content": [{"type": "text", "text": "12 °C"}],
                        },
                        {"type": "text", "text": "And this map?"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"}},
                    ],
                },
            ],
            "tools": [
                {"name": "get_weather", "description": "Weather now", "input_schema": WEATHER},
                {"type": "web_search_20250305", "name": "web_search"},
            ],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
            "stop_sequences": ["STOP"],
            "temperature": 0.5,
        }
    )
    roles = [m.role for m in request.messages]
    assert roles == ["system", "user", "assistant", "tool", "user"]
    assert request.messages[0].content == "You are a weather bot."
    assistant = request.messages[2]
    # The thinking block is reasoning, not the reply.
    assert assistant.content == "Checking."
    assert assistant.tool_calls[0].function.arguments == '{"city": "Paris"}'
    assert (request.messages[3].tool_call_id, request.messages[3].content) == ("toolu_1", "12 °C")
    assert request.messages[4].unseen == ("image",)
    assert request.tools[0].function.parameters == WEATHER
    assert request.builtin_tools == ("web_search_20250305",)
    assert request.tool_choice == "required"
    assert request.sampling.parallel_tool_calls is False
    assert (request.sampling.max_tokens, request.sampling.stop) == (512, ("STOP",))


def test_a_streamed_anthropic_reply_is_captured_exactly_as_the_unstreamed_one() -> None:
    whole = anthropic_response(_body(anthropic_reply("Checking both.", CALLS, stop="tool_use")))
    events = _sse(anthropic_stream("Checking both.", CALLS, stop="tool_use"))
    streamed = anthropic_response(assemble_anthropic_events(events), streamed=True)
    assert streamed.model_copy(update={"streamed": False}) == whole
    assert whole.finish_reason == "tool_calls"
    # Every input token, cached ones included; the cached ones apart.
    assert whole.usage is not None
    assert (whole.usage.prompt_tokens, whole.usage.cached_tokens) == (25, 5)


@pytest.mark.parametrize(
    ("stop", "finish"),
    [("end_turn", "stop"), ("max_tokens", "length"), ("refusal", "content_filter"), ("pause_turn", "other")],
)
def test_anthropic_stop_reasons_map_to_openai_s(stop: str, finish: str) -> None:
    assert anthropic_response(_body(anthropic_reply("x", stop=stop))).finish_reason == finish


# --- the Responses API ---------------------------------------------------------------------------------------


def test_a_responses_request_with_function_calls_and_outputs_reads_as_chat_turns() -> None:
    request = responses_request(
        {
            "model": "gpt-x",
            "instructions": "Be brief.",
            "input": [
                {
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Weather?"}, {"type": "input_file", "file_id": "f1"}],
                },
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
                {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
                {"type": "function_call", "call_id": "call_2", "name": "get_time", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "12 °C"},
                {"type": "function_call_output", "call_id": "call_2", "output": "noon"},
            ],
            "tools": [{"type": "function", "name": "get_weather", "parameters": WEATHER}, {"type": "web_search"}],
            "tool_choice": {"type": "function", "name": "get_weather"},
            "text": {"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}, "strict": True}},
            "max_output_tokens": 200,
        }
    )
    assert [m.role for m in request.messages] == ["system", "user", "assistant", "tool", "tool"]
    assert request.messages[1].unseen == ("file",)
    assistant = request.messages[2]
    # One assistant turn: its message and both calls (the API splits one reply into items).
    assert assistant.content == "Checking."
    assert [c.id for c in assistant.tool_calls] == ["call_1", "call_2"]
    assert request.tools[0].function.name == "get_weather"
    assert request.builtin_tools == ("web_search",)
    assert request.tool_choice == NamedToolChoice(function=NamedFunction(name="get_weather"))
    assert request.response_format is not None
    assert request.response_format.json_schema == {
        "name": "w",
        "schema": {"type": "object"},
        "strict": True,
    }
    assert request.sampling.max_tokens == 200


def test_a_responses_request_on_stored_context_says_so() -> None:
    request = responses_request({"model": "m", "input": "And then?", "previous_response_id": "resp_0"})
    assert request.stored_context == ("previous_response_id",)


def test_a_streamed_responses_reply_is_captured_exactly_as_the_unstreamed_one() -> None:
    whole = responses_response(_body(responses_reply("Sunny.", CALLS)))
    streamed = responses_response(final_response(_sse(responses_stream("Sunny.", CALLS))), streamed=True)
    assert streamed.model_copy(update={"streamed": False}) == whole
    assert whole.message.content == "Sunny."
    assert [c.id for c in whole.message.tool_calls] == ["call_1", "call_2"]
    assert whole.finish_reason == "tool_calls"


def test_a_responses_reply_cut_off_by_its_token_limit_says_length() -> None:
    body = _body(responses_reply("It was"))
    body.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    reply = responses_response(body)
    assert (reply.finish_reason, reply.provider_finish_reason) == ("length", "max_output_tokens")


def test_a_stream_that_ends_before_its_response_completed_is_unreadable() -> None:
    events = _sse(responses_stream("Sunny.", CALLS))[:-1]
    with pytest.raises(CaptureUnreadable, match="before its response completed"):
        final_response(events)


# --- the capture --------------------------------------------------------------------------------------------


def _capture(**overrides: Any) -> Capture:
    request = {"model": "gpt-x", "messages": [{"role": "user", "content": "Mail me at ann@example.com"}]}
    return make_capture(
        "chat_completions", request, _body(chat_reply("Sent to ann@example.com", CALLS)), capture_id="c-1", **overrides
    )


def test_a_capture_round_trips_through_its_wire_form() -> None:
    capture = _capture(
        route="/support",
        prompt_version="v7",
        tags=["beta"],
        headers={"x-experiment": "e1"},
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    )
    again = Capture.model_validate_json(capture.model_dump_json(), context=WIRE_CONTEXT)
    assert again == capture
    assert again.schema_version == SCHEMA_VERSION
    assert again.trace is not None
    assert again.trace.traceparent.startswith("00-0af7")
    assert (again.source.route, again.source.prompt_version, again.hints.tags) == ("/support", "v7", ("beta",))


def test_an_unversioned_capture_from_the_wire_is_refused() -> None:
    raw = json.loads(_capture().model_dump_json())
    del raw["schema_version"]
    with pytest.raises(ValidationError, match="captures start at schema_version 2"):
        Capture.model_validate(raw, context=WIRE_CONTEXT)


def test_what_the_judge_cannot_see_is_named() -> None:
    request = {
        "model": "m",
        "messages": [
            {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "x", "format": "wav"}}]}
        ],
        "tools": [{"type": "custom", "custom": {"name": "grammar"}}],
    }
    capture = make_capture("chat_completions", request, _body(chat_reply("ok")), capture_id="c-2")
    assert capture.unseen == ("audio", "builtin_tools")
    assert _capture().unseen == ()


def test_an_unreadable_exchange_names_the_field_never_the_text() -> None:
    request = {"model": "m", "messages": [{"role": "tool", "content": "secret tool output"}]}
    with pytest.raises(CaptureUnreadable) as caught:
        make_capture("chat_completions", request, _body(chat_reply("ok")), capture_id="c-3")
    assert "tool_call_id" in str(caught.value)
    assert "secret" not in str(caught.value)
    with pytest.raises(CaptureUnreadable, match="no choice"):
        make_capture(
            "chat_completions",
            {"model": "m", "messages": [{"role": "user", "content": "q"}]},
            {"choices": []},
            capture_id="c",
        )


def test_map_texts_reaches_every_text_a_person_or_model_wrote() -> None:
    capture = _capture(headers={"x-user": "ann@example.com"})
    request = {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "ann@example.com"},
                    {"type": "image_url", "image_url": {"url": "u"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "refusal": "no, ann@example.com",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": '{"to": "ann@example.com"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "mailed ann@example.com"},
            {"role": "user", "content": "ok"},
        ],
    }
    capture = make_capture(
        "chat_completions",
        request,
        _body(chat_reply("Sent to ann@example.com", CALLS)),
        capture_id="c-4",
        headers={"x-user": "ann@example.com"},
    )
    mapped = map_texts(capture, lambda t: t.replace("ann@example.com", "[redacted:email]"))
    assert "ann@example.com" not in mapped.model_dump_json()
    assert mapped.request.messages[0].unseen == ("image",)
    assert mapped.request.messages[1].tool_calls[0].function.arguments == '{"to": "[redacted:email]"}'


def test_the_capture_contract_is_exported() -> None:
    assert Capture in EXPORTED
    schema = Capture.model_json_schema()
    assert {"capture_id", "source", "request", "response", "hints", "trace", "schema_version"} <= set(
        schema["properties"]
    )
