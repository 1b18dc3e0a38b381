"""The HTTP transport: a plain ``httpx.Client`` whose sockets can be cancelled from any thread.

With :mod:`rxllm._transports.asynchronous`, the only modules that import httpx/httpcore. Three facts shape it
(ARCHITECTURE.md §3):

* closing an httpx response from another thread does not wake a thread blocked reading it;
  shutting the socket down (``SHUT_RDWR``) does, within a millisecond, and the server sees the
  close at once;
* the socket exists only inside httpcore. The seam where every socket can be seen is a pool's
  network backend: every stream the pool opens goes through :class:`_CancellableBackend`, whose
  streams register their socket with the :class:`CancelScope` of the thread using them (on every
  read and write, so a reused keep-alive connection is covered while waiting for headers too);
* the tools people use on httpx (pytest-httpx, vcrpy, OpenTelemetry, respx) patch
  ``httpx.HTTPTransport`` / httpcore, and ``HTTP(S)_PROXY`` is honoured by ``httpx.Client`` only
  when it builds its own transports. So the client is httpx's own, built as httpx builds it, and
  :func:`make_cancellable` only wraps its pools' backends (also on a client the user passes).

A :class:`CancelScope` is entered by the thread doing one request's blocking work; ``cancel()``
from any other thread shuts down every socket the scope has touched, which wakes the blocked
reader with an error that the reader then ignores because its scope is cancelled. The scope also
carries the attempt's total deadline, to which every socket timeout is clamped. Bodies are
decoded here (:mod:`rxllm._transports.decoding`), bounded, never by httpx.
"""

from __future__ import annotations

import contextlib
import email.utils
import logging
import socket
import ssl
import sys
import threading
import time
import weakref
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import httpcore
import httpx
from reactivex import abc as rx_abc
from reactivex.scheduler import ThreadPoolScheduler

from .._core.errors import (
    ConfigurationError,
    HttpStatusError,
    RxLlmError,
    StreamInterruptedError,
    StreamTimeoutError,
    TransportError,
)
from .._core.redact import Redactor
from .._core.threads import daemon_thread, thread_pool_scheduler
from .base import HttpRequest
from .coalesce import ChunkCoalescer
from .decoding import ACCEPT_ENCODING, BodyDecoder

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_FIRST_BYTE_TIMEOUT",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_MAX_STREAM_BYTES",
    "DEFAULT_READ_TIMEOUT",
    "DEFAULT_TOTAL_TIMEOUT",
    "DRAIN_BYTES",
    "DRAIN_SECONDS",
    "MAX_ERROR_BODY",
    "CancelScope",
    "ErrorBody",
    "HttpResponse",
    "HttpTransport",
    "TransportLimits",
    "current_scope",
    "headers_arrived",
    "limit_of",
    "log_request",
    "make_cancellable",
    "wrap_network_backends",
    "request_headers",
    "status_error_of",
    "timeout_error",
]

_log = logging.getLogger("rxllm.http")
_local = threading.local()
MAX_ERROR_BODY = 64 * 1024
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_FIRST_BYTE_TIMEOUT = 300.0  # a transport's first_byte_timeout defaults to its read_timeout
DEFAULT_READ_TIMEOUT = 300.0
DEFAULT_TOTAL_TIMEOUT = 900.0
DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_STREAM_BYTES = 256 * 1024 * 1024
DRAIN_SECONDS = 0.25  # after the provider's end marker, how long to wait for the body's last bytes
DRAIN_BYTES = 64 * 1024  # and how many of them to read at most, so the connection can be reused
_REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-goog-request-id", "cf-ray")


_owners = threading.Lock()  # guards every scope's streams and every stream's owner (rarely taken)


