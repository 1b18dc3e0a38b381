"""Store I/O off the caller's thread (private): what every persistent store's Observables are built on.

Every store method returns a cold Observable built by :func:`call_off_thread`: subscribing
submits the work to the store's own executor and returns at once; the item (or the error) is
emitted from the executor's thread. Disposing before the work started cancels it; disposing
while it runs lets the call finish (a transaction is never cut in half by a dispose) and drops
its result.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TypeVar

import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable

from .._core.errors import RxLlmError, StoreError
from .aio import AwaitableObservable, awaitable

__all__ = ["call_off_thread"]

T = TypeVar("T")


def call_off_thread(
    executor: Executor, supplier: Callable[[], T | None], *, map_error: Callable[[Exception], RxLlmError]
) -> AwaitableObservable[T]:
    """Run ``supplier`` on ``executor`` per subscription; emit its value (nothing for None), then complete.

    An exception that is not already an :class:`~rxllm.RxLlmError` is passed through
    ``map_error`` (chained as its cause) before it reaches ``on_error``.
    """

    def subscribe(observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None) -> Disposable:
        disposed = threading.Event()

        def work() -> None:
            if disposed.is_set():
                return
            try:
                value = supplier()
            except RxLlmError as exc:
                if not disposed.is_set():
                    observer.on_error(exc)
                return
            except Exception as exc:
                mapped = map_error(exc)
                mapped.__cause__ = exc
                if not disposed.is_set():
                    observer.on_error(mapped)
                return
            if disposed.is_set():
                return
            if value is not None:
                observer.on_next(value)
            observer.on_completed()

        try:
            future = executor.submit(work)
        except RuntimeError as exc:  # the executor was shut down: the store is closed
            observer.on_error(StoreError(f"the store is closed: {exc}"))
            return Disposable()

        def dispose() -> None:
            disposed.set()
            future.cancel()

        return Disposable(dispose)

    return awaitable(reactivex.create(subscribe))
