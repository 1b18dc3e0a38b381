"""The service over an ``SseChatModel``: the model builds the service's own events (the private
``EventMakers`` seam), through the fused events reader, with tools scheduled straight onto a plain
pool. Pinned here: the events are those of the path through the model's own ``stream_events``
(same sequences, errors, retries), disposing mid-stream closes the connection, and the direct path
is the one taken.

The path through ``stream_events`` is forced with a subclass whose ``stream_events`` is its own
(calling ``SseChatModel``'s): the service must then take the model events and convert them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest
from reactivex import operators as ops
from reactivex.scheduler import ImmediateScheduler, ThreadPoolScheduler
from telemetry_support import Telemetry, telemetry  # noqa: F401 (the fixture)
from wire import WIRES, Wire

from rxllm import (
    Chunk,
    HttpTransport,
    LlmRequest,
    LlmResponse,
    RetryPolicy,
    SseChatModel,
    StreamInterruptedError,
    ToolCallFragment,
)
from rxllm._models import aggregation, sse_chat_model
from rxllm._models.model_stream import MODEL_EVENTS, ModelStreamEvent
from rxllm.service import AiService
from rxllm.service import _interaction as interaction
from rxllm.testing import Disconnect, Hold, StubResponse, StubServer, ToolCallScript, sse_turn

from .support import WAIT, Recorder


def get_order(order_id: str) -> dict[str, Any]:
    """Look an order up.

    Args:
        order_id: The order's id.
    """
    return {"order_id": order_id, "status": "shipped"}


def _own_events_class(model: SseChatModel) -> type[SseChatModel]:
    """A subclass of ``model``'s class whose ``stream_events`` is its own (the same events)."""

    class OwnEvents(type(model)):  # type: ignore[misc,valid-type]
        def stream_events(self, llm_request: LlmRequest) -> Any:
            return super().stream_events(llm_request)

    return OwnEvents


def _turn(wire: Wire) -> tuple[StubResponse, StubResponse]:
    call = ToolCallScript("call_1" if wire.name != "gemini" else None, "get_order", ['{"order_', 'id": "A17"}'])
    return (
        StubResponse(body=sse_turn(wire.protocol, text=["Let me look ", "that up."], tool_calls=[call])),
        StubResponse(body=sse_turn(wire.protocol, text=["Order A17 ", "shipped ", "Tuesday."])),
    )


@contextmanager
def _models(wire: Wire, server: StubServer, **options: Any) -> Iterator[tuple[SseChatModel, SseChatModel]]:
    """The wire's model on the server, and the same model through its own ``stream_events``."""
    transport = HttpTransport(max_concurrent_streams=4, connect_timeout=5.0, read_timeout=WAIT)
    options = {"transport": transport, "retry_policy": RetryPolicy.never(), **options}
    try:
        direct = wire.model(server.url, **options)
        own = _own_events_class(direct)
        converted = wire.make(server.url, **options)
        converted.__class__ = own
        yield direct, converted
    finally:
        transport.close()


_GENERATED = re.compile(r"adk-[0-9a-f-]{36}")


def _normalized(events: list[Any]) -> list[str]:
    """The events' reprs, generated call ids made alike (each run generates its own)."""
    return [_GENERATED.sub("adk-<id>", repr(event)) for event in events]


def _run(model: SseChatModel, **service_options: Any) -> list[Any]:
    service = AiService(model, tools=[get_order], tool_scheduler=ImmediateScheduler(), **service_options)
    return list(service.stream("Where is order A17?").pipe(ops.to_list()).run())


def _shout(response: LlmResponse) -> str:
    return response.text().upper()


