"""Where the service's tools and guardrails run: off the loop, async tools, timeouts, JSON-safe results."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from reactivex import operators as ops

from rxllm import AsyncHttpTransport, Chunk, LlmResponse, ToolCallFragment
from rxllm.agents import FunctionTool
from rxllm.providers.openai import OpenAiChatModel
from rxllm.service import AfterToolExecutionEvent, AiService
from rxllm.testing import ScriptedLlm, StubServer, scripted_turn

from .support import end, role, sse, text, tool_start

WAIT = 10.0


def calling(name: str, arguments: str = "{}") -> Any:
    return scripted_turn(Chunk(tool_call_fragments=(ToolCallFragment(0, "call_1", name, arguments),)))


def answer() -> Any:
    return scripted_turn(Chunk(text_delta="Done."))


def tool_results(events: list[Any]) -> list[dict[str, Any]]:
    return [e.result.response for e in events if isinstance(e, AfterToolExecutionEvent)]


def test_a_tool_past_the_services_timeout_answers_the_model_with_an_error() -> None:
    release = threading.Event()

    def slow() -> str:
        """Slow."""
        release.wait(30)
        return "late"

    model = ScriptedLlm([calling("slow"), answer()])
    try:
        events = AiService(model, tools=[slow], tool_timeout=0.05).stream("go").pipe(ops.to_list()).run()
    finally:
        release.set()
    assert tool_results(events) == [{"error": "tool 'slow' did not answer within its timeout of 0.05 s"}]
    assert events[-1].response.text() == "Done."
    sent = [p.function_response for c in model.requests[1][0].contents for p in c.parts if p.function_response]
    assert sent[0] is not None and "timeout" in str(sent[0].response["error"])


def test_a_function_tools_own_timeout_applies_in_the_service() -> None:
    release = threading.Event()

    def slow() -> str:
        """Slow."""
        release.wait(30)
        return "late"

    model = ScriptedLlm([calling("slow"), answer()])
    try:
        events = AiService(model, tools=[FunctionTool(slow, timeout=0.05)]).stream("go").pipe(ops.to_list()).run()
    finally:
        release.set()
    assert "within its timeout of 0.05 s" in str(tool_results(events)[0]["error"])


@pytest.mark.parametrize("value", [10**5000, float("nan"), object()], ids=["huge-int", "nan", "object"])
def test_a_result_json_cannot_carry_is_an_error_result(value: Any) -> None:
    def compute() -> Any:
        """Compute."""
        return value

    model = ScriptedLlm([calling("compute"), answer()])
    events = AiService(model, tools=[compute]).stream("go").pipe(ops.to_list()).run()
    [result] = tool_results(events)
    assert str(result["error"]).startswith("tool 'compute' returned a value that is not JSON")
    assert events[-1].response.text() == "Done."


def test_an_async_tool_runs_on_the_loop_the_stream_was_subscribed_from() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def lookup() -> str:
        """Look."""
        loops.append(asyncio.get_running_loop())
        return "found"

    service = AiService(ScriptedLlm([calling("lookup"), answer()]), tools=[lookup])

    async def main() -> tuple[asyncio.AbstractEventLoop, list[Any]]:
        loop = asyncio.get_running_loop()
        finished = asyncio.Event()
        events: list[Any] = []
        service.stream("go").subscribe(
            events.append,
            lambda _: loop.call_soon_threadsafe(finished.set),
            lambda: loop.call_soon_threadsafe(finished.set),
        )
        await asyncio.wait_for(finished.wait(), WAIT)
        return loop, events

    loop, events = asyncio.run(main())
    assert loops == [loop]
    assert tool_results(events) == [{"result": "found"}]


def test_disposing_the_stream_cancels_a_running_async_tool() -> None:
    started = threading.Event()
    cancelled = threading.Event()

    async def wait_forever() -> str:
        """Never answers."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    subscription = (
        AiService(ScriptedLlm([calling("wait_forever"), answer()]), tools=[wait_forever])
        .stream("go")
        .subscribe(lambda _: None, lambda _: None)
    )
    assert started.wait(WAIT)
    subscription.dispose()
    assert cancelled.wait(WAIT)


def test_guardrails_and_tools_never_run_on_the_transports_loop() -> None:
    where: list[tuple[str, str]] = []

    def on_a_loop() -> bool:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True

    def lookup() -> str:
        """Look."""
        where.append(("tool", "loop" if on_a_loop() else threading.current_thread().name))
        return "found"

    def guard(response: LlmResponse) -> None:
        where.append(("guardrail", "loop" if on_a_loop() else threading.current_thread().name))

    responses = [sse(role(), tool_start(0, "c1", "lookup", "{}"), end("tool_calls")), sse(role(), text("Done."), end())]
    transport = AsyncHttpTransport()
    try:
        with StubServer(responses) as server:
            model = OpenAiChatModel(
                "gpt-stub", base_url=server.url + "/v1", api_key="sk-test-not-real", transport=transport
            )
            events = AiService(model, tools=[lookup], output_guardrails=[guard]).stream("go").pipe(ops.to_list()).run()
    finally:
        transport.close()
    assert events[-1].response.text() == "Done."
    assert [kind for kind, _ in where] == ["tool", "guardrail"]
    assert all(name.startswith("rxllm-tool_") for _, name in where), where


def test_an_async_retriever_and_guardrail_are_awaited_on_the_subscribers_loop() -> None:
    loops: list[tuple[str, asyncio.AbstractEventLoop]] = []

    async def retrieve(query: str) -> list[str]:
        loops.append(("retriever", asyncio.get_running_loop()))
        return ["A17 shipped Tuesday"]

    async def shout(response: LlmResponse) -> str:
        loops.append(("guardrail", asyncio.get_running_loop()))
        return response.text().upper()

    model = ScriptedLlm([answer()])
    service = AiService(model, retriever=retrieve, output_guardrails=[shout])

    async def main() -> tuple[asyncio.AbstractEventLoop, list[Any]]:
        loop = asyncio.get_running_loop()
        finished = asyncio.Event()
        events: list[Any] = []
        service.stream("go").subscribe(
            events.append,
            lambda _: loop.call_soon_threadsafe(finished.set),
            lambda: loop.call_soon_threadsafe(finished.set),
        )
        await asyncio.wait_for(finished.wait(), WAIT)
        return loop, events

    loop, events = asyncio.run(main())
    assert loops == [("retriever", loop), ("guardrail", loop)]
    assert events[-1].response.text() == "DONE."
    assert "A17 shipped Tuesday" in model.requests[0][0].contents[-1].text()


def test_disposing_the_stream_cancels_an_async_retriever() -> None:
    started = threading.Event()
    cancelled = threading.Event()

    async def retrieve(query: str) -> list[str]:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return []

    service = AiService(ScriptedLlm([answer()]), retriever=retrieve)
    subscription = service.stream("go").subscribe(lambda _: None, lambda _: None)
    assert started.wait(WAIT)
    subscription.dispose()
    assert cancelled.wait(WAIT)
