"""OpenAiChatRequestMapper: LlmRequest -> POST /chat/completions, body asserted whole."""

from __future__ import annotations

import json
from typing import Any

import pytest

import rxllm
from rxllm import (
    Blob,
    ConfigurationError,
    Content,
    FunctionDeclaration,
    GenerateContentConfig,
    LlmRequest,
    Part,
    RequestMapper,
    ThinkingConfig,
    Tool,
)
from rxllm.providers._openai_chat import OpenAiChatRequestMapper

from .contents import model, user

KEY = "sk-test-SECRET-0123456789"

GET_ORDER = FunctionDeclaration(
    name="get_order",
    description="Look up an order.",
    parameters={"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
)


def body_of(mapper: OpenAiChatRequestMapper, request: LlmRequest, *, stream: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(mapper.to_http_request(request, model="gpt-4o-mini", stream=stream).body)
    return body


@pytest.fixture
def mapper() -> OpenAiChatRequestMapper:
    return OpenAiChatRequestMapper(base_url="https://api.openai.com/v1/", api_key=KEY)


def test_is_a_request_mapper(mapper: OpenAiChatRequestMapper) -> None:
    as_protocol: RequestMapper = mapper
    assert as_protocol.provider == "openai"


def test_tool_using_conversation_maps_to_the_exact_body(mapper: OpenAiChatRequestMapper) -> None:
    request = LlmRequest(
        model="ignored-here",
        contents=[
            user(Part.from_text("Where is order A17?")),
            model(
                Part(text="Let me think.", thought=True, thought_signature=b"sig"),
                Part.from_text("Checking "),
                Part.from_text("now."),
                Part.from_function_call("get_order", {"order_id": "A17"}, id="call_1"),
            ),
            user(Part.from_function_response("get_order", {"status": "shipped", "eta": "Tuesday"}, id="call_1")),
        ],
        config=GenerateContentConfig(
            system_instruction="You are a helpful shop assistant.",
            tools=[Tool(function_declarations=[GET_ORDER])],
            temperature=0.2,
        ),
    )
    http = mapper.to_http_request(request, model="gpt-4o-mini", stream=True)

    assert http.method == "POST"
    assert http.url == "https://api.openai.com/v1/chat/completions"
    assert http.headers == {
        "Authorization": f"Bearer {KEY}",
        "content-type": "application/json",
        "accept": "text/event-stream",
        "user-agent": f"rxllm/{rxllm.__version__}",
    }
    assert json.loads(http.body) == {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are a helpful shop assistant."},
            {"role": "user", "content": "Where is order A17?"},
            {
                "role": "assistant",
                "content": "Checking now.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_order", "arguments": '{"order_id":"A17"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"status":"shipped","eta":"Tuesday"}'},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_order",
                    "description": "Look up an order.",
                    "parameters": {
                        "type": "object",
                        "properties": {"order_id": {"type": "string"}},
                        "required": ["order_id"],
                    },
                },
            }
        ],
        "temperature": 0.2,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_body_is_compact_utf8_json(mapper: OpenAiChatRequestMapper) -> None:
    request = LlmRequest(contents=[user(Part.from_text("¿Dónde está mi pedido? 🚚"))])
    body = mapper.to_http_request(request, model="m", stream=False).body
    assert body == '{"model":"m","messages":[{"role":"user","content":"¿Dónde está mi pedido? 🚚"}]}'.encode()


def test_without_key_there_is_no_authorization_header() -> None:
    for key in (None, ""):
        mapper = OpenAiChatRequestMapper(base_url="http://127.0.0.1:11434/v1", api_key=key)
        http = mapper.to_http_request(LlmRequest(), model="qwen2.5", stream=False)
        assert {name.lower() for name in http.headers} == {"content-type", "accept", "user-agent"}
        assert http.headers["accept"] == "application/json"
        assert http.url == "http://127.0.0.1:11434/v1/chat/completions"


def test_repr_hides_the_key(mapper: OpenAiChatRequestMapper) -> None:
    with_header = OpenAiChatRequestMapper(
        base_url="https://x.example/v1", api_key=KEY, extra_headers={"Authorization": f"Bearer {KEY}"}
    )
    http = mapper.to_http_request(LlmRequest(), model="m", stream=True)
    for shown in (repr(mapper), str(mapper), repr(with_header), repr(http)):
        assert "SECRET" not in shown
    assert "***" in repr(mapper)
    assert "api_key=None" in repr(OpenAiChatRequestMapper(base_url="http://h", api_key=None))


