"""A live (BIDI) session over one WebSocket: :class:`WebSocketLlmConnection`, as ADK Java's
``GeminiLlmConnection``, for any :class:`~rxllm._models.live.LiveProtocol`.

What it does, thread by thread:

* ``connect`` returns at once; the session's **writer thread** opens the WebSocket, writes the
  protocol's opening frames (Gemini's ``setup``), waits for the server's acknowledgement when the
  protocol has one, then writes the caller's frames in the order they were sent. It also keeps
  the idle deadline (:attr:`LiveLimits.idle_timeout`: no server message for that long fails the
  session with ``StreamTimeoutError(limit="idle")``).
* ``send_history`` / ``send_content`` / ``send_realtime`` queue their frames at the call (in
  order) and return an Observable that completes when they are written, or errors. The queue
  holds at most :attr:`LiveLimits.max_pending_sends` sends: one more fails that send with
  :class:`~rxllm.BufferOverflowError` at once (the caller sends faster than the socket drains).
* The WebSocket's delivery thread decodes each server message (the protocol), aggregates
  (:class:`~rxllm._models.live.LiveTurnAggregator`) and emits the responses to the one
  ``receive()`` subscriber. Responses that arrive before anyone subscribed wait (at most
  :attr:`LiveLimits.max_buffered_responses`).
* ``close()`` (any thread), disposing the ``receive()`` subscription, a bad message or a failed
  socket all end the session the same way: the WebSocket is closed at once (the server sees the
  close frame and the end of the connection), unwritten sends fail, and ``receive()`` completes
  (``close()``, the server's normal close) or errors (``close(error)``, every failure).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable
from reactivex.subject import AsyncSubject

from .._core.errors import (
    BufferOverflowError,
    ConfigurationError,
    ProtocolError,
    RxLlmError,
    StreamInterruptedError,
    StreamTimeoutError,
    TransportError,
)
from .._core.threads import daemon_thread
from .._core.types import Blob, Content, LlmResponse
from .._rx.aio import AwaitableObservable, MaybeObservable, awaitable
from .._rx.direct import Direct
from .base_llm import BaseLlmConnection
from .live import LiveProtocol, LiveSetupComplete, LiveTurnAggregator

if TYPE_CHECKING:  # the WebSocket room loads httpx2: only a session's opener needs it at run time
    from .._transports.websocket import WebSocketConnection, WebSocketLimits

WebSocketMessage = str | bytes

__all__ = ["LiveLimits", "SocketOpener", "WebSocketLlmConnection"]

SocketOpener = Callable[["WebSocketLimits"], tuple["WebSocketConnection", Callable[[], None]]]
"""Opens the session's WebSocket with the given limits; returns it and what releases the rest
(an HTTP client made for this connection)."""


@dataclass(frozen=True, slots=True)
class LiveLimits:
    """The bounds of one live session.

    Attributes:
        max_pending_sends: sends queued and not yet written; one more fails with
            ``BufferOverflowError``.
        max_buffered_responses: responses held for a ``receive()`` not yet subscribed.
        max_message_bytes: the largest server message accepted (``ResponseTooLargeError``).
        max_queued_messages: server messages waiting for the decoder (``BufferOverflowError``).
        idle_timeout: seconds without a server message before the session fails
            (``StreamTimeoutError(limit="idle")``); ``None``: no deadline (keep-alive pings
            still detect a dead connection).
        setup_timeout: seconds the opening (connect, upgrade, the server's setup answer) may take.
        ping_interval: seconds between WebSocket keep-alive pings; ``None`` sends none.
        write_timeout: seconds one frame's write may take.
    """

    max_pending_sends: int = 256
    max_buffered_responses: int = 4096
    max_message_bytes: int = 8 * 1024 * 1024
    max_queued_messages: int = 1024
    idle_timeout: float | None = None
    setup_timeout: float = 30.0
    ping_interval: float | None = 20.0
    write_timeout: float = 30.0

    def __post_init__(self) -> None:
        for name in ("max_pending_sends", "max_buffered_responses", "max_message_bytes", "max_queued_messages"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"LiveLimits.{name} must be at least 1, got {getattr(self, name)}")
        for name in ("setup_timeout", "write_timeout"):
            if not getattr(self, name) > 0:
                raise ConfigurationError(f"LiveLimits.{name} must be positive, got {getattr(self, name)}")
        for name in ("idle_timeout", "ping_interval"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ConfigurationError(f"LiveLimits.{name} must be positive or None, got {value}")

    def websocket(self) -> WebSocketLimits:
        """The WebSocket's own limits."""
        from .._transports.websocket import WebSocketLimits

        return WebSocketLimits(
            max_message_bytes=self.max_message_bytes,
            queue_size=self.max_queued_messages,
            ping_interval=self.ping_interval,
            write_timeout=self.write_timeout,
        )


class _Send:
    __slots__ = ("frames", "outcome")

    def __init__(self, frames: list[str]) -> None:
        self.frames = frames
        self.outcome: AsyncSubject[None] = AsyncSubject()


class WebSocketLlmConnection(BaseLlmConnection):
    """One live session (see the module docstring). Made by a model's ``connect``.

    Args:
        opener: opens the WebSocket (on the session's writer thread).
        protocol: the provider's wire format.
        declared: the function names the request declared (a call to another fails the session).
        limits: the session's bounds.
        description: what the repr shows (the model; never a URL with a key).
    """

    def __init__(
        self,
        opener: SocketOpener,
        protocol: LiveProtocol,
        *,
        declared: Sequence[str] | None,
        limits: LiveLimits | None = None,
        description: str = "",
    ) -> None:
        self._limits = limits or LiveLimits()
        self._protocol = protocol
        self._provider = protocol.provider
        self._aggregator = LiveTurnAggregator(declared, provider=protocol.provider)
        self._description = description
        self._lock = threading.Lock()  # guards the state below; never held while calling out
        self._wake = threading.Condition(self._lock)  # the writer waits on it
        self._emit = threading.RLock()  # orders the calls to the receive() observer; guards it and the buffer
        self._pending: deque[_Send] = deque()
        self._socket: WebSocketConnection | None = None
        self._ready = not protocol.awaits_setup
        self._terminal: tuple[RxLlmError | None] | None = None  # (None,) completed, (error,) failed
        self._observer: rx_abc.ObserverBase[LlmResponse] | None = None
        self._subscribed = False
        self._buffer: deque[LlmResponse] = deque()
        self._last_message = time.monotonic()
        self._closed_by_us = False
        self._ended = threading.Event()  # the writer thread has let the socket go
        daemon_thread(lambda: self._writer(opener), "rxllm-live-writer")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._description}state={self.state!r})"

    @property
    def state(self) -> str:
        """``"opening"``, ``"open"`` or ``"closed"``."""
        with self._lock:
            if self._terminal is not None:
                return "closed"
            return "open" if self._socket is not None and self._ready else "opening"

    @property
    def turn_in_progress(self) -> bool:
        """Whether the model's current turn has started and not ended."""
        return self._aggregator.in_turn

    # -- sends

    def send_history(self, history: Sequence[Content]) -> MaybeObservable[None]:
        return self._queue(lambda: self._protocol.history(list(history)))

    def send_content(self, content: Content) -> MaybeObservable[None]:
        return self._queue(lambda: self._protocol.content(content))

    def send_realtime(self, blob: Blob) -> MaybeObservable[None]:
        return self._queue(lambda: self._protocol.realtime(blob))

    def _queue(self, encode: Callable[[], list[str]]) -> MaybeObservable[None]:
        try:
            frames = encode()
        except RxLlmError as exc:
            return MaybeObservable(reactivex.throw(exc))
        send = _Send(frames)
        with self._lock:
            if self._terminal is not None:
                return MaybeObservable(reactivex.throw(self._closed_error()))
            if len(self._pending) >= self._limits.max_pending_sends:
                return MaybeObservable(
                    reactivex.throw(
                        BufferOverflowError(
                            f"{len(self._pending)} live sends wait to be written "
                            f"(LiveLimits.max_pending_sends={self._limits.max_pending_sends}): "
                            "the caller sends faster than the connection drains",
                            provider=self._provider,
                        )
                    )
                )
            self._pending.append(send)
            self._wake.notify_all()
        return MaybeObservable(send.outcome)

    def _closed_error(self) -> RxLlmError:
        assert self._terminal is not None
        error = self._terminal[0]
        detail = f": {error}" if error is not None else ""
        return TransportError(f"the live connection is closed{detail}", provider=self._provider)

    # -- receive

    def receive(self) -> AwaitableObservable[LlmResponse]:
        def subscribe(observer: rx_abc.ObserverBase[LlmResponse], _: rx_abc.SchedulerBase | None = None) -> Any:
            with self._emit:
                if self._subscribed:
                    observer.on_error(ConfigurationError("receive() of a live connection may be subscribed once"))
                    return Disposable()
                self._subscribed = True
                while self._buffer:
                    observer.on_next(self._buffer.popleft())
                terminal = self._terminal
                if terminal is not None:
                    _end(observer, terminal)
                else:
                    self._observer = observer
            return Disposable(self._dispose_receive)

        return awaitable(Direct(subscribe))

    def _dispose_receive(self) -> None:
        with self._emit:
            self._observer = None
        self.close()

    # -- close

    def close(self, error: BaseException | None = None) -> None:
        """End the session now (any thread, idempotent): ``receive()`` completes, or fails with
        ``error`` (wrapped in ``StreamInterruptedError`` unless it is an ``RxLlmError``)."""
        if error is not None and not isinstance(error, RxLlmError):
            wrapped = StreamInterruptedError(f"the live session was closed: {error}", provider=self._provider)
            wrapped.__cause__ = error
            error = wrapped
        self._end(error, code=1000 if error is None else 1011, by_us=True)

    def wait_closed(self, timeout: float | None = None) -> bool:
        """Wait until the session has let its socket go."""
        return self._ended.wait(timeout)

    def _end(self, error: RxLlmError | None, *, code: int, by_us: bool) -> None:
        with self._lock:
            if self._terminal is not None:
                return
            self._terminal = (error,)
            self._closed_by_us = by_us
            socket = self._socket
            pending = list(self._pending)
            self._pending.clear()
            self._wake.notify_all()
        if socket is not None:
            socket.close(code, "" if error is None else type(error).__name__)
        failure = TransportError("the live connection closed before this send was written", provider=self._provider)
        for send in pending:
            send.outcome.on_error(failure)
        with self._emit:
            observer, self._observer = self._observer, None
            if observer is not None:
                _end(observer, (error,))

    # -- the writer thread

    def _writer(self, opener: SocketOpener) -> None:
        release: Callable[[], None] = _nothing
        try:
            try:
                socket, release = opener(self._limits.websocket())
            except RxLlmError as exc:
                self._end(exc, code=1011, by_us=False)
                return
            with self._lock:
                if self._terminal is not None:  # closed while connecting
                    socket.close()
                    return
                self._socket = socket
                self._last_message = time.monotonic()
            socket.start(_Sink(self))
            self._write_frames(socket, self._protocol.opening())
            if not self._await_setup():
                return
            self._write_loop(socket)
        finally:
            with self._lock:
                socket_now = self._socket
            if socket_now is not None:
                socket_now.wait_closed(self._limits.write_timeout)
            release()
            self._ended.set()

    def _write_frames(self, socket: WebSocketConnection, frames: list[str]) -> bool:
        try:
            for frame in frames:
                socket.send_text(frame)
        except RxLlmError as exc:
            self._end(exc, code=1011, by_us=False)
            return False
        return True

    def _await_setup(self) -> bool:
        deadline = time.monotonic() + self._limits.setup_timeout
        with self._lock:
            while not self._ready and self._terminal is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._wake.wait(left)
            if self._terminal is not None:
                return False
            if self._ready:
                return True
        self._end(
            StreamTimeoutError(
                f"the live server did not answer the session's setup within {self._limits.setup_timeout:g} s",
                limit="setup",
                provider=self._provider,
            ),
            code=1011,
            by_us=False,
        )
        return False

    def _write_loop(self, socket: WebSocketConnection) -> None:
        idle = self._limits.idle_timeout
        while True:
            with self._lock:
                while not self._pending and self._terminal is None:
                    if idle is None:
                        self._wake.wait()
                        continue
                    left = self._last_message + idle - time.monotonic()
                    if left <= 0:
                        break
                    self._wake.wait(left)
                if self._terminal is not None:
                    return
                if not self._pending:  # the idle deadline
                    timed_out = True
                    send = None
                else:
                    timed_out = False
                    send = self._pending.popleft()
            if timed_out:
                self._end(
                    StreamTimeoutError(
                        f"the live server sent nothing for {idle:g} s", limit="idle", provider=self._provider
                    ),
                    code=1011,
                    by_us=False,
                )
                return
            assert send is not None
            try:
                for frame in send.frames:
                    socket.send_text(frame)
            except RxLlmError as exc:
                send.outcome.on_error(exc)
                self._end(exc, code=1011, by_us=False)
                return
            send.outcome.on_completed()

    # -- the socket's delivery thread

    def _on_message(self, message: WebSocketMessage) -> None:
        with self._lock:
            if self._terminal is not None:
                return
            self._last_message = time.monotonic()
        try:
            events = self._protocol.decode(message)
            responses: list[LlmResponse] = []
            for event in events:
                if isinstance(event, LiveSetupComplete):
                    with self._lock:
                        self._ready = True
                        self._wake.notify_all()
                responses.extend(self._aggregator.feed(event))
        except RxLlmError as exc:
            self._end(exc, code=1003 if isinstance(message, bytes) else 1007, by_us=False)
            return
        with self._emit:
            for response in responses:
                if self._terminal is not None:
                    return
                if self._observer is not None:
                    self._observer.on_next(response)
                elif len(self._buffer) < self._limits.max_buffered_responses:
                    self._buffer.append(response)
                else:
                    overflow = BufferOverflowError(
                        f"{len(self._buffer)} live responses wait for a receive() subscriber "
                        f"(LiveLimits.max_buffered_responses={self._limits.max_buffered_responses})",
                        provider=self._provider,
                    )
                    self._end(overflow, code=1008, by_us=False)
                    return

    def _on_closed(self, code: int, reason: str) -> None:
        with self._lock:
            if self._terminal is not None:
                return
            ready = self._ready
        if not ready:
            self._end(
                ProtocolError(
                    f"the live server closed the connection during setup (code {code}"
                    f"{': ' + reason if reason else ''})",
                    provider=self._provider,
                ),
                code=1000,
                by_us=False,
            )
        else:
            self._end(None, code=1000, by_us=False)

    def _on_error(self, error: RxLlmError) -> None:
        self._end(error, code=1011, by_us=False)


class _Sink:
    """The WebSocket's sink: hands each callback to the connection."""

    __slots__ = ("_connection",)

    def __init__(self, connection: WebSocketLlmConnection) -> None:
        self._connection = connection

    def on_message(self, message: WebSocketMessage) -> None:
        self._connection._on_message(message)

    def on_closed(self, code: int, reason: str) -> None:
        self._connection._on_closed(code, reason)

    def on_error(self, error: RxLlmError) -> None:
        self._connection._on_error(error)


def _end(observer: rx_abc.ObserverBase[LlmResponse], terminal: tuple[RxLlmError | None]) -> None:
    error = terminal[0]
    if error is None:
        observer.on_completed()
    else:
        observer.on_error(error)


def _nothing() -> None:
    return None
