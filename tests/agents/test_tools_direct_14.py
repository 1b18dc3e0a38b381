"""The direct tool path gives what the Observable path gives.

``start_tool`` calls a plain ``FunctionTool``'s function itself (``FunctionTool._run_now``) instead
of subscribing the Observable ``run`` returns; ``call_tool_then`` hands a call's outcome to a
continuation; the flow's one-call step with no callback and no span goes from the outcome to the
function-response event without the outcome's and the parts' Observables (``flow._run_call(then=)``);
``add_usage`` sums two ``UsageMetadata`` without validating again. Each is compared here with the
path it replaces (forced: a ``FunctionTool`` subclass with its own ``run``, the flow's
``_run_call_then`` as it was written before), and each test also checks the fast path is taken.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

import pytest
import reactivex
from reactivex.scheduler import ImmediateScheduler
from telemetry_support import telemetry

from rxllm import Content, FunctionCall, ToolError, UsageMetadata
from rxllm._core import prevalidated
from rxllm._core.threads import thread_pool_scheduler
from rxllm._rx.direct import collect_then
from rxllm._telemetry.otel import add_usage
from rxllm._tools import ToolContext, ToolRuntime, _calls, call_tool, call_tool_then
from rxllm.agents import Event, FunctionTool, InMemoryRunner, LlmAgent, LongRunningFunctionTool, RunConfig
from rxllm.agents._flows import flow
from rxllm.testing import ScriptedLlm, scripted_turn

__all__ = ["telemetry"]  # (the fixture, for the span test)

from .support import (
    APP,
    SESSION,
    USER,
    answer_chunks,
    history,
    make_runner,
    question,
    run_collect,
    tool_calls_turn,
    worked_example_model,
)

WAIT = 10.0


class _ObservableRun(FunctionTool):
    """A FunctionTool whose ``run`` is its own: ``start_tool`` subscribes it (the path before ``_run_now``)."""

    def run(self, args: dict[str, Any], tool_context: ToolContext) -> reactivex.Observable[Any]:
        return super().run(args, tool_context)


def _get_order(order_id: str) -> dict[str, Any]:
    """Look an order up."""
    return {"order_id": order_id, "status": "shipped"}


def _explode(order_id: str) -> dict[str, Any]:
    """Fail."""
    raise ValueError(f"no order {order_id}")


def _plain(order_id: str) -> str:
    """A result that is not a dict."""
    return f"order {order_id}"


def _nothing(order_id: str) -> None:
    """No result."""


async def _later(order_id: str) -> dict[str, Any]:
    """An async tool."""
    return {"order_id": order_id}


def _observable(order_id: str) -> reactivex.Observable[Any]:
    """An Observable result: its last item."""
    return reactivex.of({"n": 1}, {"order_id": order_id})


def _exits(order_id: str) -> dict[str, Any]:
    """argparse on bad input."""
    raise SystemExit(2)


FUNCTIONS: list[Callable[..., Any]] = [_get_order, _explode, _plain, _nothing, _later, _observable, _exits]
ARGS: list[dict[str, Any]] = [{"order_id": "A17"}, {"order_id": 17}, {}, {"order_id": "A17", "extra": 1}]


def _outcome(tool: FunctionTool, args: dict[str, Any]) -> _calls.ToolCallOutcome:
    call = FunctionCall(id="call_1", name=tool.name, args=args)
    runtime = ToolRuntime(scheduler=ImmediateScheduler())
    context = ToolContext.standalone(function_call_id=call.id)
    got: _calls.ToolCallOutcome = call_tool({tool.name: tool}, call, context, runtime=runtime).run()
    return got


def _same(one: _calls.ToolCallOutcome, other: _calls.ToolCallOutcome) -> None:
    assert one.response.model_dump() == other.response.model_dump()
    assert one.response.model_fields_set == other.response.model_fields_set
    assert one.error_message == other.error_message
    assert type(one.error) is type(other.error)
    assert str(one.error) == str(other.error)
    assert type(getattr(one.error, "__cause__", None)) is type(getattr(other.error, "__cause__", None))


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("args", ARGS, ids=str)
def test_a_function_tool_called_directly_answers_what_its_observable_answers(
    function: Callable[..., Any], args: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = _outcome(_ObservableRun(function), args)
    runs: list[str] = []
    real_run = FunctionTool.run

    def counted(self: FunctionTool, *a: Any) -> Any:
        runs.append(self.name)
        return real_run(self, *a)

    monkeypatch.setattr(FunctionTool, "run", counted)  # (still FunctionTool's own run: the direct path is taken)
    fast = _outcome(FunctionTool(function), args)
    _same(fast, slow)
    assert runs == []  # the direct path: ``run``'s Observable was not made


def test_the_direct_path_is_taken_for_a_plain_function_tool_and_not_for_one_with_its_own_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    called: list[str] = []
    real = FunctionTool._run_now

    def counted(self: FunctionTool, args: dict[str, Any], context: Any) -> Any:
        called.append(type(self).__name__)
        return real(self, args, context)

    monkeypatch.setattr(FunctionTool, "_run_now", counted)
    assert _outcome(FunctionTool(_get_order), {"order_id": "A17"}).response.response["status"] == "shipped"
    assert _outcome(_ObservableRun(_get_order), {"order_id": "A17"}).response.response["status"] == "shipped"
    assert called == ["FunctionTool"]


def test_a_tool_with_its_own_scheduler_or_asking_for_confirmation_goes_through_run() -> None:
    ran_on: list[str] = []

    def where(order_id: str) -> dict[str, Any]:
        """Where it ran."""
        ran_on.append(threading.current_thread().name)
        return {"ok": order_id}

    own = thread_pool_scheduler(1, "rxllm-test-own")
    try:
        call = FunctionCall(id="c", name="where", args={"order_id": "A17"})
        done = threading.Event()
        outcomes: list[_calls.ToolCallOutcome] = []
        call_tool({"where": FunctionTool(where, scheduler=own)}, call, ToolContext.standalone(),
                  runtime=ToolRuntime(scheduler=ImmediateScheduler())).subscribe(outcomes.append,
                                                                               on_completed=done.set)
        assert done.wait(WAIT)
        assert outcomes[0].response.response == {"ok": "A17"} and ran_on == ["rxllm-test-own_0"]
    finally:
        own.executor.shutdown(wait=True)
    asked = _outcome(FunctionTool(where, require_confirmation=True), {"order_id": "A17"})
    assert asked.response.response == {"error": "This tool call requires confirmation, please approve or reject."}
    assert ran_on == ["rxllm-test-own_0"]


# --- call_tool_then ---------------------------------------------------------------------------------


def _then(tools: dict[str, Any], call: FunctionCall) -> tuple[list[Any], list[Exception]]:
    outcomes: list[Any] = []
    errors: list[Exception] = []
    handed = threading.Event()  # an async tool's outcome comes from its event loop's thread, later

    def outcome(got: Any) -> None:
        outcomes.append(got)
        handed.set()

    def error(got: Exception) -> None:
        errors.append(got)
        handed.set()

    call_tool_then(tools, call, ToolContext.standalone(), outcome, error,
                   runtime=ToolRuntime(scheduler=ImmediateScheduler()))
    assert handed.wait(10), "call_tool_then handed nothing over"
    return outcomes, errors


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_call_tool_then_hands_over_what_call_tool_emits(function: Callable[..., Any]) -> None:
    tool = FunctionTool(function)
    call = FunctionCall(id="call_1", name=tool.name, args={"order_id": "A17"})
    outcomes, errors = _then({tool.name: tool}, call)
    assert errors == [] and len(outcomes) == 1
    _same(outcomes[0], _outcome(tool, {"order_id": "A17"}))


def test_call_tool_then_answers_an_unknown_tool_and_fails_on_a_keyboard_interrupt() -> None:
    unknown = FunctionCall(id="c", name="cancel_order", args={})
    outcomes, errors = _then({"get_order": FunctionTool(_get_order)}, unknown)
    expected = call_tool({"get_order": FunctionTool(_get_order)}, unknown, ToolContext.standalone()).run()
    assert errors == [] and len(outcomes) == 1
    _same(outcomes[0], expected)

    def interrupt() -> None:
        """Interrupt."""
        raise KeyboardInterrupt

    outcomes, errors = _then({"interrupt": FunctionTool(interrupt)}, FunctionCall(id="c", name="interrupt", args={}))
    assert outcomes == [] and len(errors) == 1
    assert isinstance(errors[0], ToolError) and isinstance(errors[0].__cause__, KeyboardInterrupt)
    assert str(errors[0]) == "tool 'interrupt' raised KeyboardInterrupt: the run is stopped"


# --- the flow's one-call step -------------------------------------------------------------------


def _old_run_call_then(
    agent: Any, ctx: Any, step: Any, call: Any, contexts: Any, confirmation: Any, then: Any
) -> reactivex.Observable[Event]:
    """The step as it was before the direct path: the call's parts collected, then ``then``."""
    return collect_then(flow._run_call(agent, ctx, step, call, contexts, confirmation), then)


