"""The agent turn's lean plumbing: what each shortcut does is what the composed path it replaces does.

- ``concat_map_items``: a projected item passes on as ``emit_now(item)`` would, in order (also
  while an earlier projected Observable is still running), errors and dispose as ``concat_map_now``.
- ``concat_now`` / ``concat_map_now`` with a store (``call_then``) among their sources run it in place:
  the same items, errors, and nothing followed once disposed from within ``on_next``.
- The flow: a usual partial response becomes its event in the step itself, a step with no callback
  calls the model unwrapped, a step reads an in-memory session when it is pulled, a run with
  telemetry off concatenates its steps without a defer. The events (in order, field by field), the
  store, errors, cancel mid-turn, callbacks and plugins, and spans with OpenTelemetry on are what
  the composed path gives.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable
from reactivex.scheduler import ImmediateScheduler
from rx_support import Held
from telemetry_support import Telemetry

import rxllm
from rxllm import ConfigurationError, LlmResponse, RxLlmError
from rxllm._rx.direct import (
    Direct,
    call_then,
    concat_map_items,
    concat_map_now,
    concat_now,
    emit_now,
    fail_now,
    nothing_now,
)
from rxllm.agents import BasePlugin, Event, InMemoryRunner, LlmAgent, RunConfig, StreamingMode
from rxllm.agents._flows.flow import run_llm_flow
from rxllm.agents._invocation.base import InvocationContext
from rxllm.testing import ScriptedLlm, scripted_turn

from .support import (
    ANSWER,
    APP,
    SESSION,
    USER,
    ListLlm,
    answer_chunks,
    history,
    order_runner,
    question,
    run_collect,
    worked_example_chunks,
    worked_example_model,
)

# ---- helpers ------------------------------------------------------------------------------------


class Recorder:
    """What a subscription got, in order: ``("next", x)``, ``("error", e)``, ``("completed",)``."""

    def __init__(self) -> None:
        self.got: list[tuple[Any, ...]] = []

    def on_next(self, value: Any) -> None:
        self.got.append(("next", value))

    def on_error(self, error: Exception) -> None:
        self.got.append(("error", error))

    def on_completed(self) -> None:
        self.got.append(("completed",))


def _fields(event: Event) -> dict[str, Any]:
    """An event's fields but the ones made fresh for every event or run (id, timestamp, invocation id)."""
    dumped = event.model_dump()
    for fresh in ("id", "timestamp", "invocation_id"):
        dumped.pop(fresh)
    return dumped


class NoOpPlugin(BasePlugin):
    """A plugin whose hooks all answer None: the flow then takes its composed (callback) path."""

    def __init__(self) -> None:
        super().__init__("noop")
        self.model_calls = 0
        self.responses = 0

    def before_model_callback(self, callback_context: Any, llm_request: Any) -> object:
        self.model_calls += 1
        return None

    def after_model_callback(self, callback_context: Any, llm_response: Any) -> object:
        self.responses += 1
        return None


# ---- concat_map_items ---------------------------------------------------------------------------


def test_concat_map_items_passes_items_and_observables_in_order_as_concat_map_now() -> None:
    def project(x: int) -> reactivex.Observable[str] | str:
        return f"item {x}" if x % 2 else concat_now([emit_now(f"a {x}"), emit_now(f"b {x}")])

    def project_composed(x: int) -> reactivex.Observable[str]:
        value = project(x)
        return emit_now(value) if isinstance(value, str) else value

    lean, composed = Recorder(), Recorder()
    concat_map_items(reactivex.from_iterable(range(5)), project, str).subscribe(lean)
    concat_map_now(reactivex.from_iterable(range(5)), project_composed).subscribe(composed)
    assert lean.got == composed.got
    assert lean.got[:3] == [("next", "a 0"), ("next", "b 0"), ("next", "item 1")] and lean.got[-1] == ("completed",)


def test_concat_map_items_an_item_waits_for_the_observable_still_running_before_it() -> None:
    held = Held()
    source = Held()
    got = Recorder()
    concat_map_items(source, lambda x: held if x == "held" else x, str).subscribe(got)
    source.observers[0].on_next("held")
    source.observers[0].on_next("after")  # an item while the held Observable runs: queued behind it
    assert got.got == []
    held.observers[0].on_next("from held")
    assert got.got == [("next", "from held")]
    source.observers[0].on_completed()
    held.observers[0].on_completed()
    assert got.got == [("next", "from held"), ("next", "after"), ("completed",)]


