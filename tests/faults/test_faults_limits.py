"""Bounded memory, CPU and time for any body, on both transports.

Bombs (``gzip, gzip`` bodies that inflate to hundreds of MiB, a non-streamed body past the size
cap, gzip-compressed SSE comments), trickles (one byte at a time) and stalls (before and after
the headers) against a real loopback server. A bomb's memory is measured as the peak RSS of a
child process (``ru_maxrss``), with a generous bound.
"""

from __future__ import annotations

import functools
import gzip
import json
import subprocess
import sys
import textwrap
import threading
import zlib
from pathlib import Path

import pytest
from faults_support import REQUEST, TIMEOUT, TRANSPORT_KINDS, Recorder, Transport
from wire import OPENAI

from rxllm import (
    AsyncHttpTransport,
    ConfigurationError,
    HttpStatusError,
    HttpTransport,
    ProtocolError,
    ResponseTooLargeError,
    RetryPolicy,
    StreamTimeoutError,
)
from rxllm.testing import Delay, Hold, StubResponse, StubServer

MB = 1024 * 1024
ROOT = Path(__file__).resolve().parents[2]


def transport_of(kind: str, **limits: object) -> Transport:
    cls = HttpTransport if kind == "threads" else AsyncHttpTransport
    return cls(max_concurrent_streams=4, **limits)  # type: ignore[arg-type]


