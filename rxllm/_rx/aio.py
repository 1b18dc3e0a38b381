"""From an Observable to asyncio: ``await`` its last item, ``async for`` over its items.

rxllm's streams emit on their I/O thread (``HttpTransport``), on the asyncio transport's own loop
thread (``AsyncHttpTransport``), or synchronously. reactivex's own ``Observable.__await__`` sets
the asyncio future's result from that thread without waking the loop, so an awaited stream hangs
until something else wakes the loop (measured with reactivex 6.1). Everything here hands each
notification to the awaiting loop with ``loop.call_soon_threadsafe``: no polling, and the loop
wakes as soon as an item is emitted.

* :func:`last` keeps only the latest item and wakes the loop once, at the terminal event.
* :class:`ObservableIterator` (``iterate``) wakes the loop only when the consumer is waiting
  for an item; while it is busy, items wait in a buffer that the consumer drains without a
  further wake-up.

Leaving early (``break``, an exception, cancellation) disposes the subscription; disposing is
thread-safe everywhere in rxllm and closes the connection at once.

The buffer of :class:`ObservableIterator` (``max_buffer`` items, default
:data:`DEFAULT_MAX_BUFFER`) is where the emitting thread and the loop meet (see :mod:`.buffer`):
when it is full, an emitter on a plain thread waits for room (backpressure down to TCP); an
emitter on another event loop's thread must not block it, and the stream fails with
:class:`~rxllm.BufferOverflowError` after the items already buffered. Nothing is dropped silently.

An ``await`` or ``async for`` with no asyncio loop running on the thread raises
:class:`~rxllm.EventLoopError` at once (not asyncio's bare ``RuntimeError``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Generator
from types import TracebackType
from typing import Any, Generic, TypeVar, cast, overload

import reactivex
from reactivex import ConnectableObservable
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable
from reactivex.scheduler.eventloop import AsyncIOScheduler

from .._core.errors import EmptyStreamError, EventLoopError
from . import blocking
from .buffer import DEFAULT_MAX_BUFFER, END, LOCK, WAIT, StreamBuffer, check_max_buffer
from .direct import lazy_lock, raise_error, register_wrapper

__all__ = [
    "AwaitableObservable",
    "DEFAULT_MAX_BUFFER",
    "MaybeObservable",
    "ObservableIterator",
    "awaitable",
    "iterate",
    "last",
]

T = TypeVar("T")
D = TypeVar("D")
T_co = TypeVar("T_co", covariant=True)
_R = TypeVar("_R")
_A = TypeVar("_A")
_B = TypeVar("_B")
_C = TypeVar("_C")
_D = TypeVar("_D")
_E = TypeVar("_E")
_F = TypeVar("_F")
_G = TypeVar("_G")

_NOTHING: Any = object()


def _post(loop: asyncio.AbstractEventLoop, loop_thread: int, callback: Callable[[], None]) -> None:
    """Run ``callback`` on ``loop`` (from any thread), waking it; a closed loop has nobody waiting.

    On the loop's own thread (a source emitting there) ``call_soon`` is enough: the loop is
    running this very code, so it needs no wake-up through its self-pipe.
    """
    with contextlib.suppress(RuntimeError):  # a closed loop: its awaiter is gone
        if threading.get_ident() == loop_thread:
            loop.call_soon(callback)
        else:
            loop.call_soon_threadsafe(callback)


class _Last(Generic[T]):
    """Keeps the latest item; settles the future on the loop at the terminal event."""

    __slots__ = ("_future", "_loop", "_loop_thread", "_value")

    def __init__(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[T], default: Any) -> None:
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._future = future
        self._value: T = default

    def on_next(self, value: T) -> None:
        self._value = value

    def on_error(self, error: Exception) -> None:
        _post(self._loop, self._loop_thread, lambda: self._settle(error))

    def on_completed(self) -> None:
        _post(self._loop, self._loop_thread, lambda: self._settle(None))

    def _settle(self, error: Exception | None) -> None:
        future = self._future
        if future.done():  # cancelled meanwhile
            return
        if error is not None:
            future.set_exception(error)
        elif self._value is _NOTHING:
            future.set_exception(EmptyStreamError("the stream completed without any item, so it has no last item"))
        else:
            future.set_result(self._value)


@overload
async def last(source: rx_abc.ObservableBase[T]) -> T: ...


@overload
async def last(source: rx_abc.ObservableBase[T], default: D) -> T | D: ...


async def last(source: rx_abc.ObservableBase[Any], default: Any = _NOTHING) -> Any:
    """Subscribe to ``source`` and return its last item, on the running loop.

    Works for any Observable, whatever thread it emits on: the loop is woken once, when the
    stream ends. Leaving early (cancellation, ``asyncio.timeout``) disposes the subscription.

    Args:
        source: any Observable.
        default: what to return when the stream completes without any item (as ``next()``'s
            default); without it, an empty stream raises.

    Raises:
        EmptyStreamError: the stream completed without any item, and no ``default`` was given.
        Exception: the error the stream ended with, as it was emitted.

    >>> import asyncio, reactivex
    >>> asyncio.run(last(reactivex.of(1, 2, 3)))
    3
    """
    loop = _running_loop("await on an rxllm stream")
    future: asyncio.Future[Any] = loop.create_future()
    observer = _Last(loop, future, default)
    subscription = source.subscribe(observer.on_next, observer.on_error, observer.on_completed)
    try:
        return await future
    finally:
        if not future.done() or future.cancelled():  # left early; after a terminal event it is disposed already
            subscription.dispose()
        # this frame goes into an error's traceback: holding the error (the future holds it) would be a cycle
        del future, observer, subscription


class ObservableIterator(Generic[T]):
    """``async for`` over an Observable's items; see :func:`iterate`.

    Subscribes on the first ``__anext__`` (or ``__aenter__``). Also an async context manager:
    ``async with iterate(obs) as items:`` disposes the subscription when the block ends, however
    it ends. ``aclose()`` disposes it; so does dropping the iterator (``break`` out of the loop).
    """

    __slots__ = ("_channel",)

    def __init__(self, source: rx_abc.ObservableBase[T], *, max_buffer: int = DEFAULT_MAX_BUFFER) -> None:
        check_max_buffer(max_buffer)
        # The emitting side references the channel, never this object: dropping the iterator
        # (``break``) finalizes it at once, which closes the channel.
        self._channel = _Channel(source, max_buffer)

    def __aiter__(self) -> ObservableIterator[T]:
        return self

    def __anext__(self) -> Coroutine[Any, Any, T]:
        # The channel's coroutine itself (no second coroutine held while the consumer waits); it
        # holds this iterator, whose finalizer closes the channel, until it returns.
        return self._channel.next(self)

    async def __aenter__(self) -> ObservableIterator[T]:
        self._channel.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._channel.close()

    async def aclose(self) -> None:
        """Dispose the subscription (idempotent); further ``__anext__`` calls end the iteration."""
        self._channel.close()

    def __del__(self) -> None:
        channel = getattr(self, "_channel", None)
        if channel is not None:
            channel.close()


class _Channel(StreamBuffer[T]):
    """The buffer behind :class:`ObservableIterator`: the consumer awaits a future on its loop,
    woken (``call_soon_threadsafe``) only when it is waiting; while it is busy, items wait in the
    buffer and are drained without a further wake-up."""

    __slots__ = ("_loop", "_waiter", "_wake_pending")

    advice = "Await less per item, or raise iterate()'s max_buffer"

    def __init__(self, source: rx_abc.ObservableBase[T], max_buffer: int) -> None:
        super().__init__(source, max_buffer)
        self._waiter: asyncio.Future[None] | None = None
        self._wake_pending = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        if self._subscription is None:  # not started, nor closed
            self._loop = _running_loop("async for over an rxllm stream")
        super().start()

    async def next(self, owner: object = None) -> T:
        """The next item, waiting on the loop for it; ``owner`` (the iterator) is kept alive meanwhile."""
        self.start()
        lock = LOCK
        while True:
            with lock:
                item = self.poll()
                if item is END:
                    raise StopAsyncIteration
                if item is not WAIT:
                    return cast(T, item)
                assert self._loop is not None
                waiter = self._waiter = self._loop.create_future()
            try:
                await waiter
            except BaseException:  # cancelled (task cancel, asyncio.timeout): leave, disposing
                self.close()
                raise
            finally:
                self._waiter = None

    def _arrived(self) -> Callable[[], None] | None:
        if self._waiter is None or self._wake_pending:
            return None
        self._wake_pending = True
        return self._post_wake

    def _post_wake(self) -> None:
        assert self._loop is not None
        _post(self._loop, self._consumer_thread, self._wake)

    def _wake(self) -> None:
        """On the loop: wake the consumer waiting in ``__anext__``."""
        with LOCK:
            self._wake_pending = False
            waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


def _running_loop(what: str) -> asyncio.AbstractEventLoop:
    """The loop running on this thread; without one, an :class:`EventLoopError` saying what to do."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise EventLoopError(
            f"{what} needs a running asyncio event loop on this thread, and there is none (another async "
            "framework, or a coroutine driven by hand). Run it under asyncio.run(...); in synchronous code "
            "use 'for item in rxllm.iterate(stream)' or 'stream.run()' instead"
        ) from None


