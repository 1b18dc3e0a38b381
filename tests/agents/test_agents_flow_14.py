"""The agent turn's step, fused: what it gives is what the composed step gives.

- The usual step (no request edits, no plugin, no model callback) makes the model call itself:
  ``_model_call`` is not called; with a callback it is, and the events and the store are the same.
- Each step is a ``concat_map_items`` the run's ``concat_now`` pulls: made fused (its own
  subscriber); the tool call's collection of a collection is one ``_FirstThen``. The events are the
  ones a callback path (composed: the model's responses through ``_call_model``, the tool through
  its callback chain) gives; a model emitting on its own thread delivers there; a dispose reaches
  the model's call at once and nothing follows; a dispose from within ``on_next`` stops the turn.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable
from telemetry_support import telemetry  # noqa: F401 (the fixture: a traced turn)

from rxllm import Chunk, LlmResponse, RxLlmError
from rxllm._rx import direct
from rxllm.agents import Event, RunConfig, StreamingMode
from rxllm.agents._flows import flow
from rxllm.testing import scripted_turn

from .support import (
    ANSWER,
    SESSION,
    USER,
    HeldLlm,
    ListLlm,
    answer_chunks,
    history,
    order_runner,
    question,
    run_collect,
    worked_example_chunks,
    worked_example_model,
)


def _fields(event: Event) -> dict[str, Any]:
    """An event's fields but the ones made fresh for every event or run."""
    dumped = event.model_dump()
    for fresh in ("id", "timestamp", "invocation_id"):
        dumped.pop(fresh)
    return dumped


