"""Small synchronous Rx building blocks for the runtimes (private): cheap, and nothing scheduled.

``reactivex.just`` / ``empty`` / ``throw`` / ``from_callable`` without a scheduler schedule their
emission on the current thread's trampoline: inside a running trampoline (a blocking model stream
emitting from within one) that emission waits until the whole stream has ended (reactivex 6's
trampoline runs queued work only after the running action returns). These helpers emit
synchronously in ``subscribe`` instead, so a partial event reaches the subscriber the moment the
model produced it.

They are also the runtime's cheap plumbing. Every one is a :class:`Direct` Observable: subscribing
calls its subscribe function at once with a light observer that, like reactivex's
``AutoDetachObserver``, delivers nothing after a terminal signal or after the subscription was
disposed, and turns an exception raised while subscribing into ``on_error``; unlike
``Observable.subscribe`` it never sets up the current thread's trampoline (a stock Observable
subscribed inside still does, itself) and allocates two small objects instead of about ten. A
stock ``subscribe`` costs ~12 µs on a thread without a trampoline; a direct one under 1 µs. The
operators here (:func:`collect_then`, :func:`concat_now`, :func:`concat_map_now`, :func:`tap_next`,
:func:`ignore_items`, :func:`defer_now`, :func:`call_then`) replace the stock chains the runtime used
per step and per event (``to_list`` + ``flat_map``, ``concat_with_iterable``, ``map`` +
``concat_map``, ``do_action``, ``ignore_elements``, ``defer``, a store then what follows it) with
the same ordering and disposal, and never
schedule: in particular :func:`concat_now` does not hop to the subscriber's scheduler between
sources (``concat_with_iterable`` does, and ``Observable.run()`` subscribes with a
``NewThreadScheduler``: a new thread per source).

Where one operator's subscription would only pass another's signals on, the two are fused into
one subscriber: a :func:`concat_map_items` pulled by :func:`concat_now` (an agent's step) is its
own sink; :func:`collect_then` of a :func:`collect_then` (a tool call) collects both in one
subscription; a pass-through delivers an :func:`emit_now`, :func:`nothing_now` or
:func:`defer_now` in place. Each does what the composition it replaces does, in the same order,
with the same errors, disposal and threads (``tests/test_rx_plumbing_14.py``).
"""

from __future__ import annotations

import threading
import types
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import reactivex
from reactivex import abc as rx_abc
from reactivex.scheduler.eventloop import AsyncIOScheduler

__all__ = [
    "Direct",
    "DisposeAction",
    "Slot",
    "TwoStages",
    "call_now",
    "call_then",
    "collect_then",
    "concat_map_items",
    "concat_map_now",
    "concat_now",
    "defer_now",
    "emit_now",
    "emitted",
    "fail_now",
    "ignore_items",
    "nothing_now",
    "on_dispose",
    "raise_error",
    "register_wrapper",
    "tap_next",
    "then_now",
]

T = TypeVar("T")
U = TypeVar("U")

Subscribe = Callable[[rx_abc.ObserverBase[T], "rx_abc.SchedulerBase | None"], rx_abc.DisposableBase]


def raise_error(error: Exception) -> None:
    """Raise ``error`` (the ``on_error`` of a subscriber that gave none), holding nothing after it."""
    try:
        raise error
    finally:  # (this frame goes into the error's traceback: holding the error too would be a cycle)
        error = None  # type: ignore[assignment]


def _ignore(*_: Any) -> None:
    return None


class _Sink(rx_abc.ObserverBase[T], rx_abc.DisposableBase):
    """The observer a :class:`Direct` subscribe function gets, and the subscription it returns: nothing
    is delivered after a terminal signal or dispose; a terminal signal disposes the subscription (as
    reactivex's ``AutoDetachObserver``)."""

    __slots__ = ("_on_completed", "_on_error", "_on_next", "stopped", "subscription")

    def __init__(
        self,
        on_next: Callable[[T], None],
        on_error: Callable[[Exception], None],
        on_completed: Callable[[], None],
    ) -> None:
        self._on_next = on_next
        self._on_error = on_error
        self._on_completed = on_completed
        self.stopped = False
        self.subscription: rx_abc.DisposableBase | None = None

    def on_next(self, value: T) -> None:
        if not self.stopped:
            self._on_next(value)

    def on_error(self, error: Exception) -> None:
        if not self.stopped:
            self.stopped = True
            try:
                self._on_error(error)
            finally:
                if self.subscription is not None:  # (a downstream dispose may have released it already)
                    self.dispose()

    def on_completed(self) -> None:
        if not self.stopped:
            self.stopped = True
            try:
                self._on_completed()
            finally:
                if self.subscription is not None:  # (a downstream dispose may have released it already)
                    self.dispose()

    def dispose(self) -> None:
        self.stopped = True
        subscription, self.subscription = self.subscription, None
        if subscription is not None:
            subscription.dispose()


class _Nothing(rx_abc.DisposableBase):
    __slots__ = ()

    def dispose(self) -> None:
        return None


