"""Awaits and blocking waits that could never complete fail at once with ``rxllm.EventLoopError``.

One case per public returner of an rxllm Observable. Every case runs inside ``asyncio.wait_for``
with a generous bound only so that a regression (a hang) fails the test instead of the suite: the
assertion is that the error is raised at all, and that the loop is usable right after it.
The streams come from a real loopback server.
"""

from __future__ import annotations

import asyncio
import json
import threading
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
from rxllm.testing import Hold, ScriptedLlm, StubResponse, StubServer, scripted_turn

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


# -- the check is per stream: other streams' work on the blocked loop does not count ---------------


def held_stream(gate: threading.Event) -> StubResponse:
    """An OpenAI stream of "Hel", "lo" that stops after "Hel" until ``gate`` is set."""
    events = OPENAI.stream("Hel", "lo")
    return StubResponse(body=[*events[:2], Hold(gate, timeout=BOUND), *events[2:]])


@pytest.mark.parametrize("way", [*BLOCKING_WAYS, "model.stream"])
def test_a_loop_thread_may_block_on_a_threaded_stream_while_a_bound_transport_stream_is_open(
    server: StubServer, way: str
) -> None:
    """A notebook cell inside ``async for`` over a stream of a transport bound to the cell's loop:
    a blocking wait for a stream of another transport completes (the open stream waits meanwhile)."""
    gate = threading.Event()
    server.enqueue(held_stream(gate))
    threaded = HttpTransport()
    with StubServer() as other:
        other.enqueue(OPENAI.response("Good", "bye"))
        elsewhere = OPENAI.model(other.url, transport=threaded)

        async def main() -> tuple[list[str], str | None]:
            transport = AsyncHttpTransport(loop=asyncio.get_running_loop())
            model = OPENAI.model(server.url, transport=transport)
            seen: list[str] = []
            blocked_for: str | None = None
            try:
                async for partial in model.generate_content("hi", stream=True):
                    seen.append(partial.text())
                    if blocked_for is None:  # the bound stream is open, its request held by the server
                        if way == "model.stream":
                            blocked_for = "".join(p.text() for p in elsewhere.stream("bye"))  # partials
                        else:
                            result = BLOCKING_WAYS[way](elsewhere.generate_content("bye", stream=True))
                            blocked_for = (result[-1] if isinstance(result, list) else result).text()
                        gate.set()
                return seen, blocked_for
            finally:
                await transport.aclose()

        try:
            seen, blocked_for = bounded(main)
        finally:
            gate.set()
            threaded.close()
        assert len(other.requests) == 1
    assert seen == ["Hel", "lo", "Hello"]
    assert blocked_for == "Goodbye"


@pytest.mark.parametrize("way", BLOCKING_WAYS)
def test_blocking_for_another_stream_of_the_bound_transport_while_one_is_open_still_fails_at_once(
    server: StubServer, way: str
) -> None:
    """The stream waited on needs the blocked loop itself: refused, and the open stream goes on."""
    gate = threading.Event()
    server.enqueue(held_stream(gate), OPENAI.response("Good", "bye"))

    async def main() -> tuple[list[str], EventLoopError]:
        transport = AsyncHttpTransport(loop=asyncio.get_running_loop())
        model = OPENAI.model(server.url, transport=transport)
        seen: list[str] = []
        refused: EventLoopError | None = None
        try:
            async for partial in model.generate_content("hi", stream=True):
                seen.append(partial.text())
                if refused is None:
                    with pytest.raises(EventLoopError, match="async for") as caught:
                        BLOCKING_WAYS[way](model.generate_content("bye", stream=True))
                    refused = caught.value
                    gate.set()
            assert refused is not None
            return seen, refused
        finally:
            await transport.aclose()

    try:
        seen, refused = bounded(main)
    finally:
        gate.set()
    assert seen == ["Hel", "lo", "Hello"]
    assert isinstance(refused, RuntimeError)


class SubmitSeen(AsyncHttpTransport):
    """An AsyncHttpTransport that counts the work it queues on its loop (a semaphore released per submit)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.submitted = threading.Semaphore(0)

    def submit(self, coroutine: Any, scope: Any = None) -> Any:
        handle = super().submit(coroutine, scope)
        self.submitted.release()
        return handle


def tool_call_body(name: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "model": "stub",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": "{}"}}],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }


def test_work_an_open_run_queues_on_the_blocked_loop_meanwhile_does_not_count(server: StubServer) -> None:
    """An agent run streams on a transport bound to the loop; a blocking wait for another stream
    blocks that loop; meanwhile the run's tool returns on a worker and queues the next model call
    on the blocked loop. That call is the run's, not the waited stream's: the wait completes."""
    go = threading.Event()
    released = threading.Event()
    server.enqueue(
        StubResponse.json(200, tool_call_body("wait_here")), StubResponse.json(200, OPENAI.complete_body("Done."))
    )

    def wait_here() -> str:
        """Wait for the test."""
        go.wait(BOUND)
        return "ok"

    threaded = HttpTransport()
    with StubServer() as other:
        other.enqueue(
            StubResponse(
                headers={"content-type": "application/json"},
                body=[json.dumps(OPENAI.complete_body("Goodbye")).encode()],
                before_headers=[Hold(released, timeout=BOUND)],
                chunked=False,
            )
        )
        elsewhere = OPENAI.model(other.url, transport=threaded)

        async def main() -> tuple[list[str], str]:
            transport = SubmitSeen(loop=asyncio.get_running_loop())
            runner = runner_of(OPENAI.model(server.url, transport=transport), wait_here)
            assert transport.submitted.acquire(timeout=0) is False
            texts: list[str] = []
            blocked_for = ""

            def orchestrate() -> None:  # while the loop's thread blocks in the wait below
                assert other.wait_for_requests(1, BOUND)  # the wait is on
                go.set()  # the tool returns on its worker: the run's next model call is queued ...
                assert transport.submitted.acquire(timeout=BOUND)  # ... on the blocked loop
                released.set()  # the waited stream answers

            try:
                async for event in runner.run_async("u1", "s1", "go"):
                    texts.append(event.text())
                    if event.function_calls() and not blocked_for:
                        assert transport.submitted.acquire(timeout=0)  # the first model call
                        helper = threading.Thread(target=orchestrate)
                        helper.start()
                        blocked_for = elsewhere.generate_content("bye").run().text()
                        helper.join()
                return texts, blocked_for
            finally:
                await transport.aclose()

        try:
            texts, blocked_for = bounded(main)
        finally:
            go.set()
            released.set()
            threaded.close()
    assert blocked_for == "Goodbye"
    assert texts[-1] == "Done."
    assert len(server.requests) == 2
