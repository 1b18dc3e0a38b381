"""WebSocket connections over an httpx2 client: the seam a live (BIDI) model session talks through.

A live session (``BaseLlm.connect`` → :class:`~rxllm.BaseLlmConnection`, as ADK Java's
``GeminiLlmConnection``) sends and receives whole messages over one WebSocket. This module opens
that socket through the user's ``httpx2.Client`` / ``httpx2.AsyncClient`` (its proxy, TLS settings,
default headers, auth, cookies and ``base_url`` all apply to the upgrade request) and then speaks
RFC 6455 itself with wsproto on the upgraded network stream. The surface, internal to rxllm::

    connection = connect_websocket(client, "wss://host/live?key=...", headers=..., limits=...)
    connection.start(sink)          # sink.on_message(str | bytes), then on_closed(code, reason) or on_error(error)
    connection.send_text("...")     # blocks until written; raises an RxLlmError
    connection.send_bytes(b"...")
    connection.close(1000, "bye")   # any thread, any number of times

    connection = await aconnect_websocket(async_client, url, ...)
    connection.start(sink)          # on the loop; on_message may return an awaitable (awaited in order)
    await connection.send_text("...")
    connection.close()              # any thread; ``await connection.aclose()`` also waits for the socket

Behaviour both share:

* **Messages.** Text frames arrive as ``str``, binary as ``bytes``; fragments are joined, and a
  message (joined) larger than :attr:`WebSocketLimits.max_message_bytes` fails the connection with
  :class:`~rxllm.ResponseTooLargeError` (close code 1009). A reader takes every frame off the socket
  as it comes (answering the server's pings at once) and queues whole messages for the sink; more
  than :attr:`WebSocketLimits.queue_size` waiting fails the connection with
  :class:`~rxllm.BufferOverflowError` (close code 1008) after the queued ones were delivered:
  memory stays bounded and nothing is dropped silently.
* **Keep-alive.** Every :attr:`~WebSocketLimits.ping_interval` seconds without an outstanding ping
  the client sends one; no pong within :attr:`~WebSocketLimits.ping_timeout` fails the connection
  with :class:`~rxllm.StreamTimeoutError` (``limit="pong"``).
* **Closing.** ``close(code, reason)`` may be called from any thread (also from inside the sink),
  returns at once and is idempotent: it writes the close frame (waiting at most
  :attr:`~WebSocketLimits.close_timeout` for a send in progress), then shuts the socket down, which
  wakes a reader blocked on it (closing a stream from another thread would not); the server sees the
  close frame, then the end of the connection. The sink then gets ``on_closed(code, reason)`` and no
  further message. A server's close frame with 1000 (or none) ends with ``on_closed``; any other
  code with :class:`~rxllm._core.errors.WebSocketClosedError`; the connection ending without a close
  frame with :class:`~rxllm.StreamInterruptedError`; a frame breaking RFC 6455 with
  :class:`~rxllm.ProtocolError` (close code 1002/1007).
* **Errors.** Exactly one of ``on_closed`` / ``on_error`` reaches the sink, once, after every
  message it will get. A refused upgrade raises :class:`~rxllm.HttpStatusError` (status, the body's
  message, request id, ``Retry-After``); a connection that cannot be made raises
  :class:`~rxllm.TransportError` / :class:`~rxllm.StreamTimeoutError`. Every message has the
  request's secrets (credential headers, the client's too, and credential query values such as
  ``?key=``) cut out (:mod:`rxllm._core.redact`); the connection's repr shows the redacted URL.

The upgrade request is httpx2's own (``Client.build_request`` + ``send(stream=True)``, so mounts,
event hooks and transports the user configured apply); the ``Sec-WebSocket-Accept`` answer is
checked. httpx2's ``Client.websocket`` session is not used: it blocks its reader when the queue is
full (the server's pings then go unanswered), leaves a thread blocked on the socket after ``close``,
and starts a thread pool per session. Only this room imports httpx2, httpcore2 and wsproto.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import inspect
import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpcore2
import httpx2
import wsproto
import wsproto.connection
import wsproto.events
import wsproto.utilities

from .._core.errors import (
    BufferOverflowError,
    ConfigurationError,
    ProtocolError,
    ResponseTooLargeError,
    RxLlmError,
    StreamInterruptedError,
    StreamTimeoutError,
    TransportError,
    WebSocketClosedError,
)
from .._core.redact import Redactor
from .._core.threads import daemon_thread
from .base import status_error_of

__all__ = [
    "AsyncWebSocketConnection",
    "AsyncWebSocketSink",
    "WebSocketConnection",
    "WebSocketLimits",
    "WebSocketMessage",
    "WebSocketSink",
    "aconnect_websocket",
    "connect_websocket",
]

_log = logging.getLogger("rxllm.http")

WebSocketMessage = str | bytes
"""One whole message: ``str`` from a text frame, ``bytes`` from a binary one."""

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 §1.3
_MAX_ERROR_BODY = 64 * 1024
_NORMAL_CODES = frozenset({1000, 1005})  # 1005: a close frame without a code
_OPEN = wsproto.connection.ConnectionState.OPEN
_REMOTE_CLOSING = wsproto.connection.ConnectionState.REMOTE_CLOSING


@dataclass(frozen=True, slots=True)
class WebSocketLimits:
    """The bounds of one WebSocket connection.

    Attributes:
        max_message_bytes: the largest message (fragments joined; text counted in UTF-8 bytes) the
            client accepts; a larger one fails the connection (``ResponseTooLargeError``).
        queue_size: how many received messages may wait for the sink; one more fails the
            connection (``BufferOverflowError``).
        ping_interval: seconds between keep-alive pings; ``None`` sends none.
        ping_timeout: seconds a ping may wait for its pong before the connection fails.
        write_timeout: seconds one send may take (the server not reading blocks it).
        close_timeout: seconds ``close()`` waits for a send in progress and for the close frame's
            write before it shuts the socket down regardless.
        read_size: bytes asked of the socket per read.
    """

    max_message_bytes: int = 16 * 1024 * 1024
    queue_size: int = 1024
    ping_interval: float | None = 20.0
    ping_timeout: float = 20.0
    write_timeout: float = 30.0
    close_timeout: float = 1.0
    read_size: int = 64 * 1024

    def __post_init__(self) -> None:
        for name in ("max_message_bytes", "queue_size", "read_size"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"WebSocketLimits.{name} must be at least 1, got {getattr(self, name)}")
        for name in ("ping_timeout", "write_timeout", "close_timeout"):
            if not getattr(self, name) > 0:
                raise ConfigurationError(f"WebSocketLimits.{name} must be positive, got {getattr(self, name)}")
        if self.ping_interval is not None and not self.ping_interval > 0:
            raise ConfigurationError(f"WebSocketLimits.ping_interval must be positive or None: {self.ping_interval}")


class WebSocketSink(Protocol):
    """Where a sync connection delivers, on its own delivery thread, in order."""

    def on_message(self, message: WebSocketMessage) -> None:
        """One whole message."""

    def on_closed(self, code: int, reason: str) -> None:
        """The session ended normally: by ``close(code, reason)``, or by the server's 1000 close."""

    def on_error(self, error: RxLlmError) -> None:
        """The session failed; nothing follows."""


