"""GeminiModel.connect against the loopback Gemini Live stub: real sockets on 127.0.0.1; every
"closed" is what the server observed."""

from __future__ import annotations

import asyncio
import threading

import pytest

from rxllm import (
    Blob,
    BufferOverflowError,
    ConfigurationError,
    Content,
    FunctionCallingConfig,
    FunctionDeclaration,
    GenerateContentConfig,
    HttpStatusError,
    LiveConnectConfig,
    LiveLimits,
    LlmRequest,
    Part,
    ProtocolError,
    ResponseTooLargeError,
    SafetySetting,
    StreamInterruptedError,
    StreamTimeoutError,
    Tool,
    ToolConfig,
    TransportError,
)
from rxllm.providers._gemini_live import connect_gemini_live
from rxllm.providers.gemini import GeminiModel
from rxllm.providers.openai import OpenAiRealtimeModel
from rxllm.testing import CloseWith, Drop, Expect, LiveStubServer, Oversized, Reply, gemini

from .support import TIMEOUT, collect

KEY = "AIza-live-test-key-0123456789"
TOOLS = GenerateContentConfig(tools=[Tool(function_declarations=[FunctionDeclaration(name="get_order")])])
HELLO = Content(role="user", parts=[Part.from_text("Where is order A17?")])
OPEN = [Expect("setup"), Reply(gemini.setup_complete())]


def model_for(server: LiveStubServer) -> GeminiModel:
    return GeminiModel("gemini-live-2.5-flash", base_url=server.url, api_key=KEY)


def test_a_text_turn_streams_partials_then_the_whole_turn_and_the_key_travels_only_in_its_header() -> None:
    script = [*OPEN, Expect("clientContent"), Reply(gemini.text("Shipped")), Reply(gemini.text(" today."), binary=True),
              Reply(gemini.turn_complete(7, 3))]
    with LiveStubServer("gemini", [script], api_key=KEY) as server:  # refuses a key anywhere else
        connection = model_for(server).connect(LlmRequest(config=GenerateContentConfig(system_instruction="Be brief.")))
        assert KEY not in repr(connection)
        connection.send_content(HELLO)
        out = collect(connection.receive(), until_turn_complete=True).wait()
        record = server.connection(0)
        assert record.wait_closed()  # take_while disposed: the session closed
    assert out.texts() == ["Shipped", " today.", "Shipped today."]
    assert out.items[-1].turn_complete and out.items[-1].usage_metadata.total_token_count == 10
    assert record.headers["x-goog-api-key"] == KEY  # as google-genai sends it
    assert record.query == {} and KEY not in record.target and "authorization" not in record.headers
    assert record.path.endswith("GenerativeService.BidiGenerateContent")
    setup, sent = record.messages[0]["setup"], record.messages[1]
    assert setup["model"] == "models/gemini-live-2.5-flash"
    assert setup["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert sent == {"clientContent": {"turns": [{"role": "user", "parts": [{"text": "Where is order A17?"}]}],
                                      "turnComplete": True}}
    assert record.close_code == 1000


def test_nothing_is_sent_before_setup_complete() -> None:
    script = [Expect("setup"), Reply(gemini.text("early")), Reply(gemini.setup_complete()), Expect("clientContent")]
    with LiveStubServer("gemini", [script]) as server:
        connection = model_for(server).connect(LlmRequest())
        done = connection.send_content(HELLO)
        out = collect(connection.receive())
        assert out.first.wait(TIMEOUT)
        record = server.connection(0)
        assert [next(iter(m)) for m in record.wait_messages(2)] == ["setup", "clientContent"]
        asyncio.run(_await(done))
        connection.close()
        out.wait()
    assert out.completed and out.texts() == ["early"]


async def _await(observable: object) -> object:
    return await observable  # type: ignore[misc]


