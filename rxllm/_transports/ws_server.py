"""The server side of a WebSocket on 127.0.0.1, for rxllm's live test kit (``rxllm.testing``).

wsproto over plain sockets (or TLS, given a server ``ssl_context``), one daemon thread per
connection, so a test sees exactly what reached the server (messages, pings, the client's close
code, the end of the connection) and can misbehave on purpose (refuse the upgrade, leave pings
unanswered, drop the connection, send raw or oversized frames). Only this room imports wsproto;
the kit scripts sessions on top of :class:`ServerPeer`, and rxllm's own WebSocket tests use the
same server.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import ssl
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from urllib.parse import parse_qsl, urlsplit

import wsproto
import wsproto.events
import wsproto.utilities

__all__ = ["PeerClosedError", "Refusal", "ServerPeer", "WebSocketServer"]


@dataclass
class Refusal:
    """An HTTP answer the server gives instead of accepting the upgrade."""

    status: int
    body: bytes = b""
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)


class PeerClosedError(Exception):
    """The client's close frame (``code``) or the end of the connection (``code`` None) arrived."""

    def __init__(self, code: int | None, reason: str | None) -> None:
        super().__init__(code, reason)
        self.code = code
        self.reason = reason


class ServerPeer:
    """The server side of one accepted WebSocket connection.

    Attributes:
        sock: the accepted socket.
        ws: the server's wsproto connection.
        request: the upgrade request as wsproto parsed it.
        target: the upgrade request's path and query (``/ws/...?key=...``).
        path: the path alone.
        query: the query's parameters.
        headers: the upgrade request's headers, names lower-cased.
        answer_pings: whether :meth:`recv` answers the client's pings (a test turns it off).
        pings: how many pings :meth:`recv` saw; ``ping_seen`` is set at the first.
        closed: set when the client's close frame or the end of the connection reached the server.
        close_code: the client's close code (``None``: the connection ended without one).
        saw_eof: set when the connection ended (the client's socket shut or closed).
    """

    def __init__(self, sock: socket.socket, ws: wsproto.WSConnection, request: wsproto.events.Request) -> None:
        self.sock = sock
        self.ws = ws
        self.request = request
        self.target = request.target
        parts = urlsplit(request.target)
        self.path = parts.path
        self.query = dict(parse_qsl(parts.query))
        self.headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in request.extra_headers}
        self.answer_pings = True
        self.pings = 0
        self.ping_seen = threading.Event()
        self.closed = threading.Event()
        self.close_code: int | None = None
        self.saw_eof = threading.Event()
        self._pending: list[wsproto.events.Event] = []
        self._lock = threading.Lock()

    def _send(self, event: wsproto.events.Event) -> None:
        with self._lock:
            self.sock.sendall(self.ws.send(event))

    def send_text(self, text: str) -> None:
        """One text message."""
        self._send(wsproto.events.TextMessage(data=text))

    def send_bytes(self, data: bytes) -> None:
        """One binary message."""
        self._send(wsproto.events.BytesMessage(data=data))

    def send_fragments(self, pieces: Sequence[str | bytes]) -> None:
        """One message in several frames (all ``str``: a text message; all ``bytes``: binary)."""
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            event: wsproto.events.Event
            if isinstance(piece, str):
                event = wsproto.events.TextMessage(data=piece, message_finished=last)
            else:
                event = wsproto.events.BytesMessage(data=piece, message_finished=last)
            self._send(event)

    def send_raw(self, data: bytes) -> None:
        """Bytes as they are (a hand-made frame)."""
        with self._lock:
            self.sock.sendall(data)

    def send_frame_header(self, opcode: int, length: int) -> None:
        """A frame header announcing ``length`` bytes (the payload follows with :meth:`send_raw`)."""
        self.send_raw(bytes([0x80 | opcode, 127]) + struct.pack("!Q", length))

    def send_oversized(self, length: int) -> None:
        """A text frame header announcing ``length`` bytes, then that many bytes of ``x``."""
        header = bytes([0x81, 127]) + struct.pack("!Q", length)
        with self._lock, contextlib.suppress(OSError):
            self.sock.sendall(header)
            chunk = b"x" * 65536
            sent = 0
            while sent < length:
                piece = chunk[: min(len(chunk), length - sent)]
                self.sock.sendall(piece)
                sent += len(piece)

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Send a close frame."""
        with contextlib.suppress(OSError, wsproto.utilities.LocalProtocolError):
            self._send(wsproto.events.CloseConnection(code=code, reason=reason))

    def drop(self) -> None:
        """End the TCP connection without a close frame."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    abort = drop

    def until_closed(self) -> PeerClosedError:
        """Read (answering pings, discarding messages) until the client closes."""
        while True:
            try:
                self.recv()
            except PeerClosedError as closed:
                return closed

    def recv(self) -> str | bytes:
        """The next message; pings are counted (and answered unless ``answer_pings`` is off).

        Raises:
            PeerClosedError: the client's close frame or the connection's end came instead.
        """
        while True:
            while self._pending:
                event = self._pending.pop(0)
                if isinstance(event, wsproto.events.Message):
                    return event.data if isinstance(event.data, str) else bytes(event.data)
                if isinstance(event, wsproto.events.Ping):
                    self.pings += 1
                    self.ping_seen.set()
                    if self.answer_pings:
                        with contextlib.suppress(OSError):  # the client may have closed meanwhile
                            self._send(event.response())
                elif isinstance(event, wsproto.events.CloseConnection):
                    self.close_code = event.code
                    with contextlib.suppress(OSError, wsproto.utilities.LocalProtocolError):
                        self._send(event.response())
                    self.closed.set()
                    raise PeerClosedError(event.code, event.reason)
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                self.saw_eof.set()
                self.closed.set()
                raise PeerClosedError(None, None)
            try:
                self.ws.receive_data(data)
            except wsproto.utilities.RemoteProtocolError as exc:
                self.closed.set()
                raise PeerClosedError(None, str(exc)) from exc
            self._pending.extend(self.ws.events())


