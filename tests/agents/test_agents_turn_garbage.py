"""An agent turn, a service turn, a failed call and an iterated stream leave nothing for the garbage
collector: what they made is freed by reference counting when they end.

A reference cycle (an operator holding its own bound methods, a run queued on its lane through a
ticket that holds the run's ``start``, a relay holding the interaction that owns it) keeps every
object the turn made alive until the collector's next pass over that generation; the turn's
objects then survive into the older generations and are walked again by every pass there.
Measured before: 159 objects a turn (agent) and 99 (service) went to the collector, and about
0.2 ms a turn went to collections. The collector is off in these tests, so ``gc.collect()``
returns what only it could have freed.
"""

from __future__ import annotations

import gc
import threading
import types
from typing import Any

import pytest
from reactivex import operators as ops
from reactivex.scheduler import ImmediateScheduler
from reactivex.testing import TestScheduler

from rxllm import Content, Part, RetryPolicy, RxLlmError
from rxllm._rx.blocking import iterate
from rxllm._rx.direct import concat_map_items, concat_now, emit_now
from rxllm.agents import Event, InMemoryRunner, LlmAgent, RunConfig, StreamingMode
from rxllm.providers.openai import OpenAiChatModel
from rxllm.service import AiService
from rxllm.testing import ScriptedLlm, StubResponse, StubServer, scripted_turn

from .support import ANSWER, QUESTION, answer_chunks, get_order_function, question, worked_example_chunks

TIMEOUT = 10.0


