"""OpenAiResponsesChunkParser: every recorded Responses stream, split every awkward way, through
SseDecoder -> parser -> StreamAggregator; synthetic streams; shape checks. Also the request mapper."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from transcripts import (
    AWKWARD_SPLIT_NAMES,
    Transcript,
    assert_replay_matches_expected,
    awkward_splits,
    by_protocol,
    replay_reads,
)

from rxllm import (
    Chunk,
    ConfigurationError,
    Content,
    FinishReason,
    FunctionDeclaration,
    GenerateContentConfig,
    LlmRequest,
    LlmResponse,
    Part,
    ProtocolError,
    ProviderError,
    SseDecoder,
    SseEvent,
    StreamAggregator,
    ThinkingConfig,
    Tool,
    ToolCallFragment,
    UsageMetadata,
)
from rxllm.providers._openai_responses import OpenAiResponsesChunkParser, OpenAiResponsesRequestMapper
from rxllm.testing import assert_stream_protocol

RESPONSES = by_protocol("openai-responses")


def replay(pieces: Sequence[bytes]) -> tuple[list[LlmResponse], bool]:
    """Feed ``pieces`` as successive reads; stop after an end-of-stream chunk. Returns (responses, saw end)."""
    return replay_reads(pieces, OpenAiResponsesChunkParser(), StreamAggregator(provider="openai"))


def sse(*payloads: dict[str, Any]) -> bytes:
    """An SSE body whose event names are the payloads' ``type``."""
    return "".join(f"event: {p['type']}\ndata: {json.dumps(p)}\n\n" for p in payloads).encode()


def expected_usage(raw: dict[str, Any]) -> UsageMetadata:
    """The documented mapping, written out independently of the parser."""
    return UsageMetadata(
        prompt_token_count=raw["input_tokens"],
        candidates_token_count=raw["output_tokens"],
        total_token_count=raw["total_tokens"],
        thoughts_token_count=raw["output_tokens_details"]["reasoning_tokens"],
        cached_content_token_count=raw["input_tokens_details"]["cached_tokens"],
    )


# --- the recorded transcripts ------------------------------------------------------------------


@pytest.mark.parametrize("transcript", RESPONSES, ids=lambda t: t.name)
@pytest.mark.parametrize("split", range(len(AWKWARD_SPLIT_NAMES)), ids=list(AWKWARD_SPLIT_NAMES))
def test_transcript_aggregates_to_expected(transcript: Transcript, split: int) -> None:
    responses, saw_end = replay(awkward_splits(transcript.raw)[split])
    assert saw_end, "every recorded stream ends with response.completed"
    final = assert_replay_matches_expected(
        responses, transcript.expected, usage=expected_usage, finish_reason=FinishReason.STOP
    )
    assert final.model_version is not None and final.model_version.startswith("gpt-")


@pytest.mark.parametrize("transcript", [t for t in RESPONSES if t.expected["tool_calls"]], ids=lambda t: t.name)
def test_arguments_are_never_duplicated_by_the_done_events(transcript: Transcript) -> None:
    parser = OpenAiResponsesChunkParser()
    fragments = [
        f
        for event in SseDecoder().feed(transcript.raw)
        if (chunk := parser.parse(event)) is not None
        for f in chunk.tool_call_fragments
    ]
    assert "".join(f.arguments_delta for f in fragments) == transcript.expected["tool_calls"][0]["arguments_raw"]
    assert fragments[0].id == transcript.expected["tool_calls"][0]["id"]
    assert [f.complete for f in fragments][-2:] == [True, True]  # arguments.done, then output_item.done


# --- synthetic streams ---------------------------------------------------------------------------

MESSAGE_ADDED = {
    "type": "response.output_item.added",
    "output_index": 0,
    "item": {"type": "message", "id": "m", "role": "assistant", "content": []},
}


