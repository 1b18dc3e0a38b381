"""A chunked body sent in one write reaches rxllm in a few pieces, not one per HTTP chunk.

A raw server on 127.0.0.1 sends 300 SSE events, one HTTP chunk each, with a single ``sendall``
(as a fast provider's burst lands in one read). Plain httpx yields one piece per chunk; rxllm's
transports (:class:`~rxllm._transports.coalesce.ChunkCoalescer` under h11) yield one per network read, the
bytes are identical, and the keep-alive connection is still reused (the server counts them).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import httpx
import pytest
from faults_support import TIMEOUT, LoopbackRelay, read_request

from rxllm import AsyncHttpTransport, HttpTransport
from rxllm._models.provider import HttpRequest
from rxllm._transports.base import CancelScope

EVENTS = [b'data: {"n":%d,"pad":"%s"}\n\n' % (i, b"x" * 80) for i in range(300)]
PAYLOAD = b"".join(EVENTS)
BODY = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in EVENTS) + b"0\r\n\r\n"
PATH = "/v1/chat/completions"
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


class BurstServer(LoopbackRelay):
    """Answers every request on a connection with HEAD + BODY in one ``sendall``; counts connections."""

    def __init__(self) -> None:
        self.connections = 0
        super().__init__("http", "burst")

    def _handle(self, conn: socket.socket) -> None:
        self.connections += 1
        with conn:
            while read_request(conn) is not None:
                conn.sendall(HEAD + BODY)


@pytest.fixture
def server() -> Iterator[BurstServer]:
    burst = BurstServer()
    yield burst
    burst.close()


def _request(server: BurstServer) -> HttpRequest:
    return HttpRequest(url=f"{server.url}{PATH}", body=b"{}", headers={"content-type": "application/json"})


def test_plain_httpx_yields_one_piece_per_chunk(server: BurstServer) -> None:
    with httpx.Client() as client, client.stream("POST", f"{server.url}{PATH}", content=b"{}") as response:
        pieces = list(response.iter_raw())
    assert b"".join(pieces) == PAYLOAD and len(pieces) >= len(EVENTS)


def test_the_threaded_transport_yields_one_piece_per_read_and_reuses_the_connection(server: BurstServer) -> None:
    transport = HttpTransport()
    try:
        for _ in range(3):
            scope = CancelScope()
            with scope.entered():
                response = transport.open(_request(server), provider="openai", stream=True)
                pieces = list(response.iter_bytes())
                response.close()
            assert b"".join(pieces) == PAYLOAD
            assert len(pieces) <= 10, len(pieces)  # 300 chunks in a burst: a few reads
    finally:
        transport.close()
    assert server.connections == 1


def test_the_asyncio_transport_yields_one_piece_per_read_and_reuses_the_connection(server: BurstServer) -> None:
    transport = AsyncHttpTransport()

    async def three_calls() -> list[list[bytes]]:
        calls = []
        for _ in range(3):
            response = await transport.open(_request(server), provider="openai", stream=True)
            try:
                calls.append([piece async for piece in response.aiter_bytes()])
            finally:
                await response.aclose()
        return calls

    try:
        calls = asyncio.run_coroutine_threadsafe(three_calls(), transport.loop).result(TIMEOUT)
    finally:
        transport.close()
    assert all(b"".join(pieces) == PAYLOAD for pieces in calls)
    assert all(len(pieces) <= 10 for pieces in calls), [len(p) for p in calls]
    assert server.connections == 1