class CancelScope:
    """The cancellation handle of one request's blocking work.

    ``cancel()`` may be called from any thread, any number of times: it marks the scope
    cancelled and shuts down every socket the scope's work has used, waking a blocked read
    at once (and failing any later write, so nothing more reaches the server). A socket belongs
    to the last scope that used it: once a keep-alive connection went back to the pool and
    another request's scope took it, a late ``cancel()`` of the first leaves it alone.
    ``close()`` (by the working thread when it is done) detaches the sockets. ``finish()`` marks
    the work's terminal event: after it, or after ``cancel()``, the scope is no longer
    ``active`` and nothing more is delivered.
    """

    __slots__ = ("_closed", "_finished", "_shut", "_streams", "attached", "cancelled", "deadline")

    def __init__(self) -> None:
        self._streams: list[Any] = []  # the wrapped network streams attached (each has .sock, .owner)
        self._closed = False
        self._shut = False  # shutdown(): sockets attached from now on are shut down at once
        self._finished = False
        self.attached = False  # a socket was attached at some point (then cancel() has shut it down)
        self.cancelled: bool = False
        self.deadline: float | None = None  # time.monotonic() when the attempt's total_timeout fires

    def remaining(self) -> float | None:
        """Seconds left before :attr:`deadline` (``None`` without one; may be negative)."""
        deadline = self.deadline
        return None if deadline is None else deadline - time.monotonic()

    def expired(self) -> bool:
        """Whether the attempt's total deadline has passed (a socket timeout set to the time left
        may wake a hair early: 50 ms of slack)."""
        deadline = self.deadline
        return deadline is not None and time.monotonic() >= deadline - 0.05

    @property
    def active(self) -> bool:
        """Neither cancelled nor finished: items may still be delivered."""
        return not (self.cancelled or self._finished)

    def finish(self) -> bool:
        """Mark the terminal event and detach the sockets; ``True`` if the scope was still active."""
        with _owners:
            was_active = not (self.cancelled or self._finished)
            self._finished = True
            self._closed = True
            self._streams = []
        return was_active

    def watch(self, stream: Any) -> None:
        """Make this scope the owner of ``stream``'s socket (a wrapped network stream with ``sock``
        and ``owner``); called by the transport on the working thread, or on the loop. Attaching
        to a cancelled scope shuts the socket down at once."""
        with _owners:
            stream.owner = self
            if self._closed:
                return
            self.attached = True
            if self._shut:
                _shutdown(stream.sock)
                return
            self._streams.append(stream)

    def cancel(self) -> None:
        """Cancel: shut down every socket this scope still owns, now. Thread-safe and idempotent."""
        self._shut_down(cancel=True)

    def shutdown(self) -> None:
        """Shut down every socket this scope still owns, and any it attaches later, without marking
        it cancelled (its work then ends with an error it may still deliver, e.g. a timeout)."""
        self._shut_down(cancel=False)

    def _shut_down(self, *, cancel: bool) -> None:
        with _owners:
            if cancel:
                self.cancelled = True
            self._shut = True
            streams, self._streams = self._streams, []
            for stream in streams:
                if stream.owner is self:
                    _shutdown(stream.sock)

    def close(self) -> None:
        """Detach from the sockets (the work is over)."""
        with _owners:
            self._closed = True
            self._streams = []

    @contextlib.contextmanager
    def entered(self) -> Iterator[CancelScope]:
        """Make this the scope of the current thread for the duration of the block."""
        previous = getattr(_local, "scope", None)
        _local.scope = self
        try:
            yield self
        finally:
            _local.scope = previous
            self.close()


def current_scope() -> CancelScope | None:
    """The :class:`CancelScope` the current thread is working in, if any."""
    return getattr(_local, "scope", None)


def _shutdown(sock: Any) -> None:
    # The base-class method: on an SSLSocket, SSLSocket.shutdown would also drop the TLS
    # object under the reader's feet; shutting the OS socket down is all we want. An asyncio
    # transport's socket (``asyncio.trsock.TransportSocket``) is the plain OS socket behind its
    # public ``shutdown`` (asyncio does TLS in memory).
    with contextlib.suppress(OSError):
        if isinstance(sock, socket.socket):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        else:
            sock.shutdown(socket.SHUT_RDWR)


_monotonic = time.monotonic


def _clamp(timeout: float | None, scope: CancelScope, error: type[Exception]) -> float:
    """A socket timeout that also ends at the scope's total deadline (a trickle cannot outlive it)."""
    remaining = scope.remaining()
    assert remaining is not None
    if remaining <= 0:
        raise error("the total deadline passed")
    return remaining if timeout is None else min(timeout, remaining)


