"""Test doubles and helpers for the agent runtime tests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable
from reactivex.scheduler import ImmediateScheduler

from rxllm import (
    BaseLlm,
    Chunk,
    Content,
    FinishReason,
    LlmRequest,
    LlmResponse,
    Part,
    StreamAggregator,
    ToolCallFragment,
    UsageMetadata,
)
from rxllm.agents import Event, InMemoryRunner, LlmAgent, RunConfig, Runner, StreamingMode
from rxllm.testing import ScriptedLlm, scripted_turn

APP = "shop"
USER = "u1"
SESSION = "s1"
QUESTION = "Where is order A17?"
EXPLANATION = "Let me look that up."
ANSWER = "Order A17 shipped Tuesday."
ORDER = {"order_id": "A17", "status": "shipped", "shipped_on": "Tuesday"}


def worked_example_chunks() -> list[Chunk]:
    """The worked example's first model turn: a short explanation, then a get_order call split across chunks."""
    return [
        Chunk(text_delta="Let me look "),
        Chunk(text_delta="that up."),
        Chunk(tool_call_fragments=(ToolCallFragment(0, id="call_1", name="get_order", arguments_delta='{"order_'),)),
        Chunk(tool_call_fragments=(ToolCallFragment(0, arguments_delta='id": "A'),)),
        Chunk(tool_call_fragments=(ToolCallFragment(0, arguments_delta='17"}'),)),
        Chunk(finish_reason=FinishReason.STOP, usage=UsageMetadata(prompt_token_count=20, total_token_count=35)),
    ]


def answer_chunks() -> list[Chunk]:
    """The worked example's second model turn: the answer, streamed."""
    return [
        Chunk(text_delta="Order A17 "),
        Chunk(text_delta="shipped "),
        Chunk(text_delta="Tuesday."),
        Chunk(finish_reason=FinishReason.STOP, usage=UsageMetadata(prompt_token_count=40, total_token_count=48)),
    ]


def worked_example_model() -> ScriptedLlm:
    return ScriptedLlm([scripted_turn(*worked_example_chunks()), scripted_turn(*answer_chunks())])


def question() -> Content:
    return Content(role="user", parts=(Part.from_text(QUESTION),))


def user_message(text: str) -> Content:
    return Content(role="user", parts=(Part.from_text(text),))


def get_order_function(calls: list[dict[str, Any]]) -> Callable[[str], dict[str, Any]]:
    def get_order(order_id: str) -> dict[str, Any]:
        """Look an order up by its id.

        Args:
            order_id: The order's id, like "A17".
        """
        calls.append({"order_id": order_id})
        return dict(ORDER)

    return get_order


def make_runner(model: BaseLlm, tools: Sequence[Any] = (), **agent_options: Any) -> Runner:
    agent_options.setdefault("instruction", "You answer questions about orders.")
    agent = LlmAgent("support", model, tools=tools, **agent_options)
    runner = InMemoryRunner(agent, app_name=APP)
    runner.session_service.create_session(APP, USER, session_id=SESSION).run()
    return runner


def order_runner(model: BaseLlm, **agent_options: Any) -> tuple[Runner, list[dict[str, Any]]]:
    """A :func:`make_runner` whose agent has the ``get_order`` tool, and the list of the calls the tool received."""
    calls: list[dict[str, Any]] = []
    return make_runner(model, tools=[get_order_function(calls)], **agent_options), calls


def tool_calls_turn(*calls: tuple[str | None, str, str]) -> list[LlmResponse]:
    """A model turn that only calls tools: one chunk with each ``(call id, tool name, JSON arguments)``, in order."""
    fragments = tuple(
        ToolCallFragment(index, call_id, name, arguments) for index, (call_id, name, arguments) in enumerate(calls)
    )
    return scripted_turn(Chunk(tool_call_fragments=fragments))


@dataclass
class Outcome:
    events: list[Event]
    error: Exception | None
    completed: bool


def run_collect(
    runner: Runner,
    message: Content | None = None,
    mode: StreamingMode = StreamingMode.SSE,
    *,
    max_llm_calls: int = 500,
    session_id: str = SESSION,
    timeout: float = 5.0,
) -> Outcome:
    """Subscribe to one run and wait (bounded) for its terminal event."""
    events: list[Event] = []
    errors: list[Exception] = []
    done = threading.Event()
    completed: list[bool] = []

    def on_error(error: Exception) -> None:
        errors.append(error)
        done.set()

    def on_completed() -> None:
        completed.append(True)
        done.set()

    runner.run_async(
        USER, session_id, message or question(), RunConfig(streaming_mode=mode, max_llm_calls=max_llm_calls)
    ).subscribe(events.append, on_error, on_completed)
    assert done.wait(timeout), "the run did not terminate"
    return Outcome(events, errors[0] if errors else None, bool(completed))


