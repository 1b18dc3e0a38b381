"""Done when: a blocking subscriber trips BufferOverflowError with a small buffer; with the default buffer a
normal consumer never does. Plus: the relay's grammar, and the natural backpressure of a synchronous subscriber."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from rxllm import BufferOverflowError, Chunk, ConfigurationError, FinishReason, ToolCallFragment
from rxllm.service import DEFAULT_BUFFER_SIZE, AiService
from rxllm.service._relay import BoundedRelay
from rxllm.testing import Hold, ScriptedLlm

from .support import (
    QUESTION,
    WAIT,
    BlockAtFirst,
    GatedLlm,
    JoinableScheduler,
    OrderTool,
    Recorder,
    openai_server,
    sse_round,
    text,
    tool_args,
    tool_start,
)

FRAGMENTS = 50


def block_at_first_tool_event() -> BlockAtFirst:
    """A subscriber that blocks inside on_next of the first BeforeToolExecutionEvent: it is called there on
    the tool's thread, while the model keeps streaming on its own."""
    return BlockAtFirst(lambda event: event.kind == "before_tool_execution")


def assert_overflowed(recorder: Recorder, buffer_size: int) -> None:
    recorder.wait()
    assert isinstance(recorder.error, BufferOverflowError)
    assert f"more than {buffer_size} events behind" in str(recorder.error)
    assert not recorder.completed
    # Nothing after the event the subscriber blocked in: the overflow error comes next, and only it.
    assert recorder.kinds()[-1] == "before_tool_execution"
    assert "final_response" not in recorder.kinds()


def test_sse_blocking_subscriber_trips_buffer_overflow_and_the_connection_is_closed() -> None:
    subscriber = block_at_first_tool_event()
    never = threading.Event()
    orders = OrderTool()
    tools = JoinableScheduler()
    round_one = sse_round(
        tool_start(0, "call_a", "get_order", '{"order_id": "A17"}'),
        tool_start(1, "call_b", "get_order", '{"order_id"'),  # call_a complete: its tool is scheduled
        Hold(subscriber.blocked, timeout=WAIT),  # go on once the subscriber blocks in call_a's tool event
        *(tool_args(1, " ") for _ in range(FRAGMENTS)),  # queued events, more than the buffer holds
        Hold(never, timeout=WAIT),
        tool_args(1, ': "B2"}'),
        finish="tool_calls",
    )
    with openai_server(round_one) as (server, model):
        service = AiService(model, tools=[orders.get_order], streaming_buffer_size=4, tool_scheduler=tools)
        recorder = Recorder(subscriber)
        service.stream(QUESTION).subscribe(recorder)

        connection = server.wait_for_connection(1, WAIT)
        assert connection is not None
        assert connection.wait_closed_by_client(WAIT), "the overflow did not cancel the model call"
        assert not recorder.done.is_set()  # the error waits until the blocked on_next returns
        subscriber.latch.set()

        assert_overflowed(recorder, 4)
        tools.join()
        assert orders.calls == []  # the stream failed before the tool began; nothing else started
        assert len(server.requests) == 1


def test_scripted_blocking_subscriber_trips_buffer_overflow_and_the_model_is_cancelled() -> None:
    subscriber = block_at_first_tool_event()
    never = threading.Event()
    orders = OrderTool()
    tools = JoinableScheduler()
    turn: list[Chunk | threading.Event | Exception] = [
        Chunk(tool_call_fragments=(ToolCallFragment(0, "call_a", "get_order", '{"order_id": "A17"}'),)),
        Chunk(tool_call_fragments=(ToolCallFragment(1, "call_b", "get_order", '{"order_id"'),)),
        subscriber.blocked,
        *(Chunk(text_delta=".") for _ in range(FRAGMENTS)),
        never,
        Chunk(tool_call_fragments=(ToolCallFragment(1, arguments_delta=': "B2"}'),), finish_reason=FinishReason.STOP),
    ]
    model = GatedLlm([turn])
    service = AiService(model, tools=[orders.get_order], streaming_buffer_size=4, tool_scheduler=tools)
    recorder = Recorder(subscriber)
    service.stream(QUESTION).subscribe(recorder)

    assert model.disposed.wait(WAIT), "the overflow did not cancel the model call"
    subscriber.latch.set()

    assert_overflowed(recorder, 4)
    model.join()
    tools.join()
    assert orders.calls == []
    assert len(model.requests) == 1


def many_deltas_turn(n: int) -> list[Chunk]:
    return [
        Chunk(tool_call_fragments=(ToolCallFragment(0, "call_a", "get_order", '{"order_id": "A17"}'),)),
        Chunk(tool_call_fragments=(ToolCallFragment(1, "call_b", "get_order", '{"order_id": "B2"}'),)),
        *(Chunk(text_delta=f"{i % 10}") for i in range(n)),
        Chunk(finish_reason=FinishReason.STOP),
    ]


def test_scripted_default_buffer_never_trips_for_a_normal_consumer() -> None:
    n = DEFAULT_BUFFER_SIZE + 4000  # more events than the buffer holds, while tools report from other threads
    model = GatedLlm([many_deltas_turn(n), [Chunk(text_delta="done"), Chunk(finish_reason=FinishReason.STOP)]])
    orders = OrderTool()
    recorder = Recorder()
    AiService(model, tools=[orders.get_order]).stream(QUESTION).subscribe(recorder)
    recorder.wait()
    assert recorder.completed, recorder.error
    partials = [e.text for e in recorder.events if e.kind == "partial_response"]
    assert len(partials) == n + 1
    assert "".join(partials[:n]) == "".join(f"{i % 10}" for i in range(n))  # nothing dropped, in order
    assert sorted(orders.calls) == ["A17", "B2"]


