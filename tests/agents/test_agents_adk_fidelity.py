"""What a ported ADK app's model calls receive and what its run stores, as ADK Java does it: the
identity instruction, ``temp:`` state within an invocation, ``output_schema`` with tools and
transfer, the events of custom agents, a tool that returns nothing, ADK-Python-style hooks, and
parallel branches whatever the model's threading."""

from __future__ import annotations

import inspect
import threading
from typing import Any

import pytest
import reactivex
from pydantic import BaseModel
from reactivex import abc as rx_abc
from reactivex import operators as ops
from reactivex.disposable import Disposable

from rxllm import BaseLlm, Chunk, ConfigurationError, Content, LlmRequest, LlmResponse, Part, ToolCallFragment
from rxllm.agents import (
    BaseAgent,
    BasePlugin,
    BaseTool,
    CallbackContext,
    Event,
    EventActions,
    InMemoryRunner,
    InvocationContext,
    LlmAgent,
    ParallelAgent,
    RunConfig,
    SequentialAgent,
    StreamingMode,
    ToolContext,
)
from rxllm.agents._flows.output_schema import SET_MODEL_RESPONSE_INSTRUCTION
from rxllm.agents._flows.transfer import transfer_instruction
from rxllm.testing import ScriptedLlm, scripted_turn

from .support import user_message


def text_turn(*pieces: str) -> list[LlmResponse]:
    return scripted_turn(*(Chunk(text_delta=p) for p in pieces))


def call_turn(name: str, arguments: str, call_id: str = "call_1") -> list[LlmResponse]:
    return scripted_turn(Chunk(tool_call_fragments=(ToolCallFragment(0, call_id, name, arguments),)))


def run(runner: InMemoryRunner, text: str, mode: StreamingMode = StreamingMode.NONE, **config: Any) -> list[Event]:
    if not runner.session_service.get_session(runner.app_name, "u1", "s1").pipe(ops.to_list()).run():
        runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
    events: list[Event] = (
        runner.run_async("u1", "s1", user_message(text), RunConfig(streaming_mode=mode, **config))
        .pipe(ops.to_list())
        .run()
    )
    return [e for e in events if not e.partial]


def stored(runner: InMemoryRunner) -> tuple[Event, ...]:
    return runner.session_service.get_session(runner.app_name, "u1", "s1").run().events


def system_text(request: LlmRequest) -> str:
    instruction = request.config.system_instruction
    return instruction.text() if instruction is not None else ""


def declared_tools(request: LlmRequest) -> list[str]:
    return [d.name for d in request.config.function_declarations()]


# ---- the identity instruction (ADK Java's Identity) ----------------------------------------------


def test_every_request_carries_the_identity_instruction_after_the_instructions_and_before_transfer() -> None:
    billing_model = ScriptedLlm([text_turn("Refunded.")])
    billing = LlmAgent("billing", billing_model, description="Invoices and refunds.", instruction="Bill.")
    router_model = ScriptedLlm([call_turn("transfer_to_agent", '{"agent_name": "billing"}')])
    router = LlmAgent("router", router_model, global_instruction="Be kind.", instruction="Route.", sub_agents=[billing])
    run(InMemoryRunner(router), "refund?")

    # the order of ADK Java's request processors: Instructions (global, own), Identity, AgentTransfer
    assert system_text(router_model.requests[0][0]) == (
        'Be kind.\n\nRoute.\n\nYou are an agent. Your internal name is "router".\n\n'
        + transfer_instruction(router, [billing])
    )
    assert system_text(billing_model.requests[0][0]) == (
        'Be kind.\n\nBill.\n\nYou are an agent. Your internal name is "billing". The description about you is '
        '"Invoices and refunds.".\n\n' + transfer_instruction(billing, [router])
    )


