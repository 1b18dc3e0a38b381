"""Done when: a guardrail rewrite -- no partials for the final answer, the rewritten text in the final event
and in to_text. Plus rejection and replacement."""

from __future__ import annotations

import pytest
from reactivex import operators as ops

from rxllm import Chunk, GuardrailError, LlmResponse
from rxllm.service import AiService, FinalResponseEvent, to_text
from rxllm.testing import ScriptedLlm, scripted_turn

from .support import (
    ANSWER,
    QUESTION,
    OrderTool,
    Recorder,
    openai_server,
    two_round_model,
    two_rounds,
)

REWRITTEN = "A17: shipped Tuesday. B2: ships Friday."


def rewrite(response: LlmResponse) -> str:
    assert response.text() == ANSWER  # the guardrail sees the whole final answer
    return REWRITTEN


def accept(response: LlmResponse) -> None:
    return None


def assert_rewritten(recorder: Recorder) -> None:
    recorder.wait()
    assert recorder.completed, recorder.error
    kinds = recorder.kinds()
    assert "partial_response" not in kinds  # none at all: not for the answer, not for the tool round
    assert kinds.count("final_response") == 1 and kinds[-1] == "final_response"
    assert kinds.count("after_tool_execution") == 2 and kinds.count("intermediate_response") == 1
    final = recorder.events[-1]
    assert isinstance(final, FinalResponseEvent)
    assert final.response.text() == REWRITTEN
    assert final.response.usage_metadata is not None  # the rest of the response is kept


def test_scripted_guardrail_rewrite_suppresses_partials_and_rewrites_the_final_and_the_text() -> None:
    orders = OrderTool()
    service = AiService(two_round_model(), tools=[orders.get_order], output_guardrails=[accept, rewrite])
    assert service.has_output_guardrails
    recorder = Recorder()
    service.stream(QUESTION).subscribe(recorder)
    assert_rewritten(recorder)

    text_service = AiService(two_round_model(), tools=[orders.get_order], output_guardrails=[accept, rewrite])
    strings = to_text(text_service.stream(QUESTION), text_service.has_output_guardrails).pipe(ops.to_list()).run()
    assert strings == [REWRITTEN]


def test_sse_guardrail_rewrite_suppresses_partials_and_rewrites_the_final_and_the_text() -> None:
    orders = OrderTool()
    with openai_server(*two_rounds(), *two_rounds()) as (server, model):
        service = AiService(model, tools=[orders.get_order], output_guardrails=[rewrite])
        recorder = Recorder()
        service.stream(QUESTION).subscribe(recorder)
        assert_rewritten(recorder)

        strings = to_text(service.stream(QUESTION), service.has_output_guardrails).pipe(ops.to_list()).run()
        assert strings == [REWRITTEN]
        assert len(server.requests) == 4


def test_guardrails_run_in_order_and_may_replace_the_response() -> None:
    seen: list[str] = []

    def first(response: LlmResponse) -> str:
        seen.append(response.text())
        return "first"

    def second(response: LlmResponse) -> LlmResponse:
        seen.append(response.text())
        return response.model_copy(update={"custom_metadata": {"checked": True}, "partial": True})

    model = ScriptedLlm([scripted_turn(Chunk(thought_delta="hmm"), Chunk(text_delta="raw"))])
    recorder = Recorder()
    AiService(model, output_guardrails=[first, second]).stream("hi").subscribe(recorder)
    recorder.wait()
    assert seen == ["raw", "first"]
    assert recorder.kinds() == ["partial_thinking", "final_response"]  # thoughts still stream
    final = recorder.events[-1].response
    assert final.text() == "first" and final.thought_text() == "hmm"
    assert final.custom_metadata == {"checked": True} and final.partial is None


@pytest.mark.parametrize(
    ("guardrail", "message"),
    [
        (lambda response: (_ for _ in ()).throw(GuardrailError("answer mentions a competitor")), "competitor"),
        (lambda response: 1 / 0, "ZeroDivisionError"),
        (lambda response: 42, "returned int"),
    ],
    ids=["rejects", "raises", "returns-junk"],
)
def test_a_rejected_answer_ends_the_stream_with_guardrail_error(guardrail: object, message: str) -> None:
    orders = OrderTool()
    recorder = Recorder()
    service = AiService(two_round_model(), tools=[orders.get_order], output_guardrails=[guardrail])  # type: ignore[list-item]
    service.stream(QUESTION).subscribe(recorder)
    recorder.wait()
    assert isinstance(recorder.error, GuardrailError)
    assert message in str(recorder.error)
    assert "final_response" not in recorder.kinds() and "partial_response" not in recorder.kinds()


def test_guardrails_must_be_callables() -> None:
    with pytest.raises(ValueError, match="callables"):
        AiService(ScriptedLlm([]), output_guardrails=["no"])  # type: ignore[list-item]
