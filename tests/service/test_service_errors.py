"""Rounds that end in error, failing tools, transport and protocol failures, limits and misuse."""

from __future__ import annotations

from typing import Any

import pytest
import reactivex

from rxllm import (
    BaseLlm,
    Chunk,
    ConfigurationError,
    FinishReason,
    LimitExceededError,
    LlmRequest,
    LlmResponse,
    MalformedFunctionCallError,
    ModelStreamEvent,
    ProtocolError,
    RxLlmError,
    StreamInterruptedError,
    TextDeltaEvent,
    ToolCallFragment,
)
from rxllm.service import AfterToolExecutionEvent, AiService, FinalResponseEvent
from rxllm.testing import Disconnect, ScriptedLlm, Step, scripted_turn

from .support import (
    QUESTION,
    JoinableScheduler,
    OrderTool,
    Recorder,
    openai_server,
    role,
    sse,
    sse_round,
    text,
    tool_args,
    tool_start,
)


def call(index: int, call_id: str | None, arguments: str, name: str = "get_order") -> Chunk:
    return Chunk(tool_call_fragments=(ToolCallFragment(index, call_id, name, arguments),))


def assert_error_final(recorder: Recorder, code: str) -> FinalResponseEvent:
    recorder.wait()
    assert recorder.completed and recorder.error is None
    kinds = recorder.kinds()
    assert kinds.count("final_response") == 1 and kinds[-1] == "final_response"
    assert "intermediate_response" not in kinds
    final = recorder.events[-1]
    assert isinstance(final, FinalResponseEvent)
    assert final.response.error_code == code
    return final


# -- a round that ends in error: no next round, an error final ------------------------------------------


def test_scripted_error_round_runs_started_tools_but_feeds_them_nowhere() -> None:
    orders = OrderTool()
    turn = scripted_turn(
        Chunk(text_delta="Checking"),
        call(0, "call_a", '{"order_id": "A17"}'),
        Chunk(finish_reason=FinishReason.SAFETY),
    )
    model = ScriptedLlm([turn])  # a second model call would fail: there is no second turn
    recorder = Recorder()
    AiService(model, tools=[orders.get_order]).stream(QUESTION).subscribe(recorder)
    final = assert_error_final(recorder, "SAFETY")
    assert final.response.text() == "Checking"
    kinds = recorder.kinds()
    assert kinds.index("after_tool_execution") < kinds.index("final_response")  # started tools finish first
    assert orders.calls == ["A17"]
    assert len(model.requests) == 1


def test_sse_length_finish_with_a_cut_off_call_ends_with_an_error_final() -> None:
    orders = OrderTool()
    tools = JoinableScheduler()
    cut_off = sse_round(
        tool_start(0, "call_a", "get_order", '{"order_id": "A17"}'),
        tool_start(1, "call_b", "get_order", '{"order_'),  # call_a is complete (and starts); call_b is cut off
        finish="length",
    )
    with openai_server(cut_off) as (server, model):
        recorder = Recorder()
        AiService(model, tools=[orders.get_order], tool_scheduler=tools).stream(QUESTION).subscribe(recorder)
        final = assert_error_final(recorder, "MAX_TOKENS")
        assert [c.id for c in final.response.function_calls()] == ["call_a"]
        assert "call_b" not in [e.call.id for e in recorder.events if e.kind == "complete_tool_call"]
        assert "get_order" in (final.response.error_message or "")  # the cut-off call is named
        tools.join()
        assert orders.calls == ["A17"]
        assert len(server.requests) == 1


def test_error_finals_go_through_the_guardrails_too() -> None:
    model = ScriptedLlm([scripted_turn(Chunk(text_delta="secret"), Chunk(finish_reason=FinishReason.MAX_TOKENS))])
    recorder = Recorder()
    AiService(model, output_guardrails=[lambda response: "[redacted]"]).stream("hi").subscribe(recorder)
    final = assert_error_final(recorder, "MAX_TOKENS")
    assert final.response.text() == "[redacted]"
    assert recorder.kinds() == ["final_response"]


# -- failures with no answer: on_error ---------------------------------------------------------------------


def test_sse_transport_failure_mid_round_is_on_error_with_no_final() -> None:
    orders = OrderTool()
    tools = JoinableScheduler()
    body: list[Step] = [
        role(),
        text("Checking"),
        tool_start(0, "call_a", "get_order", '{"order_id": "A17"}'),
        tool_start(1, "call_b", "get_order", "{"),
        Disconnect(reset=False),
    ]
    with openai_server(sse(*body)) as (server, model):
        recorder = Recorder()
        AiService(model, tools=[orders.get_order], tool_scheduler=tools).stream(QUESTION).subscribe(recorder)
        recorder.wait()
        assert isinstance(recorder.error, StreamInterruptedError)
        assert "final_response" not in recorder.kinds()
        tools.join()
        assert orders.calls in ([], ["A17"])  # call_a may have run; call_b never did
        assert len(server.requests) == 1


