"""The transport seam: what a model asks of a transport, and what both transports share.

A model hands a transport one attempt at a time (:meth:`Transport.start`): the transport builds
nothing itself, it asks the attempt's :class:`AttemptSink` for the request (:class:`Exchange`),
sends it, and delivers the decoded body to the sink on its own thread or loop, then exactly one
terminal call. :meth:`Attempt.cancel` stops it from any thread at once: every socket the attempt
touched is shut down (the server sees the close), and the sink is told nothing more that a
subscriber would see. The model's side of the seam is :class:`~rxllm.SseChatModel`'s attempt;
the two transports here are :class:`~rxllm.HttpTransport` (a thread per open stream) and
:class:`~rxllm.AsyncHttpTransport` (a task per open stream on one asyncio loop).

Also here is what both transports share: the request, its limits and defaults, the
:class:`CancelScope` every socket is attached to, the mapping of HTTP errors to rxllm's, the
request headers, the DEBUG line, and the wrapping of an httpx client's pools' network backends.
Only the modules of this room import the HTTP client library.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import logging
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from reactivex import abc as rx_abc

from .._core.errors import (
    ConfigurationError,
    HttpStatusError,
    ProtocolError,
    RxLlmError,
    StreamInterruptedError,
    StreamTimeoutError,
    TransportError,
)
from .._core.redact import Redactor, is_secret_name, redact_headers, redact_url, secure_destination

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_FINISH_GRACE",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_MAX_STREAM_BYTES",
    "DEFAULT_READ_TIMEOUT",
    "DEFAULT_TOTAL_TIMEOUT",
    "DRAIN_BYTES",
    "DRAIN_SECONDS",
    "MAX_ERROR_BODY",
    "Attempt",
    "AttemptSink",
    "CancelScope",
    "ErrorBody",
    "Exchange",
    "HttpRequest",
    "Transport",
    "TransportLimits",
    "aclose_quietly",
    "body_error",
    "check_client",
    "check_header_values",
    "check_peer",
    "close_quietly",
    "current_scope",
    "detached",
    "expired_connections",
    "headers_arrived",
    "limit_of",
    "log_request",
    "pools_of",
    "redirect_target",
    "request_headers",
    "status_error_of",
    "stream_type_error",
    "thread_scope",
    "timeout_error",
    "transport_error",
    "wrap_network_backends",
]

_log = logging.getLogger("rxllm.http")
thread_scope = threading.local()  # .scope: the CancelScope the current thread works in (CancelScope.entered)
MAX_ERROR_BODY = 64 * 1024
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_READ_TIMEOUT = 300.0
DEFAULT_TOTAL_TIMEOUT = 900.0
DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_STREAM_BYTES = 256 * 1024 * 1024
DEFAULT_FINISH_GRACE = 1.0  # after the finish chunk and usage, how long to wait for the body's end
DRAIN_SECONDS = 0.25  # after the provider's end marker, how long to wait for the body's last bytes
DRAIN_BYTES = 64 * 1024  # and how many of them to read at most, so the connection can be reused
_REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-goog-request-id", "cf-ray")



@dataclass(frozen=True, slots=True)
class HttpRequest:
    """One HTTP request as a mapper builds it. Its repr never shows credential headers.

    Attributes:
        url: the full URL (never carries an API key: keys go in headers).
        body: the JSON body, already encoded.
        headers: request headers, credentials included.
        method: the HTTP method.
    """

    url: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    method: str = "POST"

    def __repr__(self) -> str:
        return (
            f"HttpRequest(method={self.method!r}, url={redact_url(self.url)!r}, "
            f"headers={redact_headers(self.headers)!r}, body=<{len(self.body)} bytes>)"
        )


@dataclass(frozen=True, slots=True)
class Exchange:
    """What one attempt sends, as its sink built it (:meth:`AttemptSink.exchange`).

    Attributes:
        request: the HTTP request.
        redactor: cuts the request's secrets out of error messages and the DEBUG line.
        stream: a streamed body (delivered piece by piece) or a whole one.
        provider: the provider's short name, for errors.
        attempt: the attempt's number within its call (the DEBUG line shows it).
        context: entered around sending the request and waiting for its headers (a telemetry
            span made current, so an HTTP client instrumentation nests its span under it).
        loopback_only: the request carries a credential over plain ``http://`` (to a loopback
            ``base_url``): the transport refuses to write it on a connection whose peer is not
            loopback (a plain-http proxy elsewhere), by :func:`~rxllm._core.redact.secure_destination`.
    """

    request: HttpRequest
    redactor: Redactor
    stream: bool
    provider: str
    attempt: int = 1
    context: Callable[[], contextlib.AbstractContextManager[None]] | None = None
    loopback_only: bool = False


class AttemptSink(Protocol):
    """The model's side of one attempt: what a transport asks for and delivers to.

    A transport calls, on its own thread or loop and never two at once: :meth:`exchange` first;
    then, for a streamed body, :meth:`on_body` per decoded piece until it returns ``True`` or the
    body ends, then :meth:`on_body_end`; for a whole body, :meth:`on_whole`; last exactly one of
    :meth:`on_error` and :meth:`on_completed`. After :meth:`Attempt.cancel` it stops reading and
    ends with :meth:`on_error` (whatever the stop surfaced as; the sink's scope says it was
    cancelled, and a model delivers none of it).
    """

    def exchange(self) -> Exchange:
        """Build the request (raising fails the attempt, before anything is sent)."""
        ...

    def on_body(self, data: bytes) -> bool:
        """One piece of the decoded body; ``True`` once the provider ended the turn (read no more)."""
        ...

    def settled(self) -> bool:
        """Whether the turn's finish and its usage have arrived: all that is left is the body's end
        (an end marker, or none at all), which a transport waits for ``finish_grace`` seconds at
        most before it ends the body itself (a stall or a cut after it loses nothing)."""
        ...

    def on_body_end(self, ended: bool) -> None:
        """The body is over: ``ended`` when :meth:`on_body` said so, else the bytes ran out."""
        ...

    def on_whole(self, body: bytes) -> None:
        """The whole decoded body of a request that was not streamed."""
        ...

    def on_error(self, error: Exception) -> None:
        """The attempt failed (or was cancelled); the last call."""
        ...

    def on_completed(self) -> None:
        """The attempt ended well and its connection went back to the pool; the last call."""
        ...


class Attempt(Protocol):
    """A started attempt (:meth:`Transport.start`)."""

    def cancel(self) -> None:
        """From any thread, any number of times: shut the attempt's sockets down before returning
        (the server sees the close) and stop its work; nothing more reaches its sink's subscriber."""
        ...


