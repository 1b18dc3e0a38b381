"""StreamAggregator: one test (or a few) per merge rule of ``rxllm/_models/aggregation.py``'s docstring."""

from __future__ import annotations

import copy
import pickle
import sys
from typing import Any

import pytest

from rxllm import (
    Chunk,
    FinishReason,
    FunctionCall,
    InBandError,
    LlmResponse,
    MalformedFunctionCallError,
    Part,
    ProviderError,
    StreamAggregator,
    ToolCallFragment,
    UsageMetadata,
)
from rxllm.testing import assert_stream_protocol


def _run(*chunks: Chunk, provider: str | None = None) -> list[LlmResponse]:
    agg = StreamAggregator(provider=provider)
    out: list[LlmResponse] = []
    for chunk in chunks:
        out.extend(agg.accept(chunk))
    out.append(agg.finish())
    return out


def _frag(index: int, args: str = "", id: str | None = None, name: str | None = None) -> Chunk:
    return Chunk(tool_call_fragments=(ToolCallFragment(index, id=id, name=name, arguments_delta=args),))


# --- rule 1: at most one partial per chunk, carrying only new text ------------------------------------


def test_chunk_with_text_yields_exactly_one_partial_with_only_its_delta() -> None:
    agg = StreamAggregator()
    first = agg.accept(Chunk(text_delta="The order"))
    second = agg.accept(Chunk(text_delta=" ships"))
    assert len(first) == 1
    assert len(second) == 1
    assert second[0].text() == " ships"
    assert second[0].partial is True
    assert second[0].content is not None
    assert second[0].content.role == "model"


@pytest.mark.parametrize(
    "chunk",
    [
        Chunk(),
        Chunk(text_delta=""),
        Chunk(thought_delta=""),
        Chunk(usage=UsageMetadata(total_token_count=3)),
        Chunk(finish_reason=FinishReason.STOP, raw_finish_reason="stop"),
        Chunk(tool_call_fragments=(ToolCallFragment(0, "c1", "f", '{"a":'),)),
        Chunk(refusal_delta="no"),
        Chunk(thought_signature=b"sig"),
        Chunk(redacted_thought=b"opaque"),
        Chunk(model_version="m-1"),
        Chunk(end_of_stream=True),
    ],
)
def test_chunk_without_text_or_thought_yields_nothing(chunk: Chunk) -> None:
    agg = StreamAggregator()
    assert agg.accept(chunk) == []
    assert agg.has_emitted is False


def test_partial_with_thought_and_text_puts_the_thought_part_first() -> None:
    [partial] = StreamAggregator().accept(Chunk(text_delta="answer", thought_delta="reason"))
    assert partial.content is not None
    assert partial.content.parts == (Part(text="reason", thought=True), Part(text="answer"))
    assert partial.thought_text() == "reason"
    assert partial.text() == "answer"


def test_partials_never_carry_calls_usage_or_finish_data() -> None:
    agg = StreamAggregator()
    chunk = Chunk(
        text_delta="x",
        thought_delta="t",
        tool_call_fragments=(ToolCallFragment(0, "c1", "f", "{}"),),
        finish_reason=FinishReason.MAX_TOKENS,
        raw_finish_reason="length",
        usage=UsageMetadata(total_token_count=9),
        model_version="m-1",
        thought_signature=b"sig",
        refusal_delta="r",
    )
    [partial] = agg.accept(chunk)
    assert partial.function_calls() == []
    assert partial.usage_metadata is None
    assert partial.finish_reason is None
    assert partial.error_code is None
    assert partial.error_message is None
    assert partial.model_version is None
    assert partial.custom_metadata is None
    assert partial.content is not None
    assert all(p.thought_signature is None for p in partial.content.parts)


# --- rule 2: final layout -----------------------------------------------------------------------------


def test_final_concatenates_text_into_one_part_with_partial_unset() -> None:
    out = _run(Chunk(text_delta="The order"), Chunk(text_delta=" ships"), Chunk(text_delta=" Tuesday"))
    final = assert_stream_protocol(out)
    assert final.partial is None
    assert final.content is not None
    assert final.content.role == "model"
    assert final.content.parts == (Part(text="The order ships Tuesday"),)


def test_empty_stream_gives_a_final_with_no_parts() -> None:
    [final] = _run()
    assert final.partial is None
    assert final.content is not None
    assert final.content.parts == ()
    assert final.error_code is None