def history(runner: Runner, session_id: str = SESSION) -> tuple[Event, ...]:
    return runner.session_service.get_session(runner.app_name, USER, session_id).run().events


class ListLlm(BaseLlm):
    """A hand-written model that emits the given responses for every call, as they are (stream or not).

    ``error`` (if any) is emitted after the responses: it models a stream that fails midway.
    """

    def __init__(self, turns: Sequence[Sequence[LlmResponse]], *, error: Exception | None = None) -> None:
        super().__init__(model="hand-written")
        self._turns = [list(t) for t in turns]
        self._error = error
        self.requests: list[tuple[LlmRequest, bool]] = []

    def generate_content(self, llm_request: LlmRequest, stream: bool = False) -> reactivex.Observable[LlmResponse]:
        def subscribe(
            observer: rx_abc.ObserverBase[LlmResponse], scheduler: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            number = len(self.requests)
            self.requests.append((llm_request, stream))
            for response in self._turns[min(number, len(self._turns) - 1)]:
                observer.on_next(response)
            if self._error is not None:
                observer.on_error(self._error)
            else:
                observer.on_completed()
            return Disposable()

        return reactivex.create(subscribe)


def every_chunk_final(chunks: Sequence[Chunk]) -> tuple[list[LlmResponse], Exception | None]:
    """What a naive model that treats every chunk as a complete turn emits: one aggregator per chunk.

    Returns the responses emitted before the first failure, and that failure.
    """
    out: list[LlmResponse] = []
    for chunk in chunks:
        aggregator = StreamAggregator()
        aggregator.accept(chunk)
        try:
            out.append(aggregator.finish())
        except Exception as exc:
            return out, exc
    return out, None


def final_holds_last_delta(chunks: Sequence[Chunk]) -> list[LlmResponse]:
    """Correct partials, but a final whose text is only the last delta."""
    turn = scripted_turn(*chunks)
    partials, final = turn[:-1], turn[-1]
    last_delta = partials[-1].text()
    truncated = final.model_copy(
        update={"content": Content(role="model", parts=(Part.from_text(last_delta), *final.content.parts[1:]))}
        if final.content is not None
        else {}
    )
    return [*partials, truncated]


class HeldCall:
    """One model call of :class:`HeldLlm`, driven by the test."""

    def __init__(self, request: LlmRequest, stream: bool, observer: rx_abc.ObserverBase[LlmResponse]) -> None:
        self.request = request
        self.stream = stream
        self.observer = observer
        self.disposed = threading.Event()

    def emit(self, *responses: LlmResponse) -> None:
        for response in responses:
            self.observer.on_next(response)

    def complete(self) -> None:
        self.observer.on_completed()


class HeldLlm(BaseLlm):
    """A model whose calls stay open until the test emits and completes them; records dispose.

    Calls past ``held`` are answered synchronously by a :class:`~rxllm.testing.ScriptedLlm` of the ``scripted`` turns.
    """

    def __init__(self, *, held: int = 1, scripted: Sequence[Sequence[LlmResponse]] = ()) -> None:
        super().__init__(model="held")
        self._held = held
        self._scripted = ScriptedLlm(scripted, scheduler=ImmediateScheduler())
        self._lock = threading.Lock()
        self.calls: list[HeldCall] = []
        self.requests: list[tuple[LlmRequest, bool]] = []
        self.subscribed = threading.Condition(self._lock)

    def wait_for_calls(self, n: int, timeout: float = 5.0) -> bool:
        with self._lock:
            return self.subscribed.wait_for(lambda: len(self.requests) >= n, timeout)

    def generate_content(self, llm_request: LlmRequest, stream: bool = False) -> reactivex.Observable[LlmResponse]:
        def subscribe(
            observer: rx_abc.ObserverBase[LlmResponse], scheduler: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            with self._lock:
                number = len(self.requests)
                self.requests.append((llm_request, stream))
                self.subscribed.notify_all()
            if number < self._held:
                call = HeldCall(llm_request, stream, observer)
                with self._lock:
                    self.calls.append(call)
                return Disposable(call.disposed.set)
            return self._scripted.generate_content(llm_request, stream).subscribe(observer, scheduler=scheduler)

        return reactivex.create(subscribe)
