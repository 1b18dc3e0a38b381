"""``await`` and ``async for`` from asyncio: every public Observable of rxllm, and ``rxllm.aio`` for any.

Real loopback servers, both transports, ``asyncio.run`` in normal and debug mode. "The connection
closed" is what the stub server observed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import reactivex
from reactivex import abc as rx_abc
from reactivex import operators as ops
from reactivex.scheduler import ThreadPoolScheduler
from reactivex.subject import Subject
from wire import OPENAI

import rxllm.aio
from rxllm import (
    AsyncHttpTransport,
    BaseLlm,
    BufferOverflowError,
    ConfigurationError,
    Content,
    EmptyStreamError,
    HttpStatusError,
    HttpTransport,
    LlmRequest,
    LlmResponse,
    Part,
    ResponseCompleteEvent,
    SseChatModel,
    TextDeltaEvent,
)
from rxllm.agents import InMemoryRunner, LlmAgent
from rxllm.aio import AwaitableObservable
from rxllm.providers.openai import OpenAiChatModel
from rxllm.service import AiService, FinalResponseEvent, PartialResponseEvent
from rxllm.testing import Hold, StubResponse, StubServer

TIMEOUT = 5.0
REQUEST = LlmRequest(contents=[Content(role="user", parts=[Part.from_text("hi")])])
DEBUG = [False, True]


@pytest.fixture(params=["threads", "asyncio"])
def transport(request: pytest.FixtureRequest) -> Iterator[HttpTransport | AsyncHttpTransport]:
    made: HttpTransport | AsyncHttpTransport = (
        HttpTransport(max_concurrent_streams=8)
        if request.param == "threads"
        else AsyncHttpTransport(max_concurrent_streams=8)  # one pool: the default's 40 take seconds to build
    )
    yield made
    made.close()


def model_on(server: StubServer, transport: HttpTransport | AsyncHttpTransport) -> SseChatModel:
    return OPENAI.model(server.url, transport=transport)


def run(main: Callable[[], Awaitable[Any]], *, debug: bool = False) -> Any:
    async def bounded() -> Any:  # a hang fails the test instead of the suite
        return await asyncio.wait_for(main(), TIMEOUT * 2)

    return asyncio.run(bounded(), debug=debug)


# -- await: the last item, on every returner ----------------------------------------------------


@pytest.mark.parametrize("debug", DEBUG, ids=["normal", "debug"])
def test_await_generate_content_gives_the_final(
    stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport, debug: bool
) -> None:
    stub_server.enqueue(OPENAI.response("Hello", " world"), StubResponse.json(200, OPENAI.complete_body("Hi there")))
    model = model_on(stub_server, transport)

    async def main() -> tuple[LlmResponse, LlmResponse]:
        return await model.generate_content(REQUEST, stream=True), await model.generate_content(REQUEST)

    streamed, single = run(main, debug=debug)
    assert (streamed.text(), streamed.partial) == ("Hello world", None)
    assert (single.text(), single.partial) == ("Hi there", None)


@pytest.mark.parametrize("debug", DEBUG, ids=["normal", "debug"])
def test_await_stream_events_gives_the_response_complete_event(
    stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport, debug: bool
) -> None:
    stub_server.enqueue(OPENAI.response("Hello", " world"))
    model = model_on(stub_server, transport)

    async def main() -> Any:
        return await model.stream_events(REQUEST)

    last = run(main, debug=debug)
    assert isinstance(last, ResponseCompleteEvent)
    assert last.response.text() == "Hello world"


@pytest.mark.parametrize("debug", DEBUG, ids=["normal", "debug"])
def test_await_runner_and_session_service(
    stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport, debug: bool
) -> None:
    stub_server.enqueue(StubResponse.json(200, OPENAI.complete_body("Hi there")))
    runner = InMemoryRunner(LlmAgent("bot", model_on(stub_server, transport)))
    sessions = runner.session_service
    message = Content(role="user", parts=[Part.from_text("Hello")])

    async def main() -> tuple[Any, ...]:
        created = await sessions.create_session(runner.app_name, "u1", session_id="s1")
        final = await runner.run_async("u1", "s1", message)
        stored = await sessions.get_session(runner.app_name, "u1", "s1")
        listed = await sessions.list_sessions(runner.app_name, "u1")
        appended = await sessions.append_event(created, final.model_copy(update={"id": "copy"}))
        deleted = await sessions.delete_session(runner.app_name, "u1", "s1")
        missing = await sessions.get_session(runner.app_name, "u1", "s1")
        return created, final, stored, listed, appended, deleted, missing

    created, final, stored, listed, appended, deleted, missing = run(main, debug=debug)
    assert created.id == "s1"
    assert (final.author, final.text(), final.is_final_response()) == ("bot", "Hi there", True)
    assert stored is not None and [e.author for e in stored.events] == ["user", "bot"]
    assert [s.id for s in listed] == ["s1"]
    assert appended.id == "copy"
    assert deleted is None and missing is None  # at most one item: await gives it or None


@pytest.mark.parametrize("debug", DEBUG, ids=["normal", "debug"])
def test_await_and_iterate_the_service_stream(
    stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport, debug: bool
) -> None:
    stub_server.enqueue(OPENAI.response("It ", "shipped."), OPENAI.response("Again."))
    service = AiService(model_on(stub_server, transport))

    async def main() -> tuple[Any, list[Any]]:
        last = await service.stream("Where is my order?")
        return last, [event async for event in service.stream("And again?")]

    last, events = run(main, debug=debug)
    assert isinstance(last, FinalResponseEvent) and last.response.text() == "It shipped."
    assert isinstance(events[-1], FinalResponseEvent) and events[-1].response.text() == "Again."
    assert all(isinstance(e, PartialResponseEvent) for e in events[:-1])


def test_await_after_pipe_goes_through_rxllm_aio(
    stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    stub_server.enqueue(OPENAI.response("a", "b", "c"))
    model = model_on(stub_server, transport)

    async def main() -> list[str]:
        texts = model.generate_content(REQUEST, stream=True).pipe(ops.map(lambda r: r.text()), ops.to_list())
        return await rxllm.aio.last(texts)

    assert run(main) == ["a", "b", "c", "abc"]


# -- async for: every item as it comes ----------------------------------------------------------


@pytest.mark.parametrize("debug", DEBUG, ids=["normal", "debug"])
def test_iterate_gets_each_partial_while_the_server_holds_the_rest(
    stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport, debug: bool
) -> None:
    release = threading.Event()
    stream = OPENAI.stream("one", "two")
    stub_server.enqueue(StubResponse(body=[*stream[:2], Hold(release), *stream[2:]]))
    model = model_on(stub_server, transport)

    async def main() -> list[tuple[str, bool | None]]:
        seen = []
        async for response in model.generate_content(REQUEST, stream=True):
            seen.append((response.text(), response.partial))
            release.set()  # the first partial arrived while the server was holding the rest
        return seen

    try:
        assert run(main, debug=debug) == [("one", True), ("two", True), ("onetwo", None)]
    finally:
        release.set()


def test_iterate_any_piped_observable(stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport) -> None:
    stub_server.enqueue(OPENAI.response("x", "y"))
    model = model_on(stub_server, transport)

    async def main() -> list[str]:
        deltas = model.stream_events(REQUEST).pipe(ops.filter(lambda e: isinstance(e, TextDeltaEvent)))
        return [event.text async for event in rxllm.aio.iterate(deltas)]

    assert run(main) == ["x", "y"]


# -- leaving early closes the connection --------------------------------------------------------


def _held(server: StubServer) -> threading.Event:
    release = threading.Event()
    stream = OPENAI.stream("one", "two")
    server.enqueue(StubResponse(body=[*stream[:2], Hold(release), *stream[2:]]))
    return release


async def _leave_by(how: str, model: SseChatModel, server: StubServer) -> list[str]:
    seen: list[str] = []
    stream = model.generate_content(REQUEST, stream=True)
    if how == "break":
        async for response in stream:
            seen.append(response.text())
            break
    elif how == "exception":
        with pytest.raises(KeyError):
            async for response in stream:
                seen.append(response.text())
                raise KeyError("the consumer failed")
    elif how == "aclose":
        async with rxllm.aio.iterate(stream) as responses:
            async for response in responses:
                seen.append(response.text())
                break
    elif how == "timeout_iterating":
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(None) as deadline:
                async for response in stream:
                    seen.append(response.text())
                    deadline.reschedule(asyncio.get_running_loop().time())  # expire now, while awaiting the next
    elif how == "timeout_awaiting":  # the deadline expires once the server has the request
        loop = asyncio.get_running_loop()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(None) as deadline:

                def expire_when_requested() -> None:
                    server.wait_for_requests(1, TIMEOUT)
                    loop.call_soon_threadsafe(deadline.reschedule, loop.time())

                threading.Thread(target=expire_when_requested, daemon=True).start()
                await stream
    elif how == "cancel":
        first = asyncio.Event()
        task = asyncio.ensure_future(_consume(stream, seen, first))
        await first.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    return seen


async def _consume(stream: reactivex.Observable[LlmResponse], seen: list[str], first: asyncio.Event) -> None:
    async for response in rxllm.aio.iterate(stream):
        seen.append(response.text())
        first.set()


@pytest.mark.parametrize("how", ["break", "exception", "aclose", "timeout_iterating", "timeout_awaiting", "cancel"])
def test_leaving_early_closes_the_connection(
    stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport, how: str
) -> None:
    release = _held(stub_server)
    model = model_on(stub_server, transport)
    try:
        seen = run(lambda: _leave_by(how, model, stub_server), debug=True)
        if how != "timeout_awaiting":
            assert seen[0] == "one"
        connection = stub_server.wait_for_connection(1, TIMEOUT)
        assert connection is not None
        assert connection.wait_closed_by_client(TIMEOUT), "the server never saw the connection close"
        assert len(stub_server.requests) == 1
    finally:
        release.set()


def test_leaving_during_the_wait_for_headers_closes_the_connection(
    stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    release = threading.Event()
    stub_server.enqueue(StubResponse(before_headers=[Hold(release)], body=OPENAI.stream("late")))
    model = model_on(stub_server, transport)

    async def main() -> None:
        waiting = asyncio.ensure_future(rxllm.aio.last(model.generate_content(REQUEST, stream=True)))
        await asyncio.to_thread(stub_server.wait_for_requests, 1, TIMEOUT)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    try:
        run(main)
        connection = stub_server.wait_for_connection(1, TIMEOUT)
        assert connection is not None and connection.wait_closed_by_client(TIMEOUT)
    finally:
        release.set()


# -- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize("debug", DEBUG, ids=["normal", "debug"])
def test_errors_arrive_as_the_same_rxllm_errors(
    stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport, debug: bool
) -> None:
    error = StubResponse.json(400, {"error": {"message": "bad request", "type": "invalid_request_error"}})
    stub_server.enqueue(error, error)
    model = model_on(stub_server, transport)

    async def main() -> tuple[HttpStatusError, HttpStatusError]:
        with pytest.raises(HttpStatusError) as awaited:
            await model.generate_content(REQUEST, stream=True)
        with pytest.raises(HttpStatusError) as iterated:
            async for _ in model.generate_content(REQUEST, stream=True):
                pass
        return awaited.value, iterated.value

    for raised in run(main, debug=debug):
        assert raised.status_code == 400 and raised.provider_message == "bad request"


def test_items_before_an_error_are_delivered_first() -> None:
    async def main() -> list[Any]:
        seen: list[Any] = []
        with pytest.raises(ConfigurationError):
            failing = reactivex.concat(reactivex.of(1, 2), reactivex.throw(ConfigurationError("x")))
            async for x in rxllm.aio.iterate(failing):
                seen.append(x)
        return seen

    assert run(main) == [1, 2]


def test_an_empty_stream_has_no_last_item() -> None:
    async def main() -> Any:
        with pytest.raises(EmptyStreamError):
            await rxllm.aio.last(reactivex.empty())
        with pytest.raises(EmptyStreamError):
            await rxllm.aio.awaitable(reactivex.empty())
        return await rxllm.aio.last(reactivex.empty(), "default")

    assert run(main) == "default"


def test_max_buffer_is_validated() -> None:
    with pytest.raises(ConfigurationError):
        rxllm.aio.iterate(reactivex.empty(), max_buffer=0)


# -- the buffer between the emitting thread and the loop ---------------------------------------


def test_a_threaded_emitter_waits_for_room_in_the_buffer() -> None:
    """Backpressure: the emitter's thread never gets more than ``max_buffer`` items ahead."""
    consumed = 0
    ahead: list[int] = []

    def subscribe(observer: rx_abc.ObserverBase[int], _: rx_abc.SchedulerBase | None = None) -> rx_abc.DisposableBase:
        def produce() -> None:
            for i in range(50):
                observer.on_next(i)
                ahead.append(i + 1 - consumed)  # items emitted minus items the consumer has taken
            observer.on_completed()

        threading.Thread(target=produce, daemon=True).start()
        return reactivex.disposable.Disposable()

    async def main() -> list[int]:
        nonlocal consumed
        items = []
        async for item in rxllm.aio.iterate(reactivex.create(subscribe), max_buffer=3):
            items.append(item)
            consumed += 1
            await asyncio.sleep(0)
        return items

    assert run(main) == list(range(50))
    assert max(ahead) <= 3 + 1  # the buffer, plus the item the consumer holds


