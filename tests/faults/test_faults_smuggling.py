"""No response smuggling on a pooled connection, on both transports and over a legacy httpx client.

A raw-socket server answers the first request of the run with a well-formed stream followed by
bytes that belong to no request: a complete second response (the attacker's answer), or the start
of one, after a ``Content-Length`` body or after the chunked terminator, in the same write as the
response or in a later one (sent while the connection sits idle in the pool). The connection must
then be closed by the client, never reused: the next call reaches the server on a new connection
and gets its own answer. What the server observed (which connection each request arrived on, and
that the first one was closed by the client) is what the tests assert.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from dataclasses import dataclass, field

import httpx
import pytest
from faults_support import REQUEST, TIMEOUT, TRANSPORT_KINDS, LoopbackRelay, Recorder, make_transport, read_request
from wire import OPENAI

from rxllm import AsyncHttpTransport, LlmResponse, RetryPolicy, SseChatModel
from rxllm._transports.clients import transport_for_client


def _stream_body(text: str) -> bytes:
    return b"".join(OPENAI.stream(text))


def _response(text: str, *, chunked: bool) -> bytes:
    body = _stream_body(text)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    if chunked:
        return head + b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n%b\r\n0\r\n\r\n" % (len(body), body)
    return head + b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


SMUGGLED = {
    "whole-response": _response("smuggled answer", chunked=False),
    "partial-response": _response("smuggled answer", chunked=False)[:60],
}


@dataclass
class _Connection:
    requests: int = 0
    closed_by_client: threading.Event = field(default_factory=threading.Event)


class SmugglingServer(LoopbackRelay):
    """Answers its first request with ``first`` plus ``extra`` (in the same write, or in a later one
    once :meth:`send_late` is called); every later request with ``answer <n>``, n counting from 2."""

    def __init__(self, extra: bytes, *, chunked: bool, late: bool) -> None:
        self._extra, self._chunked, self._late = extra, chunked, late
        self._lock = threading.Lock()
        self.connections: list[_Connection] = []
        self._count = 0
        self._first: socket.socket | None = None
        self._answered = threading.Event()
        self.late_sent = threading.Event()
        super().__init__("http", "smuggling-server")

    def _handle(self, conn: socket.socket) -> None:
        record = _Connection()
        with self._lock:
            self.connections.append(record)
        try:
            while read_request(conn) is not None:
                with self._lock:
                    self._count += 1
                    number = self._count
                record.requests += 1
                if number == 1:
                    reply = _response("first", chunked=self._chunked)
                    self._first = conn
                    conn.sendall(reply if self._late else reply + self._extra)
                    self._answered.set()
                else:
                    conn.sendall(_response(f"answer {number}", chunked=self._chunked))
        except OSError:
            pass
        record.closed_by_client.set()
        with contextlib.suppress(OSError):
            conn.close()

    def send_late(self) -> None:
        """Write the extra bytes on the first connection, now (it is idle in the client's pool)."""
        assert self._answered.wait(TIMEOUT)
        assert self._first is not None
        with contextlib.suppress(OSError):
            self._first.sendall(self._extra)
        self.late_sent.set()


def _call(model: SseChatModel) -> str:
    recorder = Recorder()
    recorder.subscribe(model.generate_content(REQUEST, stream=True))
    recorder.wait("a call")
    assert recorder.errors == [] and recorder.completed, recorder.errors
    final: LlmResponse = recorder.items[-1]
    assert not final.partial
    return final.text()


CLIENTS = ("rxllm", "httpx")  # rxllm's own httpx2 client, or a legacy httpx client the user passes


@contextlib.contextmanager
def _transport(kind: str, client: str):  # type: ignore[no-untyped-def]
    if client == "rxllm":
        transport = make_transport(kind)
        try:
            yield transport
        finally:
            transport.close()
        return
    user = httpx.Client() if kind == "threads" else httpx.AsyncClient()
    transport = transport_for_client(user)
    try:
        yield transport
    finally:
        if isinstance(user, httpx.AsyncClient):  # rxllm never closes a client you built: the test does
            assert isinstance(transport, AsyncHttpTransport)
            asyncio.run_coroutine_threadsafe(user.aclose(), transport.loop).result(TIMEOUT)
        else:
            user.close()
        transport.close()


@pytest.mark.parametrize("extra", sorted(SMUGGLED))
@pytest.mark.parametrize("late", [False, True], ids=["same-write", "later-write"])
@pytest.mark.parametrize("chunked", [True, False], ids=["after-chunked-terminator", "past-content-length"])
@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_bytes_after_a_response_end_its_connection(kind: str, client: str, chunked: bool, late: bool,
                                                     extra: str) -> None:
    server = SmugglingServer(SMUGGLED[extra], chunked=chunked, late=late)
    try:
        with _transport(kind, client) as transport:
            model = OPENAI.model(server.url, transport=transport, retry_policy=RetryPolicy.never())
            assert _call(model) == "first"
            if late:
                server.send_late()
            second = _call(model)
            third = _call(model)
            first_closed = server.connections[0].closed_by_client.wait(TIMEOUT)
    finally:
        server.close()
    assert second == "answer 2" and third == "answer 3", "a call read bytes that answered no request of its own"
    assert first_closed, "the connection that carried the extra bytes was not closed by the client"
    assert server.connections[0].requests == 1, "the connection that carried the extra bytes was reused"
    assert [c.requests for c in server.connections[1:]] == [2], "the new connection was not the one reused"


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length"])
@pytest.mark.parametrize("kind", TRANSPORT_KINDS)
def test_a_clean_response_keeps_its_connection(kind: str, chunked: bool) -> None:
    """The control: with nothing after the response, the same connection carries every call."""
    server = SmugglingServer(b"", chunked=chunked, late=False)
    try:
        with _transport(kind, "rxllm") as transport:
            model = OPENAI.model(server.url, transport=transport, retry_policy=RetryPolicy.never())
            texts = [_call(model) for _ in range(3)]
    finally:
        server.close()
    assert texts == ["first", "answer 2", "answer 3"]
    assert [c.requests for c in server.connections] == [3]