class _CancellableStream(httpcore.NetworkStream):
    """A pool's network stream: its socket attaches to the scope of the thread using it, reads are
    clamped to the scope's deadline, and a chunked response body reaches h11 one chunk per read
    (:class:`~rxllm._transports.coalesce.ChunkCoalescer`)."""

    __slots__ = ("_coalescer", "_inner", "owner", "sock")

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner
        self.sock: socket.socket | None = inner.get_extra_info("socket")
        self.owner: CancelScope | None = None  # the scope that used the socket last
        self._coalescer = ChunkCoalescer()

    def _attach(self) -> CancelScope | None:
        scope: CancelScope | None = getattr(_local, "scope", None)
        if scope is not self.owner and scope is not None and self.sock is not None:
            scope.watch(self)
        return scope

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        # ``_attach`` and ``_clamp`` inlined: this runs once per network read, which on a stream
        # trickling tokens is once per chunk.
        scope: CancelScope | None = getattr(_local, "scope", None)
        received = self._coalescer.received
        while True:
            wait = timeout
            if scope is not None:
                if scope is not self.owner and self.sock is not None:
                    scope.watch(self)
                deadline = scope.deadline
                if deadline is not None:
                    remaining = deadline - _monotonic()
                    if remaining <= 0:
                        raise httpcore.ReadTimeout("the total deadline passed")
                    if wait is None or remaining < wait:
                        wait = remaining
            data = self._inner.read(max_bytes, wait)
            coalesced = received(data)
            if coalesced or not data:  # else the read completed nothing (half a chunk-size line)
                return coalesced

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        scope = self._attach()
        if scope is not None and scope.deadline is not None:
            timeout = _clamp(timeout, scope, httpcore.WriteTimeout)
        self._coalescer.sent(buffer)
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        return _CancellableStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _CancellableBackend(httpcore.NetworkBackend):
    """Wraps a pool's network backend: every stream it opens registers its socket with the scope
    of the thread using it (nothing else changes; on a thread with no scope, nothing at all)."""

    def __init__(self, inner: httpcore.NetworkBackend | None = None) -> None:
        self._inner = inner or httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        scope: CancelScope | None = getattr(_local, "scope", None)
        if scope is not None and scope.deadline is not None:
            timeout = _clamp(timeout, scope, httpcore.ConnectTimeout)
        stream = _CancellableStream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options))
        stream._attach()  # a cancel that raced the connect shuts the new socket down at once
        return stream

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        return _CancellableStream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _Pruner:
    """Closes idle keep-alive connections once they pass ``keepalive_expiry``.

    httpcore drops an expired connection only when the pool is next used, so an idle process kept
    them (and the server's sockets) until ``close()``. One daemon thread for every threaded
    transport, started with the first one, holding the pools weakly. A connection is closed only
    when it is idle and expired; the pool never hands out an expired connection, so a request
    cannot race the close.
    """

    _lock: ClassVar[threading.Lock] = threading.Lock()
    _pools: ClassVar[weakref.WeakKeyDictionary[httpcore.ConnectionPool, float]] = weakref.WeakKeyDictionary()
    _wake: ClassVar[threading.Event] = threading.Event()
    _thread: ClassVar[threading.Thread | None] = None

    @classmethod
    def watch(cls, pool: httpcore.ConnectionPool, keepalive_expiry: float) -> None:
        with cls._lock:
            cls._pools[pool] = keepalive_expiry
            if cls._thread is None:
                cls._thread = daemon_thread(cls._run, "rxllm-pruner")
        cls._wake.set()

    @classmethod
    def forget(cls, pool: httpcore.ConnectionPool) -> None:
        """Stop watching ``pool`` (its transport closed); the thread ends with the last pool."""
        with cls._lock:
            cls._pools.pop(pool, None)
            ending = cls._thread if not cls._pools else None
        cls._wake.set()
        if ending is not None and ending is not threading.current_thread():
            ending.join(timeout=5.0)  # a closed transport leaves no thread behind

    @classmethod
    def _run(cls) -> None:
        while True:
            with cls._lock:
                pools = list(cls._pools.items())
                if not pools:  # every watched transport closed (or was collected): no thread left behind
                    cls._thread = None
                    return
            interval = min((expiry for _, expiry in pools), default=5.0) / 2
            for pool, _ in pools:
                prune(pool)
            del pools
            cls._wake.wait(min(max(interval, 0.05), 5.0))
            cls._wake.clear()


def prune(pool: Any) -> None:
    """Close the pool's idle connections that passed their keep-alive expiry (public httpcore API)."""
    for connection in pool.connections:
        with contextlib.suppress(Exception):
            if connection.is_idle() and connection.has_expired():
                connection.close()