class Counted:
    """Counts the calls of ``owner.name`` (a function of a module, or a method of a class), passing them on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, record: Any = None) -> None:
        self.calls: list[Any] = []
        original = getattr(owner, name)

        def counting(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(record(*args, **kwargs) if record is not None else 1)
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, counting)


def _turn(**agent_options: Any) -> tuple[list[Event], tuple[Event, ...], list[dict[str, Any]]]:
    runner, calls = order_runner(worked_example_model(), **agent_options)
    outcome = run_collect(runner)
    assert outcome.error is None and outcome.completed
    return outcome.events, history(runner), calls


def test_the_usual_step_calls_the_model_itself_and_gives_the_callback_paths_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model_calls = Counted(monkeypatch, flow, "_model_call")
    fused = Counted(monkeypatch, direct._ConcatMap, "__init__", lambda *a, **k: (a + (None,) * 6)[5] is not None)
    lean, lean_stored, lean_calls = _turn()
    assert model_calls.calls == []  # the fast path: the step made the call itself
    assert fused.calls == [True, True]  # both steps pulled fused

    seen: list[int] = []

    def before_model(callback_context: Any, llm_request: Any) -> None:
        seen.append(1)

    def before_tool(tool: Any, args: Any, tool_context: Any) -> None:
        seen.append(2)

    composed, composed_stored, composed_calls = _turn(
        before_model_callback=before_model, before_tool_callback=before_tool
    )
    assert len(model_calls.calls) == 2 and seen == [1, 2, 1]  # the composed path, through the callbacks
    assert [_fields(e) for e in lean] == [_fields(e) for e in composed]
    assert [_fields(e) for e in lean_stored] == [_fields(e) for e in composed_stored]
    assert lean_calls == composed_calls == [{"order_id": "A17"}]
    assert [e.partial for e in lean] == [True, True, None, None, True, True, True, None]
    assert lean[-1].text() == ANSWER


@pytest.mark.usefixtures("telemetry")
def test_the_tool_calls_collection_is_one_first_then_where_its_composition_had_two(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # (traced: the call runs within its span, collected by the step; untraced, with no callback, the
    # call's outcome goes to the step through call_tool_then, with no collection at all)
    made = Counted(monkeypatch, direct._FirstThen, "__init__")
    lean, _, _ = _turn()
    assert made.calls  # the callback path collects through _FirstThen
    lean_made = len(made.calls)
    composed_made = []

    class Nested(direct._CollectThen):  # type: ignore[type-arg]
        """collect_then that hides a collect_then source behind a Direct: the nested composition."""

        def __init__(self, source: Any, then: Any) -> None:
            if type(source) in (direct._CollectThen, Nested):
                inner = source

                def subscribe(observer: Any, scheduler: Any = None) -> Any:
                    return inner.subscribe(observer, scheduler=scheduler)

                source = direct.Direct(subscribe)
            super().__init__(source, then)

    monkeypatch.setattr(flow, "collect_then", Nested)
    composed, _, _ = _turn()
    composed_made.append(len(made.calls) - lean_made)
    assert [_fields(e) for e in lean] == [_fields(e) for e in composed]
    assert composed_made == [lean_made + 1]  # the tool call's two collections: one subscription instead of two


def test_a_turn_whose_model_emits_on_its_own_thread_delivers_there_in_order() -> None:
    threads: list[threading.Thread] = []
    turns = [scripted_turn(*worked_example_chunks()), scripted_turn(*answer_chunks())]

    class ThreadedModel(ListLlm):
        def generate_content(self, llm_request: Any, stream: bool = False) -> reactivex.Observable[LlmResponse]:
            turn = turns[len(self.requests)]
            self.requests.append((llm_request, stream))

            def subscribe(
                observer: rx_abc.ObserverBase[LlmResponse], scheduler: rx_abc.SchedulerBase | None = None
            ) -> rx_abc.DisposableBase:
                def emit() -> None:
                    for response in turn:
                        observer.on_next(response)
                    observer.on_completed()

                threads.append(threading.Thread(target=emit))
                threads[-1].start()
                return Disposable()

            return reactivex.create(subscribe)

    runner, calls = order_runner(ThreadedModel([[]]))
    delivered: list[tuple[str | None, int]] = []
    done = threading.Event()
    runner.run_async(USER, SESSION, question(), RunConfig(streaming_mode=StreamingMode.SSE)).subscribe(
        lambda e: delivered.append((e.text(), threading.get_ident())), lambda e: done.set(), done.set
    )
    assert done.wait(5)
    for thread in threads:
        thread.join(5)
    idents = [t.ident for t in threads]
    assert [text for text, _ in delivered] == [
        "Let me look ", "that up.", "Let me look that up.", "", "Order A17 ", "shipped ", "Tuesday.", ANSWER
    ]
    assert {ident for _, ident in delivered[:3]} == {idents[0]}  # the first call's events, on its thread
    assert {ident for _, ident in delivered[4:]} == {idents[1]}  # the second call's, on its own
    assert calls == [{"order_id": "A17"}]


def test_disposing_a_fused_step_reaches_the_models_call_at_once_and_nothing_follows() -> None:
    model = HeldLlm(held=1)
    runner, calls = order_runner(model)
    events: list[Event] = []
    ended: list[str] = []
    subscription = runner.run_async(USER, SESSION, question(), RunConfig(streaming_mode=StreamingMode.SSE)).subscribe(
        events.append, lambda e: ended.append("error"), lambda: ended.append("completed")
    )
    assert model.wait_for_calls(1)
    held = model.calls[0]
    turn = scripted_turn(*worked_example_chunks())
    held.emit(turn[0])
    disposer = threading.Thread(target=subscription.dispose)
    disposer.start()
    disposer.join(5)
    assert held.disposed.is_set()  # at once: before anything else happens
    held.emit(*turn[1:])
    held.complete()
    assert [e.text() for e in events] == ["Let me look "]
    assert ended == [] and calls == [] and len(model.requests) == 1
    assert [e.author for e in history(runner)] == ["user"]


def test_a_subscriber_disposing_from_within_on_next_stops_the_turn() -> None:
    runner, calls = order_runner(HeldLlm(held=2))
    model: HeldLlm = runner.agent.model  # type: ignore[attr-defined]
    events: list[Event] = []
    holder: list[Any] = []
    ended: list[str] = []

    def on_next(event: Event) -> None:
        events.append(event)
        if not event.partial:  # the stored model event: stop before its tool runs
            holder[0].dispose()

    holder.append(
        runner.run_async(USER, SESSION, question(), RunConfig(streaming_mode=StreamingMode.SSE)).subscribe(
            on_next, lambda e: ended.append("error"), lambda: ended.append("completed")
        )
    )
    assert model.wait_for_calls(1)
    model.calls[0].emit(*scripted_turn(*worked_example_chunks()))
    model.calls[0].complete()
    assert [e.partial for e in events] == [True, True, None]  # disposed on the stored model event
    assert model.calls[0].disposed.is_set() and calls == [] and len(model.requests) == 1 and ended == []
    assert [e.author for e in history(runner)] == ["user", "support"]  # stored before it was emitted


def test_a_model_error_mid_stream_fails_the_fused_step_after_the_partials_before_it() -> None:
    turn = scripted_turn(*worked_example_chunks())
    runner, calls = order_runner(ListLlm([turn[:2]], error=ValueError("connection reset")))
    outcome = run_collect(runner)
    assert [e.text() for e in outcome.events] == ["Let me look ", "that up."]
    assert isinstance(outcome.error, RxLlmError) and not outcome.completed and calls == []


def test_a_two_model_call_turn_with_many_partials_keeps_every_event_in_order() -> None:
    chunks = [Chunk(text_delta=f"{n} ") for n in range(50)]
    runner, _ = order_runner(ListLlm([scripted_turn(*chunks)]))
    outcome = run_collect(runner)
    assert outcome.error is None and outcome.completed
    assert [e.text() for e in outcome.events[:-1]] == [f"{n} " for n in range(50)]
    assert outcome.events[-1].text() == "".join(f"{n} " for n in range(50))
