"""The WebSocket seam (rxllm._transports.websocket) against a real WebSocket server on 127.0.0.1.

Every "closed" below is what the server observed: its close frame's code, or the connection's end."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import queue
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import wsproto.events
from ws_server import TIMEOUT, Peer, Refusal, WsServer, echo

import rxllm
from rxllm import (
    BufferOverflowError,
    ConfigurationError,
    HttpStatusError,
    ProtocolError,
    ResponseTooLargeError,
    RxLlmError,
    StreamInterruptedError,
    StreamTimeoutError,
    TransportError,
)
from rxllm._core.errors import WebSocketClosedError
from rxllm._transports.websocket import (
    AsyncWebSocketConnection,
    WebSocketConnection,
    WebSocketLimits,
    WebSocketMessage,
    aconnect_websocket,
    connect_websocket,
)

NO_PINGS = WebSocketLimits(ping_interval=None)
KEY = "sk-secret-0123456789"
URL_KEY = "AIza-secret-9876543210"

Item = tuple[str, Any, Any]


class Recorder:
    """A sink recording what it got, in order; ``hold`` blocks inside the first on_message."""

    def __init__(self, hold: threading.Event | None = None) -> None:
        self.items: queue.Queue[Item] = queue.Queue()
        self.hold = hold
        self.in_sink = threading.Event()
        self.threads: set[str] = set()

    def on_message(self, message: WebSocketMessage) -> None:
        self.threads.add(threading.current_thread().name)
        self.in_sink.set()
        if self.hold is not None:
            assert self.hold.wait(TIMEOUT)
        self.items.put(("message", message, None))

    def on_closed(self, code: int, reason: str) -> None:
        self.items.put(("closed", code, reason))

    def on_error(self, error: RxLlmError) -> None:
        self.items.put(("error", error, None))

    def next(self) -> Item:
        return self.items.get(timeout=TIMEOUT)

    def messages_then_end(self) -> tuple[list[WebSocketMessage], Item]:
        messages: list[WebSocketMessage] = []
        while (item := self.next())[0] == "message":
            messages.append(item[1])
        return messages, item


_clients: list[httpx2.Client] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _clients:
        _clients.pop().close()


def client_of(**options: Any) -> httpx2.Client:
    """An ``httpx2.Client`` closed when the test ends (its pool holds a refused upgrade's socket)."""
    _clients.append(httpx2.Client(**options))
    return _clients[-1]


def connect(server: WsServer, path: str = "/ws", **options: Any) -> tuple[httpx2.Client, WebSocketConnection]:
    client = client_of(base_url=server.url, headers=options.pop("client_headers", None))
    options.setdefault("limits", NO_PINGS)
    return client, connect_websocket(client, path, **options)


def serve_then(handler: Callable[[Peer], None]) -> Callable[[Peer], None]:
    """``handler``, then read until the client closes (so the server observes that close)."""

    def run(peer: Peer) -> None:
        handler(peer)
        peer.until_closed()

    return run


# -- sync


def test_text_and_binary_round_trip_and_a_close_the_server_sees() -> None:
    with WsServer(echo) as server:
        _, ws = connect(server)
        sink = Recorder()
        ws.start(sink)
        ws.send_text("héllo ✓")
        ws.send_bytes(b"\x00\xffbin")
        assert sink.next() == ("message", "héllo ✓", None)
        assert sink.next() == ("message", b"\x00\xffbin", None)
        assert sink.threads == {"rxllm-ws-deliver"}
        ws.close(1000, "bye")
        peer = server.peer()
        assert peer.closed.wait(TIMEOUT)
        assert peer.close_code == 1000
        assert sink.next() == ("closed", 1000, "bye")
        assert ws.wait_closed(TIMEOUT)
        assert ws.state == "closed"


def test_fragments_are_joined_into_one_message() -> None:
    def send(peer: Peer) -> None:
        peer.send_fragments(["he", "llo ", "wörld"])
        peer.send_fragments([b"\x01", b"\x02\x03"])

    with WsServer(serve_then(send)) as server:
        _, ws = connect(server)
        sink = Recorder()
        ws.start(sink)
        assert sink.next()[1] == "hello wörld"
        assert sink.next()[1] == b"\x01\x02\x03"
        ws.close()


def test_messages_that_arrive_before_start_wait_in_the_queue() -> None:
    sent = threading.Event()

    def send(peer: Peer) -> None:
        peer.send_text("early")
        sent.set()

    with WsServer(serve_then(send)) as server:
        _, ws = connect(server)
        assert sent.wait(TIMEOUT)
        sink = Recorder()
        ws.start(sink)
        assert sink.next() == ("message", "early", None)
        with pytest.raises(ConfigurationError, match="already"):
            ws.start(Recorder())
        ws.close()


def test_the_clients_base_url_headers_and_the_calls_headers_reach_the_server() -> None:
    with WsServer(serve_then(lambda peer: None)) as server:
        _, ws = connect(server, "/v1/live?alt=ws", client_headers={"x-client": "c1"}, headers={"x-call": "d2"},
                        subprotocols=["chat.v1"])
        request = server.requests.get(timeout=TIMEOUT)
        assert request.target == "/v1/live?alt=ws"
        assert request.subprotocols == ["chat.v1"]
        peer = server.peer()
        assert (peer.headers["x-client"], peer.headers["x-call"]) == ("c1", "d2")
        ws.close()
        assert peer.closed.wait(TIMEOUT)


def test_keepalive_pings_are_answered_and_the_servers_pings_get_pongs() -> None:
    pong = threading.Event()

    def handler(peer: Peer) -> None:
        peer.send_raw(peer.ws.send(wsproto.events.Ping(b"srv2")))
        while True:
            data = peer.sock.recv(65536)
            if not data:
                return
            peer.ws.receive_data(data)
            for event in peer.ws.events():
                if isinstance(event, wsproto.events.Pong) and bytes(event.payload) == b"srv2":
                    pong.set()
                elif isinstance(event, wsproto.events.Ping):
                    peer.pings += 1
                    peer.ping_seen.set()
                    with contextlib.suppress(OSError):  # the client may have closed meanwhile
                        peer.send_raw(peer.ws.send(event.response()))
                elif isinstance(event, wsproto.events.CloseConnection):
                    peer.close_code = event.code
                    peer.closed.set()
                    return

    with WsServer(handler) as server:
        _, ws = connect(server, limits=WebSocketLimits(ping_interval=0.02, ping_timeout=TIMEOUT))
        sink = Recorder()
        ws.start(sink)
        peer = server.peer()
        assert pong.wait(TIMEOUT)
        assert peer.ping_seen.wait(TIMEOUT)
        assert ws.state == "open"
        assert sink.items.empty()
        ws.close()
        assert peer.closed.wait(TIMEOUT), server.errors
        assert peer.close_code == 1000


def test_a_missed_pong_fails_the_connection_clearly() -> None:
    def handler(peer: Peer) -> None:
        peer.answer_pings = False
        peer.until_closed()

    with WsServer(handler) as server:
        _, ws = connect(server, limits=WebSocketLimits(ping_interval=0.01, ping_timeout=0.05))
        sink = Recorder()
        ws.start(sink)
        kind, error, _ = sink.next()
        assert kind == "error"
        assert isinstance(error, StreamTimeoutError)
        assert error.limit == "pong"
        assert "pong" in str(error)
        peer = server.peer()
        assert peer.closed.wait(TIMEOUT)
        assert peer.close_code == 1011
        assert peer.pings >= 1
        assert ws.wait_closed(TIMEOUT)


def test_close_from_another_thread_wakes_the_blocked_reader_and_the_server_sees_it_at_once() -> None:
    with WsServer(serve_then(lambda peer: None)) as server:
        _, ws = connect(server)
        sink = Recorder()
        ws.start(sink)
        peer = server.peer()
        closer = threading.Thread(target=ws.close, args=(4001, "done here"))
        closer.start()
        closer.join(TIMEOUT)
        assert not closer.is_alive()
        assert peer.closed.wait(TIMEOUT)
        assert peer.close_code == 4001
        assert ws.wait_closed(TIMEOUT)  # the reader woke (no socket timeout was set) and released the socket
        assert sink.next() == ("closed", 4001, "done here")


def test_close_is_idempotent_and_a_send_after_it_fails_clearly() -> None:
    with WsServer(serve_then(lambda peer: None)) as server:
        _, ws = connect(server)
        sink = Recorder()
        ws.start(sink)
        ws.close()
        ws.close(1001, "again")
        threading.Thread(target=ws.close).start()
        assert ws.wait_closed(TIMEOUT)
        assert sink.next() == ("closed", 1000, "")
        assert sink.items.empty()
        peer = server.peer()
        assert peer.closed.wait(TIMEOUT)  # the server side saw the close (it may read it after our reader woke)
        assert peer.close_code == 1000
        with pytest.raises(TransportError, match="closed"):
            ws.send_text("late")
        with pytest.raises(ConfigurationError):
            ws.close(1006)


def test_close_from_inside_the_sink_drops_the_rest() -> None:
    def send(peer: Peer) -> None:
        for i in range(5):
            # the client may close its socket (messages still unread) before the last sends: the
            # kernel then resets the connection, and the server observes that end in until_closed
            with contextlib.suppress(OSError):
                peer.send_text(str(i))

    class Closing(Recorder):
        def on_message(self, message: WebSocketMessage) -> None:
            super().on_message(message)
            ws.close(1000, "enough")

    with WsServer(serve_then(send)) as server:
        _, ws = connect(server)
        sink = Closing()
        ws.start(sink)
        messages, end = sink.messages_then_end()
        assert messages == ["0"]
        assert end == ("closed", 1000, "enough")
        assert server.peer().closed.wait(TIMEOUT)


@pytest.mark.parametrize("shape", ["whole", "fragments", "announced"])
def test_an_oversized_message_fails_with_response_too_large(shape: str) -> None:
    def send(peer: Peer) -> None:
        if shape == "whole":
            peer.send_bytes(b"x" * 2000)
        elif shape == "fragments":
            peer.send_fragments(["y" * 600, "y" * 600])
        else:  # a frame announcing a gigabyte: refused once the bytes received pass the cap
            peer.send_frame_header(0x2, 1 << 30)
            peer.send_raw(b"z" * 4096)

    with WsServer(serve_then(send)) as server:
        _, ws = connect(server, limits=WebSocketLimits(ping_interval=None, max_message_bytes=1024))
        sink = Recorder()
        ws.start(sink)
        kind, error, _ = sink.next()
        assert kind == "error"
        assert isinstance(error, ResponseTooLargeError)
        assert error.limit_bytes == 1024
        peer = server.peer()
        assert peer.closed.wait(TIMEOUT)
        assert peer.close_code == 1009


def test_a_consumer_that_falls_behind_fails_with_buffer_overflow_after_the_queued_messages() -> None:
    hold = threading.Event()
    sink = Recorder(hold)

    def send(peer: Peer) -> None:
        peer.send_text("m0")
        assert sink.in_sink.wait(TIMEOUT)  # the delivery thread now sits in on_message("m0")
        # the client closes once its queue overflows (after m5): a later send may meet a closed socket
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            for i in range(1, 10):
                peer.send_text(f"m{i}")

    with WsServer(serve_then(send)) as server:
        _, ws = connect(server, limits=WebSocketLimits(ping_interval=None, queue_size=4))
        ws.start(sink)
        peer = server.peer()
        assert peer.closed.wait(TIMEOUT)
        assert peer.close_code == 1008
        hold.set()
        messages, (kind, error, _) = sink.messages_then_end()
        assert messages == ["m0", "m1", "m2", "m3", "m4"]
        assert kind == "error"
        assert isinstance(error, BufferOverflowError)
        assert "4" in str(error)


def refuse(status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> Callable[..., Refusal]:
    return lambda request: Refusal(status, body, headers or [])


SECRET_BODY = (
    b'{"error": {"message": "Incorrect API key provided: ' + KEY.encode() + b" nor " + URL_KEY.encode() + b'"}}'
)


def check_401(error: HttpStatusError) -> None:
    assert error.status_code == 401
    assert error.request_id == "req-7"
    assert error.provider_message == "Incorrect API key provided: *** nor ***"
    assert not error.retryable
    for text in (str(error), repr(error), repr(error.args)):
        assert KEY not in text
        assert URL_KEY not in text


def test_a_refused_upgrade_is_an_http_status_error_with_the_redacted_body() -> None:
    handler = refuse(401, SECRET_BODY, [(b"x-request-id", b"req-7")])
    with WsServer(echo, refuse=handler) as server:
        client = client_of(base_url=server.url, headers={"Authorization": f"Bearer {KEY}"})
        with pytest.raises(HttpStatusError) as caught:
            connect_websocket(client, f"/ws?key={URL_KEY}", limits=NO_PINGS, provider="gemini")
        check_401(caught.value)
        assert caught.value.provider == "gemini"


def test_a_500_upgrade_is_retryable_and_carries_the_text_body() -> None:
    with WsServer(echo, refuse=refuse(500, b"upstream broke", [(b"retry-after", b"3")])) as server:
        client = client_of(base_url=server.url)
        with pytest.raises(HttpStatusError) as caught:
            connect_websocket(client, "/ws", limits=NO_PINGS)
        error = caught.value
        assert (error.status_code, error.provider_message, error.retry_after, error.retryable) == (
            500, "upstream broke", 3.0, True
        )


def test_a_refused_connection_is_a_transport_error_without_secrets() -> None:
    with WsServer(echo) as server:
        port = server.port
    client = client_of(headers={"x-api-key": KEY})
    with pytest.raises(TransportError) as caught:
        connect_websocket(client, f"ws://127.0.0.1:{port}/ws?key={URL_KEY}", limits=NO_PINGS)
    assert KEY not in str(caught.value) and URL_KEY not in str(caught.value)
    assert isinstance(caught.value.__cause__, httpx2.ConnectError)


def test_the_repr_shows_the_redacted_url() -> None:
    with WsServer(serve_then(lambda peer: None)) as server:
        client = client_of(base_url=server.url)
        ws = connect_websocket(client, f"/ws?key={URL_KEY}&alt=1", limits=NO_PINGS)
        assert repr(ws) == f"WebSocketConnection(url='{server.url}/ws?key=***&alt=1', state='open')"
        ws.close()


def test_the_server_ending_the_connection_without_a_close_frame_is_stream_interrupted() -> None:
    def send(peer: Peer) -> None:
        peer.send_text("partial answer")
        peer.abort()

    with WsServer(send) as server:
        _, ws = connect(server)
        sink = Recorder()
        ws.start(sink)
        messages, (kind, error, _) = sink.messages_then_end()
        assert messages == ["partial answer"]
        assert kind == "error"
        assert type(error) is StreamInterruptedError
        assert "without a close frame" in str(error)
        assert ws.wait_closed(TIMEOUT)


@pytest.mark.parametrize(("code", "retryable"), [(1011, True), (1008, False), (4003, False)])
def test_a_server_close_with_an_error_code_is_websocket_closed_error(code: int, retryable: bool) -> None:
    def send(peer: Peer) -> None:
        peer.send_text("before")
        peer.close(code, f"quota for {URL_KEY}")
        peer.until_closed()

    with WsServer(send) as server:
        client = client_of(base_url=server.url)
        ws = connect_websocket(client, f"/ws?key={URL_KEY}", limits=NO_PINGS)
        sink = Recorder()
        ws.start(sink)
        messages, (_, error, _) = sink.messages_then_end()
        assert messages == ["before"]
        assert isinstance(error, WebSocketClosedError)
        assert (error.code, error.retryable, error.reason) == (code, retryable, "quota for ***")
        assert URL_KEY not in str(error)
        peer = server.peer()
        assert peer.closed.wait(TIMEOUT)
        assert peer.close_code == code  # the client echoed the close


def test_a_server_close_with_1000_ends_normally() -> None:
    def send(peer: Peer) -> None:
        peer.send_bytes(b"last")
        peer.close(1000, "turn over")
        peer.until_closed()

    with WsServer(send) as server:
        _, ws = connect(server)
        sink = Recorder()
        ws.start(sink)
        assert sink.messages_then_end() == ([b"last"], ("closed", 1000, "turn over"))
        assert ws.wait_closed(TIMEOUT)


def test_a_frame_the_protocol_forbids_is_a_protocol_error() -> None:
    def send(peer: Peer) -> None:
        peer.send_raw(bytes([0x83, 0x00]))  # opcode 3 is reserved

    with WsServer(serve_then(send)) as server:
        _, ws = connect(server)
        sink = Recorder()
        ws.start(sink)
        _, error, _ = sink.next()
        assert isinstance(error, ProtocolError)
        peer = server.peer()
        assert peer.closed.wait(TIMEOUT)
        assert peer.close_code == 1002


def test_a_mock_transport_cannot_carry_a_websocket() -> None:
    client = client_of(
        transport=httpx2.MockTransport(lambda request: httpx2.Response(101, headers={"upgrade": "websocket"}))
    )
    with pytest.raises(ProtocolError):
        connect_websocket(client, "ws://example.invalid/ws")


def test_limits_are_validated() -> None:
    with pytest.raises(ConfigurationError, match="queue_size"):
        WebSocketLimits(queue_size=0)
    with pytest.raises(ConfigurationError, match="ping_interval"):
        WebSocketLimits(ping_interval=0)


# -- async


class AsyncRecorder:
    def __init__(self, hold: asyncio.Event | None = None) -> None:
        self.items: asyncio.Queue[Item] = asyncio.Queue()
        self.hold = hold
        self.in_sink = threading.Event()

    async def on_message(self, message: WebSocketMessage) -> None:
        self.in_sink.set()
        if self.hold is not None:
            await self.hold.wait()
        self.items.put_nowait(("message", message, None))

    def on_closed(self, code: int, reason: str) -> None:
        self.items.put_nowait(("closed", code, reason))

    def on_error(self, error: RxLlmError) -> None:
        self.items.put_nowait(("error", error, None))

    async def next(self) -> Item:
        return await asyncio.wait_for(self.items.get(), TIMEOUT)

    async def messages_then_end(self) -> tuple[list[WebSocketMessage], Item]:
        messages: list[WebSocketMessage] = []
        while (item := await self.next())[0] == "message":
            messages.append(item[1])
        return messages, item


def run(body: Callable[[httpx2.AsyncClient], Awaitable[None]], server: WsServer, **client: Any) -> None:
    async def main() -> None:
        async with httpx2.AsyncClient(base_url=server.url, **client) as http:
            await body(http)

    asyncio.run(main())


def test_async_round_trip_with_the_clients_headers_and_a_close_the_server_sees() -> None:
    with WsServer(echo) as server:

        async def body(http: httpx2.AsyncClient) -> None:
            ws = await aconnect_websocket(http, "/a?x=1", headers={"x-call": "d"}, limits=NO_PINGS)
            sink = AsyncRecorder()
            ws.start(sink)
            await ws.send_text("hi")
            await ws.send_bytes(b"\x01")
            assert await sink.next() == ("message", "hi", None)
            assert await sink.next() == ("message", b"\x01", None)
            await ws.aclose(1000, "bye")
            assert await sink.next() == ("closed", 1000, "bye")
            assert ws.state == "closed"

        run(body, server, headers={"x-client": "c"})
        peer = server.peer()
        assert (peer.headers["x-client"], peer.headers["x-call"], peer.request.target) == ("c", "d", "/a?x=1")
        assert peer.closed.wait(TIMEOUT)
        assert peer.close_code == 1000


def test_async_close_from_another_thread_reaches_the_server() -> None:
    with WsServer(serve_then(lambda peer: None)) as server:

        async def body(http: httpx2.AsyncClient) -> None:
            ws = await aconnect_websocket(http, "/ws", limits=NO_PINGS)
            sink = AsyncRecorder()
            ws.start(sink)
            closer = threading.Thread(target=ws.close, args=(4002, "from a thread"))
            closer.start()
            assert await sink.next() == ("closed", 4002, "from a thread")
            await ws.wait_closed()
            closer.join(TIMEOUT)
            ws.close()  # idempotent
            with pytest.raises(TransportError, match="closed"):
                await ws.send_text("late")

        run(body, server)
        peer = server.peer()
        assert peer.closed.wait(TIMEOUT)
        assert peer.close_code == 4002


def test_async_overflow_missed_pong_and_oversize() -> None:
    hold = asyncio.Event()
    sink = AsyncRecorder(hold)

    def overflow(peer: Peer) -> None:
        peer.send_text("m0")
        assert sink.in_sink.wait(TIMEOUT)
        # the client closes once its queue overflows (after m5): a later send may meet a closed socket
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            for i in range(1, 10):
                peer.send_text(f"m{i}")
        peer.until_closed()

    with WsServer(overflow) as server:

        async def body(http: httpx2.AsyncClient) -> None:
            ws = await aconnect_websocket(http, "/ws", limits=WebSocketLimits(ping_interval=None, queue_size=4))
            ws.start(sink)
            peer = await asyncio.to_thread(server.peer)
            assert await asyncio.to_thread(peer.closed.wait, TIMEOUT)
            assert peer.close_code == 1008
            hold.set()
            messages, (_, error, _) = await sink.messages_then_end()
            assert messages == ["m0", "m1", "m2", "m3", "m4"]
            assert isinstance(error, BufferOverflowError)

        run(body, server)

    def silent(peer: Peer) -> None:
        peer.answer_pings = False
        peer.until_closed()

    with WsServer(silent) as server:

        async def pongless(http: httpx2.AsyncClient) -> None:
            ws = await aconnect_websocket(http, "/ws", limits=WebSocketLimits(ping_interval=0.01, ping_timeout=0.05))
            recorder = AsyncRecorder()
            ws.start(recorder)
            _, error, _ = await recorder.next()
            assert isinstance(error, StreamTimeoutError) and error.limit == "pong"
            await ws.wait_closed()

        run(pongless, server)
        peer = server.peer()
        assert peer.closed.wait(TIMEOUT)
        assert peer.close_code == 1011

    with WsServer(serve_then(lambda peer: peer.send_bytes(b"x" * 2000))) as server:

        async def oversize(http: httpx2.AsyncClient) -> None:
            limits = WebSocketLimits(ping_interval=None, max_message_bytes=100)
            ws = await aconnect_websocket(http, "/ws", limits=limits)
            recorder = AsyncRecorder()
            ws.start(recorder)
            _, error, _ = await recorder.next()
            assert isinstance(error, ResponseTooLargeError) and error.limit_bytes == 100
            await ws.wait_closed()

        run(oversize, server)
        peer = server.peer()
        assert peer.closed.wait(TIMEOUT)
        assert peer.close_code == 1009


def test_async_refused_upgrade_and_abnormal_end() -> None:
    with WsServer(echo, refuse=refuse(401, SECRET_BODY, [(b"x-request-id", b"req-7")])) as server:

        async def body(http: httpx2.AsyncClient) -> None:
            with pytest.raises(HttpStatusError) as caught:
                await aconnect_websocket(http, f"/ws?key={URL_KEY}", limits=NO_PINGS)
            check_401(caught.value)

        run(body, server, headers={"x-goog-api-key": KEY})

    def cut(peer: Peer) -> None:
        peer.send_text("partial")
        peer.abort()

    with WsServer(cut) as server:

        async def interrupted(http: httpx2.AsyncClient) -> None:
            ws = await aconnect_websocket(http, "/ws", limits=NO_PINGS)
            recorder = AsyncRecorder()
            ws.start(recorder)
            messages, (_, error, _) = await recorder.messages_then_end()
            assert messages == ["partial"]
            assert type(error) is StreamInterruptedError
            await ws.wait_closed()

        run(interrupted, server)


def test_async_connection_is_an_async_websocket_connection() -> None:
    with WsServer(serve_then(lambda peer: None)) as server:

        async def body(http: httpx2.AsyncClient) -> None:
            ws = await aconnect_websocket(http, f"/ws?key={URL_KEY}", limits=NO_PINGS)
            assert isinstance(ws, AsyncWebSocketConnection)
            assert URL_KEY not in repr(ws)
            await ws.aclose()

        run(body, server)


# -- the room


def test_httpx2_and_wsproto_are_imported_only_by_the_transports() -> None:
    package = Path(rxllm.__file__).parent
    importers = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            )
            if any(n.split(".")[0] in ("httpx2", "httpcore2", "wsproto") for n in names):
                importers.add(path.relative_to(package).parts[0])
    assert importers == {"_transports"}