def test_a_session_with_tools_transcriptions_interruption_go_away_and_resumption() -> None:
    script = [*OPEN, Expect("clientContent"),
              Reply(gemini.input_transcription("Where is")), Reply(gemini.input_transcription(" A17?")),
              Reply(gemini.text("Checking.")), Reply(gemini.tool_call(("c1", "get_order", {"order_id": "A17"}))),
              Expect("toolResponse"), Reply(gemini.output_transcription("It shipped")), Reply(gemini.interrupted()),
              Reply(gemini.turn_complete()), Reply(gemini.tool_call_cancellation("c1")),
              Reply(gemini.resumption("handle-2")), Reply(gemini.go_away("10s"))]
    with LiveStubServer("gemini", [script]) as server:
        request = LlmRequest(config=TOOLS, live_connect_config=LiveConnectConfig(
            input_audio_transcription={}, output_audio_transcription={}, session_resumption={}))
        connection = model_for(server).connect(request)
        connection.send_content(HELLO)
        seen = []

        def on_next(response):  # answers the tool call as run_live would
            seen.append(response)
            if response.function_calls():
                call = response.function_calls()[0]
                connection.send_content(Content(role="user", parts=[Part.from_function_response(
                    name=call.name, response={"status": "shipped"}, id=call.id)]))
            if response.go_away is not None:
                connection.close()

        done: list[object] = []
        ended = threading.Event()
        connection.receive().subscribe(on_next, lambda e: (done.append(e), ended.set()),
                                       lambda: (done.append("completed"), ended.set()))
        record = server.connection(0)
        assert record.wait_closed() and ended.wait(TIMEOUT)
    assert done == ["completed"]
    tool_response = record.of_kind("toolResponse")[0]["toolResponse"]
    assert tool_response == {
        "functionResponses": [{"name": "get_order", "response": {"status": "shipped"}, "id": "c1"}]}
    assert record.messages[0]["setup"]["sessionResumption"] == {}
    finished_input = [r for r in seen if r.input_transcription and r.input_transcription.finished]
    assert [r.input_transcription.text for r in finished_input] == ["Where is A17?"]
    calls = [r for r in seen if r.function_calls()]
    assert calls[0].text() == "Checking." and calls[0].partial is None
    assert any(r.interrupted for r in seen) and any(r.turn_complete for r in seen)
    assert [r.tool_call_cancellation.ids for r in seen if r.tool_call_cancellation] == [("c1",)]
    assert [r.live_session_resumption_update.new_handle for r in seen if r.live_session_resumption_update] == [
        "handle-2"]
    assert seen[-1].go_away.time_left == "10s"


def test_disposing_receive_closes_the_socket_at_once() -> None:
    with LiveStubServer("gemini", [[*OPEN, Reply(gemini.text("hello"))]]) as server:
        connection = model_for(server).connect(LlmRequest())
        out = collect(connection.receive())
        assert out.first.wait(TIMEOUT)
        record = server.connection(0)
        assert not record.closed
        out.subscription.dispose()
        assert record.wait_closed() and record.close_code == 1000
        assert connection.wait_closed(TIMEOUT)
    assert connection.state == "closed"
    with pytest.raises(TransportError, match="closed"):
        asyncio.run(_await(connection.send_content(HELLO)))


def test_close_with_an_error_fails_receive_with_it() -> None:
    with LiveStubServer("gemini", [OPEN]) as server:
        connection = model_for(server).connect(LlmRequest())
        out = collect(connection.receive())
        record = server.connection(0)
        record.wait_messages(1)
        connection.close(RuntimeError("user hung up"))
        out.wait()
        assert record.wait_closed() and record.close_code == 1011
    assert isinstance(out.error, StreamInterruptedError) and "user hung up" in str(out.error)


def test_a_thousand_realtime_frames_echo_back_without_loss_or_reordering() -> None:
    frames = [i.to_bytes(2, "big") * 160 for i in range(1000)]  # 20 ms of 16 kHz PCM each
    with LiveStubServer("gemini", [OPEN], echo=True) as server:
        connection = model_for(server).connect(LlmRequest())
        out = collect(connection.receive())

        async def send_all() -> None:  # each send awaited: the pace of the socket, no overflow
            for frame in frames:
                await connection.send_realtime(Blob(mime_type="audio/pcm;rate=16000", data=frame))

        asyncio.run(send_all())
        record = server.connection(0)
        assert len(record.wait_messages(1001)) == 1001
        while len(out.items) < 1000 and not out.done.is_set():
            out.first.clear()
            out.first.wait(TIMEOUT)
        connection.close()
    assert [r.content.parts[0].inline_data.data for r in out.items] == frames
    assert all(r.partial for r in out.items)


