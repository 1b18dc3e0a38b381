"""The pure core of live sessions: the aggregator's rules (docs/live.md) and each protocol's
frames and events, with no socket."""

from __future__ import annotations

import json

import pytest

from rxllm import (
    Blob,
    Content,
    FunctionCall,
    FunctionDeclaration,
    GenerateContentConfig,
    LiveConnectConfig,
    LlmRequest,
    MalformedFunctionCallError,
    Part,
    ProtocolError,
    ProviderError,
    Tool,
    UsageMetadata,
)
from rxllm._models.live import (
    LiveAudio,
    LiveGoAway,
    LiveInterrupted,
    LiveSetupComplete,
    LiveText,
    LiveToolCalls,
    LiveToolCancellation,
    LiveTranscript,
    LiveTurnAggregator,
    LiveTurnComplete,
    LiveUsage,
)
from rxllm.providers._gemini_live import GeminiLiveProtocol, gemini_live_headers, gemini_live_url
from rxllm.providers._openai_realtime import OpenAiRealtimeProtocol, openai_realtime_url
from rxllm.testing import gemini, openai

TOOLS = GenerateContentConfig(
    tools=[Tool(function_declarations=[FunctionDeclaration(name="get_order", parameters={"type": "object"})])]
)


def feed(aggregator: LiveTurnAggregator, *events: object) -> list:
    return [r for e in events for r in aggregator.feed(e)]  # type: ignore[arg-type]


def test_text_deltas_are_partials_and_the_turn_end_carries_the_whole_text_and_usage() -> None:
    usage = UsageMetadata(prompt_token_count=3, candidates_token_count=2, total_token_count=5)
    out = feed(LiveTurnAggregator(), LiveText("Hi"), LiveText(" there"), LiveUsage(usage), LiveTurnComplete())
    assert [(r.text(), r.partial, r.turn_complete) for r in out] == [
        ("Hi", True, None), (" there", True, None), ("Hi there", None, True)]
    assert [r.usage_metadata for r in out] == [None, None, usage]  # usage once per turn
    assert out[0].content.role == "model"


def test_audio_is_a_partial_inline_blob_and_is_not_repeated_in_the_final() -> None:
    out = feed(LiveTurnAggregator(), LiveAudio(b"\x01\x02", "audio/pcm;rate=24000"), LiveTurnComplete())
    blob = out[0].content.parts[0].inline_data
    assert out[0].partial and blob == Blob(mime_type="audio/pcm;rate=24000", data=b"\x01\x02")
    assert out[1].turn_complete and out[1].content is None


def test_transcriptions_arrive_as_partials_then_whole_when_finished() -> None:
    aggregator = LiveTurnAggregator()
    out = feed(aggregator, LiveTranscript("input", "Where is "), LiveTranscript("input", "A17?"),
               LiveText("On its way"), LiveTranscript("output", "On its"), LiveTranscript("output", " way"),
               LiveTurnComplete())
    shapes = [(r.input_transcription and (r.input_transcription.text, r.input_transcription.finished),
               r.output_transcription and (r.output_transcription.text, r.output_transcription.finished),
               r.partial, r.turn_complete) for r in out]
    assert shapes == [
        (("Where is ", None), None, True, None),
        (("A17?", None), None, True, None),
        (("Where is A17?", True), None, None, None),  # the input ends when the model answers
        (None, None, True, None),  # the text delta
        (None, ("On its", None), True, None),
        (None, (" way", None), True, None),
        (None, ("On its way", True), None, None),
        (None, None, None, True),
    ]


def test_a_finished_transcription_with_the_whole_text_replaces_the_pieces() -> None:
    out = feed(LiveTurnAggregator(), LiveTranscript("input", "wher"), LiveTranscript("input", "Where?", True))
    assert out[-1].input_transcription.text == "Where?" and out[-1].input_transcription.finished


def test_tool_calls_come_with_the_text_so_far_in_one_non_partial() -> None:
    aggregator = LiveTurnAggregator(["get_order"])
    call = FunctionCall(id="c1", name="get_order", args={"order_id": "A17"})
    out = feed(aggregator, LiveText("Let me look."), LiveToolCalls((call,)), LiveText("Shipped."), LiveTurnComplete())
    assert out[1].partial is None and out[1].text() == "Let me look." and out[1].function_calls() == [call]
    assert out[-1].text() == "Shipped." and out[-1].turn_complete


def test_a_call_to_an_undeclared_function_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match=r"'drop_tables'.*declared: get_order"):
        LiveTurnAggregator(["get_order"]).feed(LiveToolCalls((FunctionCall(name="drop_tables"),)))


def test_interruption_carries_the_text_so_far_and_the_turn_stays_open_until_it_ends() -> None:
    aggregator = LiveTurnAggregator()
    out = feed(aggregator, LiveText("Your order"), LiveInterrupted())
    assert out[-1].interrupted and out[-1].text() == "Your order" and out[-1].partial is None
    assert aggregator.in_turn
    end = feed(aggregator, LiveTurnComplete())
    assert end[-1].turn_complete and end[-1].content is None and not aggregator.in_turn


