"""OpenAiChatChunkParser: every recorded Chat Completions stream, split every awkward way, through
SseDecoder -> parser -> StreamAggregator; plus the parser's field-by-field rules and its shape checks."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

import pytest
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
    SseEvent,
    StreamAggregator,
    ToolCallFragment,
    UsageMetadata,
)
from rxllm.providers._openai_chat import OpenAiChatChunkParser
from rxllm.testing import assert_stream_protocol

OPENAI_CHAT = by_protocol("openai-chat")

# error_code each transcript's final must carry (None for all the others)
EXPECTED_ERROR_CODES = {
    "openai/chat-length-max-tokens": "MAX_TOKENS",
    "openai/chat-refusal": "REFUSAL",
    "openai-compatible/llamacpp-text-length": "MAX_TOKENS",
    "openai-compatible/groq-gpt-oss-error-event": "tool_use_failed",
    "openai-compatible/openrouter-minimax-length-error-chunk": "400",
}

FINISH_REASONS = {
    None: None,
    "stop": FinishReason.STOP,
    "length": FinishReason.MAX_TOKENS,
    "tool_calls": FinishReason.STOP,
}


def replay(pieces: Sequence[bytes]) -> tuple[list[LlmResponse], bool]:
    """Feed ``pieces`` as successive reads; stop after an end-of-stream chunk. Returns (responses, saw end)."""
    return replay_reads(pieces, OpenAiChatChunkParser(), StreamAggregator(provider="openai"))


def expected_usage(raw: dict[str, Any] | None) -> UsageMetadata | None:
    if raw is None:
        return None
    return UsageMetadata(
        prompt_token_count=raw.get("prompt_tokens"),
        candidates_token_count=raw.get("completion_tokens"),
        total_token_count=raw.get("total_tokens"),
        thoughts_token_count=(raw.get("completion_tokens_details") or {}).get("reasoning_tokens"),
        cached_content_token_count=(raw.get("prompt_tokens_details") or {}).get("cached_tokens"),
    )


def test_every_openai_chat_transcript_is_covered() -> None:
    dirs = {t.provider_dir for t in OPENAI_CHAT}
    assert dirs == {"openai", "openai-compatible"}
    assert len(OPENAI_CHAT) == 25


@pytest.mark.parametrize("split", range(len(AWKWARD_SPLIT_NAMES)), ids=AWKWARD_SPLIT_NAMES)
@pytest.mark.parametrize("transcript", OPENAI_CHAT, ids=lambda t: t.name)
def test_transcript_aggregates_to_expected(transcript: Transcript, split: int) -> None:
    pieces = awkward_splits(transcript.raw)[split]
    responses, saw_end = replay(pieces)
    assert saw_end, "every recorded stream ends with [DONE] or an error event"
    final = assert_replay_matches_expected(
        responses,
        transcript.expected,
        usage=expected_usage,
        finish_reason=FINISH_REASONS[transcript.expected["finish_reason"]],
        error_code=EXPECTED_ERROR_CODES.get(transcript.name),
    )
    assert final.model_version is not None


def test_refusal_transcript_surfaces_the_refusal_text() -> None:
    transcript = by_name("openai/chat-refusal")
    final = assert_stream_protocol(replay([transcript.raw])[0])
    assert final.error_code == "REFUSAL"
    assert final.error_message == transcript.expected["_info"]["refusal"]
    assert final.error_message == "I'm sorry, I can't assist with that request."


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("openai-compatible/groq-gpt-oss-error-event", "tool_use_failed"),
        ("openai-compatible/openrouter-minimax-length-error-chunk", "400"),
    ],
)
def test_error_transcripts_keep_what_arrived_and_report_the_error(name: str, code: str) -> None:
    transcript = by_name(name)
    responses, _ = replay([transcript.raw])
    final = assert_stream_protocol(responses)
    assert final.error_code == code
    assert final.error_message == transcript.expected["_info"]["errors"][0]["error"]["message"]
    assert final.thought_text() == transcript.expected["thinking"]
    assert final.thought_text()  # the reasoning that streamed before the error is kept
    assert len(responses) > 1


def test_groq_error_event_ends_the_stream() -> None:
    # Anything after Groq's `event: error` must not be read: the replay stops at the error chunk.
    transcript = by_name("openai-compatible/groq-gpt-oss-error-event")
    trailing = b'data: {"choices":[{"index":0,"delta":{"content":"late"}}]}\n\n'
    final = assert_stream_protocol(replay([transcript.raw + trailing])[0])
    assert final.text() == ""
    assert final.error_code == "tool_use_failed"


def test_kimi_repeated_id_and_name_are_not_concatenated() -> None:
    final = assert_stream_protocol(
        replay([by_name("openai-compatible/openrouter-kimi-k2-tool-call-no-finish-reason").raw])[0]
    )
    [call] = final.function_calls()
    assert (call.id, call.name, call.args) == ("0", "llm_version", {})
    assert final.finish_reason is None and final.error_code is None


def test_n3_stream_answers_with_choice_zero_only() -> None:
    transcript = by_name("openai/chat-n3-multiple-choices")
    final = assert_stream_protocol(replay([transcript.raw])[0])
    choices = transcript.expected["_info"]["choices"]
    assert final.text() == choices[0]["text"]
    assert final.text() not in (choices[1]["text"], choices[2]["text"])


@pytest.mark.parametrize(
    ("stream", "code", "retryable"),
    [
        (b'data: {"error":{"message":"overloaded","type":"server_error"}}\n\n', "server_error", True),
        (
            b'event: error\ndata: {"error":{"message":"bad call","type":"invalid_request_error",'
            b'"code":"tool_use_failed","status_code":400}}\n\n',
            "tool_use_failed",
            False,
        ),
        (b'data: {"choices":[],"error":{"code":429,"message":"slow down"}}\n\n', "429", True),
    ],
)
def test_error_before_any_partial_raises_provider_error(stream: bytes, code: str, retryable: bool) -> None:
    head = b'data: {"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    tail = b'data: {"choices":[{"index":0,"delta":{"content":"never"}}]}\n\ndata: [DONE]\n\n'
    for pieces in awkward_splits(head + stream + tail):
        with pytest.raises(ProviderError) as info:
            replay(pieces)
        assert info.value.code == code
        assert info.value.retryable is retryable
        assert info.value.provider == "openai"


# ------------------------------------------------------------------ field-by-field rules


def parse(payload: object, *, event: str = "message") -> Chunk | None:
    return OpenAiChatChunkParser().parse(SseEvent(event=event, data=json.dumps(payload)))


def parse_delta(delta: dict[str, Any], **choice: Any) -> Chunk:
    chunk = parse({"model": "m", "choices": [{"index": 0, "delta": delta, **choice}]})
    assert chunk is not None
    return chunk


def test_done_sentinel_ends_the_stream() -> None:
    parser = OpenAiChatChunkParser()
    assert parser.parse(SseEvent(data="[DONE]")) == Chunk(end_of_stream=True)
    assert parser.parse(SseEvent(data=" [DONE] ")) == Chunk(end_of_stream=True)


def test_other_event_types_carry_nothing() -> None:
    assert OpenAiChatChunkParser().parse(SseEvent(event="ping", data="{}")) is None


def test_text_and_model_version() -> None:
    chunk = parse_delta({"role": "assistant", "content": "Hi"})
    assert (chunk.text_delta, chunk.model_version, chunk.end_of_stream) == ("Hi", "m", False)
    assert parse_delta({"content": ""}).text_delta is None
    assert parse_delta({"content": None}).text_delta is None


def test_content_array_of_text_and_thinking_parts() -> None:
    chunk = parse_delta(
        {
            "content": [
                {"type": "thinking", "thinking": [{"type": "text", "text": "hmm"}, {"type": "text", "text": "..."}]},
                {"type": "text", "text": "Answer"},
                {"type": "reference", "reference_ids": [1]},
                {"type": "thinking", "thinking": "more"},
            ]
        }
    )
    assert (chunk.text_delta, chunk.thought_delta) == ("Answer", "hmm...more")


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_reasoning_fields_are_thought(key: str) -> None:
    assert parse_delta({key: "think", "content": None}).thought_delta == "think"


def test_reasoning_sent_twice_is_read_once() -> None:
    # vLLM sends the same text in both fields during its rename.
    assert parse_delta({"reasoning_content": "a", "reasoning": "a"}).thought_delta == "a"


def test_refusal() -> None:
    assert parse_delta({"refusal": "No."}).refusal_delta == "No."
    assert parse_delta({"refusal": None, "content": "x"}).refusal_delta is None


def test_tool_call_fragments() -> None:
    chunk = parse_delta(
        {
            "tool_calls": [
                {"index": 1, "id": "call_b", "type": "function", "function": {"name": "b", "arguments": ""}},
                {"index": 0, "function": {"arguments": '{"x":'}},
            ]
        }
    )
    assert chunk.tool_call_fragments == (
        ToolCallFragment(index=1, id="call_b", name="b", arguments_delta=""),
        ToolCallFragment(index=0, id=None, name=None, arguments_delta='{"x":'),
    )


def test_tool_call_without_index_uses_position_and_object_arguments_are_encoded() -> None:
    chunk = parse_delta({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": {"k": 1}}}]})
    assert chunk.tool_call_fragments == (ToolCallFragment(index=0, id="a", name="f", arguments_delta='{"k":1}'),)


@pytest.mark.parametrize(
    ("raw", "mapped"),
    [
        ("stop", FinishReason.STOP),
        ("length", FinishReason.MAX_TOKENS),
        ("tool_calls", FinishReason.STOP),
        ("function_call", FinishReason.STOP),
        ("content_filter", FinishReason.SAFETY),
        ("eos", FinishReason.OTHER),
        ("insufficient_system_resource", FinishReason.OTHER),
    ],
)
def test_finish_reasons(raw: str, mapped: FinishReason) -> None:
    chunk = parse_delta({}, finish_reason=raw)
    assert (chunk.finish_reason, chunk.raw_finish_reason) == (mapped, raw)


def test_no_finish_reason() -> None:
    chunk = parse_delta({"content": "x"}, finish_reason=None)
    assert (chunk.finish_reason, chunk.raw_finish_reason) == (None, None)


def test_usage_in_a_choiceless_chunk_with_every_field() -> None:
    chunk = parse(
        {
            "choices": [],
            "usage": {
                "prompt_tokens": 10,
                "completion_tokens": 20,
                "total_tokens": 30,
                "prompt_tokens_details": {"cached_tokens": 4},
                "completion_tokens_details": {"reasoning_tokens": 7},
            },
        }
    )
    assert chunk is not None
    assert chunk.usage == UsageMetadata(
        prompt_token_count=10,
        candidates_token_count=20,
        total_token_count=30,
        thoughts_token_count=7,
        cached_content_token_count=4,
    )


def test_usage_missing_keys_are_none_and_null_usage_is_no_usage() -> None:
    chunk = parse({"usage": {"prompt_tokens": 3, "completion_tokens_details": None, "total_tokens": "many"}})
    assert chunk is not None
    assert chunk.usage == UsageMetadata(prompt_token_count=3)
    null = parse_delta({"content": "x"}, usage=None)
    assert null.usage is None
    assert (parse({"choices": [], "usage": None}) or Chunk()).usage is None


def test_usage_after_the_usage_chunk_does_not_clear_it() -> None:
    stream = (
        b'data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}],"usage":null}\n\n'
        b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}\n\n'
        b'data: {"choices":[],"moderation":{"flagged":false}}\n\n'
        b"data: [DONE]\n\n"
    )
    final = assert_stream_protocol(replay([stream])[0])
    assert final.usage_metadata == UsageMetadata(prompt_token_count=1, candidates_token_count=2, total_token_count=3)


def test_choice_zero_is_found_by_index() -> None:
    chunk = parse({"choices": [{"index": 1, "delta": {"content": "B"}}, {"index": 0, "delta": {"content": "A"}}]})
    assert chunk is not None and chunk.text_delta == "A"
    other = parse({"choices": [{"index": 2, "delta": {"content": "C"}, "finish_reason": "stop"}]})
    assert other is not None and (other.text_delta, other.finish_reason) == (None, None)


def test_unknown_fields_are_ignored() -> None:
    chunk = parse(
        {
            "obfuscation": "xyz",
            "x_groq": {"id": "req"},
            "service_tier": "default",
            "choices": [{"index": 0, "delta": {"content": "a", "channel": "final"}, "logprobs": {"content": []}}],
        }
    )
    assert chunk is not None and chunk.text_delta == "a"


@pytest.mark.parametrize(
    ("error", "code", "retryable"),
    [
        ({"message": "m", "type": "server_error"}, "server_error", True),
        ({"message": "m", "type": "overloaded_error"}, "overloaded_error", True),
        ({"message": "m", "code": "rate_limit_exceeded", "type": "requests"}, "rate_limit_exceeded", True),
        ({"message": "m", "code": 503}, "503", True),
        ({"message": "m", "code": 429}, "429", True),
        ({"message": "m", "status": 502, "type": "upstream"}, "upstream", True),
        (
            {"message": "m", "type": "invalid_request_error", "code": "tool_use_failed", "status_code": 400},
            "tool_use_failed",
            False,
        ),
        ({"message": "m", "code": 400}, "400", False),
        ({"message": "m", "type": "invalid_request_error"}, "invalid_request_error", False),
        ({"message": "m"}, None, False),
    ],
)
def test_error_chunk_code_and_retryable(error: dict[str, Any], code: str | None, retryable: bool) -> None:
    chunk = parse({"error": error})
    assert chunk is not None and chunk.error is not None
    assert (chunk.error.message, chunk.error.code, chunk.error.retryable) == ("m", code, retryable)
    assert not chunk.end_of_stream  # a data chunk's error does not end the stream ([DONE] follows)


def test_error_chunk_as_a_bare_string_and_without_message() -> None:
    chunk = parse({"error": "boom"})
    assert chunk is not None and chunk.error is not None and chunk.error.message == "boom"
    chunk = parse({"error": {"code": "x"}})
    assert chunk is not None and chunk.error is not None and chunk.error.message and chunk.error.code == "x"


def test_error_event_ends_the_stream_even_with_non_json_data() -> None:
    chunk = OpenAiChatChunkParser().parse(SseEvent(event="error", data="upstream exploded"))
    assert chunk is not None and chunk.end_of_stream
    assert chunk.error is not None and (chunk.error.message, chunk.error.retryable) == ("upstream exploded", False)


# ------------------------------------------------------------------ shapes the protocol does not allow


@pytest.mark.parametrize("data", ["{", "not json", '{"choices": [}', "\ud800", "[1, 2]", "1", "null", '"text"', "true"])
def test_bad_json_or_non_object_payload_is_a_protocol_error(data: str) -> None:
    with pytest.raises(ProtocolError):
        OpenAiChatChunkParser().parse(SseEvent(data=data))


@pytest.mark.parametrize(
    "payload",
    [
        {"choices": {}},
        {"choices": ["x"]},
        {"choices": [{"index": "0", "delta": {}}]},
        {"choices": [{"index": 0, "delta": []}]},
        {"choices": [{"index": 0, "delta": {"content": 5}}]},
        {"choices": [{"index": 0, "delta": {"content": [5]}}]},
        {"choices": [{"index": 0, "delta": {"content": [{"type": "text", "text": 5}]}}]},
        {"choices": [{"index": 0, "delta": {"content": [{"type": "thinking", "thinking": 5}]}}]},
        {"choices": [{"index": 0, "delta": {"reasoning_content": 5}}]},
        {"choices": [{"index": 0, "delta": {"refusal": []}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": {}}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": "a"}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": "f"}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": 5}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": 5}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": 1}]},
    ],
)
def test_wrong_shapes_are_protocol_errors(payload: object) -> None:
    with pytest.raises(ProtocolError):
        parse(payload)


def _random_json(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(8 if depth < 3 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.randint(-3, 3)
    if kind == 3:
        return rng.random()
    if kind in (4, 5):
        return rng.choice(["", "0", "text", "stop", "thinking", "[DONE]"])
    if kind == 6:
        return [_random_json(rng, depth + 1) for _ in range(rng.randrange(3))]
    keys = ["index", "type", "text", "thinking", "content", "function", "arguments", "name", "id", "message"]
    return {rng.choice(keys): _random_json(rng, depth + 1) for _ in range(rng.randrange(3))}


_TEMPLATE: dict[str, Any] = {
    "model": "m",
    "error": None,
    "usage": {"prompt_tokens": 1, "completion_tokens_details": {"reasoning_tokens": 1}},
    "choices": [
        {
            "index": 0,
            "finish_reason": None,
            "delta": {
                "content": [{"type": "thinking", "thinking": [{"type": "text", "text": "t"}]}, {"type": "text"}],
                "reasoning_content": "r",
                "refusal": None,
                "tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}],
            },
        }
    ],
}


def _paths(value: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            found += _paths(inner, (*prefix, i))
    return found


def _replaced(value: Any, path: tuple[Any, ...], new: object) -> Any:
    if not path:
        return new
    copy = json.loads(json.dumps(value))
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new
    return copy


def test_any_value_anywhere_gives_a_chunk_or_a_protocol_error() -> None:
    rng = random.Random(20240501)
    parser = OpenAiChatChunkParser()
    for path in _paths(_TEMPLATE):
        for _ in range(40):
            data = json.dumps(_replaced(_TEMPLATE, path, _random_json(rng)))
            for event in ("message", "error"):
                try:
                    parser.parse(SseEvent(event=event, data=data))
                    parser.parse_response(data.replace('"delta"', '"message"').encode())
                except ProtocolError:
                    pass


# ------------------------------------------------------------------ non-streamed bodies


def test_parse_response_of_a_complete_body() -> None:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Checking.",
                    "reasoning_content": "need the tool",
                    "refusal": None,
                    "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "get", "arguments": '{"id":"A17"}'}},
                        {"id": "call_2", "type": "function", "function": {"name": "put", "arguments": "{}"}},
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11},
    }
    [chunk] = OpenAiChatChunkParser().parse_response(json.dumps(body).encode())
    assert chunk.end_of_stream
    assert chunk.tool_call_fragments == (
        ToolCallFragment(index=0, id="call_1", name="get", arguments_delta='{"id":"A17"}', complete=True),
        ToolCallFragment(index=1, id="call_2", name="put", arguments_delta="{}", complete=True),
    )
    aggregator = StreamAggregator()
    aggregator.accept(chunk)
    final = aggregator.finish()
    assert (final.text(), final.thought_text(), final.model_version) == ("Checking.", "need the tool", "gpt-4o-mini")
    assert [(c.id, c.name, c.args) for c in final.function_calls()] == [
        ("call_1", "get", {"id": "A17"}),
        ("call_2", "put", {}),
    ]
    assert final.finish_reason is FinishReason.STOP
    assert (final.custom_metadata or {})["finish_reason"] == "tool_calls"
    assert final.usage_metadata == UsageMetadata(prompt_token_count=5, candidates_token_count=6, total_token_count=11)


def test_parse_response_content_array_and_refusal() -> None:
    body = {
        "choices": [
            {
                "index": 0,
                "message": {
                    "content": [
                        {"type": "thinking", "thinking": [{"type": "text", "text": "t"}]},
                        {"type": "text", "text": "a"},
                    ],
                    "refusal": "no",
                },
                "finish_reason": "stop",
            }
        ]
    }
    [chunk] = OpenAiChatChunkParser().parse_response(json.dumps(body).encode())
    assert (chunk.text_delta, chunk.thought_delta, chunk.refusal_delta) == ("a", "t", "no")


def test_parse_response_error_body() -> None:
    body = b'{"error":{"message":"The server is overloaded","type":"server_error"}}'
    [chunk] = OpenAiChatChunkParser().parse_response(body)
    assert chunk.error is not None and chunk.end_of_stream
    assert (chunk.error.code, chunk.error.retryable) == ("server_error", True)


@pytest.mark.parametrize(
    "body", [b"", b"{", b"\xff\xfe", b"[]", b'{"choices":[]}', b'{"choices":[{"index":0,"message":"x"}]}']
)
def test_parse_response_rejects_bodies_that_are_not_a_completion(body: bytes) -> None:
    with pytest.raises(ProtocolError):
        OpenAiChatChunkParser().parse_response(body)
