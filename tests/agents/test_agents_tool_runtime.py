"""Where agent tools run: off the stream's thread and loop, async tools on a loop, timeouts,
JSON-safe results, and one writer per session across runners. Real loopback servers where a transport
is involved, on both transports."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import reactivex
from reactivex import operators as ops
from reactivex.scheduler import ImmediateScheduler, ThreadPoolScheduler
from reactivex.testing import TestScheduler

from rxllm import AsyncHttpTransport, FunctionCall, FunctionResponse, HttpTransport, RxLlmError, ToolTimeoutError
from rxllm._tools import ToolContext, ToolRuntime, call_tool, execute_tool
from rxllm.agents import Event, FunctionTool, InMemorySessionService, LlmAgent, RunConfig, Runner, StreamingMode
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import Hold, ScriptedLlm, StubResponse, StubServer, scripted_turn

from .support import APP, SESSION, USER, answer_chunks, history, make_runner, question, tool_calls_turn

TIMEOUT = 10.0


# --- an OpenAI-compatible wire ------------------------------------------------------------------


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
    return json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [choice]})


def tool_call_response(call_id: str, name: str, arguments: str = "{}") -> StubResponse:
    call = {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    return StubResponse.sse([_chunk({"role": "assistant", "tool_calls": [call]}), _chunk({}, "tool_calls"), "[DONE]"])


def text_response(*pieces: str, hold: Hold | None = None) -> StubResponse:
    events = [_chunk({"role": "assistant", "content": piece}).encode() for piece in pieces]
    body: list[Any] = [b"data: " + event + b"\n\n" for event in events]
    if hold is not None:
        body.insert(1, hold)
    body += [b"data: " + _chunk({}, "stop").encode() + b"\n\n", b"data: [DONE]\n\n"]
    return StubResponse(body=tuple(body))


@pytest.fixture(params=["threads", "asyncio"])
def transport(request: pytest.FixtureRequest) -> Iterator[HttpTransport | AsyncHttpTransport]:
    created: HttpTransport | AsyncHttpTransport = (
        HttpTransport(max_concurrent_streams=8) if request.param == "threads" else AsyncHttpTransport()
    )
    yield created
    created.close()


def model_on(server: StubServer, transport: HttpTransport | AsyncHttpTransport) -> OpenAiChatModel:
    return OpenAiChatModel("gpt-stub", base_url=server.url + "/v1", api_key="sk-test-not-real", transport=transport)


class Run:
    def __init__(self) -> None:
        self.events: list[Any] = []
        self.errors: list[Exception] = []
        self.done = threading.Event()

    def on_error(self, error: Exception) -> None:
        self.errors.append(error)
        self.done.set()

    def subscribe(self, source: reactivex.Observable[Any]) -> Any:
        return source.subscribe(self.events.append, self.on_error, self.done.set)


SSE = RunConfig(streaming_mode=StreamingMode.SSE)


# --- tools off the loop ---------------------------------------------------------------------------


def test_a_hung_tool_never_stalls_another_stream(transport: HttpTransport | AsyncHttpTransport) -> None:
    tool_started = threading.Event()
    release_tool = threading.Event()
    flowing = threading.Event()  # the unrelated stream's server waits for this before its second event
    seen_threads: list[str] = []

    def hang(order_id: str) -> str:
        """Hangs until released."""
        seen_threads.append(threading.current_thread().name)
        tool_started.set()
        release_tool.wait(30)
        return "done"

    def respond(request: Any) -> StubResponse:
        body = request.json()
        if body.get("tools"):  # the agent's calls
            if body["messages"][-1]["role"] == "tool":
                return text_response("Done.")
            return tool_call_response("call_1", "hang", '{"order_id": "A17"}')
        return text_response("one ", "two", hold=Hold(flowing, timeout=30.0))

    with StubServer(responder=respond) as server:
        model = model_on(server, transport)
        runner = make_runner(model, tools=[hang])
        agent_run = Run()
        agent_subscription = agent_run.subscribe(runner.run_async(USER, SESSION, question(), SSE))
        assert tool_started.wait(TIMEOUT)

        # While the tool hangs, an unrelated stream on the same transport flows to its end.
        other = Run()

        def on_next(response: Any) -> None:
            other.events.append(response)
            flowing.set()  # the first partial arrived: let the server send the rest

        model.generate_content(_plain_request(), stream=True).subscribe(on_next, other.on_error, other.done.set)
        assert other.done.wait(TIMEOUT), "the unrelated stream stalled while a tool hung"
        assert other.errors == [] and other.events[-1].text() == "one two"
        assert not release_tool.is_set() and not agent_run.done.is_set()

        release_tool.set()
        assert agent_run.done.wait(TIMEOUT)
        agent_subscription.dispose()
    assert agent_run.errors == []
    assert agent_run.events[-1].text() == "Done."
    assert seen_threads and seen_threads[0].startswith("rxllm-tool")


def _plain_request() -> Any:
    from rxllm import Content, LlmRequest, Part

    return LlmRequest(contents=(Content(role="user", parts=(Part.from_text("hi"),)),))


def test_synchronous_tools_run_on_the_tool_pool_never_on_a_loop() -> None:
    where: list[tuple[str, bool]] = []

    def lookup(order_id: str) -> str:
        """Look."""
        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:
            on_loop = False
        where.append((threading.current_thread().name, on_loop))
        return "ok"

    transport = AsyncHttpTransport()
    try:
        with StubServer([tool_call_response("c1", "lookup", '{"order_id": "A"}'), text_response("Fine.")]) as server:
            runner = make_runner(model_on(server, transport), tools=[lookup])
            events = runner.run_async(USER, SESSION, question(), SSE).pipe(ops.to_list()).run()
    finally:
        transport.close()
    assert events[-1].text() == "Fine."
    assert len(where) == 1 and where[0][0].startswith("rxllm-tool_") and where[0][1] is False


def test_a_runner_tool_scheduler_is_where_tools_run() -> None:
    names: list[str] = []

    def lookup(order_id: str) -> str:
        """Look."""
        names.append(threading.current_thread().name)
        return "ok"

    model = ScriptedLlm([tool_calls_turn(("c1", "lookup", '{"order_id": "A"}')), scripted_turn(*answer_chunks())])
    service = InMemorySessionService()
    service.create_session(APP, USER, session_id=SESSION).run()
    pool = ThreadPoolScheduler(1)
    pool.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="my-tools")
    try:
        runner = Runner(LlmAgent("bot", model, tools=[lookup]), APP, service, tool_scheduler=pool)
        runner.run_async(USER, SESSION, question()).pipe(ops.to_list()).run()
    finally:
        pool.executor.shutdown(wait=True)
    assert len(names) == 1 and names[0].startswith("my-tools")


# --- async tools -----------------------------------------------------------------------------------


def test_an_async_tool_is_awaited_on_the_loop_the_run_was_subscribed_from() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def lookup(order_id: str) -> dict[str, str]:
        """Look an order up."""
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0)
        return {"status": "shipped"}

    model = ScriptedLlm([tool_calls_turn(("c1", "lookup", '{"order_id": "A"}')), scripted_turn(*answer_chunks())])
    runner = make_runner(model, tools=[lookup])

    async def main() -> tuple[asyncio.AbstractEventLoop, list[Event], list[Exception]]:
        loop = asyncio.get_running_loop()
        finished = asyncio.Event()
        events: list[Event] = []
        errors: list[Exception] = []

        def on_error(error: Exception) -> None:
            errors.append(error)
            loop.call_soon_threadsafe(finished.set)

        runner.run_async(USER, SESSION, question()).subscribe(
            events.append, on_error, lambda: loop.call_soon_threadsafe(finished.set)
        )
        await asyncio.wait_for(finished.wait(), TIMEOUT)
        return loop, events, errors

    loop, events, errors = asyncio.run(main())
    assert errors == []
    assert loops == [loop]
    responses = [r.response for e in events for r in e.function_responses()]
    assert responses == [{"status": "shipped"}]


def test_an_async_tool_with_no_loop_around_runs_on_rxllm_tool_loop() -> None:
    names: list[str] = []

    async def lookup(order_id: str) -> str:
        """Look."""
        names.append(threading.current_thread().name)
        return "ok"

    model = ScriptedLlm([tool_calls_turn(("c1", "lookup", '{"order_id": "A"}')), scripted_turn(*answer_chunks())])
    runner = make_runner(model, tools=[lookup])
    events = runner.run_async(USER, SESSION, question()).pipe(ops.to_list()).run()
    assert names == ["rxllm-tool-loop"]
    assert [r.response for e in events for r in e.function_responses()] == [{"result": "ok"}]


def test_disposing_the_run_cancels_a_running_async_tool() -> None:
    started = threading.Event()
    cancelled = threading.Event()

    async def wait_forever(order_id: str) -> str:
        """Never answers."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    model = ScriptedLlm([tool_calls_turn(("c1", "wait_forever", '{"order_id": "A"}')), scripted_turn(*answer_chunks())])
    runner = make_runner(model, tools=[wait_forever])
    run = Run()
    subscription = run.subscribe(runner.run_async(USER, SESSION, question()))
    assert started.wait(TIMEOUT)
    subscription.dispose()
    assert cancelled.wait(TIMEOUT)
    assert not run.done.is_set()
    assert len(model.requests) == 1