@pytest.mark.parametrize("guarded", [False, True], ids=["plain", "guarded"])
@pytest.mark.parametrize("wire", WIRES, ids=lambda wire: wire.name)
def test_the_events_equal_those_through_the_models_own_stream_events(wire: Wire, guarded: bool) -> None:
    options: dict[str, Any] = {"output_guardrails": [_shout]} if guarded else {}
    with StubServer([*_turn(wire), *_turn(wire)]) as server, _models(wire, server) as (direct, converted):
        assert interaction._route(direct) is interaction._MADE
        assert interaction._route(converted) is interaction._OWN
        made = _run(direct, **options)
        through = _run(converted, **options)
    assert _normalized(made) == _normalized(through)
    kinds = [event.kind for event in made]
    expected = ["complete_tool_call", "before_tool_execution", "after_tool_execution", "intermediate_response",
                "final_response"]
    assert [kind for kind in kinds if kind in expected] == expected
    assert ("partial_response" in kinds) is not guarded
    assert "partial_tool_call" in kinds or wire.name == "gemini"  # (Gemini sends each call whole)
    final = made[-1]
    assert final.response.text() == ("ORDER A17 SHIPPED TUESDAY." if guarded else "Order A17 shipped Tuesday.")
    assert final.total_usage_metadata is not None and final.total_usage_metadata.total_token_count == 40
    assert all(getattr(event, "response", None) is None or event.kind != "partial_response" for event in made)


@pytest.mark.parametrize("wire", WIRES, ids=lambda wire: wire.name)
def test_an_error_mid_stream_is_the_same_error_after_the_same_events(wire: Wire) -> None:
    body = [*wire.stream("Order A17 ", "shipped")[: wire.prelude_events + 2], Disconnect()]
    outcomes = []
    with StubServer([StubResponse(body=body), StubResponse(body=body)]) as server, \
            _models(wire, server) as (direct, converted):
        for model in (direct, converted):
            recorder = Recorder()
            AiService(model, tools=[get_order], tool_scheduler=ImmediateScheduler()).stream("hi").subscribe(recorder)
            recorder.wait()
            outcomes.append((_normalized(recorder.events), type(recorder.error), str(recorder.error)))
    assert outcomes[0] == outcomes[1]
    events, error_type, _ = outcomes[0]
    assert error_type is StreamInterruptedError
    assert events == ["PartialResponseEvent(text='Order A17 ', kind='partial_response')",
                      "PartialResponseEvent(text='shipped', kind='partial_response')"]


@pytest.mark.parametrize("guarded", [False, True], ids=["plain", "guarded"])
def test_retries_only_before_the_first_event_as_through_stream_events(guarded: bool) -> None:
    """A failure before anything arrived is retried; after the first text it is not, even when a
    guarded service shows no text (the text still counted as the model's first item)."""
    wire = WIRES[0]
    early = StubResponse(body=[Disconnect()])
    late = StubResponse(body=[*wire.stream("Order A17 ", "shipped")[: wire.prelude_events + 1], Disconnect()])
    whole = wire.response("Order A17 shipped.")
    options: dict[str, Any] = {"output_guardrails": [_shout]} if guarded else {}
    results = []
    policy = RetryPolicy(max_attempts=3, base_delay=0.0, jitter="none")
    with StubServer([early, whole, late, early, whole, late]) as server, \
            _models(wire, server, retry_policy=policy) as (direct, converted):
        for model in (direct, converted):
            service = AiService(model, tool_scheduler=ImmediateScheduler(), **options)
            recovered = list(service.stream("hi").pipe(ops.to_list()).run())
            recorder = Recorder()
            service.stream("hi").subscribe(recorder)
            recorder.wait()
            results.append((_normalized(recovered), _normalized(recorder.events), type(recorder.error)))
        requests = len(server.requests)
    assert results[0] == results[1]
    assert results[0][2] is StreamInterruptedError
    assert requests == 6  # per model: 2 attempts (retried), then 1 (not retried after the first text)


@pytest.mark.parametrize("wire", WIRES, ids=lambda wire: wire.name)
def test_disposing_mid_stream_closes_the_connection(wire: Wire) -> None:
    release = threading.Event()
    body = [*wire.stream("Order A17 ", "shipped")[: wire.prelude_events + 1], Hold(release),
            *wire.stream("Order A17 ", "shipped")[wire.prelude_events + 1:]]
    try:
        with StubServer([StubResponse(body=body)]) as server, _models(wire, server) as (direct, _):
            first = threading.Event()
            recorder = Recorder(lambda event: first.set())
            subscription = AiService(direct, tools=[get_order]).stream("hi").subscribe(recorder)
            assert first.wait(WAIT)
            subscription.dispose()
            connection = server.wait_for_connection(1, WAIT)
            assert connection is not None
            assert connection.wait_closed_by_client(timeout=WAIT)  # the server saw the client close
            assert not recorder.done.is_set()  # nothing more, not even a terminal signal
            assert recorder.kinds() == ["partial_response"]
    finally:
        release.set()


