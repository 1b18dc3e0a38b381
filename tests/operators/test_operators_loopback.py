"""Every operator against a real loopback server: when it (or its subscriber) disposes, the connection closes.

"Closed" means the server saw the client close the socket (``ConnectionRecord.closed_at``), within
200 ms of the moment that decided it (the timer firing, the winning item, the dispose call).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import reactivex
from reactivex import abc as rx_abc
from reactivex import operators as ops
from reactivex.testing import TestScheduler

from rxllm import HttpStatusError, LlmRequest, LlmResponse, StreamTimeoutError
from rxllm.operators import (
    check_contract,
    collect_text,
    fallback,
    final,
    first_item_timeout,
    hedge,
    idle_timeout,
    partials,
    text_deltas,
)
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import ConnectionRecord, Hold, StubResponse, StubServer, assert_stream_protocol, sse_turn

TIMEOUT = 5.0
CLOSE_WITHIN = 0.2
REQUEST = LlmRequest()
EVENTS = sse_turn("openai-chat", text=["one ", "two ", "three"])  # EVENTS[0] opens the message


class Recorder:
    """What a subscriber saw, with latches and the monotonic time of each notification."""

    def __init__(self, *, notify_after: int = 1) -> None:
        self.items: list[Any] = []
        self.item_times: list[float] = []
        self.errors: list[Exception] = []
        self.error_time: float | None = None
        self.completed = False
        self.done = threading.Event()
        self.reached = threading.Event()
        self._notify_after = notify_after

    def subscribe(self, source: reactivex.Observable[Any]) -> rx_abc.DisposableBase:
        return source.subscribe(self._on_next, self._on_error, self._on_completed)

    def _on_next(self, item: Any) -> None:
        self.items.append(item)
        self.item_times.append(time.monotonic())
        if len(self.items) >= self._notify_after:
            self.reached.set()

    def _on_error(self, error: Exception) -> None:
        self.error_time = time.monotonic()
        self.errors.append(error)
        self.done.set()

    def _on_completed(self) -> None:
        self.completed = True
        self.done.set()


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # never leave a held response behind


def _model(server: StubServer) -> OpenAiChatModel:
    return OpenAiChatModel("gpt-4o-mini", base_url=server.url + "/v1", api_key="sk-test")


def _held_after(n_events: int, release: threading.Event) -> StubResponse:
    return StubResponse(body=[*EVENTS[:n_events], Hold(release), *EVENTS[n_events:]])


def _assert_closed_soon(connection: ConnectionRecord, since: float) -> None:
    assert connection.wait_closed_by_client(TIMEOUT), "the server never saw the connection close"
    assert connection.closed_at is not None and connection.closed_at - since < CLOSE_WITHIN


# --- the operators that stop a stream themselves ---------------------------------------------------------


def test_first_item_timeout_closes_the_connection_while_headers_are_awaited(
    stub_server: StubServer, release: threading.Event
) -> None:
    stub_server.enqueue(StubResponse(before_headers=[Hold(release)], body=EVENTS))
    clock = TestScheduler()
    recorder = Recorder()
    recorder.subscribe(_model(stub_server).generate_content(REQUEST, stream=True).pipe(first_item_timeout(30.0, clock)))
    assert stub_server.wait_for_requests(1, TIMEOUT)
    fired_at = time.monotonic()
    clock.advance_to(30.0)  # the timer fires on this thread
    assert recorder.done.is_set() and recorder.items == []
    [error] = recorder.errors
    assert isinstance(error, StreamTimeoutError) and error.limit == "first_item"
    _assert_closed_soon(stub_server.connections[0], fired_at)


def test_idle_timeout_closes_the_connection_mid_body(stub_server: StubServer, release: threading.Event) -> None:
    stub_server.enqueue(_held_after(2, release))
    recorder = Recorder()
    recorder.subscribe(_model(stub_server).generate_content(REQUEST, stream=True).pipe(idle_timeout(1.0)))
    assert recorder.done.wait(TIMEOUT)  # a real timer: the server holds the body, nothing else arrives
    [error] = recorder.errors
    assert isinstance(error, StreamTimeoutError) and error.limit == "idle"
    assert [r.text() for r in recorder.items] == ["one "]
    assert recorder.error_time is not None
    _assert_closed_soon(stub_server.connections[0], recorder.error_time)


def test_hedge_closes_the_losers_connection_when_the_winner_emits(
    stub_server: StubServer, release: threading.Event
) -> None:
    model = _model(stub_server)
    stub_server.enqueue(StubResponse(before_headers=[Hold(release)], body=EVENTS), _held_after(2, release))
    clock = TestScheduler()
    recorder = Recorder()
    subscription = recorder.subscribe(
        model.generate_content(REQUEST, stream=True).pipe(
            hedge(1.0, lambda: model.generate_content(REQUEST, stream=True), scheduler=clock)
        )
    )
    assert stub_server.wait_for_requests(1, TIMEOUT)
    clock.advance_to(1.0)  # no item yet: the backup call starts
    assert recorder.reached.wait(TIMEOUT)
    assert len(stub_server.requests) == 2 and [r.text() for r in recorder.items] == ["one "]
    loser, winner = stub_server.connections
    _assert_closed_soon(loser, recorder.item_times[0])
    disposed_at = time.monotonic()
    subscription.dispose()
    _assert_closed_soon(winner, disposed_at)
    assert not recorder.done.is_set()


def test_fallback_disposes_the_fallback_call_and_its_connection_closes(
    stub_server: StubServer, release: threading.Event
) -> None:
    model = _model(stub_server)
    stub_server.enqueue(StubResponse.json(400, {"error": {"message": "bad"}}), _held_after(2, release))
    recorder = Recorder()
    subscription = recorder.subscribe(
        model.generate_content(REQUEST, stream=True).pipe(
            fallback(lambda: model.generate_content(REQUEST, stream=True))
        )
    )
    assert recorder.reached.wait(TIMEOUT)
    assert len(stub_server.requests) == 2 and [r.text() for r in recorder.items] == ["one "]
    disposed_at = time.monotonic()
    subscription.dispose()
    _assert_closed_soon(stub_server.connections[-1], disposed_at)
    assert not recorder.done.is_set()


# --- every operator passes the subscriber's dispose on to the connection ----------------------------------


OPERATORS: dict[str, Callable[[OpenAiChatModel], Callable[[reactivex.Observable[LlmResponse]], Any]]] = {
    "first_item_timeout": lambda _: first_item_timeout(30.0, TestScheduler()),
    "idle_timeout": lambda _: idle_timeout(30.0, TestScheduler()),
    "fallback": lambda model: fallback(lambda: model.generate_content(REQUEST, stream=True)),
    "hedge": lambda model: hedge(30.0, lambda: model.generate_content(REQUEST, stream=True), scheduler=TestScheduler()),
    "check_contract": lambda _: check_contract(),
    "text_deltas": lambda _: text_deltas(),
    "final": lambda _: final(),
    "partials": lambda _: partials(),
    "collect_text": lambda _: collect_text(),
}


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_disposing_through_the_operator_closes_the_connection_mid_body(
    stub_server: StubServer, release: threading.Event, name: str
) -> None:
    model = _model(stub_server)
    stub_server.enqueue(_held_after(3, release))
    read = threading.Semaphore(0)  # one release per partial read off the socket, before the operator

    def tap(_: LlmResponse) -> None:
        read.release()

    recorder = Recorder()
    subscription = recorder.subscribe(
        model.generate_content(REQUEST, stream=True).pipe(ops.do_action(on_next=tap), OPERATORS[name](model))
    )
    assert read.acquire(timeout=TIMEOUT) and read.acquire(timeout=TIMEOUT), "two partials did not arrive"
    seen = len(recorder.items)
    disposed_at = time.monotonic()
    subscription.dispose()
    _assert_closed_soon(stub_server.connections[0], disposed_at)
    assert len(stub_server.requests) == 1
    assert len(recorder.items) == seen and not recorder.done.is_set()


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_every_operator_lets_a_whole_real_stream_through(stub_server: StubServer, name: str) -> None:
    model = _model(stub_server)
    stub_server.enqueue(StubResponse(body=EVENTS))
    recorder = Recorder()
    recorder.subscribe(model.generate_content(REQUEST, stream=True).pipe(OPERATORS[name](model)))
    assert recorder.done.wait(TIMEOUT) and recorder.completed, recorder.errors
    expected: dict[str, list[Any]] = {
        "text_deltas": ["one ", "two ", "three"],
        "collect_text": ["one two three"],
    }
    if name in expected:
        assert recorder.items == expected[name]
    elif name == "final":
        assert [r.text() for r in recorder.items] == ["one two three"]
    elif name == "partials":
        assert [r.text() for r in recorder.items] == ["one ", "two ", "three"]
    else:
        assert assert_stream_protocol(recorder.items).text() == "one two three"
    assert len(stub_server.requests) == 1


def test_a_retryable_http_error_is_not_swallowed_by_fallback_when_when_says_no(stub_server: StubServer) -> None:
    model = OpenAiChatModel("gpt-4o-mini", base_url=stub_server.url + "/v1", api_key="sk-test")
    stub_server.enqueue(StubResponse.json(400, {"error": {"message": "bad"}}))
    recorder = Recorder()
    recorder.subscribe(
        model.generate_content(REQUEST, stream=True).pipe(
            fallback(lambda: model.generate_content(REQUEST, stream=True), when=lambda e: False)
        )
    )
    assert recorder.done.wait(TIMEOUT)
    assert isinstance(recorder.errors[0], HttpStatusError) and len(stub_server.requests) == 1
