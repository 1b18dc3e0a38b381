"""The server side of a WebSocket on 127.0.0.1, for rxllm's live test kit (``rxllm.testing``).

wsproto over plain sockets, one daemon thread per connection, so a test sees exactly what reached
the server (messages, the client's close code, the end of the connection) and can misbehave on
purpose (drop the connection, send a frame larger than the client accepts). Only this room
imports wsproto; the kit scripts sessions on top of :class:`ServerPeer`.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from urllib.parse import parse_qsl, urlsplit

import wsproto
import wsproto.events

__all__ = ["PeerClosedError", "ServerPeer", "WebSocketServer"]


class PeerClosedError(Exception):
    """The client's close frame (``code``) or the end of the connection (``code`` None) arrived."""

    def __init__(self, code: int | None, reason: str | None) -> None:
        super().__init__(code, reason)
        self.code = code
        self.reason = reason


class ServerPeer:
    """The server side of one accepted WebSocket connection.

    Attributes:
        target: the upgrade request's path and query (``/ws/...?key=...``).
        path: the path alone.
        query: the query's parameters.
        headers: the upgrade request's headers, names lower-cased.
        closed: set when the client's close frame or the end of the connection reached the server.
        close_code: the client's close code (``None``: the connection ended without one).
    """

    def __init__(self, sock: socket.socket, ws: wsproto.WSConnection, request: wsproto.events.Request) -> None:
        self._sock = sock
        self._ws = ws
        self.target = request.target
        parts = urlsplit(request.target)
        self.path = parts.path
        self.query = dict(parse_qsl(parts.query))
        self.headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in request.extra_headers}
        self.closed = threading.Event()
        self.close_code: int | None = None
        self._pending: list[wsproto.events.Event] = []
        self._lock = threading.Lock()

    def _send(self, event: wsproto.events.Event) -> None:
        with self._lock:
            self._sock.sendall(self._ws.send(event))

    def send_text(self, text: str) -> None:
        """One text message."""
        self._send(wsproto.events.TextMessage(data=text))

    def send_bytes(self, data: bytes) -> None:
        """One binary message."""
        self._send(wsproto.events.BytesMessage(data=data))

    def send_oversized(self, length: int) -> None:
        """A text frame header announcing ``length`` bytes, then that many bytes of ``x``."""
        header = bytes([0x81, 127]) + struct.pack("!Q", length)
        with self._lock, contextlib.suppress(OSError):
            self._sock.sendall(header)
            chunk = b"x" * 65536
            sent = 0
            while sent < length:
                piece = chunk[: min(len(chunk), length - sent)]
                self._sock.sendall(piece)
                sent += len(piece)

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Send a close frame."""
        with contextlib.suppress(OSError, wsproto.utilities.LocalProtocolError):
            self._send(wsproto.events.CloseConnection(code=code, reason=reason))

    def drop(self) -> None:
        """End the TCP connection without a close frame."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def recv(self) -> str | bytes:
        """The next message (pings are answered).

        Raises:
            PeerClosedError: the client's close frame or the connection's end came instead.
        """
        while True:
            while self._pending:
                event = self._pending.pop(0)
                if isinstance(event, wsproto.events.Message):
                    return event.data if isinstance(event.data, str) else bytes(event.data)
                if isinstance(event, wsproto.events.Ping):
                    with contextlib.suppress(OSError):
                        self._send(event.response())
                elif isinstance(event, wsproto.events.CloseConnection):
                    self.close_code = event.code
                    with contextlib.suppress(OSError, wsproto.utilities.LocalProtocolError):
                        self._send(event.response())
                    self.closed.set()
                    raise PeerClosedError(event.code, event.reason)
            try:
                data = self._sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                self.closed.set()
                raise PeerClosedError(None, None)
            try:
                self._ws.receive_data(data)
            except wsproto.utilities.RemoteProtocolError as exc:
                self.closed.set()
                raise PeerClosedError(None, str(exc)) from exc
            self._pending.extend(self._ws.events())


class WebSocketServer:
    """Listens on 127.0.0.1 (the OS picks the port); runs ``handler`` on each accepted
    connection's own thread. ``close()`` ends every connection and joins the threads (bounded).

    Attributes:
        url: ``ws://127.0.0.1:PORT``.
        errors: exceptions a handler raised (other than the client closing).
    """

    def __init__(self, handler: Callable[[ServerPeer], None], *, join_timeout: float = 5.0) -> None:
        self._handler = handler
        self._join_timeout = join_timeout
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.url = f"ws://127.0.0.1:{self.port}"
        self.errors: list[BaseException] = []
        self._threads: list[threading.Thread] = []
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._accepting = threading.Thread(target=self._accept, name="rxllm-ws-stub-accept", daemon=True)
        self._accepting.start()

    def close(self) -> None:
        """Stop accepting, end every connection, join the threads."""
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self._listener.close()
        with self._lock:
            socks, threads = list(self._socks), list(self._threads)
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(self._join_timeout)
        self._accepting.join(self._join_timeout)

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            thread = threading.Thread(target=self._serve, args=(sock,), name="rxllm-ws-stub-peer", daemon=True)
            with self._lock:
                self._socks.append(sock)
                self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        try:
            with sock:
                ws = wsproto.WSConnection(wsproto.ConnectionType.SERVER)
                request = None
                while request is None:
                    data = sock.recv(65536)
                    if not data:
                        return
                    ws.receive_data(data)
                    request = next((e for e in ws.events() if isinstance(e, wsproto.events.Request)), None)
                sock.sendall(ws.send(wsproto.events.AcceptConnection()))
                self._handler(ServerPeer(sock, ws, request))
        except (PeerClosedError, OSError):
            pass
        except BaseException as exc:  # surfaced through ``errors``
            self.errors.append(exc)