def text(delta: str) -> dict[str, Any]:
    return {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": delta}


def terminal(kind: str, status: str, **extra: Any) -> dict[str, Any]:
    response = {
        "status": status,
        "model": "gpt-test",
        "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7},
    }
    return {"type": kind, "response": {**response, **extra}}


FAILED = terminal("response.failed", "failed", error={"code": "server_error", "message": "The server had an error"})


def test_failure_before_any_partial_raises_a_retryable_provider_error() -> None:
    with pytest.raises(ProviderError) as info:
        replay([sse(MESSAGE_ADDED, FAILED)])
    assert info.value.retryable is True
    assert info.value.code == "server_error"
    assert info.value.provider == "openai"


def test_failure_after_a_partial_becomes_an_error_final_with_the_text_so_far() -> None:
    for pieces in awkward_splits(sse(MESSAGE_ADDED, text("Par"), text("is"), FAILED, text("never"))):
        responses, saw_end = replay(pieces)
        assert saw_end
        final = assert_stream_protocol(responses)
        assert final.text() == "Paris"
        assert final.error_code == "server_error"
        assert final.error_message == "The server had an error"
        assert final.custom_metadata == {"finish_reason": "failed"}


def test_error_event_ends_the_stream() -> None:
    error = {"type": "error", "code": "rate_limit_exceeded", "message": "Slow down", "param": None}
    chunk = OpenAiResponsesChunkParser().parse(SseEvent("error", json.dumps(error)))
    assert chunk is not None and chunk.end_of_stream
    assert chunk.error is not None
    assert (chunk.error.message, chunk.error.code, chunk.error.retryable) == ("Slow down", "rate_limit_exceeded", True)
    nested = {"type": "error", "error": {"code": "invalid_prompt", "message": "no"}}
    chunk = OpenAiResponsesChunkParser().parse(SseEvent("error", json.dumps(nested)))
    assert chunk is not None and chunk.error is not None
    assert (chunk.error.code, chunk.error.retryable) == ("invalid_prompt", False)


@pytest.mark.parametrize(
    ("reason", "mapped"),
    [
        ("max_output_tokens", FinishReason.MAX_TOKENS),
        ("content_filter", FinishReason.SAFETY),
        ("other", FinishReason.OTHER),
    ],
)
def test_incomplete_response_maps_its_reason(reason: str, mapped: FinishReason) -> None:
    incomplete = terminal("response.incomplete", "incomplete", incomplete_details={"reason": reason})
    responses, saw_end = replay([sse(MESSAGE_ADDED, text("cut"), incomplete)])
    final = assert_stream_protocol(responses)
    assert saw_end
    assert final.finish_reason is mapped
    assert final.error_code == mapped.value
    assert final.custom_metadata == {"finish_reason": "incomplete"}
    assert final.text() == "cut"


def test_reasoning_and_refusal_deltas() -> None:
    body = sse(
        {"type": "response.reasoning_summary_text.delta", "output_index": 0, "summary_index": 0, "delta": "Think"},
        {"type": "response.reasoning_text.delta", "output_index": 0, "content_index": 0, "delta": "ing."},
        {"type": "response.refusal.delta", "output_index": 1, "content_index": 0, "delta": "I can't help with that."},
        terminal("response.completed", "completed"),
    )
    final = assert_stream_protocol(replay([body])[0])
    assert final.thought_text() == "Thinking."
    assert final.text() == ""
    assert (final.error_code, final.error_message) == ("REFUSAL", "I can't help with that.")
    assert final.usage_metadata == UsageMetadata(prompt_token_count=5, candidates_token_count=2, total_token_count=7)


def test_a_call_sent_only_in_its_done_events_gets_its_arguments_once() -> None:
    item = {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": ""}
    done_item = {**item, "arguments": '{"a":1}', "status": "completed"}
    body = sse(
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.function_call_arguments.done", "output_index": 0, "arguments": '{"a":1}'},
        {"type": "response.output_item.done", "output_index": 0, "item": done_item},
        terminal("response.completed", "completed"),
    )
    (call,) = assert_stream_protocol(replay([body])[0]).function_calls()
    assert (call.id, call.name, call.args) == ("call_1", "f", {"a": 1})
    # and a call that only ever appears in output_item.done
    body = sse(
        {"type": "response.output_item.done", "output_index": 2, "item": done_item},
        terminal("response.completed", "completed"),
    )
    (call,) = assert_stream_protocol(replay([body])[0]).function_calls()
    assert (call.id, call.name, call.args) == ("call_1", "f", {"a": 1})


def test_two_calls_keep_output_index_order() -> None:
    def added(index: int, name: str) -> dict[str, Any]:
        item = {"type": "function_call", "call_id": f"call_{name}", "name": name, "arguments": ""}
        return {"type": "response.output_item.added", "output_index": index, "item": item}

    def args(index: int, delta: str) -> dict[str, Any]:
        return {"type": "response.function_call_arguments.delta", "output_index": index, "delta": delta}

    body = sse(
        added(2, "b"),
        added(1, "a"),
        args(2, '{"x":2}'),
        args(1, '{"x":1}'),
        terminal("response.completed", "completed"),
    )
    calls = assert_stream_protocol(replay([body])[0]).function_calls()
    assert [(c.name, c.args) for c in calls] == [("a", {"x": 1}), ("b", {"x": 2})]


def test_unknown_events_and_lifecycle_events_are_ignored() -> None:
    parser = OpenAiResponsesChunkParser()
    for kind in [
        "response.created",
        "response.in_progress",
        "response.content_part.added",
        "response.some_future_event",
    ]:
        assert parser.parse(SseEvent(kind, json.dumps({"type": kind, "response": {}}))) is None
    assert parser.parse(SseEvent("response.output_item.added", json.dumps(MESSAGE_ADDED))) is None
    assert parser.parse(SseEvent("message", "[DONE]")) == Chunk(end_of_stream=True)


GARBAGE = {
    "bad json": ("response.output_text.delta", '{"type":'),
    "json string": ("response.output_text.delta", '"hello"'),
    "delta is a number": ("response.output_text.delta", '{"type":"response.output_text.delta","delta":3}'),
    "arguments for an output that is no call": (
        "response.function_call_arguments.delta",
        '{"type":"response.function_call_arguments.delta","output_index":5,"delta":"{"}',
    ),
    "output_index is a string": (
        "response.function_call_arguments.delta",
        '{"type":"response.function_call_arguments.delta","output_index":"0","delta":"{"}',
    ),
    "item missing": ("response.output_item.added", '{"type":"response.output_item.added","output_index":0}'),
    "call_id is a number": (
        "response.output_item.added",
        '{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","call_id":1,"name":"f"}}',
    ),
    "completed without response": ("response.completed", '{"type":"response.completed"}'),
    "status missing": ("response.completed", '{"type":"response.completed","response":{}}'),
    # a bad usage figure is not garbage: it is dropped and the answer kept (tests/providers/test_usage_rule.py)
}


@pytest.mark.parametrize("event", list(GARBAGE.values()), ids=list(GARBAGE))
def test_garbage_raises_protocol_error_only(event: tuple[str, str]) -> None:
    with pytest.raises(ProtocolError) as info:
        OpenAiResponsesChunkParser().parse(SseEvent(*event))
    assert info.value.provider == "openai"


def test_parse_response_of_a_complete_response_object() -> None:
    body = {
        "object": "response",
        "status": "completed",
        "model": "gpt-4o",
        "error": None,
        "output": [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Thinking."}]},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Calling.", "annotations": []}],
            },
            {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": '{"a":1}'},
        ],
        "usage": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
    }
    aggregator = StreamAggregator()
    for chunk in OpenAiResponsesChunkParser().parse_response(json.dumps(body).encode()):
        aggregator.accept(chunk)
    final = aggregator.finish()
    assert (final.thought_text(), final.text()) == ("Thinking.", "Calling.")
    (call,) = final.function_calls()
    assert (call.id, call.name, call.args) == ("call_1", "f", {"a": 1})
    assert final.finish_reason is FinishReason.STOP and final.model_version == "gpt-4o"
    assert final.usage_metadata == UsageMetadata(prompt_token_count=3, candidates_token_count=4, total_token_count=7)