def _garbage() -> list[str]:
    """What only the collector could free, by type name (collected, so the next call starts afresh)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        kinds = sorted(type(thing).__qualname__ for thing in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.collect()  # (what the list held is garbage again: freed now, not saved by the next call)
    return kinds


def _inline_runner(turns: int) -> InMemoryRunner:
    """The worked example in process: the model and the tool run on the subscribing thread."""
    model = ScriptedLlm(
        [scripted_turn(*worked_example_chunks()), scripted_turn(*answer_chunks())] * turns,
        scheduler=ImmediateScheduler(),
    )
    agent = LlmAgent("support", model, instruction="You answer orders.", tools=[get_order_function([])])
    return InMemoryRunner(agent, app_name="shop", tool_scheduler=ImmediateScheduler())


def _session(runner: InMemoryRunner, session_id: str) -> str:
    runner.session_service.create_session("shop", "u", session_id=session_id).run()
    return session_id


@pytest.mark.usefixtures("collector_off")
@pytest.mark.parametrize("mode", [StreamingMode.SSE, StreamingMode.NONE])
def test_an_agent_turn_in_process_leaves_no_cycle(mode: StreamingMode) -> None:
    runner = _inline_runner(turns=2)
    warm = runner.run_async("u", _session(runner, "warm"), question(), RunConfig(streaming_mode=mode))
    warm.pipe(ops.to_list()).run()
    session_id = _session(runner, "s")
    _garbage()  # (what the first use of anything made, and what came before this test)

    events: list[Event] = runner.run_async("u", session_id, question(), RunConfig(streaming_mode=mode)).pipe(
        ops.to_list()
    ).run()

    assert events[-1].text() == ANSWER  # (the turn ran: two model calls and the tool)
    assert _garbage() == []


@pytest.mark.usefixtures("collector_off")
def test_an_agent_run_disposed_at_its_first_partial_leaves_no_cycle() -> None:
    clock = TestScheduler()  # (the model emits when the clock moves, after subscribe returned)
    model = ScriptedLlm([scripted_turn(*worked_example_chunks()), scripted_turn(*answer_chunks())], scheduler=clock)
    agent = LlmAgent("support", model, instruction="You answer orders.", tools=[get_order_function([])])
    runner = InMemoryRunner(agent, app_name="shop", tool_scheduler=ImmediateScheduler())
    session_id = _session(runner, "s")
    seen: list[Event] = []
    held: list[Any] = []  # (popped when disposed: a subscription its own on_next refers to would be a cycle)

    def on_next(event: Event) -> None:
        seen.append(event)
        held.pop().dispose()

    run = runner.run_async("u", session_id, question(), RunConfig(streaming_mode=StreamingMode.SSE))
    _garbage()
    held.append(run.subscribe(on_next))
    clock.advance_to(1.0)

    assert [event.partial for event in seen] == [True]
    assert model.calls[0].cancelled and len(model.calls) == 1
    assert _garbage() == []


@pytest.mark.usefixtures("collector_off")
def test_a_service_turn_in_process_leaves_no_cycle() -> None:
    model = ScriptedLlm(
        [scripted_turn(*worked_example_chunks()), scripted_turn(*answer_chunks())] * 2, scheduler=ImmediateScheduler()
    )
    service = AiService(model, tools=[get_order_function([])], tool_scheduler=ImmediateScheduler())
    service.stream(QUESTION).pipe(ops.to_list()).run()
    _garbage()

    streamed = service.stream(Content(role="user", parts=(Part.from_text(QUESTION),))).pipe(ops.to_list()).run()

    assert streamed[-1].kind == "final_response" and streamed[-1].response.text() == ANSWER
    assert _garbage() == []


@pytest.mark.usefixtures("collector_off")
def test_turns_over_a_loopback_server_leave_no_cycle(example: types.ModuleType) -> None:
    """Over a real socket, with the tools on the runner's pool and the service's: three turns of each,
    and once the server is closed (every thread of the turns long done) nothing is left either."""
    turns = 3
    with StubServer(example.streamed_responses() * (2 * turns)) as server:
        model = OpenAiChatModel("gpt-stub", base_url=server.url + "/v1", api_key="sk-test-not-real")
        runner = InMemoryRunner(
            LlmAgent("support", model, instruction="You answer orders.", tools=[get_order_function([])]),
            app_name="shop",
        )
        service = AiService(model, tools=[get_order_function([])])
        found: list[list[str]] = []
        for turn in range(turns):
            session_id = _session(runner, f"s{turn}")
            done = threading.Event()
            events: list[Event] = []
            runner.run_async("u", session_id, question(), RunConfig(streaming_mode=StreamingMode.SSE)).subscribe(
                events.append, lambda _, done=done: done.set(), done.set
            )
            assert done.wait(TIMEOUT)
            assert events[-1].text() == ANSWER
            streamed = service.stream(QUESTION).pipe(ops.to_list()).run()
            assert streamed[-1].response.text() == ANSWER
            found.append(_garbage())
        assert len(server.requests) == 4 * turns
    found.append(_garbage())

    assert found[1:] == [[]] * turns  # (the first turn's: what the first use of anything made, too)


@pytest.mark.usefixtures("collector_off")
def test_the_concatenations_let_go_of_their_subscribers_once_ended() -> None:
    """``concat_now`` and ``concat_map_items`` (every run and step is built on them) hold bound methods
    of themselves and of their observer while they run; once ended they hold none."""
    seen: list[object] = []
    concat_now(iter([emit_now(0)])).subscribe(seen.append)
    seen.clear()
    _garbage()

    concat_now(iter([emit_now(1), emit_now(2)])).subscribe(seen.append)
    concat_map_items(emit_now(3), lambda item: emit_now(item * 2), int).subscribe(seen.append)
    concat_map_items(emit_now(4), lambda item: item * 2, int).subscribe(seen.append)
    concat_now(iter([concat_map_items(emit_now(5), lambda item: concat_now(iter([emit_now(item)])), int)])).subscribe(
        seen.append
    )

    assert seen == [1, 2, 6, 8, 5]
    assert _garbage() == []


def _failing_model(server: StubServer) -> OpenAiChatModel:
    return OpenAiChatModel(
        "gpt-stub", base_url=server.url + "/v1", api_key="sk-test-not-real", retry_policy=RetryPolicy.never()
    )


_FAILURE = StubResponse(status=500, body=(b'{"error": {"message": "the stub fails"}}',))


@pytest.mark.usefixtures("collector_off")
def test_a_failed_call_raised_by_run_leaves_no_cycle() -> None:
    """``.run()`` raises the error the stream ended with: its frame goes into the error's traceback,
    so nothing it holds may hold the error (the error, its traceback and every frame's locals
    would wait for the collector, after every failed call a caller catches)."""
    with StubServer([_FAILURE] * 3) as server:
        model = _failing_model(server)
        raised: list[type[Exception]] = []
        for _ in range(3):
            try:
                model.generate_content(QUESTION, stream=True).run()
            except RxLlmError as error:
                raised.append(type(error))
            if len(raised) == 1:
                _garbage()  # (what the first use of anything made)
                continue
            assert _garbage() == []
    assert len(raised) == 3 and all(issubclass(kind, RxLlmError) for kind in raised)


@pytest.mark.usefixtures("collector_off")
@pytest.mark.parametrize("fails", [False, True])
def test_iterating_a_stream_to_its_end_leaves_no_cycle(example: types.ModuleType, fails: bool) -> None:
    """A blocking iterator lets go of its subscription once the stream ended (its sink holds the
    iterator's methods), and raises the stream's error holding nothing that holds it."""
    responses = [_FAILURE] * 3 if fails else example.streamed_responses()[:1] * 3
    with StubServer(responses) as server:
        model = _failing_model(server)
        for turn in range(3):
            texts: list[str] = []
            try:
                for response in iterate(model.generate_content(QUESTION, stream=True)):
                    texts.append(response.text())
            except RxLlmError:
                assert fails
            else:
                assert not fails and texts[-1] == "Let me look that up."
            found = _garbage()
            if turn:
                assert found == []
