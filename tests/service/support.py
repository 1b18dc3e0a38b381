"""Helpers for the service tests: OpenAI SSE bodies, a recording observer, a joinable tool scheduler."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable
from reactivex.scheduler import NewThreadScheduler

from rxllm import (
    BaseLlm,
    Chunk,
    FinishReason,
    HttpTransport,
    LimitExceededError,
    LlmRequest,
    LlmResponse,
    ModelStreamEvent,
    ResponseCompleteEvent,
    RetryPolicy,
    StreamAggregator,
    TextDeltaEvent,
    ThoughtDeltaEvent,
    ToolCallCompleteEvent,
    ToolCallDeltaEvent,
    ToolCallFragment,
    UnsupportedOperationError,
    UsageMetadata,
)
from rxllm.providers.openai import OpenAiChatModel
from rxllm.service import AiServiceStreamingEvent
from rxllm.testing import Delay, Disconnect, Hold, ScriptedLlm, Step, StubResponse, StubServer, scripted_turn

WAIT = 10.0
"""Upper bound of every wait (a failing test fails instead of hanging); never a synchronisation sleep."""

QUESTION = "Where are orders A17 and B2?"
ANSWER = "A17 shipped Tuesday; B2 ships Friday."
ORDERS = {"A17": "shipped Tuesday", "B2": "ships Friday"}


# -- OpenAI chat-completions SSE bodies ------------------------------------------------------------


def _data(payload: object) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


def chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> bytes:
    """One ``chat.completion.chunk`` event."""
    payload: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        payload["usage"] = usage
    return _data(payload)


def role() -> bytes:
    return chunk({"role": "assistant", "content": ""})


def text(piece: str) -> bytes:
    return chunk({"content": piece})


def tool_start(index: int, call_id: str, name: str, arguments: str = "") -> bytes:
    """The first fragment of a tool call: id, name, and maybe a first piece of arguments."""
    call = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    return chunk({"tool_calls": [call]})


def tool_args(index: int, arguments: str) -> bytes:
    return chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments}}]})


def end(reason: str = "stop") -> list[bytes]:
    """The finish chunk (with usage) and ``[DONE]``."""
    usage = {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}
    return [chunk({}, reason, usage), b"data: [DONE]\n\n"]


def sse(*steps: Step | Sequence[bytes]) -> StubResponse:
    """A chunked event-stream response; bytes steps are sent one HTTP chunk each, other steps play in place."""
    body: list[Step] = []
    for step in steps:
        if isinstance(step, bytes | Delay | Hold | Disconnect):
            body.append(step)
        else:
            body.extend(step)
    return StubResponse(body=body)


def sse_round(*steps: Step, finish: str = "stop") -> StubResponse:
    """One whole model round over the wire: the role chunk, ``steps``, the finish chunk (with usage) and ``[DONE]``."""
    return sse(role(), *steps, end(finish))


def tool_round(*extra: Step) -> StubResponse:
    """Round one over the wire: a bit of text, then two tool calls; ``extra`` steps come right after
    the first call became complete (the second call began), before the rest of the round."""
    return sse_round(
        text("Let me check "),
        text("both."),
        tool_start(0, "call_a", "get_order", '{"order_'),
        tool_args(0, 'id": "A17"}'),
        tool_start(1, "call_b", "get_order", '{"order_id"'),  # call_a is complete now
        *extra,
        tool_args(1, ': "B2"}'),
        finish="tool_calls",
    )


def answer_round() -> StubResponse:
    """Round two over the wire: the answer."""
    return sse_round(text("A17 shipped Tuesday; "), text("B2 ships Friday."))


def two_rounds(*extra: Step) -> tuple[StubResponse, StubResponse]:
    """The two rounds of the turn over the wire (``extra`` as in :func:`tool_round`)."""
    return tool_round(*extra), answer_round()


class CountingLlm(BaseLlm):
    """Delegates to ``inner`` and counts the model calls started (a call counts when it is subscribed)."""

    def __init__(self, inner: BaseLlm) -> None:
        super().__init__(model=inner.model)
        self.inner = inner
        self.calls = 0

    def generate_content(self, llm_request: LlmRequest, stream: bool = False) -> reactivex.Observable[LlmResponse]:
        return self.inner.generate_content(llm_request, stream)

    def stream_events(self, llm_request: LlmRequest) -> reactivex.Observable[ModelStreamEvent]:
        def subscribe(
            observer: rx_abc.ObserverBase[ModelStreamEvent], scheduler: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            self.calls += 1
            return self.inner.stream_events(llm_request).subscribe(observer, scheduler=scheduler)

        return reactivex.create(subscribe)


@contextmanager
def openai_model(server: StubServer) -> Iterator[OpenAiChatModel]:
    """An OpenAI model against the stub server, with its own transport (closed afterwards) and no retries."""
    transport = HttpTransport(max_concurrent_streams=4, connect_timeout=5.0, read_timeout=WAIT)
    try:
        yield OpenAiChatModel(
            "gpt-test", base_url=f"{server.url}/v1", transport=transport, retry_policy=RetryPolicy.never()
        )
    finally:
        transport.close()


@contextmanager
def openai_server(*responses: StubResponse) -> Iterator[tuple[StubServer, OpenAiChatModel]]:
    """A stub server playing ``responses`` and an OpenAI model pointed at it."""
    with StubServer(responses) as server, openai_model(server) as model:
        yield server, model


# -- scripted turns ----------------------------------------------------------------------------------


def tool_round_chunks() -> list[Chunk]:
    """Round one, scripted: a bit of text, then two get_order calls split across chunks."""
    return [
        Chunk(text_delta="Let me check "),
        Chunk(text_delta="both."),
        Chunk(tool_call_fragments=(ToolCallFragment(0, "call_a", "get_order", '{"order_'),)),
        Chunk(tool_call_fragments=(ToolCallFragment(0, arguments_delta='id": "A17"}'),)),
        Chunk(tool_call_fragments=(ToolCallFragment(1, "call_b", "get_order", '{"order_id": "B2"}'),)),
        Chunk(finish_reason=FinishReason.STOP, usage=UsageMetadata(total_token_count=30)),
    ]


def answer_chunks() -> list[Chunk]:
    return [
        Chunk(text_delta="A17 shipped Tuesday; "),
        Chunk(text_delta="B2 ships Friday."),
        Chunk(finish_reason=FinishReason.STOP, usage=UsageMetadata(total_token_count=50)),
    ]


def two_round_model() -> ScriptedLlm:
    """The two rounds of the turn, scripted: round one calls get_order for A17 and B2, round two answers."""
    return ScriptedLlm([scripted_turn(*tool_round_chunks()), scripted_turn(*answer_chunks())])


# -- tools ---------------------------------------------------------------------------------------------


class OrderTool:
    """A ``get_order`` tool (pass the bound method ``.get_order``) that records each call and may block on a gate."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.gate = gate
        self.calls: list[str] = []
        self.threads: list[str] = []
        self.started = threading.Event()
        self.finished = threading.Event()
        self.on_start: Callable[[str], None] | None = None
        self._lock = threading.Lock()

    def get_order(self, order_id: str) -> dict[str, str]:
        """Look an order up by its id.

        Args:
            order_id: the order's id, like "A17".
        """
        with self._lock:
            self.calls.append(order_id)
            self.threads.append(threading.current_thread().name)
        if self.on_start is not None:
            self.on_start(order_id)
        self.started.set()
        if self.gate is not None:
            assert self.gate.wait(WAIT), "the test never opened the tool's gate"
        self.finished.set()
        return {"order_id": order_id, "status": ORDERS.get(order_id, "unknown")}


