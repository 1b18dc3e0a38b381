"""The loopback live stubs speak the real protocols: the official clients' own live code
(google-genai's ``client.aio.live.connect``, the openai SDK's ``client.realtime.connect``) runs a
session against them."""

from __future__ import annotations

import asyncio
import base64

import pytest

from rxllm.testing import Expect, LiveStubServer, Reply, gemini, openai

genai = pytest.importorskip("google.genai")
openai_sdk = pytest.importorskip("openai")


def test_google_genai_live_client_runs_a_session_against_the_gemini_stub(monkeypatch: pytest.MonkeyPatch) -> None:
    from google.genai import types

    script = [Expect("setup"), Reply(gemini.setup_complete(), binary=True), Expect("clientContent"),
              Reply(gemini.text("Shipped")), Reply(gemini.input_transcription("where")),
              Reply(gemini.tool_call(("c1", "get_order", {"order_id": "A17"}))), Expect("toolResponse"),
              Reply(gemini.turn_complete(5, 2)), Reply(gemini.go_away("3s"))]
    with LiveStubServer("gemini", [script]) as server:
        client = genai.Client(api_key="AIza-genai-key")
        # genai forces wss:// for an API key; the loopback stub is plain ws:// on 127.0.0.1
        monkeypatch.setattr(client._api_client, "_websocket_base_url", lambda *_a, **_k: server.url)
        monkeypatch.setattr(client._api_client, "_websocket_ssl_ctx", {})

        async def session() -> list[types.LiveServerMessage]:
            config = types.LiveConnectConfig(response_modalities=["TEXT"], input_audio_transcription={})
            seen = []
            async with client.aio.live.connect(model="gemini-live-2.5-flash", config=config) as live:
                await live.send_client_content(turns=types.Content(role="user", parts=[types.Part(text="hi")]))
                async for message in live.receive():
                    seen.append(message)
                    if message.tool_call:
                        await live.send_tool_response(function_responses=[types.FunctionResponse(
                            id="c1", name="get_order", response={"status": "shipped"})])
                    if message.server_content and message.server_content.turn_complete:
                        break
                async for message in live.receive():
                    seen.append(message)
                    break
            return seen

        seen = asyncio.run(session())
        record = server.connection(0)
        assert record.wait_closed()
    assert seen[0].text == "Shipped"
    assert seen[1].server_content.input_transcription.text == "where"
    assert seen[2].tool_call.function_calls[0].args == {"order_id": "A17"}
    assert seen[3].usage_metadata.total_token_count == 7 and seen[3].server_content.turn_complete
    assert seen[4].go_away.time_left is not None
    setup = record.messages[0]["setup"]
    assert setup["model"] == "models/gemini-live-2.5-flash"
    assert setup["generationConfig"]["responseModalities"] == ["TEXT"]
    (tool_response,) = record.of_kind("toolResponse")
    answer = tool_response.get("toolResponse") or tool_response["tool_response"]
    assert (answer.get("functionResponses") or answer["function_responses"])[0]["id"] == "c1"
    # how the official SDK authenticates (what GeminiModel.connect does too): the key in a header, none in the URL
    assert record.headers["x-goog-api-key"] == "AIza-genai-key"
    assert record.query == {} and record.path.endswith("GenerativeService.BidiGenerateContent")


def test_openai_sdk_realtime_client_runs_a_session_against_the_openai_stub() -> None:
    script = [Reply(openai.session_created()), Expect("session.update"), Expect("response.create"),
              Reply(openai.response_created()), Reply(openai.text("Hi")), Reply(openai.audio(b"\x01\x02")),
              Reply(openai.call_done("call_1", "get_order", '{"order_id": "A17"}')),
              Reply(openai.response_done(input_tokens=3, output_tokens=1))]
    with LiveStubServer("openai", [script]) as server:
        client = openai_sdk.AsyncOpenAI(api_key="sk-sdk-key", base_url=server.url.replace("ws", "http") + "/v1")

        async def session() -> list[object]:
            seen = []
            async with client.realtime.connect(model="gpt-realtime") as connection:
                await connection.session.update(session={"type": "realtime", "output_modalities": ["text"]})
                await connection.conversation.item.create(item={
                    "type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]})
                await connection.response.create()
                async for event in connection:
                    seen.append(event)
                    if event.type == "response.done":
                        break
            return seen

        seen = asyncio.run(session())
        record = server.connection(0)
        assert record.wait_closed()
    assert [e.type for e in seen] == ["session.created", "response.created", "response.output_text.delta",
                                      "response.output_audio.delta", "response.function_call_arguments.done",
                                      "response.done"]
    assert base64.b64decode(seen[3].delta) == b"\x01\x02"
    assert seen[5].response.usage.total_tokens == 4
    assert [m["type"] for m in record.messages] == ["session.update", "conversation.item.create", "response.create"]
    assert record.headers["authorization"] == "Bearer sk-sdk-key"