def _comparable(events: Any) -> list[str]:
    """The events without what differs from run to run (ids, times): generated call ids too."""
    return [
        re.sub(r"adk-[0-9a-f-]{36}", "adk-<id>", e.model_dump_json(exclude={"id", "timestamp", "invocation_id"}))
        for e in events
    ]


def _run_both_ways(
    make: Callable[[], Any], monkeypatch: pytest.MonkeyPatch, message: Content | None = None
) -> tuple[Any, Any, list[int]]:
    """(fast outcome and history, slow outcome and history, call_tool_then calls on the fast run)."""
    direct: list[int] = []
    real = flow.call_tool_then

    def counted(*args: Any, **kwargs: Any) -> Any:
        direct.append(1)
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(flow, "call_tool_then", counted)
        runner = make()
        fast = run_collect(runner, message)
        fast_history = history(runner)
    with monkeypatch.context() as patch:
        patch.setattr(flow, "_run_call_then", _old_run_call_then)
        patch.setattr(flow, "call_tool_then", lambda *a, **k: pytest.fail("the slow path took the direct one"))
        runner = make()
        slow = run_collect(runner, message)
        slow_history = history(runner)
    assert (fast.error is None) == (slow.error is None)
    if fast.error is not None:
        assert type(fast.error) is type(slow.error) and str(fast.error) == str(slow.error)
    assert fast.completed == slow.completed
    assert _comparable(fast.events) == _comparable(slow.events)
    assert _comparable(fast_history) == _comparable(slow_history)
    return (fast, fast_history), (slow, slow_history), direct


