"""Small synchronous Rx building blocks for the agent runtime (private).

``reactivex.just`` / ``empty`` / ``throw`` / ``from_callable`` without a scheduler schedule their
emission on the current thread's trampoline: inside a running trampoline (a blocking model stream
emitting from within one) that emission waits until the whole stream has ended (ARCHITECTURE §3,
trap 3). These helpers emit synchronously in ``subscribe`` instead, so a partial event reaches the
subscriber the moment the model produced it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable, SingleAssignmentDisposable

__all__ = ["call_now", "emit_now", "fail_now", "nothing_now", "on_dispose", "then_now"]

T = TypeVar("T")


def emit_now(value: T) -> reactivex.Observable[T]:
    """One item, then completion, both delivered during ``subscribe``."""

    def subscribe(observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None) -> Disposable:
        observer.on_next(value)
        observer.on_completed()
        return Disposable()

    return reactivex.create(subscribe)


def nothing_now() -> reactivex.Observable[T]:
    """Completion without items, delivered during ``subscribe``."""

    def subscribe(observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None) -> Disposable:
        observer.on_completed()
        return Disposable()

    return reactivex.create(subscribe)


def fail_now(error: Exception) -> reactivex.Observable[T]:
    """``on_error(error)``, delivered during ``subscribe``."""

    def subscribe(observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None) -> Disposable:
        observer.on_error(error)
        return Disposable()

    return reactivex.create(subscribe)


def call_now(supplier: Callable[[], T]) -> reactivex.Observable[T]:
    """Call ``supplier`` during ``subscribe`` (once per subscription); emit its value or its exception."""

    def subscribe(observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None) -> Disposable:
        try:
            value = supplier()
        except Exception as exc:
            observer.on_error(exc)
        else:
            observer.on_next(value)
            observer.on_completed()
        return Disposable()

    return reactivex.create(subscribe)


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
        first_subscription = SingleAssignmentDisposable()
        second_subscription = SingleAssignmentDisposable()
        state = {"disposed": False}

        def on_completed() -> None:
            if state["disposed"]:
                return
            try:
                follow = second()
            except Exception as exc:
                observer.on_error(exc)
                return
            second_subscription.disposable = follow.subscribe(
                observer.on_next, observer.on_error, observer.on_completed, scheduler=scheduler
            )

        # ``first`` may complete (and ``second`` start) before this assignment: separate slots.
        first_subscription.disposable = first.subscribe(
            observer.on_next, observer.on_error, on_completed, scheduler=scheduler
        )

        def dispose() -> None:
            state["disposed"] = True
            first_subscription.dispose()
            second_subscription.dispose()

        return Disposable(dispose)

    return reactivex.create(subscribe)


def on_dispose(source: reactivex.Observable[T], action: Callable[[], None]) -> reactivex.Observable[T]:
    """``source``, calling ``action`` when the subscriber disposes (before disposing ``source``).

    Not called on completion or error: only for an early dispose.
    """

    def subscribe(
        observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None
    ) -> rx_abc.DisposableBase:
        subscription = SingleAssignmentDisposable()

        def dispose() -> None:
            try:
                action()
            finally:
                subscription.dispose()

        subscription.disposable = source.subscribe(observer, scheduler=scheduler)
        return Disposable(dispose)

    return reactivex.create(subscribe)