def test_go_away_resumption_and_cancellation_become_fields() -> None:
    from rxllm import LiveServerSessionResumptionUpdate
    from rxllm._models.live import LiveResumption

    out = feed(LiveTurnAggregator(), LiveGoAway("10s"), LiveResumption(LiveServerSessionResumptionUpdate(
        new_handle="h1", resumable=True)), LiveToolCancellation(("c1",)), LiveSetupComplete())
    assert out[0].go_away.time_left == "10s"
    assert out[1].live_session_resumption_update.new_handle == "h1"
    assert out[2].tool_call_cancellation.ids == ("c1",)
    assert len(out) == 3


# --- Gemini Live ------------------------------------------------------------------------------------------


def test_gemini_url_carries_no_credential_and_tokens_go_to_the_constrained_method() -> None:
    assert gemini_live_url("https://generativelanguage.googleapis.com", "v1beta", "k-1") == (
        "wss://generativelanguage.googleapis.com/ws/google.ai.generativelanguage.v1beta.GenerativeService."
        "BidiGenerateContent")
    assert gemini_live_url("http://127.0.0.1:9", "v1beta", "auth_tokens/abc") == (
        "ws://127.0.0.1:9/ws/google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateContentConstrained")


def test_gemini_credential_headers_are_google_genais_and_extra_headers_replace_them() -> None:
    assert gemini_live_headers("k-1", None) == {"x-goog-api-key": "k-1"}
    assert gemini_live_headers("auth_tokens/abc", None) == {"authorization": "Token auth_tokens/abc"}
    assert gemini_live_headers(None, None) == {}
    assert gemini_live_headers("k-1", {"X-Goog-Api-Key": "gateway", "X-Trace": "1"}) == {
        "X-Goog-Api-Key": "gateway", "X-Trace": "1"}


def test_gemini_setup_carries_model_config_tools_and_live_options() -> None:
    request = LlmRequest(
        config=GenerateContentConfig(system_instruction=Content(parts=[Part.from_text("Be brief.")]),
                                     temperature=0.5, tools=TOOLS.tools),
        live_connect_config=LiveConnectConfig(
            response_modalities=["AUDIO"],
            speech_config={"voice_config": {"prebuilt_voice_config": {"voice_name": "Kore"}}},
            input_audio_transcription={}, output_audio_transcription={}, session_resumption={"handle": "h0"}),
    )
    (frame,) = GeminiLiveProtocol(request, model="gemini-live").opening()
    setup = json.loads(frame)["setup"]
    assert setup["model"] == "models/gemini-live"
    voice = {"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": "Kore"}}}
    assert setup["generationConfig"] == {"temperature": 0.5, "responseModalities": ["AUDIO"], "speechConfig": voice}
    assert setup["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert setup["tools"][0]["functionDeclarations"][0]["name"] == "get_order"
    assert setup["inputAudioTranscription"] == {} and setup["outputAudioTranscription"] == {}
    assert setup["sessionResumption"] == {"handle": "h0"}


def test_gemini_sends_turns_tool_responses_and_realtime_media() -> None:
    protocol = GeminiLiveProtocol(LlmRequest(), model="m")
    user = Content(role="user", parts=[Part.from_text("hi")])
    assert json.loads(protocol.content(user)[0]) == {
        "clientContent": {"turns": [{"role": "user", "parts": [{"text": "hi"}]}], "turnComplete": True}}
    answer = Content(role="user", parts=[Part.from_function_response(name="get_order", response={"ok": 1}, id="c1")])
    assert json.loads(protocol.content(answer)[0]) == {
        "toolResponse": {"functionResponses": [{"name": "get_order", "response": {"ok": 1}, "id": "c1"}]}}
    history = protocol.history([user, Content(role="model", parts=[Part.from_text("hello")])])
    assert json.loads(history[0])["clientContent"]["turnComplete"] is False
    audio = json.loads(protocol.realtime(Blob(mime_type="audio/pcm;rate=16000", data=b"\x00\x01"))[0])
    assert audio == {"realtimeInput": {"audio": {"mimeType": "audio/pcm;rate=16000", "data": "AAE="}}}
    assert "video" in json.loads(protocol.realtime(Blob(mime_type="image/jpeg", data=b"x"))[0])["realtimeInput"]


def test_gemini_decodes_every_server_message_kind() -> None:
    protocol = GeminiLiveProtocol(LlmRequest(), model="m")
    assert protocol.decode(json.dumps(gemini.setup_complete())) == [LiveSetupComplete()]
    assert protocol.decode(json.dumps(gemini.audio(b"ab")).encode()) == [LiveAudio(b"ab", "audio/pcm;rate=24000")]
    assert protocol.decode(json.dumps(gemini.input_transcription("hi"))) == [LiveTranscript("input", "hi")]
    assert protocol.decode(json.dumps(gemini.interrupted())) == [LiveInterrupted()]
    done = protocol.decode(json.dumps(gemini.turn_complete(4, 1)))
    assert isinstance(done[0], LiveUsage) and done[0].usage.total_token_count == 5 and done[1] == LiveTurnComplete()
    (calls,) = protocol.decode(json.dumps(gemini.tool_call(("c1", "get_order", {"order_id": "A17"}))))
    assert calls == LiveToolCalls((FunctionCall(id="c1", name="get_order", args={"order_id": "A17"}),))
    assert protocol.decode(json.dumps(gemini.tool_call_cancellation("c1"))) == [LiveToolCancellation(("c1",))]
    assert protocol.decode(json.dumps(gemini.go_away("5s"))) == [LiveGoAway("5s")]
    (resumption,) = protocol.decode(json.dumps(gemini.resumption("h2")))
    assert resumption.update.new_handle == "h2"  # type: ignore[union-attr]


@pytest.mark.parametrize(("message", "match"), [
    ("{not json", "not JSON"),
    (b"\xff\xfe", "binary message is not JSON"),
    ('{"somethingNew": {}}', "unknown Gemini Live message"),
    ("[1, 2]", "not an object"),
    ('{"serverContent": {"modelTurn": {"parts": [{"inlineData": {"data": "!!", "mimeType": "a"}}]}}}', "base64"),
])
def test_gemini_refuses_what_it_cannot_read(message: str | bytes, match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        GeminiLiveProtocol(LlmRequest(), model="m").decode(message)


# --- OpenAI Realtime --------------------------------------------------------------------------------------


def test_openai_url_and_session_update() -> None:
    assert openai_realtime_url("https://api.openai.com/v1", "gpt-realtime") == (
        "wss://api.openai.com/v1/realtime?model=gpt-realtime")
    request = LlmRequest(config=GenerateContentConfig(system_instruction="Be brief.", tools=TOOLS.tools),
                         live_connect_config=LiveConnectConfig(
                             response_modalities=["AUDIO"], input_audio_transcription={},
                             speech_config={"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": "marin"}}}))
    session = json.loads(OpenAiRealtimeProtocol(request).opening()[0])["session"]
    assert session["instructions"] == "Be brief." and session["output_modalities"] == ["audio"]
    assert session["tools"] == [{"type": "function", "name": "get_order", "parameters": {"type": "object"}}]
    assert session["audio"] == {"input": {"transcription": {"model": "gpt-4o-mini-transcribe"}},
                                "output": {"voice": "marin"}}