def test_parse_response_of_an_error_body_and_of_garbage() -> None:
    (chunk,) = OpenAiResponsesChunkParser().parse_response(b'{"error":{"code":"server_error","message":"boom"}}')
    assert chunk.error is not None and chunk.error.retryable and chunk.end_of_stream
    with pytest.raises(ProtocolError):
        OpenAiResponsesChunkParser().parse_response(b'{"status":"completed","output":{}}')


# --- the request mapper ----------------------------------------------------------------------------

KEY = "sk-proj-very-secret-key"


def test_request_mapper_maps_a_tool_using_conversation() -> None:
    request = LlmRequest(
        contents=[
            Content(role="user", parts=[Part.from_text("Capital of France?")]),
            Content(
                role="model",
                parts=[
                    Part(text="hidden reasoning", thought=True),
                    Part.from_text("Let me look."),
                    Part.from_function_call("get_capital", {"country": "France"}, id="call_1"),
                ],
            ),
            Content(role="user", parts=[Part.from_function_response("get_capital", {"capital": "Paris"}, id="call_1")]),
        ],
        config=GenerateContentConfig(
            system_instruction="Answer briefly.",
            tools=[
                Tool(
                    function_declarations=[
                        FunctionDeclaration(
                            name="get_capital", description="Capital of a country.", parameters={"type": "object"}
                        )
                    ]
                )
            ],
            max_output_tokens=50,
            temperature=0.0,
            top_p=0.5,
        ),
    )
    mapper = OpenAiResponsesRequestMapper(api_key=KEY)
    http = mapper.to_http_request(request, model="gpt-4o", stream=True)
    assert http.url == "https://api.openai.com/v1/responses"
    assert http.headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(http) and KEY not in repr(mapper)
    assert mapper.provider == "openai"
    assert json.loads(http.body) == {
        "model": "gpt-4o",
        "instructions": "Answer briefly.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Capital of France?"}]},
            {"role": "assistant", "content": "Let me look."},
            {"type": "function_call", "call_id": "call_1", "name": "get_capital", "arguments": '{"country":"France"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": '{"capital":"Paris"}'},
        ],
        "tools": [
            {
                "type": "function",
                "name": "get_capital",
                "description": "Capital of a country.",
                "parameters": {"type": "object"},
                "strict": False,
            }
        ],
        "max_output_tokens": 50,
        "temperature": 0.0,
        "top_p": 0.5,
        "stream": True,
    }