def test_an_async_tool_that_raises_answers_with_an_error() -> None:
    async def broken(order_id: str) -> str:
        """Breaks."""
        raise LookupError("no such order")

    model = ScriptedLlm([tool_calls_turn(("c1", "broken", '{"order_id": "A"}')), scripted_turn(*answer_chunks())])
    runner = make_runner(model, tools=[broken])
    events = runner.run_async(USER, SESSION, question()).pipe(ops.to_list()).run()
    [response] = [r.response for e in events for r in e.function_responses()]
    assert "LookupError" in str(response["error"]) and "no such order" in str(response["error"])


# --- timeouts ---------------------------------------------------------------------------------------


def test_a_tool_past_the_runners_timeout_answers_the_model_with_an_error() -> None:
    release = threading.Event()

    def slow(order_id: str) -> str:
        """Slow."""
        release.wait(30)
        return "late"

    model = ScriptedLlm([tool_calls_turn(("c1", "slow", '{"order_id": "A"}')), scripted_turn(*answer_chunks())])
    service = InMemorySessionService()
    service.create_session(APP, USER, session_id=SESSION).run()
    runner = Runner(LlmAgent("bot", model, tools=[slow]), APP, service, tool_timeout=0.05)
    try:
        events = runner.run_async(USER, SESSION, question()).pipe(ops.to_list()).run()
    finally:
        release.set()
    [response] = [r.response for e in events for r in e.function_responses()]
    assert response == {"error": "tool 'slow' did not answer within its timeout of 0.05 s"}
    # The model saw the error result in its next request.
    second = model.requests[1][0]
    sent = [p.function_response for c in second.contents for p in c.parts if p.function_response]
    assert sent[0] is not None and "timeout" in str(sent[0].response["error"])


