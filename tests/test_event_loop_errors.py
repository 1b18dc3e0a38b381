"""Awaits and blocking waits that could never complete fail at once with ``rxllm.EventLoopError``.

One case per public returner of an rxllm Observable. Every case runs inside ``asyncio.wait_for``
with a generous bound only so that a regression (a hang) fails the test instead of the suite: the
assertion is that the error is raised at all, and that the loop is usable right after it.
The streams come from a real loopback server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import pytest
from reactivex import operators as ops
from wire import OPENAI

import rxllm
from rxllm import (
    AsyncHttpTransport,
    BaseLlm,
    Chunk,
    EventLoopError,
    HttpTransport,
    Part,
    RxLlmError,
    ToolCallFragment,
)
from rxllm.agents import (
    InMemoryArtifactService,
    InMemoryMemoryService,
    InMemoryRunner,
    InMemorySessionService,
    LlmAgent,
    SqliteSessionService,
)
from rxllm.aio import AwaitableObservable
from rxllm.operators import final
from rxllm.service import AiService
from rxllm.testing import ScriptedLlm, StubResponse, StubServer, scripted_turn

BOUND = 10.0  # safety only: a hang fails here instead of stalling the suite


def bounded(main: Callable[[], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        return await asyncio.wait_for(main(), BOUND)

    return asyncio.run(run())


def runner_of(model: BaseLlm, *tools: Any) -> InMemoryRunner:
    runner = InMemoryRunner(LlmAgent("bot", model, tools=list(tools)))
    runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
    return runner


# Each public returner of a model-backed stream: (name, what the stream is made from a model).
MODEL_RETURNERS: dict[str, Callable[[BaseLlm], AwaitableObservable[Any]]] = {
    "generate_content(stream=True)": lambda model: model.generate_content("hi", stream=True),
    "generate_content()": lambda model: model.generate_content("hi"),
    "stream_events": lambda model: model.stream_events("hi"),
    "generate_content().pipe(...)": lambda model: model.generate_content("hi", stream=True).pipe(
        final(), ops.map(lambda r: r)
    ),
    "Runner.run_async": lambda model: runner_of(model).run_async("u1", "s1", "hi"),
    "AiService.stream": lambda model: AiService(model).stream("hi"),
}

BLOCKING_WAYS: dict[str, Callable[[AwaitableObservable[Any]], object]] = {
    "rxllm.iterate": lambda stream: list(rxllm.iterate(stream)),
    ".run()": lambda stream: stream.run(),
}


def answer(server: StubServer, returner: str, times: int = 1) -> None:
    for _ in range(times):
        if returner in ("generate_content()", "Runner.run_async"):  # non-streaming calls
            server.enqueue(StubResponse.json(200, OPENAI.complete_body("Hello")))
        else:
            server.enqueue(OPENAI.response("Hel", "lo"))


# -- a blocking wait on the loop the stream needs -------------------------------------------------


@pytest.mark.parametrize("way", BLOCKING_WAYS)
@pytest.mark.parametrize("returner", MODEL_RETURNERS)
def test_blocking_on_the_loop_a_bound_transport_runs_on_fails_at_once(
    server: StubServer, returner: str, way: str
) -> None:
    make = MODEL_RETURNERS[returner]
    answer(server, returner, 2)  # the refused call may or may not have reached the server

    async def main() -> Any:
        transport = AsyncHttpTransport(loop=asyncio.get_running_loop())
        model = OPENAI.model(server.url, transport=transport)
        try:
            with pytest.raises(EventLoopError, match="async for") as caught:
                BLOCKING_WAYS[way](make(model))
            return caught.value, await make(model)  # the loop is fine, and await is the way
        finally:
            await transport.aclose()

    error, last = bounded(main)
    assert isinstance(error, RxLlmError) and isinstance(error, RuntimeError)
    assert last is not None


def test_model_stream_on_the_loop_a_bound_transport_runs_on_fails_at_once(server: StubServer) -> None:
    answer(server, "model.stream", 2)

    async def main() -> list[str]:
        transport = AsyncHttpTransport(loop=asyncio.get_running_loop())
        model = OPENAI.model(server.url, transport=transport)
        try:
            with pytest.raises(EventLoopError, match=r"model\.stream"):
                for _ in model.stream("hi"):
                    pass
            return [partial.text() async for partial in model.generate_content("hi", stream=True)]
        finally:
            await transport.aclose()

    assert bounded(main) == ["Hel", "lo", "Hello"]


def test_a_runner_whose_async_tool_runs_on_the_blocked_loop_fails_at_once() -> None:
    """The tool call comes after the first model turn: the wait is already blocking when it is queued."""

    async def lookup(order_id: str) -> str:
        """Look an order up."""
        return "shipped"

    call = Chunk(tool_call_fragments=(ToolCallFragment(0, "c1", "lookup", '{"order_id": "A"}'),))

    async def main() -> str:
        model = ScriptedLlm([scripted_turn(call), scripted_turn(Chunk(text_delta="Shipped."))] * 2)
        runner = runner_of(model, lookup)
        with pytest.raises(EventLoopError, match="async tool"):
            runner.run_async("u1", "s1", "Where is A?").run()
        return (await runner.run_async("u1", "s1", "Where is A?")).text()  # awaiting it works

    assert bounded(main) == "Shipped."


@pytest.mark.parametrize("returner", MODEL_RETURNERS)
def test_a_loop_thread_may_block_on_a_stream_that_emits_elsewhere(server: StubServer, returner: str) -> None:
    """A notebook cell runs on a loop's thread: iterating over a threaded transport's stream works there."""
    answer(server, returner)
    transport = HttpTransport(max_concurrent_streams=2)
    model = OPENAI.model(server.url, transport=transport)

    async def main() -> list[Any]:
        return list(rxllm.iterate(MODEL_RETURNERS[returner](model)))

    try:
        assert bounded(main)
    finally:
        transport.close()


# -- a transport bound to a loop that cannot run --------------------------------------------------


def closed_loop_transport() -> AsyncHttpTransport:
    made: list[AsyncHttpTransport] = []

    async def make() -> None:
        made.append(AsyncHttpTransport(loop=asyncio.get_running_loop()))

    asyncio.run(make())  # closes its loop when it returns
    return made[0]


@pytest.mark.parametrize("returner", MODEL_RETURNERS)
def test_awaiting_a_transport_bound_to_a_closed_loop_fails_at_once(server: StubServer, returner: str) -> None:
    model = OPENAI.model(server.url, transport=closed_loop_transport())
    stream = MODEL_RETURNERS[returner](model)

    async def main() -> EventLoopError:
        with pytest.raises(EventLoopError, match="closed") as caught:
            await stream
        return caught.value

    assert "loop=asyncio.get_running_loop()" in str(bounded(main))
    with pytest.raises(EventLoopError, match="closed"):  # and from plain synchronous code
        stream.run()
    assert server.requests == []


@pytest.mark.parametrize("returner", MODEL_RETURNERS)
def test_awaiting_a_transport_bound_to_a_stopped_loop_from_another_loop_fails_at_once(
    server: StubServer, returner: str
) -> None:
    stopped = asyncio.new_event_loop()
    try:
        model = OPENAI.model(server.url, transport=AsyncHttpTransport(loop=stopped))

        async def main() -> None:
            with pytest.raises(EventLoopError, match="not running"):
                async for _ in MODEL_RETURNERS[returner](model):
                    pass

        bounded(main)
        assert server.requests == []
    finally:
        stopped.close()


# -- await with no asyncio loop running ------------------------------------------------------------


def no_loop_returners() -> dict[str, Callable[[], AwaitableObservable[Any]]]:
    model = ScriptedLlm([scripted_turn(Chunk(text_delta="a"))] * 8)
    sessions = InMemorySessionService()
    return {
        "generate_content": lambda: model.generate_content("hi", stream=True),
        "stream_events": lambda: model.stream_events("hi"),
        "Runner.run_async": lambda: runner_of(model).run_async("u1", "s1", "hi"),
        "AiService.stream": lambda: AiService(model).stream("hi"),
        "create_session": lambda: sessions.create_session("app", "u1"),
        "get_session": lambda: sessions.get_session("app", "u1", "none"),
        "save_artifact": lambda: InMemoryArtifactService().save_artifact("a", "u", "s", "f", Part.from_text("x")),
        "search_memory": lambda: InMemoryMemoryService().search_memory("a", "u", "q"),
        "piped": lambda: model.generate_content("hi", stream=True).pipe(ops.map(lambda r: r.text())),
    }


@pytest.mark.parametrize("returner", list(no_loop_returners()))
def test_awaiting_with_no_running_loop_raises_an_rxllm_error(returner: str) -> None:
    make = no_loop_returners()[returner]
    awaiting = make().__await__()
    with pytest.raises(EventLoopError, match=r"asyncio\.run"):
        next(awaiting)
    iterating: Coroutine[Any, Any, Any] = make().__aiter__().__anext__()  # type: ignore[assignment]
    with pytest.raises(EventLoopError, match=r"rxllm\.iterate"):
        iterating.send(None)


def test_a_sqlite_store_awaited_with_no_running_loop_raises_an_rxllm_error(tmp_path: Any) -> None:
    service = SqliteSessionService(tmp_path / "s.db")
    try:
        with pytest.raises(EventLoopError):
            next(service.list_sessions("app", "u1").__await__())
    finally:
        service.close()
