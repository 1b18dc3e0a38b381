"""A WebSocket server on 127.0.0.1 for the WebSocket transport tests: wsproto over plain sockets,
one thread per connection, so a test sees exactly what reached the server (frames, close codes,
the end of the connection) and can misbehave on purpose (no pongs, no close frame, huge frames)."""

from __future__ import annotations

import contextlib
import queue
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import wsproto
import wsproto.events

TIMEOUT = 10.0  # a safety net for waits on events; nothing in a passing run waits for it


@dataclass
class Refusal:
    """An HTTP answer instead of the upgrade."""

    status: int
    body: bytes = b""
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)


class PeerClosed(Exception):
    """The client's close frame (``code``) or the end of the connection (``code`` None) arrived."""

    def __init__(self, code: int | None, reason: str | None) -> None:
        super().__init__(code, reason)
        self.code = code
        self.reason = reason


class Peer:
    """The server side of one accepted WebSocket connection."""

    def __init__(self, sock: socket.socket, ws: wsproto.WSConnection, request: wsproto.events.Request) -> None:
        self.sock = sock
        self.ws = ws
        self.request = request
        self.headers = {k.decode().lower(): v.decode() for k, v in request.extra_headers}
        self.answer_pings = True
        self.pings = 0
        self.ping_seen = threading.Event()
        self.closed = threading.Event()  # the client's close frame or EOF reached the server
        self.close_code: int | None = None  # the client's close code (None: the connection just ended)
        self.saw_eof = threading.Event()
        self._pending: list[wsproto.events.Event] = []
        self._lock = threading.Lock()

    def _send(self, event: wsproto.events.Event) -> None:
        with self._lock:
            self.sock.sendall(self.ws.send(event))

    def send_text(self, text: str) -> None:
        self._send(wsproto.events.TextMessage(data=text))

    def send_bytes(self, data: bytes) -> None:
        self._send(wsproto.events.BytesMessage(data=data))

    def send_fragments(self, pieces: list[str] | list[bytes]) -> None:
        """One message in several frames."""
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            event: wsproto.events.Event = (
                wsproto.events.TextMessage(data=piece, message_finished=last)
                if isinstance(piece, str)
                else wsproto.events.BytesMessage(data=piece, message_finished=last)
            )
            self._send(event)

    def send_raw(self, data: bytes) -> None:
        with self._lock:
            self.sock.sendall(data)

    def send_frame_header(self, opcode: int, length: int) -> None:
        """A frame header announcing ``length`` bytes (the payload follows with ``send_raw``)."""
        self.send_raw(bytes([0x80 | opcode, 127]) + struct.pack("!Q", length))

    def close(self, code: int = 1000, reason: str = "") -> None:
        self._send(wsproto.events.CloseConnection(code=code, reason=reason))

    def abort(self) -> None:
        """End the TCP connection without a close frame."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def recv(self) -> str | bytes:
        """The next message; pings are counted (and answered unless ``answer_pings`` is off).

        Raises:
            PeerClosed: the client's close frame or the connection's end came instead.
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
                    self.closed.set()
                    raise PeerClosed(event.code, event.reason)
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                self.saw_eof.set()
                self.closed.set()
                raise PeerClosed(None, None)
            self.ws.receive_data(data)
            self._pending.extend(self.ws.events())

    def until_closed(self) -> PeerClosed:
        """Read (answering pings, discarding messages) until the client closes."""
        while True:
            try:
                self.recv()
            except PeerClosed as closed:
                return closed


Handler = Callable[[Peer], None]


class WsServer:
    """Listens on 127.0.0.1; every connection's upgrade is answered by ``refuse`` (None: accept,
    then ``handler`` runs on the connection's thread). ``peers`` yields each accepted Peer."""

    def __init__(self, handler: Handler, refuse: Callable[[wsproto.events.Request], Refusal | None] | None = None):
        self._handler = handler
        self._refuse = refuse
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.url = f"ws://127.0.0.1:{self.port}"
        self.peers: queue.Queue[Peer] = queue.Queue()
        self.requests: queue.Queue[wsproto.events.Request] = queue.Queue()
        self.errors: list[BaseException] = []
        self._threads: list[threading.Thread] = []
        self._socks: list[socket.socket] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def __enter__(self) -> WsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() (close() would not)
        self._listener.close()
        for sock in self._socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(TIMEOUT)
        self._accepting.join(TIMEOUT)
        if self.errors:
            raise self.errors[0]

    def peer(self) -> Peer:
        return self.peers.get(timeout=TIMEOUT)

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self._socks.append(sock)
            thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
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
                self.requests.put(request)
                refusal = self._refuse(request) if self._refuse else None
                if refusal is not None:
                    headers = [*refusal.headers, (b"content-length", str(len(refusal.body)).encode())]
                    sock.sendall(ws.send(wsproto.events.RejectConnection(refusal.status, headers, has_body=True)))
                    sock.sendall(ws.send(wsproto.events.RejectData(refusal.body)))
                    return
                sock.sendall(ws.send(wsproto.events.AcceptConnection()))
                peer = Peer(sock, ws, request)
                self.peers.put(peer)
                self._handler(peer)
        except PeerClosed:
            pass
        except BaseException as exc:  # surfaced by __exit__
            self.errors.append(exc)


def echo(peer: Peer) -> None:
    """Send every message back until the client closes."""
    while True:
        peer.send_text(m) if isinstance(m := peer.recv(), str) else peer.send_bytes(m)
