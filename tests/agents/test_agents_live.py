"""``Runner.run_live`` against the loopback live stubs: real sockets on 127.0.0.1; every "closed" is
what the server observed."""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from reactivex.scheduler import ImmediateScheduler

from rxllm import Content, Part
from rxllm.agents import (
    BasePlugin,
    Event,
    InMemoryRunner,
    LiveRequestQueue,
    LlmAgent,
    McpToolset,
    RunConfig,
    Runner,
    StdioServerParameters,
    ToolContext,
)
from rxllm.providers.gemini import GeminiModel
from rxllm.providers.openai import OpenAiRealtimeModel
from rxllm.testing import Expect, LiveStubServer, Reply, gemini, openai

from .support import APP, ORDER, SESSION, USER, get_order_function

TIMEOUT = 10.0  # a safety net; nothing in a passing run waits for it
KEY = "AIza-live-test-key-0123456789"
OPEN = [Expect("setup"), Reply(gemini.setup_complete())]
HELLO = Content(role="user", parts=(Part.from_text("Where is order A17?"),))


@dataclass
class LiveRun:
    events: list[Event] = field(default_factory=list)
    errors: list[Exception] = field(default_factory=list)
    completed: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    turn_complete: threading.Event = field(default_factory=threading.Event)
    subscription: Any = None

    def wait(self) -> LiveRun:
        assert self.done.wait(TIMEOUT), f"the live run did not end; got {self.events}"
        return self


def start_live(runner: Runner, queue: LiveRequestQueue, run_config: RunConfig | None = None,
               on_event: Any = None) -> LiveRun:
    run = LiveRun()

    def on_next(event: Event) -> None:
        run.events.append(event)
        if event.turn_complete:
            run.turn_complete.set()
        if on_event is not None:
            on_event(run, event)

    def on_error(error: Exception) -> None:
        run.errors.append(error)
        run.done.set()

    def on_completed() -> None:
        run.completed = True
        run.done.set()

    run.subscription = runner.run_live(
        user_id=USER, session_id=SESSION, live_request_queue=queue, run_config=run_config
    ).subscribe(on_next, on_error, on_completed)
    return run


def gemini_runner(server: LiveStubServer, tools: list[Any], **options: Any) -> InMemoryRunner:
    model = GeminiModel("gemini-live-2.5-flash", base_url=server.url, api_key=KEY)
    runner = InMemoryRunner(LlmAgent("support", model, tools=tools, instruction="You answer about orders."),
                            app_name=APP, **options)
    runner.session_service.create_session(APP, USER, session_id=SESSION).run()
    return runner


def stored(runner: Runner) -> tuple[Event, ...]:
    return runner.session_service.get_session(APP, USER, SESSION).run().events


def test_a_live_turn_runs_the_tool_sends_its_response_back_and_stores_only_non_partial_events() -> None:
    script = [*OPEN, Expect("clientContent"), Reply(gemini.text("Checking.")),
              Reply(gemini.tool_call(("c1", "get_order", {"order_id": "A17"}))), Expect("toolResponse"),
              Reply(gemini.output_transcription("It shipped")), Reply(gemini.text("It shipped.")),
              Reply(gemini.turn_complete(7, 3))]
    calls: list[dict[str, Any]] = []
    with LiveStubServer("gemini", [script]) as server:
        runner = gemini_runner(server, [get_order_function(calls)])
        queue = LiveRequestQueue()
        queue.content(HELLO)
        config = RunConfig(response_modalities=("TEXT",), output_audio_transcription={})
        run = start_live(runner, queue, config)
        assert run.turn_complete.wait(TIMEOUT)
        queue.close()
        record = server.connection(0)
        assert record.wait_closed()  # the queue's close closed the socket
        run.wait()
    assert run.completed and run.errors == []
    assert calls == [{"order_id": "A17"}]
    setup = record.messages[0]["setup"]
    assert setup["generationConfig"]["responseModalities"] == ["TEXT"]
    assert "outputAudioTranscription" in setup
    assert [d["name"] for d in setup["tools"][0]["functionDeclarations"]] == ["get_order"]
    assert record.of_kind("toolResponse")[0]["toolResponse"] == {
        "functionResponses": [{"name": "get_order", "response": ORDER, "id": "c1"}]}
    history = stored(runner)
    assert all(not e.partial for e in history)
    assert [e.function_calls()[0].name for e in history if e.function_calls()] == ["get_order"]
    assert [e.function_responses()[0].response for e in history if e.function_responses()] == [ORDER]
    finished = [e.output_transcription.text for e in history if e.output_transcription]
    assert finished == ["It shipped"]
    ends = [e for e in history if e.turn_complete]
    assert len(ends) == 1 and ends[0].text() == "It shipped." and ends[0].usage_metadata.total_token_count == 10
    assert [e.id for e in run.events if not e.partial] == [e.id for e in history]  # stored, then emitted
    assert any(e.partial and e.text() == "Checking." for e in run.events)