class Transport(Protocol):
    """What :class:`~rxllm.SseChatModel` asks of a transport; :class:`~rxllm.HttpTransport` and
    :class:`~rxllm.AsyncHttpTransport` are two, and a class of yours with these members is another.

    ``limits`` are the transport's timeouts and caps. :meth:`start` runs one attempt on the
    transport's own thread or loop, attaching its sockets to ``scope`` (a fresh
    :class:`CancelScope` per attempt, cancelled by :meth:`Attempt.cancel`); ``scheduler`` is what
    :meth:`scheduler_of` returned for the model. :attr:`timer_scheduler` runs the retry backoff
    (``None``: reactivex's default timers).
    """

    limits: TransportLimits

    @property
    def timer_scheduler(self) -> rx_abc.SchedulerBase | None:
        """Where the retry backoff timers run (``None``: reactivex's ``TimeoutScheduler``)."""
        ...

    def scheduler_of(self, scheduler: rx_abc.SchedulerBase | None) -> rx_abc.SchedulerBase | None:
        """The scheduler a model's attempts run their blocking work on, given the model's
        ``scheduler=`` (``None``: the transport's choice).

        Raises:
            ConfigurationError: the transport runs no blocking work and was given a scheduler.
        """
        ...

    def start(
        self, sink: AttemptSink, scope: CancelScope, *, scheduler: rx_abc.SchedulerBase | None = None
    ) -> Attempt:
        """Start one attempt (from any thread; it runs on the transport's thread or loop)."""
        ...

    def close(self) -> None:
        """Close the transport's connections (a client you passed stays open)."""
        ...


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

    __slots__ = ("_closed", "_finished", "_shut", "_streams", "active", "attached", "cancelled", "deadline",
                 "loopback_only")

    def __init__(self) -> None:
        self._streams: list[Any] = []  # the wrapped network streams attached (each has .sock, .owner)
        self._closed = False
        self._shut = False  # shutdown(): sockets attached from now on are shut down at once
        self._finished = False
        self.attached: bool = False  # a socket was attached at some point (then cancel() has shut it down)
        self.cancelled: bool = False
        # Neither cancelled nor finished: items may still be delivered (a plain attribute, not a
        # property: it is read once per delivered item; only cancel() and finish() clear it).
        self.active: bool = True
        self.deadline: float | None = None  # time.monotonic() when the attempt's total_timeout fires
        self.loopback_only: bool = False  # the attempt's credential may only go to a loopback peer (Exchange)

    def remaining(self) -> float | None:
        """Seconds left before :attr:`deadline` (``None`` without one; may be negative)."""
        deadline = self.deadline
        return None if deadline is None else deadline - time.monotonic()

    def expired(self) -> bool:
        """Whether the attempt's total deadline has passed (a socket timeout set to the time left
        may wake a hair early: 50 ms of slack)."""
        deadline = self.deadline
        return deadline is not None and time.monotonic() >= deadline - 0.05

    def finish(self) -> bool:
        """Mark the terminal event and detach the sockets; ``True`` if the scope was still active."""
        with _owners:
            was_active = not (self.cancelled or self._finished)
            self._finished = True
            self.active = False
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
                self.active = False
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
        previous = getattr(thread_scope, "scope", None)
        thread_scope.scope = self
        try:
            yield self
        finally:
            thread_scope.scope = previous
            self.close()