def _model(name: str, args: str = '{"order_id": "A17"}') -> ScriptedLlm:
    return ScriptedLlm([tool_calls_turn(("call_1", name, args)), scripted_turn(*answer_chunks())])


@pytest.mark.parametrize("function", [*FUNCTIONS, "unknown"], ids=lambda f: getattr(f, "__name__", f))
def test_a_one_call_step_stores_and_emits_what_the_observable_path_did(
    function: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = [FunctionTool(_get_order)] if function == "unknown" else [FunctionTool(function)]
    name = "cancel_order" if function == "unknown" else function.__name__
    (fast, _), _, direct = _run_both_ways(lambda: make_runner(_model(name), tools=tools), monkeypatch)
    assert direct == [1]
    assert fast.error is None and fast.completed
    assert any(e.function_responses() for e in fast.events)


def test_a_long_running_tool_with_no_result_pauses_the_run_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    def start(order_id: str) -> None:
        """Start a job."""

    tool = LongRunningFunctionTool(start)
    (fast, _), _, direct = _run_both_ways(lambda: make_runner(_model("start"), tools=[tool]), monkeypatch)
    assert direct == [1]
    assert not any(e.function_responses() for e in fast.events)


def test_a_tool_asking_for_confirmation_asks_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    tool = FunctionTool(_get_order, require_confirmation=True)
    (fast, _), _, direct = _run_both_ways(lambda: make_runner(_model("_get_order"), tools=[tool]), monkeypatch)
    assert direct == [1]
    assert any(e.actions.requested_tool_confirmations for e in fast.events)


def test_a_keyboard_interrupt_ends_the_run_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupt(order_id: str) -> None:
        """Interrupt."""
        raise KeyboardInterrupt

    (fast, _), _, direct = _run_both_ways(
        lambda: make_runner(_model("interrupt"), tools=[FunctionTool(interrupt)]), monkeypatch
    )
    assert direct == [1]
    assert isinstance(fast.error, ToolError)


def test_a_step_with_a_callback_takes_the_observable_path(monkeypatch: pytest.MonkeyPatch) -> None:
    direct: list[int] = []
    monkeypatch.setattr(flow, "call_tool_then", lambda *a, **k: direct.append(1))
    runner = make_runner(
        _model("_get_order"), tools=[FunctionTool(_get_order)], before_tool_callback=lambda tool, args, ctx: None
    )
    outcome = run_collect(runner)
    assert outcome.error is None and any(e.function_responses() for e in outcome.events)
    assert direct == []


def test_a_step_under_a_span_takes_the_observable_path(telemetry: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    direct: list[int] = []
    monkeypatch.setattr(flow, "call_tool_then", lambda *a, **k: direct.append(1))
    runner = make_runner(_model("_get_order"), tools=[FunctionTool(_get_order)])
    outcome = run_collect(runner)
    assert outcome.error is None and any(e.function_responses() for e in outcome.events)
    assert direct == []
    assert "execute_tool _get_order" in {span.name for span in telemetry.spans()}


def test_disposing_while_the_tool_runs_drops_its_result_on_the_tools_own_thread() -> None:
    entered, gate, left = threading.Event(), threading.Event(), threading.Event()
    threads: list[str] = []

    def slow(order_id: str) -> dict[str, Any]:
        """Wait for the gate."""
        threads.append(threading.current_thread().name)
        entered.set()
        try:
            gate.wait(WAIT)
            return {"order_id": order_id}
        finally:
            left.set()

    pool = thread_pool_scheduler(1, "rxllm-test-tool")
    try:
        agent = LlmAgent("support", _model("slow"), tools=[FunctionTool(slow)])
        runner = InMemoryRunner(agent, app_name=APP, tool_scheduler=pool)
        runner.session_service.create_session(APP, USER, session_id=SESSION).run()
        events: list[Event] = []
        ended: list[object] = []
        subscription = runner.run_async(USER, SESSION, question(), RunConfig()).subscribe(
            events.append, ended.append, lambda: ended.append("completed")
        )
        assert entered.wait(WAIT)
        subscription.dispose()
        gate.set()
        assert left.wait(WAIT)
        drained = threading.Event()
        pool.schedule(lambda *_: drained.set())  # the one worker is past the tool's call
        assert drained.wait(WAIT)
        assert threads == ["rxllm-test-tool_0"]
        assert not any(e.function_responses() for e in events) and ended == []
        assert not any(e.function_responses() for e in history(runner))
    finally:
        pool.executor.shutdown(wait=True)


# --- usage totals -------------------------------------------------------------------------------


def _old_add_usage(total: UsageMetadata | None, usage: UsageMetadata | None) -> UsageMetadata | None:
    if usage is None:
        return total
    if total is None:
        return usage
    summed: dict[str, int | None] = {}
    for name in UsageMetadata.model_fields:
        a, b = getattr(total, name), getattr(usage, name)
        summed[name] = None if a is None and b is None else (a or 0) + (b or 0)
    return UsageMetadata(**summed)


COUNTS: list[dict[str, Any]] = [
    {},
    {"prompt_token_count": 5},
    {"prompt_token_count": 0, "candidates_token_count": 3, "total_token_count": 8},
    {"thoughts_token_count": 2, "cached_content_token_count": 1},
    {"prompt_token_count": 7, "candidates_token_count": None, "total_token_count": 9},
]


@pytest.mark.parametrize("left", COUNTS, ids=str)
@pytest.mark.parametrize("right", COUNTS, ids=str)
def test_usage_sums_are_what_validating_them_gives(
    left: dict[str, Any], right: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[int] = []
    real = prevalidated.instance

    def counted(*args: Any) -> Any:
        built.append(1)
        return real(*args)

    monkeypatch.setattr(prevalidated, "instance", counted)
    total, usage = UsageMetadata(**left), UsageMetadata(**right)
    fast, slow = add_usage(total, usage), _old_add_usage(total, usage)
    assert fast is not None and slow is not None
    assert type(fast) is UsageMetadata and fast == slow
    assert fast.__dict__ == slow.__dict__ and list(fast.__dict__) == list(slow.__dict__)
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.model_dump_json() == slow.model_dump_json() and fast.to_json() == slow.to_json()
    assert built == [1]  # built without validating


def test_usage_of_a_subclass_or_an_unvalidated_count_is_validated_as_before() -> None:
    class Mine(UsageMetadata):
        pass

    fast = add_usage(Mine(prompt_token_count=1), UsageMetadata(prompt_token_count=2))
    assert type(fast) is UsageMetadata and fast == _old_add_usage(Mine(prompt_token_count=1),
                                                                  UsageMetadata(prompt_token_count=2))
    odd = UsageMetadata.model_construct(prompt_token_count=True)  # (not an int: validation decides)
    two = UsageMetadata(prompt_token_count=2)
    assert add_usage(odd, two) == _old_add_usage(odd, two)


def test_a_runs_usage_total_is_the_validated_sum(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = make_runner(worked_example_model(), tools=[FunctionTool(_get_order, name="get_order")])
    outcome = run_collect(runner)
    assert outcome.error is None
    totals = [e.total_usage_metadata for e in outcome.events if e.total_usage_metadata is not None]
    expected = _old_add_usage(UsageMetadata(prompt_token_count=20, total_token_count=35),
                              UsageMetadata(prompt_token_count=40, total_token_count=48))
    assert totals and totals[-1] == expected
    assert totals[-1].model_fields_set == expected.model_fields_set  # type: ignore[union-attr]