def iterate(source: rx_abc.ObservableBase[T], *, max_buffer: int = DEFAULT_MAX_BUFFER) -> ObservableIterator[T]:
    """``async for item in iterate(source)``: each item on the running loop as soon as it is emitted.

    Works for any Observable (also after ``.pipe(...)``), whatever thread it emits on.
    Subscribing happens at the first iteration; leaving the loop early (``break``, an exception,
    task cancellation, ``asyncio.timeout``) disposes the subscription, which closes rxllm's
    connection at once. For disposal at a point you choose, whatever holds a reference to the
    iterator, use ``async with iterate(source) as items: async for item in items: ...``.

    Args:
        source: any Observable.
        max_buffer: how many items may wait between the emitting thread and the loop. When it is
            full, an emitter on a plain thread waits (backpressure down to TCP); an emitter on
            another event loop's thread cannot wait, and the stream fails with
            :class:`~rxllm.BufferOverflowError` after the items already buffered.

    Raises:
        Exception: the error the stream ended with, as it was emitted, after the items before it.

    >>> import asyncio, reactivex
    >>> async def collect():
    ...     return [x async for x in iterate(reactivex.of(1, 2, 3))]
    >>> asyncio.run(collect())
    [1, 2, 3]
    """
    return ObservableIterator(source, max_buffer=max_buffer)


