"""The Runner: disposal stops the run, runs on one session do not interleave, a missing session fails."""

from __future__ import annotations

import threading
from typing import Any

import reactivex
from reactivex import abc as rx_abc
from reactivex import operators as ops
from reactivex.disposable import Disposable
from reactivex.scheduler import ImmediateScheduler

from rxllm import Chunk, ConfigurationError
from rxllm.agents import Event, RunConfig, StreamingMode
from rxllm.testing import ScriptedLlm, scripted_turn

from .support import (
    QUESTION,
    SESSION,
    USER,
    HeldLlm,
    answer_chunks,
    history,
    make_runner,
    order_runner,
    question,
    run_collect,
    tool_calls_turn,
    user_message,
    worked_example_chunks,
)

SSE = RunConfig(streaming_mode=StreamingMode.SSE)


class Recorder:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.errors: list[Exception] = []
        self.completed = threading.Event()
        self.terminated = threading.Event()

    def on_error(self, error: Exception) -> None:
        self.errors.append(error)
        self.terminated.set()

    def on_completed(self) -> None:
        self.completed.set()
        self.terminated.set()

    def subscribe(self, source: reactivex.Observable[Event]) -> rx_abc.DisposableBase:
        return source.subscribe(self.events.append, self.on_error, self.on_completed)


def test_disposing_mid_stream_cancels_the_model_call_and_runs_nothing_more() -> None:
    model = HeldLlm(held=1, scripted=[scripted_turn(*answer_chunks())])
    runner, calls = order_runner(model)
    recorder = Recorder()
    subscription = recorder.subscribe(runner.run_async(USER, SESSION, question(), SSE))
    assert model.wait_for_calls(1)
    [call] = model.calls
    turn = scripted_turn(*worked_example_chunks())
    call.emit(turn[0])
    assert [(e.partial, e.text()) for e in recorder.events] == [(True, "Let me look ")]

    subscription.dispose()

    assert call.disposed.is_set()  # disposal reached the generate_content subscription
    call.emit(*turn[1:])  # a model that keeps talking is not heard
    call.complete()
    assert len(recorder.events) == 1
    assert calls == []  # no tool ran
    assert len(model.requests) == 1  # no further model call
    assert [e.text() for e in history(runner)] == [QUESTION]  # nothing of the turn stored
    assert not recorder.terminated.is_set()  # disposal is silent


def test_disposing_while_a_tool_runs_drops_its_result_and_runs_no_further_tool_or_model_call() -> None:
    started = threading.Event()
    tool_disposed = threading.Event()
    second_ran: list[bool] = []

    def slow_lookup(order_id: str) -> reactivex.Observable[dict[str, str]]:
        def subscribe(observer: rx_abc.ObserverBase[dict[str, str]], scheduler: Any = None) -> Disposable:
            started.set()
            return Disposable(tool_disposed.set)

        return reactivex.create(subscribe)

    def notify(order_id: str) -> str:
        second_ran.append(True)
        return "sent"

    turn = tool_calls_turn(("c1", "slow_lookup", '{"order_id": "A17"}'), ("c2", "notify", '{"order_id": "A17"}'))
    model = ScriptedLlm([turn, scripted_turn(*answer_chunks())], scheduler=ImmediateScheduler())  # a synchronous run
    runner = make_runner(model, tools=[slow_lookup, notify])
    recorder = Recorder()
    subscription = recorder.subscribe(runner.run_async(USER, SESSION, question()))
    assert started.wait(5)  # on a tool worker
    assert [len(e.function_calls()) for e in recorder.events] == [2]

    subscription.dispose()

    assert tool_disposed.wait(5)
    assert second_ran == []
    assert len(model.requests) == 1
    assert len(history(runner)) == 2  # user, the model's call event; no response event


def test_disposing_from_inside_on_next_of_a_synchronous_run_starts_no_tool() -> None:
    model = ScriptedLlm([scripted_turn(*worked_example_chunks()), scripted_turn(*answer_chunks())])
    runner, calls = order_runner(model)

    def before_the_call(event: Event) -> bool:
        return not event.function_calls()

    events = runner.run_async(USER, SESSION, question(), SSE).pipe(
        ops.take_while(before_the_call, inclusive=True), ops.to_list()
    )
    seen = events.run()

    assert seen[-1].function_calls()  # the stored call event was the last one seen
    assert calls == []
    assert len(model.requests) == 1
    assert len(history(runner)) == 2


def test_disposing_on_a_partial_of_a_synchronous_model_stores_nothing_more() -> None:
    # The scripted model emits its whole turn inside one subscribe call: the final arrives before the
    # disposal could reach the model's subscription. The run's cancellation flag keeps it unstored.
    model = ScriptedLlm([scripted_turn(*worked_example_chunks()), scripted_turn(*answer_chunks())])
    runner, calls = order_runner(model)

    seen = runner.run_async(USER, SESSION, question(), SSE).pipe(ops.take(1), ops.to_list()).run()

    assert [(e.partial, e.text()) for e in seen] == [(True, "Let me look ")]
    assert [e.text() for e in history(runner)] == [QUESTION]
    assert calls == []
    assert len(model.requests) == 1


