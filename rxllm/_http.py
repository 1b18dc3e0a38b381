"""The HTTP transport: httpx over an httpcore pool whose sockets can be cancelled from any thread.

This is the only module that imports httpx/httpcore. Two facts measured on this machine
shape it (ARCHITECTURE.md §3):

* closing an httpx response from another thread does not wake a thread blocked reading it;
  shutting the socket down (``SHUT_RDWR``) does, within a millisecond, and the server sees the
  close at once;
* the socket exists only inside httpcore. Its public seam is the pool's ``network_backend``:
  every stream the pool opens goes through :class:`_CancellableBackend`, whose streams register
  their socket with the :class:`CancelScope` of the thread using them (on every read and write,
  so a reused keep-alive connection is covered while waiting for headers too).

A :class:`CancelScope` is entered by the thread doing one request's blocking work; ``cancel()``
from any other thread shuts down every socket the scope has touched, which wakes the blocked
reader with an error that the reader then ignores because its scope is cancelled.
"""

from __future__ import annotations

import contextlib
import email.utils
import logging
import socket
import ssl
import threading
import time
from collections.abc import Generator, Iterable, Iterator
from typing import Any

import httpcore
import httpx
from reactivex import abc as rx_abc
from reactivex.scheduler import ThreadPoolScheduler

from ._errors import ConfigurationError, HttpStatusError, StreamInterruptedError, TransportError
from ._provider import HttpRequest

__all__ = [
    "MAX_ERROR_BODY",
    "CancelScope",
    "HttpResponse",
    "HttpTransport",
    "current_scope",
    "status_error_of",
    "transport_timeout",
]

_log = logging.getLogger("rxllm.http")
_local = threading.local()
MAX_ERROR_BODY = 64 * 1024
_REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-goog-request-id", "cf-ray")


class CancelScope:
    """The cancellation handle of one request's blocking work.

    ``cancel()`` may be called from any thread, any number of times: it marks the scope
    cancelled and shuts down every socket the scope's thread has used, waking a blocked read
    at once. ``close()`` (by the working thread when it is done) detaches the sockets so a
    late ``cancel()`` cannot touch a connection that went back to the pool. ``finish()`` marks
    the work's terminal event: after it, or after ``cancel()``, the scope is no longer
    ``active`` and nothing more is delivered.
    """

    __slots__ = ("_closed", "_finished", "_lock", "_sockets", "cancelled")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._closed = False
        self._finished = False
        self.cancelled = False

    @property
    def active(self) -> bool:
        """Neither cancelled nor finished: items may still be delivered."""
        return not (self.cancelled or self._finished)

    def finish(self) -> bool:
        """Mark the terminal event and detach the sockets; ``True`` if the scope was still active."""
        with self._lock:
            was_active = not (self.cancelled or self._finished)
            self._finished = True
            self._closed = True
            self._sockets.clear()
        return was_active

    def watch(self, sock: socket.socket) -> None:
        """Attach a socket (called by the transport on the working thread)."""
        with self._lock:
            if self._closed:
                return
            if self.cancelled:
                _shutdown(sock)
                return
            self._sockets.add(sock)

    def cancel(self) -> None:
        """Cancel: shut down every attached socket now. Thread-safe and idempotent."""
        with self._lock:
            self.cancelled = True
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            _shutdown(sock)

    def close(self) -> None:
        """Detach from the sockets (the work is over)."""
        with self._lock:
            self._closed = True
            self._sockets.clear()

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


def _shutdown(sock: socket.socket) -> None:
    # The base-class method: on an SSLSocket, SSLSocket.shutdown would also drop the TLS
    # object under the reader's feet; shutting the OS socket down is all we want.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _CancellableStream(httpcore.NetworkStream):
    __slots__ = ("_inner", "_scope", "_sock")

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner
        self._sock: socket.socket | None = inner.get_extra_info("socket")
        self._scope: CancelScope | None = None

    def _attach(self) -> None:
        scope = getattr(_local, "scope", None)
        if scope is not self._scope and scope is not None and self._sock is not None:
            self._scope = scope
            scope.watch(self._sock)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._attach()
        return self._inner.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._attach()
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
    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        stream = _CancellableStream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options))
        stream._attach()  # a cancel that raced the connect shuts the new socket down at once
        return stream

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        return _CancellableStream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _ByteStream(httpx.SyncByteStream):
    def __init__(self, inner: Iterable[bytes]) -> None:
        self._inner = inner

    def __iter__(self) -> Iterator[bytes]:
        with _map_httpcore_errors():
            yield from self._inner

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()


@contextlib.contextmanager
def _map_httpcore_errors() -> Iterator[None]:
    try:
        yield
    except httpcore.TimeoutException as exc:
        raise httpx.TimeoutException(str(exc)) from exc
    except httpcore.NetworkError as exc:
        raise httpx.NetworkError(str(exc)) from exc
    except httpcore.ProtocolError as exc:
        raise httpx.RemoteProtocolError(str(exc)) from exc
    except httpcore.UnsupportedProtocol as exc:
        raise httpx.UnsupportedProtocol(str(exc)) from exc