class DisposeAction(rx_abc.DisposableBase):
    """Runs ``action`` on the first ``dispose`` (``reactivex.disposable.Disposable`` without its lock)."""

    __slots__ = ("_action",)

    def __init__(self, action: Callable[[], object]) -> None:
        self._action: Callable[[], object] | None = action

    def dispose(self) -> None:
        action, self._action = self._action, None
        if action is not None:
            action()


class Slot(rx_abc.DisposableBase):
    """Holds one disposable, set once or more; disposing disposes it, and any set afterwards at once
    (``SingleAssignmentDisposable`` without its lock; disposing a disposable twice is harmless)."""

    __slots__ = ("_current", "disposed")

    def __init__(self) -> None:
        self._current: rx_abc.DisposableBase | None = None
        self.disposed = False

    def set(self, disposable: rx_abc.DisposableBase) -> None:
        if self.disposed:
            disposable.dispose()
            return
        self._current = disposable
        if self.disposed:  # disposed on another thread meanwhile
            disposable.dispose()

    def dispose(self) -> None:
        self.disposed = True
        current, self._current = self._current, None
        if current is not None:
            current.dispose()


NO_DISPOSAL: rx_abc.DisposableBase = _Nothing()
_CALLBACK_TYPES = (types.FunctionType, types.MethodType, types.BuiltinFunctionType, types.BuiltinMethodType)
_LOCK_OF_LOCKS = threading.Lock()


def _get_lock(self: Any) -> threading.RLock:
    lock: threading.RLock | None = self.__dict__.get("_lazy_lock")
    if lock is None:
        with _LOCK_OF_LOCKS:
            lock = self.__dict__.setdefault("_lazy_lock", threading.RLock())
    return lock


def _set_lock(self: Any, value: threading.RLock) -> None:
    self.__dict__["_lazy_lock"] = value


lazy_lock: Any = property(_get_lock, _set_lock, doc="The lock stock operators take on a source (made on first use).")
"""``lock = lazy_lock`` in an Observable subclass that skips ``Observable.__init__`` (it makes one per Observable)."""


class Direct(reactivex.Observable[T]):
    """An Observable whose ``subscribe`` calls ``subscribe_fn(observer, scheduler)`` at once (module docstring)."""

    def __init__(self, subscribe_fn: Subscribe[T]) -> None:  # no Observable.__init__: no lock per Observable
        self._fn = subscribe_fn
        self._subscribe = subscribe_fn

    lock = lazy_lock

    def subscribe(
        self,
        on_next: rx_abc.ObserverBase[T] | rx_abc.OnNext[T] | None = None,
        on_error: rx_abc.OnError | None = None,
        on_completed: rx_abc.OnCompleted | None = None,
        *,
        scheduler: rx_abc.SchedulerBase | None = None,
    ) -> rx_abc.DisposableBase:
        """Subscribe an observer (or callbacks) and run the subscribe function now."""
        kind = type(on_next)
        if kind is _Sink or (
            kind not in _CALLBACK_TYPES
            and (isinstance(on_next, rx_abc.ObserverBase) or callable(getattr(on_next, "on_next", None)))
        ):
            # no typing.cast here: a call (and a subscripted generic) per subscribe
            observer: rx_abc.ObserverBase[T] = on_next  # type: ignore[assignment]
            sink: _Sink[T] = _Sink(observer.on_next, observer.on_error, observer.on_completed)
        else:
            sink = _Sink(
                _ignore if on_next is None else on_next,  # type: ignore[arg-type]
                on_error or raise_error,
                on_completed or _ignore,
            )
        try:
            inner = self._fn(sink, scheduler)
        except Exception as exc:
            if sink.stopped:
                raise
            sink.on_error(exc)
            return sink
        if inner is not NO_DISPOSAL:
            if sink.stopped:  # ended during subscribe: release it now
                inner.dispose()
            else:
                sink.subscription = inner
                if sink.stopped:  # ended on another thread meanwhile
                    sink.dispose()
        return sink

    def _subscribe_core(
        self, observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None
    ) -> rx_abc.DisposableBase:
        return self.subscribe(observer, scheduler=scheduler)


_WRAPPERS: set[type[Any]] = set()


def register_wrapper(kind: type[Any]) -> None:
    """Declare ``kind`` (exactly that type) a wrapper these operators may look through: its
    ``subscribe`` subscribes its ``_source`` with the same arguments whenever the scheduler is not
    an ``AsyncIOScheduler`` (``rxllm._rx.aio.AwaitableObservable``)."""
    _WRAPPERS.add(kind)


def _inner(source: reactivex.Observable[T], scheduler: rx_abc.SchedulerBase | None) -> reactivex.Observable[T]:
    """``source``, or what subscribing it would subscribe with ``scheduler`` (:func:`register_wrapper`):
    a wrapped :class:`Direct` then gets the subscriber's sink itself (:func:`_forward`)."""
    while type(source) in _WRAPPERS:
        if scheduler is not None and isinstance(scheduler, AsyncIOScheduler):
            return source
        source = source._source  # type: ignore[attr-defined]
    return source