# -- observing -------------------------------------------------------------------------------------------


class BlockAtFirst:
    """A subscriber's ``on_event`` that blocks (on a latch) inside ``on_next`` of the first value matching
    ``predicate``, until the test sets :attr:`latch`; :attr:`blocked` is set once it blocks."""

    def __init__(self, predicate: Callable[[Any], bool]) -> None:
        self.predicate = predicate
        self.blocked = threading.Event()
        self.latch = threading.Event()

    def __call__(self, value: Any) -> None:
        if not self.blocked.is_set() and self.predicate(value):
            self.blocked.set()
            assert self.latch.wait(WAIT), "the test never released the blocked subscriber"


class Recorder(rx_abc.ObserverBase[Any]):
    """Records a stream's signals and checks the Rx grammar: never two callbacks at once, nothing after a
    terminal signal."""

    def __init__(self, on_event: Callable[[Any], None] | None = None) -> None:
        self.events: list[Any] = []
        self.error: Exception | None = None
        self.completed = False
        self.done = threading.Event()
        self.violations: list[str] = []
        self.threads: list[str] = []
        self._on_event = on_event
        self._lock = threading.Lock()
        self._inside = 0

    def _enter(self, what: str) -> None:
        with self._lock:
            self._inside += 1
            if self._inside > 1:
                self.violations.append(f"concurrent {what}")
            if self.done.is_set():
                self.violations.append(f"{what} after the terminal signal")
            self.threads.append(threading.current_thread().name)

    def _leave(self) -> None:
        with self._lock:
            self._inside -= 1

    def on_next(self, value: Any) -> None:
        self._enter("on_next")
        try:
            with self._lock:
                self.events.append(value)
            if self._on_event is not None:
                self._on_event(value)
        finally:
            self._leave()

    def on_error(self, error: Exception) -> None:
        self._enter("on_error")
        self.error = error
        self._leave()
        self.done.set()

    def on_completed(self) -> None:
        self._enter("on_completed")
        self.completed = True
        self._leave()
        self.done.set()

    def snapshot(self) -> list[Any]:
        with self._lock:
            return list(self.events)

    def wait(self) -> Recorder:
        assert self.done.wait(WAIT), f"the stream did not end; got {kinds(self.snapshot())}"
        assert self.violations == []
        return self

    def kinds(self) -> list[str]:
        return kinds(self.snapshot())


