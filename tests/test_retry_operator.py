"""``retry_before_first_item`` as one object per subscription (an open stream keeps
its retry state for its whole life, so the state is one slotted object, not closures and disposables):
the attempts, the backoff timer and disposal, in virtual time."""

from __future__ import annotations

from typing import Any

import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable
from reactivex.scheduler import ImmediateScheduler
from reactivex.testing import TestScheduler

from rxllm import HttpStatusError, RetryPolicy, TransportError, retry_before_first_item


class _Source:
    """A cold source whose n-th subscription does what ``script[n]`` says: "fail" (synchronously),
    "fail-later" (when ``fail_pending()`` is called), "hold" (emits nothing, never ends) or a value."""

    def __init__(self, clock: TestScheduler | None, script: list[str]) -> None:
        self.clock = clock
        self.script = script
        self.subscribed_at: list[float] = []
        self.disposed: list[int] = []
        self.pending: list[rx_abc.ObserverBase[str]] = []

    def observable(self) -> reactivex.Observable[str]:
        def subscribe(observer: rx_abc.ObserverBase[str], _: Any = None) -> rx_abc.DisposableBase:
            number = len(self.subscribed_at)
            self.subscribed_at.append(self.clock.to_seconds(self.clock.clock) if self.clock is not None else 0.0)
            step = self.script[number]
            if step == "fail":
                observer.on_error(TransportError("connection reset"))
            elif step == "fail-later":
                self.pending.append(observer)
            elif step != "hold":
                observer.on_next(step)
                observer.on_completed()
            return Disposable(lambda: self.disposed.append(number))

        return reactivex.create(subscribe)

    def fail_pending(self, error: Exception) -> None:
        self.pending.pop().on_error(error)


def test_a_policy_of_one_attempt_adds_no_layer() -> None:
    source = reactivex.of(1)
    assert retry_before_first_item(source, RetryPolicy.never()) is source
    assert retry_before_first_item(source, RetryPolicy(max_attempts=2)) is not source


def test_synchronous_failures_are_retried_on_the_backoff_schedule_until_an_item() -> None:
    clock = TestScheduler()
    source = _Source(clock, ["fail", "fail", "answer"])
    items: list[str] = []
    completed: list[bool] = []
    retry_before_first_item(source.observable(), RetryPolicy(jitter="none"), clock).subscribe(
        items.append, on_completed=lambda: completed.append(True)
    )
    clock.advance_to(10.0)
    assert source.subscribed_at == [0.0, 0.4, 1.2]  # backoff 0.2 * 2**n: 0.4, then 0.8
    assert items == ["answer"] and completed == [True]


def test_an_error_after_the_last_attempt_or_a_non_retryable_one_reaches_the_subscriber() -> None:
    clock = TestScheduler()
    source = _Source(clock, ["fail", "fail", "fail"])
    errors: list[Exception] = []
    retry_before_first_item(source.observable(), RetryPolicy(jitter="none"), clock).subscribe(
        on_error=errors.append
    )
    clock.advance_to(10.0)
    assert len(source.subscribed_at) == 3 and [type(e) for e in errors] == [TransportError]

    later = _Source(clock, ["fail-later"])
    retry_before_first_item(later.observable(), RetryPolicy(), clock).subscribe(on_error=errors.append)
    later.fail_pending(HttpStatusError(400))
    assert isinstance(errors[-1], HttpStatusError) and len(later.subscribed_at) == 1


def test_disposing_during_the_backoff_cancels_the_timer() -> None:
    clock = TestScheduler()
    source = _Source(clock, ["fail", "answer"])
    items: list[str] = []
    subscription = retry_before_first_item(source.observable(), RetryPolicy(jitter="none"), clock).subscribe(
        items.append
    )
    clock.advance_to(0.2)
    subscription.dispose()
    clock.advance_to(10.0)
    assert source.subscribed_at == [0.0] and items == []


def test_disposing_disposes_the_attempt_in_flight_and_a_failed_attempt_is_released() -> None:
    clock = TestScheduler()
    source = _Source(clock, ["fail-later", "hold"])
    subscription = retry_before_first_item(source.observable(), RetryPolicy(jitter="none"), clock).subscribe()
    source.fail_pending(TransportError("reset"))  # attempt 0 fails after its subscribe returned
    assert 0 in source.disposed  # the failed attempt's subscription is let go when the timer takes over
    clock.advance_to(1.0)
    assert len(source.subscribed_at) == 2 and 1 not in source.disposed
    subscription.dispose()
    assert 1 in source.disposed
    subscription.dispose()  # idempotent
    assert source.disposed.count(1) == 1


def test_a_timer_that_runs_synchronously_retries_without_deadlock() -> None:
    # ImmediateScheduler runs a zero delay at once, inside the failing attempt's on_error.
    source = _Source(None, ["fail", "fail", "answer"])
    items: list[str] = []
    policy = RetryPolicy(base_delay=0.0, jitter="none")
    retry_before_first_item(source.observable(), policy, ImmediateScheduler()).subscribe(items.append)
    assert items == ["answer"] and len(source.subscribed_at) == 3


def test_an_item_ends_the_retrying_even_if_the_stream_fails_later() -> None:
    clock = TestScheduler()
    observers: list[rx_abc.ObserverBase[str]] = []

    def partial_then_fail(observer: rx_abc.ObserverBase[str], _: Any = None) -> rx_abc.DisposableBase:
        observers.append(observer)
        observer.on_next("partial")
        return Disposable()

    errors: list[Exception] = []
    items: list[str] = []
    retry_before_first_item(reactivex.create(partial_then_fail), RetryPolicy(), clock).subscribe(
        items.append, errors.append
    )
    observers[0].on_error(TransportError("reset"))
    clock.advance_to(10.0)
    assert items == ["partial"] and len(errors) == 1 and len(observers) == 1
