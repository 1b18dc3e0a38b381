"""The bounded buffer between an Observable's emitting thread and one consumer, shared by the
plain ``for`` loop (:mod:`.blocking`) and ``async for`` (:mod:`.aio`).

When it is full:

* an emitter on a plain thread (``HttpTransport``'s I/O thread, a tool pool) waits for room:
  backpressure, the same as a slow synchronous subscriber, so reads slow down to TCP and memory
  stays bounded;
* an emitter on an event loop's thread (``AsyncHttpTransport``'s loop) must not block it (every
  stream of that loop would stall): the stream fails with :class:`BufferOverflowError` after the
  items already buffered, and the subscription is disposed. Nothing is dropped silently;
* an emitter on the consumer's own thread (a synchronous source, while it is subscribed) is never
  bounded: the consumer cannot take anything before the source returns.

The consumer side (how it waits, how it is woken) is the subclass's: :meth:`StreamBuffer._arrived`
is called under the lock whenever an item or the end arrives.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from reactivex import abc as rx_abc
from reactivex.disposable import SingleAssignmentDisposable

from .._core.errors import BufferOverflowError, ConfigurationError
from .._core.loop_work import running_loop

__all__ = ["DEFAULT_MAX_BUFFER", "END", "WAIT", "StreamBuffer", "check_max_buffer"]

T = TypeVar("T")

DEFAULT_MAX_BUFFER = 16384
"""How many items an iterator holds between the emitting thread and the consumer, by default."""

END: Any = object()
"""What :meth:`StreamBuffer.poll` returns once the stream completed (or the consumer left)."""
WAIT: Any = object()
"""What :meth:`StreamBuffer.poll` returns when nothing has arrived yet."""


def check_max_buffer(max_buffer: object) -> None:
    if isinstance(max_buffer, bool) or not isinstance(max_buffer, int) or max_buffer < 1:
        raise ConfigurationError(f"max_buffer must be an int >= 1, got {max_buffer!r}")


class StreamBuffer(Generic[T]):
    """Items of ``source`` waiting for one consumer, its end, and the subscription behind them."""

    __slots__ = (
        "_closed",
        "_cond",
        "_consumer_thread",
        "_finished",
        "_items",
        "_max_buffer",
        "_producer_waiting",
        "_source",
        "_subscription",
        "_terminal",
    )

    advice = "Do less per item, or raise iterate()'s max_buffer"
    """The end of the :class:`BufferOverflowError` message: what the consumer can change."""

    def __init__(self, source: rx_abc.ObservableBase[T], max_buffer: int) -> None:
        self._source: rx_abc.ObservableBase[T] | None = source
        self._max_buffer = max_buffer
        self._cond = threading.Condition()  # reentrant: a finalizer may close the buffer from inside it
        self._items: deque[T] = deque()
        self._terminal: tuple[Exception | None] | None = None  # (error or None) once the stream ended
        self._closed = False  # the consumer left: ignore everything from now on
        self._finished = False  # the terminal was handed to the consumer
        self._producer_waiting = False
        self._consumer_thread = 0
        self._subscription: SingleAssignmentDisposable | None = None

    def start(self) -> None:
        """Subscribe (once; not after :meth:`close`), from the consumer's thread."""
        if self._subscription is not None or self._closed:
            return
        self._consumer_thread = threading.get_ident()
        self._subscription = SingleAssignmentDisposable()
        source, self._source = self._source, None  # not kept: an open stream holds its subscription only
        assert source is not None
        self._subscription.disposable = source.subscribe(self._on_next, self._on_error, self._on_completed)

    def poll(self) -> Any:
        """The next item, :data:`END` or :data:`WAIT`; raises the error the stream ended with.

        The caller holds the lock (``self._cond``).
        """
        if self._items:
            item = self._items.popleft()
            if self._producer_waiting:
                self._cond.notify_all()  # an emitter waiting for room
            return item
        if self._closed or self._finished:
            return END
        if self._terminal is not None:
            self._finished = True
            error = self._terminal[0]
            if error is None:
                return END
            raise error
        return WAIT

    def _arrived(self) -> Callable[[], None] | None:
        """Under the lock, after an item or the end arrived: what to call (outside it) to wake the consumer."""
        raise NotImplementedError

    # -- the emitting side (any thread) ---------------------------------------------------------

    def _on_next(self, item: T) -> None:
        cond = self._cond
        overflowed = False
        with cond:
            if self._closed or self._terminal is not None:
                return
            while len(self._items) >= self._max_buffer and threading.get_ident() != self._consumer_thread:
                if running_loop() is not None:
                    self._terminal = (
                        BufferOverflowError(
                            f"the consumer fell more than {self._max_buffer} items behind a stream emitting on "
                            "an event loop thread, which must not be blocked; rather than drop items, the "
                            f"stream fails. {self.advice}"
                        ),
                    )
                    overflowed = True
                    break
                self._producer_waiting = True
                cond.wait()
                self._producer_waiting = False
                if self._closed:
                    return
            else:
                self._items.append(item)
            wake = self._arrived()
        if overflowed and self._subscription is not None:
            self._subscription.dispose()
        if wake is not None:
            wake()

    def _on_error(self, error: Exception) -> None:
        self._end((error,))

    def _on_completed(self) -> None:
        self._end((None,))

    def _end(self, terminal: tuple[Exception | None]) -> None:
        with self._cond:
            if self._closed or self._terminal is not None:
                return
            self._terminal = terminal
            wake = self._arrived()
        if wake is not None:
            wake()

    def close(self) -> None:
        """The consumer left: dispose the subscription unless the stream already ended (idempotent)."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            ended = self._terminal is not None
            self._items.clear()
            self._cond.notify_all()  # an emitter waiting for room returns
        if not ended and self._subscription is not None:
            self._subscription.dispose()
