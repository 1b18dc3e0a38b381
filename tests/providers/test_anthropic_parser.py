"""AnthropicChunkParser: every recorded Messages stream, split every awkward way, through
SseDecoder -> parser -> StreamAggregator; synthetic error streams; the shape checks."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transcripts import (
    AWKWARD_SPLIT_NAMES,
    Transcript,
    assert_replay_matches_expected,
    awkward_splits,
    by_name,
    by_protocol,
    replay_reads,
)

from rxllm import (
    Chunk,
    FinishReason,
    LlmResponse,
    ProtocolError,
    ProviderError,
    SseDecoder,
    SseEvent,
    StreamAggregator,
    ToolCallFragment,
    UsageMetadata,
)
from rxllm.providers._anthropic import AnthropicChunkParser, map_anthropic_stop_reason, map_anthropic_usage
from rxllm.testing import assert_stream_protocol

ANTHROPIC = by_protocol("anthropic")


def replay(pieces: Sequence[bytes]) -> tuple[list[LlmResponse], bool]:
    """Feed ``pieces`` as successive reads; stop after an end-of-stream chunk. Returns (responses, saw end)."""
    return replay_reads(pieces, AnthropicChunkParser(), StreamAggregator(provider="anthropic"))


def sse(*events: tuple[str, dict[str, Any] | str]) -> bytes:
    """An SSE body from (event name, JSON payload or raw data) pairs."""
    out = []
    for name, payload in events:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        out.append(f"event: {name}\ndata: {data}\n\n")
    return "".join(out).encode()


def expected_usage(raw: dict[str, Any]) -> UsageMetadata:
    """The documented mapping, written out independently of the parser."""
    prompt = (
        raw["input_tokens"] + (raw.get("cache_read_input_tokens") or 0) + (raw.get("cache_creation_input_tokens") or 0)
    )
    return UsageMetadata(
        prompt_token_count=prompt,
        candidates_token_count=raw["output_tokens"],
        total_token_count=prompt + raw["output_tokens"],
        cached_content_token_count=raw.get("cache_read_input_tokens"),
    )


def raw_block_starts(transcript: Transcript) -> list[dict[str, Any]]:
    """The content_block_start payloads' blocks, read straight from the recorded bytes."""
    blocks = []
    for line in transcript.raw.decode().splitlines():
        if line.startswith("data: ") and '"content_block_start"' in line:
            blocks.append(json.loads(line[6:])["content_block"])
    return blocks


def raw_signatures(transcript: Transcript) -> list[str]:
    signatures = []
    for line in transcript.raw.decode().splitlines():
        if line.startswith("data: ") and '"signature_delta"' in line:
            signatures.append(json.loads(line[6:])["delta"]["signature"])
    return signatures


# --- the recorded transcripts ------------------------------------------------------------------


@pytest.mark.parametrize("transcript", ANTHROPIC, ids=lambda t: t.name)
@pytest.mark.parametrize("split", range(len(AWKWARD_SPLIT_NAMES)), ids=list(AWKWARD_SPLIT_NAMES))
def test_transcript_aggregates_to_expected(transcript: Transcript, split: int) -> None:
    pieces = awkward_splits(transcript.raw)[split]
    responses, saw_end = replay(pieces)
    assert saw_end, "every recorded stream ends with message_stop"
    final = assert_replay_matches_expected(
        responses,
        transcript.expected,
        usage=expected_usage,
        finish_reason=FinishReason.STOP,  # end_turn / tool_use
    )
    assert final.model_version is not None and final.model_version.startswith("claude-")


def test_thinking_signature_is_on_the_final_thought_part() -> None:
    transcript = by_name("anthropic/thinking-then-text")
    (signature,) = raw_signatures(transcript)
    final = replay([transcript.raw])[0][-1]
    parts = final.content.parts if final.content else ()
    assert [p.thought for p in parts] == [True, None]
    assert parts[0].text == transcript.expected["thinking"]
    assert parts[0].thought_signature == signature.encode()  # the string's UTF-8 bytes: round-trips exactly
    assert parts[1].text == transcript.expected["text"]


