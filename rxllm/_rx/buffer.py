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

An open stream keeps its buffer for its lifetime, so the buffer is small until it is used: one
reentrant lock, the first waiting item in a slot of its own (a queue only once a second one
waits behind it), and the condition variable only once a thread waits on it (an emitter waiting
for room, or a blocking consumer); a consumer on an event loop never does.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from reactivex import abc as rx_abc

from .._core.errors import BufferOverflowError, ConfigurationError
from .._core.loop_work import running_loop
from .direct import Slot

__all__ = ["DEFAULT_MAX_BUFFER", "END", "WAIT", "StreamBuffer", "check_max_buffer"]

T = TypeVar("T")

DEFAULT_MAX_BUFFER = 16384
"""How many items an iterator holds between the emitting thread and the consumer, by default."""

END: Any = object()
"""What :meth:`StreamBuffer.poll` returns once the stream completed (or the consumer left)."""
WAIT: Any = object()
"""What :meth:`StreamBuffer.poll` returns when nothing has arrived yet."""
_EMPTY: Any = object()  # the first item's slot holds none


def check_max_buffer(max_buffer: object) -> None:
    if isinstance(max_buffer, bool) or not isinstance(max_buffer, int) or max_buffer < 1:
        raise ConfigurationError(f"max_buffer must be an int >= 1, got {max_buffer!r}")


class StreamBuffer(Generic[T]):
    """Items of ``source`` waiting for one consumer, its end, and the subscription behind them.

    Everything below is read and written under ``_lock`` (a reentrant lock: a finalizer may
    close the buffer from inside it). The waiting items are ``_first`` (or :data:`_EMPTY`)
    followed by ``_more`` (built when a second item waits behind the first, then kept): the
    queue is empty exactly when ``_first`` is :data:`_EMPTY`. ``_cond`` is a condition on
    ``_lock``, built (under it) by the first thread that waits (:meth:`_condition`); whoever
    would notify reads it under the same lock, so a waiter that built it is always notified,
    and while it is ``None`` nobody waits.
    """

    __slots__ = (
        "_closed",
        "_cond",
        "_consumer_thread",
        "_finished",
        "_first",
        "_lock",
        "_max_buffer",
        "_more",
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
        self._lock = threading.RLock()  # reentrant: a finalizer may close the buffer from inside it
        self._cond: threading.Condition | None = None  # built by the first thread that waits
        self._first: Any = _EMPTY  # the next item
        self._more: deque[T] | None = None  # the items after it
        self._terminal: tuple[Exception | None] | None = None  # (error or None) once the stream ended
        self._closed = False  # the consumer left: ignore everything from now on
        self._finished = False  # the terminal was handed to the consumer
        self._producer_waiting = False
        self._consumer_thread = 0
        self._subscription: Slot | None = None

    def _condition(self) -> threading.Condition:
        """The condition on the lock, built on first use; called with the lock held, by a thread about to wait."""
        cond = self._cond
        if cond is None:
            cond = self._cond = threading.Condition(self._lock)
        return cond

    def _notify(self) -> None:
        """Under the lock: wake every thread waiting on the condition (none while it is not built)."""
        cond = self._cond
        if cond is not None:
            cond.notify_all()

    def _count(self) -> int:
        """Under the lock: how many items wait."""
        if self._first is _EMPTY:
            return 0
        more = self._more
        return 1 if more is None else 1 + len(more)

    def start(self) -> None:
        """Subscribe (once; not after :meth:`close`), from the consumer's thread."""
        if self._subscription is not None or self._closed:
            return
        self._consumer_thread = threading.get_ident()
        subscription = self._subscription = Slot()
        source, self._source = self._source, None  # not kept: an open stream holds its subscription only
        assert source is not None
        subscription.set(source.subscribe(self._on_next, self._on_error, self._on_completed))

    def poll(self) -> Any:
        """The next item, :data:`END` or :data:`WAIT`; raises the error the stream ended with.

        The caller holds the lock (``self._lock``).
        """
        item = self._first
        if item is not _EMPTY:
            more = self._more
            self._first = more.popleft() if more else _EMPTY
            if self._producer_waiting:
                self._notify()  # an emitter waiting for room
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
        overflowed = False
        with self._lock:
            if self._closed or self._terminal is not None:
                return
            while self._count() >= self._max_buffer and threading.get_ident() != self._consumer_thread:
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
                self._condition().wait()
                self._producer_waiting = False
                if self._closed:
                    return
            else:
                if self._first is _EMPTY:
                    self._first = item
                else:
                    more = self._more
                    if more is None:
                        more = self._more = deque()
                    more.append(item)
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
        with self._lock:
            if self._closed or self._terminal is not None:
                return
            self._terminal = terminal
            wake = self._arrived()
        if wake is not None:
            wake()

    def close(self) -> None:
        """The consumer left: dispose the subscription unless the stream already ended (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            ended = self._terminal is not None
            self._first = _EMPTY
            if self._more is not None:
                self._more.clear()
            self._notify()  # an emitter waiting for room returns
        if not ended and self._subscription is not None:
            self._subscription.dispose()
