"""SseChatModel over a real loopback server: the four tests a streaming model needs, for every provider.

Streaming follows the protocol; dispose closes the connection at once (the server observes it)
while waiting for headers, mid-body and between chunks; a transport failure after the first
chunk is ``on_error`` with no retry; a 429 before any chunk is retried exactly once, on a
``TestScheduler`` in virtual time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import reactivex
from reactivex import abc as rx_abc
from reactivex.scheduler import ImmediateScheduler, ThreadPoolScheduler
from virtual_clock import VirtualClock
from wire import OPENAI, WIRES, Wire, openai_chunk

from rxllm import (
    AsyncHttpTransport,
    Content,
    FinishReason,
    HttpStatusError,
    HttpTransport,
    LlmRequest,
    LlmResponse,
    Part,
    ProviderError,
    ResponseCompleteEvent,
    RetryPolicy,
    SseChatModel,
    StreamInterruptedError,
    TextDeltaEvent,
    ToolCallCompleteEvent,
    UnsupportedOperationError,
)
from rxllm.testing import Delay, Disconnect, Hold, StubResponse, StubServer, assert_stream_protocol

REQUEST = LlmRequest(contents=(Content(role="user", parts=(Part.from_text("Where is order A17?"),)),))
TIMEOUT = 5.0


@pytest.fixture(params=WIRES, ids=lambda w: w.name)
def wire(request: pytest.FixtureRequest) -> Wire:
    return request.param  # type: ignore[no-any-return]


class Harness:
    """One transport kind: a thread per stream (``HttpTransport``) or a task per stream (asyncio)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.pool = WatchedScheduler() if kind == "threads" else None
        self.transport: HttpTransport | AsyncHttpTransport = (
            HttpTransport(max_concurrent_streams=8) if kind == "threads" else AsyncHttpTransport()
        )

    def model(self, wire: Wire, url: str, *, clock: VirtualClock | None = None, **options: Any) -> SseChatModel:
        if self.pool is not None:  # threads: virtual-time tests run the I/O on the test's thread
            options.setdefault("scheduler", ImmediateScheduler() if clock is not None else self.pool)
        if clock is not None:
            options["timer_scheduler"] = clock
        return wire.model(url, transport=self.transport, **options)

    def wait_idle(self) -> bool:
        """No request work is left running (no blocked I/O thread, no pending task)."""
        if self.pool is not None:
            return self.pool.wait_idle(TIMEOUT)
        assert isinstance(self.transport, AsyncHttpTransport)

        async def others_done() -> bool:
            others = asyncio.all_tasks() - {asyncio.current_task()}
            if not others:
                return True
            _, pending = await asyncio.wait(others, timeout=TIMEOUT)
            return not pending

        return bool(asyncio.run_coroutine_threadsafe(others_done(), self.transport.loop).result(TIMEOUT + 1))

    def close(self) -> None:
        self.transport.close()
        if self.pool is not None:
            self.pool.executor.shutdown(wait=True)


@pytest.fixture(params=["threads", "asyncio"])
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    created = Harness(request.param)
    yield created
    created.close()


class Recorder:
    """Collects what an Observable emits, with latches instead of sleeps."""

    def __init__(self, *, notify_after: int = 0) -> None:
        self.items: list[Any] = []
        self.errors: list[Exception] = []
        self.completed = False
        self.done = threading.Event()
        self.reached = threading.Event()
        self._notify_after = notify_after

    def on_next(self, item: Any) -> None:
        self.items.append(item)
        if self._notify_after and len(self.items) >= self._notify_after:
            self.reached.set()

    def on_error(self, error: Exception) -> None:
        self.errors.append(error)
        self.done.set()

    def on_completed(self) -> None:
        self.completed = True
        self.done.set()

    def subscribe(self, source: reactivex.Observable[Any]) -> rx_abc.DisposableBase:
        return source.subscribe(self.on_next, self.on_error, self.on_completed)


class WatchedScheduler(ThreadPoolScheduler):
    """A thread pool that counts the actions still running (to prove no thread stays blocked)."""

    def __init__(self) -> None:
        super().__init__(4)
        self._lock = threading.Condition()
        self.running = 0

    def schedule(self, action: Any, state: Any = None) -> rx_abc.DisposableBase:
        def wrapped(scheduler: Any, st: Any) -> Any:
            with self._lock:
                self.running += 1
            try:
                return action(scheduler, st)
            finally:
                with self._lock:
                    self.running -= 1
                    self._lock.notify_all()

        return super().schedule(wrapped, state)

    def wait_idle(self, timeout: float) -> bool:
        with self._lock:
            return self._lock.wait_for(lambda: self.running == 0, timeout)