def test_transfer_to_agent_is_declared_as_adk_java_declares_it() -> None:
    billing = LlmAgent("billing", ScriptedLlm([text_turn("Refunded.")]), description="Invoices.")
    router_model = ScriptedLlm([call_turn("transfer_to_agent", '{"agent_name": "billing"}')])
    run(InMemoryRunner(LlmAgent("router", router_model, sub_agents=[billing])), "refund?")

    declarations = router_model.requests[0][0].config.function_declarations()
    (declaration,) = [d for d in declarations if d.name == "transfer_to_agent"]
    # AgentTransfer.transferToAgent's @Schema text block, its indentation and trailing spaces included
    assert declaration.description == (
        "Transfer the question to another agent.\n\n"
        "  This tool hands off control to another agent when it's more suitable to\n"
        "  answer the user's question according to the agent's description.\n\n"
        "  Args:\n"
        "    agent_name: the agent name to transfer to.\n"
        "  "
    )
    # @Schema(name = "agent_name") String: no description of its own, no enum of the targets
    assert declaration.parameters is not None
    assert declaration.parameters["properties"] == {"agent_name": {"type": "string"}}
    assert declaration.parameters["required"] == ["agent_name"]


def test_an_agent_without_instruction_still_gets_its_identity() -> None:
    model = ScriptedLlm([text_turn("Hi.")])
    run(InMemoryRunner(LlmAgent("lonely", model)), "hello")
    assert system_text(model.requests[0][0]) == 'You are an agent. Your internal name is "lonely".'


# ---- a tool that returns nothing (ADK Java's FunctionTool) ---------------------------------------


def test_a_tool_that_returns_nothing_answers_an_empty_dict_in_the_session_and_the_next_request() -> None:
    done: list[str] = []

    def archive(order_id: str) -> None:
        """Archive an order."""
        done.append(order_id)

    model = ScriptedLlm([call_turn("archive", '{"order_id": "A17"}'), text_turn("Archived.")])
    runner = InMemoryRunner(LlmAgent("clerk", model, tools=[archive]))
    run(runner, "archive A17")

    assert done == ["A17"]
    responses = [r for e in stored(runner) for r in e.function_responses()]
    assert [(r.name, r.response) for r in responses] == [("archive", {})]
    last = model.requests[1][0].contents[-1]
    assert [p.function_response.response for p in last.parts if p.function_response] == [{}]


# ---- temp: state lives for the invocation (ADK Java's in-memory session), never stored -----------


def test_temp_state_a_tool_writes_is_seen_by_the_rest_of_the_invocation_and_never_stored() -> None:
    def jot(note: str, tool_context: ToolContext) -> dict[str, str]:
        """Jot a note down."""
        tool_context.state["temp:scratch"] = note
        tool_context.state["kept"] = "yes"
        return {"status": "ok"}

    writer_model = ScriptedLlm([call_turn("jot", '{"note": "draft-1"}'), text_turn("Jotted."), text_turn("Again.")])
    writer = LlmAgent("writer", writer_model, instruction="Scratch: {temp:scratch?}", tools=[jot])
    reader_model = ScriptedLlm([text_turn("Read."), text_turn("Nothing.")])
    reader = LlmAgent("reader", reader_model, instruction="Scratch: {temp:scratch?}")
    runner = InMemoryRunner(SequentialAgent("pipeline", sub_agents=[writer, reader]))
    run(runner, "note it")

    def scratch(request: LlmRequest) -> str:
        return system_text(request).split("\n\n")[0]

    # the writer's next model call and the next agent of the invocation see the value
    assert [scratch(r) for r, _ in writer_model.requests] == ["Scratch: ", "Scratch: draft-1"]
    assert scratch(reader_model.requests[0][0]) == "Scratch: draft-1"
    # never stored: not in the session's state nor in any stored event's delta
    session = runner.session_service.get_session(runner.app_name, "u1", "s1").run()
    assert session.state == {"kept": "yes"}
    assert all(not k.startswith("temp:") for e in session.events for k in e.actions.state_delta)
    # the next invocation starts without it
    run(runner, "again")
    assert scratch(writer_model.requests[2][0]) == "Scratch: "


# ---- output_schema: transfer offered; with tools, set_model_response (ADK Java's OutputSchema) ---


