"""A source the Rx plumbing tests drive by hand, shared by the top-level and the agents' tests."""

from __future__ import annotations

from typing import Any

import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable


class Held(reactivex.Observable[Any]):
    """A source the test drives (from this or another thread); counts its subscriptions and disposals."""

    def __init__(self) -> None:
        super().__init__()
        self.observers: list[rx_abc.ObserverBase[Any]] = []
        self.disposed = 0

    def _subscribe_core(
        self, observer: rx_abc.ObserverBase[Any], scheduler: rx_abc.SchedulerBase | None = None
    ) -> rx_abc.DisposableBase:
        self.observers.append(observer)

        def dispose() -> None:
            self.disposed += 1

        return Disposable(dispose)

    def emit(self, *signals: Any) -> None:
        """Items; ``"|"`` completes, an exception fails."""
        observer = self.observers[-1]
        for signal in signals:
            if signal == "|":
                observer.on_completed()
            elif isinstance(signal, Exception):
                observer.on_error(signal)
            else:
                observer.on_next(signal)
