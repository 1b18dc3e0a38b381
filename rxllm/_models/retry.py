"""Retry before the first item: a pure policy and the Rx operator that applies it.

The rule (ADK Java's streaming model layer): before the first emitted item nothing has reached the user, so a connection
failure, a 408/409/429/5xx or a retryable in-band error may be retried with backoff; after it,
never (a retry would repeat or splice the answer). reactivex has no ``retry_when`` and
``ops.retry(n)`` counts subscriptions, so the operator is written here. Its timers run on an
injected scheduler (a ``TestScheduler`` drives them in virtual time), never on the I/O pool.
"""

from __future__ import annotations

import contextvars
import logging
import random
import threading
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

import reactivex
from reactivex import abc as rx_abc
from reactivex.scheduler import TimeoutScheduler

from .._core.errors import ConfigurationError, RxLlmError

__all__ = ["RetryPolicy", "never_retries", "retry_before_first_item", "subscribe_with_retries"]

_log = logging.getLogger("rxllm.retry")
_T = TypeVar("_T")
_random = random.Random()  # the default jitter source (a seeded one can be passed as rng=)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When to retry a failed attempt, and after how long. Pure: no clock, no I/O.

    The default makes at most 3 attempts. After failed attempt ``n`` the backoff is
    ``base_delay * 2**n`` (0.4 s, then 0.8 s: ``200 ms << n`` as an RxJava ``retryWhen`` backoff writes it), capped at
    ``max_delay``, and with ``jitter="full"`` (the default) the wait is drawn uniformly from
    ``[0, backoff)`` ("full jitter"), so clients that failed together do not retry together;
    ``jitter="none"`` waits exactly the backoff. ``rng`` is the random source (pass a seeded
    ``random.Random`` for repeatable delays, e.g. under a ``TestScheduler``). A ``Retry-After``
    the provider sent replaces the backoff (not jittered), capped at ``max_retry_after``. Only
    errors marked ``retryable`` (:class:`~rxllm.TransportError` such as a refused connection or a
    connect timeout, :class:`~rxllm.HttpStatusError` 408/409/429/5xx, retryable
    :class:`~rxllm.ProviderError`) are retried.

    >>> import random
    >>> from rxllm import HttpStatusError
    >>> exact = RetryPolicy(jitter="none")
    >>> [exact.delay_for(HttpStatusError(503), n) for n in (1, 2, 3)]
    [0.4, 0.8, None]
    >>> jittered = RetryPolicy(rng=random.Random(7))
    >>> [round(jittered.delay_for(HttpStatusError(503), n), 3) for n in (1, 2)]
    [0.13, 0.121]
    >>> exact.delay_for(HttpStatusError(429, retry_after=2.0), 1), exact.delay_for(HttpStatusError(400), 1)
    (2.0, None)
    """

    max_attempts: int = 3
    base_delay: float = 0.2
    max_retry_after: float = 60.0
    max_delay: float = 30.0
    jitter: Literal["full", "none"] = "full"
    rng: random.Random | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigurationError("RetryPolicy.max_attempts must be at least 1")
        if self.base_delay < 0 or self.max_retry_after < 0 or self.max_delay < 0:
            raise ConfigurationError("RetryPolicy delays must not be negative")
        if self.jitter not in ("full", "none"):
            raise ConfigurationError(f"RetryPolicy.jitter must be 'full' or 'none', got {self.jitter!r}")

    @classmethod
    def never(cls) -> RetryPolicy:
        """A policy that makes exactly one attempt."""
        return cls(max_attempts=1)

    def delay_for(self, error: BaseException, attempt: int) -> float | None:
        """Seconds to wait before the next attempt, or ``None`` to give up.

        Args:
            error: why attempt ``attempt`` failed.
            attempt: the number of the attempt that failed, from 1.
        """
        if attempt >= self.max_attempts or not (isinstance(error, RxLlmError) and error.retryable):
            return None
        retry_after: object = getattr(error, "retry_after", None)
        if isinstance(retry_after, int | float):
            return min(max(float(retry_after), 0.0), self.max_retry_after)
        backoff = min(self.base_delay * (1 << attempt), self.max_delay)
        if self.jitter == "none":
            return backoff
        return (self.rng or _random).uniform(0.0, backoff)


def retry_before_first_item(
    source: reactivex.Observable[_T],
    policy: RetryPolicy,
    scheduler: rx_abc.SchedulerBase | None = None,
) -> reactivex.Observable[_T]:
    """Resubscribe to the cold ``source`` after a failure, as ``policy`` says, until it emits.

    Once ``source`` has emitted an item, its errors pass straight through. Each retry is a new
    subscription, so a ``defer``-built source starts from scratch. A policy that makes one attempt
    (``RetryPolicy.never()``) can never retry: ``source`` itself is returned, with no layer.

    Args:
        source: a cold Observable (each subscription is one attempt).
        policy: decides whether and when to retry.
        scheduler: runs the backoff timers (default: reactivex's ``TimeoutScheduler``).

    Returns:
        An Observable: subscribing starts attempt 1; disposing cancels the attempt in flight
        or the pending timer.
    """
    if never_retries(policy):
        return source
    return _RetryBeforeFirstItem(source, policy, scheduler or TimeoutScheduler.singleton())


def never_retries(policy: RetryPolicy) -> bool:
    """Whether ``policy`` makes exactly one attempt (a :class:`RetryPolicy` of ``max_attempts=1``,
    whose ``delay_for`` always says "give up"; a subclass may decide otherwise)."""
    return type(policy) is RetryPolicy and policy.max_attempts == 1


def subscribe_with_retries(
    source: reactivex.Observable[_T],
    policy: RetryPolicy,
    scheduler: rx_abc.SchedulerBase | None,
    observer: rx_abc.ObserverBase[_T],
    subscribe_scheduler: rx_abc.SchedulerBase | None = None,
) -> rx_abc.DisposableBase:
    """Subscribe ``observer`` to ``retry_before_first_item(source, policy, scheduler)`` from inside
    another Observable's subscription (no layer of its own): attempt 1 starts now.

    Returns:
        What cancels the attempt in flight or the pending backoff timer.
    """
    attempts = _Attempts(source, policy, scheduler or TimeoutScheduler.singleton(), observer, subscribe_scheduler)
    attempts.start()
    return attempts


class _RetryBeforeFirstItem(reactivex.Observable[_T]):
    """The operator: each subscription is one :class:`_Attempts` (one object holds its whole state:
    an open stream keeps it for its lifetime, so it is kept small)."""

    def __init__(self, source: reactivex.Observable[_T], policy: RetryPolicy, timers: rx_abc.SchedulerBase) -> None:
        super().__init__()
        self._source = source
        self._policy = policy
        self._timers = timers

    def _subscribe_core(
        self, observer: rx_abc.ObserverBase[_T], scheduler: rx_abc.SchedulerBase | None = None
    ) -> rx_abc.DisposableBase:
        attempts = _Attempts(self._source, self._policy, self._timers, observer, scheduler)
        attempts.start()
        return attempts


class _Attempts(rx_abc.DisposableBase, Generic[_T]):
    """One subscription of :func:`retry_before_first_item`: the attempt in flight (or the pending
    backoff timer) and what decides the next one. Disposing cancels whichever is current."""

    __slots__ = ("_context", "_current", "_disposed", "_emitted", "_lock", "_number", "_observer", "_policy",
                 "_scheduler", "_source", "_timers")

    def __init__(
        self,
        source: reactivex.Observable[_T],
        policy: RetryPolicy,
        timers: rx_abc.SchedulerBase,
        observer: rx_abc.ObserverBase[_T],
        scheduler: rx_abc.SchedulerBase | None,
    ) -> None:
        self._source = source
        self._policy = policy
        self._timers = timers
        self._observer = observer
        self._scheduler = scheduler
        self._lock = threading.Lock()
        self._context = contextvars.copy_context()  # retries start in the subscriber's context, not the timer's
        self._current: rx_abc.DisposableBase | None = None  # the attempt's subscription, or the backoff timer
        self._number = 0  # attempts started
        self._emitted = False
        self._disposed = False

    def start(self, *_: Any) -> None:
        """Subscribe the next attempt (unless disposed)."""
        with self._lock:
            if self._disposed:
                return
            self._number += 1
            number = self._number
            previous, self._current = self._current, None
        if previous is not None:  # the backoff timer that fired
            previous.dispose()
        inner = self._source.subscribe(self._on_next, self._on_error, self._on_completed, scheduler=self._scheduler)
        with self._lock:
            # Disposed meanwhile, or the attempt already failed and its backoff timer is now current
            # (or a later attempt started): the attempt is over, let it go.
            keep = not self._disposed and self._number == number and self._current is None
            if keep:
                self._current = inner
        if not keep:
            inner.dispose()

    def _retry(self, _scheduler: rx_abc.SchedulerBase, _state: Any = None) -> None:
        self._context.copy().run(self.start)

    def _on_next(self, value: _T) -> None:
        self._emitted = True
        self._observer.on_next(value)

    def _on_error(self, error: Exception) -> None:
        number = self._number
        delay = None if self._emitted else self._policy.delay_for(error, number)
        if delay is None:
            self._observer.on_error(error)
            return
        _log.warning("attempt %d failed before the first item (%s); retrying in %.3fs", number, error, delay)
        if self._disposed:
            return
        timer = self._timers.schedule_relative(delay, self._retry)
        with self._lock:
            late = self._disposed or self._number != number  # disposed, or a synchronous timer already retried
            previous = None
            if not late:
                previous, self._current = self._current, timer
        if late:
            if self._disposed:
                timer.dispose()
        elif previous is not None:  # the failed attempt's subscription
            previous.dispose()

    def _on_completed(self) -> None:
        self._observer.on_completed()

    def dispose(self) -> None:
        """Cancel the attempt in flight or the pending timer; nothing more is started."""
        with self._lock:
            self._disposed = True
            current, self._current = self._current, None
        if current is not None:
            current.dispose()