class Forecast(BaseModel):
    city: str
    celsius: int


def weather(city: str) -> dict[str, Any]:
    """Look the weather up."""
    return {"city": city, "celsius": 21}


def test_output_schema_with_tools_answers_through_set_model_response() -> None:
    model = ScriptedLlm(
        [
            call_turn("weather", '{"city": "Oslo"}'),
            call_turn("set_model_response", '{"city": "Oslo", "celsius": 21}', call_id="call_2"),
        ]
    )
    agent = LlmAgent("forecaster", model, instruction="Forecast.", tools=[weather], output_schema=Forecast,
                     output_key="forecast")
    runner = InMemoryRunner(agent)
    events = run(runner, "Weather in Oslo?", StreamingMode.SSE)

    request = model.requests[0][0]
    assert declared_tools(request) == ["set_model_response", "weather"]
    assert request.config.response_schema is None and request.config.response_mime_type is None
    assert system_text(request) == (
        SET_MODEL_RESPONSE_INSTRUCTION + '\n\nForecast.\n\nYou are an agent. Your internal name is "forecaster".'
    )
    declaration = next(d for d in request.config.function_declarations() if d.name == "set_model_response")
    assert declaration.parameters is not None and declaration.parameters["required"] == ["city", "celsius"]
    # the call's result is its arguments; a final model event carries them as JSON; output_key the object
    final = events[-1]
    assert final.is_final_response() and final.author == "forecaster" and final.content is not None
    assert final.content.role == "model" and final.text() == '{"city":"Oslo","celsius":21}'
    assert final.actions.state_delta == {"forecast": {"city": "Oslo", "celsius": 21}}
    assert [r.response for e in events for r in e.function_responses()] == [
        {"city": "Oslo", "celsius": 21},
        {"city": "Oslo", "celsius": 21},
    ]
    assert stored(runner)[-1].text() == '{"city":"Oslo","celsius":21}'
    assert len(model.requests) == 2  # the structured answer ends the run
    assert runner.session_service.get_session(runner.app_name, "u1", "s1").run().state["forecast"] == {
        "city": "Oslo",
        "celsius": 21,
    }


def test_a_set_model_response_call_that_does_not_validate_answers_an_error_and_the_model_tries_again() -> None:
    model = ScriptedLlm(
        [
            call_turn("set_model_response", '{"city": "Oslo", "celsius": "warm"}'),
            call_turn("set_model_response", '{"city": "Oslo", "celsius": 21}', call_id="call_2"),
        ]
    )
    agent = LlmAgent("forecaster", model, tools=[weather], output_schema=Forecast)
    events = run(InMemoryRunner(agent), "Weather in Oslo?")
    first = events[1].function_responses()[0].response
    assert "does not match the schema Forecast" in str(first["error"]) and "celsius" in str(first["error"])
    assert events[-1].text() == '{"city":"Oslo","celsius":21}'
    assert len(model.requests) == 2


def test_an_output_schema_agent_is_offered_transfer_as_any_other() -> None:
    judge_model = ScriptedLlm([text_turn('{"city": "Oslo", "celsius": 21}')])
    judge = LlmAgent("judge", judge_model, description="Judges.", output_schema=Forecast)
    helper = LlmAgent("helper", ScriptedLlm([text_turn("Helped.")]), description="Helps.")
    router = LlmAgent(
        "router", ScriptedLlm([call_turn("transfer_to_agent", '{"agent_name": "judge"}')]), sub_agents=[judge, helper]
    )
    run(InMemoryRunner(router), "judge it")
    request = judge_model.requests[0][0]
    assert declared_tools(request) == ["transfer_to_agent"]
    assert transfer_instruction(judge, [router, helper]) in system_text(request)
    assert request.config.response_schema is Forecast  # no tools of its own: the schema goes in the request


# ---- the events of any agent are stored (ADK Java's Runner appends every non-partial event) ------


