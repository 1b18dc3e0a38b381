"""Property tests: however a turn is chopped into chunks, the aggregate is the turn."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rxllm import Chunk, LlmResponse, StreamAggregator, ToolCallFragment, UsageMetadata
from rxllm.testing import assert_stream_protocol

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
_json_values = st.recursive(
    _json_leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
_json_objects = st.dictionaries(st.text(max_size=8), _json_values, max_size=5)


def _split(draw: st.DrawFn, text: str, *, max_cuts: int = 6) -> list[str]:
    """``text`` cut at random points (pieces may be empty)."""
    if not text:
        return []
    cuts = sorted(draw(st.lists(st.integers(min_value=0, max_value=len(text)), max_size=max_cuts)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@dataclass(frozen=True)
class _Call:
    index: int
    id: str | None
    name: str
    args: Mapping[str, object]


@dataclass(frozen=True)
class _Turn:
    text: str
    thought: str
    calls: tuple[_Call, ...]
    chunks: tuple[Chunk, ...]
    last_usage: UsageMetadata | None


@st.composite
def _turns(draw: st.DrawFn) -> _Turn:
    text = draw(st.text(max_size=60))
    thought = draw(st.text(max_size=40))
    # Each event is one delta of text, thought or a tool-call fragment; interleaving is random.
    events: list[tuple[str, object]] = [("text", piece) for piece in _split(draw, text)]
    thought_events: list[tuple[str, object]] = [("thought", piece) for piece in _split(draw, thought)]

    indices = draw(st.lists(st.integers(min_value=0, max_value=20), unique=True, max_size=3))
    calls: list[_Call] = []
    call_events: list[list[tuple[str, object]]] = []
    for n, index in enumerate(indices):
        args = draw(_json_objects)
        call_id = draw(st.none() | st.just(f"call_{n}"))
        name = f"tool_{n}"
        calls.append(_Call(index, call_id, name, args))
        raw = json.dumps(args)
        pieces = _split(draw, raw) or [""]
        # id/name on the first fragment; optionally repeated on later ones (Kimi-K2 style).
        repeat = draw(st.booleans())
        frags = [
            ToolCallFragment(index, id=call_id if (k == 0 or repeat) else None,
                             name=name if (k == 0 or repeat) else None, arguments_delta=piece)
            for k, piece in enumerate(pieces)
        ]
        call_events.append([("frag", f) for f in frags])

    # Interleave the streams at random, keeping each stream's own order.
    streams = [s for s in [events, thought_events, *call_events] if s]
    merged: list[tuple[str, object]] = []
    while streams:
        pick = draw(st.integers(min_value=0, max_value=len(streams) - 1))
        merged.append(streams[pick].pop(0))
        if not streams[pick]:
            streams.pop(pick)

    chunks: list[Chunk] = []
    last_usage: UsageMetadata | None = None
    for kind, value in merged:
        usage = draw(st.none() | st.builds(UsageMetadata, total_token_count=st.integers(0, 10_000)))
        if usage is not None:
            last_usage = usage
        if kind == "text":
            assert isinstance(value, str)
            chunks.append(Chunk(text_delta=value, usage=usage))
        elif kind == "thought":
            assert isinstance(value, str)
            chunks.append(Chunk(thought_delta=value, usage=usage))
        else:
            assert isinstance(value, ToolCallFragment)
            chunks.append(Chunk(tool_call_fragments=(value,), usage=usage))
    if draw(st.booleans()):  # a trailing usage-only chunk, as OpenAI's include_usage sends
        last_usage = draw(st.builds(UsageMetadata, prompt_token_count=st.integers(0, 99)))
        chunks.append(Chunk(usage=last_usage))
    return _Turn(text, thought, tuple(calls), tuple(chunks), last_usage)


def _aggregate(chunks: tuple[Chunk, ...]) -> list[LlmResponse]:
    agg = StreamAggregator()
    out: list[LlmResponse] = []
    for chunk in chunks:
        produced = agg.accept(chunk)
        assert len(produced) <= 1
        out.extend(produced)
    out.append(agg.finish())
    return out


@PROPERTY_SETTINGS
@given(_turns())
def test_any_chopping_aggregates_to_the_original_turn(turn: _Turn) -> None:
    out = _aggregate(turn.chunks)
    final = assert_stream_protocol(out)
    assert final.text() == turn.text
    assert final.thought_text() == turn.thought
    assert final.usage_metadata == turn.last_usage
    calls = final.function_calls()
    expected = sorted(turn.calls, key=lambda c: c.index)
    assert [c.name for c in calls] == [c.name for c in expected]
    assert [c.args for c in calls] == [c.args for c in expected]
    for call, want in zip(calls, expected, strict=True):
        if want.id is None:
            assert call.id is not None
            assert call.id.startswith("adk-")
        else:
            assert call.id == want.id
    # Text and thought never share a part, and the final's parts come thought, text, calls.
    assert final.content is not None
    kinds = ["thought" if p.thought else "call" if p.function_call else "text" for p in final.content.parts]
    assert kinds == sorted(kinds, key=["thought", "text", "call"].index)
    assert kinds.count("text") <= 1
    assert kinds.count("thought") <= 1  # no signatures: one reasoning block


@PROPERTY_SETTINGS
@given(st.text(max_size=80), st.data())
def test_partials_are_exactly_the_non_empty_deltas(text: str, data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    bounds = [0, *cuts, len(text)]
    deltas = [text[a:b] for a, b in itertools.pairwise(bounds)]
    out = _aggregate(tuple(Chunk(text_delta=d) for d in deltas))
    assert [r.text() for r in out[:-1]] == [d for d in deltas if d]
    assert out[-1].text() == text
