"""The WebSocket seam over ``wss://`` (a throwaway CA from trustme, trusted through the user's own
httpx2 client) and through an HTTP proxy (a real CONNECT proxy on 127.0.0.1 started here), on the
sync and the async path. Every "closed" is what the server (or the proxy) observed."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
import trustme
from ws_server import TIMEOUT, Peer, WsServer, echo

from rxllm import RxLlmError, TransportError
from rxllm._transports.websocket import WebSocketLimits, WebSocketMessage, aconnect_websocket, connect_websocket

NO_PINGS = WebSocketLimits(ping_interval=None)


class ConnectProxy:
    """An HTTP proxy on 127.0.0.1 that only tunnels: ``CONNECT host:port``, ``200``, then bytes both
    ways until either side ends. ``targets`` holds every CONNECT target; ``tunnel_closed`` is set
    when a tunnel's client side ended; ``relayed`` counts the bytes carried client → upstream."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.targets: list[str] = []
        self.relayed = 0
        self.tunnel_closed = threading.Event()
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._start(self._accept)

    def _start(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._socks.append(client)
            self._start(self._tunnel, client)

    def _tunnel(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            data = client.recv(65536)
            if not data:
                client.close()
                return
            head += data
        method, target, _ = head.split(b"\r\n", 1)[0].split(b" ", 2)
        if method != b"CONNECT":
            client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
            client.close()
            return
        self.targets.append(target.decode())
        host, _, port = target.decode().rpartition(":")
        upstream = socket.create_connection((host, int(port)))
        self._socks.append(upstream)
        client.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        self._start(self._pipe, upstream, client, False)
        self._pipe(client, upstream, True)
        self.tunnel_closed.set()

    def _pipe(self, source: socket.socket, sink: socket.socket, counted: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if counted:
                    self.relayed += len(data)
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for sock in self._socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(TIMEOUT)
        for sock in self._socks:
            sock.close()


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def server_tls(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    return context


@pytest.fixture(scope="module")
def client_tls(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


@pytest.fixture
def proxy() -> Iterator[ConnectProxy]:
    made = ConnectProxy()
    try:
        yield made
    finally:
        made.close()


class Sink:
    """Records messages and the end; ``done`` is set at the end."""

    def __init__(self) -> None:
        self.messages: list[WebSocketMessage] = []
        self.end: tuple[str, Any] | None = None
        self.got = threading.Semaphore(0)
        self.done = threading.Event()

    def on_message(self, message: WebSocketMessage) -> None:
        self.messages.append(message)
        self.got.release()

    def on_closed(self, code: int, reason: str) -> None:
        self.end = ("closed", code)
        self.done.set()

    def on_error(self, error: RxLlmError) -> None:
        self.end = ("error", error)
        self.done.set()

    def wait_messages(self, count: int) -> list[WebSocketMessage]:
        for _ in range(count):
            assert self.got.acquire(timeout=TIMEOUT)
        return self.messages


def round_trip_sync(client: httpx2.Client, url: str, server: WsServer) -> Peer:
    """Echo a text and a binary message, close from another thread; the server's peer."""
    ws = connect_websocket(client, url, limits=NO_PINGS)
    sink = Sink()
    ws.start(sink)
    ws.send_text("héllo")
    ws.send_bytes(b"\x00\xff" * 1000)
    assert sink.wait_messages(2) == ["héllo", b"\x00\xff" * 1000]
    peer = server.peer()
    closer = threading.Thread(target=ws.close, args=(4000, "done"))
    closer.start()
    closer.join(TIMEOUT)
    assert peer.closed.wait(TIMEOUT) and peer.close_code == 4000
    assert sink.done.wait(TIMEOUT) and sink.end == ("closed", 4000)
    assert ws.wait_closed(TIMEOUT)
    return peer


async def round_trip_async(client: httpx2.AsyncClient, url: str, server: WsServer) -> Peer:
    ws = await aconnect_websocket(client, url, limits=NO_PINGS)
    got: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    class AsyncSink:
        async def on_message(self, message: WebSocketMessage) -> None:
            got.put_nowait(("message", message))

        def on_closed(self, code: int, reason: str) -> None:
            got.put_nowait(("closed", code))

        def on_error(self, error: RxLlmError) -> None:
            got.put_nowait(("error", error))

    ws.start(AsyncSink())
    await ws.send_text("héllo")
    await ws.send_bytes(b"\x01" * 3000)
    assert await asyncio.wait_for(got.get(), TIMEOUT) == ("message", "héllo")
    assert await asyncio.wait_for(got.get(), TIMEOUT) == ("message", b"\x01" * 3000)
    peer = await asyncio.to_thread(server.peer)
    await asyncio.to_thread(ws.close, 4000, "done")  # close() from another thread than the loop
    assert await asyncio.wait_for(got.get(), TIMEOUT) == ("closed", 4000)
    assert await asyncio.to_thread(peer.closed.wait, TIMEOUT) and peer.close_code == 4000
    return peer


def test_wss_with_the_users_client_trusting_a_private_ca(server_tls: ssl.SSLContext,
                                                          client_tls: ssl.SSLContext) -> None:
    with WsServer(echo, ssl_context=server_tls) as server:
        assert server.url.startswith("wss://")
        with httpx2.Client(verify=client_tls, trust_env=False) as client:
            peer = round_trip_sync(client, f"wss://localhost:{server.port}/ws", server)
        assert isinstance(peer.sock, ssl.SSLSocket)  # the server spoke TLS on this connection


def test_wss_async_with_the_users_client_trusting_a_private_ca(server_tls: ssl.SSLContext,
                                                                client_tls: ssl.SSLContext) -> None:
    with WsServer(echo, ssl_context=server_tls) as server:

        async def main() -> Peer:
            async with httpx2.AsyncClient(verify=client_tls, trust_env=False) as client:
                return await round_trip_async(client, f"wss://127.0.0.1:{server.port}/ws", server)

        assert isinstance(asyncio.run(main()).sock, ssl.SSLSocket)


def test_wss_to_a_server_whose_ca_the_client_does_not_trust_is_a_clear_error(server_tls: ssl.SSLContext) -> None:
    with WsServer(echo, ssl_context=server_tls) as server, httpx2.Client(trust_env=False) as client:
        with pytest.raises(TransportError, match=r"(?i)certificate"):
            connect_websocket(client, f"wss://localhost:{server.port}/ws", limits=NO_PINGS)
        assert server.peers.empty()  # the handshake never got to the upgrade


def test_plain_ws_through_a_connect_proxy_fails_clearly_with_the_way_out(proxy: ConnectProxy) -> None:
    # httpcore2 2.16 tunnels a ws:// origin with CONNECT and then starts TLS inside the tunnel (as for
    # wss://): the plain server cannot answer, so the upgrade fails; the error says what to do.
    with WsServer(echo) as server, httpx2.Client(proxy=proxy.url, trust_env=False) as client:
        with pytest.raises(TransportError, match="use wss://"):
            connect_websocket(client, f"ws://127.0.0.1:{server.port}/ws", limits=NO_PINGS)
        assert proxy.targets == [f"127.0.0.1:{server.port}"]  # it did go to the proxy
        assert server.peers.empty()
    assert server.bad_requests == 1  # what reached the server through the tunnel was a TLS hello


def test_wss_through_a_connect_proxy_sync_and_async(proxy: ConnectProxy, server_tls: ssl.SSLContext,
                                                     client_tls: ssl.SSLContext) -> None:
    with WsServer(echo, ssl_context=server_tls) as server:
        url = f"wss://localhost:{server.port}/ws"
        with httpx2.Client(proxy=proxy.url, verify=client_tls, trust_env=False) as client:
            assert isinstance(round_trip_sync(client, url, server).sock, ssl.SSLSocket)

        async def main() -> Peer:
            async with httpx2.AsyncClient(proxy=proxy.url, verify=client_tls, trust_env=False) as client:
                return await round_trip_async(client, url, server)

        assert isinstance(asyncio.run(main()).sock, ssl.SSLSocket)
        assert proxy.targets == [f"localhost:{server.port}"] * 2  # both upgrades went through the tunnel
        assert proxy.relayed > 2 * 3000  # and so did the frames (TLS records: more than their payload)
        assert proxy.tunnel_closed.wait(TIMEOUT)  # the client's close ended the tunnel