def test_a_function_tool_timeout_applies_to_its_calls() -> None:
    release = threading.Event()

    def slow(order_id: str) -> str:
        """Slow."""
        release.wait(30)
        return "late"

    model = ScriptedLlm([tool_calls_turn(("c1", "slow", '{"order_id": "A"}')), scripted_turn(*answer_chunks())])
    runner = make_runner(model, tools=[FunctionTool(slow, timeout=0.05)])
    try:
        events = runner.run_async(USER, SESSION, question()).pipe(ops.to_list()).run()
    finally:
        release.set()
    [response] = [r.response for e in events for r in e.function_responses()]
    assert "within its timeout of 0.05 s" in str(response["error"])


def test_a_tools_own_timeout_takes_precedence_over_the_runtimes_default() -> None:
    clock = TestScheduler()
    tool = FunctionTool(lambda_never, timeout=10.0)
    runtime = ToolRuntime(scheduler=ImmediateScheduler(), timeout=1.0, timer_scheduler=clock)
    errors: list[Exception] = []
    execute_tool(tool, {}, ToolContext.standalone(), runtime).subscribe(on_error=errors.append)
    clock.advance_to(5.0)
    assert errors == []
    clock.advance_to(10.5)
    assert len(errors) == 1 and isinstance(errors[0], ToolTimeoutError)

    default_only = FunctionTool(lambda_never)
    errors.clear()
    execute_tool(default_only, {}, ToolContext.standalone(), runtime).subscribe(on_error=errors.append)
    clock.advance_by(1.5)
    assert len(errors) == 1 and "timeout of 1 s" in str(errors[0])


def lambda_never() -> reactivex.Observable[str]:
    """Never answers."""
    return reactivex.never()


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "5", True])
def test_timeouts_must_be_positive_numbers(bad: Any) -> None:
    from rxllm import ConfigurationError

    with pytest.raises(ConfigurationError, match="timeout"):
        FunctionTool(lambda_never, timeout=bad)
    with pytest.raises(ConfigurationError, match="tool_timeout"):
        Runner(LlmAgent("bot", ScriptedLlm([])), APP, InMemorySessionService(), tool_timeout=bad)


# --- JSON-safe results ------------------------------------------------------------------------------