class Greeter(BaseAgent):
    """A custom agent ported literally from Java: it only emits its events."""

    def _run_async_impl(self, ctx: InvocationContext) -> reactivex.Observable[Event]:
        def event(text: str, *, partial: bool = False, **delta: Any) -> Event:
            return Event(
                invocation_id=ctx.invocation_id,
                author=self.name,
                branch=ctx.branch,
                partial=partial or None,
                content=Content(role="model", parts=(Part.from_text(text),)),
                actions=EventActions(state_delta=delta),
            )

        return reactivex.from_iterable([event("Hel", partial=True), event("Hello.", greeted="yes")])


class SelfStoring(BaseAgent):
    """A custom agent that stores its event itself (rxllm's contract) and emits the stored event."""

    def _run_async_impl(self, ctx: InvocationContext) -> reactivex.Observable[Event]:
        event = Event(
            invocation_id=ctx.invocation_id,
            author=self.name,
            content=Content(role="model", parts=(Part.from_text("Stored by me."),)),
        )
        return ctx.append_event(event)


def test_the_events_a_custom_agent_only_emits_are_stored_once_before_the_next_agent_runs() -> None:
    reader_model = ScriptedLlm([text_turn("Read.")])
    reader = LlmAgent("reader", reader_model, instruction="Greeted: {greeted}")
    runner = InMemoryRunner(SequentialAgent("pipeline", sub_agents=[Greeter("greeter"), SelfStoring("keeper"), reader]))
    emitted = run(runner, "hi", StreamingMode.SSE)

    assert [(e.author, e.text()) for e in stored(runner)] == [
        ("user", "hi"),
        ("greeter", "Hello."),  # the partial is not stored
        ("keeper", "Stored by me."),  # stored once, by the agent itself
        ("reader", "Read."),
    ]
    assert [e.id for e in emitted] == [e.id for e in stored(runner)[1:]]  # what is emitted is what was stored
    assert runner.session_service.get_session(runner.app_name, "u1", "s1").run().state == {"greeted": "yes"}
    # the next agent's request was built after the store: the state and the greeting are in it
    request = reader_model.requests[0][0]
    assert system_text(request).startswith("Greeted: yes")
    assert "[greeter] said: Hello." in [p.text for c in request.contents for p in c.parts]


# ---- hooks with ADK Python's keyword names as well as positional (Java's order) ----------------


class PythonStylePlugin(BasePlugin):
    """A plugin written for ADK Python: keyword-only hooks, some ``async def``."""

    def __init__(self) -> None:
        super().__init__("python_style")
        self.seen: list[tuple[str, Any]] = []

    async def on_user_message_callback(self, *, invocation_context: InvocationContext, user_message: Content) -> None:
        self.seen.append(("user_message", user_message.parts[0].text))

    def before_run_callback(self, *, invocation_context: InvocationContext) -> None:
        self.seen.append(("before_run", invocation_context.agent.name))

    def on_event_callback(self, *, invocation_context: InvocationContext, event: Event) -> None:
        self.seen.append(("event", event.author))

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        self.seen.append(("after_run", invocation_context.agent.name))

    def before_agent_callback(self, *, agent: BaseAgent, callback_context: CallbackContext) -> None:
        self.seen.append(("before_agent", agent.name))

    def after_agent_callback(self, *, agent: BaseAgent, callback_context: CallbackContext) -> None:
        self.seen.append(("after_agent", callback_context.agent_name))

    async def before_model_callback(self, *, callback_context: CallbackContext, llm_request: LlmRequest) -> None:
        self.seen.append(("before_model", len(llm_request.contents)))

    def after_model_callback(self, *, callback_context: CallbackContext, llm_response: LlmResponse) -> None:
        self.seen.append(("after_model", llm_response.partial))

    def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> None:
        self.seen.append(("before_tool", (tool.name, tool_args)))

    def after_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext, result: dict[str, Any]
    ) -> None:
        self.seen.append(("after_tool", result))


