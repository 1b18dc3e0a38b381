"""From an Observable to a plain ``for`` loop: :func:`iterate`, for scripts and notebooks.

The thread that iterates waits for each item; the stream emits on its own thread (an I/O
thread, another event loop's thread) or synchronously while being subscribed. Items wait in a
bounded buffer between the two (``max_buffer`` items, default :data:`DEFAULT_MAX_BUFFER`), with
the same rules as ``rxllm.aio.iterate``'s buffer (see :mod:`.buffer`): an emitter on a plain
thread waits for room when it is full (backpressure down to TCP); an emitter on an event loop's
thread cannot wait, and the stream fails with :class:`~rxllm.BufferOverflowError` after the items
already buffered.

A wait that could never end fails at once with :class:`~rxllm.EventLoopError`: iterating on the
thread of a running event loop while the stream needs that loop to emit (an
``AsyncHttpTransport`` bound to it, an ``async def`` tool running there). Iterating on a loop's
thread (a notebook cell) over a stream that emits elsewhere works; it blocks the loop meanwhile,
and other streams' work on that loop (an ``async for`` the wait interrupts) waits until it ends
(the check is per stream).

Leaving the loop early (``break``, an exception, Ctrl-C while waiting) disposes the
subscription, which closes rxllm's connection at once: the iterator is dropped when the ``for``
loop ends (the emitting side never references it, only the channel behind it), and a
``with iterate(obs) as items:`` block or :meth:`BlockingIterator.close` disposes at a chosen point.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, Generic, TypeVar, cast

from reactivex import abc as rx_abc
from reactivex.internal.exceptions import SequenceContainsNoElementsError

from .._core.errors import EventLoopError
from .._core.loop_work import Wait, begin, running_loop
from .buffer import DEFAULT_MAX_BUFFER, END, LOCK, WAIT, StreamBuffer, check_max_buffer

__all__ = ["DEFAULT_MAX_BUFFER", "BlockingIterator", "iterate", "run"]

T = TypeVar("T")


class BlockingIterator(Generic[T]):
    """A plain iterator over an Observable's items; see :func:`iterate`.

    Subscribes on the first ``next()`` (or ``__enter__``). ``close()`` disposes the subscription
    (idempotent; further ``next()`` calls end the iteration); so does leaving a ``with`` block,
    and dropping the iterator (``break`` out of the ``for`` loop).
    """

    __slots__ = ("_channel",)

    def __init__(
        self, source: rx_abc.ObservableBase[T], *, max_buffer: int = DEFAULT_MAX_BUFFER, what: str | None = None
    ) -> None:
        check_max_buffer(max_buffer)
        self._channel = _Channel(source, max_buffer, what or "for ... in rxllm.iterate(...)")

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


class _Channel(StreamBuffer[T]):
    """The buffer behind :class:`BlockingIterator`: the iterating thread waits on its condition."""

    __slots__ = ("_wait", "_what")

    def __init__(self, source: rx_abc.ObservableBase[T], max_buffer: int, what: str) -> None:
        super().__init__(source, max_buffer)
        self._what = what
        self._wait: Wait | None = None  # on a running loop's thread: the work this stream has on it

    def start(self) -> None:
        if self._subscription is not None:  # started, or closed before
            return
        wait = self._wait = begin(running_loop(), self._wake)
        if wait is None:
            super().start()
            return
        try:
            with wait.subscribing():  # work queued while subscribing is this stream's
                super().start()
        except BaseException:
            self._end_wait()
            raise

    def next(self) -> T:
        self.start()
        loop = running_loop()
        wait = self._wait
        if loop is not None and (wait is None or wait.loop is not loop):
            # iterated on another loop's thread than the one it was started on: count from now on
            self._end_wait()
            wait = self._wait = begin(loop, self._wake)
        elif loop is None:
            wait = None  # this thread blocks no loop
        try:
            with LOCK:
                while True:
                    item = self.poll()
                    if item is END:
                        self._end_wait()
                        raise StopIteration
                    if item is not WAIT:
                        return cast(T, item)
                    if wait is not None:
                        wait.check(self._what)
                    self._condition().wait()
        except BaseException as exc:
            self._end_wait()  # the stream ended (its error), or the consumer leaves
            # Ctrl-C (KeyboardInterrupt) while waiting, or a wait that could never end: leave, disposing
            if not isinstance(exc, Exception) or isinstance(exc, EventLoopError):
                self.close()
            raise

    def close(self) -> None:
        super().close()
        self._end_wait()

    def _end_wait(self) -> None:
        wait = self._wait
        if wait is not None:
            self._wait = None
            wait.end()

    def _wake(self) -> None:
        with LOCK:
            self._notify()

    def _arrived(self) -> Callable[[], None] | None:
        self._notify()
        return None


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
        EventLoopError: (from ``next()``, at once) iterating on the thread of a running event
            loop that the stream needs to emit: use ``async for`` there.
        Exception: (from ``next()``) the error the stream ended with, as it was emitted, after
            the items before it.

    >>> import reactivex
    >>> [x * 10 for x in iterate(reactivex.of(1, 2, 3))]
    [10, 20, 30]
    """
    return BlockingIterator(source, max_buffer=max_buffer)


class _Last(Generic[T]):
    """What :func:`run` waits on: the latest item and the end, under one condition."""

    __slots__ = ("cond", "error", "has_value", "terminated", "value")

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.value: Any = None
        self.has_value = False
        self.error: Exception | None = None
        self.terminated = False

    def on_next(self, value: T) -> None:
        self.value = value
        self.has_value = True

    def on_error(self, error: Exception) -> None:
        with self.cond:
            self.error = error
            self.terminated = True
            self.cond.notify_all()

    def on_completed(self) -> None:
        with self.cond:
            self.terminated = True
            self.cond.notify_all()

    def wake(self) -> None:
        with self.cond:
            self.cond.notify_all()


def run(source: rx_abc.ObservableBase[T], scheduler: rx_abc.SchedulerBase | None = None, *, what: str = ".run()") -> T:
    """reactivex's ``Observable.run()`` (block until the end, return the last item), except that a
    wait that could never end raises :class:`~rxllm.EventLoopError` at once instead of hanging.

    Raises:
        EventLoopError: called on the thread of a running event loop that the stream needs.
        SequenceContainsNoElementsError: the stream completed without any item (as reactivex).
        Exception: the error the stream ended with.
    """
    last: _Last[T] = _Last()
    wait = begin(running_loop(), last.wake)
    try:
        if wait is None:
            subscription = source.subscribe(last.on_next, last.on_error, last.on_completed, scheduler=scheduler)
        else:
            with wait.subscribing():  # work queued while subscribing is this stream's
                subscription = source.subscribe(last.on_next, last.on_error, last.on_completed, scheduler=scheduler)
        try:
            with last.cond:
                while not last.terminated:
                    if wait is not None:
                        wait.check(what)
                    last.cond.wait()
        except BaseException:
            subscription.dispose()
            raise
    finally:
        if wait is not None:
            wait.end()
    error, last.error = last.error, None
    if error is not None:
        # this frame goes into the error's traceback: nothing it holds may hold the error (a cycle
        # would keep the error, its traceback and this frame's locals for the garbage collector)
        try:
            raise error
        finally:
            error = None
    if not last.has_value:
        raise SequenceContainsNoElementsError()
    return cast(T, last.value)