class Opaque:
    pass


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (10**5000, "integer string conversion"),
        (float("nan"), "Out of range float"),
        (float("inf"), "Out of range float"),
        ({"nested": [1, float("-inf")]}, "Out of range float"),
        (Opaque(), "Unable to serialize unknown type"),
    ],
    ids=["huge-int", "nan", "inf", "nested-inf", "object"],
)
def test_a_result_json_cannot_carry_is_an_error_result_and_the_session_keeps_working(value: Any, why: str) -> None:
    def compute(order_id: str) -> Any:
        """Compute."""
        return value

    turns = [tool_calls_turn(("c1", "compute", '{"order_id": "A"}')), scripted_turn(*answer_chunks())]
    model = ScriptedLlm([*turns, *turns])
    runner = make_runner(model, tools=[compute])
    for _ in range(2):  # a later run of the same session works too
        events = runner.run_async(USER, SESSION, question()).pipe(ops.to_list()).run()
        [response] = [r.response for e in events for r in e.function_responses()]
        assert str(response["error"]).startswith("tool 'compute' returned a value that is not JSON")
        assert why in str(response["error"])
    for request, _ in model.requests:
        for content in request.contents:
            for part in content.parts:
                if part.function_response is not None:
                    json.dumps(part.function_response.response, allow_nan=False)
    assert len(history(runner)) == 8


def test_a_session_already_holding_unencodable_values_keeps_working_over_the_wire() -> None:
    from rxllm import Content, Part

    transport = HttpTransport(max_concurrent_streams=2)
    try:
        with StubServer([text_response("Still here.")]) as server:
            runner = make_runner(model_on(server, transport))
            service = runner.session_service
            session = service.get_session(APP, USER, SESSION).run()
            call = FunctionCall(id="c1", name="compute", args={"x": float("nan")})
            bad = FunctionResponse(id="c1", name="compute", response={"result": 10**5000, "ratio": float("nan")})
            for event in (
                Event(author="user", content=Content(role="user", parts=(Part.from_text("hi"),))),
                Event(author="support", content=Content(role="model", parts=(Part(function_call=call),))),
                Event(author="support", content=Content(role="user", parts=(Part(function_response=bad),))),
            ):
                service.append_event(session, event).run()
            events = runner.run_async(USER, SESSION, question(), SSE).pipe(ops.to_list()).run()
            [request] = server.requests
    finally:
        transport.close()
    assert events[-1].text() == "Still here."
    messages = request.json()["messages"]
    tool_message = next(m for m in messages if m["role"] == "tool")
    assert "cannot be sent as JSON" in tool_message["content"]


def test_a_foreign_error_of_a_session_service_reaches_the_subscriber_as_an_rxllm_error() -> None:
    class Broken(InMemorySessionService):
        def append_event(self, session: Any, event: Event) -> reactivex.Observable[Event]:
            if event.author != "user":
                raise KeyError("store is gone")
            return super().append_event(session, event)

    service = Broken()
    service.create_session(APP, USER, session_id=SESSION).run()
    runner = Runner(LlmAgent("bot", ScriptedLlm([scripted_turn(*answer_chunks())])), APP, service)
    run = Run()
    run.subscribe(runner.run_async(USER, SESSION, question()))
    assert run.done.wait(TIMEOUT)
    assert len(run.errors) == 1 and isinstance(run.errors[0], RxLlmError)
    assert isinstance(run.errors[0].__cause__, KeyError)


def test_call_tool_direct_outcome_for_an_unencodable_result() -> None:
    def compute() -> float:
        """Compute."""
        return float("nan")

    tools = {"compute": FunctionTool(compute)}
    result = call_tool(tools, FunctionCall(id="c", name="compute"), ToolContext.standalone()).run()
    assert result.failed and result.response.response["error"].startswith("tool 'compute' returned a value")


# --- one writer per session -------------------------------------------------------------------------


def _well_formed(messages: list[dict[str, Any]]) -> bool:
    """Every assistant message with tool calls is followed at once by one tool message per call, in order."""
    index = 0
    while index < len(messages):
        message = messages[index]
        calls = [c["id"] for c in message.get("tool_calls") or []]
        if calls:
            answers = [m.get("tool_call_id") for m in messages[index + 1 : index + 1 + len(calls)]]
            if answers != calls:
                return False
            index += len(calls)
        elif message["role"] == "tool":
            return False  # a result without its call right before it
        index += 1
    return True