def kinds(events: Sequence[AiServiceStreamingEvent]) -> list[str]:
    return [event.kind for event in events]


def index_of(events: Sequence[AiServiceStreamingEvent], predicate: Callable[[Any], bool]) -> int:
    for position, event in enumerate(events):
        if predicate(event):
            return position
    raise AssertionError(f"no such event in {kinds(events)}")


class JoinableScheduler(NewThreadScheduler):
    """A new thread per scheduled action, each remembered so a test can wait until all work is over."""

    def __init__(self) -> None:
        self.started: list[threading.Thread] = []
        self._lock = threading.Lock()

        def factory(target: Callable[[], None]) -> threading.Thread:
            thread = threading.Thread(target=target, daemon=True, name=f"test-tool-{len(self.started)}")
            with self._lock:
                self.started.append(thread)
            return thread

        super().__init__(factory)

    def join(self) -> None:
        """Wait until every thread started so far (and any they started) has finished."""
        seen = 0
        while True:
            with self._lock:
                threads = list(self.started)
            if len(threads) == seen and not any(t.is_alive() for t in threads):
                return
            seen = len(threads)
            for thread in threads:
                thread.join(WAIT)
                assert not thread.is_alive(), "a tool thread did not finish"


# -- a scripted model that streams like a provider ---------------------------------------------------


Gate = threading.Event
"""In a :class:`GatedLlm` turn: wait here until the event is set (or the call is disposed)."""


class GatedLlm(BaseLlm):
    """Scripted turns of chunks, streamed the way a provider-backed model does it.

    Each call runs on its own thread (like an I/O thread), reports every tool call the moment it is
    complete (the real :class:`~rxllm.StreamAggregator` decides), and waits at each :data:`Gate` in the
    script. Disposing stops it at the next chunk or gate and sets :attr:`disposed`.
    """

    def __init__(self, turns: Sequence[Sequence[Chunk | Gate | Exception]]) -> None:
        super().__init__(model="gated")
        self._turns = [list(turn) for turn in turns]
        self._lock = threading.Lock()
        self.requests: list[LlmRequest] = []
        self.disposed = threading.Event()
        self.threads: list[threading.Thread] = []

    def generate_content(self, llm_request: LlmRequest, stream: bool = False) -> reactivex.Observable[LlmResponse]:
        raise UnsupportedOperationError("GatedLlm only streams events")

    def stream_events(self, llm_request: LlmRequest) -> reactivex.Observable[ModelStreamEvent]:
        def subscribe(
            observer: rx_abc.ObserverBase[ModelStreamEvent], scheduler: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            with self._lock:
                number = len(self.requests)
                self.requests.append(llm_request)
            cancelled = threading.Event()

            def run() -> None:
                if number >= len(self._turns):
                    observer.on_error(LimitExceededError(f"GatedLlm has no turn #{number + 1}"))
                    return
                aggregator = StreamAggregator()
                for item in self._turns[number]:
                    if isinstance(item, threading.Event):
                        while not item.wait(0.005):  # a gate, woken by cancel within a tick
                            if cancelled.is_set():
                                return
                        continue
                    if cancelled.is_set():
                        return
                    if isinstance(item, Exception):
                        observer.on_error(item)
                        return
                    aggregator.accept(item)
                    if item.thought_delta:
                        observer.on_next(ThoughtDeltaEvent(item.thought_delta))
                    if item.text_delta:
                        observer.on_next(TextDeltaEvent(item.text_delta))
                    for f in item.tool_call_fragments:
                        observer.on_next(ToolCallDeltaEvent(f.index, f.id, f.name, f.arguments_delta))
                    for index, call in aggregator.take_completed_calls():
                        observer.on_next(ToolCallCompleteEvent(index, call))
                final = aggregator.finish()
                for index, call in aggregator.take_completed_calls(all_remaining=True):
                    observer.on_next(ToolCallCompleteEvent(index, call))
                observer.on_next(ResponseCompleteEvent(final))
                observer.on_completed()

            thread = threading.Thread(target=run, daemon=True, name=f"gated-model-{number}")
            with self._lock:
                self.threads.append(thread)
            thread.start()

            def dispose() -> None:
                cancelled.set()
                self.disposed.set()

            return Disposable(dispose)

        return reactivex.create(subscribe)

    def join(self) -> None:
        """Wait until every call's thread has finished (so nothing more can be emitted)."""
        with self._lock:
            threads = list(self.threads)
        for thread in threads:
            thread.join(WAIT)
            assert not thread.is_alive(), "a GatedLlm call did not finish"
