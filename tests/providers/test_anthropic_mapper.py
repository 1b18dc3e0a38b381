"""AnthropicRequestMapper: LlmRequest -> the Messages API request Anthropic documents."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rxllm import (
    Blob,
    ConfigurationError,
    Content,
    FunctionDeclaration,
    GenerateContentConfig,
    HttpRequest,
    LlmRequest,
    Part,
    ThinkingConfig,
    Tool,
)
from rxllm.providers._anthropic import AnthropicRequestMapper

from .contents import model, user

KEY = "sk-ant-api03-very-secret-key"
WEATHER = FunctionDeclaration(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CLOCK = FunctionDeclaration(name="get_time")


def body_of(request: HttpRequest) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(request.body)
    return parsed


def build(contents: list[Content], stream: bool = False, **config: Any) -> dict[str, Any]:
    mapper = AnthropicRequestMapper(api_key=KEY)
    request = LlmRequest(contents=contents, config=GenerateContentConfig(**config))
    return body_of(mapper.to_http_request(request, model="claude-sonnet-4-5", stream=stream))


def test_tool_using_conversation_with_thinking_maps_to_the_documented_json() -> None:
    contents = [
        user(Part.from_text("What's the weather in Paris?")),
        model(
            Part(
                text="The user wants the weather; call the tool.", thought=True, thought_signature=b"EqQBCkgIARABGAIiQL"
            ),
            Part.from_text("Let me check."),
            Part.from_function_call("get_weather", {"city": "Paris"}, id="toolu_01A09q90qw90lq917835lq9"),
        ),
        user(
            Part.from_function_response(
                "get_weather", {"temperature_c": 18, "sky": "clear"}, id="toolu_01A09q90qw90lq917835lq9"
            )
        ),
    ]
    request = LlmRequest(
        contents=contents,
        config=GenerateContentConfig(
            system_instruction="You are a concise weather assistant.",
            tools=[Tool(function_declarations=[WEATHER, CLOCK])],
            thinking_config=ThinkingConfig(thinking_budget=2048),
        ),
    )
    http = AnthropicRequestMapper(api_key=KEY).to_http_request(request, model="claude-sonnet-4-5", stream=True)

    assert http.method == "POST"
    assert http.url == "https://api.anthropic.com/v1/messages"
    assert http.headers["x-api-key"] == KEY
    assert http.headers["anthropic-version"] == "2023-06-01"
    assert http.headers["content-type"] == "application/json"
    assert body_of(http) == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "system": "You are a concise weather assistant.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "What's the weather in Paris?"}]},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "thinking",
                        "thinking": "The user wants the weather; call the tool.",
                        "signature": "EqQBCkgIARABGAIiQL",
                    },
                    {"type": "text", "text": "Let me check."},
                    {
                        "type": "tool_use",
                        "id": "toolu_01A09q90qw90lq917835lq9",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
                        "content": '{"temperature_c":18,"sky":"clear"}',
                    }
                ],
            },
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            },
            {"name": "get_time", "input_schema": {"type": "object", "properties": {}}},
        ],
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "stream": True,
    }


def test_the_key_never_shows_in_a_repr() -> None:
    mapper = AnthropicRequestMapper(api_key=KEY)
    http = mapper.to_http_request(LlmRequest(contents=[user(Part.from_text("hi"))]), model="m", stream=False)
    assert KEY not in repr(mapper)
    assert KEY not in repr(http)
    assert "'***'" in repr(mapper)


def test_no_key_sends_no_key_header_and_extra_headers_are_sent() -> None:
    mapper = AnthropicRequestMapper(base_url="http://127.0.0.1:9/", extra_headers={"anthropic-beta": "x-2025"})
    http = mapper.to_http_request(LlmRequest(contents=[user(Part.from_text("hi"))]), model="m", stream=False)
    assert "x-api-key" not in http.headers
    assert http.headers["anthropic-beta"] == "x-2025"
    assert http.url == "http://127.0.0.1:9/v1/messages"
    assert mapper.provider == "anthropic"


def test_not_streaming_omits_stream_and_sampling_options_are_sent() -> None:
    body = build(
        [user(Part.from_text("hi"))],
        temperature=0.2,
        top_p=0.9,
        top_k=40,
        stop_sequences=("END",),
        max_output_tokens=100,
    )
    assert body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "stop_sequences": ["END"],
        "temperature": 0.2,
        "top_p": 0.9,
        "top_k": 40,
    }


def test_consecutive_turns_of_one_role_merge_and_tool_results_come_first() -> None:
    body = build(
        [
            user(Part.from_text("a")),
            user(Part.from_text("b")),
            model(Part.from_function_call("f", {}, id="t1"), Part.from_function_call("g", {"x": 1}, id="t2")),
            user(Part.from_function_response("f", {"ok": True}, id="t1")),
            user(Part.from_text("and also"), Part.from_function_response("g", {"ok": False}, id="t2")),
        ]
    )
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][0]["content"] == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": '{"ok":true}'},
        {"type": "tool_result", "tool_use_id": "t2", "content": '{"ok":false}'},
        {"type": "text", "text": "and also"},
    ]


def test_merging_keeps_thinking_first_in_assistant_and_tool_results_first_in_user_messages() -> None:
    body = build(
        [
            user(Part.from_text("q")),
            model(Part.from_text("Sure.")),
            model(Part(text="plan", thought=True, thought_signature=b"s"), Part.from_function_call("f", {}, id="t1")),
            user(Part.from_text("note")),
            user(Part.from_function_response("f", {}, id="t1")),
        ]
    )
    assert body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "plan", "signature": "s"},
        {"type": "text", "text": "Sure."},
        {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
    ]
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "{}"},
        {"type": "text", "text": "note"},
    ]


def test_signature_only_thought_becomes_redacted_thinking_and_unsigned_thoughts_are_left_out() -> None:
    body = build(
        [
            user(Part.from_text("q")),
            model(
                Part(text="unsigned musing", thought=True),
                Part(thought=True, thought_signature=b"opaque-data=="),
                Part(text="signed", thought=True, thought_signature=b"sig"),
                Part(text="not utf8", thought=True, thought_signature=b"\xff\xfe"),
                Part.from_text("answer"),
            ),
        ]
    )
    assert body["messages"][1]["content"] == [
        {"type": "redacted_thinking", "data": "opaque-data=="},
        {"type": "thinking", "thinking": "signed", "signature": "sig"},
        {"type": "text", "text": "answer"},
    ]


def test_empty_contents_and_empty_text_are_dropped_and_system_contents_fold_into_system() -> None:
    body = build(
        [
            Content(role="system", parts=[Part.from_text("Be brief.")]),
            user(Part.from_text("")),
            user(Part.from_text("hi")),
            model(),
        ],
        system_instruction="You help.",
    )
    assert body["system"] == "You help.\n\nBe brief."
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_calls_without_ids_get_ids_paired_with_their_responses_by_name() -> None:
    body = build(
        [
            user(Part.from_text("q")),
            model(Part.from_function_call("f", {"n": 1}), Part.from_function_call("f", {"n": 2})),
            user(Part.from_function_response("f", {"r": 1}), Part.from_function_response("f", {"r": 2})),
        ]
    )
    call_ids = [b["id"] for b in body["messages"][1]["content"]]
    result_ids = [b["tool_use_id"] for b in body["messages"][2]["content"]]
    assert len(set(call_ids)) == 2 and call_ids == result_ids


def test_a_response_without_id_and_without_a_matching_call_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        build([user(Part.from_function_response("f", {}))])


def test_images_and_pdfs_are_sent_inline_other_blobs_are_refused() -> None:
    body = build(
        [
            user(
                Part(inline_data=Blob(mime_type="image/png", data=b"\x89PNG")),
                Part(inline_data=Blob(mime_type="application/pdf", data=b"%PDF")),
            )
        ]
    )
    assert body["messages"][0]["content"] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERg=="}},
    ]
    with pytest.raises(ConfigurationError):
        build([user(Part(inline_data=Blob(mime_type="audio/wav", data=b"RIFF")))])


def test_thinking_budget_and_max_tokens() -> None:
    contents = [user(Part.from_text("q"))]
    # a budget at or above the default max_tokens: the default is added on top, so the answer has room
    body = build(contents, thinking_config=ThinkingConfig(thinking_budget=10000))
    assert body["max_tokens"] == 14096 and body["thinking"] == {"type": "enabled", "budget_tokens": 10000}
    # an explicit max_output_tokens wins, and must leave room above the budget
    assert (
        build(contents, max_output_tokens=9000, thinking_config=ThinkingConfig(thinking_budget=2000))["max_tokens"]
        == 9000
    )
    with pytest.raises(ConfigurationError):
        build(contents, max_output_tokens=2000, thinking_config=ThinkingConfig(thinking_budget=2000))
    # budget 0 turns thinking off; -1 (dynamic) has no Anthropic equivalent
    assert "thinking" not in build(contents, thinking_config=ThinkingConfig(thinking_budget=0))
    with pytest.raises(ConfigurationError):
        build(contents, thinking_config=ThinkingConfig(thinking_budget=-1))


@pytest.mark.parametrize(
    "config",
    [{"candidate_count": 2}],
    ids=["candidates"],
)
def test_requests_anthropic_cannot_express_are_refused(config: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        build([user(Part.from_text("q"))], **config)


def test_unknown_role_is_refused_and_bad_max_tokens_too() -> None:
    with pytest.raises(ConfigurationError):
        build([Content(role="narrator", parts=[Part.from_text("q")])])
    with pytest.raises(ConfigurationError):
        AnthropicRequestMapper(api_key=KEY, max_tokens=0)
