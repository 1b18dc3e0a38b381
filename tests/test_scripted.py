"""ScriptedLlm and scripted_turn: the scripted model the rest of the suite builds on."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest
import reactivex

from rxllm import (
    Chunk,
    FinishReason,
    LimitExceededError,
    LlmRequest,
    LlmResponse,
    StreamAggregator,
    ToolCallFragment,
    TransportError,
    UsageMetadata,
)
from rxllm.testing import ScriptedLlm, assert_stream_protocol, scripted_turn


@dataclass
class _Recorded:
    items: list[LlmResponse] = field(default_factory=list)
    error: BaseException | None = None
    completed: bool = False
    done: threading.Event = field(default_factory=threading.Event)


def _collect(source: reactivex.Observable[LlmResponse]) -> _Recorded:
    """Subscribe and wait for the terminal event (the default ScriptedLlm emits on its own thread)."""
    recorded = _Recorded()

    def on_error(error: Exception) -> None:
        recorded.error = error
        recorded.done.set()

    def on_completed() -> None:
        recorded.completed = True
        recorded.done.set()

    source.subscribe(on_next=recorded.items.append, on_error=on_error, on_completed=on_completed)
    assert recorded.done.wait(5.0), "the scripted call never ended"
    return recorded


CHUNKS = (
    Chunk(thought_delta="plan"),
    Chunk(text_delta="The order"),
    Chunk(text_delta=" ships", usage=UsageMetadata(total_token_count=4)),
    Chunk(tool_call_fragments=(ToolCallFragment(0, "c1", "get_order", '{"order_id":"A17"}'),)),
    Chunk(finish_reason=FinishReason.STOP),
)


# --- scripted_turn ------------------------------------------------------------------------------------


def test_scripted_turn_is_what_the_aggregator_emits() -> None:
    turn = scripted_turn(*CHUNKS)
    agg = StreamAggregator()
    expected = [r for c in CHUNKS for r in agg.accept(c)]
    final = agg.finish()
    assert turn[:-1] == expected
    assert turn[-1] == final  # the call has a provider id, so nothing is generated
    assert [r.partial for r in turn] == [True, True, True, None]
    assert_stream_protocol(turn)


def test_scripted_turn_without_chunks_is_one_empty_final() -> None:
    [final] = scripted_turn()
    assert final.partial is None
    assert final.text() == ""


# --- ScriptedLlm ----------------------------------------------------------------------------------------


def test_stream_true_emits_the_turn_as_scripted() -> None:
    turn = scripted_turn(*CHUNKS)
    llm = ScriptedLlm([turn])
    recorded = _collect(llm.generate_content(LlmRequest(), stream=True))
    assert recorded.items == turn
    assert recorded.completed
    assert recorded.error is None


@pytest.mark.parametrize("final_partial", [None, True])
def test_stream_false_emits_exactly_one_non_partial_response(final_partial: bool | None) -> None:
    turn = scripted_turn(*CHUNKS)
    turn[-1] = turn[-1].model_copy(update={"partial": final_partial})
    llm = ScriptedLlm([turn])
    recorded = _collect(llm.generate_content(LlmRequest(), stream=False))
    assert recorded.completed
    [only] = recorded.items
    assert only.partial is None
    assert only.text() == "The order ships"
    assert only.function_calls()[0].name == "get_order"
    assert only.usage_metadata == UsageMetadata(total_token_count=4)


def test_turns_are_answered_in_order_and_requests_recorded() -> None:
    llm = ScriptedLlm([scripted_turn(Chunk(text_delta="one")), scripted_turn(Chunk(text_delta="two"))])
    first_request = LlmRequest(model="m1")
    second_request = LlmRequest(model="m2")
    first = _collect(llm.generate_content(first_request, stream=True))
    second = _collect(llm.generate_content(second_request))
    assert first.items[-1].text() == "one"
    assert [r.text() for r in second.items] == ["two"]
    assert llm.requests == [(first_request, True), (second_request, False)]


def test_is_cold_the_turn_is_taken_at_subscribe_time() -> None:
    llm = ScriptedLlm([scripted_turn(Chunk(text_delta="one")), scripted_turn(Chunk(text_delta="two"))])
    later = llm.generate_content(LlmRequest(model="later"), stream=True)
    sooner = llm.generate_content(LlmRequest(model="sooner"), stream=True)
    assert llm.requests == []
    assert _collect(sooner).items[-1].text() == "one"
    assert _collect(later).items[-1].text() == "two"
    assert [r.model for r, _ in llm.requests] == ["sooner", "later"]


def test_exception_items_become_on_error_where_they_stand() -> None:
    boom = TransportError("connection reset")
    partial = scripted_turn(Chunk(text_delta="Hel"))[0]
    llm = ScriptedLlm([[partial, boom, partial]])
    recorded = _collect(llm.generate_content(LlmRequest(), stream=True))
    assert recorded.items == [partial]
    assert recorded.error is boom
    assert not recorded.completed


def test_exception_item_with_stream_false_is_the_only_signal() -> None:
    boom = TransportError("connection reset")
    llm = ScriptedLlm([[*scripted_turn(Chunk(text_delta="Hel")), boom]])
    recorded = _collect(llm.generate_content(LlmRequest(), stream=False))
    assert recorded.items == []
    assert recorded.error is boom


def test_running_out_of_turns_is_limit_exceeded_via_on_error() -> None:
    llm = ScriptedLlm([scripted_turn(Chunk(text_delta="only"))])
    assert _collect(llm.generate_content(LlmRequest())).completed
    recorded = _collect(llm.generate_content(LlmRequest(), stream=True))
    assert recorded.items == []
    assert isinstance(recorded.error, LimitExceededError)
    assert "only 1 scripted turn" in str(recorded.error)
    assert "call #2" in str(recorded.error)
    assert len(llm.requests) == 2


def test_no_turns_at_all() -> None:
    recorded = _collect(ScriptedLlm([]).generate_content(LlmRequest()))
    assert isinstance(recorded.error, LimitExceededError)


def test_model_name_and_repr() -> None:
    llm = ScriptedLlm([], model="scripted-x")
    assert llm.model == "scripted-x"
    assert repr(llm) == "ScriptedLlm(model='scripted-x')"


def test_concurrent_calls_each_get_a_distinct_turn() -> None:
    n = 8
    llm = ScriptedLlm([scripted_turn(Chunk(text_delta=str(i))) for i in range(n)])
    barrier = threading.Barrier(n)
    results: list[str] = []
    lock = threading.Lock()

    def call() -> None:
        barrier.wait()
        recorded = _collect(llm.generate_content(LlmRequest(), stream=True))
        with lock:
            results.append(recorded.items[-1].text())

    threads = [threading.Thread(target=call) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results, key=int) == [str(i) for i in range(n)]
    assert len(llm.requests) == n
