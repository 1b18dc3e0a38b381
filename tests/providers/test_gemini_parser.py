"""GeminiChunkParser: recorded Gemini streams through decoder -> parser -> aggregator, plus the
synthetic cases the recordings lack (blocked prompt, streamed ``partialArgs``, errors, garbage)."""

from __future__ import annotations

import base64
import copy
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rxllm import (
    Chunk,
    FinishReason,
    LlmResponse,
    MalformedFunctionCallError,
    ProtocolError,
    ProviderError,
    SseEvent,
    StreamAggregator,
    UsageMetadata,
)
from rxllm.providers._gemini import GeminiChunkParser
from rxllm.testing import assert_stream_protocol

_TESTS_DIR = str(Path(__file__).resolve().parents[1])  # tests/ holds the shared transcripts helper
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)
from transcripts import (  # noqa: E402
    AWKWARD_SPLIT_NAMES,
    Transcript,
    assert_replay_matches_expected,
    awkward_splits,
    by_protocol,
    replay_reads,
)

GEMINI = by_protocol("gemini")
_USAGE_KEYS = {
    "promptTokenCount": "prompt_token_count",
    "candidatesTokenCount": "candidates_token_count",
    "totalTokenCount": "total_token_count",
    "thoughtsTokenCount": "thoughts_token_count",
    "cachedContentTokenCount": "cached_content_token_count",
}


# ----------------------------------------------------------------------------- helpers


def _replay(pieces: list[bytes]) -> tuple[list[LlmResponse], StreamAggregator]:
    aggregator = StreamAggregator(provider="gemini")
    responses, _ = replay_reads(pieces, GeminiChunkParser(), aggregator)
    return responses, aggregator


def _data_events(raw: bytes) -> Iterator[dict[str, Any]]:
    """Reference reading of a CRLF-framed transcript, independent of SseDecoder."""
    for block in raw.decode("utf-8").split("\r\n\r\n"):
        if block.startswith("data: "):
            yield json.loads(block[len("data: ") :])


def _expected_usage(raw: dict[str, Any] | None) -> UsageMetadata | None:
    if raw is None:
        return None
    return UsageMetadata(**{field: raw[key] for key, field in _USAGE_KEYS.items() if key in raw})


def _event(payload: object) -> SseEvent:
    return SseEvent(data=json.dumps(payload))


def _parts_event(*parts: dict[str, Any], **extra: Any) -> SseEvent:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    candidate.update({k: v for k, v in extra.items() if k == "finishReason"})
    payload: dict[str, Any] = {"candidates": [candidate]}
    payload.update({k: v for k, v in extra.items() if k != "finishReason"})
    return _event(payload)


def _run(*events: SseEvent) -> list[LlmResponse]:
    parser = GeminiChunkParser()
    aggregator = StreamAggregator(provider="gemini")
    out: list[LlmResponse] = []
    for event in events:
        chunk = parser.parse(event)
        if chunk is not None:
            out.extend(aggregator.accept(chunk))
    out.append(aggregator.finish())
    return out


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# ----------------------------------------------------------------------------- transcripts


@pytest.mark.parametrize("split", range(len(AWKWARD_SPLIT_NAMES)), ids=AWKWARD_SPLIT_NAMES)
@pytest.mark.parametrize("transcript", GEMINI, ids=lambda t: t.name)
def test_transcript_replays_to_expected_aggregate(transcript: Transcript, split: int) -> None:
    pieces = awkward_splits(transcript.raw)[split]
    assert b"".join(pieces) == transcript.raw
    responses, aggregator = _replay(pieces)
    expected = transcript.expected
    final = assert_replay_matches_expected(
        responses, expected, usage=_expected_usage, finish_reason=FinishReason(expected["finish_reason"])
    )
    assert [e["index"] for e in expected["tool_calls"]] == list(range(len(final.function_calls())))
    call_parts = [p for p in final.content.parts if p.function_call is not None] if final.content else []
    for part, want in zip(call_parts, expected["tool_calls"], strict=True):
        signature = want.get("thought_signature")
        assert part.thought_signature == (base64.b64decode(signature) if signature else None)
    assert aggregator.is_complete
    last_event = list(_data_events(transcript.raw))[-1]
    assert final.model_version == last_event["modelVersion"]


