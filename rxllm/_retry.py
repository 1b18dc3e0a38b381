"""Retry before the first item: a pure policy and the Rx operator that applies it.

The seed's rule: before the first emitted item nothing has reached the user, so a connection
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
from typing import Any, Literal, TypeVar

import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable, SerialDisposable, SingleAssignmentDisposable
from reactivex.scheduler import TimeoutScheduler

from ._errors import ConfigurationError, RxLlmError

__all__ = ["RetryPolicy", "retry_before_first_item"]

_log = logging.getLogger("rxllm.retry")
_T = TypeVar("_T")
_random = random.Random()  # the default jitter source (a seeded one can be passed as rng=)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When to retry a failed attempt, and after how long. Pure: no clock, no I/O.

    The default makes at most 3 attempts. After failed attempt ``n`` the backoff is
    ``base_delay * 2**n`` (0.4 s, then 0.8 s: the seed's ``200 ms << n``), capped at
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
    subscription, so a ``defer``-built source starts from scratch.

    Args:
        source: a cold Observable (each subscription is one attempt).
        policy: decides whether and when to retry.
        scheduler: runs the backoff timers (default: reactivex's ``TimeoutScheduler``).

    Returns:
        An Observable: subscribing starts attempt 1; disposing cancels the attempt in flight
        or the pending timer.
    """
    timers = scheduler or TimeoutScheduler.singleton()

    def subscribe(
        observer: rx_abc.ObserverBase[_T], subscribe_scheduler: rx_abc.SchedulerBase | None = None
    ) -> rx_abc.DisposableBase:
        serial = SerialDisposable()
        lock = threading.Lock()
        context = contextvars.copy_context()  # retries start in the subscriber's context, not the timer's
        state = {"attempt": 0, "emitted": False, "disposed": False}

        def start(*_: Any) -> None:
            with lock:
                if state["disposed"]:
                    return
                state["attempt"] += 1
                slot = SingleAssignmentDisposable()
                serial.disposable = slot
            slot.disposable = source.subscribe(on_next, on_error, on_completed, scheduler=subscribe_scheduler)

        def on_next(value: _T) -> None:
            state["emitted"] = True
            observer.on_next(value)

        def on_error(error: Exception) -> None:
            attempt = int(state["attempt"])
            delay = None if state["emitted"] else policy.delay_for(error, attempt)
            if delay is None:
                observer.on_error(error)
                return
            _log.warning("attempt %d failed before the first item (%s); retrying in %.3fs", attempt, error, delay)
            with lock:
                if state["disposed"]:
                    return
                serial.disposable = timers.schedule_relative(delay, lambda *_: context.copy().run(start))

        def on_completed() -> None:
            observer.on_completed()

        def dispose() -> None:
            with lock:
                state["disposed"] = True
            serial.dispose()

        start()
        return Disposable(dispose)

    return reactivex.create(subscribe)