class CountingPool(ThreadPoolScheduler):
    """An I/O pool that knows when none of its actions is running (no thread left blocked)."""

    def __init__(self) -> None:
        super().__init__(2)
        self._idle = threading.Condition()
        self.running = 0

    def schedule(self, action: Any, state: Any = None) -> rx_abc.DisposableBase:
        def counted(scheduler: Any, st: Any) -> Any:
            with self._idle:
                self.running += 1
            try:
                return action(scheduler, st)
            finally:
                with self._idle:
                    self.running -= 1
                    self._idle.notify_all()

        return super().schedule(counted, state)

    def wait_idle(self, timeout: float) -> bool:
        with self._idle:
            return self._idle.wait_for(lambda: self.running == 0, timeout)


def test_leaving_while_the_io_thread_waits_for_room_frees_it_and_closes_the_connection(stub_server: StubServer) -> None:
    release = threading.Event()
    stream = OPENAI.stream(*[f"w{i} " for i in range(8)])
    stub_server.enqueue(StubResponse(body=[*stream, Hold(release)]))  # all partials sent, then the body stays open
    pool = CountingPool()
    transport = HttpTransport(max_concurrent_streams=2)
    model = OpenAiChatModel("gpt-test", base_url=f"{stub_server.url}/v1", transport=transport, scheduler=pool)

    third_offered = threading.Event()  # set on the I/O thread as it hands the third partial over

    def subscribe(observer: rx_abc.ObserverBase[Any], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        count = 0

        def on_next(item: Any) -> None:
            nonlocal count
            count += 1
            if count == 3:
                third_offered.set()
            observer.on_next(item)

        return model.generate_content(REQUEST, stream=True).subscribe(on_next, observer.on_error, observer.on_completed)

    async def main() -> str:
        async with rxllm.aio.iterate(reactivex.create(subscribe), max_buffer=1) as partials:
            first = await anext(partials)
            # the buffer holds the second partial; the I/O thread now waits for room with the third
            assert await asyncio.to_thread(third_offered.wait, TIMEOUT)
        return first.text() or ""

    try:
        assert run(main) == "w0 "
        connection = stub_server.wait_for_connection(1, TIMEOUT)
        assert connection is not None and connection.wait_closed_by_client(TIMEOUT)
        assert pool.wait_idle(TIMEOUT), "the I/O thread stayed blocked after the consumer left"
    finally:
        release.set()
        transport.close()
        pool.executor.shutdown(wait=False)  # (a thread left blocked must not hang the test too)


def test_an_emitter_on_another_loop_fails_loudly_when_the_buffer_is_full() -> None:
    subject: Subject[int] = Subject()
    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever, daemon=True)
    thread.start()

    async def emit() -> None:
        for i in range(10):
            subject.on_next(i)

    async def main() -> list[int]:
        seen = []
        async with rxllm.aio.iterate(subject, max_buffer=3) as items:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(emit(), other))
            with pytest.raises(BufferOverflowError):
                async for item in items:
                    seen.append(item)
        return seen

    try:
        assert run(main) == [0, 1, 2]  # the buffered items, then the error; nothing more
        assert not subject.observers, "the overflowing subscription was not disposed"
    finally:
        other.call_soon_threadsafe(other.stop)
        thread.join(TIMEOUT)
        other.close()


