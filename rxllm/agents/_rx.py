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
from reactivex.disposable import Disposable

__all__ = ["call_now", "emit_now", "fail_now", "nothing_now"]

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
