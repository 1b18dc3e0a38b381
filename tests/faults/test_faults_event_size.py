"""One SSE event's size is capped, not only one line's: many short ``data:`` lines that never end
their event fail with :class:`rxllm.EventTooLargeError` at the decoder's event cap.

Unit cases run the pure decoder; the attack (about 1 MB of gzip on the wire that inflates to
512 MiB of ``data: ab`` lines without a blank line) runs over a real loopback server on both
transports, in a child process whose peak RSS is measured (``VmHWM``).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import pytest
from faults_support import REQUEST, TIMEOUT, TRANSPORT_KINDS, Recorder, make_transport
from wire import WIRES, Wire

from rxllm import EventTooLargeError, LineTooLongError, ProtocolError, RetryPolicy, SseDecoder, SseEvent
from rxllm.testing import StubResponse, StubServer

MB = 1024 * 1024
ROOT = Path(__file__).resolve().parents[2]


def test_the_event_cap_counts_every_data_line_of_one_event() -> None:
    decoder = SseDecoder(max_line_bytes=16, max_event_bytes=64)
    decoder.feed(b"data: 0123456789\n" * 5)  # 5 values of 10 bytes + 4 joining LFs = 54 bytes held
    with pytest.raises(EventTooLargeError, match="max_event_bytes=64"):
        decoder.feed(b"data: 0123456789\n")  # 65 bytes: past the cap, although every line is short


def test_an_event_at_the_cap_is_dispatched_and_the_count_starts_again() -> None:
    decoder = SseDecoder(max_line_bytes=16, max_event_bytes=21)
    events = decoder.feed(b"data: 0123456789\ndata: abcdefghij\n\n")  # 10 + 1 + 10 = 21 bytes
    assert events == [SseEvent(data="0123456789\nabcdefghij")]
    for _ in range(100):  # the held bytes are released at every dispatch
        assert decoder.feed(b"data: 0123456789\ndata: abcdefghij\n\n") == events


def test_the_event_name_and_the_unterminated_line_count_too() -> None:
    decoder = SseDecoder(max_line_bytes=64, max_event_bytes=40)
    decoder.feed(b"data: " + b"x" * 30 + b"\n")
    with pytest.raises(EventTooLargeError):
        decoder.feed(b"event: " + b"e" * 11 + b"\n")
    decoder = SseDecoder(max_line_bytes=64, max_event_bytes=40)
    decoder.feed(b"data: " + b"x" * 30 + b"\n")
    with pytest.raises(EventTooLargeError):
        decoder.feed(b"data: " + b"y" * 11)  # no line end yet: still held for this event


def test_comments_and_blank_events_hold_nothing() -> None:
    decoder = SseDecoder(max_line_bytes=16, max_event_bytes=16)
    assert decoder.feed(b": keep-alive\n" * 10_000 + b"\n" * 10_000) == []
    assert not decoder.has_pending


def test_the_default_event_cap_is_twice_the_line_cap() -> None:
    decoder = SseDecoder(max_line_bytes=8)
    decoder.feed(b"data: 12\n" * 5)  # 2 * 5 + 4 = 14 bytes held
    with pytest.raises(EventTooLargeError, match="max_event_bytes=16"):
        decoder.feed(b"data: 12\n")
    assert issubclass(EventTooLargeError, ProtocolError) and not issubclass(EventTooLargeError, LineTooLongError)


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.name)
def test_many_short_data_lines_fail_at_the_event_cap_over_a_real_socket(kind: str, wire: Wire) -> None:
    body = b"data: ab\n" * 50_000  # 450 KB (150 KB of data held), one event that never ends
    transport = make_transport(kind, streams=2, read_timeout=30.0)
    try:
        with StubServer([StubResponse(body=[body[i : i + 8192] for i in range(0, len(body), 8192)])]) as server:
            recorder = Recorder()
            model = wire.model(server.url, transport=transport, max_line_bytes=32 * 1024,
                               retry_policy=RetryPolicy(base_delay=0.01))
            recorder.subscribe(model.generate_content(REQUEST, stream=True))
            recorder.wait("an endless event", timeout=3 * TIMEOUT)
            assert server.connections[-1].wait_closed_by_client(TIMEOUT)
    finally:
        transport.close()
    (error,) = recorder.errors
    assert isinstance(error, EventTooLargeError), f"{type(error).__name__}: {error}"
    assert "max_event_bytes=65536" in str(error)
    assert len(server.requests) == 1, "a ProtocolError is not retried"


_CHILD = textwrap.dedent(
    """
    import sys
    sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests", sys.argv[1] + "/tests/faults"]
    from faults_support import REQUEST, Recorder
    from wire import OPENAI
    from rxllm import AsyncHttpTransport, HttpTransport, RetryPolicy
    from rxllm.testing import StubResponse, StubServer

    kind = sys.argv[2]
    with open(sys.argv[3], "rb") as body:
        data = body.read()
    transport = (HttpTransport if kind == "threads" else AsyncHttpTransport)(max_concurrent_streams=2)
    headers = {"content-encoding": "gzip", "content-type": "text/event-stream"}
    with StubServer([StubResponse(body=[data], headers=headers)]) as server:
        recorder = Recorder()
        model = OPENAI.model(server.url, transport=transport, retry_policy=RetryPolicy.never())
        recorder.subscribe(model.generate_content(REQUEST, stream=True))
        recorder.wait("many data lines", timeout=120)
    transport.close()
    with open("/proc/self/status") as status:
        hwm = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    error = type(recorder.errors[0]).__name__ if recorder.errors else "no error"
    print(error, len(data), hwm // 1024)
    """
)


@pytest.fixture(scope="module")
def gzip_of_data_lines(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~1 MB of gzip that inflates to 512 MiB of ``data: ab`` lines (one SSE event), made once."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    unit = b"data: ab\n" * (1024 * 1024 // 9)
    path = tmp_path_factory.mktemp("bomb") / "data-lines.gz"
    path.write_bytes(b"".join(compressor.compress(unit) for _ in range(512)) + compressor.flush())
    return path


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_a_1_mb_gzip_of_short_data_lines_stays_under_120_mb_in_a_child_process(
    kind: str, gzip_of_data_lines: Path
) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(ROOT), kind, str(gzip_of_data_lines)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    error, wire_bytes, peak_mb = result.stdout.split()[-3:]
    assert error == "EventTooLargeError", result.stdout
    assert int(wire_bytes) > 900_000
    assert int(peak_mb) < 120, f"peak RSS {peak_mb} MB for {wire_bytes} bytes of gzip"
    print(f"\n{kind}: {int(wire_bytes) / 1e6:.2f} MB gzip of data lines: {error}, peak RSS {peak_mb} MB")
