"""Review of the agent turn's fast paths under races and changes between steps and runs.

* The flow keeps a step's tools, declarations and last request config per agent (``flow._StepTools``):
  concurrent runs of one agent with different instructions must each send their own, and a kept
  declaration must never outlive what the tool would declare now.
* The run lane holds the started run in a lock-free ``Slot``: a dispose that lands while the run's
  source is still being subscribed (on the thread that passed the turn on) must dispose it, and
  pass the lane on exactly once.

Interleavings are forced with barriers and events, never with sleeps.
"""

from __future__ import annotations

import copy
import gc
import pickle
import threading
import weakref
from typing import Any

import pytest
import reactivex
from reactivex import abc as rx_abc
from reactivex import operators as ops
from reactivex.disposable import Disposable
from reactivex.scheduler.scheduler import Scheduler
from reactivex.subject import Subject

from rxllm import BaseLlm, Content, FunctionCall, LlmResponse, Part
from rxllm._rx.direct import Direct, emit_now, emitted
from rxllm._tools import ToolContext, ToolRuntime, execute_tool
from rxllm._tools._scope import ResourceScope, closing_after
from rxllm.agents import BaseTool, BaseToolset, Event, FunctionTool, InMemoryRunner, InMemorySessionService, LlmAgent
from rxllm.agents._flows import flow
from rxllm.agents._sessions.run_lanes import SessionLanes

from .support import user_message

_WAIT = 10  # seconds a barrier or event may take before the test fails (never reached when correct)


def get_order(order_id: str) -> dict[str, str]:
    """Look an order up."""
    return {"order_id": order_id, "status": "shipped"}


def _system_text(request: Any) -> str:
    instruction = request.config.system_instruction
    return "".join(part.text or "" for part in instruction.parts) if instruction is not None else ""


def _declared(request: Any) -> dict[str, str | None]:
    return {d.name: d.description for tool in request.config.tools or () for d in tool.function_declarations or ()}


class _CallThenAnswer(BaseLlm):
    """Calls ``get_order`` first, answers once the tool's response follows the latest user message;
    records every request with that message's text (which run asked)."""

    def __init__(self) -> None:
        super().__init__(model="call-then-answer")
        self.lock = threading.Lock()
        self.seen: list[tuple[str, Any]] = []

    def generate_content(self, llm_request: Any, stream: bool = False) -> Any:
        contents = list(llm_request.contents)
        last = max(i for i, c in enumerate(contents) if c.role == "user" and c.parts[0].text)
        who = contents[last].parts[0].text
        with self.lock:
            self.seen.append((who, llm_request))
        answered = any(p.function_response is not None for c in contents[last:] for p in c.parts)
        if answered:
            content = Content(role="model", parts=(Part.from_text(f"done for {who}"),))
        else:
            name = next((n for n in _declared(llm_request) if n.startswith("get_order")), "get_order")
            call = FunctionCall(id=f"call-{who}", name=name, args={"order_id": who})
            content = Content(role="model", parts=(Part(function_call=call),))
        return emit_now(LlmResponse(content=content))


def _run(runner: InMemoryRunner, session_id: str, text: str) -> list[Event]:
    events: list[Event] = runner.run_async("u", session_id, user_message(text)).pipe(ops.to_list()).run()
    return events


def test_concurrent_runs_of_one_agent_each_send_their_own_instruction_at_every_step() -> None:
    # Both runs build their request at the same moment (the barrier in the instruction provider),
    # then race on the kept config of the one agent they share.
    barrier = threading.Barrier(2, timeout=_WAIT)

    def instruction(ctx: Any) -> str:
        barrier.wait()
        return f"Serve {ctx.state['who']}."

    model = _CallThenAnswer()
    runner = InMemoryRunner(LlmAgent("a", model, instruction=instruction, tools=[get_order]))
    for who in ("A", "B"):
        runner.session_service.create_session(runner.app_name, "u", {"who": who}, session_id=who).run()
    results: dict[str, list[Event]] = {}
    errors: list[BaseException] = []

    def run(who: str) -> None:
        try:
            results[who] = _run(runner, who, who)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(who,)) for who in ("A", "B")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(_WAIT)
    assert not errors
    assert sorted(who for who, _ in model.seen) == ["A", "A", "B", "B"]
    for who, request in model.seen:
        assert _system_text(request).startswith(f"Serve {who}."), (who, _system_text(request))
        assert _declared(request) == {"get_order": "Look an order up."}
    assert {who: events[-1].text() for who, events in results.items()} == {"A": "done for A", "B": "done for B"}