def test_a_failing_tool_answers_with_an_error_result_through_the_plugins() -> None:
    script = [*OPEN, Expect("clientContent"), Reply(gemini.tool_call(("c1", "get_order", {"order_id": "A17"}))),
              Expect("toolResponse"), Reply(gemini.text("Sorry.")), Reply(gemini.turn_complete())]
    seen_by_plugin: list[str] = []

    class Watch(BasePlugin):
        def before_tool_callback(self, tool: Any, tool_args: dict[str, Any], tool_context: ToolContext) -> None:
            seen_by_plugin.append(tool.name)

    def get_order(order_id: str) -> dict[str, Any]:
        """Look an order up.

        Args:
            order_id: the order's id.
        """
        raise RuntimeError("the order database is down")

    with LiveStubServer("gemini", [script]) as server:
        runner = gemini_runner(server, [get_order], plugins=[Watch("watch")])
        queue = LiveRequestQueue()
        queue.content(HELLO)
        run = start_live(runner, queue)
        assert run.turn_complete.wait(TIMEOUT)
        queue.close()
        record = server.connection(0)
        assert record.wait_closed()
        run.wait()
    assert run.completed and seen_by_plugin == ["get_order"]
    response = record.of_kind("toolResponse")[0]["toolResponse"]["functionResponses"][0]
    assert response["id"] == "c1" and "the order database is down" in str(response["response"])


def test_disposing_the_run_closes_the_socket_and_starts_no_tool() -> None:
    script = [*OPEN, Expect("clientContent"), Reply(gemini.text("Checking.")),
              Reply(gemini.tool_call(("c1", "get_order", {"order_id": "A17"}))), Expect("toolResponse")]
    calls: list[dict[str, Any]] = []

    def dispose_on_first(run: LiveRun, event: Event) -> None:
        run.subscription.dispose()

    with LiveStubServer("gemini", [script]) as server:
        # tools run on the thread that delivered the call: a tool started by the tool call that
        # follows would run before the reader could stop
        runner = gemini_runner(server, [get_order_function(calls)], tool_scheduler=ImmediateScheduler())
        queue = LiveRequestQueue()
        queue.content(HELLO)
        run = start_live(runner, queue, on_event=dispose_on_first)
        record = server.connection(0)
        assert record.wait_closed()
    assert [e.text() for e in run.events] == ["Checking."]
    assert calls == [] and record.of_kind("toolResponse") == []
    assert stored(runner) == ()  # the partial was never stored
    assert not run.done.is_set()  # disposed: no terminal event


