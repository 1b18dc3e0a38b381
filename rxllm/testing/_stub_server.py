"""A loopback HTTP/1.1 stub server that streams scripted responses (SSE or anything else).

It listens on a real socket on ``127.0.0.1`` (the OS picks the port), speaks HTTP/1.1 with
keep-alive, records every request and every TCP connection, and plays each scripted
:class:`StubResponse` step by step: ``bytes`` are sent as they come (one HTTP chunk each when
chunked), :class:`Delay` and :class:`Hold` pause the body, :class:`Disconnect` ends the
connection abruptly. While a response pauses, and while a keep-alive connection waits for its
next request, the server watches the socket, so the moment the *client* closes is recorded
(:attr:`ConnectionRecord.closed_at`, :attr:`ConnectionRecord.closed_by_client`) within a few
milliseconds: tests can assert that disposing a stream really closed its connection.

Responses are served first-in first-out, one per request, whatever the path; when the queue is
empty the ``responder`` answers, and without one the server answers ``500`` with a JSON error
saying nothing was scripted, so a test fails loudly instead of hanging. Standard library only:
one thread accepts, one daemon thread serves each connection, and :meth:`StubServer.close`
stops them all (joined with a bound) and closes every socket.

Usage::

    import http.client
    import threading

    from rxllm.testing import Hold, StubResponse, StubServer

    release = threading.Event()
    script = StubResponse(body=[b"data: one\\n\\n", Hold(release), b"data: two\\n\\n"])
    with StubServer([script]) as server:
        client = http.client.HTTPConnection(server.url.removeprefix("http://"), timeout=5)
        client.request("POST", "/v1/chat/completions", body=b'{"stream": true}')
        response = client.getresponse()
        first = response.read1(65536)            # b"data: one\\n\\n", while the server holds the rest
        release.set()
        rest = response.read()                   # b"data: two\\n\\n"
        assert server.requests[0].json() == {"stream": True}
        client.close()
        assert server.connections[0].wait_closed_by_client(timeout=1.0)

Timing: a :class:`Delay` and a client close are observed with ``poll`` on the socket and a
wake-up socket pair, so without polling ticks; a :class:`Hold` also checks its ``release`` event
every few milliseconds (a ``threading.Event`` cannot be polled together with a socket).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json as _json
import math
import re
import select
import socket
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from types import MappingProxyType
from typing import Any

from .._core.errors import ConfigurationError, ProtocolError

__all__ = [
    "ConnectionRecord",
    "Delay",
    "Disconnect",
    "Hold",
    "RecordedRequest",
    "Step",
    "StubResponse",
    "StubServer",
]

_HOLD_TICK = 0.005
"""How often a :class:`Hold` checks its release event (the socket and ``close()`` wake it at once)."""
_MAX_HEAD_BYTES = 64 * 1024
_RECV_BYTES = 65536
_JOIN_SECONDS = 5.0
_FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding"})
_SSE_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")


@dataclass(frozen=True)
class Delay:
    """Pause ``seconds`` before the next step, while watching the socket for a client close.

    Attributes:
        seconds: how long to pause (finite, ``>= 0``).
    """

    seconds: float

    def __post_init__(self) -> None:
        if not (isinstance(self.seconds, int | float) and math.isfinite(self.seconds) and self.seconds >= 0):
            raise ConfigurationError(f"Delay.seconds must be a finite number >= 0, got {self.seconds!r}")


@dataclass(frozen=True)
class Hold:
    """Wait until ``release`` is set, while watching the socket for a client close.

    When ``timeout`` passes without a release the response goes on with its next step, so a
    forgotten release never hangs a test. :meth:`StubServer.close` ends every hold at once
    (without setting ``release``).

    Attributes:
        release: the event that lets the response continue.
        timeout: the longest wait in seconds (finite, ``> 0``).
    """

    release: threading.Event
    timeout: float = 30.0

    def __post_init__(self) -> None:
        if not isinstance(self.release, threading.Event):
            raise ConfigurationError(f"Hold.release must be a threading.Event, got {type(self.release).__name__}")
        if not (isinstance(self.timeout, int | float) and math.isfinite(self.timeout) and self.timeout > 0):
            raise ConfigurationError(f"Hold.timeout must be a finite number > 0, got {self.timeout!r}")


@dataclass(frozen=True)
class Disconnect:
    """A fault: end the connection abruptly at this point of the response.

    Attributes:
        reset: ``True`` sends a TCP RST (``SO_LINGER`` 0), which the client sees as a
            connection reset; ``False`` closes cleanly (FIN) without finishing the body, which
            the client sees as an early end of stream.
    """

    reset: bool = True


Step = bytes | Delay | Hold | Disconnect
"""One step of a response body: bytes to send, a pause, or a fault."""


def _default_headers() -> Mapping[str, str]:
    return {"content-type": "text/event-stream"}


def _merge_headers(defaults: Mapping[str, str], given: Mapping[str, str] | None) -> dict[str, str]:
    merged = dict(defaults)
    for name, value in (given or {}).items():
        for existing in [key for key in merged if key.lower() == name.lower()]:
            del merged[existing]
        merged[name] = value
    return merged


def _sse_event(data: str) -> bytes:
    if "\n" not in data and "\r" not in data:
        return b"data: " + data.encode() + b"\n\n"
    return "".join(f"data: {line}\n" for line in _SSE_LINE_BREAK.split(data)).encode() + b"\n"


def _with_delays(pieces: Iterable[bytes], delay: float) -> list[Step]:
    steps: list[Step] = []
    for piece in pieces:
        if steps and delay > 0:
            steps.append(Delay(delay))
        steps.append(piece)
    return steps


@dataclass(frozen=True)
class StubResponse:
    """One scripted HTTP response, played step by step.

    ``content-length`` and ``transfer-encoding`` are set by the server from ``chunked`` and the
    body, so they may not appear in ``headers``; a ``connection: close`` header makes the
    server close the connection after the response.

    Attributes:
        status: the HTTP status code.
        headers: response headers (``content-type: text/event-stream`` by default).
        body: the steps written in order; ``bytes`` steps are sent as they come (one HTTP chunk
            each when chunked; empty ones are skipped).
        before_headers: pauses or a fault that run before the status line is sent (e.g. to test
            cancellation while the client waits for headers).
        chunked: ``True`` sends ``Transfer-Encoding: chunked``; ``False`` sends
            ``Content-Length`` when the body is all bytes, else the body is close-delimited
            (``connection: close``, the end of the body is the end of the connection).

    Raises:
        ConfigurationError: on a status outside 100-999, a header with a line break, a framing
            header, or a step that is not bytes, :class:`Delay`, :class:`Hold` or :class:`Disconnect`.
    """

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=_default_headers)
    body: Sequence[Step] = ()
    before_headers: Sequence[Delay | Hold | Disconnect] = ()
    chunked: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.status, int) or not 100 <= self.status <= 999:
            raise ConfigurationError(f"StubResponse.status must be an int in 100..999, got {self.status!r}")
        headers: dict[str, str] = {}
        for name, value in dict(self.headers).items():
            if not isinstance(name, str) or not isinstance(value, str):
                raise ConfigurationError(f"StubResponse header names and values must be str, got {name!r}: {value!r}")
            if not name or any(c in name for c in ":\r\n \t") or any(c in value for c in "\r\n"):
                raise ConfigurationError(f"StubResponse header {name!r} is not a valid header line")
            if name.lower() in _FRAMING_HEADERS:
                raise ConfigurationError(
                    f"StubResponse header {name!r} is set by the server; use chunked=True/False instead"
                )
            headers[name] = value
        body: list[Step] = []
        for step in self.body:
            if isinstance(step, bytes | bytearray | memoryview):
                body.append(bytes(step))
            elif isinstance(step, Delay | Hold | Disconnect):
                body.append(step)
            else:
                raise ConfigurationError(
                    f"StubResponse.body steps must be bytes, Delay, Hold or Disconnect, got {type(step).__name__}"
                )
        for step in self.before_headers:
            if not isinstance(step, Delay | Hold | Disconnect):
                raise ConfigurationError(
                    f"StubResponse.before_headers steps must be Delay, Hold or Disconnect, got {type(step).__name__}"
                )
        object.__setattr__(self, "headers", MappingProxyType(headers))
        object.__setattr__(self, "body", tuple(body))
        object.__setattr__(self, "before_headers", tuple(self.before_headers))

    @classmethod
    def sse(
        cls,
        events: Iterable[str | bytes],
        *,
        delay: float = 0.0,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> StubResponse:
        """A chunked ``text/event-stream`` response, one HTTP chunk per event.

        Args:
            events: each ``str`` is one event's data, sent as ``data: <data>\\n\\n`` (data with
                line breaks becomes one ``data:`` line per line); ``bytes`` are sent raw (for
                ``event:`` lines, comments or malformed input).
            delay: seconds to pause between events (none before the first or after the last).
            status: the HTTP status code.
            headers: extra headers, merged over ``content-type: text/event-stream``.

        Returns:
            The response.
        """
        pieces = [_sse_event(event) if isinstance(event, str) else bytes(event) for event in events]
        return cls(status=status, headers=_merge_headers(_default_headers(), headers), body=_with_delays(pieces, delay))

    @classmethod
    def raw(
        cls,
        data: bytes,
        *,
        split_at: Sequence[int] = (),
        delay: float = 0.0,
        headers: Mapping[str, str] | None = None,
    ) -> StubResponse:
        """A recorded body (e.g. a transcript) sent in pieces cut at the given byte offsets.

        Args:
            data: the whole body.
            split_at: increasing byte offsets in ``0..len(data)`` where a new piece (HTTP chunk)
                starts; empty pieces are dropped.
            delay: seconds to pause between pieces.
            headers: extra headers, merged over ``content-type: text/event-stream``.

        Returns:
            The response (status 200, chunked).

        Raises:
            ConfigurationError: if an offset is out of range or the offsets decrease.
        """
        cuts = [0, *split_at, len(data)]
        for before, after in itertools.pairwise(cuts):
            if not isinstance(after, int) or after < before or after > len(data):
                raise ConfigurationError(f"split_at must be increasing offsets in 0..{len(data)}, got {split_at!r}")
        pieces = [bytes(data[start:end]) for start, end in itertools.pairwise(cuts) if end > start]
        return cls(headers=_merge_headers(_default_headers(), headers), body=_with_delays(pieces, delay))

    @classmethod
    def json(cls, status: int, payload: object, *, headers: Mapping[str, str] | None = None) -> StubResponse:
        """A complete JSON response with ``Content-Length`` (errors, non-streamed answers).

        Args:
            status: the HTTP status code.
            payload: anything ``json.dumps`` accepts.
            headers: extra headers, merged over ``content-type: application/json``.

        Returns:
            The response.
        """
        body = _json.dumps(payload).encode()
        merged = _merge_headers({"content-type": "application/json"}, headers)
        return cls(status=status, headers=merged, body=(body,), chunked=False)


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received, fully read.

    Attributes:
        method: the request method, e.g. ``"POST"``.
        path: the request target as sent, query string included.
        headers: the request headers, names lower-cased (repeated headers joined with ``", "``).
        body: the request body (a chunked body is decoded).
        connection_id: :attr:`ConnectionRecord.id` of the connection it came on.
    """

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes
    connection_id: int

    def json(self) -> Any:
        """The body parsed as JSON.

        Raises:
            ProtocolError: if the body is not valid UTF-8 JSON.
        """
        try:
            return _json.loads(self.body)
        except ValueError as exc:
            raise ProtocolError(f"request body is not JSON: {exc}") from exc