def test_concat_map_items_project_error_and_dispose() -> None:
    def project(x: int) -> str:
        if x == 2:
            raise ValueError("boom")
        return str(x)

    got = Recorder()
    concat_map_items(reactivex.from_iterable(range(5)), project, str).subscribe(got)
    assert [g[0] for g in got.got] == ["next", "next", "error"] and str(got.got[-1][1]) == "boom"

    source, held = Held(), Held()
    got = Recorder()
    subscription = concat_map_items(source, lambda x: held if x == "held" else x, str).subscribe(got)
    source.observers[0].on_next("one")
    source.observers[0].on_next("held")
    subscription.dispose()
    assert source.disposed == 1 and held.disposed == 1
    held.observers[0].on_next("late")
    source.observers[0].on_next("late too")
    assert got.got == [("next", "one")]


# ---- a store (call_then) run in place by the serial -----------------------------------------------


def _stores(calls: list[str], follow_with: reactivex.Observable[str] | None = None) -> list[reactivex.Observable[str]]:
    def store(name: str) -> str:
        calls.append(name)
        return f"stored {name}"

    return [
        call_then(lambda: store("a"), lambda: follow_with if follow_with is not None else nothing_now()),
        call_then(lambda: store("b"), lambda: emit_now("b follows")),
        emit_now("item"),
        call_then(lambda: store("c"), nothing_now, emit=False),
    ]


def _subscribed(source: reactivex.Observable[str]) -> reactivex.Observable[str]:
    """``source`` behind a plain Observable: subscribed, not run in place."""
    return reactivex.create(lambda observer, scheduler=None: source.subscribe(observer, scheduler=scheduler))


@pytest.mark.parametrize("mode", ["concat_now", "concat_map_now"])
def test_stores_run_in_place_give_what_their_subscriptions_give(mode: str) -> None:
    def run(wrap: bool) -> tuple[list[tuple[Any, ...]], list[str]]:
        calls: list[str] = []
        sources = _stores(calls, follow_with=emit_now("a follows"))
        if wrap:
            sources = [_subscribed(s) for s in sources]
        got = Recorder()
        if mode == "concat_now":
            concat_now(sources).subscribe(got)
        else:
            concat_map_now(reactivex.from_iterable(sources), lambda s: s).subscribe(got)
        return got.got, calls

    assert run(wrap=False) == run(wrap=True)
    got, calls = run(wrap=False)
    assert [g[1] for g in got[:-1]] == ["stored a", "a follows", "stored b", "b follows", "item"]
    assert got[-1] == ("completed",) and calls == ["a", "b", "c"]


def test_a_store_run_in_place_fails_with_what_its_call_or_follow_raises() -> None:
    def boom() -> str:
        raise ValueError("store failed")

    def follow_boom() -> reactivex.Observable[str]:
        raise KeyError("follow failed")

    after: list[str] = []
    for source in (call_then(boom, nothing_now), call_then(lambda: "stored", follow_boom)):
        got = Recorder()
        concat_now([source, call_then(lambda: after.append("ran") or "x", nothing_now)]).subscribe(got)
        assert got.got[-1][0] == "error"
        assert [g for g in got.got if g[0] == "completed"] == []
    assert after == []  # nothing after the failed store started
    got = Recorder()
    concat_now([call_then(lambda: "stored", lambda: fail_now(ValueError("follow's error")))]).subscribe(got)
    assert got.got[0] == ("next", "stored") and str(got.got[1][1]) == "follow's error"


def test_a_store_run_in_place_starts_nothing_once_disposed_from_within_on_next() -> None:
    followed: list[str] = []
    subscription: list[rx_abc.DisposableBase] = []
    got: list[str] = []

    def follow() -> reactivex.Observable[str]:
        followed.append("follow")
        return emit_now("tools")

    held = Held()

    def on_next(value: str) -> None:
        got.append(value)
        if value == "stored":
            subscription[0].dispose()

    # the store comes after a held source, so the subscription exists when it runs
    subscription.append(concat_now([held, call_then(lambda: "stored", follow)]).subscribe(on_next))
    held.observers[0].on_next("first")
    held.observers[0].on_completed()
    assert got == ["first", "stored"] and followed == []