def run_to_list(source: reactivex.Observable[LlmResponse]) -> list[LlmResponse]:
    recorder = Recorder()
    recorder.subscribe(source)
    assert recorder.done.wait(TIMEOUT), "the stream did not terminate"
    if recorder.errors:
        raise recorder.errors[0]
    return recorder.items


# --- the stream follows the protocol, against every provider's wire --------------------------------


def test_stream_follows_protocol(stub_server: StubServer, wire: Wire, harness: Harness) -> None:
    stub_server.enqueue(wire.response("The order", " ships", " Tuesday."))
    responses = run_to_list(harness.model(wire, stub_server.url).generate_content(REQUEST, stream=True))
    final = assert_stream_protocol(responses)
    assert [r.text() for r in responses[:-1]] == ["The order", " ships", " Tuesday."]
    assert final.text() == "The order ships Tuesday."
    assert final.finish_reason is FinishReason.STOP
    assert final.usage_metadata is not None and final.usage_metadata.total_token_count == 8
    assert len(stub_server.requests) == 1


def test_partials_arrive_while_the_server_still_holds_the_stream(
    stub_server: StubServer, wire: Wire, harness: Harness
) -> None:
    release = threading.Event()
    stream = wire.stream("first", " second")
    cut = len(wire.prelude()) + 1
    stub_server.enqueue(StubResponse(body=[*stream[:cut], Hold(release), *stream[cut:]]))
    recorder = Recorder(notify_after=1)
    recorder.subscribe(harness.model(wire, stub_server.url).generate_content(REQUEST, stream=True))
    try:
        assert recorder.reached.wait(TIMEOUT), "the first partial did not arrive while the body was held open"
        assert recorder.items[0].partial and recorder.items[0].text() == "first"
        assert not recorder.done.is_set()
    finally:
        release.set()
    assert recorder.done.wait(TIMEOUT)
    assert assert_stream_protocol(recorder.items).text() == "first second"


def test_stream_false_returns_exactly_one_final(stub_server: StubServer, wire: Wire, harness: Harness) -> None:
    stub_server.enqueue(StubResponse.json(200, wire.complete_body("The order ships Tuesday.")))
    responses = run_to_list(harness.model(wire, stub_server.url).generate_content(REQUEST, stream=False))
    assert len(responses) == 1
    (only,) = responses
    assert not only.partial and only.text() == "The order ships Tuesday."
    assert only.usage_metadata is not None and only.usage_metadata.total_token_count == 8


def test_every_subscription_is_a_fresh_request_with_a_fresh_aggregator(
    stub_server: StubServer, wire: Wire, harness: Harness
) -> None:
    stub_server.enqueue(wire.response("one"), wire.response("two"))
    source = harness.model(wire, stub_server.url).generate_content(REQUEST, stream=True)
    assert run_to_list(source)[-1].text() == "one"
    assert run_to_list(source)[-1].text() == "two"  # not "onetwo": the aggregator is per subscription
    assert len(stub_server.requests) == 2