def test_request_mapper_options_and_refusals() -> None:
    mapper = OpenAiResponsesRequestMapper(base_url="http://127.0.0.1:9/v1/")
    contents = [Content(role="user", parts=[Part.from_text("q")])]
    http = mapper.to_http_request(
        LlmRequest(
            contents=contents,
            config=GenerateContentConfig(
                response_mime_type="application/json", thinking_config=ThinkingConfig(include_thoughts=True)
            ),
        ),
        model="o4-mini",
        stream=False,
    )
    assert http.url == "http://127.0.0.1:9/v1/responses"
    assert "authorization" not in http.headers
    body = json.loads(http.body)
    assert "stream" not in body
    assert body["text"] == {"format": {"type": "json_object"}}
    assert body["reasoning"] == {"summary": "auto"}
    for config in (GenerateContentConfig(stop_sequences=("x",)), GenerateContentConfig(candidate_count=2)):
        with pytest.raises(ConfigurationError):
            mapper.to_http_request(LlmRequest(contents=contents, config=config), model="m", stream=False)
    orphan = [Content(role="user", parts=[Part.from_function_response("f", {})])]
    with pytest.raises(ConfigurationError):
        mapper.to_http_request(LlmRequest(contents=orphan), model="m", stream=False)


def test_request_mapper_pairs_calls_without_ids() -> None:
    contents = [
        Content(role="model", parts=[Part.from_function_call("f", {})]),
        Content(role="user", parts=[Part.from_function_response("f", {"ok": 1})]),
    ]
    body = json.loads(
        OpenAiResponsesRequestMapper().to_http_request(LlmRequest(contents=contents), model="m", stream=False).body
    )
    assert body["input"][0]["call_id"] == body["input"][1]["call_id"]


def test_fragment_shapes_from_added_and_deltas() -> None:
    parser = OpenAiResponsesChunkParser()
    item = {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": ""}
    added = parser.parse(
        SseEvent("x", json.dumps({"type": "response.output_item.added", "output_index": 3, "item": item}))
    )
    assert added == Chunk(tool_call_fragments=(ToolCallFragment(3, id="call_1", name="f"),))
    delta = {"type": "response.function_call_arguments.delta", "output_index": 3, "delta": '{"a"'}
    assert parser.parse(SseEvent("x", json.dumps(delta))) == Chunk(
        tool_call_fragments=(ToolCallFragment(3, arguments_delta='{"a"'),)
    )