def test_thought_parts_per_block_then_text_then_calls() -> None:
    out = _run(
        Chunk(thought_delta="first "),
        Chunk(thought_delta="block", thought_signature=b"sig1"),  # the signature closes block 1
        Chunk(text_delta="Hello"),
        Chunk(thought_delta="second block"),
        Chunk(redacted_thought=b"opaque"),  # a block of its own, no text
        Chunk(thought_delta="third", thought_signature=b"sig3"),
        Chunk(text_delta=" world"),
        _frag(0, "{}", id="c1", name="f"),
    )
    final = assert_stream_protocol(out)
    assert final.content is not None
    assert final.content.parts == (
        Part(text="first block", thought=True, thought_signature=b"sig1"),
        Part(text="second block", thought=True),
        Part(thought=True, thought_signature=b"opaque"),
        Part(text="third", thought=True, thought_signature=b"sig3"),
        Part(text="Hello world"),
        Part(function_call=FunctionCall(id="c1", name="f", args={})),
    )
    assert final.thought_text() == "first blocksecond blockthird"


def test_signature_without_thought_text_is_a_signature_only_thought_part() -> None:
    final = _run(Chunk(thought_signature=b"sig"), Chunk(text_delta="a"))[-1]
    assert final.content is not None
    assert final.content.parts == (Part(thought=True, thought_signature=b"sig"), Part(text="a"))


def test_redacted_block_only_has_no_thought_text() -> None:
    final = _run(Chunk(redacted_thought=b"opaque"), Chunk(text_delta="hi"))[-1]
    assert final.thought_text() == ""
    assert final.content is not None
    assert final.content.parts[0] == Part(thought=True, thought_signature=b"opaque")


def test_text_signature_rides_on_the_text_part() -> None:
    final = _run(Chunk(text_delta="a"), Chunk(text_delta="b", text_signature=b"tsig"))[-1]
    assert final.content is not None
    assert final.content.parts == (Part(text="ab", thought_signature=b"tsig"),)


def test_many_tiny_deltas_aggregate_exactly() -> None:
    # Structural linearity check (no wall-clock assertion): 200k one-char deltas, one join.
    pieces = [chr(ord("a") + i % 26) for i in range(200_000)]
    agg = StreamAggregator()
    emitted = 0
    for piece in pieces:
        emitted += len(agg.accept(Chunk(text_delta=piece)))
    final = agg.finish()
    assert emitted == len(pieces)
    assert final.text() == "".join(pieces)
    assert final.content is not None
    assert len(final.content.parts) == 1


# --- rule 3: tool calls ---------------------------------------------------------------------------------


def test_calls_in_provider_index_order_whatever_the_arrival_order() -> None:
    final = _run(
        _frag(1, '{"b":', id="c_b", name="second"),
        _frag(0, '{"a":', id="c_a", name="first"),
        _frag(1, "2}"),
        _frag(0, "1}"),
    )[-1]
    assert final.function_calls() == [
        FunctionCall(id="c_a", name="first", args={"a": 1}),
        FunctionCall(id="c_b", name="second", args={"b": 2}),
    ]


def test_repeated_id_and_name_are_kept_first_non_empty_never_concatenated() -> None:
    # Kimi-K2 via OpenRouter repeats id "0" and name "llm_version" on every tool delta.
    final = _run(
        _frag(0, "", id="0", name="llm_version"),
        _frag(0, '{"x"', id="0", name="llm_version"),
        _frag(0, ": 1}", id="0", name="llm_version"),
    )[-1]
    assert final.function_calls() == [FunctionCall(id="0", name="llm_version", args={"x": 1})]


def test_empty_id_and_name_do_not_win_over_later_values() -> None:
    final = _run(_frag(0, "{", id="", name=""), _frag(0, "}", id="c1", name="f"), _frag(0, "", id="c2", name="g"))[-1]
    assert final.function_calls() == [FunctionCall(id="c1", name="f", args={})]


def test_arguments_concatenate_and_are_parsed_only_in_finish() -> None:
    agg = StreamAggregator()
    for piece in ['{"order', '_id": "A', '17", "n": [1', ", 2]}"]:
        assert agg.accept(_frag(0, piece, id="c1", name="get_order")) == []
    assert agg.finish().function_calls() == [
        FunctionCall(id="c1", name="get_order", args={"order_id": "A17", "n": [1, 2]})
    ]


