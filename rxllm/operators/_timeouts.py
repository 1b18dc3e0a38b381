"""``first_item_timeout`` and ``idle_timeout``: typed, retry-aware deadlines that close the connection.

reactivex's ``ops.timeout`` fails with a bare ``Exception("Timeout")`` (not an
:class:`~rxllm.RxLlmError`), and its ``other=`` splices a second stream after a partial, which
breaks the contract. These fail with :class:`~rxllm.StreamTimeoutError` and dispose the source
first, so the connection is closed by the time the error reaches the subscriber.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable, SerialDisposable, SingleAssignmentDisposable
from reactivex.scheduler import TimeoutScheduler

from .._core.errors import ConfigurationError, StreamTimeoutError

__all__ = ["first_item_timeout", "idle_timeout"]

_T = TypeVar("_T")


def first_item_timeout(
    seconds: float, scheduler: rx_abc.SchedulerBase | None = None
) -> Callable[[reactivex.Observable[_T]], reactivex.Observable[_T]]:
    """Fail if the source emits no item within ``seconds`` of subscribing; after it, no deadline.

    The time a provider takes to start answering (connect, queue, prompt processing) is the
    part worth bounding separately: once tokens flow, :func:`idle_timeout` guards the gaps.

    Marble (``X`` = :class:`~rxllm.StreamTimeoutError` with ``limit="first_item"``; the source is
    disposed first, so its connection is closed)::

        source:                  ---a---b---------c--|
        first_item_timeout(5):   ---a---b---------c--|

        source:                  ----------------a---
        first_item_timeout(5):   -----X

    Args:
        seconds: the deadline, finite and ``> 0``.
        scheduler: runs the timer (a ``TestScheduler`` for virtual time; default reactivex's
            ``TimeoutScheduler``). Items are never moved onto it.

    Returns:
        An operator for ``.pipe``: subscribing subscribes the source and starts the timer;
        disposing disposes both. The error is retryable (``retryable=True``): nothing was emitted.

    >>> from reactivex.testing import TestScheduler
    >>> from rxllm import LlmRequest
    >>> from rxllm.testing import ScriptedLlm, at_times, record_in_virtual_time, scripted_turn
    >>> clock = TestScheduler()
    >>> slow = ScriptedLlm([at_times(scripted_turn(), [9.0])], scheduler=clock)
    >>> [(t, n.kind, type(n.exception).__name__) for t, n in record_in_virtual_time(
    ...     lambda: slow.generate_content(LlmRequest()).pipe(first_item_timeout(5.0, clock)), clock)]
    [(5.0, 'E', 'StreamTimeoutError')]
    >>> slow.calls[0].disposed_at
    5.0
    """
    return _deadline(seconds, scheduler, limit="first_item", every_item=False)


def idle_timeout(
    seconds: float, scheduler: rx_abc.SchedulerBase | None = None
) -> Callable[[reactivex.Observable[_T]], reactivex.Observable[_T]]:
    """Fail if the source is silent for ``seconds``: before its first item or between two items.

    The clock restarts after each item has been handed to the subscriber (a slow synchronous
    subscriber holds the reader back, so its time is not the source's silence).

    Marble (``X`` = :class:`~rxllm.StreamTimeoutError` with ``limit="idle"``; the source is
    disposed first, so its connection is closed)::

        source:             --a--b--c--|
        idle_timeout(3):    --a--b--c--|

        source:             --a--b----------c--
        idle_timeout(3):    --a--b---X

    Args:
        seconds: the longest silence, finite and ``> 0``.
        scheduler: runs the timer (a ``TestScheduler`` for virtual time; default reactivex's
            ``TimeoutScheduler``). Items are never moved onto it.

    Returns:
        An operator for ``.pipe``: subscribing subscribes the source and starts the timer;
        disposing disposes both. The error has ``retryable=True`` as any transport timeout
        (:func:`~rxllm.retry_before_first_item` still never retries after the first item).

    >>> from reactivex.testing import TestScheduler
    >>> from rxllm import Chunk, LlmRequest
    >>> from rxllm.testing import ScriptedLlm, at_times, record_in_virtual_time, scripted_turn
    >>> clock = TestScheduler()
    >>> turn = at_times(scripted_turn(Chunk(text_delta="a"), Chunk(text_delta="b")), [1.0, 2.0, 9.0])
    >>> llm = ScriptedLlm([turn], scheduler=clock)
    >>> [(t, n.kind) for t, n in record_in_virtual_time(
    ...     lambda: llm.generate_content(LlmRequest(), stream=True).pipe(idle_timeout(3.0, clock)), clock)]
    [(1.0, 'N'), (2.0, 'N'), (5.0, 'E')]
    """
    return _deadline(seconds, scheduler, limit="idle", every_item=True)


def _deadline(
    seconds: float, scheduler: rx_abc.SchedulerBase | None, *, limit: str, every_item: bool
) -> Callable[[reactivex.Observable[_T]], reactivex.Observable[_T]]:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds <= 0:
        raise ConfigurationError(f"the {limit} timeout must be a finite number of seconds > 0, got {seconds!r}")

    def operator(source: reactivex.Observable[_T]) -> reactivex.Observable[_T]:
        def subscribe(
            observer: rx_abc.ObserverBase[_T], subscribe_scheduler: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            timers = scheduler or TimeoutScheduler.singleton()
            upstream = SingleAssignmentDisposable()
            timer = SerialDisposable()
            # Reentrant: a subscriber may dispose from inside on_next. Notifications are sent
            # under it, so a timer firing on its thread never overlaps an item in flight.
            lock = threading.RLock()
            state = {"generation": 0, "items": 0, "done": False, "disposed": False}

            def arm() -> None:
                state["generation"] += 1
                generation = state["generation"]

                def fire(_: rx_abc.SchedulerBase, __: Any = None) -> None:
                    with lock:
                        if state["done"] or state["generation"] != generation:
                            return
                        state["done"] = True
                        items = state["items"]
                    upstream.dispose()  # on the timer's thread: the connection closes now
                    if limit == "first_item":
                        message = f"no item within {seconds:g} s of subscribing (first_item_timeout)"
                    else:
                        message = f"no item for {seconds:g} s after {items} item(s) (idle_timeout)"
                    with lock:
                        if not state["disposed"]:
                            observer.on_error(StreamTimeoutError(message, limit=limit, retryable=True))

                timer.disposable = timers.schedule_relative(seconds, fire)

            def on_next(value: _T) -> None:
                with lock:
                    if state["done"]:
                        return
                    state["items"] += 1
                    state["generation"] += 1  # a timer already running cannot fire now
                    timer.disposable = Disposable()
                    observer.on_next(value)
                    if every_item and not state["done"]:
                        arm()

            def on_error(error: Exception) -> None:
                with lock:
                    if state["done"]:
                        return
                    state["done"] = True
                    timer.dispose()
                    observer.on_error(error)

            def on_completed() -> None:
                with lock:
                    if state["done"]:
                        return
                    state["done"] = True
                    timer.dispose()
                    observer.on_completed()

            def dispose() -> None:  # no lock: a subscriber blocked in on_next must not delay the close
                state["disposed"] = state["done"] = True
                timer.dispose()
                upstream.dispose()

            with lock:
                arm()
            upstream.disposable = source.subscribe(on_next, on_error, on_completed, scheduler=subscribe_scheduler)
            return Disposable(dispose)

        return reactivex.create(subscribe)

    return operator
