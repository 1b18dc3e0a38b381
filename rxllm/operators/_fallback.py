"""``fallback``: another call, but only while nothing has been emitted."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable, SerialDisposable, SingleAssignmentDisposable

__all__ = ["fallback"]

_T = TypeVar("_T")


def fallback(
    other_observable_factory: Callable[[], reactivex.Observable[_T]],
    *,
    when: Callable[[Exception], bool] | None = None,
) -> Callable[[reactivex.Observable[_T]], reactivex.Observable[_T]]:
    """Switch to another call if the source fails **before its first item**; after it, errors pass.

    A failure after the first partial cannot be patched with another model's answer without
    breaking the contract (the partials' text must concatenate to the final's), so it reaches the
    subscriber as it is. ``ops.catch`` would switch at any point.

    Marble (``#`` = an error; ``f()`` = the fallback's stream, subscribed when the source fails)::

        source:                  ----#
        f():                         --x--y--|
        fallback(f):             ------x--y--|

        source:                  --a--#
        fallback(f):             --a--#            (f is never called)

    Args:
        other_observable_factory: makes the fallback call (e.g.
            ``lambda: backup.generate_content(request, stream=True)``); called at most once per
            subscription, only when it is needed.
        when: which errors to fall back on (default: every error); others pass through.

    Returns:
        An operator for ``.pipe``: subscribing subscribes the source; disposing disposes the
        call in flight (the source's, or the fallback's once switched), closing its connection.
        If the factory raises, that error is emitted.

    >>> from reactivex.testing import TestScheduler
    >>> from rxllm import Chunk, HttpStatusError, LlmRequest
    >>> from rxllm.testing import ScriptedLlm, record_in_virtual_time, scripted_turn
    >>> clock = TestScheduler()
    >>> primary = ScriptedLlm([[HttpStatusError(503)]], scheduler=clock)
    >>> backup = ScriptedLlm([scripted_turn(Chunk(text_delta="from backup"))], scheduler=clock)
    >>> ask = lambda: primary.generate_content(LlmRequest()).pipe(
    ...     fallback(lambda: backup.generate_content(LlmRequest())))
    >>> [n.value.text() for _, n in record_in_virtual_time(ask, clock) if n.kind == "N"]
    ['from backup']
    """

    def operator(source: reactivex.Observable[_T]) -> reactivex.Observable[_T]:
        def subscribe(
            observer: rx_abc.ObserverBase[_T], scheduler: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            current = SerialDisposable()
            lock = threading.Lock()
            state = {"emitted": False, "switched": False, "disposed": False}

            def on_next(value: _T) -> None:
                state["emitted"] = True
                observer.on_next(value)

            def on_error(error: Exception) -> None:
                with lock:
                    switch = not (state["emitted"] or state["switched"] or state["disposed"])
                    switch = switch and (when is None or when(error))
                    state["switched"] = state["switched"] or switch
                if not switch:
                    observer.on_error(error)
                    return
                try:
                    other = other_observable_factory()
                except Exception as exc:  # the factory's own failure is the stream's
                    observer.on_error(exc)
                    return
                slot = SingleAssignmentDisposable()
                current.disposable = slot
                slot.disposable = other.subscribe(observer.on_next, observer.on_error, observer.on_completed,
                                                  scheduler=scheduler)

            def dispose() -> None:
                with lock:
                    state["disposed"] = True
                current.dispose()

            first = SingleAssignmentDisposable()
            current.disposable = first
            first.disposable = source.subscribe(on_next, on_error, observer.on_completed, scheduler=scheduler)
            return Disposable(dispose)

        return reactivex.create(subscribe)

    return operator
