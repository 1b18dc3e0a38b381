"""FunctionTool (declarations, validation, results), Event helpers, State, RunConfig, the front door."""

from __future__ import annotations

import threading
import types
from typing import Any, Literal

import pytest
import reactivex
from pydantic import BaseModel
from reactivex import operators as ops
from reactivex.scheduler import ThreadPoolScheduler

import rxllm.agents
from rxllm import ConfigurationError, Content, FunctionDeclaration, Part, ToolError
from rxllm.agents import (
    BaseTool,
    CallbackContext,
    Event,
    EventActions,
    FunctionTool,
    InMemorySessionService,
    LlmAgent,
    RunConfig,
    Session,
    State,
    StreamingMode,
    ToolActions,
    ToolContext,
)
from rxllm.testing import ScriptedLlm


def tool_context() -> ToolContext:
    return ToolContext.standalone(function_call_id="c1")


def test_a_standalone_tool_context_needs_no_agent_run() -> None:
    state = State({"visits": 1})
    question = Content(role="user", parts=(Part.from_text("Where is A17?"),))
    first = ToolContext.standalone(
        state=state, function_call_id="c1", invocation_id="e-1", agent_name="service", user_content=question
    )
    first.state["visits"] = 2
    second = ToolContext.standalone(state=state, function_call_id="c2", invocation_id="e-1")
    assert second.state["visits"] == 2 and state.delta() == {"visits": 2}  # one state, shared by the calls given it
    assert (first.invocation_id, first.agent_name, first.function_call_id) == ("e-1", "service", "c1")
    assert first.user_content == question and second.user_content is None
    assert (first.session.id, first.session.app_name, first.session.events, first.session.state) == ("", "", (), {})
    assert first.actions == ToolActions() and isinstance(first, CallbackContext)
    fresh, other = ToolContext.standalone(), ToolContext.standalone()
    assert fresh.invocation_id.startswith("e-") and fresh.invocation_id != other.invocation_id
    assert dict(fresh.state) == {} and fresh.function_call_id is None


class Address(BaseModel):
    city: str


def ship(
    order_id: str, speed: Literal["slow", "fast"] = "slow", /, *, to: Address | None = None, n: int = 1
) -> dict[str, Any]:
    """Ship an order.

    More words about shipping.

    Args:
        order_id: The order to ship.
        speed (str): How fast. Either "slow"
            or "fast".
        to: Where to.
        n: How many.

    Returns:
        The shipment.
    """
    return {"order_id": order_id, "speed": speed, "city": to.city if to else None, "n": n}


def test_declaration_from_signature_hints_and_docstring() -> None:
    declaration = FunctionTool(ship).declaration()
    assert declaration.name == "ship"
    assert declaration.description == "Ship an order.\n\nMore words about shipping."
    parameters = declaration.parameters
    assert parameters is not None
    assert parameters["type"] == "object"
    assert parameters["required"] == ["order_id"]
    assert parameters["additionalProperties"] is False
    properties = parameters["properties"]
    assert isinstance(properties, dict)
    assert properties["order_id"] == {"type": "string", "description": "The order to ship."}
    assert properties["speed"] == {
        "type": "string",
        "enum": ["slow", "fast"],
        "default": "slow",
        "description": 'How fast. Either "slow" or "fast".',
    }
    assert properties["n"] == {"type": "integer", "default": 1, "description": "How many."}
    assert "title" not in str(parameters)


def test_run_validates_and_converts_arguments() -> None:
    tool = FunctionTool(ship)
    result = tool.run({"order_id": "A17", "speed": "fast", "to": {"city": "Oslo"}, "n": "3"}, tool_context()).run()
    assert result == {"order_id": "A17", "speed": "fast", "city": "Oslo", "n": 3}
    with pytest.raises(ToolError, match=r"invalid arguments for tool 'ship': speed: Input should be 'slow' or 'fast'"):
        tool.run({"order_id": "A17", "speed": "warp"}, tool_context()).run()


def test_a_non_dict_result_is_wrapped() -> None:
    def city() -> Address:
        return Address(city="Oslo")

    assert FunctionTool(city).run({}, tool_context()).run() == {"result": Address(city="Oslo")}
    assert FunctionTool(lambda: 0, name="zero").run({}, tool_context()).run() == {"result": 0}


def test_a_function_that_returns_nothing_answers_an_empty_dict() -> None:
    """ADK Java's ``FunctionTool``: ``null`` (or an empty ``Maybe``) answers ``{}``, not ``{"result": null}``."""
    assert FunctionTool(lambda: None, name="noop").run({}, tool_context()).run() == {}
    assert FunctionTool(lambda: reactivex.empty(), name="nothing").run({}, tool_context()).run() == {}


def test_an_observable_result_is_its_last_item() -> None:
    def count() -> reactivex.Observable[int]:
        return reactivex.of(1, 2, 3)

    assert FunctionTool(count).run({}, tool_context()).run() == {"result": 3}


def test_kwargs_functions_accept_extra_arguments() -> None:
    def anything(**kwargs: Any) -> dict[str, Any]:
        return kwargs

    assert FunctionTool(anything).run({"a": 1}, tool_context()).run() == {"a": 1}


