"""The threaded transport's per-read deadline clamp (``_CancellableStream.read``,
inlined because it runs once per network read, once per chunk on a trickling stream). Every socket
timeout ends at the attempt's total deadline; a read after it fails at once; the socket is attached
to the reading thread's scope once. (The server-observed trickle test is in
``tests/faults/test_faults_limits.py``.)"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import httpcore2
import pytest

from rxllm._transports.base import CancelScope
from rxllm._transports.threaded import _CancellableStream


class _Inner:
    """A network stream that records the timeout of every read."""

    def __init__(self, sock: socket.socket | None) -> None:
        self.sock = sock
        self.timeouts: list[float | None] = []

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self.timeouts.append(timeout)
        return b"data"

    def get_extra_info(self, info: str) -> object:
        return self.sock if info == "socket" else None


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_without_a_scope_or_a_deadline_the_timeout_is_untouched(pair: tuple[socket.socket, socket.socket]) -> None:
    inner = _Inner(pair[0])
    stream = _CancellableStream(inner)  # type: ignore[arg-type]
    assert stream.read(10, 5.0) == b"data"
    scope = CancelScope()  # no deadline
    with scope.entered():
        stream.read(10, 5.0)
        stream.read(10, None)
    assert inner.timeouts == [5.0, 5.0, None]


def test_the_timeout_ends_at_the_total_deadline(pair: tuple[socket.socket, socket.socket]) -> None:
    inner = _Inner(pair[0])
    stream = _CancellableStream(inner)  # type: ignore[arg-type]
    scope = CancelScope()
    scope.deadline = time.monotonic() + 1000.0
    with scope.entered():
        stream.read(10, 5.0)  # the read timeout is sooner: kept
        stream.read(10, None)  # no read timeout: the time left
        scope.deadline = time.monotonic() + 2.0
        stream.read(10, 5.0)  # the deadline is sooner: the time left
    assert inner.timeouts[0] == 5.0
    assert inner.timeouts[1] is not None and 999.0 < inner.timeouts[1] <= 1000.0
    assert inner.timeouts[2] is not None and 0.0 < inner.timeouts[2] <= 2.0


def test_a_read_after_the_deadline_fails_without_reading(pair: tuple[socket.socket, socket.socket]) -> None:
    inner = _Inner(pair[0])
    stream = _CancellableStream(inner)  # type: ignore[arg-type]
    scope = CancelScope()
    scope.deadline = time.monotonic() - 0.001
    with scope.entered(), pytest.raises(httpcore2.ReadTimeout):
        stream.read(10, 5.0)
    assert inner.timeouts == []


def test_the_socket_is_attached_to_the_reading_scope_and_a_cancel_shuts_it_down(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    inner = _Inner(pair[0])
    stream = _CancellableStream(inner)  # type: ignore[arg-type]
    scope = CancelScope()
    with scope.entered():
        stream.read(10, 5.0)
        assert stream.owner is scope
        stream.read(10, 5.0)
        scope.cancel()  # from the reading thread here; any thread in real use
        pair[1].settimeout(5.0)
        assert pair[1].recv(1) == b""  # the peer sees the shutdown