class WebSocketServer:
    """Listens on 127.0.0.1 (the OS picks the port); runs ``handler`` on each accepted
    connection's own thread. ``close()`` (or leaving the ``with`` block, which then raises the
    first handler error) ends every connection and joins the threads (bounded).

    Args:
        handler: runs on each accepted connection's thread.
        refuse: given the upgrade request, a :class:`Refusal` to answer instead (``None``: accept).
        ssl_context: a server-side TLS context: the server speaks ``wss://`` (its certificate must
            name ``127.0.0.1`` or ``localhost``).
        join_timeout: seconds ``close()`` waits for each thread.

    Attributes:
        url: ``ws://127.0.0.1:PORT`` (``wss://`` with an ``ssl_context``).
        requests: every upgrade request, as it arrived.
        peers: every accepted :class:`ServerPeer`, as it was accepted (:meth:`peer` takes the next).
        bad_requests: connections that sent something other than an HTTP upgrade request (closed).
        errors: exceptions a handler raised (other than the client closing).
    """

    def __init__(
        self,
        handler: Callable[[ServerPeer], None],
        *,
        refuse: Callable[[wsproto.events.Request], Refusal | None] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        join_timeout: float = 5.0,
    ) -> None:
        self._handler = handler
        self._refuse = refuse
        self._ssl_context = ssl_context
        self._join_timeout = join_timeout
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.url = f"{'wss' if ssl_context is not None else 'ws'}://127.0.0.1:{self.port}"
        self.requests: queue.Queue[wsproto.events.Request] = queue.Queue()
        self.peers: queue.Queue[ServerPeer] = queue.Queue()
        self.errors: list[BaseException] = []
        self.bad_requests = 0  # connections whose first bytes were not an HTTP upgrade request
        self._threads: list[threading.Thread] = []
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._accepting = threading.Thread(target=self._accept, name="rxllm-ws-stub-accept", daemon=True)
        self._accepting.start()

    def __enter__(self) -> WebSocketServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
        if self.errors and kind is None:
            raise self.errors[0]

    def peer(self, timeout: float = 10.0) -> ServerPeer:
        """The next accepted connection (waits for it)."""
        return self.peers.get(timeout=timeout)

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
            if self._ssl_context is not None:
                sock = self._ssl_context.wrap_socket(sock, server_side=True)
            with sock:
                ws = wsproto.WSConnection(wsproto.ConnectionType.SERVER)
                request = None
                while request is None:
                    data = sock.recv(65536)
                    if not data:
                        return
                    try:
                        ws.receive_data(data)
                        request = next((e for e in ws.events() if isinstance(e, wsproto.events.Request)), None)
                    except wsproto.utilities.RemoteProtocolError:  # not an HTTP upgrade (e.g. a TLS hello)
                        self.bad_requests += 1
                        return
                self.requests.put(request)
                refusal = self._refuse(request) if self._refuse is not None else None
                if refusal is not None:
                    headers = [*refusal.headers, (b"content-length", str(len(refusal.body)).encode())]
                    sock.sendall(ws.send(wsproto.events.RejectConnection(refusal.status, headers, has_body=True)))
                    sock.sendall(ws.send(wsproto.events.RejectData(refusal.body)))
                    return
                sock.sendall(ws.send(wsproto.events.AcceptConnection()))
                peer = ServerPeer(sock, ws, request)
                self.peers.put(peer)
                self._handler(peer)
        except (PeerClosedError, OSError):
            pass
        except BaseException as exc:  # surfaced through ``errors``
            self.errors.append(exc)