@pytest.mark.parametrize("arguments", ["", "   "])
def test_empty_arguments_mean_an_empty_object(arguments: str) -> None:
    final = _run(_frag(0, arguments, id="c1", name="ping"))[-1]
    assert final.function_calls() == [FunctionCall(id="c1", name="ping", args={})]


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ('{"order_id": "A1', "Unterminated string"),
        ("[1]", "expected a JSON object, got list"),
        ('"text"', "expected a JSON object, got str"),
        ("3", "expected a JSON object, got int"),
        ("null", "expected a JSON object, got NoneType"),
        ("[" * 100_000, "nest too deeply"),
        ('{"a":' + "[" * 400 + "]" * 400 + "}", "not a valid JSON value"),
    ],
)
def test_malformed_arguments_raise_naming_the_tool(arguments: str, reason: str) -> None:
    agg = StreamAggregator(provider="openai")
    agg.accept(_frag(0, arguments, id="c1", name="get_order"))
    with pytest.raises(MalformedFunctionCallError, match=reason) as info:
        agg.finish()
    assert info.value.tool_name == "get_order"
    assert info.value.arguments == arguments
    assert info.value.provider == "openai"
    assert "'get_order'" in str(info.value)


def test_a_call_without_a_name_is_malformed() -> None:
    agg = StreamAggregator()
    agg.accept(_frag(0, "{}", id="c1"))
    with pytest.raises(MalformedFunctionCallError, match="never sent the function name"):
        agg.finish()


def test_cut_off_call_with_non_stop_finish_is_left_out_and_named() -> None:
    out = _run(
        Chunk(text_delta="Let me check"),
        _frag(0, '{"a": 1}', id="c0", name="complete_tool"),
        _frag(1, '{"order_id": "A', id="c1", name="get_order"),
        Chunk(finish_reason=FinishReason.MAX_TOKENS, raw_finish_reason="length"),
    )
    final = assert_stream_protocol(out)
    assert final.function_calls() == [FunctionCall(id="c0", name="complete_tool", args={"a": 1})]
    assert final.error_code == "MAX_TOKENS"
    assert final.error_message is not None
    assert "get_order" in final.error_message
    assert final.text() == "Let me check"


def test_cut_off_call_after_in_band_error_is_left_out() -> None:
    out = _run(
        Chunk(text_delta="x"),
        _frag(0, '{"a', id="c1", name="get_order"),
        Chunk(error=InBandError("overloaded", code="overloaded_error")),
    )
    final = out[-1]
    assert final.function_calls() == []
    assert final.error_code == "overloaded_error"
    assert final.error_message is not None
    assert final.error_message.startswith("overloaded")
    assert "get_order" in final.error_message


def test_generated_id_when_the_provider_sends_none_is_stable() -> None:
    agg = StreamAggregator()
    agg.accept(_frag(0, "{}", name="f"))
    agg.accept(_frag(1, "{}", name="g"))
    early = agg.tool_call_id(0)
    assert early.startswith("adk-")
    assert agg.tool_call_id(0) == early
    assert agg.tool_call_id(1) != early
    calls = agg.finish().function_calls()
    assert [c.id for c in calls] == [early, agg.tool_call_id(1)]
    assert [c.id for c in agg.finish().function_calls()] == [early, agg.tool_call_id(1)]


def test_generated_ids_differ_across_streams() -> None:
    first = _run(_frag(0, "{}", name="f"))[-1].function_calls()[0].id
    second = _run(_frag(0, "{}", name="f"))[-1].function_calls()[0].id
    assert first is not None
    assert second is not None
    assert first != second


def test_provider_id_is_reported_by_tool_call_id() -> None:
    agg = StreamAggregator()
    agg.accept(_frag(3, "", id="call_9", name="f"))
    assert agg.tool_call_id(3) == "call_9"


def test_call_thought_signature_rides_on_the_call_part() -> None:
    chunk = Chunk(tool_call_fragments=(ToolCallFragment(0, None, "f", "{}", complete=True, thought_signature=b"s"),))
    final = _run(chunk)[-1]
    assert final.content is not None
    [part] = final.content.parts
    assert part.function_call is not None
    assert part.function_call.name == "f"
    assert part.thought_signature == b"s"


# --- rule 4: finish reason, model version, usage -------------------------------------------------------