def current_scope() -> CancelScope | None:
    """The :class:`CancelScope` the current thread is working in, if any."""
    return getattr(thread_scope, "scope", None)


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



@dataclass(frozen=True, slots=True)
class TransportLimits:
    """Both transports' timeouts and size caps, checked once (see ``docs/limits.md``).

    ``first_byte_timeout`` left ``None`` becomes ``read_timeout`` (the one place that rule lives:
    both transports pass their argument through as given).

    Raises:
        ConfigurationError: for fewer than one stream, a timeout or a cap that is not positive.
    """

    max_concurrent_streams: int
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    first_byte_timeout: float | None = None  # None: read_timeout (set by __post_init__)
    read_timeout: float = DEFAULT_READ_TIMEOUT
    total_timeout: float | None = DEFAULT_TOTAL_TIMEOUT
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    max_stream_bytes: int | None = DEFAULT_MAX_STREAM_BYTES
    finish_grace: float = DEFAULT_FINISH_GRACE

    def __post_init__(self) -> None:
        if self.max_concurrent_streams < 1:
            raise ConfigurationError("max_concurrent_streams must be at least 1")
        first_byte = self.read_timeout if self.first_byte_timeout is None else self.first_byte_timeout
        object.__setattr__(self, "first_byte_timeout", first_byte)  # frozen: the default resolved once
        timeouts = (self.connect_timeout, first_byte, self.read_timeout)
        if any(t <= 0 for t in timeouts) or (self.total_timeout is not None and self.total_timeout <= 0):
            raise ConfigurationError(
                "connect_timeout, first_byte_timeout, read_timeout and total_timeout must be positive"
            )
        if not self.finish_grace > 0:
            raise ConfigurationError("finish_grace must be positive")
        if self.max_response_bytes <= 0 or (self.max_stream_bytes is not None and self.max_stream_bytes <= 0):
            raise ConfigurationError("max_response_bytes and max_stream_bytes must be positive")

    def client_timeout(self) -> httpx2.Timeout:
        """The client-wide httpx timeout (waiting for a pooled connection counts as connecting)."""
        import httpx2  # here, not at the top: importing the seam loads no HTTP library

        return httpx2.Timeout(connect=self.connect_timeout, read=self.read_timeout, write=self.read_timeout,
                             pool=self.connect_timeout)

    def request_timeouts(self) -> dict[str, float | None]:
        """One request's httpx ``timeout`` extension: the read timeout is the first-byte timeout until
        the headers arrived (then :func:`headers_arrived` sets it to ``read_timeout``)."""
        return {"connect": self.connect_timeout, "read": self.first_byte_timeout, "write": self.read_timeout,
                "pool": self.connect_timeout}

    def body_cap(self, stream: bool) -> int | None:
        """The cap on one decoded body."""
        return self.max_stream_bytes if stream else self.max_response_bytes


def headers_arrived(request: httpx2.Request, limits: TransportLimits) -> None:
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


def limit_of(exc: Exception, *, headers: bool, expired: bool) -> str:
    """Which limit an httpx timeout stands for (``headers``: it fired after the response headers)."""
    from .stack import ERRORS

    if expired:
        return "total"
    if isinstance(exc, ERRORS.pool_timeout):
        return "pool"
    if isinstance(exc, ERRORS.connect_timeout):
        return "connect"
    if isinstance(exc, ERRORS.write_timeout):
        return "write"
    return "read" if headers else "first_byte"


