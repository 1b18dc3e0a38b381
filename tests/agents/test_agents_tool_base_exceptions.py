"""Every tool outcome ends the call: a tool that raises ``SystemExit`` (argparse on bad input),
``GeneratorExit`` or another ``BaseException`` answers the model with an error result, the run
terminates and the session's lane is released; ``KeyboardInterrupt`` fails the run with a
``ToolError``, and the lane is released too. Over a real loopback server, on both transports,
for the agent runtime and the service, synchronous and ``async def`` tools.
"""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from reactivex import operators as ops

from rxllm import AsyncHttpTransport, HttpTransport, RetryPolicy, ToolError
from rxllm.agents import RunConfig, StreamingMode
from rxllm.providers.openai import OpenAiChatModel
from rxllm.service import AfterToolExecutionEvent, AiService
from rxllm.testing import StubResponse, StubServer

from .support import SESSION, USER, history, make_runner, question

WAIT = 10.0
SSE = RunConfig(streaming_mode=StreamingMode.SSE)


class Custom(BaseException):
    """A BaseException that is neither SystemExit nor KeyboardInterrupt."""


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
    return json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [choice]})


def tool_call(name: str, arguments: str) -> StubResponse:
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}
    return StubResponse.sse([_chunk({"role": "assistant", "tool_calls": [call]}), _chunk({}, "tool_calls"), "[DONE]"])


def answer(text: str) -> StubResponse:
    return StubResponse.sse([_chunk({"role": "assistant", "content": text}), _chunk({}, "stop"), "[DONE]"])


def parse_order(order: str) -> str:
    """Parse an order number the way a command-line tool does."""
    parser = argparse.ArgumentParser(prog="order")
    parser.add_argument("--number", type=int, required=True)
    return str(parser.parse_args(order.split()).number)  # "--number x" makes argparse call sys.exit(2)


def raising(error: BaseException) -> Callable[[str], str]:
    def tool(order: str) -> str:
        """Raises."""
        raise error

    return tool


def raising_async(error: BaseException) -> Callable[[str], Any]:
    async def tool(order: str) -> str:
        """Raises."""
        raise error

    return tool


@pytest.fixture(params=["threads", "asyncio"])
def transport(request: pytest.FixtureRequest) -> Iterator[HttpTransport | AsyncHttpTransport]:
    created = HttpTransport(max_concurrent_streams=4) if request.param == "threads" else AsyncHttpTransport()
    yield created
    created.close()


def model_on(server: StubServer, transport: HttpTransport | AsyncHttpTransport) -> OpenAiChatModel:
    return OpenAiChatModel("gpt-stub", base_url=server.url + "/v1", api_key="sk-test-not-real", transport=transport,
                           retry_policy=RetryPolicy.never())


class Run:
    def __init__(self) -> None:
        self.events: list[Any] = []
        self.errors: list[Exception] = []
        self.completed = False
        self.done = threading.Event()

    def on_error(self, error: Exception) -> None:
        self.errors.append(error)
        self.done.set()

    def on_completed(self) -> None:
        self.completed = True
        self.done.set()


def run_once(runner: Any) -> Run:
    run = Run()
    runner.run_async(USER, SESSION, question(), SSE).subscribe(run.events.append, run.on_error, run.on_completed)
    assert run.done.wait(WAIT), "the run never terminated"
    return run


CASES = [
    pytest.param(parse_order, "SystemExit", id="argparse-SystemExit"),
    pytest.param(raising(SystemExit(3)), "SystemExit", id="SystemExit"),
    pytest.param(raising(GeneratorExit("gone")), "GeneratorExit", id="GeneratorExit"),
    pytest.param(raising(Custom("custom")), "Custom", id="BaseException"),
    pytest.param(raising_async(SystemExit(4)), "SystemExit", id="async-SystemExit"),
    pytest.param(raising_async(Custom("custom")), "Custom", id="async-BaseException"),
]


@pytest.mark.parametrize(("function", "name"), CASES)
def test_a_base_exception_in_a_tool_is_an_error_result_and_the_session_goes_on(
    function: Callable[..., Any], name: str, transport: HttpTransport | AsyncHttpTransport
) -> None:
    function.__name__ = "order_tool"
    responses = [tool_call("order_tool", '{"order": "--number x"}'), answer("Sorry."), answer("Next.")]
    with StubServer(responses) as server:
        runner = make_runner(model_on(server, transport), tools=[function])
        first = run_once(runner)
        second = run_once(runner)  # the session's lane was released: a second run is not queued for ever
        sent = server.requests[1].json()["messages"]
    assert first.completed and not first.errors, first.errors
    [response] = [r.response for e in first.events for r in e.function_responses()]
    assert name in str(response["error"]), response
    assert first.events[-1].text() == "Sorry."
    tool_message = next(m for m in sent if m["role"] == "tool")
    assert name in tool_message["content"]  # the model saw the error result
    assert second.completed and second.events[-1].text() == "Next."
    assert len(history(runner)) == 6


@pytest.mark.parametrize("function", [raising(KeyboardInterrupt()), raising_async(KeyboardInterrupt())],
                         ids=["sync", "async"])
def test_a_keyboard_interrupt_in_a_tool_fails_the_run_and_releases_the_lane(
    function: Callable[..., Any], transport: HttpTransport | AsyncHttpTransport
) -> None:
    function.__name__ = "order_tool"
    with StubServer([tool_call("order_tool", '{"order": "1"}'), answer("Next.")]) as server:
        runner = make_runner(model_on(server, transport), tools=[function])
        first = run_once(runner)
        second = run_once(runner)
        requests = len(server.requests)
    (error,) = first.errors
    assert isinstance(error, ToolError) and "KeyboardInterrupt" in str(error), repr(error)
    assert isinstance(error.__cause__, KeyboardInterrupt)
    assert requests == 2, "the model was asked again after the interrupt"
    assert second.completed and second.events[-1].text() == "Next."


@pytest.mark.parametrize(("function", "name"), CASES)
def test_the_service_answers_a_base_exception_with_an_error_result(function: Callable[..., Any], name: str) -> None:
    function.__name__ = "order_tool"
    with StubServer([tool_call("order_tool", '{"order": "--number x"}'), answer("Sorry.")]) as server:
        transport = HttpTransport(max_concurrent_streams=2)
        try:
            service = AiService(model_on(server, transport), tools=[function])
            events = service.stream("go").pipe(ops.to_list()).run()
        finally:
            transport.close()
    [result] = [e.result.response for e in events if isinstance(e, AfterToolExecutionEvent)]
    assert name in str(result["error"])
    assert events[-1].response.text() == "Sorry."


def test_the_service_fails_the_turn_on_a_keyboard_interrupt_in_a_tool() -> None:
    tool = raising(KeyboardInterrupt())
    tool.__name__ = "order_tool"
    with StubServer([tool_call("order_tool", '{"order": "1"}'), answer("never")]) as server:
        transport = HttpTransport(max_concurrent_streams=2)
        try:
            run = Run()
            AiService(model_on(server, transport), tools=[tool]).stream("go").subscribe(
                run.events.append, run.on_error, run.on_completed
            )
            assert run.done.wait(WAIT), "the turn never terminated"
        finally:
            transport.close()
        assert len(server.requests) == 1
    (error,) = run.errors
    assert isinstance(error, ToolError) and isinstance(error.__cause__, KeyboardInterrupt)
