"""The threaded transport: a plain ``httpx2.Client`` whose sockets can be cancelled from any thread.

Each open stream holds one I/O thread. Three facts shape the transport:

* closing an httpx2 response from another thread does not wake a thread blocked reading it;
  shutting the socket down (``SHUT_RDWR``) does, within a millisecond, and the server sees the
  close at once;
* the socket exists only inside httpcore2. The seam where every socket can be seen is a pool's
  network backend: every stream the pool opens goes through :class:`_CancellableBackend`, whose
  streams register their socket with the :class:`~rxllm._transports.base.CancelScope` of the
  thread using them (on every read and write, so a reused keep-alive connection is covered while
  waiting for headers too);
* ``HTTP(S)_PROXY`` is honoured by a client only when it builds its own transports, and the
  tools people use on a legacy httpx client (pytest-httpx, respx, OpenTelemetry) patch its
  ``HTTPTransport`` / httpcore. So the client is httpx2's own, built as httpx2 builds it, and
  :func:`make_cancellable` only wraps its pools' backends (also on a client the user passes, of
  httpx2 or of the legacy httpx: :mod:`rxllm._transports.stack`).

An attempt (:meth:`HttpTransport.start`) runs on an I/O thread inside its scope; ``cancel()``
from any other thread shuts down every socket the scope has touched, which wakes the blocked
reader with an error that is never delivered because the scope is cancelled. The scope also
carries the attempt's total deadline, to which every socket timeout is clamped. Bodies are
decoded here (:mod:`rxllm._transports.decoding`), bounded, never by the client library.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import socket
import ssl
import sys
import threading
import time
import weakref
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any, ClassVar

import httpcore2
import httpx2
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
from .._core.threads import daemon_thread, schedule_cancellable, thread_pool_scheduler
from .base import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_FINISH_GRACE,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_STREAM_BYTES,
    DEFAULT_READ_TIMEOUT,
    DEFAULT_TOTAL_TIMEOUT,
    DRAIN_BYTES,
    DRAIN_SECONDS,
    AttemptSink,
    CancelScope,
    ErrorBody,
    Exchange,
    HttpRequest,
    TransportLimits,
    body_error,
    check_client,
    check_header_values,
    check_peer,
    close_quietly,
    current_scope,
    detached,
    expired_connections,
    headers_arrived,
    limit_of,
    log_request,
    pools_of,
    redirect_target,
    request_headers,
    status_error_of,
    stream_type_error,
    thread_scope,
    timeout_error,
    transport_error,
    wrap_network_backends,
)
from .coalesce import ChunkCoalescer
from .decoding import BodyDecoder
from .stack import ERRORS, core_of, shared_ssl_context, stack_of

__all__ = ["HttpResponse", "HttpTransport", "make_cancellable", "prune"]

_log = logging.getLogger("rxllm.http")
_grace_log = logging.getLogger("rxllm.http.grace")  # the finish grace's own lines, beside the one per request
DEFAULT_IDLE_THREAD_TIMEOUT = 30.0  # seconds an idle I/O thread waits for work before it exits


_monotonic = time.monotonic


def _clamp(timeout: float | None, scope: CancelScope, error: type[Exception]) -> float:
    """A socket timeout that also ends at the scope's total deadline (a trickle cannot outlive it)."""
    remaining = scope.remaining()
    assert remaining is not None
    if remaining <= 0:
        raise error("the total deadline passed")
    return remaining if timeout is None else min(timeout, remaining)


