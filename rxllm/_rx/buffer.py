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
object, the first waiting item in a slot of its own (a queue only once a second one waits behind
it), and a condition variable only once a thread waits on it (an emitter waiting for room, or a
blocking consumer); a consumer on an event loop never does. The source gets two callbacks (one
for both terminal signals), and the subscription is held as it is returned.

Every buffer's state is guarded by one reentrant lock, :data:`LOCK`, shared by all buffers
(a lock per buffer would be 96 bytes per open stream). What runs under it is a few field reads
and writes, never a call out of this module that could block or emit (waking a consumer,
disposing, and raising happen after it is released), and a thread waiting on a condition
releases it; so one stream never waits for another's consumer, and, unlike a lock per buffer,
a finalizer closing one buffer from inside another's critical section (the garbage collector
runs finalizers wherever it is triggered) cannot deadlock two threads.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from reactivex import abc as rx_abc

from .._core.errors import BufferOverflowError, ConfigurationError
from .._core.loop_work import running_loop

__all__ = ["DEFAULT_MAX_BUFFER", "END", "LOCK", "WAIT", "StreamBuffer", "check_max_buffer"]

T = TypeVar("T")

DEFAULT_MAX_BUFFER = 16384
"""How many items an iterator holds between the emitting thread and the consumer, by default."""

END: Any = object()
"""What :meth:`StreamBuffer.poll` returns once the stream completed (or the consumer left)."""
WAIT: Any = object()
"""What :meth:`StreamBuffer.poll` returns when nothing has arrived yet."""
_EMPTY: Any = object()  # the first item's slot holds none
LOCK = threading.RLock()
"""The lock of every :class:`StreamBuffer` (see the module documentation); reentrant: a finalizer may close a buffer
from inside a critical section."""
_DONE: Any = object()  # the terminal: handed to the consumer, or the consumer left
_SUBSCRIBING: Any = object()  # the subscription: ``subscribe`` has not returned yet
_DISPOSED: Any = object()  # the subscription: disposed (or never to be made)
_idents = [0]  # the latest consumer thread's ident: one int object for its buffers (an int above 256 is 32 bytes)


def _thread_ident() -> int:
    """``threading.get_ident()``, the same int object as the last call's when it is the same thread."""
    ident = threading.get_ident()
    last = _idents[0]
    if ident == last:
        return last
    _idents[0] = ident
    return ident


def check_max_buffer(max_buffer: object) -> None:
    if isinstance(max_buffer, bool) or not isinstance(max_buffer, int) or max_buffer < 1:
        raise ConfigurationError(f"max_buffer must be an int >= 1, got {max_buffer!r}")


class StreamBuffer(Generic[T]):
    """Items of ``source`` waiting for one consumer, its end, and the subscription behind them.

    Everything below is read and written under :data:`LOCK`. The waiting items are
    ``_first`` (or :data:`_EMPTY`) followed by ``_more`` (built when a second item waits behind
    the first, then kept): the queue is empty exactly when ``_first`` is :data:`_EMPTY`.
    ``_cond`` is a condition on :data:`LOCK`, built (under it) by the first thread that waits
    (:meth:`_condition`); whoever would notify reads it under the same lock, so a waiter that
    built it is always notified, and while it is ``None`` nobody waits.

    ``_terminal`` is ``None`` while the stream runs, ``(error or None,)`` once it ended, and
    :data:`_DONE` once that was handed to the consumer or the consumer left (:meth:`close`): from
    then on everything arriving is ignored. ``_subscription`` is ``None`` before :meth:`start`,
    :data:`_SUBSCRIBING` while the source's ``subscribe`` runs, then what it returned, and
    :data:`_DISPOSED` once disposed (a dispose asked while subscribing is done when it returns).
    """

    __slots__ = (
        "_cond",
        "_consumer_thread",
        "_first",
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
        self._cond: threading.Condition | None = None  # built by the first thread that waits
        self._first: Any = _EMPTY  # the next item
        self._more: deque[T] | None = None  # the items after it
        self._terminal: tuple[Exception | None] | None = None  # (error or None) once the stream ended, or _DONE
        self._producer_waiting = False
        self._consumer_thread = 0
        self._subscription: rx_abc.DisposableBase | None = None  # or _SUBSCRIBING, _DISPOSED

    def _condition(self) -> threading.Condition:
        """The condition on the lock, built on first use; called with the lock held, by a thread about to wait."""
        cond = self._cond
        if cond is None:
            cond = self._cond = threading.Condition(LOCK)
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
        if self._subscription is not None:  # started, or closed before
            return
        self._consumer_thread = _thread_ident()
        self._subscription = _SUBSCRIBING
        source, self._source = self._source, None  # not kept: an open stream holds its subscription only
        assert source is not None
        end = self._on_end  # one bound method for both terminal signals
        subscription = source.subscribe(self._on_next, end, end)
        with LOCK:
            disposed = self._subscription is _DISPOSED  # disposed while subscribing (closed, or overflowed)
            if not disposed:  # (not held once the stream ended while subscribing: see _on_end)
                self._subscription = subscription if self._terminal is None else _DISPOSED
        if disposed:
            subscription.dispose()

    def _dispose(self) -> None:
        """Dispose the subscription (idempotent; while subscribing, when ``subscribe`` returns). Not under the lock."""
        with LOCK:
            subscription, self._subscription = self._subscription, _DISPOSED
        if subscription is not None and subscription is not _SUBSCRIBING and subscription is not _DISPOSED:
            subscription.dispose()

    def poll(self) -> Any:
        """The next item, :data:`END` or :data:`WAIT`; raises the error the stream ended with.

        The caller holds the lock (:data:`LOCK`).
        """
        item = self._first
        if item is not _EMPTY:
            more = self._more
            self._first = more.popleft() if more else _EMPTY
            if self._producer_waiting:
                self._notify()  # an emitter waiting for room
            return item
        terminal = self._terminal
        if terminal is None:
            return WAIT
        if terminal is _DONE:
            return END
        self._terminal = _DONE
        error = terminal[0]
        if error is None:
            return END
        del terminal  # (this frame goes into the error's traceback: holding the error would be a cycle)
        try:
            raise error
        finally:
            error = None

    def _arrived(self) -> Callable[[], None] | None:
        """Under the lock, after an item or the end arrived: what to call (outside it) to wake the consumer."""
        raise NotImplementedError

    # -- the emitting side (any thread) ---------------------------------------------------------

    def _on_next(self, item: T) -> None:
        overflowed = False
        with LOCK:
            if self._terminal is not None:  # ended, or the consumer left
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
                if self._terminal is not None:  # the consumer left meanwhile (only this emitter ends the stream)
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
        if overflowed:
            self._dispose()
        if wake is not None:
            wake()

    def _on_end(self, error: Exception | None = None) -> None:
        """The source's ``on_error(error)`` and ``on_completed()`` both."""
        with LOCK:
            if self._terminal is not None:
                return
            self._terminal = (error,)
            # ended: its sink has let go of the source, so nothing is left to dispose; and the sink
            # holds this buffer's methods, so holding it would be a cycle
            if self._subscription is not _SUBSCRIBING:
                self._subscription = _DISPOSED
            wake = self._arrived()
        if wake is not None:
            wake()

    def close(self) -> None:
        """The consumer left: dispose the subscription unless the stream already ended (idempotent)."""
        with LOCK:
            ended = self._terminal is not None  # (also when closed before: idempotent)
            self._terminal = _DONE
            self._first = _EMPTY
            if self._more is not None:
                self._more.clear()
            self._notify()  # an emitter waiting for room returns
        if not ended:
            self._dispose()