def make_cancellable(client: httpx.Client, *, watch_idle: bool = False) -> int:
    """Let a :class:`CancelScope` see every socket of ``client``'s own httpx transports.

    httpx builds one httpcore pool per transport (the default one and one per proxy mount, from
    ``HTTP(S)_PROXY`` / ``NO_PROXY`` when ``trust_env``); each pool opens its connections through a
    network backend, the public seam where every socket can be seen, the header wait on a reused
    keep-alive connection included. The backend is wrapped, not replaced: the pool, the proxy, TLS
    and the ecosystem's patches of ``httpx.HTTPTransport.handle_request`` (pytest-httpx, vcrpy,
    OpenTelemetry) all stay httpx's own. httpx offers no public handle on a transport's pool, so
    this reads httpx 0.28 / httpcore 1.0's attribute; a transport that is not httpx's own (a
    mock) or an HTTP/2 pool (one socket shared by many streams: shutting it would end them all)
    is left alone, and disposal then only stops the emissions.

    Returns:
        How many pools were made cancellable.
    """
    pools = wrap_network_backends(client, _CancellableBackend)
    if watch_idle:
        for pool in pools:
            _Pruner.watch(pool, getattr(pool, "_keepalive_expiry", None) or 5.0)
    return len(pools)


def wrap_network_backends(client: httpx.Client | httpx.AsyncClient, wrapper: type[Any]) -> list[Any]:
    """Wrap the network backend of each HTTP/1.1 pool of ``client``'s own httpx transports in
    ``wrapper`` (once: a backend already wrapped is left as it is); the pools, wrapped or already so.

    Shared by both transports (see :func:`make_cancellable`): an HTTP/2 pool, or a transport that is
    not httpx's own, is left alone.
    """
    wrapped = []
    for pool in _pools_of(client):
        backend = getattr(pool, "_network_backend", None)
        if backend is None or getattr(pool, "_http2", False):
            continue
        if not isinstance(backend, wrapper):
            pool._network_backend = wrapper(backend)
        wrapped.append(pool)
    return wrapped


def _pools_of(client: httpx.Client | httpx.AsyncClient) -> list[Any]:
    """The httpcore pools of ``client``'s own httpx transports (the default one and each mount's)."""
    own = httpx.HTTPTransport if isinstance(client, httpx.Client) else httpx.AsyncHTTPTransport
    transports = [getattr(client, "_transport", None), *getattr(client, "_mounts", {}).values()]
    return [
        pool
        for transport in transports
        if isinstance(transport, own) and (pool := getattr(transport, "_pool", None)) is not None
    ]



@dataclass(frozen=True, slots=True)
class TransportLimits:
    """Both transports' timeouts and size caps, checked once (see ``docs/limits.md``).

    Raises:
        ConfigurationError: for fewer than one stream, a timeout or a cap that is not positive.
    """

    max_concurrent_streams: int
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    first_byte_timeout: float = DEFAULT_FIRST_BYTE_TIMEOUT
    read_timeout: float = DEFAULT_READ_TIMEOUT
    total_timeout: float | None = DEFAULT_TOTAL_TIMEOUT
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    max_stream_bytes: int | None = DEFAULT_MAX_STREAM_BYTES

    def __post_init__(self) -> None:
        if self.max_concurrent_streams < 1:
            raise ConfigurationError("max_concurrent_streams must be at least 1")
        timeouts = (self.connect_timeout, self.first_byte_timeout, self.read_timeout)
        if any(t <= 0 for t in timeouts) or (self.total_timeout is not None and self.total_timeout <= 0):
            raise ConfigurationError(
                "connect_timeout, first_byte_timeout, read_timeout and total_timeout must be positive"
            )
        if self.max_response_bytes <= 0 or (self.max_stream_bytes is not None and self.max_stream_bytes <= 0):
            raise ConfigurationError("max_response_bytes and max_stream_bytes must be positive")

    def client_timeout(self) -> httpx.Timeout:
        """The client-wide httpx timeout (waiting for a pooled connection counts as connecting)."""
        return httpx.Timeout(connect=self.connect_timeout, read=self.read_timeout, write=self.read_timeout,
                             pool=self.connect_timeout)

    def request_timeouts(self) -> dict[str, float | None]:
        """One request's httpx ``timeout`` extension: the read timeout is the first-byte timeout until
        the headers arrived (then :func:`headers_arrived` sets it to ``read_timeout``)."""
        return {"connect": self.connect_timeout, "read": self.first_byte_timeout, "write": self.read_timeout,
                "pool": self.connect_timeout}

    def body_cap(self, stream: bool) -> int | None:
        """The cap on one decoded body."""
        return self.max_stream_bytes if stream else self.max_response_bytes


