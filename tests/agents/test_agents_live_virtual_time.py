"""``run_live`` pipelines in virtual time: ``ScriptedLlm(live=[...])`` plays a live session on a
``TestScheduler`` and records what the flow sent; ``LiveRequestQueue`` on its own."""

from __future__ import annotations

from typing import Any

import pytest
from reactivex import operators as ops
from reactivex.scheduler import ImmediateScheduler
from reactivex.testing import TestScheduler

from rxllm import (
    Blob,
    BufferOverflowError,
    ConfigurationError,
    Content,
    FunctionCall,
    LimitExceededError,
    LlmRequest,
    LlmResponse,
    Part,
    ProtocolError,
    Transcription,
)
from rxllm.agents import Event, InMemoryRunner, LiveRequest, LiveRequestQueue, LlmAgent, RunConfig
from rxllm.testing import At, ScriptedLlm

from .support import APP, ORDER, SESSION, USER, get_order_function

HELLO = Content(role="user", parts=(Part.from_text("Where is order A17?"),))


def text(value: str, *, partial: bool | None = True) -> LlmResponse:
    return LlmResponse(content=Content(role="model", parts=(Part.from_text(value),)), partial=partial)


def calls(*function_calls: FunctionCall) -> LlmResponse:
    return LlmResponse(content=Content(role="model", parts=tuple(Part(function_call=c) for c in function_calls)))


def turn_complete(value: str = "") -> LlmResponse:
    parts = (Part.from_text(value),) if value else ()
    return LlmResponse(content=Content(role="model", parts=parts) if parts else None, turn_complete=True)


def runner_for(model: ScriptedLlm, tools: list[Any]) -> InMemoryRunner:
    agent = LlmAgent("support", model, tools=tools, instruction="You answer about orders.")
    runner = InMemoryRunner(agent, app_name=APP, tool_scheduler=ImmediateScheduler())
    runner.session_service.create_session(APP, USER, session_id=SESSION).run()
    return runner


def stored(runner: InMemoryRunner) -> tuple[Event, ...]:
    return runner.session_service.get_session(APP, USER, SESSION).run().events


def test_a_live_turn_in_virtual_time_answers_the_tool_call_over_the_connection_at_its_instant() -> None:
    clock = TestScheduler()
    script = [At(1.0, text("Checking.")), At(2.0, calls(FunctionCall(id="c1", name="get_order",
                                                                       args={"order_id": "A17"}))),
              At(3.0, LlmResponse(output_transcription=Transcription(text="It shipped", finished=True))),
              At(3.0, turn_complete("It shipped."))]
    model = ScriptedLlm([], scheduler=clock, live=[script])
    tool_calls: list[dict[str, Any]] = []
    runner = runner_for(model, [get_order_function(tool_calls)])
    queue = LiveRequestQueue()
    queue.content(HELLO)
    events: list[Event] = []
    ended: list[str] = []
    runner.run_live(user_id=USER, session_id=SESSION, live_request_queue=queue,
                    run_config=RunConfig(response_modalities=("TEXT",))).subscribe(
        events.append, lambda e: ended.append(repr(e)), lambda: ended.append("completed"))

    connection = model.connections[0]
    assert [s.kind for s in connection.sent] == ["content"]  # the session had no history
    assert connection.request.live_connect_config.response_modalities == ("TEXT",)
    clock.advance_to(1.5)
    assert [e.text() for e in events] == ["Checking."] and tool_calls == []
    clock.advance_to(2.0)
    assert tool_calls == [{"order_id": "A17"}]
    answer = connection.sent[-1]
    assert answer.kind == "content" and answer.at == 2.0
    assert answer.value.parts[0].function_response.response == ORDER  # type: ignore[union-attr]
    clock.advance_to(3.0)
    assert events[-1].turn_complete and ended == []  # the session stays open after a turn
    queue.close()
    assert connection.closed and ended == ["completed"]
    history = stored(runner)
    assert [(bool(e.function_calls()), bool(e.function_responses()), e.turn_complete) for e in history] == [
        (True, False, None), (False, True, None), (False, False, None), (False, False, True)]
    assert history[2].output_transcription.text == "It shipped"
    assert connection.call.disposed_at is None  # closed, not disposed