def test_extra_headers_are_sent_and_win_over_defaults() -> None:
    mapper = OpenAiChatRequestMapper(
        base_url="https://openrouter.ai/api/v1",
        api_key=KEY,
        extra_headers={"HTTP-Referer": "https://app.example", "authorization": "Bearer other", "Accept": "*/*"},
    )
    headers = mapper.to_http_request(LlmRequest(), model="m", stream=True).headers
    assert headers == {
        "content-type": "application/json",
        "HTTP-Referer": "https://app.example",
        "authorization": "Bearer other",
        "Accept": "*/*",
        "user-agent": f"rxllm/{rxllm.__version__}",
    }


def test_config_maps_to_body_fields(mapper: OpenAiChatRequestMapper) -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"city": {"type": "string"}}}
    config = GenerateContentConfig(
        temperature=0.5,
        top_p=0.9,
        top_k=40,
        max_output_tokens=256,
        stop_sequences=["END", "STOP"],
        seed=7,
        candidate_count=2,
        response_mime_type="application/json",
        response_schema=schema,
        thinking_config=ThinkingConfig(include_thoughts=True, thinking_budget=1024),
    )
    body = body_of(mapper, LlmRequest(config=config), stream=False)
    assert body == {
        "model": "gpt-4o-mini",
        "messages": [],
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 40,
        "max_tokens": 256,
        "stop": ["END", "STOP"],
        "seed": 7,
        "n": 2,
        "response_format": {"type": "json_schema", "json_schema": {"name": "response", "strict": True, "schema": {
            "type": "object", "properties": {"city": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
            "required": ["city"], "additionalProperties": False}}},  # strict: all required, optionals nullable
    }


def test_max_completion_tokens_and_json_object() -> None:
    mapper = OpenAiChatRequestMapper(base_url="https://h/v1", api_key=None, max_tokens_param="max_completion_tokens")
    config = GenerateContentConfig(max_output_tokens=100, response_mime_type="application/json")
    body = body_of(mapper, LlmRequest(config=config), stream=False)
    assert body == {
        "model": "gpt-4o-mini",
        "messages": [],
        "max_completion_tokens": 100,
        "response_format": {"type": "json_object"},
    }


@pytest.mark.parametrize(
    "config",
    [
        GenerateContentConfig(response_mime_type="text/x.enum"),
        GenerateContentConfig(response_mime_type="text/x.enum", response_schema={"type": "object"}),
    ],
)
def test_unsupported_response_formats_are_configuration_errors(
    mapper: OpenAiChatRequestMapper, config: GenerateContentConfig
) -> None:
    with pytest.raises(ConfigurationError):
        mapper.to_http_request(LlmRequest(config=config), model="m", stream=True)


def test_user_images_become_data_urls_and_other_blobs_are_refused(mapper: OpenAiChatRequestMapper) -> None:
    image = Part(inline_data=Blob(mime_type="image/png", data=b"\x89PNG"))
    body = body_of(mapper, LlmRequest(contents=[user(Part.from_text("What is this?"), image)]))
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}},
            ],
        }
    ]
    pdf = Part(inline_data=Blob(mime_type="application/pdf", data=b"%PDF"))
    with pytest.raises(ConfigurationError, match="application/pdf"):
        mapper.to_http_request(LlmRequest(contents=[user(pdf)]), model="m", stream=True)


def test_thoughts_are_never_sent_back(mapper: OpenAiChatRequestMapper) -> None:
    request = LlmRequest(
        contents=[
            user(Part.from_text("hi")),
            model(Part(text="only thinking", thought=True)),
            model(Part(text="pondering", thought=True), Part.from_text("Hello!")),
        ]
    )
    assert body_of(mapper, request)["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello!"},
    ]


