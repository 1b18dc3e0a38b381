"""Done when: the service turn's plain-call paths give what the general paths give.

A model whose ``stream_events`` is :class:`~rxllm.BaseLlm`'s has its ``generate_content`` responses
turned into service events by the interaction itself (no derived model event, no operator per
round); the same model with ``stream_events`` overridden to the same derivation takes the general
path. Both must emit the same events in the same order, send the same requests, end the same way
(guardrail failures, tool errors, model errors, dispose mid-turn) and release the model call. Also:
work on an ``ImmediateScheduler`` runs inline (as its ``schedule`` would), the requests, tool-result
contents and a ``str`` message's content are built from prevalidated templates (what validation
gives), and the relay's inline completion keeps the bounded buffer's rules.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import reactivex
from pydantic import BaseModel
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable
from reactivex.scheduler import ImmediateScheduler
from reactivex.subject import Subject

import rxllm._models.base_llm as base_llm_module
from rxllm import (
    BaseLlm,
    BufferOverflowError,
    Chunk,
    Content,
    FinishReason,
    FunctionResponse,
    GuardrailError,
    LlmRequest,
    LlmResponse,
    ModelStreamEvent,
    Part,
    ProviderError,
    RxLlmError,
    ToolCallFragment,
    UsageMetadata,
)
from rxllm._models.model_stream import derive_stream_events
from rxllm.service import (
    AfterToolExecutionEvent,
    AiService,
    PartialResponseEvent,
    PartialThinkingEvent,
)
from rxllm.service._relay import BoundedRelay
from rxllm.testing import scripted_turn

from .support import WAIT, Recorder

Turn = Sequence[LlmResponse | Exception]


class SyncLlm(BaseLlm):
    """Answers call *n* with turn *n* at once on the subscribing thread (an exception where it stands
    is ``on_error``); records every request and which calls were disposed. ``stream_events`` is BaseLlm's."""

    def __init__(self, turns: Sequence[Turn]) -> None:
        super().__init__(model="sync")
        self.turns = [list(turn) for turn in turns]
        self.requests: list[LlmRequest] = []
        self.disposed: list[int] = []

    def generate_content(self, llm_request: LlmRequest, stream: bool = False) -> reactivex.Observable[LlmResponse]:
        def subscribe(
            observer: rx_abc.ObserverBase[LlmResponse], scheduler: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            number = len(self.requests)
            self.requests.append(llm_request)
            for item in self.turns[number]:
                if isinstance(item, Exception):
                    observer.on_error(item)
                    break
                observer.on_next(item)
            else:
                observer.on_completed()
            return Disposable(lambda: self.disposed.append(number))

        return reactivex.create(subscribe)


class DerivingSyncLlm(SyncLlm):
    """The same model, its ``stream_events`` overridden with BaseLlm's own derivation: the general path."""

    def stream_events(self, llm_request: LlmRequest) -> reactivex.Observable[ModelStreamEvent]:
        return derive_stream_events(self.generate_content(llm_request, stream=True))


class DrivenLlm(BaseLlm):
    """Each call is a Subject the test drives after subscribe (so a subscriber can dispose mid-round)."""

    def __init__(self) -> None:
        super().__init__(model="driven")
        self.calls: list[Subject[LlmResponse]] = []

    def generate_content(self, llm_request: LlmRequest, stream: bool = False) -> reactivex.Observable[LlmResponse]:
        def subscribe(
            observer: rx_abc.ObserverBase[LlmResponse], scheduler: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            subject: Subject[LlmResponse] = Subject()
            self.calls.append(subject)
            return subject.subscribe(observer)

        return reactivex.create(subscribe)


class DerivingDrivenLlm(DrivenLlm):
    def stream_events(self, llm_request: LlmRequest) -> reactivex.Observable[ModelStreamEvent]:
        return derive_stream_events(self.generate_content(llm_request, stream=True))


class StockImmediate(ImmediateScheduler):
    """An ImmediateScheduler subclass: the interaction schedules on it through ``schedule`` (the general path)."""


def get_order(order_id: str) -> dict[str, str]:
    """Look an order up by its id.

    Args:
        order_id: the order's id.
    """
    return {"order_id": order_id, "status": "shipped Tuesday"}


def broken(order_id: str) -> dict[str, str]:
    """Always fails.

    Args:
        order_id: the order's id.
    """
    raise ValueError(f"no such order {order_id}")


def interrupted(order_id: str) -> dict[str, str]:
    """Raises what ends the turn.

    Args:
        order_id: the order's id.
    """
    raise KeyboardInterrupt


def call(index: int, call_id: str, name: str, arguments: str) -> Chunk:
    return Chunk(tool_call_fragments=(ToolCallFragment(index, call_id, name, arguments),))


def tool_turn(name: str = "get_order") -> list[LlmResponse]:
    """A round with thought text, answer text (one empty delta) and two calls split across chunks."""
    return scripted_turn(
        Chunk(thought_delta="Thinking. "),
        Chunk(text_delta="Let me "),
        Chunk(text_delta=""),
        Chunk(text_delta="check."),
        call(0, "call_a", name, '{"order_'),
        Chunk(tool_call_fragments=(ToolCallFragment(0, None, None, 'id": "A17"}'),)),
        call(1, "call_b", name, '{"order_id": "B2"}'),
        Chunk(finish_reason=FinishReason.STOP, usage=UsageMetadata(total_token_count=30)),
    )


def answer_turn(*texts: str) -> list[LlmResponse]:
    chunks = [Chunk(text_delta=text) for text in texts or ("A17 shipped ", "Tuesday.")]
    return scripted_turn(*chunks, Chunk(finish_reason=FinishReason.STOP, usage=UsageMetadata(total_token_count=50)))


def run(
    model: SyncLlm, message: str | Content = "Where is A17?", scheduler: rx_abc.SchedulerBase | None = None,
    **kwargs: Any,
) -> Recorder:
    service = AiService(model, tool_scheduler=scheduler or ImmediateScheduler(), **kwargs)
    recorder = Recorder()
    service.stream(message).subscribe(recorder)
    return recorder.wait()


def outcome(recorder: Recorder) -> tuple[list[Any], str | None, bool]:
    error = recorder.error
    return recorder.snapshot(), None if error is None else f"{type(error).__name__}: {error}", recorder.completed


def assert_same_both_ways(turns: Sequence[Turn], **kwargs: Any) -> Recorder:
    """The turn through the plain path and the general one: same events, ending, requests, disposals."""
    fast_model, slow_model = SyncLlm(turns), DerivingSyncLlm(turns)
    fast, slow = run(fast_model, **kwargs), run(slow_model, **kwargs)
    assert outcome(fast) == outcome(slow)
    assert [r.model_dump() for r in fast_model.requests] == [r.model_dump() for r in slow_model.requests]
    # every call released (in whichever order the nested synchronous subscribes unwind)
    assert sorted(fast_model.disposed) == sorted(slow_model.disposed) == list(range(len(fast_model.requests)))
    return fast


@pytest.fixture
def derivations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times BaseLlm's stream_events derived a stream (the plain path never asks it to)."""
    count: list[int] = []

    def counting(responses: reactivex.Observable[LlmResponse]) -> reactivex.Observable[ModelStreamEvent]:
        count.append(1)
        return derive_stream_events(responses)

    monkeypatch.setattr(base_llm_module, "derive_stream_events", counting)
    return count


def test_a_tool_turn_gives_the_same_events_in_the_same_order_without_deriving_model_events(
    derivations: list[int],
) -> None:
    fast = assert_same_both_ways([tool_turn(), answer_turn()], tools=[get_order])
    assert derivations == []
    assert fast.completed and fast.kinds() == [
        "partial_thinking", "partial_response", "partial_response",
        "complete_tool_call", "before_tool_execution", "after_tool_execution",
        "complete_tool_call", "before_tool_execution", "after_tool_execution",
        "intermediate_response", "partial_response", "partial_response", "final_response",
    ]
    events = fast.snapshot()
    assert events[0] == PartialThinkingEvent("Thinking. ")
    assert events[1:3] == [PartialResponseEvent("Let me "), PartialResponseEvent("check.")]
    assert events[-1].total_usage_metadata.total_token_count == 80


def test_output_type_gives_the_same_parsed_final() -> None:
    class Order(BaseModel):
        order_id: str
        status: str

    fast = assert_same_both_ways([answer_turn('{"order_id": "A17", ', '"status": "shipped"}')], output_type=Order)
    assert fast.snapshot()[-1].response.parsed == Order(order_id="A17", status="shipped")


def test_guardrails_suppress_partials_and_rewrite_or_reject_alike() -> None:
    rewritten = assert_same_both_ways([tool_turn(), answer_turn()], tools=[get_order],
                                      output_guardrails=[lambda response: response.text().upper()])
    assert "partial_response" not in rewritten.kinds()
    assert rewritten.snapshot()[-1].response.text() == "A17 SHIPPED TUESDAY."

    def reject(response: LlmResponse) -> None:
        raise GuardrailError("not that answer")

    rejected = assert_same_both_ways([answer_turn()], output_guardrails=[reject])
    assert isinstance(rejected.error, GuardrailError) and rejected.kinds() == []


def test_tool_errors_answer_the_model_alike_and_an_interrupting_tool_ends_the_turn_alike() -> None:
    failed = assert_same_both_ways([tool_turn("broken"), answer_turn()], tools=[broken])
    afters = [e for e in failed.snapshot() if isinstance(e, AfterToolExecutionEvent)]
    assert [e.failed for e in afters] == [True, True]
    assert all("no such order" in str(e.result.response) for e in afters)

    unknown = assert_same_both_ways([tool_turn("missing"), answer_turn()], tools=[get_order])
    assert [e.failed for e in unknown.snapshot() if isinstance(e, AfterToolExecutionEvent)] == [True, True]

    ended = assert_same_both_ways([tool_turn("interrupted"), answer_turn()], tools=[interrupted])
    assert isinstance(ended.error, RxLlmError) and not ended.completed


def test_error_finals_model_errors_and_a_missing_final_end_alike() -> None:
    cut = scripted_turn(Chunk(text_delta="Order A17 "), Chunk(finish_reason=FinishReason.MAX_TOKENS))
    error_final = assert_same_both_ways([cut])
    assert error_final.completed and error_final.snapshot()[-1].response.error_code is not None

    failing = assert_same_both_ways([[answer_turn()[0], ProviderError("the wire broke", code="BROKEN")]])
    assert isinstance(failing.error, ProviderError) and failing.kinds() == ["partial_response"]

    no_final = assert_same_both_ways([answer_turn()[:-1]])
    assert isinstance(no_final.error, RxLlmError) and "without its final response" in str(no_final.error)


def test_inline_immediate_work_is_what_scheduling_on_it_gives() -> None:
    turns = [tool_turn(), answer_turn()]
    inline, stock = run(SyncLlm(turns), tools=[get_order]), run(SyncLlm(turns), scheduler=StockImmediate(),
                                                                 tools=[get_order])
    assert outcome(inline) == outcome(stock)
    retrieved: dict[str, Any] = {"retriever": lambda query: ["Orders ship from Berlin."], "tools": [get_order]}
    assert outcome(run(SyncLlm(turns), **retrieved)) == outcome(run(SyncLlm(turns), scheduler=StockImmediate(),
                                                                    **retrieved))


def dispose_at(
    model: DrivenLlm, predicate: Callable[[Any], bool], drive: Callable[[DrivenLlm], None], **kwargs: Any
) -> Recorder:
    """Subscribe, drive the model, and dispose inside ``on_next`` of the first event matching ``predicate``."""
    subscription: list[rx_abc.DisposableBase] = []

    def on_event(event: Any) -> None:
        if predicate(event) and subscription:
            subscription.pop().dispose()

    recorder = Recorder(on_event)
    service = AiService(model, tool_scheduler=ImmediateScheduler(), **kwargs)
    subscription.append(service.stream("Where is A17?").subscribe(recorder))
    drive(model)
    assert recorder.violations == [] and not recorder.done.is_set()
    assert all(not subject.observers for subject in model.calls)  # every model call was disposed
    return recorder


def two_text_parts(model: DrivenLlm) -> None:
    partial = LlmResponse(content=Content(role="model", parts=(Part(text="A17 "), Part(text="shipped"))), partial=True)
    model.calls[0].on_next(partial)
    model.calls[0].on_next(answer_turn()[-1])
    model.calls[0].on_completed()


def two_calls_at_the_final(model: DrivenLlm) -> None:
    turn = tool_turn()
    model.calls[0].on_next(turn[-1])  # the final: both calls
    model.calls[0].on_completed()


@pytest.mark.parametrize(("drive", "predicate", "kinds"), [
    (two_text_parts, lambda e: e.kind == "partial_response", ["partial_response"]),
    (two_calls_at_the_final, lambda e: e.kind == "complete_tool_call", ["complete_tool_call"]),
    (two_calls_at_the_final, lambda e: e.kind == "after_tool_execution",
     ["complete_tool_call", "before_tool_execution", "after_tool_execution"]),
])
def test_dispose_mid_round_stops_at_once_alike(
    drive: Callable[[DrivenLlm], None], predicate: Callable[[Any], bool], kinds: list[str]
) -> None:
    calls: list[list[str]] = []

    def recording(order_id: str) -> dict[str, str]:
        """Look an order up.

        Args:
            order_id: the order's id.
        """
        calls[-1].append(order_id)
        return get_order(order_id)

    recorded = []
    for model in (DrivenLlm(), DerivingDrivenLlm()):
        calls.append([])
        recorder = dispose_at(model, predicate, drive, tools=[recording])
        assert recorder.kinds() == kinds
        assert len(model.calls) == 1  # no second round
        recorded.append(recorder.snapshot())
    assert recorded[0] == recorded[1] and calls[0] == calls[1]


def test_a_stream_events_set_on_the_instance_is_the_models_stream() -> None:
    model = SyncLlm([answer_turn()])
    model.stream_events = lambda request: derive_stream_events(  # type: ignore[method-assign]
        model.generate_content(request, stream=True).pipe(
            reactivex.operators.map(lambda r: r.model_copy(update={"content": Content(parts=(Part(text="mine"),))})
                                    if r.partial else r)
        )
    )
    recorder = run(model)
    assert [e.text for e in recorder.snapshot() if e.kind == "partial_response"] == ["mine", "mine"]


def test_prevalidated_builds_are_what_validation_gives() -> None:
    model = SyncLlm([tool_turn(), answer_turn()])
    run(model, tools=[get_order], system_message="Be brief.")
    for request in model.requests:
        validated = LlmRequest(contents=request.contents, config=request.config)
        assert request == validated and request.model_fields_set == validated.model_fields_set
        assert request.model_dump() == validated.model_dump()
        for content in request.contents:
            again = Content.model_validate(content.model_dump())
            assert content == again and content.model_fields_set == again.model_fields_set
            for part in content.parts:
                revalidated = Part.model_validate(part.model_dump(exclude_unset=True))
                assert part.model_fields_set == revalidated.model_fields_set
    user = model.requests[0].contents[0]
    assert user == Content(role="user", parts=(Part(text="Where is A17?"),))
    results = model.requests[1].contents[-1]
    assert results.role == "user" and all(type(p.function_response) is FunctionResponse for p in results.parts)


class Text(str):
    """A str subclass: the message is validated as pydantic validates it."""


@pytest.mark.parametrize("message", ["caf\udce9 A17?", Text("Where is A17?"), "Wo ist A17? ü"])
def test_a_str_message_is_sent_as_the_validated_and_scrubbed_content(message: str) -> None:
    model = SyncLlm([answer_turn()])
    run(model, message)
    sent = model.requests[0].contents[0]
    expected = Content(role="user", parts=(Part(text=message.replace("\udce9", "\ufffd")),))
    assert sent == expected and type(sent.parts[0].text) is str
    assert sent.model_fields_set == expected.model_fields_set


# -- the relay's inline completion keeps the bounded buffer's rules -------------------------------------


class Blocking(rx_abc.ObserverBase[Any]):
    """Blocks inside ``on_next`` of ``block_on`` until released; records every signal and its thread."""

    def __init__(self, block_on: Any = None, raise_on_completed: bool = False) -> None:
        self.block_on = block_on
        self.raise_on_completed = raise_on_completed
        self.inside = threading.Event()
        self.release = threading.Event()
        self.signals: list[Any] = []

    def on_next(self, value: Any) -> None:
        self.signals.append(value)
        if value == self.block_on:
            self.inside.set()
            assert self.release.wait(WAIT)

    def on_error(self, error: Exception) -> None:
        self.signals.append(error)

    def on_completed(self) -> None:
        self.signals.append("completed")
        if self.raise_on_completed:
            raise RuntimeError("the subscriber broke")


def deliver_blocked(relay: BoundedRelay[Any], observer: Blocking, then: Callable[[], None]) -> None:
    """Offer ``"first"`` on a thread (where the observer blocks), ``then()`` here, and release it."""
    producer = threading.Thread(target=relay.on_next, args=("first",))
    producer.start()
    assert observer.inside.wait(WAIT)
    then()
    observer.release.set()
    producer.join(WAIT)
    assert not producer.is_alive()


def test_relay_completion_offered_while_another_thread_delivers_follows_the_queued_items() -> None:
    observer = Blocking(block_on="first")
    failures: list[int] = []
    relay: BoundedRelay[Any] = BoundedRelay(observer, 2, lambda: failures.append(1))

    def offer() -> None:
        relay.on_next("second")
        relay.on_next("third")
        relay.on_completed()  # terminal signals do not count against the capacity
        relay.on_next("ignored")
        relay.on_completed()

    deliver_blocked(relay, observer, offer)
    assert observer.signals == ["first", "second", "third", "completed"] and failures == []


def test_relay_completion_after_an_overflow_is_ignored_and_the_error_is_last() -> None:
    observer = Blocking(block_on="first")
    failures: list[int] = []
    relay: BoundedRelay[Any] = BoundedRelay(observer, 1, lambda: failures.append(1))

    def offer() -> None:
        relay.on_next("second")
        relay.on_next("overflows")
        relay.on_completed()

    deliver_blocked(relay, observer, offer)
    assert observer.signals[0] == "first" and len(observer.signals) == 2
    assert isinstance(observer.signals[1], BufferOverflowError) and failures == [1]


def test_relay_a_subscriber_raising_in_on_completed_stops_the_producers_and_nothing_follows() -> None:
    observer = Blocking(raise_on_completed=True)
    failures: list[int] = []
    relay: BoundedRelay[Any] = BoundedRelay(observer, 4, lambda: failures.append(1))
    relay.on_next("only")
    with pytest.raises(RuntimeError, match="the subscriber broke"):
        relay.on_completed()
    relay.on_next("after")
    relay.on_error(ValueError("after"))
    assert observer.signals == ["only", "completed"] and failures == [1] and relay.closed


def test_relay_completion_after_cancel_is_not_delivered() -> None:
    observer = Blocking()
    relay: BoundedRelay[Any] = BoundedRelay(observer, 4, lambda: None)
    relay.cancel()
    relay.on_completed()
    assert observer.signals == []