def test_stream_events_reports_a_tool_call_before_the_final(stub_server: StubServer, harness: Harness) -> None:
    release = threading.Event()

    def tool(index: int, arguments: str, call_id: str | None = None, name: str | None = None) -> dict[str, Any]:
        function = {"arguments": arguments} if name is None else {"name": name, "arguments": arguments}
        call = (
            {"index": index, "function": function}
            if call_id is None
            else {"index": index, "id": call_id, "function": function}
        )
        return {"tool_calls": [call]}

    events: list[Any] = [
        openai_chunk({"content": "Let me check."}),
        openai_chunk(tool(0, "", "call_1", "get_order")),
        openai_chunk(tool(0, '{"order_id": "A1')),
        openai_chunk(tool(0, '7"}')),
        openai_chunk(tool(1, "{}", "call_2", "get_eta")),
        Hold(release),
        openai_chunk({}, "tool_calls"),
        b"data: [DONE]\n\n",
    ]
    stub_server.enqueue(StubResponse(body=events))
    recorder = Recorder()
    model = harness.model(OPENAI, stub_server.url)

    def on_next(event: Any) -> None:
        recorder.on_next(event)
        if isinstance(event, ToolCallCompleteEvent) and event.call.name == "get_order":
            recorder.reached.set()

    model.stream_events(REQUEST).subscribe(on_next, recorder.on_error, recorder.on_completed)
    try:
        assert recorder.reached.wait(TIMEOUT), "get_order was not reported complete while the round streamed"
        assert not recorder.done.is_set()
    finally:
        release.set()
    assert recorder.done.wait(TIMEOUT) and not recorder.errors
    kinds = [type(e).__name__ for e in recorder.items]
    assert kinds[0] == "TextDeltaEvent" and kinds[-1] == "ResponseCompleteEvent"
    completes = [e for e in recorder.items if isinstance(e, ToolCallCompleteEvent)]
    assert [(c.call.name, c.call.args) for c in completes] == [("get_order", {"order_id": "A17"}), ("get_eta", {})]
    final = recorder.items[-1]
    assert isinstance(final, ResponseCompleteEvent)
    assert [c.call for c in completes] == final.response.function_calls()
    assert "".join(e.text for e in recorder.items if isinstance(e, TextDeltaEvent)) == final.response.text()


