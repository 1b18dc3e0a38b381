"""The asyncio transport: one event loop (its own thread's, or the application's) and
``httpx2.AsyncClient`` pools for every open stream.

Where the threaded transport holds a thread per open stream, this one holds a task. Cancelling an
attempt shuts its sockets down from the cancelling thread (the server sees the close at once) and
then ends its task, whether the task was waiting for a pool slot, for the headers or for the next
byte. What both transports share comes from :mod:`rxllm._transports.base`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import heapq
import ipaddress
import logging
import socket
import ssl
import sys
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Iterable
from types import TracebackType
from typing import Any

import httpcore2
import httpx2
from reactivex import abc as rx_abc

from .._core.errors import (
    ConfigurationError,
    EventLoopError,
    HttpStatusError,
    StreamInterruptedError,
    StreamTimeoutError,
    TransportError,
)
from .._core.loop_work import hold, running_loop
from .._core.redact import Redactor
from .._core.threads import daemon_thread
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
    HttpRequest,
    TransportLimits,
    aclose_quietly,
    body_error,
    check_client,
    check_header_values,
    check_peer,
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
    timeout_error,
    transport_error,
    wrap_network_backends,
)
from .coalesce import ChunkCoalescer
from .decoding import BodyDecoder
from .stack import ERRORS, shared_ssl_context, stack_of

__all__ = [
    "AsyncHttpResponse",
    "AsyncHttpTransport",
    "Submitted",
    "make_async_cancellable",
    "total_timeout_error",
]

_POOL_SHARD = 256
_STOP_SECONDS = 2.0  # close(): how long a stopped stream gets to end before it is cancelled
_CLOSE_SECONDS = 10.0  # close(): how long the whole cleanup on the loop may take
_log = logging.getLogger("rxllm.http")
_grace_log = logging.getLogger("rxllm.http.grace")  # the finish grace's own lines, beside the one per request


_attempt_scope: contextvars.ContextVar[CancelScope | None] = contextvars.ContextVar("rxllm_attempt_scope", default=None)


class _CancellableAsyncStream(httpcore2.AsyncNetworkStream):
    """A pool's network stream whose socket is attached to the :class:`~rxllm._transports.threaded.CancelScope` of
    the attempt using it (the context's ``_attempt_scope``), at connect and on every read and write,
    so a reused keep-alive connection is covered too. Attaching to a scope already cancelled shuts
    the socket down at once: the next write fails instead of reaching the server."""

    __slots__ = ("_coalescer", "_inner", "_peer_ok", "owner", "sock")

    def __init__(self, inner: httpcore2.AsyncNetworkStream) -> None:
        self._inner = inner
        self._peer_ok: bool | None = None  # whether the peer may see a credential in clear (check_peer)
        self.sock: Any = inner.get_extra_info("socket")  # asyncio's TransportSocket
        self.owner: CancelScope | None = None  # the scope that used the socket last
        self._coalescer = ChunkCoalescer()  # a chunked body reaches h11 one chunk per read

    def attach(self) -> None:
        scope = _attempt_scope.get()
        if scope is not self.owner and scope is not None and self.sock is not None:
            scope.watch(self)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self.attach()
        while True:
            data = await self._inner.read(max_bytes, timeout)
            coalesced = self._coalescer.received(data)  # (bound here: not held while the read waits)
            if coalesced or not data:  # else the read completed nothing (half a chunk-size line)
                return coalesced

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.attach()
        scope = _attempt_scope.get()
        if scope is not None and scope.loopback_only:  # a credential in clear: never to a peer off loopback
            self._peer_ok = check_peer(self, scope, self._peer_ok)
        self._coalescer.sent(buffer)
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.AsyncNetworkStream:
        return _CancellableAsyncStream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        # Bytes arrived after a complete response (see coalesce.py): httpcore takes a readable idle
        # connection for one the server closed, and closes it instead of reusing it.
        if info == "is_readable" and self._coalescer.smuggled:
            return True
        return self._inner.get_extra_info(info)


class _CancellableAsyncBackend(httpcore2.AsyncNetworkBackend):
    """Wraps an async pool's network backend: every stream it opens is a :class:`_CancellableAsyncStream`."""

    def __init__(self, inner: httpcore2.AsyncNetworkBackend) -> None:
        self._inner = inner
        # httpcore2's own default backend (anyio's on an asyncio loop): an IP address is connected
        # to directly (see _connect_ip); any other backend (a mock, a legacy httpcore's) does it all
        self._direct = type(inner) is _auto_backend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        family = _ip_family(host) if self._direct and local_address is None else None
        if family is not None:
            inner = await _connect_ip(family, host, port, timeout, socket_options)
        else:
            inner = await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        stream = _CancellableAsyncStream(inner)
        stream.attach()  # a cancel that raced the connect shuts the new socket down before any byte
        return stream

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        stream = _CancellableAsyncStream(await self._inner.connect_unix_socket(path, timeout, socket_options))
        stream.attach()
        return stream

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def _auto_backend() -> type:
    from httpcore2._backends.auto import AutoBackend  # what an httpx2 pool connects with by default

    return AutoBackend


def _ip_family(host: str) -> socket.AddressFamily | None:
    """The address family of ``host`` when it is an IP address (IPv6 without brackets, as httpcore passes it)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    return socket.AF_INET6 if address.version == 6 else socket.AF_INET


async def _connect_ip(
    family: socket.AddressFamily, host: str, port: int, timeout: float | None, socket_options: Iterable[Any] | None
) -> httpcore2.AsyncNetworkStream:
    """What httpcore2's anyio backend does to connect to an IP address on an asyncio loop (the same
    stream class, the same errors and messages), without ``anyio.connect_tcp``'s machinery for host
    names (a task group, a task per address, an event and a cancel scope each: ~5 KiB per
    connecting stream, which is what an open stream's memory follows when thousands connect at
    once): one non-blocking socket, connected by the loop's ``sock_connect``, then handed to anyio.

    Unlike ``anyio.connect_tcp`` the socket's transport is not paused until the first read: bytes
    the server sends before the request is written (none, in HTTP) wait in anyio's queue instead
    of the kernel's.
    """
    import anyio
    import anyio.abc
    from httpcore2._backends.anyio import AnyIOStream

    loop = asyncio.get_running_loop()
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # (the loop sets TCP_NODELAY on TCP's)
    try:
        try:
            async with asyncio.timeout(timeout):
                sock.setblocking(False)
                await loop.sock_connect(sock, (host, port))
                for option in socket_options or ():
                    sock.setsockopt(*option)
                # (ValueError: the peer went away before anyio's check that the socket is connected)
                connected = await anyio.abc.SocketStream.from_socket(sock)
        except TimeoutError as exc:
            raise httpcore2.ConnectTimeout(exc) from exc
        except (OSError, ValueError, anyio.BrokenResourceError) as exc:  # worded as anyio.connect_tcp words it
            failed = OSError("All connection attempts failed")
            failed.__cause__ = exc
            raise httpcore2.ConnectError(failed) from failed
    except BaseException:
        sock.close()  # (anyio owns it once from_socket returned, and nothing fails after that)
        raise
    return AnyIOStream(connected)


def make_async_cancellable(client: Any) -> int:
    """:func:`~rxllm._transports.threaded.make_cancellable` for an async client (its HTTP/1.1 pools' sockets
    attach to the attempt's scope); how many pools were made cancellable."""
    return len(wrap_network_backends(client, _CancellableAsyncBackend))


class AsyncHttpResponse:
    """An open response of the asyncio transport (used on its event loop only).

    The body is decoded here, bounded (:class:`~rxllm._transports.decoding.BodyDecoder`), never by httpx.
    """

    __slots__ = ("_body", "_ended", "_limits", "_provider", "_release", "_response", "_stream")

    def __init__(
        self,
        response: httpx2.Response,
        release: Callable[[], None],
        *,
        limits: TransportLimits | None = None,
        stream: bool = True,
        provider: str | None = None,
    ) -> None:
        self._response = response
        self._release: Callable[[], None] | None = release
        self._body: AsyncIterator[bytes] | None = None
        self._ended = False
        self._limits = limits or TransportLimits(1)
        self._stream = stream
        self._provider = provider

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The decoded body as it arrives, in pieces of at most 64 KiB (errors as :meth:`HttpResponse.iter_bytes`)."""
        self._body = self._iterate(self._limits.body_cap(self._stream))
        return self._body

    def mark_ended(self) -> None:
        """The provider said the turn is over: :meth:`adrain` may read the bytes that end the body."""
        self._ended = True

    async def adrain(self) -> None:
        """When the provider has ended the turn, read what is left of the body (at most
        ``DRAIN_BYTES``, for at most ``DRAIN_SECONDS``), so :meth:`aclose` returns the connection to
        the pool instead of closing it: the next call skips a TCP and TLS handshake (as
        :meth:`HttpResponse.release` on the threaded transport)."""
        if self._body is not None and self._ended:
            try:
                await asyncio.wait_for(_drain(self._body), DRAIN_SECONDS)
            except (TimeoutError, *ERRORS.close) as exc:  # type: ignore[misc]  # a tuple built at run time  # the body did not end in time: aclose() closes it
                _log.debug("draining a response body: %s: %s", type(exc).__name__, exc)

    async def _iterate(self, cap: int | None) -> AsyncIterator[bytes]:
        decoder = BodyDecoder(self._response.headers.get("content-encoding", ""), max_bytes=cap,
                              provider=self._provider)
        failure: Exception | None = None
        response = self._response
        own = _unread_stream(response)
        source: AsyncIterator[bytes] = response.aiter_raw() if own is None else own.__aiter__()
        try:
            try:
                if decoder.identity:
                    total = 0
                    most = sys.maxsize if cap is None else cap
                    async for raw in source:
                        total += len(raw)
                        if total > most:  # the cap is counted here, inline (once per HTTP chunk)
                            decoder.count(total)  # raises ResponseTooLargeError
                        yield raw
                else:
                    async for raw in source:
                        for piece in decoder.feed(raw):
                            yield piece
                    for piece in decoder.flush():
                        yield piece
            finally:
                if own is not None:  # what aiter_raw() does when its iteration ends, however it ends
                    if isinstance(source, AsyncGenerator):
                        await source.aclose()
                    await response.aclose()  # the connection goes back to the pool now, not after the end
        except ERRORS.timeout as exc:
            failure = detached(timeout_error(exc, limit_of(exc, headers=True, expired=False), self._limits,
                                             self._provider), exc)
        except Exception as exc:
            failure = body_error(exc, self._provider)
            if failure is None:
                raise
        if failure is not None:  # raised here, not in the handler: the library's error is not its context
            raise failure

    async def aread(self) -> bytes:
        """The whole decoded body (at most ``max_response_bytes``)."""
        body = self._iterate(self._limits.max_response_bytes)
        self._body = body
        return b"".join([piece async for piece in body])

    async def aclose(self) -> None:
        """Release the connection (closes it when the body was not read to the end).

        The whole close runs shielded, in a task of its own: a cancellation that interrupted it
        (a dispose's task cancellation arriving while the close is under way, after the socket
        shutdown already ended the read) would leave the connection ACTIVE in the pool, and its
        permit taken, for good.
        """
        release, self._release = self._release, None
        body, self._body = self._body, None
        if release is not None:
            await asyncio.shield(_keep(_aclose_then(self._response, release, body)))
        elif isinstance(body, AsyncGenerator):
            await aclose_quietly(body.aclose, "a response body")


def _unread_stream(response: Any) -> Any:
    """The byte stream of an unread response of httpx2's (or legacy httpx's) own ``Response`` class, marked
    consumed, to iterate in place of ``response.aiter_raw()``; ``None`` otherwise (``aiter_raw()`` then
    raises what it raises for a body already read or closed, or a sync stream).

    ``aiter_raw()`` is that stream iterated inside a generator of its own, a chunker and a context
    manager, which an open stream keeps suspended for its lifetime (~0.8 KiB); the caller does the
    rest of what it does: closing the stream's iterator and the response when the iteration ends.
    (It also counts ``num_bytes_downloaded``, on a response nobody else sees.)
    """
    stack = stack_of(response)
    if stack is None or type(response) is not stack.httpx.Response:
        return None
    if response.is_stream_consumed or response.is_closed:
        return None
    stream = response.stream
    if not isinstance(stream, stack.httpx.AsyncByteStream):
        return None
    response.is_stream_consumed = True
    return stream


def _forget_request(response: Any) -> None:
    """Drop the sent request (its headers, URL, body) from a response of one of rxllm's own pools,
    which nobody else sees: an open stream's response otherwise keeps it (~2 KiB) while the body is
    read. httpx2 reads it after the headers only to attach it to an error of ``aiter_*`` or
    ``aclose`` (when there is one) and for ``response.request`` / ``response.url``, which rxllm does
    not use; a client you passed keeps it (your event hooks may hold the response)."""
    if type(response) is httpx2.Response:
        response._request = None


_NO_CONTEXT = contextlib.nullcontext()  # reusable: an attempt without a trace context enters it


class Submitted:
    """A coroutine handed to the transport's loop by :meth:`AsyncHttpTransport.submit`: ``cancel()``
    (from any thread) cancels its task, or keeps it from ever starting.

    What ``asyncio.run_coroutine_threadsafe`` returns, without its ``concurrent.futures.Future``
    (a ``Condition``, its lock and a 760-byte deque, about 1.4 KiB) that nobody here waits on:
    every open stream keeps one of these for its lifetime.
    """

    __slots__ = ("_loop", "_pending", "cancelled", "release", "scope", "task")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, pending: set[Submitted], scope: CancelScope | None = None
    ) -> None:
        self._loop = loop
        # queued on the loop until it ends: a blocking wait on the loop's own thread fails at once
        self.release = hold(loop)
        self._pending = pending  # the transport's: what close() stops
        # the attempt's scope, when the coroutine is one: close() stops it as a dispose does
        self.scope: CancelScope | None = scope
        self.task: asyncio.Task[None] | None = None  # set on the loop when the task starts
        self.cancelled: bool = False

    def __call__(self, _task: asyncio.Task[None]) -> None:
        """The task ended: its done callback, on the loop (the handle itself, not a bound method
        of it: an open stream holds one object less)."""
        self._pending.discard(self)
        self.release()

    done = __call__

    def stop(self) -> None:
        """On the loop: end the task with one signal, as :meth:`AsyncHttpTransport.cancel` does (its
        scope's sockets shut down; the task itself cancelled only when no socket is attached)."""
        scope = self.scope
        if scope is None:
            self.cancel()
            return
        scope.cancel()
        if not scope.attached:
            self.cancel()

    def cancel(self) -> bool:
        """Cancel the task (on the loop; from another thread, through ``call_soon_threadsafe``)."""
        self.cancelled = True
        task = self.task
        if task is not None:
            if _on_thread_of(self._loop):
                task.cancel()
            else:
                with contextlib.suppress(RuntimeError):  # the loop is closed: the task is gone with it
                    self._loop.call_soon_threadsafe(task.cancel)
        return True


class AsyncHttpTransport:
    """The asyncio transport: one event loop thread and ``httpx2.AsyncClient`` pools for every open stream.

    Where :class:`HttpTransport` holds a thread per open stream, this one holds a task: thousands
    of concurrent streams cost one thread. Disposing a subscription cancels its task; httpx then
    closes the connection, whether the task was waiting for headers or for the next byte.
    Subscribers are called on the loop's thread and must not block there (a blocking subscriber
    stalls every stream of the transport); hop with ``observe_on`` for heavy work.

    Args:
        max_concurrent_streams: connections in all (split into pools of 256, used in turn).
        connect_timeout: seconds to connect (and to wait for a free pooled connection); retried.
        first_byte_timeout: seconds from sending the request to the response headers (default:
            ``read_timeout``); not retried.
        read_timeout: seconds without a byte between chunks of the body; not retried.
        total_timeout: seconds for a whole attempt, request to end of body (``None``: no limit);
            not retried.
        max_response_bytes: cap on a non-streamed (``stream=False``) body, decoded.
        max_stream_bytes: cap on a streamed body, decoded (``None``: no cap).
        finish_grace: seconds to wait for the body's end once the turn's finish and usage
            arrived; a body that stalls or breaks off after them ends the turn with its whole
            final instead of a timeout or an error (the connection is closed, not reused).
        keepalive_expiry: seconds an idle keep-alive connection is kept.
        http_client: an ``httpx2.AsyncClient`` (or a legacy ``httpx.AsyncClient``) you built (proxy,
            ``verify``, limits, headers, event hooks, mounts, ``http2=True``...) to send every request
            with; rxllm never closes it. rxllm's timeouts above still apply to each request.
            Disposing cancels the request's task, which closes the connection on the library's own
            transports; on a mocked transport the
            emissions stop at once. Use it on the loop it belongs to (``loop=``).
        loop: an event loop that is already running (your application's): the transport runs
            its tasks there and calls subscribers on it, with no thread of its own. Without it
            the transport starts its own loop on a daemon thread (for threaded callers).

    Every limit and its default is listed in ``docs/limits.md`` (the same as :class:`HttpTransport`'s).
    Both own clients honour ``HTTP(S)_PROXY``, ``NO_PROXY`` and ``SSL_CERT_FILE`` as httpx does.
    """

    def __init__(
        self,
        *,
        max_concurrent_streams: int = 10_000,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        first_byte_timeout: float | None = None,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        total_timeout: float | None = DEFAULT_TOTAL_TIMEOUT,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_stream_bytes: int | None = DEFAULT_MAX_STREAM_BYTES,
        finish_grace: float = DEFAULT_FINISH_GRACE,
        keepalive_expiry: float = 30.0,
        http_client: httpx2.AsyncClient | Any | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        if http_client is not None:
            stack = stack_of(http_client)
            kind = stack.httpx.AsyncClient if stack is not None else httpx2.AsyncClient
            check_client(http_client, (kind,), " (a Client goes to HttpTransport)")
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
        self._timeout = self.limits.client_timeout()
        # httpcore's pool scans every connection for every request: one pool of 10,000 connections
        # opened ~8 streams/s (measured). Pools of at most _POOL_SHARD connections, used in turn, keep
        # that cost flat.
        shards = -(-max_concurrent_streams // _POOL_SHARD)
        per_shard = -(-max_concurrent_streams // shards)
        self._limits = httpx2.Limits(max_connections=per_shard, max_keepalive_connections=per_shard,
                                    keepalive_expiry=keepalive_expiry)
        self._shards = shards
        self._per_shard = per_shard
        self._in_flight: list[int] = []  # open exchanges per pool (touched on the loop thread only)
        self._gate: asyncio.Semaphore | None = None  # one permit per connection: see open()
        self._lock = threading.Lock()
        self._clients: list[Any | None] = []  # built on first use (see _client)
        self._prune_handle: asyncio.TimerHandle | None = None
        self._user_client = http_client
        if http_client is not None:  # one pool, the user's
            self._shards, self._per_shard = 1, max_concurrent_streams
        self._bound = loop is not None
        self._loop = loop
        self._tasks: set[Submitted] = set()  # what submit() started, until done
        self._done_context = contextvars.Context()  # what their done callbacks run in (on the loop only)
        self._thread: threading.Thread | None = None
        self._timer_scheduler: rx_abc.SchedulerBase | None = None
        self._deadlines: _Deadlines | None = None  # the attempts' total_timeout (on the loop)

    def __repr__(self) -> str:
        return f"AsyncHttpTransport(max_concurrent_streams={self.max_concurrent_streams})"

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The transport's event loop: the one it was bound to, or its own on a daemon thread
        (started on first use)."""
        with self._lock:
            if self._loop is None:
                if self._bound:
                    raise ConfigurationError("this AsyncHttpTransport was closed")
                loop = asyncio.new_event_loop()
                started = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(started.set)
                    loop.run_forever()

                self._thread = daemon_thread(run, "rxllm-asyncio")
                started.wait()
                self._loop = loop
            return self._loop

    @property
    def timer_scheduler(self) -> rx_abc.SchedulerBase:
        """A scheduler whose timers run on the loop (retry backoff without a thread per timer)."""
        from reactivex.scheduler.eventloop import AsyncIOThreadSafeScheduler

        loop = self.loop
        with self._lock:
            if self._timer_scheduler is None:
                self._timer_scheduler = AsyncIOThreadSafeScheduler(loop)
            return self._timer_scheduler

    def submit(self, coroutine: Coroutine[Any, Any, None], scope: CancelScope | None = None) -> Submitted:
        """Run ``coroutine`` on the loop (from any thread); cancelling the returned handle cancels its task.

        ``scope`` is the attempt's the coroutine runs (:meth:`close` then stops it as :meth:`cancel`
        does). The task runs in a copy of the caller's ``contextvars`` context (as ``call_soon_threadsafe``
        takes it), so a span current when the user subscribed is the parent of the request's.
        """
        loop = self.loop
        try:
            self._check_loop(loop)
        except EventLoopError:
            coroutine.close()
            raise
        tasks = self._tasks
        done_context = self._done_context
        submitted = Submitted(loop, tasks, scope)
        tasks.add(submitted)  # close() cancels it, started or not

        def start() -> None:
            if submitted.cancelled:  # cancelled before it started: it never runs
                coroutine.close()
                tasks.discard(submitted)
                submitted.release()
                return
            task = submitted.task = loop.create_task(coroutine)
            # run in the transport's one empty context, not a copy of the current one taken per task
            # (the callback reads no context variable; the loop runs its callbacks one at a time)
            task.add_done_callback(submitted, context=done_context)
            if submitted.cancelled:  # a cancel() that read ``task`` before it was set
                task.cancel()

        loop.call_soon_threadsafe(start)
        return submitted

    def _check_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Refuse at once work that could never run: a closed loop, or a bound loop that is not
        running while another loop (the one that would wait for the work) is."""
        if loop.is_closed():
            raise EventLoopError(
                "the event loop this AsyncHttpTransport is bound to (loop=) is closed, so nothing sent "
                "through it could ever complete (asyncio.run() closes its loop when it returns). Build the "
                "transport inside the loop that uses it (loop=asyncio.get_running_loop()), or without loop= "
                "to give it a loop of its own"
            )
        if self._bound and not loop.is_running():
            here = running_loop()
            if here is not None and here is not loop:
                raise EventLoopError(
                    "the event loop this AsyncHttpTransport is bound to (loop=) is not running, and this "
                    "stream is used from another running loop: it would wait forever. Bind the transport "
                    "to the loop that awaits it (loop=asyncio.get_running_loop()), or build it without loop= "
                    "to give it a loop of its own"
                )

    def cancel(self, task: Submitted) -> None:
        """Cancel one attempt from any thread: the sockets of its scope (given to :meth:`submit`) are
        shut down before this returns (nothing more of its request reaches the server), and its
        task ends.

        A task whose exchange already has a socket attached to its scope is not cancelled: the
        shutdown ends its read or write at once with an error, and httpcore then cleans up after
        itself. A cancellation landing in the middle of that cleanup would leave the connection
        ACTIVE in the pool for good (measured: 8 of 8 slots lost within 3,000 subscribe/dispose
        cycles). A task with no socket yet (waiting for a permit, connecting) is cancelled; the
        decision is taken on the loop (:meth:`Submitted.stop`), where sockets are attached, so the
        two cannot race.
        """
        if task.scope is not None:
            task.scope.cancel()
        loop = self._loop
        if loop is None:  # the transport closed: its tasks were stopped with it
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: the task is gone with it
            loop.call_soon_threadsafe(task.stop)

    def scheduler_of(self, scheduler: rx_abc.SchedulerBase | None) -> None:
        """Attempts run on the loop: no scheduler.

        Raises:
            ConfigurationError: a ``scheduler=`` was given.
        """
        if scheduler is not None:
            raise ConfigurationError("scheduler= applies to HttpTransport; AsyncHttpTransport runs on its loop")

    def start(
        self, sink: AttemptSink, scope: CancelScope, *, scheduler: rx_abc.SchedulerBase | None = None
    ) -> _LoopAttempt:
        """Run one attempt as a task on the loop (from any thread), its sockets attached to ``scope``.

        ``cancel()`` of the returned attempt shuts the scope's sockets down before it returns and
        then ends the task (see :meth:`cancel`); an attempt that already ended is left alone, so its
        task releases its connection undisturbed. The attempt's ``total_timeout`` covers it all.
        """
        self.scheduler_of(scheduler)
        return _LoopAttempt(self, self.submit(self._run(sink, scope), scope), scope)

    async def _run(self, sink: AttemptSink, scope: CancelScope) -> None:
        """One attempt, on the loop: open, deliver the body, drain it for reuse, end; the response
        is closed in ``finally`` whatever happens (a dispose's cancellation included)."""
        response: AsyncHttpResponse | None = None
        provider: str | None = None
        deadline = self._deadline(self.limits.total_timeout)
        try:
            try:
                async with deadline:
                    exchange = sink.exchange()
                    scope.loopback_only = exchange.loopback_only
                    provider = exchange.provider
                    streamed = exchange.stream
                    # not in a coroutine of its own: an open stream's wait for headers holds one less
                    with _NO_CONTEXT if exchange.context is None else exchange.context():
                        response = await self.open(exchange.request, provider=provider, stream=streamed,
                                                   redactor=exchange.redactor, scope=scope, attempt=exchange.attempt)
                    del exchange  # sent: its request (headers, body) is not kept while the body is read
                    if not streamed:
                        sink.on_whole(await response.aread())
                    else:
                        feed = sink.on_body
                        ended = False
                        body = response.aiter_bytes()
                        async for data in body:
                            if feed(data):
                                ended = True
                                break
                            if sink.settled():  # (not a bound method held while the read waits)
                                ended = await self._after_finish(body, feed, provider)
                                break
                        if ended:
                            response.mark_ended()
                        sink.on_body_end(ended)
                        await response.adrain()
            except Exception as exc:
                # Whatever the deadline's cancellation surfaced as (TimeoutError, or an httpx error from
                # the interrupted exchange), it is the total timeout: not retried.
                sink.on_error(total_timeout_error(self.limits, provider) if deadline.expired() else exc)
                return
            except asyncio.CancelledError:
                sink.on_error(TransportError("the attempt was cancelled", provider=provider))
                raise
            sink.on_completed()
        finally:
            if response is not None:
                await response.aclose()

    def _deadline(self, delay: float | None) -> _Deadline:
        """``asyncio.timeout(delay)`` for one attempt, on the loop, behind the transport's one timer."""
        deadlines = self._deadlines
        if deadlines is None:
            deadlines = self._deadlines = _Deadlines(asyncio.get_running_loop())
        return _Deadline(deadlines, delay)

    async def _after_finish(self, body: AsyncIterator[bytes], feed: Callable[[bytes], bool], provider: str) -> bool:
        """The rest of a body whose finish and usage arrived (as :meth:`HttpTransport._after_finish`):
        ``True`` when the end marker came within ``finish_grace`` seconds, ``False`` when the body
        ended, stalled or broke off (the turn is whole either way; :meth:`AsyncHttpResponse.aclose`
        closes a connection whose body did not end)."""
        grace = self.limits.finish_grace
        _grace_log.debug("%s: the finish and usage arrived; waiting up to %.2fs for the body's end", provider, grace)
        try:
            async with asyncio.timeout(grace):
                async for data in body:
                    if feed(data):
                        return True
        except (TimeoutError, StreamTimeoutError, StreamInterruptedError) as exc:
            _grace_log.debug("%s: the body did not end within %.2fs of the finish and usage (%s): the turn ends "
                             "without it", provider, grace, type(exc).__name__)
        return False

    def _take_shard(self) -> int:
        """The first pool with a free slot (so keep-alive connections get reused), else the least busy.

        Only ever called on the loop thread, so no lock."""
        if not self._in_flight:
            self._in_flight = [0] * self._shards
        in_flight = self._in_flight
        shard = next((i for i, n in enumerate(in_flight) if n < self._per_shard), None)
        if shard is None:
            shard = min(range(self._shards), key=in_flight.__getitem__)
        in_flight[shard] += 1
        return shard

    def _client(self, shard: int) -> Any:
        """The pool of ``shard``, built on first use: a fresh transport builds one client, not 40
        (building every pool eagerly cost ~740 ms and +34 MB on the first request). The pools share
        one SSL context (loading the CA bundle is most of a client's cost)."""
        clients = self._clients
        while len(clients) <= shard:
            clients.append(None)
        client = clients[shard]
        if client is None and self._user_client is not None:
            client = clients[shard] = self._user_client
            make_async_cancellable(client)
        if client is None:
            client = clients[shard] = httpx2.AsyncClient(
                timeout=self._timeout, limits=self._limits, follow_redirects=False, verify=shared_ssl_context(True)
            )
            make_async_cancellable(client)
            if self._prune_handle is None:
                self._schedule_prune()
        return client

    def _schedule_prune(self) -> None:
        """Every half ``keepalive_expiry``, close idle connections that passed it (on the loop).

        httpcore drops an expired connection only when its pool is next used; an idle process kept
        them until ``close()``. httpx2 exposes no public handle on an ``AsyncClient``'s pool, so this
        reads its transports' ``_pool`` (:func:`~rxllm._transports.base.pools_of`); a user's client is left alone."""
        loop = asyncio.get_running_loop()
        interval = min(max(self._limits.keepalive_expiry or 5.0, 0.1) / 2, 5.0)

        def tick() -> None:
            for client in list(self._clients):
                if client is None or client is self._user_client:
                    continue  # the user's pool is the user's
                for pool in pools_of(client):
                    for connection in expired_connections(pool):
                        _keep(aclose_quietly(connection.aclose, "an expired keep-alive connection"))
            self._prune_handle = loop.call_later(interval, tick)

        self._prune_handle = loop.call_later(interval, tick)

    def _release_shard(self, shard: int) -> None:
        if shard < len(self._in_flight):
            self._in_flight[shard] -= 1

    async def open(
        self,
        request: HttpRequest,
        *,
        provider: str,
        stream: bool,
        redactor: Redactor | None = None,
        scope: CancelScope | None = None,
        attempt: int = 1,
    ) -> AsyncHttpResponse:
        """Send ``request`` and await the response headers (on the loop).

        ``scope`` is the attempt's :class:`~rxllm._transports.threaded.CancelScope`: every socket the exchange
        touches (connecting, writing the request, reading the body) is attached to it, so a
        ``cancel()`` from any thread shuts the socket down before it returns and nothing of the
        request is written after a ``dispose()`` returned (the task's own cancellation reaches
        the loop a little later, and then closes the connection).

        Raises:
            HttpStatusError: for a non-2xx status (its body read, bounded, for the message).
            TransportError: when the connection fails or times out.
        """
        # A permit per pooled connection: httpcore's pool never has a request waiting in its queue,
        # where a cancellation (or a PoolTimeout) leaks a slot (see _Send); waiting
        # here instead is safe to cancel, and an abandoned request leaves the queue at once.
        if self._gate is None:
            self._gate = asyncio.Semaphore(self.max_concurrent_streams)
        gate = self._gate
        await gate.acquire()
        shard = self._take_shard()
        client = self._client(shard)
        release = _Permit(self, gate, shard)
        limits = self.limits
        redactor = redactor or Redactor.of_request(request.url, request.headers)
        started = time.monotonic()
        try:
            check_header_values(request, provider)
            http_request = client.build_request(request.method, request.url, content=request.body,
                                                headers=request_headers(request),
                                                extensions={"timeout": limits.request_timeouts()})
        except BaseException:
            release()
            raise
        if scope is not None:  # this task and the send task it starts carry the attempt's scope
            _attempt_scope.set(scope)
        failure: Exception | None = None
        try:
            # Cancel-safe (see _Send), awaited here: no coroutine of its own held while waiting.
            try:
                send = _Send(client, http_request, scope, (request, redactor, provider))
                await send.waiter
                response = send.response()
            except asyncio.CancelledError:
                send.abandon(release)
                raise
            except BaseException:
                release()
                raise
        except ERRORS.invalid_url as exc:
            failure = detached(ConfigurationError(f"invalid URL {redactor.url(request.url)!r}", provider=provider),
                               exc, "invalid URL")
        except ERRORS.timeout as exc:
            failure = detached(timeout_error(exc, limit_of(exc, headers=False, expired=False), limits, provider),
                               exc, redactor.redact(str(exc)))
        except ERRORS.http as exc:
            failure = transport_error(exc, request, redactor, provider)
        if failure is not None:  # raised here, not in the handler: the library's error is not its context
            raise failure
        headers_arrived(http_request, limits)
        log_request(request, redactor, response.status_code, started, stream, attempt)
        if client is not self._user_client:
            _forget_request(response)
        opened = AsyncHttpResponse(response, release, limits=limits, stream=stream, provider=provider)
        if response.status_code >= 300:
            try:
                raise await _async_status_error(response, provider, redactor)
            finally:
                await opened.aclose()
        if stream and (page := stream_type_error(response, request, redactor, provider)) is not None:
            await opened.aclose()
            raise page
        return opened

    def _detach(self) -> tuple[asyncio.AbstractEventLoop | None, threading.Thread | None, list[Any],
                               list[Submitted], asyncio.TimerHandle | None]:
        """Forget the loop and the pools (a later close is a no-op): the loop, its own thread (if
        any), rxllm's own clients, the tasks still running and the prune timer, for the caller to
        stop and close."""
        with self._lock:
            loop, clients, thread = self._loop, self._clients, self._thread
            self._loop = self._thread = None
            self._clients = []
            self._in_flight = []
            self._gate = None
            self._timer_scheduler = None
            self._deadlines = None  # its loop's: the attempts still registered there exit with their tasks
            handle, self._prune_handle = self._prune_handle, None
        owned = [c for c in clients if c is not None and c is not self._user_client]
        return loop, thread, owned, list(self._tasks), handle

    async def aclose(self) -> None:
        """:meth:`close` from a coroutine, awaiting the cleanup: on a bound loop (the transport's own
        cleanup runs here); on the transport's own loop, from another loop, the loop's thread is
        stopped as :meth:`close` stops it (without blocking the awaiting loop)."""
        loop, thread, owned, tasks, handle = self._detach()
        if loop is None:
            return
        if self._bound:
            await _close_bound(tasks, owned, handle)
            return
        if _on_thread_of(loop):  # awaited on the transport's own loop: clean up here, then stop it
            await _close_bound(tasks, owned, handle)
            loop.call_soon(loop.stop)
            return
        await asyncio.to_thread(_stop_own_loop, loop, thread, tasks, owned, handle)

    def close(self) -> None:
        """Cancel the streams still open, close rxllm's own pools (never a client you passed), and
        stop the loop thread (a loop you bound the transport to keeps running).

        On a bound loop's own thread this only schedules the cleanup (it cannot wait there):
        ``await transport.aclose()`` instead.
        """
        loop, thread, owned, tasks, handle = self._detach()
        if loop is None:
            return
        if self._bound:
            cleanup = _close_bound(tasks, owned, handle)
            if _on_thread_of(loop):
                _keep(cleanup)
            else:
                try:
                    asyncio.run_coroutine_threadsafe(cleanup, loop).result(_CLOSE_SECONDS)
                except (TimeoutError, RuntimeError) as exc:  # the loop stopped, or the cleanup hung
                    _log.warning("closing an AsyncHttpTransport on its bound loop: %s: %s", type(exc).__name__, exc)
            return
        _stop_own_loop(loop, thread, tasks, owned, handle)


def _stop_own_loop(
    loop: asyncio.AbstractEventLoop,
    thread: threading.Thread | None,
    tasks: list[Submitted],
    clients: list[Any],
    prune: asyncio.TimerHandle | None,
) -> None:
    """Stop the transport's own loop from another thread: streams still open end first (stopped:
    their connections close, so no task is left suspended for the collector to finalize on any
    thread), then the pools close, then the loop and its thread stop."""
    try:
        asyncio.run_coroutine_threadsafe(_stop_all(tasks, clients, prune), loop).result(_CLOSE_SECONDS)
    except (TimeoutError, RuntimeError) as exc:
        _log.warning("closing an AsyncHttpTransport: %s: %s", type(exc).__name__, exc)
    loop.call_soon_threadsafe(loop.stop)
    if thread is not None:
        thread.join(_CLOSE_SECONDS)
    loop.close()


_CLOCK_RESOLUTION = time.get_clock_info("monotonic").resolution  # as asyncio's loop counts a timer due


class _Deadline:
    """``asyncio.timeout(delay)`` for one attempt (the same entry, expiry and exit), whose timer is
    the transport's one (:class:`_Deadlines`) instead of a ``TimerHandle`` of its own.

    An open stream holds this object (five slots) for its lifetime where ``asyncio.timeout`` held a
    ``Timeout``, its ``TimerHandle``, a context copy and a bound method; and a loop whose heap holds
    a live timer per open stream keeps every cancelled one there (the loop purges them only once
    they are more than half of its timers) until it is due, minutes later.
    """

    __slots__ = ("_cancelling", "_deadlines", "_expired", "task", "when")

    def __init__(self, deadlines: _Deadlines, delay: float | None) -> None:
        self._deadlines = deadlines
        self.when: float | None = None if delay is None else deadlines.loop.time() + delay
        self.task: asyncio.Task[Any] | None = None  # while registered (entered, not exited)
        self._expired = False
        self._cancelling = 0

    def __lt__(self, other: _Deadline) -> bool:  # the heap's order
        return self.when < other.when  # type: ignore[operator]  # only registered deadlines (a when) compare

    def expired(self) -> bool:
        """Whether the deadline passed and cancelled the task (as ``Timeout.expired()``)."""
        return self._expired

    def expire(self) -> None:
        """The timer: cancel the task (on the loop)."""
        task, self.task = self.task, None
        if task is not None:
            self._expired = True
            task.cancel()

    async def __aenter__(self) -> _Deadline:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a deadline must be used inside a task")
        self._cancelling = task.cancelling()
        if self.when is not None:
            self.task = task
            self._deadlines.add(self)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.task is not None:
            self.task = None
            self._deadlines.dropped()
        if self._expired:
            task = asyncio.current_task()
            assert task is not None
            # Since there are no new cancel requests, the expiry is what is cancelling: a timeout.
            if task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
                raise TimeoutError from exc


class _Deadlines:
    """The registered :class:`_Deadline` s of one transport, earliest first, behind one loop timer
    armed for the earliest (used on the loop only, so no lock). A deadline that exits stays in the
    heap, released (``task`` ``None``), until it reaches the top or the released ones are the
    majority (then the heap is rebuilt without them)."""

    __slots__ = ("_armed", "_handle", "_heap", "_released", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._heap: list[_Deadline] = []
        self._released = 0
        self._handle: asyncio.TimerHandle | None = None
        self._armed = 0.0  # when the timer fires

    def add(self, deadline: _Deadline) -> None:
        heapq.heappush(self._heap, deadline)
        when = deadline.when
        assert when is not None
        if self._handle is None or when < self._armed:
            self._arm(when)

    def dropped(self) -> None:
        """One deadline exited (its ``task`` released)."""
        self._released += 1
        heap = self._heap
        if self._released == len(heap):  # none left: no timer either
            heap.clear()
            self._released = 0
            if self._handle is not None:
                self._handle.cancel()
                self._handle = None
        elif self._released > 64 and self._released * 2 > len(heap):
            heap[:] = [deadline for deadline in heap if deadline.task is not None]
            heapq.heapify(heap)
            self._released = 0

    def _arm(self, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._armed = when
        self._handle = self.loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._handle = None
        heap = self._heap
        due = self.loop.time() + _CLOCK_RESOLUTION
        while heap:
            top = heap[0]
            if top.task is None:  # exited meanwhile
                heapq.heappop(heap)
                self._released -= 1
                continue
            assert top.when is not None
            if top.when > due:
                self._arm(top.when)
                return
            heapq.heappop(heap)
            top.expire()


class _Permit:
    """Gives back one open exchange's permit and its pool's count (``release()`` in :meth:`AsyncHttpTransport.open`;
    called once, on the loop). An object of three slots, not a closure of three cells: an open
    stream keeps it for its lifetime."""

    __slots__ = ("_gate", "_shard", "_transport")

    def __init__(self, transport: AsyncHttpTransport, gate: asyncio.Semaphore, shard: int) -> None:
        self._transport = transport
        self._gate = gate
        self._shard = shard

    def __call__(self) -> None:
        self._transport._release_shard(self._shard)
        self._gate.release()


class _LoopAttempt(rx_abc.DisposableBase):
    """An attempt running as a task on the transport's loop (:meth:`AsyncHttpTransport.start`);
    also the subscription a model hands out for it (``dispose`` is ``cancel``)."""

    __slots__ = ("_scope", "_submitted", "_transport")

    def __init__(self, transport: AsyncHttpTransport, submitted: Submitted, scope: CancelScope) -> None:
        self._transport = transport
        self._submitted = submitted
        self._scope = scope

    def cancel(self) -> None:
        """Shut the attempt's sockets down now, then end its task; a no-op once the attempt ended
        (reactivex disposes on the terminal event: a cancel then would interrupt the task's release
        of its connection and leak it)."""
        if self._scope.active:
            self._transport.cancel(self._submitted)

    def dispose(self) -> None:
        """:meth:`cancel`."""
        self.cancel()


def _on_thread_of(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


async def _close_bound(
    tasks: list[Submitted],
    clients: list[Any],
    prune: asyncio.TimerHandle | None,
) -> None:
    """A bound transport's cleanup, on its loop: only what the transport started is touched."""
    if prune is not None:
        prune.cancel()
    await _stop(tasks)
    for client in clients:
        await aclose_quietly(client.aclose, "a client")


async def _stop(tasks: list[Submitted]) -> None:
    """Stop the transport's tasks as a dispose would (:meth:`Submitted.stop`) and wait (bounded) for
    them and the connection closes they leave behind to end.

    Cancelling a task that a dispose already stopped (its socket shut down, httpcore cleaning up
    after the failed read) would land inside that cleanup and leave the connection ACTIVE in the
    pool for good, its socket open: measured, one ``unclosed transport`` in ~50
    dispose-then-close cycles on a client you passed (rxllm never closes that pool)."""
    for submitted in tasks:
        submitted.stop()
    running = [s.task for s in tasks if s.task is not None and not s.task.done()]
    if running:
        _done, late = await asyncio.wait(running, timeout=_STOP_SECONDS)
        for task in late:  # a task that ignored its socket's shutdown
            task.cancel()
    await _closes_done()


async def _stop_all(
    tasks: list[Submitted], clients: list[Any], prune: asyncio.TimerHandle | None
) -> None:
    """:func:`_close_bound`, then cancel every other task of the transport's own loop (it is about to stop)."""
    await _close_bound(tasks, clients, prune)
    current = asyncio.current_task()
    others = [task for task in asyncio.all_tasks() if task is not current and task not in _closing]
    for task in others:
        task.cancel()
    if others:
        await asyncio.wait(others, timeout=_STOP_SECONDS)
    await _closes_done()


async def _closes_done() -> None:
    """Wait (bounded) for the connection closes running in the background on this loop (:func:`_keep`)."""
    loop = asyncio.get_running_loop()
    closing = [future for future in _closing if future.get_loop() is loop]
    if closing:
        await asyncio.wait(closing, timeout=_STOP_SECONDS)


class _Send:
    """``client.send(request, stream=True)``, which a cancellation can never make leak a pool slot
    (:meth:`AsyncHttpTransport.open` awaits :attr:`waiter`, then takes :meth:`response`, or calls
    :meth:`abandon` when cancelled meanwhile, and ``release()`` when the send failed).

    httpcore cleans up after an exception anywhere in an exchange, but not after a *second* one
    landing inside that cleanup, and not when cancelled after the pool assigned the request a new
    connection but before it began to connect (encode/httpcore#1093): either way a connection
    stays CONNECTING or ACTIVE in the pool for good, and once every slot is gone every request
    fails with ``PoolTimeout`` (3,000 subscribe/dispose cycles lost all 8 slots of a pool). So the
    send runs in a task of its own, shielded, and is stopped by exactly one signal, where httpcore
    handles it:

    * before httpcore's first report (the public ``trace`` extension): by raising at that report
      (also when ``scope`` was cancelled from another thread before it: a request disposed before
      httpcore began is never written);
    * once its socket is attached to ``scope``: by shutting the socket down (a blocked read or
      write fails, and httpcore cleans up after the error), never by cancelling the task;
    * in between (connecting): by cancelling the task.

    A response that arrives anyway is closed. ``release`` is called, when cancelled, once the
    abandoned send is over (on success the caller owns it). With
    ``redirects`` (the request as rxllm built it, its redactor, the provider), a client that follows
    redirects has them followed hop by hop here, each made safe by
    :func:`~rxllm._transports.base.redirect_target`.
    """

    __slots__ = ("_hook", "_request", "_scope", "_task", "waiter")

    def __init__(
        self,
        client: Any,
        request: httpx2.Request,
        scope: CancelScope | None = None,
        redirects: tuple[HttpRequest, Redactor, str] | None = None,
    ) -> None:
        hook = self._hook = _FirstReport(scope)
        request.extensions["trace"] = hook
        self._request = request
        self._scope = scope
        if redirects is None or not getattr(client, "follow_redirects", False):  # one coroutine less held meanwhile
            sending = client.send(request, stream=True, follow_redirects=False)
        else:
            sending = _send_following(client, request, redirects)
        task = self._task = asyncio.ensure_future(sending)
        # asyncio.shield(task), without its outer future's two closures: cancelling the wait for
        # this future leaves the task running (the waiter, not the task, is what it cancels)
        self.waiter: asyncio.Future[None] = task.get_loop().create_future()
        task.add_done_callback(functools.partial(_wake, self.waiter))

    def response(self) -> httpx2.Response:
        """Once :attr:`waiter` is done: the response (or the send's exception, raised)."""
        response: httpx2.Response = self._task.result()
        # The exchange is past httpcore's first report: the hook has nothing left to stop, and would
        # keep itself and the scope alive with the request while the body is read.
        self._request.extensions.pop("trace", None)
        response.request.extensions.pop("trace", None)  # the last hop's own copy, after a redirect
        return response

    def abandon(self, release: Callable[[], None]) -> None:
        """The wait was cancelled: stop the send with exactly one signal; ``release`` once it is over."""
        hook, scope, task = self._hook, self._scope, self._task
        if not hook.started:
            hook.cancel = True
        elif scope is not None and scope.attached:
            scope.shutdown()
        elif not hook.stopped:
            task.cancel()
        task.add_done_callback(functools.partial(_close_abandoned, release=release))


class _FirstReport:
    """The send's ``trace`` hook (:class:`_Send`): at httpcore's first report, raises to
    stop an exchange cancelled before it (``cancel``, or the scope's cancel from another thread).
    Used on the loop only."""

    __slots__ = ("cancel", "scope", "started", "stopped")

    def __init__(self, scope: CancelScope | None) -> None:
        self.scope = scope
        self.started = False  # httpcore made its first report
        self.cancel = False  # cancelled before it: stop there
        self.stopped = False  # stopped there

    async def __call__(self, event: str, info: dict[str, Any]) -> None:
        first = not self.started
        self.started = True
        if first and (self.cancel or (self.scope is not None and self.scope.cancelled)):
            self.stopped = True
            raise asyncio.CancelledError


def _wake(waiter: asyncio.Future[None], _task: asyncio.Future[Any]) -> None:
    if not waiter.done():  # (cancelled: its awaiter left)
        waiter.set_result(None)


async def _send_following(client: Any, request: httpx2.Request,
                          redirects: tuple[HttpRequest, Redactor, str] | None) -> Any:
    response = await client.send(request, stream=True, follow_redirects=False)
    if redirects is None or not getattr(client, "follow_redirects", False):
        return response
    sent, redactor, provider = redirects
    hops = 0
    while True:
        try:
            target = redirect_target(response, sent, redactor, hops, client.max_redirects, provider)
        finally:
            if response.next_request is not None:
                await aclose_quietly(response.aclose, "a redirect response")
        if target is None:
            return response
        hops += 1
        response = await client.send(target, stream=True, follow_redirects=False)


_closing: set[asyncio.Future[None]] = set()  # closes running in the background, referenced until done


def _keep(coroutine: Coroutine[Any, Any, None]) -> asyncio.Future[None]:
    closing = asyncio.ensure_future(coroutine)
    _closing.add(closing)
    closing.add_done_callback(_closing.discard)
    return closing


async def _aclose_then(
    response: httpx2.Response, release: Callable[[], None], body: AsyncIterator[bytes] | None = None
) -> None:
    try:
        if isinstance(body, AsyncGenerator):  # closed here, not by the collector (it is in a cycle with us)
            await aclose_quietly(body.aclose, "a response body")
        await aclose_quietly(response.aclose, "a response")
    finally:
        release()


async def _drain(body: AsyncIterator[bytes]) -> None:
    left = DRAIN_BYTES
    async for data in body:
        left -= len(data)
        if left < 0:
            return


def _close_abandoned(task: asyncio.Future[httpx2.Response], *, release: Callable[[], None]) -> None:
    if task.cancelled() or task.exception() is not None:
        release()
    else:
        _keep(_aclose_then(task.result(), release))


async def _async_status_error(response: httpx2.Response, provider: str, redactor: Redactor) -> HttpStatusError:
    body = ErrorBody(response)
    with contextlib.suppress(*ERRORS.http, *ERRORS.stream):  # the message is best effort
        async for piece in response.aiter_raw():
            if body.add(piece):
                break
    return status_error_of(response, body.data, provider, redactor)


def total_timeout_error(limits: TransportLimits, provider: str | None) -> StreamTimeoutError:
    """The error of an attempt that ran out of ``total_timeout`` on the loop."""
    return timeout_error(TimeoutError(), "total", limits, provider)