def test_usage_last_one_wins_and_a_later_chunk_without_usage_does_not_clear_it() -> None:
    early = UsageMetadata(prompt_token_count=5)
    late = UsageMetadata(prompt_token_count=5, candidates_token_count=7, total_token_count=12)
    out = _run(
        Chunk(text_delta="a", usage=early),
        Chunk(text_delta="b", usage=late),
        Chunk(text_delta="c"),
        Chunk(finish_reason=FinishReason.STOP),
    )
    final = assert_stream_protocol(out)
    assert final.usage_metadata == late
    assert all(r.usage_metadata is None for r in out[:-1])


def test_finish_reason_raw_reason_and_model_version_last_wins_on_the_final() -> None:
    final = _run(
        Chunk(text_delta="a", model_version="m-1", finish_reason=FinishReason.OTHER, raw_finish_reason="x"),
        Chunk(finish_reason=FinishReason.STOP, raw_finish_reason="stop", model_version="m-2"),
    )[-1]
    assert final.finish_reason is FinishReason.STOP
    assert final.model_version == "m-2"
    assert final.custom_metadata == {"finish_reason": "stop"}
    assert final.error_code is None
    assert final.error_message is None


def test_no_raw_finish_reason_means_no_custom_metadata() -> None:
    assert _run(Chunk(text_delta="a", finish_reason=FinishReason.STOP))[-1].custom_metadata is None


# --- rule 5: error fields ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reason",
    [FinishReason.MAX_TOKENS, FinishReason.SAFETY, FinishReason.RECITATION, FinishReason.MALFORMED_FUNCTION_CALL,
     FinishReason.OTHER, FinishReason.PROHIBITED_CONTENT],
)
def test_non_stop_finish_sets_error_code_and_message(reason: FinishReason) -> None:
    final = _run(Chunk(text_delta="partial answer"), Chunk(finish_reason=reason))[-1]
    assert final.finish_reason is reason
    assert final.error_code == reason.value
    assert final.error_message
    assert final.text() == "partial answer"


def test_stop_finish_sets_no_error() -> None:
    final = _run(Chunk(text_delta="a", finish_reason=FinishReason.STOP))[-1]
    assert final.error_code is None
    assert final.error_message is None


def test_in_band_error_after_a_partial_is_reported_on_the_final_and_wins_over_finish() -> None:
    agg = StreamAggregator()
    assert len(agg.accept(Chunk(text_delta="Hello"))) == 1
    assert agg.accept(Chunk(error=InBandError("content filtered", code="content_filter"))) == []
    agg.accept(Chunk(finish_reason=FinishReason.MAX_TOKENS))
    final = agg.finish()
    assert final.error_code == "content_filter"
    assert final.error_message == "content filtered"
    assert final.finish_reason is FinishReason.MAX_TOKENS
    assert final.text() == "Hello"


def test_in_band_error_without_code_gets_a_generic_code() -> None:
    final = _run(Chunk(text_delta="a"), Chunk(error=InBandError("boom")))[-1]
    assert final.error_code == "PROVIDER_ERROR"
    assert final.error_message == "boom"


def test_first_in_band_error_is_kept() -> None:
    out = _run(Chunk(text_delta="a"), Chunk(error=InBandError("first", code="A")), Chunk(error=InBandError("second")))
    final = out[-1]
    assert (final.error_code, final.error_message) == ("A", "first")


def test_refusal_becomes_error_code_refusal() -> None:
    out = _run(
        Chunk(refusal_delta="I can't "),
        Chunk(refusal_delta="help with that."),
        Chunk(finish_reason=FinishReason.STOP, raw_finish_reason="stop"),
    )
    assert len(out) == 1  # refusal text is not answer text: no partials
    final = out[-1]
    assert final.error_code == "REFUSAL"
    assert final.error_message == "I can't help with that."


def test_refusal_yields_to_a_non_stop_finish() -> None:
    final = _run(Chunk(refusal_delta="no"), Chunk(finish_reason=FinishReason.SAFETY))[-1]
    assert final.error_code == "SAFETY"


# --- rule 6: in-band error before any partial raises ----------------------------------------------------------


@pytest.mark.parametrize("retryable", [True, False])
def test_in_band_error_before_any_partial_raises_provider_error(retryable: bool) -> None:
    agg = StreamAggregator(provider="anthropic")
    agg.accept(Chunk(usage=UsageMetadata(prompt_token_count=3)))  # no partial yet
    agg.accept(_frag(0, "{", id="c1", name="f"))  # tool fragments yield no partial either
    with pytest.raises(ProviderError) as info:
        agg.accept(Chunk(error=InBandError("Overloaded", code="overloaded_error", retryable=retryable)))
    assert info.value.retryable is retryable
    assert info.value.code == "overloaded_error"
    assert info.value.provider == "anthropic"
    assert "Overloaded" in str(info.value)


