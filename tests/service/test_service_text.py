"""``to_text``: what its strings concatenate to (with and without guardrails), no hang, errors propagate."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import reactivex
from reactivex import operators as ops

from rxllm import Chunk, ConfigurationError, FinishReason, LimitExceededError, ProviderError
from rxllm.service import AiService, FinalResponseEvent, IntermediateResponseEvent, PartialResponseEvent, to_text
from rxllm.testing import ScriptedLlm, scripted_turn

from .support import (
    ANSWER,
    QUESTION,
    WAIT,
    OrderTool,
    Recorder,
    openai_server,
    tool_round_chunks,
    two_round_model,
    two_rounds,
)

TOOL_ROUND_TEXT = "Let me check both."


def two_round_service(**options: Any) -> AiService:
    return AiService(two_round_model(), tools=[OrderTool().get_order], **options)


def test_without_guardrails_the_text_streams_every_rounds_partials_tool_rounds_included() -> None:
    service = two_round_service()
    events = service.stream(QUESTION).pipe(ops.to_list()).run()
    strings = to_text(reactivex.from_iterable(events), False).pipe(ops.to_list()).run()

    assert strings == [e.text for e in events if isinstance(e, PartialResponseEvent)]  # each partial, as it came
    responses = [e.response for e in events if isinstance(e, IntermediateResponseEvent | FinalResponseEvent)]
    assert "".join(strings) == "".join(r.text() for r in responses) == TOOL_ROUND_TEXT + ANSWER
    final = events[-1]
    assert isinstance(final, FinalResponseEvent)
    assert final.response.text() == ANSWER  # the final event carries the last round's answer only


def test_sse_text_without_guardrails_matches_the_documented_concatenation() -> None:
    with openai_server(*two_rounds()) as (_, model):
        service = AiService(model, tools=[OrderTool().get_order])
        strings = to_text(service.stream(QUESTION), service.has_output_guardrails).pipe(ops.to_list()).run()
        assert strings == ["Let me check ", "both.", "A17 shipped Tuesday; ", "B2 ships Friday."]


def test_with_guardrails_only_the_finals_text_tool_rounds_left_out() -> None:
    service = two_round_service(output_guardrails=[lambda response: None])
    strings = to_text(service.stream(QUESTION), service.has_output_guardrails).pipe(ops.to_list()).run()
    assert strings == [ANSWER]


def test_text_completes_right_after_the_last_string() -> None:
    # The final event contributes no string without guardrails; completion must still arrive.
    done = threading.Event()
    strings: list[str] = []
    two_round = two_round_service()
    to_text(two_round.stream(QUESTION), False).subscribe(strings.append, on_completed=done.set)
    assert done.wait(WAIT)
    assert "".join(strings) == TOOL_ROUND_TEXT + ANSWER

    # A consumer that takes exactly the strings it expects also finishes.
    taken = to_text(two_round_service().stream(QUESTION), False).pipe(ops.take(4), ops.to_list()).run()
    assert "".join(taken) == TOOL_ROUND_TEXT + ANSWER


def test_errors_propagate_through_the_text() -> None:
    model = ScriptedLlm([[*scripted_turn(Chunk(text_delta="par"))[:-1], ProviderError("overloaded", code="529")]])
    recorder = Recorder()
    to_text(AiService(model).stream("hi"), False).subscribe(recorder)
    recorder.wait()
    assert recorder.events == ["par"]
    assert isinstance(recorder.error, ProviderError) and recorder.error.code == "529"

    limited = ScriptedLlm([scripted_turn(*tool_round_chunks())])
    recorder = Recorder()
    service = AiService(limited, tools=[OrderTool().get_order], max_rounds=1)
    to_text(service.stream(QUESTION), False).subscribe(recorder)
    recorder.wait()
    assert isinstance(recorder.error, LimitExceededError)


@pytest.mark.parametrize("guarded", [False, True])
def test_an_error_final_fails_the_text_after_its_text(guarded: bool) -> None:
    cut_off = scripted_turn(Chunk(text_delta="The answer is"), Chunk(finish_reason=FinishReason.MAX_TOKENS))
    model = ScriptedLlm([cut_off])
    service = AiService(model, output_guardrails=[lambda response: None] if guarded else [])
    recorder = Recorder()
    to_text(service.stream("hi"), service.has_output_guardrails).subscribe(recorder)
    recorder.wait()
    assert recorder.events == ["The answer is"]
    assert isinstance(recorder.error, ProviderError) and recorder.error.code == "MAX_TOKENS"


def test_disposing_the_text_disposes_the_events() -> None:
    disposed = threading.Event()
    source: reactivex.Observable[Any] = reactivex.never().pipe(ops.finally_action(disposed.set))
    to_text(source, False).subscribe().dispose()
    assert disposed.is_set()


def test_text_buffer_size_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="buffer_size"):
        to_text(reactivex.empty(), False, buffer_size=0)