def test_concat_now_delivers_nothing_after_a_dispose_from_another_thread() -> None:
    held = Held()
    got: list[Any] = []
    subscription = concat_now([held, emit_now("after")]).subscribe(got.append)
    thread = threading.Thread(target=held.observers[0].on_next, args=("one",))
    thread.start()
    thread.join()
    subscription.dispose()
    assert held.disposed == 1
    thread = threading.Thread(target=held.observers[0].on_next, args=("late",))
    thread.start()
    thread.join()
    held.observers[0].on_completed()
    assert got == ["one"]


# ---- the flow ------------------------------------------------------------------------------------


def _turn(*, plugins: tuple[BasePlugin, ...] = ()) -> tuple[list[Event], tuple[Event, ...], list[dict[str, Any]]]:
    runner, calls = order_runner(worked_example_model())
    if plugins:
        runner = InMemoryRunner(runner.agent, app_name=APP, plugins=plugins)
        runner.session_service.create_session(APP, USER, session_id=SESSION).run()
    outcome = run_collect(runner)
    assert outcome.error is None and outcome.completed
    return outcome.events, history(runner), calls


def test_the_lean_turn_gives_the_events_and_the_store_of_the_callback_path() -> None:
    plugin = NoOpPlugin()
    lean, lean_stored, lean_calls = _turn()
    composed, composed_stored, composed_calls = _turn(plugins=(plugin,))
    assert plugin.model_calls == 2 and plugin.responses == 7  # every response of both calls
    assert [_fields(e) for e in lean] == [_fields(e) for e in composed]
    assert [_fields(e) for e in lean_stored] == [_fields(e) for e in composed_stored]
    assert lean_calls == composed_calls == [{"order_id": "A17"}]
    assert [e.partial for e in lean] == [True, True, None, None, True, True, True, None]
    assert lean[-1].text() == ANSWER
    ids = [e.id for e in lean]
    assert len(set(ids)) == len(ids)
    stored_ids = {e.id for e in lean_stored}
    assert [e.id in stored_ids for e in lean] == [not e.partial for e in lean]  # what is emitted stored is stored


def test_a_partial_of_a_response_subclass_takes_the_composed_conversion_with_the_same_fields() -> None:
    class Tagged(LlmResponse):
        pass

    turn = [*scripted_turn(*answer_chunks())]
    tagged = [Tagged(**r.model_dump()) if r.partial else r for r in turn]
    events = []
    for responses in (turn, tagged):
        runner, _ = order_runner(ListLlm([responses]))
        outcome = run_collect(runner)
        assert outcome.error is None
        events.append([_fields(e) for e in outcome.events])
    assert events[0] == events[1]
    assert [e["partial"] for e in events[0]] == [True, True, True, None]


def test_a_model_error_mid_stream_fails_the_run_after_the_partials_before_it() -> None:
    error = RxLlmError("the stream broke")
    partials = [r for r in scripted_turn(*worked_example_chunks()) if r.partial]
    runner, calls = order_runner(ListLlm([partials], error=error))
    outcome = run_collect(runner)
    assert outcome.error is error and not outcome.completed
    assert [e.text() for e in outcome.events] == ["Let me look ", "that up."]
    assert calls == [] and [e.author for e in history(runner)] == ["user"]


def test_a_missing_session_fails_the_step_with_a_configuration_error() -> None:
    model = ScriptedLlm([scripted_turn(*answer_chunks())])
    agent = LlmAgent("support", model)
    runner = InMemoryRunner(agent, app_name=APP)
    session = runner.session_service.create_session(APP, USER, session_id=SESSION).run()
    ctx = InvocationContext(
        agent=agent, session=session, session_service=runner.session_service, run_config=RunConfig()
    )
    runner.session_service.delete_session(APP, USER, SESSION).subscribe()  # (in memory: done when this returns)
    got = Recorder()
    run_llm_flow(agent, ctx).subscribe(got)
    assert len(got.got) == 1 and got.got[0][0] == "error"
    assert isinstance(got.got[0][1], ConfigurationError) and "no longer exists" in str(got.got[0][1])


