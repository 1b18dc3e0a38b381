"""Done when: cancel mid-round (connection closed, nothing after dispose, a running tool finishes and its
result is dropped, no second round), and cancel-then-resubscribe is a fresh, complete interaction."""

from __future__ import annotations

import threading
from typing import Any

import reactivex

from rxllm.service import AiService, AiServiceStreamingEvent, RetrievedContentsEvent
from rxllm.testing import Hold, StubResponse

from .support import (
    ANSWER,
    QUESTION,
    WAIT,
    CountingLlm,
    GatedLlm,
    JoinableScheduler,
    OrderTool,
    Recorder,
    answer_chunks,
    openai_server,
    tool_round_chunks,
    two_round_model,
    two_rounds,
)


class GatedRetriever:
    """A retriever whose first call blocks until the test opens the gate."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.started = threading.Event()
        self.calls = 0

    def __call__(self, query: str) -> list[str]:
        self.calls += 1
        if self.calls == 1:
            self.started.set()
            assert self.gate.wait(WAIT)
        return ["Orders ship from Berlin."]


def cancel_during_retrieval(
    stream: reactivex.Observable[AiServiceStreamingEvent], retriever: GatedRetriever, tools: JoinableScheduler
) -> None:
    """Subscribe, dispose while the retriever runs, let it finish: its result is dropped, nothing is emitted."""
    first = Recorder()
    subscription = stream.subscribe(first)
    assert retriever.started.wait(WAIT)
    subscription.dispose()
    retriever.gate.set()  # the retriever finishes; its result is dropped
    tools.join()
    assert first.snapshot() == [] and not first.done.is_set()


def assert_complete_turn(recorder: Recorder, *, retrieved: bool) -> None:
    recorder.wait()
    assert recorder.completed, recorder.error
    kinds = recorder.kinds()
    assert (kinds[0] == "retrieved_contents") is retrieved
    assert kinds.count("before_tool_execution") == kinds.count("after_tool_execution") == 2
    assert kinds.count("intermediate_response") == 1 and kinds.count("final_response") == 1
    assert kinds[-1] == "final_response" and recorder.events[-1].response.text() == ANSWER


# -- cancel mid-round ----------------------------------------------------------------------------------


def test_sse_cancel_mid_round_closes_the_connection_and_drops_the_running_tools_result() -> None:
    tool_gate = threading.Event()
    orders = OrderTool(gate=tool_gate)
    tools = JoinableScheduler()
    never = threading.Event()
    with openai_server(*two_rounds(Hold(never, timeout=WAIT))) as (server, model):
        counting = CountingLlm(model)
        service = AiService(counting, tools=[orders.get_order], tool_scheduler=tools)
        recorder = Recorder()
        subscription = service.stream(QUESTION).subscribe(recorder)
        assert orders.started.wait(WAIT)  # call_a's tool runs; the server holds the rest of the round
        seen = recorder.snapshot()
        assert [e.kind for e in seen][-1] == "before_tool_execution"

        subscription.dispose()

        connection = server.connections[0]
        assert connection.wait_closed_by_client(WAIT), "disposing did not close the model's connection"
        tool_gate.set()  # the running tool finishes...
        assert orders.finished.wait(WAIT)
        tools.join()  # ...and everything that followed it on its thread is over
        assert recorder.snapshot() == seen  # no event after dispose: not its result, not a final
        assert not recorder.done.is_set()  # no terminal signal either
        assert orders.calls == ["A17"]
        assert counting.calls == 1  # no second round
        assert len(server.requests) == 1


def test_scripted_cancel_mid_round_stops_the_model_and_drops_the_running_tools_result() -> None:
    tool_gate = threading.Event()
    orders = OrderTool(gate=tool_gate)
    tools = JoinableScheduler()
    never = threading.Event()
    chunks = tool_round_chunks()
    model = GatedLlm([[*chunks[:5], never, *chunks[5:]], answer_chunks()])
    service = AiService(model, tools=[orders.get_order], tool_scheduler=tools)
    recorder = Recorder()
    subscription = service.stream(QUESTION).subscribe(recorder)
    assert orders.started.wait(WAIT)
    seen = recorder.snapshot()

    subscription.dispose()

    assert model.disposed.wait(WAIT)
    model.join()  # the model's thread is gone: it cannot emit anything more
    tool_gate.set()
    assert orders.finished.wait(WAIT)
    tools.join()
    assert recorder.snapshot() == seen
    assert "after_tool_execution" not in recorder.kinds()
    assert not recorder.done.is_set()
    assert orders.calls == ["A17"]
    assert len(model.requests) == 1


def test_dispose_from_inside_on_next_stops_at_once() -> None:
    orders = OrderTool()
    tools = JoinableScheduler()
    model_gate = threading.Event()
    model = GatedLlm([[model_gate, *tool_round_chunks()], answer_chunks()])
    service = AiService(model, tools=[orders.get_order], tool_scheduler=tools)
    subscription: list[Any] = []
    disposed = threading.Event()

    def dispose_at_first_partial(event: Any) -> None:
        if event.kind == "partial_response" and not disposed.is_set():
            disposed.set()
            subscription[0].dispose()

    recorder = Recorder(dispose_at_first_partial)
    subscription.append(service.stream(QUESTION).subscribe(recorder))
    model_gate.set()  # the model streams only once the subscription is known
    assert disposed.wait(WAIT)
    model.join()
    tools.join()
    assert recorder.kinds() == ["partial_response"]
    assert orders.calls == []
    assert not recorder.done.is_set()


# -- cancel before subscribe-time work finished, then resubscribe ----------------------------------------


def test_scripted_cancel_during_retrieval_then_resubscribe_is_a_fresh_complete_interaction() -> None:
    retriever = GatedRetriever()
    orders = OrderTool()
    tools = JoinableScheduler()
    model = two_round_model()
    service = AiService(model, tools=[orders.get_order], retriever=retriever, tool_scheduler=tools)
    stream = service.stream(QUESTION)

    cancel_during_retrieval(stream, retriever, tools)
    assert model.requests == []  # the model was never called

    second = Recorder()
    stream.subscribe(second)
    assert_complete_turn(second, retrieved=True)
    assert second.events[0] == RetrievedContentsEvent(("Orders ship from Berlin.",))
    assert sorted(orders.calls) == ["A17", "B2"]
    assert len(model.requests) == 2
    assert retriever.calls == 2


def test_sse_cancel_during_retrieval_then_resubscribe_is_a_fresh_complete_interaction() -> None:
    retriever = GatedRetriever()
    orders = OrderTool()
    tools = JoinableScheduler()
    with openai_server(*two_rounds()) as (server, model):
        counting = CountingLlm(model)
        service = AiService(counting, tools=[orders.get_order], retriever=retriever, tool_scheduler=tools)
        stream = service.stream(QUESTION)

        cancel_during_retrieval(stream, retriever, tools)
        assert counting.calls == 0 and server.requests == []

        second = Recorder()
        stream.subscribe(second)
        assert_complete_turn(second, retrieved=True)
        assert sorted(orders.calls) == ["A17", "B2"]
        assert counting.calls == 2 and len(server.requests) == 2


def test_sse_cancel_while_waiting_for_headers_then_resubscribe_is_a_fresh_complete_interaction() -> None:
    orders = OrderTool()
    never = threading.Event()
    stalled = StubResponse(before_headers=[Hold(never, timeout=WAIT)], body=[b"data: [DONE]\n\n"])
    with openai_server(stalled, *two_rounds()) as (server, model):
        service = AiService(model, tools=[orders.get_order])
        stream = service.stream(QUESTION)

        first = Recorder()
        subscription = stream.subscribe(first)
        assert server.wait_for_requests(1, WAIT)  # the request is out; no headers yet
        subscription.dispose()
        assert server.connections[0].wait_closed_by_client(WAIT)
        assert first.snapshot() == [] and not first.done.is_set()

        second = Recorder()
        stream.subscribe(second)
        assert_complete_turn(second, retrieved=False)
        assert sorted(orders.calls) == ["A17", "B2"]
        assert len(server.requests) == 3
        assert first.snapshot() == [] and not first.done.is_set()