class _CancellableTransport(httpx.BaseTransport):
    def __init__(self, *, max_connections: int, keepalive_expiry: float) -> None:
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=keepalive_expiry,
            network_backend=_CancellableBackend(),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.SyncByteStream)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _map_httpcore_errors():
            response = self._pool.handle_request(core_request)
        assert isinstance(response.stream, Iterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ByteStream(response.stream),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._pool.close()


class HttpResponse(rx_abc.DisposableBase):
    """An open response body; iterate :meth:`iter_bytes`, then :meth:`close` (the resource of ``using``)."""

    __slots__ = ("_body", "_response", "status_code")

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self._body: Iterator[bytes] | None = None
        self.status_code: int = response.status_code

    def iter_bytes(self) -> Iterator[bytes]:
        """The body as it arrives. Transport failures raise :class:`StreamInterruptedError`."""
        self._body = self._iterate()
        return self._body

    def _iterate(self) -> Iterator[bytes]:
        encoding = self._response.headers.get("content-encoding", "identity").strip().lower()
        try:
            # Uncompressed bodies (every SSE stream seen so far) skip httpx's content decoder.
            yield from (self._response.iter_raw() if encoding == "identity" else self._response.iter_bytes())
        except httpx.HTTPError as exc:
            raise StreamInterruptedError(f"the response body broke off: {type(exc).__name__}: {exc}") from exc

    def read(self) -> bytes:
        """The whole body."""
        try:
            return self._response.read()
        except httpx.HTTPError as exc:
            raise StreamInterruptedError(f"the response body broke off: {type(exc).__name__}: {exc}") from exc

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

    Args:
        max_concurrent_streams: threads in the I/O pool and connections in the HTTP pool.
        connect_timeout: seconds to connect (and to wait for a free pooled connection).
        read_timeout: seconds without a byte before a read fails (a stalled stream).
        keepalive_expiry: seconds an idle keep-alive connection is kept.
    """

    def __init__(
        self,
        *,
        max_concurrent_streams: int = 128,
        connect_timeout: float = 10.0,
        read_timeout: float = 300.0,
        keepalive_expiry: float = 30.0,
    ) -> None:
        self.max_concurrent_streams = max_concurrent_streams
        self._timeout = transport_timeout(max_concurrent_streams, connect_timeout, read_timeout)
        self._client = httpx.Client(
            transport=_CancellableTransport(max_connections=max_concurrent_streams, keepalive_expiry=keepalive_expiry),
            timeout=self._timeout,
            follow_redirects=False,
        )
        self._scheduler: ThreadPoolScheduler | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"HttpTransport(max_concurrent_streams={self.max_concurrent_streams})"

    @property
    def scheduler(self) -> rx_abc.SchedulerBase:
        """The I/O pool (created on first use), one thread per concurrently open stream."""
        with self._lock:
            if self._scheduler is None:
                self._scheduler = ThreadPoolScheduler(self.max_concurrent_streams)
            return self._scheduler

    def open(self, request: HttpRequest, *, provider: str, stream: bool) -> HttpResponse:
        """Send ``request`` and wait for the response headers (blocking; cancellable by scope).

        Raises:
            HttpStatusError: for a non-2xx status (its body read, bounded, for the message).
            TransportError: when the connection fails or times out.
        """
        started = time.monotonic()
        try:
            http_request = self._client.build_request(request.method, request.url, content=request.body,
                                                      headers=dict(request.headers))
            response = self._client.send(http_request, stream=True)
        except httpx.InvalidURL as exc:
            raise ConfigurationError(f"invalid URL {request.url!r}: {exc}", provider=provider) from exc
        except httpx.HTTPError as exc:
            raise TransportError(f"request to {request.url} failed: {type(exc).__name__}: {exc}",
                                 provider=provider) from exc
        _log.debug("%s %s -> %s in %.3fs (stream=%s)", request.method, request.url, response.status_code,
                   time.monotonic() - started, stream)
        if response.status_code >= 300:
            try:
                raise _status_error(response, provider)
            finally:
                response.close()
        return HttpResponse(response)

    def close(self) -> None:
        """Close every pooled connection."""
        self._client.close()


def transport_timeout(max_concurrent_streams: int, connect_timeout: float, read_timeout: float) -> httpx.Timeout:
    """Both transports' timeouts (waiting for a pooled connection counts as connecting), checked.

    Raises:
        ConfigurationError: for fewer than one stream or a timeout that is not positive.
    """
    if max_concurrent_streams < 1:
        raise ConfigurationError("max_concurrent_streams must be at least 1")
    if connect_timeout <= 0 or read_timeout <= 0:
        raise ConfigurationError("connect_timeout and read_timeout must be positive")
    return httpx.Timeout(connect=connect_timeout, read=read_timeout, write=read_timeout, pool=connect_timeout)


def _status_error(response: httpx.Response, provider: str) -> HttpStatusError:
    body = b""
    with contextlib.suppress(httpx.HTTPError):
        for piece in response.iter_raw():
            body += piece
            if len(body) >= MAX_ERROR_BODY:
                break
    return status_error_of(response, body, provider)


def status_error_of(response: httpx.Response, body: bytes, provider: str) -> HttpStatusError:
    request_id = next((response.headers[h] for h in _REQUEST_ID_HEADERS if h in response.headers), None)
    return HttpStatusError(
        response.status_code,
        provider_message=_error_message(body),
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