def test_a_failing_in_memory_store_read_is_the_steps_error() -> None:
    model = ScriptedLlm([scripted_turn(*answer_chunks())])
    agent = LlmAgent("support", model)
    runner = InMemoryRunner(agent, app_name=APP)
    session = runner.session_service.create_session(APP, USER, session_id=SESSION).run()
    ctx = InvocationContext(
        agent=agent, session=session, session_service=runner.session_service, run_config=RunConfig()
    )
    ctx._with_temp_state = lambda _: (_ for _ in ()).throw(RuntimeError("read failed"))  # type: ignore[method-assign]
    got = Recorder()
    run_llm_flow(agent, ctx).subscribe(got)
    assert len(got.got) == 1 and str(got.got[0][1]) == "read failed"


def test_a_run_llm_flow_observable_subscribed_twice_runs_twice() -> None:
    model = ScriptedLlm(
        [scripted_turn(*answer_chunks()), scripted_turn(*answer_chunks())], scheduler=ImmediateScheduler()
    )
    agent = LlmAgent("support", model)
    runner = InMemoryRunner(agent, app_name=APP)
    session = runner.session_service.create_session(APP, USER, session_id=SESSION).run()
    ctx = InvocationContext(
        agent=agent,
        session=session,
        session_service=runner.session_service,
        run_config=RunConfig(streaming_mode=StreamingMode.SSE),
    )
    flow = run_llm_flow(agent, ctx)
    first, second = Recorder(), Recorder()
    flow.subscribe(first)
    flow.subscribe(second)
    for got in (first, second):
        assert got.got[-1] == ("completed",)
        assert [g[1].text() for g in got.got[:-1]][-1] == ANSWER
    assert ctx.llm_call_count == 2
    assert len(history(runner)) == 2


def test_max_llm_calls_fails_the_step_that_asks_too_many() -> None:
    runner, calls = order_runner(worked_example_model())
    outcome = run_collect(runner, max_llm_calls=1)
    assert outcome.error is not None and "max_llm_calls" in str(outcome.error)
    assert calls == [{"order_id": "A17"}]  # the first step's tool ran; the second model call was refused


def test_disposing_mid_turn_stops_the_turn_with_nothing_after() -> None:
    """Disposed on the first partial (the model emits on its own thread): nothing more is delivered,
    no tool runs, nothing is stored, no second model call."""
    gate = threading.Event()
    threads: list[threading.Thread] = []
    turn = scripted_turn(*worked_example_chunks())

    class ThreadedModel(ListLlm):
        def generate_content(self, llm_request: Any, stream: bool = False) -> reactivex.Observable[LlmResponse]:
            self.requests.append((llm_request, stream))

            def subscribe(
                observer: rx_abc.ObserverBase[LlmResponse], scheduler: rx_abc.SchedulerBase | None = None
            ) -> rx_abc.DisposableBase:
                def emit() -> None:
                    observer.on_next(turn[0])
                    gate.wait(5)
                    for response in turn[1:]:
                        observer.on_next(response)
                    observer.on_completed()

                threads.append(threading.Thread(target=emit))
                threads[-1].start()
                return Disposable()

            return reactivex.create(subscribe)

    model = ThreadedModel([[]])
    runner, calls = order_runner(model)
    events: list[Event] = []
    first = threading.Event()
    ended: list[str] = []

    def on_next(event: Event) -> None:
        events.append(event)
        first.set()

    subscription = runner.run_async(USER, SESSION, question(), RunConfig(streaming_mode=StreamingMode.SSE)).subscribe(
        on_next, lambda e: ended.append("error"), lambda: ended.append("completed")
    )
    assert first.wait(5)
    subscription.dispose()
    gate.set()
    threads[0].join(5)  # the rest of the turn reached the disposed run
    assert [e.text() for e in events] == ["Let me look "]
    assert ended == [] and calls == [] and len(model.requests) == 1
    assert [e.author for e in history(runner)] == ["user"]


