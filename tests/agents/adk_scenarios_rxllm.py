"""The rxllm side of the ADK comparison scenarios (``adk_scenarios.py``): build each tree with
rxllm, run its messages against scripted models that record every request, return the raw record
that :func:`~tests.agents.adk_scenarios.normalise` turns into the golden files' shape."""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from typing import Any

import reactivex
from pydantic import BaseModel
from reactivex import abc as rx_abc
from reactivex import operators as ops
from reactivex.disposable import Disposable

from rxllm import BaseLlm, Content, FunctionCall, FunctionResponse, LlmRequest, LlmResponse, Part, RxLlmError
from rxllm.agents import (
    AgentTool,
    BaseAgent,
    BasePlugin,
    Event,
    EventActions,
    EventsCompactionConfig,
    Example,
    ExampleTool,
    FunctionTool,
    InMemoryRunner,
    InvocationContext,
    LlmAgent,
    LlmEventSummarizer,
    LongRunningFunctionTool,
    LoopAgent,
    ParallelAgent,
    RunConfig,
    SequentialAgent,
    StreamingMode,
    exit_loop,
)

from . import adk_scenarios as sc

APP, USER, SESSION = "cmp", "u1", "s1"


class _Lib:
    Content = Content
    Part = Part
    FunctionCall = FunctionCall
    LlmResponse = LlmResponse


def _dump_request(request: LlmRequest) -> dict[str, Any]:
    dumped: dict[str, Any] = request.model_dump(mode="json", exclude={"config": {"response_schema"}}, exclude_none=True)
    schema = request.config.response_schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        dumped.setdefault("config", {})["response_schema"] = schema.model_json_schema()
    return dumped


