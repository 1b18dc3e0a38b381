"""The runtime's plain-call paths behave as the composed Observables they stand for.

With the in-memory session store the runtimes store and fetch through plain calls
(``append_now`` / ``get_now``) and a run on the default run lanes is one layer (the runner's
``_LaneRun``). A store that overrides ``append_event``, ``get_session`` and ``serialize_run``
(each calling the in-memory one) takes the composed path instead, and one whose calls answer on
another thread the asynchronous one: every scenario here runs on the three and must give the same
events, the same session, the same errors, and the same disposal.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import reactivex
from reactivex import abc as rx_abc
from reactivex import operators as ops
from reactivex.subject import Subject

from rxllm import ConfigurationError, Content, RxLlmError
from rxllm._core import prevalidated
from rxllm._rx.direct import call_now, call_then, emit_now, fail_now, ignore_items, then_now
from rxllm.agents import (
    Event,
    FunctionTool,
    InMemorySessionService,
    LlmAgent,
    RunConfig,
    Runner,
    Session,
    StreamingMode,
    ToolContext,
)
from rxllm.agents._sessions.base import append_now, get_now
from rxllm.testing import ScriptedLlm, scripted_turn

from .support import (
    ANSWER,
    APP,
    SESSION,
    USER,
    HeldLlm,
    answer_chunks,
    get_order_function,
    question,
    worked_example_chunks,
)


class ComposedStore(InMemorySessionService):
    """The in-memory store through the composed Observable paths (every method overridden)."""

    def append_event(self, session: Session, event: Event) -> Any:
        return super().append_event(session, event)

    def get_session(self, app_name: str, user_id: str, session_id: str, config: Any = None) -> Any:
        return super().get_session(app_name, user_id, session_id, config)

    def serialize_run(self, app_name: str, user_id: str, session_id: str, run: Any) -> Any:
        return super().serialize_run(app_name, user_id, session_id, run)


def _on_a_thread(source: reactivex.Observable[Any]) -> reactivex.Observable[Any]:
    """``source`` subscribed on a new thread: its items and end arrive there, after subscribe returned."""

    def subscribe(observer: rx_abc.ObserverBase[Any], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        subscribed = threading.Event()

        def run() -> None:
            subscribed.wait()
            source.subscribe(observer.on_next, observer.on_error, observer.on_completed)

        threading.Thread(target=run, daemon=True).start()
        subscribed.set()
        return reactivex.disposable.Disposable()

    return reactivex.create(subscribe)


class ThreadedStore(InMemorySessionService):
    """The in-memory store whose appends and fetches answer on another thread (default run lanes)."""

    def append_event(self, session: Session, event: Event) -> Any:
        return _on_a_thread(super().append_event(session, event))

    def get_session(self, app_name: str, user_id: str, session_id: str, config: Any = None) -> Any:
        return _on_a_thread(super().get_session(app_name, user_id, session_id, config))


STORES = [InMemorySessionService, ComposedStore, ThreadedStore]


def test_only_the_in_memory_stores_own_methods_are_called_plainly() -> None:
    assert append_now(InMemorySessionService()) is not None and get_now(InMemorySessionService()) is not None
    for store in (ComposedStore(), ThreadedStore()):
        assert append_now(store) is None and get_now(store) is None


def _runner(store: InMemorySessionService, model: Any, tools: list[Any], **options: Any) -> Runner:
    agent = LlmAgent("support", model, instruction="You answer questions about orders.", tools=tools, **options)
    runner = Runner(agent, APP, store)
    store.create_session(APP, USER, session_id=SESSION).run()
    return runner


def _run(runner: Runner, session_id: str = SESSION) -> tuple[list[Event], Exception | None]:
    events: list[Event] = []
    errors: list[Exception] = []
    done = threading.Event()

    def on_error(error: Exception) -> None:
        errors.append(error)
        done.set()

    runner.run_async(USER, session_id, question(), RunConfig(streaming_mode=StreamingMode.SSE)).subscribe(
        events.append, on_error, done.set
    )
    assert done.wait(10), "the run did not end"
    return events, errors[0] if errors else None


_VOLATILE = {"id", "timestamp", "invocation_id"}


def _shape(events: Any) -> list[dict[str, Any]]:
    """The events without what differs between any two runs (ids, times; call ids are the model's)."""
    return [e.model_dump(mode="json", exclude=_VOLATILE) for e in events]


def _scenario(store_type: type[InMemorySessionService]) -> tuple[Any, ...]:
    calls: list[dict[str, Any]] = []
    get_order = get_order_function(calls)

    def remember(order_id: str, tool_context: ToolContext) -> dict[str, Any]:
        """Remember the order.

        Args:
            order_id: The order's id.
        """
        tool_context.state["last_order"] = order_id
        tool_context.state["temp:seen"] = True  # kept in the invocation, never stored
        return get_order(order_id)

    model = ScriptedLlm([scripted_turn(*worked_example_chunks()), scripted_turn(*answer_chunks())])
    store = store_type()
    runner = _runner(store, model, [FunctionTool(remember, name="get_order")], output_key="reply")
    events, error = _run(runner)
    session = store.get_session(APP, USER, SESSION).run()
    return _shape(events), error, _shape(session.events), session.state, calls


def test_a_tool_turn_gives_the_same_events_session_and_state_on_every_path() -> None:
    plain, composed, threaded = (_scenario(store) for store in STORES)
    assert plain[1] is None and plain[0][-1]["content"]["parts"][0]["text"] == ANSWER
    assert any("temp:seen" in e["actions"]["state_delta"] for e in plain[0])  # emitted with its temp: key
    assert not any("temp:seen" in e["actions"]["state_delta"] for e in plain[2])  # stored without it
    assert plain[3]["reply"] == ANSWER and plain[3]["last_order"] == "A17" and "temp:seen" not in plain[3]
    assert plain == composed == threaded


@pytest.mark.parametrize("store_type", STORES)
def test_a_missing_session_fails_the_run_with_the_same_error(store_type: type[InMemorySessionService]) -> None:
    runner = _runner(store_type(), ScriptedLlm([]), [])
    events, error = _run(runner, session_id="nope")
    assert events == [] and isinstance(error, ConfigurationError)
    assert str(error) == (
        f"session 'nope' not found for app {APP!r} and user {USER!r} (create it with the session service first)"
    )
    # the lane was left: the next run on that session starts (and fails the same way)
    assert isinstance(_run(runner, session_id="nope")[1], ConfigurationError)


@pytest.mark.parametrize("store_type", STORES)
def test_a_store_that_fails_mid_turn_fails_the_run_after_the_events_before_it(
    store_type: type[InMemorySessionService],
) -> None:
    store = store_type()

    def get_order(order_id: str) -> dict[str, Any]:
        """Look an order up.

        Args:
            order_id: The order's id.
        """
        store.delete_session(APP, USER, SESSION).subscribe()  # (synchronous) the response has nowhere to go
        return {"status": "shipped"}

    model = ScriptedLlm([scripted_turn(*worked_example_chunks()), scripted_turn(*answer_chunks())])
    runner = _runner(store, model, [get_order])
    events, error = _run(runner)
    assert isinstance(error, ConfigurationError) and "no such session" in str(error)
    assert [bool(e.partial) for e in events] == [True, True, False]  # the partials, then the stored call
    assert events[-1].function_calls()[0].name == "get_order"


@pytest.mark.parametrize("store_type", STORES)
def test_an_error_the_store_raises_reaches_the_subscriber_as_an_rxllm_error(
    store_type: type[InMemorySessionService],
) -> None:
    class Broken(store_type):  # type: ignore[misc, valid-type]
        def _append_now(self, session: Session, event: Event) -> Event:
            raise ValueError("disk full")

    runner = _runner(Broken(), ScriptedLlm([scripted_turn(*answer_chunks())]), [])
    events, error = _run(runner)
    assert events == [] and type(error) is RxLlmError and isinstance(error.__cause__, ValueError)
    assert "disk full" in str(error)


@pytest.mark.parametrize("store_type", STORES)
def test_disposing_mid_turn_closes_the_model_call_at_once_and_lets_the_next_run_start(
    store_type: type[InMemorySessionService],
) -> None:
    model = HeldLlm(held=1, scripted=[scripted_turn(*answer_chunks())])
    runner = _runner(store_type(), model, [])
    events: list[Event] = []
    subscription = runner.run_async(USER, SESSION, question()).subscribe(events.append, lambda _: None)
    assert model.wait_for_calls(1)
    call = model.calls[0]
    call.emit(*scripted_turn(*answer_chunks())[:1])  # a partial: the turn is under way
    assert model.wait_for_calls(1) and [e.partial for e in events] == [True]

    subscription.dispose()
    assert call.disposed.is_set()  # at once, on the disposing thread
    call.emit(*scripted_turn(*answer_chunks())[1:])
    assert [e.partial for e in events] == [True]  # nothing after dispose

    second, error = _run(runner)  # the lane was left: the next run starts and answers
    assert error is None and second[-1].text() == ANSWER


@pytest.mark.parametrize("store_type", STORES)
def test_a_queued_run_disposed_before_its_turn_never_starts_and_the_next_one_does(
    store_type: type[InMemorySessionService],
) -> None:
    model = HeldLlm(held=1, scripted=[scripted_turn(*answer_chunks())] * 2)
    runner = _runner(store_type(), model, [])
    first_done = threading.Event()
    runner.run_async(USER, SESSION, question()).subscribe(on_error=lambda _: None, on_completed=first_done.set)
    assert model.wait_for_calls(1)
    queued = runner.run_async(USER, SESSION, question()).subscribe(on_error=lambda _: None)
    third: list[Event] = []
    third_done = threading.Event()
    runner.run_async(USER, SESSION, question()).subscribe(third.append, lambda _: None, third_done.set)
    queued.dispose()  # while the first holds the lane

    model.calls[0].emit(*scripted_turn(*answer_chunks()))
    model.calls[0].complete()
    assert first_done.wait(10) and third_done.wait(10)
    assert len(model.requests) == 2  # the disposed run never called the model
    assert third[-1].text() == ANSWER


class _Resource:
    def __init__(self, closed: threading.Event) -> None:
        self._closed = closed

    async def aclose(self) -> None:
        await asyncio.sleep(0)
        self._closed.set()


@pytest.mark.parametrize("store_type", STORES)
def test_the_invocations_scope_is_closed_before_the_run_completes(store_type: type[InMemorySessionService]) -> None:
    closed = threading.Event()

    def get_order(order_id: str, tool_context: ToolContext) -> dict[str, Any]:
        """Look an order up.

        Args:
            order_id: The order's id.
        """
        tool_context._toolset_scopes.invocation.resource("conn", lambda: _Resource(closed))
        return {"status": "shipped"}

    model = ScriptedLlm([scripted_turn(*worked_example_chunks()), scripted_turn(*answer_chunks())])
    runner = _runner(store_type(), model, [get_order])
    closed_at_completion: list[bool] = []
    done = threading.Event()

    def on_completed() -> None:
        closed_at_completion.append(closed.is_set())
        done.set()

    runner.run_async(USER, SESSION, question()).subscribe(on_error=lambda _: done.set(), on_completed=on_completed)
    assert done.wait(10) and closed_at_completion == [True]


@pytest.mark.parametrize("store_type", STORES)
def test_disposing_a_run_starts_closing_its_scope(store_type: type[InMemorySessionService]) -> None:
    closed = threading.Event()
    opened = threading.Event()

    def get_order(order_id: str, tool_context: ToolContext) -> dict[str, Any]:
        """Look an order up.

        Args:
            order_id: The order's id.
        """
        tool_context._toolset_scopes.invocation.resource("conn", lambda: _Resource(closed))
        opened.set()
        return {"status": "shipped"}

    model = HeldLlm(held=2, scripted=[])
    model._scripted = ScriptedLlm([scripted_turn(*worked_example_chunks())])  # the first call is answered
    runner = _runner(store_type(), model, [get_order])
    subscription = runner.run_async(USER, SESSION, question()).subscribe(on_error=lambda _: None)
    assert model.wait_for_calls(1)
    model.calls[0].emit(*scripted_turn(*worked_example_chunks()))
    model.calls[0].complete()
    assert opened.wait(10) and model.wait_for_calls(2)  # the tool ran; the second call is held
    subscription.dispose()
    assert model.calls[1].disposed.is_set()
    assert closed.wait(10)  # close_soon: on the tool loop


# -- call_then is then_now(call_now(...), ...) ------------------------------------------------------


def _record(source: reactivex.Observable[Any], dispose_on: Any = None) -> list[Any]:
    seen: list[Any] = []
    holder: list[Any] = []

    def on_next(value: Any) -> None:
        seen.append(("next", value))
        if value == dispose_on:
            holder[0].dispose()

    holder.append(reactivex.disposable.SingleAssignmentDisposable())
    holder[0].disposable = source.subscribe(
        on_next, lambda e: seen.append(("error", str(e))), lambda: seen.append(("completed",))
    )
    return seen


def _raise(message: str) -> Any:
    raise ValueError(message)


@pytest.mark.parametrize(
    ("call", "follow"),
    [
        (lambda: 1, lambda: emit_now(2)),
        (lambda: _raise("call"), lambda: emit_now(2)),
        (lambda: 1, lambda: _raise("follow")),
        (lambda: 1, lambda: fail_now(ValueError("followed by an error"))),
        (lambda: 1, lambda: reactivex.of(2, 3)),
    ],
)
@pytest.mark.parametrize("emit", [True, False])
def test_call_then_delivers_what_then_now_of_call_now_does(call: Any, follow: Any, emit: bool) -> None:
    def composed() -> reactivex.Observable[Any]:
        first = call_now(call)
        return then_now(first if emit else ignore_items(first), follow)

    assert _record(call_then(call, follow, emit=emit)) == _record(composed())
    assert _record(call_then(call, follow, emit=emit).pipe(ops.to_list())) == _record(composed().pipe(ops.to_list()))


def test_call_then_does_not_follow_once_disposed_from_within_on_next() -> None:
    followed: list[str] = []

    def follow(name: str) -> reactivex.Observable[int]:
        followed.append(name)
        return emit_now(2)

    seen: dict[str, list[Any]] = {}
    for name, make in (
        ("call_then", lambda: call_then(lambda: 1, lambda: follow("call_then"))),
        ("then_now", lambda: then_now(call_now(lambda: 1), lambda: follow("then_now"))),
    ):
        trigger: Subject[int] = Subject()  # the store comes later, once the subscription is set up
        source = then_now(ignore_items(trigger), make)
        items: list[Any] = seen.setdefault(name, [])
        subscription: list[Any] = []

        def on_next(value: Any, items: list[Any] = items, subscription: list[Any] = subscription) -> None:
            items.append(value)
            subscription[0].dispose()

        subscription.append(source.subscribe(on_next, items.append, lambda items=items: items.append("completed")))
        trigger.on_completed()
    assert seen["call_then"] == seen["then_now"] == [1]  # nothing after the dispose, on either
    assert "call_then" not in followed  # and call_then did not even make what would follow


# -- events built without validating again what is valid already ----------------------------------


def _same_event(built: Event, validated: Event) -> None:
    fresh = {"id", "timestamp"}
    assert list(built.__dict__) == list(validated.__dict__)  # the same fields, in field order
    assert {k: v for k, v in built.__dict__.items() if k not in fresh} == {
        k: v for k, v in validated.__dict__.items() if k not in fresh
    }
    assert built.model_fields_set == validated.model_fields_set
    assert built.model_dump(exclude=fresh) == validated.model_dump(exclude=fresh)
    assert isinstance(built.id, str) and built.id != validated.id and isinstance(built.timestamp, float)
    if "actions" not in validated.model_fields_set:  # a fresh one each (a given one is kept, by both)
        assert built.actions is not validated.actions
        assert built.actions.state_delta is not validated.actions.state_delta


def test_prevalidated_events_are_the_events_validation_builds() -> None:
    from rxllm import Content, Part, UsageMetadata
    from rxllm.agents import EventActions
    from rxllm.agents._sessions.event import new_actions, prevalidated_event

    assert new_actions() == EventActions() and new_actions().model_fields_set == set()
    first, second = new_actions(), new_actions()
    first.state_delta["k"] = 1  # each its own
    assert second.state_delta == {} and EventActions().state_delta == {}
    content = Content(role="user", parts=(Part.from_text("Where is A17?"),))
    for values in (
        {"invocation_id": "e-1", "author": "user", "content": content},
        {
            "invocation_id": "e-2",
            "author": "support",
            "branch": None,
            "content": content,
            "actions": EventActions(state_delta={"k": "v"}, end_invocation=True),
            "total_usage_metadata": UsageMetadata(total_token_count=3),
        },
    ):
        _same_event(prevalidated_event(dict(values)), Event(**values))


def test_a_steps_request_and_a_calls_response_part_are_what_validation_builds() -> None:
    from rxllm import FunctionResponse, LlmRequest, Part
    from rxllm._core.types import GenerateContentConfig
    from rxllm.agents._flows import flow

    contents = (question(),)
    config = GenerateContentConfig(system_instruction="Be brief.")
    response = FunctionResponse(id="c1", name="get_order", response={"status": "shipped"})
    for built, validated in (
        (
            prevalidated.from_template(LlmRequest, flow._REQUEST_TEMPLATE, {"contents": contents, "config": config}),
            LlmRequest(contents=contents, config=config),
        ),
        (
            prevalidated.from_template(Part, flow._PART_TEMPLATE, {"function_response": response}),
            Part(function_response=response),
        ),
        (
            flow._response_content([Part(function_response=response), Part.from_text("t")]),
            Content(role="user", parts=(Part(function_response=response), Part.from_text("t"))),
        ),
    ):
        assert flow._CONTENT_TEMPLATE is not None
        assert flow._REQUEST_TEMPLATE is not None and flow._PART_TEMPLATE is not None  # the fast path is taken
        assert built == validated and list(built.__dict__.items()) == list(validated.__dict__.items())
        assert built.model_fields_set == validated.model_fields_set and repr(built) == repr(validated)
        assert built.to_json() == validated.to_json()
    # a model call's request, through the runner, is the one validation builds
    model = ScriptedLlm([scripted_turn(*answer_chunks())])
    _run(_runner(InMemorySessionService(), model, []))
    (request, _), = model.requests
    validated = LlmRequest(contents=request.contents, config=request.config)
    assert request == validated and list(request.__dict__.items()) == list(validated.__dict__.items())
    assert request.model_fields_set == {"contents", "config"} and type(request.contents) is tuple