def test_a_transfer_closes_the_connection_and_the_target_agent_continues_on_the_same_queue() -> None:
    first = [*OPEN, Expect("clientContent"),
             Reply(gemini.tool_call(("t1", "transfer_to_agent", {"agent_name": "billing"}))), Expect("toolResponse")]
    second = [*OPEN, Expect("clientContent"), Expect("clientContent"), Reply(gemini.text("Billing here.")),
              Reply(gemini.turn_complete())]
    with LiveStubServer("gemini", [first, second]) as server:
        def model() -> GeminiModel:
            return GeminiModel("gemini-live-2.5-flash", base_url=server.url, api_key=KEY)

        billing = LlmAgent("billing", model(), instruction="You answer about invoices.", description="Invoices.")
        root = LlmAgent("front", model(), instruction="Route the user.", sub_agents=[billing])
        runner = InMemoryRunner(root, app_name=APP)
        runner.session_service.create_session(APP, USER, session_id=SESSION).run()
        queue = LiveRequestQueue()
        queue.content(HELLO)
        run = start_live(runner, queue)
        assert server.connection(0).wait_closed()  # the transfer closed the first session
        queue.content(Content(role="user", parts=(Part.from_text("My invoice?"),)))  # for the billing agent
        assert run.turn_complete.wait(TIMEOUT)
        queue.close()
        assert server.connection(1).wait_closed()
        run.wait()
    assert run.completed, run.errors
    assert [(e.author, e.turn_complete) for e in run.events if e.turn_complete] == [("billing", True)]
    setup = server.connection(1).messages[0]["setup"]
    assert "You answer about invoices." in str(setup["systemInstruction"])
    history, asked = server.connection(1).of_kind("clientContent")
    assert "transfer_to_agent" in str(history) and "My invoice?" in str(asked)
    assert server.connection(0).of_kind("toolResponse")[0]["toolResponse"]["functionResponses"][0]["id"] == "t1"


def test_an_openai_realtime_turn_through_run_live() -> None:
    script = [Reply(openai.session_created()), Expect("session.update"), Expect("conversation.item.create"),
              Expect("response.create"), Reply(openai.text("Shipped")), Reply(openai.text(" today.")),
              Reply(openai.response_done(input_tokens=5, output_tokens=2))]
    with LiveStubServer("openai", [script]) as server:
        model = OpenAiRealtimeModel("gpt-realtime", base_url=server.url, api_key="sk-live-test")
        runner = InMemoryRunner(LlmAgent("support", model, instruction="Be brief."), app_name=APP)
        runner.session_service.create_session(APP, USER, session_id=SESSION).run()
        queue = LiveRequestQueue()
        queue.content(HELLO)
        run = start_live(runner, queue)
        assert run.turn_complete.wait(TIMEOUT)
        queue.close()
        assert server.connection(0).wait_closed()
        run.wait()
    assert run.completed
    assert [e.text() for e in stored(runner)] == ["Shipped today."]


@pytest.mark.parametrize("bad", ["not a queue", None])
def test_run_live_refuses_what_is_not_a_live_request_queue(bad: Any) -> None:
    runner = InMemoryRunner(LlmAgent("support", GeminiModel("m", api_key=KEY)), app_name=APP)
    with pytest.raises(Exception, match="LiveRequestQueue"):
        runner.run_live(user_id=USER, session_id=SESSION, live_request_queue=bad)


def test_an_mcp_toolsets_tools_are_declared_and_run_in_a_live_session() -> None:
    server_script = Path(__file__).resolve().parent.parent / "mcp_fixture_server.py"
    script = [*OPEN, Expect("clientContent"), Reply(gemini.tool_call(("c1", "add", {"a": 2, "b": 3}))),
              Expect("toolResponse"), Reply(gemini.text("Five.")), Reply(gemini.turn_complete())]
    mcp = McpToolset(StdioServerParameters(sys.executable, [str(server_script), "stdio"]), tool_filter=["add"])
    with mcp as tools, LiveStubServer("gemini", [script]) as server:
        runner = gemini_runner(server, [tools])
        queue = LiveRequestQueue()
        queue.content(HELLO)
        run = start_live(runner, queue)
        # the bound covers starting the stdio server (a Python process importing the mcp SDK) under load
        assert run.turn_complete.wait(6 * TIMEOUT), run.errors
        queue.close()
        record = server.connection(0)
        assert record.wait_closed()
        run.wait()
    assert run.errors == []
    assert [d["name"] for d in record.messages[0]["setup"]["tools"][0]["functionDeclarations"]] == ["add"]
    response = record.of_kind("toolResponse")[0]["toolResponse"]["functionResponses"][0]
    assert (response["name"], response["id"]) == ("add", "c1") and "5" in json.dumps(response["response"])
