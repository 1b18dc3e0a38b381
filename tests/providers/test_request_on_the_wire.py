"""The request each provider's model puts on the wire, as the stub server received it.

One tool-using conversation (system instruction, user text, a model turn with a signed thought,
text and a function call, its function response, a tool, a thinking budget) is sent through the
real model and transport; the body must be exactly the JSON each API documents.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from reactivex import operators as ops

from rxllm import (
    Content,
    FunctionCall,
    FunctionDeclaration,
    GenerateContentConfig,
    LlmRequest,
    Part,
    SseChatModel,
    ThinkingConfig,
    Tool,
)
from rxllm.providers.anthropic import AnthropicModel
from rxllm.providers.gemini import GeminiModel
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import StubResponse, StubServer, sse_turn

KEY = "sk-wire-test-key"
SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
CONVERSATION = LlmRequest(
    contents=[
        Content(role="user", parts=[Part.from_text("Where is order A17?")]),
        Content(
            role="model",
            parts=[
                Part(text="The user wants A17.", thought=True, thought_signature=b"sig-1"),
                Part.from_text("Let me check."),
                Part(function_call=FunctionCall(id="call_1", name="get_order", args={"order_id": "A17"})),
            ],
        ),
        Content(role="user", parts=[Part.from_function_response("get_order", {"status": "shipped"}, id="call_1")]),
    ],
    config=GenerateContentConfig(
        system_instruction="You are a support agent.",
        temperature=0.2,
        max_output_tokens=1024,
        tools=[
            Tool(
                function_declarations=[
                    FunctionDeclaration(name="get_order", description="Look an order up.", parameters=SCHEMA)
                ]
            )
        ],
        thinking_config=ThinkingConfig(include_thoughts=True, thinking_budget=512),
    ),
)

OPENAI_BODY = {
    "model": "gpt-test",
    "messages": [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": "Where is order A17?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_order", "arguments": '{"order_id":"A17"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"status":"shipped"}'},
    ],
    "tools": [
        {
            "type": "function",
            "function": {"name": "get_order", "description": "Look an order up.", "parameters": SCHEMA},
        }
    ],
    "temperature": 0.2,
    "max_tokens": 1024,
    "stream": True,
    "stream_options": {"include_usage": True},
}

ANTHROPIC_BODY = {
    "model": "claude-test",
    "max_tokens": 1024,
    "system": "You are a support agent.",
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Where is order A17?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "The user wants A17.", "signature": "sig-1"},
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "call_1", "name": "get_order", "input": {"order_id": "A17"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": '{"status":"shipped"}'}],
        },
    ],
    "tools": [{"name": "get_order", "description": "Look an order up.", "input_schema": SCHEMA}],
    "temperature": 0.2,
    "thinking": {"type": "enabled", "budget_tokens": 512},
    "stream": True,
}

GEMINI_BODY = {
    "contents": [
        {"role": "user", "parts": [{"text": "Where is order A17?"}]},
        {
            "role": "model",
            "parts": [
                {"text": "The user wants A17.", "thought": True, "thoughtSignature": "c2lnLTE="},
                {"text": "Let me check."},
                {"functionCall": {"name": "get_order", "args": {"order_id": "A17"}, "id": "call_1"}},
            ],
        },
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "get_order", "response": {"status": "shipped"}, "id": "call_1"}}],
        },
    ],
    "systemInstruction": {"parts": [{"text": "You are a support agent."}]},
    "tools": [
        {
            "functionDeclarations": [
                {"name": "get_order", "description": "Look an order up.", "parametersJsonSchema": SCHEMA}
            ]
        }
    ],
    "generationConfig": {
        "temperature": 0.2,
        "maxOutputTokens": 1024,
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 512},
    },
}

CASES: list[tuple[str, str, Callable[[str], SseChatModel], str, dict[str, Any], dict[str, str]]] = [
    (
        "openai-chat",
        "openai",
        lambda url: OpenAiChatModel("gpt-test", base_url=f"{url}/v1", api_key=KEY),
        "/v1/chat/completions",
        OPENAI_BODY,
        {"authorization": f"Bearer {KEY}"},
    ),
    (
        "anthropic",
        "anthropic",
        lambda url: AnthropicModel("claude-test", base_url=url, api_key=KEY),
        "/v1/messages",
        ANTHROPIC_BODY,
        {"x-api-key": KEY, "anthropic-version": "2023-06-01"},
    ),
    (
        "gemini",
        "gemini",
        lambda url: GeminiModel("gemini-test", base_url=url, api_key=KEY),
        "/v1beta/models/gemini-test:streamGenerateContent?alt=sse",
        GEMINI_BODY,
        {"x-goog-api-key": KEY},
    ),
]


@pytest.mark.parametrize(("protocol", "name", "make", "path", "body", "headers"), CASES, ids=[c[1] for c in CASES])
def test_the_server_receives_the_documented_request(
    stub_server: StubServer,
    protocol: str,
    name: str,
    make: Callable[[str], SseChatModel],
    path: str,
    body: dict[str, Any],
    headers: dict[str, str],
) -> None:
    stub_server.enqueue(StubResponse(body=sse_turn(protocol, text=["It shipped."])))
    responses = make(stub_server.url).generate_content(CONVERSATION, stream=True).pipe(ops.to_list()).run()
    assert responses[-1].text() == "It shipped."
    (received,) = stub_server.requests
    assert (received.method, received.path) == ("POST", path)
    assert received.json() == body
    for header, value in headers.items():
        assert received.headers[header] == value
    assert received.headers["content-type"] == "application/json"
    assert KEY not in received.path