@pytest.mark.parametrize("transcript", GEMINI, ids=lambda t: t.name)
def test_transcript_text_signature_lands_on_the_final_text_part(transcript: Transcript) -> None:
    want = None
    for event in _data_events(transcript.raw):
        for part in event["candidates"][0].get("content", {}).get("parts", []):
            if "thoughtSignature" in part and "functionCall" not in part and not part.get("thought"):
                want = base64.b64decode(part["thoughtSignature"])
    final = _replay([transcript.raw])[0][-1]
    text_parts = [p for p in final.content.parts if not p.thought and p.function_call is None] if final.content else []
    if want is None:
        assert all(p.thought_signature is None for p in text_parts)
    else:
        assert [p.thought_signature for p in text_parts] == [want]


def test_thinking_transcript_keeps_thought_and_answer_apart() -> None:
    transcript = next(t for t in GEMINI if t.name == "gemini/thinking-thought-parts")
    responses, _ = _replay([transcript.raw])
    thought_partials = [r for r in responses[:-1] if r.thought_text()]
    assert len(thought_partials) == 4
    assert all(not r.text() for r in thought_partials)
    final = responses[-1]
    assert final.content is not None and final.content.parts[0].thought is True


# ----------------------------------------------------------------------------- parts -> one chunk


def test_several_parts_of_one_event_make_one_chunk() -> None:
    chunk = GeminiChunkParser().parse(
        _parts_event(
            {"text": "plan ", "thought": True},
            {"text": "more plan", "thought": True, "thoughtSignature": _b64(b"T")},
            {"text": "Hello"},
            {"text": ", world", "thoughtSignature": _b64(b"S")},
        )
    )
    assert chunk == Chunk(
        text_delta="Hello, world",
        thought_delta="plan more plan",
        thought_signature=b"T",
        text_signature=b"S",
    )


def test_function_call_part_signature_goes_on_the_fragment() -> None:
    parser = GeminiChunkParser()
    first = parser.parse(
        _parts_event(
            {"text": "Checking."},
            {"functionCall": {"name": "a", "args": {"x": 1}}, "thoughtSignature": _b64(b"sig-a")},
            {"functionCall": {"id": "call-b", "name": "b", "args": {}}},
        )
    )
    second = parser.parse(_parts_event({"functionCall": {"name": "c", "args": {"y": [1, "é"]}}}))
    assert first is not None and second is not None
    assert first.text_delta == "Checking." and first.text_signature is None
    fragments = [*first.tool_call_fragments, *second.tool_call_fragments]
    assert [(f.index, f.id, f.name, json.loads(f.arguments_delta), f.complete) for f in fragments] == [
        (0, None, "a", {"x": 1}, True),
        (1, "call-b", "b", {}, True),
        (2, None, "c", {"y": [1, "é"]}, True),
    ]
    assert [f.thought_signature for f in fragments] == [b"sig-a", None, None]


def test_whole_calls_aggregate_in_order_with_ids() -> None:
    responses = _run(
        _parts_event({"functionCall": {"name": "a", "args": {"q": 1}}, "thoughtSignature": _b64(b"s")}),
        _parts_event({"functionCall": {"id": "given", "name": "b", "args": {}}}, finishReason="STOP"),
    )
    final = assert_stream_protocol(responses)
    calls = final.function_calls()
    assert [(c.name, c.args) for c in calls] == [("a", {"q": 1}), ("b", {})]
    assert calls[0].id is not None and calls[0].id.startswith("adk-")
    assert calls[1].id == "given"
    assert final.content is not None and final.content.parts[0].thought_signature == b"s"


def test_url_safe_signature_is_accepted() -> None:
    raw = bytes(range(250, 256)) * 3
    chunk = GeminiChunkParser().parse(
        _parts_event({"text": "x", "thoughtSignature": base64.urlsafe_b64encode(raw).decode().rstrip("=")})
    )
    assert chunk is not None and chunk.text_signature == raw


def test_empty_text_part_with_signature_keeps_the_signature() -> None:
    responses = _run(
        _parts_event({"text": "Answer"}),
        _parts_event({"text": "", "thoughtSignature": _b64(b"end")}, finishReason="STOP"),
    )
    final = assert_stream_protocol(responses)
    assert final.content is not None
    assert [(p.text, p.thought_signature) for p in final.content.parts] == [("Answer", b"end")]


# ----------------------------------------------------------------------------- finish, usage, version


