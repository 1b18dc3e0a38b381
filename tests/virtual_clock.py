"""Schedulers for tests: a ``TestScheduler`` that tells when a timer was scheduled (retry tests in
virtual time), and an immediate scheduler that counts what is scheduled on it (the runtime's
plumbing must never use one).

The retry operator schedules its backoff from whichever thread saw the failure (the test's own
with an immediate I/O scheduler, the asyncio transport's loop otherwise): ``wait_timers`` is the
latch a test waits on before it advances the clock.
"""

from __future__ import annotations

import threading
from typing import Any

from reactivex import abc as rx_abc
from reactivex.scheduler import ImmediateScheduler
from reactivex.testing import TestScheduler

TIMEOUT = 5.0


class VirtualClock(TestScheduler):
    """A TestScheduler that counts the timers scheduled on it and lets a test wait for them."""

    def __init__(self) -> None:
        super().__init__()
        self._scheduled = threading.Condition()
        self.timers = 0

    def schedule_absolute(self, duetime: Any, action: Any, state: Any = None) -> rx_abc.DisposableBase:
        disposable = super().schedule_absolute(duetime, action, state)
        with self._scheduled:
            self.timers += 1
            self._scheduled.notify_all()
        return disposable

    def wait_timers(self, count: int, timeout: float = TIMEOUT) -> bool:
        """Wait until ``count`` timers in all were scheduled (``False`` after ``timeout`` seconds)."""
        with self._scheduled:
            return self._scheduled.wait_for(lambda: self.timers >= count, timeout)


class CountingScheduler(ImmediateScheduler):
    """Runs what is scheduled at once, on the calling thread, and counts it."""

    def __init__(self) -> None:
        super().__init__()
        self.scheduled = 0

    def schedule(self, action: Any, state: Any = None) -> rx_abc.DisposableBase:
        self.scheduled += 1
        return super().schedule(action, state)