def test_redacted_thinking_blocks_survive_as_two_opaque_thought_parts() -> None:
    transcript = by_name("anthropic/redacted-thinking")
    data = [b["data"] for b in raw_block_starts(transcript) if b["type"] == "redacted_thinking"]
    assert len(data) == 2
    for pieces in awkward_splits(transcript.raw):
        final = replay(pieces)[0][-1]
        parts = final.content.parts if final.content else ()
        thoughts = [p for p in parts if p.thought]
        assert [(p.text, p.thought_signature) for p in thoughts] == [(None, d.encode()) for d in data]
        assert parts[-1].text == transcript.expected["text"] and not parts[-1].thought


def test_tool_use_block_stop_marks_the_call_complete() -> None:
    transcript = by_name("anthropic/tool-use-input-json-delta")
    parser = AnthropicChunkParser()
    fragments = [
        f
        for event in SseDecoder().feed(transcript.raw)
        if (chunk := parser.parse(event)) is not None
        for f in chunk.tool_call_fragments
    ]
    assert fragments[0] == ToolCallFragment(0, id="toolu_018acGYLtfR52q9yDbWaEdQZ", name="get_weather")
    assert fragments[-1] == ToolCallFragment(0, complete=True)
    assert "".join(f.arguments_delta for f in fragments) == transcript.expected["tool_calls"][0]["arguments_raw"]
    assert all(not f.complete for f in fragments[:-1])


# --- synthetic streams ---------------------------------------------------------------------------

START = (
    "message_start",
    {"type": "message_start", "message": {"model": "claude-x", "usage": {"input_tokens": 10, "output_tokens": 1}}},
)
TEXT_BLOCK = (
    "content_block_start",
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
)
OVERLOADED = ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})


def text_delta(text: str, index: int = 0) -> tuple[str, dict[str, Any]]:
    return (
        "content_block_delta",
        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}},
    )


def test_overloaded_error_before_any_partial_raises_a_retryable_provider_error() -> None:
    with pytest.raises(ProviderError) as info:
        replay([sse(START, TEXT_BLOCK, OVERLOADED)])
    assert info.value.retryable is True
    assert info.value.code == "overloaded_error"
    assert info.value.provider == "anthropic"
    assert "Overloaded" in str(info.value)


def test_invalid_request_error_is_not_retryable() -> None:
    error = ("error", {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}})
    with pytest.raises(ProviderError) as info:
        replay([sse(START, error)])
    assert info.value.retryable is False


def test_error_after_a_partial_becomes_an_error_final_with_the_text_so_far() -> None:
    body = sse(START, TEXT_BLOCK, text_delta("The order"), text_delta(" ships"), OVERLOADED, text_delta(" never"))
    for pieces in awkward_splits(body):
        responses, saw_end = replay(pieces)
        assert saw_end
        final = assert_stream_protocol(responses)
        assert final.text() == "The order ships"
        assert final.error_code == "overloaded_error"
        assert final.error_message == "Overloaded"


def test_non_json_error_event_is_still_an_error() -> None:
    chunk = AnthropicChunkParser().parse(SseEvent("error", "upstream connect error"))
    assert chunk is not None and chunk.end_of_stream
    assert chunk.error is not None and chunk.error.message == "upstream connect error"


def test_max_tokens_stop_ends_in_an_error_final() -> None:
    stop = (
        "message_delta",
        {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 7}},
    )
    responses, _ = replay([sse(START, TEXT_BLOCK, text_delta("cut"), stop, ("message_stop", {"type": "message_stop"}))])
    final = assert_stream_protocol(responses)
    assert final.finish_reason is FinishReason.MAX_TOKENS
    assert final.error_code == "MAX_TOKENS"
    assert final.custom_metadata == {"finish_reason": "max_tokens"}
    assert final.usage_metadata == UsageMetadata(prompt_token_count=10, candidates_token_count=7, total_token_count=17)


def test_start_usage_is_reported_even_without_message_delta() -> None:
    responses, saw_end = replay([sse(START, TEXT_BLOCK, text_delta("hi"))])
    assert not saw_end
    assert responses[-1].usage_metadata == UsageMetadata(
        prompt_token_count=10, candidates_token_count=1, total_token_count=11
    )


