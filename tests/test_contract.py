"""assert_stream_protocol: passes a correct stream and names the invariant each classic failure breaks."""

from __future__ import annotations

import pytest

from rxllm import Chunk, Content, FunctionCall, LlmResponse, Part, ToolCallFragment, UsageMetadata
from rxllm.testing import assert_stream_protocol, scripted_turn


def _partial(text: str = "", thought: str = "") -> LlmResponse:
    parts = ([Part(text=thought, thought=True)] if thought else []) + ([Part(text=text)] if text else [])
    return LlmResponse(content=Content(role="model", parts=parts), partial=True)


def _final(text: str = "", thought: str = "", *, calls: tuple[FunctionCall, ...] = (), **fields: object) -> LlmResponse:
    parts = ([Part(text=thought, thought=True)] if thought else []) + ([Part(text=text)] if text else [])
    parts += [Part(function_call=c) for c in calls]
    return LlmResponse.model_validate({"content": Content(role="model", parts=parts), **fields})


GOOD = [
    _partial("The order"),
    _partial(" ships"),
    _final(
        "The order ships",
        calls=(FunctionCall(id="c1", name="get_order", args={"order_id": "A17"}),),
        usage_metadata=UsageMetadata(total_token_count=12),
    ),
]


def test_correct_sequence_passes_and_returns_the_final() -> None:
    assert assert_stream_protocol(GOOD) is GOOD[-1]


def test_single_final_response_passes() -> None:
    final = _final("whole answer")
    assert assert_stream_protocol([final]) is final


def test_explicit_partial_false_counts_as_final() -> None:
    final = LlmResponse(content=Content(role="model", parts=(Part(text="a"),)), partial=False)
    assert assert_stream_protocol([_partial("a"), final]) is final


def test_scripted_turn_output_passes() -> None:
    turn = scripted_turn(
        Chunk(thought_delta="think"),
        Chunk(text_delta="Checking", usage=UsageMetadata(total_token_count=1)),
        Chunk(tool_call_fragments=(ToolCallFragment(0, "c1", "get_order", '{"order_id":"A17"}'),)),
    )
    final = assert_stream_protocol(turn)
    assert final.function_calls()[0].args == {"order_id": "A17"}


# --- the failure modes of hand-written streaming models ----------------------------------------------


def test_empty_list() -> None:
    with pytest.raises(AssertionError, match="no responses at all"):
        assert_stream_protocol([])


def test_no_final_every_response_partial() -> None:
    with pytest.raises(AssertionError, match="no final response: the last response is partial"):
        assert_stream_protocol([_partial("The order"), _partial(" ships")])


def test_every_chunk_final() -> None:
    with pytest.raises(AssertionError, match="only the last response may be final") as info:
        assert_stream_protocol([_final("The order"), _final(" ships"), _final("The order ships")])
    assert "response #0 of 3" in str(info.value)


def test_a_final_in_the_middle() -> None:
    with pytest.raises(AssertionError, match=r"response #1 of 3 is final but is not the last"):
        assert_stream_protocol([_partial("a"), _final("a"), _final("a")])


def test_final_holding_only_the_last_delta() -> None:
    with pytest.raises(AssertionError, match="does not concatenate to the final's text") as info:
        assert_stream_protocol([_partial("The order"), _partial(" ships"), _final(" ships")])
    message = str(info.value)
    assert "'The order ships'" in message
    assert "final ' ships'" in message


def test_usage_on_every_chunk() -> None:
    usage = UsageMetadata(total_token_count=3)
    responses = [
        _partial("a").model_copy(update={"usage_metadata": usage}),
        _final("a", usage_metadata=usage),
    ]
    with pytest.raises(AssertionError, match="partial #0 carries usage: usage belongs on the final only"):
        assert_stream_protocol(responses)


def test_function_calls_on_a_partial() -> None:
    call = FunctionCall(id="c1", name="get_order", args={"order_id": "A1"})
    partial = LlmResponse(content=Content(role="model", parts=(Part(function_call=call),)), partial=True)
    with pytest.raises(AssertionError, match="partial #1 carries function calls: calls belong on the final only"):
        assert_stream_protocol([_partial("x"), partial, _final("x", calls=(call,))])


def test_thought_text_mismatch() -> None:
    with pytest.raises(AssertionError, match="thought text does not concatenate to the final's thought text"):
        assert_stream_protocol([_partial(thought="step 1 "), _partial(thought="step 2"), _final(thought="step 2")])


def test_thought_text_counted_as_answer_text_is_caught() -> None:
    # A final that folds reasoning into the answer text breaks the text invariant.
    with pytest.raises(AssertionError, match="partials' text does not concatenate"):
        assert_stream_protocol([_partial(thought="hmm"), _partial("hi"), _final("hmmhi")])


def test_long_texts_are_clipped_in_the_message() -> None:
    with pytest.raises(AssertionError) as info:
        assert_stream_protocol([_partial("x" * 5000), _final("y" * 5000)])
    assert len(str(info.value)) < 600
    assert " … " in str(info.value)