def test_openai_sends_items_then_response_create() -> None:
    protocol = OpenAiRealtimeProtocol(LlmRequest())
    frames = [json.loads(f) for f in protocol.content(Content(role="user", parts=[Part.from_text("hi")]))]
    assert [f["type"] for f in frames] == ["conversation.item.create", "response.create"]
    assert frames[0]["item"]["content"] == [{"type": "input_text", "text": "hi"}]
    answer = Content(role="user", parts=[Part.from_function_response(name="get_order", response={"ok": 1}, id="c1")])
    item = json.loads(protocol.content(answer)[0])["item"]
    assert item == {"type": "function_call_output", "call_id": "c1", "output": '{"ok": 1}'}
    append = json.loads(protocol.realtime(Blob(mime_type="audio/pcm", data=b"\x00\x01"))[0])
    assert append == {"type": "input_audio_buffer.append", "audio": "AAE="}


def test_openai_decodes_a_turn_with_a_tool_call_and_usage() -> None:
    protocol = OpenAiRealtimeProtocol(LlmRequest())
    events = [e for m in (openai.session_created(), openai.response_created(), openai.text("Hi"),
                          openai.call_arguments("c1", '{"order'),
                          openai.call_done("c1", "get_order", '{"order_id":"A"}'),
                          openai.response_done(input_tokens=3, output_tokens=2))
              for e in protocol.decode(json.dumps(m))]
    assert events[0] == LiveSetupComplete() and events[1] == LiveText("Hi")
    assert events[2] == LiveToolCalls((FunctionCall(id="c1", name="get_order", args={"order_id": "A"}),))
    assert isinstance(events[3], LiveUsage) and events[3].usage.total_token_count == 5
    assert events[4] == LiveTurnComplete()
    assert protocol.decode(json.dumps(openai.speech_started())) == [LiveInterrupted()]
    assert protocol.decode(json.dumps(openai.input_transcript_done("hi"))) == [LiveTranscript("input", "hi", True)]


@pytest.mark.parametrize(("message", "error", "match"), [
    (b'{"type": "response.done"}', ProtocolError, "binary frame"),
    ("nope", ProtocolError, "not JSON"),
    ('{"type": "response.brand_new"}', ProtocolError, "unknown OpenAI Realtime event type"),
    (json.dumps(openai.error("bad voice")), ProviderError, "bad voice"),
    (json.dumps(openai.call_done("c1", "f", "{oops")), MalformedFunctionCallError, "f"),
])
def test_openai_refuses_what_it_cannot_read(message: str | bytes, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        OpenAiRealtimeProtocol(LlmRequest()).decode(message)
