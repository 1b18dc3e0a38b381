"""The whole callback set and plugins: each kind short-circuits; None, values, Observables and
``async def`` callbacks; lists run in order until one answers; plugins run first."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import reactivex
from reactivex import operators as ops
from reactivex.scheduler import NewThreadScheduler

from rxllm import (
    Chunk,
    Content,
    LlmRequest,
    LlmResponse,
    Part,
    RxLlmError,
    ToolCallFragment,
    TransportError,
)
from rxllm.agents import (
    BasePlugin,
    BaseTool,
    CallbackContext,
    Event,
    InMemoryRunner,
    InvocationContext,
    LlmAgent,
    RunConfig,
    SequentialAgent,
    StreamingMode,
    ToolContext,
)
from rxllm.testing import ScriptedLlm, scripted_turn

from .support import user_message


def text_turn(*pieces: str) -> list[LlmResponse]:
    return scripted_turn(*(Chunk(text_delta=p) for p in pieces))


def call_turn(name: str = "get_order", arguments: str = '{"order_id": "A17"}') -> list[LlmResponse]:
    return scripted_turn(Chunk(tool_call_fragments=(ToolCallFragment(0, "call_1", name, arguments),)))


def content(text: str) -> Content:
    return Content(role="model", parts=(Part.from_text(text),))


def response(text: str) -> LlmResponse:
    return LlmResponse(content=content(text))


def run(agent: Any, text: str = "hi", mode: StreamingMode = StreamingMode.NONE, **runner_options: Any) -> list[Event]:
    runner = InMemoryRunner(agent, **runner_options)
    runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
    events: list[Event] = (
        runner.run_async("u1", "s1", user_message(text), RunConfig(streaming_mode=mode)).pipe(ops.to_list()).run()
    )
    return [e for e in events if not e.partial]


def tool_calls() -> tuple[list[str], Any]:
    calls: list[str] = []

    def get_order(order_id: str) -> dict[str, str]:
        """Look an order up."""
        calls.append(order_id)
        return {"status": "shipped"}

    return calls, get_order


def as_observable(value: Any) -> reactivex.Observable[Any]:
    """An answer that arrives on another thread, as a Maybe would."""
    return reactivex.just(value).pipe(ops.subscribe_on(NewThreadScheduler()))


def as_async(value: Any) -> Any:
    async def callback(*_: Any) -> Any:
        await asyncio.sleep(0)
        return value

    return callback


STYLES = {
    "value": lambda v: lambda *_: v,
    "observable": lambda v: lambda *_: as_observable(v),
    "async": as_async,
}


# ---- every kind short-circuits, in every style ------------------------------------------------


@pytest.mark.parametrize("style", sorted(STYLES))
def test_before_agent_answer_skips_the_agent(style: str) -> None:
    model = ScriptedLlm([])
    agent = LlmAgent("bot", model, before_agent_callback=STYLES[style](content("Closed today.")))
    assert [(e.author, e.text()) for e in run(agent)] == [("bot", "Closed today.")]
    assert model.requests == []


@pytest.mark.parametrize("style", sorted(STYLES))
def test_after_agent_answer_adds_an_event(style: str) -> None:
    agent = LlmAgent("bot", ScriptedLlm([text_turn("Hi.")]), after_agent_callback=STYLES[style](content("Bye.")))
    assert [e.text() for e in run(agent)] == ["Hi.", "Bye."]


@pytest.mark.parametrize("style", sorted(STYLES))
def test_before_model_answer_skips_the_model(style: str) -> None:
    model = ScriptedLlm([])
    agent = LlmAgent("bot", model, before_model_callback=STYLES[style](response("Cached.")))
    assert [e.text() for e in run(agent, mode=StreamingMode.SSE)] == ["Cached."]
    assert model.requests == []


@pytest.mark.parametrize("style", sorted(STYLES))
def test_after_model_answer_replaces_the_response(style: str) -> None:
    agent = LlmAgent("bot", ScriptedLlm([text_turn("raw")]), after_model_callback=STYLES[style](response("edited")))
    assert [e.text() for e in run(agent)] == ["edited"]


@pytest.mark.parametrize("style", sorted(STYLES))
def test_on_model_error_answer_replaces_the_failure(style: str) -> None:
    failing = ScriptedLlm([[TransportError("connection reset")]])
    agent = LlmAgent("bot", failing, on_model_error_callback=STYLES[style](response("Try later.")))
    assert [e.text() for e in run(agent)] == ["Try later."]


@pytest.mark.parametrize("style", sorted(STYLES))
def test_before_tool_answer_skips_the_tool(style: str) -> None:
    calls, get_order = tool_calls()
    agent = LlmAgent(
        "bot",
        ScriptedLlm([call_turn(), text_turn("done")]),
        tools=[get_order],
        before_tool_callback=STYLES[style]({"status": "from cache"}),
    )
    events = run(agent)
    assert calls == []
    assert events[1].function_responses()[0].response == {"status": "from cache"}


@pytest.mark.parametrize("style", sorted(STYLES))
def test_after_tool_answer_replaces_the_result(style: str) -> None:
    calls, get_order = tool_calls()
    agent = LlmAgent(
        "bot",
        ScriptedLlm([call_turn(), text_turn("done")]),
        tools=[get_order],
        after_tool_callback=STYLES[style]({"status": "redacted"}),
    )
    events = run(agent)
    assert calls == ["A17"]
    assert events[1].function_responses()[0].response == {"status": "redacted"}


@pytest.mark.parametrize("style", sorted(STYLES))
def test_on_tool_error_answer_replaces_the_error(style: str) -> None:
    def get_order(order_id: str) -> dict[str, str]:
        """Look an order up."""
        raise LookupError("database down")

    agent = LlmAgent(
        "bot",
        ScriptedLlm([call_turn(), text_turn("done")]),
        tools=[get_order],
        on_tool_error_callback=STYLES[style]({"status": "unknown, try later"}),
    )
    events = run(agent)
    assert events[1].function_responses()[0].response == {"status": "unknown, try later"}


# ---- None continues; lists run in order until one answers; what callbacks get --------------------


def test_callbacks_returning_none_change_nothing_and_see_their_arguments() -> None:
    seen: list[tuple[str, Any]] = []
    calls, get_order = tool_calls()

    def before_tool(tool: BaseTool, args: dict[str, Any], tool_context: ToolContext) -> None:
        seen.append(("before_tool", (tool.name, args, tool_context.function_call_id)))

    def after_tool(tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, result: dict[str, Any]) -> None:
        seen.append(("after_tool", result))

    def before_model(ctx: CallbackContext, request: LlmRequest) -> None:
        seen.append(("before_model", ctx.agent_name))

    def before_agent(ctx: CallbackContext) -> None:
        ctx.state["visited"] = True

    agent = LlmAgent(
        "bot",
        ScriptedLlm([call_turn(), text_turn("done")]),
        tools=[get_order],
        before_tool_callback=before_tool,
        after_tool_callback=after_tool,
        before_model_callback=before_model,
        before_agent_callback=before_agent,
    )
    events = run(agent)
    assert [e.text() for e in events][-1] == "done" and calls == ["A17"]
    assert events[0].actions.state_delta == {"visited": True} and events[0].content is None
    assert seen == [
        ("before_model", "bot"),
        ("before_tool", ("get_order", {"order_id": "A17"}, "call_1")),
        ("after_tool", {"status": "shipped"}),
        ("before_model", "bot"),
    ]


def test_a_list_runs_in_order_until_one_answers() -> None:
    order: list[str] = []

    def first(ctx: CallbackContext, request: LlmRequest) -> None:
        order.append("first")

    def second(ctx: CallbackContext, request: LlmRequest) -> reactivex.Observable[LlmResponse]:
        order.append("second")
        return reactivex.empty()  # an empty Maybe: no answer

    async def third(ctx: CallbackContext, request: LlmRequest) -> LlmResponse:
        order.append("third")
        return response("third answered")

    def fourth(ctx: CallbackContext, request: LlmRequest) -> LlmResponse:
        order.append("fourth")
        return response("never")

    agent = LlmAgent("bot", ScriptedLlm([]), before_model_callback=[first, second, third, fourth])
    assert [e.text() for e in run(agent)] == ["third answered"]
    assert order == ["first", "second", "third"]


def test_a_callback_that_raises_fails_the_run_naming_it() -> None:
    def broken(ctx: CallbackContext) -> None:
        raise KeyError("oops")

    with pytest.raises(RxLlmError, match="before_agent_callback 'broken' of agent 'bot' raised KeyError"):
        run(LlmAgent("bot", ScriptedLlm([]), before_agent_callback=broken))


def test_a_wrong_answer_type_is_a_clear_error() -> None:
    with pytest.raises(RxLlmError, match="expected None or an LlmResponse"):
        run(LlmAgent("bot", ScriptedLlm([text_turn("x")]), after_model_callback=lambda c, r: "text"))


def test_before_agent_answer_in_a_sequence_skips_only_that_agent() -> None:
    second_model = ScriptedLlm([text_turn("second ran")])
    first = LlmAgent("first", ScriptedLlm([]), before_agent_callback=lambda ctx: content("first skipped"))
    second = LlmAgent("second", second_model)
    assert [e.text() for e in run(SequentialAgent("seq", sub_agents=[first, second]))] == [
        "first skipped",
        "second ran",
    ]


def test_async_callbacks_run_on_the_loop_the_run_was_subscribed_from() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def before_model(ctx: CallbackContext, request: LlmRequest) -> LlmResponse:
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0)
        return response("from async")

    agent = LlmAgent("bot", ScriptedLlm([]), before_model_callback=before_model)
    runner = InMemoryRunner(agent)
    runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()

    async def main() -> tuple[list[str], asyncio.AbstractEventLoop]:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        got: list[str] = []
        runner.run_async("u1", "s1", user_message("hi")).subscribe(
            lambda e: got.append(e.text()),
            lambda e: loop.call_soon_threadsafe(done.set_exception, e),
            lambda: loop.call_soon_threadsafe(done.set_result, None),
        )
        await asyncio.wait_for(done, 5)
        return got, loop

    got, caller_loop = asyncio.run(main())
    assert got == ["from async"]
    assert loops == [caller_loop]


# ---- plugins ----------------------------------------------------------------------------------


class Recorder(BasePlugin):
    def __init__(self, name: str, log: list[str], answers: dict[str, Any] | None = None) -> None:
        super().__init__(name)
        self.log = log
        self.answers = answers or {}

    def _hook(self, hook: str) -> Any:
        self.log.append(f"{self.name}.{hook}")
        return self.answers.get(hook)

    def on_user_message_callback(self, invocation_context: InvocationContext, user_message: Content) -> Any:
        return self._hook("on_user_message")

    def before_run_callback(self, invocation_context: InvocationContext) -> Any:
        return self._hook("before_run")

    def on_event_callback(self, invocation_context: InvocationContext, event: Event) -> Any:
        return self._hook("on_event")

    def after_run_callback(self, invocation_context: InvocationContext) -> Any:
        return self._hook("after_run")

    def before_agent_callback(self, agent: Any, callback_context: CallbackContext) -> Any:
        return self._hook("before_agent")

    def before_model_callback(self, callback_context: CallbackContext, llm_request: LlmRequest) -> Any:
        return self._hook("before_model")

    def before_tool_callback(self, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext) -> Any:
        return self._hook("before_tool")


def test_plugins_run_before_agent_callbacks_and_in_every_hook() -> None:
    log: list[str] = []
    _calls, get_order = tool_calls()

    def agent_before_model(ctx: CallbackContext, request: LlmRequest) -> None:
        log.append("agent.before_model")

    agent = LlmAgent(
        "bot",
        ScriptedLlm([call_turn(), text_turn("done")]),
        tools=[get_order],
        before_model_callback=agent_before_model,
    )
    events = run(agent, plugins=[Recorder("p1", log), Recorder("p2", log)])
    assert [e.text() for e in events][-1] == "done"
    assert log == [
        "p1.on_user_message",
        "p2.on_user_message",
        "p1.before_run",
        "p2.before_run",
        "p1.before_agent",
        "p2.before_agent",
        "p1.before_model",
        "p2.before_model",
        "agent.before_model",
        "p1.on_event",
        "p2.on_event",
        "p1.before_tool",
        "p2.before_tool",
        "p1.on_event",
        "p2.on_event",
        "p1.before_model",
        "p2.before_model",
        "agent.before_model",
        "p1.on_event",
        "p2.on_event",
        "p1.after_run",
        "p2.after_run",
    ]


def test_a_plugin_answer_skips_the_agents_callbacks() -> None:
    log: list[str] = []

    def agent_before_model(ctx: CallbackContext, request: LlmRequest) -> None:
        log.append("agent.before_model")

    agent = LlmAgent("bot", ScriptedLlm([]), before_model_callback=agent_before_model)
    events = run(agent, plugins=[Recorder("p1", log, {"before_model": response("plugin answered")})])
    assert [e.text() for e in events] == ["plugin answered"]
    assert "agent.before_model" not in log


def test_plugin_user_message_before_run_and_on_event_answers() -> None:
    model = ScriptedLlm([text_turn("ok")])
    runner_plugins = [
        Recorder("p", [], {"on_user_message": Content(role="user", parts=(Part.from_text("rewritten"),))})
    ]
    run(LlmAgent("bot", model), plugins=runner_plugins)
    assert [c.text() for c in model.requests[0][0].contents] == ["rewritten"]

    skipped = ScriptedLlm([])
    events = run(LlmAgent("bot", skipped), plugins=[Recorder("p", [], {"before_run": content("maintenance")})])
    assert [(e.author, e.text()) for e in events] == [("model", "maintenance")] and skipped.requests == []

    replaced = Event(author="bot", content=content("replaced"))
    events = run(LlmAgent("bot", ScriptedLlm([text_turn("ok")])), plugins=[Recorder("p", [], {"on_event": replaced})])
    assert [e.text() for e in events] == ["replaced"]


def test_after_run_waits_for_an_async_plugin() -> None:
    finished = threading.Event()

    class Flush(BasePlugin):
        async def after_run_callback(self, invocation_context: InvocationContext) -> None:
            await asyncio.sleep(0.01)
            finished.set()

    runner = InMemoryRunner(LlmAgent("bot", ScriptedLlm([text_turn("ok")])), plugins=[Flush("flush")])
    runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
    completed = threading.Event()
    runner.run_async("u1", "s1", user_message("hi")).subscribe(on_completed=completed.set)
    assert completed.wait(5)
    assert finished.is_set(), "the run completed before the plugin's after_run finished"