class ErrorBody:
    """The first ``MAX_ERROR_BODY`` decoded bytes of an error response (truncated, never an error)."""

    __slots__ = ("_decoder", "data")

    def __init__(self, response: httpx2.Response) -> None:
        from .decoding import BodyDecoder  # here: importing the seam loads no transport module

        self.data = b""
        try:
            self._decoder: Any = BodyDecoder(response.headers.get("content-encoding", ""),
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



def check_header_values(request: HttpRequest, provider: str) -> None:
    """Refuse, before anything is sent, a header value no HTTP header can carry (a line break, a
    control character, a character outside ASCII: a key read from a file with its newline, a
    typographic quote pasted from a web page). The message names the header, never its value (the
    HTTP library's own error would quote it, key and all).

    Raises:
        ConfigurationError: a header value holds such a character.
    """
    for name, value in request.headers.items():
        if not value.isascii() or not value.isprintable():
            what = "a credential" if is_secret_name(name) else "a value"
            raise ConfigurationError(
                f"the {name!r} header holds {what} with a character no HTTP header can carry (a line break, "
                "a control or a non-ASCII character): check the key or value you configured (it is not shown)",
                provider=provider,
            )


def check_peer(stream: Any, scope: CancelScope | None, cached: bool | None) -> bool:
    """Whether a network stream may carry the credential of ``scope``'s attempt (see
    :attr:`Exchange.loopback_only`): over TLS, or to a loopback peer address, as
    :func:`~rxllm._core.redact.secure_destination` decides. ``cached`` is the stream's earlier
    verdict (its peer does not change); returns the verdict.

    Raises:
        ConfigurationError: the scope's attempt sends a credential in clear and the peer is not
            loopback (a plain-http proxy elsewhere).
    """
    if scope is None or not scope.loopback_only:
        return True if cached is None else cached
    if cached is None:
        cached = _secure_peer(stream)
    if not cached:
        raise ConfigurationError(
            "refusing to send a credential over plain HTTP through a proxy (or peer) that is not on loopback: "
            "use https, exclude the host with NO_PROXY, or pass allow_insecure_key=True"
        )
    return cached


def _secure_peer(stream: Any) -> bool:
    if stream.get_extra_info("ssl_object") is not None:
        return True
    sock = stream.get_extra_info("socket")
    if sock is None:
        return False
    if getattr(sock, "family", None) == getattr(socket, "AF_UNIX", None):
        return True
    try:
        host = sock.getpeername()[0]
    except (OSError, IndexError, TypeError):
        return False
    return secure_destination(f"http://[{host}]/" if ":" in str(host) else f"http://{host}/")


def redirect_target(response: Any, sent: HttpRequest, redactor: Redactor, hops: int, max_redirects: int,
                    provider: str) -> Any:
    """The next request of a redirect that a user's client follows (``follow_redirects=True``), made
    safe to send, or ``None`` when ``response`` is not one to follow.

    Credentials stay with their origin: on a redirect to another origin (scheme, host or port), every
    credential header rxllm set (a name that looks like one, or whose value is one of the request's
    secrets: ``authorization``, ``x-api-key``, ``x-goog-api-key``, ``api-key``...) and every
    credential in the URL's query is removed; a redirect from ``https`` to plain ``http`` is refused,
    and so is the ``max_redirects``-th hop (a loop). Neither is retried. The request is the one the
    HTTP library built for the redirect (``response.next_request``: method, body and cookies as it
    rules).

    Raises:
        TransportError: a downgrade to plain http, or too many redirects (``retryable`` false).
    """
    target = response.next_request
    if target is None:
        return None
    if hops >= max_redirects:
        error = TransportError(f"more than {max_redirects} redirects (the client's max_redirects) from "
                               f"{redactor.url(sent.url)}", provider=provider)
        error.retryable = False
        raise error
    first = urllib.parse.urlsplit(sent.url)
    url = target.url
    if first.scheme.lower() == "https" and url.scheme != "https":
        error = TransportError(f"refusing a redirect from https to plain {url.scheme}: "
                               f"{redactor.url(str(url))}", provider=provider)
        error.retryable = False
        raise error
    first_port = first.port or (443 if first.scheme.lower() == "https" else 80)
    if (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80)) != (
        first.scheme.lower(), (first.hostname or "").lower(), first_port
    ):
        for name in [n for n, v in sent.headers.items() if is_secret_name(n) or redactor.redact(v) != v]:
            target.headers.pop(name, None)
        for name, value in list(url.params.multi_items()):
            if is_secret_name(name) or redactor.redact(value) != value:
                url = url.copy_remove_param(name)
        target.url = url
    return target