class PythonHooks:
    """ADK Python keyword-only hooks in a mixin that is not a plugin itself."""

    seen: list[tuple[str, Any]]

    async def before_model_callback(self, *, callback_context: CallbackContext, llm_request: LlmRequest) -> None:
        self.seen.append(("before_model", callback_context.agent_name))

    def after_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext, result: dict[str, Any]
    ) -> dict[str, Any]:
        return {**result, "audited": tool.name}


class MixedInPlugin(PythonHooks, BasePlugin):
    def __init__(self) -> None:
        super().__init__("mixed_in")
        self.seen = []


class LaterPlugin(MixedInPlugin):
    """A subclass of a plugin whose hooks came from a mixin: adapted once, not twice."""


def test_keyword_only_hooks_inherited_from_a_mixin_are_called_with_keyword_names() -> None:
    for plugin in (MixedInPlugin(), LaterPlugin()):
        model = ScriptedLlm([call_turn("weather", '{"city": "Oslo"}'), text_turn("Sunny.")])
        runner = InMemoryRunner(LlmAgent("forecaster", model, tools=[weather]), plugins=[plugin])
        run(runner, "Weather?")
        assert plugin.seen == [("before_model", "forecaster"), ("before_model", "forecaster")]
        (response,) = [r for e in stored(runner) for r in e.function_responses()]
        assert response.response == {"city": "Oslo", "celsius": 21, "audited": "weather"}
    assert MixedInPlugin.__dict__["before_model_callback"] is LaterPlugin.before_model_callback


def test_adk_python_style_plugins_and_callbacks_are_called_with_keyword_names() -> None:
    seen: list[tuple[str, Any]] = []

    async def before_model(*, callback_context: CallbackContext, llm_request: LlmRequest) -> None:
        seen.append(("before_model", callback_context.agent_name))

    def after_model(callback_context: CallbackContext, *, llm_response: LlmResponse) -> None:  # mixed
        seen.append(("after_model", llm_response.text()))

    def before_tool(*, tool: BaseTool, args: dict[str, Any], tool_context: ToolContext) -> None:
        seen.append(("before_tool", args))

    def after_tool(**kwargs: Any) -> dict[str, Any]:
        seen.append(("after_tool", sorted(kwargs)))
        return {**kwargs["tool_response"], "checked": True}

    def before_agent(*, callback_context: CallbackContext) -> None:
        seen.append(("before_agent", callback_context.agent_name))

    def java_order(callback_context: CallbackContext) -> None:  # positional, as before
        seen.append(("after_agent", callback_context.agent_name))

    model = ScriptedLlm([call_turn("weather", '{"city": "Oslo"}'), text_turn("Sunny.")])
    agent = LlmAgent(
        "forecaster",
        model,
        tools=[weather],
        before_model_callback=before_model,
        after_model_callback=after_model,
        before_tool_callback=before_tool,
        after_tool_callback=after_tool,
        before_agent_callback=before_agent,
        after_agent_callback=java_order,
    )
    plugin = PythonStylePlugin()
    runner = InMemoryRunner(agent, plugins=[plugin])
    events = run(runner, "Weather?")

    assert seen == [
        ("before_agent", "forecaster"),
        ("before_model", "forecaster"),
        ("after_model", ""),
        ("before_tool", {"city": "Oslo"}),
        ("after_tool", ["args", "tool", "tool_context", "tool_response"]),
        ("before_model", "forecaster"),
        ("after_model", "Sunny."),
        ("after_agent", "forecaster"),
    ]
    assert [name for name, _ in plugin.seen] == [
        "user_message",
        "before_run",
        "before_agent",
        "before_model",
        "after_model",
        "event",
        "before_tool",
        "after_tool",
        "event",
        "before_model",
        "after_model",
        "event",
        "after_agent",
        "after_run",
    ]
    assert ("before_tool", ("weather", {"city": "Oslo"})) in plugin.seen
    assert [r.response for e in events for r in e.function_responses()] == [
        {"city": "Oslo", "celsius": 21, "checked": True}
    ]


