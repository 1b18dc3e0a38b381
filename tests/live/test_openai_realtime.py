"""OpenAiRealtimeModel against the loopback Realtime stub (real sockets on 127.0.0.1)."""

from __future__ import annotations

from rxllm import (
    Content,
    FunctionDeclaration,
    GenerateContentConfig,
    LlmRequest,
    Part,
    ProviderError,
    Tool,
)
from rxllm.providers.openai import OpenAiRealtimeModel
from rxllm.testing import Expect, LiveStubServer, Reply, openai

from .support import collect

KEY = "sk-realtime-test-key-0123456789"
TOOLS = GenerateContentConfig(tools=[Tool(function_declarations=[FunctionDeclaration(name="get_order")])])
HELLO = Content(role="user", parts=[Part.from_text("Where is order A17?")])


def test_a_turn_with_a_tool_call_transcripts_and_usage() -> None:
    script = [Reply(openai.session_created()), Expect("session.update"), Expect("response.create"),
              Reply(openai.response_created()), Reply(openai.text("Checking.")),
              Reply(openai.output_transcript("Check")), Reply(openai.output_transcript_done("Checking.")),
              Reply(openai.call_arguments("call_1", '{"order_id"')),
              Reply(openai.call_done("call_1", "get_order", '{"order_id": "A17"}')),
              Reply(openai.response_done(input_tokens=12, output_tokens=4))]
    with LiveStubServer("openai", [script]) as server:
        model = OpenAiRealtimeModel("gpt-realtime", base_url=server.url + "/v1", api_key=KEY)
        connection = model.connect(LlmRequest(config=TOOLS))
        assert KEY not in repr(connection)
        connection.send_content(HELLO)
        out = collect(connection.receive(), until_turn_complete=True).wait()
        record = server.connection(0)
        assert record.wait_closed()
    assert record.path == "/v1/realtime" and record.query == {"model": "gpt-realtime"}
    assert record.headers["authorization"] == f"Bearer {KEY}"
    kinds = [m["type"] for m in record.messages]
    assert kinds == ["session.update", "conversation.item.create", "response.create"]
    assert record.messages[0]["session"]["tools"][0]["name"] == "get_order"
    calls = [r for r in out.items if r.function_calls()]
    assert calls[0].text() == "Checking." and calls[0].function_calls()[0].args == {"order_id": "A17"}
    assert calls[0].function_calls()[0].id == "call_1"
    transcript = [r.output_transcription for r in out.items if r.output_transcription and r.partial is None]
    assert [t.text for t in transcript] == ["Checking."]
    assert out.items[-1].turn_complete and out.items[-1].usage_metadata.total_token_count == 16


def test_speech_started_is_an_interruption_and_a_server_error_fails_receive() -> None:
    script = [Reply(openai.session_created()), Expect("session.update"), Reply(openai.text("Your")),
              Reply(openai.speech_started()), Reply(openai.error("Invalid audio format"))]
    with LiveStubServer("openai", [script]) as server:
        connection = OpenAiRealtimeModel("gpt-realtime", base_url=server.url, api_key=KEY).connect(LlmRequest())
        out = collect(connection.receive()).wait()
        assert server.connection(0).wait_closed()
    assert [r.interrupted for r in out.items] == [None, True] and out.items[1].text() == "Your"
    assert isinstance(out.error, ProviderError) and "Invalid audio format" in str(out.error)