def headers_arrived(request: httpx.Request, limits: TransportLimits) -> None:
    """Switch the request's read timeout from the first-byte one to the one between chunks.

    httpcore reads the request's ``timeout`` extension when it starts reading the body, so
    changing the value now applies to every body read (the public extension, not a private field).
    """
    timeouts = request.extensions.get("timeout")
    if isinstance(timeouts, dict):
        timeouts["read"] = limits.read_timeout


def timeout_error(exc: Exception, limit: str, limits: TransportLimits, provider: str | None) -> StreamTimeoutError:
    """The :class:`StreamTimeoutError` for a timeout ``exc`` of kind ``limit``: which limit, its value,
    and whether it is retried (only ``connect`` and ``pool``: the request may not have reached the
    server; a silent server is not asked again, so a stalled call ends within ``total_timeout``)."""
    seconds = {
        "connect": limits.connect_timeout,
        "pool": limits.connect_timeout,
        "first_byte": limits.first_byte_timeout,
        "read": limits.read_timeout,
        "write": limits.read_timeout,
        "total": limits.total_timeout,
    }.get(limit)
    retryable = limit in ("connect", "pool")
    what = {
        "connect": "no connection within connect_timeout",
        "pool": "no free pooled connection within connect_timeout",
        "first_byte": "no response headers within first_byte_timeout",
        "read": "no bytes within read_timeout",
        "write": "could not send the request within read_timeout",
        "total": "the attempt did not finish within total_timeout",
    }.get(limit, f"the {limit} limit fired")
    return StreamTimeoutError(
        f"{what}={seconds}s ({'retried' if retryable else 'not retried'}; {type(exc).__name__})",
        limit=limit,
        retryable=retryable,
        provider=provider,
    )


def limit_of(exc: httpx.TimeoutException, *, headers: bool, expired: bool) -> str:
    """Which limit an httpx timeout stands for (``headers``: it fired after the response headers)."""
    if expired:
        return "total"
    if isinstance(exc, httpx.PoolTimeout):
        return "pool"
    if isinstance(exc, httpx.ConnectTimeout):
        return "connect"
    if isinstance(exc, httpx.WriteTimeout):
        return "write"
    return "read" if headers else "first_byte"


class ErrorBody:
    """The first ``MAX_ERROR_BODY`` decoded bytes of an error response (truncated, never an error)."""

    __slots__ = ("_decoder", "data")

    def __init__(self, response: httpx.Response) -> None:
        self.data = b""
        try:
            self._decoder: BodyDecoder | None = BodyDecoder(response.headers.get("content-encoding", ""),
                                                            max_bytes=None)
        except RxLlmError:
            self._decoder = None

    def add(self, raw: bytes) -> bool:
        """Take raw bytes; ``True`` once enough was kept (stop reading)."""
        if self._decoder is None:
            return True
        try:
            for piece in self._decoder.feed(raw):
                self.data += piece
                if len(self.data) >= MAX_ERROR_BODY:
                    self.data = self.data[:MAX_ERROR_BODY]
                    return True
        except RxLlmError:
            return True
        return False


