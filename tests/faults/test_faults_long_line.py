"""A 10 MB line with no newline: a clear :class:`rxllm.LineTooLongError` at the cap, over the real transport.

The server sends the line and then *holds the connection open*: the error must come as soon as
the cap is passed, not when (if ever) the line ends. The client then closes the connection (the
server sees it) and nothing is retried once a partial was shown. Both transports.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from faults_support import REQUEST, TIMEOUT, TRANSPORT_KINDS, Recorder, Transport, make_transport
from wire import OPENAI, WIRES, Wire

from rxllm import LineTooLongError, RetryPolicy
from rxllm.testing import Hold, StubResponse, StubServer

MB = 1024 * 1024
DEFAULT_CAP = 8 * MB  # rxllm's documented default (SseChatModel max_line_bytes)
PIECE = 64 * 1024


def long_line(prefix: bytes, size: int) -> list[bytes]:
    """``prefix`` then ``x`` up to ``size`` bytes, no line end, in 64 KiB HTTP chunks."""
    line = prefix + b"x" * (size - len(prefix))
    return [line[i : i + PIECE] for i in range(0, len(line), PIECE)]


def run_against(
    server: StubServer, model_options: dict[str, object], wire: Wire, *, stream: list[bytes]
) -> tuple[Recorder, float]:
    release = threading.Event()
    server.enqueue(StubResponse(body=[*stream, Hold(release, timeout=30.0)]))
    recorder = Recorder()
    started = time.monotonic()
    try:
        recorder.subscribe(wire.model(server.url, **model_options).generate_content(REQUEST, stream=True))
        recorder.wait("a stream with an endless line", timeout=3 * TIMEOUT)
        connection = server.connections[-1]
        assert connection.wait_closed_by_client(TIMEOUT), "the client kept the connection after the error"
    finally:
        release.set()
    return recorder, time.monotonic() - started


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_a_10_mb_data_line_fails_at_the_default_8_mib_cap_while_the_server_holds(kind: str) -> None:
    transport = make_transport(kind, streams=2, read_timeout=30.0)
    try:
        with StubServer() as server:
            stream = [*OPENAI.stream("Hello")[:2], *long_line(b"data: ", 10 * MB)]
            recorder, elapsed = run_against(server, {"transport": transport}, OPENAI, stream=stream)
    finally:
        transport.close()
    assert [r.text() for r in recorder.items] == ["Hello"] and recorder.items[0].partial
    (error,) = recorder.errors
    assert isinstance(error, LineTooLongError), f"{type(error).__name__}: {error}"
    assert str(DEFAULT_CAP) in str(error), str(error)
    assert len(server.requests) == 1, "retried after a partial was shown"
    print(f"\n{kind}: 10 MB line, default cap: LineTooLongError after {elapsed:.2f}s: {error}")


@pytest.fixture(params=TRANSPORT_KINDS)
def transport(request: pytest.FixtureRequest) -> Iterator[Transport]:
    transport = make_transport(request.param, streams=2, read_timeout=30.0)
    try:
        yield transport
    finally:
        transport.close()


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.name)
@pytest.mark.parametrize(
    "prefix", [b"data: ", b": comment ", b"event: ", b""], ids=["data", "comment", "event", "bare"]
)
def test_an_endless_line_fails_at_a_lower_cap_for_every_provider(
    wire: Wire, prefix: bytes, transport: Transport
) -> None:
    cap = 64 * 1024
    options = {"max_line_bytes": cap, "retry_policy": RetryPolicy.never(), "transport": transport}
    with StubServer() as server:
        recorder, _ = run_against(server, options, wire, stream=long_line(prefix, 1 * MB))
    assert recorder.items == []
    (error,) = recorder.errors
    assert isinstance(error, LineTooLongError), f"{type(error).__name__}: {error}"
    assert str(cap) in str(error)


def test_a_line_just_under_the_cap_is_not_an_error() -> None:
    cap = 64 * 1024
    events = OPENAI.stream("x" * (cap - 300), "!")
    assert all(len(e) < cap for e in events)
    with StubServer([StubResponse(body=events)]) as server:
        recorder = Recorder()
        recorder.subscribe(OPENAI.model(server.url, max_line_bytes=cap).generate_content(REQUEST, stream=True))
        recorder.wait("a stream with long but capped lines")
    assert recorder.completed and recorder.items[-1].text() == "x" * (cap - 300) + "!"