def test_the_kept_config_is_rebuilt_for_each_instruction_in_any_order() -> None:
    agent = LlmAgent("a", _CallThenAnswer(), tools=[get_order])
    groups = emitted(agent.canonical_tool_groups())
    assert groups is not None
    kept = flow._step_tools(agent, groups[0], static=True)
    base = agent.generate_content_config
    for text in ("A", "B", "A", None, "A", "A", None):
        config = kept.request_config(base, text)
        assert (config.system_instruction.parts[0].text if config.system_instruction else None) == text
        assert [d.name for d in config.tools[0].function_declarations] == ["get_order"]  # type: ignore[index, union-attr]


def test_instruction_state_that_changes_between_runs_reaches_the_next_run() -> None:
    def instruction(ctx: Any) -> str:
        return f"Visit {ctx.state.get('visits', 0)}."

    model = _CallThenAnswer()
    runner = InMemoryRunner(LlmAgent("a", model, instruction=instruction, tools=[get_order], output_key="visits"))
    runner.session_service.create_session(runner.app_name, "u", {"visits": 0}, session_id="s").run()
    _run(runner, "s", "first")
    _run(runner, "s", "second")
    texts = [_system_text(request).split("\n")[0] for _, request in model.seen]
    # the output_key writes the final text into the state the second run's first step reads
    assert texts == ["Visit 0.", "Visit 0.", "Visit done for first.", "Visit done for first."]


def test_a_function_tool_whose_description_is_computed_declares_it_anew_each_step() -> None:
    # FunctionTool.declaration reads self.name and self.description: a subclass that computes them
    # (a property) declares what they are now, so a kept declaration would be stale.
    class Counting(FunctionTool):
        asked = 0

        @property
        def description(self) -> str:
            Counting.asked += 1
            return f"asked {Counting.asked}"

    model = _CallThenAnswer()
    runner = InMemoryRunner(LlmAgent("a", model, tools=[Counting(get_order)]))
    runner.session_service.create_session(runner.app_name, "u", session_id="s").run()
    _run(runner, "s", "hi")
    descriptions = [_declared(request)["get_order"] for _, request in model.seen]
    assert len(descriptions) == 2 and descriptions[0] != descriptions[1]


def test_a_plain_function_tool_keeps_its_declarations_between_steps_and_runs() -> None:
    model = _CallThenAnswer()
    agent = LlmAgent("a", model, tools=[get_order])
    runner = InMemoryRunner(agent)
    runner.session_service.create_session(runner.app_name, "u", session_id="s").run()
    _run(runner, "s", "one")
    _run(runner, "s", "two")
    tools = [request.config.tools for _, request in model.seen]
    assert len(tools) == 4 and all(t is tools[0] for t in tools)  # kept, and still what is declared
    assert _declared(model.seen[0][1]) == {"get_order": "Look an order up."}


class _PerRunToolset(BaseToolset):
    """Lists, for each step, a tool named after the run's session (``get_order_<who>``), once both
    runs are listing at the same moment (the barrier)."""

    def __init__(self, barrier: threading.Barrier) -> None:
        super().__init__()
        self._barrier = barrier
        self.ran: list[str] = []

    def get_tools(self, readonly_context: Any = None) -> reactivex.Observable[list[BaseTool]]:
        who = readonly_context.state["who"]
        self._barrier.wait()

        def get_order(order_id: str) -> dict[str, str]:
            """Look an order up."""
            self.ran.append(f"{who}:{order_id}")
            return {"order_id": order_id}

        return reactivex.just([FunctionTool(get_order, name=f"get_order_{who}")])