def transport_error(exc: Exception, request: HttpRequest, redactor: Redactor, provider: str) -> TransportError:
    """The :class:`~rxllm.TransportError` of an HTTP library error ``exc`` while sending ``request``.

    Its message has the request's secrets cut out and never quotes a header value (a protocol error
    about the request's own headers says only which kind it was). A failure that a retry cannot mend
    is not retryable: a certificate that does not verify, a request the library refuses to send
    (an illegal header), response headers too large. The error it is chained to (``__cause__``) is
    a bare copy of ``exc``, of the same type and with the same redacted message, that holds neither
    the request (its headers, credentials included) nor a traceback.
    """
    from .stack import ERRORS

    if isinstance(exc, ERRORS.local_protocol):
        detail = f"{type(exc).__name__}: the HTTP library refused to send the request (a header or the URL)"
        retryable = False
    else:
        detail = redactor.redact(f"{type(exc).__name__}: {exc}")
        retryable = not _permanent(exc)
    error = TransportError(f"request to {redactor.url(request.url)} failed: {detail}", provider=provider)
    error.retryable = retryable
    return detached(error, exc, detail.partition(": ")[2])


_E = TypeVar("_E", bound=BaseException)


def body_error(exc: Exception, provider: str | None) -> RxLlmError | None:
    """The rxllm error of a failure while reading a response body (``None``: not the HTTP library's
    nor the socket's, e.g. rxllm's own cap, which stands as raised), chained to a bare copy of
    ``exc`` (:func:`detached`): httpx attaches the request, credentials included, to its errors.
    Raise it outside the ``except`` block that caught ``exc``."""
    from .stack import ERRORS

    if isinstance(exc, RxLlmError):
        return None
    error: RxLlmError
    if isinstance(exc, ERRORS.stream):  # e.g. a mocked transport's response whose body was already read
        error = TransportError(f"the http_client returned a body that cannot be streamed: {type(exc).__name__}: "
                               f"{exc}", provider=provider)
    elif isinstance(exc, ERRORS.http + ERRORS.raw):
        error = StreamInterruptedError(f"the response body broke off: {type(exc).__name__}: {exc}", provider=provider)
    else:
        return None
    return detached(error, exc)


def detached(error: _E, exc: BaseException, message: str | None = None) -> _E:
    """``error`` chained to a bare copy of the HTTP library's ``exc`` (same type, ``message`` or its
    own message with the request's secrets already cut out by the caller): the copy holds no request
    (whose headers hold the credentials), no traceback and no chain of its own. Raise ``error``
    outside the ``except`` block that caught ``exc``, so ``exc`` is not its ``__context__`` either."""
    text = str(exc) if message is None else message
    try:
        cause: BaseException = type(exc)(text)
    except Exception:
        cause = RuntimeError(f"{type(exc).__name__}: {text}")
    cause.__cause__ = cause.__context__ = None
    cause.__suppress_context__ = True
    error.__cause__ = cause
    return error


def _permanent(exc: BaseException) -> bool:
    """Whether an error (or one it chains to) is one a retry cannot mend."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            return True
        text = str(current).lower()
        if "certificate verify failed" in text or "receive buffer too long" in text or "too large" in text:
            return True
        current = current.__cause__ or current.__context__
    return False


def request_headers(request: HttpRequest) -> dict[str, str]:
    """The request's headers, asking only for encodings rxllm decodes (unless the caller chose)."""
    from .decoding import ACCEPT_ENCODING

    headers = dict(request.headers)
    for name in headers:  # a loop, not any(<generator>): once per request
        if name.lower() == "accept-encoding":
            return headers
    headers["Accept-Encoding"] = ACCEPT_ENCODING
    return headers



def log_request(
    request: HttpRequest, redactor: Redactor, status: int, started: float, stream: bool, attempt: int = 1
) -> None:
    """Both transports' one DEBUG line per request, on ``rxllm.http`` (secrets redacted): method,
    URL, status, seconds to the headers, attempt number."""
    if _log.isEnabledFor(logging.DEBUG):
        _log.debug("%s %s -> %s in %.3fs (stream=%s, attempt %d)", request.method, redactor.url(request.url),
                   status, time.monotonic() - started, stream, attempt)