def test_stream_events_and_a_whole_response_build_no_partial(
    stub_server: StubServer, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rxllm._models import aggregation

    built: list[LlmResponse] = []
    real = aggregation.build_partial

    def counting(*args: Any) -> LlmResponse:
        built.append(real(*args))
        return built[-1]

    monkeypatch.setattr(aggregation, "build_partial", counting)
    model = harness.model(OPENAI, stub_server.url)
    stub_server.enqueue(OPENAI.response("Hello", " world"))
    events = run_to_list(model.stream_events(REQUEST))  # type: ignore[arg-type]
    assert [e.text for e in events if isinstance(e, TextDeltaEvent)] == ["Hello", " world"]
    assert isinstance(events[-1], ResponseCompleteEvent) and events[-1].response.text() == "Hello world"
    whole = json.dumps(OPENAI.complete_body("Hello world")).encode()
    stub_server.enqueue(StubResponse(headers={"content-type": "application/json"}, body=[whole], chunked=False))
    assert [r.text() for r in run_to_list(model.generate_content(REQUEST, stream=False))] == ["Hello world"]
    assert built == []
    stub_server.enqueue(OPENAI.response("Hello", " world"))  # the counter does see partials where they are due
    assert [r.text() for r in run_to_list(model.generate_content(REQUEST, stream=True))][:2] == ["Hello", " world"]
    assert [p.text() for p in built] == ["Hello", " world"]


# --- cancellation: dispose closes the socket at once ----------------------------------------------


@pytest.mark.parametrize("phase", ["mid_body", "between_chunks", "headers", "headers_on_reused_connection"])
def test_dispose_closes_the_connection_at_once(
    stub_server: StubServer, wire: Wire, phase: str, harness: Harness
) -> None:
    release = threading.Event()
    stream = wire.stream("Hello", " world", "!")
    cut = len(wire.prelude()) + 2
    model = harness.model(wire, stub_server.url)
    if phase == "headers_on_reused_connection":  # a complete non-streamed answer leaves the connection pooled
        stub_server.enqueue(StubResponse.json(200, wire.complete_body("warm-up")))
        run_to_list(model.generate_content(REQUEST, stream=False))
    if phase in ("headers", "headers_on_reused_connection"):
        stub_server.enqueue(StubResponse(before_headers=[Hold(release)], body=stream))
    else:
        pause = Hold(release) if phase == "mid_body" else Delay(30.0)
        stub_server.enqueue(StubResponse(body=[*stream[:cut], pause, *stream[cut:]]))

    recorder = Recorder(notify_after=2)
    subscription = recorder.subscribe(model.generate_content(REQUEST, stream=True))
    if phase.startswith("headers"):
        assert stub_server.wait_for_requests(2 if phase == "headers_on_reused_connection" else 1, TIMEOUT)
    else:
        assert recorder.reached.wait(TIMEOUT), "two partials did not arrive"
    connection = stub_server.connections[-1]
    if phase == "headers_on_reused_connection":
        assert len(stub_server.connections) == 1, "the second request should reuse the keep-alive connection"
    seen = len(recorder.items)

    disposed_at = time.monotonic()
    subscription.dispose()
    try:
        assert connection.wait_closed_by_client(TIMEOUT), "the server never saw the connection close"
        assert connection.closed_at is not None and connection.closed_at - disposed_at < 0.2
        assert harness.wait_idle(), "the request's work stayed blocked after dispose"
    finally:
        release.set()
    assert len(recorder.items) == seen, "something was emitted after dispose"
    assert not recorder.errors and not recorder.completed, "no terminal signal after dispose"


def test_dispose_before_the_work_starts_sends_nothing(stub_server: StubServer) -> None:
    gate = threading.Event()
    pool = ThreadPoolScheduler(1)
    pool.schedule(lambda *_: gate.wait(TIMEOUT))  # occupy the only worker
    subscription = OPENAI.model(stub_server.url, scheduler=pool).generate_content(REQUEST, stream=True).subscribe()
    subscription.dispose()
    gate.set()
    finished = threading.Event()
    pool.schedule(lambda *_: finished.set())
    assert finished.wait(TIMEOUT)
    assert stub_server.requests == []


# --- errors before and after the first chunk ------------------------------------------------------


def test_transport_failure_after_one_chunk_is_on_error_without_retry(
    stub_server: StubServer, wire: Wire, harness: Harness
) -> None:
    stream = wire.stream("Hello", " world")
    cut = len(wire.prelude()) + 1
    stub_server.enqueue(StubResponse(body=[*stream[:cut], Disconnect(reset=True)]), wire.response("never"))
    recorder = Recorder()
    recorder.subscribe(harness.model(wire, stub_server.url).generate_content(REQUEST, stream=True))
    assert recorder.done.wait(TIMEOUT)
    assert [r.text() for r in recorder.items] == ["Hello"] and all(r.partial for r in recorder.items)
    assert len(recorder.errors) == 1 and isinstance(recorder.errors[0], StreamInterruptedError)
    assert len(stub_server.requests) == 1


def test_body_ending_early_after_a_chunk_is_on_error(stub_server: StubServer, wire: Wire, harness: Harness) -> None:
    stream = wire.stream("Hello", " world")
    cut = len(wire.prelude()) + 1
    stub_server.enqueue(StubResponse(body=[*stream[:cut], Disconnect(reset=False)]))
    recorder = Recorder()
    recorder.subscribe(harness.model(wire, stub_server.url).generate_content(REQUEST, stream=True))
    assert recorder.done.wait(TIMEOUT)
    assert isinstance(recorder.errors[0], StreamInterruptedError)
    assert len(stub_server.requests) == 1


def test_in_band_error_after_the_first_chunk_ends_in_an_error_final(
    stub_server: StubServer, wire: Wire, harness: Harness
) -> None:
    stream = wire.stream("Partial answer")
    cut = len(wire.prelude()) + 1
    stub_server.enqueue(StubResponse(body=[*stream[:cut], wire.error(True)]))
    responses = run_to_list(harness.model(wire, stub_server.url).generate_content(REQUEST, stream=True))
    final = assert_stream_protocol(responses)
    assert final.text() == "Partial answer"
    assert final.error_code and final.error_message
    assert len(stub_server.requests) == 1


def _virtual_time_model(harness: Harness, wire: Wire, url: str) -> tuple[SseChatModel, VirtualClock]:
    clock = VirtualClock()  # exact backoff (no jitter), so the tests can name the instants
    return harness.model(wire, url, clock=clock, retry_policy=RetryPolicy(jitter="none")), clock


def test_429_before_any_chunk_is_retried_exactly_once(stub_server: StubServer, wire: Wire, harness: Harness) -> None:
    stub_server.enqueue(StubResponse.json(429, {"error": {"message": "slow down"}}), wire.response("after retry"))
    model, clock = _virtual_time_model(harness, wire, stub_server.url)
    recorder = Recorder()
    recorder.subscribe(model.generate_content(REQUEST, stream=True))
    assert clock.wait_timers(1), "no retry was scheduled"
    assert len(stub_server.requests) == 1 and not recorder.items
    clock.advance_to(0.399)
    assert len(stub_server.requests) == 1
    clock.advance_to(0.4)
    assert recorder.done.wait(TIMEOUT) and not recorder.errors
    assert len(stub_server.requests) == 2 and clock.timers == 1
    assert assert_stream_protocol(recorder.items).text() == "after retry"


def test_three_503s_make_three_requests_then_the_error(stub_server: StubServer, wire: Wire, harness: Harness) -> None:
    for _ in range(3):
        stub_server.enqueue(StubResponse.json(503, {"error": {"message": "overloaded"}},
                                               headers={"x-request-id": "req-9"}))
    model, clock = _virtual_time_model(harness, wire, stub_server.url)
    recorder = Recorder()
    recorder.subscribe(model.generate_content(REQUEST, stream=True))
    assert clock.wait_timers(1)
    assert len(stub_server.requests) == 1
    clock.advance_to(0.4)
    assert clock.wait_timers(2)
    assert len(stub_server.requests) == 2 and not recorder.done.is_set()
    clock.advance_to(1.199)
    assert len(stub_server.requests) == 2
    clock.advance_to(1.2)
    assert recorder.done.wait(TIMEOUT)
    assert len(stub_server.requests) == 3
    (error,) = recorder.errors
    assert isinstance(error, HttpStatusError) and error.status_code == 503
    assert error.provider_message == "overloaded" and error.request_id == "req-9"
    clock.advance_to(100.0)
    assert len(stub_server.requests) == 3 and clock.timers == 2


def test_retry_after_is_honoured(stub_server: StubServer, harness: Harness) -> None:
    stub_server.enqueue(
        StubResponse.json(429, {"error": {"message": "later"}}, headers={"retry-after": "2"}), OPENAI.response("ok")
    )
    model, clock = _virtual_time_model(harness, OPENAI, stub_server.url)
    recorder = Recorder()
    recorder.subscribe(model.generate_content(REQUEST, stream=True))
    assert clock.wait_timers(1)
    clock.advance_to(1.999)
    assert len(stub_server.requests) == 1
    clock.advance_to(2.0)
    assert recorder.done.wait(TIMEOUT) and recorder.completed and len(stub_server.requests) == 2


def test_other_4xx_fails_at_once_with_status_message_and_request_id(
    stub_server: StubServer, wire: Wire, harness: Harness
) -> None:
    stub_server.enqueue(
        StubResponse.json(400, {"error": {"message": "max_tokens is too large"}}, headers={"request-id": "req-42"})
    )
    model, clock = _virtual_time_model(harness, wire, stub_server.url)
    recorder = Recorder()
    recorder.subscribe(model.generate_content(REQUEST, stream=True))
    assert recorder.done.wait(TIMEOUT)
    (error,) = recorder.errors
    assert isinstance(error, HttpStatusError)
    assert (error.status_code, error.provider_message, error.request_id) == (400, "max_tokens is too large", "req-42")
    assert "max_tokens is too large" in str(error) and "req-42" in str(error)
    assert clock.timers == 0 and len(stub_server.requests) == 1


def test_retryable_in_band_error_before_any_chunk_is_retried(
    stub_server: StubServer, wire: Wire, harness: Harness
) -> None:
    stub_server.enqueue(StubResponse(body=[*wire.prelude(), wire.error(True)]), wire.response("second try"))
    model, clock = _virtual_time_model(harness, wire, stub_server.url)
    recorder = Recorder()
    recorder.subscribe(model.generate_content(REQUEST, stream=True))
    assert clock.wait_timers(1)
    assert len(stub_server.requests) == 1 and not recorder.done.is_set()
    clock.advance_to(0.4)
    assert recorder.done.wait(TIMEOUT)
    assert recorder.completed and assert_stream_protocol(recorder.items).text() == "second try"


def test_non_retryable_in_band_error_before_any_chunk_fails(
    stub_server: StubServer, wire: Wire, harness: Harness
) -> None:
    stub_server.enqueue(StubResponse(body=[*wire.prelude(), wire.error(False)]))
    model, clock = _virtual_time_model(harness, wire, stub_server.url)
    recorder = Recorder()
    recorder.subscribe(model.generate_content(REQUEST, stream=True))
    assert recorder.done.wait(TIMEOUT)
    assert len(recorder.errors) == 1 and isinstance(recorder.errors[0], ProviderError)
    assert clock.timers == 0 and len(stub_server.requests) == 1


def test_connection_refused_is_retried_then_fails(harness: Harness) -> None:
    with StubServer() as gone:
        url = gone.url
    model, clock = _virtual_time_model(harness, OPENAI, url)
    recorder = Recorder()
    recorder.subscribe(model.generate_content(REQUEST, stream=True))
    assert clock.wait_timers(1) and not recorder.done.is_set()
    clock.advance_to(0.4)
    assert clock.wait_timers(2)
    clock.advance_to(1.2)
    assert recorder.done.wait(TIMEOUT) and type(recorder.errors[0]).__name__ == "TransportError"


def test_retry_policy_never_makes_one_attempt(stub_server: StubServer, harness: Harness) -> None:
    stub_server.enqueue(StubResponse.json(503, {"error": {"message": "overloaded"}}))
    model = harness.model(OPENAI, stub_server.url, retry_policy=RetryPolicy.never())
    recorder = Recorder()
    recorder.subscribe(model.generate_content(REQUEST, stream=True))
    assert recorder.done.wait(TIMEOUT)
    assert isinstance(recorder.errors[0], HttpStatusError) and len(stub_server.requests) == 1


# --- misc contract points -------------------------------------------------------------------------


def test_connect_refuses_naming_the_model(stub_server: StubServer, wire: Wire, harness: Harness) -> None:
    if wire.protocol == "gemini":
        pytest.skip("GeminiModel.connect opens Gemini Live sessions: tests/live/test_gemini_live.py")
    model = harness.model(wire, stub_server.url)
    with pytest.raises(UnsupportedOperationError, match=model.model):
        model.connect(REQUEST)


def test_the_requests_model_wins_over_the_models_own(stub_server: StubServer, harness: Harness) -> None:
    stub_server.enqueue(OPENAI.response("hi"))
    model = harness.model(OPENAI, stub_server.url)
    run_to_list(model.generate_content(REQUEST.model_copy(update={"model": "other"}), stream=True))
    assert stub_server.requests[0].json()["model"] == "other"


def test_api_key_never_appears_in_repr_errors_or_logs(
    stub_server: StubServer, caplog: pytest.LogCaptureFixture
) -> None:
    from rxllm.providers.openai import OpenAiChatModel

    secret = "sk-very-secret-key-123"
    stub_server.enqueue(StubResponse.json(401, {"error": {"message": "invalid api key"}}))
    model = OpenAiChatModel("gpt-test", base_url=f"{stub_server.url}/v1", api_key=secret,
                            scheduler=ImmediateScheduler())
    with caplog.at_level(logging.DEBUG, logger="rxllm"):
        recorder = Recorder()
        recorder.subscribe(model.generate_content(REQUEST, stream=True))
    assert stub_server.requests[0].headers["authorization"] == f"Bearer {secret}"
    (error,) = recorder.errors
    for text in (repr(model), str(error), repr(error), caplog.text):
        assert secret not in text


@pytest.mark.parametrize("kind", ["threads", "asyncio"])
def test_1000_subscribe_dispose_cycles_leak_no_threads_or_sockets(kind: str) -> None:
    baseline_threads = threading.active_count()
    baseline_fds = len(os.listdir("/proc/self/fd"))
    release = threading.Event()
    stream = OPENAI.stream("a", "b")
    held = StubResponse(body=[*stream[:2], Hold(release, timeout=5.0), *stream[2:]])
    server = StubServer(responder=lambda _: held).start()
    harness = Harness(kind)
    model = harness.model(OPENAI, server.url)
    try:
        for i in range(1000):
            recorder = Recorder(notify_after=1)
            subscription = recorder.subscribe(model.generate_content(REQUEST, stream=True))
            if i % 2:  # half disposed at once (before or during headers), half after the first partial
                assert recorder.reached.wait(TIMEOUT)
            seen = len(recorder.items)
            subscription.dispose()
            assert not recorder.errors and len(recorder.items) == seen
        assert harness.wait_idle(), "request work stayed blocked"
    finally:
        release.set()
        harness.close()
        server.close()
    assert threading.active_count() <= baseline_threads, "threads leaked"
    assert len(os.listdir("/proc/self/fd")) <= baseline_fds, "sockets or files leaked"


@pytest.mark.parametrize(
    ("wire", "variable"),
    [(OPENAI, "OPENAI_API_KEY"), (WIRES[1], "ANTHROPIC_API_KEY"), (WIRES[2], "GEMINI_API_KEY")],
    ids=["openai", "anthropic", "gemini"],
)
def test_the_environments_key_is_only_sent_to_the_official_endpoint(
    stub_server: StubServer, wire: Wire, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, "sk-users-real-key")
    stub_server.enqueue(wire.response("hi"), wire.response("hi"))
    run_to_list(wire.model(stub_server.url).generate_content(REQUEST, stream=True))
    run_to_list(wire.model(stub_server.url, api_key="sk-for-this-server").generate_content(REQUEST, stream=True))
    first, second = stub_server.requests
    assert all("sk-users-real-key" not in value for value in first.headers.values())
    assert any("sk-for-this-server" in value for value in second.headers.values())


def test_consecutive_streams_reuse_the_keep_alive_connection_on_asyncio(stub_server: StubServer, wire: Wire) -> None:
    harness = Harness("asyncio")
    stub_server.enqueue(wire.response("one"), wire.response("two"), wire.response("three"))
    model = harness.model(wire, stub_server.url)
    try:
        texts = [run_to_list(model.generate_content(REQUEST, stream=True))[-1].text() for _ in range(3)]
    finally:
        harness.close()
    assert texts == ["one", "two", "three"]
    assert len(stub_server.connections) == 1, "the body's end was not read, so the connection was not reused"


def test_a_body_held_open_after_the_end_marker_neither_delays_the_final_nor_leaks(
    stub_server: StubServer, harness: Harness
) -> None:
    release = threading.Event()
    stub_server.enqueue(StubResponse(body=[*OPENAI.stream("done"), Hold(release)]))
    try:
        recorder = Recorder()
        recorder.subscribe(harness.model(OPENAI, stub_server.url).generate_content(REQUEST, stream=True))
        assert recorder.done.wait(TIMEOUT) and recorder.completed
        assert recorder.items[-1].text() == "done"
        assert stub_server.connections[0].wait_closed_by_client(TIMEOUT), "the held-open connection was never closed"
        assert harness.wait_idle()
    finally:
        release.set()


def test_each_request_is_redacted_with_its_own_headers_when_consecutive_calls_differ() -> None:
    """The credential check's verdict is kept for the last URL and headers only: a call whose
    request carries another credential value is redacted with that value, not the previous one."""
    from rxllm import GenerateContentConfig, HttpOptions
    from rxllm.providers.openai import OpenAiChatModel

    first, second = "first-credential-0001", "second-credential-0002"
    echoes = [StubResponse.json(401, {"error": {"message": f"bad credential {value}"}}) for value in (first, second)]
    with StubServer(echoes) as server:
        model = OpenAiChatModel("m", base_url=server.url, api_key="sk-test-key-0123", secret_names=("x-custom",),
                                retry_policy=RetryPolicy.never(), scheduler=ImmediateScheduler())
        messages = []
        for value in (first, second):
            request = REQUEST.model_copy(update={"config": GenerateContentConfig(
                http_options=HttpOptions(headers={"X-Custom": value}))})
            with pytest.raises(HttpStatusError) as raised:
                model.generate_content(request, stream=True).run()
            messages.append(raised.value.provider_message)
        assert [r.headers.get("x-custom") for r in server.requests] == [first, second]
    assert messages == ["bad credential ***", "bad credential ***"]


@pytest.mark.parametrize("keeps", [False, True], ids=["drops", "keeps"])
def test_the_aggregator_sees_whether_the_subscriber_keeps_partials(
    stub_server: StubServer, wire: Wire, harness: Harness, keeps: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partials are built off the collector's lists only once the subscriber is seen keeping them:
    nothing between the reads and the subscriber may hold a partial while the next is built."""
    from rxllm._models import aggregation

    if aggregation._gc_untrack() is None:
        pytest.skip("not CPython: partials are built as usual")
    switched: list[object] = []
    untrack = aggregation._gc_untrack

    def counted() -> Any:
        switched.append(True)
        return untrack()

    monkeypatch.setattr(aggregation, "_gc_untrack", counted)
    texts = [f"t{i} " for i in range(12)]
    stub_server.enqueue(wire.response(*texts))
    kept: list[LlmResponse] = []
    seen: list[str] = []
    done = threading.Event()
    final: list[LlmResponse] = []
    errors: list[Exception] = []

    def on_error(error: Exception) -> None:
        errors.append(error)
        done.set()

    def on_next(response: LlmResponse) -> None:
        if response.partial:
            seen.append(response.text())
            if keeps:
                kept.append(response)
        else:
            final.append(response)

    harness.model(wire, stub_server.url).generate_content(REQUEST, stream=True).subscribe(
        on_next, on_error, done.set
    )
    assert done.wait(TIMEOUT) and not errors, errors
    assert seen == texts and final[-1].text() == "".join(texts)
    assert switched == ([True] if keeps else [])
