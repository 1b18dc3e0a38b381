"""A slow consumer of a 50 MB stream: the reader is throttled, so memory stays bounded.

The server is a tiny raw-socket HTTP server in this file (not the StubServer: its scripted body
would have to sit in this very process's memory, 50 MB of it). It generates the events lazily,
counts every byte the kernel accepted, and notes when a write has made no progress for a while
(the socket buffers are full: TCP is pushing back). The subscriber blocks in ``on_next`` on its
first partial. While it blocks, the server must be stuck far short of 50 MB and the client's
Python heap (``tracemalloc``) and RSS must stay far below 50 MB: nothing between the socket and
the subscriber queues without bound. Then the subscriber is released and the whole turn must
arrive, every byte of text in order. On the asyncio transport the blocked subscriber blocks the
loop itself (as documented: subscribers must not block there), which throttles just the same.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
import tracemalloc
from collections.abc import Iterator

import pytest
from faults_support import REQUEST, TIMEOUT, TRANSPORT_KINDS, Recorder, make_transport, read_request
from wire import OPENAI

from rxllm import LlmResponse, RetryPolicy

TOTAL_BYTES = 50 * 1024 * 1024
EVENT_TEXT = 32 * 1024  # characters of text per event
STALL_SECONDS = 0.3  # a write that cannot progress this long means the buffers are full
MB = 1024 * 1024


def _text(index: int) -> str:
    return f"[{index:06d}]" + "x" * (EVENT_TEXT - 8)


def _events(count: int) -> Iterator[bytes]:
    for index in range(count):
        payload = {"id": "c", "choices": [{"index": 0, "delta": {"content": _text(index)}, "finish_reason": None}]}
        yield b"data: " + json.dumps(payload).encode() + b"\n\n"
    done = {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    yield b"data: " + json.dumps(done).encode() + b"\n\ndata: [DONE]\n\n"


class FireHoseServer:
    """Serves one close-delimited SSE response of ``count`` big events, as fast as TCP lets it."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.sent = 0
        self.sent_when_stalled: int | None = None
        self.stalled = threading.Event()
        self.finished = threading.Event()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="firehose", daemon=True)

    def __enter__(self) -> FireHoseServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._listener.close()
        self._thread.join(TIMEOUT)
        assert not self._thread.is_alive(), "the fire-hose server did not stop"

    def _serve(self) -> None:
        try:
            self._listener.settimeout(TIMEOUT)
            conn, _ = self._listener.accept()
            with conn:
                if read_request(conn) is None:
                    return
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
                conn.setblocking(False)
                for event in _events(self._count):
                    view = memoryview(event)
                    while view:
                        _, writable, _ = select.select([], [conn], [], STALL_SECONDS)
                        if self._stop.is_set():
                            return
                        if not writable:
                            if not self.stalled.is_set():
                                self.sent_when_stalled = self.sent
                                self.stalled.set()
                            continue
                        written = conn.send(view)
                        self.sent += written
                        view = view[written:]
                conn.shutdown(socket.SHUT_WR)
                self.finished.set()
                conn.setblocking(True)
                conn.settimeout(TIMEOUT)
                while conn.recv(65536):  # until the client closes: our close must not reset unread data
                    pass
        except BaseException as exc:  # reported by the test
            self.error = exc


def _rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_a_blocked_subscriber_throttles_the_reader_of_a_50_mb_stream(kind: str) -> None:
    count = TOTAL_BYTES // EVENT_TEXT
    release = threading.Event()
    first_seen = threading.Event()
    recorder = Recorder()
    blocked_for: list[float] = []

    def on_next(response: LlmResponse) -> None:
        if not first_seen.is_set():
            first_seen.set()
            started = time.monotonic()
            assert release.wait(4 * TIMEOUT), "never released"
            blocked_for.append(time.monotonic() - started)
        recorder.on_next(response)

    transport = make_transport(kind, streams=2, read_timeout=4 * TIMEOUT)
    rss_before = _rss_bytes()
    tracemalloc.start()
    try:
        with FireHoseServer(count) as server:
            model = OPENAI.make(server.url, transport=transport, retry_policy=RetryPolicy.never())
            subscription = model.generate_content(REQUEST, stream=True).subscribe(
                on_next, recorder.on_error, recorder.on_completed
            )
            try:
                assert first_seen.wait(TIMEOUT), "no first partial"
                assert server.stalled.wait(3 * TIMEOUT), f"the server was never throttled ({server.sent} bytes sent)"
                _, heap_peak = tracemalloc.get_traced_memory()
                rss_growth = _rss_bytes() - rss_before
                sent = server.sent_when_stalled or 0
            finally:
                tracemalloc.stop()
                release.set()
            print(f"\n{kind}, blocked subscriber: server stalled after {sent / MB:.1f} MB of "
                  f"{TOTAL_BYTES / MB:.0f} MB; client heap peak {heap_peak / MB:.2f} MB; "
                  f"RSS growth {rss_growth / MB:.1f} MB")
            assert sent < TOTAL_BYTES // 4, f"the reader was not throttled: {sent / MB:.1f} MB went out"
            assert heap_peak < 8 * MB, f"the client's heap grew to {heap_peak / MB:.1f} MB while blocked"
            assert rss_growth < 16 * MB, f"the client's RSS grew by {rss_growth / MB:.1f} MB while blocked"

            started = time.monotonic()
            recorder.wait("the released stream", timeout=6 * TIMEOUT)
            subscription.dispose()
            assert server.error is None, server.error
            assert server.finished.is_set()
    finally:
        transport.close()
    assert recorder.completed and not recorder.errors, recorder.errors
    partials, final = recorder.items[:-1], recorder.items[-1]
    assert len(partials) == count and not final.partial
    text = final.text()
    assert len(text) == count * EVENT_TEXT
    assert all(text.startswith(_text(i)[:8], i * EVENT_TEXT) for i in range(count)), "text out of order"
    print(f"released: the remaining {(TOTAL_BYTES - sent) / MB:.0f} MB streamed in "
          f"{time.monotonic() - started:.2f}s ({len(partials)} partials)")