def test_concurrent_runs_of_one_agent_listing_different_tools_each_step_never_see_each_others() -> None:
    toolset = _PerRunToolset(threading.Barrier(2, timeout=_WAIT))
    model = _CallThenAnswer()
    runner = InMemoryRunner(LlmAgent("a", model, tools=[toolset]))
    for who in ("A", "B"):
        runner.session_service.create_session(runner.app_name, "u", {"who": who}, session_id=who).run()
    results: dict[str, list[Event]] = {}
    threads = [threading.Thread(target=lambda who=who: results.update({who: _run(runner, who, who)})) for who in "AB"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(_WAIT)
    assert sorted(who for who, _ in model.seen) == ["A", "A", "B", "B"]
    for who, request in model.seen:
        assert list(_declared(request)) == [f"get_order_{who}"]
    assert sorted(toolset.ran) == ["A:A", "B:B"]
    assert {who: events[-1].text() for who, events in results.items()} == {"A": "done for A", "B": "done for B"}


# --- the run lane's lock-free slot ---------------------------------------------------------------


def _blocking_source(subscribing: threading.Event, go: threading.Event, disposed: list[str]) -> Any:
    """A run whose subscribe waits for ``go`` (after saying so) and never ends by itself."""

    def subscribe(observer: rx_abc.ObserverBase[str], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        subscribing.set()
        assert go.wait(_WAIT)
        return Disposable(lambda: disposed.append("second"))

    return Direct(subscribe)


def test_a_run_disposed_while_the_lane_is_subscribing_it_is_disposed_and_passes_the_lane_on_once() -> None:
    lanes = SessionLanes()
    key = ("app", "u", "s")
    first: Subject[str] = Subject()
    subscribing, go = threading.Event(), threading.Event()
    disposed: list[str] = []
    third_started: list[int] = []

    def third(observer: rx_abc.ObserverBase[str], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        third_started.append(1)
        observer.on_completed()
        return Disposable()

    lanes.serialized(key, first).subscribe(lambda _: None)
    second = lanes.serialized(key, _blocking_source(subscribing, go, disposed)).subscribe(lambda _: None)
    lanes.serialized(key, Direct(third)).subscribe(lambda _: None)
    assert lanes.busy(key) and third_started == []

    # the first run ends on another thread, which passes the turn on and subscribes the second run
    ender = threading.Thread(target=first.on_completed)
    ender.start()
    assert subscribing.wait(_WAIT)
    second.dispose()  # lands while the second run's source is still being subscribed
    # the dispose passed the turn on (the third run ran on this thread); the second run's source not yet
    assert third_started == [1] and disposed == []
    go.set()
    ender.join(_WAIT)
    assert disposed == ["second"]  # set into a disposed slot: disposed at once
    assert third_started == [1]  # the lane was passed on exactly once
    assert not lanes.busy(key)


def test_a_run_disposed_from_another_thread_while_queued_never_starts() -> None:
    lanes = SessionLanes()
    key = ("app", "u", "s")
    first: Subject[str] = Subject()
    started: list[str] = []

    def queued(observer: rx_abc.ObserverBase[str], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        started.append("queued")
        return Disposable()

    lanes.serialized(key, first).subscribe(lambda _: None)
    subscription = lanes.serialized(key, Direct(queued)).subscribe(lambda _: None)
    other = threading.Thread(target=subscription.dispose)
    other.start()
    other.join(_WAIT)
    first.on_completed()
    assert started == [] and not lanes.busy(key)


def test_many_runs_on_one_lane_from_many_threads_each_run_once_in_turn() -> None:
    lanes = SessionLanes()
    key = ("app", "u", "s")
    threads_n, runs_each = 4, 25
    barrier = threading.Barrier(threads_n, timeout=_WAIT)
    lock = threading.Lock()
    active: list[int] = []
    overlaps: list[int] = []
    done: list[int] = []

    def one_run(number: int) -> reactivex.Observable[int]:
        def subscribe(observer: rx_abc.ObserverBase[int], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
            with lock:
                if active:
                    overlaps.append(number)
                active.append(number)
            with lock:
                active.remove(number)
                done.append(number)
            observer.on_next(number)
            observer.on_completed()
            return Disposable()

        return Direct(subscribe)

    def worker(offset: int) -> None:
        barrier.wait()
        for i in range(runs_each):
            lanes.serialized(key, one_run(offset * runs_each + i)).subscribe(lambda _: None)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(_WAIT)
    assert overlaps == []
    assert sorted(done) == list(range(threads_n * runs_each))
    assert not lanes.busy(key)


# --- execute_tool: the tool's answer racing its timeout ------------------------------------------------


class _Queued(Scheduler):
    """Only queues what is scheduled (run by hand, on the thread the test picks)."""

    def __init__(self) -> None:
        self.actions: list[Any] = []

    def schedule(self, action: Any, state: Any = None) -> rx_abc.DisposableBase:
        self.actions.append(action)
        return Disposable()

    def schedule_relative(self, duetime: Any, action: Any, state: Any = None) -> rx_abc.DisposableBase:
        return self.schedule(action, state)

    def schedule_absolute(self, duetime: Any, action: Any, state: Any = None) -> rx_abc.DisposableBase:
        return self.schedule(action, state)


def _answering_at(barrier: threading.Barrier) -> Any:
    def answer(order_id: str) -> dict[str, str]:
        barrier.wait()  # the timer fires on the other thread at this moment
        return {"status": "shipped"}

    return answer


def test_a_tool_answering_as_its_timeout_fires_ends_the_call_exactly_once() -> None:
    for _ in range(50):
        barrier = threading.Barrier(2, timeout=_WAIT)

        answer = _answering_at(barrier)

        pool, timers = _Queued(), _Queued()
        seen: list[object] = []
        lock = threading.Lock()

        def record(item: object, lock: threading.Lock = lock, seen: list[object] = seen) -> None:
            with lock:
                seen.append(item)

        execute_tool(
            FunctionTool(answer),
            {"order_id": "A"},
            ToolContext.standalone(),
            ToolRuntime(scheduler=pool, timer_scheduler=timers, timeout=5.0),
        ).subscribe(record, lambda error: record(type(error).__name__), lambda: record("completed"))

        def expire(timers: _Queued = timers, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            timers.actions[0](timers, None)

        timer_thread = threading.Thread(target=expire)
        timer_thread.start()
        pool.actions[0](pool, None)
        timer_thread.join(_WAIT)
        assert seen in ([{"status": "shipped"}, "completed"], ["ToolTimeoutError"]), seen


# --- closing_after: dispose racing the terminal event --------------------------------------------------


class _Scope(ResourceScope):
    def __init__(self) -> None:
        super().__init__("counted")
        self.closing_soon = 0
        self.closings = 0

    @property
    def is_empty(self) -> bool:
        return False

    def closing(self) -> reactivex.Observable[Any]:
        self.closings += 1
        return reactivex.empty()

    def close_soon(self) -> None:
        self.closing_soon += 1


def test_closing_after_closes_the_scope_once_whether_disposed_before_or_after_the_end() -> None:
    ended: Subject[int] = Subject()
    scope = _Scope()
    seen: list[object] = []
    subscription = closing_after(ended, scope).subscribe(seen.append, seen.append, lambda: seen.append("done"))
    ended.on_next(1)
    ended.on_completed()
    subscription.dispose()  # after the end: the scope is closing already
    assert seen == [1, "done"] and (scope.closings, scope.closing_soon) == (1, 0)

    running: Subject[int] = Subject()
    scope = _Scope()
    subscription = closing_after(running, scope).subscribe(lambda _: None)
    subscription.dispose()
    subscription.dispose()
    running.on_completed()  # (a source that ends anyway after the dispose is not heard)
    assert (scope.closings, scope.closing_soon) == (0, 1)


# --- events and session snapshots built without validation ---------------------------------------------


def _same_model(fast: Any, slow: Any) -> None:
    assert fast == slow and fast.model_fields_set == slow.model_fields_set
    assert fast.__pydantic_extra__ == slow.__pydantic_extra__ and fast.__pydantic_private__ == slow.__pydantic_private__
    assert list(fast.__dict__) == list(slow.__dict__)
    for clone in (copy.copy(fast), copy.deepcopy(fast), pickle.loads(pickle.dumps(fast))):
        assert clone == slow and clone.model_fields_set == slow.model_fields_set
    assert type(fast).model_validate(fast) == slow
    assert type(fast).model_validate_json(fast.model_dump_json(by_alias=True)) == slow


def test_a_response_event_copies_and_updates_as_a_validated_one() -> None:
    response = LlmResponse(content=Content(role="model", parts=(Part.from_text("hi"),)), turn_complete=True)
    fast = flow._response_event("e", "a", "root", response.content, None, None, response)
    slow = Event(
        id=fast.id,
        timestamp=fast.timestamp,
        invocation_id="e",
        author="a",
        branch="root",
        content=response.content,
        long_running_tool_ids=None,
        partial=None,
        turn_complete=True,
        error_code=None,
        error_message=None,
        finish_reason=None,
        usage_metadata=None,
        total_usage_metadata=None,
        interrupted=None,
        custom_metadata=None,
        model_version=None,
        input_transcription=None,
        output_transcription=None,
        go_away=None,
        live_session_resumption_update=None,
        tool_call_cancellation=None,
    )
    slow_set = slow.model_fields_set - {"id", "timestamp"}
    object.__setattr__(slow, "__pydantic_fields_set__", slow_set)  # (the fast event's id and time are defaults)
    _same_model(fast, slow)
    other = flow._response_event("e", "a", "root", response.content, None, None, response)
    updated = fast.model_copy(update={"id": "x"})
    assert updated.model_fields_set == fast.model_fields_set | {"id"}
    assert "id" not in fast.model_fields_set and "id" not in other.model_fields_set
    assert fast.model_fields_set is not other.model_fields_set


def test_a_session_snapshots_state_is_its_own_whatever_the_stored_state() -> None:
    service = InMemorySessionService()
    empty = service.create_session("app", "u", session_id="empty").run()
    full = service.create_session("app", "u", {"k": [1], "app:tier": "gold"}, session_id="full").run()
    for session in (empty, full):
        snapshot = service.get_session("app", "u", session.id).run()
        again = service.get_session("app", "u", session.id).run()
        assert snapshot is not None and again is not None
        assert snapshot.state is not again.state
        before = copy.deepcopy(again.state)
        snapshot.state["mine"] = 1  # a frozen model's dict: the snapshot's own copy
        if "k" in snapshot.state:
            snapshot.state["k"].append(2)
        assert service.get_session("app", "u", session.id).run().state == before  # type: ignore[union-attr]
        updated = snapshot.model_copy(update={"last_update_time": 1.0})
        assert updated.model_fields_set == snapshot.model_fields_set
        restored = pickle.loads(pickle.dumps(again))
        assert restored == again and restored.model_fields_set == again.model_fields_set


# --- what the kept step tools keep alive ---------------------------------------------------------------


def _ran_tree(with_parent: bool) -> tuple[weakref.ref[Any], weakref.ref[Any]]:
    helper = LlmAgent("helper", _CallThenAnswer(), description="Helps.", tools=[get_order])
    root = helper
    if with_parent:
        root = LlmAgent("boss", _CallThenAnswer(), description="Boss.", tools=[get_order], sub_agents=[helper])
    runner = InMemoryRunner(root)
    runner.session_service.create_session(runner.app_name, "u", session_id="s").run()
    _run(runner, "s", "hi")
    return weakref.ref(root), weakref.ref(helper)


@pytest.mark.parametrize("with_parent", [False, True], ids=["one-agent", "agent-tree"])
def test_an_agent_that_ran_is_freed_with_its_tree(with_parent: bool) -> None:
    # The kept step tools hold the step's transfer targets (the parent, the peers) and tools, which
    # may refer back to the agent: kept where nothing collects them, they would keep every agent
    # tree that ever ran alive for good (a server building agents per request would grow without end).
    root, helper = _ran_tree(with_parent)
    gc.collect()
    assert root() is None and helper() is None
