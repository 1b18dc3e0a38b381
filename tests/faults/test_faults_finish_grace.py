"""A body that stalls or breaks off after the turn's finish and usage still ends the turn whole.

Gemini's stream has no end marker, and a proxy may swallow OpenAI's ``[DONE]`` or Anthropic's
``message_stop``: once the finish reason and the usage have arrived, both transports wait
``finish_grace`` seconds for the body's end, then end the turn with its complete final and close
the connection (the server sees the close) instead of waiting for the read timeout (here
:data:`~faults_support.TIMEOUT`, long enough that a timeout would fail the test first) or raising
an interrupted-stream error.
"""

from __future__ import annotations

import logging
import threading

import pytest
from faults_support import REQUEST, TIMEOUT, TRANSPORT_KINDS, Recorder
from wire import ANTHROPIC, GEMINI, OPENAI, Wire

from rxllm import AsyncHttpTransport, HttpTransport, LlmResponse, RetryPolicy, StreamTimeoutError
from rxllm.testing import Disconnect, Hold, StubResponse, StubServer

WIRES = [OPENAI, ANTHROPIC, GEMINI]
GRACE = 0.1
_END_MARKERS = (b"data: [DONE]", b'"type":"message_stop"')


def _transport(kind: str, *, read_timeout: float = TIMEOUT,
               finish_grace: float = GRACE) -> HttpTransport | AsyncHttpTransport:
    kind_of = HttpTransport if kind == "threads" else AsyncHttpTransport
    return kind_of(max_concurrent_streams=4, read_timeout=read_timeout, finish_grace=finish_grace)


def _without_end_marker(wire: Wire) -> list[bytes]:
    return [event for event in wire.stream("Hallo ", "Welt") if not any(m in event for m in _END_MARKERS)]


def _call(wire: Wire, server: StubServer, transport: object) -> Recorder:
    model = wire.model(server.url, transport=transport, retry_policy=RetryPolicy.never())
    recorder = Recorder()
    recorder.subscribe(model.generate_content(REQUEST, stream=True))
    recorder.wait(f"{wire.name}: the turn")
    return recorder


def _final_of(recorder: Recorder) -> LlmResponse:
    assert recorder.completed and not recorder.errors, recorder.errors
    final: LlmResponse = recorder.items[-1]
    assert not final.partial and final.text() == "Hallo Welt"
    assert final.usage_metadata is not None and final.usage_metadata.total_token_count == 8
    return final


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.name)
@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_a_stall_after_the_finish_and_usage_ends_the_turn_after_the_grace(kind: str, wire: Wire) -> None:
    release = threading.Event()
    with StubServer([StubResponse(body=[*_without_end_marker(wire), Hold(release, timeout=TIMEOUT * 2)])]) as server:
        transport = _transport(kind)
        try:
            recorder = _call(wire, server, transport)
            _final_of(recorder)
            assert server.connections[0].wait_closed_by_client(TIMEOUT), "the stalled connection was kept open"
        finally:
            release.set()
            transport.close()


class _GraceStarted(logging.Handler):
    """Sets ``event`` when a transport logs that it waits for the body's end (the usage was read)."""

    def __init__(self, event: threading.Event) -> None:
        super().__init__(logging.DEBUG)
        self.event = event

    def emit(self, record: logging.LogRecord) -> None:
        if "waiting up to" in record.getMessage():
            self.event.set()


@pytest.mark.parametrize("reset", [True, False], ids=["reset", "fin"])
@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.name)
@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_a_cut_after_the_finish_and_usage_keeps_the_whole_turn(kind: str, wire: Wire, reset: bool) -> None:
    # The cut comes once the client has read the usage (a reset may discard bytes not yet read).
    release = threading.Event()
    steps = [*_without_end_marker(wire), Hold(release, timeout=TIMEOUT), Disconnect(reset=reset)]
    log = logging.getLogger("rxllm.http")
    handler, level = _GraceStarted(release), log.level
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        with StubServer([StubResponse(body=steps, chunked=True)]) as server:
            transport = _transport(kind, finish_grace=TIMEOUT)  # the cut, not the grace, ends the body
            try:
                _final_of(_call(wire, server, transport))
                assert release.is_set()
            finally:
                release.set()
                transport.close()
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_bytes_past_the_stream_cap_after_the_finish_and_usage_are_the_cap_error(kind: str) -> None:
    # the rest of the body is still counted against max_stream_bytes while the grace waits for its end
    padding = b": keep-alive padding\n" * 4096
    steps = [*_without_end_marker(OPENAI), *[padding] * 16]
    with StubServer([StubResponse(body=steps, chunked=True)]) as server:
        kind_of = HttpTransport if kind == "threads" else AsyncHttpTransport
        transport = kind_of(max_concurrent_streams=4, read_timeout=TIMEOUT, finish_grace=TIMEOUT,
                            max_stream_bytes=256 * 1024)
        try:
            recorder = _call(OPENAI, server, transport)
        finally:
            transport.close()
    (error,) = recorder.errors
    assert type(error).__name__ == "ResponseTooLargeError", f"{type(error).__name__}: {error}"


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_a_stall_after_the_finish_but_before_the_usage_still_times_out(kind: str) -> None:
    # the grace needs both: a finish chunk alone (OpenAI sends the usage after it) is no whole turn
    events = OPENAI.stream("Hallo ", "Welt")
    finish = next(i for i, e in enumerate(events) if b'"finish_reason":"stop"' in e)
    release = threading.Event()
    with StubServer([StubResponse(body=[*events[: finish + 1], Hold(release, timeout=TIMEOUT)])]) as server:
        transport = _transport(kind, read_timeout=GRACE * 3)
        try:
            recorder = _call(OPENAI, server, transport)
        finally:
            release.set()
            transport.close()
    (error,) = recorder.errors
    assert isinstance(error, StreamTimeoutError) and error.limit == "read", error
