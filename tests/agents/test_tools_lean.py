"""The lean tool-call path gives what the general one gives.

A result of JSON's own types within the cap is checked in one walk and answered with a
``FunctionResponse`` built without validation (``rxllm._tools._calls``); ``json_problem`` answers
such values without encoding them; ``call_tool`` starts the execution without an Observable of its
own; a one-call step's function-response event gets prevalidated actions (``flow._run_tools``).
Each is checked here against the general path: the reference functions below are the general
path as it was written before the lean one, and the agent runs compare the lean path with its
guards forced off.
"""

from __future__ import annotations

import collections
import datetime
import enum
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python
from reactivex.scheduler import ImmediateScheduler

from rxllm import Chunk, FunctionCall, FunctionResponse
from rxllm._tools import ToolContext, ToolRuntime, _calls, _execution, _json_safe, call_tool, execute_tool, json_problem
from rxllm._tools._calls import max_tool_result_bytes
from rxllm._tools._json_safe import plain_json_within
from rxllm.agents import Event, EventActions, FunctionTool, LongRunningFunctionTool
from rxllm.agents._flows import flow
from rxllm.testing import ScriptedLlm, scripted_turn

from .support import history, make_runner, run_collect, tool_calls_turn

CAP_ENV = "RXLLM_MAX_TOOL_RESULT_BYTES"


# --- the general path, as written before the lean one ----------------------------------------------


def _reference_larger_than(value: Any, cap: int) -> bool:
    total = 0
    stack = [value]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, str | bytes | bytearray):
            total += len(item) + 2
        elif isinstance(item, dict | list | tuple) and id(item) in seen:
            return False
        elif isinstance(item, dict):
            seen.add(id(item))
            total += 2 + len(item)
            for key, inner in item.items():
                stack.append(key)
                stack.append(inner)
        elif isinstance(item, list | tuple):
            seen.add(id(item))
            total += 2 + len(item)
            stack.extend(item)
        else:
            total += 8
        if total > cap:
            return True
    return False


def _reference_json_problem(value: Any) -> str | None:
    try:
        json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        return str(exc) or type(exc).__name__
    return None


def _reference_jsonable(value: Any) -> tuple[Any, str | None]:
    try:
        converted = to_jsonable_python(value)
    except (PydanticSerializationError, ValueError, TypeError, RecursionError) as exc:
        return None, str(exc) or type(exc).__name__
    problem = _reference_json_problem(converted)
    return (None, problem) if problem is not None else (converted, None)


def _reference_outcome(call: FunctionCall, result: Any) -> tuple[FunctionResponse, str | None]:
    """``outcome_of`` of the general path for a tool's last item: (response, error message)."""
    name = call.name
    if result is None:
        result = {}
    elif not isinstance(result, dict):
        result = {"result": result}

    def failure(message: str) -> tuple[FunctionResponse, str | None]:
        return FunctionResponse(id=call.id, name=call.name, response={"error": message}), message

    cap = max_tool_result_bytes()
    too_large = (
        f"tool {name!r} returned a result larger than {cap} bytes, the cap on a tool "
        "result (RXLLM_MAX_TOOL_RESULT_BYTES): return less, e.g. a summary or a page"
    )
    if _reference_larger_than(result, cap):
        return failure(too_large)
    converted, problem = _reference_jsonable(result)
    if problem is not None:
        return failure(f"tool {name!r} returned a value that is not JSON: {problem}")
    if converted is not result and _reference_larger_than(converted, cap):
        return failure(too_large)
    try:
        return FunctionResponse(id=call.id, name=call.name, response=converted), None
    except ValidationError as exc:
        return failure(f"tool {name!r} returned a value that is not JSON: {exc}")