def test_callbacks_still_run_on_the_lean_path_when_an_agent_has_them() -> None:
    seen: list[str] = []

    def before(callback_context: Any, llm_request: Any) -> None:
        seen.append("before")

    def after(callback_context: Any, llm_response: LlmResponse) -> None:
        seen.append("after partial" if llm_response.partial else "after final")

    runner, calls = order_runner(worked_example_model(), before_model_callback=before, after_model_callback=after)
    outcome = run_collect(runner)
    assert outcome.error is None and outcome.events[-1].text() == ANSWER and calls == [{"order_id": "A17"}]
    assert seen.count("before") == 2 and seen.count("after final") == 2 and "after partial" in seen


def test_spans_are_made_when_telemetry_is_on() -> None:
    telemetry = Telemetry()
    rxllm.configure_telemetry(tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider)
    try:
        runner, calls = order_runner(worked_example_model())
        outcome = run_collect(runner)
        assert outcome.error is None and outcome.events[-1].text() == ANSWER and calls == [{"order_id": "A17"}]
        names = sorted(span.name for span in telemetry.spans(2))
        assert "invoke_agent support" in names and "execute_tool get_order" in names
    finally:
        rxllm.configure_telemetry()


def test_a_direct_source_among_the_steps_is_subscribed_once() -> None:
    subscribed: list[int] = []

    def subscribe(observer: rx_abc.ObserverBase[str], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        subscribed.append(1)
        observer.on_next("direct")
        observer.on_completed()
        return Disposable()

    got = Recorder()
    concat_now([Direct(subscribe), call_then(lambda: "stored", nothing_now)]).subscribe(got)
    assert subscribed == [1] and got.got == [("next", "direct"), ("next", "stored"), ("completed",)]


def test_concat_map_disposed_while_its_source_subscribes_disposes_that_subscription() -> None:
    from rxllm._rx.direct import _ConcatMap

    disposed: list[str] = []
    holder: list[_ConcatMap] = []

    def subscribe(observer: rx_abc.ObserverBase[str], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        holder[0].dispose()  # (another thread's dispose, landing while the source subscribes)
        return Disposable(lambda: disposed.append("source"))

    got = Recorder()
    holder.append(_ConcatMap(got, None, emit_now, None))
    holder[0].start(Direct(subscribe), None)
    assert disposed == ["source"] and got.got == []
    held = Held()
    concat_map = _ConcatMap(Recorder(), None, emit_now, None).start(held, None)
    concat_map.dispose()
    concat_map.dispose()  # (twice: harmless)
    assert held.disposed == 1


def test_a_run_disposed_while_its_store_answers_later_disposes_the_fetch() -> None:
    """The runner's run on a store that answers later: disposed before the answer, the fetch is disposed
    and nothing is delivered; the lane is free for the next run."""
    from rxllm.agents import InMemorySessionService

    class LaterStore(InMemorySessionService):
        def __init__(self) -> None:
            super().__init__()
            self.fetches: list[Held] = []

        def get_session(self, app_name: str, user_id: str, session_id: str, config: Any = None) -> Any:
            held = Held()
            self.fetches.append(held)
            return held

    from rxllm.agents import Runner

    store = LaterStore()
    runner = Runner(LlmAgent("support", ScriptedLlm([scripted_turn(*answer_chunks())])), APP, store)
    got = Recorder()
    subscription = runner.run_async(USER, SESSION, "hi").subscribe(got)
    assert len(store.fetches) == 1 and store.fetches[0].observers
    subscription.dispose()
    assert store.fetches[0].disposed == 1
    store.fetches[0].observers[0].on_completed()  # the late answer (no session) reaches nothing
    assert got.got == []
    runner.run_async(USER, SESSION, "again").subscribe(Recorder())
    assert len(store.fetches) == 2  # the lane was left: the next run started


@pytest.mark.parametrize("mode", ["in place", "subscribed"])
def test_an_observer_raising_on_a_stored_item_fails_the_concatenation_with_it(mode: str) -> None:
    followed: list[str] = []

    def follow() -> reactivex.Observable[str]:
        followed.append("follow")
        return nothing_now()

    store = call_then(lambda: "stored", follow)
    source = store if mode == "in place" else _subscribed(store)
    errors: list[Exception] = []

    def on_next(value: str) -> None:
        raise ValueError(f"observer broke on {value}")

    concat_now([source]).subscribe(on_next, errors.append)
    assert [str(e) for e in errors] == ["observer broke on stored"] and followed == []