class RecordingLlm(BaseLlm):
    """Answers call *n* with scripted turn *n* (one final response, on the subscribing thread); records each request."""

    def __init__(self, name: str, turns: Sequence[sc.Reply], requests: dict[str, list[dict[str, Any]]]) -> None:
        super().__init__(model="scripted")
        self._name = name
        self._turns = list(turns)
        self._requests = requests
        self._lock = threading.Lock()

    def generate_content(self, llm_request: LlmRequest, stream: bool = False) -> reactivex.Observable[LlmResponse]:
        def subscribe(
            observer: rx_abc.ObserverBase[LlmResponse], scheduler: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            with self._lock:
                made = self._requests.setdefault(self._name, [])
                made.append(_dump_request(llm_request))
                number = len(made) - 1
            reply = self._turns[number] if number < len(self._turns) else sc.Reply(text="(script exhausted)")
            parts = [Part.from_text(reply.text)] if reply.text is not None else []
            parts.extend(Part(function_call=FunctionCall(name=c.name, args=c.args, id=c.id)) for c in reply.calls)
            if stream and reply.text is not None:
                for piece in sc.stream_pieces(reply.text):
                    observer.on_next(
                        LlmResponse(content=Content(role="model", parts=(Part.from_text(piece),)), partial=True)
                    )
            observer.on_next(LlmResponse(content=Content(role="model", parts=parts)))
            observer.on_completed()
            return Disposable()

        return reactivex.create(subscribe)


class _Custom(BaseAgent):
    """A custom agent ported literally from ADK: it only emits its event."""

    def __init__(self, name: str, text: str, delta: dict[str, Any]) -> None:
        super().__init__(name)
        self._text = text
        self._delta = delta

    def _run_async_impl(self, ctx: InvocationContext) -> reactivex.Observable[Event]:
        return reactivex.just(
            Event(
                invocation_id=ctx.invocation_id,
                author=self.name,
                branch=ctx.branch,
                content=Content(role="model", parts=(Part.from_text(self._text),)),
                actions=EventActions(state_delta=dict(self._delta)),
            )
        )


def _tool(spec: sc.ToolSpec, requests: dict[str, list[dict[str, Any]]]) -> Any:
    if spec.kind == "function":
        return spec.func
    if spec.kind == "long_running":
        assert spec.func is not None
        return LongRunningFunctionTool(spec.func)
    if spec.kind == "confirm":
        assert spec.func is not None
        return FunctionTool(spec.func, require_confirmation=True)
    if spec.kind == "exit_loop":
        return exit_loop
    if spec.kind == "agent":
        assert spec.agent is not None
        return AgentTool(build(spec.agent, requests), skip_summarization=spec.skip_summarization)
    if spec.kind == "examples":
        return ExampleTool(
            [
                Example(
                    input=_example_content("user", ("text", text)),
                    output=[_example_content("model" if item[0] != "response" else "user", item) for item in output],
                )
                for text, output in spec.examples
            ]
        )
    raise ValueError(spec.kind)


def _example_content(role: str, item: tuple[Any, ...]) -> Content:
    if item[0] == "text":
        part = Part.from_text(item[1])
    elif item[0] == "call":
        part = Part(function_call=FunctionCall(name=item[1], args=item[2]))
    else:
        part = Part(function_response=FunctionResponse(name=item[1], response=item[2]))
    return Content(role=role, parts=(part,))


def build(spec: sc.AgentSpec, requests: dict[str, list[dict[str, Any]]]) -> BaseAgent:
    subs = [build(s, requests) for s in spec.sub_agents]
    if spec.kind == "sequential":
        return SequentialAgent(spec.name, sub_agents=subs, description=spec.description)
    if spec.kind == "parallel":
        return ParallelAgent(spec.name, sub_agents=subs, description=spec.description)
    if spec.kind == "loop":
        return LoopAgent(spec.name, sub_agents=subs, max_iterations=spec.max_iterations)
    if spec.kind == "custom":
        return _Custom(spec.name, spec.custom_text, dict(spec.custom_delta))
    callbacks: dict[str, Any] = {name: functools.partial(callback, _Lib) for name, callback in spec.callbacks}
    return LlmAgent(
        spec.name,
        RecordingLlm(spec.name, spec.script, requests),
        instruction=spec.instruction,
        global_instruction=spec.global_instruction,
        description=spec.description,
        tools=[_tool(t, requests) for t in spec.tools],
        sub_agents=subs,
        output_key=spec.output_key,
        output_schema=spec.output_schema,
        input_schema=spec.input_schema,
        include_contents="none" if spec.include_contents == "none" else "default",
        disallow_transfer_to_parent=spec.disallow_transfer_to_parent,
        disallow_transfer_to_peers=spec.disallow_transfer_to_peers,
        **callbacks,
    )


def _latest_call_id(events: Sequence[Event], name: str) -> str:
    for event in reversed(events):
        for call in event.function_calls():
            if call.name == name and call.id:
                return call.id
    raise LookupError(f"no call of {name} in the session")


def _message(message: sc.Message, events: Sequence[Event]) -> Content:
    if isinstance(message, str):
        return Content(role="user", parts=(Part.from_text(message),))
    if isinstance(message, sc.FunctionReply):
        name, response = message.name, message.response
    else:
        name, response = "adk_request_confirmation", {"confirmed": message.confirmed}
    reply = FunctionResponse(id=_latest_call_id(events, name), name=name, response=response)
    return Content(role="user", parts=(Part(function_response=reply),))


def run_rxllm(scenario: sc.Scenario) -> dict[str, Any]:
    """Run one scenario through rxllm; its raw record (requests per agent, stored events, state)."""
    requests: dict[str, list[dict[str, Any]]] = {}
    compaction = None
    if scenario.compaction is not None:
        interval, overlap = scenario.compaction
        summarizer = LlmEventSummarizer(RecordingLlm("summarizer", scenario.summarizer_script, requests))
        compaction = EventsCompactionConfig(compaction_interval=interval, overlap_size=overlap, summarizer=summarizer)
    plugins = [type("Audit", (BasePlugin,), sc.plugin_hooks(_Lib))("audit")] if scenario.plugins else []
    runner = InMemoryRunner(
        build(scenario.root, requests), app_name=APP, plugins=plugins, events_compaction_config=compaction
    )
    service = runner.session_service
    service.create_session(APP, USER, state=dict(scenario.initial_state), session_id=SESSION).run()
    config = RunConfig(
        max_llm_calls=scenario.max_llm_calls or 500,
        streaming_mode=StreamingMode.SSE if scenario.streaming else StreamingMode.NONE,
    )
    outcomes: list[str] = []
    partials: list[str] = []
    for message in scenario.messages:
        events = service.get_session(APP, USER, SESSION).run().events
        try:
            emitted = runner.run_async(USER, SESSION, _message(message, events), config).pipe(ops.to_list()).run()
            outcomes.append("completed")
        except RxLlmError:  # max_llm_calls ends the run with an error, as in ADK
            outcomes.append("error")
            continue
        partials.extend(e.text() for e in emitted if e.partial)
    session = service.get_session(APP, USER, SESSION).run()
    return {
        "outcomes": outcomes,
        "partials": partials,
        "requests": requests,
        "events": [e.model_dump(mode="json") for e in session.events],
        "state": dict(session.state),
    }
