"""The flow's rules: max_llm_calls, BIDI refusal, tool outcomes, state deltas, callbacks, call ids."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import date
from typing import Any

import pytest
import reactivex
import reactivex.subject
from pydantic import BaseModel

from rxllm import (
    BaseLlmConnection,
    Blob,
    Chunk,
    ConfigurationError,
    Content,
    LimitExceededError,
    LlmRequest,
    LlmResponse,
    Part,
    RxLlmError,
    UnsupportedOperationError,
)
from rxllm.agents import CallbackContext, Event, FunctionTool, LiveRequestQueue, Runner, StreamingMode, ToolContext
from rxllm.testing import ScriptedLlm, scripted_turn

from .support import (
    ANSWER,
    APP,
    EXPLANATION,
    QUESTION,
    SESSION,
    USER,
    ListLlm,
    Outcome,
    answer_chunks,
    get_order_function,
    history,
    make_runner,
    order_runner,
    question,
    run_collect,
    tool_calls_turn,
    user_message,
    worked_example_chunks,
    worked_example_model,
)


class Order(BaseModel):
    order_id: str
    shipped: date


# --- max_llm_calls -----------------------------------------------------------------------------------------


def test_exceeding_max_llm_calls_fails_the_run_with_a_clear_error() -> None:
    model = ScriptedLlm([tool_calls_turn(("call_1", "get_order", '{"order_id": "A17"}'))] * 5)
    runner, calls = order_runner(model)

    outcome = run_collect(runner, max_llm_calls=2)

    assert isinstance(outcome.error, LimitExceededError)
    assert "max_llm_calls limit of 2 exceeded" in str(outcome.error)
    assert len(model.requests) == 2
    assert len(calls) == 2
    assert len(history(runner)) == 5  # user, (call, response) x 2: stored before the limit hit


def test_max_llm_calls_zero_means_no_limit() -> None:
    lookup = tool_calls_turn(("call_1", "get_order", '{"order_id": "A17"}'))
    model = ScriptedLlm([lookup] * 3 + [scripted_turn(*answer_chunks())])
    runner, _ = order_runner(model)
    outcome = run_collect(runner, max_llm_calls=0)
    assert outcome.completed and len(model.requests) == 4


# --- BIDI ----------------------------------------------------------------------------------------------------


def run_live_collect(runner: Runner, queue: LiveRequestQueue, timeout: float = 5.0) -> Outcome:
    """Subscribe to one live run and wait (bounded) for its terminal event."""
    events: list[Any] = []
    errors: list[Exception] = []
    done = threading.Event()
    runner.run_live(user_id=USER, session_id=SESSION, live_request_queue=queue).subscribe(
        events.append, lambda e: (errors.append(e), done.set()), done.set
    )
    assert done.wait(timeout), "the run did not terminate"
    return Outcome(events, errors[0] if errors else None, not errors)


def test_bidi_on_a_model_that_refuses_fails_the_run_at_once() -> None:
    model = worked_example_model()  # BaseLlm.connect refuses by default
    runner, _ = order_runner(model)

    outcome = run_live_collect(runner, LiveRequestQueue())

    assert isinstance(outcome.error, UnsupportedOperationError)
    assert "live (BIDI) sessions are not supported" in str(outcome.error)
    assert model.requests == []  # generate_content was never called
    assert history(runner) == ()


def test_a_bidi_run_without_a_live_request_queue_fails_clearly() -> None:
    runner = make_runner(_LiveLlm())
    outcome = run_collect(runner, mode=StreamingMode.BIDI, timeout=2.0)
    assert isinstance(outcome.error, ConfigurationError)
    assert "Runner.run_live" in str(outcome.error)


class _Connection(BaseLlmConnection):
    """A connection that records what it was sent; ``close()`` ends ``receive()``."""

    def __init__(self) -> None:
        self.closed = threading.Event()
        self.sent: list[tuple[str, object]] = []
        self._received: reactivex.subject.Subject[LlmResponse] = reactivex.subject.Subject()

    def send_history(self, history: Sequence[Content]) -> reactivex.Observable[None]:
        self.sent.append(("history", tuple(history)))
        return reactivex.empty()

    def send_content(self, content: Content) -> reactivex.Observable[None]:
        self.sent.append(("content", content))
        return reactivex.empty()

    def send_realtime(self, blob: Blob) -> reactivex.Observable[None]:
        self.sent.append(("realtime", blob))
        return reactivex.empty()

    def receive(self) -> reactivex.Observable[LlmResponse]:
        return self._received

    def close(self, error: BaseException | None = None) -> None:
        self.closed.set()
        self._received.on_completed()


class _LiveLlm(ScriptedLlm):
    def __init__(self) -> None:
        super().__init__([])
        self.connection = _Connection()
        self.connect_requests: list[LlmRequest] = []

    def connect(self, llm_request: LlmRequest) -> BaseLlmConnection:
        self.connect_requests.append(llm_request)
        return self.connection


def test_bidi_on_a_model_that_accepts_sends_the_history_then_the_queue_and_closing_the_queue_closes_it() -> None:
    model = _LiveLlm()
    runner = make_runner(model)
    service = runner.session_service
    session = service.get_session(APP, USER, SESSION).run()
    service.append_event(session, Event(author="user", content=question())).run()
    queue = LiveRequestQueue()
    queue.content(user_message("And order B2?"))
    queue.realtime(Blob(data=b"\x00\x01", mime_type="audio/pcm;rate=16000"))
    queue.close()

    outcome = run_live_collect(runner, queue)

    assert outcome.completed and outcome.events == []
    assert model.connection.closed.is_set()
    kinds = [kind for kind, _ in model.connection.sent]
    assert kinds == ["history", "content", "realtime"]
    assert [c.text() for c in model.connection.sent[0][1]] == [QUESTION]  # type: ignore[union-attr]
    assert model.connect_requests[0].live_connect_config is not None
    assert model.requests == []  # generate_content was never called


# --- tool outcomes -------------------------------------------------------------------------------------------


def run_one_call(tool: Any, name: str, arguments: str, caplog: pytest.LogCaptureFixture) -> tuple[Any, Any]:
    model = ScriptedLlm([tool_calls_turn(("call_1", name, arguments)), scripted_turn(Chunk(text_delta="Sorry."))])
    runner = make_runner(model, tools=[tool])
    with caplog.at_level(logging.WARNING, logger="rxllm.agents"):
        outcome = run_collect(runner)
    assert outcome.completed and outcome.error is None  # a tool problem never fails the run
    response_event = history(runner)[2]
    [response] = response_event.function_responses()
    # the model is asked again, with the error in its history
    assert model.requests[1][0].contents[-1] == response_event.content
    return response, caplog.records


def test_a_tool_that_raises_answers_with_an_error(caplog: pytest.LogCaptureFixture) -> None:
    def get_order(order_id: str) -> dict[str, str]:
        raise ValueError(f"no such order: {order_id}")

    response, records = run_one_call(get_order, "get_order", '{"order_id": "Z9"}', caplog)
    assert response.id == "call_1"
    assert response.response == {"error": "tool 'get_order' raised ValueError: no such order: Z9"}
    assert any(r.levelno == logging.WARNING and "get_order" in r.getMessage() for r in records)


def test_arguments_that_fail_validation_answer_with_an_error_and_the_tool_does_not_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[dict[str, Any]] = []
    response, _ = run_one_call(get_order_function(calls), "get_order", '{"order": "A17"}', caplog)
    assert calls == []
    message = response.response["error"]
    assert message.startswith("invalid arguments for tool 'get_order': ")
    assert "order_id: Field required" in message
    assert "order: Extra inputs are not permitted" in message


def test_an_unknown_tool_answers_with_an_error(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[dict[str, Any]] = []
    response, records = run_one_call(get_order_function(calls), "cancel_order", '{"order_id": "A17"}', caplog)
    assert response.name == "cancel_order"
    assert response.response == {"error": "tool 'cancel_order' is not available (available tools: get_order)"}
    assert calls == []
    assert any("cancel_order" in r.getMessage() for r in records)


def test_a_result_that_is_not_json_answers_with_an_error(caplog: pytest.LogCaptureFixture) -> None:
    def get_order(order_id: str) -> object:
        return object()

    response, _ = run_one_call(get_order, "get_order", '{"order_id": "A17"}', caplog)
    assert response.response["error"].startswith("tool 'get_order' returned a value that is not JSON")


def test_pydantic_results_are_sent_as_json(caplog: pytest.LogCaptureFixture) -> None:
    def get_order(order_id: str) -> Order:
        return Order(order_id=order_id, shipped=date(2025, 1, 7))

    response, _ = run_one_call(get_order, "get_order", '{"order_id": "A17"}', caplog)
    assert response.response == {"result": {"order_id": "A17", "shipped": "2025-01-07"}}


def test_an_observable_tool_that_fails_answers_with_an_error(caplog: pytest.LogCaptureFixture) -> None:
    def get_order(order_id: str) -> reactivex.Observable[dict[str, str]]:
        return reactivex.throw(RuntimeError("backend down"))

    response, _ = run_one_call(get_order, "get_order", '{"order_id": "A17"}', caplog)
    assert response.response == {"error": "tool 'get_order' failed with RuntimeError: backend down"}


def test_non_dict_results_are_wrapped_and_all_calls_of_a_step_share_one_event_in_call_order() -> None:
    order: list[str] = []

    def first(x: int) -> int:
        order.append("first")
        return x * 2

    def second() -> str:
        order.append("second")
        return "ok"

    turn = tool_calls_turn(("c1", "first", '{"x": "21"}'), ("c2", "second", ""))
    model = ScriptedLlm([turn, scripted_turn(Chunk(text_delta="Done."))])
    runner = make_runner(model, tools=[first, second])
    assert run_collect(runner).completed
    assert order == ["first", "second"]
    [_, _, responses, _] = history(runner)
    assert [(r.id, r.name, r.response) for r in responses.function_responses()] == [
        ("c1", "first", {"result": 42}),  # "21" validated to int 21
        ("c2", "second", {"result": "ok"}),
    ]


def test_calls_without_an_id_get_one_and_the_response_answers_it() -> None:
    model = ScriptedLlm([tool_calls_turn((None, "get_order", '{"order_id": "A17"}')), scripted_turn(*answer_chunks())])
    runner, _ = order_runner(model)
    assert run_collect(runner).completed
    [_, call_event, response_event, _] = history(runner)
    [call] = call_event.function_calls()
    assert call.id is not None and call.id.startswith("adk-")
    assert response_event.function_responses()[0].id == call.id


def test_a_call_id_stays_the_same_between_a_partial_and_its_final() -> None:
    # A model that (against the contract) also shows the call on a partial, without ids.
    partial = LlmResponse(
        content=Content(role="model", parts=(Part.from_function_call("get_order", {"order_id": "A17"}),)),
        partial=True,
    )
    final = partial.model_copy(update={"partial": None})
    model = ListLlm([[partial, final], scripted_turn(Chunk(text_delta="Done."))])
    runner, _ = order_runner(model)
    outcome = run_collect(runner)
    partial_id = outcome.events[0].function_calls()[0].id
    assert partial_id is not None
    assert outcome.events[1].function_calls()[0].id == partial_id
    assert outcome.events[0].id != outcome.events[1].id  # but each event has its own id


def test_an_error_code_ends_the_run_without_running_tools() -> None:
    turn = scripted_turn(Chunk(text_delta="Partial answer"), Chunk(error=None, finish_reason=None))
    cut = turn[-1].model_copy(update={"error_code": "MAX_TOKENS", "error_message": "the model stopped"})
    bad = cut.model_copy(
        update={
            "content": Content(
                role="model",
                parts=(
                    Part.from_text("Partial answer"),
                    Part.from_function_call("get_order", {"order_id": "A17"}, "c"),
                ),
            )
        }
    )
    model = ListLlm([[*turn[:-1], bad]])
    runner, calls = order_runner(model)
    outcome = run_collect(runner)
    assert outcome.completed
    assert calls == []
    assert history(runner)[-1].error_code == "MAX_TOKENS"
    assert len(model.requests) == 1


# --- state ------------------------------------------------------------------------------------------------


def test_tool_state_changes_become_the_response_events_state_delta() -> None:
    def get_order(order_id: str, tool_context: ToolContext) -> dict[str, str]:
        """Look an order up."""
        visits = tool_context.state.get("visits", 0)
        assert isinstance(visits, int)
        tool_context.state["visits"] = visits + 1
        tool_context.state["last_order"] = order_id
        tool_context.state["temp:scratch"] = "not persisted"
        tool_context.state["user:name"] = "Ada"
        assert tool_context.function_call_id == "call_1"
        return {"status": "shipped"}

    model = ScriptedLlm([scripted_turn(*worked_example_chunks()), scripted_turn(*answer_chunks())])
    runner = make_runner(model, tools=[get_order], instruction="Last order: {last_order?}. User: {user:name?}.")
    runner.session_service.create_session(APP, USER, session_id="other").run()
    assert "tool_context" not in str(FunctionTool(get_order).declaration().parameters)

    assert run_collect(runner).completed

    response_event = history(runner)[2]
    assert response_event.actions.state_delta == {"visits": 1, "last_order": "A17", "user:name": "Ada"}
    session = runner.session_service.get_session(APP, USER, "s1").run()
    assert session.state == {"visits": 1, "last_order": "A17", "user:name": "Ada"}
    # user: keys are shared by the user's other sessions; session keys are not
    assert runner.session_service.get_session(APP, USER, "other").run().state == {"user:name": "Ada"}
    # the next request's instruction is built from the stored state
    instructions = [r.config.system_instruction.text() for r, _ in model.requests if r.config.system_instruction]
    identity = '\n\nYou are an agent. Your internal name is "support".'
    assert instructions == ["Last order: . User: ." + identity, "Last order: A17. User: Ada." + identity]


def test_a_missing_state_key_in_the_instruction_fails_the_run() -> None:
    runner = make_runner(ScriptedLlm([scripted_turn(Chunk(text_delta="Hi"))]), instruction="Hello {name}")
    outcome = run_collect(runner)
    assert isinstance(outcome.error, ValueError) and "'name'" in str(outcome.error)


def test_skip_summarization_ends_the_turn_with_the_tool_response() -> None:
    def get_order(order_id: str, tool_context: ToolContext) -> dict[str, str]:
        tool_context.actions.skip_summarization = True
        return {"status": "shipped"}

    model = ScriptedLlm([scripted_turn(*worked_example_chunks())])
    runner = make_runner(model, tools=[get_order])
    outcome = run_collect(runner)
    assert outcome.completed and len(model.requests) == 1
    assert outcome.events[-1].is_final_response() and outcome.events[-1].actions.skip_summarization


# --- callbacks ------------------------------------------------------------------------------------------------


def test_before_model_callback_can_answer_instead_of_the_model() -> None:
    seen: list[LlmRequest] = []

    def cache(ctx: CallbackContext, request: LlmRequest) -> LlmResponse:
        seen.append(request)
        ctx.state["cached"] = True
        return LlmResponse(content=Content(role="model", parts=(Part.from_text("From cache."),)))

    model = ScriptedLlm([])
    runner = make_runner(model, before_model_callback=cache)
    outcome = run_collect(runner, max_llm_calls=1)
    assert outcome.completed
    assert model.requests == []
    assert [e.text() for e in history(runner)] == [QUESTION, "From cache."]
    assert history(runner)[-1].actions.state_delta == {"cached": True}
    assert [c.text() for c in seen[0].contents] == [QUESTION]


def test_before_model_callback_can_replace_the_request() -> None:
    def shout(ctx: CallbackContext, request: LlmRequest) -> LlmRequest:
        return request.model_copy(update={"config": request.config.model_copy(update={"temperature": 0.0})})

    model = ScriptedLlm([scripted_turn(Chunk(text_delta="ok"))])
    runner = make_runner(model, before_model_callback=[lambda ctx, request: None, shout])
    assert run_collect(runner).completed
    assert model.requests[0][0].config.temperature == 0.0


def test_after_model_callback_replacement_keeps_the_partial_flag() -> None:
    def redact(ctx: CallbackContext, response: LlmResponse) -> LlmResponse | None:
        if "A17" not in response.text():
            return None
        text = response.text().replace("A17", "[order]")
        return LlmResponse(content=Content(role="model", parts=(Part.from_text(text),)))  # partial unset

    model = ScriptedLlm([scripted_turn(*answer_chunks())])
    runner = make_runner(model, after_model_callback=redact)
    outcome = run_collect(runner)
    assert [(e.partial, e.text()) for e in outcome.events] == [
        (True, "Order [order] "),  # replaced a partial: still partial, so not stored
        (True, "shipped "),
        (True, "Tuesday."),
        (None, "Order [order] shipped Tuesday."),
    ]
    assert [e.text() for e in history(runner)] == [QUESTION, "Order [order] shipped Tuesday."]


def test_a_callback_that_raises_fails_the_run_with_the_cause_chained() -> None:
    def broken(ctx: CallbackContext, request: LlmRequest) -> None:
        raise KeyError("boom")

    runner = make_runner(ScriptedLlm([scripted_turn(Chunk(text_delta="ok"))]), before_model_callback=broken)
    outcome = run_collect(runner)
    assert isinstance(outcome.error, RxLlmError)
    assert "before_model_callback 'broken' of agent 'support' raised KeyError" in str(outcome.error)
    assert isinstance(outcome.error.__cause__, KeyError)


def test_history_of_the_worked_example_with_callbacks_in_none_mode() -> None:
    after_calls: list[bool | None] = []

    def observe(ctx: CallbackContext, response: LlmResponse) -> None:
        after_calls.append(response.partial)

    runner, _ = order_runner(worked_example_model(), after_model_callback=observe)
    assert run_collect(runner, mode=StreamingMode.NONE).completed
    assert after_calls == [None, None]
    assert [e.text() for e in history(runner)] == [QUESTION, EXPLANATION, "", ANSWER]