class _CancellableStream(httpcore2.NetworkStream):
    """A pool's network stream: its socket attaches to the scope of the thread using it, reads are
    clamped to the scope's deadline, and a chunked response body reaches h11 one chunk per read
    (:class:`~rxllm._transports.coalesce.ChunkCoalescer`)."""

    __slots__ = ("_coalescer", "_core", "_inner", "_peer_ok", "owner", "sock")

    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner
        self._peer_ok: bool | None = None  # whether the peer may see a credential in clear (check_peer)
        self._core = core_of(inner)  # the pool's httpcore: its timeouts are the ones the pool maps
        self.sock: socket.socket | None = inner.get_extra_info("socket")
        self.owner: CancelScope | None = None  # the scope that used the socket last
        self._coalescer = ChunkCoalescer()

    def _attach(self) -> CancelScope | None:
        scope: CancelScope | None = getattr(thread_scope, "scope", None)
        if scope is not self.owner and scope is not None and self.sock is not None:
            scope.watch(self)
        return scope

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        # ``_attach`` and ``_clamp`` inlined: this runs once per network read, which on a stream
        # trickling tokens is once per chunk.
        scope: CancelScope | None = getattr(thread_scope, "scope", None)
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
                        raise self._core.ReadTimeout("the total deadline passed")
                    if wait is None or remaining < wait:
                        wait = remaining
            data = self._inner.read(max_bytes, wait)
            coalesced = received(data)
            if coalesced or not data:  # else the read completed nothing (half a chunk-size line)
                return coalesced

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        scope = self._attach()
        if scope is not None:
            if scope.loopback_only:  # a credential in clear: never to a peer off loopback
                self._peer_ok = check_peer(self, scope, self._peer_ok)
            if scope.deadline is not None:
                timeout = _clamp(timeout, scope, self._core.WriteTimeout)
        self._coalescer.sent(buffer)
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.NetworkStream:
        return _CancellableStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        # Bytes arrived after a complete response (see coalesce.py): httpcore takes a readable idle
        # connection for one the server closed, and closes it instead of reusing it.
        if info == "is_readable" and self._coalescer.smuggled:
            return True
        return self._inner.get_extra_info(info)


class _CancellableBackend(httpcore2.NetworkBackend):
    """Wraps a pool's network backend: every stream it opens registers its socket with the scope
    of the thread using it (nothing else changes; on a thread with no scope, nothing at all)."""

    def __init__(self, inner: httpcore2.NetworkBackend | None = None) -> None:
        self._inner = inner or httpcore2.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        scope: CancelScope | None = getattr(thread_scope, "scope", None)
        if scope is not None and scope.deadline is not None:
            timeout = _clamp(timeout, scope, core_of(self._inner).ConnectTimeout)
        stream = _CancellableStream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options))
        stream._attach()  # a cancel that raced the connect shuts the new socket down at once
        return stream

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.NetworkStream:
        return _CancellableStream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _Pruner:
    """Closes idle keep-alive connections once they pass ``keepalive_expiry`` (see
    :func:`~rxllm._transports.base.expired_connections`): one daemon thread for every threaded
    transport, started with the first one, holding the pools weakly."""

    _lock: ClassVar[threading.Lock] = threading.Lock()
    _pools: ClassVar[weakref.WeakKeyDictionary[Any, float]] = weakref.WeakKeyDictionary()
    _wake: ClassVar[threading.Event] = threading.Event()
    _thread: ClassVar[threading.Thread | None] = None

    @classmethod
    def watch(cls, pool: Any, keepalive_expiry: float) -> None:
        with cls._lock:
            cls._pools[pool] = keepalive_expiry
            if cls._thread is None:
                cls._thread = daemon_thread(cls._run, "rxllm-pruner")
        cls._wake.set()

    @classmethod
    def forget(cls, pool: Any) -> None:
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
    """Close the pool's idle connections that passed their keep-alive expiry."""
    for connection in expired_connections(pool):
        close_quietly(connection.close, "an expired keep-alive connection")


