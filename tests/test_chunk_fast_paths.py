"""The per-event fast paths give exactly what the general paths give.

Each parser checks the common shape of a text event inline (subscripts and ``type`` tests) and
builds its chunk as :func:`rxllm._models.chunk.text_chunk` would, by position; anything else takes
the general path. Here
every fast-shaped event and its near misses go through both, and must agree: the same chunk, or
the same :class:`~rxllm.ProtocolError`. For OpenAI the tests also see which path ran: a fast-shaped
event must not reach the general path, and a near miss must.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from rxllm import Chunk, ProtocolError, SseEvent, UsageMetadata
from rxllm._models.chunk import text_chunk
from rxllm.providers.anthropic import AnthropicChunkParser
from rxllm.providers.gemini import GeminiChunkParser
from rxllm.providers.openai import OpenAiChatChunkParser


def _outcome(call: Callable[[], Chunk | None]) -> object:
    try:
        return call()
    except ProtocolError as exc:
        return ("ProtocolError", str(exc))


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("Hi",), Chunk(text_delta="Hi")),
        ((None,), Chunk()),
        (("Hi", "m", "r"), Chunk(text_delta="Hi", model_version="m", response_id="r")),
        (("Hi", None, None, UsageMetadata(prompt_token_count=3)),
         Chunk(text_delta="Hi", usage=UsageMetadata(prompt_token_count=3))),
    ],
)
def test_text_chunk_is_the_keyword_chunk(args: tuple[Any, ...], expected: Chunk) -> None:
    built = text_chunk(*args)
    assert built == expected and type(built) is Chunk and built._asdict() == expected._asdict()
    assert len(Chunk._fields) == 14  # text_chunk lists every field by position: update it with the fields


# --- Gemini ---------------------------------------------------------------------------------------------------------

_GEMINI_TEXT: dict[str, Any] = {
    "candidates": [{"content": {"parts": [{"text": "tok "}], "role": "model"}, "index": 0}],
    "modelVersion": "gemini-x",
}


def _gemini_variants() -> list[Any]:
    def changed(change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
        payload = copy.deepcopy(_GEMINI_TEXT)
        change(payload)
        return payload

    return [
        _GEMINI_TEXT,
        changed(lambda p: p.update(responseId="resp-1")),
        changed(lambda p: p.update(responseId=7)),
        changed(lambda p: p.update(usageMetadata={"promptTokenCount": 3, "candidatesTokenCount": 1})),
        changed(lambda p: p.update(usageMetadata={"promptTokenCount": "3"})),
        changed(lambda p: p.update(usageMetadata=None)),
        changed(lambda p: p.pop("modelVersion")),
        changed(lambda p: p.update(modelVersion=None)),
        changed(lambda p: p.update(modelVersion="")),
        changed(lambda p: p.update(modelVersion=3)),
        changed(lambda p: p.update(error=None)),
        changed(lambda p: p.update(error={"message": "boom", "status": "UNAVAILABLE"})),
        changed(lambda p: p.update(promptFeedback={"blockReason": "SAFETY"})),
        changed(lambda p: p["candidates"][0].update(finishReason="STOP")),
        changed(lambda p: p["candidates"][0].update(finishReason=None)),
        changed(lambda p: p["candidates"][0].update(finishReason=1)),
        changed(lambda p: p["candidates"][0].update(safetyRatings=[])),
        changed(lambda p: p["candidates"][0]["content"]["parts"][0].update(text="")),
        changed(lambda p: p["candidates"][0]["content"]["parts"][0].update(text=5)),
        changed(lambda p: p["candidates"][0]["content"]["parts"][0].update(thought=True)),
        changed(lambda p: p["candidates"][0]["content"]["parts"][0].update(thoughtSignature="c2ln")),
        changed(lambda p: p["candidates"][0]["content"]["parts"].append({"text": "more"})),
        changed(lambda p: p["candidates"][0]["content"].update(parts=[])),
        changed(lambda p: p["candidates"][0]["content"].update(parts="x")),
        changed(lambda p: p["candidates"][0].update(content=None)),
        changed(lambda p: p["candidates"][0].update(content=[])),
        changed(lambda p: p["candidates"].append({"content": {"parts": [{"text": "second"}]}})),
        changed(lambda p: p.update(candidates=[])),
        changed(lambda p: p.update(candidates=["x"])),
        changed(lambda p: p.update(candidates={})),
        changed(lambda p: p.update(candidates="x")),
        changed(lambda p: p.update(candidates=None)),
        changed(lambda p: p["candidates"][0].pop("content")),
        changed(lambda p: p["candidates"][0].update(content="x")),
        changed(lambda p: p["candidates"][0]["content"].update(parts={"text": "one key"})),
        changed(lambda p: p["candidates"][0]["content"].update(parts=["x"])),
        changed(lambda p: p["candidates"][0]["content"].update(parts=[{}])),
        changed(lambda p: p["candidates"][0]["content"].update(parts=[[{"text": "nested"}]])),
        changed(lambda p: p["candidates"][0]["content"].update(parts=None)),
        changed(lambda p: p["candidates"][0]["content"]["parts"][0].update(extra=1)),
        changed(lambda p: p["candidates"][0]["content"]["parts"][0].update(text=None)),
        changed(lambda p: p["candidates"][0]["content"].update(parts=[{"functionCall": {"name": "f", "args": {}}}])),
        changed(lambda p: p.update(candidates=[["x"]])),
        [_GEMINI_TEXT],
        "text",
    ]


@pytest.mark.parametrize("payload", _gemini_variants())
def test_gemini_fast_path_matches_the_general_path(payload: Any) -> None:
    data = json.dumps(payload)
    fast = _outcome(lambda: GeminiChunkParser().parse(SseEvent(data=data)))
    general = _outcome(lambda: GeminiChunkParser()._chunk(json.loads(data)))
    assert fast == general


def test_gemini_not_json_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="not valid JSON"):
        GeminiChunkParser().parse(SseEvent(data="{nope"))


# --- Anthropic ------------------------------------------------------------------------------------------------------


def _anthropic_parser() -> AnthropicChunkParser:
    parser = AnthropicChunkParser()
    for index, block in enumerate(({"type": "text", "text": ""}, {"type": "thinking", "thinking": ""},
                                   {"type": "tool_use", "id": "t1", "name": "f", "input": {}})):
        parser.parse(SseEvent("content_block_start", json.dumps(
            {"type": "content_block_start", "index": index, "content_block": block})))
    return parser


def _delta(index: object, delta: object, **extra: object) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta, **extra}


_ANTHROPIC_VARIANTS: list[tuple[str, Any]] = [
    ("content_block_delta", _delta(0, {"type": "text_delta", "text": "tok "})),
    ("content_block_delta", _delta(0, {"type": "text_delta", "text": ""})),
    ("content_block_delta", _delta(0, {"type": "text_delta", "text": 3})),
    ("content_block_delta", _delta(0, {"type": "text_delta"})),
    ("content_block_delta", _delta(0, {"type": "text_delta", "text": "x", "extra": 1})),
    ("content_block_delta", _delta(0, {"type": "text_delta", "text": "x"}, extra=1)),
    ("content_block_delta", _delta(1, {"type": "text_delta", "text": "x"})),  # a text delta for a thinking block
    ("content_block_delta", _delta(2, {"type": "text_delta", "text": "x"})),
    ("content_block_delta", _delta(5, {"type": "text_delta", "text": "x"})),  # not open
    ("content_block_delta", _delta(-1, {"type": "text_delta", "text": "x"})),
    ("content_block_delta", _delta(True, {"type": "text_delta", "text": "x"})),  # a bool is not an index
    ("content_block_delta", _delta(0.0, {"type": "text_delta", "text": "x"})),
    ("content_block_delta", _delta("0", {"type": "text_delta", "text": "x"})),
    ("content_block_delta", _delta(0, "text_delta")),
    ("content_block_delta", _delta(0, None)),
    ("content_block_delta", _delta(1, {"type": "thinking_delta", "thinking": "hmm"})),
    ("content_block_delta", _delta(2, {"type": "input_json_delta", "partial_json": "{"})),
    ("content_block_delta", _delta(0, {"type": "citations_delta", "citation": {}})),
    ("error", _delta(0, {"type": "text_delta", "text": "x"})),  # the SSE event type wins
    ("message", _delta(0, {"type": "text_delta", "text": "x"})),
    ("ping", {"type": "ping"}),
    ("content_block_delta", [1]),
    ("error", [1]),
]


@pytest.mark.parametrize(("name", "payload"), _ANTHROPIC_VARIANTS)
def test_anthropic_fast_path_matches_the_general_path(name: str, payload: Any) -> None:
    data = json.dumps(payload)
    fast = _outcome(lambda: _anthropic_parser().parse(SseEvent(name, data)))
    general_parser = _anthropic_parser()

    def general() -> Chunk | None:
        if name == "error" or not isinstance(payload, dict) or payload.get("type") != "content_block_delta":
            return _anthropic_parser().parse(SseEvent(name, data))  # not the fast path's shape: one path only
        return general_parser._delta(json.loads(data))

    assert fast == _outcome(general)


def test_anthropic_text_delta_chunk() -> None:
    event = SseEvent("content_block_delta", json.dumps(_delta(0, {"type": "text_delta", "text": "tok "})))
    assert _anthropic_parser().parse(event) == Chunk(text_delta="tok ")


# --- OpenAI chat ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ('{"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}',
         Chunk(text_delta="Hi", model_version="m", response_id="c1")),
        ('{"id":3,"model":null,"choices":[{"index":0,"delta":{"content":""}}]}', Chunk()),
        ('{"choices":[{"delta":{"role":"assistant","content":"a"}}]}', Chunk(text_delta="a")),
    ],
)
def test_openai_plain_text_event(data: str, expected: Chunk) -> None:
    assert OpenAiChatChunkParser().parse(SseEvent(data=data)) == expected


@pytest.mark.parametrize(("data", "message"), [("[1]", "chunk should be a JSON object, got list"),
                                                ("{nope", "chunk is not valid JSON"), ('"x"', "got str")])
def test_openai_event_that_is_not_an_object_is_a_protocol_error(data: str, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        OpenAiChatChunkParser().parse(SseEvent(data=data))


_OPENAI_TEXT: dict[str, Any] = {
    "id": "c1", "object": "chat.completion.chunk", "model": "m",
    "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}],
}


class _CountingOpenAiParser(OpenAiChatChunkParser):
    """Counts the events :meth:`parse` hands to the general path (``_chunk``)."""

    __slots__ = ("general_calls",)

    def __init__(self) -> None:
        self.general_calls = 0

    def _chunk(self, payload: dict[str, Any]) -> Chunk:  # type: ignore[override]
        self.general_calls += 1
        return OpenAiChatChunkParser._chunk(payload)


def _openai(change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    payload = copy.deepcopy(_OPENAI_TEXT)
    change(payload)
    return payload


# Plain text deltas of choice 0: parse() answers them inline, without the general path.
_OPENAI_FAST: list[Any] = [
    _OPENAI_TEXT,
    _openai(lambda p: p["choices"][0].update(delta={"content": "", "role": "assistant"})),
    _openai(lambda p: p["choices"][0].update(delta={"content": "caf\u00e9 \u4e2d\u6587"})),
    _openai(lambda p: p["choices"][0].update(delta={"role": "assistant", "content": "a"})),
    _openai(lambda p: p["choices"][0].pop("index")),
    _openai(lambda p: p["choices"][0].pop("finish_reason")),
    _openai(lambda p: p.update(model=3, id=None)),
    _openai(lambda p: p.update(id=7)),
    _openai(lambda p: (p.pop("model"), p.pop("id"))),
    _openai(lambda p: p.update(usage=None, error=None, system_fingerprint="fp", created=1)),
    _openai(lambda p: p["choices"][0].update(logprobs=None)),
]

# Near misses: parse() must hand each to the general path (which decides what it is).
_OPENAI_GENERAL: list[Any] = [
    _openai(lambda p: p["choices"][0].update(index=False)),  # a bool is not an index
    _openai(lambda p: p["choices"][0].update(index=0.0)),
    _openai(lambda p: p["choices"][0].update(index=1)),
    _openai(lambda p: p["choices"][0].update(finish_reason="stop")),
    _openai(lambda p: p["choices"][0].update(delta={"content": None})),
    _openai(lambda p: p["choices"][0].update(delta={"content": 3})),
    _openai(lambda p: p["choices"][0].update(delta={})),
    _openai(lambda p: p["choices"][0].update(delta={"content": "a", "reasoning_content": "b"})),
    _openai(lambda p: p["choices"][0].update(delta={"content": "a", "refusal": None})),
    _openai(lambda p: p["choices"][0].update(delta=None)),
    _openai(lambda p: p["choices"][0].update(delta="x")),
    _openai(lambda p: p["choices"].append({"index": 1, "delta": {"content": "other"}})),
    _openai(lambda p: p["choices"].insert(0, {"index": 1, "delta": {"content": "other"}})),
    _openai(lambda p: p.update(choices=["x"])),
    _openai(lambda p: p.update(choices=[])),
    _openai(lambda p: p.pop("choices")),
    _openai(lambda p: p.update(usage={"prompt_tokens": 1, "completion_tokens": 2})),
    _openai(lambda p: p.update(error={"message": "boom"})),
    _openai(lambda p: p.update(choices="x")),
    _openai(lambda p: p.update(choices={"only": {"index": 0, "delta": {"content": "Hi"}}})),
    _openai(lambda p: p.update(choices=None)),
    _openai(lambda p: p.update(choices=[["x"]])),
    _openai(lambda p: p["choices"][0].pop("delta")),
    _openai(lambda p: p["choices"][0].update(delta=["content"])),
    _openai(lambda p: p["choices"][0].update(delta={"role": "assistant"})),
    _openai(lambda p: p["choices"][0].update(delta={"content": "a", "x": 1})),
    _openai(lambda p: p["choices"][0].update(delta={"content": "a", "role": "assistant", "x": 1})),
    _openai(lambda p: p["choices"][0].update(delta={"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]})),
]


def _openai_parse(data: str) -> tuple[object, int]:
    """What parse() answers for ``data``, and how many times it took the general path."""
    parser = _CountingOpenAiParser()
    return _outcome(lambda: parser.parse(SseEvent(data=data))), parser.general_calls


@pytest.mark.parametrize("payload", _OPENAI_FAST)
def test_openai_fast_path_matches_the_general_path(payload: Any) -> None:
    data = json.dumps(payload)
    fast, general_calls = _openai_parse(data)
    assert general_calls == 0  # parse() answered inline: the fast path ran
    general = _outcome(lambda: OpenAiChatChunkParser._chunk(json.loads(data)))  # the general path, called directly
    assert type(fast) is Chunk and type(general) is Chunk
    assert fast == general


@pytest.mark.parametrize("payload", _OPENAI_GENERAL)
def test_openai_near_misses_take_the_general_path(payload: Any) -> None:
    data = json.dumps(payload)
    outcome, general_calls = _openai_parse(data)
    assert general_calls == 1
    assert outcome == _outcome(lambda: OpenAiChatChunkParser._chunk(json.loads(data)))


# --- the aggregator's one-partial step -------------------------------------------------------------------------------


def test_accept_one_is_accept_without_the_list() -> None:
    from rxllm import StreamAggregator

    chunks = [Chunk(text_delta="a"), Chunk(), Chunk(thought_delta="t"), Chunk(finish_reason=None, usage=None),
              Chunk(text_delta="b", thought_delta="u"), Chunk(end_of_stream=True)]
    listed, single = StreamAggregator(), StreamAggregator()
    for chunk in chunks:
        partial = single.accept_one(chunk)
        assert listed.accept(chunk) == ([] if partial is None else [partial])
    assert listed.finish() == single.finish()


@pytest.mark.parametrize(
    ("parser", "data"),
    [
        (GeminiChunkParser, '{"candidates": [{"content": {"parts": "x"}}]}'),
        (GeminiChunkParser, '{"candidates": "x"}'),
        (OpenAiChatChunkParser, '{"choices": [{"index": 0, "delta": "x"}]}'),
        (OpenAiChatChunkParser, '{"choices": "x"}'),
    ],
)
def test_a_shape_the_fast_path_refuses_fails_as_the_general_path_alone_fails(
    parser: Callable[[], GeminiChunkParser | OpenAiChatChunkParser], data: str
) -> None:
    with pytest.raises(ProtocolError) as raised:
        parser().parse(SseEvent(data=data))
    assert raised.value.__context__ is None and raised.value.__cause__ is None  # nothing chained from the fast path