class AwaitableObservable(reactivex.Observable[T_co]):
    """An Observable you can also ``await`` (its last item) and ``async for`` over (its items).

    Every Observable rxllm's public API returns is one. It is the Observable it wraps, with no
    extra operator per item: subscribing subscribes the wrapped one. ``await obs`` is
    :func:`last`, ``async for x in obs`` is :func:`iterate`.

    ``.pipe(...)`` keeps it one: whatever operators (rxllm's or reactivex's) the chain applies,
    an Observable result comes back as an :class:`AwaitableObservable`, so
    ``await model.generate_content(request, stream=True).pipe(ops.map(...))`` works too.

    An operator applied without ``pipe`` (``ops.map(f)(obs)``, ``reactivex.merge(a, b)``)
    returns a plain reactivex Observable, whose own ``await`` sets its future from the emitting
    thread without waking the loop. When such a chain subscribes to an rxllm stream (reactivex's
    ``await`` subscribes with an ``AsyncIOScheduler`` of the running loop), the stream hands each
    notification to that loop, so the ``await`` completes there instead of hanging.

    >>> import asyncio, reactivex
    >>> from reactivex import operators as ops
    >>> async def main():
    ...     stream = AwaitableObservable(reactivex.of("partial", "final"))
    ...     return await stream, [x async for x in stream], await stream.pipe(ops.map(str.upper))
    >>> asyncio.run(main())
    ('final', ['partial', 'final'], 'FINAL')
    """

    lock = lazy_lock  # made on first use: Observable.__init__ (not called) makes one per Observable

    def __init__(self, source: rx_abc.ObservableBase[T_co]) -> None:
        self._subscribe = None
        self._source = source

    def subscribe(
        self,
        on_next: rx_abc.ObserverBase[T_co] | rx_abc.OnNext[T_co] | None = None,
        on_error: rx_abc.OnError | None = None,
        on_completed: rx_abc.OnCompleted | None = None,
        *,
        scheduler: rx_abc.SchedulerBase | None = None,
    ) -> rx_abc.DisposableBase:
        """Subscribe to the wrapped Observable (see its documentation for what that starts).

        With ``scheduler`` an ``AsyncIOScheduler`` of the loop running on this thread (what
        reactivex's own ``await`` passes), every notification is handed to that loop.
        """
        loop = _awaiting_loop(scheduler)
        if loop is not None:
            return _subscribe_on_loop(self._source, loop, on_next, on_error, on_completed)
        return self._source.subscribe(on_next, on_error, on_completed, scheduler=scheduler)

    def _subscribe_core(
        self, observer: rx_abc.ObserverBase[T_co], scheduler: rx_abc.SchedulerBase | None = None
    ) -> rx_abc.DisposableBase:
        return self.subscribe(observer, scheduler=scheduler)

    # The overloads narrow reactivex's (an Observable-returning chain gives an AwaitableObservable);
    # mypy cannot match a narrowed overload set against the supertype's one by one.
    @overload  # type: ignore[override]
    def pipe(self) -> AwaitableObservable[T_co]: ...

    @overload  # a ConnectableObservable keeps connect(): it overlaps the next overload on purpose
    def pipe(  # type: ignore[overload-overlap]
        self,
        op1: Callable[[reactivex.Observable[T_co]], ConnectableObservable[_R]],
        /,
    ) -> ConnectableObservable[_R]: ...

    @overload
    def pipe(
        self,
        op1: Callable[[reactivex.Observable[T_co]], reactivex.Observable[_R]],
        /,
    ) -> AwaitableObservable[_R]: ...

    @overload
    def pipe(
        self,
        op1: Callable[[reactivex.Observable[T_co]], _A],
        /,
    ) -> _A: ...

    @overload  # a ConnectableObservable keeps connect(): it overlaps the next overload on purpose
    def pipe(  # type: ignore[overload-overlap]
        self,
        op1: Callable[[reactivex.Observable[T_co]], _A],
        op2: Callable[[_A], ConnectableObservable[_R]],
        /,
    ) -> ConnectableObservable[_R]: ...

    @overload
    def pipe(
        self,
        op1: Callable[[reactivex.Observable[T_co]], _A],
        op2: Callable[[_A], reactivex.Observable[_R]],
        /,
    ) -> AwaitableObservable[_R]: ...

    @overload
    def pipe(
        self,
        op1: Callable[[reactivex.Observable[T_co]], _A],
        op2: Callable[[_A], _B],
        /,
    ) -> _B: ...

    @overload  # a ConnectableObservable keeps connect(): it overlaps the next overload on purpose
    def pipe(  # type: ignore[overload-overlap]
        self,
        op1: Callable[[reactivex.Observable[T_co]], _A],
        op2: Callable[[_A], _B],
        op3: Callable[[_B], ConnectableObservable[_R]],
        /,
    ) -> ConnectableObservable[_R]: ...

    @overload
    def pipe(
        self,
        op1: Callable[[reactivex.Observable[T_co]], _A],
        op2: Callable[[_A], _B],
        op3: Callable[[_B], reactivex.Observable[_R]],
        /,
    ) -> AwaitableObservable[_R]: ...

    @overload
    def pipe(
        self,
        op1: Callable[[reactivex.Observable[T_co]], _A],
        op2: Callable[[_A], _B],
        op3: Callable[[_B], _C],
        /,
    ) -> _C: ...

    @overload  # a ConnectableObservable keeps connect(): it overlaps the next overload on purpose
    def pipe(  # type: ignore[overload-overlap]
        self,
        op1: Callable[[reactivex.Observable[T_co]], _A],
        op2: Callable[[_A], _B],
        op3: Callable[[_B], _C],
        op4: Callable[[_C], ConnectableObservable[_R]],
        /,
    ) -> ConnectableObservable[_R]: ...

    @overload
    def pipe(
        self,
        op1: Callable[[reactivex.Observable[T_co]], _A],
        op2: Callable[[_A], _B],
        op3: Callable[[_B], _C],
        op4: Callable[[_C], reactivex.Observable[_R]],
        /,
    ) -> AwaitableObservable[_R]: ...

    @overload
    def pipe(
        self,
        op1: Callable[[reactivex.Observable[T_co]], _A],
        op2: Callable[[_A], _B],
        op3: Callable[[_B], _C],
        op4: Callable[[_C], _D],
        /,
    ) -> _D: ...

    @overload  # a ConnectableObservable keeps connect(): it overlaps the next overload on purpose
    def pipe(  # type: ignore[overload-overlap]
        self,
        op1: Callable[[reactivex.Observable[T_co]], _A],
        op2: Callable[[_A], _B],
        op3: Callable[[_B], _C],
        op4: Callable[[_C], _D],
        op5: Callable[[_D], ConnectableObservable[_R]],
        /,
    ) -> ConnectableObservable[_R]: ...

    @overload
    def pipe(
        self,
        op1: Callable[[reactivex.Observable[T_co]], _A],
        op2: Callable[[_A], _B],
        op3: Callable[[_B], _C],
        op4: Callable[[_C], _D],
        op5: Callable[[_D], reactivex.Observable[_R]],
        /,
    ) -> AwaitableObservable[_R]: ...

    @overload
    def pipe(
        self,
        op1: Callable[[reactivex.Observable[T_co]], _A],
        op2: Callable[[_A], _B],
        op3: Callable[[_B], _C],
        op4: Callable[[_C], _D],
        op5: Callable[[_D], _E],
        /,
    ) -> _E: ...

    @overload  # a ConnectableObservable keeps connect(): it overlaps the next overload on purpose
    def pipe(  # type: ignore[overload-overlap]
        self,
        op1: Callable[[reactivex.Observable[T_co]], _A],
        op2: Callable[[_A], _B],
        op3: Callable[[_B], _C],
        op4: Callable[[_C], _D],
        op5: Callable[[_D], _E],
        op6: Callable[[_E], ConnectableObservable[_R]],
        /,
    ) -> ConnectableObservable[_R]: ...

    @overload
    def pipe(
        self,
        op1: Callable[[reactivex.Observable[T_co]], _A],
        op2: Callable[[_A], _B],
        op3: Callable[[_B], _C],
        op4: Callable[[_C], _D],
        op5: Callable[[_D], _E],
        op6: Callable[[_E], reactivex.Observable[_R]],
        /,
    ) -> AwaitableObservable[_R]: ...

    @overload
    def pipe(
        self,
        op1: Callable[[reactivex.Observable[T_co]], _A],
        op2: Callable[[_A], _B],
        op3: Callable[[_B], _C],
        op4: Callable[[_C], _D],
        op5: Callable[[_D], _E],
        op6: Callable[[_E], _F],
        /,
    ) -> _F: ...

    @overload  # a ConnectableObservable keeps connect(): it overlaps the next overload on purpose
    def pipe(  # type: ignore[overload-overlap]
        self,
        op1: Callable[[reactivex.Observable[T_co]], _A],
        op2: Callable[[_A], _B],
        op3: Callable[[_B], _C],
        op4: Callable[[_C], _D],
        op5: Callable[[_D], _E],
        op6: Callable[[_E], _F],
        op7: Callable[[_F], ConnectableObservable[_R]],
        /,
    ) -> ConnectableObservable[_R]: ...

    @overload
    def pipe(
        self,
        op1: Callable[[reactivex.Observable[T_co]], _A],
        op2: Callable[[_A], _B],
        op3: Callable[[_B], _C],
        op4: Callable[[_C], _D],
        op5: Callable[[_D], _E],
        op6: Callable[[_E], _F],
        op7: Callable[[_F], reactivex.Observable[_R]],
        /,
    ) -> AwaitableObservable[_R]: ...

    @overload
    def pipe(
        self,
        op1: Callable[[reactivex.Observable[T_co]], _A],
        op2: Callable[[_A], _B],
        op3: Callable[[_B], _C],
        op4: Callable[[_C], _D],
        op5: Callable[[_D], _E],
        op6: Callable[[_E], _F],
        op7: Callable[[_F], _G],
        /,
    ) -> _G: ...

    @overload
    def pipe(self, *operators: Callable[[Any], Any]) -> Any: ...

    def pipe(self, *operators: Callable[[Any], Any]) -> Any:
        """Compose ``operators`` left to right on this Observable, as ``reactivex.Observable.pipe``.

        A plain Observable result (what operators build) is an :class:`AwaitableObservable`
        (``await`` / ``async for`` keep working after any chain); anything else an operator
        returns (a ``ConnectableObservable`` of ``ops.publish()``, a future) is returned as it is.

        >>> import asyncio, reactivex
        >>> from reactivex import operators as ops
        >>> doubled = AwaitableObservable(reactivex.of(1, 2, 3)).pipe(ops.map(lambda x: x * 2), ops.to_list())
        >>> asyncio.run(asyncio.wait_for(doubled, 5))
        [2, 4, 6]
        """
        result: Any = self
        for operator in operators:
            result = operator(result)
        if type(result) is reactivex.Observable:  # subclasses keep their own API (connect(), on_next())
            return AwaitableObservable(result)
        return result

    def run(self, scheduler: rx_abc.SchedulerBase | None = None) -> T_co:
        """Block until the stream ends and return its last item (reactivex's ``run()``).

        For scripts; in async code ``await`` it instead. A wait that could never end (on the
        thread of a running event loop that the stream needs to emit) raises at once.

        Raises:
            EventLoopError: called on the thread of a running event loop that the stream needs.
            SequenceContainsNoElementsError: (reactivex's) the stream completed without any item.
            Exception: the error the stream ended with.
        """
        return blocking.run(self, scheduler)

    def __await__(self) -> Generator[Any, None, T_co]:
        """``await obs``: the last item, delivered on the awaiting loop (see :func:`last`)."""
        return last(self).__await__()

    def __aiter__(self) -> AsyncIterator[T_co]:
        """``async for x in obs``: every item on the iterating loop (see :func:`iterate`)."""
        return cast(AsyncIterator[T_co], iterate(self))