def make_cancellable(client: Any, *, watch_idle: bool = False) -> int:
    """Let a :class:`CancelScope` see every socket of ``client``'s own httpx transports.

    httpx2 (like httpx) builds one httpcore pool per transport (the default one and one per proxy mount, from
    ``HTTP(S)_PROXY`` / ``NO_PROXY`` when ``trust_env``); each pool opens its connections through a
    network backend, the public seam where every socket can be seen, the header wait on a reused
    keep-alive connection included. The backend is wrapped, not replaced: the pool, the proxy, TLS
    and the ecosystem's patches of ``HTTPTransport.handle_request`` (pytest-httpx, vcrpy,
    OpenTelemetry) all stay the library's own. Neither library offers a public handle on a
    transport's pool, so this reads its ``_pool`` attribute; a transport that is not the library's own (a
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


class HttpResponse(rx_abc.DisposableBase):
    """An open response body; iterate :meth:`iter_bytes`, then :meth:`close` (the resource of ``using``).

    The body is decoded here, bounded (:class:`~rxllm._transports.decoding.BodyDecoder`), never by httpx.
    """

    __slots__ = ("_body", "_cap", "_ended", "_limits", "_provider", "_response", "_scope", "status_code")

    def __init__(
        self,
        response: httpx2.Response,
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
        encoding = self._response.headers.get("content-encoding", "")
        # No Content-Encoding header (every SSE stream seen so far): no decoder is built unless the cap is passed.
        decoder = BodyDecoder(encoding, max_bytes=cap, provider=self._provider) if encoding else None
        raw_body = self._response.iter_raw()
        failure: Exception | None = None
        try:
            if decoder is None or decoder.identity:  # one generator frame less per read
                total = 0
                most = sys.maxsize if cap is None else cap
                for raw in raw_body:
                    total += len(raw)
                    if total > most:  # the cap is counted here, inline (once per HTTP chunk)
                        (decoder or BodyDecoder("", max_bytes=cap, provider=self._provider)).count(total)  # raises
                    yield raw
            else:
                for raw in raw_body:
                    yield from decoder.feed(raw)
                yield from decoder.flush()
        except ERRORS.timeout as exc:
            scope = self._scope
            limit = limit_of(exc, headers=True, expired=scope is not None and scope.expired())
            failure = detached(timeout_error(exc, limit, self._limits, self._provider), exc)
        except Exception as exc:
            failure = body_error(exc, self._provider)
            if failure is None:
                raise
        finally:
            # Closed here, on this thread, down to httpcore's body (as ``yield from`` would): left to
            # the collector it would be finalized on any thread, after the connection went back.
            close = getattr(raw_body, "close", None)
            if close is not None:
                close()
        if failure is not None:  # raised here, not in the handler: the library's error is not its context
            raise failure

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
            close_quietly(body.close, "a response body")
        close_quietly(self._response.close, "a response")

    def dispose(self) -> None:
        """``Disposable`` protocol: the same as :meth:`close`."""
        self.close()


class HttpTransport:
    """The HTTP side of streaming models: an httpx client and the I/O thread pool, sized together.

    Each open stream holds one I/O thread and one connection for its whole duration (so size
    for concurrent streams, not requests per second): both are sized
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
        finish_grace: seconds to wait for the body's end once the turn's finish and usage
            arrived; a body that stalls or breaks off after them ends the turn with its whole
            final instead of a timeout or an error (the connection is closed, not reused).
        keepalive_expiry: seconds an idle keep-alive connection is kept.
        http_client: an ``httpx2.Client`` (or a legacy ``httpx.Client``) you built (proxy,
            ``verify``, certificates, limits, headers, event hooks, mounts...) to send the requests
            with instead of one of rxllm's; rxllm never closes it (:meth:`close` leaves it open). rxllm's timeouts
            above still apply to each request. Cancellation closes the socket at once where the
            client's transport is the library's own (HTTP/1.1), else it stops the emissions at once.
        trust_env: for rxllm's own client: honour ``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``,
            ``NO_PROXY``, ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` exactly as httpx2 does (default).
        idle_thread_timeout: seconds an I/O thread waits for a next stream before it exits (after a
            burst of streams the pool shrinks back; a later stream starts a thread again).

    The client is a plain ``httpx2.Client`` over ``httpx2.HTTPTransport``; the sockets are made
    cancellable by wrapping the pools' network backend (see :func:`make_cancellable`).
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
        finish_grace: float = DEFAULT_FINISH_GRACE,
        keepalive_expiry: float = 30.0,
        http_client: httpx2.Client | Any | None = None,
        trust_env: bool = True,
        idle_thread_timeout: float = DEFAULT_IDLE_THREAD_TIMEOUT,
    ) -> None:
        if http_client is not None:
            stack = stack_of(http_client)
            kind = stack.httpx.Client if stack is not None else httpx2.Client
            check_client(http_client, (kind,), " (an AsyncClient goes to AsyncHttpTransport)")
        self.max_concurrent_streams = max_concurrent_streams
        self.limits: TransportLimits = TransportLimits(
            max_concurrent_streams,
            connect_timeout=connect_timeout,
            first_byte_timeout=first_byte_timeout,
            read_timeout=read_timeout,
            total_timeout=total_timeout,
            max_response_bytes=max_response_bytes,
            max_stream_bytes=max_stream_bytes,
            finish_grace=finish_grace,
        )
        self._owns_client = http_client is None
        if http_client is None:
            http_client = httpx2.Client(
                limits=httpx2.Limits(max_connections=max_concurrent_streams,
                                    max_keepalive_connections=max_concurrent_streams,
                                    keepalive_expiry=keepalive_expiry),
                timeout=self.limits.client_timeout(),
                follow_redirects=False,
                verify=shared_ssl_context(trust_env),
                trust_env=trust_env,
            )
        self._client = http_client
        make_cancellable(http_client, watch_idle=self._owns_client)
        if not idle_thread_timeout > 0:
            raise ConfigurationError("idle_thread_timeout must be positive")
        self._idle_thread_timeout = idle_thread_timeout
        self._scheduler: ThreadPoolScheduler | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"HttpTransport(max_concurrent_streams={self.max_concurrent_streams})"

    @property
    def scheduler(self) -> rx_abc.SchedulerBase:
        """The I/O pool (created on first use), one thread per concurrently open stream."""
        with self._lock:
            if self._scheduler is None:
                self._scheduler = thread_pool_scheduler(self.max_concurrent_streams, "rxllm-io",
                                                        idle_timeout=self._idle_thread_timeout)
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
        check_header_values(request, provider)
        scope = current_scope()
        if scope is not None and limits.total_timeout is not None:
            scope.deadline = time.monotonic() + limits.total_timeout
        started = time.monotonic()
        failure: Exception | None = None
        try:
            http_request = self._client.build_request(request.method, request.url, content=request.body,
                                                      headers=request_headers(request),
                                                      extensions={"timeout": limits.request_timeouts()})
            response = self._send(http_request, request, redactor, provider)
        except ERRORS.invalid_url as exc:
            failure = detached(ConfigurationError(f"invalid URL {redactor.url(request.url)!r}", provider=provider),
                               exc, "invalid URL")
        except ERRORS.timeout as exc:
            limit = limit_of(exc, headers=False, expired=scope is not None and scope.expired())
            failure = detached(timeout_error(exc, limit, limits, provider), exc, redactor.redact(str(exc)))
        except ERRORS.http as exc:
            failure = transport_error(exc, request, redactor, provider)
        if failure is not None:  # raised here, not in the handler: the library's error is not its context
            raise failure
        headers_arrived(http_request, limits)
        log_request(request, redactor, response.status_code, started, stream, attempt)
        if response.status_code >= 300:
            try:
                raise _status_error(response, provider, redactor)
            finally:
                response.close()
        if stream and (page := stream_type_error(response, request, redactor, provider)) is not None:
            response.close()
            raise page
        return HttpResponse(response, limits=limits, stream=stream, provider=provider, scope=scope)

    def _send(self, http_request: Any, request: HttpRequest, redactor: Redactor, provider: str) -> Any:
        """Send, following redirects only where the client says so (a user's ``follow_redirects=True``),
        hop by hop, each made safe by :func:`~rxllm._transports.base.redirect_target`."""
        client = self._client
        response = client.send(http_request, stream=True, follow_redirects=False)
        if not getattr(client, "follow_redirects", False):
            return response
        hops = 0
        while True:
            try:
                target = redirect_target(response, request, redactor, hops, client.max_redirects, provider)
            finally:
                if response.next_request is not None:
                    response.close()
            if target is None:
                return response
            hops += 1
            response = client.send(target, stream=True, follow_redirects=False)

    @property
    def timer_scheduler(self) -> rx_abc.SchedulerBase | None:
        """``None``: the retry backoff runs on reactivex's ``TimeoutScheduler``."""
        return None

    def scheduler_of(self, scheduler: rx_abc.SchedulerBase | None) -> rx_abc.SchedulerBase:
        """Where a model's attempts block: its ``scheduler=``, else this transport's I/O pool."""
        return scheduler or self.scheduler

    def start(
        self, sink: AttemptSink, scope: CancelScope, *, scheduler: rx_abc.SchedulerBase | None = None
    ) -> _ThreadedAttempt:
        """Run one attempt on ``scheduler`` (default: the I/O pool), inside ``scope``.

        The caller's ``contextvars`` (an OpenTelemetry span, ...) go with the work onto the I/O
        thread, so an httpx instrumentation parents the request's span under the caller's.
        ``cancel()`` of the returned attempt acts on the calling thread (a stock ``subscribe_on``
        would schedule it onto the very thread blocked reading): the scope's sockets are shut
        down at once, the blocked read wakes, and work not yet started never starts.
        """
        scheduler = scheduler or self.scheduler
        context = contextvars.copy_context()

        def action(_scheduler: rx_abc.SchedulerBase, _state: Any = None) -> None:
            if not scope.cancelled:
                context.run(self._run, sink, scope)

        cancel_scheduled = schedule_cancellable(scheduler, action)  # (a plain pool: straight to its executor)
        return _ThreadedAttempt(scope, cancel_scheduled)

    def _run(self, sink: AttemptSink, scope: CancelScope) -> None:
        """One attempt, on the I/O thread: open, deliver the body, give the connection back, end."""
        with scope.entered():
            response: HttpResponse | None = None
            try:
                exchange = sink.exchange()
                scope.loopback_only = exchange.loopback_only
                response = self._open_exchange(exchange)
                if not exchange.stream:
                    sink.on_whole(response.read())
                else:
                    feed = sink.on_body
                    settled = sink.settled
                    ended = False
                    body = response.iter_bytes()
                    for data in body:
                        if feed(data):
                            ended = True
                            break
                        if scope.cancelled:
                            break
                        if settled():
                            ended = self._after_finish(body, feed, scope, exchange.provider)
                            break
                    if scope.cancelled:
                        raise TransportError("the attempt was cancelled", provider=exchange.provider)
                    if ended:  # the bytes that end the body are read after the final (``release``)
                        response.mark_ended()
                    else:  # the body ran out: the connection goes back now
                        response.close()
                    sink.on_body_end(ended)
                    # After the final, before completion: the subscriber has its answer at once, and a
                    # next call made on completion finds the connection back in the pool.
                    response.release()
            except Exception as exc:
                if response is not None:
                    # Closed here and now, on this thread: an abandoned body would be finalized by the
                    # garbage collector on any thread, possibly one holding httpcore's pool lock.
                    response.close()
                sink.on_error(exc)
                return
            sink.on_completed()

    def _after_finish(self, body: Iterator[bytes], feed: Callable[[bytes], bool], scope: CancelScope,
                      provider: str) -> bool:
        """The rest of a body whose finish and usage arrived: read for at most ``finish_grace``
        seconds; ``True`` when the end marker came, ``False`` when the body ended, stalled or broke
        off (the turn is whole either way: the caller closes the connection and ends the turn)."""
        until = time.monotonic() + self.limits.finish_grace
        _grace_log.debug("%s: the finish and usage arrived; waiting up to %.2fs for the body's end", provider,
                         self.limits.finish_grace)
        if scope.deadline is None or scope.deadline > until:
            scope.deadline = until  # every read of a cancellable socket is clamped to it
        try:
            for data in body:
                if feed(data):
                    return True
                if scope.cancelled:
                    return False
        except (StreamTimeoutError, StreamInterruptedError) as exc:
            if not scope.cancelled:
                _grace_log.debug("%s: the body did not end within %.2fs of the finish and usage (%s): the turn "
                                 "ends without it", provider, self.limits.finish_grace, type(exc).__name__)
        return False

    def _open_exchange(self, exchange: Exchange) -> HttpResponse:
        if exchange.context is None:
            return self.open(exchange.request, provider=exchange.provider, stream=exchange.stream,
                             redactor=exchange.redactor, attempt=exchange.attempt)
        with exchange.context():
            return self.open(exchange.request, provider=exchange.provider, stream=exchange.stream,
                             redactor=exchange.redactor, attempt=exchange.attempt)

    def close(self) -> None:
        """Close every pooled connection (of rxllm's own client; a client you passed stays open)."""
        if self._owns_client:
            for pool in pools_of(self._client):
                _Pruner.forget(pool)
            self._client.close()


class _ThreadedAttempt:
    """An attempt running on an I/O thread (:meth:`HttpTransport.start`)."""

    __slots__ = ("_cancel_scheduled", "_scope")

    def __init__(self, scope: CancelScope, cancel_scheduled: Callable[[], Any]) -> None:
        self._scope = scope
        self._cancel_scheduled = cancel_scheduled

    def cancel(self) -> None:
        """Shut the attempt's sockets down now; work not yet started never starts."""
        self._scope.cancel()
        self._cancel_scheduled()


def _status_error(response: httpx2.Response, provider: str, redactor: Redactor) -> HttpStatusError:
    body = ErrorBody(response)
    with contextlib.suppress(*ERRORS.http, *ERRORS.stream):  # the message is best effort
        for piece in response.iter_raw():
            if body.add(piece):
                break
    return status_error_of(response, body.data, provider, redactor)