def test_in_band_error_in_the_same_chunk_as_the_first_text_raises() -> None:
    agg = StreamAggregator()
    with pytest.raises(ProviderError):
        agg.accept(Chunk(text_delta="never shown", error=InBandError("bad")))
    assert agg.has_emitted is False


# --- state queries -----------------------------------------------------------------------------------------------


def test_has_emitted_turns_true_with_the_first_partial() -> None:
    agg = StreamAggregator()
    assert agg.has_emitted is False
    agg.accept(Chunk(usage=UsageMetadata(total_token_count=1)))
    assert agg.has_emitted is False
    agg.accept(Chunk(thought_delta="t"))
    assert agg.has_emitted is True


@pytest.mark.parametrize(
    "chunk",
    [
        Chunk(end_of_stream=True),
        Chunk(finish_reason=FinishReason.STOP),
        Chunk(finish_reason=FinishReason.MAX_TOKENS),
    ],
)
def test_is_complete_after_end_marker_or_finish(chunk: Chunk) -> None:
    agg = StreamAggregator()
    agg.accept(Chunk(text_delta="a"))
    assert agg.is_complete is False
    agg.accept(chunk)
    assert agg.is_complete is True


def test_is_complete_after_in_band_error_following_a_partial() -> None:
    agg = StreamAggregator()
    agg.accept(Chunk(text_delta="a"))
    agg.accept(Chunk(error=InBandError("x")))
    assert agg.is_complete is True


def test_a_fresh_aggregator_never_inherits_state() -> None:
    first = StreamAggregator()
    first.accept(Chunk(text_delta="attempt one", usage=UsageMetadata(total_token_count=1)))
    second = StreamAggregator()
    final = second.finish()
    assert final.text() == ""
    assert final.usage_metadata is None


# --- linear in the number of tool calls -----------------------------------------------------------------


def _traced_lines_for_calls(n: int) -> int:
    """Python lines the aggregator runs for ``n`` tool calls streamed in two fragments each.

    A line count is exact on any machine, where CPU time is not: the suite asserts growth on it and
    ``benchmarks/bench_aggregation_scaling.py`` reports the CPU-time ratio.
    """
    first = [ToolCallFragment(i, id=f"c{i}", name="f", arguments_delta='{"x":') for i in range(n)]
    last = [ToolCallFragment(i, arguments_delta="1}") for i in range(n)]
    chunks = [Chunk(tool_call_fragments=(f,)) for f in first + last]
    agg = StreamAggregator()
    lines = 0

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        nonlocal lines
        if event == "line":
            lines += 1
        return tracer

    reported = 0
    sys.settrace(tracer)
    try:
        for chunk in chunks:
            agg.accept(chunk)
            reported += len(agg.take_completed_calls())  # the fine-grained stream looks after every chunk
        final = agg.finish()
        reported += len(agg.take_completed_calls(all_remaining=True))
    finally:
        sys.settrace(None)
    assert len(final.function_calls()) == n
    assert reported == n
    return lines


def test_aggregation_work_grows_linearly_with_the_number_of_tool_calls() -> None:
    # 4x the calls must run about 4x the lines, not 16x (a scan of every call per chunk is quadratic)
    small, large = _traced_lines_for_calls(500), _traced_lines_for_calls(2_000)
    assert large / small < 4.5, (small, large)


# --- partials are built without validation, and are indistinguishable from validated ones ---------