def _shape(value: Any) -> Any:
    """``value`` with every type spelled out (``1 == 1.0 == True`` must not hide a difference)."""
    if isinstance(value, dict):
        return ("dict", [(_shape(k), _shape(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [_shape(v) for v in value])
    return (type(value).__name__, repr(value))


# --- values ------------------------------------------------------------------------------------------


class Colour(enum.StrEnum):
    RED = "red"


class Size(enum.IntEnum):
    BIG = 3


class Order(BaseModel):
    order_id: str
    total: float


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def _values() -> Iterator[tuple[str, Any]]:
    shared = ["x" * 5, 1]
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    yield "order", {"order_id": "A17", "status": "shipped", "shipped_on": "Tuesday"}
    yield "empty", {}
    yield "none", None
    yield "scalars", {"s": "x", "i": -7, "f": 2.5, "neg_zero": -0.0, "t": True, "f0": False, "n": None}
    yield "nested", {"a": [1, 2.5, True, None, {"b": (1, "two", [3.0])}], "c": {"d": {"e": []}}}
    yield "tuple", (1, "a", (2, 3))
    yield "list", [{"k": "v"}, [1, 2]]
    yield "text", "just text"
    yield "int", 42
    yield "bool", True
    yield "float", 1e308
    yield "nan", {"x": float("nan")}
    yield "inf", {"x": [1.0, float("inf")]}
    yield "-inf", {"x": float("-inf")}
    yield "long int", {"n": 10**700}
    yield "599 digits", {"n": 10**598, "m": -(10**598)}
    yield "lone surrogate", {"text": "caf\udce9"}
    yield "lone surrogate key", {"caf\udce9": 1}
    yield "non-ascii", {"text": "café 日本", "clé": "ü"}
    yield "int key", {1: "x"}
    yield "none key", {None: 1}
    yield "float key", {1.5: 2}
    yield "nan key", {float("nan"): 2}
    yield "bool key", {True: 1}
    yield "tuple key", {(1, 2): 1}
    yield "shared", {"a": shared, "b": shared}
    yield "cycle", cycle
    yield "depth 63", {"d": _nested(62)}
    yield "depth 64", {"d": _nested(63)}
    yield "depth 70", {"d": _nested(69)}
    yield "str enum", {"c": Colour.RED}
    yield "int enum", {"s": Size.BIG}
    yield "date", {"when": datetime.date(2020, 1, 2)}
    yield "model", {"order": Order(order_id="A17", total=3.5)}
    yield "model result", Order(order_id="A17", total=3.5)
    yield "set", {"s": {1, 2}}
    yield "bytes", {"b": b"raw"}
    yield "object", {"o": object()}
    yield "ordered dict", {"o": collections.OrderedDict(a=1)}
    yield "dict subclass result", collections.OrderedDict(a=1, b=[2])
    yield "big", {"items": ["x" * 40] * 3}


VALUES = list(_values())
CAPS = [None, 1, 2, 3, 12, 30, 31, 32, 60, 100, 10_000]


def _ran(tool: Any, call: FunctionCall, **options: Any) -> _calls.ToolCallOutcome:
    runtime = ToolRuntime(scheduler=ImmediateScheduler())
    outcomes: list[_calls.ToolCallOutcome] = []
    call_tool({call.name: tool}, call, ToolContext.standalone(function_call_id=call.id), runtime=runtime, **options
              ).subscribe(outcomes.append)
    assert len(outcomes) == 1
    return outcomes[0]


def _returning(value: Any) -> FunctionTool:
    def produce() -> Any:
        """Return the value."""
        return value

    return FunctionTool(produce)


def _wrapped(value: Any) -> Any:
    """What a FunctionTool emits for ``value`` (``_tool._wrap``)."""
    if value is None:
        return {}
    if isinstance(value, collections.abc.Mapping):
        return dict(value)
    return {"result": value}


@pytest.mark.parametrize("cap", CAPS)
@pytest.mark.parametrize(("label", "value"), VALUES, ids=[label for label, _ in VALUES])
def test_an_outcome_is_the_general_paths_for_every_value_and_cap(
    label: str, value: Any, cap: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if cap is None:
        monkeypatch.delenv(CAP_ENV, raising=False)
    else:
        monkeypatch.setenv(CAP_ENV, str(cap))
    call = FunctionCall(id="call_1", name="produce", args={})
    expected, expected_error = _reference_outcome(call, _wrapped(value))
    outcome = _ran(_returning(value), call)
    assert outcome.error_message == expected_error
    assert outcome.response.model_dump() == expected.model_dump()
    assert _shape(outcome.response.response) == _shape(expected.response)
    assert outcome.response.model_fields_set == expected.model_fields_set
    assert outcome.response.to_json() == expected.to_json()
    assert type(outcome.response) is FunctionResponse


@pytest.mark.parametrize(("label", "value"), VALUES, ids=[label for label, _ in VALUES])
def test_json_problem_is_the_encoders_answer(label: str, value: Any) -> None:
    assert json_problem(value) == _reference_json_problem(value)
    assert json_problem(_wrapped(value)) == _reference_json_problem(_wrapped(value))


def test_the_walk_answers_only_for_json_of_its_own_types_within_the_cap() -> None:
    order = {"order_id": "A17", "status": "shipped"}
    size = 2 + 2 + sum(len(k) + 2 + len(v) + 2 for k, v in order.items())
    assert plain_json_within(order, size)
    assert not plain_json_within(order, size - 1)
    assert not plain_json_within({"x": float("nan")}, 10**9)
    assert not plain_json_within({"x": Colour.RED}, 10**9)  # a subclass: the general path decides
    assert not plain_json_within({1: "x"}, 10**9)
    assert not plain_json_within("text", 10**9)  # a leaf at the top: not a tree it answers for
    shared = [1]
    assert not plain_json_within({"a": shared, "b": shared}, 10**9)
    assert plain_json_within({"d": _nested(63)}, 10**9)
    assert not plain_json_within({"d": _nested(64)}, 10**9)


def test_a_huge_result_is_refused_without_walking_it_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CAP_ENV, "1000")
    big = {"items": list(range(10_000))}
    assert not plain_json_within(big, 1000)
    outcome = _ran(_returning(big), FunctionCall(id="c", name="produce", args={}))
    assert outcome.failed and "larger than 1000 bytes" in (outcome.error_message or "")


# --- errors, async and the Observable path --------------------------------------------------------


def _outcomes_both_ways(tool: Any, call: FunctionCall) -> tuple[_calls.ToolCallOutcome, _calls.ToolCallOutcome]:
    """The outcome of the default (started) execution, and of the same execution through its Observable."""
    runtime = ToolRuntime(scheduler=ImmediateScheduler())

    def through_observable(t: Any, args: dict[str, Any], context: ToolContext) -> Any:
        return execute_tool(t, args, context, runtime)

    return _ran(tool, call), _ran(tool, call, execute=through_observable)


def _same(one: _calls.ToolCallOutcome, other: _calls.ToolCallOutcome) -> None:
    assert one.response.model_dump() == other.response.model_dump()
    assert one.error_message == other.error_message
    assert type(one.error) is type(other.error)
    assert str(one.error) == str(other.error)
    assert type(getattr(one.error, "__cause__", None)) is type(getattr(other.error, "__cause__", None))


def test_a_raising_tool_answers_the_same_error_both_ways() -> None:
    def explode(order_id: str) -> dict[str, str]:
        """Fail."""
        raise ValueError(f"no order {order_id}")

    call = FunctionCall(id="call_1", name="explode", args={"order_id": "A17"})
    lean, general = _outcomes_both_ways(FunctionTool(explode), call)
    _same(lean, general)
    assert lean.failed and lean.error_message == "tool 'explode' raised ValueError: no order A17"


def test_bad_arguments_and_system_exit_answer_the_same_error_both_ways() -> None:
    def leave(order_id: int) -> dict[str, str]:
        """Exit."""
        raise SystemExit(2)

    for args in ({"order_id": "not a number"}, {"order_id": 3}):
        call = FunctionCall(id="call_1", name="leave", args=args)
        lean, general = _outcomes_both_ways(FunctionTool(leave), call)
        _same(lean, general)
        assert lean.failed


def test_a_keyboard_interrupt_fails_the_call_the_same_way_both_ways() -> None:
    def interrupt() -> None:
        """Interrupt."""
        raise KeyboardInterrupt

    call = FunctionCall(id="call_1", name="interrupt", args={})
    errors: list[list[Exception]] = []
    for execute in (None, lambda t, a, c: execute_tool(t, a, c, ToolRuntime(scheduler=ImmediateScheduler()))):
        seen: list[Exception] = []
        call_tool(
            {"interrupt": FunctionTool(interrupt)},
            call,
            ToolContext.standalone(),
            runtime=ToolRuntime(scheduler=ImmediateScheduler()),
            execute=execute,
        ).subscribe(lambda _: pytest.fail("no outcome"), seen.append)
        errors.append(seen)
    (lean,), (general,) = errors
    assert type(lean) is type(general) and str(lean) == str(general)
    assert isinstance(lean.__cause__, KeyboardInterrupt)


def test_an_async_tool_answers_the_same_both_ways() -> None:
    async def fetch(order_id: str) -> dict[str, Any]:
        """Fetch an order."""
        return {"order_id": order_id, "lines": [1, 2]}

    call = FunctionCall(id="call_1", name="fetch", args={"order_id": "A17"})
    for _ in range(2):
        done = threading.Event()
        got: list[_calls.ToolCallOutcome] = []

        def keep(outcome: _calls.ToolCallOutcome, got: list[Any] = got, done: threading.Event = done) -> None:
            got.append(outcome)
            done.set()

        call_tool({"fetch": FunctionTool(fetch)}, call, ToolContext.standalone(),
                  runtime=ToolRuntime(scheduler=ImmediateScheduler())).subscribe(keep)
        assert done.wait(10)
        expected, _ = _reference_outcome(call, {"order_id": "A17", "lines": [1, 2]})
        assert got[0].response.model_dump() == expected.model_dump()
        assert not got[0].failed


def test_a_tool_that_completes_without_a_result_answers_the_same_both_ways() -> None:
    import reactivex

    from rxllm.agents import BaseTool

    class Silent(BaseTool):
        def __init__(self) -> None:
            super().__init__(name="silent", description="Nothing.")

        def run(self, args: dict[str, Any], tool_context: Any) -> Any:
            return reactivex.empty()

    lean, general = _outcomes_both_ways(Silent(), FunctionCall(id="c", name="silent", args={}))
    _same(lean, general)
    assert lean.error_message == "tool 'silent' completed without a result"


def test_a_disposed_call_delivers_nothing_and_runs_nothing_on_a_pool() -> None:
    from rxllm._tools._execution import start_tool

    ran: list[int] = []
    delivered: list[Any] = []

    def work() -> dict[str, int]:
        """Work."""
        ran.append(1)
        return {"n": 1}

    class Held(ImmediateScheduler):  # keeps the action: it runs when the test says
        actions: ClassVar[list[Any]] = []

        def schedule(self, action: Any, state: Any = None) -> Any:
            Held.actions.append(action)
            from reactivex.disposable import Disposable

            return Disposable()

    where = ToolRuntime(scheduler=Held())
    disposable = start_tool(FunctionTool(work), {}, ToolContext.standalone(), where, delivered.append)
    assert Held.actions and not ran
    disposable.dispose()
    Held.actions[0](where.scheduler, None)
    assert not ran and not delivered


# --- the agent's function-response events, lean and with every guard off ---------------------------


def _general(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every lean path's guard forced off: the general path runs."""
    never: Callable[[Any, int], bool] = lambda value, cap: False  # noqa: E731
    monkeypatch.setattr(_calls, "plain_json_within", never)
    monkeypatch.setattr(_json_safe, "plain_json_within", never)
    monkeypatch.setattr(_calls, "_RESPONSE_TEMPLATE", None)
    monkeypatch.setattr(flow, "new_actions", EventActions)

    class NotImmediate:  # no scheduler is this type: every tool goes through schedule
        pass

    monkeypatch.setattr(_execution, "ImmediateScheduler", NotImmediate)


def _fields(value: Any) -> Any:
    """Every model's set fields and values (ids and times left out, fresh call ids only counted), nested."""
    fresh = {"id", "timestamp", "invocation_id"}
    if isinstance(value, BaseModel):
        values: dict[str, Any] = {}
        for name in type(value).model_fields:
            if name == "long_running_tool_ids":
                values[name] = len(getattr(value, name) or ())
            elif name not in fresh:
                values[name] = _fields(getattr(value, name))
        return type(value).__name__, sorted(value.model_fields_set - fresh), values
    if isinstance(value, dict):
        return {k: _fields(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_fields(v) for v in value]
    return _shape(value)


def _turn(tools: list[Any], calls: list[tuple[str, str, str]]) -> tuple[list[Event], tuple[Event, ...]]:
    model = ScriptedLlm([tool_calls_turn(*calls), scripted_turn(Chunk(text_delta="done"))],
                        scheduler=ImmediateScheduler())
    runner = make_runner(model, tools=tools)
    outcome = run_collect(runner)
    assert outcome.error is None and outcome.completed
    return outcome.events, history(runner)


def _scenarios() -> Iterator[tuple[str, list[Any], list[tuple[str, str, str]]]]:
    def get_order(order_id: str) -> dict[str, Any]:
        """Look an order up."""
        return {"order_id": order_id, "status": "shipped", "lines": [{"sku": "x", "n": 2}]}

    def explode(order_id: str) -> dict[str, Any]:
        """Fail."""
        raise RuntimeError("the order service is down")

    def not_json(order_id: str) -> dict[str, Any]:
        """Answer NaN."""
        return {"total": float("nan")}

    async def fetch(order_id: str) -> dict[str, Any]:
        """Fetch."""
        return {"order_id": order_id}

    def start(order_id: str) -> None:
        """Start a long job."""
        return None

    def status(order_id: str) -> dict[str, str]:
        """Start a long job and report."""
        return {"status": "pending"}

    def remember(order_id: str, tool_context: ToolContext) -> dict[str, str]:
        """Remember the order and end the turn."""
        tool_context.state["last_order"] = [order_id, {"seen": True}]
        tool_context.actions.skip_summarization = True
        return {"ok": "yes"}

    def escalate(order_id: str, tool_context: ToolContext) -> dict[str, str]:
        """Escalate and end the invocation."""
        tool_context.actions.escalate = True
        tool_context.actions.end_invocation = True
        return {}

    def odd_transfer(order_id: str, tool_context: ToolContext) -> dict[str, str]:
        """A transfer that is not a name (the event's validation decides)."""
        tool_context.actions.transfer_to_agent = ""
        return {"result": "x"}

    args = '{"order_id": "A17"}'
    yield "ordinary", [get_order], [("call_1", "get_order", args)]
    yield "raising", [explode], [("call_1", "explode", args)]
    yield "not JSON", [not_json], [("call_1", "not_json", args)]
    yield "async", [fetch], [("call_1", "fetch", args)]
    yield "long-running, no result", [LongRunningFunctionTool(start)], [("call_1", "start", args)]
    yield "long-running, a status", [LongRunningFunctionTool(status)], [("call_1", "status", args)]
    yield "state and skip", [remember], [("call_1", "remember", args)]
    yield "escalate", [escalate], [("call_1", "escalate", args)]
    yield "empty transfer", [odd_transfer], [("call_1", "odd_transfer", args)]
    yield "two calls", [get_order, explode], [("call_1", "get_order", args), ("call_2", "explode", args)]
    yield "unknown tool", [get_order], [("call_1", "cancel_order", args)]
    yield "confirmation", [FunctionTool(get_order, require_confirmation=True)], [("call_1", "get_order", args)]


SCENARIOS = list(_scenarios())


@pytest.mark.parametrize(("label", "tools", "calls"), SCENARIOS, ids=[label for label, _, _ in SCENARIOS])
@pytest.mark.parametrize("cap", [None, 20])
def test_an_agent_turn_gives_the_general_paths_events(
    label: str, tools: list[Any], calls: list[tuple[str, str, str]], cap: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if cap is not None:
        monkeypatch.setenv(CAP_ENV, str(cap))
    lean_events, lean_history = _turn(tools, calls)
    with monkeypatch.context() as general:
        _general(general)
        general_events, general_history = _turn(tools, calls)
    assert [_fields(e) for e in lean_events] == [_fields(e) for e in general_events]
    assert [_fields(e) for e in lean_history] == [_fields(e) for e in general_history]
    assert [r.id for e in lean_history for r in e.function_responses()] == [
        r.id for e in general_history for r in e.function_responses()
    ]
    responses = [e for e in lean_history if e.function_responses()]
    ids = [e.id for e in lean_history]
    assert len(set(ids)) == len(ids)
    if label == "ordinary":
        (event,) = responses
        (response,) = event.function_responses()
        assert type(response) is FunctionResponse
        expected = {"order_id": "A17", "status": "shipped", "lines": [{"sku": "x", "n": 2}]}
        assert response.response == (expected if cap is None else response.response)
        assert event.actions == EventActions(
            state_delta={},
            artifact_delta={},
            requested_tool_confirmations={},
        )
        assert event.actions.model_fields_set == EventActions(
            state_delta={},
            skip_summarization=None,
            escalate=None,
            end_invocation=None,
            artifact_delta={},
            transfer_to_agent=None,
            requested_tool_confirmations={},
        ).model_fields_set


# --- the state's delta and the running loop, without their checks' calls ----------------------------


def test_a_state_delta_is_taken_the_same_with_nothing_read_or_changed_in_place() -> None:
    from rxllm._tools import State

    state = State({"rolls": [3], "visits": 1})
    assert not state.has_delta()
    first = state.take_delta()
    assert first == {} and type(first) is dict and first is not state.take_delta()
    rolls = state["rolls"]
    assert isinstance(rolls, list)
    rolls.append(21)  # read, then changed in place: in the delta as if assigned
    assert state.has_delta()
    assert state.take_delta() == {"rolls": [3, 21]}
    assert not state.has_delta() and state.take_delta() == {}
    state["visits"] = 2
    taken = state.take_delta()
    assert taken == {"visits": 2} and state["visits"] == 2


def test_running_loop_is_the_running_loop_or_none() -> None:
    import asyncio

    from rxllm._tools import running_loop

    assert running_loop() is None

    async def inside() -> object:
        return running_loop() is asyncio.get_running_loop()

    assert asyncio.run(inside()) is True


def test_a_huge_text_past_the_cap_is_refused_without_being_encoded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CAP_ENV, "1000")
    encoded: list[str] = []
    real = _json_safe._encodes

    def counting(text: str) -> bool:
        encoded.append(text)
        return real(text)

    monkeypatch.setattr(_json_safe, "_encodes", counting)
    huge = "é" * 5000
    assert not plain_json_within({"text": huge}, 1000)
    assert not plain_json_within({huge: 1}, 1000)
    assert encoded == []
    assert plain_json_within({"text": "é" * 10}, 1000) and encoded == ["é" * 10]
    outcome = _ran(_returning({"text": huge}), FunctionCall(id="c", name="produce", args={}))
    assert outcome.failed and "larger than 1000 bytes" in (outcome.error_message or "")