def test_tool_use_with_whole_start_input_and_no_deltas() -> None:
    parser = AnthropicChunkParser()
    start = {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
    }
    first = parser.parse(SseEvent("content_block_start", json.dumps(start)))
    stop = parser.parse(SseEvent("content_block_stop", '{"type":"content_block_stop","index":1}'))
    assert first == Chunk(tool_call_fragments=(ToolCallFragment(1, id="t1", name="f"),))
    assert stop == Chunk(tool_call_fragments=(ToolCallFragment(1, arguments_delta='{"a":1}', complete=True),))


def test_start_input_is_not_duplicated_when_deltas_follow() -> None:
    parser = AnthropicChunkParser()
    start = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
    }
    parser.parse(SseEvent("content_block_start", json.dumps(start)))
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": '{"a":2}'},
    }
    assert parser.parse(SseEvent("content_block_delta", json.dumps(delta))) == Chunk(
        tool_call_fragments=(ToolCallFragment(0, arguments_delta='{"a":2}'),)
    )
    stop = parser.parse(SseEvent("content_block_stop", '{"type":"content_block_stop","index":0}'))
    assert stop == Chunk(tool_call_fragments=(ToolCallFragment(0, complete=True),))


def test_server_side_blocks_and_unknown_deltas_and_events_are_ignored() -> None:
    parser = AnthropicChunkParser()
    start = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}},
    }
    assert parser.parse(SseEvent("content_block_start", json.dumps(start))) is None
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"q"'}}
    assert parser.parse(SseEvent("content_block_delta", json.dumps(delta))) is None
    assert parser.parse(SseEvent("content_block_stop", '{"type":"content_block_stop","index":0}')) is None
    parser.parse(SseEvent("content_block_start", json.dumps(TEXT_BLOCK[1])))
    citation = {"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta", "citation": {}}}
    assert parser.parse(SseEvent("content_block_delta", json.dumps(citation))) is None
    assert parser.parse(SseEvent("some_future_event", '{"type":"some_future_event"}')) is None
    assert parser.parse(SseEvent("ping", '{"type": "ping"}')) is None


def test_message_delta_usage_is_laid_over_the_start_usage_key_by_key() -> None:
    parser = AnthropicChunkParser()
    start = {
        "type": "message_start",
        "message": {
            "usage": {
                "input_tokens": 100,
                "cache_read_input_tokens": 40,
                "cache_creation_input_tokens": 5,
                "output_tokens": 1,
            }
        },
    }
    parser.parse(SseEvent("message_start", json.dumps(start)))
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": 30},
    }
    chunk = parser.parse(SseEvent("message_delta", json.dumps(delta)))
    assert chunk == Chunk(
        finish_reason=FinishReason.STOP,
        raw_finish_reason="end_turn",
        usage=UsageMetadata(
            prompt_token_count=145, candidates_token_count=30, total_token_count=175, cached_content_token_count=40
        ),
    )


@pytest.mark.parametrize(
    ("raw", "mapped"),
    [
        ("end_turn", FinishReason.STOP),
        ("stop_sequence", FinishReason.STOP),
        ("tool_use", FinishReason.STOP),
        ("pause_turn", FinishReason.STOP),
        ("max_tokens", FinishReason.MAX_TOKENS),
        ("model_context_window_exceeded", FinishReason.MAX_TOKENS),
        ("refusal", FinishReason.SAFETY),
        ("something_new", FinishReason.OTHER),
    ],
)
def test_stop_reason_mapping(raw: str, mapped: FinishReason) -> None:
    assert map_anthropic_stop_reason(raw) is mapped


def test_usage_without_counts_is_none() -> None:
    assert map_anthropic_usage({"service_tier": "standard"}) is None
    assert map_anthropic_usage({"input_tokens": None, "output_tokens": 3}) == UsageMetadata(
        candidates_token_count=3, total_token_count=3
    )


# --- non-streamed responses -------------------------------------------------------------------------


def test_parse_response_maps_every_block_type() -> None:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": "Let me think.", "signature": "sig=="},
            {"type": "redacted_thinking", "data": "opaque=="},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 12, "output_tokens": 34},
    }
    aggregator = StreamAggregator()
    for chunk in AnthropicChunkParser().parse_response(json.dumps(body).encode()):
        aggregator.accept(chunk)
    final = aggregator.finish()
    parts = final.content.parts if final.content else ()
    assert [(p.text, p.thought, p.thought_signature) for p in parts[:3]] == [
        ("Let me think.", True, b"sig=="),
        (None, True, b"opaque=="),
        ("Checking.", None, None),
    ]
    (call,) = final.function_calls()
    assert (call.id, call.name, call.args) == ("toolu_1", "get_weather", {"city": "Paris"})
    assert final.finish_reason is FinishReason.STOP and final.custom_metadata == {"finish_reason": "tool_use"}
    assert final.usage_metadata == UsageMetadata(prompt_token_count=12, candidates_token_count=34, total_token_count=46)
    assert final.model_version == "claude-sonnet-4-5"