class HttpResponse(rx_abc.DisposableBase):
    """An open response body; iterate :meth:`iter_bytes`, then :meth:`close` (the resource of ``using``).

    The body is decoded here, bounded (:class:`~rxllm._transports.decoding.BodyDecoder`), never by httpx.
    """

    __slots__ = ("_body", "_cap", "_ended", "_limits", "_provider", "_response", "_scope", "status_code")

    def __init__(
        self,
        response: httpx.Response,
        *,
        limits: TransportLimits | None = None,
        stream: bool = True,
        provider: str | None = None,
        scope: CancelScope | None = None,
    ) -> None:
        self._response = response
        self._body: Iterator[bytes] | None = None
        self._limits = limits or TransportLimits(1)
        self._cap = self._limits.body_cap(stream)
        self._provider = provider
        self._scope = scope
        self._ended = False
        self.status_code: int = response.status_code

    def iter_bytes(self) -> Iterator[bytes]:
        """The decoded body as it arrives, in pieces of at most 64 KiB.

        Raises (while iterating):
            StreamInterruptedError: the body broke off.
            StreamTimeoutError: the read or total timeout fired.
            ResponseTooLargeError: the decoded body passed its cap.
            ProtocolError: an encoding rxllm does not decode, or corrupt compressed data.
        """
        self._body = self._iterate(self._cap)
        return self._body

    def _iterate(self, cap: int | None) -> Iterator[bytes]:
        decoder = BodyDecoder(self._response.headers.get("content-encoding", ""), max_bytes=cap,
                              provider=self._provider)
        raw_body = self._response.iter_raw()
        try:
            if decoder.identity:  # every SSE stream seen so far: one generator frame less per read
                total = 0
                most = sys.maxsize if cap is None else cap
                for raw in raw_body:
                    total += len(raw)
                    if total > most:  # the cap is counted here, inline (once per HTTP chunk)
                        decoder.count(total)  # raises ResponseTooLargeError
                    yield raw
            else:
                for raw in raw_body:
                    yield from decoder.feed(raw)
                yield from decoder.flush()
        except httpx.TimeoutException as exc:
            scope = self._scope
            limit = limit_of(exc, headers=True, expired=scope is not None and scope.expired())
            raise timeout_error(exc, limit, self._limits, self._provider) from exc
        except httpx.HTTPError as exc:
            raise StreamInterruptedError(f"the response body broke off: {type(exc).__name__}: {exc}",
                                         provider=self._provider) from exc
        finally:
            # Closed here, on this thread, down to httpcore's body (as ``yield from`` would): left to
            # the collector it would be finalized on any thread, after the connection went back.
            close = getattr(raw_body, "close", None)
            if close is not None:
                close()

    def mark_ended(self) -> None:
        """The provider said the turn is over: :meth:`release` may read the bytes that end the body."""
        self._ended = True

    def release(self) -> None:
        """Give the connection back: when the provider has ended the turn, first read what is left
        of the body (at most ``DRAIN_BYTES``, for at most ``DRAIN_SECONDS``), so the connection goes
        back to the pool instead of being closed and the next call skips a TCP and TLS handshake.

        Called on the working thread, inside its :class:`CancelScope`: the wait is bounded by the
        scope's deadline (which every read of a cancellable socket is clamped to), and a
        ``cancel()`` meanwhile shuts the socket down, so a cancelled stream's connection is closed,
        never reused. A body that does not end in time is closed: the answer is never affected.
        Only a socket rxllm can bound is waited on (another client's transport is closed at once).
        """
        body, scope = self._body, self._scope
        if (
            self._ended
            and body is not None
            and scope is not None
            and scope.active
            and isinstance(self._response.extensions.get("network_stream"), _CancellableStream)
        ):
            drain_until = time.monotonic() + DRAIN_SECONDS
            if scope.deadline is None or scope.deadline > drain_until:
                scope.deadline = drain_until
            left = DRAIN_BYTES
            with contextlib.suppress(RxLlmError):
                for piece in body:
                    left -= len(piece)
                    if left < 0:
                        break
        self.close()

    def read(self) -> bytes:
        """The whole decoded body (at most ``max_response_bytes``; see :meth:`iter_bytes` for errors)."""
        body = self._iterate(self._limits.max_response_bytes)
        self._body = body
        return b"".join(body)

    def close(self) -> None:
        """Release the connection (idempotent).

        The body generator is closed here, on this thread: left to the garbage collector (it sits
        in a cycle with this object), its finalizer would close the stream on whatever thread
        collects it, possibly one inside httpcore's pool lock, which is not reentrant: a deadlock.
        """
        body, self._body = self._body, None
        if isinstance(body, Generator):
            with contextlib.suppress(Exception):
                body.close()
        with contextlib.suppress(Exception):
            self._response.close()

    def dispose(self) -> None:
        """``Disposable`` protocol: the same as :meth:`close`."""
        self.close()


