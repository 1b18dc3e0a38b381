"""Three broken hand-written streaming models (no final; every chunk final; the final holds only the last
delta): what the runtime does with each, and that the contract checker catches each."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from rxllm import Chunk, MalformedFunctionCallError, ToolCallFragment
from rxllm.agents import StreamingMode
from rxllm.testing import assert_stream_protocol, scripted_turn

from .support import (
    ANSWER,
    EXPLANATION,
    QUESTION,
    ListLlm,
    answer_chunks,
    every_chunk_final,
    final_holds_last_delta,
    history,
    order_runner,
    run_collect,
    worked_example_chunks,
)

# --- 1. never final: every chunk partial, no final aggregate ---------------------------------------------


def never_final_turn() -> list[Any]:
    return scripted_turn(*worked_example_chunks())[:-1]


def test_checker_catches_a_model_that_never_sends_a_final() -> None:
    with pytest.raises(AssertionError, match="no final response"):
        assert_stream_protocol(never_final_turn())


@pytest.mark.parametrize("mode", [StreamingMode.SSE, StreamingMode.NONE])
def test_never_final_streams_to_the_screen_but_leaves_no_trace(
    mode: StreamingMode, caplog: pytest.LogCaptureFixture
) -> None:
    model = ListLlm([never_final_turn()])
    runner, calls = order_runner(model)

    with caplog.at_level(logging.WARNING, logger="rxllm.agents"):
        outcome = run_collect(runner, mode=mode)

    # The subscriber saw the text stream ...
    assert [(e.partial, e.text()) for e in outcome.events] == [(True, "Let me look "), (True, "that up.")]
    # ... but nothing of the model turn was stored, and the tool call (only ever in a final) never ran.
    assert [e.text() for e in history(runner)] == [QUESTION]
    assert calls == []
    assert len(model.requests) == 1  # the run ends instead of asking again
    assert outcome.completed and outcome.error is None
    assert any("partial response and no final" in r.getMessage() for r in caplog.records)


# --- 2. every chunk final: each chunk its own "complete" turn ---------------------------------------------


def test_checker_catches_a_model_that_marks_every_chunk_final() -> None:
    responses, _ = every_chunk_final(answer_chunks())
    with pytest.raises(AssertionError, match="is final but is not the last"):
        assert_stream_protocol(responses)


def test_every_chunk_final_stores_fragments_and_the_split_call_fails_loudly() -> None:
    responses, error = every_chunk_final(worked_example_chunks())
    # The naive model parses each chunk's argument fragment alone: '{"order_' is not JSON.
    assert isinstance(error, MalformedFunctionCallError) and error.tool_name == "get_order"
    with pytest.raises(AssertionError, match="is final but is not the last"):
        assert_stream_protocol(responses)
    model = ListLlm([responses], error=error)
    runner, calls = order_runner(model)

    outcome = run_collect(runner, mode=StreamingMode.SSE)

    # History fills with slivers: each fragment is a separate stored event.
    assert [e.text() for e in history(runner)] == [QUESTION, "Let me look ", "that up."]
    assert [(e.partial, e.text()) for e in outcome.events] == [(None, "Let me look "), (None, "that up.")]
    # The call split across chunks never runs with half its arguments: the run fails loudly.
    assert calls == []
    assert isinstance(outcome.error, MalformedFunctionCallError)
    assert "get_order" in str(outcome.error)
    assert not outcome.completed


def test_every_chunk_final_with_a_whole_call_runs_it_once_but_history_is_fragmented() -> None:
    chunks = [
        Chunk(text_delta="Let me look "),
        Chunk(text_delta="that up."),
        Chunk(tool_call_fragments=(ToolCallFragment(0, "call_1", "get_order", '{"order_id": "A17"}'),)),
    ]
    first, error = every_chunk_final(chunks)
    second, _ = every_chunk_final(answer_chunks())
    assert error is None
    model = ListLlm([first, second])
    runner, calls = order_runner(model)

    outcome = run_collect(runner, mode=StreamingMode.SSE)

    assert outcome.completed
    assert calls == [{"order_id": "A17"}]
    texts = [e.text() for e in history(runner)]
    # 1 user + 3 model slivers + 1 tool response; the answer's first sliver is final: the run stops there.
    assert texts == [QUESTION, "Let me look ", "that up.", "", "", "Order A17 ", "shipped ", "Tuesday.", ""]
    assert len(model.requests) == 2


# --- 3. the final holds only the last delta --------------------------------------------------------------


def test_checker_catches_a_final_that_holds_only_the_last_delta() -> None:
    with pytest.raises(AssertionError, match="does not concatenate"):
        assert_stream_protocol(final_holds_last_delta(answer_chunks()))


def test_final_with_only_the_last_delta_stores_a_truncated_answer() -> None:
    model = ListLlm([scripted_turn(*worked_example_chunks()), final_holds_last_delta(answer_chunks())])
    runner, calls = order_runner(model)

    outcome = run_collect(runner, mode=StreamingMode.SSE)

    assert outcome.completed
    assert calls == [{"order_id": "A17"}]
    # The screen showed the whole answer (the partials) ...
    assert "".join(e.text() for e in outcome.events if e.partial and e.text() != EXPLANATION)[-len(ANSWER) :] == ANSWER
    # ... the session keeps only the last delta.
    assert [e.text() for e in history(runner)][-1] == "Tuesday."