class ConnectionRecord:
    """What the server saw of one accepted TCP connection. Created by :class:`StubServer`.

    Attributes:
        id: 1-based number, in accept order.
        opened_at: ``time.monotonic()`` when the connection was accepted.
        closed_by_client: set the moment the server observes the client close the connection.
    """

    def __init__(self, id: int, opened_at: float) -> None:
        self.id = id
        self.opened_at = opened_at
        self.closed_by_client: threading.Event = threading.Event()
        self._closed_at: float | None = None
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()

    @property
    def closed_at(self) -> float | None:
        """``time.monotonic()`` when the server observed the client close (EOF, reset, broken pipe).

        ``None`` while the connection is open, and when the server closed it first (a
        :class:`Disconnect`, a close-delimited response, :meth:`StubServer.close`).
        """
        with self._lock:
            return self._closed_at

    @property
    def requests(self) -> list[RecordedRequest]:
        """The requests received on this connection, in order (a snapshot)."""
        with self._lock:
            return list(self._requests)

    def wait_closed_by_client(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the client to close; ``True`` if it did."""
        return self.closed_by_client.wait(timeout)

    def _mark_closed_by_client(self, at: float) -> None:
        with self._lock:
            if self._closed_at is None:
                self._closed_at = at
        self.closed_by_client.set()

    def _add(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def __repr__(self) -> str:
        with self._lock:
            count, closed_at = len(self._requests), self._closed_at
        return f"ConnectionRecord(id={self.id}, requests={count}, closed_at={closed_at!r})"


class _ClientClosed(Exception):
    """The client closed the connection (EOF, reset or broken pipe)."""


class _ServerClosing(Exception):
    """``StubServer.close()`` was called."""


class _Disconnected(Exception):
    """A :class:`Disconnect` step closed the connection."""


class _BadRequest(Exception):
    """The client sent something that is not an HTTP/1.x request."""


class _Poller:
    """Waits until a socket or the server's wake-up socket is readable (``poll``, else ``select``)."""

    def __init__(self, sock: socket.socket, wake: socket.socket) -> None:
        self._sock_fd = sock.fileno()
        self._wake_fd = wake.fileno()
        self._poll = select.poll() if hasattr(select, "poll") else None
        if self._poll is not None:
            self._poll.register(self._sock_fd, select.POLLIN | select.POLLPRI)
            self._poll.register(self._wake_fd, select.POLLIN)

    def wait(self, timeout: float | None) -> tuple[bool, bool]:
        """Return ``(socket ready, wake-up ready)`` after at most ``timeout`` seconds (``None``: no limit)."""
        if self._poll is not None:
            millis = None if timeout is None else max(0, math.ceil(timeout * 1000))
            events = self._poll.poll(millis)
            fds = {fd for fd, _ in events}
            return self._sock_fd in fds, self._wake_fd in fds
        readable, _, _ = select.select([self._sock_fd, self._wake_fd], [], [], timeout)
        return self._sock_fd in readable, self._wake_fd in readable


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Status"


def _error_response(status: int, message: str) -> StubResponse:
    return StubResponse.json(status, {"error": {"type": "stub_server_error", "message": message}})


class _Connection:
    """Serves one accepted connection on its own thread."""

    def __init__(self, server: StubServer, sock: socket.socket, record: ConnectionRecord) -> None:
        self._server = server
        self._sock = sock
        self._record = record
        self._buf = bytearray()
        self._sock_lock = threading.Lock()
        self._sock_closed = False
        self._version = "HTTP/1.1"
        self._poller = _Poller(sock, server._wake_r)
        self.thread = threading.Thread(target=self._run, name=f"rxllm-stub-conn-{record.id}", daemon=True)

    # -- lifetime -------------------------------------------------------------------------

    def _run(self) -> None:
        graceful = True
        try:
            while True:
                try:
                    request = self._read_request()
                except _BadRequest as exc:
                    self._write_response(_error_response(400, f"bad request: {exc}"), keep_alive=False, head=False)
                    break
                self._server._record_request(self._record, request)
                response = self._server._response_for(request)
                if not self._respond(request, response):
                    break
        except (_ClientClosed, _ServerClosing, _Disconnected):
            graceful = False
        finally:
            self._close_socket(graceful=graceful)
            self._server._connection_done(self._record.id)

    def abort(self) -> None:
        """Wake the connection's thread from any blocking call (called by ``StubServer.close``)."""
        with self._sock_lock:
            if not self._sock_closed:
                with contextlib.suppress(OSError):
                    self._sock.shutdown(socket.SHUT_RDWR)

    def _close_socket(self, *, graceful: bool) -> None:
        with self._sock_lock:
            if self._sock_closed:
                return
            self._sock_closed = True
            if graceful:
                self._shutdown_write_and_drain()
            self._sock.close()

    def _shutdown_write_and_drain(self) -> None:
        # Send FIN, then read what the client already sent so that close() does not turn the FIN into a RST.
        try:
            self._sock.shutdown(socket.SHUT_WR)
            self._sock.setblocking(False)
            while self._sock.recv(_RECV_BYTES):
                pass
        except OSError:
            pass

    def _gone(self) -> Exception:
        """The exception for a socket found closed: the client's close, unless the server is closing."""
        now = time.monotonic()
        if self._server._closing:
            return _ServerClosing()
        self._record._mark_closed_by_client(now)
        return _ClientClosed()

    # -- reading --------------------------------------------------------------------------

    def _recv_more(self) -> None:
        try:
            data = self._sock.recv(_RECV_BYTES)
        except OSError as exc:
            raise self._gone() from exc
        if not data:
            raise self._gone()
        self._buf += data

    def _read_line(self) -> bytes:
        while (end := self._buf.find(b"\r\n")) < 0:
            if len(self._buf) > _MAX_HEAD_BYTES:
                raise _BadRequest("line too long")
            self._recv_more()
        line = bytes(self._buf[:end])
        del self._buf[: end + 2]
        return line

    def _read_exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            self._recv_more()
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    def _read_request(self) -> RecordedRequest:
        while self._buf[:2] == b"\r\n":  # tolerate empty lines before a request line (RFC 9112 §2.2)
            del self._buf[:2]
        while (end := self._buf.find(b"\r\n\r\n")) < 0:
            if len(self._buf) > _MAX_HEAD_BYTES:
                raise _BadRequest("request head too large")
            self._recv_more()
            while self._buf[:2] == b"\r\n":
                del self._buf[:2]
        lines = bytes(self._buf[:end]).decode("latin-1").split("\r\n")
        del self._buf[: end + 4]
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[0] or not parts[1] or parts[2] not in ("HTTP/1.0", "HTTP/1.1"):
            raise _BadRequest(f"not an HTTP/1.x request line: {lines[0][:100]!r}")
        method, path, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise _BadRequest(f"malformed header line: {line[:100]!r}")
            key, value = name.lower(), value.strip(" \t")
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        if version == "HTTP/1.1" and headers.get("expect", "").lower() == "100-continue":
            self._write(b"HTTP/1.1 100 Continue\r\n\r\n")
        if "transfer-encoding" in headers:
            if headers["transfer-encoding"].lower().rsplit(",", 1)[-1].strip() != "chunked":
                raise _BadRequest(f"unsupported transfer-encoding {headers['transfer-encoding']!r}")
            body = self._read_chunked_body()
        elif "content-length" in headers:
            text = headers["content-length"]
            if not text.isdigit():
                raise _BadRequest(f"bad content-length {text!r}")
            body = self._read_exact(int(text))
        else:
            body = b""
        self._version = version
        return RecordedRequest(
            method=method, path=path, headers=MappingProxyType(headers), body=body, connection_id=self._record.id
        )

    def _read_chunked_body(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size_text = self._read_line().split(b";", 1)[0].strip()
            if not size_text or not set(size_text) <= _HEX_DIGITS:
                raise _BadRequest(f"bad chunk size {size_text[:20]!r}")
            size = int(size_text, 16)
            if size == 0:
                break
            parts.append(self._read_exact(size))
            if self._read_exact(2) != b"\r\n":
                raise _BadRequest("chunk not followed by CRLF")
        while self._read_line():  # trailer fields, up to the empty line
            pass
        return b"".join(parts)

    # -- writing --------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as exc:
            raise self._gone() from exc

    def _pause(self, seconds: float, release: threading.Event | None) -> None:
        """Wait ``seconds`` (or until ``release`` is set), waking at once on a client close or ``close()``."""
        deadline = time.monotonic() + seconds
        while True:
            if release is not None and release.is_set():
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            try:
                sock_ready, wake_ready = self._poller.wait(remaining if release is None else min(remaining, _HOLD_TICK))
            except (OSError, ValueError) as exc:
                raise _ServerClosing() from exc
            if wake_ready or self._server._closing:
                raise _ServerClosing()
            if sock_ready:
                self._recv_more()  # EOF or reset: the client is gone; data: a pipelined request, kept for later

    def _control(self, step: Delay | Hold | Disconnect) -> None:
        if isinstance(step, Delay):
            self._pause(step.seconds, None)
        elif isinstance(step, Hold):
            self._pause(step.timeout, step.release)
        else:
            with self._sock_lock:
                if not self._sock_closed:
                    self._sock_closed = True
                    if step.reset:
                        linger = struct.pack("HH" if sys.platform == "win32" else "ii", 1, 0)
                        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                    else:
                        self._shutdown_write_and_drain()
                    self._sock.close()
            raise _Disconnected()

    def _respond(self, request: RecordedRequest, response: StubResponse) -> bool:
        """Play ``response``; return whether the connection stays open for another request."""
        tokens = {token.strip().lower() for token in request.headers.get("connection", "").split(",")}
        keep_alive = "keep-alive" in tokens if self._version == "HTTP/1.0" else "close" not in tokens
        for step in response.before_headers:
            self._control(step)
        return self._write_response(response, keep_alive=keep_alive, head=request.method == "HEAD")

    def _write_response(self, response: StubResponse, *, keep_alive: bool, head: bool) -> bool:
        status = response.status
        bodiless = status < 200 or status in (204, 304)
        all_bytes = all(isinstance(step, bytes) for step in response.body)
        chunked = response.chunked and not bodiless
        close_delimited = not bodiless and not chunked and not all_bytes
        keep_alive = keep_alive and not close_delimited
        lines = [f"HTTP/1.1 {status} {_reason(status)}"]
        for name, value in response.headers.items():
            lines.append(f"{name}: {value}")
            if name.lower() == "connection" and "close" in value.lower():
                keep_alive = False
        if chunked:
            lines.append("transfer-encoding: chunked")
        elif all_bytes and not bodiless:
            lines.append(f"content-length: {sum(len(step) for step in response.body if isinstance(step, bytes))}")
        if not keep_alive and not any(name.lower() == "connection" for name in response.headers):
            lines.append("connection: close")
        self._write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        send_body = not head and not bodiless
        write = self._write
        for step in response.body:
            if isinstance(step, bytes):
                if step and send_body:
                    write(b"%x\r\n%b\r\n" % (len(step), step) if chunked else step)
            else:
                self._control(step)
        if chunked and send_body:
            write(b"0\r\n\r\n")
        return keep_alive


class StubServer:
    """A loopback HTTP/1.1 server that answers each request with the next scripted response.

    Use it as a context manager (``with StubServer([...]) as server:``) or call :meth:`start`
    and :meth:`close`. The socket is bound on construction, so :attr:`url` is known at once.

    Args:
        responses: the first responses to serve, in order (more with :meth:`enqueue`).
        responder: answers when the queue is empty; called on the connection's thread with the
            recorded request (an exception it raises becomes a ``500`` JSON error).

    Attributes:
        url: ``"http://127.0.0.1:PORT"``.
    """

    def __init__(
        self,
        responses: Iterable[StubResponse] = (),
        *,
        responder: Callable[[RecordedRequest], StubResponse] | None = None,
    ) -> None:
        queue = deque(responses)
        for response in queue:
            if not isinstance(response, StubResponse):
                raise ConfigurationError(f"StubServer responses must be StubResponse, got {type(response).__name__}")
        self._queue = queue
        self._responder = responder
        self._cond = threading.Condition()
        self._requests: list[RecordedRequest] = []
        self._connections: list[ConnectionRecord] = []
        self._live: dict[int, _Connection] = {}
        self._closing = False
        self._started = False
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self._listener.setblocking(False)
        self._wake_r, self._wake_w = socket.socketpair()
        self.url: str = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._accept_thread = threading.Thread(target=self._accept_loop, name="rxllm-stub-accept", daemon=True)

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        with self._cond:
            counts = f"requests={len(self._requests)}, connections={len(self._connections)}"
        return f"StubServer(url={self.url!r}, {counts}, closed={self._closing})"

    def start(self) -> StubServer:
        """Start serving (idempotent) and return the server.

        Raises:
            ConfigurationError: if the server was already closed.
        """
        with self._cond:
            if self._closing:
                raise ConfigurationError("this StubServer is closed; create a new one")
            if not self._started:
                self._started = True
                self._accept_thread.start()
        return self

    def enqueue(self, *responses: StubResponse) -> None:
        """Add responses to the queue; they are served first-in first-out, one per request, any path."""
        for response in responses:
            if not isinstance(response, StubResponse):
                raise ConfigurationError(f"StubServer responses must be StubResponse, got {type(response).__name__}")
        with self._cond:
            self._queue.extend(responses)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in arrival order (a snapshot)."""
        with self._cond:
            return list(self._requests)

    @property
    def connections(self) -> list[ConnectionRecord]:
        """Every accepted connection, in accept order (a snapshot)."""
        with self._cond:
            return list(self._connections)

    def wait_for_requests(self, n: int, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until at least ``n`` requests arrived; ``True`` if they did."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self._requests) >= n, timeout)

    def wait_for_connection(self, n: int, timeout: float) -> ConnectionRecord | None:
        """Wait up to ``timeout`` seconds for the ``n``-th (1-based) accepted connection.

        Returns:
            Its record, or ``None`` if it was not accepted in time.
        """
        with self._cond:
            if self._cond.wait_for(lambda: len(self._connections) >= n, timeout):
                return self._connections[n - 1]
            return None

    def close(self) -> None:
        """Stop accepting, end every response (and every :class:`Hold`), close all sockets, join threads.

        Idempotent. Threads are joined with a bound of a few seconds in total (a responder that
        never returns cannot hang the caller); sockets are closed regardless.
        """
        with self._cond:
            if self._closing:
                return
            self._closing = True
            live = list(self._live.values())
            self._cond.notify_all()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        for connection in live:
            connection.abort()
        deadline = time.monotonic() + _JOIN_SECONDS
        if self._accept_thread.is_alive():
            self._accept_thread.join(max(0.0, deadline - time.monotonic()))
        self._listener.close()
        for connection in live:
            connection.thread.join(max(0.0, deadline - time.monotonic()))
        for connection in live:
            connection._close_socket(graceful=False)
        self._wake_r.close()
        self._wake_w.close()

    # -- internals --------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        poll = select.poll() if hasattr(select, "poll") else None
        if poll is not None:
            poll.register(self._listener.fileno(), select.POLLIN)
            poll.register(self._wake_r.fileno(), select.POLLIN)
        while not self._closing:
            try:
                if poll is not None:
                    poll.poll()
                else:
                    select.select([self._listener, self._wake_r], [], [])
            except (OSError, ValueError):
                return
            if self._closing:
                return
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                continue
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    continue
                return
            sock.setblocking(True)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._cond:
                if self._closing:
                    sock.close()
                    return
                record = ConnectionRecord(len(self._connections) + 1, time.monotonic())
                connection = _Connection(self, sock, record)
                self._connections.append(record)
                self._live[record.id] = connection
                connection.thread.start()
                self._cond.notify_all()

    def _record_request(self, record: ConnectionRecord, request: RecordedRequest) -> None:
        record._add(request)
        with self._cond:
            self._requests.append(request)
            self._cond.notify_all()

    def _response_for(self, request: RecordedRequest) -> StubResponse:
        with self._cond:
            if self._queue:
                return self._queue.popleft()
            responder = self._responder
        if responder is None:
            return _error_response(
                500, f"rxllm StubServer: no response was scripted for {request.method} {request.path}"
            )
        try:
            response = responder(request)
        except Exception as exc:
            return _error_response(500, f"rxllm StubServer: the responder raised {type(exc).__name__}: {exc}")
        if not isinstance(response, StubResponse):
            return _error_response(
                500, f"rxllm StubServer: the responder returned {type(response).__name__}, not a StubResponse"
            )
        return response

    def _connection_done(self, connection_id: int) -> None:
        with self._cond:
            self._live.pop(connection_id, None)