def test_a_second_run_on_the_session_waits_for_the_first() -> None:
    final_1 = scripted_turn(Chunk(text_delta="First answer."))
    model = HeldLlm(held=1, scripted=[scripted_turn(Chunk(text_delta="Second answer."))])
    runner = make_runner(model)
    first, second = Recorder(), Recorder()
    first.subscribe(runner.run_async(USER, SESSION, user_message("one"), SSE))
    assert model.wait_for_calls(1)
    second.subscribe(runner.run_async(USER, SESSION, user_message("two"), SSE))

    # the second run has not started: its message is not stored, the model was not asked
    assert len(model.requests) == 1
    assert [e.text() for e in history(runner)] == ["one"]

    model.calls[0].emit(*final_1)
    model.calls[0].complete()

    assert first.completed.is_set()
    assert second.completed.wait(5)
    assert [e.text() for e in history(runner)] == ["one", "First answer.", "two", "Second answer."]
    second_request = model.requests[1][0]
    assert [c.text() for c in second_request.contents] == ["one", "First answer.", "two"]


def test_disposing_the_first_run_lets_the_second_start() -> None:
    model = HeldLlm(held=1, scripted=[scripted_turn(Chunk(text_delta="Second answer."))])
    runner = make_runner(model)
    first, second = Recorder(), Recorder()
    subscription = first.subscribe(runner.run_async(USER, SESSION, user_message("one"), SSE))
    assert model.wait_for_calls(1)
    second.subscribe(runner.run_async(USER, SESSION, user_message("two"), SSE))
    assert len(model.requests) == 1

    subscription.dispose()

    assert model.calls[0].disposed.is_set()
    assert second.completed.wait(5)
    assert [e.text() for e in history(runner)] == ["one", "two", "Second answer."]


def test_a_queued_run_that_is_disposed_never_starts() -> None:
    model = HeldLlm(held=1, scripted=[scripted_turn(Chunk(text_delta="Third answer."))])
    runner = make_runner(model)
    first, second, third = Recorder(), Recorder(), Recorder()
    first.subscribe(runner.run_async(USER, SESSION, user_message("one")))
    assert model.wait_for_calls(1)
    queued = second.subscribe(runner.run_async(USER, SESSION, user_message("two")))
    third.subscribe(runner.run_async(USER, SESSION, user_message("three")))
    queued.dispose()

    model.calls[0].emit(*scripted_turn(Chunk(text_delta="First answer.")))
    model.calls[0].complete()

    assert third.completed.wait(5)
    assert not second.terminated.is_set()
    assert [e.text() for e in history(runner)] == ["one", "First answer.", "three", "Third answer."]


def test_runs_on_different_sessions_do_not_wait_for_each_other() -> None:
    model = HeldLlm(held=1, scripted=[scripted_turn(Chunk(text_delta="Other answer."))])
    runner = make_runner(model)
    runner.session_service.create_session(runner.app_name, USER, session_id="s2").run()
    first = Recorder()
    first.subscribe(runner.run_async(USER, SESSION, user_message("one")))
    assert model.wait_for_calls(1)

    outcome = run_collect(runner, user_message("elsewhere"), session_id="s2")

    assert outcome.completed
    assert not first.terminated.is_set()
    assert [e.text() for e in history(runner, "s2")] == ["elsewhere", "Other answer."]


def test_many_queued_synchronous_runs_complete_in_order() -> None:
    model = HeldLlm(held=1, scripted=[scripted_turn(Chunk(text_delta=f"answer {i}")) for i in range(300)])
    runner = make_runner(model)
    first = Recorder()
    first.subscribe(runner.run_async(USER, SESSION, user_message("start")))
    assert model.wait_for_calls(1)
    recorders = [Recorder() for _ in range(300)]
    for i, recorder in enumerate(recorders):
        recorder.subscribe(runner.run_async(USER, SESSION, user_message(f"q {i}")))
    model.calls[0].emit(*scripted_turn(Chunk(text_delta="started")))
    model.calls[0].complete()  # the 300 queued runs now run one after the other, without deep recursion
    assert all(r.completed.is_set() for r in recorders)
    texts = [e.text() for e in history(runner)]
    assert texts[2:6] == ["q 0", "answer 0", "q 1", "answer 1"]
    assert len(texts) == 2 + 600


def test_a_missing_session_fails_the_run() -> None:
    runner = make_runner(ScriptedLlm([]))
    outcome = run_collect(runner, session_id="nope")
    assert isinstance(outcome.error, ConfigurationError)
    assert "session 'nope' not found" in str(outcome.error)


def test_run_async_is_cold() -> None:
    model = ScriptedLlm([scripted_turn(Chunk(text_delta="Hi"))])
    runner = make_runner(model)
    run = runner.run_async(USER, SESSION, user_message("hello"))
    assert model.requests == [] and [e.text() for e in history(runner)] == []
    assert [e.text() for e in run.pipe(ops.to_list()).run()] == ["Hi"]
