"""From an Observable to a plain ``for`` loop: :func:`iterate`, for scripts and notebooks.

The thread that iterates waits for each item; the stream emits on its own thread (an I/O
thread, another event loop's thread) or synchronously while being subscribed. Items wait in a
bounded buffer between the two (``max_buffer`` items, default :data:`DEFAULT_MAX_BUFFER`), with
the same rules as ``rxllm.aio.iterate``'s buffer:

* an emitter on a plain thread waits for room when it is full (backpressure down to TCP);
* an emitter on an event loop's thread must not block that loop: the stream fails with
  :class:`~rxllm.BufferOverflowError` after the items already buffered;
* an emitter on the iterating thread itself (a synchronous source, while it is subscribed) is
  never bounded: the consumer cannot take anything before the source returns.

Leaving the loop early (``break``, an exception, Ctrl-C while waiting) disposes the
subscription, which closes rxllm's connection at once: the iterator is dropped when the ``for``
loop ends (the emitting side never references it, only the channel behind it), and a
``with iterate(obs) as items:`` block or :meth:`BlockingIterator.close` disposes at a chosen point.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from types import TracebackType
from typing import Generic, TypeVar

from reactivex import abc as rx_abc
from reactivex.disposable import SingleAssignmentDisposable

from .._core.errors import BufferOverflowError, ConfigurationError

__all__ = ["DEFAULT_MAX_BUFFER", "BlockingIterator", "iterate"]

T = TypeVar("T")

DEFAULT_MAX_BUFFER = 16384
"""How many items :func:`iterate` holds between the emitting thread and the iterating one, by default."""


class BlockingIterator(Generic[T]):
    """A plain iterator over an Observable's items; see :func:`iterate`.

    Subscribes on the first ``next()`` (or ``__enter__``). ``close()`` disposes the subscription
    (idempotent; further ``next()`` calls end the iteration); so does leaving a ``with`` block,
    and dropping the iterator (``break`` out of the ``for`` loop).
    """

    __slots__ = ("_channel",)

    def __init__(self, source: rx_abc.ObservableBase[T], *, max_buffer: int = DEFAULT_MAX_BUFFER) -> None:
        if isinstance(max_buffer, bool) or not isinstance(max_buffer, int) or max_buffer < 1:
            raise ConfigurationError(f"max_buffer must be an int >= 1, got {max_buffer!r}")
        self._channel = _Channel(source, max_buffer)

    def __iter__(self) -> BlockingIterator[T]:
        return self

    def __next__(self) -> T:
        return self._channel.next()

    def __enter__(self) -> BlockingIterator[T]:
        self._channel.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._channel.close()

    def close(self) -> None:
        """Dispose the subscription unless the stream already ended (idempotent)."""
        self._channel.close()

    def __del__(self) -> None:
        channel = getattr(self, "_channel", None)
        if channel is not None:
            channel.close()


class _Channel(Generic[T]):
    """Where the emitting thread and the iterating thread meet (the state behind :class:`BlockingIterator`)."""

    __slots__ = (
        "_closed",
        "_cond",
        "_consumer_thread",
        "_finished",
        "_items",
        "_max_buffer",
        "_source",
        "_subscription",
        "_terminal",
    )

    def __init__(self, source: rx_abc.ObservableBase[T], max_buffer: int) -> None:
        self._source = source
        self._max_buffer = max_buffer
        self._cond = threading.Condition()  # reentrant: a finalizer may close the channel from inside it
        self._items: deque[T] = deque()
        self._terminal: tuple[Exception | None] | None = None  # (error or None) once the stream ended
        self._closed = False  # the consumer left: ignore everything from now on
        self._finished = False  # the terminal was handed to the consumer
        self._consumer_thread = 0
        self._subscription: SingleAssignmentDisposable | None = None

    def start(self) -> None:
        if self._subscription is not None or self._closed:
            return
        self._consumer_thread = threading.get_ident()
        self._subscription = SingleAssignmentDisposable()
        self._subscription.disposable = self._source.subscribe(self._on_next, self._on_error, self._on_completed)

    def next(self) -> T:
        self.start()
        cond = self._cond
        try:
            with cond:
                while True:
                    if self._items:
                        item = self._items.popleft()
                        cond.notify_all()  # an emitter waiting for room
                        return item
                    if self._closed or self._finished:
                        raise StopIteration
                    if self._terminal is not None:
                        self._finished = True
                        error = self._terminal[0]
                        if error is None:
                            raise StopIteration
                        raise error
                    cond.wait()
        except BaseException as exc:
            if not isinstance(exc, Exception):  # Ctrl-C (KeyboardInterrupt) while waiting: leave, disposing
                self.close()
            raise

    # -- the emitting side (any thread) ---------------------------------------------------------

    def _on_next(self, item: T) -> None:
        overflowed = False
        with self._cond:
            if self._closed or self._terminal is not None:
                return
            while len(self._items) >= self._max_buffer and threading.get_ident() != self._consumer_thread:
                if _on_a_loop_thread():
                    self._terminal = (
                        BufferOverflowError(
                            f"the consumer fell more than {self._max_buffer} items behind a stream emitting on "
                            "an event loop thread, which must not be blocked; rather than drop items, the stream "
                            "fails. Do less per item, or raise iterate()'s max_buffer"
                        ),
                    )
                    overflowed = True
                    break
                self._cond.wait()
                if self._closed:
                    return
            else:
                self._items.append(item)
            self._cond.notify_all()
        if overflowed and self._subscription is not None:
            self._subscription.dispose()

    def _on_error(self, error: Exception) -> None:
        self._end((error,))

    def _on_completed(self) -> None:
        self._end((None,))

    def _end(self, terminal: tuple[Exception | None]) -> None:
        with self._cond:
            if self._closed or self._terminal is not None:
                return
            self._terminal = terminal
            self._cond.notify_all()

    def close(self) -> None:
        """The consumer left: dispose the subscription unless the stream already ended."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            ended = self._terminal is not None
            self._items.clear()
            self._cond.notify_all()  # an emitter waiting for room returns
        if not ended and self._subscription is not None:
            self._subscription.dispose()


def _on_a_loop_thread() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def iterate(source: rx_abc.ObservableBase[T], *, max_buffer: int = DEFAULT_MAX_BUFFER) -> BlockingIterator[T]:
    """``for item in iterate(source)``: each item as soon as it is emitted, on the iterating thread.

    For scripts and notebooks, where there is no event loop to ``await`` on (inside one, use
    ``async for`` over the Observable, or ``rxllm.aio.iterate``). Works for any Observable (also
    after ``.pipe(...)``), whatever thread it emits on. Subscribing happens at the first
    iteration; leaving the loop early (``break``, an exception, Ctrl-C) disposes the
    subscription, which closes rxllm's connection at once. For disposal at a point you choose,
    whatever holds a reference to the iterator, use ``with iterate(source) as items: ...``.

    Args:
        source: any Observable.
        max_buffer: how many items may wait between the emitting thread and the iterating one
            (see the module documentation for what happens when it is full).

    Returns:
        A :class:`BlockingIterator` of the items.

    Raises:
        ConfigurationError: (at once) ``max_buffer`` is not an int >= 1.
        Exception: (from ``next()``) the error the stream ended with, as it was emitted, after
            the items before it.

    >>> import reactivex
    >>> [x * 10 for x in iterate(reactivex.of(1, 2, 3))]
    [10, 20, 30]
    """
    return BlockingIterator(source, max_buffer=max_buffer)