def _forward(
    source: reactivex.Observable[T], observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None
) -> rx_abc.DisposableBase:
    """``source.subscribe(observer, scheduler=scheduler)`` where ``observer`` is the sink of the
    subscription being set up and what this returns is disposed only with it (a pass-through: the
    source's items, error and completion are that subscription's own).

    A :class:`Direct` source's subscribe function then gets that sink itself: no second sink in
    between, one call less per item. What a second sink would do, the shared one does: nothing is
    delivered after its terminal signal or its dispose (which disposes what this returned); an
    exception raised while subscribing is delivered as ``on_error`` (raised again when the
    source had already ended, dropped when the sink had ended before).
    """
    while True:
        kind = type(source)
        if kind in _WRAPPERS:
            source = _inner(source, scheduler)
            kind = type(source)
        if type(observer) is not _Sink or kind.subscribe is not Direct.subscribe:
            return source.subscribe(observer, scheduler=scheduler)
        if kind is not _Defer:
            break
        try:  # what a defer_now's subscribe function does, in place: its Observable made, then forwarded
            source = source._factory()  # type: ignore[attr-defined]
        except Exception as exc:
            observer.on_error(exc)
            return NO_DISPOSAL
    sink: _Sink[T] = observer
    ended_before = sink.stopped
    try:
        if kind is _Emit:  # what its subscribe function does, in place
            sink.on_next(source.value)  # type: ignore[attr-defined]
            sink.on_completed()
            return NO_DISPOSAL
        if source is _NOTHING:
            sink.on_completed()
            return NO_DISPOSAL
        inner = source._fn(sink, scheduler)  # type: ignore[attr-defined]
    except Exception as exc:
        if ended_before:
            return NO_DISPOSAL
        if sink.stopped:
            raise
        sink.on_error(exc)
        return NO_DISPOSAL
    if inner is not NO_DISPOSAL and sink.stopped:  # ended during subscribe: release it now
        inner.dispose()
        return NO_DISPOSAL
    return inner  # type: ignore[no-any-return]


