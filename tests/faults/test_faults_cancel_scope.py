"""The socket ownership rules of :class:`rxllm._transports.threaded.CancelScope` (both transports attach through it).

A socket belongs to the last scope that used it: once a keep-alive connection went back to the pool
and another request's scope took it, a late ``cancel()`` of the first scope must leave it alone (it
would break an unrelated stream). Attaching to a cancelled scope shuts the socket down at once, and
``shutdown()`` (a timeout's way to wake a blocked exchange) shuts sockets down without cancelling.
Real sockets (a connected pair): "shut down" means the next send fails and the peer reads EOF.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from rxllm._transports.base import CancelScope


@dataclass
class Stream:
    """What a transport's wrapped network stream offers the scope: its socket and its owner."""

    sock: socket.socket
    owner: CancelScope | None = None


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, peer = socket.socketpair()
    peer.settimeout(5.0)
    yield ours, peer
    ours.close()
    peer.close()


def _is_shut_down(ours: socket.socket, peer: socket.socket) -> bool:
    try:
        ours.sendall(b"x")
    except OSError:
        return peer.recv(1) == b""
    assert peer.recv(1) == b"x"
    return False


def test_a_late_cancel_leaves_a_socket_another_scope_took_over(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, peer = pair
    stream = Stream(ours)
    first, second = CancelScope(), CancelScope()
    first.watch(stream)
    second.watch(stream)  # the connection went back to the pool and another request took it
    first.cancel()
    assert first.cancelled and not _is_shut_down(ours, peer)
    second.cancel()
    assert _is_shut_down(ours, peer)


def test_attaching_to_a_cancelled_scope_shuts_the_socket_down_at_once(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, peer = pair
    scope = CancelScope()
    scope.cancel()
    scope.watch(Stream(ours))
    assert scope.attached and _is_shut_down(ours, peer)


def test_shutdown_wakes_the_exchange_without_cancelling_the_scope(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, peer = pair
    scope = CancelScope()
    scope.watch(Stream(ours))
    scope.shutdown()
    assert not scope.cancelled and scope.active and _is_shut_down(ours, peer)


def test_a_finished_scope_detaches_so_a_late_cancel_touches_nothing(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, peer = pair
    scope = CancelScope()
    scope.watch(Stream(ours))
    assert scope.finish()
    scope.cancel()
    assert not _is_shut_down(ours, peer)
