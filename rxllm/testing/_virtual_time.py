"""Run a stream on a ``TestScheduler`` and get back what happened, and when."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import reactivex
from reactivex import abc as rx_abc
from reactivex.notification import Notification, OnCompleted, OnError, OnNext
from reactivex.scheduler import VirtualTimeScheduler
from reactivex.testing import TestScheduler

from .._core.errors import ConfigurationError

__all__ = ["record_in_virtual_time"]

_T = TypeVar("_T")


def record_in_virtual_time(
    create: Callable[[], reactivex.Observable[_T]],
    scheduler: TestScheduler,
    *,
    dispose_at: float | None = None,
    until: float | None = None,
) -> list[tuple[float, Notification[_T]]]:
    """Subscribe to ``create()`` now, run the virtual clock, and return the ``(time, notification)`` records.

    Times are seconds after the subscription (rounded to the nanosecond, so ``0.1 + 0.25`` reads
    ``0.35``). Notifications are reactivex's: ``n.kind`` is ``"N"``, ``"E"`` or ``"C"``, with
    ``n.value`` or ``n.exception``. Everything that should run in virtual time (a
    :class:`~rxllm.testing.ScriptedLlm`, the operators' timers) must use the same ``scheduler``.

    Args:
        create: makes the Observable (called once, right away).
        scheduler: the test's clock.
        dispose_at: dispose the subscription this many seconds after subscribing (a cancellation).
        until: stop the clock this many seconds after subscribing (default: run until nothing is
            scheduled, which never ends if something schedules forever, such as ``interval``).

    >>> import reactivex
    >>> from reactivex import operators as ops
    >>> from reactivex.testing import TestScheduler
    >>> from rxllm.testing import record_in_virtual_time
    >>> clock = TestScheduler()
    >>> records = record_in_virtual_time(lambda: reactivex.timer(0.25, 0.1, scheduler=clock).pipe(ops.take(2)), clock)
    >>> [(t, n.kind) for t, n in records]
    [(0.25, 'N'), (0.35, 'N'), (0.35, 'C')]
    >>> [(t, n.value) for t, n in record_in_virtual_time(lambda: reactivex.interval(1.0, scheduler=clock), clock,
    ...                                                  dispose_at=2.5)]
    [(1.0, 0), (2.0, 1)]
    """
    if (dispose_at is not None and dispose_at < 0) or (until is not None and until < 0):
        raise ConfigurationError("dispose_at and until are offsets from the subscription, >= 0")
    start = float(scheduler.clock)
    records: list[tuple[float, Notification[_T]]] = []

    def at() -> float:
        return round(float(scheduler.clock) - start, 9)

    def on_next(value: _T) -> None:
        records.append((at(), OnNext(value)))

    def on_error(error: Exception) -> None:
        records.append((at(), OnError(error)))

    def on_completed() -> None:
        records.append((at(), OnCompleted()))

    subscription = create().subscribe(on_next, on_error, on_completed)
    if dispose_at is not None:

        def dispose(_: rx_abc.SchedulerBase, __: Any = None) -> None:
            subscription.dispose()

        scheduler.schedule_absolute(start + dispose_at, dispose)
    if until is not None:
        scheduler.advance_to(start + until)
    else:  # the plain virtual-time run (TestScheduler.start() would also play its 100/200/1000 script)
        VirtualTimeScheduler.start(scheduler)
    return records