def test_a_connection_dropped_mid_turn_fails_receive_and_the_turn_is_not_complete() -> None:
    script = [*OPEN, Expect("clientContent"), Reply(gemini.text("Your order")), Drop()]
    with LiveStubServer("gemini", [script]) as server:
        connection = model_for(server).connect(LlmRequest())
        connection.send_content(HELLO)
        out = collect(connection.receive()).wait()
    assert isinstance(out.error, StreamInterruptedError)
    assert out.texts() == ["Your order"] and not any(r.turn_complete for r in out.items)
    assert connection.turn_in_progress


@pytest.mark.parametrize(("script", "error", "match"), [
    ([Expect("setup"), CloseWith(1000)], ProtocolError, "closed the connection during setup"),
    ([*OPEN, Reply("{this is not json")], ProtocolError, "not JSON"),
    ([*OPEN, Reply({"brandNewMessage": {}})], ProtocolError, "unknown Gemini Live message"),
    ([*OPEN, Reply(gemini.tool_call(("c9", "drop_tables", {})))], ProtocolError, "did not declare"),
    ([*OPEN, Reply(b"\x89PNG\r\n\x1a\n")], ProtocolError, "binary message is not JSON"),
    ([*OPEN, Oversized(10 * 1024 * 1024)], ResponseTooLargeError, "bytes"),
], ids=["close-during-setup", "invalid-json", "unknown-type", "undeclared-tool", "binary", "10MB"])
def test_bad_input_fails_receive_with_a_clear_error_and_closes_the_socket(script, error, match) -> None:
    with LiveStubServer("gemini", [script]) as server:
        connection = model_for(server).connect(LlmRequest(config=TOOLS))
        out = collect(connection.receive()).wait()
        record = server.connection(0)
        assert record.wait_closed()
    assert isinstance(out.error, error), out.error
    assert match in str(out.error)
    assert KEY not in str(out.error)


def test_a_caller_sending_faster_than_the_socket_drains_gets_buffer_overflow() -> None:
    hold = [Expect("setup")]  # no setupComplete: nothing the caller sends can be written
    with LiveStubServer("gemini", [hold]) as server:
        connection = model_for(server).connect(LlmRequest(), limits=LiveLimits(max_pending_sends=2))
        first, second = connection.send_content(HELLO), connection.send_content(HELLO)
        with pytest.raises(BufferOverflowError, match="max_pending_sends=2"):
            asyncio.run(_await(connection.send_content(HELLO)))
        connection.close()
        for queued in (first, second):
            with pytest.raises(TransportError, match="before this send was written"):
                asyncio.run(_await(queued))
        assert server.connection(0).wait_closed()


def test_a_silent_server_hits_the_idle_deadline() -> None:
    with LiveStubServer("gemini", [OPEN]) as server:
        connection = model_for(server).connect(LlmRequest(), limits=LiveLimits(idle_timeout=0.2))
        out = collect(connection.receive()).wait()
        assert server.connection(0).wait_closed()
    assert isinstance(out.error, StreamTimeoutError) and out.error.limit == "idle"


def test_receive_may_be_subscribed_once_and_async_iteration_works() -> None:
    script = [*OPEN, Expect("clientContent"), Reply(gemini.text("A")), Reply(gemini.turn_complete())]
    with LiveStubServer("gemini", [script]) as server:
        connection = model_for(server).connect(LlmRequest())

        async def main() -> list[str]:
            await connection.send_content(HELLO)
            texts = []
            async for response in connection.receive():
                texts.append(response.text())
                if response.turn_complete:
                    break
            return texts

        assert asyncio.run(main()) == ["A", "A"]
        assert server.connection(0).wait_closed()
    again = collect(connection.receive()).wait()
    assert isinstance(again.error, ConfigurationError) and "subscribed once" in str(again.error)


def test_a_key_is_never_sent_over_plain_ws_to_a_remote_host() -> None:
    with pytest.raises(ConfigurationError, match="refusing to send a credential over plain ws://") as info:
        OpenAiRealtimeModel("gpt-realtime", base_url="ws://live.example.com/v1", api_key=KEY).connect(LlmRequest())
    assert KEY not in str(info.value)


@pytest.mark.parametrize("key", [KEY, "auth_tokens/ephemeral-0123456789"])
def test_a_gemini_key_in_its_header_is_never_sent_over_plain_ws_to_a_remote_host(key: str) -> None:
    """The live check itself (GeminiModel already refuses such a base_url when it is built)."""
    with pytest.raises(ConfigurationError, match="refusing to send a credential over plain ws://") as info:
        connect_gemini_live(LlmRequest(), model="gemini-live-2.5-flash", base_url="ws://live.example.com",
                            api_version="v1beta", api_key=key, extra_headers=None, http_client=None, limits=None)
    assert key not in str(info.value)