def test_a_synchronous_source_on_the_loop_is_never_bounded() -> None:
    async def main() -> list[int]:
        return [x async for x in rxllm.aio.iterate(reactivex.range(100), max_buffer=2)]

    assert run(main) == list(range(100))


def test_iterating_does_not_subscribe_until_the_first_item_is_asked_for() -> None:
    subscribed = []

    def factory(_: Any) -> reactivex.Observable[int]:
        subscribed.append(True)
        return reactivex.of(1)

    async def main() -> list[int]:
        items = rxllm.aio.iterate(reactivex.defer(factory))
        assert subscribed == []
        return [x async for x in items]

    assert run(main) == [1]
    assert subscribed == [True]


def test_await_inside_a_fastapi_endpoint(
    stub_server: StubServer, transport: HttpTransport | AsyncHttpTransport
) -> None:
    """Under an ASGI app (FastAPI through httpx's ASGI transport): the endpoint awaits the final."""
    import fastapi
    import httpx

    stub_server.enqueue(OPENAI.response("Hello", " from", " ASGI"))
    model = model_on(stub_server, transport)
    app = fastapi.FastAPI()

    @app.get("/answer")
    async def answer() -> dict[str, str | None]:
        final = await model.generate_content(REQUEST, stream=True)
        return {"text": final.text()}

    async def main() -> Any:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as client:
            response = await client.get("/answer")
            return response.status_code, response.json()

    assert run(main, debug=True) == (200, {"text": "Hello from ASGI"})