def test_calls_without_text_have_null_content_and_ids_are_made_up_when_missing(
    mapper: OpenAiChatRequestMapper,
) -> None:
    request = LlmRequest(
        contents=[
            model(Part.from_function_call("a", {}), Part.from_function_call("a", {"n": 2})),
            user(Part.from_function_response("a", {"r": 1}), Part.from_function_response("a", {"r": 2})),
        ]
    )
    assert body_of(mapper, request)["messages"] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call00001", "type": "function", "function": {"name": "a", "arguments": "{}"}},
                {"id": "call00002", "type": "function", "function": {"name": "a", "arguments": '{"n":2}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "call00001", "content": '{"r":1}'},
        {"role": "tool", "tool_call_id": "call00002", "content": '{"r":2}'},
    ]


def test_response_without_id_or_matching_call_is_a_configuration_error(mapper: OpenAiChatRequestMapper) -> None:
    request = LlmRequest(contents=[user(Part.from_function_response("orphan", {}))])
    with pytest.raises(ConfigurationError, match="orphan"):
        mapper.to_http_request(request, model="m", stream=True)


def test_tool_messages_come_before_text_in_the_same_turn(mapper: OpenAiChatRequestMapper) -> None:
    request = LlmRequest(
        contents=[
            model(Part.from_function_call("f", {}, id="c1")),
            user(Part.from_function_response("f", {"ok": True}, id="c1"), Part.from_text("thanks")),
        ]
    )
    assert [m["role"] for m in body_of(mapper, request)["messages"]] == ["assistant", "tool", "user"]


def test_tools_without_description_or_parameters(mapper: OpenAiChatRequestMapper) -> None:
    config = GenerateContentConfig(tools=[Tool(function_declarations=[FunctionDeclaration(name="ping")])])
    assert body_of(mapper, LlmRequest(config=config))["tools"] == [{"type": "function", "function": {"name": "ping"}}]


@pytest.mark.parametrize(
    "content",
    [
        Content(role="critic", parts=[Part.from_text("x")]),
        Content(role="model", parts=[Part(inline_data=Blob(mime_type="image/png", data=b"x"))]),
        Content(role="user", parts=[Part.from_function_call("f", {}, id="c")]),
    ],
)
def test_inexpressible_contents_are_configuration_errors(mapper: OpenAiChatRequestMapper, content: Content) -> None:
    with pytest.raises(ConfigurationError):
        mapper.to_http_request(LlmRequest(contents=[content]), model="m", stream=True)


def test_bad_constructor_arguments() -> None:
    with pytest.raises(ConfigurationError):
        OpenAiChatRequestMapper(base_url="", api_key=None)
    with pytest.raises(ConfigurationError):
        OpenAiChatRequestMapper(base_url="http://h", api_key=None, max_tokens_param="tokens")  # type: ignore[arg-type]


def test_a_default_config_maps_as_one_whose_options_are_set_to_their_defaults(
    mapper: OpenAiChatRequestMapper,
) -> None:
    """The request of a config with no option set (built without checking any option) is the one
    of a config whose every option was passed as its default, byte for byte, streamed or not."""
    contents = (user(Part.from_text("Where is order A17?")),)
    # every option passed as None (response_schema refuses an explicit None: left out)
    options = {name: None for name in GenerateContentConfig.model_fields if name != "response_schema"}
    every_option_none = GenerateContentConfig(**options)  # type: ignore[arg-type]
    assert every_option_none.model_fields_set and not GenerateContentConfig().model_fields_set
    for stream in (True, False):
        fast = mapper.to_http_request(LlmRequest(contents=contents), model="gpt-4o-mini", stream=stream)
        slow = mapper.to_http_request(LlmRequest(contents=contents, config=every_option_none), model="gpt-4o-mini",
                                      stream=stream)
        assert (fast.url, fast.body, fast.headers) == (slow.url, slow.body, slow.headers)
    assert json.loads(fast.body) == {"model": "gpt-4o-mini",
                                     "messages": [{"role": "user", "content": "Where is order A17?"}]}


def test_a_config_with_an_option_set_is_still_checked(mapper: OpenAiChatRequestMapper) -> None:
    request = LlmRequest(contents=(user(Part.from_text("hi")),), config=GenerateContentConfig(temperature=0.5))
    assert json.loads(mapper.to_http_request(request, model="m", stream=False).body)["temperature"] == 0.5
    csv = GenerateContentConfig(response_mime_type="text/csv")
    refused = LlmRequest(contents=(user(Part.from_text("hi")),), config=csv)
    with pytest.raises(ConfigurationError, match="text/csv"):
        mapper.to_http_request(refused, model="m", stream=False)
