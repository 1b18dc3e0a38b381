"""The span trees of the order-A17 agent run and of a service turn, on both transports, and the usage
totals their last events carry.

An agent run is ``invoke_agent {agent}`` with its model calls and tool executions as children, under
the span current when the user subscribed; a service turn is ``invoke_agent AiService`` with its
rounds' model calls and tools under it. The I/O runs on I/O threads or the asyncio loop and the
tools on a tool pool, yet every span lands under the right parent.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.trace import StatusCode
from reactivex import operators as ops
from telemetry_support import WAIT, Telemetry, parent_of, span_id, tree

from rxllm import AsyncHttpTransport, Content, HttpTransport, Part, UsageMetadata
from rxllm.agents import Event, InMemoryRunner, LlmAgent, RunConfig, StreamingMode
from rxllm.providers.openai import OpenAiChatModel
from rxllm.service import AiService, FinalResponseEvent
from rxllm.testing import Hold, StubResponse, StubServer, ToolCallScript, sse_turn

QUESTION = Content(role="user", parts=(Part.from_text("Where is order A17?"),))
SSE = RunConfig(streaming_mode=StreamingMode.SSE)


def get_order(order_id: str) -> dict[str, Any]:
    """Look an order up by its id."""
    if order_id != "A17":
        raise LookupError(f"no order {order_id!r}")
    return {"order_id": order_id, "status": "shipped", "shipped_on": "Tuesday"}


@pytest.fixture(params=["threads", "asyncio"])
def transport(request: pytest.FixtureRequest) -> Iterator[HttpTransport | AsyncHttpTransport]:
    made: HttpTransport | AsyncHttpTransport = HttpTransport() if request.param == "threads" else AsyncHttpTransport()
    yield made
    made.close()


def enqueue_a17(server: StubServer, order_id: str = "A17") -> None:
    call = ToolCallScript("call_1", "get_order", ['{"order_', f'id": "{order_id}"}}'])
    server.enqueue(
        StubResponse(body=sse_turn("openai-chat", text=["Let me look ", "that up."], tool_calls=[call], usage=(5, 3))),
        StubResponse(body=sse_turn("openai-chat", text=["It shipped ", "Tuesday."], usage=(9, 4))),
    )


def model(server: StubServer, transport: HttpTransport | AsyncHttpTransport) -> OpenAiChatModel:
    return OpenAiChatModel("gpt-test", base_url=f"{server.url}/v1", api_key="sk-test", transport=transport)


def collect(telemetry: Telemetry, source: Any) -> tuple[list[Any], int]:
    """Subscribe inside a parent span (left at once); wait for the terminal event."""
    items: list[Any] = []
    errors: list[Exception] = []
    done = threading.Event()

    def on_error(error: Exception) -> None:
        errors.append(error)
        done.set()

    with telemetry.tracer.start_as_current_span("request handler") as parent:
        source.subscribe(items.append, on_error, done.set)
    assert done.wait(WAIT)
    assert errors == []
    return items, span_id(parent)


def test_the_a17_agent_run_is_one_agent_span_with_two_model_calls_and_one_tool(
    telemetry: Telemetry, stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    enqueue_a17(stub_server)
    runner = InMemoryRunner(LlmAgent("support", model(stub_server, transport), tools=[get_order]))
    runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
    events, parent = collect(telemetry, runner.run_async("u1", "s1", QUESTION, SSE))
    spans = telemetry.spans(5)
    assert tree(spans) == [
        "request handler",
        "  invoke_agent support",
        "    chat gpt-test",
        "    execute_tool get_order",
        "    chat gpt-test",
    ]
    agent = telemetry.span("invoke_agent support")
    assert parent_of(agent) == parent
    attributes = dict(agent.attributes or {})
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.agent.name"] == "support"
    assert attributes["gen_ai.conversation.id"] == "s1"
    assert attributes["rxllm.invocation_id"] == events[-1].invocation_id
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (14, 7)
    assert attributes["rxllm.outcome"] == "ok" and agent.status.status_code is StatusCode.UNSET
    tool = telemetry.span("execute_tool get_order")
    tool_attributes = dict(tool.attributes or {})
    assert tool_attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool_attributes["gen_ai.tool.name"] == "get_order"
    assert tool_attributes["gen_ai.tool.call.id"] == "call_1"
    assert "gen_ai.tool.call.arguments" not in tool_attributes  # contents are opt-in
    assert tool.status.status_code is StatusCode.UNSET
    chats = [s for s in spans if s.name == "chat gpt-test"]
    chats.sort(key=lambda s: s.start_time or 0)
    assert [(s.attributes or {})["gen_ai.usage.input_tokens"] for s in chats] == [5, 9]
    # usage: per call on each model event, and the invocation's total on its final event
    final: Event = events[-1]
    assert final.is_final_response() and final.text() == "It shipped Tuesday."
    assert final.usage_metadata == UsageMetadata(prompt_token_count=9, candidates_token_count=4, total_token_count=13)
    assert final.total_usage_metadata == UsageMetadata(
        prompt_token_count=14, candidates_token_count=7, total_token_count=21
    )
    assert all(e.total_usage_metadata is None for e in events[:-1])
    stored = runner.session_service.get_session(runner.app_name, "u1", "s1").run()
    assert stored.events[-1].total_usage_metadata == final.total_usage_metadata  # stored with the event


def test_a_failing_tool_is_an_error_span_and_the_run_goes_on(
    telemetry: Telemetry, stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    enqueue_a17(stub_server, order_id="B2")
    runner = InMemoryRunner(LlmAgent("support", model(stub_server, transport), tools=[get_order]))
    runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
    collect(telemetry, runner.run_async("u1", "s1", QUESTION, SSE))
    telemetry.spans(5)
    tool = telemetry.span("execute_tool get_order")
    assert tool.status.status_code is StatusCode.ERROR
    assert dict(tool.attributes or {})["error.type"] == "LookupError"
    assert dict(tool.attributes or {})["rxllm.outcome"] == "error"
    assert telemetry.span("invoke_agent support").status.status_code is StatusCode.UNSET


def test_a_disposed_agent_run_ends_its_spans_as_cancelled(
    telemetry: Telemetry, stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    release = threading.Event()
    body = sse_turn("openai-chat", text=["Let me ", "look."])
    stub_server.enqueue(StubResponse(body=[*body[:2], Hold(release, timeout=5.0), *body[2:]]))
    runner = InMemoryRunner(LlmAgent("support", model(stub_server, transport), tools=[get_order]))
    runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
    first = threading.Event()
    with telemetry.tracer.start_as_current_span("request handler"):
        subscription = runner.run_async("u1", "s1", QUESTION, SSE).subscribe(lambda _: first.set())
    assert first.wait(WAIT)
    subscription.dispose()
    telemetry.spans(3)
    release.set()
    for name in ("invoke_agent support", "chat gpt-test"):
        span = telemetry.span(name)
        assert dict(span.attributes or {})["rxllm.outcome"] == "cancelled", name
        assert span.status.status_code is StatusCode.UNSET


def test_a_service_turn_is_one_span_with_its_rounds_and_tools_under_it(
    telemetry: Telemetry, stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    enqueue_a17(stub_server)
    service = AiService(model(stub_server, transport), tools=[get_order])
    events, parent = collect(telemetry, service.stream("Where is order A17?"))
    spans = telemetry.spans(5)
    assert tree(spans) == [
        "request handler",
        "  invoke_agent AiService",
        "    chat gpt-test",
        "    execute_tool get_order",
        "    chat gpt-test",
    ]
    turn = telemetry.span("invoke_agent AiService")
    assert parent_of(turn) == parent
    attributes = dict(turn.attributes or {})
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (14, 7)
    final = events[-1]
    assert isinstance(final, FinalResponseEvent)
    assert final.response.usage_metadata == UsageMetadata(
        prompt_token_count=9, candidates_token_count=4, total_token_count=13
    )
    assert final.total_usage_metadata == UsageMetadata(
        prompt_token_count=14, candidates_token_count=7, total_token_count=21
    )


def test_usage_totals_are_there_without_opentelemetry_too(stub_server: StubServer) -> None:
    import rxllm

    rxllm.configure_telemetry(enabled=False)
    transport = HttpTransport()
    try:
        enqueue_a17(stub_server)
        service = AiService(model(stub_server, transport), tools=[get_order])
        final = service.stream("Where is order A17?").pipe(ops.last()).run()
    finally:
        rxllm.configure_telemetry()
        transport.close()
    assert final.total_usage_metadata == UsageMetadata(
        prompt_token_count=14, candidates_token_count=7, total_token_count=21
    )


def test_a_run_queued_behind_another_is_parented_under_its_own_subscribers_span(
    telemetry: Telemetry, stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    release = threading.Event()
    first_body = sse_turn("openai-chat", text=["One ", "moment."])
    stub_server.enqueue(
        StubResponse(body=[*first_body[:2], Hold(release, timeout=5.0), *first_body[2:]]),
        StubResponse(body=sse_turn("openai-chat", text=["Second."])),
    )
    runner = InMemoryRunner(LlmAgent("support", model(stub_server, transport)))
    runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
    first_done, second_done, streaming = threading.Event(), threading.Event(), threading.Event()
    with telemetry.tracer.start_as_current_span("first request") as first_parent:
        runner.run_async("u1", "s1", QUESTION, SSE).subscribe(lambda _: streaming.set(), None, first_done.set)
    assert streaming.wait(WAIT)
    with telemetry.tracer.start_as_current_span("second request") as second_parent:
        # waits on the session's lane; starts on the first run's thread when it completes
        runner.run_async("u1", "s1", QUESTION, SSE).subscribe(None, None, second_done.set)
    release.set()
    assert first_done.wait(WAIT) and second_done.wait(WAIT)
    spans = telemetry.spans(6)
    agents = sorted((s for s in spans if s.name == "invoke_agent support"), key=lambda s: s.start_time or 0)
    assert [parent_of(s) for s in agents] == [span_id(first_parent), span_id(second_parent)]
    chats = sorted((s for s in spans if s.name == "chat gpt-test"), key=lambda s: s.start_time or 0)
    assert [parent_of(s) for s in chats] == [span_id(a) for a in agents]


def test_agents_of_a_sequential_agent_each_have_their_span_with_their_model_calls_under_it(
    telemetry: Telemetry, stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    from rxllm.agents import SequentialAgent

    stub_server.enqueue(
        StubResponse(body=sse_turn("openai-chat", text=["Draft."], usage=(5, 3))),
        StubResponse(body=sse_turn("openai-chat", text=["Reviewed."], usage=(9, 4))),
    )
    llm = model(stub_server, transport)
    pipeline = SequentialAgent("pipeline", sub_agents=[LlmAgent("writer", llm), LlmAgent("reviewer", llm)])
    runner = InMemoryRunner(pipeline)
    runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
    events, parent = collect(telemetry, runner.run_async("u1", "s1", QUESTION, SSE))
    assert events[-1].text() == "Reviewed."
    spans = telemetry.spans(5)
    writer, reviewer = telemetry.span("invoke_agent writer"), telemetry.span("invoke_agent reviewer")
    assert parent_of(writer) == parent and parent_of(reviewer) == parent  # the second starts on an I/O thread
    chats = sorted((s for s in spans if s.name == "chat gpt-test"), key=lambda s: s.start_time or 0)
    assert [parent_of(s) for s in chats] == [span_id(writer), span_id(reviewer)]
    assert events[-1].total_usage_metadata == UsageMetadata(
        prompt_token_count=14, candidates_token_count=7, total_token_count=21
    )