@pytest.fixture(params=TRANSPORT_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def run(transport: Transport, response: StubResponse, *, stream: bool = True, policy: RetryPolicy | None = None,
        responses: int = 1) -> tuple[Recorder, StubServer]:
    with StubServer([response] * responses) as server:
        recorder = Recorder()
        model = OPENAI.model(server.url, transport=transport, retry_policy=policy or RetryPolicy(base_delay=0.01))
        recorder.subscribe(model.generate_content(REQUEST, stream=stream))
        recorder.wait("a bounded call", timeout=6 * TIMEOUT)
    return recorder, server


@functools.cache
def inflating(size: int, layers: int = 1, unit: bytes = b"x") -> bytes:
    """``size`` bytes of ``unit`` repeated, gzip-compressed ``layers`` times, built without holding them."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = unit * (MB // len(unit))
    parts = [compressor.compress(block) for _ in range(size // len(block))]
    data = b"".join(parts) + compressor.flush()
    for _ in range(layers - 1):
        data = gzip.compress(data)
    return data


# --- content decoding stays correct -----------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "gzip, gzip", "x-gzip"])
def test_a_compressed_stream_decodes_to_the_same_partials_and_final(kind: str, encoding: str) -> None:
    body = b"".join(OPENAI.stream("Hello", " there"))
    for layer in reversed([e.strip() for e in encoding.split(",")]):
        body = zlib.compress(body) if layer == "deflate" else gzip.compress(body)
    transport = transport_of(kind)
    try:
        response = StubResponse.raw(body, split_at=[3, 10, len(body) // 2], headers={"content-encoding": encoding})
        recorder, server = run(transport, response)
    finally:
        transport.close()
    assert recorder.errors == [] and recorder.completed
    assert [r.text() for r in recorder.items] == ["Hello", " there", "Hello there"]
    assert server.requests[0].headers.get("accept-encoding") == "gzip, deflate"


def test_an_encoding_rxllm_does_not_decode_is_a_protocol_error_not_retried(kind: str) -> None:
    transport = transport_of(kind)
    try:
        response = StubResponse(body=[b"\x00\x01garbage"], headers={"content-encoding": "br"})
        recorder, server = run(transport, response, responses=3)
    finally:
        transport.close()
    (error,) = recorder.errors
    assert isinstance(error, ProtocolError) and "br" in str(error)
    assert len(server.requests) == 1


def test_a_gzip_error_body_is_decoded_for_the_message(kind: str) -> None:
    body = gzip.compress(json.dumps({"error": {"message": "model overloaded, zipped"}}).encode())
    transport = transport_of(kind)
    try:
        response = StubResponse(status=400, body=[body], headers={"content-encoding": "gzip"}, chunked=False)
        recorder, _ = run(transport, response)
    finally:
        transport.close()
    (error,) = recorder.errors
    assert isinstance(error, HttpStatusError) and error.provider_message == "model overloaded, zipped"


# --- size caps ---------------------------------------------------------------------------------------


def test_a_double_gzip_bomb_fails_at_the_line_cap_as_bytes_are_produced(kind: str) -> None:
    # 512 MiB of "x" without a line end, gzip'd twice: ~2 KB on the wire.
    bomb = inflating(512 * MB, layers=2)
    assert len(bomb) < 64 * 1024
    transport = transport_of(kind)
    try:
        response = StubResponse(body=[bomb], headers={"content-encoding": "gzip, gzip"})
        recorder, server = run(transport, response, responses=3)
    finally:
        transport.close()
    (error,) = recorder.errors
    assert type(error).__name__ == "LineTooLongError", f"{type(error).__name__}: {error}"
    assert len(server.requests) == 1


def test_compressed_comments_count_toward_the_stream_cap_and_are_not_retried(kind: str) -> None:
    # SSE comment lines (ignored by the decoder) inflating to 64 MiB; the stream cap is 4 MiB.
    comments = inflating(64 * MB, unit=b": keep-alive padding\n")
    transport = transport_of(kind, max_stream_bytes=4 * MB)
    try:
        response = StubResponse(body=[comments], headers={"content-encoding": "gzip"})
        recorder, server = run(transport, response, responses=3)
    finally:
        transport.close()
    (error,) = recorder.errors
    assert isinstance(error, ResponseTooLargeError) and error.limit_bytes == 4 * MB, error
    assert not error.retryable and len(server.requests) == 1


def test_plain_comments_count_toward_the_stream_cap_and_are_not_retried(kind: str) -> None:
    # An uncompressed body (which the asyncio transport reads in its attempt's own loop) past the cap,
    # in many reads: the cap fires as it is passed, and the connection is closed, not kept.
    line = b": keep-alive padding\n" * 4096
    transport = transport_of(kind, max_stream_bytes=1 * MB)
    try:
        with StubServer([StubResponse(body=[line] * 64, chunked=True)] * 3) as server:
            recorder = Recorder()
            model = OPENAI.model(server.url, transport=transport, retry_policy=RetryPolicy(base_delay=0.01))
            recorder.subscribe(model.generate_content(REQUEST, stream=True))
            recorder.wait("a bounded call", timeout=6 * TIMEOUT)
            # (asked while the server runs: the error may reach us before the transport's close does,
            # and a server that closes first sees its own close, not the client's)
            assert server.connections[0].wait_closed_by_client(TIMEOUT), "the connection past the cap was kept open"
    finally:
        transport.close()
    (error,) = recorder.errors
    assert isinstance(error, ResponseTooLargeError) and error.limit_bytes == 1 * MB, error
    assert not error.retryable and len(server.requests) == 1


@pytest.mark.parametrize("encoding", ["identity", "gzip"])
def test_a_non_streamed_body_past_max_response_bytes_is_a_typed_error_not_retried(kind: str, encoding: str) -> None:
    size = 3 * MB
    raw = b'{"id": "x", "padding": "' + b"y" * size + b'"}'
    body = gzip.compress(raw) if encoding == "gzip" else raw
    transport = transport_of(kind, max_response_bytes=1 * MB)
    try:
        headers = {"content-type": "application/json", "content-encoding": encoding}
        response = StubResponse(body=[body], headers=headers, chunked=False)
        recorder, server = run(transport, response, stream=False, responses=3)
    finally:
        transport.close()
    (error,) = recorder.errors
    assert isinstance(error, ResponseTooLargeError) and error.limit_bytes == 1 * MB
    assert len(server.requests) == 1


def test_limits_are_checked_when_the_transport_is_built() -> None:
    for bad in ({"total_timeout": 0}, {"first_byte_timeout": -1}, {"max_response_bytes": 0}, {"max_stream_bytes": 0},
                {"finish_grace": 0}):
        with pytest.raises(ConfigurationError):
            HttpTransport(**bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError):
            AsyncHttpTransport(**bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        HttpTransport(idle_thread_timeout=0)


_CHILD = textwrap.dedent(
    """
    import gzip, resource, sys, zlib
    sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests", sys.argv[1] + "/tests/faults"]
    from faults_support import REQUEST, Recorder
    from wire import OPENAI
    from rxllm import AsyncHttpTransport, HttpTransport, RetryPolicy
    from rxllm.testing import StubResponse, StubServer

    kind, shape = sys.argv[2], sys.argv[3]
    MB = 1024 * 1024
    compressor = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    unit = b"x" * MB if shape == "line" else (b'{"a": "' + b"y" * (MB - 9) + b'",')
    data = b"".join(compressor.compress(unit) for _ in range(512)) + compressor.flush()  # 512 MiB inflated
    encoding = "gzip"
    if shape == "line":
        data, encoding = gzip.compress(data), "gzip, gzip"
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    transport = (HttpTransport if kind == "threads" else AsyncHttpTransport)(max_concurrent_streams=2)
    headers = {"content-encoding": encoding, "content-type": "application/json"}
    with StubServer([StubResponse(body=[data], headers=headers, chunked=False)]) as server:
        recorder = Recorder()
        model = OPENAI.model(server.url, transport=transport, retry_policy=RetryPolicy.never())
        recorder.subscribe(model.generate_content(REQUEST, stream=shape == "line"))
        recorder.wait("bomb", timeout=120)
    transport.close()
    # ru_maxrss is inherited across fork/exec on Linux (a child of a 300 MB pytest reports 300 MB
    # from its first instruction); VmHWM is this process image's own peak. Report the smaller.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open("/proc/self/status") as status:
        hwm = next((int(line.split()[1]) for line in status if line.startswith("VmHWM:")), peak)
    error = type(recorder.errors[0]).__name__ if recorder.errors else "no error"
    print(error, baseline // 1024, min(peak, hwm) // 1024)
    """
)


@pytest.mark.parametrize("shape", ["line", "body"], ids=["streamed-double-gzip", "non-streamed-gzip"])
def test_a_512_mib_bomb_keeps_a_child_process_under_200_mb(kind: str, shape: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(ROOT), kind, shape],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    error, baseline_mb, peak_mb = result.stdout.split()[-3:]
    assert error == ("LineTooLongError" if shape == "line" else "ResponseTooLargeError"), result.stdout
    assert int(peak_mb) < 200, f"peak RSS {peak_mb} MB (baseline {baseline_mb} MB)"


# --- deadlines -----------------------------------------------------------------------------------------


def _trickle(seconds: int) -> list[object]:
    head = OPENAI.stream("x")[0]
    steps: list[object] = [head]
    for _ in range(seconds * 10):
        steps += [Delay(0.1), b":"]
    return steps


def test_a_one_byte_trickle_is_cut_by_the_total_timeout_and_not_retried(kind: str) -> None:
    transport = transport_of(kind, total_timeout=1.0, read_timeout=30.0)
    try:
        response = StubResponse(body=_trickle(30))  # type: ignore[arg-type]
        recorder, server = run(transport, response, responses=3)
    finally:
        transport.close()
    (error,) = recorder.errors
    assert isinstance(error, StreamTimeoutError), f"{type(error).__name__}: {error}"
    assert (error.limit, error.retryable) == ("total", False)
    assert "total_timeout=1.0s" in str(error) and "not retried" in str(error)
    assert len(server.requests) == 1


def test_silence_after_the_headers_is_the_read_timeout_and_is_not_retried(kind: str) -> None:
    release = threading.Event()
    transport = transport_of(kind, read_timeout=0.5, first_byte_timeout=30.0)
    try:
        response = StubResponse(body=[OPENAI.stream("x")[0], Hold(release, timeout=30.0)])
        recorder, server = run(transport, response, responses=3)
    finally:
        release.set()
        transport.close()
    (error,) = recorder.errors
    assert isinstance(error, StreamTimeoutError), f"{type(error).__name__}: {error}"
    assert (error.limit, error.retryable) == ("read", False)
    assert len(server.requests) == 1


def test_no_headers_is_the_first_byte_timeout_distinct_from_the_read_timeout(kind: str) -> None:
    release = threading.Event()
    transport = transport_of(kind, read_timeout=30.0, first_byte_timeout=0.5)
    try:
        response = StubResponse(body=OPENAI.stream("x"), before_headers=[Hold(release, timeout=30.0)])
        recorder, server = run(transport, response, responses=3)
    finally:
        release.set()
        transport.close()
    (error,) = recorder.errors
    assert isinstance(error, StreamTimeoutError), f"{type(error).__name__}: {error}"
    assert (error.limit, error.retryable) == ("first_byte", False)
    assert "first_byte_timeout=0.5s" in str(error)
    assert len(server.requests) == 1


def test_a_slow_but_steady_stream_within_the_limits_completes(kind: str) -> None:
    transport = transport_of(kind, total_timeout=30.0, read_timeout=5.0)
    try:
        steps = [step for event in OPENAI.stream("a", "b", "c") for step in (Delay(0.05), event)]
        recorder, _ = run(transport, StubResponse(body=steps))
    finally:
        transport.close()
    assert recorder.completed and recorder.items[-1].text() == "abc"