@pytest.mark.parametrize(("text", "thought"), [("The order", None), (None, "hmm"), ("The order", "hmm")])
def test_a_partial_is_exactly_what_validation_would_build(text: str | None, thought: str | None) -> None:
    from rxllm import LlmResponse
    from rxllm._models.aggregation import _DIRECT, build_partial

    assert _DIRECT, "the direct partial builder was disabled (a default or validator on LlmResponse/Content/Part?)"
    raw: list[dict[str, object]] = [{"text": thought, "thought": True}] if thought else []
    if text:
        raw.append({"text": text})
    validated = LlmResponse.model_validate({"content": {"role": "model", "parts": raw}, "partial": True})
    built = StreamAggregator().accept(Chunk(text_delta=text, thought_delta=thought))[0]
    assert built == validated == build_partial(text, thought)
    assert repr(built) == repr(validated) and hash(built) == hash(validated)
    assert built.model_dump_json() == validated.model_dump_json()
    for by_alias in (True, False):
        assert built.model_dump(by_alias=by_alias, exclude_unset=True) == validated.model_dump(
            by_alias=by_alias, exclude_unset=True
        )
    assert built.model_fields_set == validated.model_fields_set
    assert built.content is not None and validated.content is not None
    assert built.content.model_fields_set == validated.content.model_fields_set
    assert [p.model_fields_set for p in built.content.parts] == [p.model_fields_set for p in validated.content.parts]
    assert LlmResponse.model_validate_json(built.model_dump_json()) == built


def test_changing_a_copy_of_a_partial_leaves_the_other_partials_alone() -> None:
    aggregator = StreamAggregator()
    first = aggregator.accept(Chunk(text_delta="a"))[0]
    second = aggregator.accept(Chunk(text_delta="b"))[0]
    changed = first.model_copy(update={"turn_complete": True})
    assert "turn_complete" in changed.model_fields_set
    assert "turn_complete" not in first.model_fields_set and "turn_complete" not in second.model_fields_set
    assert second.model_dump(exclude_unset=True, by_alias=True) == {
        "content": {"role": "model", "parts": ({"text": "b"},)},
        "partial": True,
    }


# --- kept partials are one GC-tracked object --------------------------------------------------------


def test_once_the_subscriber_keeps_partials_they_are_built_off_the_collectors_lists() -> None:
    import gc

    from rxllm import LlmResponse
    from rxllm._models.aggregation import _gc_untrack

    if _gc_untrack() is None:
        pytest.skip("not CPython: partials are built as usual")
    aggregator = StreamAggregator()
    kept = [aggregator.accept(Chunk(text_delta=f"t{i}", thought_delta="hmm" if i % 2 else None))[0] for i in range(6)]
    for partial in kept[1:]:  # the first one tells the aggregator that partials are kept
        assert partial.content is not None
        assert gc.is_tracked(partial)
        assert not gc.is_tracked(partial.__dict__)
        assert not gc.is_tracked(partial.content) and not gc.is_tracked(partial.content.__dict__)
        assert not gc.is_tracked(partial.content.parts)
        assert not any(gc.is_tracked(part) for part in partial.content.parts)
    for i, partial in enumerate(kept):  # and every one is what validation builds
        raw: list[dict[str, object]] = [{"text": "hmm", "thought": True}] if i % 2 else []
        raw.append({"text": f"t{i}"})
        validated = LlmResponse.model_validate({"content": {"role": "model", "parts": raw}, "partial": True})
        assert partial == validated and hash(partial) == hash(validated) and repr(partial) == repr(validated)
        assert partial.model_dump_json() == validated.model_dump_json()
        assert partial.to_json() == validated.to_json()
        assert pickle.loads(pickle.dumps(partial)) == validated
        assert copy.deepcopy(partial) == validated and copy.copy(partial) == validated
        assert LlmResponse.model_validate(partial.model_dump()) == partial
        assert partial.model_fields_set == validated.model_fields_set
    assert aggregator.finish().text() == "".join(f"t{i}" for i in range(6))


def test_partials_a_subscriber_drops_are_built_as_usual() -> None:
    import gc

    aggregator = StreamAggregator()
    for i in range(5):
        assert aggregator.accept(Chunk(text_delta=f"t{i}"))[0].text() == f"t{i}"
    last = aggregator.accept(Chunk(text_delta="end"))[0]
    assert last.content is not None and gc.is_tracked(last.content)


def test_a_kept_partial_is_freed_by_reference_counting() -> None:
    import gc
    import weakref

    from rxllm import Content

    aggregator = StreamAggregator()
    kept = [aggregator.accept(Chunk(text_delta=f"t{i}"))[0] for i in range(3)]
    partial = aggregator.accept(Chunk(text_delta="watched"))[0]
    assert partial.content is not None and not gc.is_tracked(partial.content)
    content: weakref.ref[Content] = weakref.ref(partial.content)
    gc.disable()
    try:
        del partial
        assert content() is None
    finally:
        gc.enable()
    assert [p.text() for p in kept] == ["t0", "t1", "t2"]