@pytest.mark.parametrize(
    ("raw", "mapped"),
    [
        ("STOP", FinishReason.STOP),
        ("MAX_TOKENS", FinishReason.MAX_TOKENS),
        ("MALFORMED_FUNCTION_CALL", FinishReason.MALFORMED_FUNCTION_CALL),
        ("TOO_MANY_TOOL_CALLS", FinishReason.OTHER),
        ("SOMETHING_NEW", FinishReason.OTHER),
    ],
)
def test_finish_reason_maps_by_name_and_keeps_raw(raw: str, mapped: FinishReason) -> None:
    chunk = GeminiChunkParser().parse(_parts_event({"text": "x"}, finishReason=raw))
    assert chunk is not None
    assert (chunk.finish_reason, chunk.raw_finish_reason, chunk.end_of_stream) == (mapped, raw, False)


def test_usage_and_model_version() -> None:
    usage = {
        "promptTokenCount": 10,
        "candidatesTokenCount": 5,
        "totalTokenCount": 40,
        "thoughtsTokenCount": 20,
        "cachedContentTokenCount": 5,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 10}],
    }
    chunk = GeminiChunkParser().parse(_event({"usageMetadata": usage, "modelVersion": "gemini-x"}))
    assert chunk == Chunk(
        usage=UsageMetadata(
            prompt_token_count=10,
            candidates_token_count=5,
            total_token_count=40,
            thoughts_token_count=20,
            cached_content_token_count=5,
        ),
        model_version="gemini-x",
    )


def test_usage_is_cumulative_and_the_last_one_wins() -> None:
    responses = _run(
        _parts_event({"text": "a"}, usageMetadata={"promptTokenCount": 3, "totalTokenCount": 3}),
        _parts_event({"text": "b"}, usageMetadata={"promptTokenCount": 3, "candidatesTokenCount": 2}),
        _parts_event({"text": ""}, finishReason="STOP"),
    )
    final = assert_stream_protocol(responses)
    assert final.usage_metadata == UsageMetadata(prompt_token_count=3, candidates_token_count=2)


@pytest.mark.parametrize("payload", [{}, {"candidates": []}, {"candidates": [{"index": 0}]}, {"responseId": "r"}])
def test_event_carrying_nothing_yields_none(payload: dict[str, Any]) -> None:
    assert GeminiChunkParser().parse(_event(payload)) is None


def test_unknown_part_kinds_are_skipped() -> None:
    chunk = GeminiChunkParser().parse(
        _parts_event({"executableCode": {"language": "PYTHON", "code": "1"}}, {"text": "ok"})
    )
    assert chunk == Chunk(text_delta="ok")


# ----------------------------------------------------------------------------- blocked prompt, errors


def test_blocked_prompt_is_an_in_band_safety_error() -> None:
    event = _event(
        {
            "promptFeedback": {"blockReason": "PROHIBITED_CONTENT", "blockReasonMessage": "nope"},
            "usageMetadata": {"promptTokenCount": 7, "totalTokenCount": 7},
            "modelVersion": "gemini-2.5-flash",
        }
    )
    chunk = GeminiChunkParser().parse(event)
    assert chunk is not None and chunk.error is not None
    assert (chunk.error.code, chunk.error.retryable) == ("PROHIBITED_CONTENT", False)
    assert "PROHIBITED_CONTENT" in chunk.error.message and "nope" in chunk.error.message
    assert chunk.finish_reason is FinishReason.SAFETY


def test_blocked_prompt_raises_provider_error_through_the_aggregator() -> None:
    with pytest.raises(ProviderError) as info:
        _run(_event({"promptFeedback": {"blockReason": "SAFETY"}}))
    assert (info.value.code, info.value.retryable, info.value.provider) == ("SAFETY", False, "gemini")


def test_prompt_feedback_without_block_reason_is_not_an_error() -> None:
    chunk = GeminiChunkParser().parse(
        _parts_event({"text": "fine"}, promptFeedback={"safetyRatings": [{"category": "X", "probability": "LOW"}]})
    )
    assert chunk == Chunk(text_delta="fine")


