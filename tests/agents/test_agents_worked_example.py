"""The order-status worked example with a scripted model, in SSE and NONE modes, and the
persist-before-next-step rule."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable
from reactivex.scheduler import ImmediateScheduler

from rxllm import Content, FunctionCall, FunctionResponse, Part
from rxllm.agents import Event, InMemorySessionService, Session, StreamingMode
from rxllm.testing import ScriptedLlm, assert_stream_protocol, scripted_turn

from .support import (
    ANSWER,
    EXPLANATION,
    ORDER,
    QUESTION,
    SESSION,
    USER,
    answer_chunks,
    get_order_function,
    history,
    order_runner,
    question,
    run_collect,
    worked_example_chunks,
    worked_example_model,
)


def test_the_scripted_turns_follow_the_contract() -> None:
    first = assert_stream_protocol(scripted_turn(*worked_example_chunks()))
    assert first.function_calls() == [FunctionCall(id="call_1", name="get_order", args={"order_id": "A17"})]
    assert assert_stream_protocol(scripted_turn(*answer_chunks())).text() == ANSWER


def assert_worked_example_history(events: tuple[Event, ...]) -> None:
    assert len(events) == 4
    user, call, response, answer = events
    assert (user.author, user.text(), user.content is not None and user.content.role) == ("user", QUESTION, "user")
    assert call.author == "support"
    assert call.text() == EXPLANATION
    assert call.function_calls() == [FunctionCall(id="call_1", name="get_order", args={"order_id": "A17"})]
    assert not call.is_final_response()
    assert response.function_responses() == [FunctionResponse(id="call_1", name="get_order", response=ORDER)]
    assert response.content is not None and response.content.role == "user"
    assert answer.text() == ANSWER
    assert answer.function_calls() == []
    assert answer.is_final_response()
    assert all(not e.partial for e in events)
    assert len({e.id for e in events}) == 4
    assert len({e.invocation_id for e in events}) == 1


@pytest.mark.parametrize("mode", [StreamingMode.SSE, StreamingMode.NONE])
def test_worked_example_history(mode: StreamingMode) -> None:
    model = worked_example_model()
    runner, calls = order_runner(model)

    outcome = run_collect(runner, mode=mode)

    assert outcome.error is None and outcome.completed
    assert calls == [{"order_id": "A17"}]  # once, with its whole arguments
    assert_worked_example_history(history(runner))
    # two model calls, with the stream flag of the mode
    assert [stream for _, stream in model.requests] == [mode is StreamingMode.SSE] * 2
    first, second = (request for request, _ in model.requests)
    assert [c.text() for c in first.contents] == [QUESTION]
    assert second.contents == tuple(e.content for e in history(runner)[:3])
    for request in (first, second):
        assert request.config.system_instruction is not None
        assert request.config.system_instruction.text() == (
            'You answer questions about orders.\n\nYou are an agent. Your internal name is "support".'
        )
        declarations = request.config.function_declarations()
        assert [d.name for d in declarations] == ["get_order"]
        assert declarations[0].parameters is not None
        assert declarations[0].parameters["required"] == ["order_id"]


def test_sse_subscriber_sees_partials_then_the_stored_events() -> None:
    runner, _ = order_runner(worked_example_model())

    outcome = run_collect(runner, mode=StreamingMode.SSE)

    seen = [(e.partial, e.text(), len(e.function_calls()), len(e.function_responses())) for e in outcome.events]
    assert seen == [
        (True, "Let me look ", 0, 0),
        (True, "that up.", 0, 0),
        (None, EXPLANATION, 1, 0),
        (None, "", 0, 1),
        (True, "Order A17 ", 0, 0),
        (True, "shipped ", 0, 0),
        (True, "Tuesday.", 0, 0),
        (None, ANSWER, 0, 0),
    ]
    stored = history(runner)
    assert [e for e in outcome.events if not e.partial] == list(stored[1:])  # the stored events are what was emitted
    assert len({e.id for e in outcome.events}) == len(outcome.events)  # a fresh id per emitted event
    assert outcome.events[-1].usage_metadata is not None and outcome.events[-1].usage_metadata.total_token_count == 48


def test_none_mode_emits_no_partials() -> None:
    runner, _ = order_runner(worked_example_model())
    outcome = run_collect(runner, mode=StreamingMode.NONE)
    assert [e.partial for e in outcome.events] == [None, None, None]


def test_the_next_turn_sees_the_whole_history() -> None:
    model = ScriptedLlm(
        [scripted_turn(*worked_example_chunks()), scripted_turn(*answer_chunks()), scripted_turn(*answer_chunks())]
    )
    runner, _ = order_runner(model)
    run_collect(runner)
    outcome = run_collect(runner, Content(role="user", parts=(Part.from_text("Thanks!"),)))
    assert outcome.completed
    third_request = model.requests[2][0]
    assert [c.role for c in third_request.contents] == ["user", "model", "user", "model", "user"]
    assert len(history(runner)) == 6


class HeldStoreService(InMemorySessionService):
    """Stores non-partial events only when the test releases them (an asynchronous store)."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: list[tuple[Session, Event, rx_abc.ObserverBase[Event]]] = []
        self.arrived = threading.Semaphore(0)

    def append_event(self, session: Session, event: Event) -> reactivex.Observable[Event]:
        if event.partial or event.author == "user":
            return super().append_event(session, event)

        def subscribe(
            observer: rx_abc.ObserverBase[Event], scheduler: rx_abc.SchedulerBase | None = None
        ) -> Disposable:
            self.pending.append((session, event, observer))
            self.arrived.release()
            return Disposable()

        return reactivex.create(subscribe)

    def release_next(self) -> Event:
        assert self.arrived.acquire(timeout=5), "no store is waiting"
        session, event, observer = self.pending.pop(0)
        stored = super().append_event(session, event).run()
        observer.on_next(stored)
        observer.on_completed()
        return stored


def test_the_next_request_is_built_only_after_the_store_completed() -> None:
    from rxllm.agents import LlmAgent, Runner

    calls: list[dict[str, Any]] = []
    model = worked_example_model()
    service = HeldStoreService()
    agent = LlmAgent("support", model, tools=[get_order_function(calls)])
    # Tools inline (not on the tool pool): this test steps through the stores one by one.
    runner = Runner(agent, "shop", service, tool_scheduler=ImmediateScheduler())
    service.create_session("shop", USER, session_id=SESSION).run()
    events: list[Event] = []
    done = threading.Event()
    runner.run_async(USER, SESSION, question()).subscribe(events.append, lambda e: done.set(), done.set)

    # The model's final event waits for its store: the tool has not run, the event is not emitted.
    assert len(model.requests) == 1 and calls == [] and events == []
    service.release_next()
    assert calls == [{"order_id": "A17"}]
    assert len(model.requests) == 1  # the function-response event is not stored yet: no second request
    assert [len(e.function_calls()) for e in events] == [1]
    service.release_next()
    assert len(model.requests) == 2
    assert len(model.requests[1][0].contents) == 3  # built from the stored history, response included
    service.release_next()
    assert done.wait(5)
    assert [e.text() for e in events] == [EXPLANATION, "", ANSWER]
    assert len(history(runner)) == 4