def test_two_runners_on_one_session_never_interleave(transport: HttpTransport | AsyncHttpTransport) -> None:
    counter = iter(range(1_000_000))
    lock = threading.Lock()

    def lookup(order_id: str) -> str:
        """Look."""
        return f"order {order_id}"

    def respond(request: Any) -> StubResponse:
        messages = request.json()["messages"]
        if messages[-1]["role"] == "tool":
            return text_response("Answered.")
        with lock:
            number = next(counter)
        return tool_call_response(f"call_{number}", "lookup", json.dumps({"order_id": str(number)}))

    runs = 10
    with StubServer(responder=respond) as server:
        service = InMemorySessionService()
        service.create_session(APP, USER, session_id=SESSION).run()
        runners = [
            Runner(LlmAgent("support", model_on(server, transport), tools=[lookup]), APP, service) for _ in range(2)
        ]
        started = threading.Barrier(runs)
        results: list[Run] = [Run() for _ in range(runs)]

        def start(index: int) -> None:
            started.wait(TIMEOUT)
            results[index].subscribe(runners[index % 2].run_async(USER, SESSION, question(), SSE))

        threads = [threading.Thread(target=start, args=(i,)) for i in range(runs)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(TIMEOUT)
        for run in results:
            assert run.done.wait(TIMEOUT * 3)
        requests = [r.json()["messages"] for r in server.requests]

    assert [run.errors for run in results] == [[]] * runs
    assert len(requests) == 2 * runs
    assert all(_well_formed(messages) for messages in requests)
    stored = service.get_session(APP, USER, SESSION).run().events
    # Turns are contiguous: each invocation's events form one block (user, call, result, answer).
    blocks: list[str] = []
    for event in stored:
        if not blocks or blocks[-1] != event.invocation_id:
            blocks.append(event.invocation_id)
    assert len(blocks) == runs == len(set(blocks))
    assert len(stored) == 4 * runs


def test_a_disposed_queued_run_leaves_the_queue_for_the_next_runner() -> None:
    release = threading.Event()

    def slow(order_id: str) -> str:
        """Slow."""
        release.wait(30)
        return "ok"

    turns = [tool_calls_turn(("c1", "slow", '{"order_id": "A"}')), scripted_turn(*answer_chunks())]
    model = ScriptedLlm([*turns, scripted_turn(*answer_chunks())])
    service = InMemorySessionService()
    service.create_session(APP, USER, session_id=SESSION).run()
    first_runner = Runner(LlmAgent("bot", model, tools=[slow]), APP, service)
    second_runner = Runner(LlmAgent("bot", model, tools=[slow]), APP, service)
    first, queued, third = Run(), Run(), Run()
    first.subscribe(first_runner.run_async(USER, SESSION, question()))
    queued_subscription = queued.subscribe(second_runner.run_async(USER, SESSION, question()))
    third.subscribe(second_runner.run_async(USER, SESSION, question()))
    assert len(model.requests) == 1  # the others wait for the first
    queued_subscription.dispose()
    release.set()
    assert first.done.wait(TIMEOUT) and third.done.wait(TIMEOUT)
    assert not queued.done.is_set()
    assert len(model.requests) == 3


def test_model_and_tool_callbacks_never_run_on_the_transports_loop() -> None:
    where: list[tuple[str, bool]] = []

    def on_a_loop() -> bool:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True

    def record(kind: str) -> Any:
        def callback(*_: Any) -> None:
            where.append((kind, on_a_loop()))

        return callback

    def lookup(order_id: str) -> str:
        """Look."""
        return "ok"

    transport = AsyncHttpTransport()
    try:
        with StubServer(
            [tool_call_response("c1", "lookup", '{"order_id": "A"}'), text_response("Fi", "ne.")]
        ) as server:
            agent = LlmAgent(
                "support",
                model_on(server, transport),
                tools=[lookup],
                before_model_callback=record("before_model"),
                after_model_callback=record("after_model"),
                before_tool_callback=record("before_tool"),
                after_tool_callback=record("after_tool"),
            )
            service = InMemorySessionService()
            service.create_session(APP, USER, session_id=SESSION).run()
            runner = Runner(agent, APP, service)
            events = runner.run_async(USER, SESSION, question(), SSE).pipe(ops.to_list()).run()
    finally:
        transport.close()
    assert events[-1].text() == "Fine."
    kinds = {kind for kind, _ in where}
    assert kinds == {"before_model", "after_model", "before_tool", "after_tool"}
    assert [kind for kind, looped in where if looped] == []
    partial_texts = [e.text() for e in events if e.partial]
    assert partial_texts == ["Fi", "ne."]  # partials keep their order through the hop