class _Emit(Direct[T]):
    """``emit_now(value)``: its value is readable, so :func:`concat_map_now` can pass it on without subscribing."""

    __slots__ = ("value",)  # (instances still have Observable's __dict__: a lock made on first use)

    def __init__(self, value: T) -> None:  # no Direct.__init__: its subscribe function is the method below
        self.value = value

    def _fn(self, observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        observer.on_next(self.value)
        observer.on_completed()
        return NO_DISPOSAL

    _subscribe = _fn


def emit_now(value: T) -> reactivex.Observable[T]:
    """One item, then completion, both delivered during ``subscribe``."""
    return _Emit(value)


def emitted(source: reactivex.Observable[T]) -> tuple[T] | None:
    """``(value,)`` when ``source`` is ``emit_now(value)`` (what subscribing it delivers is known), else None."""
    return (source.value,) if type(source) is _Emit else None


def _complete(observer: rx_abc.ObserverBase[Any], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
    observer.on_completed()
    return NO_DISPOSAL


_NOTHING: Direct[Any] = Direct(_complete)


def nothing_now() -> reactivex.Observable[T]:
    """Completion without items, delivered during ``subscribe``."""
    return _NOTHING


def fail_now(error: Exception) -> reactivex.Observable[T]:
    """``on_error(error)``, delivered during ``subscribe``."""

    def subscribe(observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        observer.on_error(error)
        return NO_DISPOSAL

    return Direct(subscribe)


def call_now(supplier: Callable[[], T]) -> reactivex.Observable[T]:
    """Call ``supplier`` during ``subscribe`` (once per subscription); emit its value or its exception."""

    def subscribe(observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        try:
            value = supplier()
        except Exception as exc:
            observer.on_error(exc)
        else:
            observer.on_next(value)
            observer.on_completed()
        return NO_DISPOSAL

    return Direct(subscribe)


class _Defer(Direct[T]):
    """``factory()``'s Observable, made and subscribed during ``subscribe`` (``reactivex.defer``, nothing scheduled).

    An exception raised by ``factory`` is delivered as ``on_error``. (Made by calling
    :data:`defer_now`, this class: no closure and no ``Direct.__init__`` per Observable.)
    """

    __slots__ = ("_factory",)  # (instances still have Observable's __dict__: a lock made on first use)

    def __init__(self, factory: Callable[[], reactivex.Observable[T]]) -> None:
        self._factory = factory

    def _fn(self, observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        try:
            source = self._factory()
        except Exception as exc:
            observer.on_error(exc)
            return NO_DISPOSAL
        return _forward(source, observer, scheduler)

    _subscribe = _fn


defer_now = _Defer
"""``defer_now(factory)``: see :class:`_Defer`."""


class TwoStages(rx_abc.DisposableBase):
    """The subscription of a first stage and of the Observable it leads to, forwarded to ``observer``:
    disposing disposes whichever is active. A subclass subscribes its first stage and hands what
    :meth:`hold_first` gets; when that stage ends it calls :meth:`follow` with the second."""

    __slots__ = ("_disposed", "_first", "_observer", "_scheduler", "_second")

    def __init__(self, observer: rx_abc.ObserverBase[Any], scheduler: rx_abc.SchedulerBase | None) -> None:
        self._observer = observer
        self._scheduler = scheduler
        self._first: rx_abc.DisposableBase | None = None
        self._second: rx_abc.DisposableBase | None = None
        self._disposed = False

    def hold_first(self, subscription: rx_abc.DisposableBase) -> None:
        """Hold the first stage's subscription (the stage may have ended, and :meth:`follow` run, already)."""
        if self._disposed:
            subscription.dispose()
        else:
            self._first = subscription
            if self._disposed:  # disposed on another thread meanwhile
                subscription.dispose()

    def follow(self, source: reactivex.Observable[Any]) -> None:
        """Subscribe the second stage, ``source``, forwarded to the observer."""
        subscription = _forward(source, self._observer, self._scheduler)
        if self._disposed:
            subscription.dispose()
        else:
            self._second = subscription
            if self._disposed:
                subscription.dispose()

    def dispose(self) -> None:
        self._disposed = True
        first, self._first = self._first, None
        second, self._second = self._second, None
        if first is not None:
            first.dispose()
        if second is not None:
            second.dispose()


class _FirstThen(TwoStages):
    """Subscribes ``first`` (its items to ``on_item``, its error to ``observer``) and, the moment it
    completes, the Observable ``follow(*args)`` returns (to ``observer``; an exception ``follow``
    raises is delivered as ``on_error``). Disposing disposes whichever is active and prevents ``follow``.

    One object is the completion callback and the subscription (two closures, two slots and a
    dict before): this runs for every step, store and tool call of a run.

    With ``_outer_then`` set (:class:`_CollectThen` of a ``collect_then``: ``collect_then(collect_then(
    first, follow), outer_then)``, a flow's tool call) it is both collections in one subscription:
    what ``follow`` returns is collected in turn and handed to ``outer_then``, whose Observable is
    forwarded; a known item (``emit_now``) or ``nothing_now()`` is collected without a subscription.
    """

    __slots__ = ("_args", "_follow", "_outer_then")

    def __init__(
        self,
        follow: Callable[..., reactivex.Observable[Any]],
        args: tuple[Any, ...],
        observer: rx_abc.ObserverBase[Any],
        scheduler: rx_abc.SchedulerBase | None,
    ) -> None:
        super().__init__(observer, scheduler)
        self._follow = follow
        self._args = args
        self._outer_then: Callable[[list[Any]], reactivex.Observable[Any]] | None = None

    def start(self, first: reactivex.Observable[Any], on_item: Callable[[Any], None]) -> _FirstThen:
        # ``first`` may complete (and ``follow`` start) before this assignment: separate slots
        if type(first) in _WRAPPERS:
            first = _inner(first, self._scheduler)
        self.hold_first(first.subscribe(on_item, self._observer.on_error, self.on_completed, scheduler=self._scheduler))
        return self

    def on_completed(self) -> None:
        if self._disposed:
            return
        try:
            source = self._follow(*self._args)
            outer_then = self._outer_then
            if outer_then is not None:  # what follow returned, collected for outer_then (class docstring)
                if type(source) is _Emit:
                    if self._disposed:  # (what the outer collection's completion checks)
                        return
                    source = outer_then([source.value])
                elif source is _NOTHING:
                    if self._disposed:
                        return
                    source = outer_then([])
                else:
                    source = _CollectThen(source, outer_then)
        except Exception as exc:
            self._observer.on_error(exc)
            return
        self.follow(source)


def then_now(first: reactivex.Observable[T], second: Callable[[], reactivex.Observable[T]]) -> reactivex.Observable[T]:
    """``first``, then the Observable ``second()`` returns, subscribed the moment ``first`` completes.

    Unlike ``reactivex.concat`` nothing is scheduled on the trampoline, so when ``first`` completes
    synchronously (an in-memory store) ``second`` runs before the caller's ``on_next`` returns: a
    later ``on_error`` of the source cannot overtake it. Disposing disposes whichever is active
    and prevents ``second`` from being created.
    """

    def subscribe(
        observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None
    ) -> rx_abc.DisposableBase:
        return _FirstThen(second, (), observer, scheduler).start(first, observer.on_next)

    return Direct(subscribe)


class _CallThen(Direct[T]):
    """``then_now(call_now(call), follow)`` in one subscription (``then_now(ignore_items(call_now(call)),
    follow)`` with ``emit=False``): ``call()`` during subscribe, its value passed on, then the
    Observable ``follow()`` returns subscribed at once and forwarded.

    An exception ``call`` or ``follow`` raises is delivered as ``on_error``. ``follow`` is not
    called once the subscription ended or was disposed (a dispose from within ``on_next``).

    (Made by calling :data:`call_then`, this class: its subscribe function is the method below, no
    closure and no ``Direct.__init__`` per Observable; the runtimes make one for every store.)
    """

    __slots__ = ("_call", "_emit", "_follow")  # (instances still have Observable's __dict__: a lock made on first use)

    def __init__(
        self, call: Callable[[], T], follow: Callable[[], reactivex.Observable[T]], *, emit: bool = True
    ) -> None:
        self._call = call
        self._follow = follow
        self._emit = emit

    def _fn(self, observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        try:
            value = self._call()
        except Exception as exc:
            observer.on_error(exc)
            return NO_DISPOSAL
        if self._emit:
            observer.on_next(value)
            if getattr(observer, "stopped", False):  # disposed from within on_next
                return NO_DISPOSAL
        try:
            source = self._follow()
        except Exception as exc:
            observer.on_error(exc)
            return NO_DISPOSAL
        return _forward(source, observer, scheduler)

    _subscribe = _fn


call_then = _CallThen
"""``call_then(call, follow, *, emit=True)``: see :class:`_CallThen`."""


class _CollectThen(Direct[U]):
    """``source.pipe(ops.to_list(), ops.flat_map(then))``: ``source``'s items as a list, handed to ``then``
    when it completes; the Observable ``then`` returns is subscribed at once and forwarded.

    An exception raised by ``then`` is delivered as ``on_error``. Disposing disposes whichever is
    active. (Made by calling :data:`collect_then`, this class: no closure, no ``Direct.__init__``.)
    """

    __slots__ = ("_source", "_then")  # (instances still have Observable's __dict__: a lock made on first use)

    def __init__(self, source: reactivex.Observable[T], then: Callable[[list[T]], reactivex.Observable[U]]) -> None:
        self._source = source
        self._then = then

    def _fn(self, observer: rx_abc.ObserverBase[U], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        source = self._source
        kind = type(source)
        if kind is _Defer:  # what its subscription would do first, in place: its Observable made now
            try:
                source = source._factory()  # type: ignore[attr-defined]
            except Exception as exc:
                observer.on_error(exc)
                return NO_DISPOSAL
            kind = type(source)
        if kind is _Emit:  # its item is known: no subscription to collect it
            try:
                follow = self._then([source.value])  # type: ignore[attr-defined]
            except Exception as exc:
                observer.on_error(exc)
                return NO_DISPOSAL
            return _forward(follow, observer, scheduler)
        items: list[Any] = []
        if kind is _CollectThen:  # a collection of a collection: one subscription (_FirstThen's docstring)
            first = _FirstThen(source._then, (items,), observer, scheduler)  # type: ignore[attr-defined]
            first._outer_then = self._then
            return first.start(source._source, items.append)  # type: ignore[attr-defined]
        return _FirstThen(self._then, (items,), observer, scheduler).start(source, items.append)

    _subscribe = _fn


collect_then = _CollectThen
"""``collect_then(source, then)``: see :class:`_CollectThen`."""


def tap_next(source: reactivex.Observable[T], action: Callable[[T], None]) -> reactivex.Observable[T]:
    """``source.pipe(ops.do_action(on_next=action))``: ``action(item)`` before each item is passed on
    (an exception it raises is delivered as ``on_error``)."""

    def subscribe(
        observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None
    ) -> rx_abc.DisposableBase:
        failed = [False]

        def on_next(value: T) -> None:
            if failed[0]:
                return
            try:
                action(value)
            except Exception as exc:
                failed[0] = True
                observer.on_error(exc)
                return
            observer.on_next(value)

        inner = _inner(source, scheduler)
        return inner.subscribe(on_next, observer.on_error, observer.on_completed, scheduler=scheduler)

    return Direct(subscribe)


def ignore_items(source: reactivex.Observable[Any]) -> reactivex.Observable[T]:
    """``source.pipe(ops.ignore_elements())``: only its completion or error."""

    def subscribe(
        observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None
    ) -> rx_abc.DisposableBase:
        inner = _inner(source, scheduler)
        return inner.subscribe(_ignore, observer.on_error, observer.on_completed, scheduler=scheduler)

    return Direct(subscribe)


class _Serial(rx_abc.DisposableBase):
    """Subscribes Observables one at a time, each when the one before it completed, on the thread it
    completed on; a trampoline (sources that complete during ``subscribe`` do not grow the stack).

    The sources are :meth:`push`-ed (:class:`_ConcatMap`; :meth:`end` says no more will come) or
    pulled from an iterator when the previous one completed (:func:`concat_now`). Completes the
    observer when the sources ran out and the last one completed; a source's error is passed on.

    Where the signals go is held as four callables: ``_on_item`` (what the serial emits itself: an
    ``emit_now`` source's item, a ``call_then`` source's value), ``_on_inner`` (what a subscribed
    source's items go to), ``_on_error`` and ``_on_completed``. A source that is itself a
    :func:`concat_map_items` (a flow's step) is not subscribed: its :class:`_ConcatMap` is made here
    with this serial as its ``parent``, the sink its subscription would have had taken over by the
    ``_ConcatMap`` itself (one subscriber between the step's items and the serial's observer instead
    of two).

    Held in place (one source is active at a time): its subscription (``_current``: setting the
    next one disposes the one before, as a ``SerialDisposable`` does) and whether it returned from
    and completed during ``subscribe`` (``_returned``, ``_done``; a closure and a list per source
    before).
    """

    __slots__ = (
        "_active",
        "_completed",
        "_current",
        "_disposed",
        "_done",
        "_ended",
        "_lock",
        "_observer",
        "_on_completed",
        "_on_error",
        "_on_inner",
        "_on_item",
        "_pull",
        "_queue",
        "_returned",
        "_scheduler",
    )

    def __init__(
        self,
        observer: rx_abc.ObserverBase[Any],
        scheduler: rx_abc.SchedulerBase | None,
        pull: Iterator[reactivex.Observable[Any]] | None = None,
    ) -> None:
        self._observer: rx_abc.ObserverBase[Any] | None = observer
        self._scheduler = scheduler
        self._pull = pull
        self._lock = threading.Lock()
        self._queue: deque[reactivex.Observable[Any]] = deque()
        self._active = False  # the drain loop runs, or a source is subscribed and has not completed
        self._ended = False
        self._completed = False
        self._disposed = False
        self._returned = False  # the active source's subscribe returned
        self._done = False  # the active source completed
        self._current: rx_abc.DisposableBase | None = None  # the active source's subscription
        self._on_item: Callable[[Any], None] = observer.on_next
        # What a source's items go to. Pulling (concat_now), the observer's own on_next past its
        # check when it is a _Sink: nothing but the active source signals the observer (its error
        # and completion come from here, between sources), and whatever disposes the observer
        # disposes the source's sink, which then delivers nothing; an item racing that dispose
        # from another thread meets the check of the sink above (the subscriber's own is never
        # skipped: a sink skipped here is the inner sink of some subscription). A plain source's
        # items pass ``_plain_next`` first: what it emits while subscribing, after a dispose that
        # landed meanwhile, is dropped there (its subscription is not held yet, so no dispose
        # reached its sink). Pushed sources (concat_map_now) keep the check: the outer source's
        # error may end the observer while a projected source is still active.
        self._on_inner: Callable[[Any], None] = (
            observer._on_next if pull is not None and type(observer) is _Sink else observer.on_next
        )
        self._on_error: Callable[[Exception], None] = observer.on_error
        self._on_completed: Callable[[], None] = observer.on_completed

    def push(self, source: reactivex.Observable[Any]) -> None:
        if type(source) is _Emit:
            self.push_item(source.value)
            return
        with self._lock:
            if self._active:
                self._queue.append(source)
                return
            self._active = True
        self._drain(source)

    def push_item(self, value: Any) -> None:
        """``push(emit_now(value))``, without making the Observable unless it must wait in the queue."""
        lock = self._lock
        with lock:
            if self._active:
                self._queue.append(_Emit(value))
                return
            self._active = True
        # the usual item (a partial event): what _drain and _next do for it, without their calls
        if self._disposed:
            return
        self._on_item(value)
        if self._disposed:
            return
        with lock:
            if self._queue:  # pushed meanwhile (from within on_next): drained in order
                following = self._queue.popleft()
            else:
                self._active = False
                if not self._ended or self._completed:
                    return
                self._completed = True
                following = None
        if following is None:
            self._on_completed()
            return
        self._drain(following)

    def pull_first(self) -> None:
        """Pull the first source (``pull`` mode)."""
        self._active = True
        self._drain(self._next())

    def end(self) -> None:
        """No more sources will be pushed: complete once the queue is done."""
        with self._lock:
            self._ended = True
            if self._active or self._queue or self._completed:
                return
            self._completed = True
        self._on_completed()

    def _next(self) -> reactivex.Observable[Any] | None:
        if self._disposed:
            return None
        pull = self._pull
        if pull is None:
            with self._lock:
                if self._queue:
                    return self._queue.popleft()
                self._active = False
                if not self._ended or self._completed:
                    return None
                self._completed = True
            self._on_completed()
            return None
        try:
            return next(pull)
        except StopIteration:
            self._on_completed()
        except Exception as exc:
            self._on_error(exc)
        return None

    def _plain_next(self, value: Any) -> None:
        """A subscribed source's item: passed on unless this serial was disposed. (Its subscription
        is held only once ``subscribe`` returns: what a source emits while subscribing, after a
        dispose that landed meanwhile, reaches no sink that was told.)"""
        if not self._disposed:
            self._on_inner(value)

    def _source_completed(self) -> None:
        """The active source's completion."""
        with self._lock:
            self._done = True
            if not self._returned:
                return  # completed during subscribe: the loop in _drain takes the next one
        self._drain(self._next())  # completed later, on this thread

    def _drain(self, source: reactivex.Observable[Any] | None) -> None:
        on_item = self._on_item
        while source is not None and not self._disposed:
            kind = type(source)
            if kind is _Emit:
                on_item(source.value)  # type: ignore[attr-defined]
                source = self._next()
                continue
            if kind is _CallThen:  # (a store, then what follows it) what its subscription does, in place
                try:
                    value = source._call()  # type: ignore[attr-defined]
                except Exception as exc:
                    self._on_error(exc)
                    return
                if source._emit:  # type: ignore[attr-defined]
                    if self._disposed:  # (disposed meanwhile: its subscription's sink would deliver nothing)
                        return
                    try:
                        on_item(value)
                    except Exception as exc:  # what its subscription's sink made of it: its error
                        self._on_error(exc)
                        return
                    observer = self._observer  # (None for a fused step: its _disposed says it all)
                    if self._disposed or (observer is not None and getattr(observer, "stopped", False)):
                        return  # disposed from within on_next
                try:
                    source = source._follow()  # type: ignore[attr-defined]
                except Exception as exc:
                    self._on_error(exc)
                    return
                if source is _NOTHING:  # nothing follows: it completed
                    source = self._next()
                continue
            if kind in _WRAPPERS:
                source = _inner(source, self._scheduler)
                kind = type(source)
            self._returned = self._done = False
            if kind is _ConcatMapItems:  # a step: its _ConcatMap is its own subscriber (see the class docstring)
                step = _ConcatMap(None, self._scheduler, source._project, source._item_type, self)  # type: ignore[attr-defined]
                previous, self._current = self._current, step  # (held before it starts: a dispose meanwhile reaches it)
                if previous is not None:
                    previous.dispose()
                try:
                    step.start(source._source, self._scheduler)  # type: ignore[attr-defined]
                except Exception as exc:  # what Direct.subscribe does with it: raised again once the step ended,
                    if step._completed:  # (its own terminal signal)
                        raise
                    step._fail(exc)  # (dropped when disposed meanwhile: its subscriber is gone)
            else:
                subscription = source.subscribe(
                    self._plain_next, self._on_error, self._source_completed, scheduler=self._scheduler
                )
                if self._disposed:
                    subscription.dispose()
                else:
                    previous, self._current = self._current, subscription
                    if previous is not None:
                        previous.dispose()
                    if self._disposed:  # disposed on another thread meanwhile
                        subscription.dispose()
            if not self._done:  # (done: it completed during subscribe, or on another thread that saw it not return)
                with self._lock:
                    self._returned = True
                    if not self._done:
                        return  # _source_completed drains on, on whichever thread it comes
            source = self._next()

    def dispose(self) -> None:
        self._disposed = True
        self._let_go()
        if self._queue:
            with self._lock:
                self._queue.clear()
        current, self._current = self._current, None
        if current is not None:
            current.dispose()

    def _let_go(self) -> None:
        """Drop what signals went to, once disposed (nothing is delivered any more): they are bound
        methods of this serial or of its observer, which holds this serial, so keeping them would
        leave a reference cycle for the collector instead of memory freed at once."""
        self._observer = None
        self._on_item = self._on_inner = self._on_error = _ignore
        self._on_completed = _ignore


class _ConcatNow(Direct[T]):
    """``reactivex.concat_with_iterable(sources)`` without scheduling: each source is taken from the
    iterable (lazily) and subscribed the moment the one before it completed, on the thread it
    completed on. Disposing disposes the active source and takes nothing more. (Made by calling
    :data:`concat_now`, this class: no closure, no ``Direct.__init__``.)"""

    __slots__ = ("_sources",)  # (instances still have Observable's __dict__: a lock made on first use)

    def __init__(self, sources: Iterable[reactivex.Observable[T]]) -> None:
        self._sources = sources

    def _fn(self, observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        serial = _Serial(observer, scheduler, iter(self._sources))
        serial.pull_first()
        return serial

    _subscribe = _fn


concat_now = _ConcatNow
"""``concat_now(sources)``: see :class:`_ConcatNow`."""


class _ConcatMap(_Serial):
    """One subscription of :func:`concat_map_now` / :func:`concat_map_items`: a pushing :class:`_Serial`
    that is the source's observer (:meth:`on_next`) and what disposing the subscription disposes.

    Made with a ``parent`` (a step pulled by a serial: :meth:`_Serial._drain`), it is also the sink
    its subscription would have had: it delivers to its parent's ``_on_inner`` / ``_on_error`` /
    ``_source_completed`` what that sink would have passed on, and nothing after its terminal signal
    or its dispose (``_disposed``, which its terminal signal sets, then disposing it as a sink's does).
    """

    __slots__ = ("_item_type", "_outer", "_parent", "_project")

    def __init__(
        self,
        observer: rx_abc.ObserverBase[Any] | None,
        scheduler: rx_abc.SchedulerBase | None,
        project: Callable[[Any], Any],
        item_type: type[Any] | None,
        parent: _Serial | None = None,
    ) -> None:
        # (_Serial.__init__'s fields, set here: one call less per subscription)
        self._observer = observer
        self._scheduler = scheduler
        self._pull = None
        self._lock = threading.Lock()
        self._queue = deque()
        self._active = False
        self._ended = False
        self._completed = False
        self._disposed = False
        self._returned = False
        self._done = False
        self._current = None
        self._parent = parent
        if parent is not None:  # fused (class docstring): the sink its subscription would have had, itself
            self._on_item = parent._on_inner  # what that sink passed its items on to, past its check: ours
            self._on_inner = self._checked_next  # (the items of its projected sources pass our check)
            self._on_error = self._fail
            self._on_completed = self._finish
        else:
            self._on_item = self._on_inner = observer.on_next  # type: ignore[union-attr]
            self._on_error = observer.on_error  # type: ignore[union-attr]
            self._on_completed = observer.on_completed  # type: ignore[union-attr]
        self._item_type = item_type  # what project returns as an item (None: Observables only)
        self._project = project
        self._outer: rx_abc.DisposableBase | None = None  # the source's subscription (a Slot, in place)

    def start(self, source: reactivex.Observable[Any], scheduler: rx_abc.SchedulerBase | None) -> _ConcatMap:
        while type(source) in _WRAPPERS and not isinstance(scheduler, AsyncIOScheduler):  # (_inner's, in place)
            source = source._source  # type: ignore[attr-defined]
        subscription = source.subscribe(self.on_next, self._on_error, self.end, scheduler=scheduler)
        if self._disposed:
            subscription.dispose()
        else:
            self._outer = subscription
            if self._disposed:  # disposed on another thread meanwhile
                subscription.dispose()
        return self

    def on_next(self, item: Any) -> None:
        observer = self._observer  # (None for a fused one: no getattr that fails for every item)
        if self._disposed or (observer is not None and getattr(observer, "stopped", False)):
            return  # failed or disposed: project nothing more
        try:
            projected = self._project(item)
        except Exception as exc:
            self._on_error(exc)
            return
        if type(projected) is self._item_type:  # (push_item's, without its call: the usual partial event)
            # Inactive, nothing but this (the source's own serialized on_next, or end) makes it active:
            # no lock to take it, none to leave it when nothing was pushed meanwhile (only from within
            # on_item, on this thread, while it is active). Active, another thread's completion of the
            # projected source may end that: the lock, as push_item takes it.
            if self._active:
                self.push_item(projected)
                return
            self._active = True
            if self._disposed:
                return
            self._on_item(projected)
            if self._disposed:
                return
            if not self._queue and not self._ended:  # (the usual: nothing pushed meanwhile, the source goes on)
                self._active = False
                return
            with self._lock:  # what push_item does next
                if self._queue:  # pushed meanwhile (from within on_next): drained in order
                    following = self._queue.popleft()
                else:
                    self._active = False
                    if not self._ended or self._completed:
                        return
                    self._completed = True
                    following = None
            if following is None:
                self._on_completed()
                return
            self._drain(following)
        elif type(projected) is _Emit:
            self.push_item(projected.value)
        else:  # (push's, without its call: a step's store, then its tools)
            with self._lock:
                if self._active:
                    self._queue.append(projected)
                    return
                self._active = True
            self._drain(projected)

    def _checked_next(self, value: Any) -> None:
        """A projected source's item (a fused one's): passed on unless this subscription ended."""
        if not self._disposed:
            self._on_item(value)

    def _fail(self, error: Exception) -> None:
        """A fused one's error: its parent's, once; then disposed (as a sink's terminal signal does)."""
        if self._disposed:
            return
        self._disposed = True
        self._completed = True  # (ended by its own terminal signal: set before _finish is called too)
        try:
            self._parent._on_error(error)  # type: ignore[union-attr]
        finally:
            self.dispose()

    def _finish(self) -> None:
        """A fused one's completion: its parent takes its next source; then disposed."""
        if self._disposed:
            return
        self._disposed = True
        try:
            self._parent._source_completed()  # type: ignore[union-attr]
        finally:
            self.dispose()

    def dispose(self) -> None:
        self._disposed = True
        self._let_go()
        outer, self._outer = self._outer, None
        if outer is not None:
            outer.dispose()
        if self._queue:
            with self._lock:
                self._queue.clear()
        current, self._current = self._current, None
        if current is not None:
            current.dispose()


class _ConcatMapItems(Direct[U]):
    """:func:`concat_map_now` whose ``project`` may also return an item, an instance of exactly
    ``item_type`` (anything else it returns is an Observable): passed on as ``emit_now(item)``
    would be, in order, without making that Observable. (Made by calling :data:`concat_map_items`,
    this class: no closure, no ``Direct.__init__``.)"""

    __slots__ = ("_item_type", "_project", "_source")  # (instances still have Observable's __dict__)

    def __init__(
        self,
        source: reactivex.Observable[T],
        project: Callable[[T], reactivex.Observable[U] | U],
        item_type: type[U] | None,
    ) -> None:
        self._source = source
        self._project = project
        self._item_type = item_type

    def _fn(self, observer: rx_abc.ObserverBase[U], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        return _ConcatMap(observer, scheduler, self._project, self._item_type).start(self._source, scheduler)

    _subscribe = _fn


concat_map_items = _ConcatMapItems
"""``concat_map_items(source, project, item_type)``: see :class:`_ConcatMapItems`."""


def concat_map_now(
    source: reactivex.Observable[T], project: Callable[[T], reactivex.Observable[U]]
) -> reactivex.Observable[U]:
    """``source.pipe(ops.concat_map(project))`` without scheduling: each item's Observable is subscribed
    when the ones before it completed; an ``emit_now`` item is passed on without a subscription.

    Completes when ``source`` and every projected Observable completed; the first error (of the
    source, of a projected Observable, or raised by ``project``) is delivered at once. Disposing
    disposes the source and the active projected Observable.
    """
    return _ConcatMapItems(source, project, None)


def on_dispose(source: reactivex.Observable[T], action: Callable[[], None]) -> reactivex.Observable[T]:
    """``source``, calling ``action`` when the subscriber disposes (before disposing ``source``).

    Not called on completion or error: only for an early dispose.
    """

    def subscribe(
        observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None
    ) -> rx_abc.DisposableBase:
        subscription = Slot()

        def dispose() -> None:
            try:
                action()
            finally:
                subscription.dispose()

        subscription.set(_forward(source, observer, scheduler))
        return DisposeAction(dispose)

    return Direct(subscribe)