def test_a_key_the_server_refuses_fails_receive_and_no_error_shows_it() -> None:
    with LiveStubServer("gemini", [OPEN], api_key="AIza-the-right-key-000000") as server:
        connection = model_for(server).connect(LlmRequest())
        out = collect(connection.receive()).wait()
        assert server.connections == []  # refused at the upgrade
    assert isinstance(out.error, HttpStatusError) and out.error.status_code == 401
    assert out.error.provider_message == "API key not valid. Please pass a valid API key."
    assert KEY not in str(out.error) and KEY not in repr(out.error) and KEY not in repr(connection)


def test_an_ephemeral_token_goes_to_the_constrained_method_as_an_authorization_token() -> None:
    token = "auth_tokens/ephemeral-0123456789"
    with LiveStubServer("gemini", [[*OPEN, Expect("clientContent"), Reply(gemini.turn_complete())]]) as server:
        connection = GeminiModel("gemini-live-2.5-flash", base_url=server.url, api_key=token).connect(LlmRequest())
        connection.send_content(HELLO)
        collect(connection.receive(), until_turn_complete=True).wait()
        assert token not in repr(connection)
        record = server.connection(0)
    assert record.headers["authorization"] == f"Token {token}" and "x-goog-api-key" not in record.headers
    assert record.query == {} and token not in record.target
    assert record.path.endswith("v1alpha.GenerativeService.BidiGenerateContentConstrained")


def _two_tools() -> list[Tool]:
    return [Tool(function_declarations=[FunctionDeclaration(name="get_order"), FunctionDeclaration(name="refund")])]


def test_safety_settings_and_tool_config_reach_the_setup_frame() -> None:
    config = GenerateContentConfig(
        tools=_two_tools(),
        tool_config=ToolConfig(function_calling_config=FunctionCallingConfig(
            mode="AUTO", allowed_function_names=["get_order"])),
        safety_settings=[SafetySetting(category="HARM_CATEGORY_HARASSMENT", threshold="BLOCK_ONLY_HIGH")],
    )
    with LiveStubServer("gemini", [[*OPEN, Expect("clientContent"), Reply(gemini.turn_complete())]]) as server:
        connection = model_for(server).connect(LlmRequest(config=config))
        connection.send_content(HELLO)
        collect(connection.receive(), until_turn_complete=True).wait()
        record = server.connection(0)
        assert record.wait_closed()
    setup = record.messages[0]["setup"]
    assert setup["safetySettings"] == [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"}]
    # BidiGenerateContentSetup has no toolConfig: AUTO with allowed names sends only those declarations
    assert "toolConfig" not in setup
    assert setup["tools"] == [{"functionDeclarations": [{"name": "get_order"}]}]


def test_tool_config_mode_none_sends_no_function_declarations() -> None:
    config = GenerateContentConfig(tools=_two_tools(),
                                   tool_config=ToolConfig(function_calling_config=FunctionCallingConfig(mode="NONE")))
    with LiveStubServer("gemini", [[*OPEN, Expect("clientContent"), Reply(gemini.turn_complete())]]) as server:
        connection = model_for(server).connect(LlmRequest(config=config))
        connection.send_content(HELLO)
        collect(connection.receive(), until_turn_complete=True).wait()
        record = server.connection(0)
        assert record.wait_closed()
    assert "tools" not in record.messages[0]["setup"]


@pytest.mark.parametrize("tool_config", [
    ToolConfig(function_calling_config=FunctionCallingConfig(mode="ANY")),
    ToolConfig(retrieval_config={"latLng": {"latitude": 1.0, "longitude": 2.0}}),
], ids=["mode-any", "retrieval-config"])
def test_a_tool_config_the_live_setup_cannot_carry_is_refused_by_connect(tool_config: ToolConfig) -> None:
    with LiveStubServer("gemini", [OPEN]) as server:
        with pytest.raises(ConfigurationError, match="cannot be sent to Gemini Live"):
            model_for(server).connect(LlmRequest(config=GenerateContentConfig(tools=_two_tools(),
                                                                              tool_config=tool_config)))
        assert server.connections == []  # nothing was opened