class HttpTransport:
    """The HTTP side of streaming models: an httpx client and the I/O thread pool, sized together.

    Each open stream holds one I/O thread and one connection for its whole duration (the
    seed's advice: size for concurrent streams, not requests per second), so both are sized
    by ``max_concurrent_streams``. Share one transport between models to share its pool.
    Every limit and its default is listed in ``docs/limits.md``.

    Args:
        max_concurrent_streams: threads in the I/O pool and connections in the HTTP pool.
        connect_timeout: seconds to connect (and to wait for a free pooled connection); retried.
        first_byte_timeout: seconds from sending the request to the response headers (default:
            ``read_timeout``); not retried.
        read_timeout: seconds without a byte between chunks of the body; not retried.
        total_timeout: seconds for a whole attempt, request to end of body (``None``: no limit);
            a server trickling bytes is cut off by it; not retried.
        max_response_bytes: cap on a non-streamed (``stream=False``) body, decoded.
        max_stream_bytes: cap on a streamed body, decoded (``None``: no cap); ignored bytes
            such as SSE comments count too.
        keepalive_expiry: seconds an idle keep-alive connection is kept.
        http_client: an ``httpx.Client`` you built (proxy, ``verify``, certificates, limits,
            headers, event hooks, mounts...) to send the requests with instead of one of
            rxllm's; rxllm never closes it (:meth:`close` leaves it open). rxllm's timeouts
            above still apply to each request. Cancellation closes the socket at once where the
            client's transport is httpx's own (HTTP/1.1), else it stops the emissions at once.
        trust_env: for rxllm's own client: honour ``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``,
            ``NO_PROXY``, ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` exactly as httpx does (default).

    The client is a plain ``httpx.Client`` over ``httpx.HTTPTransport``, so the tools that patch
    httpx (pytest-httpx, respx, vcrpy / pytest-recording, opentelemetry-instrumentation-httpx)
    see every request; the sockets are made cancellable by wrapping the pools' network backend
    (see :func:`make_cancellable`).
    """

    def __init__(
        self,
        *,
        max_concurrent_streams: int = 128,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        first_byte_timeout: float | None = None,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        total_timeout: float | None = DEFAULT_TOTAL_TIMEOUT,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_stream_bytes: int | None = DEFAULT_MAX_STREAM_BYTES,
        keepalive_expiry: float = 30.0,
        http_client: httpx.Client | None = None,
        trust_env: bool = True,
    ) -> None:
        if http_client is not None and not isinstance(http_client, httpx.Client):
            raise ConfigurationError(
                f"http_client must be an httpx.Client for HttpTransport, got {type(http_client).__name__} "
                "(an httpx.AsyncClient goes to AsyncHttpTransport)"
            )
        self.max_concurrent_streams = max_concurrent_streams
        self.limits: TransportLimits = TransportLimits(
            max_concurrent_streams,
            connect_timeout=connect_timeout,
            first_byte_timeout=read_timeout if first_byte_timeout is None else first_byte_timeout,
            read_timeout=read_timeout,
            total_timeout=total_timeout,
            max_response_bytes=max_response_bytes,
            max_stream_bytes=max_stream_bytes,
        )
        self._owns_client = http_client is None
        if http_client is None:
            http_client = httpx.Client(
                limits=httpx.Limits(max_connections=max_concurrent_streams,
                                    max_keepalive_connections=max_concurrent_streams,
                                    keepalive_expiry=keepalive_expiry),
                timeout=self.limits.client_timeout(),
                follow_redirects=False,
                trust_env=trust_env,
            )
        self._client = http_client
        make_cancellable(http_client, watch_idle=self._owns_client)
        self._scheduler: ThreadPoolScheduler | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"HttpTransport(max_concurrent_streams={self.max_concurrent_streams})"

    @property
    def scheduler(self) -> rx_abc.SchedulerBase:
        """The I/O pool (created on first use), one thread per concurrently open stream."""
        with self._lock:
            if self._scheduler is None:
                self._scheduler = thread_pool_scheduler(self.max_concurrent_streams, "rxllm-io")
            return self._scheduler

    def open(
        self,
        request: HttpRequest,
        *,
        provider: str,
        stream: bool,
        redactor: Redactor | None = None,
        attempt: int = 1,
    ) -> HttpResponse:
        """Send ``request`` and wait for the response headers (blocking; cancellable by scope).

        The attempt's ``total_timeout`` starts here and covers the body read under the same
        :class:`CancelScope`.

        Raises:
            HttpStatusError: for a non-2xx status (its body read, bounded, for the message).
            StreamTimeoutError: a deadline fired (``limit`` says which).
            TransportError: when the connection fails.
        """
        limits = self.limits
        redactor = redactor or Redactor.of_request(request.url, request.headers)
        scope = current_scope()
        if scope is not None and limits.total_timeout is not None:
            scope.deadline = time.monotonic() + limits.total_timeout
        started = time.monotonic()
        try:
            http_request = self._client.build_request(request.method, request.url, content=request.body,
                                                      headers=request_headers(request),
                                                      extensions={"timeout": limits.request_timeouts()})
            response = self._client.send(http_request, stream=True)
        except httpx.InvalidURL as exc:
            raise ConfigurationError(f"invalid URL {redactor.url(request.url)!r}: {exc}", provider=provider) from exc
        except httpx.TimeoutException as exc:
            limit = limit_of(exc, headers=False, expired=scope is not None and scope.expired())
            raise timeout_error(exc, limit, limits, provider) from exc
        except httpx.HTTPError as exc:
            raise TransportError(
                redactor.redact(f"request to {redactor.url(request.url)} failed: {type(exc).__name__}: {exc}"),
                provider=provider,
            ) from exc
        headers_arrived(http_request, limits)
        log_request(request, redactor, response.status_code, started, stream, attempt)
        if response.status_code >= 300:
            try:
                raise _status_error(response, provider, redactor)
            finally:
                response.close()
        return HttpResponse(response, limits=limits, stream=stream, provider=provider, scope=scope)

    def close(self) -> None:
        """Close every pooled connection (of rxllm's own client; a client you passed stays open)."""
        if self._owns_client:
            for pool in _pools_of(self._client):
                _Pruner.forget(pool)
            self._client.close()