def test_a_scheduler_runs_the_function_there() -> None:
    threads: list[str] = []

    def where() -> str:
        threads.append(threading.current_thread().name)
        return "done"

    scheduler = ThreadPoolScheduler(1)
    try:
        result = FunctionTool(where, scheduler=scheduler).run({}, tool_context()).run()
    finally:
        scheduler.executor.shutdown()
    assert result == {"result": "done"}
    assert threads and threads[0] != threading.current_thread().name


def test_refused_functions() -> None:
    async def generator() -> Any:
        yield None

    def star(*args: int) -> None:
        return None

    with pytest.raises(ConfigurationError, match="async generator"):
        FunctionTool(generator)
    with pytest.raises(ConfigurationError, match=r"\*args"):
        FunctionTool(star)
    with pytest.raises(ConfigurationError, match="tool name"):
        FunctionTool(lambda: None)  # "<lambda>" is no name a model can call
    with pytest.raises(ConfigurationError, match="two tools named"):
        LlmAgent("bot", ScriptedLlm([]), tools=[ship, ship])
    with pytest.raises(ConfigurationError, match="BaseTool or a callable"):
        LlmAgent("bot", ScriptedLlm([]), tools=["ship"])  # type: ignore[list-item]


def test_custom_base_tool_and_agent_validation() -> None:
    class Echo(BaseTool):
        def __init__(self) -> None:
            super().__init__(name="echo", description="Echo.")

        def declaration(self) -> FunctionDeclaration:
            return FunctionDeclaration(name=self.name, description=self.description)

        def run(self, args: dict[str, Any], tool_context: ToolContext) -> reactivex.Observable[dict[str, Any]]:
            return reactivex.just(args)

    agent = LlmAgent("bot", ScriptedLlm([]), tools=[Echo()])
    assert agent.tools_by_name["echo"].run({"a": 1}, tool_context()).run() == {"a": 1}
    with pytest.raises(ConfigurationError, match="identifier"):
        LlmAgent("my bot", ScriptedLlm([]))
    with pytest.raises(ConfigurationError, match="reserved"):
        LlmAgent("user", ScriptedLlm([]))


def test_event_helpers_and_is_final_response() -> None:
    call = Content(role="model", parts=(Part(text="Checking"), Part.from_function_call("f", {}, "c")))
    response = Content(role="user", parts=(Part.from_function_response("f", {"ok": True}, "c"),))
    text = Content(role="model", parts=(Part(text="Done"),))
    assert Event(author="a", content=text).is_final_response()
    assert not Event(author="a", content=text, partial=True).is_final_response()
    assert not Event(author="a", content=call).is_final_response()
    assert not Event(author="a", content=response).is_final_response()
    assert Event(author="a", content=response, actions=EventActions(skip_summarization=True)).is_final_response()
    assert Event(author="a", content=call, long_running_tool_ids=("c",)).is_final_response()
    assert Event(author="a").is_final_response()
    event = Event(author="a", content=call)
    assert event.text() == "Checking" and [c.name for c in event.function_calls()] == ["f"]
    assert Event(author="a", content=response).function_responses()[0].response == {"ok": True}
    assert Event(author="a").text() == ""
    assert Event(author="a").id != Event(author="a").id


def test_event_json_is_camel_case_and_round_trips() -> None:
    event = Event(author="a", invocation_id="e-1", partial=True, actions=EventActions(state_delta={"k": 1}))
    dumped = event.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert dumped["invocationId"] == "e-1" and dumped["actions"]["stateDelta"] == {"k": 1}
    assert Event.model_validate_json(event.model_dump_json(by_alias=True)) == event
    assert Event.model_validate_json(event.model_dump_json()) == event
    with pytest.raises(Exception, match="frozen"):
        event.partial = False  # type: ignore[misc]


def test_state_records_changes_and_only_takes_json() -> None:
    state = State({"a": 1})
    state["b"] = [1, 2]
    assert dict(state) == {"a": 1, "b": [1, 2]} and len(state) == 2
    assert state.take_delta() == {"b": [1, 2]} and not state.has_delta()
    assert state["b"] == [1, 2]
    with pytest.raises(ConfigurationError, match="JSON value"):
        state["c"] = object()  # type: ignore[assignment]


def test_run_config_defaults() -> None:
    config = RunConfig()
    assert config.streaming_mode is StreamingMode.NONE and config.max_llm_calls == 500
    assert StreamingMode("sse") is StreamingMode.SSE


def test_all_is_sorted_unique_and_complete() -> None:
    names = list(rxllm.agents.__all__)
    assert names == sorted(names) and len(names) == len(set(names))
    assert all(hasattr(rxllm.agents, name) for name in names)
    public = {
        name
        for name, value in vars(rxllm.agents).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    }
    assert public - set(names) == set()


def test_docstring_examples_run() -> None:
    import doctest
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(rxllm.agents.__path__, prefix="rxllm.agents."):
        module = importlib.import_module(info.name)
        results = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert results.failed == 0, info.name
    assert doctest.testmod(rxllm.agents).attempted > 0


def test_cold_session_service_observables_compose() -> None:
    service = InMemorySessionService()

    def session_id(session: Session) -> str:
        return session.id

    ids = service.create_session("app", "u").pipe(ops.map(session_id), ops.to_list()).run()
    assert len(ids) == 1