def status_error_of(
    response: httpx2.Response, body: bytes, provider: str | None, redactor: Redactor | None = None
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


_PAGE_TYPES = ("text/html", "application/xhtml+xml")


def stream_type_error(response: Any, request: HttpRequest, redactor: Redactor, provider: str) -> ProtocolError | None:
    """The error of a streamed request answered 2xx with a web page (a wrong ``base_url``: a
    gateway's or a login page): "expected text/event-stream, got text/html from URL", not retried;
    ``None`` for any other content type (servers differ in what they call an event stream)."""
    kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind not in _PAGE_TYPES:
        return None
    return ProtocolError(f"expected text/event-stream, got {kind} from {redactor.url(request.url)} "
                         "(is base_url right?)", provider=provider)


def _error_message(body: bytes) -> str | None:
    """The message of a provider's JSON error body (OpenAI, Anthropic and Gemini share the shape)."""
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


def _retry_after(headers: httpx2.Headers) -> float | None:
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


def wrap_network_backends(client: Any, wrapper: type[Any]) -> list[Any]:
    """Wrap the network backend of each HTTP/1.1 pool of ``client``'s own httpx transports in
    ``wrapper`` (once: a backend already wrapped is left as it is); the pools, wrapped or already so.

    Shared by both transports (see :func:`make_cancellable`): an HTTP/2 pool, or a transport that is
    not httpx's own, is left alone.
    """
    wrapped = []
    for pool in pools_of(client):
        backend = getattr(pool, "_network_backend", None)
        if backend is None or getattr(pool, "_http2", False):
            continue
        if not isinstance(backend, wrapper):
            pool._network_backend = wrapper(backend)
        wrapped.append(pool)
    return wrapped


def pools_of(client: Any) -> list[Any]:
    """The httpcore pools of ``client``'s own httpx transports (the default one and each mount's)."""
    from .stack import stack_of

    stack = stack_of(client)
    if stack is None:
        return []
    own = stack.httpx.HTTPTransport if isinstance(client, stack.httpx.Client) else stack.httpx.AsyncHTTPTransport
    transports = [getattr(client, "_transport", None), *getattr(client, "_mounts", {}).values()]
    return [
        pool
        for transport in transports
        if isinstance(transport, own) and (pool := getattr(transport, "_pool", None)) is not None
    ]




def close_quietly(close: Callable[[], object], what: str) -> None:
    """Call ``close``; an ``ERRORS.close`` error (the connection is gone anyway) is logged at DEBUG."""
    from .stack import ERRORS

    try:
        close()
    except ERRORS.close as exc:
        _log.debug("closing %s: %s: %s", what, type(exc).__name__, exc)


async def aclose_quietly(close: Callable[[], Awaitable[object]], what: str) -> None:
    """:func:`close_quietly` for a coroutine function."""
    from .stack import ERRORS

    try:
        await close()
    except ERRORS.close as exc:
        _log.debug("closing %s: %s: %s", what, type(exc).__name__, exc)


def expired_connections(pool: Any) -> list[Any]:
    """The idle connections of an httpcore pool past their keep-alive expiry (httpcore's public
    connection API), for the transports' pruners to close.

    httpcore drops an expired connection only when its pool is next used, so an idle process
    would keep them (and the server's sockets) until the transport closes. The pool never hands
    out an expired connection, so a request cannot race the close.
    """
    return [connection for connection in list(pool.connections) if connection.is_idle() and connection.has_expired()]


def check_client(client: object, accepted: tuple[type[Any], ...], hint: str = "") -> None:
    """Refuse, with a message naming what is accepted, a client rxllm cannot send with: an object of
    another kind (another library's client, a session, a transport) or a client already closed
    (httpx would raise ``RuntimeError`` on the first request, deep inside an attempt).

    Raises:
        ConfigurationError: ``client`` is not one of ``accepted``, or is closed.
    """
    names = " or ".join(f"{kind.__module__.split('.')[0]}.{kind.__name__}" for kind in accepted)
    if all(kind.__module__.startswith("httpx2") for kind in accepted):
        names += " (or its legacy httpx counterpart)"
    if not isinstance(client, accepted):
        kind = type(client)
        raise ConfigurationError(f"http_client must be an {names}, got {kind.__module__}.{kind.__qualname__}{hint}")
    if getattr(client, "is_closed", False):
        raise ConfigurationError(f"http_client is closed: pass an open {names} (rxllm never closes it)")