def request_headers(request: HttpRequest) -> dict[str, str]:
    """The request's headers, asking only for encodings rxllm decodes (unless the caller chose)."""
    headers = dict(request.headers)
    if not any(name.lower() == "accept-encoding" for name in headers):
        headers["Accept-Encoding"] = ACCEPT_ENCODING
    return headers


def _status_error(response: httpx.Response, provider: str, redactor: Redactor) -> HttpStatusError:
    body = ErrorBody(response)
    with contextlib.suppress(httpx.HTTPError):
        for piece in response.iter_raw():
            if body.add(piece):
                break
    return status_error_of(response, body.data, provider, redactor)


def log_request(
    request: HttpRequest, redactor: Redactor, status: int, started: float, stream: bool, attempt: int = 1
) -> None:
    """Both transports' one DEBUG line per request, on ``rxllm.http`` (secrets redacted): method,
    URL, status, seconds to the headers, attempt number."""
    if _log.isEnabledFor(logging.DEBUG):
        _log.debug("%s %s -> %s in %.3fs (stream=%s, attempt %d)", request.method, redactor.url(request.url),
                   status, time.monotonic() - started, stream, attempt)


def status_error_of(
    response: httpx.Response, body: bytes, provider: str, redactor: Redactor | None = None
) -> HttpStatusError:
    """The :class:`HttpStatusError` of ``response`` and its (bounded) ``body``: the provider's message
    with every secret of the request cut out (providers echo a wrong key back)."""
    request_id = next((response.headers[h] for h in _REQUEST_ID_HEADERS if h in response.headers), None)
    message = _error_message(body)
    if message is not None and redactor is not None:
        message = redactor.redact(message)
    return HttpStatusError(
        response.status_code,
        provider_message=message,
        request_id=request_id,
        retry_after=_retry_after(response.headers),
        provider=provider,
    )


def _error_message(body: bytes) -> str | None:
    """The message of a provider's JSON error body (OpenAI, Anthropic and Gemini share the shape)."""
    import json

    text = body.decode("utf-8", "replace").strip()
    if not text:
        return None
    try:
        payload = json.loads(text)
    except ValueError:
        return text[:500]
    if isinstance(payload, list) and payload:
        payload = payload[0]
    if isinstance(payload, dict):
        error = payload.get("error", payload)
        if isinstance(error, dict):
            message = error.get("message")
            if isinstance(message, str):
                return message
        if isinstance(error, str):
            return error
    return text[:500]


def _retry_after(headers: httpx.Headers) -> float | None:
    value = headers.get("retry-after-ms")
    if value is not None:
        with contextlib.suppress(ValueError):
            return max(0.0, float(value) / 1000.0)
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    with contextlib.suppress(TypeError, ValueError):
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    return None
