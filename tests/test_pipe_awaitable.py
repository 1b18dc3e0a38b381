"""``await`` and ``async for`` after ``.pipe(...)`` on every public returner of rxllm.

Each returner is piped through an operator chain (reactivex's and rxllm's), then awaited under
``asyncio.run`` inside a bounded ``wait_for``: a regression (a chain that awaits on the wrong
thread) fails with ``TimeoutError`` instead of hanging the suite. The streams come from a real
loopback server on both transports, so items arrive on an I/O thread or another loop's thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import reactivex
from reactivex import operators as ops
from reactivex.scheduler import ThreadPoolScheduler
from reactivex.scheduler.eventloop import AsyncIOScheduler
from wire import OPENAI

from rxllm import AsyncHttpTransport, Content, HttpTransport, LlmResponse, Part, SseChatModel, TextDeltaEvent
from rxllm.agents import (
    InMemoryArtifactService,
    InMemoryMemoryService,
    InMemoryRunner,
    InMemorySessionService,
    LlmAgent,
    SqliteSessionService,
)
from rxllm.aio import AwaitableObservable
from rxllm.operators import final, partials, text_deltas
from rxllm.service import AiService, FinalResponseEvent
from rxllm.testing import StubResponse, StubServer

BOUND = 10.0


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(main(), BOUND)

    return asyncio.run(bounded())


def model_on(server: StubServer, transport: HttpTransport | AsyncHttpTransport) -> SseChatModel:
    return OPENAI.model(server.url, transport=transport)


# -- models ---------------------------------------------------------------------------------------


def test_generate_content_piped_through_reactivex_operators_is_awaitable(
    server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    server.enqueue(OPENAI.response("Hello", " world"), StubResponse.json(200, OPENAI.complete_body("Hi")))
    model = model_on(server, transport)

    async def main() -> tuple[str, list[str]]:
        last_text = await model.generate_content("hi", stream=True).pipe(ops.map(lambda r: r.text()))
        single = await model.generate_content("hi").pipe(ops.map(lambda r: r.text()), ops.to_list())
        return last_text, single

    assert run(main) == ("Hello world", ["Hi"])


def test_generate_content_piped_through_rxllm_operators_is_awaitable_and_iterable(
    server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    server.enqueue(OPENAI.response("a", "b"), OPENAI.response("c", "d"))
    model = model_on(server, transport)

    async def main() -> tuple[LlmResponse, list[str]]:
        answer = await model.generate_content("hi", stream=True).pipe(final())
        deltas = [text async for text in model.generate_content("hi", stream=True).pipe(text_deltas())]
        return answer, deltas

    answer, deltas = run(main)
    assert (answer.text(), answer.partial) == ("ab", None)
    assert deltas == ["c", "d"]


def test_a_chain_of_pipes_with_a_thread_hop_stays_awaitable(
    server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    server.enqueue(OPENAI.response("x", "y", "z"))
    model = model_on(server, transport)
    pool = ThreadPoolScheduler(1)

    async def main() -> list[str]:
        chain = (
            model.generate_content("hi", stream=True)
            .pipe(partials())
            .pipe(ops.observe_on(pool), ops.map(lambda r: r.text().upper()), ops.to_list())
        )
        assert isinstance(chain, AwaitableObservable)
        return await chain

    try:
        assert run(main) == ["X", "Y", "Z"]
    finally:
        pool.executor.shutdown(wait=True)


def test_stream_events_piped_is_awaitable(server: StubServer, transport: HttpTransport | AsyncHttpTransport) -> None:
    server.enqueue(OPENAI.response("p", "q"))
    model = model_on(server, transport)

    async def main() -> list[str]:
        texts = model.stream_events("hi").pipe(
            ops.filter(lambda e: isinstance(e, TextDeltaEvent)),
            ops.map(lambda e: e.text if isinstance(e, TextDeltaEvent) else ""),
            ops.to_list(),
        )
        return await texts

    assert run(main) == ["p", "q"]


# -- agents and sessions --------------------------------------------------------------------------


def test_runner_run_async_piped_is_awaitable(server: StubServer, transport: HttpTransport | AsyncHttpTransport) -> None:
    server.enqueue(StubResponse.json(200, OPENAI.complete_body("Hi there")))
    runner = InMemoryRunner(LlmAgent("bot", model_on(server, transport)))

    async def main() -> list[tuple[str, bool]]:
        sessions = runner.session_service
        await sessions.create_session(runner.app_name, "u1", session_id="s1").pipe(ops.map(lambda s: s.id))
        return await runner.run_async("u1", "s1", "Hello").pipe(
            ops.map(lambda e: (e.text(), e.is_final_response())), ops.to_list()
        )

    events = run(main)
    assert events[-1] == ("Hi there", True)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_session_store_returners_piped_are_awaitable(kind: str, tmp_path: Path) -> None:
    service = InMemorySessionService() if kind == "memory" else SqliteSessionService(tmp_path / "s.db")

    async def main() -> tuple[Any, ...]:
        created = await service.create_session("app", "u1", session_id="s1").pipe(ops.map(lambda s: s.id))
        got = await service.get_session("app", "u1", "s1").pipe(ops.map(lambda s: s.id), ops.default_if_empty("none"))
        listed = await service.list_sessions("app", "u1").pipe(ops.map(lambda sessions: [s.id for s in sessions]))
        deleted = await service.delete_session("app", "u1", "s1").pipe(ops.to_list())
        missing = await service.get_session("app", "u1", "s1").pipe(ops.to_list())
        return created, got, listed, deleted, missing

    try:
        assert run(main) == ("s1", "s1", ["s1"], [], [])
    finally:
        if isinstance(service, SqliteSessionService):
            service.close()


def test_artifact_and_memory_returners_piped_are_awaitable() -> None:
    artifacts = InMemoryArtifactService()
    memory = InMemoryMemoryService()
    sessions = InMemorySessionService()

    async def main() -> tuple[Any, ...]:
        version = await artifacts.save_artifact("app", "u1", "s1", "a.txt", Part.from_text("v0")).pipe(
            ops.map(lambda v: v + 100)
        )
        loaded = await artifacts.load_artifact("app", "u1", "s1", "a.txt").pipe(ops.map(lambda p: p.text))
        keys = await artifacts.list_artifact_keys("app", "u1", "s1").pipe(ops.map(sorted))
        session = await sessions.create_session("app", "u1", session_id="s1")
        added = await memory.add_session_to_memory(session).pipe(ops.to_list())
        found = await memory.search_memory("app", "u1", "anything").pipe(ops.map(lambda r: len(r.memories)))
        return version, loaded, keys, added, found

    assert run(main) == (100, "v0", ["a.txt"], [], 0)


# -- the service ------------------------------------------------------------------------------------


def test_service_stream_piped_is_awaitable_and_iterable(
    server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    server.enqueue(OPENAI.response("It ", "shipped."), OPENAI.response("Again."))
    service = AiService(model_on(server, transport))

    async def main() -> tuple[str, list[str]]:
        answer = await service.stream("Where is my order?").pipe(
            ops.filter(lambda e: isinstance(e, FinalResponseEvent)),
            ops.map(lambda e: e.response.text() if isinstance(e, FinalResponseEvent) else ""),
        )
        kinds = [kind async for kind in service.stream("And again?").pipe(ops.map(lambda e: e.kind))]
        return answer, kinds

    answer, kinds = run(main)
    assert answer == "It shipped."
    assert kinds == ["partial_response", "final_response"]


# -- chains that leave pipe: reactivex's own await ------------------------------------------------


def test_reactivex_await_on_a_chain_built_without_pipe_completes(
    server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    """``ops.map(f)(obs)`` and ``reactivex.merge`` return plain Observables, awaited by reactivex itself."""
    server.enqueue(OPENAI.response("m", "n"), OPENAI.response("o"))
    model = model_on(server, transport)

    async def main() -> tuple[str, list[str]]:
        mapped = ops.map(lambda r: r.text())(model.generate_content("hi", stream=True))
        assert not isinstance(mapped, AwaitableObservable)
        last_text: str = await mapped
        merged = reactivex.merge(model.generate_content("hi", stream=True), reactivex.empty()).pipe(
            ops.map(lambda r: r.text()), ops.to_list()
        )
        assert not isinstance(merged, AwaitableObservable)
        return last_text, await merged

    assert run(main) == ("mn", ["o", "o"])


def test_a_subscriber_passing_the_loops_scheduler_gets_every_item_on_the_loop(
    server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    server.enqueue(OPENAI.response("u", "v"))
    model = model_on(server, transport)

    async def main() -> list[tuple[str, bool]]:
        loop = asyncio.get_running_loop()
        loop_thread = threading.get_ident()
        seen: list[tuple[str, bool]] = []
        done: asyncio.Future[None] = loop.create_future()
        model.generate_content("hi", stream=True).subscribe(
            lambda r: seen.append((r.text(), threading.get_ident() == loop_thread)),
            done.set_exception,
            lambda: done.set_result(None),
            scheduler=AsyncIOScheduler(loop),
        )
        await done
        return seen

    assert run(main) == [("u", True), ("v", True), ("uv", True)]


def test_pipe_returns_what_a_non_observable_operator_returns() -> None:
    stream = AwaitableObservable(reactivex.of(1, 2))

    async def main() -> int:
        future = stream.pipe(ops.to_future())
        assert isinstance(future, asyncio.Future)
        return await future

    assert run(main) == 2
    assert stream.pipe() is stream
    assert stream.pipe(lambda source: 42) == 42


def test_user_content_in_a_pipe_chain_keeps_its_items(
    server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    server.enqueue(OPENAI.response("r"))
    model = model_on(server, transport)
    conversation = [
        Content(role="user", parts=[Part.from_text("one")]),
        Content(role="model", parts=[Part.from_text("two")]),
    ]

    async def main() -> str:
        return await model.generate_content(conversation, stream=True).pipe(final(), ops.map(lambda r: r.text()))

    assert run(main) == "r"
    assert [m["content"] for m in server.requests[0].json()["messages"]] == ["one", "two"]


def test_a_connectable_result_keeps_its_own_api() -> None:
    seen: list[int] = []
    connectable = AwaitableObservable(reactivex.of(1, 2)).pipe(ops.map(lambda x: x * 3), ops.publish())
    assert isinstance(connectable, reactivex.ConnectableObservable)
    connectable.subscribe(seen.append)
    connectable.connect()
    assert seen == [3, 6]