register_wrapper(AwaitableObservable)  # rxllm's operators subscribe its source directly (no loop to hand to)

_ASYNCIO_KINDS: dict[type, bool] = {type(None): False}
"""Whether a scheduler type is an ``AsyncIOScheduler`` (a class's bases never change)."""


def _awaiting_loop(scheduler: rx_abc.SchedulerBase | None) -> asyncio.AbstractEventLoop | None:
    """The loop of ``scheduler`` when it is an ``AsyncIOScheduler`` of the loop running here."""
    kind = type(scheduler)
    asyncio_kind = _ASYNCIO_KINDS.get(kind)
    if asyncio_kind is None:  # isinstance on a scheduler goes through ABCMeta: asked once per scheduler type
        asyncio_kind = _ASYNCIO_KINDS[kind] = issubclass(kind, AsyncIOScheduler)
    if not asyncio_kind:
        return None
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        return None
    # reactivex keeps the loop in ``_loop`` and has no public accessor for it
    return running if getattr(scheduler, "_loop", None) is running else None


def _subscribe_on_loop(
    source: rx_abc.ObservableBase[T],
    loop: asyncio.AbstractEventLoop,
    on_next: rx_abc.ObserverBase[T] | rx_abc.OnNext[T] | None,
    on_error: rx_abc.OnError | None,
    on_completed: rx_abc.OnCompleted | None,
) -> rx_abc.DisposableBase:
    """Subscribe to ``source``, handing every notification to ``loop`` (FIFO, from any thread).

    The source is subscribed without the scheduler: rxllm's own work runs where it always does,
    and only what the subscriber sees moves to the loop. Nothing is delivered after ``dispose``.
    """
    if isinstance(on_next, rx_abc.ObserverBase):
        observer = on_next
        next_: Callable[[T], None] = observer.on_next
        error_: Callable[[Exception], None] = observer.on_error
        completed_: Callable[[], None] = observer.on_completed
    else:
        next_ = on_next or (lambda _: None)
        error_ = on_error or raise_error
        completed_ = on_completed or (lambda: None)
    loop_thread = threading.get_ident()
    disposed = [False]

    def deliver(callback: Callable[[], None]) -> None:
        def run() -> None:
            if not disposed[0]:
                callback()

        _post(loop, loop_thread, run)

    inner = source.subscribe(
        lambda item: deliver(lambda: next_(item)),
        lambda error: deliver(lambda: error_(error)),
        lambda: deliver(completed_),
    )

    def dispose() -> None:
        disposed[0] = True
        inner.dispose()

    return Disposable(dispose)


def awaitable(source: rx_abc.ObservableBase[T]) -> AwaitableObservable[T]:
    """``source`` as an :class:`AwaitableObservable` (itself, when it already is one)."""
    if isinstance(source, AwaitableObservable):
        return source
    return AwaitableObservable(source)


class MaybeObservable(AwaitableObservable[T_co]):
    """An :class:`AwaitableObservable` of at most one item, where none is an answer (RxJava's
    ``Maybe``): ``await obs`` gives the item, or ``None`` when the stream completed empty
    (``get_session`` of a missing session, ``delete_session``).

    >>> import asyncio, reactivex
    >>> async def main():
    ...     return await MaybeObservable(reactivex.empty())
    >>> asyncio.run(main()) is None
    True
    """

    def __await__(self) -> Generator[Any, None, T_co | None]:  # type: ignore[override]
        """``await obs``: the item, or ``None`` for an empty stream."""
        return last(self, None).__await__()


register_wrapper(MaybeObservable)
