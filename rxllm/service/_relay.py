"""``BoundedRelay``: one observer, many producing threads, a bounded queue, never two signals at once.

The queue-drain pattern (RxJava's serialized emitter, bounded): a producer whose signal finds no
delivery in progress delivers it itself, on its own thread, and then keeps delivering whatever
other threads queued meanwhile. A producer whose signal finds a delivery in progress (another
thread is inside the subscriber's ``on_next``) queues it and returns at once. So:

* signals reach the observer one at a time, in the order they were offered (Rx grammar);
* without contention nothing is queued: a synchronous subscriber called on the model's thread
  slows the model's reads down to TCP, the natural backpressure of a blocking stream;
* the queue only holds signals offered while the subscriber is busy on another thread, and holds
  at most ``capacity`` of them: one more fails the stream with :class:`~rxllm.BufferOverflowError`
  (delivered as soon as the busy ``on_next`` returns, ahead of the queued signals, which are
  discarded with the failed stream) and calls ``on_failure`` so the producers stop. Never a
  silent drop, never an unbounded queue.

Terminal signals are always accepted (they do not count against the capacity); after one, or
after :meth:`BoundedRelay.cancel`, every further signal is ignored.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from reactivex import abc as rx_abc

from .._core.errors import BufferOverflowError, ConfigurationError

__all__ = ["BoundedRelay", "check_positive_int"]

_log = logging.getLogger("rxllm.service")

T = TypeVar("T")

_NEXT = 0
_ERROR = 1
_COMPLETED = 2


def _nothing() -> None:
    return None


def check_positive_int(size: int, what: str) -> int:
    """``size`` if it is an int >= 1.

    Raises:
        ConfigurationError: otherwise.
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ConfigurationError(f"{what} must be an int >= 1, got {size!r}")
    return size


class BoundedRelay(Generic[T]):
    """Serializes ``on_next`` / ``on_error`` / ``on_completed`` from any thread to ``observer``.

    Args:
        observer: the downstream observer.
        capacity: how many signals may wait while the observer is busy on another thread.
        on_failure: called once (on the offering thread) when the queue overflows, or when the
            observer raised from a callback; it should stop every producer.
    """

    __slots__ = ("_cancelled", "_capacity", "_closed", "_draining", "_lock", "_observer", "_on_failure",
                 "_overflow", "_queue")

    def __init__(self, observer: rx_abc.ObserverBase[T], capacity: int, on_failure: Callable[[], None]) -> None:
        self._observer = observer
        self._capacity = capacity
        self._on_failure = on_failure
        self._lock = threading.Lock()
        self._queue: deque[tuple[int, Any]] = deque()
        self._draining = False
        self._closed = False  # no further signal is accepted
        self._cancelled = False  # nothing further is delivered
        self._overflow: BufferOverflowError | None = None

    def on_next(self, value: T) -> None:
        """Offer an item."""
        lock = self._lock
        with lock:
            if self._closed:
                return
            if self._draining:
                if len(self._queue) < self._capacity:
                    self._queue.append((_NEXT, value))
                    return
                self._overflow_locked()
                overflowed = True
            else:
                self._draining = True
                overflowed = False
        if overflowed:
            self._on_failure()  # the thread inside on_next delivers the error as soon as it returns
            return
        # Uncontended (the common case): delivered here, on this thread, as _drain would.
        try:
            self._observer.on_next(value)
        except BaseException:
            self._raised()
            raise
        with lock:
            if self._cancelled or (self._overflow is None and not self._queue):
                self._draining = False
                return
        self._drain_queued()

    def on_error(self, error: Exception) -> None:
        """Offer the error; nothing after it is accepted."""
        self._offer(_ERROR, error)

    def on_completed(self) -> None:
        """Offer completion; nothing after it is accepted."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._draining:
                self._queue.append((_COMPLETED, None))
                return
            self._draining = True
        # Uncontended (the common case): delivered here, on this thread, as _drain would.
        try:
            self._observer.on_completed()
        except BaseException:
            self._raised()
            raise
        self._drain_queued()

    @property
    def closed(self) -> bool:
        """Whether a terminal signal was accepted, the buffer overflowed, or the relay was cancelled."""
        return self._closed

    def cancel(self) -> None:
        """Deliver nothing more (a delivery in progress on another thread finishes); drop the queue."""
        with self._lock:
            self._closed = True
            self._cancelled = True
            self._overflow = None
            self._queue.clear()

    def drop_on_failure(self) -> None:
        """The producers were stopped for good: ``on_failure`` is not called any more (it would do
        nothing), and the relay holds no reference back to what stops them."""
        self._on_failure = _nothing

    def _offer(self, kind: int, value: Any) -> None:
        """A terminal signal: always accepted (it does not count against the capacity), once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._draining:
                self._queue.append((kind, value))
                return
            self._draining = True
        self._drain(kind, value)

    def _overflow_locked(self) -> None:
        """Under the lock: an item found the queue full while another thread delivers; that thread
        delivers the error as soon as its ``on_next`` returns, ahead of the queued signals (dropped)."""
        self._closed = True
        self._queue.clear()
        self._overflow = BufferOverflowError(
            f"the subscriber fell more than {self._capacity} events behind (it blocked, or was slower than "
            "the stream on another thread); rather than drop events silently, the stream fails. Do not block "
            "in on_next, or raise the buffer size"
        )

    def _raised(self) -> None:
        """The subscriber raised from a callback: nothing more is delivered, the producers stop."""
        with self._lock:
            self._draining = False
            self._closed = True
            self._cancelled = True
            self._queue.clear()
        _log.error("the subscriber raised from a callback; the interaction is cancelled", exc_info=True)
        self._on_failure()

    def _drain(self, kind: int, value: Any) -> None:
        try:
            self._deliver(kind, value)
        except BaseException:
            self._raised()
            raise
        self._drain_queued()

    def _drain_queued(self) -> None:
        """After a delivery, while holding the drain: deliver what other threads queued meanwhile."""
        while True:
            with self._lock:
                if self._cancelled:
                    self._draining = False
                    return
                if self._overflow is not None:
                    kind, value = _ERROR, self._overflow
                    self._overflow = None
                    self._cancelled = True  # the error is the last signal delivered
                elif self._queue:
                    kind, value = self._queue.popleft()
                else:
                    self._draining = False
                    return
            try:
                self._deliver(kind, value)
            except BaseException:
                self._raised()
                raise

    def _deliver(self, kind: int, value: Any) -> None:
        if kind == _NEXT:
            self._observer.on_next(value)
        elif kind == _ERROR:
            self._observer.on_error(value)
        else:
            self._observer.on_completed()