def test_sse_default_buffer_never_trips_for_a_normal_consumer() -> None:
    n = DEFAULT_BUFFER_SIZE + 4000
    round_one = sse_round(
        tool_start(0, "call_a", "get_order", '{"order_id": "A17"}'),
        tool_start(1, "call_b", "get_order", '{"order_id": "B2"}'),
        b"".join(text(f"{i % 10}") for i in range(n)),  # one write: the client reads them as fast as it can
        finish="tool_calls",
    )
    orders = OrderTool()
    with openai_server(round_one, sse_round(text("done"))) as (_, model):
        recorder = Recorder()
        AiService(model, tools=[orders.get_order]).stream(QUESTION).subscribe(recorder)
        recorder.wait()
        assert recorder.completed, recorder.error
        partials = [e.text for e in recorder.events if e.kind == "partial_response"]
        assert "".join(partials) == "".join(f"{i % 10}" for i in range(n)) + "done"
        assert sorted(orders.calls) == ["A17", "B2"]


def test_sse_subscriber_blocking_on_the_models_thread_is_backpressure_not_overflow() -> None:
    # No thread crossing: the I/O thread itself is inside on_next, so it reads nothing more meanwhile.
    subscriber = BlockAtFirst(lambda event: event.kind == "partial_response")
    with openai_server(sse_round(*(text(f"{i},") for i in range(200)))) as (_, model):
        recorder = Recorder(subscriber)
        AiService(model, streaming_buffer_size=1).stream(QUESTION).subscribe(recorder)
        assert subscriber.blocked.wait(WAIT)
        assert recorder.kinds() == ["partial_response"]
        subscriber.latch.set()
        recorder.wait()
        assert recorder.completed, recorder.error
        assert recorder.events[-1].response.text() == "".join(f"{i}," for i in range(200))


def test_buffer_size_must_be_positive() -> None:
    for size in (0, -1, True, 2.5):
        with pytest.raises(ConfigurationError, match="streaming_buffer_size"):
            AiService(ScriptedLlm([]), streaming_buffer_size=size)  # type: ignore[arg-type]


# -- the relay on its own ----------------------------------------------------------------------------------


def test_relay_serializes_many_threads_without_loss_and_keeps_each_threads_order() -> None:
    recorder = Recorder()
    stopped: list[bool] = []
    relay: BoundedRelay[tuple[int, int]] = BoundedRelay(recorder, 1_000_000, lambda: stopped.append(True))
    start = threading.Barrier(8)

    def produce(worker: int) -> None:
        start.wait(WAIT)
        for i in range(2000):
            relay.on_next((worker, i))

    threads = [threading.Thread(target=produce, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    relay.on_completed()
    recorder.wait()
    assert recorder.violations == [] and stopped == []
    assert len(recorder.events) == 8 * 2000
    for worker in range(8):
        assert [i for w, i in recorder.events if w == worker] == list(range(2000))


def block_in_first(relay: BoundedRelay[str], subscriber: BlockAtFirst) -> threading.Thread:
    """Offer ``"first"`` on a thread of its own; return that thread once it blocked in the subscriber's on_next."""
    blocker = threading.Thread(target=relay.on_next, args=("first",))
    blocker.start()
    assert subscriber.blocked.wait(WAIT)
    return blocker


def test_relay_overflow_error_jumps_the_queue_and_nothing_follows_it() -> None:
    stopped = threading.Event()
    subscriber = BlockAtFirst(lambda value: value == "first")
    recorder = Recorder(subscriber)
    relay: BoundedRelay[str] = BoundedRelay(recorder, 2, stopped.set)
    blocker = block_in_first(relay, subscriber)
    relay.on_next("queued 1")
    relay.on_next("queued 2")
    assert not stopped.is_set()
    relay.on_next("one too many")  # the queue is full: overflow
    assert stopped.is_set()
    relay.on_next("ignored")
    relay.on_completed()  # ignored too: the stream already failed
    subscriber.latch.set()
    blocker.join(WAIT)
    recorder.wait()
    assert recorder.events == ["first"]
    assert isinstance(recorder.error, BufferOverflowError)


def test_relay_cancel_delivers_nothing_more_not_even_a_queued_terminal() -> None:
    subscriber = BlockAtFirst(lambda value: value == "first")
    recorder = Recorder(subscriber)
    relay: BoundedRelay[str] = BoundedRelay(recorder, 8, lambda: None)
    blocker = block_in_first(relay, subscriber)
    relay.on_next("queued")
    relay.on_completed()
    relay.cancel()
    subscriber.latch.set()
    blocker.join(WAIT)
    assert recorder.events == ["first"]
    assert not recorder.done.is_set()


def test_relay_a_subscriber_that_raises_stops_the_producers() -> None:
    stopped = threading.Event()

    class Boom(Exception):
        pass

    def explode(value: Any) -> None:
        raise Boom()

    recorder = Recorder(explode)
    relay: BoundedRelay[str] = BoundedRelay(recorder, 8, stopped.set)
    with pytest.raises(Boom):
        relay.on_next("x")
    assert stopped.is_set()
    relay.on_next("y")
    relay.on_completed()
    assert recorder.events == ["x"] and not recorder.done.is_set()
