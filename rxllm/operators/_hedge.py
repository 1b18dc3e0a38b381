"""``hedge``: a backup call when the first is slow to start; the first to produce an item wins."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable, SerialDisposable, SingleAssignmentDisposable
from reactivex.scheduler import TimeoutScheduler

from .._core.errors import ConfigurationError

__all__ = ["hedge"]

_T = TypeVar("_T")


def hedge(
    delay: float,
    *factories: Callable[[], reactivex.Observable[_T]],
    scheduler: rx_abc.SchedulerBase | None = None,
) -> Callable[[reactivex.Observable[_T]], reactivex.Observable[_T]]:
    """Start the next call if none has produced an item after ``delay``; the first to produce one wins.

    The source is call 0. Every ``delay`` seconds without an item, the next factory is called
    and subscribed (calls run side by side). The first call to emit an item (or to complete)
    wins: the others are disposed at once, so their connections close, and from then on only
    the winner's items, error and completion reach the subscriber. A call that fails before
    there is a winner is dropped and the next call starts at once; when every call has failed,
    the last error is emitted.

    Marble (``a``/``x`` the first items of call 0 and call 1; ``delay`` = 4 dashes)::

        source (call 0):    ----------a--b--|
        factory (call 1):       --x--y--|          started at 4, wins at 6
        hedge(4, factory):  ------x--y--|          call 0 disposed at 6

    Args:
        delay: seconds to wait for a first item before starting the next call (finite, ``>= 0``).
        *factories: the next calls, in order (e.g. ``lambda: backup.generate_content(request, stream=True)``).
        scheduler: runs the timers (a ``TestScheduler`` for virtual time; default reactivex's
            ``TimeoutScheduler``). Items are never moved onto it.

    Returns:
        An operator for ``.pipe``: subscribing starts call 0 and the first timer; disposing
        disposes every running call and the timer.

    >>> from reactivex.testing import TestScheduler
    >>> from rxllm import Chunk, LlmRequest
    >>> from rxllm.testing import ScriptedLlm, at_times, record_in_virtual_time, scripted_turn
    >>> clock = TestScheduler()
    >>> slow = ScriptedLlm([at_times(scripted_turn(Chunk(text_delta="slow")), [5.0, 5.0])], scheduler=clock)
    >>> fast = ScriptedLlm([at_times(scripted_turn(Chunk(text_delta="fast")), [0.5, 0.5])], scheduler=clock)
    >>> hedged = lambda: slow.generate_content(LlmRequest(), stream=True).pipe(
    ...     hedge(1.0, lambda: fast.generate_content(LlmRequest(), stream=True), scheduler=clock))
    >>> [(t, n.value.text()) for t, n in record_in_virtual_time(hedged, clock) if n.kind == "N"]
    [(1.5, 'fast'), (1.5, 'fast')]
    >>> slow.calls[0].disposed_at
    1.5
    """
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not math.isfinite(delay) or delay < 0:
        raise ConfigurationError(f"hedge delay must be a finite number of seconds >= 0, got {delay!r}")

    def operator(source: reactivex.Observable[_T]) -> reactivex.Observable[_T]:
        def subscribe(
            observer: rx_abc.ObserverBase[_T], subscribe_scheduler: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            race = _Race(observer, [lambda: source, *factories], delay, scheduler or TimeoutScheduler.singleton())
            race.launch()
            return Disposable(race.dispose)

        return reactivex.create(subscribe)

    return operator


class _Race:
    """One subscription's calls, timer and winner."""

    def __init__(
        self,
        observer: rx_abc.ObserverBase[Any],
        calls: list[Callable[[], reactivex.Observable[Any]]],
        delay: float,
        timers: rx_abc.SchedulerBase,
    ) -> None:
        self._observer = observer
        self._calls = calls
        self._delay = delay
        self._timers = timers
        self._lock = threading.Lock()
        self._timer = SerialDisposable()
        self._running: dict[int, SingleAssignmentDisposable] = {}
        self._next = 0
        self._winner: int | None = None
        self._done = False

    def launch(self, *_: Any) -> None:
        with self._lock:
            if self._done or self._winner is not None or self._next >= len(self._calls):
                return
            index = self._next
            self._next += 1
            slot = SingleAssignmentDisposable()
            self._running[index] = slot
            if self._next < len(self._calls):
                self._timer.disposable = self._timers.schedule_relative(self._delay, self.launch)
        try:
            observable = self._calls[index]()
        except Exception as exc:  # a factory's failure counts as that call failing
            self._on_error(index, exc)
            return
        slot.disposable = observable.subscribe(
            lambda value: self._on_next(index, value),
            lambda error: self._on_error(index, error),
            lambda: self._on_completed(index),
        )

    def _win(self, index: int) -> bool:
        """Make ``index`` the winner if there is none yet; dispose the others. False if it lost."""
        with self._lock:
            if self._done or (self._winner is not None and self._winner != index):
                return False
            if self._winner == index:
                return True
            self._winner = index
            losers = [slot for i, slot in self._running.items() if i != index]
            self._running = {index: self._running[index]}
        self._timer.dispose()
        for slot in losers:  # on this thread: their connections close now
            slot.dispose()
        return True

    def _on_next(self, index: int, value: Any) -> None:
        if self._win(index):
            self._observer.on_next(value)

    def _on_completed(self, index: int) -> None:
        if self._win(index):
            with self._lock:
                self._done = True
            self._observer.on_completed()

    def _on_error(self, index: int, error: Exception) -> None:
        with self._lock:
            if self._done or (self._winner is not None and self._winner != index):
                return
            self._running.pop(index, None)
            if self._winner is None and self._next < len(self._calls):
                start_next = True  # a failed call is replaced at once
            elif self._winner is None and self._running:
                return  # others are still running: one of them may win
            else:
                start_next = False
                self._done = True
        if start_next:
            self.launch()
            return
        self._timer.dispose()
        self._observer.on_error(error)

    def dispose(self) -> None:
        with self._lock:
            self._done = True
            running = list(self._running.values())
        self._timer.dispose()
        for slot in running:
            slot.dispose()