class CountingCallback:
    """A keyword-only callback that counts how often its signature is read."""

    def __init__(self) -> None:
        self.signature_reads = 0
        self.calls = 0

    @property
    def __signature__(self) -> inspect.Signature:
        self.signature_reads += 1
        keyword = inspect.Parameter.KEYWORD_ONLY
        return inspect.Signature(
            [inspect.Parameter("callback_context", keyword), inspect.Parameter("llm_request", keyword)]
        )

    def __call__(self, *, callback_context: CallbackContext, llm_request: LlmRequest) -> None:
        self.calls += 1


def test_a_hooks_signature_is_read_once_when_it_is_registered_not_per_call() -> None:
    callback = CountingCallback()
    agent = LlmAgent(
        "forecaster",
        ScriptedLlm([call_turn("weather", '{"city": "Oslo"}'), text_turn("Sunny.")]),
        tools=[weather],
        before_model_callback=callback,
    )
    assert callback.signature_reads == 1
    run(InMemoryRunner(agent), "Weather?")
    assert callback.calls == 2 and callback.signature_reads == 1


def test_a_keyword_only_hook_parameter_adk_does_not_pass_is_refused_at_registration() -> None:
    def before_model(*, callback_context: CallbackContext, request: LlmRequest) -> None:
        return None

    with pytest.raises(ConfigurationError, match=r"keyword-only parameter 'request'.*callback_context, llm_request"):
        LlmAgent("bot", ScriptedLlm([]), before_model_callback=before_model)


# ---- parallel branches run concurrently whatever the model's threading (ADK Java's subscribeOn) ---


class BlockingModel(BaseLlm):
    """A model that blocks inside ``subscribe`` until every branch's model is inside its own, then
    answers synchronously, still inside ``subscribe``."""

    def __init__(self, name: str, everyone_inside: threading.Barrier) -> None:
        super().__init__(model=name)
        self._everyone_inside = everyone_inside
        self.threads: list[str] = []

    def generate_content(self, llm_request: LlmRequest, stream: bool = False) -> reactivex.Observable[LlmResponse]:
        def subscribe(
            observer: rx_abc.ObserverBase[LlmResponse], scheduler: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            self.threads.append(threading.current_thread().name)
            self._everyone_inside.wait()  # raises BrokenBarrierError if the branches ran one after the other
            observer.on_next(LlmResponse(content=Content(role="model", parts=(Part.from_text(f"{self.model} done"),))))
            observer.on_completed()
            return Disposable()

        return reactivex.create(subscribe)


def test_parallel_branches_run_concurrently_when_their_models_block_and_emit_inside_subscribe() -> None:
    branches = 3
    everyone_inside = threading.Barrier(branches, timeout=10)  # the timeout only ends a failing run
    models = [BlockingModel(f"m{i}", everyone_inside) for i in range(branches)]
    fan = ParallelAgent("fan", sub_agents=[LlmAgent(f"b{i}", model) for i, model in enumerate(models)])
    runner = InMemoryRunner(fan)
    events = run(runner, "go")

    assert sorted((e.author, e.branch, e.text()) for e in events) == [
        (f"b{i}", f"fan.b{i}", f"m{i} done") for i in range(branches)
    ]
    assert sorted(e.author for e in stored(runner)[1:]) == ["b0", "b1", "b2"]
    caller = threading.current_thread().name
    assert all(name != caller for model in models for name in model.threads)


def test_a_parallel_agent_subscribes_its_branches_on_the_scheduler_it_is_given() -> None:
    scheduled: list[int] = []

    class Recording(reactivex.scheduler.ImmediateScheduler):
        def schedule(self, action: Any, state: Any = None) -> rx_abc.DisposableBase:
            scheduled.append(1)
            return super().schedule(action, state)

    fan = ParallelAgent(
        "fan",
        sub_agents=[LlmAgent("a", ScriptedLlm([text_turn("A.")])), LlmAgent("b", ScriptedLlm([text_turn("B.")]))],
        scheduler=Recording(),
    )
    events = run(InMemoryRunner(fan), "go")
    assert scheduled == [1, 1]
    assert sorted(e.text() for e in events) == ["A.", "B."]