def test_parse_response_of_an_error_body() -> None:
    body = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    (chunk,) = AnthropicChunkParser().parse_response(body)
    assert chunk.error is not None and chunk.error.retryable and chunk.error.code == "overloaded_error"


@pytest.mark.parametrize(
    "body", [b"not json", b"[]", b'{"type":"message","content":"x"}', b'{"content":[{"type":"text"}]}']
)
def test_parse_response_rejects_garbage_with_protocol_error(body: bytes) -> None:
    with pytest.raises(ProtocolError):
        AnthropicChunkParser().parse_response(body)


# --- garbage ---------------------------------------------------------------------------------------

GARBAGE = {
    "bad json": ("content_block_delta", '{"type":"content_block_delta",'),
    "json array": ("message_start", "[1, 2]"),
    "unknown block index": ("content_block_delta", json.dumps(text_delta("x", index=7)[1])),
    "index is a string": ("content_block_delta", json.dumps({**text_delta("x")[1], "index": "0"})),
    "index is a bool": ("content_block_stop", '{"type":"content_block_stop","index":true}'),
    "negative index": ("content_block_stop", '{"type":"content_block_stop","index":-1}'),
    "delta missing": ("content_block_delta", '{"type":"content_block_delta","index":0}'),
    "delta without type": ("content_block_delta", '{"type":"content_block_delta","index":0,"delta":{}}'),
    "text is a number": (
        "content_block_delta",
        json.dumps({**text_delta("x")[1], "delta": {"type": "text_delta", "text": 5}}),
    ),
    "thinking delta on a text block": (
        "content_block_delta",
        '{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"x"}}',
    ),
    "stop for a block never started": ("content_block_stop", '{"type":"content_block_stop","index":3}'),
    "block started twice": ("content_block_start", json.dumps(TEXT_BLOCK[1])),
    "start without content_block": ("content_block_start", '{"type":"content_block_start","index":1}'),
    "tool_use without id": (
        "content_block_start",
        '{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","name":"f","input":{}}}',
    ),
    "redacted without data": (
        "content_block_start",
        '{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking"}}',
    ),
    "message is a list": ("message_start", '{"type":"message_start","message":[]}'),
    # a bad usage figure is not garbage: it is dropped and the answer kept (tests/providers/test_usage_rule.py)
    "stop_reason is a number": ("message_delta", '{"type":"message_delta","delta":{"stop_reason":1}}'),
    "message_delta without delta": ("message_delta", '{"type":"message_delta"}'),
}


@pytest.mark.parametrize("event", list(GARBAGE.values()), ids=list(GARBAGE))
def test_garbage_raises_protocol_error_only(event: tuple[str, str]) -> None:
    parser = AnthropicChunkParser()
    parser.parse(SseEvent("content_block_start", json.dumps(TEXT_BLOCK[1])))  # block 0 is an open text block
    with pytest.raises(ProtocolError) as info:
        parser.parse(SseEvent(*event))
    assert info.value.provider == "anthropic"


EVENT_TYPES = ["message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "text", "tool_use", "thinking", "x"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["type", "index", "delta", "text", "content_block", "message", "usage", "id", "name"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(EVENT_TYPES),
    body=st.dictionaries(
        st.sampled_from(["index", "delta", "content_block", "message", "usage"]), json_values, max_size=4
    ),
)
def test_fuzzed_shapes_raise_protocol_error_or_parse(kind: str, body: dict[str, Any]) -> None:
    parser = AnthropicChunkParser()
    parser.parse(SseEvent("content_block_start", json.dumps(TEXT_BLOCK[1])))
    try:
        chunk = parser.parse(SseEvent(kind, json.dumps({"type": kind, **body})))
    except ProtocolError:
        return
    assert chunk is None or isinstance(chunk, Chunk)