class AsyncWebSocketSink(Protocol):
    """Where an async connection delivers, on its loop, in order; ``on_message`` may return an
    awaitable, awaited before the next message is delivered (the queue fills meanwhile)."""

    def on_message(self, message: WebSocketMessage) -> Awaitable[None] | None:
        """One whole message."""

    def on_closed(self, code: int, reason: str) -> None:
        """The session ended normally: by ``close(code, reason)``, or by the server's 1000 close."""

    def on_error(self, error: RxLlmError) -> None:
        """The session failed; nothing follows."""


@dataclass(frozen=True, slots=True)
class _Closed:
    code: int
    reason: str


_Terminal = _Closed | RxLlmError


# --------------------------------------------------------------------------------------------
# What both connections share: the handshake's request and checks, the protocol, the errors.


def _upgrade_headers(headers: Mapping[str, str] | None, subprotocols: list[str] | None) -> tuple[dict[str, str], str]:
    key = base64.b64encode(os.urandom(16)).decode("ascii")
    merged = dict(headers or {})
    merged.update(
        {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Key": key, "Sec-WebSocket-Version": "13"}
    )
    if subprotocols:
        merged["Sec-WebSocket-Protocol"] = ", ".join(subprotocols)
    return merged, key


def _redactor_of(request: httpx2.Request) -> Redactor:
    """The secrets of the upgrade request as sent: the client's default headers and auth included."""
    return Redactor.of_request(str(request.url), dict(request.headers.items()))


def _check_accept(response: httpx2.Response, key: str, provider: str | None) -> None:
    expected = base64.b64encode(hashlib.sha1(key.encode("ascii") + _GUID).digest()).decode("ascii")
    if response.headers.get("upgrade", "").lower() != "websocket":
        raise ProtocolError("the server answered 101 without 'Upgrade: websocket'", provider=provider)
    if response.headers.get("sec-websocket-accept") != expected:
        raise ProtocolError("the server's Sec-WebSocket-Accept does not match the request's key", provider=provider)


def _network_stream(response: httpx2.Response, provider: str | None) -> Any:
    stream = response.extensions.get("network_stream")
    if stream is None:
        raise ProtocolError(
            "the client's transport gave no network stream for the WebSocket upgrade "
            "(a mock or custom transport cannot carry a WebSocket)",
            provider=provider,
        )
    return stream


class _ErrorBody:
    """At most 64 KiB of a refused upgrade's body."""

    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data = b""

    def add(self, piece: bytes) -> bool:
        """Append ``piece``; ``True`` once the cap is reached."""
        self.data = (self.data + piece)[:_MAX_ERROR_BODY]
        return len(self.data) >= _MAX_ERROR_BODY


_TIMEOUT_LIMITS: tuple[tuple[type[Exception], str], ...] = (
    (httpx2.ConnectTimeout, "connect"),
    (httpx2.ReadTimeout, "first_byte"),
    (httpx2.WriteTimeout, "write"),
    (httpx2.PoolTimeout, "pool"),
)


def _handshake_error(error: Exception, redactor: Redactor, provider: str | None, scheme: str = "") -> RxLlmError:
    """An httpx2 error of the upgrade request in rxllm's tree, secrets cut out."""
    text = redactor.redact(str(error) or type(error).__name__)
    if scheme == "ws" and "SSL" in text:
        # httpcore2 (2.16) tunnels every non-http origin through an HTTP proxy with CONNECT, then
        # starts TLS inside the tunnel, plain ws:// included: the server answers TLS with nothing.
        text += (" (a plain ws:// URL through an HTTP proxy: httpx2 starts TLS inside the tunnel; use wss://, "
                 "or leave the host out of the proxy, e.g. with NO_PROXY)")
    if isinstance(error, httpx2.TimeoutException):
        limit = next((name for kind, name in _TIMEOUT_LIMITS if isinstance(error, kind)), "connect")
        return StreamTimeoutError(f"WebSocket upgrade: {limit} timeout ({text})", limit=limit, provider=provider)
    if isinstance(error, httpx2.UnsupportedProtocol | httpx2.InvalidURL):
        return ConfigurationError(f"WebSocket URL not usable: {text}", provider=provider)
    return TransportError(f"WebSocket upgrade failed: {text}", provider=provider)


def _raw_socket(stream: Any) -> Any:
    with contextlib.suppress(Exception):
        return stream.get_extra_info("socket")
    return None


def _shutdown(sock: Any) -> None:
    """Shut the OS socket down: wakes a reader blocked on it, and the peer sees the end at once.
    The base-class method on an ``SSLSocket`` (its own would also drop the TLS object under the
    reader); an asyncio ``TransportSocket``'s ``shutdown`` is the OS socket's."""
    if sock is None:
        return
    with contextlib.suppress(OSError, ValueError):
        if isinstance(sock, socket.socket):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        else:
            sock.shutdown(socket.SHUT_RDWR)


def _failure_code(error: RxLlmError) -> int:
    """The close code a client-side failure sends: 1009 message too big, 1008 the consumer fell
    behind (policy), 1011 anything else (a missed pong, a broken write)."""
    if isinstance(error, ResponseTooLargeError):
        return 1009
    return 1008 if isinstance(error, BufferOverflowError) else 1011


def _check_close_code(code: int) -> None:
    # RFC 6455 §7.4: 1005, 1006 and 1015 are never sent; 1000-2999 are the protocol's, 3000-4999 free.
    if not (code in (1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011) or 3000 <= code <= 4999):
        raise ConfigurationError(f"a WebSocket close code must be 1000-1003, 1007-1011 or 3000-4999, got {code}")


class _Protocol:
    """The sans-IO half both connections share: wsproto plus whole messages, the size cap, the
    keep-alive clock and what ends a session. Callers hold their own lock around it."""

    __slots__ = (
        "_conn",
        "_limits",
        "_next_ping",
        "_parts",
        "_ping_payload",
        "_pong_due",
        "_provider",
        "_redactor",
        "_size",
    )

    def __init__(self, limits: WebSocketLimits, redactor: Redactor, provider: str | None, trailing: bytes) -> None:
        self._conn = wsproto.connection.Connection(wsproto.ConnectionType.CLIENT)
        self._limits = limits
        self._redactor = redactor
        self._provider = provider
        self._parts: list[str | bytes] = []
        self._size = 0
        self._ping_payload: bytes | None = None
        self._pong_due: float | None = None
        interval = limits.ping_interval
        self._next_ping: float | None = None if interval is None else time.monotonic() + interval
        if trailing:
            self._conn.receive_data(trailing)

    @property
    def open(self) -> bool:
        return self._conn.state is _OPEN

    def message(self, message: WebSocketMessage) -> bytes:
        """The frame of one outgoing message (raises ``wsproto`` ``LocalProtocolError`` once closing)."""
        event: wsproto.events.Event = (
            wsproto.events.TextMessage(data=message)
            if isinstance(message, str)
            else wsproto.events.BytesMessage(data=message)
        )
        return self._conn.send(event)

    def close_frame(self, code: int, reason: str) -> bytes:
        """The close frame, or nothing when one was already sent."""
        if self._conn.state in (_OPEN, _REMOTE_CLOSING):
            return self._conn.send(wsproto.events.CloseConnection(code=code, reason=reason or None))
        return b""

    def wakeup(self) -> float | None:
        """Seconds until the keep-alive clock wants attention (``None``: never)."""
        due = self._pong_due if self._pong_due is not None else self._next_ping
        return None if due is None else max(0.0, due - time.monotonic())

    def keepalive(self) -> tuple[bytes, RxLlmError | None]:
        """A ping to send now, or the error of a pong that did not come in time."""
        now = time.monotonic()
        if self._pong_due is not None:
            if now < self._pong_due:
                return b"", None
            return b"", StreamTimeoutError(
                f"no pong within {self._limits.ping_timeout:g} s of the WebSocket keep-alive ping",
                limit="pong",
                provider=self._provider,
            )
        if self._next_ping is None or now < self._next_ping or not self.open:
            return b"", None
        self._ping_payload = os.urandom(8)
        self._pong_due = now + self._limits.ping_timeout
        return self._conn.send(wsproto.events.Ping(payload=self._ping_payload)), None

    def receive(self, data: bytes) -> tuple[bytes, list[WebSocketMessage], _Terminal | None]:
        """Feed bytes read: what to write back (pongs, close frames), the whole messages, the end."""
        self._conn.receive_data(data)
        out = b""
        messages: list[WebSocketMessage] = []
        for event in self._conn.events():
            if isinstance(event, wsproto.events.Message):
                data_part: str | bytes = event.data if isinstance(event.data, str) else bytes(event.data)
                self._size += len(data_part.encode()) if isinstance(data_part, str) else len(data_part)
                if self._size > self._limits.max_message_bytes:
                    error = ResponseTooLargeError(
                        f"a WebSocket message grew past {self._limits.max_message_bytes} bytes",
                        limit_bytes=self._limits.max_message_bytes,
                        provider=self._provider,
                    )
                    return out + self.close_frame(1009, "message too big"), messages, error
                self._parts.append(data_part)
                if event.message_finished:
                    parts, self._parts, self._size = self._parts, [], 0
                    if isinstance(data_part, str):
                        messages.append("".join(p for p in parts if isinstance(p, str)))
                    else:
                        messages.append(b"".join(p for p in parts if isinstance(p, bytes)))
            elif isinstance(event, wsproto.events.Ping):
                out += self._conn.send(event.response())
            elif isinstance(event, wsproto.events.Pong):
                if self._ping_payload is not None and bytes(event.payload) == self._ping_payload:
                    self._ping_payload = self._pong_due = None
                    if self._limits.ping_interval is not None:
                        self._next_ping = time.monotonic() + self._limits.ping_interval
            elif isinstance(event, wsproto.events.CloseConnection):
                reason = self._redactor.redact(event.reason or "")
                if self._conn.state is _OPEN:  # wsproto's own verdict on a frame breaking RFC 6455
                    out += self.close_frame(event.code, "")
                    return out, messages, ProtocolError(
                        f"the server sent a WebSocket frame the protocol does not allow: {reason}",
                        provider=self._provider,
                    )
                out += self.close_frame(event.code if event.code not in (1005, 1006) else 1000, "")
                if event.code in _NORMAL_CODES:
                    return out, messages, _Closed(event.code, reason)
                return out, messages, WebSocketClosedError(event.code, reason, provider=self._provider)
        return out, messages, None

    def interrupted(self) -> RxLlmError:
        return StreamInterruptedError(
            "the WebSocket connection ended without a close frame (1006)", provider=self._provider
        )


class _Delivery:
    """The bounded queue between a reader and the sink, and the session's one terminal event.

    The reader ``put``s messages and ``end``s once; ``close`` (local) ends it too and drops what
    the sink has not started on. Guarded by a plain lock; the waiting is the owner's
    (a ``threading.Condition`` or an ``asyncio.Event`` poked by ``wake``)."""

    __slots__ = ("_lock", "_queue", "_size", "dropped", "provider", "terminal", "wake")

    def __init__(self, size: int, provider: str | None, wake: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._queue: deque[WebSocketMessage] = deque()
        self._size = size
        self.provider = provider
        self.terminal: _Terminal | None = None
        self.dropped = False  # a local close: undelivered messages are discarded
        self.wake = wake

    def put(self, message: WebSocketMessage) -> bool:
        """Queue one message; ``False`` (and the overflow error as the end) when the queue is full."""
        with self._lock:
            if self.terminal is not None:
                return True
            if len(self._queue) >= self._size:
                self.terminal = BufferOverflowError(
                    f"more than {self._size} WebSocket messages waiting for the consumer", provider=self.provider
                )
                overflow = True
            else:
                self._queue.append(message)
                overflow = False
        self.wake()
        return not overflow

    def end(self, terminal: _Terminal, *, drop: bool = False) -> bool:
        """Set the terminal event (the first one wins); ``True`` if this call set it."""
        with self._lock:
            if drop:
                self.dropped = True
                self._queue.clear()
            if self.terminal is not None:
                return False
            self.terminal = terminal
        self.wake()
        return True

    def take(self) -> tuple[WebSocketMessage | None, _Terminal | None]:
        """The next message, else the terminal event once the queue is empty, else nothing yet."""
        with self._lock:
            if self._queue:
                return self._queue.popleft(), None
            return None, self.terminal


def _deliver_terminal(sink: WebSocketSink | AsyncWebSocketSink, terminal: _Terminal) -> None:
    if isinstance(terminal, _Closed):
        sink.on_closed(terminal.code, terminal.reason)
    else:
        sink.on_error(terminal)


# --------------------------------------------------------------------------------------------
# The sync connection: a reader thread on the socket, a delivery thread for the sink.


class WebSocketConnection:
    """One open WebSocket over an ``httpx2.Client`` (see the module docstring). Made by
    :func:`connect_websocket`.

    Three threads: the reader (blocked on the socket, answering pings, queueing messages), the
    delivery thread (started by :meth:`start`, calling the sink) and the clock (keep-alive pings,
    the pong deadline and the write deadline). Every socket call is made without a socket
    timeout: the socket's timeout is one setting shared by the threads using it, so the clock
    enforces the deadlines by shutting the socket down instead.
    """

    def __init__(
        self,
        response: httpx2.Response,
        stream: Any,
        *,
        url: str,
        limits: WebSocketLimits,
        redactor: Redactor,
        provider: str | None,
    ) -> None:
        self._response = response
        self._stream = stream
        self._sock = _raw_socket(stream)
        self._limits = limits
        self._provider = provider
        self._url = url
        self.subprotocol: str | None = response.headers.get("sec-websocket-protocol")
        self._proto = _Protocol(limits, redactor, provider, b"")
        self._proto_lock = threading.Lock()  # wsproto is one state machine for both directions
        self._write_lock = threading.Lock()
        self._ready = threading.Condition()  # the delivery thread waits on it
        self._delivery = _Delivery(limits.queue_size, provider, self._notify)
        self._clock = threading.Condition()  # the clock thread waits on it
        self._write_deadline: float | None = None  # time.monotonic() by which the write in progress must end
        self._write_timed_out = False
        self._closing = False
        self._state_lock = threading.Lock()
        self._sink: WebSocketSink | None = None
        self._reader_done = threading.Event()
        self._delivered = threading.Event()
        daemon_thread(self._read_loop, "rxllm-ws-read")
        daemon_thread(self._clock_loop, "rxllm-ws-clock")

    def __repr__(self) -> str:
        return f"WebSocketConnection(url={self._url!r}, state={self.state!r})"

    @property
    def state(self) -> str:
        """``"open"``, ``"closing"`` (closed locally, or ended; the socket not yet released) or ``"closed"``."""
        if self._reader_done.is_set():
            return "closed"
        return "closing" if self._closing or self._delivery.terminal is not None else "open"

    def start(self, sink: WebSocketSink) -> None:
        """Deliver to ``sink`` from now on, on the connection's delivery thread (messages that
        arrived before wait in the queue). Once per connection."""
        with self._state_lock:
            if self._sink is not None:
                raise ConfigurationError("this WebSocket connection already delivers to a sink")
            self._sink = sink
        daemon_thread(self._deliver_loop, "rxllm-ws-deliver")

    def send_text(self, text: str) -> None:
        """Send one text message; returns once written to the socket."""
        self._send(text)

    def send_bytes(self, data: bytes) -> None:
        """Send one binary message; returns once written to the socket."""
        self._send(bytes(data))

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Close now, from any thread, any number of times (the first call's code and reason count)."""
        _check_close_code(code)
        with self._state_lock:
            if self._closing:
                return
            self._closing = True
        self._delivery.end(_Closed(code, reason), drop=True)
        self._write_close_frame(code, reason)
        self._release()

    def wait_closed(self, timeout: float | None = None) -> bool:
        """Wait until the socket is released and, once started, the sink got its terminal event."""
        if not self._reader_done.wait(timeout):
            return False
        return self._sink is None or self._delivered.wait(timeout)

    # -- internals

    def _notify(self) -> None:
        with self._ready:
            self._ready.notify_all()

    def _poke_clock(self) -> None:
        with self._clock:
            self._clock.notify_all()

    def _release(self) -> None:
        """Shut the socket down (the reader wakes, closes the stream and the response)."""
        _shutdown(self._sock)
        if self._sock is None:  # no OS socket to shut down (a TLS-in-TLS proxy tunnel): close it
            with contextlib.suppress(Exception):
                self._stream.close()
        self._poke_clock()

    def _write_close_frame(self, code: int, reason: str) -> None:
        """The close frame, best effort: skipped when a send in progress holds the socket too long."""
        if not self._write_lock.acquire(timeout=self._limits.close_timeout):
            return
        try:
            with self._proto_lock:
                frame = self._proto.close_frame(code, reason)
            if frame:
                with contextlib.suppress(httpcore2.NetworkError, httpcore2.TimeoutException, OSError):
                    self._timed_write(frame, self._limits.close_timeout)
        finally:
            self._write_lock.release()

    def _timed_write(self, data: bytes, limit: float) -> None:
        """Write under the write lock; the clock shuts the socket down if it takes over ``limit`` s."""
        self._write_deadline = time.monotonic() + limit
        self._poke_clock()
        try:
            self._stream.write(data, None)
        finally:
            self._write_deadline = None

    def _send(self, message: WebSocketMessage) -> None:
        if not self._write_lock.acquire(timeout=self._limits.write_timeout):
            raise StreamTimeoutError(
                "a WebSocket send waited too long for the one before it", limit="write", provider=self._provider
            )
        try:
            if self._closing or self._delivery.terminal is not None:
                raise TransportError("the WebSocket connection is closed", provider=self._provider)
            with self._proto_lock:
                frame = self._proto.message(message)
            self._timed_write(frame, self._limits.write_timeout)
        except (httpcore2.NetworkError, httpcore2.TimeoutException, OSError) as exc:
            error: RxLlmError
            if self._write_timed_out:
                error = StreamTimeoutError(
                    f"a WebSocket send did not finish within {self._limits.write_timeout:g} s",
                    limit="write",
                    provider=self._provider,
                )
            elif self._closing:
                error = TransportError("the WebSocket connection is closed", provider=self._provider)
            else:
                error = StreamInterruptedError("the WebSocket connection broke while sending", provider=self._provider)
                self._delivery.end(error)
                self._release()
            raise error from exc
        finally:
            self._write_lock.release()

    def _write(self, data: bytes) -> None:
        """Write control frames from the reader or the clock (pongs, pings, close frames)."""
        if not data:
            return
        if not self._write_lock.acquire(timeout=self._limits.write_timeout):
            raise httpcore2.WriteTimeout("the write lock was held too long")
        try:
            self._timed_write(data, self._limits.write_timeout)
        finally:
            self._write_lock.release()

    def _fail(self, error: RxLlmError) -> None:
        """End with ``error`` (unless the session already ended) and release the socket after a
        best-effort close frame whose code says why."""
        self._delivery.end(error)
        terminal = self._delivery.terminal
        self._write_close_frame(_failure_code(terminal if isinstance(terminal, RxLlmError) else error), "")
        self._release()

    def _read_loop(self) -> None:
        try:
            self._read_until_the_end()
        finally:
            _shutdown(self._sock)
            got_lock = self._write_lock.acquire(timeout=self._limits.close_timeout)  # a send's last moment
            try:
                with contextlib.suppress(Exception):
                    self._stream.close()
                with contextlib.suppress(Exception):
                    self._response.close()
            finally:
                if got_lock:
                    self._write_lock.release()
            self._reader_done.set()
            self._poke_clock()
            self._notify()

    def _read_until_the_end(self) -> None:
        proto, lock, delivery = self._proto, self._proto_lock, self._delivery
        while True:
            try:
                data = self._stream.read(self._limits.read_size, None)
            except httpcore2.ReadTimeout:
                continue  # a socket timeout left by a write racing this read: read again
            except (httpcore2.NetworkError, OSError):
                if not self._closing:
                    delivery.end(proto.interrupted())
                return
            if data == b"":
                delivery.end(proto.interrupted())  # no effect when the session already ended
                return
            if self._closing or delivery.terminal is not None:
                continue  # whoever ended the session writes its close frame, then shuts the socket down
            with lock:
                out, messages, terminal = proto.receive(data)
            for message in messages:
                if not delivery.put(message):
                    self._fail(proto.interrupted())  # the overflow error already ended the session: its code counts
                    return
            try:
                self._write(out)
            except (httpcore2.NetworkError, httpcore2.TimeoutException, OSError):
                if terminal is None:
                    self._fail(proto.interrupted())
                    return
            if terminal is not None:
                delivery.end(terminal)
                return
            self._poke_clock()  # a pong may have moved the keep-alive clock

    def _clock_loop(self) -> None:
        proto, limits = self._proto, self._limits
        while not self._reader_done.is_set():
            with self._proto_lock:
                wait = proto.wakeup()
                ping, error = proto.keepalive()
            if error is not None:
                self._fail(error)
                return
            if ping and self._write_lock.acquire(blocking=False):  # a send in progress: ping later
                try:
                    self._timed_write(ping, limits.write_timeout)
                except (httpcore2.NetworkError, httpcore2.TimeoutException, OSError):
                    if not self._closing:
                        self._fail(proto.interrupted())
                    return
                finally:
                    self._write_lock.release()
                continue
            deadline = self._write_deadline
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._write_timed_out = True
                    self._delivery.end(
                        StreamTimeoutError(
                            f"a WebSocket write did not finish within {limits.write_timeout:g} s",
                            limit="write",
                            provider=self._provider,
                        )
                    )
                    self._release()
                    return
                wait = left if wait is None else min(wait, left)
            if ping:  # the ping waits for the send in progress; look again soon
                wait = 0.05 if wait is None else min(wait, 0.05)
            with self._clock:
                if not self._reader_done.is_set() and self._write_deadline is deadline:
                    self._clock.wait(wait)

    def _deliver_loop(self) -> None:
        sink = self._sink
        assert sink is not None
        delivery = self._delivery
        try:
            while True:
                with self._ready:
                    while True:
                        message, terminal = delivery.take()
                        if message is not None or terminal is not None:
                            break
                        self._ready.wait()
                if message is not None:
                    sink.on_message(message)
                    continue
                assert terminal is not None
                _deliver_terminal(sink, terminal)
                return
        except Exception as exc:  # a sink that raises ends the session, and is not lost silently
            _log.error("a WebSocket sink raised; the connection is closed", exc_info=exc)
            self.close(1011, "")
        finally:
            self._delivered.set()


def connect_websocket(
    client: httpx2.Client,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    subprotocols: list[str] | None = None,
    limits: WebSocketLimits | None = None,
    provider: str | None = None,
) -> WebSocketConnection:
    """Open a WebSocket through ``client`` (its base URL, proxy, TLS, headers and auth apply).

    Raises:
        HttpStatusError: the server refused the upgrade (status, redacted message of the body).
        TransportError: the connection could not be made (``StreamTimeoutError`` for a timeout).
        ProtocolError: the server's answer was not a WebSocket upgrade.
        ConfigurationError: the URL cannot be used.
    """
    limits = limits or WebSocketLimits()
    merged, key = _upgrade_headers(headers, subprotocols)
    request = client.build_request("GET", url, headers=merged)
    redactor = _redactor_of(request)
    shown = redactor.url(str(request.url))
    try:
        response = client.send(request, stream=True)
    except httpx2.HTTPError as exc:
        raise _handshake_error(exc, redactor, provider, request.url.scheme) from exc
    _log.debug("WebSocket %s -> %s", shown, response.status_code)
    try:
        if response.status_code != 101:
            body = _ErrorBody()
            with contextlib.suppress(httpx2.HTTPError):
                for piece in response.iter_raw():
                    if body.add(piece):
                        break
            raise status_error_of(response, body.data, provider, redactor)
        _check_accept(response, key, provider)
        stream = _network_stream(response, provider)
    except BaseException:
        response.close()
        raise
    return WebSocketConnection(response, stream, url=shown, limits=limits, redactor=redactor, provider=provider)


# --------------------------------------------------------------------------------------------
# The async connection: a reader task and a delivery task on the loop that opened it.


class AsyncWebSocketConnection:
    """One open WebSocket over an ``httpx2.AsyncClient``, on the asyncio loop that opened it (see
    the module docstring). Made by :func:`aconnect_websocket`."""

    def __init__(
        self,
        response: httpx2.Response,
        stream: Any,
        *,
        url: str,
        limits: WebSocketLimits,
        redactor: Redactor,
        provider: str | None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._response = response
        self._stream = stream
        self._sock = _raw_socket(stream)
        self._limits = limits
        self._provider = provider
        self._url = url
        self.subprotocol: str | None = response.headers.get("sec-websocket-protocol")
        self._proto = _Protocol(limits, redactor, provider, b"")
        self._write_lock = asyncio.Lock()
        self._ready = asyncio.Event()
        self._delivery = _Delivery(limits.queue_size, provider, self._notify)
        self._state_lock = threading.Lock()
        self._closing = False
        self._sink: AsyncWebSocketSink | None = None
        self._done = asyncio.Event()
        self._delivered = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._tick = asyncio.Event()  # a pong came: the keep-alive clock looks again
        self._reader = self._spawn(self._read_loop())
        self._clock = self._spawn(self._clock_loop()) if limits.ping_interval is not None else None

    def __repr__(self) -> str:
        return f"AsyncWebSocketConnection(url={self._url!r}, state={self.state!r})"

    @property
    def state(self) -> str:
        """``"open"``, ``"closing"`` (closed locally, or ended; the socket not yet released) or ``"closed"``."""
        if self._done.is_set():
            return "closed"
        return "closing" if self._closing or self._delivery.terminal is not None else "open"

    def start(self, sink: AsyncWebSocketSink) -> None:
        """Deliver to ``sink`` from now on, on the loop (call it there). Once per connection."""
        if self._sink is not None:
            raise ConfigurationError("this WebSocket connection already delivers to a sink")
        self._sink = sink
        self._spawn(self._deliver_loop(sink))

    async def send_text(self, text: str) -> None:
        """Send one text message; returns once written."""
        await self._send(text)

    async def send_bytes(self, data: bytes) -> None:
        """Send one binary message; returns once written."""
        await self._send(bytes(data))

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Close now, from any thread, any number of times (the first call's code and reason count).
        On another thread the close is handed to the loop."""
        _check_close_code(code)
        with self._state_lock:
            if self._closing:
                return
            self._closing = True
        self._delivery.end(_Closed(code, reason), drop=True)
        try:
            on_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self._spawn(self._close(code, reason))
        else:
            with contextlib.suppress(RuntimeError):  # a closed loop: its sockets are gone with it
                self._loop.call_soon_threadsafe(lambda: self._spawn(self._close(code, reason)))

    async def aclose(self, code: int = 1000, reason: str = "") -> None:
        """``close`` and wait until the socket is released (on the loop)."""
        self.close(code, reason)
        await self._done.wait()

    async def wait_closed(self) -> None:
        """Wait until the socket is released and, once started, the sink got its terminal event."""
        await self._done.wait()
        if self._sink is not None:
            await self._delivered.wait()

    # -- internals

    def _spawn(self, coroutine: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = self._loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _notify(self) -> None:
        try:
            on_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self._ready.set()
        else:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._ready.set)

    async def _close(self, code: int, reason: str) -> None:
        try:
            async with asyncio.timeout(self._limits.close_timeout):
                async with self._write_lock:
                    frame = self._proto.close_frame(code, reason)
                    if frame:
                        await self._stream.write(frame, self._limits.close_timeout)
        except (TimeoutError, httpcore2.NetworkError, httpcore2.TimeoutException, OSError):
            pass
        self._release()

    def _release(self) -> None:
        _shutdown(self._sock)
        current = asyncio.current_task()
        for task in (self._reader, self._clock):  # a cancelled read wakes at once; the reader then closes
            if task is not None and task is not current:
                task.cancel()

    async def _send(self, message: WebSocketMessage) -> None:
        try:
            async with asyncio.timeout(self._limits.write_timeout):
                async with self._write_lock:
                    if self._closing or self._delivery.terminal is not None:
                        raise TransportError("the WebSocket connection is closed", provider=self._provider)
                    await self._stream.write(self._proto.message(message), self._limits.write_timeout)
        except (TimeoutError, httpcore2.WriteTimeout) as exc:
            error: RxLlmError = StreamTimeoutError(
                "a WebSocket send did not finish in time", limit="write", provider=self._provider
            )
            await self._fail(error)
            raise error from exc
        except (httpcore2.NetworkError, OSError) as exc:
            if self._closing:
                raise TransportError("the WebSocket connection is closed", provider=self._provider) from exc
            error = StreamInterruptedError("the WebSocket connection broke while sending", provider=self._provider)
            await self._fail(error)
            raise error from exc

    async def _write(self, data: bytes) -> None:
        if data:
            async with asyncio.timeout(self._limits.write_timeout), self._write_lock:
                await self._stream.write(data, self._limits.write_timeout)

    async def _fail(self, error: RxLlmError) -> None:
        self._delivery.end(error)
        terminal = self._delivery.terminal
        code = _failure_code(terminal if isinstance(terminal, RxLlmError) else error)
        with contextlib.suppress(TimeoutError, httpcore2.NetworkError, httpcore2.TimeoutException, OSError):
            async with asyncio.timeout(self._limits.close_timeout):
                await self._write(self._proto.close_frame(code, ""))
        self._release()

    async def _read_loop(self) -> None:
        try:
            await self._read_until_the_end()
        except asyncio.CancelledError:
            pass
        finally:
            _shutdown(self._sock)
            try:
                await asyncio.shield(self._aclose_stream())
            finally:
                if self._clock is not None:
                    self._clock.cancel()
                self._done.set()
                self._ready.set()

    async def _aclose_stream(self) -> None:
        with contextlib.suppress(Exception):
            await self._stream.aclose()
        with contextlib.suppress(Exception):
            await self._response.aclose()

    async def _read_until_the_end(self) -> None:
        proto = self._proto
        while True:
            try:
                data = await self._stream.read(self._limits.read_size, None)
            except (httpcore2.NetworkError, httpcore2.TimeoutException, OSError):
                if not self._closing:
                    self._delivery.end(proto.interrupted())
                return
            if data == b"":
                self._delivery.end(proto.interrupted())  # no effect when the session already ended
                return
            if self._closing or self._delivery.terminal is not None:
                continue  # whoever ended the session writes its close frame, then cancels this reader
            out, messages, terminal = proto.receive(data)
            for message in messages:
                if not self._delivery.put(message):
                    await self._fail(proto.interrupted())  # the overflow already ended the session: its code counts
                    return
            try:
                await self._write(out)
            except (TimeoutError, httpcore2.NetworkError, httpcore2.TimeoutException, OSError):
                if terminal is None:
                    await self._fail(proto.interrupted())
                    return
            if terminal is not None:
                self._delivery.end(terminal)
                return
            self._tick.set()

    async def _clock_loop(self) -> None:
        proto = self._proto
        while True:
            wait = proto.wakeup()
            ping, error = proto.keepalive()
            if error is not None:
                await self._fail(error)
                return
            if ping:
                try:
                    await self._write(ping)
                except (TimeoutError, httpcore2.NetworkError, httpcore2.TimeoutException, OSError):
                    if not self._closing:
                        await self._fail(proto.interrupted())
                    return
                continue
            self._tick.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._tick.wait()

    async def _deliver_loop(self, sink: AsyncWebSocketSink) -> None:
        delivery = self._delivery
        try:
            while True:
                message, terminal = delivery.take()
                if message is None and terminal is None:
                    self._ready.clear()
                    message, terminal = delivery.take()  # a put between take() and clear()
                    if message is None and terminal is None:
                        await self._ready.wait()
                        continue
                if message is not None:
                    result = sink.on_message(message)
                    if inspect.isawaitable(result):
                        await result
                    continue
                assert terminal is not None
                _deliver_terminal(sink, terminal)
                return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a sink that raises ends the session, and is not lost silently
            _log.error("a WebSocket sink raised; the connection is closed", exc_info=exc)
            self.close(1011, "")
        finally:
            self._delivered.set()


async def aconnect_websocket(
    client: httpx2.AsyncClient,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    subprotocols: list[str] | None = None,
    limits: WebSocketLimits | None = None,
    provider: str | None = None,
) -> AsyncWebSocketConnection:
    """Open a WebSocket through ``client`` on the running loop (as :func:`connect_websocket`)."""
    limits = limits or WebSocketLimits()
    merged, key = _upgrade_headers(headers, subprotocols)
    request = client.build_request("GET", url, headers=merged)
    redactor = _redactor_of(request)
    shown = redactor.url(str(request.url))
    try:
        response = await client.send(request, stream=True)
    except httpx2.HTTPError as exc:
        raise _handshake_error(exc, redactor, provider, request.url.scheme) from exc
    _log.debug("WebSocket %s -> %s", shown, response.status_code)
    try:
        if response.status_code != 101:
            body = _ErrorBody()
            with contextlib.suppress(httpx2.HTTPError):
                async for piece in response.aiter_raw():
                    if body.add(piece):
                        break
            raise status_error_of(response, body.data, provider, redactor)
        _check_accept(response, key, provider)
        stream = _network_stream(response, provider)
    except BaseException:
        await response.aclose()
        raise
    return AsyncWebSocketConnection(response, stream, url=shown, limits=limits, redactor=redactor, provider=provider)