def test_disposing_a_live_run_in_virtual_time_stops_the_script_and_starts_no_tool() -> None:
    clock = TestScheduler()
    call = calls(FunctionCall(id="c1", name="get_order", args={"order_id": "A17"}))
    model = ScriptedLlm([], scheduler=clock, live=[[At(1.0, text("Checking.")), At(2.0, call)]])
    tool_calls: list[dict[str, Any]] = []
    runner = runner_for(model, [get_order_function(tool_calls)])
    events: list[Event] = []
    subscription = runner.run_live(user_id=USER, session_id=SESSION, live_request_queue=LiveRequestQueue()).subscribe(
        events.append)
    clock.advance_to(1.5)
    subscription.dispose()
    clock.advance_to(5.0)
    connection = model.connections[0]
    assert connection.closed and connection.call.disposed_at == 1.5
    assert [e.text() for e in events] == ["Checking."] and tool_calls == [] and stored(runner) == ()


def test_an_error_in_the_script_fails_the_run_and_the_session_keeps_what_was_stored() -> None:
    clock = TestScheduler()
    model = ScriptedLlm([], scheduler=clock, live=[[At(1.0, turn_complete("One.")), At(2.0, ProtocolError("bad"))]])
    runner = runner_for(model, [])
    errors: list[Exception] = []
    runner.run_live(user_id=USER, session_id=SESSION, live_request_queue=LiveRequestQueue()).subscribe(
        on_error=errors.append)
    clock.advance_to(2.0)
    assert len(errors) == 1 and isinstance(errors[0], ProtocolError)
    assert [e.text() for e in stored(runner)] == ["One."]
    assert model.connections[0].closed


def test_a_scripted_connection_records_sends_and_refuses_a_second_receive_and_a_missing_script() -> None:
    clock = TestScheduler()
    model = ScriptedLlm([], scheduler=clock, live=[[At(1.0, text("Hi"))]])
    connection = model.connect(LlmRequest())
    connection.send_history([HELLO])
    connection.send_realtime(Blob(data=b"\x00", mime_type="audio/pcm;rate=16000"))
    seen: list[LlmResponse] = []
    ended: list[Exception] = []
    connection.receive().subscribe(seen.append, ended.append)
    second: list[Exception] = []
    connection.receive().subscribe(on_error=second.append)
    clock.advance_to(1.0)
    assert [r.text() for r in seen] == ["Hi"] and isinstance(second[0], ConfigurationError)
    assert [(s.kind, s.at) for s in connection.sent] == [("history", 0.0), ("realtime", 0.0)]
    failed: list[Exception] = []
    connection.close(ProtocolError("gone"))
    connection.send_content(HELLO).subscribe(on_error=failed.append)
    assert isinstance(ended[0], ProtocolError) and connection.close_error is ended[0]
    assert failed and "closed" in str(failed[0])
    with pytest.raises(LimitExceededError, match="1 scripted live session"):
        model.connect(LlmRequest())


def test_the_queue_buffers_until_its_reader_delivers_in_order_and_completes_after_close() -> None:
    queue = LiveRequestQueue(max_buffered=2)
    queue.content(HELLO)
    queue.realtime(Blob(data=b"\x01", mime_type="audio/pcm;rate=16000"))
    with pytest.raises(BufferOverflowError, match="max_buffered=2"):
        queue.realtime(Blob(data=b"\x02", mime_type="audio/pcm;rate=16000"))
    seen: list[LiveRequest] = []
    done: list[bool] = []
    subscription = queue.get().subscribe(seen.append, on_completed=lambda: done.append(True))
    assert [r.content is not None for r in seen] == [True, False]
    refused: list[Exception] = []
    queue.get().subscribe(on_error=refused.append)
    assert isinstance(refused[0], ConfigurationError)  # one reader at a time
    subscription.dispose()
    queue.content(HELLO)  # waits for the next reader (an agent the run transferred to)
    queue.close()
    with pytest.raises(ConfigurationError, match="closed"):
        queue.content(HELLO)
    rest = queue.get().pipe(ops.to_list()).run()
    assert [(r.content is not None, r.close) for r in rest] == [(True, False), (False, True)]
    assert seen[2:] == [] and done == []


def test_a_live_request_holds_exactly_one_thing() -> None:
    with pytest.raises(ValueError, match="exactly one"):  # pydantic's ValidationError
        LiveRequest(content=HELLO, close=True)
    with pytest.raises(ValueError, match="exactly one"):
        LiveRequest()