@pytest.mark.parametrize(
    ("error", "code", "retryable"),
    [
        ({"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}, "RESOURCE_EXHAUSTED", True),
        ({"code": 503, "message": "overloaded"}, "503", True),
        ({"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}, "INVALID_ARGUMENT", False),
    ],
)
def test_error_object_is_an_in_band_error(error: dict[str, Any], code: str, retryable: bool) -> None:
    chunk = GeminiChunkParser().parse(_event({"error": error}))
    assert chunk is not None and chunk.error is not None
    assert (chunk.error.message, chunk.error.code, chunk.error.retryable) == (error["message"], code, retryable)


def test_error_after_text_is_reported_on_the_final() -> None:
    responses = _run(
        _parts_event({"text": "Part"}),
        _event({"error": {"code": 500, "message": "internal", "status": "INTERNAL"}}),
    )
    final = assert_stream_protocol(responses)
    assert (final.text(), final.error_code, final.error_message) == ("Part", "INTERNAL", "internal")


# ----------------------------------------------------------------------------- streamed partialArgs


def _call(**fields: Any) -> dict[str, Any]:
    return {"functionCall": fields}


def test_streamed_arguments_merge_by_json_path() -> None:
    """Vertex's shape: name + willContinue first, typed values by JSON path, an empty call to end."""
    responses = _run(
        _parts_event({"text": "Let me check."}),
        _parts_event(_call(name="set_light", id="c1", willContinue=True)),
        _parts_event(
            _call(
                willContinue=True,
                partialArgs=[
                    {"jsonPath": "$.location", "stringValue": "Bos", "willContinue": True},
                    {"jsonPath": "$.brightness", "numberValue": 50},
                ],
            )
        ),
        _parts_event(
            _call(
                willContinue=True,
                partialArgs=[
                    {"jsonPath": "$.location", "stringValue": "ton, MA"},
                    {"jsonPath": "$.on", "boolValue": True},
                    {"jsonPath": "$.room['main hall'].lamps[1].name", "stringValue": "desk"},
                    {"jsonPath": "$.note", "nullValue": "NULL_VALUE"},
                    {"jsonPath": "$.later", "willContinue": True},
                ],
            )
        ),
        _parts_event(_call(), finishReason="STOP"),
    )
    final = assert_stream_protocol(responses)
    assert final.text() == "Let me check."
    [call] = final.function_calls()
    assert (call.id, call.name) == ("c1", "set_light")
    assert call.args == {
        "location": "Boston, MA",
        "brightness": 50,
        "on": True,
        "room": {"main hall": {"lamps": [None, {"name": "desk"}]}},
        "note": None,
    }
    assert final.error_code is None


def test_streamed_call_ends_on_the_fragment_without_will_continue() -> None:
    """go-genai's shape: willContinue on every piece but the last; a trailing ``{}`` is ignored."""
    parser = GeminiChunkParser()
    sig = _b64(b"first-sig")
    first = parser.parse(
        _parts_event(
            {
                "functionCall": {
                    "name": "f",
                    "partialArgs": [{"jsonPath": "$.s", "stringValue": "hel", "willContinue": True}],
                    "willContinue": True,
                },
                "thoughtSignature": sig,
            }
        )
    )
    assert first is None  # nothing complete yet, and no partial for a tool call
    last = parser.parse(_parts_event(_call(name="f", partialArgs=[{"jsonPath": "$.s", "stringValue": "lo!"}])))
    assert last is not None
    [fragment] = last.tool_call_fragments
    assert (fragment.index, fragment.name, fragment.complete) == (0, "f", True)
    assert fragment.thought_signature == b"first-sig"
    assert json.loads(fragment.arguments_delta) == {"s": "hello!"}
    assert parser.parse(_parts_event(_call())) is None
    follow = parser.parse(_parts_event(_call(name="g", args={"k": 1})))
    assert follow is not None and follow.tool_call_fragments[0].index == 1


def test_partial_arg_will_continue_keeps_a_call_open_when_the_call_does_not_say() -> None:
    responses = _run(
        _parts_event(_call(name="w", partialArgs=[{"jsonPath": "$.q", "stringValue": "Bo", "willContinue": True}])),
        _parts_event(_call(partialArgs=[{"jsonPath": "$.q", "stringValue": "ston"}])),
        _parts_event(_call(), finishReason="STOP"),
    )
    [call] = assert_stream_protocol(responses).function_calls()
    assert (call.name, call.args) == ("w", {"q": "Boston"})


def test_streamed_call_seeded_with_args() -> None:
    responses = _run(
        _parts_event(_call(name="w", args={"fixed": 1}, willContinue=True)),
        _parts_event(_call(partialArgs=[{"jsonPath": "extra", "stringValue": "x"}])),
        _parts_event({"text": "done"}, finishReason="STOP"),
    )
    final = assert_stream_protocol(responses)
    assert final.function_calls()[0].args == {"fixed": 1, "extra": "x"}
    assert final.text() == "done"


def test_streamed_call_cut_off_by_max_tokens_is_left_out_and_named() -> None:
    responses = _run(
        _parts_event({"text": "Writing"}),
        _parts_event(_call(name="write", willContinue=True)),
        _parts_event(_call(willContinue=True, partialArgs=[{"jsonPath": "$.body", "stringValue": "half"}])),
        _parts_event({"text": ""}, finishReason="MAX_TOKENS"),
    )
    final = assert_stream_protocol(responses)
    assert final.function_calls() == []
    assert final.error_code == "MAX_TOKENS"
    assert final.error_message is not None and "write" in final.error_message


def test_streamed_call_still_open_at_stop_fails_loudly() -> None:
    with pytest.raises(MalformedFunctionCallError) as info:
        _run(
            _parts_event(_call(name="write", willContinue=True)),
            _parts_event(_call(willContinue=True, partialArgs=[{"jsonPath": "$.body", "stringValue": "half"}])),
            _parts_event({"text": ""}, finishReason="STOP"),
        )
    assert info.value.tool_name == "write"


@pytest.mark.parametrize(
    "second",
    [
        _call(name="other", partialArgs=[{"jsonPath": "$.a", "stringValue": "x"}]),
        _call(id="different", partialArgs=[{"jsonPath": "$.a", "stringValue": "x"}]),
        _call(partialArgs=[{"jsonPath": "$.a", "stringValue": "x"}, {"jsonPath": "$.a.b", "stringValue": "y"}]),
        _call(partialArgs=[{"jsonPath": "$.a", "stringValue": "x"}, {"jsonPath": "$.a[0]", "stringValue": "y"}]),
        _call(partialArgs=[{"jsonPath": "$.a[0]", "stringValue": "x"}, {"jsonPath": "$.a.b", "stringValue": "y"}]),
        _call(partialArgs=[{"jsonPath": "$", "stringValue": "x"}]),
        _call(partialArgs=[{"jsonPath": "$..a", "stringValue": "x"}]),
        _call(partialArgs=[{"jsonPath": "$.a[99999999]", "numberValue": 1}]),
        _call(partialArgs=[{"jsonPath": "$" + ".a" * 100, "numberValue": 1}]),
        _call(partialArgs=[{"stringValue": "no path"}]),
        _call(partialArgs=[{"jsonPath": "$.a", "stringValue": 5}]),
        _call(partialArgs=[{"jsonPath": "$.a", "numberValue": "5"}]),
        _call(partialArgs=[{"jsonPath": "$.a", "boolValue": "yes"}]),
        _call(partialArgs="not a list"),
        _call(partialArgs=["not an object"]),
        _call(willContinue="yes"),
    ],
)
def test_bad_streamed_call_is_a_protocol_error(second: dict[str, Any]) -> None:
    parser = GeminiChunkParser()
    parser.parse(_parts_event(_call(name="f", id="c1", willContinue=True)))
    with pytest.raises(ProtocolError):
        parser.parse(_parts_event(second))


def test_continuation_without_a_call_in_progress_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        GeminiChunkParser().parse(_parts_event(_call(partialArgs=[{"jsonPath": "$.a", "stringValue": "x"}])))


# ----------------------------------------------------------------------------- non-streamed body


def test_parse_response_of_a_generate_content_body() -> None:
    body = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "thinking", "thought": True},
                        {"text": "Paris", "thoughtSignature": _b64(b"x")},
                        {"functionCall": {"name": "f", "args": {"a": 1}}},
                    ],
                },
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {"promptTokenCount": 1, "totalTokenCount": 2},
        "modelVersion": "gemini-2.5-pro",
    }
    parser = GeminiChunkParser()
    [chunk] = parser.parse_response(json.dumps(body).encode())
    assert (chunk.text_delta, chunk.thought_delta, chunk.text_signature) == ("Paris", "thinking", b"x")
    assert chunk.tool_call_fragments[0].index == 0 and chunk.finish_reason is FinishReason.STOP
    # a second body starts counting calls afresh, and the parser's own stream state is untouched
    [again] = parser.parse_response(json.dumps(body).encode())
    assert again.tool_call_fragments[0].index == 0
    aggregator = StreamAggregator()
    aggregator.accept(chunk)
    assert aggregator.finish().function_calls()[0].args == {"a": 1}


