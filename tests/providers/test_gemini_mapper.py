"""GeminiRequestMapper: LlmRequest -> the generativelanguage API's HTTP request."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from rxllm import (
    Blob,
    ConfigurationError,
    Content,
    FunctionCall,
    FunctionDeclaration,
    FunctionResponse,
    GenerateContentConfig,
    LlmRequest,
    Part,
    ThinkingConfig,
    Tool,
)
from rxllm.providers._gemini import GeminiRequestMapper

KEY = "AIza-secret-key-123"
ORDER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"order_id": {"type": "string", "description": "The order number"}},
    "required": ["order_id"],
    "additionalProperties": False,
}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _body(request: LlmRequest, **mapper_options: Any) -> dict[str, Any]:
    mapper = GeminiRequestMapper(api_key=KEY, **mapper_options)
    http = mapper.to_http_request(request, model="gemini-2.5-flash", stream=True)
    body: dict[str, Any] = json.loads(http.body)
    return body


def _conversation() -> LlmRequest:
    return LlmRequest(
        model="gemini-2.5-pro",
        contents=[
            Content(role="user", parts=[Part.from_text("Where is order A17?")]),
            Content(
                role="model",
                parts=[
                    Part(text="The user wants the order status.", thought=True, thought_signature=b"thought-sig"),
                    Part(text="Let me look that up."),
                    Part(
                        function_call=FunctionCall(id="adk-6f1c", name="get_order", args={"order_id": "A17"}),
                        thought_signature=b"call-sig",
                    ),
                ],
            ),
            Content(
                role="user",
                parts=[
                    Part(
                        function_response=FunctionResponse(
                            id="adk-6f1c", name="get_order", response={"status": "shipped", "eta": "Tuesday"}
                        )
                    )
                ],
            ),
        ],
        config=GenerateContentConfig(
            system_instruction="You are a support agent.",
            temperature=0.2,
            top_p=0.9,
            top_k=40,
            max_output_tokens=1024,
            stop_sequences=("END",),
            candidate_count=1,
            seed=7,
            tools=(
                Tool(
                    function_declarations=(
                        FunctionDeclaration(name="get_order", description="Look up an order", parameters=ORDER_SCHEMA),
                    )
                ),
            ),
            thinking_config=ThinkingConfig(include_thoughts=True, thinking_budget=2048),
        ),
    )


def test_conversation_maps_to_the_documented_json() -> None:
    assert _body(_conversation()) == {
        "contents": [
            {"role": "user", "parts": [{"text": "Where is order A17?"}]},
            {
                "role": "model",
                "parts": [
                    {
                        "text": "The user wants the order status.",
                        "thought": True,
                        "thoughtSignature": _b64(b"thought-sig"),
                    },
                    {"text": "Let me look that up."},
                    {
                        "functionCall": {"name": "get_order", "args": {"order_id": "A17"}},
                        "thoughtSignature": _b64(b"call-sig"),
                    },
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "get_order", "response": {"status": "shipped", "eta": "Tuesday"}}}
                ],
            },
        ],
        "systemInstruction": {"parts": [{"text": "You are a support agent."}]},
        "tools": [
            {
                "functionDeclarations": [
                    {"name": "get_order", "description": "Look up an order", "parametersJsonSchema": ORDER_SCHEMA}
                ]
            }
        ],
        "generationConfig": {
            "temperature": 0.2,
            "topP": 0.9,
            "topK": 40,
            "maxOutputTokens": 1024,
            "stopSequences": ["END"],
            "candidateCount": 1,
            "seed": 7,
            "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 2048},
        },
    }


def test_url_header_and_repr_keep_the_key_out_of_sight() -> None:
    mapper = GeminiRequestMapper(api_key=KEY)
    stream = mapper.to_http_request(_conversation(), model="gemini-2.5-pro", stream=True)
    once = mapper.to_http_request(_conversation(), model="gemini-2.5-pro", stream=False)
    base = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro"
    assert stream.url == base + ":streamGenerateContent?alt=sse"
    assert once.url == base + ":generateContent"
    for http in (stream, once):
        assert http.method == "POST"
        assert http.headers["x-goog-api-key"] == KEY
        assert http.headers["content-type"] == "application/json"
        assert KEY not in http.url
        assert KEY not in http.body.decode()
        assert KEY not in repr(http)
    assert stream.headers["accept"] == "text/event-stream"
    assert KEY not in repr(mapper) and KEY not in str(mapper)
    assert "***" in repr(mapper)
    assert mapper.provider == "gemini"


def test_generated_ids_are_stripped_and_provider_ids_kept() -> None:
    request = LlmRequest(
        contents=[
            Content(
                role="model",
                parts=[
                    Part.from_function_call("a", {}, id="adk-123"),
                    Part.from_function_call("b", {"x": 1}, id="call-from-gemini"),
                ],
            ),
            Content(
                role="tool",
                parts=[
                    Part.from_function_response("a", {"ok": True}, id="adk-123"),
                    Part.from_function_response("b", {"ok": False}, id="call-from-gemini"),
                ],
            ),
        ]
    )
    assert _body(request)["contents"] == [
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "a", "args": {}}},
                {"functionCall": {"name": "b", "args": {"x": 1}, "id": "call-from-gemini"}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "a", "response": {"ok": True}}},
                {"functionResponse": {"name": "b", "response": {"ok": False}, "id": "call-from-gemini"}},
            ],
        },
    ]


def test_structured_output_uses_the_json_schema_field() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "$defs": {}}
    request = LlmRequest(
        contents=[Content(role="user", parts=[Part.from_text("Capital of France?")])],
        config=GenerateContentConfig(response_mime_type="application/json", response_schema=schema),
    )
    assert _body(request)["generationConfig"] == {"responseMimeType": "application/json", "responseJsonSchema": schema}


def test_minimal_request_has_only_contents() -> None:
    request = LlmRequest(contents=[Content(parts=[Part.from_text("Hi")])])
    assert _body(request) == {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}


def test_roles_system_contents_empty_contents_and_inline_data() -> None:
    request = LlmRequest(
        contents=[
            Content(role="system", parts=[Part.from_text("Be brief.")]),
            Content(role="user", parts=[Part(inline_data=Blob(mime_type="image/png", data=b"\x89PNG"))]),
            Content(role="model", parts=()),
            Content(role="assistant", parts=[Part.from_text("Noted."), Part(thought=True)]),
        ],
        config=GenerateContentConfig(system_instruction="Be kind.", tools=(Tool(),)),
    )
    assert _body(request) == {
        "contents": [
            {"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": _b64(b"\x89PNG")}}]},
            {"role": "model", "parts": [{"text": "Noted."}]},
        ],
        "systemInstruction": {"parts": [{"text": "Be kind."}, {"text": "Be brief."}]},
    }


def test_signature_only_thought_part_is_sent_as_genai_would() -> None:
    request = LlmRequest(contents=[Content(role="model", parts=[Part(thought=True, thought_signature=b"opaque")])])
    assert _body(request)["contents"] == [
        {"role": "model", "parts": [{"thought": True, "thoughtSignature": _b64(b"opaque")}]}
    ]


@pytest.mark.parametrize(
    ("options", "model", "url"),
    [
        ({}, "models/gemini-2.0-flash", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash"),
        ({}, "tunedModels/my-model", "https://generativelanguage.googleapis.com/v1beta/tunedModels/my-model"),
        (
            {"base_url": "http://127.0.0.1:8080/", "api_version": "v1"},
            "gemini-x",
            "http://127.0.0.1:8080/v1/models/gemini-x",
        ),
        ({}, "a?key=leak#x", "https://generativelanguage.googleapis.com/v1beta/models/a%3Fkey%3Dleak%23x"),
    ],
)
def test_url_shapes(options: dict[str, Any], model: str, url: str) -> None:
    mapper = GeminiRequestMapper(api_key=KEY, **options)
    assert mapper.to_http_request(LlmRequest(), model=model, stream=False).url == url + ":generateContent"


def test_no_key_sends_no_key_header_and_extra_headers_are_added() -> None:
    mapper = GeminiRequestMapper(api_key=None, extra_headers={"x-goog-user-project": "p1"})
    http = mapper.to_http_request(LlmRequest(), model="gemini-x", stream=True)
    assert "x-goog-api-key" not in http.headers
    assert http.headers["x-goog-user-project"] == "p1"


@pytest.mark.parametrize("model", ["", "models/", "   "])
def test_missing_model_is_a_configuration_error(model: str) -> None:
    with pytest.raises(ConfigurationError):
        GeminiRequestMapper(api_key=KEY).to_http_request(LlmRequest(), model=model, stream=True)


@pytest.mark.parametrize(
    "options",
    [
        {"api_key": ""},
        {"api_key": "k\r\nx-evil: 1"},
        {"api_key": KEY, "base_url": ""},
        {"api_key": KEY, "api_version": "a/b"},
    ],
)
def test_bad_configuration_is_rejected_without_echoing_the_key(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError) as info:
        GeminiRequestMapper(**options)
    assert KEY not in str(info.value) and "x-evil" not in str(info.value)


def test_unencodable_arguments_are_a_configuration_error() -> None:
    request = LlmRequest(contents=[Content(role="model", parts=[Part.from_function_call("f", {"x": float("nan")})])])
    with pytest.raises(ConfigurationError):
        GeminiRequestMapper(api_key=KEY).to_http_request(request, model="gemini-x", stream=True)


def test_body_is_compact_utf8() -> None:
    request = LlmRequest(contents=[Content(role="user", parts=[Part.from_text("東京 é")])])
    http = GeminiRequestMapper(api_key=KEY).to_http_request(request, model="gemini-x", stream=True)
    assert http.body == '{"contents":[{"role":"user","parts":[{"text":"東京 é"}]}]}'.encode()
