"""A transport of the user's own, written against the seam (:class:`rxllm.Transport`), drives a model.

The recorded transport below sends nothing: it hands the sink canned SSE bytes on a thread of its
own, one piece per "read", and waits on an event between pieces so a test can dispose mid-stream.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import reactivex
from reactivex import abc as rx_abc
from wire import openai_chunk

import rxllm
from rxllm import AttemptSink, CancelScope, ConfigurationError, Content, LlmRequest, Part, TransportLimits
from rxllm.providers.openai import OpenAiChatModel

TIMEOUT = 10.0
REQUEST = LlmRequest(contents=(Content(role="user", parts=(Part.from_text("hi"),)),))


class _Started:
    def __init__(self, scope: CancelScope, gate: threading.Event) -> None:
        self._scope = scope
        self._gate = gate
        self.cancels = 0

    def cancel(self) -> None:
        self.cancels += 1
        self._scope.cancel()
        self._gate.set()  # wakes the "blocked read"


class RecordedTransport:
    """Replays ``pieces`` as the body of every attempt; after ``hold_after`` pieces it waits."""

    limits = TransportLimits(1)
    timer_scheduler: rx_abc.SchedulerBase | None = None

    def __init__(self, pieces: list[bytes], *, hold_after: int | None = None) -> None:
        self._pieces = pieces
        self._hold_after = hold_after
        self.exchanges: list[Any] = []
        self.started: list[_Started] = []
        self.ended = threading.Event()
        self.delivered_after_cancel = 0

    def scheduler_of(self, scheduler: rx_abc.SchedulerBase | None) -> None:
        if scheduler is not None:
            raise ConfigurationError("this transport runs on its own threads")

    def start(self, sink: AttemptSink, scope: CancelScope, *, scheduler: Any = None) -> _Started:
        gate = threading.Event()
        started = _Started(scope, gate)
        self.started.append(started)

        def run() -> None:
            try:
                exchange = sink.exchange()
                self.exchanges.append(exchange)
                ended = False
                for number, piece in enumerate(self._pieces):
                    if number == self._hold_after:
                        gate.wait(TIMEOUT)
                    if scope.cancelled:
                        raise rxllm.TransportError("cancelled")
                    if sink.on_body(piece):
                        ended = True
                        break
                sink.on_body_end(ended)
            except Exception as exc:
                sink.on_error(exc)
            else:
                sink.on_completed()
            finally:
                self.ended.set()

        threading.Thread(target=run, daemon=True).start()
        return started

    def close(self) -> None:
        pass


BODY = [
    openai_chunk({"role": "assistant", "content": "Hel"}),
    openai_chunk({"content": "lo"}),
    openai_chunk({}, finish="stop"),
    b"data: [DONE]\n\n",
]


def _collect(source: reactivex.Observable[Any]) -> tuple[list[Any], list[Exception]]:
    items: list[Any] = []
    errors: list[Exception] = []
    done = threading.Event()

    def on_error(error: Exception) -> None:
        errors.append(error)
        done.set()

    source.subscribe(items.append, on_error, done.set)
    assert done.wait(TIMEOUT)
    return items, errors


def test_a_custom_transport_streams_partials_then_one_final() -> None:
    transport = RecordedTransport(BODY)
    model = OpenAiChatModel("gpt-test", base_url="http://127.0.0.1:9/v1", api_key="sk-x", transport=transport)
    items, errors = _collect(model.generate_content(REQUEST, stream=True))
    assert errors == []
    assert [r.text() for r in items] == ["Hel", "lo", "Hello"]
    assert items[-1].partial is not True
    (exchange,) = transport.exchanges
    assert exchange.stream and exchange.provider == "openai" and exchange.attempt == 1
    assert exchange.request.url == "http://127.0.0.1:9/v1/chat/completions"


def test_a_custom_transport_gets_a_fresh_sink_per_subscription() -> None:
    transport = RecordedTransport(BODY)
    model = OpenAiChatModel("gpt-test", base_url="http://127.0.0.1:9/v1", api_key="sk-x", transport=transport)
    call = model.generate_content(REQUEST, stream=True)
    first, _ = _collect(call)
    second, _ = _collect(call)
    assert first[-1].text() == second[-1].text() == "Hello"  # the second aggregate starts from nothing
    assert len(transport.exchanges) == 2


def test_disposing_cancels_the_custom_transports_attempt_and_nothing_more_is_delivered() -> None:
    transport = RecordedTransport(BODY, hold_after=1)
    model = OpenAiChatModel("gpt-test", base_url="http://127.0.0.1:9/v1", api_key="sk-x", transport=transport)
    items: list[Any] = []
    first = threading.Event()
    ends: list[Any] = []

    def on_next(item: Any) -> None:
        items.append(item)
        first.set()

    subscription = model.generate_content(REQUEST, stream=True).subscribe(
        on_next, ends.append, lambda: ends.append("completed")
    )
    assert first.wait(TIMEOUT)
    subscription.dispose()
    assert transport.ended.wait(TIMEOUT)
    assert [started.cancels for started in transport.started] == [1]
    assert [r.text() for r in items] == ["Hel"]
    assert ends == []  # the transport's error after the cancel never reaches the subscriber


def test_a_custom_transport_refusing_a_scheduler_fails_when_the_model_is_built() -> None:
    with pytest.raises(ConfigurationError, match="own threads"):
        OpenAiChatModel("gpt-test", base_url="http://127.0.0.1:9/v1", api_key="sk-x",
                        transport=RecordedTransport(BODY), scheduler=reactivex.scheduler.ImmediateScheduler())


def test_aclose_of_a_transport_on_its_own_loop_stops_the_loop_and_closes_its_connections() -> None:
    import asyncio

    from rxllm import AsyncHttpTransport
    from rxllm.testing import StubResponse, StubServer

    with StubServer([StubResponse.sse(BODY)]) as server:
        transport = AsyncHttpTransport()
        model = OpenAiChatModel("gpt-test", base_url=f"{server.url}/v1", api_key="sk-x", transport=transport)
        items, errors = _collect(model.generate_content(REQUEST, stream=True))
        assert errors == [] and items[-1].text() == "Hello"
        loop = transport.loop
        thread = transport._thread
        assert thread is not None and thread.is_alive()
        assert server.connections[0].closed_at is None  # kept alive in the pool

        asyncio.run(transport.aclose())

        assert server.connections[0].wait_closed_by_client(timeout=TIMEOUT)
        assert not thread.is_alive() and loop.is_closed()
        transport.close()  # a no-op now
        assert transport._thread is None