def test_malformed_call_arguments_fail_the_stream() -> None:
    malformed = sse_round(
        tool_start(0, "call_a", "get_order", '{"order_id": '), tool_args(0, "oops"), finish="tool_calls"
    )
    orders = OrderTool()
    with openai_server(malformed) as (_, model):
        recorder = Recorder()
        AiService(model, tools=[orders.get_order]).stream(QUESTION).subscribe(recorder)
        recorder.wait()
        assert isinstance(recorder.error, MalformedFunctionCallError)
        assert orders.calls == []


def test_max_rounds_stops_a_model_that_keeps_calling_tools() -> None:
    orders = OrderTool()
    turns = [scripted_turn(call(0, f"call_{n}", '{"order_id": "A17"}')) for n in range(3)]
    model = ScriptedLlm(turns)
    recorder = Recorder()
    AiService(model, tools=[orders.get_order], max_rounds=2).stream(QUESTION).subscribe(recorder)
    recorder.wait()
    assert isinstance(recorder.error, LimitExceededError) and "max_rounds=2" in str(recorder.error)
    assert recorder.kinds().count("intermediate_response") == 2
    assert len(model.requests) == 2


def test_a_retriever_that_raises_fails_the_stream_before_any_model_call() -> None:
    def broken(query: str) -> list[str]:
        raise OSError("index offline")

    model = ScriptedLlm([])
    recorder = Recorder()
    AiService(model, retriever=broken).stream("hi").subscribe(recorder)
    recorder.wait()
    assert type(recorder.error) is RxLlmError and isinstance(recorder.error.__cause__, OSError)
    assert "index offline" in str(recorder.error)
    assert model.requests == []


class NoFinalLlm(BaseLlm):
    """Breaks the fine-grained stream's contract: text, then completion without the final response."""

    def generate_content(self, llm_request: LlmRequest, stream: bool = False) -> reactivex.Observable[LlmResponse]:
        return reactivex.empty()

    def stream_events(self, llm_request: LlmRequest) -> reactivex.Observable[ModelStreamEvent]:
        return reactivex.of(TextDeltaEvent("hi"))


def test_a_model_stream_without_its_final_response_is_a_protocol_error() -> None:
    recorder = Recorder()
    AiService(NoFinalLlm(model="broken")).stream("hi").subscribe(recorder)
    recorder.wait()
    assert isinstance(recorder.error, ProtocolError)
    assert recorder.kinds() == ["partial_response"]


# -- tools that fail do not fail the interaction ---------------------------------------------------------


def test_failing_and_unknown_tools_answer_the_model_with_errors() -> None:
    def explode(order_id: str) -> dict[str, Any]:
        """Always fails."""
        raise RuntimeError(f"database down for {order_id}")

    turns = [
        scripted_turn(
            call(0, "call_x", '{"order_id": "A17"}', name="explode"),
            call(1, "call_y", "{}", name="no_such_tool"),
            call(2, "call_z", '{"wrong": 1}', name="explode"),
        ),
        scripted_turn(Chunk(text_delta="Sorry, the order system is down.")),
    ]
    model = ScriptedLlm(turns)
    recorder = Recorder()
    AiService(model, tools=[explode], tool_scheduler=JoinableScheduler()).stream(QUESTION).subscribe(recorder)
    recorder.wait()
    assert recorder.completed, recorder.error
    afters = {e.call.id: e for e in recorder.events if isinstance(e, AfterToolExecutionEvent)}
    assert all(after.failed for after in afters.values())
    assert "database down for A17" in str(afters["call_x"].result.response["error"])
    assert "not available" in str(afters["call_y"].result.response["error"])
    assert "invalid arguments" in str(afters["call_z"].result.response["error"])
    fed = model.requests[1][0].contents[2].function_responses()
    assert [r.id for r in fed] == ["call_x", "call_y", "call_z"]
    assert all("error" in r.response for r in fed)


# -- misuse ----------------------------------------------------------------------------------------------


def test_misconfiguration_fails_at_once() -> None:
    llm = ScriptedLlm([])

    def get_order(order_id: str) -> str:
        """Look it up."""
        return order_id

    with pytest.raises(ConfigurationError, match="BaseLlm"):
        AiService("gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="two tools named"):
        AiService(llm, tools=[get_order, get_order])
    with pytest.raises(ConfigurationError, match="retriever"):
        AiService(llm, retriever="docs")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="max_rounds"):
        AiService(llm, max_rounds=0)
    with pytest.raises(ConfigurationError, match="tool must be"):
        AiService(llm, tools=[42])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="user_message"):
        AiService(llm).stream(42)  # type: ignore[arg-type]
    assert llm.requests == []