@pytest.mark.parametrize("debug", DEBUG, ids=["normal", "debug"])
def test_a_source_emitting_from_a_task_on_the_same_loop(debug: bool) -> None:
    """A transport bound to the caller's loop emits from its tasks there: no thread hop, no hang."""

    async def main() -> tuple[list[int], int]:
        items_subject: Subject[int] = Subject()
        last_subject: Subject[int] = Subject()

        async def feed(subject: Subject[int]) -> None:
            for i in range(5):
                await asyncio.sleep(0)  # each item from a later turn of the loop, as a network read would
                subject.on_next(i)
            subject.on_completed()

        async with rxllm.aio.iterate(items_subject, max_buffer=2) as items:
            feeding = asyncio.ensure_future(feed(items_subject))
            got = [x async for x in items]
        await feeding
        feeding = asyncio.ensure_future(feed(last_subject))  # runs once last() below has subscribed
        final = await rxllm.aio.last(last_subject)
        await feeding
        return got, final

    assert run(main, debug=debug) == ([0, 1, 2, 3, 4], 4)


class _EchoLlm(BaseLlm):
    """A user's own model, built on plain reactivex: its Observables are awaitable all the same."""

    def generate_content(self, llm_request: LlmRequest, stream: bool = False) -> reactivex.Observable[LlmResponse]:
        text = llm_request.contents[-1].parts[0].text or ""
        final = LlmResponse(content=Content(role="model", parts=(Part.from_text(text.upper()),)))
        if not stream:
            return reactivex.of(final)
        partial = LlmResponse(content=Content(role="model", parts=(Part.from_text(text.upper()),)), partial=True)
        return reactivex.of(partial, final)


def test_a_model_you_wrote_returns_awaitable_observables() -> None:
    model = _EchoLlm(model="echo")
    request = LlmRequest(contents=(Content(role="user", parts=(Part.from_text("hi"),)),))

    async def main() -> tuple[str, list[bool | None]]:
        final = await model.generate_content(request)
        seen = [response.partial async for response in model.generate_content(request, stream=True)]
        return final.text(), seen

    assert isinstance(model.generate_content(request), AwaitableObservable)
    assert asyncio.run(main()) == ("HI", [True, None])