def test_the_direct_path_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over an SseChatModel: the model's own events are never built nor converted, the fused
    reader reads the body, no partial response is built, and tools go to the pool's executor."""
    counts = {"made": 0, "fused": 0, "schedule_cancellable": 0}

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the path through the model's events was taken")

    made_events = SseChatModel._made_events
    fused_feed = sse_chat_model._EventsReader.feed
    schedule_cancellable = interaction.schedule_cancellable

    def counting(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return function(*args, **kwargs)

        return counted

    monkeypatch.setattr(SseChatModel, "_made_events", counting("made", made_events))
    monkeypatch.setattr(sse_chat_model._EventsReader, "feed", counting("fused", fused_feed))
    monkeypatch.setattr(interaction, "schedule_cancellable", counting("schedule_cancellable", schedule_cancellable))
    monkeypatch.setattr(interaction._Interaction, "_on_model_event", forbidden)
    monkeypatch.setattr(sse_chat_model, "_emit_events", forbidden)
    monkeypatch.setattr(aggregation, "build_partial", forbidden)
    monkeypatch.setattr(ThreadPoolScheduler, "schedule", forbidden)
    wire = WIRES[0]
    pool = ThreadPoolScheduler(1)
    try:
        with StubServer(list(_turn(wire))) as server, _models(wire, server) as (direct, _):
            events = list(AiService(direct, tools=[get_order], tool_scheduler=pool).stream("hi")
                          .pipe(ops.to_list()).run())
    finally:
        pool.executor.shutdown()
    assert events[-1].response.text() == "Order A17 shipped Tuesday."
    assert counts["made"] == 2
    assert counts["fused"] >= 2
    assert counts["schedule_cancellable"] == 1  # the tool's work


def test_the_route_is_the_class_that_defines_stream_events() -> None:
    with StubServer() as server, _models(WIRES[0], server) as (direct, converted):
        assert interaction._route(direct) is interaction._MADE
        assert interaction._route(converted) is interaction._OWN

        class Plain(type(direct)):  # type: ignore[misc,valid-type]
            pass

        plain = WIRES[0].make(server.url)
        plain.__class__ = Plain
        assert interaction._route(plain) is interaction._MADE
        plain.stream_events = lambda request: direct.stream_events(request)  # type: ignore[method-assign]
        assert interaction._route(plain) is interaction._OWN


def test_work_queued_on_a_busy_pool_never_runs_after_dispose() -> None:
    """The tool's work waits for the pool's one worker; disposing meanwhile means it never runs."""
    wire = WIRES[0]
    ran: list[str] = []

    def lookup(order_id: str) -> str:
        """Look an order up.

        Args:
            order_id: The order's id.
        """
        ran.append(order_id)
        return "shipped"

    lookup.__name__ = "get_order"
    executor = ThreadPoolExecutor(1)
    pool = ThreadPoolScheduler(1)
    pool.executor = executor
    busy, release = threading.Event(), threading.Event()
    executor.submit(lambda: (busy.set(), release.wait(WAIT)))
    assert busy.wait(WAIT)
    try:
        with StubServer(list(_turn(wire))) as server, _models(wire, server) as (direct, _):
            called = threading.Event()
            recorder = Recorder(lambda event: called.set() if event.kind == "complete_tool_call" else None)
            subscription = AiService(direct, tools=[lookup], tool_scheduler=pool).stream("hi").subscribe(recorder)
            assert called.wait(WAIT)
            subscription.dispose()
            release.set()
            executor.shutdown(wait=True)
    finally:
        release.set()
        executor.shutdown(wait=True)
    assert ran == []


# -- the model layer: the fused events reader against the generic path -------------------------------


class _ListParser:
    """A parser that hands out scripted chunks, one per SSE event (whatever its data)."""

    def __init__(self, chunks: list[Chunk]) -> None:
        self._chunks = iter(chunks)

    def parse(self, event: Any) -> Chunk | None:
        return next(self._chunks, None)

    def parse_response(self, body: bytes) -> list[Chunk]:
        return []


_MIXED = [
    Chunk(thought_delta="Hmm, "),
    Chunk(thought_delta="the order.", text_delta="Let me "),
    Chunk(text_delta="look."),
    Chunk(text_delta=""),
    Chunk(tool_call_fragments=(ToolCallFragment(0, "c0", "get_order", '{"order_id": '),)),
    Chunk(text_delta="and", tool_call_fragments=(ToolCallFragment(0, None, None, '"A17"}'),)),
    Chunk(tool_call_fragments=(ToolCallFragment(1, "c1", "get_order", '{"order_id": "B2"}', complete=True),)),
    Chunk(tool_call_fragments=(ToolCallFragment(2, "c2", "get_order", '{"order_id": '),)),
    Chunk(end_of_stream=True),
]


def _read(chunks: list[Chunk], fused: bool) -> list[ModelStreamEvent]:
    from rxllm._transports.base import CancelScope

    got: list[Any] = []

    class Sink:
        def on_next(self, value: Any) -> None:
            got.append(value)

        def on_error(self, error: Exception) -> None:
            raise error

        def on_completed(self) -> None:
            pass

    observer = sse_chat_model._ScopedObserver(Sink(), CancelScope())  # type: ignore[arg-type]
    aggregator = aggregation.StreamAggregator()
    parser = _ListParser(chunks)
    body = b"".join(b"data: %d\n\n" % n for n in range(len(chunks)))
    if fused:
        reader: Any = sse_chat_model._EventsReader(parser, aggregator, observer, 1 << 20, MODEL_EVENTS)
    else:
        on_chunk = sse_chat_model._on_chunk(sse_chat_model._emit_events, aggregator, observer, None)
        reader = sse_chat_model.SseReader(parser, on_chunk)
    assert reader.feed(body[:9]) is False
    assert reader.feed(body[9:]) is True
    for index, call in aggregator.take_completed_calls(all_remaining=True):
        got.append(MODEL_EVENTS.tool_call_complete(index, call))
    return got


def test_the_fused_reader_emits_the_generic_paths_events() -> None:
    fused = _read(_MIXED, fused=True)
    assert _normalized(fused) == _normalized(_read(_MIXED, fused=False))
    assert [event.kind for event in fused] == [
        "thought_delta", "thought_delta", "text_delta", "text_delta", "tool_call_delta", "text_delta",
        "tool_call_delta", "tool_call_delta", "tool_call_complete", "tool_call_complete", "tool_call_delta",
        # (call 2's arguments never parse: it is not reported)
    ]


def test_the_absorber_builds_no_partial_and_the_same_final() -> None:
    absorbing, accepting = aggregation.StreamAggregator(), aggregation.StreamAggregator()
    absorb = absorbing.absorber()
    for chunk in [*_MIXED[:7], _MIXED[-1]]:  # (without call 2, whose arguments never parse)
        assert absorb(chunk) is None
        accepting.accept_one(chunk)
    assert absorbing.has_emitted and accepting.has_emitted
    assert _normalized([absorbing.finish()]) == _normalized([accepting.finish()])


@pytest.mark.parametrize("wire", WIRES, ids=lambda wire: wire.name)
def test_traced_the_events_are_the_same(wire: Wire, telemetry: Telemetry, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811 (the fixture)
    """With telemetry on, an attempt reads through the generic (traced) path, with the same makers."""

    def forbidden(*args: Any) -> Any:
        raise AssertionError("the untraced reader read a traced attempt")

    monkeypatch.setattr(sse_chat_model._EventsReader, "feed", forbidden)
    with StubServer([*_turn(wire), *_turn(wire)]) as server, _models(wire, server) as (direct, converted):
        traced = _run(direct)
        through = _run(converted)
    assert _normalized(traced) == _normalized(through)
    assert [span.name for span in telemetry.spans(8)].count("invoke_agent AiService") == 2
