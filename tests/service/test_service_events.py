"""Done when: a two-round turn with two tool calls in one round -- event order, each tool once, eager tools."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest
from reactivex.scheduler import ImmediateScheduler

from rxllm import Chunk, Content, FunctionCall, LlmRequest, Part, ToolCallFragment
from rxllm.agents import ToolContext
from rxllm.service import (
    AfterToolExecutionEvent,
    AiService,
    BeforeToolExecutionEvent,
    CompleteToolCallEvent,
    FinalResponseEvent,
    IntermediateResponseEvent,
    PartialResponseEvent,
    PartialToolCallEvent,
    RetrievedContentsEvent,
)
from rxllm.testing import Hold, ScriptedLlm, scripted_turn

from .support import (
    ANSWER,
    QUESTION,
    WAIT,
    GatedLlm,
    OrderTool,
    Recorder,
    answer_chunks,
    index_of,
    openai_server,
    tool_round_chunks,
    two_round_model,
    two_rounds,
)

SNIPPET = "Orders ship from Berlin."


def retrieve(query: str) -> list[str]:
    assert query == QUESTION
    return [SNIPPET]


def call_of(event: Any) -> str | None:
    call = getattr(event, "call", None)
    return call.id if isinstance(call, FunctionCall) else None


def position_of(events: Sequence[Any], event_type: type, call_id: str) -> int:
    """Where the event of that type for that call is."""
    return index_of(events, lambda e: isinstance(e, event_type) and call_of(e) == call_id)


def assert_turn_order(events: Sequence[Any], *, retrieved: bool) -> None:
    """The order every two-round turn with calls call_a and call_b must have, whatever the threads did."""
    kinds = [event.kind for event in events]
    if retrieved:
        assert kinds[0] == "retrieved_contents" and kinds.count("retrieved_contents") == 1
    assert kinds.count("final_response") == 1 and kinds[-1] == "final_response"
    assert kinds.count("intermediate_response") == 1
    intermediate = kinds.index("intermediate_response")
    for call_id in ("call_a", "call_b"):
        complete = position_of(events, CompleteToolCallEvent, call_id)
        before = position_of(events, BeforeToolExecutionEvent, call_id)
        after = position_of(events, AfterToolExecutionEvent, call_id)
        assert complete < before < after
        assert complete < intermediate
    # Round one's model events all precede its intermediate response; round two starts after every tool finished.
    round_two = [i for i, e in enumerate(events) if isinstance(e, PartialResponseEvent) and i > intermediate]
    assert round_two, "round two streamed no partials"
    last_tool_event = max(i for i, e in enumerate(events) if isinstance(e, AfterToolExecutionEvent))
    assert last_tool_event < round_two[0]
    round_one = [e.text for i, e in enumerate(events) if isinstance(e, PartialResponseEvent) and i < intermediate]
    assert "".join(round_one) == "Let me check both."
    assert "".join(events[i].text for i in round_two) == ANSWER


def assert_second_request_feeds_results_in_call_order(request: LlmRequest) -> None:
    history = request.contents
    assert [c.role for c in history] == ["user", "model", "user"]
    assert [call.id for call in history[1].function_calls()] == ["call_a", "call_b"]
    responses = history[2].function_responses()
    assert [(r.id, r.response["status"]) for r in responses] == [
        ("call_a", "shipped Tuesday"),
        ("call_b", "ships Friday"),
    ]


def test_scripted_two_round_turn_emits_every_event_in_order() -> None:
    orders = OrderTool()
    model = two_round_model()
    # Tools inline on the model's thread: the whole order is fixed, so it is asserted exactly.
    service = AiService(model, tools=[orders.get_order], retriever=retrieve, tool_scheduler=ImmediateScheduler())

    recorder = Recorder()
    service.stream(QUESTION).subscribe(recorder)
    recorder.wait()

    assert recorder.completed and recorder.error is None
    assert recorder.kinds() == [
        "retrieved_contents",
        "partial_response", "partial_response",
        "complete_tool_call", "before_tool_execution", "after_tool_execution",
        "complete_tool_call", "before_tool_execution", "after_tool_execution",
        "intermediate_response",
        "partial_response", "partial_response",
        "final_response",
    ]  # fmt: skip
    events = recorder.events
    assert events[0] == RetrievedContentsEvent((SNIPPET,))
    assert_turn_order(events, retrieved=True)
    assert orders.calls == ["A17", "B2"]
    intermediate = next(e for e in events if isinstance(e, IntermediateResponseEvent))
    assert [c.id for c in intermediate.response.function_calls()] == ["call_a", "call_b"]
    assert intermediate.response.text() == "Let me check both."
    final = events[-1]
    assert isinstance(final, FinalResponseEvent) and final.response.text() == ANSWER
    assert final.response.partial is None
    after_a = next(e for e in events if isinstance(e, AfterToolExecutionEvent))
    assert after_a.result.response == {"order_id": "A17", "status": "shipped Tuesday"} and not after_a.failed
    first, second = model.requests
    assert first[1] is True  # the model was asked to stream
    assert first[0].contents[0].text() == f"{QUESTION}\n\nAnswer using the following information:\n{SNIPPET}"
    assert_second_request_feeds_results_in_call_order(second[0])


def test_scripted_turn_on_the_default_tool_pool_keeps_the_order_and_the_rx_grammar() -> None:
    orders = OrderTool()
    model = two_round_model()
    service = AiService(model, tools=[orders.get_order], retriever=retrieve)

    recorder = Recorder()
    service.stream(QUESTION).subscribe(recorder)
    recorder.wait()

    assert recorder.completed, recorder.error
    assert_turn_order(recorder.events, retrieved=True)
    assert sorted(orders.calls) == ["A17", "B2"]
    assert all(name.startswith("rxllm-tool") for name in orders.threads)  # the dedicated pool
    assert_second_request_feeds_results_in_call_order(model.requests[1][0])


def test_gated_model_starts_a_tool_while_its_round_is_still_streaming() -> None:
    rest_of_round = threading.Event()
    stream_open_when_tool_started: list[bool] = []
    orders = OrderTool()
    orders.on_start = lambda order_id: stream_open_when_tool_started.append(not rest_of_round.is_set())
    chunks = tool_round_chunks()
    # Hold the round open right after call_b began, which made call_a complete.
    model = GatedLlm([[*chunks[:5], rest_of_round, *chunks[5:]], answer_chunks()])
    service = AiService(model, tools=[orders.get_order])

    recorder = Recorder()
    service.stream(QUESTION).subscribe(recorder)
    assert orders.started.wait(WAIT), "the tool did not start while the round was held open"
    assert "intermediate_response" not in recorder.kinds()
    rest_of_round.set()
    recorder.wait()

    assert recorder.completed, recorder.error
    assert stream_open_when_tool_started[0] is True
    assert_turn_order(recorder.events, retrieved=False)
    before_a = position_of(recorder.events, BeforeToolExecutionEvent, "call_a")
    assert before_a < recorder.kinds().index("intermediate_response")
    assert sorted(orders.calls) == ["A17", "B2"]
    assert_second_request_feeds_results_in_call_order(model.requests[1])


def test_sse_two_round_turn_runs_tools_eagerly_over_a_real_connection() -> None:
    rest_of_round = threading.Event()
    stream_open_when_tool_started: list[bool] = []
    orders = OrderTool()
    orders.on_start = lambda order_id: stream_open_when_tool_started.append(not rest_of_round.is_set())
    with openai_server(*two_rounds(Hold(rest_of_round, timeout=WAIT))) as (server, model):
        service = AiService(model, tools=[orders.get_order], retriever=retrieve, system_message="Be brief.")
        recorder = Recorder()
        service.stream(QUESTION).subscribe(recorder)

        # The tool starts while the server still holds round one open: call_a completed when call_b began.
        assert orders.started.wait(WAIT), "the tool did not start while the server held the round open"
        assert "intermediate_response" not in recorder.kinds()
        assert server.connections[0].closed_at is None
        rest_of_round.set()
        recorder.wait()

        assert recorder.completed, recorder.error
        assert stream_open_when_tool_started[0] is True
        events = recorder.events
        assert_turn_order(events, retrieved=True)
        before_a = position_of(events, BeforeToolExecutionEvent, "call_a")
        assert before_a < recorder.kinds().index("intermediate_response")  # eagerness, visible in the order
        fragments = [e for e in events if isinstance(e, PartialToolCallEvent)]
        assert "".join(f.arguments_delta for f in fragments if f.index == 0) == '{"order_id": "A17"}'
        assert sorted(orders.calls) == ["A17", "B2"]
        assert all(name.startswith("rxllm-tool") for name in orders.threads)
        assert len(server.requests) == 2
        first, second = (r.json() for r in server.requests)
        assert first["messages"][0] == {"role": "system", "content": "Be brief."}
        assert SNIPPET in first["messages"][1]["content"]
        assert first["tools"][0]["function"]["name"] == "get_order"
        tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in tool_messages] == ["call_a", "call_b"]
        assert "shipped Tuesday" in tool_messages[0]["content"]
        final = events[-1]
        assert isinstance(final, FinalResponseEvent)
        assert final.response.text() == ANSWER
        assert final.response.usage_metadata is not None and final.response.usage_metadata.total_token_count == 13


def test_stream_is_cold_and_each_subscription_is_its_own_interaction() -> None:
    turns = [scripted_turn(Chunk(text_delta="one")), scripted_turn(Chunk(text_delta="two"))]
    model = ScriptedLlm(turns)
    stream = AiService(model).stream(Content(role=None, parts=(Part(text="hi"),)))
    assert model.requests == []  # nothing before subscribe

    first, second = Recorder(), Recorder()
    stream.subscribe(first)
    stream.subscribe(second)

    assert first.wait().kinds() == ["partial_response", "final_response"]
    assert first.events[-1].response.text() == "one"
    assert second.wait().events[-1].response.text() == "two"
    assert [r.contents[0].role for r, _ in model.requests] == ["user", "user"]


def test_a_turn_without_tools_is_partials_then_the_final() -> None:
    model = ScriptedLlm([scripted_turn(Chunk(thought_delta="hmm"), Chunk(text_delta="Hi "), Chunk(text_delta="you"))])
    recorder = Recorder()
    AiService(model).stream("hello").subscribe(recorder)
    recorder.wait()
    assert recorder.kinds() == ["partial_thinking", "partial_response", "partial_response", "final_response"]
    assert recorder.events[-1].response.text() == "Hi you"
    assert recorder.events[-1].response.thought_text() == "hmm"
    assert recorder.completed


@pytest.mark.parametrize("retrieved", [[], ["   "]], ids=["nothing", "blank"])
def test_a_retriever_that_finds_nothing_emits_no_retrieved_event(retrieved: list[str]) -> None:
    model = ScriptedLlm([scripted_turn(Chunk(text_delta="ok"))])
    recorder = Recorder()
    AiService(model, retriever=lambda q: retrieved).stream("hello").subscribe(recorder)
    recorder.wait()
    if retrieved:
        assert recorder.kinds()[0] == "retrieved_contents"
    else:
        assert recorder.kinds() == ["partial_response", "final_response"]
        assert model.requests[0][0].contents[0].text() == "hello"


def test_tools_share_a_state_for_one_interaction_and_no_longer() -> None:
    seen: list[tuple[str | None, str, Any, str]] = []
    invocations: list[str] = []

    def remember(order_id: str, tool_context: ToolContext) -> str:
        """Remember the order looked at last."""
        seen.append((tool_context.function_call_id, tool_context.agent_name, tool_context.state.get("last"), order_id))
        assert tool_context.user_content is not None and tool_context.user_content.text() == QUESTION
        invocations.append(tool_context.invocation_id)
        tool_context.state["last"] = order_id
        return "ok"

    def turn() -> list[Any]:
        return scripted_turn(
            Chunk(tool_call_fragments=(ToolCallFragment(0, "call_a", "remember", '{"order_id": "A17"}'),)),
            Chunk(tool_call_fragments=(ToolCallFragment(1, "call_b", "remember", '{"order_id": "B2"}'),)),
        )

    answer = scripted_turn(Chunk(text_delta="Noted."))
    model = ScriptedLlm([turn(), answer, turn(), answer])
    service = AiService(model, tools=[remember], tool_scheduler=ImmediateScheduler())  # tools inline: fixed order
    for _ in range(2):
        recorder = Recorder()
        service.stream(QUESTION).subscribe(recorder)
        assert recorder.wait().completed, recorder.error

    interaction = [("call_a", "ai_service", None, "A17"), ("call_b", "ai_service", "A17", "B2")]
    assert seen == interaction * 2  # the second interaction starts with an empty state again
    assert invocations[0] == invocations[1] != invocations[2] == invocations[3]