def test_parse_response_accepts_a_json_array_of_responses() -> None:
    body = json.dumps(
        [
            {"candidates": [{"content": {"parts": [{"text": "a"}]}}]},
            {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": {}}}]}}]},
            {"candidates": [{"content": {"parts": [{"functionCall": {"name": "g", "args": {}}}]}}]},
        ]
    ).encode()
    chunks = GeminiChunkParser().parse_response(body)
    assert [c.text_delta for c in chunks] == ["a", None, None]
    assert [c.tool_call_fragments[0].index for c in chunks[1:]] == [0, 1]


@pytest.mark.parametrize("body", [b"", b"\xff\xfe", b"{", b"42", b"[1]"])
def test_parse_response_garbage_is_a_protocol_error(body: bytes) -> None:
    with pytest.raises(ProtocolError):
        GeminiChunkParser().parse_response(body)


# ----------------------------------------------------------------------------- garbage


@pytest.mark.parametrize(
    "data",
    [
        "not json",
        "{",
        "[]",
        "null",
        '"text"',
        "[" * 100_000,
        '{"candidates": {}}',
        '{"candidates": [1]}',
        '{"candidates": [{"content": []}]}',
        '{"candidates": [{"content": {"parts": {}}}]}',
        '{"candidates": [{"content": {"parts": ["x"]}}]}',
        '{"candidates": [{"content": {"parts": [{"text": 5}]}}]}',
        '{"candidates": [{"content": {"parts": [{"text": "a", "thought": "true"}]}}]}',
        '{"candidates": [{"content": {"parts": [{"text": "a", "thoughtSignature": "***"}]}}]}',
        '{"candidates": [{"content": {"parts": [{"text": "a", "thoughtSignature": 5}]}}]}',
        '{"candidates": [{"content": {"parts": [{"functionCall": "f"}]}}]}',
        '{"candidates": [{"content": {"parts": [{"functionCall": {"name": 1}}]}}]}',
        '{"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": []}}]}}]}',
        '{"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "id": 3}}]}}]}',
        '{"candidates": [{"content": {"parts": [{"functionCall": {"args": {"a": 1}}}]}}]}',
        '{"candidates": [{"finishReason": 1}]}',
        '{"modelVersion": 2}',
        '{"promptFeedback": "blocked"}',
        '{"promptFeedback": {"blockReason": 1}}',
        '{"error": 42}',
    ],
)
def test_garbage_is_a_protocol_error(data: str) -> None:
    with pytest.raises(ProtocolError):
        GeminiChunkParser().parse(SseEvent(data=data))


_WRONG_VALUES: tuple[object, ...] = (None, 0, 1.5, True, "x", "", [], [1], {}, {"a": 1})


def _paths(value: object, prefix: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _replace(document: Any, path: tuple[str | int, ...], value: object) -> Any:
    if not path:
        return value
    clone = copy.deepcopy(document)
    target = clone
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return clone


def _shrunk(event: dict[str, Any]) -> dict[str, Any]:
    """The event with long strings shortened, so mutating every node stays fast."""
    return json.loads(
        json.dumps(event), object_hook=lambda d: {k: (v[:8] if isinstance(v, str) else v) for k, v in d.items()}
    )


def test_every_wrong_typed_node_of_real_events_is_protocol_error_or_parsed() -> None:
    """Replace each node of each recorded event by values of other types: nothing but ProtocolError escapes."""
    seen_errors = 0
    events = [e for t in GEMINI for e in list(_data_events(t.raw))[:3]]
    for event in events:
        event = _shrunk(event)
        for path in _paths(event):
            for value in _WRONG_VALUES:
                data = json.dumps(_replace(event, path, value))
                try:
                    GeminiChunkParser().parse(SseEvent(data=data))
                except ProtocolError:
                    seen_errors += 1
    assert seen_errors > 100  # the mutation really hit the shapes the parser checks


@pytest.mark.parametrize("transcript", GEMINI, ids=lambda t: t.name)
def test_truncated_events_are_protocol_errors(transcript: Transcript) -> None:
    for event in _data_events(transcript.raw):
        data = json.dumps(event)
        for cut in range(1, len(data), max(1, len(data) // 25)):
            with pytest.raises(ProtocolError):
                GeminiChunkParser().parse(SseEvent(data=data[:cut]))
